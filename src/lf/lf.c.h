/* lf.c.h — the pow2/LF policy: power-of-two page blocks, and (LOCUS_LF=1) custom bins for
 * (call site, size) pairs that allocate often. Types, parameters and invariants are in lf.h.
 * Included once, by the library's unity file. */

static sizeclass_table_t lf_classes;
static size_t lf_block_pages;          /* pages per block */

/* ---- call sites (lf only) --------------------------------------------------------------------
 * The context id is sites.h's: the return address of the call into the allocator, or for a call
 * through a wrapper (libc, libstdc++, this library) the first return address up the stack
 * outside the wrappers (unwind.h). The mappings are read at start-up (design_global_init). */

/* The site of a call that came through a wrapper; counted in wrapper_walks and walks_failed
 * (a frame the unwinder cannot follow: the wrapper's own return address is the site). */
static NOINLINE uintptr_t lf_walk(heap_t *h, uintptr_t ra) {
  h->d.lf.wrapper_walks++;
  uintptr_t w = unwind_first_outside();
  if (w) return w;
  h->d.lf.walks_failed++;
  return ra;
}

/* ---- the site table (lf only) --------------------------------------------------------------- */

static inline size_t lf_hash(uintptr_t ctx, uint32_t q) {
  return (size_t)(((ctx ^ ((uint64_t)q << 47)) * 0x9E3779B97F4A7C15ull) >> (64 - LF_TABLE_SHIFT));
}

/* The entry of (ctx, q), or the empty slot where it would go, or NULL (table full, not found). */
static lf_entry_t *lf_find(lf_entry_t *t, uintptr_t ctx, uint32_t q) {
  size_t i = lf_hash(ctx, q);
  for (unsigned n = 0; n < LF_TABLE_SLOTS; n++, i = (i + 1) & (LF_TABLE_SLOTS - 1)) {
    lf_entry_t *e = &t[i];
    if (!e->ctx || (e->ctx == ctx && e->qsize == q)) return e;
  }
  return NULL;
}

/* A new entry for (ctx, q) in its empty slot e, if the table may grow; false when it may not. */
static bool lf_insert(heap_t *h, lf_entry_t *e, uintptr_t ctx, uint32_t q) {
  if (!e || h->d.lf.pairs >= LF_TABLE_MAX) {
    h->d.lf.table_full++;
    return false;
  }
  *e = (lf_entry_t){ .ctx = ctx, .qsize = (uint16_t)q, .bin = LF_COUNTING, .count = 0 };
  h->d.lf.pairs++;
  return true;
}

/* The pair of e passed the threshold (or comes from an intense context): its size gets a custom
 * bin, shared by every context whose pair is decided for that size (bins_shared when it already
 * had one), unless the exact size would fit no more objects in a block than its standard bin
 * cls (64 B, 1500 B: a bin of its own would only add a partly used block; counted in
 * bins_unneeded) or the heap has no bin left (bins_refused); either way its decision is final
 * and counting stops. Its context is intense from now on. Returns the bin to allocate from. */
static NOINLINE unsigned lf_decide(heap_t *h, lf_entry_t *e, unsigned cls) {
  uintptr_t ctx = e->ctx;
  size_t size = (size_t)(e->qsize ? e->qsize : 1) * QUANTUM, block = lf_block_pages << os_page_shift;
  uint8_t *exact = &h->d.exact_bin[size / QUANTUM];
  e->bin = (uint16_t)cls;
  if (block / size <= block / h->d.bins[cls].size) {
    h->d.lf.bins_unneeded++;
  } else if (*exact) {
    e->bin = *exact;
    h->d.lf.bins_shared++;
    sites_flag(h, ctx, SITE_CUSTOM);
  } else if (h->d.nbins < LF_MAX_BINS) {
    unsigned b = h->d.nbins++;
    h->d.bins[b] = (lf_bin_t){ NULL, (uint32_t)size, (uint32_t)(((1ull << RECIP_SHIFT) + size - 1) / size) };
    e->bin = (uint16_t)b;
    *exact = (uint8_t)b;
    h->d.lf.bins_created++;
    sites_flag(h, ctx, SITE_CUSTOM);   /* LOCUS_SITES: "custom yes" */
  } else {
    h->d.lf.bins_refused++;
  }
  lf_entry_t *mark = lf_find(h->d.table, ctx, LF_INTENSE_Q);
  if (mark && !mark->ctx && lf_insert(h, mark, ctx, LF_INTENSE_Q)) h->d.lf.intense++;
  return e->bin;
}

/* The bin of (ctx, q) (standard class cls) after the fast path could not decide: the pair is
 * not in its home slot (not counted yet), or it just passed the threshold (counted). A new pair
 * is inserted; LF-opt decides it at once when its context is intense. An entry's count stops
 * at its decision (per-site calls are sites.h's, LOCUS_SITES). */
static unsigned lf_site_lookup(heap_t *h, uintptr_t ctx, uint32_t q, unsigned cls, bool counted) {
  lf_entry_t *e = lf_find(h->d.table, ctx, q);
  bool fresh = !e || !e->ctx;
  if (fresh && !lf_insert(h, e, ctx, q)) return cls;
  if (e->bin != LF_COUNTING) return e->bin < LF_MAX_BINS ? e->bin : cls;   /* LF_WRAPPER: walk failed */
  if (!counted) e->count++;
  if (fresh && opt.lf_opt) {
    lf_entry_t *mark = lf_find(h->d.table, ctx, LF_INTENSE_Q);
    if (mark && mark->ctx) return lf_decide(h, e, cls);
  }
  return e->count > opt.lf_threshold ? lf_decide(h, e, cls) : cls;
}

/* A request's size in quanta: the table's key beside the context (0 for malloc(0)). */
static inline uint32_t lf_quanta(size_t size) { return (uint32_t)((size + QUANTUM - 1) / QUANTUM); }

static inline void *lf_alloc_bin_ra(heap_t *h, unsigned cls, bool zero, size_t size, uintptr_t ra);

/* Everything the fast path leaves out (one tail call from it, so that it saves no registers):
 * a heap with no table (heap_empty: lf_no_table), a pair away from its home slot, a call through
 * a wrapper, a pair that just passed the threshold. A wrapper's return address gets an entry of
 * its own marked LF_WRAPPER the first time, so that the fast path needs no range test to send
 * its calls here: the walk finds each call's site. */
static NOINLINE void *lf_alloc_site_slow(heap_t *h, size_t size, bool zero, uintptr_t ra, bool counted) {
  unsigned cls = sizeclass_of(&lf_classes, size);
  if (h->d.table != lf_no_table) {
    uint32_t q = lf_quanta(size);
    if (sites_maybe_wrapper(ra) && sites_in_wrapper(ra)) {
      lf_entry_t *w = lf_find(h->d.table, ra, q);
      if (w && !w->ctx && lf_insert(h, w, ra, q)) w->bin = LF_WRAPPER;
      ra = lf_walk(h, ra);
    }
    cls = lf_site_lookup(h, ra, q, cls, counted);
  }
  return lf_alloc_bin_ra(h, cls, zero, size, ra);   /* heap_empty: its slow path gets a heap */
}

/* ---- start-up ----------------------------------------------------------------------------- */

static void design_global_init(void) {
  sizeclass_pow2(&lf_classes, QUANTUM, LF_SMALL_MAX);
  if (lf_classes.count != LF_STD_CLASSES) {
    locus_printf(2, "locus: lf: %u standard classes, expected %u\n", lf_classes.count, LF_STD_CLASSES);
    abort();
  }
  lf_block_pages = LF_BLOCK_BYTES > os_page_size ? LF_BLOCK_BYTES >> os_page_shift : 1;
  if (opt.lf_threshold > UINT32_MAX - 1) opt.lf_threshold = UINT32_MAX - 1;   /* counts are 32-bit */
  if (cfg_lf) sites_read_maps();
}

static void design_heap_init(heap_t *h) {
  for (unsigned c = 0; c < LF_MAX_BINS; c++) h->d.bins[c] = (lf_bin_t){ NULL, 0, 0 };
  for (unsigned c = 0; c < LF_STD_CLASSES; c++)
    h->d.bins[c] = (lf_bin_t){ NULL, lf_classes.size[c], lf_classes.recip[c] };
  h->d.nbins = LF_STD_CLASSES;
  memset(h->d.exact_bin, 0, sizeof h->d.exact_bin);
  h->d.table = cfg_lf ? os_map(LF_TABLE_SLOTS * sizeof(lf_entry_t)) : NULL;
  if (cfg_lf && !h->d.table) h->d.table = lf_no_table;
}

/* ---- blocks --------------------------------------------------------------------------------- */

static void lf_avail_push(heap_t *h, desc_t *b) { desc_list_push(&h->d.bins[b->cls].avail, b); }
static void lf_avail_unlink(heap_t *h, desc_t *b) { desc_list_remove(&h->d.bins[b->cls].avail, b); }

static desc_t *lf_block_new(heap_t *h, unsigned cls) {
  bool clean;
  desc_t *b = pages_alloc(h, lf_block_pages, 1, &clean);
  if (!b) return NULL;
  size_t size = h->d.bins[cls].size, bytes = lf_block_pages << os_page_shift;
  b->kind = KIND_LF_BLOCK;
  b->cls = (uint8_t)cls;
  b->obj_size = (uint32_t)size;
  b->used = 0;
  b->flags = clean ? FLAG_CLEAN : 0;
  b->aux = ++h->d.serial;
  b->u.blk.free = NULL;
  b->u.blk.bump = desc_start(b);
  b->u.blk.end = desc_start(b) + bytes / size * size;
  lf_avail_push(h, b);
  heap_count(h, blocks_in_use, 1);
  if (cfg_lf && cls >= LF_STD_CLASSES) h->d.lf.custom_blocks++;
  return b;
}

static inline uintptr_t lf_marker(const desc_t *b, const void *p) { return free_marker_salted(p, b->aux); }

/* ---- allocation ----------------------------------------------------------------------------- */

static ALWAYS_INLINE void *lf_take(heap_t *h, desc_t *b, bool zero) {
  size_t size = b->obj_size;
  char *p = b->u.blk.free;
  if (p) {
    b->u.blk.free = link_load(p);
    ((uintptr_t *)p)[1] = 0;                     /* no longer a free object's marker */
    if (zero) memset(p, 0, size);
  } else {
    p = b->u.blk.bump;
    b->u.blk.bump = p + size;
    if (zero && !(b->flags & FLAG_CLEAN)) memset(p, 0, size);
    else ((uintptr_t *)p)[1] = 0;   /* a fresh slot never reads as freed (docs/NEXT.md) */
  }
  b->used++;
  if (unlikely(!b->u.blk.free && b->u.blk.bump >= b->u.blk.end)) {
    lf_avail_unlink(h, b);
    b->flags |= FLAG_FULL;
  }
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, size);
  return p;
}

static void *lf_alloc_ctx(heap_t *h, size_t size, bool zero, uintptr_t ra);

/* A thread's first allocation: it gets a heap (the first of the process also runs start-up). */
static NOINLINE void *lf_alloc_first(size_t size, bool zero, uintptr_t ra) {
  heap_t *h = heap_acquire();
  return h ? lf_alloc_ctx(h, size, zero, ra) : alloc_failed();
}

static ALWAYS_INLINE void *lf_alloc_bin(heap_t *h, unsigned cls, bool zero, size_t size, uintptr_t ra);

/* The bin has no block with room: take back what other threads freed, else a new block. */
static NOINLINE void *lf_alloc_slow(heap_t *h, unsigned cls, bool zero, size_t size, uintptr_t ra) {
  if (h == &heap_empty) return lf_alloc_first(size, zero, ra);
  heap_collect(h);
  if (!h->d.bins[cls].avail && !lf_block_new(h, cls)) return alloc_failed();
  heap_debug_tick(h);
  return lf_alloc_bin(h, cls, zero, size, ra);
}

static ALWAYS_INLINE void *lf_alloc_bin(heap_t *h, unsigned cls, bool zero, size_t size, uintptr_t ra) {
  desc_t *b = h->d.bins[cls].avail;
  if (unlikely(!b)) return lf_alloc_slow(h, cls, zero, size, ra);
  return lf_take(h, b, zero);
}

static NOINLINE void *lf_alloc_big(heap_t *h, size_t size, bool zero, uintptr_t ra) {
  if (h == &heap_empty) return lf_alloc_first(size, zero, ra);
  return huge_alloc(h, size, 0, zero);
}

/* LF's fast path: the pair's entry in its home slot (every heap has a table: heap_empty's and
 * one that could not be mapped are lf_no_table, where nothing matches). A decided pair goes
 * straight to its bin, with no size-class lookup; a counting pair counts; anything else is
 * lf_alloc_site_slow's. */
static ALWAYS_INLINE void *lf_alloc_ctx(heap_t *h, size_t size, bool zero, uintptr_t ra) {
  if (unlikely(size > LF_SMALL_MAX)) return lf_alloc_big(h, size, zero, ra);
  if (cfg_lf) {
    uint32_t q = lf_quanta(size);
    lf_entry_t *e = &h->d.table[lf_hash(ra, q)];
    if (unlikely(e->ctx != ra || e->qsize != q)) return lf_alloc_site_slow(h, size, zero, ra, false);
    unsigned bin = e->bin;
    if (likely(bin < LF_MAX_BINS)) return lf_alloc_bin(h, bin, zero, size, ra);
    if (unlikely(bin == LF_WRAPPER)) return lf_alloc_site_slow(h, size, zero, ra, false);
    if (unlikely(++e->count > opt.lf_threshold)) return lf_alloc_site_slow(h, size, zero, ra, true);
  }
  return lf_alloc_bin(h, sizeclass_of(&lf_classes, size), zero, size, ra);
}

static inline void *lf_alloc_bin_ra(heap_t *h, unsigned cls, bool zero, size_t size, uintptr_t ra) {
  return lf_alloc_bin(h, cls, zero, size, ra);
}

/* Inlined into every exported allocation call, so the return address is the caller's. */
static ALWAYS_INLINE void *lf_alloc(heap_t *h, size_t size, bool zero) {
  return lf_alloc_ctx(h, size, zero, cfg_lf ? (uintptr_t)__builtin_return_address(0) : 0);
}

static ALWAYS_INLINE void *design_alloc(heap_t *h, size_t size, bool zero) { return lf_alloc(h, size, zero); }
/* LOCUS_SITES=1 (api.h) passes the caller's address. */
static ALWAYS_INLINE void *design_alloc_ra(heap_t *h, size_t size, bool zero, uintptr_t ra) { return lf_alloc_ctx(h, size, zero, ra); }

/* LF ignores hints. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  (void)hint;
  return lf_alloc(h, size, zero);
}

static unsigned design_kregion_shift(const void *hint) {
  (void)hint;
  return os_page_shift;
}

/* A power-of-two object at least as big as the alignment is aligned to it (up to the page):
 * blocks start on a page and objects lie end to end. Larger alignments: page runs. */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero) {
  if (h == &heap_empty && !(h = heap_acquire())) return alloc_failed();
  size_t need = size > align ? size : align;
  if (align > os_page_size || need > LF_SMALL_MAX) return huge_alloc(h, size, align, zero);
  return lf_alloc_bin(h, sizeclass_of(&lf_classes, need), zero, need, 0);
}

/* ---- free ----------------------------------------------------------------------------------- */

static void lf_block_unfull(heap_t *h, desc_t *b);
static void lf_block_empty(heap_t *h, desc_t *b);

static ALWAYS_INLINE void lf_free(heap_t *h, desc_t *b, void *p, const char *call) {
  size_t off = (size_t)((char *)p - desc_start(b));
  long i = divide_exact(off, b->obj_size, h->d.bins[b->cls].recip);
  if (unlikely(i < 0 || (char *)p >= b->u.blk.bump)) { locus_fatal_jump(call, "invalid pointer", p); return; }
  uintptr_t *w = p, marker = lf_marker(b, p);
  if (unlikely(marker_says_free(w[1], marker))) { locus_fatal_jump(call, "double free", p); return; }
  w[0] = link_encode(p, b->u.blk.free);
  w[1] = marker;
  b->u.blk.free = p;
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, b->obj_size);
  if (unlikely(b->flags & FLAG_FULL)) lf_block_unfull(h, b);
  if (unlikely(--b->used == 0)) lf_block_empty(h, b);
}

static NOINLINE void lf_block_unfull(heap_t *h, desc_t *b) {
  b->flags &= (uint16_t)~FLAG_FULL;
  lf_avail_push(h, b);
}

/* A free emptied the block: back to the page manager, unless it is alone on its bin's list and
 * the policy is not immediate (then kept: one object allocated and freed in a loop keeps it). */
static NOINLINE void lf_block_empty(heap_t *h, desc_t *b) {
  block_emptied(h, &h->d.bins[b->cls].avail, b);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  (void)off;
  if (d->kind == KIND_LF_BLOCK) lf_free(h, d, p, call);
  else core_free(h, d, p, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, segment_t *s, void *p, const char *call) {
  desc_t *d = desc_of_page(s, p);
  if (likely(d->kind == KIND_LF_BLOCK)) lf_free(h, d, p, call);
  else free_in_run(h, p, call);   /* a block's other pages, core runs */
}

/* Checks that p is an object's start in block d (any heap's), or ends the program. */
static void lf_check_object(const desc_t *d, const void *p, const char *call) {
  size_t off = (size_t)((const char *)p - desc_start(d));
  if (d->kind != KIND_LF_BLOCK || off % d->obj_size || (const char *)p >= d->u.blk.end)
    locus_fatal(call, "invalid pointer", p);
}

static void design_collected(desc_t *page, void *p) {
  desc_t *d = page - page->back;
  if (d->kind == KIND_LF_BLOCK) marker_collected((uintptr_t *)p + 1, lf_marker(d, p));
}

static void design_check_remote(desc_t *d, void *p, const char *call) {
  lf_check_object(d, p, call);
  marker_free_remote((uintptr_t *)p + 1, lf_marker(d, p), p, call);
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  lf_check_object(d, p, call);
  return marker_usable(d, p, lf_marker(d, p), call);
}

/* In place while the object still fits and is not more than twice the request. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  (void)h; (void)p;
  return d->kind == KIND_LF_BLOCK && sizeclass_resize_fits(d->obj_size, d->cls == 0 ? 0 : 1, size);
}

static void design_release_spares(heap_t *h) {
  for (unsigned c = 0; c < h->d.nbins; c++) {
    for (desc_t *b = h->d.bins[c].avail, *next; b; b = next) {
      next = b->next;
      if (b->used == 0) {
        lf_avail_unlink(h, b);
        block_release(h, b);
      }
    }
  }
}

static void design_purge(heap_t *h) { design_release_spares(h); }

/* ---- LF's statistics -------------------------------------------------------------------------- */

/* LF's counters summed over every heap, as one JSON object (pow2: all zero); returns the length
 * the whole object needs, like snprintf. */
LOCUS_API size_t locus_lf_stats_json(char *buf, size_t len) {
  lf_counters_t sum = { 0 };
  uint64_t bins = 0;
  for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all) {
#define X(name) sum.name += __atomic_load_n(&h->d.lf.name, __ATOMIC_RELAXED);
    LF_COUNTERS(X)
#undef X
    bins += __atomic_load_n(&h->d.nbins, __ATOMIC_RELAXED) - LF_STD_CLASSES;
  }
  char dummy[1];
  outbuf_t o = { len ? buf : dummy, len ? len : 1, 0, 0, -1 };
  out_fmt(&o, "{\"lf\": %s, \"threshold\": %lu, \"opt\": %s, \"custom_bins\": %lu, \"custom_bins_max\": %u, \"table_max\": %u",
          cfg_lf ? "true" : "false", (unsigned long)opt.lf_threshold, opt.lf_opt ? "true" : "false",
          (unsigned long)bins, LF_CUSTOM_MAX, LF_TABLE_MAX);
#define X(name) out_fmt(&o, ", \"%s\": %lu", #name, (unsigned long)sum.name);
  LF_COUNTERS(X)
#undef X
  out_str(&o, "}");
  o.buf[o.pos] = 0;
  return o.need;
}

/* ---- consistency check ---------------------------------------------------------------------- */

static size_t lf_check_block(heap_t *h, desc_t *b) {
  size_t bad = 0;
  CHECK(b->cls < h->d.nbins && desc_segment(b)->heap == h);
  if (b->cls >= h->d.nbins) return bad;
  size_t size = h->d.bins[b->cls].size, bytes = lf_block_pages << os_page_shift;
  CHECK(b->obj_size == size && b->npages == lf_block_pages);
  size_t cap = bytes / size;
  char *start = desc_start(b);
  CHECK(b->u.blk.end == start + cap * size && b->u.blk.bump >= start && b->u.blk.bump <= b->u.blk.end);
  size_t nfree = 0;
  for (char *f = b->u.blk.free; f && nfree <= cap; f = link_load(f)) {
    CHECK(f >= start && f < b->u.blk.bump && (size_t)(f - start) % size == 0);
    CHECK(((uintptr_t *)f)[1] == lf_marker(b, f));
    nfree++;
  }
  size_t untouched = (size_t)(b->u.blk.end - b->u.blk.bump) / size;
  CHECK(b->used + nfree + untouched == cap);
  CHECK(!(b->flags & FLAG_FULL) == (nfree + untouched != 0));
  return bad;
}

static size_t design_check(heap_t *h) {
  size_t bad = 0, listed = 0, full = 0, blocks = 0;
  CHECK(h->d.nbins >= LF_STD_CLASSES && h->d.nbins <= LF_MAX_BINS);
  for (unsigned c = 0; c < h->d.nbins; c++) {
    size_t empty = 0;
    CHECK(h->d.bins[c].size % QUANTUM == 0 && h->d.bins[c].size <= LF_SMALL_MAX);
    CHECK(c >= LF_STD_CLASSES || h->d.bins[c].size == (QUANTUM << c));
    CHECK(c < LF_STD_CLASSES || h->d.exact_bin[h->d.bins[c].size / QUANTUM] == c);   /* one bin per size */
    for (desc_t *b = h->d.bins[c].avail; b; b = b->next) {
      CHECK(b->kind == KIND_LF_BLOCK && b->cls == c && !(b->flags & FLAG_FULL));
      CHECK(!b->next || b->next->prev == b);
      empty += b->used == 0;
      listed++;
    }
    CHECK(empty <= 1);
  }
  HEAP_FOR_EACH_RUN(h, KIND_LF_BLOCK, r, {
    blocks++;
    bad += lf_check_block(h, r);
    if (r->flags & FLAG_FULL) full++;
  })
  CHECK(listed + full == blocks);
  CHECK(blocks == heap_counter(h, blocks_in_use));
  if (h->d.table && h->d.table != lf_no_table) {
    size_t pairs = 0;
    for (size_t i = 0; i < LF_TABLE_SLOTS; i++) {
      const lf_entry_t *e = &h->d.table[i];
      if (!e->ctx) continue;
      pairs++;
      CHECK(e->bin == LF_COUNTING || e->bin == LF_WRAPPER || e->bin < h->d.nbins);
      CHECK(e->qsize == LF_INTENSE_Q ? e->bin == LF_COUNTING : e->qsize <= LF_SMALL_MAX / QUANTUM);
    }
    CHECK(pairs == h->d.lf.pairs && pairs <= LF_TABLE_MAX);
  }
  return bad;
}

