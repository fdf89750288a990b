/* stats.h — the statistics: every heap's counters and the design's summed into locus_stats_t,
 * as JSON and as text; the per-site report (LOCUS_SITES=1); what is printed at exit. */
#ifndef LOCUS_STATS_H
#define LOCUS_STATS_H

/* ---- statistics ------------------------------------------------------------------------------ */

/* How the sum over the heaps takes each kind of field (stats_fields.h); LOAD(f) reads heap h's
 * counter f. */
#define STATS_SUM_HEAP(st, f) (st)->f += LOAD(f);
#define STATS_SUM_MAXIMUM(st, f) { uint64_t m_ = LOAD(f); if (m_ > (st)->f) (st)->f = m_; }
#define STATS_SUM_GLOBAL(st, f)

static void stats_collect(locus_stats_t *st) {
  memset(st, 0, sizeof *st);
  st->version = 5;
  lock_acquire(&registry_lock);
  for (heap_t *h = registry; h; h = h->next_all) {
#define LOAD(f) __atomic_load_n(&h->stats.f, __ATOMIC_RELAXED)
#define X(f, how) STATS_SUM_##how(st, f)
    LOCUS_STATS_FIELDS(X)
#undef X
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
  st->bytes_committed += os_bytes + huge_cache_bytes + huge_tail_bytes;
  st->bytes_mapped = atomic_load(&os_bytes_mapped);
  st->bytes_discarded = atomic_load(&os_bytes_discarded);
  st->discard_calls = atomic_load(&os_discard_calls);
  st->os_calls = atomic_load(&os_calls);
  st->heaps = atomic_load(&heaps_created);
  st->regions = atomic_load(&regions_live);
  st->region_bytes = atomic_load(&region_bytes_held);
}

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
#define X(f, how) out_fmt(&o, "\"%s\": %lu, ", #f, (unsigned long)st.f);
  LOCUS_STATS_FIELDS(X)
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
#define X(f, how) out_fmt(&o, "locus:   %20s %lu\n", #f, (unsigned long)st.f);
  LOCUS_STATS_FIELDS(X)
#undef X
  out_flush(&o);
}


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

/* Runs at exit (library destructor), after the program's own exit handlers. */
static void sites_at_exit(void);

__attribute__((destructor)) static void locus_at_exit(void) {
  if (atomic_load(&init_state) != 2) return;
  if (opt.stats) stats_print_at_exit();
  if (opt.sites) sites_at_exit();
}

#endif
