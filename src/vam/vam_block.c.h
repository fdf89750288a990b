/* vam_block.c.h — Vam's set-up and its blocks' geometry: the size classes and secrets made at
 * start-up, a new heap's state, the lists of blocks per class (ending at h->d.none, vam.h),
 * slot sizes and the reciprocal that finds a slot from an offset. */

static sizeclass_table_t vam_classes;
static unsigned vam_nclasses;   /* class indexes in use: the size classes, times the groups */
static unsigned vam_pow2_first;   /* the class of 8 KiB objects (vam.h), then 16 and 32 KiB */
/* vam_recip of each class index's slot size (0 past them: any page's class byte may index it). */
static uint32_t vam_class_recip[UINT8_MAX + 1];

static uint64_t chunk_cookie;
static uint64_t vam_secret;   /* secure build: canaries, heap keys */
static uint64_t vam_qsecret;  /* secure build: quarantine marks (a canary read out tells nothing of it) */
static uintptr_t vam_tcache_key;   /* the thread cache's links (vam_tcache_link) */

/* The protections' per-heap state (vam.h): a pointer to it, NULL when its bit is off (never
 * used then: every use is under mitigation(NAME)). */
static inline uintptr_t *vam_link_key_of(heap_t *h UNUSED) { return mitigation_field(KEYED_LINKS, h->d.link_key); }
static inline vam_random_t *vam_random_of(heap_t *h UNUSED) { return mitigation_field(RANDOM_ORDER, h->d.random); }
static inline vam_quarantine_t *vam_quarantine_of(heap_t *h UNUSED) { return mitigation_field(QUARANTINE, h->d.quarantine); }

/* splitmix64's finaliser: a secret-keyed value nobody can guess from the address. */
static inline uint64_t vam_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void vam_tcache_global_init(void);
static inline size_t vam_slot_size(unsigned cls);
static inline uint32_t vam_recip(size_t slot);

static void vam_recip_check(void);

static void design_global_init(void) {
  /* Small requests are segregated 8 bytes apart, as in the paper (so 24- and 32-byte objects,
   * or 40- and 48-byte ones, never share a block), in slots rounded up to the quantum (so
   * every object of 16 bytes or more is 16-aligned); medium classes are a quantum apart, and
   * VAM_MEDIUM_STEP apart above VAM_MEDIUM_FINE (as coarse as 1/9 of the size there), then
   * the sizes that divide a medium block (vam.h; the secure build's leave the canary room). The
   * secure build has no 8-byte class: every slot holds a link and a marker word (the free fast
   * path's checks and the quarantine's poison need them). */
  sizeclass_two_steps(&vam_classes, cfg_vam_hardened ? 16 : 8, 8, VAM_SMALL_LIMIT, QUANTUM, VAM_MEDIUM_FINE);
  sizeclass_extend(&vam_classes, VAM_MEDIUM_STEP, VAM_MEDIUM_STEPPED);
  for (size_t n = VAM_MEDIUM_ROOM / (VAM_MEDIUM_STEPPED + 1); !cfg_sites && n >= VAM_MEDIUM_MIN_SLOTS; n--)
    sizeclass_add(&vam_classes, VAM_MEDIUM_DIVIDED(n));
  sizeclass_finish(&vam_classes);
  vam_pow2_first = vam_classes.count * (cfg_sites ? VAM_SITE_GROUPS : 1);
  vam_nclasses = vam_pow2_first + VAM_POW2_CLASSES;
  if (vam_nclasses > VAM_MAX_CLASSES) {
    locus_printf(2, "locus: vam: %u class indexes do not fit\n", vam_nclasses);
    abort();
  }
  if (cfg_sites) {   /* every group's copy of the classes: the size table serves them all */
    for (unsigned c = vam_classes.count; c < vam_pow2_first; c++) sizeclass_put(&vam_classes, c, vam_classes.size[c % vam_classes.count]);
  }
  for (unsigned c = vam_pow2_first; c < vam_nclasses; c++)
    sizeclass_put(&vam_classes, c, (size_t)1 << (VAM_POW2_MIN_SHIFT + c - vam_pow2_first));
  for (unsigned c = 0; c < vam_nclasses; c++) vam_class_recip[c] = vam_recip(vam_slot_size(c));
  if (cfg_debug) vam_recip_check();
  if (cfg_tcache) vam_tcache_global_init();
  chunk_cookie = free_marker_cookie * 0x9E3779B97F4A7C15ull + 1;
  vam_secret = vam_mix(chunk_cookie ^ segment_cookie);
  vam_qsecret = vam_mix(vam_secret + 1);
  vam_tcache_key = vam_mix(vam_secret + 2);
}

static void vam_tcache_init(heap_t *h);

static void design_heap_init(heap_t *h) {
  for (unsigned c = 0; c < VAM_MAX_CLASSES; c++) {
    h->d.avail[c] = &h->d.none;
    desc_t *f = &h->d.foreign[c];   /* no bump range: vam_block_take serves its list only */
    f->kind = KIND_VAM_FOREIGN;
    f->cls = (uint8_t)c;
    if (c < vam_nclasses) f->obj_size = (uint32_t)vam_slot_size(c);
    f->marker_off = sizeof(void *);
  }
  if (mitigation(KEYED_LINKS)) *vam_link_key_of(h) = vam_mix(vam_secret ^ (uintptr_t)h);
  if (mitigation(RANDOM_ORDER)) vam_random_of(h)->rng = vam_mix(vam_mix(vam_secret ^ (uintptr_t)h) + 1);
  if (mitigation(QUARANTINE)) vam_quarantine_of(h)->poison_sink[0] = vam_quarantine_of(h)->poison_sink[1] = POISON_WORD;
  vam_tcache_init(h);
}

/* ---- block lists (ending at h->d.none, see vam.h) ------------------------------------------ */

/* cond ? a : b with no branch (a mask, which the compiler does not turn back into one): for
 * a list update whose condition is a coin toss under churn of mixed sizes. */
static ALWAYS_INLINE desc_t *pick(bool cond, desc_t *a, desc_t *b) {
#if defined(__x86_64__)
  __asm__("test %b2, %b2\n\tcmovnz %1, %0" : "+r"(b) : "r"(a), "q"(cond) : "cc");   /* a conditional move */
  return b;
#else
  uintptr_t mask = (uintptr_t)0 - (uintptr_t)cond;
  __asm__("" : "+r"(mask));   /* opaque: keeps the selection arithmetic */
  return (desc_t *)(((uintptr_t)a & mask) | ((uintptr_t)b & ~mask));
#endif
}

/* next ? b : a, the same way (the test is next's own). */
static ALWAYS_INLINE desc_t *pick_null(const void *next, desc_t *a, desc_t *b) {
#if defined(__x86_64__)
  __asm__("test %2, %2\n\tcmovz %1, %0" : "+r"(b) : "r"(a), "r"(next) : "cc");
  return b;
#else
  return pick(next == NULL, a, b);
#endif
}

/* The head's prev is not kept (the head is known by *head == b): a push writes three words,
 * taking the head off writes one. Every other listed block's prev is its predecessor. */
static ALWAYS_INLINE void list_push(desc_t **head, desc_t *b) {
  desc_t *first = *head;
  b->next = first;
  first->prev = b;
  *head = b;
}

static void list_unlink(desc_t **head, desc_t *b) {
  if (*head == b) *head = b->next; else b->prev->next = b->next;
  b->next->prev = b->prev;
}

/* b into a's list right after a. */
static void list_insert_after(desc_t *a, desc_t *b) {
  b->next = a->next;
  b->prev = a;
  a->next->prev = b;
  a->next = b;
}

/* The double-free marker of the free object at p (vam.h). The hardened builds: the address and
 * the random cookie, which a program cannot forge. The others: the address plus an odd
 * constant, one instruction and no load on free's fast path; no word a program writes by
 * accident is its own address plus 1.5 GiB and an odd byte (a self-pointer, a list head
 * pointing at itself, a length, a tag: none is). */
#define VAM_MARKER_OFFSET 0x5f3a6c29u
static inline uintptr_t free_marker(const void *p) {
  return cfg_vam_hardened ? (uintptr_t)p ^ free_marker_cookie : (uintptr_t)p + VAM_MARKER_OFFSET;
}

/* Slot size of a class: the class size rounded up to the quantum (the 8-byte class stays 8),
 * plus, in vam-header, the object's header. */
static inline size_t vam_slot_size(unsigned cls) {
  size_t size = vam_classes.size[cls];
  if (cfg_small_headers && size < VAM_SMALL_LIMIT) return align_up(size + SMALL_HEADER, QUANTUM);
  if (mitigation(CANARIES)) return align_up(size + VAM_CANARY, QUANTUM);   /* the canary in the rounding when it fits */
  return size <= 8 ? size : align_up(size, QUANTUM);
}

/* The bytes of a slot of class cls the program may use (vam-header: its header besides). */
static inline size_t vam_class_usable(unsigned cls) {
  return mitigation(CANARIES) ? vam_classes.size[cls] : vam_slot_size(cls);   /* secure: the canary after it */
}
static inline size_t vam_usable(const desc_t *b) {
  return mitigation(CANARIES) ? vam_class_usable(b->cls) : b->obj_size - (cfg_small_headers ? b->aux8 : 0);
}

static inline unsigned vam_block_pages(unsigned cls) {
  if (cls >= vam_pow2_first) return VAM_POW2_PAGES;
  return vam_classes.size[cls] < VAM_SMALL_LIMIT ? VAM_SMALL_PAGES : VAM_MEDIUM_PAGES;
}
static inline unsigned vam_cache_index(size_t npages) {
  return npages == VAM_SMALL_PAGES ? 0 : npages == VAM_MEDIUM_PAGES ? 1 : 2;
}

/* Whether size (above VAM_MEDIUM_MAX, at most VAM_LARGE_MAX) has a power-of-two class. */
static ALWAYS_INLINE bool vam_pow2_sized(size_t size) { return VAM_POW2_CLASSES && !(size & (size - 1)); }
/* The class of size, which has one (a size class, or a power-of-two class). */
static inline unsigned vam_class_of(size_t size) {
  if (size <= VAM_MEDIUM_MAX) return sizeclass_of(&vam_classes, size);
  return vam_pow2_first + (unsigned)__builtin_ctzll(size) - VAM_POW2_MIN_SHIFT;
}

/* The flagship's free fast path (design_free): blocks whose slots hold a link and a marker
 * word. Its descriptor test is the slot test itself, made on p's page alone (vam_slot_live),
 * so anything it does not serve (8-byte slots, large areas, core runs, interior pointers,
 * slots not handed out yet) goes to vam_free_other with no test of the kind. */
static const bool cfg_fast_free = !LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP;

/* floor(2^32 / slot) + 1, or 0 for a slot the fast path does not serve. For every slot size
 * of the classes (multiples of 8 from 16 to 4096; 8, 16 and 32 KiB) and every offset off
 * below its block's size plus a slot (16 KiB, 64 KiB for the power-of-two blocks; checked by
 * vam_recip_check in the debug build), the low half of off * recip is j * eps when off is
 * slot j's start, eps = slot * recip - 2^32 (1 <= eps <= slot, so j * eps <= 2^16), and at
 * least recip otherwise; its high half is off / slot. */
static inline uint32_t vam_recip(size_t slot) {
  if (cfg_fast_free && slot - VAM_CANARY < 2 * sizeof(void *)) return 0;   /* no marker word: slow path */
  return (uint32_t)((1ull << RECIP_SHIFT) / slot + 1);
}

/* The debug build's proof of the above for the classes in use: every offset in a block and a
 * slot past it (~1.2 M, once at start-up). */
static void vam_recip_check(void) {
  for (unsigned c = 0; c < vam_nclasses; c++) {
    uint32_t recip = vam_class_recip[c];
    if (!recip) continue;
    size_t slot = vam_slot_size(c), bytes = (size_t)vam_block_pages(c) << os_page_shift;
    uint32_t eps = (uint32_t)(slot * recip);   /* (mod 2^32) */
    uint64_t top = (bytes / slot + 1) * (uint64_t)eps + 256;   /* above every slot key and bound */
    uint32_t key = 0, j = 0;   /* off * recip, and off / slot */
    for (size_t off = 0, r = 0; off < bytes + slot; off++, key += recip) {
      bool ok = r == 0 ? key == j * eps : key >= top && key <= UINT32_MAX - 255;
      if (++r == slot) r = 0, j++;
      if (!ok) {
        locus_printf(2, "locus: vam: slot size %zu: the slot key of offset %zu is %u\n", slot, off, key);
        abort();
      }
    }
  }
}

/* Whether off (inside a block) is a multiple of the slot size whose vam_recip is recip. */
static ALWAYS_INLINE bool slot_multiple(uint32_t off, uint32_t recip) {
  return (uint32_t)(off * recip) < recip;
}

/* p's offset in its run, d being the descriptor of p's page (back leads to the run's head,
 * 0 on it). */
static ALWAYS_INLINE uint32_t vam_run_offset(const desc_t *d, const void *p) {
  return (uint32_t)((uintptr_t)p & (os_page_size - 1)) + ((uint32_t)d->back << os_page_shift);
}

/* Free's slot test reads p's page tag alone (page_tag_t, core/pages.h): on every page of a
 * block, the tag's key is -(start * recip) mod 2^32 for the block's start and its class's
 * recip, plus the delta below 256 that makes its low byte the block's class, and its bound is
 * below. The class rides in the key so that a free reads one line of metadata, not a line of
 * tags and a line of classes: a slot's key only grows by the delta (j * eps + delta <= 2^16 +
 * 256), any other address's stays above every bound (at least recip, at least 2^17 + 1, and
 * at most 2^32 - recip), and the bound, the bump pointer's key, grows by it too. A page's
 * class byte is always a class index or VAM_AREA_CLS (only blocks and areas write it; a
 * new segment's are 0). */

/* The class of the block on page g (VAM_AREA_CLS on a large area's page; a stale or 0 class
 * on other pages, whose bound is 0): the key's
 * low byte, read as a byte of its own (one movzbl, not a load of the key and a zero
 * extension of its low byte). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the key's low byte is its first");
static ALWAYS_INLINE unsigned vam_tag_cls(const page_tag_t *g) {
  return *(const uint8_t *)&g->key;
}

/* A large area's page tag's key (vam.h: VAM_AREA_CLS), on the page `back` pages after the
 * area's first, and the area's first page from p and its page's key. */
static inline uint32_t vam_area_key(unsigned back) { return (uint32_t)back << 8 | VAM_AREA_CLS; }
static ALWAYS_INLINE char *vam_area_start(const void *p, uint32_t key) {
  return (char *)((uintptr_t)p & ~(os_page_size - 1)) - ((size_t)(key >> 8) << os_page_shift);
}

/* The slot key of address p in a block whose tag key is key: (p - block start) * recip +
 * delta mod 2^32, from p alone. Slot j's key is j * eps + delta (vam_recip), any other
 * address's at least recip. */
static ALWAYS_INLINE uint32_t vam_slot_key(uint32_t key, const void *p, uint32_t recip) {
  return (uint32_t)(uintptr_t)p * recip + key;
}
/* The same on block page g. */
static ALWAYS_INLINE uint32_t vam_slot_key_with(const page_tag_t *g, const void *p, uint32_t recip) {
  return vam_slot_key(g->key, p, recip);
}

/* Whether p is the start of a slot of g's block below its bump pointer (handed out, now or
 * before): g's bound is the bump pointer's key as of the last time it passed a slot that
 * starts on g's page (vam_bump_moved), 0 if none did since the block was (re)set, and 0 on
 * every page of anything but a block the fast path serves (whose keys are all 0 with a recip
 * of 0, so nothing passes there either). Keys grow with the slot index, so one comparison
 * tells both. */
static ALWAYS_INLINE bool vam_slot_live_with(const page_tag_t *g, const void *p, uint32_t recip) {
  return vam_slot_key_with(g, p, recip) < g->bound;
}
static ALWAYS_INLINE bool vam_slot_live(segment_t *s, const void *p) {
  page_tag_t *g = tag_of_page(s, p);
  return vam_slot_live_with(g, p, vam_class_recip[vam_tag_cls(g)]);
}

/* The same test by a thread that does not own the block (the owner may move the bound as it
 * reads it): for an object handed out to the program, the bound that covers it was stored
 * before the object could reach this thread. */
static ALWAYS_INLINE bool vam_slot_live_remote(const page_tag_t *g, const void *p, unsigned cls) {
  return vam_slot_key_with(g, p, vam_class_recip[cls]) < __atomic_load_n(&g->bound, __ATOMIC_RELAXED);
}

/* Block b's bump pointer moved from `from` past one slot (two in the secure build, whose
 * second starts at `second`) to `to`: the pages where those slots start learn the new bound. */
static ALWAYS_INLINE void vam_bump_moved(desc_t *b, const char *from, const char *second, const char *to) {
  uint32_t bound = vam_slot_key(b->aux, to, vam_class_recip[b->cls]);   /* (aux: b's tags' key) */
  segment_t *s = segment_of(from);
  __atomic_store_n(&tag_of_page(s, from)->bound, bound, __ATOMIC_RELAXED);
  if (second) __atomic_store_n(&tag_of_page(s, second)->bound, bound, __ATOMIC_RELAXED);
}

/* off / slot size if off is a multiple of it, else -1, for the slot size whose vam_recip is
 * recip (0: 8-byte slots, whose index is by shifts; a constant 0 folds to just that). */
static ALWAYS_INLINE long vam_slot_of_with(size_t off, uint32_t recip) {
  if (!recip) return off % 8 ? -1 : (long)(off / 8);
  return slot_multiple((uint32_t)off, recip) ? (long)(((uint64_t)off * recip) >> RECIP_SHIFT) : -1;
}
/* The same in block b (slow paths: any block). */
static long vam_slot_of(const desc_t *b, size_t off) {
  ASSERT(vam_class_recip[b->cls] || b->obj_size == 8);   /* (every other size has a recip) */
  return vam_slot_of_with(off, vam_class_recip[b->cls]);
}

/* No slot of block b is handed out (its bump pointer at its start): no page has a bound. */
static void vam_bounds_clear(desc_t *b) {
  page_tag_t *g = tag_of_desc(b);
  for (uint32_t i = 0; i < b->npages; i++) __atomic_store_n(&g[i].bound, 0, __ATOMIC_RELAXED);
}

/* Sets every page of block b (its class set, nothing handed out) up for free's fast path:
 * its tag's slot-key offset with the class in its low byte, no bound. (Only the head's
 * descriptor holds the class: every reader of a descriptor's cls goes to the head.) */
static void vam_block_mark(desc_t *b) {
  uint32_t offset = 0u - (uint32_t)(uintptr_t)desc_start(b) * vam_class_recip[b->cls];
  offset += (b->cls - offset) & 0xff;   /* (the delta: low byte = class) */
  page_tag_t *g = tag_of_desc(b);
  b->aux = offset;   /* the head's copy, for the bump path (vam_bump_moved) */
  ASSERT(vam_tag_cls(&(page_tag_t){ .key = offset }) == b->cls);
  for (uint32_t i = 0; i < b->npages; i++) {
    g[i].key = offset;
    __atomic_store_n(&g[i].bound, 0, __ATOMIC_RELAXED);
  }
}

/* A block goes back to the page manager; its pages no longer mark a block for free. */
static void vam_block_release(heap_t *h, desc_t *b) {
  vam_bounds_clear(b);
  block_release(h, b);
}
