/* regions_calls.c — region objects through libc's calls (free, realloc, calloc,
 * malloc_usable_size) and the region API's other calls: aligned and big objects,
 * locus_region_of, the statistics, impossible sizes.
 *
 * Skipped (77) when the preloaded allocator has no region calls (glibc, peers). Sections:
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
 * Where the library has it, locus_check_heap runs after the heavier sections.
 */
#define _GNU_SOURCE
#include "regions.h"

#include <malloc.h>

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
  CHECK(region_lib.stats_get && region_lib.stats_get(&g) == 0);
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
  CHECK(region_lib.stats_get(&g) == 0);
  CHECK_EQ(g.regions, regions + 4);
  CHECK_EQ(g.region_bytes, bytes + held);
  locus_region_clear(a); /* b and c go */
  held_a = region_stats(a).bytes_held;
  CHECK(region_lib.stats_get(&g) == 0);
  CHECK_EQ(g.regions, regions + 2);
  CHECK_EQ(g.region_bytes, bytes + held_a + held_d);
  locus_region_destroy(a);
  locus_region_destroy(d);
  CHECK(region_lib.stats_get(&g) == 0);
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
int main(int argc, char **argv) {
  int skip = regions_require("regions_calls", &region_lib);
  if (skip) return skip;
  static const test_section_t sections[] = {
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
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
