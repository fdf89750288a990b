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

#define LOCUS_VERSION "0.2.0"

/* ---- identity ------------------------------------------------------------------------- */

/* LOCUS_VERSION: "0.2.0" */
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
  uint64_t version;          /* layout version of this struct: 5 (4 lacked os_calls, 3 the
                                hint fields, 2 the region fields, 1 the lock fields) */
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
  uint64_t regions;          /* live regions (locus_region_create minus destroy) */
  uint64_t region_bytes;     /* bytes regions hold: their chunks and big objects */
  uint64_t hint_calls;       /* locus_malloc_near/locus_calloc_near calls with a hint */
  uint64_t hint_same_page;   /* of those, results on the hint's page (page accuracy) */
  uint64_t hint_same_line;   /* results on the hint's 64-byte cache line */
  uint64_t hint_same_kregion; /* results in the hint's K-region (the design's; a page where
                                 the design has none) */
  uint64_t os_calls;         /* mmap, munmap, madvise, mremap and mprotect calls made */
} locus_stats_t;

/* Fills *out; returns 0. */
int locus_stats_get(locus_stats_t *out);
/* Writes the statistics (plus variant, version and effective options) as one JSON object
 * into buf (NUL-terminated, truncated to len). Returns the length the full text needs. */
size_t locus_stats_json(char *buf, size_t len);
/* Prints a human-readable table of the statistics to the file descriptor. */
void locus_stats_print(int fd);
/* Per-call-site statistics (counted with LOCUS_SITES=1; docs/sites.md): every heap's records
 * summed per site, largest bytes first, as one JSON object into buf (NUL-terminated, truncated
 * to len). Returns the length the full text needs. */
size_t locus_sites_json(char *buf, size_t len);

/* ---- allocation near a hint ------------------------------------------------------------
 *
 * "Put this object near that one" (Jula & Rauchwerger's allocation hints): the result is
 * placed on the hint's page, or in the hint's K-region, when the design can and has room
 * there; otherwise it is an ordinary allocation. Lists hint with the previous element, trees
 * with the parent. The hint may be any address: NULL, or memory the allocator does not know,
 * means plain malloc. The result is an ordinary object: free(), realloc() and
 * malloc_usable_size() work on it from any thread. NULL with errno ENOMEM on failure.
 * Designs that cannot place objects by address (phk and its variants) treat every hint as
 * malloc. The statistics count hinted calls and where their results landed. */
void *locus_malloc_near(size_t size, const void *hint);
/* calloc near a hint: n * size zeroed bytes (NULL, errno ENOMEM, on overflow). */
void *locus_calloc_near(size_t n, size_t size, const void *hint);

/* ---- regions with per-object free ------------------------------------------------------
 *
 * A region (arena, pool) is a set of objects freed together by one call, that still lets
 * single objects go early (Reap: Berger, Zorn & McKinley, "Reconsidering Custom Memory
 * Allocation"). Until the first free in it, a region allocates by bumping a pointer through
 * chunks (8 KiB first, growing geometrically); after a free it reuses freed space first, by
 * exact size; a clear puts it back to bump mode. Clearing or destroying costs time in
 * proportion to the region's chunks, not its objects.
 *
 * Objects are aligned like malloc's (16 bytes on x86-64). free(), realloc() and
 * malloc_usable_size() work on them; realloc() (like locus_region_realloc) keeps the object in
 * its region.
 *
 * Threads: a region is used by one thread at a time (allocation, locus_region_free/realloc,
 * clear, destroy, stats); handing it to another thread needs the program's own
 * synchronisation, like any object. Plain free() of a region object is safe from any thread
 * at any time: it is queued and applied by the region's next operation. Freeing into a region
 * that another thread destroys meanwhile is a misuse (the debug build reports it).
 *
 * Misuse ends the program with one line naming the call and the address, like a double
 * free: freeing an object of another region, using or destroying a destroyed region. */
typedef struct locus_region locus_region_t;

/* A new, empty region in bump mode. With a parent, the region is the parent's child: it is
 * destroyed, children first, when the parent is cleared or destroyed. NULL (errno ENOMEM) if
 * memory runs out. */
locus_region_t *locus_region_create(locus_region_t *parent);
/* malloc/calloc/realloc/aligned_alloc in the region: NULL with errno ENOMEM on failure
 * (aligned_alloc: EINVAL if align is not a power of two). realloc(NULL) allocates; realloc to
 * size 0 frees p and returns NULL. */
void *locus_region_malloc(locus_region_t *region, size_t size);
void *locus_region_calloc(locus_region_t *region, size_t n, size_t size);
void *locus_region_realloc(locus_region_t *region, void *p, size_t size);
void *locus_region_aligned_alloc(locus_region_t *region, size_t align, size_t size);
/* Frees one object of the region now (NULL: nothing); its space is reused by later
 * allocations of the same size. */
void locus_region_free(locus_region_t *region, void *p);
/* Destroys every child (children first), runs the cleanup callbacks (newest first) and
 * forgets them, frees every object, and goes back to bump mode. The region stays usable and
 * keeps a bounded amount of its memory (at most 256 KiB besides its first chunk). */
void locus_region_clear(locus_region_t *region);
/* Clears the region, then releases all its memory and the region itself (NULL: nothing). */
void locus_region_destroy(locus_region_t *region);
/* Registers fn(arg) to run when the region is next cleared or destroyed, after its children
 * are gone and before its memory is: callbacks run newest first, like APR's pool cleanups and
 * talloc's destructors. They must not allocate in the region being cleared. Returns 0, or
 * ENOMEM. */
int locus_region_on_destroy(locus_region_t *region, void (*fn)(void *arg), void *arg);
/* The region p (an object's address) belongs to, or NULL if p is not a live region object. */
locus_region_t *locus_region_of(const void *p);

typedef struct locus_region_counters {
  uint64_t objects_live;     /* objects allocated and not freed (in chunks and big objects) */
  uint64_t bytes_live;       /* their usable bytes */
  uint64_t bytes_held;       /* bytes the region holds: its chunks and big objects */
  uint64_t chunks;           /* bump chunks, plus one per object too big for a chunk */
  uint64_t children;         /* direct child regions */
  uint64_t frees;            /* objects freed individually since creation */
  int bump_mode;             /* 1 while nothing was freed since creation or the last clear */
} locus_region_stats_t;

/* Fills *out for the region (not its children); returns 0. */
int locus_region_stats(locus_region_t *region, locus_region_stats_t *out);

/* ---- debugging ------------------------------------------------------------------------ */

/* Walks the calling thread's heap and checks every internal invariant (block lists, free
 * lists, boundary tags, page runs). Returns 0 when consistent; in a debug build an
 * inconsistency ends the program with a message. In release builds the walk still runs. */
int locus_check_heap(void);

#ifdef __cplusplus
}
#endif

#endif /* LOCUS_H */
