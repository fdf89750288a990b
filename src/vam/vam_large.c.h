/* vam_large.c.h — large objects (VAM_MEDIUM_MAX to VAM_LARGE_MAX): chunks with headers in
 * large areas, binned by size, split and coalesced (the DLmalloc-like part of Vam). */

/* Bin 0: runts (free chunks too small for any large object); then one bin per 16 bytes; the
 * last: anything bigger than the largest object's chunk (a free area's remainder). */
_Static_assert(LARGE_BINS <= BITMAP_MAX_WORDS * 64, "the large bins' bitmap");
static inline unsigned large_bin(uint32_t chunk_size) {
  if (chunk_size < LARGE_MIN_CHUNK) return 0;
  return chunk_size > LARGE_MAX_CHUNK ? LARGE_BINS - 1 : (chunk_size - LARGE_MIN_CHUNK) / 16 + 1;
}
static inline uint32_t chunk_size(const chunk_t *c) { return c->size & ~CHUNK_FLAGS; }
static inline chunk_t *chunk_next(chunk_t *c) { return (chunk_t *)((char *)c + chunk_size(c)); }
/* A header's check word: the cookie, the header's address, and its prev_size in the high
 * half, so that the header alone proves both where it is and, to its owner, the size of the
 * chunk before it: an overflow of the object before into this header's prev_size is seen by a
 * free of this chunk without a read of the one before (a cold line in most frees; the other
 * neighbour's header, which a free reads, proves this one's size). */
static inline uint64_t chunk_seal(const chunk_t *c, uint32_t prev_size) {
  return chunk_cookie ^ (uintptr_t)c ^ ((uint64_t)prev_size << 32);
}
/* The whole check: for the owner's thread only, since the owner rewrites prev_size and the
 * check word (chunk_set_prev) when the chunk before is split or merged, even while this one is
 * in use. */
static inline bool chunk_valid(const chunk_t *c) { return c->check == chunk_seal(c, c->prev_size); }
/* The check's low half, which never changes while the header lives: c is a header this
 * allocator wrote at this address (any thread). */
static inline bool chunk_placed(const chunk_t *c) {
  return (uint32_t)(__atomic_load_n(&c->check, __ATOMIC_RELAXED) ^ chunk_cookie ^ (uintptr_t)c) == 0;
}
static inline void chunk_set_prev(chunk_t *c, uint32_t prev_size) {
  c->prev_size = prev_size;
  __atomic_store_n(&c->check, chunk_seal(c, prev_size), __ATOMIC_RELAXED);   /* (chunk_placed) */
}

/* A header the allocator is about to trust (a free chunk taken from a bin, a neighbour to
 * merge with): a corrupted one is reported here, as corruption, rather than later as an
 * invalid pointer against an object the program allocated. */
static inline void chunk_trust(const chunk_t *c, const char *call) {
  if (unlikely(!chunk_valid(c))) locus_fatal(call, "corrupted large-object header", (const char *)c + CHUNK_HEADER);
}

static void chunk_bin_insert(heap_t *h, chunk_t *c) {
  unsigned b = large_bin(chunk_size(c));
  c->prev = NULL;
  c->next = h->d.bins[b];
  if (c->next) c->next->prev = c;
  h->d.bins[b] = c;
  bitmap2_set(&h->d.binmap, b);
}

static void chunk_bin_remove(heap_t *h, chunk_t *c) {
  unsigned b = large_bin(chunk_size(c));
  if (c->prev) c->prev->next = c->next; else h->d.bins[b] = c->next;
  if (c->next) c->next->prev = c->prev;
  if (!h->d.bins[b]) bitmap2_clear(&h->d.binmap, b);
}

static inline void chunk_set(chunk_t *c, uint32_t prev_size, uint32_t size) {
  c->size = size;
  chunk_set_prev(c, prev_size);
}

static chunk_t *large_area_new(heap_t *h) {
  bool clean;
  desc_t *r = pages_alloc(h, VAM_AREA_PAGES, 1, &clean);
  if (!r) return NULL;
  if (clean) vam_tcache_trim(h);   /* (vam_tcache_trim) */
  r->kind = KIND_VAM_LARGE;
  page_tag_t *g = tag_of_desc(r);
  for (unsigned i = 0; i < VAM_AREA_PAGES; i++) {   /* (vam_free_other) */
    ASSERT(g[i].bound == 0);   /* (blocks clear their bounds before their pages go back) */
    g[i].key = vam_area_key(i);
  }
  heap_count(h, blocks_in_use, 1);
  char *start = desc_start(r), *end = start + desc_bytes(r);
  chunk_t *c = (chunk_t *)start, *sentinel = (chunk_t *)(end - CHUNK_HEADER);
  uint32_t size = (uint32_t)(end - CHUNK_HEADER - start);
  chunk_set(c, 0, size);
  chunk_set(sentinel, size, CHUNK_INUSE);
  return c;
}

/* Splits c (not in a bin, marked in use by the caller) to `want` bytes if the rest can be a
 * free chunk (LARGE_MIN_SPLIT: a runt if it is smaller than any large object); the rest goes
 * to its bin. */
static void chunk_split(heap_t *h, chunk_t *c, uint32_t want) {
  uint32_t have = chunk_size(c);
  if (have - want < LARGE_MIN_SPLIT) return;
  chunk_t *rest = (chunk_t *)((char *)c + want);
  chunk_set(rest, want, have - want);
  chunk_set_prev(chunk_next(rest), have - want);
  c->size = want | (c->size & CHUNK_FLAGS);
  /* The rest may border a free chunk (after an in-place shrink): merge it. */
  chunk_t *after = chunk_next(rest);
  if (!(after->size & CHUNK_INUSE)) {
    chunk_bin_remove(h, after);
    rest->size += chunk_size(after);
    chunk_set_prev(chunk_next(rest), chunk_size(rest));
  }
  chunk_bin_insert(h, rest);
}

/* Mitigation QUARANTINE: the headers of the large chunks waiting in h's quarantine, checked at
 * each large allocation. The flagship frees a chunk at once and reads its header at the next
 * allocation that reaches it, so a header overwritten after the free is reported there; the
 * quarantine holds the chunk back, and without this check it would hide the same overwrite
 * until the chunk leaves the ring (the secure build catches what the flagship catches). */
static void vam_quarantine_check_headers(heap_t *h) {
  if (!mitigation(QUARANTINE)) return;
  const vam_quarantined_t *ring = vam_quarantine_of(h)->ring;
  for (unsigned i = 0; i < VAM_QUARANTINE; i++) {
    const char *p = ring[i].p;
    if (!p || ring[i].block) continue;   /* empty, or a slot of the free fast path's blocks */
    const desc_t *d = desc_of_page(segment_of(p), p);
    if ((d - d->back)->kind == KIND_VAM_LARGE && !chunk_valid((const chunk_t *)(p - CHUNK_HEADER)))
      locus_fatal("malloc()", "corrupted large-object header", p);
  }
}

/* ---- the thread cache's large side (vam.h: vam_lbin_t) ------------------------------------ */

/* Where cached chunk c holds its link to the next of its class: its payload's first word. */
static inline uintptr_t *vam_lcache_link_at(const chunk_t *c) { return (uintptr_t *)((char *)c + CHUNK_HEADER); }

/* Caches chunk c (checked: in use, not cached), just freed by its heap's own thread; false if
 * the cache's bytes would go over its cap (the room taken first and given back then: one
 * subtraction and a branch on its sign, as the small side's). */
static inline bool vam_lcache_put(heap_t *h, chunk_t *c) {
  uint32_t bytes = chunk_size(c);
  if (unlikely((h->d.lcache_room -= (int32_t)bytes) < 0)) {
    h->d.lcache_room += (int32_t)bytes;
    return false;
  }
  vam_lbin_t *b = &h->d.lbin[vam_lclass_floor(bytes - CHUNK_HEADER)];
  c->size |= CHUNK_CACHED;
  *vam_lcache_link_at(c) = vam_tcache_link(b->head);
  b->head = c;
  return true;
}

/* The chunk after cached chunk c in its class (NULL after the last). */
static inline chunk_t *vam_lcache_next(const chunk_t *c) { return vam_tcache_next(vam_lcache_link_at(c)); }

/* The last chunk cached in b (not empty), taken off; its bytes are h's room again. */
static inline chunk_t *vam_lcache_pop(heap_t *h, vam_lbin_t *b) {
  chunk_t *c = b->head;
  b->head = vam_lcache_next(c);
  h->d.lcache_room += (int32_t)chunk_size(c);
  return c;
}

static void chunk_release(heap_t *h, desc_t *r, chunk_t *c, const char *call);

/* Every cached chunk freed for real (thread exit, purge). */
static void vam_lcache_flush(heap_t *h) {
  if (!cfg_tcache) return;
  for (unsigned k = 0; k < VAM_LCLASSES; k++) {
    vam_lbin_t *b = &h->d.lbin[k];
    while (b->head) {
      chunk_t *c = vam_lcache_pop(h, b);
      chunk_release(h, desc_head(segment_of(c), c), c, "free()");
    }
  }
}

/* The chunk bytes an object of size needs: its header and itself, to 16 bytes (chunk_fit), and
 * never less than the smallest large chunk (chunk_want). */
static inline uint32_t chunk_fit(size_t size) { return (uint32_t)align_up(size + CHUNK_HEADER, 16); }
static inline uint32_t chunk_want(size_t size) {
  uint32_t want = chunk_fit(size);
  return want < LARGE_MIN_CHUNK ? LARGE_MIN_CHUNK : want;
}

/* Chunk c (in use, its size final) handed out whole: counted, its payload returned. */
static ALWAYS_INLINE void *chunk_handed(heap_t *h, chunk_t *c) {
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, chunk_size(c) - CHUNK_HEADER);
  heap_debug_tick(h);
  return (char *)c + CHUNK_HEADER;
}

/* Chunk c, in use and at least want bytes, handed out as an object of size bytes: the rest
 * split off, counted. */
static ALWAYS_INLINE void *chunk_hand_out(heap_t *h, chunk_t *c, size_t size, uint32_t want, bool zero) {
  if (chunk_size(c) - want >= LARGE_MIN_SPLIT) chunk_split(h, c, want);
  size_t usable = chunk_size(c) - CHUNK_HEADER;
  if (zero) memset((char *)c + CHUNK_HEADER, 0, usable < size ? usable : size);
  return chunk_handed(h, c);
}

/* chunk_hand_out out of line, for a cached chunk to split or zero (vam_alloc_large's hit
 * path then makes no call and saves no register). */
static NOINLINE void *chunk_hand_out_cold(heap_t *h, chunk_t *c, size_t size, bool zero) {
  return chunk_hand_out(h, c, size, chunk_want(size), zero);
}

static NOINLINE void *vam_alloc_large_slow(heap_t *h, size_t size, bool zero);

/* vam_alloc_large when the last chunk of size's class b is too small for it: that chunk is
 * freed for real (merged with its free neighbours, into the bins) and the object comes from
 * the bins. Left cached, such chunks filled their classes (the ones that fit are the ones
 * taken): random sizes (randsmall) then found a fitting chunk in 23% of their large
 * allocations and cached 23% of their large frees. */
static NOINLINE void *vam_alloc_large_evict(heap_t *h, vam_lbin_t *b, size_t size, bool zero) {
  chunk_t *c = vam_lcache_pop(h, b);
  chunk_release(h, desc_head(segment_of(c), c), c, "malloc()");
  return vam_alloc_large_slow(h, size, zero);
}

/* A large object from the thread cache if the last chunk freed into size's own class fits it
 * (the same size again, most often), else from the bins. Not from the class above, which
 * always fits: split for a smaller request, its chunks left rests too small for any large
 * object, and random sizes (randsmall) took 14% more peak memory. The hit path calls
 * nothing (no register saves): a chunk to split or zero goes out of line. */
static NOINLINE void *vam_alloc_large(heap_t *h, size_t size, bool zero) {
  if (!cfg_tcache) return vam_alloc_large_slow(h, size, zero);
  vam_lbin_t *b = &h->d.lbin[vam_lclass_floor(size)];
  chunk_t *c = b->head;
  if (!c) return vam_alloc_large_slow(h, size, zero);
  uint32_t have = chunk_size(c);
  if (have - CHUNK_HEADER < size) return vam_alloc_large_evict(h, b, size, zero);
  vam_lcache_pop(h, b);
  chunk_trust(c, "malloc()");   /* written to after its free: reported here, as from the bins */
  c->size &= ~CHUNK_CACHED;
  /* (chunk_fit, not chunk_want: an aligned allocation's request below LARGE_MIN_CHUNK only goes
   * out of line, where chunk_want clamps it) */
  if (zero || have - chunk_fit(size) >= LARGE_MIN_SPLIT) return chunk_hand_out_cold(h, c, size, zero);
  return chunk_handed(h, c);
}

static NOINLINE void *vam_alloc_large_slow(heap_t *h, size_t size, bool zero) {
  uint32_t want = chunk_want(size);
  chunk_t *c;
  if (h == &heap_empty && !(h = heap_acquire())) return alloc_failed();
  heap_collect(h);
  vam_quarantine_check_headers(h);
  int b = bitmap2_find_from(&h->d.binmap, large_bin(want));
  if (b >= 0) {
    c = h->d.bins[b];
    chunk_trust(c, "malloc()");
    chunk_bin_remove(h, c);
    if (h->d.spare_area && desc_head(segment_of(c), c) == h->d.spare_area) h->d.spare_area = NULL;
  } else if (!(c = large_area_new(h))) {
    return alloc_failed();
  }
  c->size |= CHUNK_INUSE;
  return chunk_hand_out(h, c, size, want, zero);
}

/* The end of the large area that starts at start (every area is VAM_AREA_PAGES). */
static inline const char *vam_area_end(const char *start) { return start + ((size_t)VAM_AREA_PAGES << os_page_shift); }

/* Whether p, in the area from start to end, is aligned and leaves room for a header before it
 * and the sentinel after. */
static inline bool chunk_inside(const char *start, const char *end, const void *p) {
  return !((uintptr_t)p & 15) && (const char *)p - CHUNK_HEADER >= start && (const char *)p < end - CHUNK_HEADER;
}
/* Whether p, in the area from start to end, is where a chunk's payload starts: aligned,
 * inside the area, after a header placed there (any thread: chunk_placed). */
static inline bool chunk_payload_in(const char *start, const char *end, const void *p) {
  return chunk_inside(start, end, p) && chunk_placed((const chunk_t *)((const char *)p - CHUNK_HEADER));
}
/* (r's size is not read) */
static inline bool chunk_payload(const desc_t *r, const void *p) {
  return chunk_payload_in(desc_start(r), vam_area_end(desc_start(r)), p);
}

/* Area r goes back to the page manager; its pages' tags no longer mark an area. */
static void vam_area_release(heap_t *h, desc_t *r) {
  page_tag_t *g = tag_of_desc(r);
  for (unsigned i = 0; i < VAM_AREA_PAGES; i++) g[i].key = 0;
  block_release(h, r);
}

/* The chunk whose payload p is, checked; ends the program on an invalid or double free. */
static chunk_t *chunk_of(desc_t *r, const void *p, const char *call, bool *alias) {
  char *start = desc_start(r);
  chunk_t *c = (chunk_t *)((char *)p - CHUNK_HEADER);
  if (!chunk_payload(r, p)) locus_fatal(call, "invalid pointer", p);
  *alias = c->size & CHUNK_ALIAS;
  if (*alias) {
    c = (chunk_t *)((char *)c - c->prev_size);
    if ((char *)c < start || !chunk_placed(c)) locus_fatal(call, "invalid pointer", p);
  }
  if ((c->size & (CHUNK_INUSE | CHUNK_CACHED)) != CHUNK_INUSE) locus_fatal(call, "double free", p);
  return c;
}

/* Discards the whole pages inside free chunk c (never its header and bin links). */
static void chunk_discard(chunk_t *c) {
  uintptr_t from = align_up((uintptr_t)c + sizeof(chunk_t), os_page_size);
  uintptr_t to = ((uintptr_t)c + chunk_size(c)) & ~(os_page_size - 1);
  if (to > from) os_discard((void *)from, to - from);
}

static NOINLINE void vam_free_large_slow(heap_t *h, desc_t *r, void *p, const char *call);

/* The descriptor of the large area on whose page p is (its tag's key: VAM_AREA_CLS). */
static desc_t *vam_area_of(const void *p) {
  segment_t *s = segment_of(p);
  return desc_of_page(s, vam_area_start(p, tag_of_page(s, p)->key));
}

/* Chunk c, just cached by a free: counted freed (the bins' free counts in vam_free_large_slow). */
static ALWAYS_INLINE void chunk_cached_counted(heap_t *h, const chunk_t *c) {
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, chunk_size(c) - CHUNK_HEADER);
  heap_debug_tick(h);
}

/* Chunk c, in use and checked by vam_free_large, freed (payload p) when the cache's bytes
 * are short for it: the last cached chunk of each class in turn, from lcache_victim on, is
 * freed for real until c fits (none is when c is bigger than the whole cache: LOCUS_TCACHE=0;
 * c is then freed for real itself). */
static NOINLINE void vam_free_large_evicting(heap_t *h, chunk_t *c, void *p, const char *call) {
  if (chunk_size(c) > vam_lcache_cap) {
    vam_free_large_slow(h, vam_area_of(p), p, call);
    return;
  }
  while (h->d.lcache_room < (int32_t)chunk_size(c)) {   /* (room grows with each: it ends) */
    vam_lbin_t *b = &h->d.lbin[h->d.lcache_victim];
    h->d.lcache_victim = (h->d.lcache_victim + 1) % VAM_LCLASSES;
    if (!b->head) continue;
    chunk_t *v = vam_lcache_pop(h, b);
    chunk_release(h, desc_head(segment_of(v), v), v, call);
  }
  vam_lcache_put(h, c);
  chunk_cached_counted(h, c);
}

/* A large object's free, p on a large area's page (from its tag: no descriptor is read; the
 * fast path's free reaches it through vam_free_other): by h's own thread, into the thread
 * cache if its header passes chunk_of's checks for a chunk in use that is no alias (its
 * check word covers its prev_size: chunk_seal), the next chunk's header is intact (an
 * overflow of this object into it is reported here) and the cache has room (a short path: no register saves); else checked again
 * and freed for real. The header before is not read (it missed the cache in most of
 * randsmall's large frees). Where p is in the area needs no test of its own: the header 16
 * bytes before p is on p's page unless p starts the page (the slow path then), its check word
 * proves it is a header the area holds at that address, and so the next one is there too. */
static NOINLINE void vam_free_large(heap_t *h, void *p, const char *call) {
  ASSERT(vam_area_of(p)->kind == KIND_VAM_LARGE);
  chunk_t *c = (chunk_t *)((char *)p - CHUNK_HEADER);
  if (cfg_tcache && h == tl_heap && !((uintptr_t)p & 15) && ((uintptr_t)p & (os_page_size - 1)) &&
      chunk_valid(c) && (c->size & (CHUNK_INUSE | CHUNK_CACHED | CHUNK_ALIAS)) == CHUNK_INUSE && chunk_valid(chunk_next(c))) {
    if (unlikely(!vam_lcache_put(h, c))) {
      vam_free_large_evicting(h, c, p, call);
      return;
    }
    chunk_cached_counted(h, c);
    return;
  }
  vam_free_large_slow(h, vam_area_of(p), p, call);
}

static NOINLINE void vam_free_large_slow(heap_t *h, desc_t *r, void *p, const char *call) {
  bool alias;
  chunk_t *c = chunk_of(r, p, call, &alias);
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, chunk_size(c) - CHUNK_HEADER);
  chunk_release(h, r, c, call);
  heap_debug_tick(h);
}

/* Frees chunk c (in use, counted freed already) of area r: merged with its free neighbours,
 * into its bin, or the whole area back if it empties and one is kept already. */
static void chunk_release(heap_t *h, desc_t *r, chunk_t *c, const char *call) {
  chunk_trust(c, call);   /* (its prev_size, which the merge follows, intact) */
  c->size &= ~CHUNK_FLAGS;
  if (c->prev_size) {
    chunk_t *before = (chunk_t *)((char *)c - c->prev_size);
    chunk_trust(before, call);
    if (!(before->size & CHUNK_INUSE)) {
      chunk_bin_remove(h, before);
      before->size += chunk_size(c);
      c = before;
    }
  }
  chunk_t *after = chunk_next(c);
  chunk_trust(after, call);
  if (!(after->size & CHUNK_INUSE)) {
    chunk_bin_remove(h, after);
    c->size += chunk_size(after);
  }
  chunk_set_prev(chunk_next(c), chunk_size(c));
  bool empty = (char *)c == desc_start(r) && chunk_next(c)->size == CHUNK_INUSE;
  if (empty && (opt.discard == DISCARD_IMMEDIATE || (h->d.spare_area && h->d.spare_area != r))) {
    vam_area_release(h, r);
  } else {
    if (empty) h->d.spare_area = r;
    chunk_bin_insert(h, c);
    if (opt.discard == DISCARD_IMMEDIATE) chunk_discard(c);
  }
}

/* In-place resize of a large object: shrink by splitting, grow into a free neighbour. */
static bool vam_resize_large(heap_t *h, desc_t *r, void *p, size_t size) {
  bool alias;
  chunk_t *c = chunk_of(r, p, "realloc()", &alias);
  if (alias || size > VAM_LARGE_MAX || size <= VAM_MEDIUM_MAX) return false;
  uint32_t want = (uint32_t)align_up(size + CHUNK_HEADER, 16), have = chunk_size(c);
  if (want < LARGE_MIN_CHUNK) want = LARGE_MIN_CHUNK;
  if (want > have) {
    chunk_t *after = chunk_next(c);
    if ((after->size & CHUNK_INUSE) || have + chunk_size(after) < want) return false;
    chunk_bin_remove(h, after);
    if (h->d.spare_area == r) h->d.spare_area = NULL;
    c->size += chunk_size(after);
    chunk_set_prev(chunk_next(c), chunk_size(c));
  }
  chunk_split(h, c, want);
  heap_count(h, bytes_allocated, (uint64_t)chunk_size(c) - have);
  return true;
}
