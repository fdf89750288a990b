/* tp.c.h — the TP policy: K-regions of one size class each, found by the hint's address first
 * and by size second, in O(1) both ways. Types, the size table and the invariants are in tp.h.
 * Included once, by the library's unity file. */

static sizeclass_table_t tp_classes;
static size_t tp_limit;            /* largest request in a K-region; 0 until start-up ran */

/* Per class, fixed at start-up (LOCUS_TP_K is read by then). */
typedef struct tp_class {
  uint8_t k;            /* log2 of the class's K-regions */
  uint8_t nregions;     /* K-regions per block: max(1, page >> k) */
  uint16_t capacity;    /* objects per K-region */
  uint32_t npages;      /* pages per block: max(2^k, page) / page */
} tp_class_t;
static tp_class_t tp_class_info[TP_MAX_CLASSES];

typedef uint64_t tp_word_t __attribute__((may_alias));   /* the room bits live in u.any[0] */

static inline tp_word_t *tp_room(desc_t *b) { return (tp_word_t *)&b->u.any[0]; }
static inline uint32_t tp_serial(const desc_t *b) { return (uint32_t)(uintptr_t)b->u.any[1]; }
static inline char *tp_start(const desc_t *b) { return b->u.any[2]; }
static inline tp_region_t *tp_region(const desc_t *b, unsigned r) {
  return (tp_region_t *)(tp_start(b) + ((size_t)r << b->aux8));
}
static inline uintptr_t tp_marker(const desc_t *b, const void *p) { return free_marker_salted(p, tp_serial(b)); }

/* The seed's K by object size; LOCUS_TP_K for objects up to 512 B. */
static unsigned tp_seed_k(size_t size) {
  if (size <= TP_SMALL_MAX) return (unsigned)opt.tp_k;
  return 13 + log2_floor((size - 1) / 512);   /* 513..1024: 13, ..., 8193..16384: 17 */
}

static void design_global_init(void) {
  sizeclass_table_t *t = &tp_classes;
  t->count = 0;
  for (size_t s = QUANTUM; s <= TP_SMALL_MAX; s += QUANTUM) sizeclass_add(t, s);
  for (size_t lim = 2 * TP_SMALL_MAX, step = 64; lim <= TP_MAX; lim *= 2, step *= 2)
    for (size_t s = lim / 2 + step; s <= lim; s += step) sizeclass_add(t, s);
  sizeclass_finish(t);
  /* A block's room bits are one word: at most 64 K-regions per page. */
  unsigned kmin = os_page_shift > 6 ? os_page_shift - 6 : 0;
  for (unsigned c = 0; c < t->count; c++) {
    size_t size = t->size[c];
    unsigned k = tp_seed_k(size);
    while (((size_t)1 << k) < TP_HEADER + size) k++;   /* room for the header and one object */
    if (k < kmin) k = kmin;
    tp_class_t *info = &tp_class_info[c];
    info->k = (uint8_t)k;
    info->nregions = (uint8_t)(k < os_page_shift ? os_page_size >> k : 1);
    info->capacity = (uint16_t)((((size_t)1 << k) - TP_HEADER) / size);
    info->npages = (uint32_t)(k > os_page_shift ? (size_t)1 << (k - os_page_shift) : 1);
  }
  tp_limit = TP_MAX;
}

static void design_heap_init(heap_t *h) {
  for (unsigned c = 0; c < TP_MAX_CLASSES; c++) h->d.avail[c] = NULL;
}

/* ---- block lists ---------------------------------------------------------------------------- */

static void tp_avail_push(heap_t *h, desc_t *b) { desc_list_push(&h->d.avail[b->cls], b); }
static void tp_avail_unlink(heap_t *h, desc_t *b) { desc_list_remove(&h->d.avail[b->cls], b); }

/* A new block of class cls: max(2^K, page) bytes aligned to their size, every K-region empty,
 * at the front of the class's list. */
static desc_t *tp_block_new(heap_t *h, unsigned cls) {
  const tp_class_t *info = &tp_class_info[cls];
  bool clean;
  desc_t *b = pages_alloc(h, info->npages, info->npages, &clean);
  if (!b) return NULL;
  b->kind = KIND_TP_BLOCK;
  b->cls = (uint8_t)cls;
  b->obj_size = tp_classes.size[cls];
  b->aux8 = info->k;
  b->aux = info->capacity;
  b->used = 0;
  b->flags = clean ? FLAG_CLEAN : 0;
  b->u.any[1] = (void *)(uintptr_t)++h->d.serial;
  b->u.any[2] = desc_start(b);
  for (unsigned r = 0; r < info->nregions; r++) {
    tp_region_t *reg = tp_region(b, r);
    reg->free = NULL;
    reg->bump = 0;
    reg->used = 0;
    reg->reserved = 0;
  }
  *tp_room(b) = info->nregions == 64 ? ~0ull : (1ull << info->nregions) - 1;
  tp_avail_push(h, b);
  heap_count(h, blocks_in_use, 1);
  return b;
}

/* The TP block whose run holds p, a page of segment s (any address of it); NULL when that page
 * is not a TP block's. Safe on another heap's segment (its descriptors may change meanwhile:
 * the back step is bounded). */
static inline desc_t *tp_block_at(segment_t *s, const void *p) {
  size_t index = page_index(s, p);
  desc_t *d = &s->desc[index];
  if (d->kind == KIND_INTERIOR) {
    uint32_t back = d->back;
    if (back > index) return NULL;
    d -= back;
  }
  return d->kind == KIND_TP_BLOCK ? d : NULL;
}

/* ---- allocation ----------------------------------------------------------------------------- */

/* An object from K-region r of block b, which has room: its free list first, else its next
 * never-used object. A region that gives its last object clears its room bit; a block with no
 * room left leaves its class's list. */
static ALWAYS_INLINE void *tp_take(heap_t *h, desc_t *b, unsigned r, bool zero) {
  tp_region_t *reg = tp_region(b, r);
  size_t size = b->obj_size;
  char *p = reg->free;
  if (p) {
    reg->free = link_load(p);
    ((uintptr_t *)p)[1] = 0;                     /* no longer a free object's marker */
    if (zero) memset(p, 0, size);
  } else {
    p = (char *)reg + TP_HEADER + (size_t)reg->bump++ * size;
    if (zero && !(b->flags & FLAG_CLEAN)) memset(p, 0, size);
    else ((uintptr_t *)p)[1] = 0;   /* a fresh slot never reads as freed (as vam and phk-reap) */
  }
  reg->used++;
  b->used++;
  if (unlikely(!reg->free && reg->bump == b->aux)) {
    tp_word_t *room = tp_room(b);
    *room &= ~(1ull << r);
    if (!*room) {
      tp_avail_unlink(h, b);
      b->flags |= FLAG_FULL;
    }
  }
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, size);
  return p;
}

static void *tp_alloc_class(heap_t *h, unsigned cls, bool zero);
static void *tp_alloc(heap_t *h, size_t size, bool zero);

/* A thread's first allocation: it gets a heap (the first of the process also runs start-up,
 * until which every request takes tp_alloc_big: the limit is 0). */
static NOINLINE void *tp_alloc_first(size_t size, bool zero) {
  heap_t *h = heap_acquire();
  return h ? tp_alloc(h, size, zero) : alloc_failed();
}

/* The class has no block with room: take back what other threads freed, and if that gives
 * none either, make a new block. */
static NOINLINE void *tp_alloc_slow(heap_t *h, unsigned cls, bool zero) {
  if (h == &heap_empty) return tp_alloc_first(tp_classes.size[cls], zero);
  heap_collect(h);
  if (!h->d.avail[cls] && !tp_block_new(h, cls)) return alloc_failed();
  heap_debug_tick(h);
  return tp_alloc_class(h, cls, zero);
}

/* Allocation by size: the first block of the class with room, its lowest K-region with room. */
static ALWAYS_INLINE void *tp_alloc_class(heap_t *h, unsigned cls, bool zero) {
  desc_t *b = h->d.avail[cls];
  if (unlikely(!b)) return tp_alloc_slow(h, cls, zero);
  return tp_take(h, b, (unsigned)__builtin_ctzll(*tp_room(b)), zero);
}

/* Above 16 KiB: the core's huge objects. */
static NOINLINE void *tp_alloc_big(heap_t *h, size_t size, bool zero) {
  if (h == &heap_empty) return tp_alloc_first(size, zero);
  return huge_alloc(h, size, 0, zero);
}

static ALWAYS_INLINE void *tp_alloc(heap_t *h, size_t size, bool zero) {
  if (likely(size <= tp_limit)) return tp_alloc_class(h, sizeclass_of(&tp_classes, size), zero);
  return tp_alloc_big(h, size, zero);
}

static ALWAYS_INLINE void *design_alloc(heap_t *h, size_t size, bool zero) { return tp_alloc(h, size, zero); }

/* Address first: a free object in the hint's K-region if it is this heap's and holds this size
 * class (the block's descriptor gives K; hint & ~(2^K - 1) is the region's header); else size:
 * as malloc. The hint may be any address: the segment map, the owner and the page's kind are
 * checked before anything in the region is read. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  if (size > tp_limit || h == &heap_empty || segmap_get(hint) != GRANULE_SEGMENT) return tp_alloc(h, size, zero);
  segment_t *s = segment_of(hint);
  unsigned cls = sizeclass_of(&tp_classes, size);
  desc_t *b = s->heap == h ? tp_block_at(s, hint) : NULL;
  if (b && b->cls == cls) {
    unsigned r = (unsigned)(((uintptr_t)hint - (uintptr_t)tp_start(b)) >> b->aux8);
    if (*tp_room(b) & (1ull << r)) return tp_take(h, b, r, zero);
  }
  return tp_alloc_class(h, cls, zero);
}

/* K of the hint's K-region when the hint is TP memory (of any heap), else the page's. */
static unsigned design_kregion_shift(const void *hint) {
  if (segmap_get(hint) == GRANULE_SEGMENT) {
    desc_t *b = tp_block_at(segment_of(hint), hint);
    if (b) return b->aux8;
  }
  return os_page_shift;
}

/* Objects sit 16 B past their K-region's start, so none is aligned beyond the quantum: larger
 * alignments get a run of pages (the core's huge objects). */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero) {
  return huge_alloc(h, size, align, zero);
}

/* ---- free ----------------------------------------------------------------------------------- */

static void tp_block_unfull(heap_t *h, desc_t *b);
static void tp_block_empty(heap_t *h, desc_t *b);

/* The index of p in its K-region of block b, or -1 if p is not an object's start there (the
 * header, an interior pointer, the tail past the last object). */
static inline long tp_index(const desc_t *b, const void *p) {
  size_t off = (uintptr_t)p & (((size_t)1 << b->aux8) - 1);
  if (off < TP_HEADER) return -1;
  long i = sizeclass_index(&tp_classes, b->cls, off - TP_HEADER);
  return (unsigned long)i < b->aux ? i : -1;
}

static ALWAYS_INLINE void tp_free(heap_t *h, desc_t *b, void *p, const char *call) {
  long i = tp_index(b, p);
  if (unlikely(i < 0)) { locus_fatal_jump(call, "invalid pointer", p); return; }
  unsigned k = b->aux8;
  tp_region_t *reg = (tp_region_t *)((uintptr_t)p & ~(((uintptr_t)1 << k) - 1));
  if (unlikely(i >= reg->bump)) { locus_fatal_jump(call, "double free or invalid pointer", p); return; }
  uintptr_t *w = p, marker = tp_marker(b, p);
  if (unlikely(marker_says_free(w[1], marker))) { locus_fatal_jump(call, "double free", p); return; }
  w[0] = link_encode(p, reg->free);
  w[1] = marker;
  reg->free = p;
  reg->used--;
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, b->obj_size);
  unsigned r = (unsigned)(((char *)reg - tp_start(b)) >> k);
  tp_word_t *room = tp_room(b);
  if (unlikely(!(*room & (1ull << r)))) {
    *room |= 1ull << r;
    if (b->flags & FLAG_FULL) tp_block_unfull(h, b);
  }
  if (unlikely(--b->used == 0)) tp_block_empty(h, b);
}

/* A free into a full block: it has room again and goes to the front of its class's list. */
static NOINLINE void tp_block_unfull(heap_t *h, desc_t *b) {
  b->flags &= (uint16_t)~FLAG_FULL;
  tp_avail_push(h, b);
}

/* A free emptied the block: back to the page manager, unless it is alone on its class's list
 * and the policy is not immediate (then kept, see tp.h). */
static NOINLINE void tp_block_empty(heap_t *h, desc_t *b) {
  block_emptied(h, &h->d.avail[b->cls], b);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  (void)off;
  if (d->kind == KIND_TP_BLOCK) tp_free(h, d, p, call);
  else core_free(h, d, p, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, segment_t *s, void *p, const char *call) {
  desc_t *d = desc_of_page(s, p);
  if (likely(d->kind == KIND_TP_BLOCK)) tp_free(h, d, p, call);
  else free_in_run(h, p, call);   /* a multi-page block's other pages, core runs */
}

/* The index of p in block d (a run head of any kind), or a fatal error. */
static long tp_index_checked(const desc_t *d, const void *p, const char *call) {
  long i = d->kind == KIND_TP_BLOCK ? tp_index(d, p) : -1;
  if (i < 0) locus_fatal(call, "invalid pointer", p);
  return i;
}

static void design_collected(desc_t *page, void *p) {
  desc_t *d = page - page->back;
  if (d->kind == KIND_TP_BLOCK) marker_collected((uintptr_t *)p + 1, tp_marker(d, p));
}

/* Another thread is about to hand p back to its owner: marked free, so a second free of it,
 * from any thread, is caught. */
static void design_check_remote(desc_t *d, void *p, const char *call) {
  tp_index_checked(d, p, call);
  marker_free_remote((uintptr_t *)p + 1, tp_marker(d, p), p, call);
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  tp_index_checked(d, p, call);
  return marker_usable(d, p, tp_marker(d, p), call);
}

/* In place while the object's class still fits and is not more than twice the request. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  (void)h; (void)p;
  return d->kind == KIND_TP_BLOCK && sizeclass_resize_fits(d->obj_size, d->cls, size);
}

/* The empty blocks kept for reuse (at most one per class) go back. */
static void design_release_spares(heap_t *h) {
  for (unsigned c = 0; c < tp_classes.count; c++) {
    for (desc_t *b = h->d.avail[c], *next; b; b = next) {
      next = b->next;
      if (b->used == 0) {
        tp_avail_unlink(h, b);
        block_release(h, b);
      }
    }
  }
}

static void design_purge(heap_t *h) { design_release_spares(h); }

/* ---- consistency check ---------------------------------------------------------------------- */

/* One block: its shape, and each K-region's free list and counts against its room bit. */
static size_t tp_check_block(heap_t *h, desc_t *b) {
  size_t bad = 0;
  unsigned cls = b->cls;
  CHECK(cls < tp_classes.count && desc_segment(b)->heap == h);
  if (cls >= tp_classes.count) return bad;
  const tp_class_t *info = &tp_class_info[cls];
  CHECK(b->obj_size == tp_classes.size[cls] && b->aux8 == info->k && b->aux == info->capacity);
  CHECK(b->npages == info->npages && tp_start(b) == desc_start(b));
  CHECK(((uintptr_t)tp_start(b) & ((info->npages << os_page_shift) - 1)) == 0);   /* aligned */
  size_t used = 0;
  uint64_t room = 0;
  for (unsigned r = 0; r < info->nregions; r++) {
    tp_region_t *reg = tp_region(b, r);
    size_t nfree = 0;
    CHECK(reg->bump <= info->capacity);
    for (char *f = reg->free; f && nfree <= info->capacity; f = link_load(f)) {
      CHECK((tp_region_t *)((uintptr_t)f & ~(((uintptr_t)1 << info->k) - 1)) == reg);
      long i = tp_index(b, f);
      CHECK(i >= 0 && i < reg->bump);
      CHECK(((uintptr_t *)f)[1] == tp_marker(b, f));
      nfree++;
    }
    CHECK(reg->used + nfree + (info->capacity - reg->bump) == info->capacity);
    if (reg->free || reg->bump < info->capacity) room |= 1ull << r;
    used += reg->used;
  }
  CHECK(used == b->used && room == *tp_room(b));
  CHECK(!(b->flags & FLAG_FULL) == (room != 0));
  return bad;
}

/* Every block (found through the segments) is checked and is on its class's list or FLAG_FULL;
 * a list holds at most one empty block. */
static size_t design_check(heap_t *h) {
  size_t bad = 0, listed = 0, full = 0, blocks = 0;
  for (unsigned c = 0; c < tp_classes.count; c++) {
    size_t empty = 0;
    CHECK(!h->d.avail[c] || h->d.avail[c]->prev == NULL);
    for (desc_t *b = h->d.avail[c]; b; b = b->next) {
      CHECK(b->kind == KIND_TP_BLOCK && b->cls == c && !(b->flags & FLAG_FULL) && *tp_room(b));
      CHECK(!b->next || b->next->prev == b);
      empty += b->used == 0;
      listed++;
    }
    CHECK(empty <= 1);
  }
  HEAP_FOR_EACH_RUN(h, KIND_TP_BLOCK, r, {
    blocks++;
    bad += tp_check_block(h, r);
    if (r->flags & FLAG_FULL) full++;
  })
  CHECK(listed + full == blocks);
  CHECK(blocks == heap_counter(h, blocks_in_use));
  return bad;
}

