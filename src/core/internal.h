/* internal.h — the module map and the design contract.
 *
 * The contract first: what a design (src/<design>/) provides and may use. Then every function
 * one core file offers another, grouped by the file that defines it, in layer order
 * (README.md): a file calls only files before it in this list, and a later file only through
 * the design's hooks. The foundations (config.h, mitigations.h, print.h, lock.h, os.h,
 * options.h, bitmap.h, sizeclass.h, pages.h, list.h) and the design's header come before this
 * header; their functions are listed for the map. tools/check_layers.py checks the order. */
#ifndef LOCUS_INTERNAL_H
#define LOCUS_INTERNAL_H

#include "../../include/locus.h"   /* locus_stats_t, locus_region_t */

typedef struct heap heap_t;
typedef struct os_obj os_obj_t;
typedef struct huge_piece huge_piece_t;
typedef struct site site_t;
typedef struct sites_view sites_view_t;
typedef struct region_big_os region_big_os_t;

/* ==== the design contract =====================================================================
 *
 * A design is a folder src/<design>/ with two files, included by locus.c.h:
 *   <design>.h    its vocabulary, before the heap type: design_heap_t (its per-heap state,
 *                 embedded first in heap_t: the allocation fast path reads only this),
 *                 DESIGN_EMPTY_HEAP (an initializer for it with every list empty: the state of
 *                 heap_empty, which every thread uses until its first slow path), its KIND_*
 *                 values (from KIND_DESIGN up), and a DESIGN_HAS_<HOOK> 1 for each optional
 *                 hook it provides;
 *   <design>.c.h  its policy, after the whole core: the hooks below.
 *
 * Required hooks. Each receives the calling thread's heap h (heap_empty until the thread's
 * first slow path) or a descriptor of one of the design's runs. */

static void design_global_init(void);               /* once, at start-up (init.h) */
static void design_heap_init(heap_t *h);            /* a new heap's design state */
/* An object of `size` bytes (zeroed with zero). NULL only via alloc_failed(), which sets errno:
 * malloc's fast path needs no test of the result. */
static void *design_alloc(heap_t *h, size_t size, bool zero);
/* The same aligned to align (a power of two above QUANTUM). */
static void *design_alloc_aligned(heap_t *h, size_t align, size_t size, bool zero);
/* An object of `size` bytes near hint (not NULL, but any address: perhaps not ours, perhaps
 * another heap's): in hint's K-region or page when the design can place it there, else as
 * design_alloc would. A design without placement by address simply calls design_alloc. */
static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero);
/* log2 of the bytes in hint's K-region, for the statistics' "same K-region" (the page's where
 * the design has no K-regions). */
static unsigned design_kregion_shift(const void *hint);
/* Frees p, in segment s, into heap h (the caller owns h). The design finds p's page (its
 * descriptor, desc_of_page, or its tag, tag_of_page) and frees the head of a run of its
 * one-page kind at once; anything else goes to free_in_run (free.h), which finds the run's
 * head and calls design_free_run. */
static void design_free(heap_t *h, segment_t *s, void *p, const char *call);
/* Frees p given its run's head d and its offset in the run; a run of none of the design's
 * kinds goes to core_free (free.h). */
static void design_free_run(heap_t *h, desc_t *d, void *p, size_t off, const char *call);
/* Checks a pointer another thread is about to push onto h->remote; ends the program on a
 * detectable invalid or double free. */
static void design_check_remote(desc_t *d, void *p, const char *call);
/* Usable size of p, an object of the design's run d (ends the program if p is not one). */
static size_t design_usable(desc_t *d, const void *p, const char *call);
/* Resizes p (of the design's run d, h its owner) in place to size bytes if it can. */
static bool design_resize(heap_t *h, desc_t *d, void *p, size_t size);
/* p, which another thread freed (design_check_remote marked it free), comes off its owner's
 * remote stack (heap.h): the mark is cleared so that the owner's free takes it (an owner's
 * free of an object that still has the mark is a double free). page: the descriptor of p's
 * page. */
static void design_collected(desc_t *page, void *p);
/* Gives back memory the heap keeps for reuse (spare blocks) when its thread exits. */
static void design_release_spares(heap_t *h);
/* locus_purge/malloc_trim: gives back every spare the design keeps in h. */
static void design_purge(heap_t *h);
/* Walks the design's structures of h; returns the number of problems found (debug builds end
 * the program at the first, through CHECK). */
static size_t design_check(heap_t *h);

/* Optional hooks: a design that has one defines DESIGN_HAS_<HOOK> 1 in its header and the
 * hook in its policy; otherwise the default below stands in. */
#ifndef DESIGN_HAS_ALLOC_RA
#define DESIGN_HAS_ALLOC_RA 0
#endif
#ifndef DESIGN_HAS_ALLOC_CACHED
#define DESIGN_HAS_ALLOC_CACHED 0
#endif
#ifndef DESIGN_HAS_FREE_FOREIGN
#define DESIGN_HAS_FREE_FOREIGN 0
#endif
#ifndef DESIGN_HAS_FREE_ANY
#define DESIGN_HAS_FREE_ANY 0
#endif
#ifndef DESIGN_HAS_STATS
#define DESIGN_HAS_STATS 0
#endif
#ifndef DESIGN_HAS_USABLE_MAX
#define DESIGN_HAS_USABLE_MAX 0
#endif
#ifndef DESIGN_HAS_FORK_CHILD
#define DESIGN_HAS_FORK_CHILD 0
#endif
#ifndef DESIGN_HAS_BOUNDS
#define DESIGN_HAS_BOUNDS 0
#endif
#ifndef DESIGN_HAS_USABLE_QUICK
#define DESIGN_HAS_USABLE_QUICK 0
#endif

/* design_alloc, given the caller's return address (LOCUS_SITES=1, api.h): for a design that
 * uses the call site itself (lf). Default: design_alloc. */
static void *design_alloc_ra(heap_t *h, size_t size, bool zero, uintptr_t ra);
#if !DESIGN_HAS_ALLOC_RA
static ALWAYS_INLINE void *design_alloc_ra(heap_t *h, size_t size, bool zero, uintptr_t ra) {
  (void)ra;
  return design_alloc(h, size, zero);
}
#endif
/* An object of `size` bytes from the thread's own cache of freed objects, or NULL; then
 * design_alloc_uncached: design_alloc without a second look into the cache. malloc and
 * operator new try the cache first, before the test of the call-site statistics, so a design
 * with a cache keeps it empty while opt.sites is on: every allocation then reaches
 * sites_note. Default: NULL, and design_alloc. */
static void *design_alloc_cached(heap_t *h, size_t size, bool zero);
static void *design_alloc_uncached(heap_t *h, size_t size, bool zero);
#if !DESIGN_HAS_ALLOC_CACHED
static ALWAYS_INLINE void *design_alloc_cached(heap_t *h, size_t size, bool zero) {
  (void)h; (void)size; (void)zero;
  return NULL;
}
static ALWAYS_INLINE void *design_alloc_uncached(heap_t *h, size_t size, bool zero) {
  return design_alloc(h, size, zero);
}
#endif
/* A free by the thread owning heap me (heap_empty if it has none yet) of p, in segment s of
 * heap h (p's page any kind, read without h's lock): the design keeps p for
 * me's own reuse (it must then give it back to its owner from design_release_spares) or hands
 * it to free_foreign_home (free.h), which checks it and sends it home. Every call in tail
 * position: the fast path then saves no registers. Default (defined in free.h): home. */
static void design_free_foreign(heap_t *me, heap_t *h, segment_t *s, void *p, const char *call);
/* A free by the calling thread of p, in segment s of any heap (p's page any kind, read
 * without the owner's lock): for a design whose thread cache takes any heap's objects, so
 * that the owner is read only off its hit path. What it does not keep it hands to the owner's
 * free (design_free, when s is the thread's heap's) or to free_foreign_heap (free.h). Default
 * (free.h): that dispatch alone. */
static void design_free_any(void *p, segment_t *s, const char *call);
static NOINLINE void free_foreign_heap(void *p, heap_t *h, segment_t *s, const char *call);
/* In the child after fork (init.h), with the core's locks already reset: the design resets
 * the locks of its own shared structures. Default: nothing. */
static void design_fork_child(void);
#if !DESIGN_HAS_FORK_CHILD
static void design_fork_child(void) {}
#endif
/* Adds what the design counts itself (rather than through heap_count) to a statistics
 * snapshot. Default: nothing. */
static void design_stats(heap_t *h, locus_stats_t *st);
#if !DESIGN_HAS_STATS
static void design_stats(heap_t *h, locus_stats_t *st) { (void)h; (void)st; }
#endif
/* The largest usable size an object asked with `size` bytes can have: a sized delete whose
 * object is bigger names the size mismatch (mitigation sized_delete). Default: no bound. */
static size_t design_usable_max(size_t size);
#if !DESIGN_HAS_USABLE_MAX
static inline size_t design_usable_max(size_t size) { (void)size; return SIZE_MAX; }
#endif
/* The usable size of p, in segment s of any heap, when the design tells it from p's page
 * alone, checked as its free checks (ends the program on a freed object); 0 when it cannot
 * (p is no such object, or the design needs its run): usable_impl's and realloc's general
 * paths then decide. Read without the owner's lock. Default: 0. */
static size_t design_usable_quick(segment_t *s, const void *p, const char *call);
#if !DESIGN_HAS_USABLE_QUICK
static ALWAYS_INLINE size_t design_usable_quick(segment_t *s, const void *p, const char *call) {
  (void)s; (void)p; (void)call;
  return 0;
}
#endif
/* Where address a, inside the design's run d (its head), lies: in an object whose usable bytes
 * are [*start, *end) (BOUNDS_OBJECT), in none (BOUNDS_NONE: a canary, a header, slack, a free
 * chunk), or not known (BOUNDS_UNKNOWN); read by the checked copies (mitigation checked_copy,
 * copy.h), possibly of another thread's run. Default: not known. */
enum { BOUNDS_UNKNOWN, BOUNDS_OBJECT, BOUNDS_NONE };
static int design_bounds(desc_t *d, const char *a, const char **start, const char **end);
#if !DESIGN_HAS_BOUNDS
static inline int design_bounds(desc_t *d, const char *a, const char **start, const char **end) {
  (void)d; (void)a; (void)start; (void)end;
  return BOUNDS_UNKNOWN;
}
#endif

/* What a design may use: any function of the core (they are all below it); the heap's counters
 * only through heap_count/heap_count_max (never h->stats directly); heap_acquire (init.h) on a
 * slow path that was handed heap_empty; pages_alloc/block_release for its runs, huge_alloc for
 * what it does not serve. It must not touch another heap's lists, the registry or the page
 * manager's bins. */
#define heap_count(h, field, n) ((void)((h)->stats.field += (uint64_t)(n)))
#define heap_uncount(h, field, n) ((void)((h)->stats.field -= (uint64_t)(n)))
#define heap_count_max(h, field, v) \
  do { if ((uint64_t)(v) > (h)->stats.field) (h)->stats.field = (uint64_t)(v); } while (0)
#define heap_counter(h, field) ((h)->stats.field)

/* One assertion for every walk of a structure (design_check, pages_check): counts a problem
 * in the local `bad`, and in debug builds ends the program at the first. */
#define CHECK(c) do { if (!(c)) { bad++; if (cfg_debug) locus_assert_fail(#c, __FILE__, __LINE__); } } while (0)

/* ==== the module map ==========================================================================
 * Every function a core file offers another file (core or design), by defining file, in layer
 * order. Macros are named in a comment. */
/* ---- config.h: platform facts */
/* macros: likely, unlikely */
static inline size_t align_up(size_t n, size_t a);
static inline bool is_pow2(size_t x);
static inline void *link_decode(const void *at, uintptr_t stored);
static inline uintptr_t link_encode(const void *at, const void *next);
static inline void *link_load(const void *at);
static inline unsigned log2_floor(size_t x);
static inline bool poison_intact(const void *p, size_t from, size_t n);

/* ---- mitigations.h: the hardened build's protections */
/* macros: MITIGATION, mitigation, mitigation_field */

/* ---- print.h: formatted output without the C library's allocator */
/* macros: ASSERT */
COLD __attribute__((noreturn, unused)) static void locus_assert_fail(const char *c, const char *file, int line);
COLD __attribute__((noreturn)) static void locus_fatal(const char *call, const char *what, const void *p);
COLD NOINLINE __attribute__((noipa)) static void locus_fatal_jump(const char *call, const char *what, const void *p);
static void locus_printf(int fd, const char *f, ...);
static void out_char(outbuf_t *o, char c);
static void out_flush(outbuf_t *o);
static void out_fmt(outbuf_t *o, const char *f, ...);
static void out_str(outbuf_t *o, const char *s);

/* ---- lock.h: the lock of the few shared structures */
static inline void lock_acquire(lock_t *l);
static inline bool lock_held_by_self(lock_t *l);
static inline void lock_release(lock_t *l);
static inline void lock_reset(lock_t *l);
static inline bool lock_try(lock_t *l);

/* ---- os.h: the OS contract */
/* macros: OS_CALL */
static void os_discard(void *p, size_t size);
static void os_init(void);
static void *os_map(size_t size);
static void *os_map_aligned(size_t size, size_t align);
static void os_unmap(void *p, size_t size);
static inline unsigned segmap_get(const void *p);
static void segmap_set(const void *p, size_t size, unsigned head, unsigned rest);

/* ---- options.h: LOCUS_* environment options */
static void options_init(void);
static void options_print(outbuf_t *o, bool json);

/* ---- bitmap.h: bit sets with a summary word */
static inline void bitmap2_clear(bitmap2_t *b, unsigned i);
static inline int bitmap2_find_from(const bitmap2_t *b, unsigned i);
static inline void bitmap2_set(bitmap2_t *b, unsigned i);
static inline int bits_find_linear(const uint64_t *w, unsigned nwords, unsigned *inspected);
static inline int bits_find_linear_from(const uint64_t *w, unsigned nwords, unsigned from, unsigned *inspected);
static inline int bits_find_summary(uint64_t summary, const uint64_t *w, unsigned *inspected);

/* ---- sizeclass.h: size-class tables as data */
static inline long divide_exact(size_t offset, uint32_t size, uint32_t recip);
static void sizeclass_put(sizeclass_table_t *t, unsigned c, size_t sz);
static void sizeclass_add(sizeclass_table_t *t, size_t sz);
static void sizeclass_finish(sizeclass_table_t *t);
static inline long sizeclass_index(const sizeclass_table_t *t, unsigned cls, size_t offset);
static inline unsigned sizeclass_of(const sizeclass_table_t *t, size_t size);
static inline bool sizeclass_resize_fits(uint32_t obj_size, unsigned cls, size_t size);

/* ---- pages.h: segments and page descriptors */
static inline size_t desc_bytes(const desc_t *d);
static inline desc_t *desc_head(segment_t *s, const void *p);
static inline desc_t *desc_locate(segment_t *s, const void *p, size_t *off);
static inline desc_t *desc_of_page(segment_t *s, const void *p);
static inline segment_t *desc_segment(const desc_t *d);
static inline char *desc_start(const desc_t *d);
static inline bool kind_is_region(unsigned kind);
static uint64_t now_ms(void);
static inline size_t page_index(const segment_t *s, const void *p);
static inline segment_t *segment_of(const void *p);

/* ---- list.h: the doubly linked list of descriptors */
static inline bool block_keep_empty(const desc_t *head, const desc_t *b);
static inline void desc_list_insert(desc_t **head, desc_t *below, desc_t *d);
static inline void desc_list_push(desc_t **head, desc_t *d);
static inline void desc_list_remove(desc_t **head, desc_t *d);

/* ---- stats_fields.h: the statistics' fields */
/* macros: LOCUS_STATS_FIELDS */

/* ---- state.h: the heap type and the library's global state */
static COLD NOINLINE void *alloc_failed(void);
static inline uintptr_t free_marker_salted(const void *p, uint32_t salt);
static COLD __attribute__((noreturn)) void free_not_object(const desc_t *d, const void *p, const char *call);
static inline size_t huge_front(void);
static inline char *huge_user(const desc_t *r);
static inline void marker_collected(uintptr_t *mark, uintptr_t marker);
static inline void marker_free_remote(uintptr_t *mark, uintptr_t marker, const void *p, const char *call);
static inline bool marker_says_free(uintptr_t word, uintptr_t marker);
static inline size_t marker_usable(const desc_t *d, const void *p, uintptr_t marker, const char *call);
static inline bool memory_refused(heap_t *locked);
static inline bool realloc_keeps(size_t usable, size_t size);

/* ---- pagemgr.h: the page manager */
/* macros: HEAP_FOR_EACH_RUN */
static void bin_insert(pages_t *pm, desc_t *r);
static void dirty_remove(pages_t *pm, desc_t *r);
static desc_t *pages_alloc(heap_t *h, size_t n, size_t align, bool *clean);
static size_t pages_check(heap_t *h);
static void pages_decay(heap_t *h, uint64_t now);
static void pages_give(heap_t *h, desc_t *r);
static bool pages_grow(heap_t *h, desc_t *r, size_t n);
static void pages_policy_locked(heap_t *h, uint64_t now);
static size_t pages_purge(heap_t *h, uint64_t older_than, size_t keep_pages);
static size_t pages_purge_locked(heap_t *h, uint64_t older_than, size_t keep_pages);
static void pages_unmap_free_segments_locked(heap_t *h, size_t keep);
static inline unsigned run_bin(size_t n);
static void run_clear(desc_t *r, size_t n);
static void run_insert(pages_t *pm, desc_t *r, bool dirty, uint64_t when);
static void run_remove(pages_t *pm, desc_t *r);
static void run_shape_free(desc_t *r, size_t n, uint16_t flags);
static inline size_t segment_guard_pages(void);

/* ---- heap.h: thread heaps */
static heap_t *heap_adopt(void);
static size_t heap_check(heap_t *h);
static void heap_collect(heap_t *h);
static heap_t *heap_create(void);
static inline void heap_debug_tick(heap_t *h);
static ALWAYS_INLINE void heap_push_remote(heap_t *h, void *p, const char *call);
static void heap_sweep_abandoned(uint64_t now);
static void heap_trim_abandoned(heap_t *h, uint64_t now);
static void heap_unlock_abandoned(heap_t *h);

/* ---- osobj.h: objects with their own mappings */
static bool big_canary_ok(const char *at);
static void big_canary_set(char *at);
static void guard_fault_install(void);
static bool guard_freed_find(uintptr_t a, uintptr_t *user);
static size_t huge_cache_purge(uint64_t older_than);
static inline void huge_cache_tick(void);
static void *os_obj_alloc(size_t size, size_t align, bool zero);
static os_obj_t *os_obj_find(const void *p);
static void os_obj_free(void *p, const char *call);
static inline size_t os_obj_guard(void);
static os_obj_t *os_obj_of(const void *p, const char *call);
static inline void *os_obj_owner_area(os_obj_t *o);
static bool os_obj_resize(void *p, size_t size);
static inline size_t os_obj_usable(const os_obj_t *o);

/* ---- reclaim.h: giving pages back */
UNUSED static void block_emptied(heap_t *h, desc_t **head, desc_t *b);
static void block_release(heap_t *h, desc_t *r);
static void heap_release_kept_runs(heap_t *h);
static void pages_free(heap_t *h, desc_t *r);
static void pages_free_checked(heap_t *h, desc_t *r, const void *p, const char *call);
static void pages_shared_decay(uint64_t now);
static void pages_shrink(heap_t *h, desc_t *r, size_t n);

/* ---- unwind.h: walking up the stack exactly */
static NOINLINE uintptr_t unwind_first_outside(void);
static bool unwind_known(uintptr_t pc);
static void unwind_module_add(uintptr_t start, uintptr_t end, uintptr_t base, size_t len);

/* ---- sites.h: call sites */
static inline void sites_flag(heap_t *h, uintptr_t ctx, uint32_t flag);
static bool sites_in_wrapper(uintptr_t a);
static ALWAYS_INLINE bool sites_maybe_wrapper(uintptr_t a);
static NOINLINE void sites_note(uintptr_t ra, size_t size);
static void sites_out_name(outbuf_t *o, const char *s);
static void sites_read_maps(void);
static void sites_resolve(uintptr_t ctx, const char **module, const char **symbol, uintptr_t *off);
static bool sites_view(sites_view_t *w);
static void sites_view_done(sites_view_t *w);

/* ---- init.h: the library's life cycle */
static void global_init(void);
static heap_t *heap_acquire(void);

/* ---- huge.h: huge objects in runs of pages */
static void heap_free_remote_run(heap_t *h, desc_t *d, void *p, const char *call);
static NOINLINE void *huge_alloc(heap_t *h, size_t size, size_t align, bool zero);
static void huge_free(heap_t *h, desc_t *r, void *p, const char *call);
static bool huge_resize(heap_t *h, heap_t *ph, desc_t *r, size_t size);
static void huge_run_quarantine_flush(heap_t *ph);

/* ---- region.h: regions with per-object free */
static inline bool bit_get(const uint64_t *bits, size_t i);
static size_t bit_next(const uint64_t *bits, size_t i);
static inline void bit_set(uint64_t *bits, size_t i);
static inline char *chunk_base(const locus_region_t *r, const desc_t *d);
static inline uint64_t *chunk_bits(const desc_t *d);
static inline char *chunk_top(const locus_region_t *r, const desc_t *d);
static inline size_t granule_of(const desc_t *d, const void *p);
static inline region_big_os_t *region_big_links(os_obj_t *o);
static inline size_t region_bitmap_bytes(size_t chunk);
static inline uintptr_t region_marker(const desc_t *d, const void *p);

/* ---- region_engine.h: the engine of regions */
static inline size_t free_object_size(const void *p, size_t bin_size);
static ALWAYS_INLINE void *region_alloc(locus_region_t *r, size_t size, bool zero, const char *call);
static NOINLINE void *region_alloc_slow(locus_region_t *r, size_t size, size_t align, bool zero);
static ALWAYS_INLINE void region_bin_push_marked(locus_region_t *r, void *p, size_t size, uintptr_t m);
static void region_check_handle(const locus_region_t *r, const char *call);
static void region_chunk_reset(locus_region_t *r, desc_t *d, bool clean);
static desc_t *region_chunk_take(locus_region_t *r, size_t bytes, bool *clean);
static void region_chunk_use(locus_region_t *r, desc_t *d, bool clean);
static NOINLINE void region_collect(locus_region_t *r);
static void region_count_held(locus_region_t *r, int64_t bytes);
static void region_destroy_children(locus_region_t *r);
static void region_free_object(locus_region_t *r, desc_t *d, void *p, bool queued, const char *call);
static NOINLINE void region_free_queued(desc_t *d, void *p, const char *call);
static void region_free_queued_os(os_obj_t *o, void *p);
static inline size_t region_need(size_t size);
static locus_region_t *region_of_object(desc_t *d, const void *p);
static void region_release(locus_region_t *r, bool keep);
static size_t region_usable(desc_t *d, const void *p, const char *call);

/* ---- region_api.h: the locus_region_* API over the region engine */
static void *region_realloc_any(void *p, size_t size);

/* ---- free.h: the one place that knows every kind of memory a pointer can be */
static NOINLINE void core_free(heap_t *h, desc_t *d, void *p, const char *call);
static ALWAYS_INLINE void design_free_foreign(heap_t *me, heap_t *h, segment_t *s, void *p, const char *call);
static NOINLINE void free_foreign_home(heap_t *h, desc_t *page, void *p, const char *call);
static ALWAYS_INLINE void free_impl(void *p, const char *call);
static NOINLINE void free_in_run(heap_t *h, void *p, const char *call);
static NOINLINE void heap_free_remote(heap_t *h, desc_t *d, void *p, const char *call);
static bool is_region_object(const void *p);
static size_t usable_impl(const void *p, const char *call);

/* ---- stats.h: the statistics */
static void stats_write(int fd);

#endif
