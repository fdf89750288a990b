/* medius.c.h — the Medius policy: K-region records as lists of size-class lists, a cache of
 * K-regions per size class, blocks with 16-byte headers bumped through spans. Types and
 * invariants are in medius.h. Included once, by the library's unity file. */

static unsigned medius_k;                 /* log2 of a K-region's bytes */
static size_t medius_span_bytes;          /* 2^max(K, MEDIUS_SPAN_SHIFT) */
static size_t medius_limit;               /* 0 until start-up: a first call takes the slow path */

enum medius_state { M_INUSE = 5, M_FREE = 6, M_REMOTE = 7, M_FILLER = 9, M_BAD = 0 };

static inline size_t medius_class_size(unsigned cls) { return ((size_t)cls + 1) * MEDIUS_HEADER; }
static inline unsigned medius_class_of(size_t size) {
  return size ? (unsigned)((size + MEDIUS_HEADER - 1) / MEDIUS_HEADER) - 1 : 0;
}

static void design_global_init(void) {
  if (opt.medius_k < os_page_shift || opt.medius_k > MEDIUS_K_MAX) {
    locus_printf(2, "locus: warning: bad value for LOCUS_MEDIUS_K: %lu (K from %u to %u; kept 12)\n",
                 (unsigned long)opt.medius_k, os_page_shift, MEDIUS_K_MAX);
    opt.medius_k = 12 < os_page_shift ? os_page_shift : 12;
  }
  medius_k = (unsigned)opt.medius_k;
  medius_span_bytes = (size_t)1 << (medius_k > MEDIUS_SPAN_SHIFT ? medius_k : MEDIUS_SPAN_SHIFT);
  medius_limit = MEDIUS_MAX;
}

static void design_heap_init(heap_t *h) { memset(&h->d, 0, sizeof h->d); }

/* ---- headers ---------------------------------------------------------------------------------- */

typedef uint64_t medius_word_t __attribute__((may_alias));

static inline medius_word_t *medius_hdr(const void *p) { return (medius_word_t *)p - 2; }
static inline uint64_t medius_key(const void *p, const desc_t *sp) {
  return (uintptr_t)p ^ free_marker_cookie ^ (uint64_t)sp->obj_size << 48;
}
static inline uint64_t medius_size_word(uint64_t key, unsigned cls) {
  uint64_t x = key ^ cls;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  return (x & ~(uint64_t)0xFFFF) | cls;
}
static inline void medius_set_header(void *p, const desc_t *sp, unsigned cls, unsigned state) {
  uint64_t key = medius_key(p, sp);
  medius_word_t *hdr = medius_hdr(p);
  hdr[0] = medius_size_word(key, cls);
  hdr[1] = key ^ state;
}
static inline void medius_set_state(void *p, const desc_t *sp, unsigned state) {
  medius_hdr(p)[1] = medius_key(p, sp) ^ state;
}

/* The state of the block whose object p claims to be in span sp with its end at or below
 * `limit`, its class in *cls; M_BAD when p is not such a block (or its header was overwritten).
 * Reads memory only inside the span. */
static inline unsigned medius_state_of(const desc_t *sp, const void *p, const char *limit, unsigned *cls) {
  const char *start = desc_start(sp), *q = p;
  if (((uintptr_t)q & (MEDIUS_HEADER - 1)) || q < start + MEDIUS_HEADER || q >= limit) return M_BAD;
  const medius_word_t *hdr = medius_hdr(p);
  uint64_t key = medius_key(p, sp);
  uint64_t state = __atomic_load_n(&hdr[1], __ATOMIC_RELAXED) ^ key;
  if (state != M_INUSE && state != M_FREE && state != M_REMOTE) return M_BAD;
  uint64_t w = hdr[0];
  unsigned c = (unsigned)(w & 0xFFFF);
  if (c >= MEDIUS_CLASSES || w != medius_size_word(key, c) || medius_class_size(c) > (size_t)(limit - q))
    return M_BAD;
  *cls = c;
  return (unsigned)state;
}

/* ---- spans and K-region records ---------------------------------------------------------------- */

static inline char *span_bump(const desc_t *sp) { return sp->u.any[1]; }
static inline char *span_end(const desc_t *sp) { return sp->u.any[2]; }
static inline mnode_t **record_nodes(desc_t *rec) { return (mnode_t **)&rec->u.any[0]; }

/* The record of the K-region holding p, which lies in span sp. */
static inline desc_t *medius_record(const void *p) {
  const void *base = (const void *)((uintptr_t)p & ~(((uintptr_t)1 << medius_k) - 1));
  return desc_of_page(segment_of(p), base);
}

/* The record of address a's K-region if a lies in one of h's spans, else NULL. Reads only the
 * segment map, the segment header and page descriptors, never a itself (a hint may be any
 * address). */
static desc_t *medius_record_of(heap_t *h, const void *a) {
  if (segmap_get(a) != GRANULE_SEGMENT) return NULL;
  segment_t *s = segment_of(a);
  if (s->heap != h) return NULL;            /* another heap's lists are not ours */
  desc_t *d = desc_of_page(s, a);
  if (d->kind == KIND_INTERIOR) d -= d->back;
  if (d->kind != KIND_MEDIUS_SPAN) return NULL;
  return medius_record(a);
}

static void medius_span_release(heap_t *h, desc_t *sp);

/* A new current span. The old one keeps its blocks; its unbumped tail is left unused. */
static desc_t *medius_span_new(heap_t *h) {
  size_t pages = medius_span_bytes >> os_page_shift;
  bool clean;
  desc_t *sp = pages_alloc(h, pages, pages, &clean);
  if (!sp) return NULL;
  char *start = desc_start(sp);
  sp->kind = KIND_MEDIUS_SPAN;
  sp->u.any[0] = NULL;
  sp->u.any[1] = start;
  sp->u.any[2] = start + medius_span_bytes;
  sp->aux = 0;
  sp->obj_size = ++h->d.serial;
  sp->flags = clean ? FLAG_CLEAN : 0;
  for (size_t off = (size_t)1 << medius_k; off < medius_span_bytes; off += (size_t)1 << medius_k)
    *record_nodes(medius_record(start + off)) = NULL;
  desc_list_push(&h->d.spans, sp);
  heap_count(h, blocks_in_use, 1);
  desc_t *old = h->d.span;
  h->d.span = sp;
  if (old && old->aux == 0) medius_span_release(h, old);
  heap_debug_tick(h);
  return sp;
}

/* ---- nodes ------------------------------------------------------------------------------------ */

static bool medius_node_refill(heap_t *h) {
  bool clean;
  desc_t *r = pages_alloc(h, MEDIUS_NODE_PAGES, 1, &clean);
  if (!r) return false;
  r->kind = KIND_MEDIUS_NODES;
  heap_count(h, blocks_in_use, 1);
  h->d.node_runs++;
  mnode_t *n = (mnode_t *)desc_start(r);
  size_t count = desc_bytes(r) / sizeof(mnode_t);
  for (size_t i = 0; i < count; i++) { n[i].rnext = h->d.node_free; h->d.node_free = &n[i]; }
  return true;
}

/* Removes node n (of the K-region whose record is rec) from the record and the cache. */
static void medius_node_drop(heap_t *h, desc_t *rec, mnode_t *n) {
  mnode_t **at = record_nodes(rec);
  while (*at != n) at = &(*at)->rnext;
  *at = n->rnext;
  if (n->cprev) n->cprev->cnext = n->cnext; else h->d.cache[n->cls] = n->cnext;
  if (n->cnext) n->cnext->cprev = n->cprev;
  n->rnext = h->d.node_free;
  h->d.node_free = n;
}

/* ---- allocation ------------------------------------------------------------------------------- */

/* The first free block of node n, marked in use. */
static ALWAYS_INLINE void *medius_pop(heap_t *h, mnode_t *n, bool zero) {
  void *p = n->free;
  desc_t *sp = n->span;
  n->free = link_load(p);
  if (--n->count == 0) medius_node_drop(h, medius_record(p), n);
  medius_set_state(p, sp, M_INUSE);
  sp->aux++;
  size_t size = medius_class_size(n->cls);
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, size);
  if (zero) memset(p, 0, size);
  return p;
}

/* A new block of class cls at the bump pointer of the current span, its object aligned to
 * `align` (a gap below it becomes a filler block). NULL when the span lacks room. */
static void *medius_carve_in(heap_t *h, desc_t *sp, unsigned cls, size_t align, bool zero) {
  char *b = span_bump(sp);
  char *p = (char *)align_up((uintptr_t)b + MEDIUS_HEADER, align);
  size_t size = medius_class_size(cls);
  if (p + size > span_end(sp)) return NULL;
  if (p - MEDIUS_HEADER > b) {
    medius_word_t *gap = (medius_word_t *)b;
    gap[0] = (uint64_t)(p - MEDIUS_HEADER - b);
    gap[1] = medius_key(b + MEDIUS_HEADER, sp) ^ M_FILLER;
  }
  sp->u.any[1] = p + size;
  medius_set_header(p, sp, cls, M_INUSE);
  sp->aux++;
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, size);
  if (zero && !(sp->flags & FLAG_CLEAN)) memset(p, 0, size);
  return p;
}

static void *medius_alloc(heap_t *h, size_t size, bool zero);
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero);

/* No cached block: collect what other threads freed, then carve (a new span if need be). */
static NOINLINE void *medius_alloc_slow(heap_t *h, size_t size, size_t align, bool zero) {
  if (h == &heap_empty) {
    if (!(h = heap_acquire())) return alloc_failed();
    if (align > MEDIUS_HEADER) return design_alloc_aligned(h, align, size, zero);
    return medius_alloc(h, size, zero);
  }
  if (size > medius_limit || align > os_page_size)
    return huge_alloc(h, size, align > MEDIUS_HEADER ? align : 0, zero);
  unsigned cls = medius_class_of(size);
  if (align <= MEDIUS_HEADER) {
    heap_collect(h);
    if (h->d.cache[cls]) return medius_pop(h, h->d.cache[cls], zero);
  }
  void *p = h->d.span ? medius_carve_in(h, h->d.span, cls, align, zero) : NULL;
  if (p) return p;
  desc_t *sp = medius_span_new(h);
  if (!sp) return alloc_failed();
  return medius_carve_in(h, sp, cls, align, zero);
}

/* Size: the first K-region of the class in the cache, else new memory. */
static ALWAYS_INLINE void *medius_alloc(heap_t *h, size_t size, bool zero) {
  if (likely(size <= medius_limit)) {
    mnode_t *n = h->d.cache[medius_class_of(size)];
    if (likely(n != NULL)) return medius_pop(h, n, zero);
    desc_t *sp = h->d.span;
    if (likely(sp != NULL)) {
      void *p = medius_carve_in(h, sp, medius_class_of(size), MEDIUS_HEADER, zero);
      if (likely(p != NULL)) return p;
    }
  }
  return medius_alloc_slow(h, size, MEDIUS_HEADER, zero);
}

static ALWAYS_INLINE void *design_alloc(heap_t *h, size_t size, bool zero) { return medius_alloc(h, size, zero); }

/* Address, then size: a free block of the class in the hint's K-region (the seed's O(s) walk of
 * the record's classes); else the bump pointer when it lies in that K-region; else as malloc. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  if (size > medius_limit || h == &heap_empty) return medius_alloc(h, size, zero);
  unsigned cls = medius_class_of(size);
  desc_t *rec = medius_record_of(h, hint);
  if (rec) {
    for (mnode_t *n = *record_nodes(rec); n; n = n->rnext)
      if (n->cls == cls) return medius_pop(h, n, zero);
    desc_t *sp = h->d.span;
    if (sp && medius_record(span_bump(sp) + MEDIUS_HEADER) == rec) {
      void *p = medius_carve_in(h, sp, cls, MEDIUS_HEADER, zero);
      if (p) return p;
    }
  }
  return medius_alloc(h, size, zero);
}

static unsigned design_kregion_shift(const void *hint) {
  (void)hint;
  return medius_k ? medius_k : os_page_shift;
}

/* Alignments up to a page: carved from the current span with a filler below the object (a
 * free block of the class is not searched for one that happens to be aligned). Larger: pages. */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero) {
  if (h == &heap_empty || align > os_page_size || size > medius_limit)
    return medius_alloc_slow(h, size, align, zero);
  desc_t *sp = h->d.span;
  void *p = sp ? medius_carve_in(h, sp, medius_class_of(size), align, zero) : NULL;
  return p ? p : medius_alloc_slow(h, size, align, zero);
}

/* ---- free ------------------------------------------------------------------------------------- */

/* Back to its K-region: the record's node of the class (made if the K-region had none), whose
 * free list takes the block. O(s), s = classes in the K-region. */
static void medius_free_block(heap_t *h, desc_t *sp, void *p, const char *call) {
  unsigned cls;
  unsigned state = medius_state_of(sp, p, span_bump(sp), &cls);
  if (unlikely(state != M_INUSE)) {   /* (M_REMOTE: freed by another thread already) */
    locus_fatal_jump(call, state == M_FREE || state == M_REMOTE ? "double free" : "invalid pointer", p);
    return;
  }
  medius_set_state(p, sp, M_FREE);
  size_t size = medius_class_size(cls);
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, size);
  desc_t *rec = medius_record(p);
  mnode_t *n = *record_nodes(rec);
  while (n && n->cls != cls) n = n->rnext;
  if (!n && (h->d.node_free || medius_node_refill(h))) {
    n = h->d.node_free;
    h->d.node_free = n->rnext;
    n->cls = (uint16_t)cls;
    n->span = sp;
    n->count = 0;
    n->free = NULL;
    n->rnext = *record_nodes(rec);
    *record_nodes(rec) = n;
    n->cprev = NULL;
    n->cnext = h->d.cache[cls];
    if (n->cnext) n->cnext->cprev = n;
    h->d.cache[cls] = n;
  }
  if (n) {   /* (without a node, out of memory: the block waits for its span to empty) */
    *(uintptr_t *)p = link_encode(p, n->free);
    n->free = p;
    n->count++;
  }
  if (--sp->aux == 0 && sp != h->d.span) medius_span_release(h, sp);
}

/* A span with no block in use goes back to the page manager, its nodes with it. */
static void medius_span_release(heap_t *h, desc_t *sp) {
  char *start = desc_start(sp);
  for (size_t off = 0; off < medius_span_bytes; off += (size_t)1 << medius_k) {
    desc_t *rec = medius_record(start + off);
    while (*record_nodes(rec)) medius_node_drop(h, rec, *record_nodes(rec));
  }
  desc_list_remove(&h->d.spans, sp);
  if (h->d.span == sp) h->d.span = NULL;
  block_release(h, sp);
  heap_debug_tick(h);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  (void)off;
  if (likely(d->kind == KIND_MEDIUS_SPAN)) medius_free_block(h, d, p, call);
  else core_free(h, d, p, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, segment_t *s, void *p, const char *call) {
  desc_t *d = desc_of_page(s, p);
  if (d->kind == KIND_INTERIOR) d -= d->back;
  if (likely(d->kind == KIND_MEDIUS_SPAN)) medius_free_block(h, d, p, call);
  else free_in_run(h, p, call);
}

/* Another thread frees p: the header goes from in use to remote atomically, so of two racing
 * frees one is reported; the owner reads the same header when it takes p back. */
static void design_collected(desc_t *page, void *p) {
  desc_t *d = page - page->back;
  if (d->kind != KIND_MEDIUS_SPAN) return;
  uint64_t key = medius_key(p, d), expect = key ^ M_REMOTE;
  __atomic_compare_exchange_n(&medius_hdr(p)[1], &expect, key ^ M_INUSE, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void design_check_remote(desc_t *d, void *p, const char *call) {
  unsigned cls;
  if (d->kind != KIND_MEDIUS_SPAN) locus_fatal(call, "invalid pointer", p);
  unsigned state = medius_state_of(d, p, span_end(d), &cls);
  if (state != M_INUSE) locus_fatal(call, state == M_BAD ? "invalid pointer" : "double free", p);
  uint64_t key = medius_key(p, d), expect = key ^ M_INUSE;
  if (!__atomic_compare_exchange_n(&medius_hdr(p)[1], &expect, key ^ M_REMOTE, false,
                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    locus_fatal(call, "double free", p);
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  unsigned cls;
  if (d->kind != KIND_MEDIUS_SPAN) locus_fatal(call, "invalid pointer", p);
  unsigned state = medius_state_of(d, p, span_end(d), &cls);
  if (state == M_FREE) locus_fatal(call, "pointer to a freed object", p);
  if (state == M_BAD) locus_fatal(call, "invalid pointer", p);
  return medius_class_size(cls);
}

/* In place while the block fits and is not more than twice the request; or, for the block just
 * below the bump pointer, by moving the bump pointer (the header takes the new class; bytes
 * given back to the bump area were written, so the span is no longer clean). */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  if (d->kind != KIND_MEDIUS_SPAN || size > medius_limit) return false;
  unsigned cls, want = medius_class_of(size);
  if (medius_state_of(d, p, span_end(d), &cls) == M_BAD) return false;
  size_t have = medius_class_size(cls);
  if (want <= cls && (size > have / 2 || cls == 0)) return true;
  char *end = (char *)p + have;
  if (d != h->d.span || end != span_bump(d) || (char *)p + medius_class_size(want) > span_end(d))
    return false;
  d->u.any[1] = (char *)p + medius_class_size(want);
  if (want < cls) d->flags &= (uint16_t)~FLAG_CLEAN;
  medius_set_header(p, d, want, M_INUSE);
  heap_count(h, bytes_allocated, medius_class_size(want));
  heap_uncount(h, bytes_allocated, have);
  return true;
}

/* The current span, when nothing in it is in use, goes back too. */
static void design_release_spares(heap_t *h) {
  desc_t *sp = h->d.span;
  if (sp && sp->aux == 0) medius_span_release(h, sp);
}

static void design_purge(heap_t *h) { design_release_spares(h); }

/* ---- consistency check ------------------------------------------------------------------------ */

/* Walks a span's blocks by their headers; returns the problems, adds its free blocks to *nfree. */
static size_t medius_check_span(heap_t *h, desc_t *sp, size_t *nfree) {
  size_t bad = 0, live = 0;
  char *start = desc_start(sp), *b = start, *bump = span_bump(sp);
  CHECK(desc_segment(sp)->heap == h && sp->npages == medius_span_bytes >> os_page_shift);
  CHECK(((uintptr_t)start & (medius_span_bytes - 1)) == 0);
  CHECK(bump >= start && bump <= span_end(sp) && span_end(sp) == start + medius_span_bytes);
  while (b < bump) {
    char *p = b + MEDIUS_HEADER;
    if (((medius_word_t *)b)[1] == (medius_key(p, sp) ^ M_FILLER)) {
      size_t gap = ((medius_word_t *)b)[0];
      CHECK(gap >= MEDIUS_HEADER && gap % MEDIUS_HEADER == 0 && gap <= (size_t)(bump - b));
      if (gap < MEDIUS_HEADER || gap % MEDIUS_HEADER || gap > (size_t)(bump - b)) return bad;
      b += gap;
      continue;
    }
    unsigned cls, state = medius_state_of(sp, p, bump, &cls);
    CHECK(state != M_BAD);
    if (state == M_BAD) return bad;
    if (state == M_FREE) (*nfree)++; else live++;
    b = p + medius_class_size(cls);
  }
  CHECK(b == bump);
  CHECK(live == sp->aux);
  CHECK(sp->aux > 0 || sp == h->d.span);
  /* every node of every record belongs here, one per class */
  for (size_t off = 0; off < medius_span_bytes; off += (size_t)1 << medius_k) {
    desc_t *rec = medius_record(start + off);
    for (mnode_t *n = *record_nodes(rec); n; n = n->rnext) {
      CHECK(n->span == sp && n->count > 0);
      for (mnode_t *m = n->rnext; m; m = m->rnext) CHECK(m->cls != n->cls);
    }
  }
  return bad;
}

static size_t design_check(heap_t *h) {
  size_t bad = 0, spans = 0, free_blocks = 0, listed = 0;
  for (desc_t *sp = h->d.spans; sp; sp = sp->next) {
    CHECK(sp->kind == KIND_MEDIUS_SPAN && (!sp->next || sp->next->prev == sp));
    if (sp->kind != KIND_MEDIUS_SPAN) return bad;
    spans++;
    bad += medius_check_span(h, sp, &free_blocks);
  }
  CHECK(!h->d.span || h->d.span->kind == KIND_MEDIUS_SPAN);
  for (unsigned c = 0; c < MEDIUS_CLASSES; c++) {
    mnode_t *prev = NULL;
    for (mnode_t *n = h->d.cache[c]; n; prev = n, n = n->cnext) {
      CHECK(n->cls == c && n->cprev == prev && n->count > 0);
      size_t k = 0;
      for (void *f = n->free; f && k <= n->count; f = link_load(f), k++) {
        unsigned cls;
        CHECK(medius_state_of(n->span, f, span_bump(n->span), &cls) == M_FREE && cls == c);
        desc_t *rec = medius_record(f);
        bool found = false;
        for (mnode_t *m = *record_nodes(rec); m; m = m->rnext) found |= m == n;
        CHECK(found);
      }
      CHECK(k == n->count);
      listed += k;
    }
  }
  CHECK(listed <= free_blocks);   /* blocks freed without a node (out of memory) are unlisted */
  CHECK(spans + h->d.node_runs == heap_counter(h, blocks_in_use));
  return bad;
}

