/* vam_free.c.h — the contract's allocation hooks (design_alloc, aligned; near a hint is
 * vam_hints.c.h's) and the free of block objects: the fast path for a slot, an emptied block,
 * the run dispatch. */

/* vam-sites needs the caller's return address: inlined into the exported entry points (and
 * the secure build's, with its checks, would not be inlined otherwise). */
#if LOCUS_VAM_SITES || (LOCUS_MITIGATIONS & MIT_BLOCKS)
#define VAM_ALLOC_INLINE ALWAYS_INLINE
#else
#define VAM_ALLOC_INLINE inline
#endif

/* An object of size (class cls) from its class's head block, else the slow path; from the
 * class's thread-cache bin first if `cached` (sizes malloc's hit path does not serve: above
 * VAM_TCACHE_SIZED). */
static ALWAYS_INLINE void *vam_alloc_class(heap_t *h, size_t size, unsigned cls, bool zero, bool cached) {
  void *p;
  if (cfg_tcache && cached && (p = vam_tcache_pop(&h->d.tbin[cls], cls, zero))) return p;
  p = vam_block_take(h, h->d.avail[cls], cls, zero);
  return likely(p != NULL) ? p : vam_alloc_slow(size, zero, h);
}

/* An object of 8, 16 or 32 KiB (vam.h: power-of-two blocks). */
static NOINLINE void *vam_alloc_pow2(heap_t *h, size_t size, bool zero) {
  return vam_alloc_class(h, size, vam_class_of(size), zero, true);
}

/* An object from the blocks, the large areas or huge runs: vam_alloc after its thread cache. */
static ALWAYS_INLINE void *vam_alloc_uncached(heap_t *h, size_t size, bool zero) {
  if (likely(size <= VAM_MEDIUM_MAX)) {
    unsigned cls = sizeclass_of(&vam_classes, size);
    if (cfg_sites) cls += vam_site_offset(h, (uintptr_t)__builtin_return_address(0));
    return vam_alloc_class(h, size, cls, zero, size > VAM_TCACHE_SIZED);
  }
  if (size <= VAM_LARGE_MAX) return vam_pow2_sized(size) ? vam_alloc_pow2(h, size, zero) : vam_alloc_large(h, size, zero);
  return huge_alloc(h, size, 0, zero);
}

/* The thread cache's object for size, or NULL. */
static ALWAYS_INLINE void *vam_alloc_cached(heap_t *h, size_t size, bool zero) {
  return cfg_tcache && likely(size <= VAM_TCACHE_SIZED) ? vam_tcache_take(h, size, zero) : NULL;
}

static VAM_ALLOC_INLINE void *vam_alloc(heap_t *h, size_t size, bool zero) {
  void *p = vam_alloc_cached(h, size, zero);
  return likely(p != NULL) ? p : vam_alloc_uncached(h, size, zero);
}

static ALWAYS_INLINE void *design_alloc(heap_t *h, size_t size, bool zero) { return vam_alloc(h, size, zero); }
static ALWAYS_INLINE void *design_alloc_cached(heap_t *h, size_t size, bool zero) {
  return vam_alloc_cached(h, size, zero);
}
static ALWAYS_INLINE void *design_alloc_uncached(heap_t *h, size_t size, bool zero) {
  return vam_alloc_uncached(h, size, zero);
}

/* ---- aligned allocation ------------------------------------------------------------------ */

/* Blocks of classes whose objects are multiples of `align` keep every object aligned (blocks
 * start on a page); other alignments come from a large chunk with an alias header in front of
 * the aligned pointer, or from page runs. */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero) {
  if (align <= os_page_size && size <= VAM_MEDIUM_MAX) {
    for (unsigned c = sizeclass_of(&vam_classes, size ? size : 1); c < vam_classes.count; c++)
      if (vam_slot_size(c) == vam_classes.size[c] && vam_classes.size[c] % align == 0)
        return vam_alloc(h, vam_classes.size[c], zero);
  }
  if (align <= os_page_size / 4 && size + align + CHUNK_HEADER <= VAM_LARGE_MAX) {
    char *raw = vam_alloc_large(h, size + align + CHUNK_HEADER, zero);
    if (!raw || ((uintptr_t)raw & (align - 1)) == 0) return raw;
    char *q = (char *)align_up((uintptr_t)raw + CHUNK_HEADER, align);
    chunk_t *alias = (chunk_t *)(q - CHUNK_HEADER);
    chunk_set(alias, (uint32_t)(q - raw), CHUNK_ALIAS | CHUNK_INUSE);
    return q;
  }
  return huge_alloc(h, size, align, zero);
}

static void vam_block_empty(heap_t *h, desc_t *b);

/* A free of p, whose slot is at or beyond its block's bump pointer. Inside the block's
 * capacity, it was handed out before the block emptied and went back to bump mode: a double
 * free (8-byte slots have no marker word, so this is how their double frees show once the
 * block emptied). */
static COLD NOINLINE __attribute__((noipa)) void vam_free_unbumped(const char *slot, const desc_t *b, const void *p,
                                                                 const char *call) {
  locus_fatal(call, slot < b->u.blk.end ? "double free" : "invalid pointer", p);
}

/* Whether slot (below the bump pointer) is on block b's free list: its marker word, or, for an
 * 8-byte slot, which has none, the list head or a link that decodes to a slot of this block
 * (tiny: b's slots are known to be 8 bytes, at compile time). */
static ALWAYS_INLINE bool vam_slot_listed(const heap_t *h, const desc_t *b, const char *slot, bool tiny) {
  if (!tiny && marker_says_free(*(const uintptr_t *)(slot + b->marker_off), free_marker(slot))) return true;
  if (slot == b->u.blk.free) return true;
  if (!tiny && b->marker_off) return false;
  /* (8-byte slots: a one-page block, so "in the block" is "on slot's page") */
  _Static_assert(VAM_SMALL_PAGES == 1, "8-byte blocks are one page");
  char *next = vam_link_load(h, slot);
  return !next || (!(((uintptr_t)next ^ (uintptr_t)slot) >> os_page_shift) && next < b->u.blk.bump && !((uintptr_t)next & 7));
}

/* Frees p, at offset off in block b: every block and variant (the flagship's fast path is
 * design_free's); tiny: b's slots are known to be 8 bytes (no marker word, no header), which
 * the compiler then folds (vam_free_tiny). */
static ALWAYS_INLINE void vam_free_block_as(heap_t *h, desc_t *b, void *p, size_t off, const char *call, bool tiny) {
  char *slot = cfg_small_headers ? (char *)p - b->aux8 : p;
  if (cfg_small_headers) off -= b->aux8;
  long index = tiny ? vam_slot_of_with(off, 0) : vam_slot_of(b, off);
  bool was_full;
  if (cfg_block_bitmap) {
    was_full = b->flags & FLAG_FULL;
    if (unlikely(index < 0 || slot >= b->u.blk.end)) locus_fatal(call, "invalid pointer", p);
    uint64_t *word = (uint64_t *)b->u.blk.free + (index >> 6), bit = 1ull << (index & 63);
    if (*word & bit) locus_fatal(call, "double free", p);
    *word |= bit;
  } else {
    if (unlikely(index < 0)) { locus_fatal_jump(call, "invalid pointer", p); return; }
    if (unlikely(slot >= b->u.blk.bump)) { vam_free_unbumped(slot, b, p, call); return; }
    /* Branch-free marker test: an 8-byte slot has no marker word (marker_off 0), so its test
     * reads the link word, which never equals a marker, and its marker is overwritten by the
     * link; for it the test against the list head, then its link (safe-linked: it decodes to
     * NULL or to a slot of this block below the bump pointer only if the slot is free; a live
     * 8-byte object's word was cleared when it was handed out), catch a double free. */
    uintptr_t *link = (uintptr_t *)slot, *mark = (uintptr_t *)(slot + b->marker_off);
    uintptr_t marker = free_marker(slot);
    void *head = b->u.blk.free;
    if (unlikely(vam_slot_listed(h, b, slot, tiny))) { locus_fatal_jump(call, "double free", p); return; }
    was_full = !head && b->u.blk.bump >= b->u.blk.end;
    if (cfg_small_headers && b->aux8 && *link != vam_classes.size[b->cls]) locus_fatal(call, "invalid pointer", p);
    if (!tiny) *mark = marker;
    *link = vam_link_encode(h, slot, head);
    b->u.blk.free = slot;
  }
  h->d.frees[b->cls]++;
  if (unlikely(was_full)) {           /* full -> front of the available list */
    if (cfg_block_bitmap) b->flags &= (uint16_t)~FLAG_FULL;
    list_push(&h->d.avail[b->cls], b);
  }
  if (unlikely(--b->used == 0)) vam_block_empty(h, b);
}
static ALWAYS_INLINE void vam_free_block(heap_t *h, desc_t *b, void *p, size_t off, const char *call) {
  vam_free_block_as(h, b, p, off, call, false);
}

/* Takes an empty block off its class's list: into the heap's cache of empty blocks if there
 * is room (keep), else back to the page manager. */
static void vam_block_drop(heap_t *h, desc_t *b, bool keep) {
  list_unlink(&h->d.avail[b->cls], b);
  h->d.blocks[b->cls]--;
  if (h->d.spare[b->cls] == b) h->d.spare[b->cls] = NULL;
  unsigned k = vam_cache_index(b->npages);
  if (keep && h->d.ncache[k] < VAM_CACHE_BLOCKS) {
    h->d.cache[k][h->d.ncache[k]++] = b;
  } else {
    vam_block_release(h, b);
  }
}

/* A free emptied the block. Hysteresis: each class keeps its most recently emptied block where
 * it is on the available list, reset to bump mode, so that a class whose objects come and go
 * one at a time, or in batches, refills it without a slow path; the class's previous empty
 * block, if still empty, goes to the heap's cache of empty blocks, from which the next new
 * block of its size comes without a round trip through the page manager. The immediate
 * policy (the paper's) keeps nothing: every empty block goes back, and its pages to the OS. */
static NOINLINE void vam_block_empty(heap_t *h, desc_t *b) {
  unsigned cls = b->cls;
  if (h->d.hint_block[vam_base_class(cls)] == b) {   /* back on the list, to be kept or dropped */
    h->d.hint_block[vam_base_class(cls)] = NULL;
    list_push(&h->d.avail[cls], b);
  }
  if (opt.discard == DISCARD_IMMEDIATE) {
    vam_block_drop(h, b, false);
  } else {
    desc_t *old = h->d.spare[cls];
    if (old && old != b && old->used == 0) vam_block_drop(h, old, true);
    h->d.spare[cls] = b;
    if (!cfg_block_bitmap) {
      b->u.blk.bump = desc_start(b);
      b->u.blk.free = NULL;
      vam_bounds_clear(b);
      vam_block_skip_first(b);   /* (secure: slot 0's canary is intact, rewritten the same) */
    }
    b->flags &= (uint16_t)~FLAG_CLEAN;
    pages_policy(h);   /* the discard policy runs as often as blocks empty, kept or not */
  }
  vam_transfer_sweep(h, false);
  heap_debug_tick(h);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) vam_free_block(h, d, p, off, call);
  else if (d->kind == KIND_VAM_LARGE) vam_free_large(h, p, call);
  else core_free(h, d, p, call);
}

/* The fast path's free of p, in segment s, the start of a slot handed out of a block
 * (vam_slot_live): no marker (not free already), then into the thread cache, else onto the
 * block's list. */
static ALWAYS_INLINE void vam_slot_push(heap_t *h, desc_t *b, void *p, uintptr_t marker);
static NOINLINE void vam_slot_push_out(void *p, heap_t *h, desc_t *page, uintptr_t marker);
static NOINLINE void vam_free_growing(void *p, heap_t *me, segment_t *s, vam_tbin_t *t, const char *call);

/* A free (checked, marker computed) by heap me's thread that its bin did not take: onto the
 * block's list if the object is me's, else the foreign way. */
static ALWAYS_INLINE void vam_free_unbinned(void *p, heap_t *me, segment_t *s, uintptr_t marker, const char *call) {
  heap_t *h = s->heap;
  if (likely(h == me)) vam_slot_push_out(p, h, desc_of_page(s, p), marker);
  else free_foreign_heap(p, h, s, call);
}

static ALWAYS_INLINE void vam_free_slot(heap_t *h, segment_t *s, vam_tbin_t *t, void *p, const char *call) {
  uintptr_t *w = p, marker = free_marker(p);
  if (unlikely(w[1] == marker)) { locus_fatal_jump(call, "double free", p); return; }   /* (any thread's free) */
  /* (h is the thread's own heap but when another thread frees into an exited thread's heap
   * (heap_collect under its lock): nothing may wait in that heap's cache) */
  if (!cfg_tcache) vam_slot_push(h, desc_head(s, p), p, marker);
  else if (unlikely(h != tl_heap)) vam_slot_push_out(p, h, desc_of_page(s, p), marker);
  else if (likely(vam_tcache_put(t, p, marker))) return;
  else if (unlikely(t->missed)) vam_free_growing(p, h, s, t, call);
  else vam_slot_push_out(p, h, desc_of_page(s, p), marker);
}

/* A free (checked) by the thread of heap me of slot p, in segment s, that found its bin t
 * full: onto its block's list (the heap's own object) or the foreign way, or, when mallocs
 * found the bin empty since the last test (the caller tests t->missed), into the bin after all
 * if it grows (vam_tcache_grow; out of line, so that the overflow's usual path saves no
 * registers). */
static NOINLINE void vam_free_growing(void *p, heap_t *me, segment_t *s, vam_tbin_t *t, const char *call) {
  if (vam_tcache_grow(me, t)) vam_tcache_put(t, p, free_marker(p));
  else vam_free_unbinned(p, me, s, free_marker(p), call);
}

/* vam_slot_push out of line: the thread cache's misses (its hit path then shares no register
 * work with the list push). The caller forms page's address from the page index its tag
 * lookup computed. */
static NOINLINE void vam_slot_push_out(void *p, heap_t *h, desc_t *page, uintptr_t marker) {
  vam_slot_push(h, page - page->back, p, marker);
}

static ALWAYS_INLINE void vam_block_put(heap_t *h, desc_t *b, void *p, uintptr_t marker);

/* vam_block_empty after a put of p: p first, as the thread cache's overflow holds it (its tail
 * call then moves no register: 6 instructions a push fewer). */
static NOINLINE __attribute__((noipa)) void vam_block_emptied(void *p UNUSED, heap_t *h, desc_t *b) { vam_block_empty(h, b); }

/* Slot p (checked) goes onto its block's list, counted freed. */
static ALWAYS_INLINE void vam_slot_push(heap_t *h, desc_t *b, void *p, uintptr_t marker) {
  h->d.frees[b->cls]++;
  vam_block_put(h, b, p, marker);
}

/* Slot p (checked, already counted freed) goes onto its block's list. */
static ALWAYS_INLINE void vam_block_put(heap_t *h, desc_t *b, void *p, uintptr_t marker) {
  void *head = vam_slot_list(h, b, p, marker);
  unsigned cls = b->cls;
  /* A full block moves to the front of its class's list. (Written without a branch, like the
   * retire in vam_block_take, it made mixed-size churn 8% faster but same-size batches 10%
   * slower: three unconditional stores to two descriptors per free.) */
  if (unlikely(!head) && b->u.blk.bump >= b->u.blk.end) list_push(&h->d.avail[cls], b);
  if (unlikely(--b->used == 0)) vam_block_emptied(p, h, b);
}

/* What the fast path's slot test sent on: a block with 8-byte slots, an interior pointer, a
 * slot not handed out, anything else in a run (a large area, a core run), from any page of
 * it. */
static NOINLINE void vam_free_tiny(heap_t *h, desc_t *b, void *p, const char *call);
static NOINLINE void vam_free_other(void *p, heap_t *h, segment_t *s, const char *call) {
  const page_tag_t *g = tag_of_page(s, p);   /* (the line the fast test read) */
  if (vam_tag_cls(g) == VAM_AREA_CLS) {      /* a large area's page: no descriptor is read */
    vam_free_large(h, p, call);
    return;
  }
  desc_t *d = desc_of_page(s, p), *b = d - d->back;
  if (cfg_fast_free && b->kind == KIND_VAM_BLOCK && !b->marker_off) vam_free_tiny(h, b, p, call);
  else design_free_run(h, b, p, vam_run_offset(d, p), call);
}

/* An 8-byte slot's free, out of line on its own (with the other kinds' code beside it, the
 * block free's registers spilled: ≈75 instructions) and compiled for 8-byte slots (31; the
 * generic block free, which reads the marker offset and recip to learn what it frees, 55):
 * its block is one page. */
static NOINLINE void vam_free_tiny(heap_t *h, desc_t *b, void *p, const char *call) {
  vam_free_block_as(h, b, p, (uintptr_t)p & (os_page_size - 1), call, true);
}

static ALWAYS_INLINE void vam_free_secure(heap_t *h, segment_t *s, void *p, const char *call);

static ALWAYS_INLINE void vam_free_plain(heap_t *h, segment_t *s, void *p, const char *call) {
  if (!cfg_fast_free) {
    /* A page whose descriptor is a block's is the block's first page: p's offset is its
     * offset in the page. */
    desc_t *d = desc_of_page(s, p);
    uint32_t off = (uint32_t)((uintptr_t)p & (os_page_size - 1));
    if (likely(d->kind == KIND_VAM_BLOCK)) vam_free_block(h, d, p, off, call);
    else free_in_run(h, p, call);   /* a medium block's other pages, large areas, core runs */
    return;
  }
  /* Any page of a block the fast path serves: vam_slot_live on p's page tag, with the recip
   * of the bin the object may go to (any page's class byte is a class index, or a large
   * area's VAM_AREA_CLS). The descriptor is
   * read only off this path. (The tag by index: the three reads of it then address it from
   * the segment with displacements, where a tag pointer cost a lea and a register move.) */
  size_t i = ((uintptr_t)p & SEGMENT_MASK) >> os_page_shift;
  vam_tbin_t *t = &h->d.tbin[vam_tag_cls(&s->tag[i])];
  if (likely(vam_slot_live_with(&s->tag[i], p, t->recip))) vam_free_slot(h, s, t, p, call);
  else vam_free_other(p, h, s, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, segment_t *s, void *p, const char *call) {
  if (cfg_vam_hardened) vam_free_secure(h, s, p, call);
  else vam_free_plain(h, s, p, call);
}

#if DESIGN_HAS_FREE_ANY
/* The flagship's free, by the calling thread (heap me, or heap_empty), of p in segment s of
 * any heap: a slot handed out of a block the fast path serves goes into this thread's cache
 * whoever allocated it (as vam_foreign_free's would: the same test, marker and push), so the
 * owner is read only when the slot test fails or the stack is full. In turnover, where a
 * successor frees its predecessor's objects and its own in no order, a branch on the owner
 * before the test mispredicted on a fifth of the frees (cachegrind: 3.4 M in 16 M).
 * heap_empty's bins have no recip and no room: what passes its test goes the foreign way,
 * which tests again. */
static ALWAYS_INLINE void design_free_any(void *p, segment_t *s, const char *call) {
  heap_t *me = tl_heap;
  size_t i = ((uintptr_t)p & SEGMENT_MASK) >> os_page_shift;
  vam_tbin_t *t = &me->d.tbin[vam_tag_cls(&s->tag[i])];
  /* (A plain read of the bound, as the owner's own free makes: another heap's owner may move
   * it only up while p is live, and an atomic load, as vam_slot_live_remote makes, costs the
   * hit path two instructions here: the tag's address formed apart.) */
  if (likely(vam_slot_live_with(&s->tag[i], p, t->recip))) {
    uintptr_t *w = p, marker = free_marker(p);
    if (unlikely(w[1] == marker)) { locus_fatal_jump(call, "double free", p); return; }   /* (any thread's free) */
    if (likely(vam_tcache_put(t, p, marker))) return;
    if (unlikely(t->missed)) vam_free_growing(p, me, s, t, call);   /* the bin is full: it may grow */
    else vam_free_unbinned(p, me, s, marker, call);
    return;
  }
  /* (A large area's page is told from the others in vam_free_other: tested here, its class
   * byte stayed in a register and the hit path above took two instructions more.) */
  heap_t *h = s->heap;
  if (likely(h == me)) vam_free_other(p, h, s, call);
  else free_foreign_heap(p, h, s, call);
}
#endif

/* The slot index of p in block b, or a fatal error if p is not an object's address. */
static long vam_slot_index(desc_t *b, const void *p, const char *call) {
  const char *slot = (const char *)p - (cfg_small_headers ? b->aux8 : 0);
  long index = vam_slot_of(b, (size_t)(slot - desc_start(b)));
  if (index < 0 || slot >= b->u.blk.end) locus_fatal(call, "invalid pointer", p);
  return index;
}
