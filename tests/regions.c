/* regions.c — regions with per-object free (locus_region_*, Reap semantics), in every library.
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
 *   libc_calls       free(), realloc() (in place, growing past 16 KiB, shrinking: contents kept,
 *                    same region) and malloc_usable_size() on region objects; region_realloc
 *   calloc           zeroes fresh memory, a dirty freed object it reuses, memory after clear
 *   aligned          locus_region_aligned_alloc for alignments 1..1 MiB, in bump and reuse
 *                    mode; EINVAL for alignments that are not powers of two
 *   big              20 KiB, 2 MiB and 8 MiB objects: own chunks, given back at once when
 *                    freed (either free), and by clear
 *   region_of        the region of region objects (also big and aligned ones), NULL for
 *                    malloc'd objects and NULL
 *   region_of_freed  NULL for objects freed from a region
 *   region_of_edges  NULL for the bump point, interior pointers, the region, the stack
 *   stats            exact objects_live / bytes_live / chunks / children / frees in a small
 *                    scenario
 *   global_stats     locus_stats_get's regions and region_bytes follow creates, clears and
 *                    destroys (statistics version 3)
 *   enomem           impossible sizes give NULL with errno ENOMEM and leave the region intact
 *   thread_handoff   created in one thread, filled in a second, cleared and destroyed in a third
 *   thread_free      one thread allocates while another free()s objects it is handed: the
 *                    frees are applied and the stats are exact after the join
 *   thread_regions   two threads, each with many regions (nested, freed, cleared) at once
 *   thread_destroy   regions cleared and destroyed by another thread while their creator goes
 *                    on allocating
 *   fork             a child of fork goes on with regions of the main thread and of a thread
 *                    alive at the fork
 * Where the library has it, locus_check_heap runs after the heavier sections.
 */
#define _GNU_SOURCE
#include "regions.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>

static locus_api_t L;

/* The calling thread's heap is consistent (every Locus library has the walk). */
static void check_heap(void) {
  if (L.check_heap) CHECK(L.check_heap() == 0);
}

/* A new region (child of parent, or top-level for NULL). */
static locus_region_t *region_new(locus_region_t *parent) {
  locus_region_t *r = locus_region_create(parent);
  CHECK(r != NULL);
  return r;
}

/* Allocates n bytes in r, checks the basics and fills the object with pattern `seed`. */
static void *ralloc(locus_region_t *r, size_t n, uint64_t seed) {
  void *p = locus_region_malloc(r, n);
  CHECKF(p != NULL, "locus_region_malloc(%zu) failed", n);
  CHECK_ALIGNED(p, 16);
  pattern_fill(p, n, seed);
  return p;
}

/* The region's live objects and their bytes are exactly these. */
static void check_live(locus_region_t *r, uint64_t objects, uint64_t bytes) {
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, objects);
  CHECK_EQ(s.bytes_live, bytes);
}

/* The region holds no object and no child, in bump mode. */
static void check_empty(locus_region_t *r) {
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, 0);
  CHECK_EQ(s.bytes_live, 0);
  CHECK_EQ(s.children, 0);
  CHECK_EQ(s.bump_mode, 1);
}

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

/* ---- libc_calls ----------------------------------------------------------------------- */

/* Grows and shrinks one object through `re` (realloc or locus_region_realloc), checking at each
 * step that the contents are kept and the object stays in r. */
static void realloc_walk(locus_region_t *r, void *(*re)(locus_region_t *, void *, size_t)) {
  static const size_t steps[] = {100, 120, 200, 4000, 16 << 10, 20000, 3 << 20, 50, 20000, 8};
  size_t n = steps[0];
  char *p = ralloc(r, n, 1);
  for (size_t i = 1; i < sizeof steps / sizeof *steps; i++) {
    size_t m = steps[i];
    char *q = re(r, p, m);
    CHECKF(q != NULL, "realloc %zu -> %zu failed", n, m);
    CHECK_ALIGNED(q, 16);
    CHECKF(locus_region_of(q) == r, "realloc %zu -> %zu left the region", n, m);
    CHECK_PATTERN(q, n < m ? n : m, i);
    CHECKF(malloc_usable_size(q) >= m, "usable size %zu after realloc to %zu",
           malloc_usable_size(q), m);
    locus_region_stats_t s = region_stats(r);
    CHECK_EQ(s.objects_live, 1);
    CHECK_EQ(s.bytes_live, malloc_usable_size(q));
    pattern_fill(q, m, i + 1);
    p = q;
    n = m;
  }
  CHECK(re(r, p, 0) == NULL); /* frees */
  CHECK_EQ(region_stats(r).objects_live, 0);
}

static void *plain_realloc(locus_region_t *r, void *p, size_t n) {
  (void)r;
  return realloc(p, n);
}

static void t_libc_calls(void) {
  locus_region_t *r = region_new(NULL);
  /* free() */
  void *small = ralloc(r, 100, 1), *big = ralloc(r, 100 << 10, 2);
  CHECK_EQ(malloc_usable_size(small), 112);
  CHECK_GE(malloc_usable_size(big), 100 << 10);
  CHECK_EQ(region_stats(r).objects_live, 2);
  free(small);
  free(big);
  free(NULL);
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, 0);
  CHECK_EQ(s.bytes_live, 0);

  /* realloc() and locus_region_realloc() */
  realloc_walk(r, locus_region_realloc);
  realloc_walk(r, plain_realloc);
  /* the same in bump mode */
  locus_region_clear(r);
  realloc_walk(r, plain_realloc);
  locus_region_clear(r);
  realloc_walk(r, locus_region_realloc);

  /* locus_region_realloc(NULL) allocates in the region */
  void *p = locus_region_realloc(r, NULL, 30);
  CHECK(p != NULL && locus_region_of(p) == r);
  CHECK_EQ(malloc_usable_size(p), 32);
  /* a child's object stays in the child */
  locus_region_t *child = region_new(r);
  void *c = ralloc(child, 300, 5);
  void *c2 = realloc(c, 30000);
  CHECK(c2 != NULL && locus_region_of(c2) == child);
  CHECK_PATTERN(c2, 300, 5);
  locus_region_destroy(r);
}

/* ---- calloc --------------------------------------------------------------------------- */

static bool all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return false;
  return true;
}

static void t_calloc(void) {
  locus_region_t *r = region_new(NULL);
  char *p = locus_region_calloc(r, 10, 100);
  CHECK(p != NULL && all_zero(p, 1000));
  CHECK_ALIGNED(p, 16);
  CHECK_EQ(malloc_usable_size(p), 1008);

  /* a dirty freed object taken back */
  for (size_t n = 1; n <= 1024; n += 37) {
    char *d = locus_region_malloc(r, n);
    CHECK(d != NULL);
    memset(d, 0xAB, malloc_usable_size(d));
    locus_region_free(r, d);
    char *z = locus_region_calloc(r, 1, n);
    CHECKF(z == d, "calloc(%zu) did not reuse the freed %p", n, (void *)d);
    CHECKF(all_zero(z, n), "calloc(%zu) reused a dirty object without zeroing it", n);
  }
  /* big ones, freed dirty and taken again */
  for (int i = 0; i < 4; i++) {
    size_t n = (20u << 10) + (size_t)i * 100000;
    char *d = locus_region_malloc(r, n);
    CHECK(d != NULL);
    memset(d, 0xCD, n);
    locus_region_free(r, d);
    char *z = locus_region_calloc(r, n, 1);
    CHECK(z != NULL && all_zero(z, n));
  }
  /* dirty memory after a clear */
  memset(p, 0xEF, 1000);
  char *more = locus_region_malloc(r, 5000);
  CHECK(more != NULL);
  memset(more, 0xEF, 5000);
  locus_region_clear(r);
  char *z = locus_region_calloc(r, 6000, 1);
  CHECK(z != NULL && all_zero(z, 6000));
  /* overflow of n * size */
  errno = 0;
  CHECK(locus_region_calloc(r, opaque_size(SIZE_MAX / 2), 3) == NULL);
  CHECK_EQ(errno, ENOMEM);
  errno = 0;
  CHECK(locus_region_calloc(r, opaque_size((size_t)1 << 33), (size_t)1 << 33) == NULL);
  CHECK_EQ(errno, ENOMEM);
  locus_region_destroy(r);
}

/* ---- aligned -------------------------------------------------------------------------- */

static void t_aligned(void) {
  locus_region_t *r = region_new(NULL);
  enum { MAXA = 20 }; /* 1 MiB */
  static const size_t sizes[] = {1, 24, 0, 3, 5000}; /* 0: the alignment, 3: 1.5 times it */
  enum { NS = sizeof sizes / sizeof *sizes };
  void *p[MAXA + 1][NS];
  size_t len[MAXA + 1][NS];
  for (int pass = 0; pass < 2; pass++) {
    uint64_t live = region_stats(r).objects_live;
    for (int k = 0; k <= MAXA; k++) {
      size_t a = (size_t)1 << k;
      for (int j = 0; j < NS; j++) {
        if (pass && (k + j) % 2) continue; /* second pass: refill the half that was freed */
        size_t n = sizes[j] == 0 ? a : sizes[j] == 3 ? a + a / 2 : sizes[j];
        void *q = locus_region_aligned_alloc(r, a, n);
        CHECKF(q != NULL, "aligned_alloc(%zu, %zu) failed", a, n);
        CHECK_ALIGNED(q, a > 16 ? a : 16);
        CHECK(locus_region_of(q) == r);
        CHECK_GE(malloc_usable_size(q), n);
        pattern_fill(q, n, (uint64_t)(k * NS + j + pass));
        p[k][j] = q;
        len[k][j] = n;
        live++;
      }
    }
    CHECK_EQ(region_stats(r).objects_live, live);
    for (int k = 0; k <= MAXA; k++)
      for (int j = 0; j < NS; j++)
        CHECK_PATTERN(p[k][j], len[k][j], (uint64_t)(k * NS + j + (pass && (k + j) % 2 == 0)));
    if (pass == 0) {
      for (int k = 0; k <= MAXA; k++)
        for (int j = 0; j < NS; j++)
          if ((k + j) % 2 == 0) locus_region_free(r, p[k][j]);
      CHECK_EQ(region_stats(r).bump_mode, 0);
    }
  }
  static const size_t bad[] = {3, 24, 48, 1000, 4097, (1 << 20) + 16};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    errno = 0;
    void *q = locus_region_aligned_alloc(r, opaque_size(bad[i]), 64);
    CHECKF(q == NULL && errno == EINVAL, "aligned_alloc(%zu, 64): %p, errno %d", bad[i], q,
           errno);
  }
  locus_region_clear(r);
  CHECK_EQ(region_stats(r).objects_live, 0);
  locus_region_destroy(r);
}

/* ---- big ------------------------------------------------------------------------------ */

static void t_big(void) {
  static const size_t sizes[] = {20 << 10, 2 << 20, 8 << 20};
  enum { NB = sizeof sizes / sizeof *sizes };
  locus_region_t *r = region_new(NULL);
  locus_region_stats_t s0 = region_stats(r), s;
  void *first = ralloc(r, 64, 0);
  char *p[NB];
  uint64_t sum = 0;
  for (int i = 0; i < NB; i++) {
    p[i] = ralloc(r, sizes[i], (uint64_t)i);
    sum += sizes[i];
    CHECK(locus_region_of(p[i]) == r);
  }
  s = region_stats(r);
  CHECK_EQ(s.chunks, s0.chunks + NB);
  CHECK_EQ(s.objects_live, 1 + NB);
  CHECK_GE(s.bytes_held, s0.bytes_held + sum);
  for (int i = 0; i < NB; i++) CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);

  /* each freed on its own: the memory goes at once */
  uint64_t held = s.bytes_held, chunks = s.chunks;
  locus_region_free(r, p[2]);
  s = region_stats(r);
  CHECKF(s.bytes_held + sizes[2] <= held, "freeing 8 MiB: held %llu -> %llu KiB",
         (unsigned long long)held >> 10, (unsigned long long)s.bytes_held >> 10);
  CHECK_EQ(s.chunks, chunks - 1);
  held = s.bytes_held;
  free(p[1]); /* plain free(): applied by the next operation */
  s = region_stats(r);
  CHECKF(s.bytes_held + sizes[1] <= held, "free() of 2 MiB: held %llu -> %llu KiB",
         (unsigned long long)held >> 10, (unsigned long long)s.bytes_held >> 10);
  CHECK_EQ(s.chunks, chunks - 2);
  held = s.bytes_held;
  locus_region_free(r, p[0]);
  s = region_stats(r);
  CHECK_LE(s.bytes_held + sizes[0], held);
  CHECK_EQ(s.chunks, s0.chunks);
  CHECK_EQ(s.objects_live, 1);

  /* and by clear */
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < NB; i++) p[i] = ralloc(r, sizes[i], (uint64_t)i);
    for (int i = 0; i < NB; i++) CHECK_PATTERN(p[i], sizes[i], (uint64_t)i);
    locus_region_clear(r);
    s = region_stats(r);
    CHECK_EQ(s.objects_live, 0);
    CHECK_EQ(s.bytes_live, 0);
    CHECKF(s.bytes_held <= s0.bytes_held + (256 << 10), "after clear %llu KiB held",
           (unsigned long long)s.bytes_held >> 10);
    CHECK(ralloc(r, 64, 0) == first);
  }
  locus_region_destroy(r);
}

/* ---- region_of ------------------------------------------------------------------------ */

static void t_region_of(void) {
  CHECK(locus_region_of(NULL) == NULL);
  static const size_t sizes[] = {16, 300, 4000, 100000, 4 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    void *m = malloc(sizes[i]);
    CHECK(m != NULL);
    CHECKF(locus_region_of(m) == NULL, "malloc(%zu) object taken for a region object",
           sizes[i]);
    free(m);
  }
  locus_region_t *r = region_new(NULL);
  locus_region_t *child = region_new(r);
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    void *a = ralloc(r, sizes[i], 0), *b = ralloc(child, sizes[i], 0);
    CHECK(locus_region_of(a) == r);
    CHECK(locus_region_of(b) == child);
    void *c = locus_region_aligned_alloc(child, 4096, sizes[i]);
    CHECK(c != NULL && locus_region_of(c) == child);
    void *z = locus_region_calloc(r, 1, sizes[i]);
    CHECK(z != NULL && locus_region_of(z) == r);
  }
  locus_region_destroy(r);
}

static void t_region_of_freed(void) {
  locus_region_t *r = region_new(NULL);
  void *keep = ralloc(r, 48, 0);
  void *a = ralloc(r, 48, 0), *b = ralloc(r, 1000, 0);
  locus_region_free(r, a);
  free(b);
  CHECK(locus_region_of(a) == NULL);
  CHECK(locus_region_of(keep) == r);
  CHECK_EQ(region_stats(r).objects_live, 1); /* applies the free() */
  CHECK(locus_region_of(b) == NULL);
  locus_region_destroy(r);
}

/* Addresses that are not objects: the bump point (just past the last object), interior
 * pointers, the region itself, the stack. */
static void t_region_of_edges(void) {
  locus_region_t *r = region_new(NULL);
  char *p = ralloc(r, 48, 0);
  CHECKF(locus_region_of(p + 48) == NULL, "the bump point %p is taken for an object",
         (void *)(p + 48));
  CHECK(locus_region_of(p + 16) == NULL);
  CHECK(locus_region_of(r) == NULL);
  int local = 0;
  CHECK(locus_region_of(&local) == NULL);
  char *big = ralloc(r, 100000, 0);
  CHECK(locus_region_of(big + 4096) == NULL);
  CHECK(locus_region_of(big + 16) == NULL);
  locus_region_destroy(r);
}

/* ---- global_stats --------------------------------------------------------------------- */

static void t_global_stats(void) {
  locus_stats_t g;
  CHECK(L.stats_get && L.stats_get(&g) == 0);
  if (g.version < 3) SECTION_SKIP("statistics version %llu has no region fields",
                                  (unsigned long long)g.version);
  uint64_t regions = g.regions, bytes = g.region_bytes;
  locus_region_t *a = region_new(NULL), *b = region_new(a), *c = region_new(b),
                 *d = region_new(NULL);
  ralloc(a, 100000, 0);
  for (int i = 0; i < 100; i++) ralloc(c, 1000, 0);
  ralloc(d, 3 << 20, 0);
  uint64_t held_a = region_stats(a).bytes_held, held_d = region_stats(d).bytes_held;
  uint64_t held = held_a + region_stats(b).bytes_held + region_stats(c).bytes_held + held_d;
  CHECK(L.stats_get(&g) == 0);
  CHECK_EQ(g.regions, regions + 4);
  CHECK_EQ(g.region_bytes, bytes + held);
  locus_region_clear(a); /* b and c go */
  held_a = region_stats(a).bytes_held;
  CHECK(L.stats_get(&g) == 0);
  CHECK_EQ(g.regions, regions + 2);
  CHECK_EQ(g.region_bytes, bytes + held_a + held_d);
  locus_region_destroy(a);
  locus_region_destroy(d);
  CHECK(L.stats_get(&g) == 0);
  CHECK_EQ(g.regions, regions);
  CHECK_EQ(g.region_bytes, bytes);
}

/* ---- stats ---------------------------------------------------------------------------- */

static void t_stats(void) {
  locus_region_t *r = region_new(NULL);
  check_empty(r);
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.chunks, 1);
  CHECK_EQ(s.frees, 0);
  CHECK_GE(s.bytes_held, 8 << 10);
  CHECK_LT(s.bytes_held, 64 << 10);

  void *a = ralloc(r, 1, 0);     /* 16 */
  void *b = ralloc(r, 17, 0);    /* 32 */
  void *c = ralloc(r, 100, 0);   /* 112 */
  void *d = ralloc(r, 0, 0);     /* 16 */
  void *e = locus_region_calloc(r, 3, 5); /* 16 */
  CHECK(e != NULL);
  check_live(r, 5, 192);
  locus_region_free(r, b);
  check_live(r, 4, 160);
  CHECK_EQ(region_stats(r).frees, 1);
  void *f = ralloc(r, 20, 0);    /* 32, in b's place */
  CHECK(f == b);
  check_live(r, 5, 192);
  void *g = ralloc(r, 20000, 0);
  uint64_t gsize = malloc_usable_size(g);
  CHECK_GE(gsize, 20000);
  check_live(r, 6, 192 + gsize);
  CHECK_EQ(region_stats(r).chunks, 2);

  /* a child's objects are its own */
  locus_region_t *child = region_new(r);
  for (int i = 0; i < 5; i++) ralloc(child, 50, 0);
  CHECK_EQ(region_stats(r).children, 1);
  check_live(r, 6, 192 + gsize);
  check_live(child, 5, 5 * 64);

  free(c);
  check_live(r, 5, 80 + gsize);
  CHECK_EQ(region_stats(r).frees, 2);
  locus_region_free(r, g);
  check_live(r, 4, 80);
  s = region_stats(r);
  CHECK_EQ(s.frees, 3);
  CHECK_EQ(s.chunks, 1);
  CHECK_EQ(s.bump_mode, 0);

  void *a2 = realloc(a, 40);
  CHECK(a2 != NULL);
  check_live(r, 4, 48 + 16 + 16 + 32);
  (void)d;

  locus_region_destroy(child);
  CHECK_EQ(region_stats(r).children, 0);
  locus_region_clear(r);
  check_empty(r);
  CHECK_EQ(region_stats(r).chunks, 1);
  locus_region_destroy(r);
}

/* ---- enomem --------------------------------------------------------------------------- */


static void t_enomem(void) {
  locus_region_t *r = region_new(NULL);
  void *p = ralloc(r, 100, 1);
  static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 8, SIZE_MAX - 16, SIZE_MAX / 2 + 1,
                                (size_t)1 << 56};
  for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
    size_t n = opaque_size(huge[i]);
    CHECK_ENOMEM(locus_region_malloc(r, n));
    CHECK_ENOMEM(locus_region_calloc(r, 1, n));
    CHECK_ENOMEM(locus_region_aligned_alloc(r, 64, n));
    CHECK_ENOMEM(locus_region_aligned_alloc(r, 1 << 20, n));
    CHECK_ENOMEM(locus_region_realloc(r, p, n));
    CHECK_PATTERN(p, 100, 1);
    CHECK(locus_region_of(p) == r);
  }
  CHECK_ENOMEM(realloc(p, opaque_size(SIZE_MAX)));
  check_live(r, 1, 112);
  /* still usable, in reuse mode too */
  locus_region_free(r, p);
  CHECK_ENOMEM(locus_region_malloc(r, opaque_size(SIZE_MAX)));
  CHECK(ralloc(r, 100, 2) == p);
  locus_region_destroy(r);
}

/* ---- thread_handoff ------------------------------------------------------------------- */

enum { HANDOFF = 5000 };
static locus_region_t *handoff_region;
static void *handoff_obj[HANDOFF];
static pthread_t handoff_cleaner;
static int handoff_cb_ran;

static size_t handoff_size(int i) { return 1 + (size_t)(i * 131) % 3000 + (i % 500 == 0) * 40000; }

static void handoff_cb(void *arg) {
  (void)arg;
  CHECK(pthread_equal(pthread_self(), handoff_cleaner));
  handoff_cb_ran++;
}

static void *handoff_create(void *arg) {
  (void)arg;
  handoff_region = region_new(NULL);
  return NULL;
}
static void *handoff_fill(void *arg) {
  (void)arg;
  for (int i = 0; i < HANDOFF; i++) handoff_obj[i] = ralloc(handoff_region, handoff_size(i), i);
  CHECK(locus_region_on_destroy(handoff_region, handoff_cb, NULL) == 0);
  locus_region_t *child = region_new(handoff_region);
  ralloc(child, 100, 0);
  return NULL;
}
static void *handoff_end(void *arg) {
  (void)arg;
  handoff_cleaner = pthread_self();
  uint64_t bytes = 0, freed = 0;
  for (int i = 0; i < HANDOFF; i++) {
    CHECK_PATTERN(handoff_obj[i], handoff_size(i), i);
    CHECK(locus_region_of(handoff_obj[i]) == handoff_region);
    bytes += malloc_usable_size(handoff_obj[i]);
    if (i % 2 == 0) freed += malloc_usable_size(handoff_obj[i]);
  }
  check_live(handoff_region, HANDOFF, bytes);
  for (int i = 0; i < HANDOFF; i += 2) locus_region_free(handoff_region, handoff_obj[i]);
  check_live(handoff_region, HANDOFF / 2, bytes - freed);
  CHECK_EQ(region_stats(handoff_region).children, 1);
  locus_region_clear(handoff_region);
  CHECK_EQ(handoff_cb_ran, 1);
  check_live(handoff_region, 0, 0);
  CHECK_EQ(region_stats(handoff_region).children, 0);
  locus_region_destroy(handoff_region);
  return NULL;
}

static void t_thread_handoff(void) {
  test_run_thread(handoff_create, NULL);
  test_run_thread(handoff_fill, NULL);
  test_run_thread(handoff_end, NULL);
}

/* ---- thread_free ---------------------------------------------------------------------- */

enum { QCAP = 1024, FREE_OBJECTS = 200000 };
static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  void *slot[QCAP];
  size_t head, tail; /* head - tail objects wait */
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void queue_push(void *p) {
  pthread_mutex_lock(&queue.lock);
  while (queue.head - queue.tail == QCAP) pthread_cond_wait(&queue.changed, &queue.lock);
  queue.slot[queue.head++ % QCAP] = p;
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
}
static void *queue_pop(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.head == queue.tail) pthread_cond_wait(&queue.changed, &queue.lock);
  void *p = queue.slot[queue.tail++ % QCAP];
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
  return p;
}

/* Each handed object starts with its size and seed, the rest is its pattern. */
typedef struct handed { size_t n; uint64_t seed; } handed_t;

static void *freer(void *arg) {
  size_t *freed = arg;
  for (void *p; (p = queue_pop()) != NULL;) {
    handed_t h;
    memcpy(&h, p, sizeof h);
    CHECK_PATTERN((char *)p + sizeof h, h.n - sizeof h, h.seed);
    free(p);
    ++*freed;
  }
  return NULL;
}

static void t_thread_free(void) {
  locus_region_t *r = region_new(NULL);
  static void *kept[FREE_OBJECTS];
  static size_t kept_n[FREE_OBJECTS];
  size_t nkept = 0, handed_out = 0, freed = 0;
  uint64_t kept_bytes = 0;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, freer, &freed) == 0);
  test_rng_t g = {5};
  for (size_t i = 0; i < FREE_OBJECTS; i++) {
    size_t n = sizeof(handed_t) + (size_t)rng_below(&g, 600);
    char *p = locus_region_malloc(r, n);
    CHECK(p != NULL);
    CHECK_ALIGNED(p, 16);
    if (i % 3 == 0) {
      pattern_fill(p, n, i);
      kept[nkept] = p;
      kept_n[nkept++] = n;
      kept_bytes += region_size(n);
    } else {
      handed_t h = {n, i};
      memcpy(p, &h, sizeof h);
      pattern_fill(p + sizeof h, n - sizeof h, i);
      queue_push(p);
      handed_out++;
    }
  }
  queue_push(NULL);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_EQ(freed, handed_out);
  locus_region_stats_t s = region_stats(r);
  test_note("thread_free: %zu kept, %zu freed by the other thread; %llu KiB held\n", nkept,
            freed, (unsigned long long)s.bytes_held >> 10);
  CHECK_EQ(s.objects_live, nkept);
  CHECK_EQ(s.bytes_live, kept_bytes);
  CHECK_EQ(s.frees, handed_out);
  CHECK_EQ(s.bump_mode, 0);
  for (size_t i = 0; i < nkept; i++) CHECK_PATTERN(kept[i], kept_n[i], 3 * i);
  locus_region_destroy(r);
  check_heap();
}

/* ---- thread_regions ------------------------------------------------------------------- */

enum { LIVE_REGIONS = 12, REGION_ROUNDS = 300, ROUND_OBJECTS = 200 };

typedef struct slot {
  locus_region_t *r;
  void *obj[ROUND_OBJECTS];
  size_t n[ROUND_OBJECTS];
  uint64_t seed[ROUND_OBJECTS];
} slot_t;

static void slot_verify(const slot_t *s) {
  uint64_t objects = 0, bytes = 0;
  for (int i = 0; i < ROUND_OBJECTS; i++) {
    if (!s->obj[i]) continue;
    CHECK_PATTERN(s->obj[i], s->n[i], s->seed[i]);
    CHECK(locus_region_of(s->obj[i]) == s->r);
    objects++;
    bytes += malloc_usable_size(s->obj[i]);
  }
  check_live(s->r, objects, bytes);
}

static void *region_worker(void *arg) {
  uint64_t id = (uintptr_t)arg;
  test_rng_t g = {id};
  static __thread slot_t slots[LIVE_REGIONS];
  for (int round = 0; round < REGION_ROUNDS; round++) {
    slot_t *s = &slots[rng_below(&g, LIVE_REGIONS)];
    if (s->r) {
      slot_verify(s);
      if (rng_below(&g, 2)) locus_region_destroy(s->r), s->r = NULL;
      else locus_region_clear(s->r);
      memset(s->obj, 0, sizeof s->obj);
    }
    if (!s->r) {
      /* sometimes the child of another live region: destroyed with it */
      slot_t *parent = &slots[rng_below(&g, LIVE_REGIONS)];
      s->r = region_new(NULL);
      if (parent != s && parent->r && rng_below(&g, 4) == 0) {
        locus_region_t *child = region_new(parent->r);
        ralloc(child, 1000, 0);
      }
    }
    for (int i = 0; i < ROUND_OBJECTS; i++) {
      s->n[i] = rng_below(&g, 50) ? (size_t)rng_below(&g, 3000) : 20000 + rng_below(&g, 50000);
      s->seed[i] = rng_next(&g);
      s->obj[i] = ralloc(s->r, s->n[i], s->seed[i]);
      if (rng_below(&g, 3) == 0) {
        int j = (int)rng_below(&g, (uint64_t)i + 1);
        if (rng_below(&g, 2)) locus_region_free(s->r, s->obj[j]);
        else free(s->obj[j]);
        s->obj[j] = NULL;
      }
      free(malloc(1 + rng_below(&g, 500)));
    }
    slot_verify(s);
  }
  for (int k = 0; k < LIVE_REGIONS; k++)
    if (slots[k].r) slot_verify(&slots[k]), locus_region_destroy(slots[k].r);
  check_heap();
  return NULL;
}

static void t_thread_regions(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&t[i], NULL, region_worker, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(t[i], NULL) == 0);
}

/* ---- thread_destroy: regions destroyed by another thread while their creator works ---- */

/* The creator fills regions and hands them over through the queue, going on with malloc and
 * free (and new regions) while the other thread checks, clears and destroys what it gets:
 * chunks go back to the creator's page manager from the other thread. */
enum { HANDED_REGIONS = 400, HANDED_OBJECTS = 100 };

static size_t handed_size(int i) { return i % 37 == 0 ? 20000 + (size_t)i * 100 : 1 + (size_t)i * 29; }

static void *region_destroyer(void *arg) {
  (void)arg;
  for (locus_region_t *r; (r = queue_pop()) != NULL;) {
    void **obj = locus_region_malloc(r, HANDED_OBJECTS * sizeof *obj);
    CHECK(obj != NULL);
    locus_region_stats_t s = region_stats(r);
    CHECK_EQ(s.objects_live, HANDED_OBJECTS + 1);
    locus_region_clear(r);
    ralloc(r, 30000, 0);
    locus_region_destroy(r);
  }
  check_heap();
  return NULL;
}

static void t_thread_destroy(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, region_destroyer, NULL) == 0);
  test_rng_t g = {3};
  void *plain[64] = {0};
  for (int k = 0; k < HANDED_REGIONS; k++) {
    locus_region_t *r = region_new(NULL);
    for (int i = 0; i < HANDED_OBJECTS; i++) {
      ralloc(r, handed_size(i), (uint64_t)i);
      size_t slot = (size_t)rng_below(&g, 64);
      free(plain[slot]);
      plain[slot] = malloc(1 + (size_t)rng_below(&g, rng_below(&g, 8) ? 2000 : 300000));
      CHECK(plain[slot] != NULL);
    }
    queue_push(r);
  }
  queue_push(NULL);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < 64; i++) free(plain[i]);
  check_heap();
}

/* ---- fork: regions go on in a child ---------------------------------------------------- */

/* A region of the main thread and one of a thread that is alive at the fork (its heap is not
 * the child's): the child allocates in both (new chunks, big objects), frees, clears and
 * destroys them. */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fork_cond = PTHREAD_COND_INITIALIZER;
static int fork_stage; /* 1: the helper's region is ready; 2: the helper may exit */
static locus_region_t *fork_region;

static void *fork_helper(void *arg) {
  (void)arg;
  locus_region_t *r = region_new(NULL);
  for (int i = 0; i < 500; i++) ralloc(r, 1 + (size_t)i * 13, (uint64_t)i);
  ralloc(r, 40000, 0);
  pthread_mutex_lock(&fork_lock);
  fork_region = r;
  fork_stage = 1;
  pthread_cond_broadcast(&fork_cond);
  while (fork_stage < 2) pthread_cond_wait(&fork_cond, &fork_lock);
  pthread_mutex_unlock(&fork_lock);
  return NULL;
}

static void fork_use(locus_region_t *r) {
  void *p[2000];
  for (int i = 0; i < 2000; i++) p[i] = ralloc(r, 1 + (size_t)(i * 97) % 3000 + (i % 100 == 0) * 50000, (uint64_t)i);
  for (int i = 0; i < 2000; i += 2) locus_region_free(r, p[i]);
  for (int i = 1; i < 2000; i += 2) CHECK_PATTERN(p[i], 1 + (size_t)(i * 97) % 3000 + (i % 100 == 0) * 50000, (uint64_t)i);
  CHECK_EQ(region_stats(r).objects_live >= 1000, 1);
  locus_region_clear(r);
  check_live(r, 0, 0);
  ralloc(r, 5000, 0);
}

static void t_fork(void) {
  locus_region_t *mine = region_new(NULL);
  for (int i = 0; i < 500; i++) ralloc(mine, 1 + (size_t)i * 7, (uint64_t)i);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fork_helper, NULL) == 0);
  pthread_mutex_lock(&fork_lock);
  while (fork_stage < 1) pthread_cond_wait(&fork_cond, &fork_lock);
  pthread_mutex_unlock(&fork_lock);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20); /* a hang ends the child (SIGALRM) */
    fork_use(mine);
    fork_use(fork_region);
    locus_region_destroy(fork_region);
    locus_region_destroy(mine);
    check_heap();
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status %#x", st);
  pthread_mutex_lock(&fork_lock);
  fork_stage = 2;
  pthread_cond_broadcast(&fork_cond);
  pthread_mutex_unlock(&fork_lock);
  CHECK(pthread_join(t, NULL) == 0);
  fork_use(fork_region);
  locus_region_destroy(fork_region);
  locus_region_destroy(mine);
}

int main(int argc, char **argv) {
  int skip = regions_require("regions", &L);
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
      {"libc_calls", t_libc_calls},
      {"calloc", t_calloc},
      {"aligned", t_aligned},
      {"big", t_big},
      {"region_of", t_region_of},
      {"region_of_freed", t_region_of_freed},
      {"region_of_edges", t_region_of_edges},
      {"stats", t_stats},
      {"global_stats", t_global_stats},
      {"enomem", t_enomem},
      {"thread_handoff", t_thread_handoff},
      {"thread_free", t_thread_free},
      {"thread_regions", t_thread_regions},
      {"thread_destroy", t_thread_destroy},
      {"fork", t_fork},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
