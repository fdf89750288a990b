/* vam_tcache.c.h — the thread cache (vam.h): the objects this heap freed last, per class, which
 * malloc hands out first. Taking one and putting one back touch only the heap's own bins; a
 * free that finds its class's bin full goes to its block as without the cache, unless the bin
 * grows (bursts that drain and overflow it), and the blocks get the cached objects back at
 * thread exit, at purge, and for a hinted allocation. */

/* The objects of class cls a heap's thread cache may hold: only classes whose slots the free
 * fast path serves (a marker word: 16 B and more), VAM_TCACHE_BYTES of them, at least 2; none
 * under the immediate discard policy, LOCUS_TCACHE=0 or the call-site statistics (malloc
 * takes from the cache before it tests for those: design_alloc_cached). */
static unsigned vam_tcache_cap(unsigned cls) {
  size_t slot = vam_slot_size(cls);
  if (!cfg_tcache || !opt.tcache || opt.discard == DISCARD_IMMEDIATE || opt.sites || !vam_class_recip[cls]) return 0;
  size_t cap = VAM_TCACHE_BYTES / slot;
  return (unsigned)(cap < 2 ? 2 : cap > VAM_TCACHE_SLOTS ? VAM_TCACHE_SLOTS : cap);
}

/* Each class's first cap, vam_tcache_cap (its bins go back to it), and the bytes a heap's bins
 * may grow by (vam.h; 0 without a cache). */
static int32_t vam_tcache_base[VAM_MAX_CLASSES];
static int32_t vam_tcache_budget;

/* The most chunk bytes a heap's large side holds (vam.h; 0: none), from the options. */
static uint32_t vam_lcache_cap;

/* The class of the largest bound at or below usable size u (at least 1 KiB): bounds are
 * 2^k * (4 + j) / 4, so that the power-of-two sizes programs favour are bounds themselves. */
static inline unsigned vam_lclass_of(size_t u) {
  unsigned k = 63u - (unsigned)__builtin_clzll(u);
  return (k - 10) * 4 + (unsigned)((u >> (k - 2)) & 3);
}
_Static_assert(VAM_LARGE_MAX == 32768 && VAM_LCLASSES == 21, "classes 1 KiB .. 32 KiB, four per doubling");
/* Every bound is a multiple of 256, so the floor depends on u / 256 only: a table of those
 * (0 below 1 KiB). (Not a sizeclass.h table: those map a size up, to the class that holds
 * it, 8 bytes a step; this maps a chunk's usable size down, to a class it can serve.) A
 * cached chunk's usable size is below 32 KiB + 256 (a split leaves at most 63 bytes on it). */
#define VAM_LCLASS_STEPS (VAM_LARGE_MAX / 256 + 1)
static uint8_t vam_lclass_table[VAM_LCLASS_STEPS];
static void vam_lclass_init(void) {
  for (unsigned i = 0; i < VAM_LCLASS_STEPS; i++) vam_lclass_table[i] = (uint8_t)(i < 4 ? 0 : vam_lclass_of((size_t)i << 8));
}
static inline unsigned vam_lclass_floor(size_t u) {
  ASSERT(u >> 8 < VAM_LCLASS_STEPS);
  return vam_lclass_table[u >> 8];
}

static void vam_tcache_global_init(void) {
  vam_lcache_cap = opt.tcache && opt.discard != DISCARD_IMMEDIATE ? VAM_LCACHE_BYTES : 0;
  vam_lclass_init();
  for (unsigned c = 0; c < vam_nclasses; c++) vam_tcache_base[c] = (int32_t)vam_tcache_cap(c);
  vam_tcache_budget = !vam_lcache_cap ? 0 : opt.tcache_grow < (1u << 30) ? (int32_t)opt.tcache_grow : 1 << 30;
}

static void vam_tcache_init(heap_t *h) {
  for (size_t size = 0; size <= VAM_TCACHE_SIZED; size += 8)
    h->d.tbin_of_size[sizeclass_lookup_index(size)] = &h->d.tbin[sizeclass_of(&vam_classes, size)];
  for (unsigned c = 0; c <= VAM_AREA_CLS; c++) h->d.tbin[c].recip = vam_class_recip[c];
  for (unsigned c = 0; c < vam_nclasses; c++) {
    vam_tbin_t *t = &h->d.tbin[c];
    t->head = NULL;
    t->room = t->cap = vam_tcache_base[c];
    t->missed = 0;
  }
  h->d.tcache_spare = vam_tcache_budget;
  h->d.lcache_room = (int32_t)vam_lcache_cap;   /* (the large side's) */
}

/* The objects bin t holds. */
static inline unsigned vam_tcache_count(const vam_tbin_t *t) { return (unsigned)(t->cap - t->room); }

/* The objects put into bin t and not sent back to their blocks since (statistics, possibly
 * read by another thread: then a close estimate). */
static uint64_t vam_tcache_frees(const vam_tbin_t *t) {
  int32_t room = __atomic_load_n(&t->room, __ATOMIC_RELAXED);
  return __atomic_load_n(&t->allocs, __ATOMIC_RELAXED) + (uint32_t)(t->cap - room);
}

/* The link in a cached object's first word: the next object under the thread cache's secret
 * key (vam_tcache_key), so that a write after free cannot point it anywhere useful without
 * that key. (Not the blocks' safe-linking, which mixes in the address too: two instructions
 * more on malloc's hit path.) */
static ALWAYS_INLINE uintptr_t vam_tcache_link(const void *next) { return (uintptr_t)next ^ vam_tcache_key; }
/* The object after cached object p in its bin (NULL after the last). */
static ALWAYS_INLINE void *vam_tcache_next(const void *p) { return (void *)(*(const uintptr_t *)p ^ vam_tcache_key); }

/* Cached object p of class cls handed out of bin t: its marker cleared, counted. */
static ALWAYS_INLINE void *vam_tcache_hand_out(vam_tbin_t *t, uintptr_t *p, unsigned cls, bool zero) {
  p[1] = 0;
  t->allocs++;
  if (zero) return memset(p, 0, vam_slot_size(cls));   /* (a tail call: memset returns p) */
  return p;
}

/* The most recently cached object of bin t, of class cls (read only to zero it), or NULL. */
static ALWAYS_INLINE void *vam_tcache_pop(vam_tbin_t *t, unsigned cls, bool zero) {
  uintptr_t *p = t->head;
  if (!p) {
    t->missed++;   /* (the bin may grow by as much: vam_tcache_grow) */
    return NULL;
  }
  void *next = vam_tcache_next(p);
  /* The next malloc of the class reads next's link: a list makes a burst of mallocs a chain of
   * loads, each waiting on the line of the object before when those lines went cold (a stack
   * of pointers did not). Fetching it now, for writing (the program writes a new object), takes
   * the wait off: bench/batches 923 -> 890 ms (the stacks: 880). */
  __builtin_prefetch(next, 1);
  t->head = next;
  t->room++;
  return vam_tcache_hand_out(t, p, cls, zero);
}

/* The same for the class of size (at most VAM_TCACHE_SIZED: its bin in one load). */
static ALWAYS_INLINE void *vam_tcache_take(heap_t *h, size_t size, bool zero) {
  return vam_tcache_pop(h->d.tbin_of_size[sizeclass_lookup_index(size)], zero ? sizeclass_of(&vam_classes, size) : 0, zero);
}

/* Caches slot p (checked: handed out, not free) in its class's bin t, marked free; false if
 * the bin is full. */
static ALWAYS_INLINE bool vam_tcache_put(vam_tbin_t *t, void *p, uintptr_t marker) {
  /* One subtraction in memory and a branch on its sign (a comparison first and the
   * subtraction after it: 4% slower on a loop replacing 16- and 32-byte objects). heap_empty's
   * bins have room 0 and no recip, so that only a free by a thread without a heap whose
   * pointer passes the slot test with recip 0 (rarely) gets here with one of them: it writes
   * -1 and 0 there, racing only with others doing the same, and no count of them is ever
   * positive, so none of them is pushed onto. */
  if (unlikely(--t->room < 0)) {
    t->room = 0;
    return false;
  }
  void *head = t->head;
  uintptr_t *w = p;
  w[1] = marker;
  w[0] = vam_tcache_link(head);
  t->head = p;
  return true;
}

static ALWAYS_INLINE void vam_slot_push(heap_t *h, desc_t *b, void *p, uintptr_t marker);
static void vam_foreign_keep_slow(heap_t *me, heap_t *h, desc_t *b, void *p, const char *call);

/* The n cached objects from p on (the newest first) back to their blocks, the oldest first
 * (so the newest heads its block's list, as if freed there); another heap's object is freed
 * again the foreign way (which marks and counts it). They are out of their bin already: a
 * block that empties runs the debug checks. */
static void vam_tcache_send_back(heap_t *h, void *p, unsigned n) {
  void *oldest = NULL;   /* reversed in place: their links are theirs until they go */
  for (unsigned i = 0; i < n; i++) {
    void *next = vam_tcache_next(p);
    *(uintptr_t *)p = vam_tcache_link(oldest);
    oldest = p;
    p = next;
  }
  for (p = oldest; p;) {
    void *next = vam_tcache_next(p);
    segment_t *s = segment_of(p);
    desc_t *page = desc_of_page(s, p), *b = page - page->back;
    if (likely(s->heap == h)) {
      vam_slot_push(h, b, p, free_marker(p));   /* (counted freed now) */
    } else {   /* (not counted freed any more: the foreign way counts it) */
      ((uintptr_t *)p)[1] = 0;
      vam_foreign_keep_slow(h, s->heap, b, p, "free()");
    }
    p = next;
  }
}

/* Every cached object of class cls back to its block. */
static void vam_tcache_return(heap_t *h, unsigned cls) {
  vam_tbin_t *t = &h->d.tbin[cls];
  unsigned n = vam_tcache_count(t);
  if (!n) return;
  void *p = t->head;
  t->head = NULL;
  t->room = t->cap;
  vam_tcache_send_back(h, p, n);
}

/* The bin of class cls back to its first cap, the objects beyond it (the oldest) to their
 * blocks, its growth back to the heap's budget (nothing to do if it has not grown). */
static void vam_tcache_shrink(heap_t *h, unsigned cls) {
  vam_tbin_t *t = &h->d.tbin[cls];
  int32_t base = vam_tcache_base[cls];
  if (t->cap == base || !t->cap) return;   /* (cap 0: off, reap mode: it holds nothing) */
  unsigned n = vam_tcache_count(t), keep = n < (unsigned)base ? n : (unsigned)base;
  h->d.tcache_spare += (t->cap - base) * (int32_t)vam_slot_size(cls);
  t->cap = base;
  t->room = base - (int32_t)keep;
  if (n == keep) return;
  uintptr_t *last = NULL, *p = t->head;
  for (unsigned i = 0; i < keep; i++) last = p, p = vam_tcache_next(p);
  if (last) last[0] = vam_tcache_link(NULL); else t->head = NULL;
  vam_tcache_send_back(h, p, n - keep);
}

/* Every grown bin back to its first cap (vam_tcache_shrink), when the heap took pages that
 * were not resident for a new block or area (its footprint grows): grown bins then hold their
 * objects only while the program's footprint stays put (a parser's batches, a server's
 * requests), and give them back to their blocks, where this heap's mallocs of their class
 * find them, when it grows. Without it they held them through phases that allocate other
 * sizes: alloc_heavy.py's peak RSS +2.6%. Pages reused from the heap's free runs do not
 * trim (bench/batches takes some for every burst of its biggest size). */
static void vam_tcache_trim(heap_t *h) {
  if (!cfg_tcache || h->d.tcache_spare == vam_tcache_budget) return;
  for (unsigned c = 0; c < vam_nclasses; c++) vam_tcache_shrink(h, c);
}

/* Whether class cls's blocks have fewer than pct% of their slots in use (the objects in its
 * thread-cache bin counted in use: the class takes them next), with at least VAM_REAP_BLOCKS
 * of them: reap mode's test (vam.h). The objects in use are the blocks' allocations less
 * their frees, which other threads' frees can make approximate; the test only picks a policy. */
static bool vam_tcache_sparse(heap_t *h, unsigned cls, unsigned pct) {
  uint32_t blocks = h->d.blocks[cls];
  if (blocks < VAM_REAP_BLOCKS) return false;
  uint64_t used = h->d.allocs[cls] - h->d.frees[cls];
  /* (a block's slots, its bytes / the slot size, from the class's recip with no division: a
   * class with a bin has one, exact for offsets up to a block's size, vam_recip) */
  uint64_t slots = ((uint64_t)vam_block_pages(cls) << os_page_shift) * vam_class_recip[cls] >> RECIP_SHIFT;
  return used * 100 < blocks * slots * pct;
}

/* Reap mode (vam.h): bin t of class cls, at its first cap (a grown bin serves bursts), goes off
 * (its objects back to their blocks) while the class's blocks are sparse. */
static void vam_tcache_reap(heap_t *h, vam_tbin_t *t, unsigned cls) {
  if (t->cap != vam_tcache_base[cls] || !vam_tcache_sparse(h, cls, VAM_REAP_OFF_PCT)) return;
  vam_tcache_return(h, cls);
  t->cap = t->room = 0;
}

/* A free found bin t full, and mallocs found it empty since the last test (t->missed): if
 * they were a cycle of bursts (vam.h), it grows by the objects those mallocs took from the
 * blocks, at most doubling, within VAM_TCACHE_GROWN_SLOTS and the heap's budget, which other
 * classes' grown bins give back in turn when it runs short; if not, it goes off while its
 * class's blocks are sparse, and comes back once they are not (reap mode, vam.h). Whether it
 * has room now. Only the heap's own thread (its bins). */
static NOINLINE bool vam_tcache_grow(heap_t *h, vam_tbin_t *t) {
  unsigned cls = (unsigned)(t - h->d.tbin);
  /* (a bin that is off misses every malloc: it tests again after VAM_REAP_RETEST of them, not
   * on every free, which made turnover's allocator 1.4% longer) */
  if (!t->cap && t->missed < VAM_REAP_RETEST) return false;
  uint32_t missed = t->missed, hits = (uint32_t)t->allocs - h->d.tcache_hits_at[cls];
  int32_t want = (int32_t)(missed < (uint32_t)t->cap ? missed : (uint32_t)t->cap);   /* (at most double) */
  t->missed = 0;
  /* (no cache; heap_empty's one bin, which a thread without a heap may reach, stays empty:
   * all its sizes map to the 8-byte class, which has none, but it is tested for itself) */
  if (cls >= vam_nclasses || !vam_tcache_base[cls] || h == &heap_empty) return false;
  if (!t->cap) {   /* off: back on once the class's blocks are dense again */
    if (vam_tcache_sparse(h, cls, VAM_REAP_ON_PCT)) return false;
    t->cap = t->room = vam_tcache_base[cls];
    return true;
  }
  /* (classes the byte bound caps, over 585 B, do not grow: 4 KiB objects took a few at a
   * time from the budget in localarrays' random replacement, +5% peak RSS) */
  bool may_grow = vam_tcache_base[cls] == VAM_TCACHE_SLOTS;
  if (may_grow) h->d.tcache_hits_at[cls] = (uint32_t)t->allocs;
  if (!may_grow || hits < (uint32_t)t->cap || missed < hits / 4) {   /* not a cycle of bursts (vam.h) */
    vam_tcache_reap(h, t, cls);
    return false;
  }
  int32_t slot = (int32_t)vam_slot_size(cls);
  if (want > VAM_TCACHE_GROWN_SLOTS - t->cap) want = VAM_TCACHE_GROWN_SLOTS - t->cap;
  for (unsigned tries = 0; h->d.tcache_spare < want * slot && tries < vam_nclasses; tries++) {
    unsigned v = h->d.tcache_victim = (h->d.tcache_victim + 1) % vam_nclasses;
    if (v != cls) vam_tcache_shrink(h, v);
  }
  if (want > h->d.tcache_spare / slot) want = h->d.tcache_spare / slot;
  if (want <= 0) return false;
  h->d.tcache_spare -= want * slot;
  t->cap += want;
  t->room += want;
  return true;
}

/* Every cached object back to its block, every bin back to its first cap (thread exit,
 * purge). */
static void vam_tcache_flush(heap_t *h) {
  if (!cfg_tcache) return;
  for (unsigned c = 0; c < vam_nclasses; c++) {
    vam_tcache_return(h, c);
    vam_tcache_shrink(h, c);
    h->d.tbin[c].missed = 0;
  }
}

/* Allocation near a hint (vam_hints.c.h): a cached object of class cls on the hint's page if
 * there is one (taken out of the list's order); else NULL, and the class's cached objects go
 * back to their blocks, so that the hint's block and its neighbours see their freed slots. */
static void *vam_tcache_take_near(heap_t *h, unsigned cls, const void *hint, bool zero) {
  vam_tbin_t *t = &h->d.tbin[cls];
  unsigned n = vam_tcache_count(t);
  uintptr_t *prev = NULL;
  for (uintptr_t *p = t->head; n--; prev = p, p = vam_tcache_next(p)) {
    if (((uintptr_t)p ^ (uintptr_t)hint) >> os_page_shift) continue;
    void *next = vam_tcache_next(p);
    if (prev) prev[0] = vam_tcache_link(next); else t->head = next;
    t->room++;
    return vam_tcache_hand_out(t, p, cls, zero);
  }
  vam_tcache_return(h, cls);
  return NULL;
}
