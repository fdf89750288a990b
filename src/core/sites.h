/* sites.h — call sites: the context id of an allocation and a bounded per-heap table of
 * per-site statistics (LOCUS_SITES=1, every library; docs/sites.md).
 *
 * The context id is the return address of the call into the allocator. When that address lies
 * in a "wrapper" (libc: strdup, fopen...; libstdc++: std::string...; this library itself:
 * realloc's out-of-line path, aligned_alloc -> memalign), the site is the first return address
 * up the stack outside the wrappers, found by unwinding frame by frame from the modules'
 * call-frame information (unwind.h). Where a frame cannot be followed the site is the wrapper's
 * own return address: calls from two places merged under their wrapper, never one caller's calls
 * given to another. The mappings are read once from /proc/self/maps at start-up (no loader
 * lock, no allocation); code loaded later by dlopen is not known, so its sites are used as
 * they are.
 *
 * The table: SITES_SLOTS entries mapped from the OS per heap at its first recorded call (never
 * malloc), open addressing with linear probing, filled to at most SITES_MAX; calls from sites
 * that do not fit count in `dropped`. Entries are never removed, and heaps are never freed, so
 * the tables of exited threads stay readable. Only the heap's owner writes its table; readers
 * (locus_sites_json, the report at exit) read it relaxed. A design may set flags on a site
 * (SITE_CUSTOM: lf gave it a custom bin).
 *
 * After unwind.h in the core's order (src/core/README.md). */
#ifndef LOCUS_SITES_H
#define LOCUS_SITES_H

#include <dlfcn.h>

#define SITES_SHIFT        12
#define SITES_SLOTS        (1u << SITES_SHIFT)
#define SITES_MAX          (SITES_SLOTS / 4 * 3)
#define SITE_CUSTOM        1u

typedef struct site {
  uintptr_t ctx;        /* the context id (0: empty slot) */
  uint64_t calls, bytes;
  uint64_t min, max;    /* smallest and largest size asked */
  uint64_t mode;        /* the most frequent size (majority vote: exact when one size has most) */
  uint32_t votes;       /* the vote's counter */
  uint32_t flags;       /* SITE_* set by the design */
} site_t;

struct sites_table {
  uint32_t used;        /* entries in use */
  uint64_t dropped;     /* calls from sites that did not fit */
  site_t slot[SITES_SLOTS];
};

static uintptr_t sites_wrap_lo, sites_wrap_span;        /* the span of all of them: the fast test */
static bool sites_maps_read;
/* The allocation path's one test: true until start-up has read the options (so that the first
 * call of the process is recorded), then LOCUS_SITES. */
static bool sites_check = true;
static _Atomic uint64_t sites_unmapped;                 /* calls lost: no table could be mapped */

static NOINLINE uintptr_t sites_walk(uintptr_t ra);

/* ---- the context id ------------------------------------------------------------------------ */

static uintptr_t sites_parse_hex(char **s) {
  uintptr_t v = 0;
  for (;; (*s)++) {
    char c = **s;
    unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;
    if (d == 16) return v;
    v = v << 4 | d;
  }
}

static bool sites_is_wrapper_path(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5) ||
         !strncmp(base, "libstdc++.so", 12) || !strncmp(base, "libgcc_s.so", 11);
}

/* The file of the last mapping with offset 0: where a later executable mapping of the same
 * file finds its ELF headers (the lines of one file are consecutive). */
static struct { uintptr_t start, end; char path[256]; } sites_file;

/* One line of /proc/self/maps: "start-end perms offset dev inode   path". */
static void sites_maps_line(char *line) {
  char *s = line;
  uintptr_t start = sites_parse_hex(&s);
  if (*s++ != '-') return;
  uintptr_t end = sites_parse_hex(&s);
  if (*s++ != ' ') return;
  bool exec = s[2] == 'x';
  s += 5;
  uintptr_t offset = sites_parse_hex(&s);
  char *path = strchr(s, '/');
  if (path && offset == 0 && strlen(path) < sizeof sites_file.path) {
    sites_file.start = start;
    sites_file.end = end;
    strcpy(sites_file.path, path);
  }
  if (!exec) return;
  uintptr_t self = (uintptr_t)&sites_walk;
  bool wrapper = (path && sites_is_wrapper_path(path)) || (self >= start && self < end);
  if (wrapper) {
    bool same_file = path && !strcmp(path, sites_file.path);
    unwind_module_add(start, end, same_file ? sites_file.start : 0, same_file ? sites_file.end - sites_file.start : 0);
    uintptr_t lo = sites_wrap_span && sites_wrap_lo < start ? sites_wrap_lo : start;
    uintptr_t hi = sites_wrap_span && sites_wrap_lo + sites_wrap_span > end ? sites_wrap_lo + sites_wrap_span : end;
    sites_wrap_lo = lo;
    sites_wrap_span = hi - lo;
  }
}

/* Reads the executable mappings once (start-up, before threads can race on it). */
static void sites_read_maps(void) {
  if (sites_maps_read) return;
  sites_maps_read = true;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char buf[8192];
  size_t have = 0;
  for (;;) {
    ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
    if (n <= 0) break;
    have += (size_t)n;
    buf[have] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = 0;
      sites_maps_line(line);
      line = nl + 1;
    }
    have = (size_t)(buf + have - line);
    if (have == sizeof buf - 1) have = 0;   /* a line longer than the buffer: dropped */
    memmove(buf, line, have);
  }
  close(fd);
}

/* Whether a may lie in a wrapper: the fast test (one compare against the span). */
static ALWAYS_INLINE bool sites_maybe_wrapper(uintptr_t a) { return a - sites_wrap_lo < sites_wrap_span; }

static bool sites_in_wrapper(uintptr_t a) { return unwind_known(a); }

/* The site of a call that came through a wrapper (see above): the first return address up the
 * stack outside the wrappers, or ra when the walk cannot say. */
static NOINLINE uintptr_t sites_walk(uintptr_t ra) {
  uintptr_t site = unwind_first_outside();
  return site ? site : ra;
}

/* The context id of a call whose return address is ra. */
static uintptr_t sites_context(uintptr_t ra) {
  return sites_maybe_wrapper(ra) && sites_in_wrapper(ra) ? sites_walk(ra) : ra;
}

/* ---- the table ------------------------------------------------------------------------------ */

/* h's entry for ctx, made if missing; NULL when the table is full or cannot be mapped (the call
 * is counted as dropped). Owner only. */
static site_t *sites_entry(heap_t *h, uintptr_t ctx) {
  struct sites_table *t = h->sites;
  if (unlikely(!t)) {
    t = os_map(align_up(sizeof *t, os_page_size));
    if (!t) { atomic_fetch_add_explicit(&sites_unmapped, 1, memory_order_relaxed); return NULL; }
    __atomic_store_n(&h->sites, t, __ATOMIC_RELEASE);
  }
  size_t i = (size_t)((ctx * 0x9E3779B97F4A7C15ull) >> (64 - SITES_SHIFT));
  for (;; i = (i + 1) & (SITES_SLOTS - 1)) {
    site_t *s = &t->slot[i];
    if (s->ctx == ctx) return s;
    if (!s->ctx) break;
  }
  if (t->used >= SITES_MAX) { __atomic_store_n(&t->dropped, t->dropped + 1, __ATOMIC_RELAXED); return NULL; }
  site_t *s = &t->slot[i];
  s->min = UINT64_MAX;
  __atomic_store_n(&s->ctx, ctx, __ATOMIC_RELEASE);
  __atomic_store_n(&t->used, t->used + 1, __ATOMIC_RELAXED);
  return s;
}

/* One call of `size` bytes from the call whose return address is ra, in the caller's heap.
 * Out of line: the allocation path only tests opt.sites. */
static NOINLINE void sites_note(uintptr_t ra, size_t size) {
  heap_t *h = tl_heap;
  if (h == &heap_empty) return;
  site_t *s = sites_entry(h, sites_context(ra));
  if (!s) return;
  __atomic_store_n(&s->calls, s->calls + 1, __ATOMIC_RELAXED);
  __atomic_store_n(&s->bytes, s->bytes + size, __ATOMIC_RELAXED);
  if (size < s->min) __atomic_store_n(&s->min, size, __ATOMIC_RELAXED);
  if (size > s->max) __atomic_store_n(&s->max, size, __ATOMIC_RELAXED);
  if (s->mode == size) s->votes++;
  else if (s->votes == 0) { __atomic_store_n(&s->mode, size, __ATOMIC_RELAXED); s->votes = 1; }
  else s->votes--;
}

/* A design marks the site ctx in h's table (lf: SITE_CUSTOM when it gets a custom bin). */
static inline void sites_flag(heap_t *h, uintptr_t ctx, uint32_t flag) {
  if (!opt.sites) return;
  site_t *s = sites_entry(h, ctx);
  if (s) __atomic_fetch_or(&s->flags, flag, __ATOMIC_RELAXED);
}

/* ---- reading: every heap's records, summed per site --------------------------------------- */

typedef struct sites_view {
  site_t *v;            /* one record per site, sorted by bytes (largest first) */
  size_t n, map_bytes;
  uint64_t dropped;
} sites_view_t;

static bool sites_by_ctx(const site_t *a, const site_t *b) { return a->ctx < b->ctx; }
static bool sites_by_bytes(const site_t *a, const site_t *b) {
  return a->bytes > b->bytes || (a->bytes == b->bytes && a->calls > b->calls);
}

/* Heap sort (libc's qsort may allocate); `before` is the order. */
static void sites_sort(site_t *v, size_t n, bool (*before)(const site_t *, const site_t *)) {
  if (n < 2) return;
  for (size_t k = n / 2 + 1, end = n; end > 1;) {
    size_t root;
    if (k > 0) {
      root = --k;
    } else {
      site_t t = v[0]; v[0] = v[--end]; v[end] = t;
      root = 0;
    }
    for (;;) {
      size_t child = 2 * root + 1;
      if (child >= end) break;
      if (child + 1 < end && before(&v[child], &v[child + 1])) child++;
      if (!before(&v[root], &v[child])) break;
      site_t t = v[root]; v[root] = v[child]; v[child] = t;
      root = child;
    }
  }
}

/* A copy of every heap's records merged per site (memory from the OS; sites_view_done). */
static bool sites_view(sites_view_t *w) {
  memset(w, 0, sizeof *w);
  w->dropped = atomic_load_explicit(&sites_unmapped, memory_order_relaxed);
  size_t n = 0;
  for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all)
    if (__atomic_load_n(&h->sites, __ATOMIC_ACQUIRE)) n += SITES_SLOTS;
  if (!n) return true;
  w->map_bytes = align_up(n * sizeof(site_t), os_page_size);
  w->v = os_map(w->map_bytes);
  if (!w->v) return false;
  size_t k = 0;
  for (heap_t *h = __atomic_load_n(&registry, __ATOMIC_ACQUIRE); h; h = h->next_all) {
    struct sites_table *t = __atomic_load_n(&h->sites, __ATOMIC_ACQUIRE);
    if (!t) continue;
    w->dropped += __atomic_load_n(&t->dropped, __ATOMIC_RELAXED);
    for (size_t i = 0; i < SITES_SLOTS && k < n; i++) {
      site_t s;
      s.ctx = __atomic_load_n(&t->slot[i].ctx, __ATOMIC_ACQUIRE);
      if (!s.ctx) continue;
      s.calls = __atomic_load_n(&t->slot[i].calls, __ATOMIC_RELAXED);
      s.bytes = __atomic_load_n(&t->slot[i].bytes, __ATOMIC_RELAXED);
      s.min = __atomic_load_n(&t->slot[i].min, __ATOMIC_RELAXED);
      s.max = __atomic_load_n(&t->slot[i].max, __ATOMIC_RELAXED);
      s.mode = __atomic_load_n(&t->slot[i].mode, __ATOMIC_RELAXED);
      s.votes = __atomic_load_n(&t->slot[i].votes, __ATOMIC_RELAXED);
      s.flags = __atomic_load_n(&t->slot[i].flags, __ATOMIC_RELAXED);
      if (s.calls || s.flags) w->v[k++] = s;
    }
  }
  sites_sort(w->v, k, sites_by_ctx);
  size_t m = 0;
  for (size_t i = 0; i < k; i++) {
    site_t *s = &w->v[i], *d = m ? &w->v[m - 1] : NULL;
    if (d && d->ctx == s->ctx) {
      if (!d->calls || (s->calls && s->min < d->min)) d->min = s->min;
      if (s->max > d->max) d->max = s->max;
      if (s->votes > d->votes) { d->mode = s->mode; d->votes = s->votes; }
      d->calls += s->calls;
      d->bytes += s->bytes;
      d->flags |= s->flags;
    } else {
      w->v[m++] = *s;
    }
  }
  for (size_t i = 0; i < m; i++) if (!w->v[i].calls) w->v[i].min = 0;
  sites_sort(w->v, m, sites_by_bytes);
  w->n = m;
  return true;
}

static void sites_view_done(sites_view_t *w) {
  if (w->v) os_unmap(w->v, w->map_bytes);
}

/* The caller of a site by dladdr: symbol and offset, or the module's base and the offset in it
 * (for addr2line). Outside the allocation path only (dladdr takes the loader's lock). */
static void sites_resolve(uintptr_t ctx, const char **module, const char **symbol, uintptr_t *off) {
  Dl_info info;
  *module = "?";
  *symbol = NULL;
  uintptr_t base = 0;
  if (dladdr((void *)ctx, &info)) {
    if (info.dli_fname) *module = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
    *symbol = info.dli_sname;
    base = *symbol ? (uintptr_t)info.dli_saddr : (uintptr_t)info.dli_fbase;
  }
  *off = ctx - base;
}

/* A name for JSON: quotes, backslashes and control characters become '?'. */
static void sites_out_name(outbuf_t *o, const char *s) {
  for (; s && *s; s++) out_char(o, *s == '"' || *s == '\\' || (unsigned char)*s < 0x20 ? '?' : *s);
}

#endif
