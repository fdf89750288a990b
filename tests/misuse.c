/* misuse.c — the misuse suite: heap misuse of every kind, for every size category, each in a
 * child process, with the outcome expected of each allocator family.
 *
 * Outcomes: caught (the child ended abnormally: the allocator's report and abort, or a fault)
 * or missed (it ran to its end). The table says, per family — the Vam builds (and medius), the
 * PHK builds (phk*, tp, pow2, lf: no object headers nor boundary tags), glibc (`system`), and
 * the secure build (liblocus-secure.so) — C (caught), M (missed) or ? (either: the outcome
 * depends on layout or on what the misuse overwrote). A case expected caught and missed fails
 * the test: detection regressed. A case expected missed and caught is reported as an
 * improvement (update the table). Under a Locus library a caught case that aborted must also
 * have printed Locus's one-line report (or faulted). The last line gives the counts.
 *
 * Sizes: small 32 B, medium 300 B, large 6000 B (vam: boundary-tagged chunks), page 64 KiB
 * (a run of pages; secure: framed by canaries), huge 2 MiB (an own mapping); a few cases
 * also big, 256 KiB (a run of pages).
 *
 *   misuse            run every case
 *   misuse <case>...  run the named cases (still each in a child) */
#include "check.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

static volatile char sink;

/* ---- the C++ operators, looked up at run time (this is a C program): the preloaded
 * library's when it has them, else libstdc++'s over glibc's malloc ------------------------ */
static void *(*op_new)(size_t), *(*op_new_array)(size_t);
static void (*op_delete)(void *), (*op_delete_array)(void *), (*op_delete_sized)(void *, size_t);

static void cxx_load(void) {
  if (!dlsym(RTLD_DEFAULT, "_Znwm")) dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
  void *s[5] = {dlsym(RTLD_DEFAULT, "_Znwm"), dlsym(RTLD_DEFAULT, "_Znam"), dlsym(RTLD_DEFAULT, "_ZdlPv"),
                dlsym(RTLD_DEFAULT, "_ZdaPv"), dlsym(RTLD_DEFAULT, "_ZdlPvm")};
  memcpy(&op_new, &s[0], sizeof s[0]);
  memcpy(&op_new_array, &s[1], sizeof s[1]);
  memcpy(&op_delete, &s[2], sizeof s[2]);
  memcpy(&op_delete_array, &s[3], sizeof s[3]);
  memcpy(&op_delete_sized, &s[4], sizeof s[4]);
}
static void cxx_require(void) {
  if (!op_new || !op_new_array || !op_delete || !op_delete_array || !op_delete_sized) _exit(4);
}

/* ---- the misuse, by kind (each takes the object size) -------------------------------------- */

/* Neighbours on both sides, so the misused object is not alone in its block or area. */
static char *with_neighbours(size_t size, char **before, char **after) {
  *before = malloc(size);
  char *p = malloc(size);
  *after = malloc(size);
  if (!p || !*before || !*after) _exit(4);
  memset(p, 0x5A, size);
  return p;
}

/* The allocator's later work that may notice: more objects of the size, freed again (more
 * than the secure build's quarantine holds, so what was freed before is reused). */
static void churn_after(size_t size) {
  void *keep[64];
  for (int i = 0; i < 64; i++) keep[i] = malloc(size);
  for (int i = 0; i < 64; i++) free(keep[i]);
}

static void double_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  free(opaque_ptr(p));
  churn_after(size);
}

static void interior_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(opaque_ptr(p + 16));
  churn_after(size);
}

/* Writes `n` bytes just past the end (or, n < 0, before the start), then frees the object and
 * its neighbours and allocates the size again. */
/* Each byte overflowed is inverted, not set: a byte written with the value it already held
 * changes nothing (a canary byte equal to a fixed fill value made a case missed one run in
 * 256). */
static void overflow_by(size_t size, long n) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  volatile char *at = opaque_ptr(n >= 0 ? p + size : p + n);
  for (size_t i = 0; i < (size_t)(n >= 0 ? n : -n); i++) at[i] = (char)~at[i];
  free(a);
  free(p);
  free(b);
  churn_after(size);
}
static void overflow1(size_t size) { overflow_by(size, 1); }
static void overflow32(size_t size) { overflow_by(size, 32); }
static void overflow_1mib(size_t size) { overflow_by(size, 1 << 20); }
static void underflow1(size_t size) { overflow_by(size, -1); }
static void underflow32(size_t size) { overflow_by(size, -32); }
static void underflow_1mib(size_t size) { overflow_by(size, -(1L << 20)); }

/* Writes into an object after freeing it, then allocates the size again. */
static void write_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  memset(opaque_ptr(p), 0xEE, size < 64 ? size : 64);
  churn_after(size);
  free(a);
  free(b);
}

/* The word just before a freed object inverted, then one allocation of the size (no churn: a
 * program that goes on with one more object). The flagship reads the freed chunk's header at
 * that allocation; a quarantine that holds the freed object must not hide it. */
static void header_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  ((uintptr_t *)opaque_ptr(p))[-1] ^= ~(uintptr_t)0;
  char *q = malloc(size);
  if (!q) _exit(4);
  memset(q, 1, size);
  sink = q[size - 1];
}

static void read_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  sink = ((volatile char *)opaque_ptr(p))[size / 2];
  churn_after(size);
}

/* The same after a first object of the size came and went: glibc's mmap threshold has risen
 * to the size by then (its free of a mapped chunk raises it), so the second object is a heap
 * chunk, which stays readable. The secure build's freed big objects stay inaccessible. */
static void read_after_free_again(size_t size) {
  char *first = malloc(size);
  if (!first) _exit(4);
  memset(first, 1, size);
  free(first);
  read_after_free(size);
}

static void realloc_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  char *q = realloc(opaque_ptr(p), size * 2);
  if (q) memset(q, 1, size * 2);
  churn_after(size);
}

/* The same with the size it had: a realloc that would keep the object where it is. */
static void realloc_same_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  char *q = realloc(opaque_ptr(p), size);
  if (q) memset(q, 1, size);
  churn_after(size);
}

/* new[] of a type with a destructor puts the count in front of the array; a scalar delete of
 * the array pointer then frees an interior pointer. */
static void delete_array_as_scalar(size_t size) {
  cxx_require();
  char *raw = op_new_array(size + 8);
  *(size_t *)raw = size;
  op_delete(opaque_ptr(raw + 8));
  churn_after(size);
}

/* delete[] of a scalar new's object frees the pointer 8 bytes before it. */
static void delete_scalar_as_array(size_t size) {
  cxx_require();
  char *p = op_new(size);
  memset(p, 0, size);
  op_delete_array(opaque_ptr(p - 8));
  churn_after(size);
}

static void sized_delete_larger(size_t size) {
  cxx_require();
  char *p = op_new(size);
  op_delete_sized(p, size * 2);
  churn_after(size);
}

static void sized_delete_smaller(size_t size) {
  cxx_require();
  char *p = op_new(size);
  op_delete_sized(p, size / 2);
  churn_after(size);
}

/* Harmless where operator new is malloc (every allocator here): listed for completeness. */
static void new_then_free(size_t size) {
  cxx_require();
  free(op_new(size));
  churn_after(size);
}

/* malloc(0) gives an object of no usable bytes the program may count on: writes into it. */
static void zero_size_write(size_t n) {
  char *b = malloc(0), *p = malloc(0), *a = malloc(0);
  if (!p || !b || !a) _exit(4);
  memset(opaque_ptr(p), 0xEE, n);
  free(a);
  free(p);
  free(b);
  churn_after(0);
}

static char global_object[64];
static void free_stack(size_t size) { char buf[64]; (void)size; free(opaque_ptr(buf)); }
static void free_global(size_t size) { (void)size; free(opaque_ptr(global_object)); }
static void free_mmap(size_t size) {
  char *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) _exit(4);
  free(opaque_ptr(m + 4096));
}

/* ---- what only a hardened allocator catches ----------------------------------------------- */

/* A write after free of a freed object's first word, made after the object was reused once
 * (past any quarantine) and freed again, with a value that decodes to "end of list" under
 * glibc's address-only safe-linking: the list is cut short silently. Locus's links also carry
 * a random cookie, so the value decodes to garbage: the default build does not check it (a
 * later malloc may hand it out and the program fault: caught by chance), the secure build's
 * check rejects it. */
static void forged_link(size_t size) {
  char *keep[64], *p = malloc(size);
  if (!p) _exit(4);
  free(p);
  churn_after(size);           /* p leaves any quarantine and is reused, then freed again */
  for (int i = 0; i < 64; i++) keep[i] = malloc(size);
  for (int i = 0; i < 64; i++) free(keep[i]);
  for (int i = 0; i < 64; i++) keep[i] = malloc(size);
  char *victim = keep[10];
  free(victim);
  for (int i = 0; i < 40; i++) free(keep[20 + i]);   /* victim leaves any quarantine */
  *(volatile uintptr_t *)victim = (uintptr_t)victim >> 12;
  for (int i = 0; i < 64; i++) keep[20 + (i % 40)] = malloc(size);
}

/* Heap grooming: consecutive allocations at a constant distance let an attacker place an
 * object next to a victim. Caught (status 1) when the distances vary (a randomised order). */
static void predictable_order(size_t size) {
  char *p[32];
  for (int i = 0; i < 32; i++) if (!(p[i] = malloc(size))) _exit(4);
  for (int i = 2; i < 32; i++) if (p[i] - p[i - 1] != p[1] - p[0]) _exit(1);
}

/* A linear overflow off the last object of a 4 MiB segment (vam's unit of address space)
 * into the mapping that follows (mapped here, writable, as another mapping may be). The secure
 * build ends every segment with an inaccessible page. */
static void segment_end_overflow(size_t size) {
  for (int i = 0; i < 200000; i++) {
    char *p = malloc(size);
    if (!p) _exit(4);
    char *end = (char *)(((uintptr_t)p | ((4u << 20) - 1)) + 1);
    if (end - p >= (8 << 10)) continue;   /* in the segment's last block (secure: before the guard) */
    void *next = mmap(end, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (next != end) continue;
    memset(p, 0xEE, (size_t)(end - p) + 64);
    return;
  }
  /* no such object (not a segmented heap, e.g. glibc's): nothing to overflow, missed */
}

/* ---- copies past an object's bounds, big objects after free, young heaps --------------------- */

/* memcpy, memmove and memset called for real (through pointers the compiler cannot see
 * through, so no copy is inlined), with a source big enough for every case. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;
static void *(*volatile move_fn)(void *, const void *, size_t) = memmove;
static void *(*volatile set_fn)(void *, int, size_t) = memset;
static char copy_src[(2u << 20) + 64];

/* A copy into a live object that runs 32 bytes past its end, or starts 32 bytes before it;
 * the program goes on and never frees the object (nothing but the copy itself can notice). */
static void copy_overflow32(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  copy_fn(p, copy_src, size + 32);
  sink = p[0];
}
static void copy_underflow32(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  copy_fn(opaque_ptr(p - 32), copy_src, 64);
  sink = p[0];
}
static void move_overflow32(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  move_fn(p, copy_src, size + 32);
  sink = p[0];
}
static void set_overflow32(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  set_fn(p, 0, size + 32);
  sink = p[0];
}
/* The fortified entry point (what _FORTIFY_SOURCE calls when it cannot tell the size). */
static void copy_chk_overflow32(size_t size) {
  void *(*chk)(void *, const void *, size_t, size_t);
  void *f = dlsym(RTLD_DEFAULT, "__memcpy_chk");
  if (!f) _exit(4);
  memcpy(&chk, &f, sizeof f);
  char *b, *a, *p = with_neighbours(size, &b, &a);
  chk(p, copy_src, size + 32, (size_t)-1);
  sink = p[0];
}

/* A freed big object zeroed (as a program that clears a buffer it already gave back); no
 * more frees after it. */
static void zero_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  set_fn(opaque_ptr(p), 0, size);
}

/* One write 1 MiB past the end of an object, in a young heap, then the object's free. glibc's
 * young heap ends (its brk) well before that. */
static void write_1mib_past(size_t size) {
  char *p = malloc(size);
  if (!p) _exit(4);
  memset(p, 1, size);
  ((volatile char *)opaque_ptr(p + size))[1 << 20] = 1;
  free(p);
}

/* A free-list link forged to lead into another block of the size, encoded as the allocator
 * encodes links: read off a freed object whose successor the program knows (free y, then x:
 * x's link leads to y, once both left any quarantine). Only word 0 changes: canaries and free
 * markers are intact. The allocator then hands out z, a free object of another block, from
 * x's block (two owners for z's block's objects). Caught by a check that a link leads into
 * its own block. */
static void forged_link_block(size_t size) {
  enum { N = 512 };
  static char *o[N], *same[N];
  for (int i = 0; i < N; i++) if (!(o[i] = malloc(size))) _exit(4);
  uintptr_t page = (uintptr_t)o[N / 2] >> 12;
  int n = 0;
  for (int i = 0; i < N; i++) if ((uintptr_t)o[i] >> 12 == page) same[n++] = o[i];
  char *z = NULL;
  for (int i = 0; i < N && !z; i++) if ((uintptr_t)o[i] >> 12 != page) z = o[i];
  if (n < 42 || !z) _exit(4);
  char *x = same[0], *y = same[1];
  free(z);
  free(y);
  free(x);
  for (int i = 2; i < 42; i++) free(same[i]);   /* x, y and z leave any quarantine */
  uintptr_t key = *(volatile uintptr_t *)x ^ ((uintptr_t)x >> 12) ^ (uintptr_t)y;
  *(volatile uintptr_t *)x = (uintptr_t)z ^ ((uintptr_t)x >> 12) ^ key;
  for (int i = 0; i < 64; i++) if (!malloc(size)) _exit(4);
}

/* ---- the table ------------------------------------------------------------------------------ */

typedef struct misuse {
  const char *name;
  void (*fn)(size_t);
  size_t size;
  const char *expect;   /* vam, phk, glibc, secure: C caught, M missed, ? either */
} misuse_t;

#define SMALL 32
#define MEDIUM 300
#define LARGE 6000
#define PAGE (64u << 10)
#define HUGE (2u << 20)
#define BIG (256u << 10)   /* a run of pages, like PAGE, 4x bigger */

/* Measured on this round's builds, 13 runs each (tests/README.md has the counts). vam's
 * large-object header catches large overflows and underflows; vam-header's small headers catch
 * small overflows (hence ? for the Vam family there); a write after free of a large chunk
 * overwrites its bin links, and the allocator may fault on them. The secure build's own cases:
 * canaries (overflow1_small, overflow1_page, underflow1_huge), the quarantine
 * (write_after_free_small), keyed links (forged_link_*), random slot order
 * (predictable_order_small), guard pages (segment_end_overflow; the unused reserve of young
 * heaps: write_1mib_past_*), big objects made inaccessible on free (read_after_free_again_huge;
 * runs of 128 KiB or more sealed in the quarantine: zero_after_free_big), sized-delete
 * checks (sized_delete_*), checked copies (copy_*, move_*, set_*), keyed links that must lead
 * into their own block (forged_link_block_small). The copy cases (a copy 32 bytes past the end
 * or before the start of a live object) and the big-object cases (BIG, 256 KiB: a run of pages)
 * are at the end. realloc_same_after_free: the flagship's realloc tests a small object's free
 * marker as its free does (design_usable_quick); the variants without that path keep the
 * freed object in place, and then fault or not by layout (hence ? for small and medium). Overflows off the end of a huge object (copies too): only the secure build's
 * guard page catches them (other builds keep the object in a span, a mapping bigger than the
 * object that stays for the next one, so the bytes after it are mapped; glibc's mapping ends
 * with the object, caught 1 MiB past it). */
static const misuse_t cases[] = {
#define SIZES(kind, fn, s, m, l, p, h) \
    {kind "_small", fn, SMALL, s}, {kind "_medium", fn, MEDIUM, m}, {kind "_large", fn, LARGE, l}, \
    {kind "_page", fn, PAGE, p}, {kind "_huge", fn, HUGE, h}
    SIZES("double_free", double_free, "CCCC", "CCCC", "CCCC", "CCCC", "CCCC"),
    SIZES("interior", interior_free, "CCCC", "CCCC", "CCCC", "CCCC", "CCCC"),
    SIZES("overflow1", overflow1, "?MMC", "MMMM", "CMMC", "MMMC", "MMMC"),
    SIZES("overflow32", overflow32, "?MCC", "?MCC", "CMCC", "MMCC", "MMMC"),
    SIZES("underflow1", underflow1, "?MCC", "?MCC", "CMCC", "MMCC", "MMMC"),
    SIZES("underflow32", underflow32, "?MCC", "?MCC", "CMCC", "MMCC", "MMCC"),
    SIZES("write_after_free", write_after_free, "M?MC", "??MC", "??CC", "MMCC", "MMCC"),
    SIZES("header_after_free", header_after_free, "MMMM", "MMMM", "?MCC", "MMCC", "MMCC"),
    SIZES("read_after_free", read_after_free, "MMMM", "MMMM", "MMMM", "MMMM", "MMCC"),
    SIZES("realloc_after_free", realloc_after_free, "CCCC", "CCCC", "CCCC", "CCCC", "CCCC"),
    SIZES("realloc_same_after_free", realloc_same_after_free, "??MC", "??MC", "CC?C", "CC?C", "CC?C"),
    SIZES("delete_array_as_scalar", delete_array_as_scalar, "CCCC", "CCCC", "CCCC", "CCCC", "CCCC"),
    SIZES("delete_scalar_as_array", delete_scalar_as_array, "CCCC", "CCCC", "CCCC", "CCCC", "CCCC"),
    SIZES("sized_delete_larger", sized_delete_larger, "MMMC", "MMMC", "MMMC", "MMMC", "MMMC"),
    SIZES("sized_delete_smaller", sized_delete_smaller, "MMMC", "MMMC", "MMMC", "MMMC", "MMMC"),
    SIZES("copy_overflow32", copy_overflow32, "MMMC", "MMMC", "MMMC", "MMMC", "MMMC"),
    SIZES("copy_underflow32", copy_underflow32, "MMMC", "MMMC", "MMMC", "MMMC", "MMMC"),
#undef SIZES
    {"overflow_1mib_page", overflow_1mib, PAGE, "MMCC"},
    {"overflow_1mib_huge", overflow_1mib, HUGE, "MMCC"},
    {"underflow_1mib_huge", underflow_1mib, HUGE, "CCCC"},
    {"read_after_free_again_huge", read_after_free_again, HUGE, "MMMC"},
    {"new_then_free_small", new_then_free, SMALL, "MMMM"},
    {"zero_size_write8", zero_size_write, 8, "MMMM"},
    {"zero_size_write32", zero_size_write, 32, "?MCC"},
    {"free_stack", free_stack, 0, "CCCC"},
    {"free_global", free_global, 0, "CCCC"},
    {"free_mmap", free_mmap, 2 * 4096, "CCCC"},
    {"forged_link_small", forged_link, SMALL, "MMMC"},
    {"forged_link_medium", forged_link, MEDIUM, "?MMC"},
    {"predictable_order_small", predictable_order, SMALL, "MMMC"},
    {"predictable_order_medium", predictable_order, MEDIUM, "M?CC"},
    {"segment_end_overflow", segment_end_overflow, SMALL, "MMMC"},
    {"forged_link_block_small", forged_link_block, SMALL, "?MCC"},
    {"copy_overflow32_big", copy_overflow32, BIG, "MMMC"},
    {"copy_underflow32_big", copy_underflow32, BIG, "MM?C"},
    {"move_overflow32_medium", move_overflow32, MEDIUM, "MMMC"},
    {"set_overflow32_large", set_overflow32, LARGE, "MMMC"},
    {"copy_chk_overflow32_small", copy_chk_overflow32, SMALL, "MMMC"},
    {"underflow32_big", underflow32, BIG, "MMCC"},
    {"write_after_free_big", write_after_free, BIG, "MMCC"},
    {"zero_after_free_big", zero_after_free, BIG, "MMCC"},
    {"write_1mib_past_small", write_1mib_past, SMALL, "MMCC"},
    {"write_1mib_past_medium", write_1mib_past, MEDIUM, "MMCC"},
    {"write_1mib_past_large", write_1mib_past, LARGE, "MMCC"},
    {"write_1mib_past_page", write_1mib_past, PAGE, "MMCC"},
    {"write_1mib_past_big", write_1mib_past, BIG, "MMCC"},
};
#define NCASES (sizeof cases / sizeof *cases)

static int family = -1;   /* 0 vam, 1 phk, 2 glibc, 3 secure; -1 another allocator (outcomes only) */
static int ncaught, nmissed, nran;

static void (*child_fn)(size_t);
static size_t child_size;
static void child(void) { child_fn(child_size); }

static int run(size_t i) {
  const misuse_t *c = &cases[i];
  test_child_t r;
  child_fn = c->fn;
  child_size = c->size;
  test_run_child(child, &r);
  bool caught = r.hung ? false : !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 4) {
    test_fdprintf(2, "FAIL %-28s the case could not be set up\n", c->name);
    return 1;
  }
  nran++;
  if (caught) ncaught++; else nmissed++;
  char want = family >= 0 ? c->expect[family] : '?';
  int first = (int)strcspn(r.err_len ? r.err : "", "\n");
  test_note("%-7s %-28s %s%s%.*s\n", caught ? "caught" : "missed", c->name, r.how,
            r.err_len ? ": " : "", first, r.err_len ? r.err : "");
  if (want == 'C' && !caught) {
    test_fdprintf(2, "FAIL %-28s expected caught, missed (detection regressed)\n", c->name);
    return 1;
  }
  if (want == 'M' && caught)
    test_note("note    %-28s expected missed, now caught: update the table\n", c->name);
  bool locus = family == 0 || family == 1 || family == 3;
  if (caught && locus && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT &&
      strncmp(r.err, "locus: ", 7) != 0) {
    test_fdprintf(2, "FAIL %-28s aborted without Locus's report: %.*s\n", c->name, first, r.err);
    return 1;
  }
  return 0;
}

static const char *name(size_t i) { return cases[i].name; }

int main(int argc, char **argv) {
  locus_api_t api;
  if (locus_api_require(&api)) {
    const char *v = api.variant();
    family = !strcmp(v, "secure") ? 3 :
             strncmp(v, "phk", 3) == 0 || strncmp(v, "tp", 2) == 0 || strncmp(v, "pow2", 4) == 0 ||
             strncmp(v, "lf", 2) == 0 ? 1 : 0;
  } else if (!getenv("LD_PRELOAD") || !*getenv("LD_PRELOAD")) {
    family = 2;
  }
  cxx_load();
  static const char *const names[] = {"a Vam build", "a PHK, TP or LF build", "glibc", "the secure build"};
  test_note("misuse: %s\n", family >= 0 ? names[family] : "another allocator (outcomes only)");
  int rc = test_run_cases(argc, argv, NCASES, name, run);
  test_note("misuse: caught %d of %d cases, missed %d\n", ncaught, nran, nmissed);
  return rc;
}
