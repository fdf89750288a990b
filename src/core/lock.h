/* lock.h — the lock of the few shared structures (heap registry, abandoned heaps, huge-object
 * cache): a short spin, then a futex wait.
 *
 * Why not spin and yield: on an oversubscribed machine (more runnable threads than cores) the
 * holder is often preempted; waiters that call sched_yield in a loop burn the CPU the holder
 * needs and make a system call per turn (thread-churn workloads showed ~20,000 sched_yield
 * calls per second). Waiters here sleep in the kernel until the holder wakes one.
 *
 * State: 0 free, 1 held, 2 held and a waiter may sleep (the release then wakes one). The lock
 * records its holder so that a fork from a signal handler that interrupted the holder does
 * not wait for itself (see init.h, fork). The counters are written only by the holder, so they
 * need no atomics: `acquired` counts acquisitions, `contended` those that found the lock held. */
#ifndef LOCUS_LOCK_H
#define LOCUS_LOCK_H

#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

enum { LOCK_FREE = 0, LOCK_HELD = 1, LOCK_WAITERS = 2 };
#define LOCK_SPINS 100   /* a critical section here is a few hundred instructions */

typedef struct lock {
  _Atomic uint32_t state;
  _Atomic(uintptr_t) holder;          /* self_id() of the holder, 0 when free */
  uint64_t acquired, contended;       /* statistics, written by the holder */
} lock_t;

/* A per-thread address identifies the holder without a system call. */
static __thread char thread_identity __attribute__((tls_model("initial-exec")));
static inline uintptr_t self_id(void) { return (uintptr_t)&thread_identity; }

static inline void lock_took(lock_t *l, bool contended) {
  atomic_store_explicit(&l->holder, self_id(), memory_order_relaxed);
  l->acquired++;
  l->contended += contended;
}

static inline bool lock_try(lock_t *l) {
  uint32_t expect = LOCK_FREE;
  if (!atomic_compare_exchange_strong_explicit(&l->state, &expect, LOCK_HELD,
                                               memory_order_acquire, memory_order_relaxed))
    return false;
  lock_took(l, false);
  return true;
}

static NOINLINE void lock_wait(lock_t *l) {
  for (unsigned spins = 0; spins < LOCK_SPINS; spins++) {
    cpu_relax();
    uint32_t expect = LOCK_FREE;
    if (atomic_load_explicit(&l->state, memory_order_relaxed) == LOCK_FREE &&
        atomic_compare_exchange_weak_explicit(&l->state, &expect, LOCK_HELD,
                                              memory_order_acquire, memory_order_relaxed)) {
      lock_took(l, true);
      return;
    }
  }
  /* Announce a sleeper; whoever releases next wakes one. Taking the lock in this state keeps
   * it marked, so a sleeper behind us is not forgotten. */
  while (atomic_exchange_explicit(&l->state, LOCK_WAITERS, memory_order_acquire) != LOCK_FREE)
    syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, LOCK_WAITERS, NULL, NULL, 0);
  lock_took(l, true);
}

static inline void lock_acquire(lock_t *l) {
  if (!lock_try(l)) lock_wait(l);
}

static inline void lock_release(lock_t *l) {
  atomic_store_explicit(&l->holder, 0, memory_order_relaxed);
  /* An exchange, not a store: it is also the full barrier heap.h's abandoned-heap handoff
   * relies on (the releaser's next load cannot pass it). */
  if (atomic_exchange_explicit(&l->state, LOCK_FREE, memory_order_seq_cst) == LOCK_WAITERS)
    syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* In a child after fork: the lock as new (no thread of the child waits on it). */
static inline void lock_reset(lock_t *l) {
  atomic_store_explicit(&l->holder, 0, memory_order_relaxed);
  atomic_store_explicit(&l->state, LOCK_FREE, memory_order_relaxed);
}

static inline bool lock_held_by_self(lock_t *l) {
  return atomic_load_explicit(&l->holder, memory_order_relaxed) == self_id();
}

#endif
