/* osobj.h — objects with their own mappings (from the OS threshold, LOCUS_OS_THRESHOLD, 1 MiB,
 * up): aligned to the segment size so the segment map finds their header, [header page]
 * [object ...]; the caches that keep freed ones resident for the next (spans, below, in every
 * build without GUARD_PAGES and HUGE_RELEASE; the pool of pieces, next, in the secure build);
 * and the naming of the faults that guard pages and unmapped objects raise (the secure build).
 *
*
 * The huge cache. A program that replaces big buffers (free one, calloc another of some other
 * size) would otherwise have every new buffer mapped afresh: the kernel zero-fills each page on
 * its first touch, one fault per page, and that cost 4x glibc's time on such a workload (glibc
 * reuses its heap). So freed OS objects are not unmapped but kept, resident, as pieces in a
 * pool, and a new OS object is assembled from them:
 *  - in place, when a run of address-contiguous pieces starting at an aligned address holds
 *    it (best fit; what the object does not need stays in the pool): no system call at all;
 *  - otherwise in a fresh aligned mapping into which pieces are moved with
 *    mremap(MREMAP_FIXED): the kernel moves their page tables, so the pages come along without
 *    a fault or a copy, whatever their sizes; only what the pool lacks is faulted in fresh.
 * Either way no resident page of the pool is lost to a size mismatch, and calloc clears only
 * the pages that came from the pool (fresh ones read as zero).
 *
 * How much it keeps. The pool never holds more than the program's recent demand: at most the
 * peak of live OS-object bytes over the last one to two LOCUS_DECAY_MS windows minus the bytes
 * live now, so live objects plus pool never exceed that recent peak (a program that replaces
 * its buffers keeps about one buffer's worth; one that frees its big buffers for good keeps
 * them only until its demand decays). Pieces idle for LOCUS_DECAY_MS are unmapped (checked on
 * every huge allocation and free, including page-run ones), locus_purge()/malloc_trim empty
 * the pool, LOCUS_HUGE_CACHE caps it, and the immediate policy does not cache at all.
 * (The previous cache, up to 8 whole mappings of 16 MiB with a quarter resident, made the
 * program fault in nearly every page of such a workload; keeping it all resident without a
 * demand bound made sqlite's peak RSS 25% higher.)
 *
 * Mappings and parts. mremap moves one kernel mapping (VMA) at a time, and a piece moved into
 * an object stays a mapping of its own, so an object records its parts: the ranges of it that
 * each lie within one mapping. A freed object goes to the pool as one piece per part. The
 * first part (the header's) keeps its segment-map entries while it waits in the pool, so a
 * double free is still reported as one; every other pool range has none. Segment-map entries
 * of a range are cleared while the range is still ours (in the pool, under the lock), before
 * it is moved away or unmapped. The number of parts of live objects is bounded, so the
 * process's mapping count cannot run into the kernel's limit.
 *
 * Locking: the pool and the demand window are under huge_cache_lock; pieces are taken out of
 * the pool under it and moved, cleared or unmapped after it is released. */
#ifndef LOCUS_OSOBJ_H
#define LOCUS_OSOBJ_H

#define OS_OBJ_MAGIC 0x4c6f6375734f626aull   /* "LocusObj" */
enum { OS_OBJ_LIVE = 1, OS_OBJ_CACHED = 2, OS_OBJ_QUEUED = 3 /* a region's, freed by free() */ };
#define OS_OBJ_PARTS 8            /* most mappings one object is made of */
#define HUGE_POOL_PIECES 32       /* most pieces the pool holds */
#define HUGE_PARTS_MAX 16384      /* past this many parts in live objects, no more gathering */

typedef struct os_obj {
  uint64_t magic;          /* OS_OBJ_MAGIC ^ address: a real header */
  size_t map_size;         /* bytes of the object, header included (whole pages) */
  size_t offset;           /* user pointer - object base */
  uint32_t state;
  uint32_t nparts;         /* part i is [part_end[i-1], part_end[i]) (part 0 from 0) */
  size_t part_end[OS_OBJ_PARTS];
  size_t span;             /* a span's object (below): the bytes mapped for it; else 0 */
  size_t resident;         /* a span's object: bytes from the base that may be resident (at
                              least map_size: the rest, its idle tail, is in huge_tail_bytes) */
  struct locus_region *region;   /* a big region object's region, else NULL: the owner that
                                    free() hands the object to (free.h) */
} os_obj_t;

/* The rest of an object's header page is its owner's: a region keeps its list of big objects
 * there (region.h). At least OS_OBJ_OWNER_BYTES, right after the header (the user's object
 * starts a page or more from the base). */
#define OS_OBJ_OWNER_BYTES 64
_Static_assert(sizeof(os_obj_t) + OS_OBJ_OWNER_BYTES <= 4096, "the owner's area fits the header page");
static inline void *os_obj_owner_area(os_obj_t *o) { return o + 1; }

typedef struct huge_piece {
  char *addr;
  size_t len;
  uint64_t freed_ms;
  bool head;               /* a freed object's first part: its header and segment-map entries */
} huge_piece_t;

static huge_piece_t huge_pool[HUGE_POOL_PIECES];
static unsigned huge_pool_n;
static _Atomic size_t huge_cache_bytes;               /* bytes in the pool (all resident) */
static _Atomic size_t huge_tail_bytes;                /* live span objects' resident - map_size */
static _Atomic uint64_t huge_cache_oldest_ms;         /* no piece was freed before this */
static size_t huge_demand_peak, huge_demand_prev;     /* live-byte peaks: this window, the last */
static uint64_t huge_demand_since;                    /* start of this window */
static _Atomic uint64_t os_objects_live, os_objects_bytes, os_parts_live;

/* The span cache (see "spans" below): whole mappings of freed objects, by size. */
#define HUGE_SPANS 64             /* most spans the cache holds */
#define HUGE_SPAN_SLACK (4 * SEGMENT_SIZE)   /* cached bytes past the demand bound (below) */
typedef struct huge_span {
  char *addr;
  size_t span;             /* bytes mapped (whole granules) */
  size_t resident;         /* bytes from addr that may be resident (the rest never touched) */
  uint64_t freed_ms;
} huge_span_t;
static huge_span_t huge_spans[HUGE_SPANS];
static unsigned huge_spans_n;

/* The oldest cached span, or -1. */
static int huge_spans_oldest(void) {
  int best = -1;
  for (unsigned i = 0; i < huge_spans_n; i++)
    if (best < 0 || huge_spans[i].freed_ms < huge_spans[best].freed_ms) best = (int)i;
  return best;
}

static inline size_t os_obj_usable(const os_obj_t *o) { return o->map_size - o->offset; }
static inline size_t os_obj_part_start(const os_obj_t *o, unsigned i) { return i ? o->part_end[i - 1] : 0; }

/* Counts an unmapping of pool or object memory as given back. */
static void huge_unmap(void *p, size_t size) {
  os_unmap(p, size);
  atomic_fetch_add_explicit(&os_bytes_discarded, size, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_discard_calls, 1, memory_order_relaxed);
}

/* Mitigation GUARD_PAGES maps one inaccessible page after every OS object (and puts the object
 * against it): a linear overflow faults at once instead of running into the next mapping. */
static inline size_t os_obj_guard(void) { return mitigation(GUARD_PAGES) ? os_page_size : 0; }

/* ... and a canary in the 16 bytes before the object (in its header page), checked on free:
 * an underflow is reported there. The same 16-byte canaries (keyed values of their address)
 * frame huge run objects (below). */
static inline uintptr_t big_canary(const void *at) {
  return ((uintptr_t)at ^ segment_cookie) * 0x9E3779B97F4A7C15ull;
}
static void big_canary_set(char *at) {
  uintptr_t *w = (uintptr_t *)at;
  w[0] = big_canary(w);
  w[1] = big_canary(w + 1);
}
static bool big_canary_ok(const char *at) {
  const uintptr_t *w = (const uintptr_t *)at;
  return w[0] == big_canary(w) && w[1] == big_canary(w + 1);
}
static void os_obj_canary_set(char *p) { big_canary_set(p - 16); }
static void os_obj_canary_check(const char *p, const char *call) {
  if (!big_canary_ok(p - 16)) locus_fatal(call, "heap underflow (canary overwritten) before", p);
}

/* ---- naming the faults (mitigation FAULT_NAMING) ---------------------------------------------
 * A guard page or an unmapped object ends the program with SIGSEGV at the faulting access. So
 * that it says what happened, like every other check, FAULT_NAMING installs a SIGSEGV
 * handler (only where the program has none at start-up; a handler the program installs later
 * replaces it) that prints one line when the address is a segment's guard page, the guard page
 * after an own-mapping object, or one of the last GUARD_FREED objects unmapped on free, then
 * returns with the default action restored: the access faults again and ends the program as it
 * would have. The handler only reads memory that stays mapped and writes with a raw system call
 * (print.h). */
#define GUARD_FREED 64
static struct { _Atomic uintptr_t start, end, user; } guard_freed[GUARD_FREED];
static _Atomic unsigned guard_freed_next;

static void guard_note_unmapped(const os_obj_t *o, size_t size) {
  unsigned i = atomic_fetch_add_explicit(&guard_freed_next, 1, memory_order_relaxed) % GUARD_FREED;
  atomic_store_explicit(&guard_freed[i].start, 0, memory_order_relaxed);   /* torn reads see none */
  atomic_store_explicit(&guard_freed[i].end, (uintptr_t)o + size, memory_order_relaxed);
  atomic_store_explicit(&guard_freed[i].user, (uintptr_t)o + o->offset, memory_order_relaxed);
  atomic_store_explicit(&guard_freed[i].start, (uintptr_t)o, memory_order_release);
}

/* Whether a lies in one of the last GUARD_FREED objects unmapped on free; *user: its pointer. */
static bool guard_freed_find(uintptr_t a, uintptr_t *user) {
  for (unsigned i = 0; i < GUARD_FREED; i++) {
    uintptr_t start = atomic_load_explicit(&guard_freed[i].start, memory_order_acquire);
    if (start && a >= start && a < atomic_load_explicit(&guard_freed[i].end, memory_order_relaxed)) {
      *user = atomic_load_explicit(&guard_freed[i].user, memory_order_relaxed);
      return true;
    }
  }
  return false;
}

/* What the faulting address a is, in words, and the object it concerns (*at), or NULL. */
static const char *guard_explain(uintptr_t a, uintptr_t *at) {
  *at = a;
  if (segmap_get((void *)a) == GRANULE_SEGMENT &&
      ((a & SEGMENT_MASK) >> os_page_shift) == (SEGMENT_SIZE >> os_page_shift) - segment_guard_pages())
    return "heap overflow into the guard page at the end of a segment";
  if (segmap_get((void *)a) == GRANULE_SEGMENT) {
    const segment_t *s = segment_of((void *)a);
    size_t i = (a & SEGMENT_MASK) >> os_page_shift;
    if (mitigation(GUARD_PAGES) && i >= s->committed && i < s->npages) {
      *at = (uintptr_t)s;
      return "heap overflow into the unused reserve of the segment";
    }
    const desc_t *d = desc_head((segment_t *)s, (void *)a);
    if (d->kind == KIND_HUGE && (d->flags & FLAG_SEALED)) {   /* huge.h */
      *at = (uintptr_t)huge_user(d);
      return "use after free of";
    }
  }
  /* the object whose last page is just before a's page */
  uintptr_t g = (a - os_page_size) & ~SEGMENT_MASK;
  while (g && segmap_get((void *)g) == GRANULE_OS_TAIL) g -= SEGMENT_SIZE;
  const os_obj_t *o = (const os_obj_t *)g;
  if (g && segmap_get(o) == GRANULE_OS_HEAD && o->magic == (OS_OBJ_MAGIC ^ g) &&
      a >= g + o->map_size && a < g + o->map_size + os_obj_guard()) {
    *at = g + o->offset;
    return "heap overflow into the guard page after";
  }
  return guard_freed_find(a, at) ? "use after free of" : NULL;
}

static void guard_fault(int sig, siginfo_t *si, void *ctx) {
  (void)sig; (void)ctx;
  uintptr_t at;
  const char *what = guard_explain((uintptr_t)si->si_addr, &at);
  if (what) locus_printf(2, "locus: memory access at %p: %s %p\n", si->si_addr, what, (void *)at);
}   /* SA_RESETHAND restored the default action: the access faults again */

static void guard_fault_install(void) {
  struct sigaction old, sa;
  if (sigaction(SIGSEGV, NULL, &old) != 0 || (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL)) return;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = guard_fault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
}


static void os_obj_unmap(os_obj_t *o) {
  size_t size = o->span ? o->span : o->map_size + os_obj_guard();
  if (mitigation(FAULT_NAMING)) guard_note_unmapped(o, size);
  atomic_fetch_sub_explicit(&os_parts_live, o->nparts, memory_order_relaxed);
  segmap_set(o, size, GRANULE_NONE, GRANULE_NONE);
  huge_unmap(o, size);
}

/* Clears the segment-map entries of a head piece (before it changes hands). */
static void huge_piece_unregister(huge_piece_t *pc) {
  if (!pc->head) return;
  segmap_set(pc->addr, pc->len, GRANULE_NONE, GRANULE_NONE);
  pc->head = false;
}

/* ---- the pool (caller holds huge_cache_lock) --------------------------------------------- */

/* The recent peak of live OS-object bytes: the larger of this window's and the last one's.
 * A window lasts LOCUS_DECAY_MS; after two idle windows the peak is what is live now. */
static size_t huge_demand(uint64_t now, size_t live) {
  if (now - huge_demand_since >= opt.decay_ms) {
    huge_demand_prev = now - huge_demand_since >= 2 * opt.decay_ms ? live : huge_demand_peak;
    huge_demand_peak = live;
    huge_demand_since = now;
  }
  if (live > huge_demand_peak) huge_demand_peak = live;
  return huge_demand_peak > huge_demand_prev ? huge_demand_peak : huge_demand_prev;
}

/* Removes the first `n` bytes of piece i from the pool into *out (the rest stays). */
static void huge_pool_take(unsigned i, size_t n, huge_piece_t *out) {
  huge_piece_t *pc = &huge_pool[i];
  huge_piece_unregister(pc);
  *out = (huge_piece_t){ pc->addr, n, pc->freed_ms, false };
  pc->addr += n;
  pc->len -= n;
  huge_cache_bytes -= n;
  if (!pc->len) huge_pool[i] = huge_pool[--huge_pool_n];
}

/* The piece that starts at `addr`, or -1. */
static int huge_pool_find(const char *addr) {
  for (unsigned i = 0; i < huge_pool_n; i++) if (huge_pool[i].addr == addr) return (int)i;
  return -1;
}

/* The oldest piece (lowest index among equals), or -1. */
static int huge_pool_oldest(void) {
  int best = -1;
  for (unsigned i = 0; i < huge_pool_n; i++)
    if (best < 0 || huge_pool[i].freed_ms < huge_pool[best].freed_ms) best = (int)i;
  return best;
}

static void huge_pool_note_oldest(void) {
  int i = huge_pool_oldest(), j = huge_spans_oldest();
  uint64_t a = i < 0 ? UINT64_MAX : huge_pool[i].freed_ms, b = j < 0 ? UINT64_MAX : huge_spans[j].freed_ms;
  huge_cache_oldest_ms = a < b ? a : b;
}

/* Drops pieces into drop[] (for unmapping after the lock is released): those freed before
 * `older_than`, then the oldest bytes until at most `keep` bytes remain. Returns how many. */
static unsigned huge_pool_shrink(uint64_t older_than, size_t keep, huge_piece_t *drop) {
  unsigned n = 0;
  for (unsigned i = 0; i < huge_pool_n;) {
    if (huge_pool[i].freed_ms < older_than) huge_pool_take(i, huge_pool[i].len, &drop[n++]);
    else i++;
  }
  while (huge_cache_bytes > keep) {
    int i = huge_pool_oldest();
    huge_piece_t *pc = &huge_pool[i];
    size_t excess = huge_cache_bytes - keep;
    if (excess >= pc->len) {
      huge_pool_take((unsigned)i, pc->len, &drop[n++]);
    } else {   /* the tail of the oldest piece is enough */
      if (pc->head) segmap_set(pc->addr, pc->len, GRANULE_NONE, GRANULE_NONE);
      pc->len -= excess;
      if (pc->head) segmap_set(pc->addr, pc->len, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
      drop[n++] = (huge_piece_t){ pc->addr + pc->len, excess, pc->freed_ms, false };
      huge_cache_bytes -= excess;
    }
  }
  huge_pool_note_oldest();
  return n;
}

static void huge_pool_unmap(const huge_piece_t *drop, unsigned n) {
  for (unsigned i = 0; i < n; i++) huge_unmap(drop[i].addr, drop[i].len);
}

/* The time before which a piece has been idle too long. */
static inline uint64_t huge_idle_before(uint64_t now) { return now > opt.decay_ms ? now - opt.decay_ms : 0; }

/* ---- spans (every build without GUARD_PAGES and HUGE_RELEASE) ------------------------------
 * There an OS object lives in a span: a mapping of whole segment-map granules (huge_span_for:
 * few sizes), of which only the pages objects used are ever touched (the rest is address
 * space). A freed object's span goes to the span cache whole,
 * its pages resident, and a new object of any thread takes the cached span of the smallest
 * fitting size whose resident bytes come closest to its own: no system call at all, since
 * the span is at an aligned address and its pages are there. The object grows in place
 * within its span (realloc: no mremap). Servers that hand 1-5 MiB buffers between threads
 * then reuse the same few spans without mmap, munmap or mremap once warm (the pool's pieces
 * above, moved into fresh mappings with mremap, cost about 2,000 system calls a second on
 * bench/xlarge). A reused span's resident pages past the object, its idle tail, are kept up
 * to twice the object's size or two granules, whichever is more, and only the rest is
 * discarded (madvise): pages kept spare the next, bigger, object its page faults, which cost
 * more than system calls. (Discarding the whole tail once it passed that bound made
 * bench/bigbuf, buffers of 5-25 MiB replaced at random, fault in 22% more pages; keeping every
 * tail cost it 9% more peak RSS.) The tails count as committed memory (huge_tail_bytes).
 * The cache's cap is the pool's: at most the recent peak of live OS-object bytes minus those
 * live now (plus HUGE_SPAN_SLACK), at most LOCUS_HUGE_CACHE; past it the oldest
 * spans lose their tail pages (madvise, under the lock: the span stays cached) or go whole; a
 * span idle for LOCUS_DECAY_MS is unmapped, so when demand falls the cache empties.
 * A cached span keeps its head granule's segment-map entry (a double free is still seen as
 * one), cleared under the lock when the span leaves the cache to be unmapped. */
static inline bool huge_spans_on(void) {
  return !mitigation(GUARD_PAGES) && !mitigation(HUGE_RELEASE) && opt.discard != DISCARD_IMMEDIATE && opt.huge_cache;
}

/* Spans come in few sizes, so that a cached one fits most requests: eight granules (32 MiB of
 * address space, never touched beyond what objects use) at least, then powers of two up to
 * 64 MiB, whole granules past that. (With two granules at least, tests/design_vam's buffers
 * of 4-12 MiB found no fitting span half as often, and faulted in 50% more pages; with four,
 * bench/bigbuf's of 5-25 MiB missed the cache one time in nine, 40% more page faults.) */
static inline size_t huge_span_for(size_t map_size) {
  size_t g = align_up(map_size, SEGMENT_SIZE) >> SEGMENT_SHIFT;
  if (g < 8) g = 8;
  else if (g < 16 && !is_pow2(g)) g = (size_t)2 << log2_floor(g);
  return g << SEGMENT_SHIFT;
}

/* Whether cached span a suits an object of `need` bytes better than b: the smaller span, then
 * the fewest resident bytes that hold it, else the most. */
static bool huge_span_better(const huge_span_t *a, const huge_span_t *b, size_t need) {
  if (a->span != b->span) return a->span < b->span;
  bool fa = a->resident >= need, fb = b->resident >= need;
  if (fa != fb) return fa;
  return fa ? a->resident < b->resident : a->resident > b->resident;
}

/* Removes span i from the cache into *out (under the lock); `unmap`: it goes to be unmapped,
 * so its head's segment-map entry is cleared now. */
static void huge_span_remove(unsigned i, huge_span_t *out, bool unmap) {
  *out = huge_spans[i];
  if (unmap) segmap_set(out->addr, SEGMENT_SIZE, GRANULE_NONE, GRANULE_NONE);
  huge_cache_bytes -= out->resident;
  huge_spans[i] = huge_spans[--huge_spans_n];
}

/* Drops spans into drop[] (to unmap after the lock is released): those freed before
 * `older_than`, then, once more than `keep` + `slack` bytes remain, the oldest until at most
 * `keep` remain, the last one cut back by discarding its tail instead when that
 * is enough. Returns how many. Caller holds the lock. */
static unsigned huge_spans_shrink(uint64_t older_than, size_t keep, size_t slack, huge_span_t *drop) {
  unsigned n = 0;
  for (unsigned i = 0; i < huge_spans_n;) {
    if (huge_spans[i].freed_ms < older_than) huge_span_remove(i, &drop[n++], true);
    else i++;
  }
  if (huge_cache_bytes <= keep || huge_cache_bytes - keep <= slack) keep = huge_cache_bytes;
  while (huge_cache_bytes > keep && huge_spans_n) {
    unsigned i = (unsigned)huge_spans_oldest();
    huge_span_t *sp = &huge_spans[i];
    size_t excess = align_up(huge_cache_bytes - keep, os_page_size);
    if (excess + os_page_size >= sp->resident) {
      huge_span_remove(i, &drop[n++], true);
    } else {
      sp->resident -= excess;
      huge_cache_bytes -= excess;
      os_discard(sp->addr + sp->resident, excess);
    }
  }
  huge_pool_note_oldest();
  return n;
}

static void huge_spans_unmap(const huge_span_t *drop, unsigned n) {
  for (unsigned i = 0; i < n; i++) huge_unmap(drop[i].addr, drop[i].span);
}

/* Drops cached pieces freed before `older_than` (all with UINT64_MAX). Returns bytes freed. */
static size_t huge_cache_purge(uint64_t older_than) {
  if (!atomic_load_explicit(&huge_cache_bytes, memory_order_relaxed)) return 0;
  huge_piece_t drop[HUGE_POOL_PIECES];
  huge_span_t sdrop[HUGE_SPANS + 2];
  size_t before = atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed);
  lock_acquire(&huge_cache_lock);
  unsigned n = huge_pool_shrink(older_than, SIZE_MAX, drop);
  unsigned m = huge_spans_shrink(older_than, SIZE_MAX, 0, sdrop);
  lock_release(&huge_cache_lock);
  huge_pool_unmap(drop, n);
  huge_spans_unmap(sdrop, m);
  return atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed) - before;
}

/* The decay check, on every huge allocation and free: pieces idle for LOCUS_DECAY_MS go. */
static inline void huge_cache_tick(void) {
  uint64_t oldest = atomic_load_explicit(&huge_cache_oldest_ms, memory_order_relaxed);
  if (!atomic_load_explicit(&huge_cache_bytes, memory_order_relaxed)) return;
  uint64_t before = huge_idle_before(now_ms());
  if (oldest < before) huge_cache_purge(before);
}

/* Picks pool memory for an object of `need` bytes whose base is aligned to `align` (under the
 * lock). In place: a run of contiguous pieces from an aligned one, the smallest that holds
 * `need` (returns true). Otherwise pieces to move into a fresh mapping: the smallest piece
 * that holds what is still missing, else the biggest, while parts are left. The pieces taken
 * are in take[], in object order; *ntake says how many. */
static bool huge_pool_pick(size_t need, size_t align, bool gather, huge_piece_t *take, unsigned *ntake) {
  int best = -1;
  size_t best_total = 0;
  for (unsigned i = 0; i < huge_pool_n; i++) {
    if ((uintptr_t)huge_pool[i].addr & (align - 1)) continue;
    size_t total = huge_pool[i].len;
    int j = (int)i;
    for (unsigned parts = 1; total < need && parts < OS_OBJ_PARTS; parts++) {
      if ((j = huge_pool_find(huge_pool[j].addr + huge_pool[j].len)) < 0) break;
      total += huge_pool[j].len;
    }
    if (total >= need && (best < 0 || total < best_total)) { best = (int)i; best_total = total; }
  }
  unsigned n = 0;
  size_t got = 0;
  if (best >= 0) {
    char *at = huge_pool[best].addr;
    while (got < need) {
      unsigned i = (unsigned)huge_pool_find(at);
      size_t k = need - got < huge_pool[i].len ? need - got : huge_pool[i].len;
      huge_pool_take(i, k, &take[n++]);
      got += k;
      at += k;
    }
  } else if (gather) {
    while (got < need && n < OS_OBJ_PARTS - 1 && huge_pool_n) {
      size_t missing = need - got;
      int pick = -1;
      for (unsigned i = 0; i < huge_pool_n; i++) {
        size_t len = huge_pool[i].len;
        if (pick < 0) { pick = (int)i; continue; }
        size_t cur = huge_pool[pick].len;
        if (len >= missing ? cur < missing || len < cur : cur < missing && len > cur) pick = (int)i;
      }
      size_t k = missing < huge_pool[pick].len ? missing : huge_pool[pick].len;
      huge_pool_take((unsigned)pick, k, &take[n++]);
      got += k;
    }
  }
  huge_pool_note_oldest();
  *ntake = n;
  return best >= 0;
}

/* ---- OS objects -------------------------------------------------------------------------- */

/* Memory for an OS object of map_size bytes: a cached span or a new one. Returns its base
 * (NULL if the OS refused), *span its size, *dirty the bytes from the base that may hold old
 * data (the rest reads as zero). */

static char *huge_span_take(size_t map_size, size_t *span, size_t *dirty) {
  uint64_t now = now_ms();
  size_t live = atomic_load_explicit(&os_objects_bytes, memory_order_relaxed);
  huge_span_t got = { NULL, 0, 0, 0 };
  size_t cut = 0;
  lock_acquire(&huge_cache_lock);
  huge_demand(now, live + map_size);
  int best = -1;
  for (unsigned i = 0; i < huge_spans_n; i++)
    if (huge_spans[i].span >= map_size && (best < 0 || huge_span_better(&huge_spans[i], &huge_spans[best], map_size)))
      best = (int)i;
  if (best >= 0) {
    huge_span_remove((unsigned)best, &got, false);
    huge_pool_note_oldest();
    /* a small object does not pin all of a big one's pages (see above) */
    if (got.resident > map_size) {
      size_t tail = got.resident - map_size, room = 2 * (map_size > SEGMENT_SIZE ? map_size : SEGMENT_SIZE);
      if (tail > room) { cut = tail - room; tail = room; }
      huge_tail_bytes += tail;
    }
  }
  lock_release(&huge_cache_lock);
  huge_cache_tick();
  if (got.addr) {
    if (cut) {
      got.resident -= cut;
      os_discard(got.addr + got.resident, cut);
    }
    *span = got.span;
    *dirty = got.resident;
    return got.addr;
  }
  size_t want = huge_span_for(map_size), exact = align_up(map_size, SEGMENT_SIZE);
  char *p = os_map_aligned(want, SEGMENT_SIZE);
  if (!p && want > exact) p = os_map_aligned(want = exact, SEGMENT_SIZE);
  if (!p && memory_refused(NULL)) p = os_map_aligned(want = exact, SEGMENT_SIZE);
  *span = want;
  *dirty = 0;
  return p;
}

/* A freed span object's span goes to the cache, within what recent demand allows. */
static void huge_span_put(os_obj_t *o, size_t live) {
  size_t size = o->map_size, resident = o->resident > size ? o->resident : size;
  huge_span_t sp = { (char *)o, o->span, resident, now_ms() }, drop[HUGE_SPANS + 2];
  unsigned n = 0;
  o->state = OS_OBJ_CACHED;
  atomic_fetch_sub_explicit(&os_parts_live, o->nparts, memory_order_relaxed);
  if (size > SEGMENT_SIZE) segmap_set(sp.addr + SEGMENT_SIZE, size - SEGMENT_SIZE, GRANULE_NONE, GRANULE_NONE);
  lock_acquire(&huge_cache_lock);
  huge_tail_bytes -= resident - size;   /* (the tail is the cached span's now) */
  size_t peak = huge_demand(sp.freed_ms, live);
  size_t keep = peak - live < opt.huge_cache ? peak - live : opt.huge_cache & ~(os_page_size - 1);
  /* The slack (16 MiB, within LOCUS_HUGE_CACHE) spares system calls and page faults
   * at every small swing of demand: with one granule of slack, bench/xlarge missed the cache
   * three times as often (each miss a fresh span, every page of it faulted in). */
  size_t slack = opt.huge_cache - keep < HUGE_SPAN_SLACK ? opt.huge_cache - keep : HUGE_SPAN_SLACK;
  if (huge_spans_n == HUGE_SPANS) huge_span_remove((unsigned)huge_spans_oldest(), &drop[n++], true);
  huge_spans[huge_spans_n++] = sp;
  huge_cache_bytes += resident;
  n += huge_spans_shrink(huge_idle_before(sp.freed_ms), keep, slack, drop + n);
  lock_release(&huge_cache_lock);
  huge_spans_unmap(drop, n);
}

static void *os_obj_alloc(size_t size, size_t align, bool zero) {
  size_t page = os_page_size, user_align = align > QUANTUM ? align : QUANTUM;
  if (align < page) align = page;
  if (size > PTRDIFF_MAX - 2 * align - SEGMENT_SIZE) return NULL;
  size_t offset = align_up(sizeof(os_obj_t), align);   /* header page (or one alignment unit) */
  size_t map_size = align_up(offset + size, page);
  /* GUARD_PAGES: the object ends against the guard page, up to its alignment (the offset only
   * grows: the aligned-down distance is still at least the header's) */
  if (mitigation(GUARD_PAGES)) offset = (map_size - size) & ~(user_align - 1);
  size_t base_align = align > SEGMENT_SIZE ? align : SEGMENT_SIZE;
  size_t span = map_size + os_obj_guard();   /* the object's pages and its guard (secure) */
  huge_piece_t take[OS_OBJ_PARTS];
  unsigned ntake = 0;
  bool in_place = false, spans = align <= SEGMENT_SIZE && huge_spans_on();
  if (!spans && opt.discard != DISCARD_IMMEDIATE) {
    uint64_t now = now_ms();
    size_t live = atomic_load_explicit(&os_objects_bytes, memory_order_relaxed);
    bool gather = atomic_load_explicit(&os_parts_live, memory_order_relaxed) < HUGE_PARTS_MAX;
    lock_acquire(&huge_cache_lock);
    huge_demand(now, live + map_size);
    if (huge_pool_n) in_place = huge_pool_pick(map_size, base_align, gather, take, &ntake) &&
                                   !mitigation(GUARD_PAGES) && !mitigation(HUGE_RELEASE);
    lock_release(&huge_cache_lock);
    huge_cache_tick();
  }
  os_obj_t *o;
  size_t dirty = 0;                  /* bytes from the base that may hold old data */
  size_t ends[OS_OBJ_PARTS], span_size = 0;
  unsigned nparts = 0;
  if (spans) {
    if (!(o = (os_obj_t *)huge_span_take(map_size, &span_size, &dirty))) return NULL;
    ends[nparts++] = map_size;
  } else if (in_place) {
    o = (os_obj_t *)take[0].addr;
    for (unsigned i = 0; i < ntake; i++) ends[nparts++] = (dirty += take[i].len);
  } else {
    o = os_map_aligned(span, base_align);
    if (!o && memory_refused(NULL)) o = os_map_aligned(span, base_align);
    if (!o) {
      huge_pool_unmap(take, ntake);
      return NULL;
    }
    for (unsigned i = 0; i < ntake; i++) {
      /* The pages of the piece replace those of the fresh mapping at o + dirty. */
      if (OS_CALL(mremap(take[i].addr, take[i].len, take[i].len, MREMAP_MAYMOVE | MREMAP_FIXED, (char *)o + dirty)) != MAP_FAILED)
        atomic_fetch_sub_explicit(&os_bytes_mapped, take[i].len, memory_order_relaxed);
      else
        huge_unmap(take[i].addr, take[i].len);   /* fresh pages stay there instead */
      ends[nparts++] = (dirty += take[i].len);
    }
    if (dirty < map_size) ends[nparts++] = map_size;
    /* secure: the guard page after the object (never in place: a new object always gets a
     * fresh mapping with a guard, its pool pieces moved into it) */
    if (os_obj_guard() && OS_CALL(mprotect((char *)o + map_size, os_obj_guard(), PROT_NONE)) != 0) {
      huge_unmap(o, span);   /* the mapping limit */
      return NULL;
    }
  }
  o->map_size = map_size;
  o->offset = offset;
  o->magic = OS_OBJ_MAGIC ^ (uintptr_t)o;
  o->nparts = nparts;
  memcpy(o->part_end, ends, nparts * sizeof *ends);
  o->span = span_size;
  o->resident = dirty > map_size ? dirty : map_size;
  segmap_set(o, map_size, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
  if (zero && dirty > offset) memset((char *)o + offset, 0, (dirty < offset + size ? dirty : offset + size) - offset);
  o->state = OS_OBJ_LIVE;
  o->region = NULL;
  atomic_fetch_add_explicit(&os_parts_live, nparts, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_objects_live, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_objects_bytes, map_size, memory_order_relaxed);
  if (mitigation(CANARIES)) os_obj_canary_set((char *)o + offset);
  return (char *)o + offset;
}

/* The header of the OS object whose user pointer is p (in the pool or not), or NULL. */
static os_obj_t *os_obj_find(const void *p) {
  uintptr_t g = (uintptr_t)p & ~SEGMENT_MASK;
  while (segmap_get((void *)g) == GRANULE_OS_TAIL) g -= SEGMENT_SIZE;
  os_obj_t *o = (os_obj_t *)g;
  if (segmap_get(o) != GRANULE_OS_HEAD || o->magic != (OS_OBJ_MAGIC ^ g) || (char *)o + o->offset != p)
    return NULL;
  return o;
}

/* The header of the live OS object holding p, checked; ends the program on a bad pointer. */
static os_obj_t *os_obj_of(const void *p, const char *call) {
  os_obj_t *o = os_obj_find(p);
  if (!o) locus_fatal(call, "invalid pointer", p);
  if (o->state != OS_OBJ_LIVE) locus_fatal(call, "double free", p);
  return o;
}

/* A freed object goes to the pool, one piece per part, within what recent demand allows. */
static void os_obj_free(void *p, const char *call) {
  os_obj_t *o = os_obj_of(p, call);
  if (mitigation(CANARIES)) os_obj_canary_check(p, call);
  size_t size = o->map_size;
  size_t live = atomic_fetch_sub_explicit(&os_objects_bytes, size, memory_order_relaxed) - size;
  atomic_fetch_sub_explicit(&os_objects_live, 1, memory_order_relaxed);
  if (opt.discard == DISCARD_IMMEDIATE || !opt.huge_cache) {
    os_obj_unmap(o);   /* secure: a later access to the object faults */
    huge_cache_tick();
    return;
  }
  if (o->span) {
    huge_span_put(o, live);
    return;
  }
  unsigned nparts = o->nparts;
  size_t ends[OS_OBJ_PARTS];
  memcpy(ends, o->part_end, nparts * sizeof *ends);
  char *base = (char *)o;             /* where the pool pieces are */
  o->state = OS_OBJ_CACHED;
  if (mitigation(HUGE_RELEASE)) {
    /* HUGE_RELEASE: the object's pages move away (mremap: their page tables move, without a fault
     * or a copy) to an address the program never had, and its own addresses are unmapped, the
     * guard page too: a later access to the object faults (the fault handler names it while
     * it is among the last freed), and no piece keeps segment-map entries (a second free sees
     * unmapped memory: the ring names it a double free). The pages stay resident: reusing
     * them costs no fault. (Making them inaccessible in place costs an mprotect of every page
     * table entry at each free and each reuse: 8x the system time of a buffer-replacing
     * workload.) */
    segmap_set(o, size, GRANULE_NONE, GRANULE_NONE);
    if (mitigation(FAULT_NAMING)) guard_note_unmapped(o, size + os_obj_guard());
    base = os_map(size);
    bool moved = base != NULL;
    for (unsigned i = 0; moved && i < nparts; i++) {
      size_t start = i ? ends[i - 1] : 0;
      moved = OS_CALL(mremap((char *)o + start, ends[i] - start, ends[i] - start, MREMAP_MAYMOVE | MREMAP_FIXED, base + start)) != MAP_FAILED;
    }
    if (!moved) {   /* the mapping limit: unmapped instead */
      if (base) huge_unmap(base, size);
      atomic_fetch_sub_explicit(&os_parts_live, nparts, memory_order_relaxed);
      huge_unmap(o, size + os_obj_guard());
      huge_cache_tick();
      return;
    }
    atomic_fetch_sub_explicit(&os_bytes_mapped, size, memory_order_relaxed);   /* counted again by os_map */
    huge_unmap((char *)o + size, os_obj_guard());
  } else {
    /* Only the head part keeps segment-map entries (see the top of the file). */
    size_t head_end = align_up(ends[0], SEGMENT_SIZE);
    if (head_end < size) segmap_set((char *)o + head_end, size - head_end, GRANULE_NONE, GRANULE_NONE);
    if (os_obj_guard()) huge_unmap((char *)o + size, os_obj_guard());   /* the guard is no piece */
  }
  atomic_fetch_sub_explicit(&os_parts_live, nparts, memory_order_relaxed);
  huge_piece_t drop[HUGE_POOL_PIECES + OS_OBJ_PARTS];
  unsigned ndrop = 0;
  uint64_t now = now_ms();
  lock_acquire(&huge_cache_lock);
  size_t peak = huge_demand(now, live);
  size_t keep = peak - live < opt.huge_cache ? peak - live : opt.huge_cache & ~(os_page_size - 1);
  for (unsigned i = 0; i < nparts; i++) {
    if (huge_pool_n == HUGE_POOL_PIECES) {
      int old = huge_pool_oldest();
      huge_pool_take((unsigned)old, huge_pool[old].len, &drop[ndrop++]);
    }
    size_t start = i ? ends[i - 1] : 0;
    huge_pool[huge_pool_n++] = (huge_piece_t){ base + start, ends[i] - start, now, i == 0 && !mitigation(HUGE_RELEASE) };
    huge_cache_bytes += ends[i] - start;
  }
  ndrop += huge_pool_shrink(huge_idle_before(now), keep, drop + ndrop);
  lock_release(&huge_cache_lock);
  huge_pool_unmap(drop, ndrop);
}

/* Resizes an OS object in place; false if it cannot. Growing takes the pool pieces that
 * follow the object, else extends its last mapping with mremap (without moving). */
static bool os_obj_resize(void *p, size_t size) {
  os_obj_t *o = os_obj_of(p, "realloc()");
  size_t need = align_up(o->offset + size, os_page_size);
  if (need == o->map_size) return true;
  if (need < o->map_size) {
    if (need < o->map_size / 2) return false;        /* moving is better than holding waste */
    return true;
  }
  if (need - o->offset > SIZE_MAX / 2 || mitigation(GUARD_PAGES)) return false;   /* the guard stays put */
  size_t extra = need - o->map_size;
  if (o->span) {   /* within its span; past it, the span grows where free space follows */
    if (need > o->span) {
      size_t want = huge_span_for(need);
      if (OS_CALL(mremap(o, o->span, want, 0)) == MAP_FAILED) return false;
      atomic_fetch_add_explicit(&os_bytes_mapped, want - o->span, memory_order_relaxed);
      o->span = want;
    }
    size_t tail = o->resident - o->map_size;   /* (its idle tail, which it grows into) */
    if (need > o->resident) o->resident = need;
    atomic_fetch_sub_explicit(&huge_tail_bytes, tail - (o->resident - need), memory_order_relaxed);
    atomic_fetch_add_explicit(&os_objects_bytes, extra, memory_order_relaxed);
    segmap_set(o, need, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
    o->map_size = need;
    return true;
  }
  char *end = (char *)o + o->map_size;
  huge_piece_t take[OS_OBJ_PARTS];
  unsigned ntake = 0;
  if (atomic_load_explicit(&huge_cache_bytes, memory_order_relaxed)) {
    lock_acquire(&huge_cache_lock);
    size_t total = 0;
    for (unsigned n = 0; total < extra && o->nparts + n < OS_OBJ_PARTS; n++) {
      int j = huge_pool_find(end + total);
      if (j < 0) break;
      total += huge_pool[j].len;
    }
    for (size_t got = 0; total >= extra && got < extra; ntake++) {
      unsigned j = (unsigned)huge_pool_find(end + got);
      size_t k = extra - got < huge_pool[j].len ? extra - got : huge_pool[j].len;
      huge_pool_take(j, k, &take[ntake]);
      got += k;
    }
    huge_pool_note_oldest();
    lock_release(&huge_cache_lock);
  }
  if (ntake) {
    size_t at = o->map_size;
    for (unsigned i = 0; i < ntake; i++) o->part_end[o->nparts++] = (at += take[i].len);
    atomic_fetch_add_explicit(&os_parts_live, ntake, memory_order_relaxed);
  } else {
    /* Growing in place must not run into the next granule's owner: only within free space. */
    unsigned last = o->nparts - 1;
    size_t start = os_obj_part_start(o, last);
    void *r = OS_CALL(mremap((char *)o + start, o->map_size - start, need - start, 0));
    if (r == MAP_FAILED) return false;
    atomic_fetch_add_explicit(&os_bytes_mapped, extra, memory_order_relaxed);
    o->part_end[last] = need;
  }
  atomic_fetch_add_explicit(&os_objects_bytes, extra, memory_order_relaxed);
  segmap_set(o, need, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
  o->map_size = need;
  return true;
}

#endif
