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
 * run's start), or past half a segment an OS object (huge.h) that names its region. Both are
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
  os_obj_t *big_os;              /* big OS objects (region_next/prev) */
  region_callback_t *callbacks;  /* newest first */
  locus_region_t *parent, *child, *next_sibling, *prev_sibling;
  size_t next_chunk;             /* bytes of the next new chunk */
  uint64_t frees, ncallbacks, nchunks, nchildren, held;
  uint64_t big_objects, big_bytes;
};

static uint64_t region_cookie;
static _Atomic uint64_t region_salt;         /* chunk generations (salts the markers) */
static _Atomic uint64_t regions_live, region_bytes_held;

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

/* ---- the bins ------------------------------------------------------------------------------ */

static inline unsigned sized_bin_floor(size_t size) {
  unsigned e = log2_floor(size);
  return (e - 10) * 4 + (unsigned)((size >> (e - 2)) & 3);
}

/* Puts free object p (size bytes, its marker m) on its bin. */
static ALWAYS_INLINE void region_bin_push_marked(locus_region_t *r, void *p, size_t size, uintptr_t m) {
  uintptr_t *w = p;
  w[1] = m;
  if (size <= REGION_EXACT_MAX) {
    w[0] = link_encode(p, r->exact[size / REGION_GRANULE]);
    r->exact[size / REGION_GRANULE] = p;
  } else {
    unsigned b = sized_bin_floor(size);
    w[0] = link_encode(p, r->sized[b]);
    w[2] = size;
    r->sized[b] = p;
    r->sized_map |= 1u << b;
  }
}

/* Puts free object p (size bytes, in chunk d) on its bin. */
static NOINLINE void region_bin_push(locus_region_t *r, desc_t *d, void *p, size_t size) {
  region_bin_push_marked(r, p, size, region_marker(d, p));
}

static inline size_t free_object_size(const void *p, size_t bin_size) {
  return bin_size ? bin_size : ((const size_t *)p)[2];
}

/* Unlinks a fitting object from the bin whose head is *head (objects of bin_size bytes; 0:
 * sizes vary): among the first REGION_BIN_SCAN, the first of at least `need` bytes at
 * alignment `align`. (Links are safe-linked: each is stored relative to its own object.) */
#define REGION_BIN_SCAN 8
static void *region_bin_take(void **head, size_t bin_size, size_t need, size_t align) {
  void *prev = NULL, *p = *head;
  for (unsigned n = 0; p && n < REGION_BIN_SCAN; n++, prev = p, p = link_load(p)) {
    if (free_object_size(p, bin_size) >= need && !((uintptr_t)p & (align - 1))) {
      void *next = link_load(p);
      if (prev) *(uintptr_t *)prev = link_encode(prev, next); else *head = next;
      return p;
    }
  }
  return NULL;
}

/* A free object of at least `need` bytes at alignment `align` from the bins, or NULL; *size
 * gets its size. Exact bins hold one size; a sized bin's objects are scanned a little for one
 * that fits (so a freed object is found again by a request of its own size), then the next
 * non-empty bin up, all of whose objects fit, gives its first. */
static void *region_bin_pop(locus_region_t *r, size_t need, size_t align, size_t *size) {
  void *p;
  if (need <= REGION_EXACT_MAX) {
    if (!(p = region_bin_take(&r->exact[need / REGION_GRANULE], need, need, align))) return NULL;
    *size = need;
  } else {
    unsigned b = sized_bin_floor(need);
    if (!(p = region_bin_take(&r->sized[b], 0, need, align))) {
      uint32_t map = b + 1 < 32 ? r->sized_map & (~0u << (b + 1)) : 0;
      if (!map || align > REGION_GRANULE) return NULL;
      p = region_bin_take(&r->sized[b = (unsigned)__builtin_ctz(map)], 0, need, align);
    }
    if (!r->sized[b]) r->sized_map &= ~(1u << b);
    *size = free_object_size(p, 0);
  }
  ((uintptr_t *)p)[1] = 0;
  return p;
}

/* A free object bigger than `need` (at most REGION_EXACT_MAX: the exact bins above it, then
 * the sized bins), for the caller to split; NULL if there is none; *size gets its size. */
static void *region_bin_larger(locus_region_t *r, size_t need, size_t *size) {
  for (size_t i = need / REGION_GRANULE + 1; i < REGION_EXACT_BINS; i++) {
    if (!r->exact[i]) continue;
    *size = i * REGION_GRANULE;
    return region_bin_pop(r, *size, REGION_GRANULE, size);
  }
  return r->sized_map ? region_bin_pop(r, REGION_EXACT_MAX + REGION_GRANULE, REGION_GRANULE, size) : NULL;
}

/* Object p of `size` bytes keeps `need`; the rest becomes a free object. */
static void region_split(locus_region_t *r, char *p, size_t size, size_t need) {
  if (size <= need) return;
  desc_t *chunk = desc_head(segment_of(p), p);
  bit_set(chunk_bits(chunk), granule_of(chunk, p + need));
  region_bin_push(r, chunk, p + need, size - need);
}

/* ---- chunks -------------------------------------------------------------------------------- */

static void region_count_held(locus_region_t *r, int64_t bytes) {
  r->held += (uint64_t)bytes;
  atomic_fetch_add_explicit(&region_bytes_held, (uint64_t)bytes, memory_order_relaxed);
}

/* Resets chunk d to hold no object (a new chunk, or one kept by a clear). */
static void region_chunk_reset(locus_region_t *r, desc_t *d, bool clean) {
  uint64_t *bits = chunk_bits(d);
  size_t bytes = desc_bytes(d);
  if (!clean) memset(bits, 0, region_bitmap_bytes(bytes));
  d->u.rgn.salt = (atomic_fetch_add_explicit(&region_salt, 1, memory_order_relaxed) + 1) * 0x9E3779B97F4A7C15ull;
  bit_set(bits, granule_of(d, chunk_base(r, d)));
  bit_set(bits, bytes / REGION_GRANULE);
  if (!clean) d->flags &= (uint16_t)~FLAG_CLEAN;
}

static heap_t *region_heap(void) {
  heap_t *h = tl_heap;
  return h != &heap_empty ? h : heap_acquire();
}

/* Pages for a chunk or a big run of r: from the calling thread's page manager. */
static desc_t *region_run_new(locus_region_t *r, size_t bytes, size_t align, unsigned kind, bool *clean) {
  heap_t *h = region_heap();
  if (!h) return NULL;
  desc_t *d = pages_alloc(h, bytes >> os_page_shift, align, clean);
  if (!d) return NULL;
  d->kind = (uint8_t)kind;
  d->u.rgn.region = r;
  d->used = 0;
  if (r) region_count_held(r, (int64_t)bytes);
  return d;
}

/* ---- the thread's cache of free chunks ------------------------------------------------------
 * Chunks that regions let go (on clear and destroy) are kept by the thread that let them go,
 * up to HEAP_REGION_CHUNKS of them and HEAP_REGION_CHUNK_BYTES in all, for its next regions'
 * chunks of the same size (not with the immediate policy, which gives everything back at
 * once). A region per request, with children, then costs no trip through the page manager:
 * about 440 instructions to create and destroy against 1,110, and the server workload's new
 * chunks came from the page manager 30,000 times a second. They go back at thread exit and on
 * locus_purge. */

/* A free chunk of exactly `bytes` from the calling thread's cache, or NULL. */
static desc_t *region_chunk_cached(heap_t *h, size_t bytes) {
  for (unsigned i = h->nchunks; i-- > 0;) {
    desc_t *d = h->chunks[i];
    if (desc_bytes(d) != bytes) continue;
    h->chunks[i] = h->chunks[--h->nchunks];
    h->chunk_bytes -= bytes;
    return d;
  }
  return NULL;
}

/* Keeps chunk d (no region's any more) in the calling thread's cache, if there is room. */
static bool region_chunk_keep(desc_t *d) {
  heap_t *h = tl_heap;
  size_t bytes = desc_bytes(d);
  if (h == &heap_empty || h->nchunks == HEAP_REGION_CHUNKS || h->chunk_bytes + bytes > HEAP_REGION_CHUNK_BYTES ||
      opt.discard == DISCARD_IMMEDIATE)
    return false;
  d->u.rgn.region = NULL;   /* a stale handle to a region whose chunk this was is no region */
  h->chunks[h->nchunks++] = d;
  h->chunk_bytes += bytes;
  return true;
}

static void region_release_chunks(heap_t *h) {
  while (h->nchunks) {
    desc_t *d = h->chunks[--h->nchunks];
    heap_t *owner = desc_segment(d)->heap;
    if (!owner->fork_broken) pages_free(owner, d);
  }
  h->chunk_bytes = 0;
}

/* A chunk for r (NULL: a new region's first) of `bytes`: from the cache, else new pages. */
static desc_t *region_chunk_take(locus_region_t *r, size_t bytes, bool *clean) {
  heap_t *h = region_heap();
  desc_t *d = h ? region_chunk_cached(h, bytes) : NULL;
  if (!d) return region_run_new(r, bytes, 1, KIND_REGION, clean);
  *clean = false;
  d->u.rgn.region = r;
  if (r) region_count_held(r, (int64_t)bytes);
  return d;
}

static void region_quarantine(desc_t *d);

/* A chunk or big run leaves r: to the thread's cache (chunks), else back to its heap's page
 * manager (debug builds, for a destroyed region: into quarantine). */
static void region_run_release(locus_region_t *r, desc_t *d, bool dead) {
  region_count_held(r, -(int64_t)desc_bytes(d));
  if (cfg_debug && dead) { region_quarantine(d); return; }
  if (d->kind == KIND_REGION && region_chunk_keep(d)) return;
  heap_t *h = desc_segment(d)->heap;
  if (unlikely(h->fork_broken)) return;   /* a child of fork: that page manager is lost */
  pages_free(h, d);
}

/* Makes chunk d current; what the old current chunk did not use becomes a free object. */
static void region_chunk_use(locus_region_t *r, desc_t *d, bool clean) {
  desc_t *old = r->cur;
  if (old && r->bump < r->end) region_bin_push(r, old, r->bump, (size_t)(r->end - r->bump));
  r->cur = d;
  r->origin = desc_start(d);
  r->bump = chunk_base(r, d);
  r->end = desc_start(d) + desc_bytes(d);
  r->limit = r->reuse ? NULL : r->end;
  r->cur_clean = clean;
}

/* A chunk with room for `need` bytes at alignment `align` after its base: a kept one, else a
 * new one, doubling from the last up to REGION_CHUNK_MAX. */
static bool region_chunk_next(locus_region_t *r, size_t need, size_t align) {
  for (desc_t **at = &r->spare; *at; at = &(*at)->next) {
    desc_t *d = *at;
    if (desc_bytes(d) - region_bitmap_bytes(desc_bytes(d)) >= need + align) {
      *at = d->next;
      d->next = r->chunks;
      r->chunks = d;
      region_chunk_use(r, d, false);
      return true;
    }
  }
  size_t bytes = r->next_chunk;
  while (bytes - region_bitmap_bytes(bytes) < need + align) bytes *= 2;
  bool clean;
  desc_t *d = region_chunk_take(r, bytes, &clean);
  if (!d) return false;
  if (bytes < REGION_CHUNK_MAX) r->next_chunk = bytes * 2;
  region_chunk_reset(r, d, clean);
  d->next = r->chunks;
  r->chunks = d;
  r->nchunks++;
  region_chunk_use(r, d, clean);
  return true;
}

/* ---- big objects --------------------------------------------------------------------------- */

static inline bool region_big_is_run(size_t size, size_t align) {
  size_t pages = (size + os_page_size - 1) >> os_page_shift;
  return pages + align / os_page_size <= (SEGMENT_SIZE >> os_page_shift) / 2;
}

static void *region_big_alloc(locus_region_t *r, size_t size, size_t align, bool zero) {
  if (size > PTRDIFF_MAX) return NULL;
  size_t bytes = align_up(size ? size : 1, os_page_size);
  void *p;
  if (region_big_is_run(bytes, align)) {
    bool clean;
    desc_t *d = region_run_new(r, bytes, align > os_page_size ? align >> os_page_shift : 1, KIND_REGION_BIG, &clean);
    if (!d) return NULL;
    d->prev = NULL;
    d->next = r->bigs;
    if (r->bigs) r->bigs->prev = d;
    r->bigs = d;
    p = desc_start(d);
    if (zero && !clean) memset(p, 0, size);
  } else {
    if (!(p = os_obj_alloc(size, align, zero))) return NULL;
    os_obj_t *o = os_obj_of(p, "locus_region_malloc()");
    o->region = r;
    o->region_prev = NULL;
    o->region_next = r->big_os;
    if (r->big_os) r->big_os->region_prev = o;
    r->big_os = o;
    bytes = os_obj_usable(o);
    region_count_held(r, (int64_t)bytes);
  }
  r->big_objects++;
  r->big_bytes += bytes;
  r->nchunks++;
  return p;
}

static void region_big_free_run(locus_region_t *r, desc_t *d, bool dead) {
  if (d->prev) d->prev->next = d->next; else r->bigs = d->next;
  if (d->next) d->next->prev = d->prev;
  r->big_objects--;
  r->big_bytes -= desc_bytes(d);
  r->nchunks--;
  region_run_release(r, d, dead);
}

static void region_big_free_os(locus_region_t *r, os_obj_t *o) {
  if (o->region_prev) o->region_prev->region_next = o->region_next; else r->big_os = o->region_next;
  if (o->region_next) o->region_next->region_prev = o->region_prev;
  size_t bytes = os_obj_usable(o);
  r->big_objects--;
  r->big_bytes -= bytes;
  r->nchunks--;
  region_count_held(r, -(int64_t)bytes);
  o->region = NULL;
  o->state = OS_OBJ_LIVE;   /* it may have been queued by free() */
  os_obj_free((char *)o + o->offset, "free()");
}

/* ---- allocation ---------------------------------------------------------------------------- */

static inline size_t region_need(size_t size) {
  return size ? align_up(size, REGION_GRANULE) : REGION_GRANULE;
}

static void region_collect(locus_region_t *r);

/* Bump allocation of `need` bytes at alignment `align` (at most a page), in the current chunk
 * or a next one; an alignment gap becomes a free object. */
static void *region_bump(locus_region_t *r, size_t need, size_t align, bool zero) {
  char *p = (char *)align_up((uintptr_t)r->bump, align);
  if (!r->cur || p + need > r->end) {
    if (!region_chunk_next(r, need, align > REGION_GRANULE ? align : 0)) return NULL;
    p = (char *)align_up((uintptr_t)r->bump, align);
  }
  desc_t *d = r->cur;
  uint64_t *bits = (uint64_t *)r->origin;
  if (p != r->bump) {
    bit_set(bits, granule_of(d, p));
    region_bin_push(r, d, r->bump, (size_t)(p - r->bump));
  }
  r->bump = p + need;
  bit_set(bits, granule_of(d, r->bump));
  if (zero && !r->cur_clean) memset(p, 0, need);
  return p;
}

static NOINLINE void *region_alloc_slow(locus_region_t *r, size_t size, size_t align, bool zero) {
  if (atomic_load_explicit(&r->remote, memory_order_relaxed)) region_collect(r);
  if (size > REGION_BUMP_MAX || align > os_page_size || (align > REGION_GRANULE && size + align > REGION_BUMP_MAX)) {
    void *p = region_big_alloc(r, size, align, zero);
    return p ? p : alloc_failed();
  }
  size_t need = region_need(size);
  if (r->reuse) {
    /* A free object of this size; else, before a new chunk is taken, a bigger one split (so
     * a region whose freed objects are of sizes no longer asked for does not grow for it). */
    size_t got;
    void *p = region_bin_pop(r, need, align, &got);
    if (!p && align <= REGION_GRANULE && need <= REGION_EXACT_MAX && r->bump + need > r->end)
      p = region_bin_larger(r, need, &got);
    if (p) {
      /* Split when the object is at least twice the request, or the request is small: split
       * every time, with no coalescing, the sized bins filled with pieces just too small for
       * the next request (a window of random sizes to 3000 B held 35x its live bytes). */
      if (align <= REGION_GRANULE && (need <= REGION_EXACT_MAX || got >= 2 * need)) region_split(r, p, got, need);
      ASSERT(got >= need);
      if (zero) memset(p, 0, need);
      return p;
    }
  }
  void *p = region_bump(r, need, align, zero);
  return p ? p : alloc_failed();
}

static COLD NOINLINE void region_invalid(const char *call, const void *r) {
  locus_fatal(call, "destroyed or invalid region", r);
}

/* Ends the program unless r is a live region. */
static void region_check_handle(const locus_region_t *r, const char *call) {
  if (!r || segmap_get(r) != GRANULE_SEGMENT) region_invalid(call, r);
  desc_t *d = desc_head(segment_of(r), r);
  if (d->kind != KIND_REGION || d->u.rgn.region != r || r->magic != (region_cookie ^ (uintptr_t)r))
    region_invalid(call, r);
}

/* The fast paths: in bump mode what a pure bump region does, plus one bit (the object's
 * end); in reuse mode, for objects up to REGION_EXACT_MAX, a pop from the exact bin, else the
 * same bump (the order of the slow path, which only adds the bigger bins' search). */
static ALWAYS_INLINE void *region_alloc(locus_region_t *r, size_t size, bool zero, const char *call) {
  if (cfg_debug) region_check_handle(r, call);
  size_t need = align_up(size, REGION_GRANULE);
  char *p = r->bump, *next = p + need;
  if (likely(size - 1 < REGION_BUMP_MAX) && likely(!atomic_load_explicit(&r->remote, memory_order_relaxed))) {
    if (likely(next <= r->limit) ||
        (r->reuse && need <= REGION_EXACT_MAX && !r->exact[need / REGION_GRANULE] && next <= r->end)) {
      r->bump = next;
      size_t i = (size_t)(next - r->origin) / REGION_GRANULE;
      ((uint64_t *)r->origin)[i >> 6] |= 1ull << (i & 63);
      if (zero && !r->cur_clean) memset(p, 0, need);
      return p;
    }
    if (r->reuse && need <= REGION_EXACT_MAX && (p = r->exact[need / REGION_GRANULE])) {
      r->exact[need / REGION_GRANULE] = link_load(p);
      ((uintptr_t *)p)[1] = 0;
      if (zero) memset(p, 0, need);
      return p;
    }
  }
  return region_alloc_slow(r, size, REGION_GRANULE, zero);
}

/* ---- free ---------------------------------------------------------------------------------- */

/* The size of the object at granule i of chunk d (i's bit is set). */
static inline size_t region_object_size(const desc_t *d, size_t i) {
  return (bit_next(chunk_bits(d), i) - i) * REGION_GRANULE;
}

/* Whether p (in chunk d) is on a granule whose start bit is set: an object, a free object or
 * the bump point. Granules before the chunk's base (its bitmap, the region itself) never have
 * their bit set, so no test of the base is needed. */
static inline bool region_granule_started(const desc_t *d, const void *p) {
  size_t off = (size_t)((const char *)p - desc_start(d));
  return !(off & (REGION_GRANULE - 1)) && bit_get(chunk_bits(d), off / REGION_GRANULE);
}

/* Checks that p is a live object of chunk d (not yet free unless `queued`); returns its granule. */
static size_t region_object_check(locus_region_t *r, desc_t *d, void *p, bool queued, const char *call) {
  if (!region_granule_started(d, p) || (char *)p >= chunk_top(r, d)) locus_fatal(call, "invalid pointer", p);
  size_t off = (size_t)((char *)p - desc_start(d));
  uintptr_t mark = ((uintptr_t *)p)[1], m = region_marker(d, p);
  if (queued ? mark != (m | 1) : (mark | 1) == (m | 1)) locus_fatal(call, "double free", p);
  return off / REGION_GRANULE;
}

/* Frees p, an object of r (in chunk or big run d; d NULL: a big OS object), by r's user. */
static void region_free_object(locus_region_t *r, desc_t *d, void *p, bool queued, const char *call) {
  if (!d) {
    region_big_free_os(r, os_obj_find(p));
  } else if (d->kind == KIND_REGION_BIG) {
    if (p != desc_start(d) || (!queued && d->used)) locus_fatal(call, d->used ? "double free" : "invalid pointer", p);
    region_big_free_run(r, d, false);
  } else {
    size_t i = region_object_check(r, d, p, queued, call);
    region_bin_push(r, d, p, region_object_size(d, i));
  }
  r->reuse = true;
  r->limit = NULL;
  r->frees++;
}

/* Applies the frees other threads (or this one, through free()) queued. */
static NOINLINE void region_collect(locus_region_t *r) {
  void *p = atomic_exchange_explicit(&r->remote, NULL, memory_order_acquire);
  while (p) {
    void *next = *(void **)p;
    desc_t *d = segmap_get(p) == GRANULE_SEGMENT ? desc_head(segment_of(p), p) : NULL;
    region_free_object(r, d, p, true, "free()");
    p = next;
  }
}

/* The region of the object at p, whose run head is d, for a check that may not end the
 * program (NULL if p is not an object of a live region). */
static locus_region_t *region_of_object(desc_t *d, const void *p) {
  if (d->kind == KIND_REGION_BIG) return p == desc_start(d) && !d->used ? d->u.rgn.region : NULL;
  if (d->kind != KIND_REGION || !region_granule_started(d, p)) return NULL;
  locus_region_t *r = d->u.rgn.region;
  /* The bump point's bit is set too. (From another thread the bump pointer read may be an
   * older one: still beyond p if p was allocated, still not beyond it if p is the bump point.) */
  if (d == __atomic_load_n(&r->cur, __ATOMIC_RELAXED) && (const char *)p >= __atomic_load_n(&r->bump, __ATOMIC_RELAXED))
    return NULL;
  uintptr_t mark = ((const uintptr_t *)p)[1] | 1;
  return mark == (region_marker(d, p) | 1) ? NULL : r;
}

/* Pushes object p onto r's queue of frees (lock-free, from any thread; linked via word 0). */
static void region_queue_push(locus_region_t *r, void *p) {
  void *head = atomic_load_explicit(&r->remote, memory_order_relaxed);
  do *(void **)p = head;
  while (!atomic_compare_exchange_weak_explicit(&r->remote, &head, p, memory_order_release, memory_order_relaxed));
}

/* free() of a region object, from any thread: checked as far as can be without the region's
 * state, marked, and queued for the region's next operation. */
static NOINLINE void region_free_queued(desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_REGION_DEAD) locus_fatal(call, "object of a destroyed region", p);
  locus_region_t *r = d->u.rgn.region;
  if (d->kind == KIND_REGION_BIG) {
    if (p != desc_start(d)) locus_fatal(call, "invalid pointer", p);
    if (__atomic_exchange_n(&d->used, 1, __ATOMIC_RELAXED)) locus_fatal(call, "double free", p);
  } else {
    if (!region_granule_started(d, p)) locus_fatal(call, "invalid pointer", p);
    uintptr_t *w = p, m = region_marker(d, p);
    if ((w[1] | 1) == (m | 1)) locus_fatal(call, "double free", p);
    w[1] = m | 1;
  }
  region_queue_push(r, p);
}

/* free() of a big region OS object: queued like the rest. */
static void region_free_queued_os(os_obj_t *o, void *p) {
  o->state = OS_OBJ_QUEUED;
  region_queue_push(o->region, p);
}

/* Usable size of region object p (run head d), from any thread. */
static size_t region_usable(desc_t *d, const void *p, const char *call) {
  if (d->kind == KIND_REGION_DEAD) locus_fatal(call, "object of a destroyed region", p);
  if (d->kind == KIND_REGION_BIG) {
    if (p != desc_start(d)) locus_fatal(call, "invalid pointer", p);
    return desc_bytes(d);
  }
  if (!region_of_object(d, p)) locus_fatal(call, "invalid pointer", p);
  return region_object_size(d, granule_of(d, p));
}

/* ---- clear and destroy ------------------------------------------------------------------- */

/* Debug builds: a destroyed region's runs stay inaccessible for a while (PROT_NONE, kind
 * KIND_REGION_DEAD), so that a use after destroy faults and a free() into it is reported. */
static lock_t region_quarantine_lock;
static desc_t *region_dead[REGION_QUARANTINE];
static unsigned region_dead_next;

static void region_quarantine(desc_t *d) {
  d->kind = KIND_REGION_DEAD;
  mprotect(desc_start(d), desc_bytes(d), PROT_NONE);
  lock_acquire(&region_quarantine_lock);
  desc_t *old = region_dead[region_dead_next];
  region_dead[region_dead_next] = d;
  region_dead_next = (region_dead_next + 1) % REGION_QUARANTINE;
  lock_release(&region_quarantine_lock);
  if (old) {
    mprotect(desc_start(old), desc_bytes(old), PROT_READ | PROT_WRITE);
    heap_t *h = desc_segment(old)->heap;
    if (!h->fork_broken) pages_free(h, old);
  }
}

/* Runs r's callbacks, newest first, and forgets them. */
static void region_run_callbacks(locus_region_t *r) {
  while (r->callbacks) {
    region_callback_t *c = r->callbacks;
    r->callbacks = c->next;
    r->ncallbacks--;
    c->fn(c->arg);
  }
}

static void region_release(locus_region_t *r, bool keep);

/* Destroys every descendant of r, each after its own children. */
static void region_destroy_children(locus_region_t *r) {
  while (r->child) {
    locus_region_t *c = r->child;
    while (c->child) c = c->child;
    region_release(c, false);
  }
}

/* The end of a clear (keep) or a destroy: r has no children. Callbacks run, big objects go,
 * chunks go except (keep) the first and up to REGION_KEEP bytes of others. */
static void region_release(locus_region_t *r, bool keep) {
  region_run_callbacks(r);
  /* Queued frees (the callbacks' too) are of objects freed with the rest. */
  atomic_store_explicit(&r->remote, NULL, memory_order_relaxed);
  while (r->bigs) region_big_free_run(r, r->bigs, !keep);
  while (r->big_os) region_big_free_os(r, r->big_os);
  desc_t *first = r->first, *list = r->chunks, *spare = r->spare;
  r->chunks = r->spare = NULL;
  size_t kept = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (desc_t *d = pass ? spare : list, *next; d; d = next) {
      next = d->next;
      if (d == first) continue;
      if (keep && kept + desc_bytes(d) <= REGION_KEEP) {
        kept += desc_bytes(d);
        region_chunk_reset(r, d, false);
        d->next = r->spare;
        r->spare = d;
      } else {
        r->nchunks--;
        region_run_release(r, d, !keep);
      }
    }
  }
  if (keep) {
    memset(r->exact, 0, sizeof r->exact);
    memset(r->sized, 0, sizeof r->sized);
    r->sized_map = 0;
    r->reuse = false;
    r->cur = NULL;
    region_chunk_reset(r, first, false);
    first->next = NULL;
    r->chunks = first;
    region_chunk_use(r, first, false);
    return;
  }
  locus_region_t *parent = r->parent;
  if (parent) {
    if (r->prev_sibling) r->prev_sibling->next_sibling = r->next_sibling; else parent->child = r->next_sibling;
    if (r->next_sibling) r->next_sibling->prev_sibling = r->prev_sibling;
    parent->nchildren--;
  }
  r->magic = 0;
  atomic_fetch_sub_explicit(&regions_live, 1, memory_order_relaxed);
  region_run_release(r, first, true);   /* the region itself: last */
}

/* ---- the API ------------------------------------------------------------------------------- */

LOCUS_API locus_region_t *locus_region_create(locus_region_t *parent) {
  if (parent) region_check_handle(parent, "locus_region_create()");
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  bool clean;
  desc_t *d = region_chunk_take(NULL, REGION_CHUNK_MIN, &clean);
  if (!d) return alloc_failed();
  locus_region_t *r = (locus_region_t *)(desc_start(d) + region_bitmap_bytes(REGION_CHUNK_MIN));
  if (!clean) memset(r, 0, sizeof *r);
  r->magic = region_cookie ^ (uintptr_t)r;
  region_count_held(r, REGION_CHUNK_MIN);
  r->first = d;
  r->next_chunk = REGION_CHUNK_MIN * 2;
  d->u.rgn.region = r;
  d->next = NULL;
  r->chunks = d;
  r->nchunks = 1;
  region_chunk_reset(r, d, clean);
  region_chunk_use(r, d, clean);
  if (parent) {
    r->parent = parent;
    r->next_sibling = parent->child;
    if (parent->child) parent->child->prev_sibling = r;
    parent->child = r;
    parent->nchildren++;
  }
  atomic_fetch_add_explicit(&regions_live, 1, memory_order_relaxed);
  return r;
}

LOCUS_API void *locus_region_malloc(locus_region_t *r, size_t size) {
  return region_alloc(r, size, false, "locus_region_malloc()");
}

LOCUS_API void *locus_region_calloc(locus_region_t *r, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) return alloc_failed();
  return region_alloc(r, total, true, "locus_region_calloc()");
}

LOCUS_API void *locus_region_aligned_alloc(locus_region_t *r, size_t align, size_t size) {
  if (cfg_debug) region_check_handle(r, "locus_region_aligned_alloc()");
  if (!is_pow2(align)) { errno = EINVAL; return NULL; }
  if (size > PTRDIFF_MAX - align) return alloc_failed();
  return region_alloc_slow(r, size, align < REGION_GRANULE ? REGION_GRANULE : align, false);
}

/* The run head of region object p, NULL for a big OS object; ends the program if p is not
 * one of r's objects (r NULL: any region's). */
static desc_t *region_locate(locus_region_t *r, void *p, const char *call) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) {
    desc_t *d = desc_head(segment_of(p), p);
    if (d->kind == KIND_REGION_DEAD) locus_fatal(call, "object of a destroyed region", p);
    /* A page-aligned pointer to a free run: most likely a big object freed before. */
    if (d->kind == KIND_FREE && !((uintptr_t)p & (os_page_size - 1))) locus_fatal(call, "double free", p);
    if (!kind_is_region(d->kind)) free_not_object(d, p, call);
    if (r && d->u.rgn.region != r) locus_fatal(call, "object of another region", p);
    return d;
  }
  if (g == GRANULE_NONE) locus_fatal(call, "invalid pointer", p);
  os_obj_t *o = os_obj_of(p, call);
  if (!o->region) locus_fatal(call, "invalid pointer", p);
  if (r && o->region != r) locus_fatal(call, "object of another region", p);
  return NULL;
}

/* locus_region_free of anything but a live chunk object of r: NULL, big objects, misuse. */
static NOINLINE void region_free_other(locus_region_t *r, void *p) {
  if (!p) return;
  region_free_object(r, region_locate(r, p, "locus_region_free()"), p, false, "locus_region_free()");
}

/* The checks of region_object_check in few steps, for the common case: a live object of one
 * of r's chunks (anything else takes region_free_other, which names the misuse). Granules
 * before a chunk's base (its bitmap, the region itself) never have their bit set. */
LOCUS_API void locus_region_free(locus_region_t *r, void *p) {
  if (cfg_debug) region_check_handle(r, "locus_region_free()");
  size_t off;
  desc_t *d;
  if (unlikely(segmap_get(p) != GRANULE_SEGMENT) ||
      unlikely((d = desc_locate(segment_of(p), p, &off))->kind != KIND_REGION || d->u.rgn.region != r)) {
    region_free_other(r, p);
    return;
  }
  const uint64_t *bits = chunk_bits(d);
  size_t i = off / REGION_GRANULE;
  uintptr_t *w = p, m = region_marker(d, p);
  if (unlikely((off & (REGION_GRANULE - 1)) || !((bits[i >> 6] >> (i & 63)) & 1) ||
               (d == r->cur && (char *)p >= r->bump) || (w[1] | 1) == (m | 1))) {
    region_free_other(r, p);
    return;
  }
  size_t j = i + 1;
  uint64_t word = bits[j >> 6] & (~0ull << (j & 63));
  if (unlikely(!word)) j = bit_next(bits, i);
  else j = (j & ~(size_t)63) + (size_t)__builtin_ctzll(word);
  region_bin_push_marked(r, p, (j - i) * REGION_GRANULE, m);
  r->reuse = true;
  r->limit = NULL;
  r->frees++;
}

/* realloc of region object p (of r, checked by the caller), by r's user: in place when the
 * object holds `size` without wasting more than half of it, else moved within the region. */
static void *region_realloc(locus_region_t *r, desc_t *d, void *p, size_t size, const char *call) {
  size_t usable = d ? region_usable(d, p, call) : os_obj_usable(os_obj_of(p, call));
  if (size <= usable && (size > usable / 2 || usable <= REGION_GRANULE)) return p;
  void *q = region_alloc(r, size, false, call);
  if (!q) return NULL;
  memcpy(q, p, usable < size ? usable : size);
  region_free_object(r, d, p, false, call);
  return q;
}

LOCUS_API void *locus_region_realloc(locus_region_t *r, void *p, size_t size) {
  if (!p) return locus_region_malloc(r, size);
  desc_t *d = region_locate(r, p, "locus_region_realloc()");
  if (size == 0) {
    region_free_object(r, d, p, false, "locus_region_realloc()");
    return NULL;
  }
  if (size > PTRDIFF_MAX) return alloc_failed();
  return region_realloc(r, d, p, size, "locus_region_realloc()");
}

LOCUS_API void locus_region_clear(locus_region_t *r) {
  region_check_handle(r, "locus_region_clear()");
  region_destroy_children(r);
  region_release(r, true);
}

LOCUS_API void locus_region_destroy(locus_region_t *r) {
  if (!r) return;
  region_check_handle(r, "locus_region_destroy()");
  region_destroy_children(r);
  region_release(r, false);
}

LOCUS_API int locus_region_on_destroy(locus_region_t *r, void (*fn)(void *), void *arg) {
  region_check_handle(r, "locus_region_on_destroy()");
  region_callback_t *c = region_alloc(r, sizeof *c, false, "locus_region_on_destroy()");
  if (!c) return ENOMEM;
  *c = (region_callback_t){ fn, arg, r->callbacks };
  r->callbacks = c;
  r->ncallbacks++;
  return 0;
}

LOCUS_API locus_region_t *locus_region_of(const void *p) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) return region_of_object(desc_head(segment_of(p), p), p);
  if (g == GRANULE_NONE) return NULL;
  os_obj_t *o = os_obj_find(p);
  return o && o->state == OS_OBJ_LIVE ? o->region : NULL;
}

LOCUS_API int locus_region_stats(locus_region_t *r, locus_region_stats_t *s) {
  region_check_handle(r, "locus_region_stats()");
  if (atomic_load_explicit(&r->remote, memory_order_relaxed)) region_collect(r);
  memset(s, 0, sizeof *s);
  uint64_t objects = 0, bytes = 0;
  for (desc_t *d = r->chunks; d; d = d->next) {
    char *base = chunk_base(r, d), *top = chunk_top(r, d);
    const uint64_t *bits = chunk_bits(d);
    for (size_t i = granule_of(d, base), end = granule_of(d, top); i < end; i = (i | 63) + 1) {
      uint64_t w = bits[i >> 6] & (~0ull << (i & 63));
      if ((i | 63) >= end) w &= ~0ull >> (63 - ((end - 1) & 63));
      objects += (uint64_t)__builtin_popcountll(w);
    }
    bytes += (uint64_t)(top - base);
  }
  /* The callback records live in the region but are not the program's objects. */
  size_t record = region_need(sizeof(region_callback_t));
  uint64_t free_objects = 0, free_bytes = 0;
  for (size_t i = 1; i < REGION_EXACT_BINS; i++)
    for (void *p = r->exact[i]; p; p = link_load(p)) free_objects++, free_bytes += i * REGION_GRANULE;
  for (unsigned b = 0; b < REGION_SIZED_BINS; b++)
    for (void *p = r->sized[b]; p; p = link_load(p)) free_objects++, free_bytes += free_object_size(p, 0);
  s->objects_live = objects - free_objects - r->ncallbacks + r->big_objects;
  s->bytes_live = bytes - free_bytes - r->ncallbacks * record + r->big_bytes;
  s->bytes_held = r->held;
  s->chunks = r->nchunks;
  s->children = r->nchildren;
  s->frees = r->frees;
  s->bump_mode = !r->reuse;
  return 0;
}

/* ---- what the core's free paths call ------------------------------------------------------- */

/* Realloc of p, a region object (core realloc: the caller is the region's user). */
static void *region_realloc_any(void *p, size_t size) {
  desc_t *d = region_locate(NULL, p, "realloc()");
  locus_region_t *r = d ? d->u.rgn.region : os_obj_of(p, "realloc()")->region;
  if (cfg_debug) region_check_handle(r, "realloc()");
  return region_realloc(r, d, p, size, "realloc()");
}

static void region_global_init(void) {
  region_cookie = (free_marker_cookie * 0xD6E8FEB86659FD93ull) & ~(uint64_t)0xF;
}

static void region_fork_child(void) { lock_reset(&region_quarantine_lock); }

#endif
