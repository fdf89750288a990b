/* state.h — the heap type and the library's global state: what every layer above reads.
 *
 * Ownership: a heap is used without locks by the one thread that owns it. Other threads
 * never touch its lists; they push what they free onto heap->remote (a lock-free stack
 * linked through the objects) and the owner takes it back on its slow paths. When a thread
 * exits its heap is abandoned: from then on heap->lock guards it, a thread that frees into
 * it frees directly under the lock, and the next new thread adopts it.
 * The one exception is the page manager (h->pages): it is guarded by h->pages_lock, taken on
 * every page-level operation (slow paths only), because a huge run freed by another thread
 * goes straight back to it: a page run is most of the memory a thread-churn workload holds,
 * and on a remote stack it waited until its owner ran again (with more threads than cores,
 * many milliseconds: heaps grew to 30 MiB of pages held by objects already freed).
 *
 * The design's header (vam.h, phk.h, ...) comes before this file: design_heap_t, its per-heap
 * state embedded first in heap_t, and DESIGN_EMPTY_HEAP, an initializer with every list empty. */
#ifndef LOCUS_STATE_H
#define LOCUS_STATE_H

#include <pthread.h>
#include <sys/auxv.h>
#include "../../include/locus.h"   /* locus_stats_t, for design_stats */

/* Per-heap counters (the HEAP and MAXIMUM fields of stats_fields.h, in its order), written only
 * by the heap's owner (or under its lock when abandoned): heap_count, internal.h. */
typedef struct heap_stats {
#define X(f, how) STATS_HEAP_##how(f)
  LOCUS_STATS_FIELDS(X)
#undef X
} heap_stats_t;

enum heap_state { HEAP_OWNED = 0, HEAP_ABANDONED = 1 };

#define HEAP_REGION_CHUNKS 16
#define HEAP_REGION_CHUNK_BYTES (256u << 10)

typedef struct heap heap_t;
/* Mitigation QUARANTINE: huge runs freed into a heap's page manager wait in a ring before they
 * are reusable (huge.h); at most this many, and at most this many bytes. */
#define HUGE_RUN_QUARANTINE 8
#define HUGE_RUN_QUARANTINE_BYTES ((size_t)4 << 20)

/* Mitigation QUARANTINE: huge runs freed into a page manager wait in a ring before they are
 * reusable (huge.h). */
typedef struct huge_run_quarantine {
  desc_t *ring[HUGE_RUN_QUARANTINE];   /* oldest at next */
  unsigned next;
  size_t bytes;
} huge_run_quarantine_t;

struct heap {
  design_heap_t d;              /* first: the allocation fast path reads only this */
  heap_stats_t stats;
  pages_t pages;
  /* What other threads write, each on a cache line of its own so that their writes do not
   * take the owner's lines away (false sharing doubled the cost of cross-thread frees). */
  _Atomic(void *) remote __attribute__((aligned(64)));  /* objects freed by other threads,
                                                           linked via word 0 */
  _Atomic int state;            /* enum heap_state (read with remote, rarely written) */
  lock_t lock __attribute__((aligned(64)));   /* guards the heap while it is abandoned */
  lock_t pages_lock __attribute__((aligned(64)));  /* guards pages (see above); taken after
                                                      lock, never before */
  _Atomic uint64_t remote_runs, remote_run_bytes;   /* huge runs freed by other threads */
  heap_t *next_all __attribute__((aligned(64)));    /* registry of every heap ever created */
  struct sites_table *sites;    /* LOCUS_SITES: this heap's call sites (sites.h; owner writes) */
  uint64_t slow_events;         /* debug builds: counts toward the periodic check */
  bool fork_taken;              /* fork_prepare took h->lock */
  bool fork_broken;             /* in a child: pages_lock was held by another thread at fork */
  /* Free runs this thread keeps for reuse: chunks its regions let go, for its next regions
   * (region_engine.h); given back at thread exit and on purge (reclaim.h). Owner only. */
  unsigned nchunks;
  size_t chunk_bytes;
  desc_t *chunks[HEAP_REGION_CHUNKS];
#if MITIGATION(QUARANTINE)
  huge_run_quarantine_t run_q;  /* freed huge runs not yet reusable (huge.h); under pages_lock */
#endif
};

/* Every allocation failure returns through here: glibc sets errno on each, and so do we. Being
 * done where the failure happens, malloc's fast path needs no test of its result. */
static COLD NOINLINE void *alloc_failed(void) {
  errno = ENOMEM;
  return NULL;
}

/* ---- refusal: memory back when the system refuses more -------------------------------------
 * When the OS refuses a mapping (RLIMIT_AS reached, overcommit refused), the layer that asked
 * calls memory_refused(locked): everything the heaps keep for reuse goes back (cached blocks,
 * kept runs, free segments, the huge-object pool, the pages of heaps whose threads exited), and
 * if any address space went back the caller tries once more. `locked` is the heap whose page
 * lock the caller holds (its pages are purged under that lock), or NULL. The handler is the one
 * call the core makes upward outside the design contract: the layers that map memory cannot
 * know what the layers above them keep. api.h defines it (purge_after_refusal), with every
 * layer below it in view; this is the tentative definition. */
static bool (*memory_refused_handler)(heap_t *locked);

static inline bool memory_refused(heap_t *locked) {
  return memory_refused_handler && memory_refused_handler(locked);
}

/* p's run d holds no object (not a run of any kind that hands objects out). */
static COLD __attribute__((noreturn)) void free_not_object(const desc_t *d, const void *p, const char *call) {
  locus_fatal(call, d->kind == KIND_FREE ? "double free or invalid pointer" : "invalid pointer", p);
}

/* ---- global state ------------------------------------------------------------------------ */
static lock_t registry_lock;                 /* serialises additions to the registry */
static heap_t *registry;                     /* all heaps, newest first; append-only, so it is
                                                read without the lock (__atomic loads) */
static _Atomic uint64_t heaps_created;
static _Atomic uint64_t heaps_waiting;        /* heaps abandoned and not yet adopted */
static _Atomic uint64_t abandoned_swept_ms;   /* when abandoned heaps were last trimmed */
static pthread_key_t heap_key;
static _Atomic bool heap_key_ready;
static _Atomic int init_state;               /* 0 none, 1 running, 2 done */
static uint64_t free_marker_cookie;          /* random; see the designs' double-free markers */

/* The double-free marker a design writes into a freed object's second word: the address, the
 * random cookie and a salt (a number new each time memory becomes a block of the design, so a
 * stale marker left in reused memory never matches). A free by another thread writes it too,
 * so a second free of the object, by any thread, the owner's included, is caught while the
 * object waits in another thread's cache or on its owner's remote stack. */
static inline uintptr_t free_marker_salted(const void *p, uint32_t salt) {
  return (uintptr_t)p ^ free_marker_cookie ^ (uintptr_t)salt << 32;
}
static inline bool marker_says_free(uintptr_t word, uintptr_t marker) { return word == marker; }
/* A free from a thread that does not own the object: a marker word that says "free" is a
 * double free (ends the program); otherwise it gets the marker. */
static inline void marker_free_remote(uintptr_t *mark, uintptr_t marker, const void *p, const char *call) {
  if (marker_says_free(*mark, marker)) locus_fatal(call, "double free", p);
  *mark = marker;
}

/* The object is taken back by its owner from the remote stack (design_collected): the marker
 * goes, so the owner's own free path takes it. */
static inline void marker_collected(uintptr_t *mark, uintptr_t marker) {
  if (*mark == marker) *mark = 0;
}

/* Whether realloc keeps an object of `usable` bytes where it is for `size` bytes: it fits,
 * and does not leave half of it unused (a smaller size moves to a smaller object). */
static inline bool realloc_keeps(size_t usable, size_t size) { return size <= usable && size > usable / 2; }

/* The usable size of p, an object of block d whose free objects hold `marker` in word 1 (the
 * marker designs: lf, tp): the block's object size, or the report of a freed object. */
static inline size_t marker_usable(const desc_t *d, const void *p, uintptr_t marker, const char *call) {
  if (((const uintptr_t *)p)[1] == marker) locus_fatal(call, "pointer to a freed object", p);
  return d->obj_size;
}

/* A thread that has no heap yet uses heap_empty: its lists are empty, so every allocation
 * takes the slow path, which gives the thread a real heap. */
static heap_t heap_empty = { .d = DESIGN_EMPTY_HEAP };

/* The page manager every thread takes huge runs (objects from 32 KiB to the OS threshold)
 * from, under its page lock: a heap no thread owns (huge.h). Per-thread page managers kept
 * each thread's freed big objects for that thread alone; a thread-churn workload then held
 * 1.75x glibc's peak RSS. NULL until start-up made it (or if it could not). */
static heap_t *huge_heap;
static __thread heap_t *tl_heap __attribute__((tls_model("initial-exec"))) = &heap_empty;

/* A huge run object's address: the run's start, after its canary (mitigation CANARIES; huge.h). */
static inline size_t huge_front(void) { return mitigation(CANARIES) ? 16 : 0; }
static inline char *huge_user(const desc_t *r) { return desc_start(r) + huge_front(); }

/* The global locks besides registry_lock, here so that fork (init.h) can take or reset each. */
static lock_t huge_cache_lock;            /* the huge-object pool (osobj.h) */
static lock_t region_quarantine_lock;     /* debug builds' destroyed region runs (region_engine.h) */
static uint64_t region_cookie;            /* region handles' and markers' key (region.h), set at start-up */

#endif
