/* regions.h — what the region tests (regions.c, regions_calls.c, regions_threads.c,
 * regions_errors.c, regions_cxx.cpp) share.
 *
 * The test programs are not linked against a Locus library: they run under LD_PRELOAD of each
 * library of the suite, or of none (`system`). The region calls are therefore weak references,
 * NULL when the loaded allocator has no regions; regions_require() then skips the program.
 */
#ifndef LOCUS_TEST_REGIONS_H
#define LOCUS_TEST_REGIONS_H

#include "check.h"

#pragma weak locus_region_create
#pragma weak locus_region_malloc
#pragma weak locus_region_calloc
#pragma weak locus_region_realloc
#pragma weak locus_region_aligned_alloc
#pragma weak locus_region_free
#pragma weak locus_region_clear
#pragma weak locus_region_destroy
#pragma weak locus_region_on_destroy
#pragma weak locus_region_of
#pragma weak locus_region_stats

/* The bytes an object of n bytes takes in a chunk: align_up(max(n, 1), 16). */
static TEST_UNUSED size_t region_size(size_t n) { return ((n ? n : 1) + 15) & ~(size_t)15; }

/* Objects above this size get a chunk of their own. */
#define REGION_BIG_LIMIT ((size_t)16 << 10)

/* Fails the test when a Locus library was expected and did not load; returns TEST_SKIP (for
 * main to return) when the loaded allocator has no regions, else 0 (*api filled). */
static TEST_UNUSED int regions_require(const char *program, locus_api_t *api) {
  int locus = locus_api_require(api);
  if (!locus_region_create) {
    test_note("%s: %s, skipped\n", program,
              locus ? "this Locus library has no regions" : "not a Locus library");
    return TEST_SKIP;
  }
  return 0;
}

/* Is the preloaded library a debug build (liblocus-debug.so, liblocus-phk-debug.so)? */
static TEST_UNUSED bool regions_debug_build(void) {
  const char *lib = getenv("LOCUS_TEST_LIBRARY");
  return lib && strstr(lib, "debug");
}

static TEST_UNUSED locus_region_stats_t region_stats(locus_region_t *r) {
  locus_region_stats_t s;
  memset(&s, 0xEE, sizeof s);
  CHECK(locus_region_stats(r, &s) == 0);
  return s;
}

/* ---- the helpers of regions.c, regions_calls.c and regions_threads.c ------------------------ */

/* The library's other Locus calls (regions_require fills it in main). */
static TEST_UNUSED locus_api_t region_lib;

/* The calling thread's heap is consistent (every Locus library has the walk). */
static TEST_UNUSED void check_heap(void) {
  if (region_lib.check_heap) CHECK(region_lib.check_heap() == 0);
}

/* A new region (child of parent, or top-level for NULL). */
static TEST_UNUSED locus_region_t *region_new(locus_region_t *parent) {
  locus_region_t *r = locus_region_create(parent);
  CHECK(r != NULL);
  return r;
}

/* Allocates n bytes in r, checks the basics and fills the object with pattern `seed`. */
static TEST_UNUSED void *ralloc(locus_region_t *r, size_t n, uint64_t seed) {
  void *p = locus_region_malloc(r, n);
  CHECKF(p != NULL, "locus_region_malloc(%zu) failed", n);
  CHECK_ALIGNED(p, 16);
  pattern_fill(p, n, seed);
  return p;
}

/* The region's live objects and their bytes are exactly these. */
static TEST_UNUSED void check_live(locus_region_t *r, uint64_t objects, uint64_t bytes) {
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, objects);
  CHECK_EQ(s.bytes_live, bytes);
}

/* The region holds no object and no child, in bump mode. */
static TEST_UNUSED void check_empty(locus_region_t *r) {
  locus_region_stats_t s = region_stats(r);
  CHECK_EQ(s.objects_live, 0);
  CHECK_EQ(s.bytes_live, 0);
  CHECK_EQ(s.children, 0);
  CHECK_EQ(s.bump_mode, 1);
}

#endif
