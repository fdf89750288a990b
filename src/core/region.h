/* region.h — regions with per-object free (Reap: Berger, Zorn & McKinley, "Reconsidering
 * Custom Memory Allocation"), one building block for every design: the locus_region_* API.
 *
 * A region allocates by bumping a pointer through chunks until something in it is freed; from
 * then on it reuses freed space first (size-segregated, found in O(1)); a clear frees every
 * object at once and goes back to bump mode. Chunks are runs of pages from the calling
 * thread's page manager (KIND_REGION), found from any address through the same descriptors
 * as everything else, so the malloc/free fast paths of the designs are untouched: a region
 * object is a kind the design's free hands to the core (core_free, free_foreign_heap).
 *
 * Chunk layout: [start bitmap][objects ...]; the first chunk also holds the region itself,
 * right after its bitmap. Objects are headerless: bit i of the bitmap is set iff the 16-byte
 * granule i of the chunk starts an object, a free object, or the bump point, and the bit of
 * the chunk's end is always set; so an object's size is the distance to the next set bit, and
 * a bump allocation costs one bit set (its end), no header store.
 *
 * Objects over REGION_BUMP_MAX get a run of their own (KIND_REGION_BIG, the object at the
 * run's start), or past half a segment an OS object (osobj.h) that names its region. Both are
 * on the region's list of big objects and go back to the system as soon as they are freed.
 *
 * Invariants (region_check walks them):
 *  - Every chunk of r is on r->chunks (the current one, r->cur, first) or r->spare (kept by a
 *    clear, unused since); d->u.rgn.region == r for each, and for r's big runs.
 *  - In a chunk, the objects area is [base, top): top is r->bump for r->cur, the chunk's end
 *    for every other used chunk (the tail left when a chunk is retired is a free object).
 *    Granules in it are tiled by objects, free objects and (first chunk) nothing else.
 *  - A free object is on exactly one bin: exact[size / 16] up to REGION_EXACT_MAX, else
 *    sized[b] (with its size in word 2) where b is the bin whose range holds its size; it
 *    holds its bin link in word 0 and region_marker() in word 1. (Nothing counts them: the
 *    statistics walk the bins, so freeing and reusing update no counter.)
 *  - reuse is false while nothing was freed since creation or the last clear: then the bins
 *    hold only chunk tails and alignment gaps, and allocation never looks at them. limit is
 *    end while reuse is false, NULL after.
 *  - r->remote is a stack (linked through word 0) of objects free() queued from any thread,
 *    each marked region_marker() | 1: applied by the region's next operation.
 */
#ifndef LOCUS_REGION_H
#define LOCUS_REGION_H

#include <sys/mman.h>

#define REGION_CHUNK_MIN   8192u          /* the first chunk (the seed: chunks of at least 8K) */
#define REGION_CHUNK_MAX   (256u << 10)   /* chunks double up to this */
#define REGION_BUMP_MAX    16384u         /* bigger objects get their own run */
#define REGION_EXACT_MAX   1024u          /* freed objects up to this: one bin per 16 B */
#define REGION_KEEP        (256u << 10)   /* a clear keeps at most this besides the first chunk */
#define REGION_GRANULE     16u
#define REGION_EXACT_BINS  (REGION_EXACT_MAX / REGION_GRANULE + 1)
#define REGION_SIZED_BINS  17             /* 4 per doubling, (1 KiB, 16 KiB] */
#define REGION_QUARANTINE  64             /* debug builds: destroyed runs kept inaccessible */

typedef struct region_callback region_callback_t;
struct region_callback {
  void (*fn)(void *);
  void *arg;
  region_callback_t *next;       /* older */
};

struct locus_region {
  /* The allocation path's line. */
  char *bump, *end;              /* current chunk: next object, end of its objects area */
  char *limit;                   /* end in bump mode, NULL once reuse is on: the fast path's
                                    one test covers both */
  char *origin;                  /* current chunk's start: its bitmap, granule 0 */
  _Atomic(void *) remote;        /* objects free() queued, from any thread */
  bool reuse;                    /* something was freed since creation or the last clear */
  bool cur_clean;                /* the current chunk's unbumped part reads as zero */
  uint64_t magic;                /* region_cookie ^ address while the region lives */
  desc_t *cur, *first;           /* current chunk; the chunk that holds this struct */
  void *exact[REGION_EXACT_BINS];
  void *sized[REGION_SIZED_BINS];
  uint32_t sized_map;            /* bit b: sized[b] is not empty */
  desc_t *chunks, *spare;        /* chunks in use (linked via next) / kept by a clear */
  desc_t *bigs;                  /* big runs (next/prev) */
  os_obj_t *big_os;              /* big OS objects (linked through region_big_links) */
  region_callback_t *callbacks;  /* newest first */
  locus_region_t *parent, *child, *next_sibling, *prev_sibling;
  size_t next_chunk;             /* bytes of the next new chunk */
  uint64_t frees, ncallbacks, nchunks, nchildren, held;
  uint64_t big_objects, big_bytes;
};

static _Atomic uint64_t region_salt;         /* chunk generations (salts the markers) */
static _Atomic uint64_t regions_live, region_bytes_held;

/* A big object in its own mapping is on its region's list through links the region keeps in
 * the object's header page (os_obj_owner_area, osobj.h). */
typedef struct region_big_os { os_obj_t *next, *prev; } region_big_os_t;
_Static_assert(sizeof(region_big_os_t) <= OS_OBJ_OWNER_BYTES, "the links fit the owner's area");
static inline region_big_os_t *region_big_links(os_obj_t *o) { return os_obj_owner_area(o); }

/* ---- chunk geometry ------------------------------------------------------------------------ */

static inline size_t region_bitmap_bytes(size_t chunk) {
  size_t bits = chunk / REGION_GRANULE + 1;   /* + the chunk end's bit */
  return align_up((bits + 63) / 64 * 8, REGION_GRANULE);
}
static inline uint64_t *chunk_bits(const desc_t *d) { return (uint64_t *)desc_start(d); }
static inline void bit_set(uint64_t *bits, size_t i) { bits[i >> 6] |= 1ull << (i & 63); }
static inline void bit_clear(uint64_t *bits, size_t i) { bits[i >> 6] &= ~(1ull << (i & 63)); }
static inline bool bit_get(const uint64_t *bits, size_t i) {
  return (__atomic_load_n(&bits[i >> 6], __ATOMIC_RELAXED) >> (i & 63)) & 1;
}
/* The first set bit after i (there is one: the chunk end's). */
static size_t bit_next(const uint64_t *bits, size_t i) {
  i++;
  uint64_t w = bits[i >> 6] & (~0ull << (i & 63));
  while (!w) w = bits[(i = (i | 63) + 1) >> 6];
  return (i & ~(size_t)63) + (size_t)__builtin_ctzll(w);
}
static inline size_t granule_of(const desc_t *d, const void *p) {
  return (size_t)((const char *)p - desc_start(d)) / REGION_GRANULE;
}
/* Where objects start in chunk d of r. */
static inline char *chunk_base(const locus_region_t *r, const desc_t *d) {
  char *base = desc_start(d) + region_bitmap_bytes(desc_bytes(d));
  return d == r->first ? base + align_up(sizeof(locus_region_t), REGION_GRANULE) : base;
}
static inline char *chunk_top(const locus_region_t *r, const desc_t *d) {
  return d == r->cur ? r->bump : desc_start(d) + desc_bytes(d);
}

/* The double-free marker of a free object (bit 0 is clear: set, it means queued by free()).
 * Salted per chunk generation, so a marker left in memory from before a clear never matches
 * an object after it; the salt is the generation number times an odd constant, so that the
 * stale marker differs from the current one in every byte: bump allocation does not clear the
 * word, and with the generation merely XORed into bits 32-47, a program that wrote one byte
 * of a new object over a stale marker made the current marker one time in 256 (a false
 * "double free" when the object was then freed). */
static inline uintptr_t region_marker(const desc_t *d, const void *p) {
  return ((uintptr_t)p ^ region_cookie ^ d->u.rgn.salt) & ~(uintptr_t)1;
}

#endif
