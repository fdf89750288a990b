/* vam_hooks.c.h — the contract's hooks that vam_free.c.h does not hold: another heap's object
 * freed (design_free_foreign; the caches are vam_foreign.c.h's), remote-free checks, usable
 * size, resize, spares, statistics, purge, and the walk of the design's structures
 * (design_check). */

/* Another heap's object: the flagship keeps it in this thread's foreign-object cache
 * (vam_foreign.c.h); the secure build checks, marks and quarantines it like its own (the
 * freeing thread's ring), and vam_release_foreign then keeps it or sends it home. */
static ALWAYS_INLINE void design_free_foreign(heap_t *me, heap_t *h, segment_t *s, void *p, const char *call) {
  if (!mitigation(QUARANTINE)) {
    vam_foreign_free(me, h, s, p, call);
    return;
  }
  desc_t *page = desc_of_page(s, p), *d = page - page->back;
  page_tag_t *g = tag_of_page(s, p);
  if (me == &heap_empty || d->kind != KIND_VAM_BLOCK || !vam_slot_live_remote(g, p, vam_tag_cls(g)) || (mitigation(CANARIES) && p == desc_start(d))) {
    free_foreign_home(h, page, p, call);
    return;
  }
  vam_secure_retire(me, d, p, call);
  vam_quarantine_push(me, p, d);
}

/* Secure: another heap's object left h's quarantine (its poison verified): into h's
 * foreign-object cache, or home. */
static NOINLINE void vam_release_foreign(heap_t *h, desc_t *b, void *p) {
  uintptr_t *w = p;
  w[0] = w[1] = 0;   /* no longer marked */
  heap_t *owner = segment_of(p)->heap;
  if (cfg_foreign_cache) vam_foreign_keep_slow(h, owner, b, p, "free()");
  else free_foreign_home(owner, b, p, "free()");
}

static void design_collected(desc_t *page, void *p) {
  desc_t *d = page - page->back;
  if (d->kind != KIND_VAM_BLOCK || cfg_block_bitmap || !d->marker_off) return;
  char *slot = cfg_small_headers ? (char *)p - d->aux8 : p;
  marker_collected((uintptr_t *)(slot + d->marker_off), free_marker(slot));
}

static void design_check_remote(desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) {
    long index = vam_slot_index(d, p, call);
    if (cfg_block_bitmap) {
      uint64_t word = __atomic_load_n((uint64_t *)d->u.blk.free + (index >> 6), __ATOMIC_RELAXED);
      if (word & (1ull << (index & 63))) locus_fatal(call, "double free", p);
    } else if (d->marker_off) {
      char *slot = cfg_small_headers ? (char *)p - d->aux8 : p;
      /* Not below the bump pointer (its page's bound, which the owner stored before it handed
       * the object out: vam_slot_live_remote; slots with a marker word have a recip). */
      if (!vam_slot_live_remote(tag_of_page(segment_of(slot), slot), slot, d->cls)) vam_free_unbumped(slot, d, p, call);
      uintptr_t *mark = (uintptr_t *)(slot + d->marker_off);
      if (mitigation(QUARANTINE) && *(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
      marker_free_remote(mark, free_marker(slot), p, call);
    }
  } else if (d->kind == KIND_VAM_LARGE) {
    bool alias;
    chunk_of(d, p, call, &alias);
    if (mitigation(QUARANTINE) && *(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
  } else {
    locus_fatal(call, "invalid pointer", p);
  }
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) {
    vam_slot_index(d, p, call);
    if (mitigation(QUARANTINE)) vam_quarantine_check(p, call);
    return vam_usable(d);
  }
  if (d->kind == KIND_VAM_LARGE) {
    bool alias;
    chunk_t *c = chunk_of(d, p, call, &alias);
    if (mitigation(QUARANTINE)) vam_quarantine_check(p, call);
    return (size_t)((char *)c + chunk_size(c) - (char *)p);
  }
  locus_fatal(call, "invalid pointer", p);
}

/* A slot the free fast path serves (vam_free_plain's test on p's page tag, no descriptor read:
 * any heap's, whose owner moves the bound only up while p is live), not marked free: its
 * slot's size; else 0. The secure build's checks (canaries, quarantine) need the block. */
static ALWAYS_INLINE size_t design_usable_quick(segment_t *s, const void *p, const char *call) {
  if (!cfg_fast_free || cfg_vam_hardened || !vam_slot_live(s, p)) return 0;
  if (unlikely(marker_says_free(((const uintptr_t *)p)[1], free_marker(p)))) locus_fatal(call, "pointer to a freed object", p);
  return vam_slot_size(vam_tag_cls(tag_of_page(s, p)));
}

/* Resizes p in place if the design can; the caller owns h. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  if (d->kind == KIND_VAM_BLOCK) return realloc_keeps(vam_usable(d), size);
  if (d->kind == KIND_VAM_LARGE) return vam_resize_large(h, d, p, size);
  return false;
}

static void design_release_spares(heap_t *h) {
  vam_tcache_flush(h);
  vam_lcache_flush(h);
  vam_quarantine_flush(h);
  vam_foreign_flush(h);
  for (unsigned c = 0; c < vam_nclasses; c++) {
    desc_t *b = h->d.spare[c];
    h->d.spare[c] = NULL;
    if (b && b->used == 0) vam_block_drop(h, b, false);
  }
  for (unsigned k = 0; k < VAM_BLOCK_SIZES; k++)
    while (h->d.ncache[k]) vam_block_release(h, h->d.cache[k][--h->d.ncache[k]]);
  desc_t *r = h->d.spare_area;
  if (r) {
    chunk_t *c = (chunk_t *)desc_start(r);
    h->d.spare_area = NULL;
    if (!(c->size & CHUNK_INUSE) && chunk_next(c)->size == CHUNK_INUSE) {
      chunk_bin_remove(h, c);
      vam_area_release(h, r);
    }
  }
}

/* Adds the block objects' calls and bytes to the statistics (the rest is in h->stats). */
static void design_stats(heap_t *h, locus_stats_t *st) {
  for (unsigned c = 0; c < vam_nclasses; c++) {
    uint64_t in = __atomic_load_n(&h->d.allocs[c], __ATOMIC_RELAXED) + __atomic_load_n(&h->d.tbin[c].allocs, __ATOMIC_RELAXED);
    uint64_t out = __atomic_load_n(&h->d.frees[c], __ATOMIC_RELAXED) + vam_tcache_frees(&h->d.tbin[c]);
    st->malloc_calls += in;
    st->free_calls += out;
    st->bytes_allocated += (in - out) * vam_slot_size(c);
  }
  for (unsigned i = 0; mitigation(QUARANTINE) && i < VAM_QUARANTINE; i++)   /* freed, counted on release */
    st->free_calls += __atomic_load_n(&vam_quarantine_of(h)->ring[i].p, __ATOMIC_RELAXED) != NULL;
  uint64_t flushed = __atomic_load_n(&h->d.foreign_flushed, __ATOMIC_RELAXED);
  st->malloc_calls -= flushed;
  st->free_calls -= flushed;
}

/* Purge: spares go back, and the pages inside every free large chunk are discarded. */
static void design_purge(heap_t *h) {
  design_release_spares(h);
  vam_transfer_sweep(h, true);
  for (unsigned b = 0; b < LARGE_BINS; b++)
    for (chunk_t *c = h->d.bins[b]; c; c = c->next) chunk_discard(c);
}

/* Checks one block's counts and free list. */
static size_t vam_check_block(heap_t *h, desc_t *b) {
  size_t bad = 0;
  CHECK(b->kind == KIND_VAM_BLOCK && desc_segment(b)->heap == h && b->obj_size == vam_slot_size(b->cls));
  size_t cap = vam_capacity(b), nfree = 0, unbumped = 0;
  if (cfg_block_bitmap) {
    for (size_t i = 0; i < vam_bitmap_words(b); i++) nfree += (size_t)__builtin_popcountll(((uint64_t *)b->u.blk.free)[i]);
  } else {
    for (void *f = b->u.blk.free; f && nfree <= cap; f = vam_link_load(h, f)) {
      CHECK((char *)f >= desc_start(b) && (char *)f < b->u.blk.bump);
      CHECK(vam_slot_of(b, (size_t)((char *)f - desc_start(b))) >= 0);
      nfree++;
    }
    unbumped = (size_t)(b->u.blk.end - b->u.blk.bump) / b->obj_size;
    /* Free's slot test (vam.h): a slot passes on its page exactly if it is below the bump
     * pointer (never with 8-byte slots). */
    uintptr_t head = (uintptr_t)desc_start(b) >> os_page_shift;
    for (char *slot = desc_start(b); slot < b->u.blk.end; slot += b->obj_size) {
      size_t i = ((uintptr_t)slot >> os_page_shift) - head;
      CHECK(vam_tag_cls(&tag_of_desc(b)[i]) == b->cls && tag_of_desc(b)[i].key == b->aux);
      CHECK(vam_slot_live_with(&tag_of_desc(b)[i], slot, vam_class_recip[b->cls]) == (slot < b->u.blk.bump && vam_class_recip[b->cls] != 0));
    }
  }
  CHECK(b->used + nfree + unbumped + (mitigation(CANARIES) ? 1 : 0) == cap);   /* canaries: slot 0 unused */
  if (vam_block_full(b)) CHECK(nfree == 0 && unbumped == 0);
  return bad;
}

static size_t design_check(heap_t *h) {
  size_t bad = 0;
  size_t listed = 0, blocks = 0, grown = 0;   /* grown: the bytes the bins grew by */
  uint32_t of_class[VAM_MAX_CLASSES] = { 0 };   /* blocks found, less the cached empty ones */
  for (unsigned c = 0; c < vam_nclasses; c++) {
    desc_t *spare = h->d.spare[c];
    bool spare_listed = !spare || spare->used > 0;   /* refilled since: may be full */
    for (desc_t *b = h->d.avail[c]; b != &h->d.none; b = b->next) {
      if (b == &h->d.foreign[c]) {   /* the foreign-object cache: a list of 1..MAX objects */
        size_t n = 0;
        for (void *f = b->u.blk.free; f && n <= VAM_FOREIGN_MAX; f = vam_link_load(h, f)) {
          segment_t *s = segment_of(f);
          CHECK(desc_head(s, f)->kind == KIND_VAM_BLOCK && desc_head(s, f)->cls == c);   /* (any heap's) */
          n++;
        }
        CHECK(n >= 1 && n == (uint16_t)(0 - b->used));
        CHECK(b == h->d.avail[c] || b->prev->next == b);
        continue;
      }
      CHECK(b->cls == c && !vam_block_full(b) && (cfg_block_bitmap || vam_has_room(b)));
      CHECK(b == h->d.avail[c] || b->prev->next == b);
      CHECK(b->used > 0 || b == spare);   /* an empty block is the class's spare */
      spare_listed |= b == spare;
      listed++;
    }
    CHECK(spare_listed && (!spare || (spare->kind == KIND_VAM_BLOCK && spare->cls == c)));
    vam_tbin_t *t = &h->d.tbin[c];   /* the thread cache */
    CHECK(t->room <= t->cap && t->cap <= VAM_TCACHE_GROWN_SLOTS &&
          (t->cap >= vam_tcache_base[c] || (t->cap == 0 && t->head == NULL)));   /* (0: reap mode) */
    if (t->cap) grown += (size_t)(t->cap - vam_tcache_base[c]) * vam_slot_size(c);
    char *p = t->head;
    for (unsigned i = 0; i < vam_tcache_count(t); i++, p = vam_tcache_next(p)) {
      CHECK(p != NULL);
      segment_t *s = segment_of(p);
      desc_t *b = desc_head(s, p);
      CHECK(b->kind == KIND_VAM_BLOCK && b->cls == c && ((uintptr_t *)p)[1] == free_marker(p));   /* (any heap's) */
      if (s->heap == h) CHECK(p < b->u.blk.bump && b->used > 0 && vam_slot_of(b, (size_t)(p - desc_start(b))) >= 0);
    }
    CHECK(p == NULL);   /* the list ends where its count does */
  }
  CHECK(h->d.tcache_spare >= 0 && grown + (size_t)h->d.tcache_spare == (size_t)vam_tcache_budget);
  size_t cached = 0, cached_bytes = 0, cached_seen = 0;   /* the thread cache's large side */
  for (unsigned k = 0; k < VAM_LCLASSES; k++) {
    const vam_lbin_t *lb = &h->d.lbin[k];
    for (const chunk_t *ch = lb->head; ch; ch = vam_lcache_next(ch)) {
      CHECK(cached_bytes < vam_lcache_cap);   /* (no cycle) */
      CHECK(chunk_valid(ch) && (ch->size & (CHUNK_INUSE | CHUNK_CACHED | CHUNK_ALIAS)) == (CHUNK_INUSE | CHUNK_CACHED));
      CHECK(segment_of(ch)->heap == h && desc_head(segment_of(ch), ch)->kind == KIND_VAM_LARGE);
      CHECK(vam_lclass_floor(chunk_size(ch) - CHUNK_HEADER) == k);
      cached++;
      cached_bytes += chunk_size(ch);
    }
  }
  CHECK(h->d.lcache_room >= 0 && cached_bytes + (uint32_t)h->d.lcache_room == vam_lcache_cap);
  for (unsigned c = 0; c < vam_classes.count; c++) {
    desc_t *b = h->d.hint_block[c];
    if (!b) continue;
    CHECK(b->kind == KIND_VAM_BLOCK && vam_base_class(b->cls) == c && vam_has_room(b) && !vam_block_full(b));
    listed++;   /* on no list: counted with the blocks found in the segments */
  }
  for (unsigned k = 0; k < VAM_BLOCK_SIZES; k++) {
    for (unsigned i = 0; i < h->d.ncache[k]; i++) {
      desc_t *b = h->d.cache[k][i];
      CHECK(b->kind == KIND_VAM_BLOCK && b->used == 0 && vam_cache_index(b->npages) == k);
      listed++;   /* counted with the blocks found in the segments */
      of_class[b->cls]--;
    }
  }
  for (segment_t *s = h->pages.segments; s; s = s->next) {
    for (size_t i = s->first; i < s->npages; i += s->desc[i].npages ? s->desc[i].npages : 1) {
      desc_t *r = &s->desc[i];
      /* Exactly a large area's pages carry its tags (vam_free_other trusts them). */
      for (size_t j = 0; j < (r->npages ? r->npages : 1u); j++)
        CHECK((vam_tag_cls(&s->tag[i + j]) == VAM_AREA_CLS) == (r->kind == KIND_VAM_LARGE) &&
              (r->kind != KIND_VAM_LARGE || s->tag[i + j].key == vam_area_key((unsigned)j)));
      if (r->kind == KIND_VAM_LARGE) CHECK(r->npages == VAM_AREA_PAGES);
      if (r->kind == KIND_VAM_BLOCK) {
        blocks++;
        of_class[r->cls]++;
        bad += vam_check_block(h, r);
        if (vam_block_full(r)) listed++;   /* on the implicit full list */
      }
      if (r->kind != KIND_VAM_LARGE) continue;
      char *start = desc_start(r), *end = start + desc_bytes(r) - CHUNK_HEADER;
      uint32_t prev = 0;
      bool prev_free = false;
      chunk_t *c = (chunk_t *)start;
      for (; (char *)c < end; c = chunk_next(c)) {
        CHECK(chunk_valid(c) && c->prev_size == prev && chunk_size(c) >= LARGE_MIN_SPLIT);
        if (!chunk_valid(c) || chunk_size(c) == 0) break;
        bool is_free = !(c->size & CHUNK_INUSE);
        cached_seen += (c->size & CHUNK_CACHED) != 0;
        CHECK(!(is_free && prev_free));
        if (is_free) {
          bool binned = false;
          for (chunk_t *f = h->d.bins[large_bin(chunk_size(c))]; f && !binned; f = f->next) binned = f == c;
          CHECK(binned);
        }
        prev_free = is_free;
        prev = chunk_size(c);
      }
      CHECK((char *)c == end && c->size == CHUNK_INUSE && c->prev_size == prev);
    }
  }
  CHECK(listed == blocks && cached_seen == cached);
  for (unsigned c = 0; c < VAM_MAX_CLASSES; c++) CHECK(of_class[c] == h->d.blocks[c]);
  return bad;
}

/* Where a lies in run d (the checked copies, copy.h): a block's slot (not slot 0 with canaries,
 * nor the slack after the last slot), its usable bytes; a large area's chunk, found by walking
 * the area's headers from its start, the payload of one in use (a free chunk, a header or the
 * sentinel is no object). A header that does not check (another thread's area caught mid-update,
 * or corrupted) makes the bounds unknown: the copy is not reported for it. */
static UNUSED ALWAYS_INLINE int design_bounds(desc_t *d, const char *a, const char **start, const char **end) {
  const char *base = desc_start(d);
  if (d->kind == KIND_VAM_BLOCK) {
    size_t off = (size_t)(a - base), size = d->obj_size;
    uint32_t recip = vam_class_recip[d->cls];
    size_t index = recip ? (size_t)(((uint64_t)off * recip) >> RECIP_SHIFT) : off / size;
    const char *slot = base + index * size;
    if ((mitigation(CANARIES) && index == 0) || slot + size > d->u.blk.end) return BOUNDS_NONE;
    *start = slot + (cfg_small_headers ? d->aux8 : 0);
    *end = *start + vam_usable(d);
    return a >= *start && a < *end ? BOUNDS_OBJECT : BOUNDS_NONE;
  }
  if (d->kind != KIND_VAM_LARGE) return BOUNDS_NONE;
  const char *last = base + desc_bytes(d) - CHUNK_HEADER;   /* the sentinel */
  /* Most copies start at an object's start (a memset after malloc): its header is just
   * before it, checked by the cookie, no walk needed. */
  const chunk_t *h = (const chunk_t *)(a - CHUNK_HEADER);
  if (((uintptr_t)a & 15) == 0 && (const char *)h >= base && chunk_placed(h) &&
      (h->size & (CHUNK_INUSE | CHUNK_ALIAS | CHUNK_CACHED)) == CHUNK_INUSE && a + chunk_size(h) - CHUNK_HEADER <= last) {
    *start = a;
    *end = a + chunk_size(h) - CHUNK_HEADER;
    return BOUNDS_OBJECT;
  }
  for (const chunk_t *c = (const chunk_t *)base; (const char *)c < last;) {
    if (!chunk_placed(c) || chunk_size(c) < LARGE_MIN_SPLIT) return BOUNDS_UNKNOWN;
    const char *next = (const char *)c + chunk_size(c);
    if (a < next) {
      *start = (const char *)c + CHUNK_HEADER;
      *end = next;
      return a >= *start && (c->size & (CHUNK_INUSE | CHUNK_CACHED)) == CHUNK_INUSE ? BOUNDS_OBJECT : BOUNDS_NONE;
    }
    c = (const chunk_t *)next;
  }
  return BOUNDS_NONE;
}
