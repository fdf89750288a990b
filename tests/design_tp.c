/* design_tp.c — tests that fail if a named mechanism of the TP design breaks. Run with
 * LD_PRELOAD of liblocus-tp.so or liblocus-tp-debug.so (other libraries skip), with LOCUS_TP_K
 * unset, 7, 10, 14 or out of range (then the default, 12, must hold). Sections:
 *   classes      usable sizes: 16 B apart to 512 B, then 64/128/256/512/1024 B apart to 16 KiB
 *   regions      objects of a class lie in K-regions aligned to 2^K, 16 B past the region's start,
 *                (2^K - 16) / size of them per region, K from the seed's table (LOCUS_TP_K for
 *                objects up to 512 B, raised until header + object fit)
 *   hint_lands   a hinted allocation with room in the hint's K-region lands there (any address of
 *                the region, its header included, is a hint to it); statistics count it as the
 *                same K-region, not the same page, when the region spans pages
 *   hint_falls   a hint whose region holds another class or is full, NULL, the stack, an address
 *                nobody allocated, a huge object, another thread's object: an ordinary object
 *   reuse        free returns an object to its K-region (last freed, first reused)
 *   empty        empty blocks go back to the page manager (statistics), one kept per class
 *                (the same object comes back in a loop) unless LOCUS_DISCARD=immediate
 *   misuse       double frees (local, remote), interior pointers and header pointers end the
 *                program with the usual one-line message
 *   bad_k        an out-of-range or malformed LOCUS_TP_K is rejected with a warning
 *   aligned      alignments beyond the quantum are honoured
 */
#include "check.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

static size_t page;
static unsigned page_shift, small_k = 12;
static bool immediate;
static int (*stats_get)(locus_stats_t *);
static void *(*malloc_near)(size_t, const void *);

static locus_stats_t stats(void) {
  locus_stats_t s;
  CHECK(stats_get && stats_get(&s) == 0);
  return s;
}

/* The class size TP gives a request of n bytes (n <= 16 KiB). */
static size_t class_size(size_t n) {
  if (n <= 512) return n <= 16 ? 16 : (n + 15) & ~(size_t)15;
  size_t step = 64;
  for (size_t lim = 1024; n > lim; lim *= 2) step *= 2;
  return (n + step - 1) & ~(step - 1);
}

/* The K of the K-regions of class size `size`. */
static unsigned class_k(size_t size) {
  unsigned k = 13;
  if (size <= 512) k = small_k;
  else for (size_t lim = 1024; size > lim; lim *= 2) k++;
  while (((size_t)1 << k) < 16 + size) k++;
  if (k < page_shift - 6) k = page_shift - 6;
  return k;
}

static size_t capacity(size_t size) { return (((size_t)1 << class_k(size)) - 16) / size; }
static uintptr_t region_of(const void *p, size_t size) {
  return (uintptr_t)p & ~(((uintptr_t)1 << class_k(size)) - 1);
}
static size_t index_of(const void *p, size_t size) {
  return ((uintptr_t)p - region_of(p, size) - 16) / size;
}

static void t_classes(void) {
  for (size_t n = 0; n <= 16384; n += n < 1100 ? 1 : 37) {
    void *p = malloc(n);
    CHECKF(malloc_usable_size(p) == class_size(n ? n : 1), "usable(malloc(%zu)) = %zu, not %zu", n,
           malloc_usable_size(p), class_size(n ? n : 1));
    free(p);
  }
  void *big = malloc(16385);
  CHECK_ALIGNED(big, page);
  CHECK_EQ(malloc_usable_size(big), (16385 + page - 1) / page * page);
  free(big);
}

static int cmp_ptr(const void *x, const void *y) {
  uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
  return a < b ? -1 : a > b;
}

static void t_regions(void) {
  static const size_t sizes[] = {16, 48, 112, 128, 240, 256, 500, 512, 600, 1000, 1500, 3000, 5000, 12000, 16384};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t size = class_size(sizes[s]), k = class_k(size), cap = capacity(size), n = 3 * cap + 5;
    uintptr_t *o = malloc(n * sizeof *o);
    for (size_t i = 0; i < n; i++) {
      o[i] = (uintptr_t)malloc(size);
      size_t off = o[i] & (((size_t)1 << k) - 1);
      CHECKF(off >= 16 && (off - 16) % size == 0 && (off - 16) / size < cap,
             "size %zu: object %#lx at offset %zu of its %zu-region (capacity %zu)", size,
             (unsigned long)o[i], off, k, cap);
    }
    qsort(o, n, sizeof *o, cmp_ptr);
    size_t run = 0, most = 0;
    for (size_t i = 0; i < n; i++) {
      run = i && region_of((void *)o[i], size) == region_of((void *)o[i - 1], size) ? run + 1 : 1;
      if (run > most) most = run;
    }
    CHECKF(most == cap, "size %zu: fullest %zu-region holds %zu objects, not %zu", size, k, most, cap);
    for (size_t i = 0; i < n; i++) free((void *)o[i]);
    free(o);
  }
  test_note("     K of 48 B objects: %u; of 512 B: %u; of 16 KiB: %u\n", class_k(48), class_k(512),
            class_k(16384));
}

/* A fresh K-region of class `size`, filled: its cap objects in index order in o[]. */
static void fill_region(size_t size, void **o) {
  void *p;
  while (index_of(p = malloc(size), size) != 0) {}   /* until a region's first object */
  o[0] = p;
  for (size_t i = 1; i < capacity(size); i++) {
    o[i] = malloc(size);
    CHECKF(region_of(o[i], size) == region_of(p, size) && index_of(o[i], size) == i,
           "object %zu of a fresh region: %p, region %p", i, o[i], p);
  }
}

/* (16-byte objects: even 7-regions hold 7 of them) */
static void t_hint_lands(void) {
  size_t size = 16, cap = capacity(size);
  void **a = malloc(cap * sizeof *a), **b = malloc(cap * sizeof *b);
  fill_region(size, a);
  fill_region(size, b);
  free(a[1]);
  free(b[cap - 1]);
  locus_stats_t s0 = stats();
  CHECK(malloc_near(size, b[0]) == b[cap - 1]);
  CHECK(malloc_near(size, a[cap - 1]) == a[1]);
  locus_stats_t s1 = stats();
  CHECK_EQ(s1.hint_calls - s0.hint_calls, 2);
  CHECK_EQ(s1.hint_same_kregion - s0.hint_same_kregion, 2);
  /* any address in the region is a hint to it: its header, a free object itself */
  free(a[3]);
  CHECK(malloc_near(size, (void *)(region_of(a[0], size) + 1)) == a[3]);
  free(a[cap - 2]);
  CHECK(malloc_near(10, a[cap - 2]) == a[cap - 2]);
  /* a region over several pages: the same K-region, not the same page */
  size_t big = 1024, bcap = capacity(big);
  void **c = malloc(bcap * sizeof *c);
  fill_region(big, c);
  CHECK((uintptr_t)c[0] / page != (uintptr_t)c[bcap - 1] / page);
  free(c[bcap - 1]);
  s0 = stats();
  CHECK(malloc_near(big, c[0]) == c[bcap - 1]);
  s1 = stats();
  CHECK_EQ(s1.hint_same_kregion - s0.hint_same_kregion, 1);
  CHECK_EQ(s1.hint_same_page - s0.hint_same_page, 0);
}

static void *thread_alloc(void *arg) {
  *(void **)arg = malloc(48);
  return NULL;
}

/* A hinted object the hint's region could not take: valid, of its class, freeable. */
static void check_fallback(void *p, size_t size, const void *hint, size_t hint_size) {
  CHECK(p != NULL);
  CHECK_EQ(malloc_usable_size(p), class_size(size));
  CHECKF(region_of(p, hint_size) != region_of(hint, hint_size), "%p placed in the region of hint %p", p, hint);
  pattern_fill(p, size, 7);
  CHECK_PATTERN(p, size, 7);
}

static void t_hint_falls(void) {
  size_t size = 16, cap = capacity(size);
  void **a = malloc(cap * sizeof *a);
  fill_region(size, a);
  free(a[2]);                                        /* room, but for class 48 only */
  void *p = malloc_near(100, a[0]);
  check_fallback(p, 100, a[0], size);
  CHECK(malloc_near(size, a[0]) == a[2]);            /* now full */
  void *q = malloc_near(size, a[0]);
  check_fallback(q, size, a[0], size);
  locus_stats_t s0 = stats();
  void *r = malloc_near(size, NULL);
  CHECK(r != NULL && malloc_usable_size(r) == size);
  CHECK_EQ(stats().hint_calls, s0.hint_calls);      /* NULL: plain malloc, not counted */
  int local;
  static char global[64];
  char *mapped = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *huge = malloc(100000);
  void *other = NULL;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_alloc, &other) == 0);
  pthread_join(t, NULL);
  const void *hints[] = {&local, global, mapped, (void *)0x1000, (void *)(uintptr_t)0x7ffffffff000,
                         huge + 50, other, (void *)(uintptr_t)-1};
  for (size_t i = 0; i < sizeof hints / sizeof *hints; i++) {
    void *x = malloc_near(size, hints[i]);
    CHECK(x != NULL && malloc_usable_size(x) == size);
    pattern_fill(x, size, 9);
    CHECK_PATTERN(x, size, 9);
    free(x);
  }
  free(other);
  free(huge);
  munmap(mapped, page);
}

static void t_reuse(void) {
  size_t size = 16, cap = capacity(size);
  void **a = malloc(cap * sizeof *a);
  fill_region(size, a);
  free(a[2]);
  free(a[cap - 1]);
  CHECK(malloc_near(size, a[0]) == a[cap - 1]);
  CHECK(malloc_near(size, a[0]) == a[2]);
  /* freed objects go back to their region: allocation by size alone (the block that got room
   * leads its class's list) finds them there */
  for (size_t i = 1; i < cap; i++) free(a[i]);
  for (size_t i = 1; i < cap; i++) {
    void *p = malloc(size);
    CHECKF(region_of(p, size) == region_of(a[0], size), "object %zu: %p, not in region %p", i, p, a[0]);
  }
}

static void t_empty(void) {
  size_t size = 432, per_block = capacity(size) * (page >> class_k(size) ? page >> class_k(size) : 1);
  size_t n = 20 * per_block;
  void **o = malloc(n * sizeof *o);
  locus_stats_t s0 = stats();
  for (size_t i = 0; i < n; i++) o[i] = malloc(size);
  locus_stats_t s1 = stats();
  CHECK_GE(s1.blocks_in_use - s0.blocks_in_use, 19);
  for (size_t i = 0; i < n; i++) free(o[i]);
  locus_stats_t s2 = stats();
  CHECKF(s2.blocks_in_use <= s0.blocks_in_use + !immediate, "blocks: %lu before, %lu after",
         (unsigned long)s0.blocks_in_use, (unsigned long)s2.blocks_in_use);
  CHECK_EQ(s2.malloc_calls - s1.malloc_calls, 0);
  CHECK_EQ(s2.free_calls - s1.free_calls, n);
  CHECK_EQ(s2.bytes_allocated, s0.bytes_allocated);
  /* one object of a class nothing else uses, allocated and freed in a loop */
  void *p = malloc(7000);
  locus_stats_t a = stats();
  free(p);
  locus_stats_t b = stats();
  if (immediate) {
    CHECK_EQ(b.blocks_in_use, a.blocks_in_use - 1);
  } else {
    CHECK_EQ(b.blocks_in_use, a.blocks_in_use);
    for (int i = 0; i < 100; i++) {
      void *q = malloc(7000);
      CHECK(q == p);
      free(q);
    }
    CHECK_EQ(stats().pages_in_use, b.pages_in_use);
  }
}

/* Runs fn(arg) in a child (check.h's test_run_child: stderr captured); returns how it ended. */
static void (*child_fn)(void *);
static void *child_arg;
static void child_trampoline(void) { child_fn(child_arg); }
static test_child_t run_child(void (*fn)(void *), void *arg) {
  test_child_t c;
  child_fn = fn;
  child_arg = arg;
  test_run_child(child_trampoline, &c);
  return c;
}

/* fn(arg) must end the program with a message containing `what`. */
static void expect_death(void (*fn)(void *), void *arg, const char *what) {
  test_child_t c = run_child(fn, arg);
  CHECKF(!c.hung && WIFSIGNALED(c.status) && c.err_len && strstr(c.err, what),
         "expected '%s': status %d, '%s'", what, c.status, c.err_len ? c.err : "");
}

static void die_double(void *arg) {
  size_t n = (size_t)arg;
  char *p = malloc(n), *q = malloc(n);
  free(p);
  free(q);
  free(opaque_ptr(p));
}
/* The thread exists before the first free (pthread_create allocates: it could take p again). */
static int go[2];
static void *thread_free(void *p) {
  char c;
  if (read(go[0], &c, 1) == 1) free(p);
  return NULL;
}
static void die_remote_double(void *arg) {
  (void)arg;
  char *p = malloc(64);
  pthread_t t;
  if (pipe(go) != 0 || pthread_create(&t, NULL, thread_free, p) != 0) _exit(3);
  free(p);
  if (write(go[1], "x", 1) != 1) _exit(3);
  pthread_join(t, NULL);
}
static void die_interior(void *arg) { free((char *)malloc(64) + (size_t)arg); }
static void die_header(void *arg) {
  char *p = malloc(64);
  free((void *)(region_of(p, 64) + (size_t)arg));
}

static void t_misuse(void) {
  for (size_t n = 16; n <= 16384; n *= 2) expect_death(die_double, (void *)n, "double free");
  expect_death(die_remote_double, NULL, "double free");
  expect_death(die_interior, (void *)16, "invalid pointer");
  expect_death(die_interior, (void *)8, "invalid pointer");
  expect_death(die_header, (void *)0, "invalid pointer");
  expect_death(die_header, (void *)8, "invalid pointer");
}

/* This program as a probe (one malloc, nothing else) with LOCUS_TP_K=value. */
static void probe_k(void *value) {
  setenv("LOCUS_TP_K", value, 1);
  setenv("LOCUS_TEST_TP_PROBE", "1", 1);
  execl("/proc/self/exe", "design_tp", (char *)NULL);
  _exit(127);
}

/* The library must warn that it kept the default, and run on. */
static void t_bad_k(void) {
  static const char *bad[] = {"6", "17", "99", "abc", "12x", ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    test_child_t c = run_child(probe_k, (void *)bad[i]);
    CHECKF(!c.hung && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "LOCUS_TP_K=%s: status %d",
           bad[i], c.status);
    CHECKF(c.err_len && strstr(c.err, "bad value for LOCUS_TP_K"), "LOCUS_TP_K='%s' not rejected: '%s'",
           bad[i], c.err_len ? c.err : "");
  }
}

static void t_aligned(void) {
  for (size_t align = 32; align <= 4 * page; align *= 2) {
    void *p = NULL;
    CHECK(posix_memalign(&p, align, 40) == 0);
    CHECK_ALIGNED(p, align);
    pattern_fill(p, 40, 3);
    CHECK_PATTERN(p, 40, 3);
    free(p);
  }
}

int main(int argc, char **argv) {
  if (getenv("LOCUS_TEST_TP_PROBE")) {
    free(malloc(48));
    return 0;
  }
  page = (size_t)sysconf(_SC_PAGESIZE);
  page_shift = (unsigned)__builtin_ctzl(page);
  const char *(*var)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "locus_variant");
  if (!var || strncmp(var(), "tp", 2) != 0) {
    test_note("design_tp: not a tp library, skipped\n");
    return TEST_SKIP;
  }
  const char *k = getenv("LOCUS_TP_K");
  char *end;
  long kv = k ? strtol(k, &end, 10) : 0;
  if (k && *k && !*end && kv >= 7 && kv <= 16) small_k = (unsigned)kv;
  const char *discard = getenv("LOCUS_DISCARD");
  immediate = discard && !strcmp(discard, "immediate");
  stats_get = (int (*)(locus_stats_t *))dlsym(RTLD_DEFAULT, "locus_stats_get");
  malloc_near = (void *(*)(size_t, const void *))dlsym(RTLD_DEFAULT, "locus_malloc_near");
  CHECK(malloc_near != NULL);
  static const test_section_t sections[] = {
    {"classes", t_classes},
    {"regions", t_regions},
    {"hint_lands", t_hint_lands},
    {"hint_falls", t_hint_falls},
    {"reuse", t_reuse},
    {"empty", t_empty},
    {"misuse", t_misuse},
    {"bad_k", t_bad_k},
    {"aligned", t_aligned},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
