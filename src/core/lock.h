/* lock.h — a small spin lock for the few shared structures (heap registry, abandoned heaps,
 * OS-object cache). Critical sections are short, so spinning with sched_yield is enough.
 * The lock records its holder so that a fork from a signal handler that interrupted the holder
 * does not wait for itself (see heap.h, fork). */
#ifndef LOCUS_LOCK_H
#define LOCUS_LOCK_H

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

typedef struct spinlock { _Atomic(uintptr_t) holder; } spinlock_t;   /* 0 = free */

/* A per-thread address identifies the holder without a system call. */
static __thread char thread_identity __attribute__((tls_model("initial-exec")));
static inline uintptr_t self_id(void) { return (uintptr_t)&thread_identity; }

static inline bool lock_try(spinlock_t *l) {
  uintptr_t expect = 0;
  return atomic_compare_exchange_strong_explicit(&l->holder, &expect, self_id(),
                                                 memory_order_acquire, memory_order_relaxed);
}

static inline void lock_acquire(spinlock_t *l) {
  for (unsigned spins = 0; !lock_try(l); spins++) {
    if (spins > 64) sched_yield();
    else cpu_relax();
  }
}

static inline void lock_release(spinlock_t *l) {
  atomic_store_explicit(&l->holder, 0, memory_order_release);
}

static inline bool lock_held_by_self(spinlock_t *l) {
  return atomic_load_explicit(&l->holder, memory_order_relaxed) == self_id();
}

#endif
