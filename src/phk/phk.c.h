/* phk.c.h — the PHK policy: chunk pages with bitmaps (or reap allocation), per-class page lists
 * sorted by address, whole pages for everything from half a page up. Types, knobs and
 * invariants are in phk.h. Included once, by the library's unity file. */

static sizeclass_table_t phk_classes;
static size_t phk_small_limit;            /* requests below this (half a page) get chunks */

/* Per class: the page's shape, fixed at start-up from the page size. */
typedef struct phk_class {
  uint16_t nwords;      /* bitmap words (bitmap variants) */
  uint16_t first;       /* chunks the in-page bitmap occupies at the page start */
  uint16_t capacity;    /* chunks a page hands out */
} phk_class_t;
static phk_class_t phk_class_info[PHK_MAX_CLASSES];

/* Bitmap words live in descriptor fields declared as pointers or at the start of a page; this
 * type may alias them. */
typedef uint64_t phk_word_t __attribute__((may_alias));

static inline char *phk_start(const desc_t *pg) { return pg->u.any[0]; }
static inline unsigned phk_nwords(const desc_t *pg) { return pg->marker_off; }
static inline unsigned phk_first(const desc_t *pg) { return pg->aux8; }
static inline phk_word_t *phk_summary(desc_t *pg) { return (phk_word_t *)&pg->u.any[1]; }
/* The bitmap: at the page start when it takes more than one word, else in the descriptor. */
static inline phk_word_t *phk_bits(desc_t *pg) {
  return phk_nwords(pg) > 1 ? (phk_word_t *)phk_start(pg) : (phk_word_t *)&pg->u.any[2];
}

static void design_global_init(void) {
  size_t half = os_page_size / 2;
  if (cfg_phk_quantum_classes) {
    size_t fine = half < PHK_FINE_MAX ? half : PHK_FINE_MAX;
    sizeclass_linear(&phk_classes, QUANTUM, fine);
    for (size_t s = fine * 2; s <= half; s <<= 1) sizeclass_add(&phk_classes, s);
    sizeclass_finish(&phk_classes);
  } else {
    sizeclass_pow2(&phk_classes, QUANTUM, half);
  }
  phk_small_limit = half;
  for (unsigned c = 0; c < phk_classes.count; c++) {
    size_t size = phk_classes.size[c], total = os_page_size / size;
    phk_class_t *k = &phk_class_info[c];
    if (cfg_phk_reap) {
      k->nwords = 0;
      k->first = 0;
    } else {
      /* 8-byte chunks on 64 KiB pages would need more bits than one summary word covers:
       * such a page uses only its first PHK_MAX_CHUNKS chunks. */
      if (total > PHK_MAX_CHUNKS) total = PHK_MAX_CHUNKS;
      k->nwords = (uint16_t)((total + 63) / 64);
      k->first = k->nwords > 1 ? (uint16_t)((k->nwords * sizeof(uint64_t) + size - 1) / size) : 0;
    }
    k->capacity = (uint16_t)(total - k->first);
  }
}

static void design_heap_init(heap_t *h) {
  for (int c = 0; c < PHK_MAX_CLASSES; c++) h->d.avail[c] = &phk_none;
}

/* The reap pages' double-free marker: see phk.h for why the page's serial is in it. */
static inline uintptr_t free_marker(const desc_t *pg, const void *p) {
  return free_marker_salted(p, pg->aux);
}

/* ---- page lists ---------------------------------------------------------------------------- */

/* Inserts pg into its class's list in address order (PHKmalloc walks its list the same way). */
static void phk_avail_insert(heap_t *h, desc_t *pg) {
  desc_t **head = &h->d.avail[pg->cls], *below = NULL;
  if (*head != &phk_none)
    for (desc_t *c = *head; c && c < pg; c = c->next) below = c;
  if (*head == &phk_none) *head = NULL;
  desc_list_insert(head, below, pg);
}

static void phk_avail_unlink(heap_t *h, desc_t *pg) {
  desc_t **head = &h->d.avail[pg->cls];
  desc_list_remove(head, pg);
  if (!*head) *head = &phk_none;
}

/* The head page just handed out its last free chunk: off the list, flagged full (PHKmalloc
 * unlinks a page the same way when its free count reaches 0). */
static NOINLINE void phk_page_full(heap_t *h, desc_t *pg) {
  phk_avail_unlink(h, pg);
  pg->flags |= FLAG_FULL;
}

static desc_t *phk_page_new(heap_t *h, unsigned cls) {
  bool clean;
  desc_t *pg = pages_alloc(h, 1, 1, &clean);
  if (!pg) return NULL;
  const phk_class_t *k = &phk_class_info[cls];
  size_t size = phk_classes.size[cls];
  char *start = desc_start(pg);
  pg->kind = KIND_PHK_PAGE;
  pg->cls = (uint8_t)cls;
  pg->obj_size = (uint32_t)size;
  pg->aux = cfg_phk_reap ? ++h->d.serial : k->capacity;
  pg->used = 0;
  pg->flags = clean ? FLAG_CLEAN : 0;
  if (cfg_phk_reap) {
    pg->marker_off = size >= 2 * sizeof(void *) ? sizeof(void *) : 0;
    pg->u.blk.free = NULL;
    pg->u.blk.bump = start;
    pg->u.blk.end = start + (size_t)k->capacity * size;
  } else {
    pg->u.any[0] = start;
    pg->marker_off = (uint8_t)k->nwords;
    pg->aux8 = (uint8_t)k->first;
    phk_word_t *w = phk_bits(pg);
    unsigned total = k->first + k->capacity;
    for (unsigned j = 0; j < k->nwords; j++) {
      unsigned lo = j * 64, hi = lo + 64 < total ? lo + 64 : total;   /* chunks [lo, hi) */
      uint64_t word = hi - lo == 64 ? ~0ull : (1ull << (hi - lo)) - 1;
      if (k->first >= hi) word = 0;                                    /* the bitmap's chunks */
      else if (k->first > lo) word &= ~0ull << (k->first - lo);
      w[j] = word;
    }
    *phk_summary(pg) = k->nwords == 64 ? ~0ull : (1ull << k->nwords) - 1;
  }
  phk_avail_insert(h, pg);
  heap_count(h, blocks_in_use, 1);
  return pg;
}

/* ---- allocation ---------------------------------------------------------------------------- */

/* The first free chunk of a bitmap page (NULL if none), marked in use; *full tells whether it
 * was the last one. The search is the mechanism phk and phk-hw compare; the words it inspected
 * go to the statistics. phk-hw also asks its summary word whether the page is now full (the
 * OR-tree's answer); phk counts. */
static ALWAYS_INLINE void *phk_take_bit(heap_t *h, desc_t *pg, bool *full) {
  phk_word_t *w = phk_bits(pg);
  unsigned inspected;
  int i = cfg_phk_summary ? bits_find_summary(*phk_summary(pg), (const uint64_t *)w, &inspected)
                          : bits_find_linear((const uint64_t *)w, phk_nwords(pg), &inspected);
  if (unlikely(i < 0)) return NULL;
  phk_word_t *wi = &w[i >> 6];
  *wi &= ~(1ull << (i & 63));
  if (cfg_phk_summary) {
    if (!*wi) *phk_summary(pg) &= ~(1ull << (i >> 6));
    *full = *phk_summary(pg) == 0;
  } else {
    *full = pg->used + 1u == pg->aux;
  }
  heap_count(h, search_words, inspected);
  heap_count(h, searches, 1);
  heap_count_max(h, search_words_max, inspected);
  return phk_start(pg) + (size_t)i * pg->obj_size;
}

/* Reap allocation: bump while the page has untouched chunks, then its free list. */
static ALWAYS_INLINE void *phk_take_reap(desc_t *pg, bool zero, bool *full) {
  char *p = pg->u.blk.bump;
  if (likely(p < pg->u.blk.end)) {
    pg->u.blk.bump = p + pg->obj_size;
    *(void **)(p + pg->marker_off) = NULL;
    if (zero && !(pg->flags & FLAG_CLEAN)) memset(p, 0, pg->obj_size);
  } else if (likely((p = pg->u.blk.free) != NULL)) {
    pg->u.blk.free = link_load(p);
    *(void **)(p + pg->marker_off) = NULL;
    if (zero) memset(p, 0, pg->obj_size);
  } else {
    return NULL;
  }
  *full = pg->u.blk.bump >= pg->u.blk.end && !pg->u.blk.free;
  return p;
}

static void *phk_alloc_small(heap_t *h, unsigned cls, bool zero);

/* The class has no page with a free chunk: take back what other threads freed, and if that
 * gives the class no page either, make a new one. */
static NOINLINE void *phk_alloc_slow(heap_t *h, unsigned cls, bool zero) {
  if (h == &heap_empty) {
    if (!(h = heap_acquire())) return alloc_failed();
    return phk_alloc_small(h, cls, zero);
  }
  heap_collect(h);
  if (h->d.avail[cls] == &phk_none && !phk_page_new(h, cls)) return alloc_failed();
  heap_debug_tick(h);
  return phk_alloc_small(h, cls, zero);
}

/* Every page on the list has a free chunk, so only an empty list (phk_none) fails. */
static ALWAYS_INLINE void *phk_alloc_small(heap_t *h, unsigned cls, bool zero) {
  desc_t *pg = h->d.avail[cls];
  bool full;
  char *p;
  if (cfg_phk_reap) {
    p = phk_take_reap(pg, zero, &full);
  } else {
    p = phk_take_bit(h, pg, &full);
    if (zero && p) memset(p, 0, pg->obj_size);   /* a chunk's history is not tracked */
  }
  if (unlikely(!p)) return phk_alloc_slow(h, cls, zero);
  pg->used++;
  if (unlikely(full)) phk_page_full(h, pg);
  heap_count(h, malloc_calls, 1);
  heap_count(h, bytes_allocated, pg->obj_size);
  return p;
}

static void *phk_alloc(heap_t *h, size_t size, bool zero);

/* From half a page up: whole pages (core). A thread's first call comes here whatever its size
 * when it is the process's first call too: the limit is 0 until start-up has run. */
static NOINLINE void *phk_alloc_pages(heap_t *h, size_t size, bool zero) {
  if (h == &heap_empty) {
    if (!(h = heap_acquire())) return alloc_failed();
    return phk_alloc(h, size, zero);
  }
  return huge_alloc(h, size, 0, zero);
}

/* Small requests: a chunk of the size class; from half a page up: whole pages. */
static ALWAYS_INLINE void *phk_alloc(heap_t *h, size_t size, bool zero) {
  if (likely(size < phk_small_limit)) return phk_alloc_small(h, sizeclass_of(&phk_classes, size), zero);
  return phk_alloc_pages(h, size, zero);
}

static ALWAYS_INLINE void *design_alloc(heap_t *h, size_t size, bool zero) { return phk_alloc(h, size, zero); }

/* PHK places objects by size and address order only: a hint is a plain malloc. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  (void)hint;
  return phk_alloc(h, size, zero);
}
static unsigned design_kregion_shift(const void *hint) { (void)hint; return os_page_shift; }

/* A chunk of a class whose size is a multiple of `align` is aligned (pages start on a page
 * boundary and chunk i starts at i * size): with power-of-two classes, the class of
 * max(size, align). Larger alignments get a page run aligned in the page manager. */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero) {
  if (h == &heap_empty && !(h = heap_acquire())) return alloc_failed();   /* start-up sets the classes */
  if (size < phk_small_limit)
    for (unsigned c = sizeclass_of(&phk_classes, size); c < phk_classes.count; c++)
      if (phk_classes.size[c] % align == 0) return phk_alloc_small(h, c, zero);
  return huge_alloc(h, size, align, zero);
}

/* ---- free ---------------------------------------------------------------------------------- */

/* The chunk index of p in bitmap page pg, or -1 if p is not the start of a chunk there. */
static inline long phk_chunk_index(const desc_t *pg, size_t offset) {
  long i = sizeclass_index(&phk_classes, pg->cls, offset);
  if ((unsigned long)(i - (long)phk_first(pg)) >= pg->aux) return -1;
  return i;
}

static void phk_page_unfull(heap_t *h, desc_t *pg);
static void phk_page_empty(heap_t *h, desc_t *pg);

static ALWAYS_INLINE void phk_free_chunk(heap_t *h, desc_t *pg, void *p, size_t off, const char *call) {
  if (cfg_phk_reap) {
    if (unlikely(sizeclass_index(&phk_classes, pg->cls, off) < 0)) { locus_fatal_jump(call, "invalid pointer", p); return; }
    /* beyond bump: never handed out, or freed before the page went back to bump mode */
    if (unlikely((char *)p >= pg->u.blk.bump)) { locus_fatal_jump(call, "double free or invalid pointer", p); return; }
    uintptr_t *w = p;
    /* 8-byte chunks have no marker word: the list head, or a link (safe-linked, see config.h)
     * that decodes to NULL or into this page below the bump pointer, says free */
    char *next = pg->marker_off ? NULL : link_load(p);
    if (pg->marker_off ? marker_says_free(w[1], free_marker(pg, p))
                       : p == pg->u.blk.free || !next || (next >= desc_start(pg) && next < pg->u.blk.bump)) {
      locus_fatal_jump(call, "double free", p);
      return;
    }
    w[0] = link_encode(p, pg->u.blk.free);
    if (pg->marker_off) w[1] = free_marker(pg, p);
    pg->u.blk.free = p;
  } else {
    long i = phk_chunk_index(pg, (size_t)((char *)p - phk_start(pg)));
    if (unlikely(i < 0)) { locus_fatal_jump(call, "invalid pointer", p); return; }
    phk_word_t *wi = &phk_bits(pg)[i >> 6];
    uint64_t bit = 1ull << (i & 63);
    if (unlikely(*wi & bit)) { locus_fatal_jump(call, "double free", p); return; }   /* exact: already free */
    *wi |= bit;
    if (cfg_phk_summary) *phk_summary(pg) |= 1ull << (i >> 6);
  }
  heap_count(h, free_calls, 1);
  heap_uncount(h, bytes_allocated, pg->obj_size);
  if (unlikely(pg->flags & FLAG_FULL)) phk_page_unfull(h, pg);
  if (unlikely(--pg->used == 0)) phk_page_empty(h, pg);
}

/* A free into a full page: it has a free chunk again and goes back on its list, in address
 * order. */
static NOINLINE void phk_page_unfull(heap_t *h, desc_t *pg) {
  pg->flags &= (uint16_t)~FLAG_FULL;
  phk_avail_insert(h, pg);
}

/* A free emptied the page: it goes back to the page manager, unless it is the class's only page
 * and the policy is not immediate; then it is kept (a reap page back in bump mode), so that one
 * object allocated and freed in a loop does not take and return a page each time. */
static NOINLINE void phk_page_empty(heap_t *h, desc_t *pg) {
  if (block_keep_empty(h->d.avail[pg->cls], pg)) {
    if (cfg_phk_reap) {
      pg->u.blk.bump = desc_start(pg);
      pg->u.blk.free = NULL;
      pg->flags &= (uint16_t)~FLAG_CLEAN;
    }
  } else {
    phk_avail_unlink(h, pg);
    block_release(h, pg);
  }
  heap_debug_tick(h);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  if (d->kind == KIND_PHK_PAGE) phk_free_chunk(h, d, p, off, call);
  else core_free(h, d, p, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, segment_t *s, void *p, const char *call) {
  desc_t *d = desc_of_page(s, p);
  if (likely(d->kind == KIND_PHK_PAGE)) phk_free_chunk(h, d, p, (uintptr_t)p & (os_page_size - 1), call);
  else free_in_run(h, p, call);
}

/* Another thread is about to hand p back to its owner. The owner may be changing the page's
 * bitmap meanwhile, so the bit is read atomically; a chunk that is already free is a double
 * free. (Reap pages mark the chunk itself, as vam does.) */
static void design_collected(desc_t *page, void *p) {
  desc_t *d = page - page->back;
  if (cfg_phk_reap && d->kind == KIND_PHK_PAGE && d->marker_off) marker_collected((uintptr_t *)p + 1, free_marker(d, p));
}

static void design_check_remote(desc_t *d, void *p, const char *call) {
  if (d->kind != KIND_PHK_PAGE) locus_fatal(call, "invalid pointer", p);
  if (cfg_phk_reap) {
    size_t off = (size_t)((char *)p - desc_start(d));
    if (sizeclass_index(&phk_classes, d->cls, off) < 0) locus_fatal(call, "invalid pointer", p);
    if (d->marker_off) {
      uintptr_t *w = p;
      marker_free_remote(&w[1], free_marker(d, p), p, call);
    }
  } else {
    long i = phk_chunk_index(d, (size_t)((char *)p - desc_start(d)));
    if (i < 0) locus_fatal(call, "invalid pointer", p);
    uint64_t word = __atomic_load_n(&phk_bits(d)[i >> 6], __ATOMIC_RELAXED);
    if (word & (1ull << (i & 63))) locus_fatal(call, "double free", p);
  }
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  if (d->kind != KIND_PHK_PAGE) locus_fatal(call, "invalid pointer", p);
  size_t off = (size_t)((const char *)p - desc_start(d));
  if (cfg_phk_reap) {
    if (sizeclass_index(&phk_classes, d->cls, off) < 0) locus_fatal(call, "invalid pointer", p);
  } else {
    long i = phk_chunk_index(d, off);
    if (i < 0) locus_fatal(call, "invalid pointer", p);
    if (__atomic_load_n(&phk_bits(d)[i >> 6], __ATOMIC_RELAXED) & (1ull << (i & 63)))
      locus_fatal(call, "pointer to a freed chunk", p);
  }
  return d->obj_size;
}

/* In place when the chunk still fits and is not more than twice what is needed (PHKmalloc's
 * realloc rule); otherwise the API layer moves the object. Page runs are the core's. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  (void)h; (void)p;
  return d->kind == KIND_PHK_PAGE && sizeclass_resize_fits(d->obj_size, d->cls, size);
}

/* locus_purge: what thread exit gives back (PHK keeps nothing else). */
static void design_purge(heap_t *h) { design_release_spares(h); }

static void design_release_spares(heap_t *h) {
  for (unsigned c = 0; c < phk_classes.count; c++) {
    desc_t *pg = h->d.avail[c];
    if (pg != &phk_none && pg->used == 0) {
      phk_avail_unlink(h, pg);
      block_release(h, pg);
    }
  }
}

/* ---- consistency check --------------------------------------------------------------------- */

/* One chunk page: its shape, and its bitmap (or free list) against its count. */
static size_t phk_check_page(heap_t *h, desc_t *pg) {
  unsigned cls = pg->cls;
  size_t bad = 0;
  CHECK(cls < phk_classes.count && desc_segment(pg)->heap == h && pg->npages == 1);
  if (cls >= phk_classes.count) return bad;
  const phk_class_t *k = &phk_class_info[cls];
  char *start = desc_start(pg);
  CHECK(pg->obj_size == phk_classes.size[cls] && (cfg_phk_reap || pg->aux == k->capacity));
  size_t nfree = 0;
  if (cfg_phk_reap) {
    CHECK(pg->u.blk.end == start + (size_t)k->capacity * pg->obj_size);
    CHECK(pg->u.blk.bump >= start && pg->u.blk.bump <= pg->u.blk.end);
    for (void *f = pg->u.blk.free; f && nfree <= k->capacity; f = link_load(f)) {
      CHECK((char *)f >= start && (char *)f < pg->u.blk.bump);
      CHECK(sizeclass_index(&phk_classes, cls, (size_t)((char *)f - start)) >= 0);
      nfree++;
    }
    nfree += (size_t)(pg->u.blk.end - pg->u.blk.bump) / pg->obj_size;
  } else {
    CHECK(phk_start(pg) == start && phk_nwords(pg) == k->nwords && phk_first(pg) == k->first);
    const phk_word_t *w = phk_bits(pg);
    unsigned total = k->first + k->capacity;
    uint64_t summary = 0;
    for (unsigned j = 0; j < k->nwords; j++) {
      uint64_t word = w[j];
      for (unsigned b = 0; b < 64; b++) {
        unsigned i = j * 64 + b;
        if (word >> b & 1) CHECK(i >= k->first && i < total);   /* only real chunks are free */
      }
      nfree += (size_t)__builtin_popcountll(word);
      if (word) summary |= 1ull << j;
    }
    if (cfg_phk_summary) CHECK(*phk_summary(pg) == summary);
  }
  CHECK(pg->used + nfree == k->capacity);
  if (pg->flags & FLAG_FULL) CHECK(nfree == 0);
  return bad;
}

/* Every chunk page (found through the segments) is checked and is on its class's list or
 * FLAG_FULL; the lists are sorted by address; the page manager's free runs too (first fit). */
static size_t design_check(heap_t *h) {
  size_t bad = 0, listed = 0, full = 0, pages = 0;
  for (unsigned c = 0; c < phk_classes.count; c++) {
    desc_t *pg = h->d.avail[c];
    if (pg == &phk_none) continue;
    CHECK(pg->prev == NULL);
    for (; pg; pg = pg->next) {
      CHECK(pg->kind == KIND_PHK_PAGE && pg->cls == c && !(pg->flags & FLAG_FULL));
      CHECK(pg->used < phk_class_info[c].capacity);            /* a listed page has room */
      CHECK(!pg->next || (pg->next > pg && pg->next->prev == pg));
      listed++;
    }
  }
  for (segment_t *s = h->pages.segments; s; s = s->next) {
    for (size_t i = s->first; i < s->npages; i += s->desc[i].npages ? s->desc[i].npages : 1) {
      desc_t *r = &s->desc[i];
      if (r->kind != KIND_PHK_PAGE) continue;
      pages++;
      bad += phk_check_page(h, r);
      if (r->flags & FLAG_FULL) full++;
    }
  }
  CHECK(listed + full == pages);
  CHECK(pages == heap_counter(h, blocks_in_use));
  if (cfg_pages_first_fit)
    for (desc_t *r = h->pages.bins[0]; r && r->next; r = r->next) CHECK(r->next > r);
  return bad;
}

