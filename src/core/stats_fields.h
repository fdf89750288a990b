/* stats_fields.h — the statistics' fields, listed once. LOCUS_STATS_FIELDS is every field of
 * the public locus_stats_t (include/locus.h) after `version`, in its order, with where its
 * number comes from:
 *   HEAP    a counter of every heap (heap_t.stats, written by its owner through heap_count),
 *           summed over the heaps;
 *   MAXIMUM a counter of every heap, the largest over the heaps;
 *   GLOBAL  computed by stats_collect (stats.h) from the rest of the state.
 * From it: the heap's counters (heap_stats_t, state.h), the sum over the heaps and the JSON and
 * text output (stats.h), glibc's malloc_info (api.h), and a check at compile time that the
 * list and the public struct agree field by field. A new statistic is one line here, its field
 * in locus_stats_t at the same place, and (GLOBAL) its computation in stats_collect. */
#ifndef LOCUS_STATS_FIELDS_H
#define LOCUS_STATS_FIELDS_H

#include <stddef.h>

#define LOCUS_STATS_FIELDS(X) \
  X(malloc_calls, HEAP) X(free_calls, HEAP) X(remote_frees, HEAP) X(bytes_allocated, HEAP) \
  X(bytes_mapped, GLOBAL) X(bytes_committed, GLOBAL) X(bytes_discarded, GLOBAL) \
  X(discard_calls, GLOBAL) X(pages_in_use, HEAP) X(pages_free, GLOBAL) X(blocks_in_use, HEAP) \
  X(huge_in_use, HEAP) X(heaps, GLOBAL) X(heaps_abandoned, GLOBAL) X(search_words, HEAP) \
  X(search_words_max, MAXIMUM) X(searches, HEAP) X(lock_acquisitions, GLOBAL) \
  X(lock_contended, GLOBAL) X(regions, GLOBAL) X(region_bytes, GLOBAL) X(hint_calls, HEAP) \
  X(hint_same_page, HEAP) X(hint_same_line, HEAP) X(hint_same_kregion, HEAP) X(os_calls, GLOBAL)

/* The list against the public struct: same fields, same order, nothing else. */
enum stats_field_index {
  STATS_INDEX_version,
#define X(f, how) STATS_INDEX_##f,
  LOCUS_STATS_FIELDS(X)
#undef X
  STATS_INDEX_COUNT
};
#define X(f, how) \
  _Static_assert(offsetof(locus_stats_t, f) == STATS_INDEX_##f * sizeof(uint64_t), \
                 "LOCUS_STATS_FIELDS and locus_stats_t disagree at " #f);
LOCUS_STATS_FIELDS(X)
#undef X
_Static_assert(sizeof(locus_stats_t) == STATS_INDEX_COUNT * sizeof(uint64_t),
               "locus_stats_t has fields LOCUS_STATS_FIELDS lacks");

/* Per kind of field, whether a heap counts it (heap_stats_t, state.h). */
#define STATS_HEAP_HEAP(f) uint64_t f;
#define STATS_HEAP_MAXIMUM(f) uint64_t f;
#define STATS_HEAP_GLOBAL(f)

#endif
