/* heap.h — thread heaps: the heap type, the page manager's operations, the heap registry,
 * per-thread heaps in initial-exec TLS, frees from other threads, heaps of exited threads,
 * fork, and start-up.
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
 * The design (vam, phk, ...) provides, before this file is included:
 *   design_heap_t                     its per-heap state, embedded first in heap_t
 *   DESIGN_EMPTY_HEAP                 an initializer for it with every list empty
 *   and, anywhere in the translation unit, the functions declared below. */
#ifndef LOCUS_HEAP_H
#define LOCUS_HEAP_H

#include <pthread.h>
#include <sys/auxv.h>
#include "../../include/locus.h"   /* locus_stats_t, for design_stats */

/* Per-heap counters, written only by the heap's owner (or under its lock when abandoned). */
#define HEAP_COUNTERS(X) \
  X(malloc_calls) X(free_calls) X(remote_frees) X(bytes_allocated) \
  X(pages_in_use) X(blocks_in_use) X(huge_in_use) \
  X(search_words) X(search_words_max) X(searches) \
  X(hint_calls) X(hint_same_page) X(hint_same_line) X(hint_same_kregion)

typedef struct heap_stats {
#define X(name) uint64_t name;
  HEAP_COUNTERS(X)
#undef X
} heap_stats_t;

enum heap_state { HEAP_OWNED = 0, HEAP_ABANDONED = 1 };

#define HEAP_REGION_CHUNKS 16
#define HEAP_REGION_CHUNK_BYTES (256u << 10)

typedef struct heap heap_t;
/* Secure build: huge runs freed into a heap's page manager wait in a ring before they are
 * reusable (huge.h); at most this many, and at most this many bytes. */
#define HUGE_RUN_QUARANTINE 8
#define HUGE_RUN_QUARANTINE_BYTES ((size_t)4 << 20)

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
  /* Chunks regions let go in this thread, for its next regions (region.h). Owner only. */
  unsigned nchunks;
  size_t chunk_bytes;
  desc_t *chunks[HEAP_REGION_CHUNKS];
#if LOCUS_SECURE
  desc_t *run_quarantine[HUGE_RUN_QUARANTINE];   /* under pages_lock; oldest at run_qnext */
  unsigned run_qnext;
  size_t run_qbytes;
#endif
};

/* Every allocation failure returns through here: glibc sets errno on each, and so do we. Being
 * done where the failure happens, malloc's fast path needs no test of its result. */
static COLD NOINLINE void *alloc_failed(void) {
  errno = ENOMEM;
  return NULL;
}

/* ---- the design contract ------------------------------------------------------------------ */
/* design_alloc(h, size, zero) and design_alloc_aligned return NULL only via alloc_failed(). */
static void design_global_init(void);
static void design_heap_init(heap_t *h);
/* Frees p into heap h (the caller owns h). d is the descriptor of p's page: the head of a run
 * of the design's one-page kind is freed at once; anything else goes to free_in_run (api.h). */
static void design_free(heap_t *h, desc_t *d, void *p, const char *call);
/* An object of `size` bytes near hint (not NULL, but any address: perhaps not ours, perhaps
 * another heap's): in hint's K-region or page when the design can place it there, else as
 * design_alloc would. A design without placement by address simply calls design_alloc. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero);
/* log2 of the bytes in hint's K-region, for the statistics' "same K-region" (the page's where
 * the design has no K-regions). */
static unsigned design_kregion_shift(const void *hint);
/* Frees p given its run's head d and its offset in the run (kinds not the design's: core_free). */
static void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call);
/* The core's side of design_free's other case: finds p's run head, then design_free_run. */
static void free_in_run(heap_t *h, void *p, const char *call);
/* Checks a pointer another thread is about to push onto h->remote; ends the program on a
 * detectable invalid or double free. */
static void design_check_remote(desc_t *d, void *p, const char *call);
/* A free by the owner of heap me of p, which block d of another heap holds: the design may
 * keep it for me's own reuse (true; it must then give it back to its owner from
 * design_release_spares) or let it go home through the owner's remote stack (false). */
static bool design_keep_foreign(heap_t *me, desc_t *d, void *p, const char *call);
static size_t design_usable(desc_t *d, const void *p, const char *call);
/* Adds what the design counts itself (rather than in h->stats) to a statistics snapshot. */
static void design_stats(heap_t *h, locus_stats_t *st);
/* Gives back memory the heap keeps for reuse (spare blocks) when its thread exits. */
static void design_release_spares(heap_t *h);
static size_t design_check(heap_t *h);

/* The two hooks of a design that keeps all its counters in h->stats and sends every object
 * another thread frees home (no foreign-object cache): it defines DESIGN_PLAIN_HOOKS. */
#ifdef DESIGN_PLAIN_HOOKS
static void design_stats(heap_t *h, locus_stats_t *st) { (void)h; (void)st; }
static bool design_keep_foreign(heap_t *me, desc_t *d, void *p, const char *call) {
  (void)me; (void)d; (void)p; (void)call;
  return false;
}
#endif

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
 * stale marker left in reused memory never matches). A remote free writes it with bit 0
 * flipped (REMOTE_MARK), and either form says "already free". */
#define REMOTE_MARK 1u
static inline uintptr_t free_marker_salted(const void *p, uint32_t salt) {
  return (uintptr_t)p ^ free_marker_cookie ^ (uintptr_t)salt << 32;
}
static inline bool marker_says_free(uintptr_t word, uintptr_t marker) {
  return (word | REMOTE_MARK) == (marker | REMOTE_MARK);
}
/* A free from a thread that does not own the object: a marker word that says "free" is a
 * double free (ends the program); otherwise it gets the remote form, so a second free of the
 * object, from any thread, is caught before its owner takes it back. */
static inline void marker_free_remote(uintptr_t *mark, uintptr_t marker, const void *p, const char *call) {
  if (marker_says_free(*mark, marker)) locus_fatal(call, "double free", p);
  *mark = marker ^ REMOTE_MARK;
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

static void global_init(void);
static void heap_check_now(heap_t *h);

/* ---- page manager ------------------------------------------------------------------------ */

static void pages_purge_run(heap_t *h, desc_t *r);
static void heap_free_remote_run(heap_t *h, desc_t *d, void *p, const char *call);
static void huge_run_free(heap_t *ph, desc_t *r, void *p, const char *call);
static void heap_sweep_abandoned(uint64_t now);

/* A huge run object's address: the run's start, after the secure build's canary (huge.h). */
static inline size_t huge_front(void) { return cfg_secure ? 16 : 0; }
static inline char *huge_user(const desc_t *r) { return desc_start(r) + huge_front(); }
static inline void huge_cache_tick(void);
static size_t segment_header_pages;    /* the same for every segment */

/* Pages of a segment taken by its header and descriptors (the same for every segment). */
static inline size_t segment_header_count(void) {
  size_t npages = SEGMENT_SIZE >> os_page_shift;
  return align_up(sizeof(segment_t) + npages * sizeof(desc_t), os_page_size) >> os_page_shift;
}

/* The secure build's guard page: a segment's last page is inaccessible and belongs to no run,
 * so a linear overflow off the end of a segment faults before it reaches the next one. */
static inline size_t segment_guard_pages(void) { return cfg_secure ? 1 : 0; }

static segment_t *segment_create(heap_t *h) {
  segment_t *s = os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
  if (!s) return NULL;
  size_t npages = (SEGMENT_SIZE >> os_page_shift) - segment_guard_pages();
  size_t header = segment_header_count();
  segment_header_pages = header;
  s->check = segment_cookie ^ (uintptr_t)s;
  s->heap = h;
  s->npages = (uint32_t)npages;
  s->first = (uint32_t)header;
  for (size_t i = 0; i < header; i++) { s->desc[i].kind = KIND_HEADER; s->desc[i].back = 0; }
  if (segment_guard_pages()) {
    s->desc[npages].kind = KIND_HEADER;   /* a free() there is an invalid pointer */
    mprotect((char *)s + (npages << os_page_shift), os_page_size, PROT_NONE);
  }
  s->prev = NULL;
  s->next = h->pages.segments;
  if (s->next) s->next->prev = s;
  h->pages.segments = s;
  h->pages.nsegments++;
  desc_t *r = &s->desc[header];
  run_shape_free(r, npages - header, 0);   /* fresh descriptors are zero: plain free pages */
  s->free_pages = (uint32_t)(npages - header);
  run_insert(&h->pages, r, false, 0);
  segmap_set(s, SEGMENT_SIZE, GRANULE_SEGMENT, GRANULE_SEGMENT);
  return s;
}

static void segment_destroy(heap_t *h, segment_t *s) {
  desc_t *r = &s->desc[s->first];
  run_remove(&h->pages, r);
  if (s->prev) s->prev->next = s->next; else h->pages.segments = s->next;
  if (s->next) s->next->prev = s->prev;
  h->pages.nsegments--;
  segmap_set(s, SEGMENT_SIZE, GRANULE_NONE, GRANULE_NONE);
  os_unmap(s, SEGMENT_SIZE);
  atomic_fetch_add_explicit(&os_bytes_discarded, SEGMENT_SIZE, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_discard_calls, 1, memory_order_relaxed);
}

static inline bool run_is_whole_segment(const desc_t *r) {
  const segment_t *s = desc_segment(r);
  return r == &s->desc[s->first] && r->npages == s->npages - s->first;
}

/* Takes n pages (aligned to `align` pages) from h. *clean tells whether they read as zero.
 * The run's pages point back to its head; the caller sets kind and the rest. Caller holds
 * h->pages_lock (pages_alloc below). */
static desc_t *pages_take(heap_t *h, size_t n, size_t align, bool *clean) {
  pages_t *pm = &h->pages;
  size_t want = n + (align > 1 ? align - 1 : 0);
  if (want > (SEGMENT_SIZE >> os_page_shift) - segment_header_count() - segment_guard_pages()) return NULL;
  desc_t *r = NULL;
  for (int b = bitmap2_find_from(&pm->binmap, run_bin(want)); b >= 0;
       b = bitmap2_find_from(&pm->binmap, (unsigned)b + 1)) {
    for (desc_t *c = pm->bins[b]; c; c = c->next)
      if (c->npages >= want) { r = c; break; }   /* exact bins: the first is a fit */
    if (r) break;
  }
  if (!r) {
    segment_t *s = segment_create(h);
    if (!s) return NULL;
    r = &s->desc[s->first];
  }
  segment_t *s = desc_segment(r);
  bool dirty_run = r->flags & FLAG_DIRTY;
  uint64_t when = dirty_run ? r->u.run.freed_ms : 0;
  run_remove(pm, r);
  size_t total = r->npages;
  /* Trim the front for alignment, then the tail; both go back as free runs. */
  size_t idx = (size_t)(r - s->desc), lead = 0;
  if (align > 1) lead = (align_up(((uintptr_t)s >> os_page_shift) + idx, align) - ((uintptr_t)s >> os_page_shift)) - idx;
  if (lead) {
    run_shape_free(r, lead, 0);
    run_insert(pm, r, dirty_run, when);
    r += lead;
    total -= lead;
  }
  if (total > n) {
    desc_t *rest = r + n;
    run_shape_free(rest, total - n, 0);
    run_insert(pm, rest, dirty_run, when);
  }
  for (size_t i = 0; i < n; i++) { r[i].back = (uint32_t)i; r[i].kind = KIND_INTERIOR; }
  r->npages = (uint32_t)n;
  r->flags = dirty_run ? 0 : FLAG_CLEAN;
  s->free_pages -= (uint32_t)n;
  h->stats.pages_in_use += n;
  *clean = !dirty_run;
  return r;
}

static desc_t *pages_alloc(heap_t *h, size_t n, size_t align, bool *clean) {
  lock_acquire(&h->pages_lock);
  desc_t *r = pages_take(h, n, align, clean);
  lock_release(&h->pages_lock);
  return r;
}

/* Discards one free run now (or unmaps its segment when it is the whole segment and the heap
 * has another). */
static void pages_purge_run(heap_t *h, desc_t *r) {
  if (run_is_whole_segment(r) && h->pages.nsegments > 1) {
    segment_destroy(h, desc_segment(r));
    return;
  }
  dirty_remove(&h->pages, r);
  os_discard(desc_start(r), desc_bytes(r));
}

/* Discards the oldest dirty runs while more than `keep_pages` dirty pages remain and the
 * oldest was freed before `older_than` (UINT64_MAX: whatever its age). Returns the bytes
 * given back. Caller holds h->pages_lock (pages_purge below). */
static size_t pages_purge_locked(heap_t *h, uint64_t older_than, size_t keep_pages) {
  pages_t *pm = &h->pages;
  size_t before = atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed);
  while (pm->dirty_oldest && pm->dirty_pages > keep_pages && pm->dirty_oldest->u.run.freed_ms < older_than)
    pages_purge_run(h, pm->dirty_oldest);
  /* On a full purge, wholly free clean segments beyond the first go back too. */
  for (segment_t *s = pm->segments, *next; s && pm->nsegments > 1; s = next) {
    next = s->next;
    desc_t *r = &s->desc[s->first];
    if (r->kind == KIND_FREE && run_is_whole_segment(r) && keep_pages == 0 && older_than == UINT64_MAX)
      segment_destroy(h, s);
  }
  return atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed) - before;
}

static size_t pages_purge(heap_t *h, uint64_t older_than, size_t keep_pages) {
  lock_acquire(&h->pages_lock);
  size_t n = pages_purge_locked(h, older_than, keep_pages);
  lock_release(&h->pages_lock);
  return n;
}

static bool memory_under_pressure(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0 || !si.totalram) return false;
  uint64_t avail = ((uint64_t)si.freeram + si.bufferram) * si.mem_unit;
  return avail * 100 < (uint64_t)si.totalram * si.mem_unit * opt.pressure_pct;
}

/* The delayed policy. Free pages go back when the program is not reusing them: beyond
 * LOCUS_DIRTY_MAX the heap halves its dirty pages; below it, pages idle for LOCUS_DECAY_MS
 * go back, oldest first. */
static void pages_decay(heap_t *h, uint64_t now) {
  pages_t *pm = &h->pages;
  if (pm->dirty_pages > opt.dirty_max >> os_page_shift) pages_purge_locked(h, UINT64_MAX, pm->dirty_pages / 2);
  if (pm->dirty_oldest && now - pm->dirty_oldest->u.run.freed_ms > opt.decay_ms)
    pages_purge_locked(h, now - opt.decay_ms, 0);
}

/* Applies the discard policy to h's pages after some were freed (caller holds pages_lock). */
static void pages_policy_locked(heap_t *h, uint64_t now) {
  pages_t *pm = &h->pages;
  if (!pm->dirty_oldest) return;
  if (opt.discard == DISCARD_DELAYED) {
    pages_decay(h, now);
  } else if (opt.discard == DISCARD_PRESSURE && now - pm->last_pressure_check_ms >= 100) {
    pm->last_pressure_check_ms = now;
    if (memory_under_pressure()) pages_purge_locked(h, UINT64_MAX, 0);
  }
}

/* Returns a run to h's free pages, merging it with free neighbours. Caller holds pages_lock. */
static void pages_give(heap_t *h, desc_t *r) {
  pages_t *pm = &h->pages;
  segment_t *s = desc_segment(r);
  size_t n = r->npages, idx = (size_t)(r - s->desc);
  bool immediate = opt.discard == DISCARD_IMMEDIATE;
  h->stats.pages_in_use -= n;
  s->free_pages += (uint32_t)n;
  if (immediate) os_discard(desc_start(r), n << os_page_shift);
  bool dirty = !immediate;
  uint64_t when = now_ms();
  run_clear(r, n);
  /* Merge with free neighbours: their boundary pages become plain free pages. */
  if (idx > s->first && s->desc[idx - 1].kind == KIND_FREE) {
    desc_t *tail = &s->desc[idx - 1], *prev = tail - tail->back;
    dirty |= (prev->flags & FLAG_DIRTY) != 0;
    run_remove(pm, prev);
    tail->back = 0;
    n += prev->npages;
    r = prev;
    idx = (size_t)(r - s->desc);
  }
  if (idx + n < s->npages && s->desc[idx + n].kind == KIND_FREE) {
    desc_t *next = &s->desc[idx + n];
    dirty |= (next->flags & FLAG_DIRTY) != 0;
    run_remove(pm, next);
    next->flags = 0;
    n += next->npages;
  }
  run_shape_free(r, n, 0);
  if (immediate && run_is_whole_segment(r) && pm->nsegments > 1) {
    bin_insert(pm, r);
    segment_destroy(h, s);
    return;
  }
  run_insert(pm, r, dirty, when);
}

/* The decay clocks shared by all heaps, run with no lock held: the sweep of heaps nobody owns
 * (delayed policy) and the huge-object pool's (its own rule, whatever the policy). */
static void pages_shared_decay(uint64_t now) {
  if (opt.discard == DISCARD_DELAYED) heap_sweep_abandoned(now);
  huge_cache_tick();
}

/* Returns run r to h's free pages and applies the discard policy. With p, r is a huge run
 * another thread frees: checked under the lock to still be p's live run, so of two racing
 * frees of p one is reported. */
static void pages_free_checked(heap_t *h, desc_t *r, const void *p, const char *call) {
  uint64_t now = now_ms();
  lock_acquire(&h->pages_lock);
  if (p && (r->kind != KIND_HUGE || p != huge_user(r))) {
    const char *what = r->kind == KIND_FREE ? "double free" : "invalid pointer";
    lock_release(&h->pages_lock);
    locus_fatal(call, what, p);
  }
  pages_give(h, r);
  pages_policy_locked(h, now);
  lock_release(&h->pages_lock);
  pages_shared_decay(now);
}

static void pages_free(heap_t *h, desc_t *r) { pages_free_checked(h, r, NULL, NULL); }

/* The discard policy when the design freed memory it keeps (caller owns h). */
__attribute__((unused)) static void pages_policy(heap_t *h) {
  if (!__atomic_load_n(&h->pages.dirty_oldest, __ATOMIC_RELAXED)) return;
  uint64_t now = now_ms();
  lock_acquire(&h->pages_lock);
  pages_policy_locked(h, now);
  lock_release(&h->pages_lock);
  pages_shared_decay(now);
}

/* A design's block or large area goes back to the page manager. */
static void block_release(heap_t *h, desc_t *r) {
  h->stats.blocks_in_use--;
  pages_free(h, r);
}

/* Grows the run r in place to n pages if the pages after it are free (caller holds the lock). */
static bool pages_extend(heap_t *h, desc_t *r, size_t n) {
  segment_t *s = desc_segment(r);
  size_t have = r->npages, idx = (size_t)(r - s->desc);
  if (n <= have) return true;
  if (idx + have >= s->npages || s->desc[idx + have].kind != KIND_FREE) return false;
  desc_t *next = &s->desc[idx + have];
  if (have + next->npages < n) return false;
  bool dirty = next->flags & FLAG_DIRTY;
  uint64_t when = next->u.run.freed_ms;
  size_t total = next->npages;
  run_remove(&h->pages, next);
  size_t extra = n - have;
  if (total > extra) {
    desc_t *rest = next + extra;
    run_shape_free(rest, total - extra, 0);
    run_insert(&h->pages, rest, dirty, when);
  }
  for (size_t i = have; i < n; i++) { r[i].back = (uint32_t)i; r[i].kind = KIND_INTERIOR; r[i].flags = 0; }
  r->npages = (uint32_t)n;
  if (dirty) r->flags &= (uint16_t)~FLAG_CLEAN;
  s->free_pages -= (uint32_t)extra;
  h->stats.pages_in_use += extra;
  return true;
}

static bool pages_grow(heap_t *h, desc_t *r, size_t n) {
  lock_acquire(&h->pages_lock);
  bool grown = pages_extend(h, r, n);
  lock_release(&h->pages_lock);
  return grown;
}

/* Gives the tail of run r (pages n.. ) back to the free pages. */
static void pages_shrink(heap_t *h, desc_t *r, size_t n) {
  size_t have = r->npages;
  if (n >= have) return;
  /* Outside the lock: these pages are the caller's, and another thread's merge reads only
   * free runs' descriptors (these stay KIND_INTERIOR until pages_free). */
  desc_t *tail = r + n;
  r->npages = (uint32_t)n;
  tail->npages = (uint32_t)(have - n);
  tail->back = 0;
  tail->kind = KIND_INTERIOR;
  pages_free(h, tail);
}

/* ---- heaps ------------------------------------------------------------------------------- */

static heap_t *heap_create(void) {
  heap_t *h = os_map(align_up(sizeof(heap_t), os_page_size));
  if (!h) return NULL;
  design_heap_init(h);
  lock_acquire(&registry_lock);
  h->next_all = registry;
  __atomic_store_n(&registry, h, __ATOMIC_RELEASE);   /* published whole: readers take no lock */
  lock_release(&registry_lock);
  atomic_fetch_add_explicit(&heaps_created, 1, memory_order_relaxed);
  return h;
}

/* Takes an abandoned heap, if any, for the calling thread. No global lock: the registry only
 * grows, and the heap's own lock decides between threads that want the same heap. */
static heap_t *heap_adopt(void) {
  if (!atomic_load_explicit(&heaps_waiting, memory_order_relaxed)) return NULL;
  for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all) {
    if (atomic_load(&h->state) != HEAP_ABANDONED || !lock_try(&h->lock)) continue;
    bool found = atomic_load(&h->state) == HEAP_ABANDONED;
    if (found) {
      atomic_store(&h->state, HEAP_OWNED);
      atomic_fetch_sub_explicit(&heaps_waiting, 1, memory_order_relaxed);
    }
    lock_release(&h->lock);
    if (found) return h;
  }
  return NULL;
}

static void heap_free_local(heap_t *h, void *p, const char *call);

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

static void region_release_chunks(heap_t *h);   /* region.h */

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
  region_release_chunks(h);
  heap_trim_abandoned(h, now_ms());
  heap_unlock_abandoned(h);
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

/* A free of an object owned by another heap: pushed onto the owner's remote stack, never
 * waiting for a lock. If the owner has exited, the object is freed into its heap now by
 * whoever gets the heap's lock (we, or the thread holding it, see heap_unlock_abandoned). */
static NOINLINE void heap_free_remote(heap_t *h, desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_HUGE && likely(!h->fork_broken)) {
    heap_free_remote_run(h, d, p, call);
    return;
  }
  if (d->kind >= KIND_DESIGN) design_check_remote(d, p, call);
  else if (d->kind != KIND_HUGE || p != huge_user(d)) locus_fatal(call, "invalid pointer", p);
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

/* ---- debugging --------------------------------------------------------------------------- */

/* Walks h's page manager: every page of every segment belongs to exactly one run, free runs
 * are binned and never adjacent, counts agree. Returns the number of problems found. */
static size_t pages_check(heap_t *h) {
  size_t bad = 0, dirty = 0;
#define CHECK(c) do { if (!(c)) { bad++; if (cfg_debug) locus_assert_fail(#c, __FILE__, __LINE__); } } while (0)
  for (segment_t *s = h->pages.segments; s; s = s->next) {
    CHECK(s->check == (segment_cookie ^ (uintptr_t)s) && s->heap == h);
    size_t free_pages = 0;
    bool prev_free = false;
    for (size_t i = s->first; i < s->npages;) {
      desc_t *r = &s->desc[i];
      CHECK(r->back == 0 && r->npages >= 1 && i + r->npages <= s->npages);
      if (r->npages < 1 || i + r->npages > s->npages) return bad;
      if (r->kind == KIND_FREE) {
        CHECK(!prev_free);
        CHECK(r[r->npages - 1].back == r->npages - 1);
        for (size_t k = 1; k < r->npages; k++)
          CHECK(r[k].kind == KIND_FREE && r[k].flags == 0 && (r[k].back == 0 || k == r->npages - 1));
        bool binned = false;
        for (desc_t *c = h->pages.bins[run_bin(r->npages)]; c && !binned; c = c->next) binned = c == r;
        CHECK(binned);
        free_pages += r->npages;
        if (r->flags & FLAG_DIRTY) dirty += r->npages;
      } else {
        for (size_t k = 1; k < r->npages; k++) CHECK(r[k].back == k && r[k].kind == KIND_INTERIOR);
      }
      prev_free = r->kind == KIND_FREE;
      i += r->npages;
    }
    CHECK(free_pages == s->free_pages);
  }
  CHECK(dirty == h->pages.dirty_pages);
  return bad;
#undef CHECK
}

/* For design_check: runs `body` for every run head r of kind `k` in h's segments, in address
 * order (walks run heads via npages, so free runs and runs of other kinds are stepped over). */
#define HEAP_FOR_EACH_RUN(h, k, r, body) \
  for (segment_t *s_ = (h)->pages.segments; s_; s_ = s_->next) \
    for (size_t i_ = s_->first; i_ < s_->npages; i_ += s_->desc[i_].npages ? s_->desc[i_].npages : 1) { \
      desc_t *r = &s_->desc[i_]; \
      if (r->kind == (k)) { body } \
    }

/* Walks h's page manager and the design's structures (caller owns h). */
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
static lock_t huge_cache_lock;
static uintptr_t fork_skipped;   /* bit mask: which of the global locks we did not take */

static void fork_prepare(void) {
  fork_skipped = 0;
  if (lock_held_by_self(&registry_lock)) fork_skipped |= 1; else lock_acquire(&registry_lock);
  if (lock_held_by_self(&huge_cache_lock)) fork_skipped |= 2; else lock_acquire(&huge_cache_lock);
  for (heap_t *h = registry; h; h = h->next_all) {
    h->fork_taken = !lock_held_by_self(&h->lock);
    if (h->fork_taken) lock_acquire(&h->lock);
  }
}

static void fork_parent(void) {
  for (heap_t *h = registry; h; h = h->next_all) if (h->fork_taken) lock_release(&h->lock);
  if (!(fork_skipped & 2)) lock_release(&huge_cache_lock);
  if (!(fork_skipped & 1)) lock_release(&registry_lock);
}

static void region_fork_child(void);   /* region.h */

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
  region_fork_child();
}

#endif
