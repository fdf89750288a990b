/* api.h — the exported surface, written once over the design contract (internal.h): the C
 * malloc family with glibc's behaviour where the standard leaves room, the glibc-internal
 * aliases, mallinfo/malloc_stats/malloc_info/malloc_trim, the 20 replaceable C++ operators,
 * and the locus_ API. */
#ifndef LOCUS_API_H
#define LOCUS_API_H

#include <malloc.h>
#include <stdio.h>
#include <dlfcn.h>
#include "../../include/locus.h"

/* ---- the core operations -------------------------------------------------------------------- */

/* LOCUS_SITES=1: the allocation, then its (site, size) in the caller's heap (sites.h). A design
 * that uses the return address itself (lf) gets the caller's through design_alloc_ra. */
static NOINLINE void *alloc_sited(size_t size, bool zero, uintptr_t ra) {
  void *p = design_alloc_ra(tl_heap, size, zero, ra);
  if (p && opt.sites) sites_note(ra, size);   /* read after the call: the first one starts up */
  return p;
}

/* With LOCUS_SITES unset the only cost is the test of sites_check, after the design's cache
 * (empty while the statistics are on, and before start-up: heap_empty's). */
static ALWAYS_INLINE void *alloc_impl(size_t size, bool zero) {
  void *p = design_alloc_cached(tl_heap, size, zero);
  if (likely(p != NULL)) return p;
  if (unlikely(sites_check)) return alloc_sited(size, zero, (uintptr_t)__builtin_return_address(0));
  return design_alloc_uncached(tl_heap, size, zero);   /* a failure has set errno (alloc_failed) */
}

static void *aligned_impl(size_t align, size_t size, bool zero) {
  if (align <= 8 || (align <= QUANTUM && size > 8)) return alloc_impl(size, zero);
  if (align <= QUANTUM) return alloc_impl(QUANTUM, zero);
  if (size > PTRDIFF_MAX - align) { errno = ENOMEM; return NULL; }
  void *p = design_alloc_aligned(tl_heap, align, size, zero);
  if (unlikely(!p)) errno = ENOMEM;
  else if (unlikely(opt.sites)) sites_note((uintptr_t)__builtin_return_address(0), size);
  ASSERT(!p || ((uintptr_t)p & (align - 1)) == 0);
  return p;
}

/* realloc's move: a new object, usable bytes of p (valid) copied, p freed. Out of line: the
 * quick path then keeps nothing across the copy (its frame saved and restored 10 registers). */
static NOINLINE void *realloc_move(void *p, size_t usable, size_t size) {
  if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  void *q = alloc_impl(size, false);
  if (!q) return NULL;
  memcpy(q, p, usable < size ? usable : size);
  free_impl(p, "realloc()");
  return q;
}

/* Every object realloc's quick path does not know: regions' objects stay in their region, a
 * heap's own objects (and huge ones) are resized in place where their design can. */
static NOINLINE void *realloc_general(void *p, size_t size) {
  if (is_region_object(p)) return region_realloc_any(p, size);
  size_t usable = usable_impl(p, "realloc()");
  if (size > PTRDIFF_MAX) { errno = ENOMEM; return NULL; }
  if (segmap_get(p) == GRANULE_SEGMENT) {
    segment_t *s = segment_of(p);
    desc_t *d = desc_head(s, p);
    heap_t *me = tl_heap;
    if (s->heap == me) {
      if (d->kind >= KIND_DESIGN ? design_resize(me, d, p, size) : huge_resize(me, me, d, size))
        return p;
    } else if (s->heap == huge_heap && me != &heap_empty && d->kind == KIND_HUGE) {
      if (huge_resize(me, huge_heap, d, size)) return p;
    } else if (realloc_keeps(usable, size)) {
      return p;
    }
  } else if (os_obj_resize(p, size)) {
    return p;
  }
  return realloc_move(p, usable, size);
}

/* A small object the design knows from its page (design_usable_quick), any heap's, stays where
 * it is if realloc_keeps it (as a design's resize of a block object would), else moves; the
 * rest goes the general way. perl grows strings this way: the
 * general path's lookups cost 190 allocator instructions a realloc there, a third of its
 * allocator's. */
static ALWAYS_INLINE void *realloc_impl(void *p, size_t size) {
  uintptr_t g = (uintptr_t)p >> SEGMENT_SHIFT;
  if (likely(segmap_is_segment(g))) {
    size_t usable = design_usable_quick((segment_t *)(g << SEGMENT_SHIFT), p, "realloc()");
    if (likely(usable)) return realloc_keeps(usable, size) ? p : realloc_move(p, usable, size);
  }
  return realloc_general(p, size);
}

/* ---- the C API ------------------------------------------------------------------------------ */

LOCUS_API void *malloc(size_t size) { return alloc_impl(size, false); }
LOCUS_API void free(void *p) { free_impl(p, "free()"); }
LOCUS_API void cfree(void *p) { free_impl(p, "free()"); }

LOCUS_API void *calloc(size_t n, size_t size) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) { errno = ENOMEM; return NULL; }
  return alloc_impl(total, true);
}

LOCUS_API void *realloc(void *p, size_t size) {
  if (!p) return alloc_impl(size, false);
  if (size == 0) { free_impl(p, "realloc()"); return NULL; }
  return realloc_impl(p, size);
}

LOCUS_API void *reallocarray(void *p, size_t n, size_t size) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) { errno = ENOMEM; return NULL; }
  return realloc(p, total);
}

LOCUS_API int posix_memalign(void **out, size_t align, size_t size) {
  if (align < sizeof(void *) || !is_pow2(align)) return EINVAL;
  /* errno: ENOMEM on failure, as glibc sets it (programs check it); unchanged on success */
  int saved = errno;
  void *p = aligned_impl(align, size, false);
  if (!p) return errno = ENOMEM;
  errno = saved;
  *out = p;
  return 0;
}

/* glibc rounds a non-power-of-two alignment up and rejects only impossible ones. */
LOCUS_API void *memalign(size_t align, size_t size) {
  if (align > SIZE_MAX / 2 + 1) { errno = EINVAL; return NULL; }
  if (!is_pow2(align)) align = align ? (size_t)1 << (log2_floor(align) + 1) : 1;
  return aligned_impl(align, size, false);
}

LOCUS_API void *aligned_alloc(size_t align, size_t size) { return memalign(align, size); }

LOCUS_API void *valloc(size_t size) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  return aligned_impl(os_page_size, size, false);
}

LOCUS_API void *pvalloc(size_t size) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  if (size > SIZE_MAX - os_page_size) { errno = ENOMEM; return NULL; }
  size = align_up(size ? size : 1, os_page_size);
  return aligned_impl(os_page_size, size, false);
}

LOCUS_API size_t malloc_usable_size(void *p) {
  return p ? usable_impl(p, "malloc_usable_size()") : 0;
}

/* ---- allocation near a hint ------------------------------------------------------------------ */

/* Counted here, once for every design, and only on this path: plain malloc pays nothing. */
static void *alloc_near(size_t size, const void *hint, bool zero) {
  if (!hint) return alloc_impl(size, zero);
  void *p = design_alloc_near(tl_heap, size, hint, zero);
  if (p && unlikely(opt.sites)) sites_note((uintptr_t)__builtin_return_address(0), size);
  heap_t *h = tl_heap;   /* after the call: a thread's first allocation gives it its heap */
  if (p && h != &heap_empty) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)hint;
    h->stats.hint_calls++;
    h->stats.hint_same_page += (a ^ b) >> os_page_shift == 0;
    h->stats.hint_same_line += (a ^ b) >> 6 == 0;
    h->stats.hint_same_kregion += (a ^ b) >> design_kregion_shift(hint) == 0;
  }
  return p;
}

LOCUS_API void *locus_malloc_near(size_t size, const void *hint) { return alloc_near(size, hint, false); }

LOCUS_API void *locus_calloc_near(size_t n, size_t size, const void *hint) {
  size_t total;
  if (unlikely(__builtin_mul_overflow(n, size, &total))) { errno = ENOMEM; return NULL; }
  return alloc_near(total, hint, true);
}

/* glibc's own internal calls go through these names: they must land in the same heap. */
LOCUS_API void *__libc_malloc(size_t size) { return alloc_impl(size, false); }
LOCUS_API void __libc_free(void *p) { free_impl(p, "free()"); }
LOCUS_API void *__libc_calloc(size_t n, size_t size) { return calloc(n, size); }
LOCUS_API void *__libc_realloc(void *p, size_t size) { return realloc(p, size); }
LOCUS_API void *__libc_memalign(size_t align, size_t size) { return memalign(align, size); }
LOCUS_API void *__libc_valloc(size_t size) { return valloc(size); }
LOCUS_API void *__libc_pvalloc(size_t size) { return pvalloc(size); }

LOCUS_API void locus_stats_print(int fd) { stats_write(fd); }

LOCUS_API const char *locus_version(void) { return LOCUS_VERSION; }
LOCUS_API const char *locus_variant(void) { return LOCUS_VARIANT; }

/* Purges every heap: the caller's own directly, abandoned ones under their lock, and other
 * live threads' heaps are left to their owners (their lists are not ours to touch). */
/* h's free pages given back. After a refusal also its wholly free segments, a heap's last
 * one too, and its lock is only tried: the caller may hold another heap's page lock. */
static void purge_pages(heap_t *h, bool refused) {
  if (!refused) {
    pages_purge(h, UINT64_MAX, 0);
  } else if (lock_try(&h->pages_lock)) {
    pages_purge_locked(h, UINT64_MAX, 0);
    pages_unmap_free_segments_locked(h, 0);
    lock_release(&h->pages_lock);
  }
}

/* Gives back what the heaps keep for reuse: the calling thread's heap (collected, the design's
 * cached blocks, its kept runs, its free pages), the heap of huge runs, the heaps of exited
 * threads that no thread has adopted, and the huge-object pool. After a refusal (`refused`)
 * the caller may hold the page lock of `locked`, whose pages alone are purged, under that
 * lock, and whose design state is left alone. */
static void purge_heaps(heap_t *locked, bool refused) {
  heap_t *me = tl_heap;
  if (me != &heap_empty && me != locked) {
    heap_collect(me);
    design_purge(me);
    heap_release_kept_runs(me);
    purge_pages(me, refused);
  }
  if (huge_heap && huge_heap != locked) {
    huge_run_quarantine_flush(huge_heap);
    purge_pages(huge_heap, refused);
  }
  if (locked) {
    pages_purge_locked(locked, UINT64_MAX, 0);
    pages_unmap_free_segments_locked(locked, 0);
  }
  /* The registry only grows (readers take no lock), and an abandoned heap is only tried: a
   * refusal may come with a heap's lock held, and fork takes the registry's lock, then every
   * heap's, so waiting here for either could deadlock with a fork. */
  for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all) {
    if (h == me || h == locked || atomic_load(&h->state) != HEAP_ABANDONED || !lock_try(&h->lock)) continue;
    if (atomic_load(&h->state) == HEAP_ABANDONED) {
      heap_collect(h);
      design_purge(h);
      purge_pages(h, refused);
    }
    lock_release(&h->lock);
  }
  huge_cache_purge(UINT64_MAX);
}

/* state.h's memory_refused: everything kept for reuse given back; true if address space went
 * back (then the caller maps again). Not reentered: nothing here maps memory, but a thread
 * that refusal reaches again while purging has nothing more to give. */
static bool purge_after_refusal(heap_t *locked) {
  static __thread bool purging;
  if (purging || atomic_load_explicit(&init_state, memory_order_acquire) != 2) return false;
  purging = true;
  size_t before = atomic_load(&os_bytes_mapped);
  purge_heaps(locked, true);
  purging = false;
  return atomic_load(&os_bytes_mapped) < before;
}
static bool (*memory_refused_handler)(heap_t *locked) = purge_after_refusal;

LOCUS_API size_t locus_purge(void) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) return 0;
  size_t before = atomic_load(&os_bytes_discarded);
  purge_heaps(NULL, false);
  return atomic_load(&os_bytes_discarded) - before;
}

LOCUS_API int locus_check_heap(void) {
  heap_t *h = tl_heap;
  if (h == &heap_empty) return 0;
  return (int)heap_check(h);
}

/* ---- glibc's malloc introspection, from our own numbers ---------------------------------------- */

LOCUS_API int malloc_trim(size_t pad) {
  (void)pad;
  return locus_purge() > 0;
}

LOCUS_API struct mallinfo2 mallinfo2(void) {
  locus_stats_t st;
  locus_stats_get(&st);
  struct mallinfo2 mi;
  memset(&mi, 0, sizeof mi);
  mi.arena = st.bytes_committed;
  mi.ordblks = st.blocks_in_use;
  mi.hblks = atomic_load(&os_objects_live);
  mi.hblkhd = atomic_load(&os_objects_bytes);
  mi.uordblks = st.bytes_allocated;
  mi.fordblks = st.bytes_committed > st.bytes_allocated ? st.bytes_committed - st.bytes_allocated : 0;
  mi.keepcost = huge_cache_bytes;
  return mi;
}

LOCUS_API struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo mi;
  mi.arena = (int)m2.arena; mi.ordblks = (int)m2.ordblks; mi.smblks = (int)m2.smblks;
  mi.hblks = (int)m2.hblks; mi.hblkhd = (int)m2.hblkhd; mi.usmblks = (int)m2.usmblks;
  mi.fsmblks = (int)m2.fsmblks; mi.uordblks = (int)m2.uordblks; mi.fordblks = (int)m2.fordblks;
  mi.keepcost = (int)m2.keepcost;
  return mi;
}

LOCUS_API void malloc_stats(void) { stats_write(2); }

LOCUS_API int malloc_info(int options, FILE *fp) {
  if (options != 0 || !fp) { errno = EINVAL; return -1; }
  locus_stats_t st;
  locus_stats_get(&st);
  char buf[2048];
  outbuf_t o = { buf, sizeof buf, 0, 0, -1 };
  out_fmt(&o, "<malloc version=\"locus-%s\" variant=\"%s\">\n", LOCUS_VERSION, LOCUS_VARIANT);
#define X(f, how) out_fmt(&o, "<stat name=\"%s\" value=\"%lu\"/>\n", #f, (unsigned long)st.f);
  LOCUS_STATS_FIELDS(X)
#undef X
  out_str(&o, "</malloc>\n");
  o.buf[o.pos] = 0;
  return fputs(o.buf, fp) < 0 ? -1 : 0;
}

LOCUS_API int mallopt(int param, int value) {
  (void)param; (void)value;
  return 1;    /* accepted; Locus is tuned with LOCUS_* options instead */
}

/* ---- C++ operators ---------------------------------------------------------------------------
 * Written in C with their mangled names so C programs do not pull in the C++ runtime. When a
 * C++ program is loaded, libstdc++ provides the new-handler and bad_alloc (weak references). */
typedef void (*new_handler_fn)(void);
extern new_handler_fn _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* nothrow new must turn a throwing new-handler's bad_alloc into nullptr, which C cannot
 * catch: the C++ runtime's own nothrow operator does the try/catch around our throwing one. */
typedef void *(*nothrow_new_fn)(size_t, const void *);
typedef void *(*nothrow_new_aligned_fn)(size_t, size_t, const void *);

static NOINLINE void *cxx_new_retry(size_t size, size_t align, bool nothrow) {
  for (;;) {
    void *p = align ? aligned_impl(align, size, false) : alloc_impl(size, false);
    if (p) return p;
    new_handler_fn handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (!handler && nothrow) return NULL;
    if (nothrow) {
      char tag = 0;   /* stands for std::nothrow; the runtime's operator ignores its value */
      if (align) {
        nothrow_new_aligned_fn f = (nothrow_new_aligned_fn)dlsym(RTLD_NEXT, "_ZnwmSt11align_val_tRKSt9nothrow_t");
        if (f) return f(size, align, &tag);
      } else {
        nothrow_new_fn f = (nothrow_new_fn)dlsym(RTLD_NEXT, "_ZnwmRKSt9nothrow_t");
        if (f) return f(size, &tag);
      }
    }
    if (!handler) {
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      locus_printf(2, "locus: operator new: out of memory (%zu bytes)\n", size);
      abort();
    }
    handler();
  }
}

/* LOCUS_SITES (or before start-up): out of line, so that operator new's own path keeps its
 * shape (no saved registers: the wrapper walk reads the frames above it). */
static NOINLINE void *cxx_new_sited(size_t size, size_t align, bool nothrow, uintptr_t ra) {
  void *p = align ? aligned_impl(align, size, false) : alloc_sited(size, false, ra);
  return likely(p != NULL) ? p : cxx_new_retry(size, align, nothrow);
}

static inline void *cxx_new(size_t size, size_t align, bool nothrow) {
  void *p = align ? NULL : design_alloc_cached(tl_heap, size, false);
  if (likely(p != NULL)) return p;
  if (unlikely(sites_check)) return cxx_new_sited(size, align, nothrow, (uintptr_t)__builtin_return_address(0));
  p = align ? aligned_impl(align, size, false) : design_alloc_uncached(tl_heap, size, false);
  return likely(p != NULL) ? p : cxx_new_retry(size, align, nothrow);
}

/* Sized delete's size against the object (debug builds, and mitigation SIZED_DELETE): more
 * than its usable size is wrong; so is, with SIZED_DELETE, less than operator new(size) could
 * have given it (design_usable_max: a design that says how much). Aligned deletes pass exact = false: their
 * objects may hold the alignment's padding. */
static NOINLINE void cxx_delete_check(void *p, size_t size, bool exact) {
  size_t usable = usable_impl(p, "operator delete");
  if (usable < size) locus_fatal("operator delete", "size larger than the object", p);
  if (mitigation(SIZED_DELETE) && exact && usable > design_usable_max(size))
    locus_fatal("operator delete", "size smaller than the object", p);
  (void)exact;
}

static inline void cxx_delete(void *p, size_t size, bool exact) {
  if ((cfg_debug || mitigation(SIZED_DELETE)) && p && size) cxx_delete_check(p, size, exact);
  free_impl(p, "free()");
}

#define NT const void *   /* std::nothrow_t const& */
LOCUS_API void *_Znwm(size_t n) { return cxx_new(n, 0, false); }
LOCUS_API void *_Znam(size_t n) { return cxx_new(n, 0, false); }
LOCUS_API void *_ZnwmRKSt9nothrow_t(size_t n, NT t) { (void)t; return cxx_new(n, 0, true); }
LOCUS_API void *_ZnamRKSt9nothrow_t(size_t n, NT t) { (void)t; return cxx_new(n, 0, true); }
LOCUS_API void *_ZnwmSt11align_val_t(size_t n, size_t a) { return cxx_new(n, a, false); }
LOCUS_API void *_ZnamSt11align_val_t(size_t n, size_t a) { return cxx_new(n, a, false); }
LOCUS_API void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NT t) { (void)t; return cxx_new(n, a, true); }
LOCUS_API void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t a, NT t) { (void)t; return cxx_new(n, a, true); }
LOCUS_API void _ZdlPv(void *p) { cxx_delete(p, 0, true); }
LOCUS_API void _ZdaPv(void *p) { cxx_delete(p, 0, true); }
LOCUS_API void _ZdlPvm(void *p, size_t n) { cxx_delete(p, n, true); }
LOCUS_API void _ZdaPvm(void *p, size_t n) { cxx_delete(p, n, true); }
LOCUS_API void _ZdlPvRKSt9nothrow_t(void *p, NT t) { (void)t; cxx_delete(p, 0, true); }
LOCUS_API void _ZdaPvRKSt9nothrow_t(void *p, NT t) { (void)t; cxx_delete(p, 0, true); }
LOCUS_API void _ZdlPvSt11align_val_t(void *p, size_t a) { (void)a; cxx_delete(p, 0, false); }
LOCUS_API void _ZdaPvSt11align_val_t(void *p, size_t a) { (void)a; cxx_delete(p, 0, false); }
LOCUS_API void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; cxx_delete(p, n, false); }
LOCUS_API void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { (void)a; cxx_delete(p, n, false); }
LOCUS_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NT t) { (void)a; (void)t; cxx_delete(p, 0, false); }
LOCUS_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, NT t) { (void)a; (void)t; cxx_delete(p, 0, false); }
#undef NT

#endif
