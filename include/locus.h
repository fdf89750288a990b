/* locus.h — the public interface of the Locus allocators.
 *
 * Every Locus library (liblocus.so, the flagship Vam design, and each liblocus-<variant>.so)
 * exports the whole C malloc surface, the 20 replaceable C++ operators, and the calls below.
 * Programs that only LD_PRELOAD a Locus library need nothing from this header; programs that
 * want statistics, purging or the design's identity include it and link (or look the symbols
 * up with dlsym, which works whichever allocator is loaded).
 */
#ifndef LOCUS_H
#define LOCUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOCUS_VERSION "0.1.0"

/* ---- identity ------------------------------------------------------------------------- */

/* "0.1.0" */
const char *locus_version(void);
/* The library's variant name: "vam", "vam-debug", "phk", "phk-hw", ... */
const char *locus_variant(void);

/* ---- memory return -------------------------------------------------------------------- */

/* Discard every free page the heaps hold (all threads' heaps, the huge-object cache) and
 * unmap wholly free segments. Returns the number of bytes given back to the OS by this call.
 * malloc_trim(pad) does the same. */
size_t locus_purge(void);

/* ---- statistics ----------------------------------------------------------------------- */

/* Counters, summed over all heaps at the moment of the call (racy but never torn per field). */
typedef struct locus_stats {
  uint64_t version;          /* layout version of this struct: 2 (1 lacked the lock fields) */
  uint64_t malloc_calls;     /* every successful allocation, whatever the entry point */
  uint64_t free_calls;       /* every free of a non-NULL pointer */
  uint64_t remote_frees;     /* frees of objects owned by another thread's heap */
  uint64_t bytes_allocated;  /* bytes handed out and not yet freed (usable sizes) */
  uint64_t bytes_mapped;     /* address space reserved from the OS */
  uint64_t bytes_committed;  /* bytes in pages the allocator has touched and not discarded */
  uint64_t bytes_discarded;  /* total bytes ever given back with madvise/munmap */
  uint64_t discard_calls;    /* madvise/munmap calls made to give memory back */
  uint64_t pages_in_use;     /* pages holding live blocks/objects now */
  uint64_t pages_free;       /* pages in free runs (dirty or discarded) now */
  uint64_t blocks_in_use;    /* small/medium page blocks and large regions now */
  uint64_t huge_in_use;      /* huge objects now */
  uint64_t heaps;            /* heaps created: thread heaps (including abandoned ones) and
                                the one that serves huge runs to every thread */
  uint64_t heaps_abandoned;  /* heaps whose threads exited and that wait for reuse */
  uint64_t search_words;     /* bitmap designs: bitmap words inspected in total */
  uint64_t search_words_max; /* bitmap designs: most words inspected by one allocation */
  uint64_t searches;         /* bitmap designs: number of bitmap searches */
  uint64_t lock_acquisitions; /* acquisitions of the locks (registry, abandoned heaps, page
                                 managers, the huge-object pool) */
  uint64_t lock_contended;   /* of those, the ones that found the lock held and waited */
} locus_stats_t;

/* Fills *out; returns 0. */
int locus_stats_get(locus_stats_t *out);
/* Writes the statistics (plus variant, version and effective options) as one JSON object
 * into buf (NUL-terminated, truncated to len). Returns the length the full text needs. */
size_t locus_stats_json(char *buf, size_t len);
/* Prints a human-readable table of the statistics to the file descriptor. */
void locus_stats_print(int fd);

/* ---- debugging ------------------------------------------------------------------------ */

/* Walks the calling thread's heap and checks every internal invariant (block lists, free
 * lists, boundary tags, page runs). Returns 0 when consistent; in a debug build an
 * inconsistency ends the program with a message. In release builds the walk still runs. */
int locus_check_heap(void);

#ifdef __cplusplus
}
#endif

#endif /* LOCUS_H */
