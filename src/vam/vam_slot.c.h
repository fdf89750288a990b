/* vam_slot.c.h — blocks made and served: a new block (a kept empty one, else pages), the take
 * of a slot (free list, bump pointer or bitmap), call sites (vam-sites: a class group per
 * site), and the allocation slow path. */

/* A new block for class cls: an empty one kept aside (vam_block_empty) if there is one of
 * its size, else pages from the page manager. */
static desc_t *vam_block_new(heap_t *h, unsigned cls) {
  size_t size = vam_slot_size(cls);
  size_t npages = vam_block_pages(cls);
  unsigned k = vam_cache_index(npages);
  bool clean = false;
  desc_t *b;
  if (h->d.ncache[k]) {
    b = h->d.cache[k][--h->d.ncache[k]];
  } else {
    if (!(b = pages_alloc(h, npages, 1, &clean))) return NULL;
    heap_count(h, blocks_in_use, 1);
    if (clean) vam_tcache_trim(h);   /* the footprint grows: no grown bins through it */
  }
  h->d.blocks[cls]++;
  char *start = desc_start(b);
  size_t bytes = desc_bytes(b), cap = bytes / size;
  b->kind = KIND_VAM_BLOCK;
  b->cls = (uint8_t)cls;
  b->obj_size = (uint32_t)size;
  b->used = 0;
  b->aux8 = cfg_small_headers && vam_classes.size[cls] < VAM_SMALL_LIMIT ? SMALL_HEADER : 0;
  /* The double-free marker lives in the word after the free-list link, if the slot has one. */
  b->marker_off = size - VAM_CANARY - b->aux8 >= 2 * sizeof(void *) || b->aux8 ? b->aux8 + sizeof(void *) : 0;
  b->flags = clean ? FLAG_CLEAN : 0;
  b->u.blk.free = NULL;
  b->u.blk.bump = start;
  if (cfg_block_bitmap) {
    /* Slots from the start, the bitmap (1 = free slot) in the block's last words. */
    while (cap * size + ((cap + 63) / 64) * 8 > bytes) cap--;
    size_t words = (cap + 63) / 64;
    uint64_t *bits = (uint64_t *)(start + bytes - words * 8);
    for (size_t i = 0; i < words; i++) bits[i] = i + 1 < words || cap % 64 == 0 ? ~0ull : (1ull << (cap % 64)) - 1;
    b->aux8 = (uint8_t)words;
    b->u.blk.free = bits;
  }
  b->u.blk.end = start + cap * size;
  vam_block_mark(b);
  vam_block_skip_first(b);
  list_push(&h->d.avail[cls], b);
  return b;
}

static inline size_t vam_capacity(const desc_t *b) {
  return (size_t)(b->u.blk.end - desc_start(b)) / b->obj_size;
}

static void *vam_alloc(heap_t *h, size_t size, bool zero);

static inline size_t vam_bitmap_words(const desc_t *b) { return b->aux8; }

/* vam-bitmap: the first free slot by PHKmalloc's linear search (from slot `from` on, wrapping
 * around: 0 but for a hinted allocation), or NULL. */
static inline char *vam_bitmap_take(heap_t *h, desc_t *b, unsigned from) {
  unsigned inspected;
  uint64_t *bits = b->u.blk.free;
  int i = from ? bits_find_linear_from(bits, vam_bitmap_words(b), from, &inspected)
               : bits_find_linear(bits, vam_bitmap_words(b), &inspected);
  heap_count(h, searches, 1);
  heap_count(h, search_words, inspected);
  heap_count_max(h, search_words_max, inspected);
  if (i < 0) return NULL;
  bits[i >> 6] &= ~(1ull << (i & 63));
  return desc_start(b) + (size_t)i * b->obj_size;
}

/* Block b, the head of its class's available list, just gave out its last object: it leaves
 * the list for the (implicit) full list at once, so every listed block has room and the next
 * malloc of the class finds an object at the head. Doing this here, not when the next malloc
 * misses, keeps it off the slow path: under random churn it happens about once per
 * malloc/free pair. */
static ALWAYS_INLINE void vam_block_retire(heap_t *h, desc_t *b, unsigned cls) {
  h->d.avail[cls] = b->next;
  if (cfg_block_bitmap) b->flags |= FLAG_FULL;
}

static inline bool vam_has_room(const desc_t *b) {
  if (cfg_block_bitmap) return b->used < vam_capacity(b);
  return b->u.blk.bump < b->u.blk.end || b->u.blk.free;
}

/* Whether b is on the (implicit) full list. Blocks retire the moment they fill, so a block is
 * full exactly when it has no room: no flag to keep, except in vam-bitmap, which retires in
 * the slow path. */
static inline bool vam_block_full(const desc_t *b) {
  return cfg_block_bitmap ? (b->flags & FLAG_FULL) != 0 : !vam_has_room(b);
}

/* Takes p, the head of block b's free list, off it (not vam-bitmap). */
static ALWAYS_INLINE void vam_list_pop(heap_t *h, desc_t *b, unsigned cls, char *p, bool zero) {
  void *next = vam_link_load(h, p);
  if (mitigation(KEYED_LINKS) && b->kind != KIND_VAM_FOREIGN) vam_link_check(b, next, p);   /* (foreign: many blocks) */
  b->u.blk.free = next;
  /* Retire when the list ran out (the secure build: and the bump range too, which it serves
   * after the list), without a branch: under churn of mixed sizes it goes either way about
   * half the time (cachegrind: half of these branches mispredicted; the store is
   * unconditional, 16% off threads1 and 12% off a mixed-size server loop). */
  h->d.avail[cls] = mitigation(RANDOM_ORDER) ? pick((next == NULL) & (b->u.blk.bump >= b->u.blk.end), b->next, b)
                                             : pick_null(next, b->next, b);
  if (zero) memset(p, 0, mitigation(CANARIES) ? vam_usable(b) : b->obj_size);
}

/* An object from block b (the head of class cls's list), or NULL if b has no room: reap order,
 * i.e. bump to the block's end first, then the block's free list (vam-bitmap: the bitmap
 * search, from slot `from` on; the secure build: the list first, which holds the slot
 * vam_carve did not pick). */
static ALWAYS_INLINE void *vam_block_take_from(heap_t *h, desc_t *b, unsigned cls, bool zero, unsigned from) {
  char *p;
  if (cfg_block_bitmap) {
    if (b == &h->d.none || !(p = vam_bitmap_take(h, b, from))) return NULL;
    if (zero) memset(p, 0, b->obj_size);
  } else if (mitigation(RANDOM_ORDER) && (p = b->u.blk.free) != NULL) {
    vam_list_pop(h, b, cls, p, zero);
  } else if (likely(b->u.blk.bump < b->u.blk.end)) {
    if (!b->u.blk.bump) __builtin_unreachable();   /* below a block's end: a real address (no NULL test) */
    p = vam_carve(h, b);
    if (unlikely(b->u.blk.bump >= b->u.blk.end) && !b->u.blk.free) vam_block_retire(h, b, cls);
    if (zero && !(b->flags & FLAG_CLEAN)) memset(p, 0, mitigation(CANARIES) ? vam_usable(b) : b->obj_size);
  } else if (likely((p = b->u.blk.free) != NULL)) {
    vam_list_pop(h, b, cls, p, zero);
  } else {
    return NULL;
  }
  if (!cfg_block_bitmap) *(void **)(p + b->marker_off) = NULL;   /* 8-byte slots: the link */
  b->used++;
  h->d.allocs[cls]++;
  if (cfg_small_headers && b->aux8) {
    *(uint64_t *)p = vam_classes.size[b->cls];   /* the header: the object's size */
    p += b->aux8;
  }
  return p;
}

static ALWAYS_INLINE void *vam_block_take(heap_t *h, desc_t *b, unsigned cls, bool zero) {
  return vam_block_take_from(h, b, cls, zero, 0);
}

/* ---- call sites (vam-sites) ------------------------------------------------------------------ */

/* The class index offset of the group a call site's objects go to (see vam.h): 0 unless the
 * site is hot and got a group. Also left in pending_group for the slow path. */
#if LOCUS_VAM_SITES
static NOINLINE unsigned vam_site_promote(heap_t *h, struct vam_site *e) {
  if (h->d.groups_used + 1 < VAM_SITE_GROUPS) return e->group = ++h->d.groups_used;
  h->d.sites_unsegregated++;
  return 0;
}

static ALWAYS_INLINE unsigned vam_site_offset(heap_t *h, uintptr_t ra) {
  if (unlikely(h == &heap_empty)) return 0;
  struct vam_site *e = &h->d.sites[(ra * 0x9E3779B97F4A7C15ull) >> (64 - VAM_SITE_BITS)];
  unsigned g = 0;
  if (likely(e->ra == ra)) {
    g = e->group;
    if (!g && e->count < opt.lf_threshold && ++e->count == opt.lf_threshold) g = vam_site_promote(h, e);
  } else if (!e->group) {   /* a hot site keeps its slot */
    e->ra = ra;
    e->count = 1;
  }
  return h->d.pending_group = g * vam_classes.count;
}
static inline unsigned vam_pending_offset(const heap_t *h) { return h->d.pending_group; }
#else
static ALWAYS_INLINE unsigned vam_site_offset(heap_t *h, uintptr_t ra) { (void)h; (void)ra; return 0; }
static inline unsigned vam_pending_offset(const heap_t *h) { (void)h; return 0; }
#endif

/* The size class of a class index (its group's copy: vam-sites). */
static inline unsigned vam_base_class(unsigned cls) { return cfg_sites ? cls % vam_classes.count : cls; }

/* The head block of class cls has no room: the class has no available block (blocks retire as
 * they fill, see vam_block_retire; vam-bitmap retires them here). Take back what other threads
 * freed, then a batch of the transfer cache, then a new block, and allocate from it. */
static NOINLINE void *vam_alloc_slow(size_t size, bool zero, heap_t *h) {
  /* (size first, as malloc received it, and the class recomputed: malloc's fast path keeps
   * nothing live for this call) */
  if (h == &heap_empty) {   /* the first allocation may come before the class tables exist */
    if (!(h = heap_acquire())) return alloc_failed();
    return vam_alloc(h, size, zero);
  }
  unsigned cls = vam_class_of(size) + vam_pending_offset(h);
  /* A batch of the transfer cache first, before the objects other threads sent home (each of
   * those costs a lookup and a local free to take back; a batch, one exchange): a producer
   * whose consumers free its objects gets them back this way. */
  if (h->d.avail[cls] == &h->d.none) vam_foreign_refill(h, cls);
  heap_collect(h);
  desc_t *b;
  for (;;) {
    b = h->d.avail[cls];
    if (b == &h->d.none) {
      if (!(b = vam_block_new(h, cls))) return alloc_failed();
      break;
    }
    if (vam_has_room(b)) break;
    vam_block_retire(h, b, cls);
  }
  void *p = vam_block_take(h, b, cls, zero);
  heap_debug_tick(h);
  return p;
}
