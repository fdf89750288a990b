/* region_backends.h — the region implementations bench/regions.c runs its workloads over (its
 * MODES: Locus's region API, a bump region, emulation over malloc/free, talloc, APR pools,
 * mimalloc heaps, jemalloc arenas; regions.c's header says what each does). Each fills B, the
 * one back end a run uses, with its create/alloc/release/clear/destroy; a peer's library is
 * loaded with dlopen, and a missing one ends the program with one line and exit status 2.
 * Part of regions.c, included where it was; used by nothing else.
 */
#ifndef LOCUS_BENCH_REGION_BACKENDS_H
#define LOCUS_BENCH_REGION_BACKENDS_H

typedef struct backend {
  const char *name;
  int nests;                            /* clear/destroy of a region destroys its children */
  void *(*create)(void *parent);        /* parent: NULL, or a region when nests */
  void *(*alloc)(void *h, size_t n);
  void (*release)(void *h, void *p);    /* one object; may do nothing */
  void (*clear)(void **h);              /* may replace the handle */
  void (*destroy)(void *h);
} backend;

static backend B;
static char **saved_argv;               /* for the jemalloc re-exec */

/* A mode whose library is missing or lacks regions: one line, exit status 2. */
static void unavailable(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void unavailable(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vexit(2, "", fmt, ap);
}

/* A function of a dlopen'ed library (or of the whole process, lib = RTLD_DEFAULT). */
static void *need(void *lib, const char *mode, const char *symbol) {
  void *f = dlsym(lib, symbol);
  if (f == NULL) unavailable("%s unavailable: %s not found", mode, symbol);
  return f;
}

static void *open_library(const char *mode, const char *soname, const char *package) {
  void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL)
    unavailable("%s unavailable: cannot load %s (apt-get install %s)", mode, soname, package);
  return lib;
}

/* locus */
static void *(*locus_create)(void *);
static void *(*locus_malloc)(void *, size_t);
static void (*locus_free)(void *, void *);
static void (*locus_clear)(void *);
static void (*locus_destroy)(void *);
static void *lo_create(void *parent) { return locus_create(parent); }
static void *lo_alloc(void *h, size_t n) { return locus_malloc(h, n); }
static void lo_release(void *h, void *p) { locus_free(h, p); }
static void lo_clear(void **h) { locus_clear(*h); }
static void lo_destroy(void *h) { locus_destroy(h); }

static void init_locus(void) {
  if (dlsym(RTLD_DEFAULT, "locus_region_create") == NULL)
    unavailable("locus regions unavailable: locus_region_create is not in this process "
                "(run it with LD_PRELOAD of a Locus library)");
  *(void **)&locus_create = need(RTLD_DEFAULT, "locus regions", "locus_region_create");
  *(void **)&locus_malloc = need(RTLD_DEFAULT, "locus regions", "locus_region_malloc");
  *(void **)&locus_free = need(RTLD_DEFAULT, "locus regions", "locus_region_free");
  *(void **)&locus_clear = need(RTLD_DEFAULT, "locus regions", "locus_region_clear");
  *(void **)&locus_destroy = need(RTLD_DEFAULT, "locus regions", "locus_region_destroy");
  B = (backend){"locus", 1, lo_create, lo_alloc, lo_release, lo_clear, lo_destroy};
}

/* bump: a list of chunks, newest first; objects 16-byte aligned */
typedef struct chunk {
  struct chunk *next;
  size_t size;                          /* bytes after the header */
} chunk;
typedef struct {
  char *cur, *end;
  chunk *chunks;                        /* newest first; the last one is the first chunk */
  unsigned nchunks;
} bump;
enum { BUMP_FIRST = 8192, BUMP_MAX = 256 * 1024, CHUNK_HDR = 16 };

/* Freed chunks of the standard sizes (8 KiB << k) are kept for the next region, up to
 * BUMP_CACHE bytes in all, as Hanson's arenas keep free chunks: in steady state a bump region
 * calls malloc only for big objects. */
enum { BUMP_STEPS = 6, BUMP_CACHE = 1 << 20 };
static chunk *bump_cache[BUMP_STEPS];
static size_t bump_cached;

static unsigned bump_step(size_t total) {
  unsigned k = 0;
  while (k < BUMP_STEPS && (size_t)BUMP_FIRST << k != total) k++;
  return k;                             /* BUMP_STEPS: not a standard size */
}

static chunk *bump_chunk(size_t size) {
  unsigned k = bump_step(CHUNK_HDR + size);
  chunk *c;
  if (k < BUMP_STEPS && bump_cache[k] != NULL) {
    c = bump_cache[k];
    bump_cache[k] = c->next;
    bump_cached -= CHUNK_HDR + size;
    return c;
  }
  c = bench_malloc(CHUNK_HDR + size);
  c->size = size;
  return c;
}

static void bump_unchunk(chunk *c) {
  unsigned k = bump_step(CHUNK_HDR + c->size);
  if (k < BUMP_STEPS && bump_cached + CHUNK_HDR + c->size <= BUMP_CACHE) {
    c->next = bump_cache[k];
    bump_cache[k] = c;
    bump_cached += CHUNK_HDR + c->size;
  } else {
    free(c);
  }
}

static void *bu_create(void *parent) {
  (void)parent;
  bump *b = bench_malloc(sizeof *b);
  b->chunks = bump_chunk(BUMP_FIRST - CHUNK_HDR);
  b->chunks->next = NULL;
  b->nchunks = 1;
  b->cur = (char *)b->chunks + CHUNK_HDR;
  b->end = b->cur + b->chunks->size;
  return b;
}

static __attribute__((noinline)) void *bump_slow(bump *b, size_t n) {
  size_t grow = (size_t)BUMP_FIRST << (b->nchunks < 5 ? b->nchunks : 5);
  chunk *c;
  if (n > grow / 4) {                   /* a big object: a chunk of its own, behind */
    c = bump_chunk(n);
    c->next = b->chunks->next;
    b->chunks->next = c;
    return (char *)c + CHUNK_HDR;
  }
  c = bump_chunk(grow - CHUNK_HDR);
  c->next = b->chunks;
  b->chunks = c;
  b->nchunks++;
  b->cur = (char *)c + CHUNK_HDR + n;
  b->end = (char *)c + CHUNK_HDR + c->size;
  return (char *)c + CHUNK_HDR;
}

static void *bu_alloc(void *h, size_t n) {
  bump *b = h;
  n = (n + 15) & ~(size_t)15;
  if ((size_t)(b->end - b->cur) >= n) {
    void *p = b->cur;
    b->cur += n;
    return p;
  }
  return bump_slow(b, n);
}

static void bu_release(void *h, void *p) { (void)h, (void)p; }

static void bu_clear(void **h) {
  bump *b = *h;
  chunk *c = b->chunks;
  while (c->next != NULL) {             /* free all but the first (oldest) chunk */
    chunk *next = c->next;
    bump_unchunk(c);
    c = next;
  }
  b->chunks = c;
  b->nchunks = 1;
  b->cur = (char *)c + CHUNK_HDR;
  b->end = b->cur + c->size;
}

static void bu_destroy(void *h) {
  bu_clear(&h);
  bump *b = h;
  bump_unchunk(b->chunks);
  free(b);
}

/* emulate: every object malloc'd and recorded */
typedef struct {
  void **rec;
  size_t n, cap;
} emu;

static void *em_create(void *parent) {
  (void)parent;
  emu *e = bench_malloc(sizeof *e);
  e->n = 0;
  e->cap = 64;
  e->rec = bench_malloc(sizeof(void *) * e->cap);
  return e;
}

static void *em_alloc(void *h, size_t n) {
  emu *e = h;
  if (e->n == e->cap) {
    void **r = realloc(e->rec, sizeof(void *) * e->cap * 2);
    if (r == NULL) bench_die("realloc of a region's records failed");
    e->rec = r;
    e->cap *= 2;
  }
  void *p = malloc(n);
  e->rec[e->n++] = p;
  return p;
}

static void em_release(void *h, void *p) {
  emu *e = h;
  for (size_t i = e->n; i-- > 0;) {
    if (e->rec[i] == p) {
      e->rec[i] = e->rec[--e->n];
      free(p);
      return;
    }
  }
  bench_die("emulated region: freeing an object it does not hold");
}

static void em_clear(void **h) {
  emu *e = *h;
  for (size_t i = 0; i < e->n; i++) free(e->rec[i]);
  e->n = 0;
}

static void em_destroy(void *h) {
  emu *e = h;
  em_clear(&h);
  free(e->rec);
  free(e);
}

/* talloc */
static void *(*tal_named_const)(const void *, size_t, const char *);
static int (*tal_free)(void *, const char *);
static void (*tal_free_children)(void *);
static void *ta_create(void *parent) { return tal_named_const(parent, 0, "region"); }
static void *ta_alloc(void *h, size_t n) { return tal_named_const(h, n, "object"); }
static void ta_release(void *h, void *p) {
  (void)h;
  if (tal_free(p, "regions.c") != 0) bench_die("talloc_free failed");
}
static void ta_clear(void **h) { tal_free_children(*h); }
static void ta_destroy(void *h) { ta_release(NULL, h); }

static void init_talloc(void) {
  void *lib = open_library("talloc", "libtalloc.so.2", "libtalloc2");
  *(void **)&tal_named_const = need(lib, "talloc", "talloc_named_const");
  *(void **)&tal_free = need(lib, "talloc", "_talloc_free");
  *(void **)&tal_free_children = need(lib, "talloc", "talloc_free_children");
  B = (backend){"talloc", 1, ta_create, ta_alloc, ta_release, ta_clear, ta_destroy};
}

/* APR pools */
static int (*apr_init)(void);
static int (*apr_create)(void **, void *, void *, void *);
static void *(*apr_alloc)(void *, size_t);
static void (*apr_clear)(void *);
static void (*apr_destroy)(void *);
static void *ap_create(void *parent) {
  void *p = NULL;
  if (apr_create(&p, parent, NULL, NULL) != 0 || p == NULL) bench_die("apr_pool_create_ex failed");
  return p;
}
static void *ap_alloc(void *h, size_t n) { return apr_alloc(h, n); }
static void ap_clear(void **h) { apr_clear(*h); }
static void ap_destroy(void *h) { apr_destroy(h); }

static void init_apr(void) {
  void *lib = open_library("apr", "libapr-1.so.0", "libapr1");
  *(void **)&apr_init = need(lib, "apr", "apr_initialize");
  *(void **)&apr_create = need(lib, "apr", "apr_pool_create_ex");
  *(void **)&apr_alloc = need(lib, "apr", "apr_palloc");
  *(void **)&apr_clear = need(lib, "apr", "apr_pool_clear");
  *(void **)&apr_destroy = need(lib, "apr", "apr_pool_destroy");
  if (apr_init() != 0) bench_die("apr_initialize failed");
  B = (backend){"apr", 1, ap_create, ap_alloc, bu_release, ap_clear, ap_destroy};
}

/* mimalloc heaps */
static void *(*mi_new)(void);
static void *(*mi_alloc)(void *, size_t);
static void (*mi_release)(void *);
static void (*mi_destroy)(void *);
static void *mh_create(void *parent) { (void)parent; return mi_new(); }
static void *mh_alloc(void *h, size_t n) { return mi_alloc(h, n); }
static void mh_release(void *h, void *p) { (void)h; mi_release(p); }
static void mh_clear(void **h) {
  mi_destroy(*h);
  *h = mi_new();
}
static void mh_destroy(void *h) { mi_destroy(h); }

static void init_mi_heap(void) {
  void *lib = open_library("mi_heap", "libmimalloc.so.2", "libmimalloc2.0");
  *(void **)&mi_new = need(lib, "mi_heap", "mi_heap_new");
  *(void **)&mi_alloc = need(lib, "mi_heap", "mi_heap_malloc");
  *(void **)&mi_release = need(lib, "mi_heap", "mi_free");
  *(void **)&mi_destroy = need(lib, "mi_heap", "mi_heap_destroy");
  B = (backend){"mi_heap", 0, mh_create, mh_alloc, mh_release, mh_clear, mh_destroy};
}

/* jemalloc arenas. A handle is the arena index + 1. Objects bypass the thread cache, which
 * arena.<i>.reset requires. */
static int (*je_mallctl)(const char *, void *, size_t *, void *, size_t);
static void *(*je_mallocx)(size_t, int);
static void (*je_dallocx)(void *, int);
#define JE_TCACHE_NONE (1 << 8)                        /* MALLOCX_TCACHE_NONE */
#define JE_ARENA(i) ((int)(((unsigned)(i) + 1) << 20)) /* MALLOCX_ARENA(i) */

static unsigned je_index(void *h) { return (unsigned)((uintptr_t)h - 1); }

static void je_ctl(void *h, const char *what) {
  char name[64];
  snprintf(name, sizeof name, "arena.%u.%s", je_index(h), what);
  if (je_mallctl(name, NULL, NULL, NULL, 0) != 0) bench_die("mallctl(\"%s\") failed", name);
}

enum { JE_KEEP = 64 };
static void *je_kept[JE_KEEP];          /* arenas reset and free for the next region */
static unsigned je_nkept;

static void *je_create(void *parent) {
  (void)parent;
  if (je_nkept > 0) return je_kept[--je_nkept];
  unsigned idx;
  size_t len = sizeof idx;
  if (je_mallctl("arenas.create", &idx, &len, NULL, 0) != 0) bench_die("arenas.create failed");
  return (void *)((uintptr_t)idx + 1);
}
static void *je_alloc(void *h, size_t n) {
  return je_mallocx(n, JE_ARENA(je_index(h)) | JE_TCACHE_NONE);
}
static void je_release(void *h, void *p) { (void)h; je_dallocx(p, JE_TCACHE_NONE); }
static void je_clear(void **h) { je_ctl(*h, "reset"); }
static void je_destroy(void *h) {
  if (je_nkept == JE_KEEP) {
    je_ctl(h, "destroy");
    return;
  }
  je_ctl(h, "reset");
  je_kept[je_nkept++] = h;
}

/* libjemalloc.so.2 keeps its thread state in static TLS, which a dlopen'ed library gets from
 * glibc's small surplus only: when that is too small, run again with a larger surplus. */
static void init_je_arena(void) {
  void *lib = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char *err = dlerror();
    if (err != NULL && strstr(err, "static TLS") != NULL && getenv("REGIONS_TLS_RETRY") == NULL) {
      const char *old = getenv("GLIBC_TUNABLES");
      char tun[512];
      snprintf(tun, sizeof tun, "%s%sglibc.rtld.optional_static_tls=65536", old ? old : "",
               old ? ":" : "");
      setenv("GLIBC_TUNABLES", tun, 1);
      setenv("REGIONS_TLS_RETRY", "1", 1);
      execv("/proc/self/exe", saved_argv);
    }
    unavailable("je_arena unavailable: cannot load libjemalloc.so.2 (%s; apt-get install "
                "libjemalloc2)", err ? err : "?");
  }
  unsetenv("REGIONS_TLS_RETRY");
  *(void **)&je_mallctl = need(lib, "je_arena", "mallctl");
  *(void **)&je_mallocx = need(lib, "je_arena", "mallocx");
  *(void **)&je_dallocx = need(lib, "je_arena", "dallocx");
  B = (backend){"je_arena", 0, je_create, je_alloc, je_release, je_clear, je_destroy};
}

static void init_bump(void) {
  B = (backend){"bump", 0, bu_create, bu_alloc, bu_release, bu_clear, bu_destroy};
}
static void init_emulate(void) {
  B = (backend){"emulate", 0, em_create, em_alloc, em_release, em_clear, em_destroy};
}

static const struct {
  const char *name;
  void (*init)(void);
} MODES[] = {
  {"locus", init_locus}, {"bump", init_bump}, {"emulate", init_emulate},
  {"talloc", init_talloc}, {"apr", init_apr}, {"mi_heap", init_mi_heap},
  {"je_arena", init_je_arena},
};

#endif
