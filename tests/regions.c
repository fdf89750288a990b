/* regions.c — regions with per-object free (locus_region_*, Reap semantics), in every library:
 * how objects are placed, reused, cleared and destroyed (the other region programs:
 * regions_calls.c, libc's calls and the rest of the API on region objects; regions_threads.c,
 * threads and fork; regions_errors.c, misuse).
 *
 * Skipped (77) when the preloaded allocator has no region calls (glibc, peers). Sections:
 *   bump_order       in bump mode consecutive objects lie end to end (each takes
 *                    align_up(max(n, 1), 16) bytes); a new chunk only when one is full, and
 *                    few of them (geometric growth); a big object leaves the bump chunk alone
 *   alignment        every object of 0..2000 bytes and of big sizes is 16-aligned, has the
 *                    rounded size as usable size, belongs to its region, keeps its contents
 *   reuse            after a free, the next allocation of the same class (align_up(n, 16))
 *                    returns the freed object, LIFO; other classes do not take it
 *   reuse_sized      malloc/free of one size above 1 KiB, over and over, in bounded memory
 *   reuse_sized_fit  a freed object at least twice a request is split, not handed out whole
 *   bump_mode        the flag and the free count through locus_region_free, plain free(),
 *                    free(NULL) and clear
 *   clear            clear empties the region, keeps its first chunk (the first address
 *                    repeats), goes back to bump mode and keeps at most 256 KiB more
 *   clear_bounded    200 cycles of ~1 MiB of allocations (some freed, some big) and a clear:
 *                    the memory held stays bounded, and so does the resident size
 *   nesting          three levels: clear/destroy of a parent destroys every descendant,
 *                    children's callbacks first; a clear of a middle region stays below it
 *   callbacks        newest first, once per clear, forgotten after it; they still see the
 *                    region's objects
 *   callbacks_free   callbacks that free region objects (free(), locus_region_free()) during
 *                    a clear: the region goes on, empty and in bump mode
 * Where the library has it, locus_check_heap runs after the heavier sections.
 */
#define _GNU_SOURCE
#include "regions.h"

#include <malloc.h>

/* ---- bump_order ----------------------------------------------------------------------- */

static void t_bump_order(void) {
  locus_region_t *r = region_new(NULL);
  /* 3,840 bytes in all: the first chunk (8 KiB, with the region's header) holds them */
  static const size_t sizes[] = {0,   1,   8,   15,  16,  17,  31,  32,  33,  48,
                                 100, 127, 128, 129, 255, 256, 500, 1000, 1024};
  enum { N = sizeof sizes / sizeof *sizes };
  char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = ralloc(r, sizes[i], (uint64_t)i);
    if (i)
      CHECKF(p[i] == p[i - 1] + region_size(sizes[i - 1]),
             "object %d (%zu bytes) at %p, the previous (%zu bytes) at %p", i, sizes[i],
             (void *)p[i], sizes[i - 1], (void *)p[i - 1]);
  }
  for (int i = 0; i < N; i++) CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);

  /* a big object has its own chunk: the bump chunk goes on where it was */
  char *a = ralloc(r, 40, 1);
  ralloc(r, 20 << 10, 2);
  char *b = ralloc(r, 40, 3);
  CHECKF(b == a + 48, "after a big object the bump pointer moved: %p then %p", (void *)a,
         (void *)b);
  locus_region_destroy(r);

  /* 1.25 MiB of 64-byte objects: a break in the sequence means a new chunk */
  r = region_new(NULL);
  char *prev = locus_region_malloc(r, 64);
  CHECK(prev != NULL);
  unsigned breaks = 0;
  for (int i = 1; i < 20000; i++) {
    char *q = locus_region_malloc(r, 64);
    CHECK(q != NULL);
    CHECK_ALIGNED(q, 16);
    if (q != prev + 64) breaks++;
    prev = q;
  }
  locus_region_stats_t s = region_stats(r);
  test_note("bump_order: 20000 objects of 64 bytes: %u breaks, %llu chunks, %llu KiB held\n",
            breaks, (unsigned long long)s.chunks, (unsigned long long)s.bytes_held >> 10);
  CHECK_EQ(s.objects_live, 20000);
  CHECK_EQ(s.bytes_live, 20000 * 64);
  CHECK_EQ(s.bump_mode, 1);
  CHECKF(breaks + 1 == s.chunks, "%u breaks in the sequence but %llu chunks", breaks,
         (unsigned long long)s.chunks);
  CHECKF(s.chunks <= 24, "%llu chunks for 1.25 MiB: chunks do not grow geometrically",
         (unsigned long long)s.chunks);
  CHECK_GE(s.bytes_held, 20000 * 64);
  CHECK_LE(s.bytes_held, 4 * 20000 * 64);
  locus_region_destroy(r);
}

/* ---- alignment ------------------------------------------------------------------------ */

static void t_alignment(void) {
  enum { MAXN = 2000 };
  static char *p[MAXN + 1];
  static const size_t big[] = {(16 << 10) - 1, 16 << 10, (16 << 10) + 1, 20000,
                               65537,          (1 << 20) + 3, 2 << 20, (8 << 20) + 5};
  enum { NBIG = sizeof big / sizeof *big };
  char *b[NBIG];
  locus_region_t *r = region_new(NULL);
  uint64_t bytes = 0;
  for (size_t n = 0; n <= MAXN; n++) {
    p[n] = ralloc(r, n, n);
    CHECK(locus_region_of(p[n]) == r);
    CHECKF(malloc_usable_size(p[n]) == region_size(n), "usable size %zu for %zu bytes",
           malloc_usable_size(p[n]), n);
    bytes += region_size(n);
  }
  for (int i = 0; i < NBIG; i++) {
    b[i] = ralloc(r, big[i], 5000 + i);
    CHECK(locus_region_of(b[i]) == r);
    CHECKF(malloc_usable_size(b[i]) >= big[i], "usable size %zu for %zu bytes",
           malloc_usable_size(b[i]), big[i]);
    if (big[i] <= REGION_BIG_LIMIT) bytes += region_size(big[i]);
    else bytes += malloc_usable_size(b[i]);
  }
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, MAXN + 1 + NBIG);
  CHECK_EQ(s.bytes_live, bytes);
  for (size_t n = 0; n <= MAXN; n++) CHECK_PATTERN(p[n], n, n);
  for (int i = 0; i < NBIG; i++) CHECK_PATTERN(b[i], big[i], 5000 + i);

  /* reuse mode: every third object goes, then every size comes again */
  for (size_t n = 0; n <= MAXN; n += 3) locus_region_free(r, p[n]);
  for (size_t n = 0; n <= MAXN; n += 3) {
    p[n] = ralloc(r, n, n + 1);
    /* exact classes up to 1 KiB; above, a freed object of a larger size may serve */
    if (n <= 1024)
      CHECKF(malloc_usable_size(p[n]) == region_size(n), "usable size %zu for %zu bytes",
             malloc_usable_size(p[n]), n);
    else
      CHECK_GE(malloc_usable_size(p[n]), region_size(n));
  }
  for (size_t n = 0; n <= MAXN; n++) CHECK_PATTERN(p[n], n, n % 3 ? n : n + 1);
  locus_region_destroy(r);
}

/* ---- reuse ---------------------------------------------------------------------------- */

static void t_reuse(void) {
  locus_region_t *r = region_new(NULL);
  void *a = ralloc(r, 40, 1), *b = ralloc(r, 40, 2), *c = ralloc(r, 40, 3);
  locus_region_free(r, b);
  CHECK_PATTERN(a, 40, 1);
  CHECK_PATTERN(c, 40, 3);
  /* other classes leave it alone */
  void *smaller = locus_region_malloc(r, 32), *larger = locus_region_malloc(r, 49);
  CHECK(smaller != b && larger != b);
  void *again = locus_region_malloc(r, 33);
  CHECKF(again == b, "freed %p (40 bytes), malloc(33) gave %p", b, again);
  /* LIFO */
  locus_region_free(r, a);
  locus_region_free(r, c);
  CHECK(locus_region_malloc(r, 48) == c);
  CHECK(locus_region_malloc(r, 35) == a);

  /* every class up to 1 KiB: n rounds to class k; any size of that class takes it back */
  for (size_t k = 16; k <= 1024; k += 16) {
    void *x = ralloc(r, k, k);
    void *spacer = ralloc(r, 16, 0);
    locus_region_free(r, x);
    for (size_t n = k - 15; n <= k; n += 5) {
      void *y = locus_region_malloc(r, n);
      CHECKF(y == x, "class %zu: freed %p, malloc(%zu) gave %p", k, x, n, y);
      locus_region_free(r, y);
    }
    void *z = locus_region_malloc(r, k);
    CHECK(z == x);
    locus_region_free(r, spacer);
  }

  /* a plain free() is applied by the region's next operation */
  void *d = ralloc(r, 200, 4);
  free(d);
  void *e = locus_region_malloc(r, 200);
  CHECKF(e == d, "free()d %p, the next malloc(200) gave %p", d, e);
  locus_region_destroy(r);
}

/* ---- reuse_sized: freed objects above 1 KiB -------------------------------------------- */

/* A program that frees and allocates objects of one size, over and over, in reuse mode, must
 * run in bounded memory: the freed object serves the next request of its size. */
static void t_reuse_sized(void) {
  static const size_t sizes[] = {1100, 1500, 3000, 5000, 10000, 16 << 10};
  int grew = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    locus_region_t *r = region_new(NULL);
    locus_region_free(r, ralloc(r, 16, 0)); /* reuse mode */
    void *keep = ralloc(r, 64, 0);
    void *first = ralloc(r, n, 0);
    locus_region_free(r, first);
    uint64_t held = region_stats(r).bytes_held;
    unsigned same = 0;
    for (int k = 0; k < 5000; k++) {
      void *p = ralloc(r, n, (uint64_t)k);
      same += p == first;
      locus_region_free(r, p);
    }
    locus_region_stats_t s = region_stats(r);
    test_note("reuse_sized: %zu bytes: %u of 5000 allocations took the freed object back; held "
              "%llu -> %llu KiB\n", n, same, (unsigned long long)held >> 10,
              (unsigned long long)s.bytes_held >> 10);
    if (s.bytes_held > held + (256 << 10)) {
      test_fdprintf(2, "malloc(%zu)/free in a loop: the region grew from %llu to %llu KiB\n", n,
                    (unsigned long long)held >> 10, (unsigned long long)s.bytes_held >> 10);
      grew++;
    }
    CHECK_EQ(s.objects_live, 1);
    CHECK(locus_region_of(keep) == r);
    locus_region_destroy(r);
  }
  CHECKF(grew == 0, "%d sizes of %zu ran in unbounded memory", grew,
         sizeof sizes / sizeof *sizes);
}

/* A freed 16 KiB object is not handed whole to a 4000-byte request: a free object at least
 * twice a request is split (the design: always splitting, with no coalescing, chopped the
 * bins into pieces too small for the next request), so no request takes twice its size. */
static void t_reuse_sized_fit(void) {
  locus_region_t *r = region_new(NULL);
  void *big = ralloc(r, 16 << 10, 0);
  void *keep = ralloc(r, 64, 0);
  locus_region_free(r, big);
  void *p = ralloc(r, 4000, 1);
  size_t usable = malloc_usable_size(p);
  CHECKF(usable >= 4000 && usable < 8000, "a 4000-byte object takes %zu bytes%s", usable,
         p == big ? " (the freed 16 KiB object, whole)" : "");
  check_live(r, 2, 64 + usable);
  CHECK(locus_region_of(keep) == r);
  locus_region_destroy(r);
}

/* ---- bump_mode ------------------------------------------------------------------------ */

static void t_bump_mode(void) {
  locus_region_t *r = region_new(NULL);
  check_empty(r);
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.frees, 0);
  void *p = ralloc(r, 100, 1);
  ralloc(r, 100, 2);
  locus_region_free(r, NULL);
  s = region_stats(r);
  CHECK_EQ(s.bump_mode, 1);
  CHECK_EQ(s.frees, 0);
  locus_region_free(r, p);
  s = region_stats(r);
  CHECK_EQ(s.bump_mode, 0);
  CHECK_EQ(s.frees, 1);
  ralloc(r, 3000, 3);
  CHECK_EQ(region_stats(r).bump_mode, 0);

  locus_region_clear(r);
  s = region_stats(r);
  CHECK_EQ(s.bump_mode, 1);
  CHECK_EQ(s.frees, 1); /* since creation */
  p = ralloc(r, 10, 4);
  CHECK_EQ(region_stats(r).bump_mode, 1);
  free(p); /* plain free(): applied by the next operation, here the stats */
  s = region_stats(r);
  CHECK_EQ(s.bump_mode, 0);
  CHECK_EQ(s.frees, 2);
  CHECK_EQ(s.objects_live, 0);

  locus_region_clear(r);
  CHECK_EQ(region_stats(r).bump_mode, 1);
  void *big = ralloc(r, 100 << 10, 5);
  locus_region_free(r, big);
  s = region_stats(r);
  CHECK_EQ(s.bump_mode, 0);
  CHECK_EQ(s.frees, 3);
  locus_region_destroy(r);
}

/* ---- clear ---------------------------------------------------------------------------- */

static void t_clear(void) {
  locus_region_t *r = region_new(NULL);
  uint64_t fresh = region_stats(r).bytes_held;
  void *first = ralloc(r, 100, 0);
  test_rng_t g = {7};
  for (int round = 0; round < 5; round++) {
    void *keep[64];
    for (int i = 0; i < 3000; i++) {
      size_t n = rng_below(&g, 10) ? (size_t)rng_below(&g, 1500) : (size_t)rng_below(&g, 60000);
      void *q = ralloc(r, n, 0);
      if (i < 64) keep[i] = q;
      else if (rng_below(&g, 4) == 0) locus_region_free(r, q);
    }
    locus_region_t *child = region_new(r);
    ralloc(child, 500, 0);
    locus_region_free(r, keep[round]);
    locus_region_clear(r);
    check_empty(r);
    locus_region_stats_t s = region_stats(r);
    CHECKF(s.bytes_held <= fresh + (256 << 10),
           "after clear the region holds %llu KiB (%llu KiB when new)",
           (unsigned long long)s.bytes_held >> 10, (unsigned long long)fresh >> 10);
    size_t n = round == 0 ? 100 : (size_t)rng_below(&g, 4000);
    void *again = ralloc(r, n, 0);
    CHECKF(again == first, "round %d: after clear malloc(%zu) gave %p, the first object was %p",
           round, n, again, first);
    CHECK(locus_region_of(again) == r);
  }
  locus_region_destroy(r);
}

/* ---- clear_bounded -------------------------------------------------------------------- */

static void t_clear_bounded(void) {
  locus_region_t *r = region_new(NULL);
  uint64_t fresh = region_stats(r).bytes_held, peak_max = 0, cleared_max = 0;
  size_t rss_early = 0;
  test_rng_t g = {11};
  for (int cycle = 0; cycle < 200; cycle++) {
    size_t total = 0;
    while (total < (1u << 20)) {
      size_t n = rng_below(&g, 200) ? 1 + (size_t)rng_below(&g, 2048)
                                    : 20000 + (size_t)rng_below(&g, 80000);
      char *p = locus_region_malloc(r, n);
      CHECK(p != NULL);
      p[0] = 1;
      p[n - 1] = 2;
      total += n;
      uint64_t x = rng_below(&g, 20);
      if (x == 0) locus_region_free(r, p);
      else if (x == 1) free(p);
    }
    uint64_t peak = region_stats(r).bytes_held;
    locus_region_clear(r);
    uint64_t held = region_stats(r).bytes_held;
    if (peak > peak_max) peak_max = peak;
    if (held > cleared_max) cleared_max = held;
    CHECKF(held <= fresh + (256 << 10), "cycle %d: %llu KiB held after clear", cycle,
           (unsigned long long)held >> 10);
    CHECKF(peak <= (4u << 20), "cycle %d: %llu KiB held for 1 MiB of objects", cycle,
           (unsigned long long)peak >> 10);
    if (cycle == 20) rss_early = test_rss();
  }
  size_t rss_late = test_rss();
  test_note("clear_bounded: held at most %llu KiB, %llu KiB after clear; resident %zu KiB after "
            "20 cycles, %zu KiB after 200\n", (unsigned long long)peak_max >> 10,
            (unsigned long long)cleared_max >> 10, rss_early >> 10, rss_late >> 10);
  CHECKF(rss_late <= rss_early + (2u << 20), "resident memory grew from %zu to %zu KiB",
         rss_early >> 10, rss_late >> 10);
  locus_region_destroy(r);
  check_heap();
}

/* ---- callbacks: a log of what ran ----------------------------------------------------- */

enum { LOG_MAX = 4096 };
static int cb_log[LOG_MAX];
static int cb_count;

static void log_cb(void *arg) {
  CHECK(cb_count < LOG_MAX);
  cb_log[cb_count++] = (int)(intptr_t)arg;
}
static void on_destroy_log(locus_region_t *r, int id) {
  CHECK(locus_region_on_destroy(r, log_cb, (void *)(intptr_t)id) == 0);
}
static int log_pos(int id) {
  int at = -1;
  for (int i = 0; i < cb_count; i++)
    if (cb_log[i] == id) {
      CHECKF(at < 0, "callback %d ran twice", id);
      at = i;
    }
  return at;
}

/* ---- nesting -------------------------------------------------------------------------- */

/* A: children B1 (children C1, C2) and B2 (child C3). Region k's callbacks are 10k+1 then
 * 10k+2 (so 10k+2 runs first). */
enum { A, B1, B2, C1, C2, C3, NREG };
static const int parent_of[NREG] = {-1, A, A, B1, B1, B2};
static locus_region_t *reg[NREG];
static void *reg_obj[NREG];

static void build_tree(void) {
  for (int k = 0; k < NREG; k++) {
    reg[k] = region_new(parent_of[k] < 0 ? NULL : reg[parent_of[k]]);
    reg_obj[k] = ralloc(reg[k], 64 + 16 * (size_t)k, (uint64_t)k);
    on_destroy_log(reg[k], 10 * k + 1);
    on_destroy_log(reg[k], 10 * k + 2);
  }
  CHECK_EQ(region_stats(reg[A]).children, 2);
  CHECK_EQ(region_stats(reg[B1]).children, 2);
  CHECK_EQ(region_stats(reg[B2]).children, 1);
  CHECK_EQ(region_stats(reg[C1]).children, 0);
  for (int k = 0; k < NREG; k++) CHECK(locus_region_of(reg_obj[k]) == reg[k]);
}

static bool below(int k, int top) {
  for (; k >= 0; k = parent_of[k])
    if (k == top) return true;
  return false;
}

/* Checks that exactly the callbacks of `top` and its descendants ran, each once, each region's
 * newest first, every child's before its parent's. */
static void check_tree_log(int top) {
  int ran = 0;
  for (int k = 0; k < NREG; k++) {
    int p1 = log_pos(10 * k + 1), p2 = log_pos(10 * k + 2);
    if (!below(k, top)) {
      CHECKF(p1 < 0 && p2 < 0, "region %d is not below region %d, its callbacks ran", k, top);
      continue;
    }
    CHECKF(p1 >= 0 && p2 >= 0, "region %d's callbacks did not run", k);
    CHECKF(p2 + 1 == p1, "region %d's callbacks ran at %d and %d, not newest first", k, p2, p1);
    ran += 2;
    if (k != top) {
      int pp = log_pos(10 * parent_of[k] + 2);
      CHECKF(p1 < pp, "region %d's callbacks ran after its parent's (%d)", k, parent_of[k]);
    }
  }
  CHECK_EQ(cb_count, ran);
}

static void t_nesting(void) {
  /* clear of the root destroys every descendant */
  build_tree();
  cb_count = 0;
  locus_region_clear(reg[A]);
  check_tree_log(A);
  CHECK_EQ(region_stats(reg[A]).children, 0);
  cb_count = 0;
  locus_region_clear(reg[A]); /* the callbacks were forgotten */
  CHECK_EQ(cb_count, 0);
  locus_region_destroy(reg[A]);
  CHECK_EQ(cb_count, 0);

  /* destroy of the root */
  build_tree();
  cb_count = 0;
  locus_region_destroy(reg[A]);
  check_tree_log(A);

  /* clear of a middle region: its children go, nothing above or beside it */
  build_tree();
  cb_count = 0;
  locus_region_clear(reg[B1]);
  check_tree_log(B1);
  CHECK_EQ(region_stats(reg[B1]).children, 0);
  CHECK_EQ(region_stats(reg[A]).children, 2);
  CHECK_EQ(region_stats(reg[B2]).children, 1);
  CHECK_PATTERN(reg_obj[A], 64, A);
  CHECK_PATTERN(reg_obj[C3], 64 + 16 * C3, C3);
  /* the cleared region has children again, then the root goes */
  locus_region_t *c4 = region_new(reg[B1]);
  on_destroy_log(c4, 71);
  on_destroy_log(reg[B1], 10 * B1 + 3);
  /* a child destroyed by itself leaves its parent */
  cb_count = 0;
  locus_region_destroy(reg[C3]);
  CHECK_EQ(cb_count, 2);
  CHECK(cb_log[0] == 10 * C3 + 2 && cb_log[1] == 10 * C3 + 1);
  CHECK_EQ(region_stats(reg[B2]).children, 0);
  cb_count = 0;
  locus_region_destroy(reg[A]);
  /* c4's 71, then B1's new one and B2's two (siblings in either order), then A's two */
  CHECK_EQ(cb_count, 6);
  int p71 = log_pos(71), pb1 = log_pos(10 * B1 + 3), pb2 = log_pos(10 * B2 + 2);
  CHECK(p71 >= 0 && pb1 > p71 && pb2 >= 0);
  CHECK(log_pos(10 * B2 + 1) == pb2 + 1);
  CHECK(cb_log[4] == 10 * A + 2 && cb_log[5] == 10 * A + 1);
}

/* ---- callbacks ------------------------------------------------------------------------ */

typedef struct seen_object { void *p; size_t n; uint64_t seed; int id; } seen_object_t;

/* arg: a region object describing another object of the same region */
static void check_object_cb(void *arg) {
  seen_object_t *o = arg;
  CHECK_PATTERN(o->p, o->n, o->seed);
  log_cb((void *)(intptr_t)o->id);
}

static void t_callbacks(void) {
  locus_region_t *r = region_new(NULL);
  cb_count = 0;
  for (int i = 1; i <= 3; i++) on_destroy_log(r, i);
  locus_region_clear(r);
  CHECK_EQ(cb_count, 3);
  CHECK(cb_log[0] == 3 && cb_log[1] == 2 && cb_log[2] == 1);
  locus_region_clear(r);
  CHECK_EQ(cb_count, 3);

  /* many, then destroy */
  for (int i = 1; i <= 1000; i++) on_destroy_log(r, 100 + i);
  locus_region_clear(r);
  CHECK_EQ(cb_count, 1003);
  for (int i = 0; i < 1000; i++) CHECK_EQ(cb_log[3 + i], 1100 - i);

  /* callbacks see the region's objects (the memory goes after them) */
  cb_count = 0;
  for (int i = 0; i < 20; i++) {
    seen_object_t *o = locus_region_malloc(r, sizeof *o);
    CHECK(o != NULL);
    o->n = 1 + 97 * (size_t)i;
    o->seed = 900 + (uint64_t)i;
    o->p = ralloc(r, o->n, o->seed);
    o->id = i;
    CHECK(locus_region_on_destroy(r, check_object_cb, o) == 0);
  }
  on_destroy_log(r, 77);
  locus_region_destroy(r);
  CHECK_EQ(cb_count, 21);
  CHECK_EQ(cb_log[0], 77);
  for (int i = 0; i < 20; i++) CHECK_EQ(cb_log[1 + i], 19 - i);

  /* the usual use: a callback releases a resource of the program */
  r = region_new(NULL);
  for (int i = 0; i < 100; i++) {
    void *m = malloc(1000);
    CHECK(m != NULL);
    CHECK(locus_region_on_destroy(r, free, m) == 0);
  }
  locus_region_destroy(r);
}

/* ---- callbacks_free: callbacks that free objects of the region ------------------------ */

/* A callback may free objects of the region being cleared (a destructor releasing a member),
 * with free() or locus_region_free(): the clear frees them anyway, and the region goes on. */
static locus_region_t *cbf_region;
static void region_free_cb(void *arg) { locus_region_free(cbf_region, arg); }

static void t_callbacks_free(void) {
  locus_region_t *r = region_new(NULL);
  cbf_region = r;
  void *first = ralloc(r, 100, 0);
  for (int round = 0; round < 4; round++) {
    if (round) CHECK(ralloc(r, 100, 0) == first);
    void *a = ralloc(r, 200, 1), *b = ralloc(r, 300, 2);
    void *big = ralloc(r, 50000, 3), *big2 = ralloc(r, 60000, 4);
    void (*how)(void *) = round % 2 ? free : region_free_cb;
    CHECK(locus_region_on_destroy(r, how, a) == 0);
    CHECK(locus_region_on_destroy(r, how, big) == 0);
    CHECK(locus_region_on_destroy(r, free, b) == 0);
    CHECK(locus_region_on_destroy(r, region_free_cb, big2) == 0);
    locus_region_clear(r);
    check_empty(r);
    for (int i = 0; i < 50; i++) ralloc(r, 20000 + 1000 * (size_t)i, (uint64_t)i);
  }
  CHECK(locus_region_on_destroy(r, free, ralloc(r, 500, 0)) == 0);
  locus_region_destroy(r);
  check_heap();
}
int main(int argc, char **argv) {
  int skip = regions_require("regions", &region_lib);
  if (skip) return skip;
  static const test_section_t sections[] = {
      {"bump_order", t_bump_order},
      {"alignment", t_alignment},
      {"reuse", t_reuse},
      {"reuse_sized", t_reuse_sized},
      {"reuse_sized_fit", t_reuse_sized_fit},
      {"bump_mode", t_bump_mode},
      {"clear", t_clear},
      {"clear_bounded", t_clear_bounded},
      {"nesting", t_nesting},
      {"callbacks", t_callbacks},
      {"callbacks_free", t_callbacks_free},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
