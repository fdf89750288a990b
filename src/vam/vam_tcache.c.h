/* vam_tcache.c.h — the thread cache (vam.h): the objects this heap freed last, per class, which
 * malloc hands out first. Taking one and putting one back touch only the heap's own arrays;
 * a free that finds its class's stack full goes to its block as without the cache, and the
 * blocks get the cached objects back at thread exit, at purge, and for a hinted allocation. */

/* The objects of class cls a heap's thread cache may hold: only classes whose slots the free
 * fast path serves (a marker word: 16 B and more), VAM_TCACHE_BYTES of them, at least 2; none
 * under the immediate discard policy or LOCUS_TCACHE=0. */
static unsigned vam_tcache_cap(unsigned cls) {
  size_t slot = vam_slot_size(cls);
  if (!cfg_tcache || !opt.tcache || opt.discard == DISCARD_IMMEDIATE || !vam_recip(slot)) return 0;
  size_t cap = VAM_TCACHE_BYTES / slot;
  return (unsigned)(cap < 2 ? 2 : cap > VAM_TCACHE_SLOTS ? VAM_TCACHE_SLOTS : cap);
}

/* (size + 7) >> 3 -> the offset of the size's thread-cache bin in a heap: malloc's hit path
 * goes from the size to the bin in one load, without the class index. */
static uint16_t vam_tbin_offset[(VAM_MEDIUM_MAX >> 3) + 1];

static void vam_tcache_global_init(void) {
  for (size_t i = 0; i <= VAM_MEDIUM_MAX >> 3; i++)
    vam_tbin_offset[i] = (uint16_t)(offsetof(heap_t, d.tbin) + vam_classes.lookup[i] * sizeof(vam_tbin_t));
}
_Static_assert(!VAM_TCACHE || offsetof(heap_t, d.tbin) + VAM_MAX_CLASSES * sizeof(vam_tbin_t) <= UINT16_MAX, "bin offsets fit 16 bits");

static inline vam_tbin_t *vam_tbin_of_size(heap_t *h, size_t size) {
  return (vam_tbin_t *)((char *)h + vam_tbin_offset[(size + 7) >> 3]);
}

static void vam_tcache_init(heap_t *h) {
  for (unsigned c = 0; c < vam_nclasses; c++) {
    vam_tbin_t *t = &h->d.tbin[c];
    t->top = t->slot;
    t->limit = t->slot + vam_tcache_cap(c);
  }
}

static inline unsigned vam_tcache_count(const vam_tbin_t *t) {
  return t->top ? (unsigned)(t->top - t->slot) : 0;
}

/* The most recently cached object of the class of size (at most VAM_MEDIUM_MAX), marker
 * cleared, or NULL. */
static ALWAYS_INLINE void *vam_tcache_take(heap_t *h, size_t size, bool zero) {
  vam_tbin_t *t = vam_tbin_of_size(h, size);
  void **top = t->top;
  if (!((uintptr_t)top & (sizeof(vam_tbin_t) - 1))) return NULL;   /* at the bin's start: empty */
  uintptr_t *p = *--top;
  t->top = top;
  p[1] = 0;
  t->allocs++;
  if (zero) memset(p, 0, vam_slot_size(sizeclass_of(&vam_classes, size)));
  return p;
}

/* Caches slot p (checked: handed out, not free) of class cls, marked free; false if the
 * class's stack is full. */
static ALWAYS_INLINE bool vam_tcache_put(heap_t *h, unsigned cls, void *p, uintptr_t marker) {
  vam_tbin_t *t = &h->d.tbin[cls];
  void **top = t->top;
  if (unlikely(top >= t->limit)) return false;
  ((uintptr_t *)p)[1] = marker;
  *top = p;
  t->top = top + 1;
  t->frees++;
  return true;
}

/* The same for slot p of another heap's block (the foreign-object cache's checks passed but
 * the marker's): a marker already there is a double free. */
static ALWAYS_INLINE bool vam_tcache_put_foreign(heap_t *me, unsigned cls, void *p, const char *call) {
  vam_tbin_t *t = &me->d.tbin[cls];
  void **top = t->top;
  if (unlikely(top >= t->limit)) return false;   /* (heap_empty: NULL, NULL) */
  marker_free_remote((uintptr_t *)p + 1, free_marker(p), p, call);
  *top = p;
  t->top = top + 1;
  t->frees++;
  return true;
}

static ALWAYS_INLINE void vam_block_put(heap_t *h, desc_t *b, void *p, uintptr_t marker);
static void vam_foreign_keep_slow(heap_t *me, heap_t *h, desc_t *b, void *p, const char *call);

/* Cached object p, off its stack, back to its block (freed, as counted already); another
 * heap's object is freed again the foreign way (which marks and counts it). Its block is live
 * (p counts in use there): its class is stable. */
static void vam_tcache_put_back(heap_t *h, void *p) {
  segment_t *s = segment_of(p);
  desc_t *page = desc_of_page(s, p), *b = page - page->back;
  if (likely(s->heap == h)) {
    vam_block_put(h, b, p, free_marker(p));
  } else {
    ((uintptr_t *)p)[1] = 0;
    h->d.tbin[b->cls].frees--;
    vam_foreign_keep_slow(h, s->heap, b, p, "free()");
  }
}

/* The cached objects slot[0 .. k-1] of class cls go back to their blocks, the rest moves
 * down. (Off the stack first: a block that empties runs the debug checks.) */
static void vam_tcache_return(heap_t *h, unsigned cls, unsigned k) {
  vam_tbin_t *t = &h->d.tbin[cls];
  unsigned n = vam_tcache_count(t);
  void *out[VAM_TCACHE_SLOTS];
  memcpy(out, t->slot, k * sizeof(void *));
  memmove(t->slot, t->slot + k, (n - k) * sizeof(void *));
  t->top = t->slot + (n - k);
  for (unsigned i = 0; i < k; i++) vam_tcache_put_back(h, out[i]);
}

/* Every cached object back to its block (thread exit, purge): every stack emptied first. */
static void vam_tcache_flush(heap_t *h) {
  if (!cfg_tcache) return;
  void *out[VAM_CLASSES * VAM_TCACHE_SLOTS];   /* (no site groups with the cache) */
  unsigned k = 0;
  for (unsigned c = 0; c < vam_nclasses; c++) {
    vam_tbin_t *t = &h->d.tbin[c];
    for (unsigned i = 0; i < vam_tcache_count(t); i++) out[k++] = t->slot[i];
    if (t->top) t->top = t->slot;
  }
  for (unsigned i = 0; i < k; i++) vam_tcache_put_back(h, out[i]);
}

/* Allocation near a hint (vam_hints.c.h): a cached object of class cls on the hint's page if
 * there is one (taken out of the stack's order); else NULL, and the class's cached objects go
 * back to their blocks, so that the hint's block and its neighbours see their freed slots. */
static void *vam_tcache_take_near(heap_t *h, unsigned cls, const void *hint, bool zero) {
  vam_tbin_t *t = &h->d.tbin[cls];
  unsigned n = vam_tcache_count(t);
  for (unsigned i = n; i-- > 0;) {
    uintptr_t *p = t->slot[i];
    if (((uintptr_t)p ^ (uintptr_t)hint) >> os_page_shift) continue;
    t->slot[i] = t->slot[n - 1];
    t->top--;
    p[1] = 0;
    t->allocs++;
    if (zero) memset(p, 0, vam_slot_size(cls));
    return p;
  }
  vam_tcache_return(h, cls, n);
  return NULL;
}
