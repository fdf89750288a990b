/* api.h — the exported surface, written once over the design contract: the C malloc family
 * with glibc's behaviour where the standard leaves room, the glibc-internal aliases, mallinfo/
 * malloc_stats/malloc_info/malloc_trim, the 20 replaceable C++ operators, and the locus_ API.
 *
 * The design provides design_alloc(h, size, zero), design_alloc_aligned(h, align, size, zero),
 * design_free, design_usable, design_resize, design_purge (besides what heap.h lists). */
#ifndef LOCUS_API_H
#define LOCUS_API_H

#include <malloc.h>
#include <stdio.h>
#include <dlfcn.h>
#include "../../include/locus.h"

/* ---- start-up ------------------------------------------------------------------------------ */

static void stats_print_at_exit(void);
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
  region_global_init();
  huge_heap = heap_create();
  atomic_store_explicit(&init_state, 2, memory_order_release);
  /* From here on allocation works, so calls that may allocate are safe. */
  if (pthread_key_create(&heap_key, heap_abandon) == 0) atomic_store(&heap_key_ready, true);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  if (cfg_secure) guard_fault_install();
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

/* Runs at exit (library destructor), after the program's own exit handlers. */
static void sites_at_exit(void);

__attribute__((destructor)) static void locus_at_exit(void) {
  if (atomic_load(&init_state) != 2) return;
  if (opt.stats) stats_print_at_exit();
  if (opt.sites) sites_at_exit();
}

/* ---- the core operations -------------------------------------------------------------------- */

/* LOCUS_SITES=1: the allocation, then its (site, size) in the caller's heap (sites.h). A design
 * that uses the return address itself (lf) gets the caller's through design_alloc_ra. */
static NOINLINE void *alloc_sited(size_t size, bool zero, uintptr_t ra) {
#ifdef design_alloc_ra
  void *p = design_alloc_ra(tl_heap, size, zero, ra);
#else
  void *p = design_alloc(tl_heap, size, zero);
#endif
  if (p && opt.sites) sites_note(ra, size);   /* read after the call: the first one starts up */
  return p;
}

/* With LOCUS_SITES unset the only cost is the test of sites_check. */
static ALWAYS_INLINE void *alloc_impl(size_t size, bool zero) {
  if (unlikely(sites_check)) return alloc_sited(size, zero, (uintptr_t)__builtin_return_address(0));
  return design_alloc(tl_heap, size, zero);   /* a failure has set errno (alloc_failed) */
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

static NOINLINE void free_in_run(heap_t *h, void *p, const char *call) {
  size_t off;
  desc_t *d = desc_locate(segment_of(p), p, &off);
  design_free_run(h, d, p, off, call);
}

/* Frees p into h, which the caller owns or has locked. */
static void heap_free_local(heap_t *h, void *p, const char *call) {
  segment_t *s = segment_of(p);
  design_free(h, desc_of_page(s, p), p, call);
}

/* free of anything not in a segment: NULL, an object with its own mapping, or not ours. Out of
 * line so that the common path needs no saved registers. */
static NOINLINE void free_outside_segments(void *p, unsigned g, const char *call) {
  if (!p) return;
  uintptr_t user;   /* secure: a big object unmapped on free is still known for a while */
  if (g == GRANULE_NONE)
    locus_fatal(call, cfg_secure && guard_freed_find((uintptr_t)p, &user) && user == (uintptr_t)p ? "double free" : "invalid pointer", p);
  int saved = errno;
  os_obj_t *o = os_obj_of(p, call);
  if (o->region) region_free_queued_os(o, p);
  else os_obj_free(p, call);
  errno = saved;
}

static NOINLINE void free_foreign_heap(heap_t *h, void *p, const char *call) {
  desc_t *d = desc_head(segment_of(p), p);
  if (d->kind == KIND_FREE) free_not_object(d, p, call);
  if (kind_is_region(d->kind)) { region_free_queued(d, p, call); return; }
  if (!design_keep_foreign(tl_heap, d, p, call)) heap_free_remote(h, d, p, call);
}

static ALWAYS_INLINE void free_impl(void *p, const char *call) {
  unsigned g = segmap_get(p);   /* NULL lies in granule 0, never a segment */
  if (likely(g == GRANULE_SEGMENT)) {
    segment_t *s = segment_of(p);
    heap_t *h = s->heap;
    if (likely(h == tl_heap)) design_free(h, desc_of_page(s, p), p, call);
    else free_foreign_heap(h, p, call);
  } else {
    free_outside_segments(p, g, call);
  }
}

/* Usable size of a live object; validates p like free does. */
static size_t usable_impl(const void *p, const char *call) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) {
    segment_t *s = segment_of(p);
    desc_t *d = desc_head(s, p);
    if (d->kind >= KIND_DESIGN) return design_usable(d, p, call);
    if (kind_is_region(d->kind)) return region_usable(d, p, call);
    if (d->kind == KIND_HUGE && p == huge_user(d)) {
      if (cfg_secure && (d->flags & FLAG_QUARANTINED)) locus_fatal(call, "pointer to a freed object", p);
      if (cfg_secure && !big_canary_ok((const char *)p - 16)) locus_fatal(call, "heap underflow (canary overwritten) before", p);
      return d->u.huge.usable;
    }
    free_not_object(d, p, call);
  }
  if (g != GRANULE_NONE) return os_obj_usable(os_obj_of(p, call));
  locus_fatal(call, "invalid pointer", p);
}

/* Whether p is (or claims to be) a region object: realloc keeps those in their region. */
static bool is_region_object(const void *p) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) return kind_is_region(desc_head(segment_of(p), p)->kind);
  os_obj_t *o = g != GRANULE_NONE ? os_obj_find(p) : NULL;
  return o && o->region;
}

static void *realloc_impl(void *p, size_t size) {
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
    } else if (size <= usable && size > usable / 2) {
      return p;
    }
  } else if (os_obj_resize(p, size)) {
    return p;
  }
  void *q = alloc_impl(size, false);
  if (!q) return NULL;
  memcpy(q, p, usable < size ? usable : size);
  free_impl(p, "realloc()");
  return q;
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

/* ---- statistics ------------------------------------------------------------------------------ */

static void stats_collect(locus_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->version = 4;
  lock_acquire(&registry_lock);
  for (heap_t *h = registry; h; h = h->next_all) {
#define LOAD(f) __atomic_load_n(&h->stats.f, __ATOMIC_RELAXED)
    st->malloc_calls += LOAD(malloc_calls);
    st->free_calls += LOAD(free_calls);
    st->remote_frees += LOAD(remote_frees);
    st->bytes_allocated += LOAD(bytes_allocated);
    st->pages_in_use += LOAD(pages_in_use);
    st->blocks_in_use += LOAD(blocks_in_use);
    st->huge_in_use += LOAD(huge_in_use);
    st->search_words += LOAD(search_words);
    st->searches += LOAD(searches);
    st->hint_calls += LOAD(hint_calls);
    st->hint_same_page += LOAD(hint_same_page);
    st->hint_same_line += LOAD(hint_same_line);
    st->hint_same_kregion += LOAD(hint_same_kregion);
    uint64_t m = LOAD(search_words_max);
    if (m > st->search_words_max) st->search_words_max = m;
    uint64_t dirty = __atomic_load_n(&h->pages.dirty_pages, __ATOMIC_RELAXED);
    uint64_t nseg = __atomic_load_n(&h->pages.nsegments, __ATOMIC_RELAXED);
    uint64_t usable = nseg * ((SEGMENT_SIZE >> os_page_shift) - segment_header_pages - segment_guard_pages());
    st->pages_free += usable > LOAD(pages_in_use) ? usable - LOAD(pages_in_use) : 0;
    st->bytes_committed += (LOAD(pages_in_use) + dirty) << os_page_shift;
    if (atomic_load(&h->state) == HEAP_ABANDONED) st->heaps_abandoned++;
    st->lock_acquisitions += __atomic_load_n(&h->lock.acquired, __ATOMIC_RELAXED) +
                             __atomic_load_n(&h->pages_lock.acquired, __ATOMIC_RELAXED);
    st->lock_contended += __atomic_load_n(&h->lock.contended, __ATOMIC_RELAXED) +
                          __atomic_load_n(&h->pages_lock.contended, __ATOMIC_RELAXED);
    /* Huge runs other threads gave straight back to this heap (heap_free_remote_run). */
    uint64_t runs = atomic_load_explicit(&h->remote_runs, memory_order_relaxed);
    st->free_calls += runs;
    if (h != huge_heap) st->remote_frees += runs;   /* the shared heap belongs to no thread */
    st->huge_in_use -= runs;
    st->bytes_allocated -= atomic_load_explicit(&h->remote_run_bytes, memory_order_relaxed);
    design_stats(h, st);
#undef LOAD
  }
  /* The registry lock is ours now: its counters are stable (this acquisition included). */
  st->lock_acquisitions += registry_lock.acquired + __atomic_load_n(&huge_cache_lock.acquired, __ATOMIC_RELAXED);
  st->lock_contended += registry_lock.contended + __atomic_load_n(&huge_cache_lock.contended, __ATOMIC_RELAXED);
  lock_release(&registry_lock);
  uint64_t os_live = atomic_load(&os_objects_live), os_bytes = atomic_load(&os_objects_bytes);
  st->huge_in_use += os_live;
  st->bytes_allocated += os_bytes;
  st->bytes_committed += os_bytes + huge_cache_bytes;
  st->bytes_mapped = atomic_load(&os_bytes_mapped);
  st->bytes_discarded = atomic_load(&os_bytes_discarded);
  st->discard_calls = atomic_load(&os_discard_calls);
  st->heaps = atomic_load(&heaps_created);
  st->regions = atomic_load(&regions_live);
  st->region_bytes = atomic_load(&region_bytes_held);
}

#define STATS_FIELDS(X) \
  X(malloc_calls) X(free_calls) X(remote_frees) X(bytes_allocated) X(bytes_mapped) \
  X(bytes_committed) X(bytes_discarded) X(discard_calls) X(pages_in_use) X(pages_free) \
  X(blocks_in_use) X(huge_in_use) X(heaps) X(heaps_abandoned) X(search_words) \
  X(search_words_max) X(searches) X(lock_acquisitions) X(lock_contended) X(regions) \
  X(region_bytes) X(hint_calls) X(hint_same_page) X(hint_same_line) X(hint_same_kregion)

LOCUS_API int locus_stats_get(locus_stats_t *out) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  stats_collect(out);
  return 0;
}

LOCUS_API size_t locus_stats_json(char *buf, size_t len) {
  locus_stats_t st;
  locus_stats_get(&st);
  char dummy[1];
  outbuf_t o = { len ? buf : dummy, len ? len : 1, 0, 0, -1 };
  out_fmt(&o, "{\"variant\": \"%s\", \"version\": \"%s\", \"debug\": %s, \"page_size\": %zu, \"quantum\": %zu, ",
          LOCUS_VARIANT, LOCUS_VERSION, cfg_debug ? "true" : "false", os_page_size, QUANTUM);
#define X(f) out_fmt(&o, "\"%s\": %lu, ", #f, (unsigned long)st.f);
  STATS_FIELDS(X)
#undef X
  out_fmt(&o, "\"search_words_mean\": %lu.%lu, \"options\": {",
          (unsigned long)(st.searches ? st.search_words / st.searches : 0),
          (unsigned long)(st.searches ? (st.search_words * 100 / st.searches) % 100 : 0));
  options_print(&o, true);
  out_str(&o, "}}");
  o.buf[o.pos] = 0;
  return o.need;
}

static void stats_write(int fd) {
  locus_stats_t st;
  locus_stats_get(&st);
  char buf[2048];
  outbuf_t o = { buf, sizeof buf, 0, 0, fd };
  out_fmt(&o, "locus: statistics (%s %s)\n", LOCUS_VARIANT, LOCUS_VERSION);
#define X(f) out_fmt(&o, "locus:   %20s %lu\n", #f, (unsigned long)st.f);
  STATS_FIELDS(X)
#undef X
  out_flush(&o);
}

LOCUS_API void locus_stats_print(int fd) { stats_write(fd); }
static void stats_print_at_exit(void) { stats_write(stats_fd); }

/* ---- per-site statistics (LOCUS_SITES=1, sites.h) ----------------------------------------------- */

/* Every heap's site records summed per site, largest bytes first, as one JSON object; returns
 * the length the whole object needs, like snprintf. */
LOCUS_API size_t locus_sites_json(char *buf, size_t len) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  char dummy[1];
  outbuf_t o = { len ? buf : dummy, len ? len : 1, 0, 0, -1 };
  sites_view_t w;
  bool ok = sites_view(&w);
  out_fmt(&o, "{\"variant\": \"%s\", \"enabled\": %s, \"complete\": %s, \"nsites\": %lu, \"dropped\": %lu, \"sites\": [",
          LOCUS_VARIANT, opt.sites ? "true" : "false", ok ? "true" : "false", (unsigned long)w.n,
          (unsigned long)w.dropped);
  for (size_t i = 0; i < w.n; i++) {
    const site_t *s = &w.v[i];
    const char *module, *symbol;
    uintptr_t off;
    sites_resolve(s->ctx, &module, &symbol, &off);
    out_fmt(&o, "%s{\"site\": \"%p\", \"symbol\": \"", i ? ", " : "", (void *)s->ctx);
    sites_out_name(&o, symbol);
    out_str(&o, "\", \"module\": \"");
    sites_out_name(&o, module);
    out_fmt(&o, "\", \"offset\": %lu, \"calls\": %lu, \"bytes\": %lu, \"min\": %lu, \"max\": %lu, \"mode\": %lu, \"custom\": %s}",
            (unsigned long)off, (unsigned long)s->calls, (unsigned long)s->bytes, (unsigned long)s->min,
            (unsigned long)s->max, (unsigned long)s->mode, s->flags & SITE_CUSTOM ? "true" : "false");
  }
  out_str(&o, "]}");
  o.buf[o.pos] = 0;
  sites_view_done(&w);
  return o.need;
}

#define SITES_REPORT_TOP 32

/* At exit: the top sites by bytes on stderr, and the JSON into LOCUS_SITES_FILE when set. */
static void sites_at_exit(void) {
  sites_view_t w;
  if (!sites_view(&w)) return;
  char buf[4096];
  outbuf_t o = { buf, sizeof buf, 0, 0, stats_fd };
  out_fmt(&o, "locus: call sites (%s): %lu sites, %lu calls not recorded (table full); top %u by bytes\n",
          LOCUS_VARIANT, (unsigned long)w.n, (unsigned long)w.dropped, SITES_REPORT_TOP);
  for (size_t i = 0; i < w.n && i < SITES_REPORT_TOP; i++) {
    const site_t *s = &w.v[i];
    const char *module, *symbol;
    uintptr_t off;
    sites_resolve(s->ctx, &module, &symbol, &off);
    out_fmt(&o, "locus: site %p %s+0x%lx (%s) calls %lu bytes %lu custom %s sizes %lu..%lu mode %lu\n",
            (void *)s->ctx, symbol ? symbol : "", (unsigned long)off, module, (unsigned long)s->calls,
            (unsigned long)s->bytes, s->flags & SITE_CUSTOM ? "yes" : "no", (unsigned long)s->min,
            (unsigned long)s->max, (unsigned long)s->mode);
  }
  out_flush(&o);
  sites_view_done(&w);
  const char *file = getenv("LOCUS_SITES_FILE");
  if (!file || !*file) return;
  char path[4096];   /* "%p" in the name: this process's id (a program that runs others) */
  outbuf_t po = { path, sizeof path, 0, 0, -1 };
  for (const char *c = file; *c; c++) {
    if (c[0] == '%' && c[1] == 'p') { out_fmt(&po, "%d", (int)getpid()); c++; }
    else out_char(&po, *c);
  }
  path[po.pos] = 0;
  if (po.need >= sizeof path) return;
  size_t need = locus_sites_json(NULL, 0) + 4096;   /* room for sites the report itself adds */
  size_t bytes = align_up(need, os_page_size);
  char *json = os_map(bytes);
  if (!json) return;
  size_t n = locus_sites_json(json, need);
  if (n >= need) n = need - 1;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    for (size_t done = 0; done < n;) {
      ssize_t k = write(fd, json + done, n - done);
      if (k <= 0) break;
      done += (size_t)k;
    }
    close(fd);
  } else {
    locus_printf(2, "locus: LOCUS_SITES_FILE: cannot open %s\n", path);
  }
  os_unmap(json, bytes);
}

LOCUS_API const char *locus_version(void) { return LOCUS_VERSION; }
LOCUS_API const char *locus_variant(void) { return LOCUS_VARIANT; }

/* Purges every heap: the caller's own directly, abandoned ones under their lock, and other
 * live threads' heaps are left to their owners (their lists are not ours to touch). */
LOCUS_API size_t locus_purge(void) {
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) return 0;
  size_t before = atomic_load(&os_bytes_discarded);
  heap_t *me = tl_heap;
  if (me != &heap_empty) {
    heap_collect(me);
    design_purge(me);
    region_release_chunks(me);
    pages_purge(me, UINT64_MAX, 0);
  }
  if (huge_heap) {
    huge_run_quarantine_flush(huge_heap);
    pages_purge(huge_heap, UINT64_MAX, 0);
  }
  lock_acquire(&registry_lock);
  for (heap_t *h = registry; h; h = h->next_all) {
    if (h == me || atomic_load(&h->state) != HEAP_ABANDONED || !lock_try(&h->lock)) continue;
    if (atomic_load(&h->state) == HEAP_ABANDONED) {
      heap_collect(h);
      design_purge(h);
      pages_purge(h, UINT64_MAX, 0);
    }
    lock_release(&h->lock);
  }
  lock_release(&registry_lock);
  huge_cache_purge(UINT64_MAX);
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
#define X(f) out_fmt(&o, "<stat name=\"%s\" value=\"%lu\"/>\n", #f, (unsigned long)st.f);
  STATS_FIELDS(X)
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
  if (unlikely(sites_check)) return cxx_new_sited(size, align, nothrow, (uintptr_t)__builtin_return_address(0));
  void *p = align ? aligned_impl(align, size, false) : design_alloc(tl_heap, size, false);
  return likely(p != NULL) ? p : cxx_new_retry(size, align, nothrow);
}

/* Sized delete's size against the object (debug and secure builds): more than its usable size
 * is wrong; so is, in the secure build, less than operator new(size) could have given it (a
 * design that says how much: DESIGN_USABLE_MAX). Aligned deletes pass exact = false: their
 * objects may hold the alignment's padding. */
static NOINLINE void cxx_delete_check(void *p, size_t size, bool exact) {
  size_t usable = usable_impl(p, "operator delete");
  if (usable < size) locus_fatal("operator delete", "size larger than the object", p);
#ifdef DESIGN_USABLE_MAX
  if (cfg_secure && exact && usable > design_usable_max(size))
    locus_fatal("operator delete", "size smaller than the object", p);
#endif
  (void)exact;
}

static inline void cxx_delete(void *p, size_t size, bool exact) {
  if ((cfg_debug || cfg_secure) && p && size) cxx_delete_check(p, size, exact);
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
