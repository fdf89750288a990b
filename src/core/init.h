/* init.h — the library's life cycle: global start-up, giving a thread its heap (adopted or
 * new, which starts the library on the first call), thread exit (the heap given up for
 * adoption), and fork. */
#ifndef LOCUS_INIT_H
#define LOCUS_INIT_H

/* ---- fork -------------------------------------------------------------------------------
 * Before fork every shared lock is taken so the child sees consistent shared structures;
 * a lock this thread already holds (fork from a signal handler that interrupted us inside
 * the allocator) is left alone rather than waited for. The child re-initialises every lock.
 * Page-manager locks are not taken: their owners hold them on allocation slow paths, which
 * may run under a stdio lock that fork takes after these handlers (fflush(NULL) calling
 * malloc), so waiting for them could deadlock. The child instead abandons any page manager
 * another thread was inside at the moment of fork (fork_broken).
 * Heaps of threads that do not exist in the child stay as they are (abandoned in effect:
 * their memory stays reachable through frees, it is not reused). */
static uintptr_t fork_skipped;   /* bit mask: which of the global locks we did not take */

/* The locks are taken in the order a thread may nest them: the registry's, every heap's, then
 * the OS-object cache's. A heap's lock is held around code that frees pages, and a page
 * free runs the OS-object cache's decay, which takes its lock (a thread exiting while
 * another forks: with the cache's lock taken before the heaps', each waited for the other,
 * and the fork hung). Nothing takes a heap's or the registry's lock under the cache's. */
static void fork_prepare(void) {
  fork_skipped = 0;
  if (lock_held_by_self(&registry_lock)) fork_skipped |= 1; else lock_acquire(&registry_lock);
  for (heap_t *h = registry; h; h = h->next_all) {
    h->fork_taken = !lock_held_by_self(&h->lock);
    if (h->fork_taken) lock_acquire(&h->lock);
  }
  if (lock_held_by_self(&huge_cache_lock)) fork_skipped |= 2; else lock_acquire(&huge_cache_lock);
}

static void fork_parent(void) {
  for (heap_t *h = registry; h; h = h->next_all) if (h->fork_taken) lock_release(&h->lock);
  if (!(fork_skipped & 2)) lock_release(&huge_cache_lock);
  if (!(fork_skipped & 1)) lock_release(&registry_lock);
}

static void fork_child(void) {
  for (heap_t *h = registry; h; h = h->next_all) {
    lock_reset(&h->lock);
    if (atomic_load_explicit(&h->pages_lock.state, memory_order_relaxed) != LOCK_FREE &&
        !lock_held_by_self(&h->pages_lock)) {
      /* Another thread was inside this page manager: it may be half-updated. Nobody uses it
       * again: the heap is never adopted, remote frees of its huge runs are pushed (and
       * leak), and if it is this thread's own heap, the thread starts a new one. */
      h->fork_broken = true;
      if (atomic_load(&h->state) == HEAP_ABANDONED) {
        atomic_store(&h->state, HEAP_OWNED);
        atomic_fetch_sub_explicit(&heaps_waiting, 1, memory_order_relaxed);
      }
      if (h == tl_heap) tl_heap = &heap_empty;
    }
    lock_reset(&h->pages_lock);
  }
  lock_reset(&huge_cache_lock);
  lock_reset(&registry_lock);
  lock_reset(&region_quarantine_lock);
  design_fork_child();
}

/* ---- thread exit ------------------------------------------------------------------------- */

/* Thread exit (TLS destructor): the heap gives back its spares and waits for adoption. */
static void heap_abandon(void *arg) {
  heap_t *h = arg;
  if (!h || h == &heap_empty) return;
  tl_heap = &heap_empty;
  lock_acquire(&h->lock);
  atomic_store(&h->state, HEAP_ABANDONED);
  atomic_fetch_add_explicit(&heaps_waiting, 1, memory_order_relaxed);
  heap_collect(h);
  design_release_spares(h);
  heap_release_kept_runs(h);
  heap_trim_abandoned(h, now_ms());
  heap_unlock_abandoned(h);
}

/* ---- start-up ---------------------------------------------------------------------------- */

static int stats_fd = 2;   /* a copy of stderr: programs like ls close fd 2 before exit */

static void global_init(void) {
  int expect = 0;
  if (!atomic_compare_exchange_strong(&init_state, &expect, 1)) {
    while (atomic_load_explicit(&init_state, memory_order_acquire) != 2) sched_yield();
    return;
  }
  os_init();
  options_init();
  const uint64_t *rnd = (const uint64_t *)getauxval(AT_RANDOM);
  uint64_t seed = rnd ? rnd[0] ^ rnd[1] : (uint64_t)(uintptr_t)&seed * 0x9E3779B97F4A7C15ull;
  segment_cookie = seed | 1;
  free_marker_cookie = (seed * 0xBF58476D1CE4E5B9ull) & ~(uint64_t)0xF;   /* low bits free */
  link_cookie = (uintptr_t)((seed ^ (seed >> 29)) * 0x94D049BB133111EBull);
  if (opt.sites) sites_read_maps();
  sites_check = opt.sites;
  design_global_init();
  region_cookie = (free_marker_cookie * 0xD6E8FEB86659FD93ull) & ~(uint64_t)0xF;
  huge_heap = heap_create();
  atomic_store_explicit(&init_state, 2, memory_order_release);
  /* From here on allocation works, so calls that may allocate are safe. */
  if (pthread_key_create(&heap_key, heap_abandon) == 0) atomic_store(&heap_key_ready, true);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  if (mitigation(FAULT_NAMING)) guard_fault_install();
  if (opt.stats || opt.sites) {
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (fd >= 0) stats_fd = fd;
  }
  if (opt.verbose) {
    char buf[1024];
    outbuf_t o = { buf, sizeof buf, 0, 0, 2 };
    out_fmt(&o, "locus: library liblocus (%s), version %s, page %zu B, quantum %zu B%s\n",
            LOCUS_VARIANT, LOCUS_VERSION, os_page_size, QUANTUM, cfg_debug ? ", debug build" : "");
    out_str(&o, "locus: effective options:\n");
    options_print(&o, false);
    out_flush(&o);
  }
}

/* Gives the calling thread a heap: an abandoned one if there is one, else a new one. */
static heap_t *heap_acquire(void) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  heap_t *h = heap_adopt();
  if (!h) h = heap_create();
  if (!h) return NULL;
  tl_heap = h;
  if (atomic_load_explicit(&heap_key_ready, memory_order_acquire)) pthread_setspecific(heap_key, h);
  heap_collect(h);
  return h;
}

#endif
