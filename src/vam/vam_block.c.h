/* vam_block.c.h — Vam's set-up and its blocks' geometry: the size classes and secrets made at
 * start-up, a new heap's state, the lists of blocks per class (ending at h->d.none, vam.h),
 * slot sizes and the reciprocal that finds a slot from an offset. */

static sizeclass_table_t vam_classes;
static unsigned vam_nclasses;   /* class indexes in use: the size classes, times the groups */

static uint64_t chunk_cookie;
static uint64_t vam_secret;   /* secure build: canaries, heap keys */
static uint64_t vam_qsecret;  /* secure build: quarantine marks (a canary read out tells nothing of it) */

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

static void design_global_init(void) {
  /* Small requests are segregated 8 bytes apart, as in the paper (so 24- and 32-byte objects,
   * or 40- and 48-byte ones, never share a block), in slots rounded up to the quantum (so
   * every object of 16 bytes or more is 16-aligned); medium classes are a quantum apart, and
   * VAM_MEDIUM_STEP apart above VAM_MEDIUM_FINE (as coarse as 1/9 of the size there). The
   * secure build has no 8-byte class: every slot holds a link and a marker word (the free fast
   * path's checks and the quarantine's poison need them). */
  sizeclass_two_steps(&vam_classes, cfg_vam_hardened ? 16 : 8, 8, VAM_SMALL_LIMIT, QUANTUM, VAM_MEDIUM_FINE);
  sizeclass_extend(&vam_classes, VAM_MEDIUM_STEP, VAM_MEDIUM_MAX);
  vam_nclasses = vam_classes.count * (cfg_sites ? VAM_SITE_GROUPS : 1);
  if (vam_nclasses > VAM_MAX_CLASSES) {
    locus_printf(2, "locus: vam: %u class indexes do not fit\n", vam_nclasses);
    abort();
  }
  if (cfg_sites) {   /* every group's copy of the classes: the size table serves them all */
    for (unsigned c = vam_classes.count; c < vam_nclasses; c++) {
      vam_classes.size[c] = vam_classes.size[c % vam_classes.count];
      vam_classes.recip[c] = vam_classes.recip[c % vam_classes.count];
    }
  }
  if (cfg_tcache) vam_tcache_global_init();
  chunk_cookie = free_marker_cookie * 0x9E3779B97F4A7C15ull + 1;
  vam_secret = vam_mix(chunk_cookie ^ segment_cookie);
  vam_qsecret = vam_mix(vam_secret + 1);
}

static inline size_t vam_slot_size(unsigned cls);
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

static inline uintptr_t free_marker(const void *p) { return (uintptr_t)p ^ free_marker_cookie; }

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
  return vam_classes.size[cls] < VAM_SMALL_LIMIT ? VAM_SMALL_PAGES : VAM_MEDIUM_PAGES;
}
static inline unsigned vam_cache_index(size_t npages) { return npages != VAM_SMALL_PAGES; }

/* The flagship's free fast path (design_free): blocks whose slots hold a link and a marker
 * word. Its descriptor test is the slot test itself: aux (ceil(2^32 / slot size)) is nonzero
 * only on the pages of a block the fast path serves (every page of it: vam_block_mark), so a
 * multiple-of-the-slot test that fails sends everything else (8-byte slots, large areas, core
 * runs, interior pointers) to vam_free_other with no test of the kind. */
static const bool cfg_fast_free = !LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP;

static inline uint32_t vam_recip(size_t slot) {
  if (cfg_fast_free && slot - VAM_CANARY < 2 * sizeof(void *)) return 0;   /* no marker word: slow path */
  return (uint32_t)(((1ull << RECIP_SHIFT) + slot - 1) / slot);
}

/* Whether off (< 64 KiB) is a multiple of the slot size whose ceil(2^32 / size) is recip:
 * the low half of off * recip is below recip exactly then (Lemire, Kaser & Kurz 2019; checked
 * exhaustively for every multiple of 8 up to 1 KiB); its high half is the quotient. */
static ALWAYS_INLINE bool slot_multiple(uint32_t off, uint32_t recip) {
  return (uint32_t)(off * recip) < recip;
}

/* p's offset in its run, d being the descriptor of p's page (back leads to the run's head,
 * 0 on it). */
static ALWAYS_INLINE uint32_t vam_run_offset(const desc_t *d, const void *p) {
  return (uint32_t)((uintptr_t)p & (os_page_size - 1)) + (d->back << os_page_shift);
}

/* off / slot size if off is a multiple of it, else -1 (slow paths: any block). */
static long vam_slot_of(const desc_t *b, size_t off) {
  if (!b->aux) return off % b->obj_size ? -1 : (long)(off / b->obj_size);
  return slot_multiple((uint32_t)off, b->aux) ? (long)(((uint64_t)off * b->aux) >> RECIP_SHIFT) : -1;
}

/* Marks every page of block b for free's fast path with the reciprocal of its slot size
 * (0: not served by it). A medium block's other pages carry it too, next to their distance to
 * the head (back), so a free there needs no second, unpredictable, path. */
static void vam_block_mark(desc_t *b, uint32_t recip) {
  for (uint32_t i = 0; i < b->npages; i++) b[i].aux = recip;
}

/* A block goes back to the page manager; its pages no longer mark a block for free. */
static void vam_block_release(heap_t *h, desc_t *b) {
  vam_block_mark(b, 0);
  block_release(h, b);
}
