/* vam_foreign.c.h — objects of other heaps: the foreign-object cache of each heap (vam.h), and
 * the transfer cache all heaps share, where a heap whose foreign-object cache of a class is
 * full leaves the whole list as one batch, and any heap whose class has no available block
 * takes a batch before it makes a new block.
 *
 * Why a transfer cache (tcmalloc's design), and not per-block lists of remote frees
 * (mimalloc's) or batched messages to the owner (snmalloc's): the foreign-object cache already
 * keeps what a thread frees of other heaps for its own next mallocs, linked and marked, with
 * its count; a full one is a ready batch. Where the freeing thread does not allocate that
 * class (a consumer, a thread that only frees), the batch goes to whoever allocates it next:
 * usually the producer, which gets its own objects back for one exchange, without the owner's
 * per-object collect (a lookup and a local free each) that the remote stack costs. And an
 * object freed into a heap whose thread is gone is not stranded there: any heap reuses it.
 * Per-block remote lists would need the owner to find the blocks that have them (a full block
 * is on no list) and a word per block written by other threads.
 *
 * Invariants: every object in a batch belongs to a block of the batch's class of some heap,
 * is counted in use there, holds the free marker (a second free is caught) and a link
 * encoded without a heap key; a batch is a NULL-terminated list of VAM_FOREIGN_MAX objects.
 * The secure build has keyed links, per heap: it has no transfer cache (its batches could not
 * change heaps). */

static const bool cfg_foreign_cache = !LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP;
static const bool cfg_transfer = !LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP && !MITIGATION(KEYED_LINKS);

/* The transfer cache of one class: a stack of batches under a lock (taken once per batch, i.e.
 * per VAM_FOREIGN_MAX objects), at most VAM_TRANSFER_BYTES of objects per class (64 batches
 * for the smallest classes, 4 for the 1 KiB class, 1 for the 4 KiB class: 4 MiB for all
 * classes at worst). Batches nobody took for a whole decay period go home
 * (vam_transfer_sweep). */
#define VAM_TRANSFER_BYTES (64u << 10)
#define VAM_TRANSFER_MAX 64
typedef struct vam_transfer {
  lock_t lock;
  unsigned n;          /* batches held: batch[0 .. n-1], oldest first */
  unsigned low;        /* the fewest held since the last sweep: idle for a whole period */
  void *batch[VAM_TRANSFER_MAX];
} vam_transfer_t;
static vam_transfer_t vam_transfer[VAM_MAX_CLASSES];
static _Atomic uint64_t vam_transfer_swept_ms;
static bool vam_transfer_used;   /* a batch was ever given: until then the sweep reads no clock */

/* Batches class cls may hold. */
static inline unsigned vam_transfer_cap(unsigned cls) {
  size_t cap = VAM_TRANSFER_BYTES / (VAM_FOREIGN_MAX * vam_classes.size[cls]);
  return (unsigned)(cap < 1 ? 1 : cap > VAM_TRANSFER_MAX ? VAM_TRANSFER_MAX : cap);
}

static void design_fork_child(void) {
  for (unsigned c = 0; c < VAM_MAX_CLASSES; c++) lock_reset(&vam_transfer[c].lock);
}

/* Leaves a full list (batch) of class cls on the stack; false if it is full. (The store of
 * the batch comes before the count's: a fork in between leaves the stack as it was.) */
static bool vam_transfer_give(unsigned cls, void *batch) {
  vam_transfer_t *t = &vam_transfer[cls];
  unsigned cap = vam_transfer_cap(cls);
  if (__atomic_load_n(&t->n, __ATOMIC_RELAXED) >= cap) return false;
  lock_acquire(&t->lock);
  bool room = t->n < cap;
  if (room) {
    t->batch[t->n] = batch;
    __atomic_store_n(&t->n, t->n + 1, __ATOMIC_RELEASE);
  }
  lock_release(&t->lock);
  if (room && !__atomic_load_n(&vam_transfer_used, __ATOMIC_RELAXED)) __atomic_store_n(&vam_transfer_used, true, __ATOMIC_RELAXED);
  return room;
}

/* The newest batch of class cls, taken off the stack, or NULL. */
static void *vam_transfer_take(unsigned cls) {
  vam_transfer_t *t = &vam_transfer[cls];
  if (!__atomic_load_n(&t->n, __ATOMIC_RELAXED)) return NULL;
  void *batch = NULL;
  lock_acquire(&t->lock);
  if (t->n) {
    batch = t->batch[t->n - 1];
    __atomic_store_n(&t->n, t->n - 1, __ATOMIC_RELEASE);
    if (t->low > t->n) t->low = t->n;
  }
  lock_release(&t->lock);
  return batch;
}

/* Sends a list of foreign objects of class c home, h counting them as its mallocs (each one's
 * owner counts its free). */
static void vam_foreign_send_home(heap_t *h, unsigned c, void *p) {
  while (p) {
    void *next = vam_link_load(h, p);
    ((uintptr_t *)p)[1] = 0;    /* not free as far as the owner's check is concerned */
    h->d.allocs[c]++;           /* balances the free its owner will count */
    h->d.foreign_flushed++;
    segment_t *s = segment_of(p);
    heap_free_remote(s->heap, desc_head(s, p), p, "free()");
    p = next;
  }
}

/* Sends home the batches nobody took for a whole decay period (all of them: `all`), h
 * counting them. Runs at most once a period, from the discard policy's calls
 * (vam_block_empty), and at purge. */
static void vam_transfer_sweep(heap_t *h, bool all) {
  if (!cfg_transfer || h == &heap_empty || !__atomic_load_n(&vam_transfer_used, __ATOMIC_RELAXED)) return;
  if (!all) {
    uint64_t now = now_ms(), last = atomic_load_explicit(&vam_transfer_swept_ms, memory_order_relaxed);
    if (now - last < opt.decay_ms || !atomic_compare_exchange_strong(&vam_transfer_swept_ms, &last, now)) return;
  }
  for (unsigned c = 0; c < vam_nclasses; c++) {
    vam_transfer_t *t = &vam_transfer[c];
    if (!__atomic_load_n(&t->n, __ATOMIC_RELAXED) && !t->low) continue;
    void *idle[VAM_TRANSFER_MAX];
    lock_acquire(&t->lock);
    unsigned k = all ? t->n : t->low;
    memcpy(idle, t->batch, k * sizeof(void *));
    memmove(t->batch, t->batch + k, (t->n - k) * sizeof(void *));
    t->n -= k;
    t->low = t->n;
    lock_release(&t->lock);
    for (unsigned i = 0; i < k; i++) vam_foreign_send_home(h, c, idle[i]);
  }
}

/* A free of p, of class cls, owned by another heap, by the thread owning heap me: kept in
 * me's foreign-object cache after the checks of a local free (not marked free), the cache
 * having room. */
static ALWAYS_INLINE void vam_foreign_push(heap_t *me, unsigned cls, void *p, const char *call) {
  desc_t *f = &me->d.foreign[cls];
  uintptr_t *w = p;
  marker_free_remote(&w[1], free_marker(p), p, call);
  w[0] = vam_link_encode(me, p, f->u.blk.free);
  if (!f->u.blk.free) list_push(&me->d.avail[cls], f);
  f->u.blk.free = p;
  f->used--;
  me->d.frees[cls]++;
}

/* Takes h's foreign-object cache of class c off its list and empties it; returns its list. */
static void *vam_foreign_detach(heap_t *h, unsigned c) {
  desc_t *f = &h->d.foreign[c];
  void *list = f->u.blk.free;
  list_unlink(&h->d.avail[c], f);
  f->u.blk.free = NULL;
  f->used = 0;
  return list;
}

static inline bool vam_foreign_full(heap_t *me, unsigned cls) {
  return (uint16_t)(0 - me->d.foreign[cls].used) >= VAM_FOREIGN_MAX;
}

/* vam_foreign_free's other cases, out of line (its fast path then keeps no registers): a
 * thread that frees before it ever allocated (a consumer) gets its heap now, since without one
 * each of its frees would go home alone (the heap it gets may be p's owner h, adopted: p then
 * goes home, onto its own remote stack); a full cache leaves its list to the transfer cache,
 * if that has room; else p goes home. */
static NOINLINE void vam_foreign_keep_slow(heap_t *me, heap_t *h, desc_t *b, void *p, const char *call) {
  if (me == &heap_empty && (!(me = heap_acquire()) || me == h)) {
    free_foreign_home(h, b, p, call);
    return;
  }
  if (vam_foreign_full(me, b->cls)) {
    if (!cfg_transfer || !vam_transfer_give(b->cls, me->d.foreign[b->cls].u.blk.free)) {
      free_foreign_home(h, b, p, call);
      return;
    }
    vam_foreign_detach(me, b->cls);   /* (the list is the batch's now) */
  }
  vam_foreign_push(me, b->cls, p, call);
}

/* The flagship's design_free_foreign: p lies in segment s of h, in a block or not (the free's
 * slot test, vam_slot_live_remote, passes only for a handed-out slot of a block with marker
 * words). design_free_any has put such a slot into the thread cache already if it had room,
 * so one that reaches here goes to the foreign-object cache. */
static ALWAYS_INLINE void vam_foreign_free(heap_t *me, heap_t *h, segment_t *s, void *p, const char *call) {
  /* (p's page tag alone: the descriptors, one cache line a page and cold when a successor
   * frees what its predecessor allocated, are read only on the slow paths) */
  page_tag_t *g = tag_of_page(s, p);
  unsigned cls = vam_tag_cls(g);
  if (!cfg_foreign_cache || !vam_slot_live_remote(g, p, cls) || cls >= vam_pow2_first)
    free_foreign_home(h, desc_of_page(s, p), p, call);   /* checked and reported there; 8-32 KiB objects: not kept */
  else if (unlikely(me == &heap_empty) || unlikely(vam_foreign_full(me, cls)))
    vam_foreign_keep_slow(me, h, desc_head(s, p), p, call);
  else
    vam_foreign_push(me, cls, p, call);
}

/* Class cls of h has no available block: a batch from the transfer cache becomes h's
 * foreign-object cache of the class (empty, since it is on no list), the head of its list.
 * Returns it, or NULL. */
static desc_t *vam_foreign_refill(heap_t *h, unsigned cls) {
  void *batch;
  if (!cfg_transfer || !(batch = vam_transfer_take(cls))) return NULL;
  desc_t *f = &h->d.foreign[cls];
  ASSERT(!f->u.blk.free && f->used == 0);
  f->u.blk.free = batch;
  f->used = (uint16_t)(0 - VAM_FOREIGN_MAX);
  list_push(&h->d.avail[cls], f);
  return f;
}

/* Sends every object of h's foreign-object cache home (thread exit, purge). */
static void vam_foreign_flush(heap_t *h) {
  if (!cfg_foreign_cache) return;
  for (unsigned c = 0; c < vam_nclasses; c++)
    if (h->d.foreign[c].u.blk.free) vam_foreign_send_home(h, c, vam_foreign_detach(h, c));
}
