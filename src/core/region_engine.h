/* region_engine.h — the engine of regions (types: region.h): the bins of freed objects,
 * chunks, big objects, allocation, free (from the region's user, or queued by free()), clear
 * and destroy. */
#ifndef LOCUS_REGION_ENGINE_H
#define LOCUS_REGION_ENGINE_H

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
    desc_list_push(&r->bigs, d);
    p = desc_start(d);
    if (zero && !clean) memset(p, 0, size);
  } else {
    if (!(p = os_obj_alloc(size, align, zero))) return NULL;
    os_obj_t *o = os_obj_of(p, "locus_region_malloc()");
    o->region = r;
    region_big_os_t *links = region_big_links(o);
    links->prev = NULL;
    links->next = r->big_os;
    if (r->big_os) region_big_links(r->big_os)->prev = o;
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
  desc_list_remove(&r->bigs, d);
  r->big_objects--;
  r->big_bytes -= desc_bytes(d);
  r->nchunks--;
  region_run_release(r, d, dead);
}

static void region_big_free_os(locus_region_t *r, os_obj_t *o) {
  region_big_os_t *links = region_big_links(o);
  if (links->prev) region_big_links(links->prev)->next = links->next; else r->big_os = links->next;
  if (links->next) region_big_links(links->next)->prev = links->prev;
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
static desc_t *region_dead[REGION_QUARANTINE];
static unsigned region_dead_next;

static void region_quarantine(desc_t *d) {
  d->kind = KIND_REGION_DEAD;
  OS_CALL(mprotect(desc_start(d), desc_bytes(d), PROT_NONE));
  lock_acquire(&region_quarantine_lock);
  desc_t *old = region_dead[region_dead_next];
  region_dead[region_dead_next] = d;
  region_dead_next = (region_dead_next + 1) % REGION_QUARANTINE;
  lock_release(&region_quarantine_lock);
  if (old) {
    OS_CALL(mprotect(desc_start(old), desc_bytes(old), PROT_READ | PROT_WRITE));
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

#endif
