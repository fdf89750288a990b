/* heap.h — thread heaps: the registry of every heap, adoption of the heaps of exited threads,
 * the remote stack other threads free onto, and the sweep of heaps nobody owns. The heap type
 * and the ownership rules are in state.h; giving a thread a heap (which may start the library)
 * is init.h's. */
#ifndef LOCUS_HEAP_H
#define LOCUS_HEAP_H

static heap_t *heap_create(void) {
  heap_t *h = os_map(align_up(sizeof(heap_t), os_page_size));
  if (!h && memory_refused(NULL)) h = os_map(align_up(sizeof(heap_t), os_page_size));
  if (!h) return NULL;
  design_heap_init(h);
  lock_acquire(&registry_lock);
  h->next_all = registry;
  __atomic_store_n(&registry, h, __ATOMIC_RELEASE);   /* published whole: readers take no lock */
  lock_release(&registry_lock);
  atomic_fetch_add_explicit(&heaps_created, 1, memory_order_relaxed);
  return h;
}

/* Heap h (abandoned when looked at), locked by the caller: whether it was still abandoned
 * and is now the caller's. Releases the lock. */
static bool heap_take_locked(heap_t *h) {
  bool found = atomic_load(&h->state) == HEAP_ABANDONED;
  if (found) {
    atomic_store(&h->state, HEAP_OWNED);
    atomic_fetch_sub_explicit(&heaps_waiting, 1, memory_order_relaxed);
  }
  lock_release(&h->lock);
  return found;
}

/* Takes an abandoned heap, if any, for the calling thread (which holds no lock). No global
 * lock: the registry only grows, and the heap's own lock decides between threads that want
 * the same heap. Where every abandoned heap is locked by someone else, the thread waits for
 * one rather than make a heap: a fork holds every heap's lock while it runs, and a program
 * whose threads come and go while another thread forks otherwise got a new heap for nearly
 * every thread (1,500 heaps after 800 forks, each fork slower than the last, since it locks
 * them all). */
static heap_t *heap_adopt(void) {
  while (atomic_load_explicit(&heaps_waiting, memory_order_relaxed)) {
    heap_t *busy = NULL;
    for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all) {
      if (atomic_load(&h->state) != HEAP_ABANDONED) continue;
      if (!lock_try(&h->lock)) {
        if (!busy && !lock_held_by_self(&h->lock)) busy = h;
        continue;
      }
      if (heap_take_locked(h)) return h;
    }
    if (!busy) return NULL;
    lock_acquire(&busy->lock);   /* (another thread may take it first: then look again) */
    if (heap_take_locked(busy)) return busy;
  }
  return NULL;
}


/* Frees p into h, which the caller owns or has locked. */
static void heap_free_local(heap_t *h, void *p, const char *call) {
  segment_t *s = segment_of(p);
  design_collected(desc_of_page(s, p), p);
  design_free(h, s, p, call);
}

/* Frees everything other threads pushed onto h->remote. Caller owns h (or holds its lock). */
static void heap_collect(heap_t *h) {
  if (!atomic_load_explicit(&h->remote, memory_order_relaxed)) return;
  void *list = atomic_exchange_explicit(&h->remote, NULL, memory_order_acquire);
  while (list) {
    void *next = *(void **)list;
    h->stats.remote_frees++;
    heap_free_local(h, list, "free()");
    list = next;
  }
}


/* The discard policy for a heap nobody owns (caller holds its lock): the free pages of a
 * thread that just exited are what the next thread will most likely ask for, so they stay
 * until they have been idle for the decay time like any other free pages (the sweep below
 * gives them back then). Discarding them all at exit, as the immediate policy still does,
 * made a thread-churn workload refault every page each new thread touched (80x glibc's page
 * faults, most of the run in system time). */
static void heap_trim_abandoned(heap_t *h, uint64_t now) {
  lock_acquire(&h->pages_lock);
  if (opt.discard == DISCARD_IMMEDIATE) pages_purge_locked(h, UINT64_MAX, 0);
  else if (opt.discard == DISCARD_DELAYED) pages_decay(h, now);
  lock_release(&h->pages_lock);
}

/* Releases the lock of an abandoned heap. A thread that pushed onto h->remote while we held
 * the lock gave up on it (lock_try) and left the objects to us, so look again after the
 * release: lock_release's exchange orders it before the load of remote, and the pusher's
 * compare-and-swap comes before its lock_try, so one of the two sees the other. */
static void heap_unlock_abandoned(heap_t *h) {
  for (;;) {
    lock_release(&h->lock);
    if (!atomic_load(&h->remote) || atomic_load(&h->state) != HEAP_ABANDONED || !lock_try(&h->lock)) return;
    if (atomic_load(&h->state) == HEAP_ABANDONED) {
      heap_collect(h);
      heap_trim_abandoned(h, now_ms());
    }
  }
}

/* Gives back the idle free pages of heaps nobody owns (abandoned heaps, the huge-run heap),
 * at most once per decay period (called from the discard policy, so it runs as long as the
 * program frees pages at all). */
static void heap_sweep_abandoned(uint64_t now) {
  uint64_t last = atomic_load_explicit(&abandoned_swept_ms, memory_order_relaxed);
  if (now - last < opt.decay_ms || !atomic_compare_exchange_strong(&abandoned_swept_ms, &last, now))
    return;
  bool waiting = atomic_load_explicit(&heaps_waiting, memory_order_relaxed) != 0;
  for (heap_t *h = waiting ? __atomic_load_n(&registry, __ATOMIC_ACQUIRE) : NULL; h; h = h->next_all) {
    if (atomic_load(&h->state) != HEAP_ABANDONED || !lock_try(&h->lock)) continue;
    if (atomic_load(&h->state) == HEAP_ABANDONED) {
      heap_collect(h);
      heap_trim_abandoned(h, now);
    }
    heap_unlock_abandoned(h);
  }
  /* The shared huge-run heap decays here too: nobody frees into it once big objects stop. */
  if (huge_heap && lock_try(&huge_heap->pages_lock)) {
    pages_policy_locked(huge_heap, now);
    lock_release(&huge_heap->pages_lock);
  }
}

/* Pushes p, a checked object of h another thread frees, onto h's remote stack, never waiting
 * for a lock. If the owner has exited, the object is freed into its heap now by whoever gets
 * the heap's lock (we, or the thread holding it, see heap_unlock_abandoned). */
static ALWAYS_INLINE void heap_push_remote(heap_t *h, void *p, const char *call) {
  void *head = atomic_load_explicit(&h->remote, memory_order_relaxed);
  do {
    if (unlikely(head == p)) locus_fatal(call, "double free", p);
    *(void **)p = head;
  } while (!atomic_compare_exchange_weak(&h->remote, &head, p));
  if (atomic_load(&h->state) == HEAP_ABANDONED && lock_try(&h->lock)) {
    if (atomic_load(&h->state) == HEAP_ABANDONED) heap_collect(h);   /* frees apply the policy */
    heap_unlock_abandoned(h);
  }
}

static size_t heap_check(heap_t *h) {
  lock_acquire(&h->pages_lock);
  size_t bad = pages_check(h) + design_check(h);
  lock_release(&h->pages_lock);
  return bad;
}

static void heap_check_now(heap_t *h) {
  if (h != &heap_empty) heap_check(h);
}

/* Debug builds check the whole heap every so often on slow paths. */
static inline void heap_debug_tick(heap_t *h) {
  if (!cfg_debug) return;
  uint64_t every = opt.check_every ? opt.check_every : 64;
  if (++h->slow_events % every == 0) heap_check_now(h);
}

#endif
