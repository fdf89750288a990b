/* vam.c.h — the Vam policy: page blocks, ordered per-size allocation, large areas.
 * Types and invariants are in vam.h. Included once, by the library's unity file. */

static sizeclass_table_t vam_classes;
static unsigned vam_nclasses;   /* class indexes in use: the size classes, times the groups */

static uint64_t chunk_cookie;
static uint64_t vam_secret;   /* secure build: canaries, heap keys */
static uint64_t vam_qsecret;  /* secure build: quarantine marks (a canary read out tells nothing of it) */

/* splitmix64's finaliser: a secret-keyed value nobody can guess from the address. */
static inline uint64_t vam_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void design_global_init(void) {
  /* Small requests are segregated 8 bytes apart, as in the paper (so 24- and 32-byte objects,
   * or 40- and 48-byte ones, never share a block), in slots rounded up to the quantum (so
   * every object of 16 bytes or more is 16-aligned); medium classes are a quantum apart. The
   * secure build has no 8-byte class: every slot holds a link and a marker word (the free fast
   * path's checks and the quarantine's poison need them). */
  sizeclass_two_steps(&vam_classes, cfg_secure ? 16 : 8, 8, VAM_SMALL_LIMIT, QUANTUM, VAM_MEDIUM_MAX);
  vam_nclasses = vam_classes.count;
  if (cfg_sites) {   /* every group's copy of the classes: the size table serves them all */
    vam_nclasses = vam_classes.count * VAM_SITE_GROUPS;
    if (vam_nclasses > VAM_MAX_CLASSES) {
      locus_printf(2, "locus: vam-sites: %u class indexes do not fit\n", vam_nclasses);
      abort();
    }
    for (unsigned c = vam_classes.count; c < vam_nclasses; c++) {
      vam_classes.size[c] = vam_classes.size[c % vam_classes.count];
      vam_classes.recip[c] = vam_classes.recip[c % vam_classes.count];
    }
  }
  chunk_cookie = free_marker_cookie * 0x9E3779B97F4A7C15ull + 1;
  vam_secret = vam_mix(chunk_cookie ^ segment_cookie);
  vam_qsecret = vam_mix(vam_secret + 1);
}

static inline size_t vam_slot_size(unsigned cls);

static void design_heap_init(heap_t *h) {
  for (unsigned c = 0; c < VAM_MAX_CLASSES; c++) {
    h->d.avail[c] = &h->d.none;
    desc_t *f = &h->d.foreign[c];   /* no bump range: vam_block_take serves its list only */
    f->kind = KIND_VAM_FOREIGN;
    f->cls = (uint8_t)c;
    if (c < vam_nclasses) f->obj_size = (uint32_t)vam_slot_size(c);
    f->marker_off = sizeof(void *);
  }
#if LOCUS_SECURE
  h->d.link_key = vam_mix(vam_secret ^ (uintptr_t)h);
  h->d.rng = vam_mix(h->d.link_key + 1);
  h->d.poison_sink[0] = h->d.poison_sink[1] = POISON_WORD;
#endif
}

/* ---- block lists (ending at h->d.none, see vam.h) ------------------------------------------ */

/* cond ? a : b with no branch (a mask, which the compiler does not turn back into one): for
 * a list update whose condition is a coin toss under churn of mixed sizes. */
static ALWAYS_INLINE desc_t *pick(bool cond, desc_t *a, desc_t *b) {
  uintptr_t mask = (uintptr_t)0 - (uintptr_t)cond;
  __asm__("" : "+r"(mask));   /* opaque: keeps the selection arithmetic */
  return (desc_t *)(((uintptr_t)a & mask) | ((uintptr_t)b & ~mask));
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
  if (cfg_secure) return align_up(size + VAM_CANARY, QUANTUM);   /* the canary in the rounding when it fits */
  return size <= 8 ? size : align_up(size, QUANTUM);
}

/* The bytes of a slot of class cls the program may use (vam-header: its header besides). */
static inline size_t vam_class_usable(unsigned cls) {
  return cfg_secure ? vam_classes.size[cls] : vam_slot_size(cls);   /* secure: the canary after it */
}
static inline size_t vam_usable(const desc_t *b) {
  return cfg_secure ? vam_class_usable(b->cls) : b->obj_size - (cfg_small_headers ? b->aux8 : 0);
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

/* ---- hardening: keyed links, canaries, random slot order (secure build; vam.h) ----------- */

static inline uintptr_t vam_link_key(const heap_t *h) {
#if LOCUS_SECURE
  return h->d.link_key;
#else
  (void)h;
  return 0;
#endif
}
/* A block's free-list link: safe-linked (config.h), and in the secure build keyed per heap. */
static inline uintptr_t vam_link_encode(const heap_t *h, const void *at, const void *next) {
  return link_encode(at, next) ^ vam_link_key(h);
}
static inline void *vam_link_load(const heap_t *h, const void *at) {
  return link_decode(at, *(const uintptr_t *)at ^ vam_link_key(h));
}

/* A canary word: its address under the secret (a multiply would add nothing: it is invertible,
 * so one canary read out gives the secret either way). */
static inline uintptr_t vam_canary(const void *at) { return (uintptr_t)at ^ vam_secret; }

/* The canaries on both sides of the object p of block b (never slot 0: see vam.h): the word
 * after it catches an overflow of it, the word before it (its neighbour's) an underflow of it
 * or an overflow of the neighbour. One branch for both: the free fast path's test. */
static ALWAYS_INLINE void vam_canaries_check(const desc_t *b, const void *p, const char *call) {
  const uintptr_t *after = (const uintptr_t *)((const char *)p + vam_usable(b)), *before = (const uintptr_t *)p - 1;
  if (unlikely((*after ^ vam_canary(after)) | (*before ^ vam_canary(before))))
    locus_fatal(call, "heap overflow or underflow (canary overwritten) next to", p);
}

static inline uint64_t vam_random(heap_t *h) {
#if LOCUS_SECURE
  return vam_mix(h->d.rng += 0x9E3779B97F4A7C15ull);
#else
  (void)h;
  return 0;
#endif
}

/* Secure build: a random bit (0 or 1), from a word of random bits drawn 63 at a time (the top
 * bit set on a fresh word is the sentinel that says the bits ran out). */
static ALWAYS_INLINE size_t vam_coin(heap_t *h) {
#if LOCUS_SECURE
  uint64_t bits = h->d.coins;
  if (unlikely(bits <= 1)) bits = vam_random(h) | 1ull << 63;
  h->d.coins = bits >> 1;
  return bits & 1;
#else
  (void)h;
  return 0;
#endif
}

/* Secure build: writes the canary of slot (the one or two words after its usable bytes). */
static ALWAYS_INLINE void vam_canary_set(const desc_t *b, char *slot) {
  uintptr_t *first = (uintptr_t *)(slot + vam_usable(b)), *last = (uintptr_t *)(slot + b->obj_size) - 1;
  *first = vam_canary(first);
  *last = vam_canary(last);   /* the same word when the canary is 8 bytes */
}

/* Secure build: a block's slot 0 is never handed out (its canary guards slot 1's front): the
 * bump pointer starts past it, its canary written. */
static void vam_block_skip_first(desc_t *b) {
  if (!cfg_secure) return;
  char *start = desc_start(b);
  vam_canary_set(b, start);
  b->u.blk.bump = start + b->obj_size;
}

/* Puts slot p on block b's free list, marked free (marker: free_marker(p)); returns the list's
 * previous head. */
static ALWAYS_INLINE void *vam_slot_list(const heap_t *h, desc_t *b, void *p, uintptr_t marker) {
  uintptr_t *w = p;
  void *head = b->u.blk.free;
  w[1] = marker;
  b->u.blk.free = p;   /* between the two words' stores: kept as two plain stores */
  w[0] = vam_link_encode(h, p, head);
  return head;
}

/* The next object of block b from its bump pointer (below its end). The secure build takes
 * the slots two at a time, writing their canaries (so every slot below the bump pointer has
 * one): a coin toss picks which of the two is handed out, the other goes onto the block's free
 * list, which the secure build serves first, so it is the next one handed out. Consecutive
 * allocations are thus not a constant distance apart (an attacker cannot place an object next
 * to a victim by allocating in order), yet they stay within two slots of address order, so a
 * walk of them is still a stream the prefetchers follow: a shuffle within windows of 8 slots
 * made the walks of a freshly built list 2x slower, and handing the unpicked slot out later
 * (after the bump pointer reached the end) 1.3x. No branch depends on the coin (a mispredicted
 * branch per allocation cost batches 15%). */
static ALWAYS_INLINE char *vam_carve(heap_t *h, desc_t *b) {
  char *p = b->u.blk.bump;
  size_t size = b->obj_size;
  if (cfg_secure) {
    vam_canary_set(b, p);
    char *q = p + size;
    if (q < b->u.blk.end) {
      vam_canary_set(b, q);
      size_t pick = vam_coin(h) * size;
      char *other = q - pick;
      vam_slot_list(h, b, other, free_marker(other));
      p += pick;
      b->u.blk.bump = q + size;
      return p;
    }
  }
  b->u.blk.bump = p + size;
  return p;
}

/* Secure build: a link just decoded from the free list of block b (from the object at p) must
 * be NULL or a listed slot of b; anything else is a write after free over the link. */
static COLD void vam_link_corrupt(const void *p) { locus_fatal("malloc()", "corrupted free-list link (write after free) in", p); }
static inline void vam_link_check(const desc_t *b, const char *next, const void *p) {
  const char *start = desc_start(b);
  if (next && (next < start + b->obj_size || next >= b->u.blk.end ||
               vam_slot_of(b, (size_t)(next - start)) < 0)) vam_link_corrupt(p);
}

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
    h->stats.blocks_in_use++;
  }
  char *start = desc_start(b);
  size_t bytes = desc_bytes(b), cap = bytes / size;
  b->kind = KIND_VAM_BLOCK;
  b->cls = (uint8_t)cls;
  b->obj_size = (uint32_t)size;
  vam_block_mark(b, vam_recip(size));
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
  h->stats.searches++;
  h->stats.search_words += inspected;
  if (inspected > h->stats.search_words_max) h->stats.search_words_max = inspected;
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
  if (cfg_secure && b->kind != KIND_VAM_FOREIGN) vam_link_check(b, next, p);   /* (foreign: many blocks) */
  b->u.blk.free = next;
  /* Retire when the list ran out (the secure build: and the bump range too, which it serves
   * after the list), without a branch: under churn of mixed sizes it goes either way about
   * half the time (cachegrind: half of these branches mispredicted; the store is
   * unconditional, 16% off threads1 and 12% off a mixed-size server loop). */
  h->d.avail[cls] = pick((next == NULL) & (!cfg_secure || b->u.blk.bump >= b->u.blk.end), b->next, b);
  if (zero) memset(p, 0, cfg_secure ? vam_usable(b) : b->obj_size);
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
  } else if (cfg_secure && (p = b->u.blk.free) != NULL) {
    vam_list_pop(h, b, cls, p, zero);
  } else if (likely(b->u.blk.bump < b->u.blk.end)) {
    if (!b->u.blk.bump) __builtin_unreachable();   /* below a block's end: a real address (no NULL test) */
    p = vam_carve(h, b);
    if (unlikely(b->u.blk.bump >= b->u.blk.end) && !b->u.blk.free) vam_block_retire(h, b, cls);
    if (zero && !(b->flags & FLAG_CLEAN)) memset(p, 0, cfg_secure ? vam_usable(b) : b->obj_size);
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
 * freed, make a new block if still none, and allocate from it. */
static NOINLINE void *vam_alloc_slow(size_t size, bool zero, heap_t *h) {
  /* (size first, as malloc received it, and the class recomputed: malloc's fast path keeps
   * nothing live for this call) */
  if (h == &heap_empty) {   /* the first allocation may come before the class tables exist */
    if (!(h = heap_acquire())) return alloc_failed();
    return vam_alloc(h, size, zero);
  }
  unsigned cls = sizeclass_of(&vam_classes, size) + vam_pending_offset(h);
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

/* ---- large objects ----------------------------------------------------------------------- */

static inline unsigned large_bin(uint32_t chunk_size) {
  return chunk_size > LARGE_MAX_CHUNK ? LARGE_BINS - 1 : (chunk_size - LARGE_MIN_CHUNK) / 16;
}
static inline uint32_t chunk_size(const chunk_t *c) { return c->size & ~CHUNK_FLAGS; }
static inline chunk_t *chunk_next(chunk_t *c) { return (chunk_t *)((char *)c + chunk_size(c)); }
static inline bool chunk_valid(const chunk_t *c) { return c->check == (chunk_cookie ^ (uintptr_t)c); }

/* A header the allocator is about to trust (a free chunk taken from a bin, a neighbour to
 * merge with): a corrupted one is reported here, as corruption, rather than later as an
 * invalid pointer against an object the program allocated. */
static inline void chunk_trust(const chunk_t *c, const char *call) {
  if (unlikely(!chunk_valid(c))) locus_fatal(call, "corrupted large-object header", (const char *)c + CHUNK_HEADER);
}

static void chunk_bin_insert(heap_t *h, chunk_t *c) {
  unsigned b = large_bin(chunk_size(c));
  c->prev = NULL;
  c->next = h->d.bins[b];
  if (c->next) c->next->prev = c;
  h->d.bins[b] = c;
  bitmap2_set(&h->d.binmap, b);
}

static void chunk_bin_remove(heap_t *h, chunk_t *c) {
  unsigned b = large_bin(chunk_size(c));
  if (c->prev) c->prev->next = c->next; else h->d.bins[b] = c->next;
  if (c->next) c->next->prev = c->prev;
  if (!h->d.bins[b]) bitmap2_clear(&h->d.binmap, b);
}

static inline void chunk_set(chunk_t *c, uint32_t prev_size, uint32_t size) {
  c->prev_size = prev_size;
  c->size = size;
  c->check = chunk_cookie ^ (uintptr_t)c;
}

static chunk_t *large_area_new(heap_t *h) {
  bool clean;
  desc_t *r = pages_alloc(h, VAM_AREA_PAGES, 1, &clean);
  if (!r) return NULL;
  r->kind = KIND_VAM_LARGE;
  h->stats.blocks_in_use++;
  char *start = desc_start(r), *end = start + desc_bytes(r);
  chunk_t *c = (chunk_t *)start, *sentinel = (chunk_t *)(end - CHUNK_HEADER);
  uint32_t size = (uint32_t)(end - CHUNK_HEADER - start);
  chunk_set(c, 0, size);
  chunk_set(sentinel, size, CHUNK_INUSE);
  return c;
}

/* Splits c (not in a bin, marked in use by the caller) to `want` bytes if the rest can hold
 * the smallest large object; the rest goes to its bin. */
static void chunk_split(heap_t *h, chunk_t *c, uint32_t want) {
  uint32_t have = chunk_size(c);
  if (have - want < LARGE_MIN_CHUNK) return;
  chunk_t *rest = (chunk_t *)((char *)c + want);
  chunk_set(rest, want, have - want);
  chunk_next(rest)->prev_size = have - want;
  c->size = want | (c->size & CHUNK_FLAGS);
  /* The rest may border a free chunk (after an in-place shrink): merge it. */
  chunk_t *after = chunk_next(rest);
  if (!(after->size & CHUNK_INUSE)) {
    chunk_bin_remove(h, after);
    rest->size += chunk_size(after);
    chunk_next(rest)->prev_size = chunk_size(rest);
  }
  chunk_bin_insert(h, rest);
}

static NOINLINE void *vam_alloc_large(heap_t *h, size_t size, bool zero) {
  if (h == &heap_empty && !(h = heap_acquire())) return alloc_failed();
  heap_collect(h);
  uint32_t want = (uint32_t)align_up(size + CHUNK_HEADER, 16);
  if (want < LARGE_MIN_CHUNK) want = LARGE_MIN_CHUNK;
  int b = bitmap2_find_from(&h->d.binmap, large_bin(want));
  chunk_t *c;
  if (b >= 0) {
    c = h->d.bins[b];
    chunk_trust(c, "malloc()");
    chunk_bin_remove(h, c);
    if (h->d.spare_area && desc_head(segment_of(c), c) == h->d.spare_area) h->d.spare_area = NULL;
  } else if (!(c = large_area_new(h))) {
    return alloc_failed();
  }
  c->size |= CHUNK_INUSE;
  chunk_split(h, c, want);
  void *p = (char *)c + CHUNK_HEADER;
  size_t usable = chunk_size(c) - CHUNK_HEADER;
  if (zero) memset(p, 0, usable < size ? usable : size);
  h->stats.malloc_calls++;
  h->stats.bytes_allocated += usable;
  heap_debug_tick(h);
  return p;
}

/* The chunk whose payload p is, checked; ends the program on an invalid or double free. */
static chunk_t *chunk_of(desc_t *r, const void *p, const char *call, bool *alias) {
  char *start = desc_start(r), *end = start + desc_bytes(r);
  chunk_t *c = (chunk_t *)((char *)p - CHUNK_HEADER);
  if ((char *)c < start || (char *)p >= end - CHUNK_HEADER || ((uintptr_t)p & 15) || !chunk_valid(c))
    locus_fatal(call, "invalid pointer", p);
  *alias = c->size & CHUNK_ALIAS;
  if (*alias) {
    c = (chunk_t *)((char *)c - c->prev_size);
    if ((char *)c < start || !chunk_valid(c)) locus_fatal(call, "invalid pointer", p);
  }
  if (!(c->size & CHUNK_INUSE)) locus_fatal(call, "double free", p);
  return c;
}

/* Discards the whole pages inside free chunk c (never its header and bin links). */
static void chunk_discard(chunk_t *c) {
  uintptr_t from = align_up((uintptr_t)c + sizeof(chunk_t), os_page_size);
  uintptr_t to = ((uintptr_t)c + chunk_size(c)) & ~(os_page_size - 1);
  if (to > from) os_discard((void *)from, to - from);
}

static NOINLINE void vam_free_large(heap_t *h, desc_t *r, void *p, const char *call) {
  bool alias;
  chunk_t *c = chunk_of(r, p, call, &alias);
  h->stats.free_calls++;
  h->stats.bytes_allocated -= chunk_size(c) - CHUNK_HEADER;
  c->size &= ~CHUNK_FLAGS;
  if (c->prev_size) {
    chunk_t *before = (chunk_t *)((char *)c - c->prev_size);
    chunk_trust(before, call);
    if (!(before->size & CHUNK_INUSE)) {
      chunk_bin_remove(h, before);
      before->size += chunk_size(c);
      c = before;
    }
  }
  chunk_t *after = chunk_next(c);
  chunk_trust(after, call);
  if (!(after->size & CHUNK_INUSE)) {
    chunk_bin_remove(h, after);
    c->size += chunk_size(after);
  }
  chunk_next(c)->prev_size = chunk_size(c);
  bool empty = (char *)c == desc_start(r) && chunk_next(c)->size == CHUNK_INUSE;
  if (empty && (opt.discard == DISCARD_IMMEDIATE || (h->d.spare_area && h->d.spare_area != r))) {
    block_release(h, r);
  } else {
    if (empty) h->d.spare_area = r;
    chunk_bin_insert(h, c);
    if (opt.discard == DISCARD_IMMEDIATE) chunk_discard(c);
  }
  heap_debug_tick(h);
}

/* In-place resize of a large object: shrink by splitting, grow into a free neighbour. */
static bool vam_resize_large(heap_t *h, desc_t *r, void *p, size_t size) {
  bool alias;
  chunk_t *c = chunk_of(r, p, "realloc()", &alias);
  if (alias || size > VAM_LARGE_MAX || size <= VAM_MEDIUM_MAX) return false;
  uint32_t want = (uint32_t)align_up(size + CHUNK_HEADER, 16), have = chunk_size(c);
  if (want < LARGE_MIN_CHUNK) want = LARGE_MIN_CHUNK;
  if (want > have) {
    chunk_t *after = chunk_next(c);
    if ((after->size & CHUNK_INUSE) || have + chunk_size(after) < want) return false;
    chunk_bin_remove(h, after);
    if (h->d.spare_area == r) h->d.spare_area = NULL;
    c->size += chunk_size(after);
    chunk_next(c)->prev_size = chunk_size(c);
  }
  chunk_split(h, c, want);
  h->stats.bytes_allocated += (uint64_t)chunk_size(c) - have;
  return true;
}

/* ---- the design contract ----------------------------------------------------------------- */

/* vam-sites needs the caller's return address: inlined into the exported entry points (and
 * the secure build's, with its checks, would not be inlined otherwise). */
#if LOCUS_VAM_SITES || LOCUS_SECURE
#define VAM_ALLOC_INLINE ALWAYS_INLINE
#else
#define VAM_ALLOC_INLINE inline
#endif

static VAM_ALLOC_INLINE void *vam_alloc(heap_t *h, size_t size, bool zero) {
  if (likely(size <= VAM_MEDIUM_MAX)) {
    unsigned cls = sizeclass_of(&vam_classes, size);
    if (cfg_sites) cls += vam_site_offset(h, (uintptr_t)__builtin_return_address(0));
    void *p = vam_block_take(h, h->d.avail[cls], cls, zero);
    return likely(p != NULL) ? p : vam_alloc_slow(size, zero, h);
  }
  if (size <= VAM_LARGE_MAX) return vam_alloc_large(h, size, zero);
  return huge_alloc(h, size, 0, zero);
}

#define design_alloc vam_alloc

/* ---- allocation near a hint ---------------------------------------------------------------- */

/* Whether block b (of class cls, of heap h) is on avail[cls] with room: not full, and not an
 * empty block kept in the heap's cache (off every list, see vam.h's invariants). */
static inline bool vam_block_listed(heap_t *h, const desc_t *b) {
  bool listed = !cfg_block_bitmap || !(b->flags & FLAG_FULL);   /* vam-bitmap: may be exhausted */
  return listed && vam_has_room(b) && (b->used > 0 || h->d.spare[b->cls] == b);
}

/* The block of heap h serving size class cls (in any group: vam-sites) whose run holds page
 * descriptor d, if it has room; d may be any page of a segment of h (or a header page: not a
 * block). */
static inline desc_t *vam_block_near(heap_t *h, desc_t *d, unsigned cls) {
  if (d->kind != KIND_VAM_BLOCK && d->kind != KIND_INTERIOR) return NULL;
  desc_t *b = d - d->back;
  return b->kind == KIND_VAM_BLOCK && vam_base_class(b->cls) == cls && vam_block_listed(h, b) ? b : NULL;
}

/* Whether block b has room for a quarter of its capacity or more: the fill limit of hinted
 * allocations that cannot go on the hint's own page. A block that keeps a quarter free keeps
 * room for later objects whose hints point into it (NEXT.md's simulation: trees of random
 * keys get ~20% of nodes on their hint's page at 3/4, none when fallbacks fill blocks up). */
static inline bool vam_block_roomy(const desc_t *b) {
  size_t cap = vam_capacity(b);
  return cap - b->used >= (cap + 3) / 4;
}

/* Where a hinted allocation goes when the hint's block has no room and no neighbouring block
 * has a quarter free: the class's hint block while it is under 3/4 full, else a new one (the
 * old one goes back on the class's list). The hint block is on no list, so unhinted objects
 * never take its slots: a list built amid churn moves on to it, node after node, instead of
 * following its last node into old blocks with one freed slot each, between same-size objects
 * of the rest of the program (the flagship placed 30% of a churned list's nodes on their hint's
 * page, vam-bitmap's hinted walk was 1.5x slower than the plain one). NULL when no block can
 * be had. */
static desc_t *vam_hint_fallback(heap_t *h, unsigned cls) {
  desc_t *b = h->d.hint_block[cls];
  if (b && vam_block_roomy(b)) return b;
  if (b) list_push(&h->d.avail[b->cls], b);   /* it has room: back among the others */
  h->d.hint_block[cls] = NULL;
  if (!(b = vam_block_new(h, cls))) return NULL;
  list_unlink(&h->d.avail[cls], b);            /* vam_block_new listed it */
  h->d.hint_block[cls] = b;
  return b;
}

/* An object of block b (with room; on its class's list, or its hint block) for an allocation
 * near hint. The ordinary path serves the head of the class's list and keeps its invariants
 * (a block that gives its last object retires; vam-bitmap's too, here, as the flagship's do),
 * so b moves to the head for the take; afterwards a hint block with room goes back off the
 * list (one that filled is forgotten), and a listed block with room moves behind the block
 * after it, so that unhinted allocations do not follow hinted ones into their block and sit
 * between the hinted objects (vam-bitmap, whose full blocks were not retired at once, walked a
 * list built amid same-size temporaries 2.8x slower with hints than without). vam-bitmap
 * takes the first free slot after the hint's, when the hint is in b. */
static void *vam_take_near(heap_t *h, desc_t *b, const void *hint, bool zero) {
  unsigned cls = b->cls, base = vam_base_class(cls);
  desc_t **avail = &h->d.avail[cls];
  bool reserved = h->d.hint_block[base] == b;
  if (reserved || *avail != b) {
    if (!reserved) list_unlink(avail, b);
    list_push(avail, b);
  }
  const char *start = desc_start(b);
  unsigned from = cfg_block_bitmap && (const char *)hint >= start && (const char *)hint < b->u.blk.end
                ? (unsigned)(((const char *)hint - start) / b->obj_size) + 1 : 0;
  void *p = vam_block_take_from(h, b, cls, zero, from);   /* it has room: never NULL */
  if (cfg_block_bitmap && !vam_has_room(b)) vam_block_retire(h, b, cls);
  if (*avail != b) {                         /* it filled and retired */
    if (reserved) h->d.hint_block[base] = NULL;
  } else if (reserved) {
    list_unlink(avail, b);
  } else if (b->next != &h->d.none) {
    desc_t *next = b->next;
    list_unlink(avail, b);
    list_insert_after(next, b);
  }
  return p;
}

/* The hint's own block if it is of this class and has room, else the block on the page just
 * before or just after it if it has a quarter free (a neighbouring page is still near: the
 * same TLB reach and, for a sequential traversal, the next prefetched page), else the class's
 * hint block (vam_hint_fallback). Hints into another heap's memory, large areas and core runs
 * fall back to plain malloc: only page blocks place objects by address. */
static NOINLINE void *vam_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  if (size > VAM_MEDIUM_MAX || h == &heap_empty || segmap_get(hint) != GRANULE_SEGMENT) return vam_alloc(h, size, zero);
  segment_t *s = segment_of(hint);
  if (s->heap != h) return vam_alloc(h, size, zero);
  unsigned cls = sizeclass_of(&vam_classes, size);
  desc_t *d = desc_of_page(s, hint), *b = vam_block_near(h, d, cls);
  if (!b) {
    desc_t *head = d - (d->kind == KIND_INTERIOR ? d->back : 0);
    size_t first = (size_t)(head - s->desc);
    size_t after = first + (head->kind == KIND_FREE || !head->npages ? 1 : head->npages);
    if (first > s->first) b = vam_block_near(h, &s->desc[first - 1], cls);
    if (b && !vam_block_roomy(b)) b = NULL;
    if (!b && after < s->npages) b = vam_block_near(h, &s->desc[after], cls);
    if (b && !vam_block_roomy(b)) b = NULL;
    if (!b) b = vam_hint_fallback(h, cls);
  }
  return b ? vam_take_near(h, b, hint, zero) : vam_alloc(h, size, zero);
}

static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  return vam_alloc_near(h, size, hint, zero);
}
static unsigned design_kregion_shift(const void *hint) { (void)hint; return os_page_shift; }

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
static COLD NOINLINE __attribute__((noipa)) void vam_free_unbumped(const desc_t *b, const char *slot, const void *p,
                                                                 const char *call) {
  locus_fatal(call, slot < b->u.blk.end ? "double free" : "invalid pointer", p);
}

/* Whether slot (below the bump pointer) is on block b's free list: its marker word, or, for an
 * 8-byte slot, which has none, the list head or a link that decodes to a slot of this block */
static ALWAYS_INLINE bool vam_slot_listed(const heap_t *h, const desc_t *b, const char *slot) {
  if (*(const uintptr_t *)(slot + b->marker_off) == free_marker(slot) || slot == b->u.blk.free) return true;
  if (b->marker_off) return false;
  char *next = vam_link_load(h, slot);
  return !next || (next >= desc_start(b) && next < b->u.blk.bump && !((uintptr_t)next & 7));
}

/* Frees p, at offset off in block b: every block and variant (the flagship's fast path is
 * design_free's). */
static ALWAYS_INLINE void vam_free_block(heap_t *h, desc_t *b, void *p, size_t off, const char *call) {
  char *slot = cfg_small_headers ? (char *)p - b->aux8 : p;
  if (cfg_small_headers) off -= b->aux8;
  long index = vam_slot_of(b, off);
  bool was_full;
  if (cfg_block_bitmap) {
    was_full = b->flags & FLAG_FULL;
    if (unlikely(index < 0 || slot >= b->u.blk.end)) locus_fatal(call, "invalid pointer", p);
    uint64_t *word = (uint64_t *)b->u.blk.free + (index >> 6), bit = 1ull << (index & 63);
    if (*word & bit) locus_fatal(call, "double free", p);
    *word |= bit;
  } else {
    if (unlikely(index < 0)) { locus_fatal_jump(call, "invalid pointer", p); return; }
    if (unlikely(slot >= b->u.blk.bump)) { vam_free_unbumped(b, slot, p, call); return; }
    /* Branch-free marker test: an 8-byte slot has no marker word (marker_off 0), so its test
     * reads the link word, which never equals a marker, and its marker is overwritten by the
     * link; for it the test against the list head, then its link (safe-linked: it decodes to
     * NULL or to a slot of this block below the bump pointer only if the slot is free; a live
     * 8-byte object's word was cleared when it was handed out), catch a double free. */
    uintptr_t *link = (uintptr_t *)slot, *mark = (uintptr_t *)(slot + b->marker_off);
    uintptr_t marker = free_marker(slot);
    void *head = b->u.blk.free;
    if (unlikely(vam_slot_listed(h, b, slot))) { locus_fatal_jump(call, "double free", p); return; }
    was_full = !head && b->u.blk.bump >= b->u.blk.end;
    if (cfg_small_headers && b->aux8 && *link != vam_classes.size[b->cls]) locus_fatal(call, "invalid pointer", p);
    *mark = marker;
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

/* Takes an empty block off its class's list: into the heap's cache of empty blocks if there
 * is room (keep), else back to the page manager. */
static void vam_block_drop(heap_t *h, desc_t *b, bool keep) {
  list_unlink(&h->d.avail[b->cls], b);
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
      vam_block_skip_first(b);   /* (secure: slot 0's canary is intact, rewritten the same) */
    }
    b->flags &= (uint16_t)~FLAG_CLEAN;
    pages_policy(h);   /* the discard policy runs as often as blocks empty, kept or not */
  }
  heap_debug_tick(h);
}

static ALWAYS_INLINE void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) vam_free_block(h, d, p, off, call);
  else if (d->kind == KIND_VAM_LARGE) vam_free_large(h, d, p, call);
  else core_free(h, d, p, call);
}

/* The fast path's free of slot p of block b, p a multiple of the slot size (16 B or more):
 * below the bump pointer (handed out), no marker (not free already), then onto the block's
 * list; a full block moves to the front of its class's list. */
static ALWAYS_INLINE void vam_slot_push(heap_t *h, desc_t *b, void *p, uintptr_t marker);
static ALWAYS_INLINE void vam_free_slot(heap_t *h, desc_t *b, void *p, const char *call) {
  uintptr_t *w = p, marker = free_marker(p);
  if (unlikely((char *)p >= b->u.blk.bump)) { vam_free_unbumped(b, p, p, call); return; }
  if (unlikely(w[1] == marker)) { locus_fatal_jump(call, "double free", p); return; }
  vam_slot_push(h, b, p, marker);
}

/* Slot p (checked) goes onto its block's list. */
static ALWAYS_INLINE void vam_slot_push(heap_t *h, desc_t *b, void *p, uintptr_t marker) {
  void *head = vam_slot_list(h, b, p, marker);
  unsigned cls = b->cls;
  h->d.frees[cls]++;
  /* A full block moves to the front of its class's list. (Written without a branch, like the
   * retire in vam_block_take, it made mixed-size churn 8% faster but same-size batches 10%
   * slower: three unconditional stores to two descriptors per free.) */
  if (unlikely(!head) && b->u.blk.bump >= b->u.blk.end) list_push(&h->d.avail[cls], b);
  if (unlikely(--b->used == 0)) vam_block_empty(h, b);
}

/* p's offset in its run, d being the descriptor of p's page (back leads to the run's head,
 * 0 on it). */
static ALWAYS_INLINE uint32_t vam_run_offset(const desc_t *d, const void *p) {
  return (uint32_t)((uintptr_t)p & (os_page_size - 1)) + (d->back << os_page_shift);
}

/* What the fast path's slot test sent on: a block with 8-byte slots, an interior pointer,
 * anything else in a run (a large area, a core run), from any page of it. */
static NOINLINE void vam_free_other(heap_t *h, desc_t *d, void *p, const char *call) {
  design_free_run(h, d - d->back, p, vam_run_offset(d, p), call);
}

static ALWAYS_INLINE void vam_free_secure(heap_t *h, desc_t *d, void *p, const char *call);

static ALWAYS_INLINE void vam_free_plain(heap_t *h, desc_t *d, void *p, const char *call) {
  if (!cfg_fast_free) {
    /* A page whose descriptor is a block's is the block's first page: p's offset is its
     * offset in the page. */
    uint32_t off = (uint32_t)((uintptr_t)p & (os_page_size - 1));
    if (likely(d->kind == KIND_VAM_BLOCK)) vam_free_block(h, d, p, off, call);
    else free_in_run(h, p, call);   /* a medium block's other pages, large areas, core runs */
    return;
  }
  /* Any page of a block the fast path serves. */
  if (likely(slot_multiple(vam_run_offset(d, p), d->aux))) vam_free_slot(h, d - d->back, p, call);
  else vam_free_other(h, d, p, call);
}

static ALWAYS_INLINE void design_free(heap_t *h, desc_t *d, void *p, const char *call) {
  if (cfg_secure) vam_free_secure(h, d, p, call);
  else vam_free_plain(h, d, p, call);
}

/* The slot index of p in block b, or a fatal error if p is not an object's address. */
static long vam_slot_index(desc_t *b, const void *p, const char *call) {
  const char *slot = (const char *)p - (cfg_small_headers ? b->aux8 : 0);
  long index = vam_slot_of(b, (size_t)(slot - desc_start(b)));
  if (index < 0 || slot >= b->u.blk.end) locus_fatal(call, "invalid pointer", p);
  return index;
}

/* ---- the quarantine (secure build; vam.h) --------------------------------------------------- */


/* The mark word 0 of a quarantined object holds: keyed, so no program data matches it by chance
 * or by design. */
static inline uintptr_t vam_qmark(const void *p) { return (uintptr_t)p ^ vam_qsecret; }

/* Ends the program if p is in the quarantine (it was freed): for calls that read an object. */
static void vam_quarantine_check(const void *p, const char *call) {
  if (*(const uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "pointer to a freed object", p);
}

/* The bytes of the block object or large chunk p (head d) that the quarantine poisons. */
static size_t vam_poison_len(desc_t *d, void *p, const char *call) {
  size_t n;
  if (d->kind == KIND_VAM_BLOCK) {
    n = vam_usable(d);
  } else {
    bool alias;
    chunk_t *c = chunk_of(d, p, call, &alias);
    n = (size_t)((char *)c + chunk_size(c) - (char *)p);
  }
  return n < VAM_POISON_MAX ? n : VAM_POISON_MAX;
}

/* The quarantine ring (secure build; NULL otherwise, never used). */
static inline vam_quarantined_t *vam_quarantine_ring(heap_t *h) {
#if LOCUS_SECURE
  return h->d.quarantine;
#else
  (void)h;
  return NULL;
#endif
}

/* Where words 2-3 of a quarantined slot of the free fast path are poisoned, its usable bytes
 * being n (16, 24, 32 ...): in place if the object has both (32 bytes or more), else in the
 * heap's poison sink (a 16- or 24-byte object: one of them or both are canary). No branch: n
 * is a coin toss under churn of mixed sizes, and a branch on it mispredicted. */
static ALWAYS_INLINE uintptr_t *vam_poison_at(heap_t *h, uintptr_t *w, size_t n) {
#if LOCUS_SECURE
  uintptr_t inside = (uintptr_t)0 - (uintptr_t)(n >= 4 * sizeof(uintptr_t));
  __asm__("" : "+r"(inside));   /* opaque: keeps the selection arithmetic */
  return (uintptr_t *)(((uintptr_t)&w[2] & inside) | ((uintptr_t)h->d.poison_sink & ~inside));
#else
  (void)h; (void)n;
  return &w[2];
#endif
}

/* An object leaves the quarantine: its mark and poison must be intact (else it was written
 * after it was freed), then it is freed for reuse. A slot of the free fast path's blocks
 * (block b) goes the flagship's fast way (its mark, marker and words 2-3: vam_poison_at);
 * anything else (b NULL) the flagship's free (its first min(usable, VAM_POISON_MAX) bytes). */
static NOINLINE void vam_release_foreign(heap_t *h, desc_t *b, void *p);
static NOINLINE void vam_quarantine_release_other(heap_t *h, void *p) {
  uintptr_t *w = p;
  desc_t *d = desc_of_page(segment_of(p), p);
  size_t n = vam_poison_len(d - d->back, p, "free()");
  if (w[0] != vam_qmark(p) || !poison_intact(p, sizeof(uintptr_t), n)) locus_fatal("free()", "write after free to", p);
  w[0] = 0;   /* no longer marked */
  vam_free_plain(h, d, p, "free()");
}
static ALWAYS_INLINE void vam_quarantine_release(heap_t *h, void *p, desc_t *b) {
  if (unlikely(!b)) { vam_quarantine_release_other(h, p); return; }
  uintptr_t *w = p, marker = free_marker(p);
  uintptr_t diff = (w[0] ^ vam_qmark(p)) | (w[1] ^ marker);
  size_t n = vam_usable(b);
  const uintptr_t *poison = vam_poison_at(h, w, n);
  diff |= (poison[0] ^ POISON_WORD) | (poison[1] ^ POISON_WORD);
  if (unlikely(diff)) locus_fatal("free()", "write after free to", p);
  if (unlikely(segment_of(p)->heap != h)) { vam_release_foreign(h, b, p); return; }
  vam_slot_push(h, b, p, marker);
}

/* p (of block b, or NULL: see the ring) enters the quarantine, the oldest object leaves it. */
static ALWAYS_INLINE void vam_quarantine_push(heap_t *h, void *p, desc_t *b) {
#if LOCUS_SECURE
  vam_quarantined_t *q = &h->d.quarantine[h->d.qnext], old = *q;
  h->d.qnext = (h->d.qnext + 1) % VAM_QUARANTINE;
  q->p = p;
  q->block = b;
  if (old.p) vam_quarantine_release(h, old.p, old.block);
#else
  (void)h; (void)p; (void)b;
#endif
}

/* Empties the quarantine (thread exit, purge). */
static void vam_quarantine_flush(heap_t *h) {
  vam_quarantined_t *ring = vam_quarantine_ring(h);
  for (unsigned i = 0; cfg_secure && i < VAM_QUARANTINE; i++) {
    vam_quarantined_t q = ring[i];
    ring[i].p = NULL;
    if (q.p) vam_quarantine_release(h, q.p, q.block);
  }
}

/* The secure build's free: p is checked as an object of its kind (block slot: below the end,
 * not slot 0, not free or quarantined, canaries on both sides intact; large chunk: its header
 * and its neighbours'), marked and poisoned, and takes the oldest object's place in the
 * quarantine, which is freed for reuse. Core runs (regions) are freed at once. */
static NOINLINE void vam_free_secure_other(heap_t *h, desc_t *d, void *p, const char *call) {
  desc_t *b = d - d->back;
  if (b->kind == KIND_VAM_BLOCK) {
    if (vam_slot_index(b, p, call) == 0) locus_fatal(call, "invalid pointer", p);
    if ((char *)p >= b->u.blk.bump) vam_free_unbumped(b, p, p, call);   /* (no canary there yet) */
    if (*(uintptr_t *)p == vam_qmark(p) || vam_slot_listed(h, b, p)) locus_fatal(call, "double free", p);
    vam_canaries_check(b, p, call);
  } else if (b->kind == KIND_VAM_LARGE) {
    bool alias;
    chunk_t *c = chunk_of(b, p, call, &alias);
    if (*(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
    chunk_trust(chunk_next(c), call);
    if (c->prev_size) chunk_trust((chunk_t *)((char *)c - c->prev_size), call);
  } else {
    vam_free_plain(h, d, p, call);
    return;
  }
  size_t n = vam_poison_len(b, p, call);
  *(uintptr_t *)p = vam_qmark(p);
  if (n > sizeof(uintptr_t)) memset((char *)p + sizeof(uintptr_t), POISON_BYTE, n - sizeof(uintptr_t));
  vam_quarantine_push(h, p, NULL);
}

/* The secure build's free. Its fast path takes what the flagship's does (a slot of a block
 * whose slots hold a link and a marker word): the slot must be handed out (below the block's
 * bump pointer, not slot 0), not free (marker) nor quarantined (mark), with the canary words next to
 * it intact (the one after it, and its lower neighbour's last, just before it: a 1-byte
 * overflow or underflow changes one of them); then it is marked (word 0, word 1 the free
 * marker), poisoned (words 2-3 where the object has them: vam_poison_at) and quarantined (the freeing thread's ring, also for another heap's object: vam_release_foreign
 * sends it on when it leaves). Everything else takes vam_free_secure_other. */
static ALWAYS_INLINE void vam_secure_retire(heap_t *h, desc_t *b, void *p, const char *call) {
  uintptr_t *w = p;
  if (unlikely((char *)p >= b->u.blk.bump)) vam_free_unbumped(b, p, p, call);
  if (unlikely(w[1] == free_marker(p))) locus_fatal(call, "double free", p);   /* listed or quarantined */
  vam_canaries_check(b, p, call);
  size_t n = vam_usable(b);
  _Static_assert(VAM_POISON_MAX == 32, "the fast path poisons up to four words");
  w[0] = vam_qmark(p);   /* usable sizes here: 16, 24, 32 ... */
  w[1] = free_marker(p);   /* as on the free list: the one double-free test */
  uintptr_t *poison = vam_poison_at(h, w, n);
  poison[0] = poison[1] = POISON_WORD;
}

static ALWAYS_INLINE void vam_free_secure(heap_t *h, desc_t *d, void *p, const char *call) {
  uint32_t off = vam_run_offset(d, p);
  if (unlikely(!slot_multiple(off, d->aux) || off == 0)) { vam_free_secure_other(h, d, p, call); return; }
  desc_t *b = d - d->back;
  vam_secure_retire(h, b, p, call);
  vam_quarantine_push(h, p, b);
}

/* The most usable bytes an object that operator new(size) returned can have: a sized delete
 * whose object has more was given a wrong (smaller) size. */
static size_t design_usable_max(size_t size) {
  if (size <= VAM_MEDIUM_MAX) return vam_class_usable(sizeclass_of(&vam_classes, size));
  if (size <= VAM_LARGE_MAX) return align_up(size + CHUNK_HEADER, 16) - CHUNK_HEADER + LARGE_MIN_CHUNK;
  return size + os_page_size;
}
#define DESIGN_USABLE_MAX 1

static const bool cfg_foreign_cache = !LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP;

/* A free of p, owned by block d of another heap, by the thread owning heap me: keeps it in
 * me's foreign-object cache if it is a slot with a marker word and the class's cache has room
 * (see vam.h). The same checks as a remote free first. Returns false to send it home. */
static bool vam_foreign_keep(heap_t *me, desc_t *d, void *p, const char *call) {
  if (!cfg_foreign_cache || me == &heap_empty || d->kind != KIND_VAM_BLOCK || !d->aux) return false;
  unsigned cls = d->cls;
  desc_t *f = &me->d.foreign[cls];
  if ((uint16_t)(0 - f->used) >= VAM_FOREIGN_MAX) return false;
  vam_slot_index(d, p, call);
  uintptr_t *w = p;
  marker_free_remote(&w[1], free_marker(p), p, call);
  w[0] = vam_link_encode(me, p, f->u.blk.free);
  if (!f->u.blk.free) list_push(&me->d.avail[cls], f);
  f->u.blk.free = p;
  f->used--;
  me->d.frees[cls]++;
  return true;
}

/* The secure build checks, marks and quarantines another heap's object like its own (the
 * freeing thread's ring); vam_release_foreign then keeps it or sends it home. */
static bool design_keep_foreign(heap_t *me, desc_t *d, void *p, const char *call) {
  if (!cfg_secure) return vam_foreign_keep(me, d, p, call);
  uint32_t off = (uint32_t)((char *)p - desc_start(d));
  if (me == &heap_empty || d->kind != KIND_VAM_BLOCK || !slot_multiple(off, d->aux) || off == 0) return false;
  vam_secure_retire(me, d, p, call);
  vam_quarantine_push(me, p, d);
  return true;
}

/* Secure: another heap's object left h's quarantine (its poison verified): into h's
 * foreign-object cache, or home. */
static NOINLINE void vam_release_foreign(heap_t *h, desc_t *b, void *p) {
  uintptr_t *w = p;
  w[0] = w[1] = 0;   /* no longer marked */
  if (!vam_foreign_keep(h, b, p, "free()")) heap_free_remote(segment_of(p)->heap, b, p, "free()");
}

/* Sends every cached foreign object home (thread exit, purge). */
static void vam_foreign_flush(heap_t *h) {
  if (!cfg_foreign_cache) return;
  for (unsigned c = 0; c < vam_nclasses; c++) {
    desc_t *f = &h->d.foreign[c];
    void *p = f->u.blk.free;
    if (!p) continue;
    list_unlink(&h->d.avail[c], f);
    f->u.blk.free = NULL;
    while (p) {
      void *next = vam_link_load(h, p);
      ((uintptr_t *)p)[1] = 0;    /* not free as far as the owner's check is concerned */
      f->used++;
      h->d.allocs[c]++;           /* balances the free its owner will count */
      h->d.foreign_flushed++;
      segment_t *s = segment_of(p);
      heap_free_remote(s->heap, desc_head(s, p), p, "free()");
      p = next;
    }
  }
}

static void design_check_remote(desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) {
    long index = vam_slot_index(d, p, call);
    if (cfg_block_bitmap) {
      uint64_t word = __atomic_load_n((uint64_t *)d->u.blk.free + (index >> 6), __ATOMIC_RELAXED);
      if (word & (1ull << (index & 63))) locus_fatal(call, "double free", p);
    } else if (d->marker_off) {
      char *slot = cfg_small_headers ? (char *)p - d->aux8 : p;
      uintptr_t *mark = (uintptr_t *)(slot + d->marker_off);
      if (cfg_secure && *(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
      marker_free_remote(mark, free_marker(slot), p, call);
    }
  } else if (d->kind == KIND_VAM_LARGE) {
    bool alias;
    chunk_of(d, p, call, &alias);
    if (cfg_secure && *(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
  } else {
    locus_fatal(call, "invalid pointer", p);
  }
}

static size_t design_usable(desc_t *d, const void *p, const char *call) {
  if (d->kind == KIND_VAM_BLOCK) {
    vam_slot_index(d, p, call);
    if (cfg_secure) vam_quarantine_check(p, call);
    return vam_usable(d);
  }
  if (d->kind == KIND_VAM_LARGE) {
    bool alias;
    chunk_t *c = chunk_of(d, p, call, &alias);
    if (cfg_secure) vam_quarantine_check(p, call);
    return (size_t)((char *)c + chunk_size(c) - (char *)p);
  }
  locus_fatal(call, "invalid pointer", p);
}

/* Resizes p in place if the design can; the caller owns h. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size) {
  if (d->kind == KIND_VAM_BLOCK) {
    size_t usable = vam_usable(d);
    return size <= usable && size > usable / 2;
  }
  if (d->kind == KIND_VAM_LARGE) return vam_resize_large(h, d, p, size);
  return false;
}

static void design_release_spares(heap_t *h) {
  vam_quarantine_flush(h);
  vam_foreign_flush(h);
  for (unsigned c = 0; c < vam_nclasses; c++) {
    desc_t *b = h->d.spare[c];
    h->d.spare[c] = NULL;
    if (b && b->used == 0) vam_block_drop(h, b, false);
  }
  for (unsigned k = 0; k < 2; k++)
    while (h->d.ncache[k]) vam_block_release(h, h->d.cache[k][--h->d.ncache[k]]);
  desc_t *r = h->d.spare_area;
  if (r) {
    chunk_t *c = (chunk_t *)desc_start(r);
    h->d.spare_area = NULL;
    if (!(c->size & CHUNK_INUSE) && chunk_next(c)->size == CHUNK_INUSE) {
      chunk_bin_remove(h, c);
      block_release(h, r);
    }
  }
}

/* Adds the block objects' calls and bytes to the statistics (the rest is in h->stats). */
static void design_stats(heap_t *h, locus_stats_t *st) {
  for (unsigned c = 0; c < vam_nclasses; c++) {
    uint64_t in = __atomic_load_n(&h->d.allocs[c], __ATOMIC_RELAXED);
    uint64_t out = __atomic_load_n(&h->d.frees[c], __ATOMIC_RELAXED);
    st->malloc_calls += in;
    st->free_calls += out;
    st->bytes_allocated += (in - out) * vam_slot_size(c);
  }
  for (unsigned i = 0; cfg_secure && i < VAM_QUARANTINE; i++)   /* freed, counted on release */
    st->free_calls += __atomic_load_n(&vam_quarantine_ring(h)[i].p, __ATOMIC_RELAXED) != NULL;
  uint64_t flushed = __atomic_load_n(&h->d.foreign_flushed, __ATOMIC_RELAXED);
  st->malloc_calls -= flushed;
  st->free_calls -= flushed;
}

/* Purge: spares go back, and the pages inside every free large chunk are discarded. */
static void design_purge(heap_t *h) {
  design_release_spares(h);
  for (unsigned b = 0; b < LARGE_BINS; b++)
    for (chunk_t *c = h->d.bins[b]; c; c = c->next) chunk_discard(c);
}

/* Checks one block's counts and free list. */
static size_t vam_check_block(heap_t *h, desc_t *b) {
  size_t bad = 0;
#define CHECK(c) do { if (!(c)) { bad++; if (cfg_debug) locus_assert_fail(#c, __FILE__, __LINE__); } } while (0)
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
  }
  CHECK(b->used + nfree + unbumped + (cfg_secure ? 1 : 0) == cap);   /* secure: slot 0 unused */
  if (vam_block_full(b)) CHECK(nfree == 0 && unbumped == 0);
  return bad;
#undef CHECK
}

static size_t design_check(heap_t *h) {
  size_t bad = 0;
#define CHECK(c) do { if (!(c)) { bad++; if (cfg_debug) locus_assert_fail(#c, __FILE__, __LINE__); } } while (0)
  size_t listed = 0, blocks = 0;
  for (unsigned c = 0; c < vam_nclasses; c++) {
    desc_t *spare = h->d.spare[c];
    bool spare_listed = !spare || spare->used > 0;   /* refilled since: may be full */
    for (desc_t *b = h->d.avail[c]; b != &h->d.none; b = b->next) {
      if (b == &h->d.foreign[c]) {   /* the foreign-object cache: a list of 1..MAX objects */
        size_t n = 0;
        for (void *f = b->u.blk.free; f && n <= VAM_FOREIGN_MAX; f = vam_link_load(h, f)) {
          segment_t *s = segment_of(f);
          CHECK(s->heap != h && desc_head(s, f)->kind == KIND_VAM_BLOCK && desc_head(s, f)->cls == c);
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
  }
  for (unsigned c = 0; c < vam_classes.count; c++) {
    desc_t *b = h->d.hint_block[c];
    if (!b) continue;
    CHECK(b->kind == KIND_VAM_BLOCK && vam_base_class(b->cls) == c && vam_has_room(b) && !vam_block_full(b));
    listed++;   /* on no list: counted with the blocks found in the segments */
  }
  for (unsigned k = 0; k < 2; k++) {
    for (unsigned i = 0; i < h->d.ncache[k]; i++) {
      desc_t *b = h->d.cache[k][i];
      CHECK(b->kind == KIND_VAM_BLOCK && b->used == 0 && vam_cache_index(b->npages) == k);
      listed++;   /* counted with the blocks found in the segments */
    }
  }
  for (segment_t *s = h->pages.segments; s; s = s->next) {
    for (size_t i = s->first; i < s->npages; i += s->desc[i].npages ? s->desc[i].npages : 1) {
      desc_t *r = &s->desc[i];
      if (r->kind == KIND_VAM_BLOCK) {
        blocks++;
        bad += vam_check_block(h, r);
        if (vam_block_full(r)) listed++;   /* on the implicit full list */
      }
      if (r->kind != KIND_VAM_LARGE) continue;
      char *start = desc_start(r), *end = start + desc_bytes(r) - CHUNK_HEADER;
      uint32_t prev = 0;
      bool prev_free = false;
      chunk_t *c = (chunk_t *)start;
      for (; (char *)c < end; c = chunk_next(c)) {
        CHECK(chunk_valid(c) && c->prev_size == prev && chunk_size(c) >= LARGE_MIN_CHUNK);
        if (!chunk_valid(c) || chunk_size(c) == 0) break;
        bool is_free = !(c->size & CHUNK_INUSE);
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
  CHECK(listed == blocks);
  return bad;
#undef CHECK
}
