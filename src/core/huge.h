/* huge.h — huge objects in runs of pages: objects bigger than the design serves and under the
 * OS threshold (LOCUS_OS_THRESHOLD, 1 MiB) are runs of pages from the shared huge-run heap's
 * page manager (KIND_HUGE): page-aligned, no header, the descriptor holds the size, the pages
 * discarded with the page manager's policy when freed. Bigger ones are OS objects (osobj.h). */
#ifndef LOCUS_HUGE_H
#define LOCUS_HUGE_H

/* ---- mitigations CANARIES and QUARANTINE: canaries around run objects, a ring of freed runs -
 * A run object is [canary 16 B][object: usable bytes, a multiple of 16][canary 16 B][slack],
 * the canaries checked when the object is freed or resized. A freed run has its first
 * HUGE_POISON_BYTES poisoned and waits in its page manager's ring (state.h) before its pages are
 * free again; leaving the ring, the poison is verified: writes after free are reported then.
 * Aligned requests (over 16 B) take own mappings instead. */
#define HUGE_POISON_BYTES 32

static inline size_t huge_usable_for(size_t size) {
  return mitigation(CANARIES) ? align_up(size ? size : 1, QUANTUM) : ((size ? size : 1) + os_page_size - 1) & ~(os_page_size - 1);
}
static inline size_t huge_pages_for(size_t usable) {
  return (usable + 2 * huge_front() + os_page_size - 1) >> os_page_shift;
}

static COLD NOINLINE __attribute__((unused)) void huge_fatal_unlock(heap_t *ph, const char *call, const char *what, const void *p) {
  lock_release(&ph->pages_lock);
  locus_fatal(call, what, p);
}

/* HUGE_RELEASE (with QUARANTINE): some runs of HUGE_SEAL_MIN or more waiting in the ring are
 * sealed, made inaccessible, so a read or write after free faults at once; leaving the ring
 * a run is accessible again. Which: every run bigger than any sealed before (glibc maps
 * objects of 128 KiB and more on their own and unmaps them on free, raising that threshold to
 * the size of each one freed: the same guarantee, a fault at the first use after free of each
 * new size), and one in HUGE_SEAL_EVERY of the others. Sealing each one (two mprotects, each
 * a TLB shootdown in a threaded program) made xthreads 2-4x slower. The pages stay resident,
 * as they did in the ring before (at most HUGE_RUN_QUARANTINE_BYTES): a discard would cost a
 * madvise per free and a page fault per page at the run's next use. A run not sealed (or one
 * the kernel refuses to seal: the mapping limit) is poisoned instead, checked when it leaves
 * the ring, and the word before it (its header, in glibc's terms) is checked at every huge
 * allocation while it waits (huge_run_ring_check). Caller holds the page lock. */
#define HUGE_SEAL_MIN (128u << 10)
#define HUGE_SEAL_EVERY 8
static size_t huge_sealed_max;    /* the biggest run sealed so far (relaxed: runs of different
                                     page managers race, and one run more or less is sealed) */
static unsigned huge_seal_tick;
static bool huge_run_seal(desc_t *r) {
  if (!mitigation(HUGE_RELEASE) || desc_bytes(r) < HUGE_SEAL_MIN) return false;
  if (desc_bytes(r) > __atomic_load_n(&huge_sealed_max, __ATOMIC_RELAXED))
    __atomic_store_n(&huge_sealed_max, desc_bytes(r), __ATOMIC_RELAXED);
  else if (__atomic_add_fetch(&huge_seal_tick, 1, __ATOMIC_RELAXED) % HUGE_SEAL_EVERY)
    return false;
  char *start = desc_start(r);
  size_t bytes = desc_bytes(r);
  if (OS_CALL(mprotect(start, bytes, PROT_NONE)) != 0) return false;
  r->flags |= FLAG_SEALED;
  return true;
}
static bool huge_run_unseal(desc_t *r) {
  if (!(r->flags & FLAG_SEALED)) return true;
  if (OS_CALL(mprotect(desc_start(r), desc_bytes(r), PROT_READ | PROT_WRITE)) != 0) return false;
  r->flags &= (uint16_t)~FLAG_SEALED;
  return true;
}

/* ph's ring of freed runs (mitigation QUARANTINE; NULL otherwise, never used). */
static inline huge_run_quarantine_t *huge_run_ring(heap_t *ph UNUSED) { return mitigation_field(QUARANTINE, ph->run_q); }

/* The oldest run leaves ph's ring (caller holds ph->pages_lock): its poison verified, its
 * pages free again. */
static void huge_run_release_locked(heap_t *ph, unsigned i) {
  huge_run_quarantine_t *q = huge_run_ring(ph);
  desc_t *r = q->ring[i];
  const char *p = huge_user(r);
  bool sealed = r->flags & FLAG_SEALED;
  if (!sealed && !poison_intact(p, 0, HUGE_POISON_BYTES)) huge_fatal_unlock(ph, "free()", "write after free to", p);
  q->ring[i] = NULL;
  q->bytes -= (size_t)r->npages << os_page_shift;
  r->flags &= (uint16_t)~FLAG_QUARANTINED;
  if (huge_run_unseal(r)) pages_give(ph, r);   /* (else its pages stay out of use) */
}

/* Frees huge run object p (run r of ph's page manager), checked under ph's lock: a live run
 * object (else a double free, or not an object); CANARIES: its canaries intact; QUARANTINE:
 * then into the ring. With neither, the page manager's checked free. */
static void huge_run_free(heap_t *ph, desc_t *r, void *p, const char *call) {
  if (!mitigation(CANARIES) && !mitigation(QUARANTINE)) { pages_free_checked(ph, r, p, call); return; }
  uint64_t now = now_ms();
  lock_acquire(&ph->pages_lock);
  if (r->kind != KIND_HUGE || p != huge_user(r))
    huge_fatal_unlock(ph, call, r->kind == KIND_FREE ? "double free" : "invalid pointer", p);
  if (mitigation(QUARANTINE) && (r->flags & FLAG_QUARANTINED)) huge_fatal_unlock(ph, call, "double free", p);
  if (mitigation(CANARIES) && !big_canary_ok((char *)p - 16)) huge_fatal_unlock(ph, call, "heap underflow (canary overwritten) before", p);
  if (mitigation(CANARIES) && !big_canary_ok((char *)p + r->u.huge.usable)) huge_fatal_unlock(ph, call, "heap overflow (canary overwritten) after", p);
  if (mitigation(QUARANTINE)) {
    huge_run_quarantine_t *q = huge_run_ring(ph);
    if (!huge_run_seal(r)) memset(p, POISON_BYTE, HUGE_POISON_BYTES);
    r->flags |= FLAG_QUARANTINED;
    unsigned newest = q->next;
    if (q->ring[newest]) huge_run_release_locked(ph, newest);
    q->ring[newest] = r;
    q->bytes += (size_t)r->npages << os_page_shift;
    q->next = (newest + 1) % HUGE_RUN_QUARANTINE;
    for (unsigned k = 1; k < HUGE_RUN_QUARANTINE && q->bytes > HUGE_RUN_QUARANTINE_BYTES; k++) {
      unsigned i = (newest + k) % HUGE_RUN_QUARANTINE;   /* oldest first, never the newest */
      if (q->ring[i]) huge_run_release_locked(ph, i);
    }
  } else {
    pages_give(ph, r);
  }
  pages_policy_locked(ph, now);
  lock_release(&ph->pages_lock);
  pages_shared_decay(now);
}

/* The canary before each unsealed run in ph's ring: glibc finds an overwritten header of a
 * freed chunk at the next malloc that looks at its bin; this is that check (QUARANTINE with
 * CANARIES, at each huge allocation: at most HUGE_RUN_QUARANTINE words). */
static void huge_run_ring_check(heap_t *ph) {
  if (!mitigation(QUARANTINE) || !mitigation(CANARIES)) return;
  if (!__atomic_load_n(&huge_run_ring(ph)->bytes, __ATOMIC_RELAXED)) return;   /* nothing waits */
  lock_acquire(&ph->pages_lock);
  for (unsigned i = 0; i < HUGE_RUN_QUARANTINE; i++) {
    desc_t *r = huge_run_ring(ph)->ring[i];
    if (r && !(r->flags & FLAG_SEALED) && !big_canary_ok(huge_user(r) - 16))
      huge_fatal_unlock(ph, "malloc()", "heap corrupted (canary overwritten) before the freed object", huge_user(r));
  }
  lock_release(&ph->pages_lock);
}

/* Empties ph's ring (purge). */
static void huge_run_quarantine_flush(heap_t *ph) {
  if (!mitigation(QUARANTINE)) return;
  lock_acquire(&ph->pages_lock);
  for (unsigned i = 0; i < HUGE_RUN_QUARANTINE; i++)
    if (huge_run_ring(ph)->ring[i]) huge_run_release_locked(ph, i);
  lock_release(&ph->pages_lock);
}

static NOINLINE void *huge_alloc(heap_t *h, size_t size, size_t align, bool zero) {
  if (unlikely(h == &heap_empty) && !(h = heap_acquire())) return alloc_failed();
  size_t usable = huge_usable_for(size), pages = huge_pages_for(usable);
  if ((mitigation(CANARIES) && align > QUANTUM) || size >= opt.os_threshold || size > PTRDIFF_MAX ||
      pages + align / os_page_size > (SEGMENT_SIZE >> os_page_shift) / 2) {
    void *p = os_obj_alloc(size, align, zero);
    return p ? p : alloc_failed();
  }
  huge_cache_tick();
  heap_collect(h);
  bool clean;
  /* From the shared huge-run heap (state.h), unless a fork caught it mid-update (child). */
  heap_t *ph = huge_heap && !huge_heap->fork_broken ? huge_heap : h;
  huge_run_ring_check(ph);
  desc_t *r = pages_alloc(ph, pages, align > os_page_size ? align >> os_page_shift : 1, &clean);
  if (!r) return alloc_failed();
  r->kind = KIND_HUGE;
  r->u.huge.usable = usable;
  h->stats.huge_in_use++;
  h->stats.malloc_calls++;
  h->stats.bytes_allocated += r->u.huge.usable;
  char *p = huge_user(r);
  if (mitigation(CANARIES)) {
    big_canary_set(p - 16);
    big_canary_set(p + usable);
  }
  if (zero && !clean) memset(p, 0, size);
  heap_debug_tick(h);
  return p;
}

static void huge_free(heap_t *h, desc_t *r, void *p, const char *call) {
  if (p != huge_user(r)) locus_fatal(call, "invalid pointer", p);
  h->stats.huge_in_use--;
  h->stats.free_calls++;
  h->stats.bytes_allocated -= r->u.huge.usable;
  huge_run_free(h, r, p, call);   /* which also runs the pool's decay check */
  heap_debug_tick(h);
}

/* A huge run freed by a thread that does not own it goes straight back to the owner's page
 * manager (see the top of this file). The owner's counters are its own: this one is counted
 * apart and folded in by the statistics. */
static void heap_free_remote_run(heap_t *h, desc_t *d, void *p, const char *call) {
  size_t usable = d->u.huge.usable;   /* before the run is free (meaningless if p is invalid:
                                         then huge_run_free does not return) */
  huge_run_free(h, d, p, call);
  atomic_fetch_add_explicit(&h->remote_runs, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->remote_run_bytes, usable, memory_order_relaxed);
}

/* Resizes a huge run object in place when the pages allow it. Its pages are ph's (the huge
 * heap's, or the caller's own); h is the caller's heap, which counts the bytes. */
static bool huge_resize(heap_t *h, heap_t *ph, desc_t *r, size_t size) {
  if (size == 0 || size >= opt.os_threshold) return false;
  char *p = huge_user(r);
  if (mitigation(CANARIES) && !big_canary_ok(p + r->u.huge.usable))   /* (the front one: usable_impl) */
    locus_fatal("realloc()", "heap overflow (canary overwritten) after", p);
  size_t usable = huge_usable_for(size), pages = huge_pages_for(usable), old = r->npages;
  if (pages < old) {
    if (pages < old / 2) return false;
    pages_shrink(ph, r, pages);
  } else if (pages > old && !pages_grow(ph, r, pages)) {
    return false;
  }
  if (mitigation(CANARIES)) big_canary_set(p + usable);
  h->stats.bytes_allocated += usable - r->u.huge.usable;
  r->u.huge.usable = usable;
  return true;
}

#endif
