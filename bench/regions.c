/* regions — programs that allocate in regions (arenas, pools), after the region programs of
 * "Reconsidering Custom Memory Allocation" (Berger, Zorn & McKinley; seed 004 §§5-8), each
 * run over one of several region implementations.
 *
 * Workloads (all deterministic; the checksum is the same in every mode and under every
 * allocator):
 *   compiler  lcc-like. Per function, an AST of small nodes (16-100 B) with identifier
 *             strings and a few 1-8 KiB tables is built in the function's region, walked
 *             (every node checked and summed), then lowered to a list of instructions in the
 *             same region while the tree is dead, and the region is cleared. Function sizes
 *             vary (64 to 32,768 nodes, log-spread). Three functions in ten make type-checking
 *             temporaries in a child region, destroyed at once two times in three and left to
 *             the function's clear otherwise. Global symbols go to a region that lives for the
 *             whole run.
 *   parser    197.parser-like. Per sentence (256 to 65,536 steps, log-spread), small objects
 *             (16-128 B) are allocated in the sentence's region and 45% of the steps free one
 *             of the eight newest live objects (stack-like, as parser's own allocator
 *             expects); the rest die when the region is cleared at the sentence's end. A
 *             dictionary built at the start lives for the whole run.
 *   server    apache-like. A region per connection (1-8 requests), in it a region per
 *             request, in that a region per handler (1-4): request line, headers and a
 *             header table, then each handler's buckets (32 B-2 KiB; 2% of requests are big,
 *             with up to 16 KiB buckets), of which 30% are consumed (freed) inside the
 *             handler. Half the handler regions are destroyed when the handler ends, the
 *             other half with their request. A log line per request lives in the connection.
 *
 * Modes (how regions are implemented):
 *   locus     the Locus region API (locus_region_*), looked up at run time with
 *             dlsym(RTLD_DEFAULT): the program runs under any allocator and says "locus
 *             regions unavailable" (exit 2) where the loaded one lacks them
 *   bump      a pure bump region written here: chunks from malloc (8 KiB, doubling to
 *             256 KiB; bigger objects get their own), frees are no-ops; a clear keeps the
 *             first chunk, and up to 1 MiB of freed chunks is kept for the next regions.
 *             The speed limit of regions.
 *   emulate   region emulation over malloc/free (seed 004 §5.1): every object is malloc'd and
 *             recorded in a dynamic array of its region; a clear frees them all; a free
 *             frees the object and drops its record (searched from the newest)
 *   talloc    libtalloc.so.2: talloc_named_const for regions and objects, talloc_free,
 *             talloc_free_children to clear
 *   apr       libapr-1.so.0 pools: apr_pool_create_ex, apr_palloc, apr_pool_clear,
 *             apr_pool_destroy; frees are no-ops
 *   mi_heap   libmimalloc.so.2 heaps: mi_heap_new, mi_heap_malloc, mi_free; a clear is
 *             mi_heap_destroy and a new heap
 *   je_arena  libjemalloc.so.2 arenas: arenas.create, mallocx(MALLOCX_ARENA | TCACHE_NONE),
 *             dallocx, arena.<i>.reset to clear. A destroyed region's arena is reset and
 *             kept for the next region (arena.<i>.destroy only past 64 kept): in jemalloc
 *             5.3 an arenas.create + arena.<i>.destroy cycle costs about 100 us and leaves
 *             about 4 KiB resident behind, so a region per request would grow without bound
 * The peers' libraries are loaded with dlopen, so the program builds without their headers;
 * a missing one is one line on stderr and exit status 2. mi_heap and je_arena have no nested
 * regions: for them (and for bump and emulate) this program keeps the tree itself and
 * destroys a region's children, children first, before it clears or destroys the region.
 *
 * Memory held against memory live (seed 004 §7, "drag"): the program counts the bytes it
 * still needs — an object stops being live when it is freed, when its region is cleared or
 * destroyed, or at its last use when the program knows it is dead but leaves it to the
 * region (the compiler's tree during lowering, temporaries and handler data left to the
 * parent) — and samples the memory held, the resident set (/proc/self/statm) above what it
 * was when the workload started, every so many allocations (allocation time counts
 * allocations). It prints, one key=value per line before the result line:
 *   live_peak_kib    the most bytes live at once
 *   held_peak_kib    the most memory held at a sample
 *   hwm_kib          the kernel's resident high-water mark (VmHWM) above the same start
 *   held_live_area   area under the held curve / area under the live curve (the samples are
 *                    evenly spaced in allocation time): 1.0 means memory held only while
 *                    needed; the seed's total drag, with the allocator's overhead included
 *   samples, sample_every (allocations between samples)
 * --profile FILE writes the two curves as CSV (allocations,live_bytes,held_bytes), for a plot
 * like the seed's Fig. 5.
 *
 * usage: regions WORKLOAD MODE [scale] [--quick] [--profile FILE]
 */
#include "bench_util.h"

#include <dlfcn.h>
#include <fcntl.h>

#define USAGE "WORKLOAD MODE [scale] [--quick] [--profile FILE]  (WORKLOAD: compiler, " \
              "parser, server; MODE: locus, bump, emulate, talloc, apr, mi_heap, je_arena)"

/* ---- region back ends (region_backends.h) ------------------------------------------------ */

#include "region_backends.h"

/* ---- memory live and held ----------------------------------------------------------------- */

enum { SAMPLES_MAX = 8192 };
typedef struct {
  uint64_t t, live, held;
} sample_t;
static sample_t samples[SAMPLES_MAX];
static size_t nsamples;
static uint64_t g_live, g_live_peak, g_held_peak, g_allocs, g_next_sample, g_interval;
static uint64_t g_bytes, g_frees, g_clears;
static int statm_fd = -1;
static long rss_base_kib;

static long rss_kib(void) {
  char buf[128];
  ssize_t k = pread(statm_fd, buf, sizeof buf - 1, 0);
  if (k <= 0) bench_die("cannot read /proc/self/statm");
  buf[k] = '\0';
  char *p = buf;
  strtol(p, &p, 10);
  return strtol(p, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024);
}

static __attribute__((noinline)) void take_sample(void) {
  if (nsamples == SAMPLES_MAX) {        /* keep every other sample, sample half as often */
    for (size_t i = 0; i < SAMPLES_MAX / 2; i++) samples[i] = samples[2 * i + 1];
    nsamples = SAMPLES_MAX / 2;
    g_interval *= 2;
  }
  long held = rss_kib() - rss_base_kib;
  uint64_t h = held > 0 ? (uint64_t)held * 1024 : 0;
  samples[nsamples++] = (sample_t){g_allocs, g_live, h};
  if (h > g_held_peak) g_held_peak = h;
  g_next_sample = g_allocs + g_interval;
}

static void start_sampling(uint64_t interval) {
  statm_fd = open("/proc/self/statm", O_RDONLY);
  if (statm_fd < 0) bench_die("cannot open /proc/self/statm");
  memset(samples, 0, sizeof samples);   /* resident before the baseline is taken */
  g_interval = interval;
  g_next_sample = interval;
  rss_base_kib = rss_kib();
}

/* ---- regions as the workloads see them ------------------------------------------------------
 * The program's own record of a region: the back end's handle, its place in the tree, and the
 * bytes of its objects that are still live. */
typedef struct region {
  void *h;
  struct region *parent, *kids, *next, *prev;
  uint64_t live;
} region;

enum { MAX_REGIONS = 64 };
static region region_pool[MAX_REGIONS];
static region *free_regions;

static region *region_new(region *parent) {
  region *r = free_regions;
  if (r == NULL) bench_die("too many regions at once");
  free_regions = r->next;
  r->h = B.create(parent != NULL && B.nests ? parent->h : NULL);
  if (r->h == NULL) bench_die("%s: creating a region failed", B.name);
  r->parent = parent;
  r->kids = r->prev = NULL;
  r->live = 0;
  r->next = parent ? parent->kids : NULL;
  if (parent != NULL) {
    if (parent->kids) parent->kids->prev = r;
    parent->kids = r;
  }
  return r;
}

static void region_unlink(region *r) {
  if (r->parent != NULL) {
    if (r->prev) r->prev->next = r->next;
    else r->parent->kids = r->next;
    if (r->next) r->next->prev = r->prev;
  }
  g_live -= r->live;
  r->next = free_regions;
  free_regions = r;
}

/* The region's children are gone (destroyed by the back end, or here when it cannot): their
 * objects are no longer live and their records are free. */
static void region_drop_kids(region *r, int destroy) {
  while (r->kids != NULL) {
    region *k = r->kids;
    region_drop_kids(k, destroy);
    if (destroy) B.destroy(k->h);
    region_unlink(k);
  }
}

static void region_destroy(region *r) {
  region_drop_kids(r, !B.nests);
  B.destroy(r->h);
  region_unlink(r);
}

static void region_clear(region *r) {
  region_drop_kids(r, !B.nests);
  B.clear(&r->h);
  g_live -= r->live;
  r->live = 0;
  g_clears++;
}

static inline void *ralloc(region *r, size_t n) {
  void *p = B.alloc(r->h, n);
  if (p == NULL) bench_die("%s: allocating %zu bytes in a region failed", B.name, n);
  r->live += n;
  g_live += n;
  g_bytes += n;
  if (g_live > g_live_peak) g_live_peak = g_live;
  if (++g_allocs >= g_next_sample) take_sample();
  return p;
}

static inline void rfree(region *r, void *p, size_t n) {
  B.release(r->h, p);
  r->live -= n;
  g_live -= n;
  g_frees++;
}

/* n bytes of the region's objects are dead (last used) but left to the region. */
static inline void rdead(region *r, uint64_t n) {
  r->live -= n;
  g_live -= n;
}

/* ---- objects ---------------------------------------------------------------------------------
 * Every object starts with a 16-byte header (a link, its size, a serial) and is filled after
 * it with a byte derived from the serial; checking it reads the header, the last byte and a
 * middle one. */
typedef struct obj {
  struct obj *next;
  uint32_t size;
  uint32_t serial;
} obj;

static uint64_t serial, checksum;

static inline unsigned char fill_of(uint32_t s) { return bench_fill_byte(bench_mix(s)); }

static obj *new_obj(region *r, size_t size) {
  obj *o = ralloc(r, size);
  o->next = NULL;
  o->size = (uint32_t)size;
  o->serial = (uint32_t)++serial;
  if (size > sizeof(obj)) memset(o + 1, fill_of(o->serial), size - sizeof(obj));
  return o;
}

/* Checks an object (hdr: the bytes of its header, not filled) and folds it in. */
static inline void use_obj(const obj *o, size_t hdr, const char *what) {
  const unsigned char *b = (const unsigned char *)o;
  unsigned char f = fill_of(o->serial);
  if (o->size > hdr && (b[o->size - 1] != f || b[hdr + (o->size - hdr) / 2] != f))
    bench_die("content mismatch in %s #%u (%u bytes): region memory reused while live", what,
              o->serial, o->size);
  checksum = bench_fold(checksum, ((uint64_t)o->serial << 20) ^ o->size);
}

/* Log-spread in [lo, hi): each power of two equally likely. */
static uint64_t log_spread(bench_rng *r, uint64_t lo, uint64_t hi) {
  unsigned span = 0;
  while ((lo << (span + 1)) <= hi) span++;
  uint64_t base = lo << bench_rng_below(r, span);
  return base + bench_rng_below(r, base);
}

/* ---- compiler (lcc-like) ------------------------------------------------------------------- */

/* A tree node: the header, its first child, then filler; leaves (16-23 B) have no child
 * link. Strings and tables are leaves of their own sizes. */
typedef struct node {
  obj o;
  struct node *kids;
} node;

enum { MAX_DEPTH = 48 };

static size_t node_hdr(const obj *o) { return o->size >= sizeof(node) ? sizeof(node) : sizeof(obj); }

static uint64_t walk(const node *n, uint64_t *count) {
  uint64_t bytes = 0;
  for (; n != NULL; n = (const node *)n->o.next) {
    use_obj(&n->o, node_hdr(&n->o), "tree node");
    ++*count;
    bytes += n->o.size;
    if (n->o.size >= sizeof(node)) bytes += walk(n->kids, count);
  }
  return bytes;
}

static size_t tree_node_size(bench_rng *rng) {
  uint64_t c = bench_rng_below(rng, 100);
  if (c < 30) return (size_t)bench_rng_range(rng, 16, 23);   /* leaves */
  if (c < 42) return 16 + (size_t)bench_rng_range(rng, 4, 48); /* identifiers */
  if (c < 85) return (size_t)bench_rng_range(rng, 24, 48);
  return (size_t)bench_rng_range(rng, 49, 100);
}

static void compile_function(region *fn, region *globals, obj **symbols, bench_rng *rng) {
  uint64_t nodes = log_spread(rng, 64, 32768);
  uint64_t built_bytes = 0, built = 0;

  /* type-checking temporaries in a child region, three functions in ten */
  if (bench_rng_below(rng, 10) < 3) {
    region *tmp = region_new(fn);
    obj *list = NULL;
    uint64_t k = nodes / 4 + 1, tbytes = 0;
    for (uint64_t i = 0; i < k; i++) {
      obj *t = new_obj(tmp, (size_t)bench_rng_range(rng, 16, 64));
      t->next = list;
      list = t;
      tbytes += t->size;
    }
    for (obj *t = list; t != NULL; t = t->next) use_obj(t, sizeof(obj), "temporary");
    if (bench_rng_below(rng, 3) < 2) region_destroy(tmp);
    else rdead(tmp, tbytes);            /* dead, left to the function's clear */
  }

  /* the tree: each node becomes the first child of the open node on top of the stack */
  node *stack[MAX_DEPTH];
  node *root = (node *)new_obj(fn, sizeof(node) + 16);
  root->kids = NULL;
  built_bytes += root->o.size;
  built++;
  int depth = 1;
  stack[0] = root;
  uint64_t tables = 1 + nodes / 2000;
  for (uint64_t i = 1; i < nodes; i++) {
    size_t size;
    node *parent = stack[depth - 1];
    if (tables > 0 && bench_rng_below(rng, nodes) < 1 + nodes / 2000) {
      size = (size_t)bench_rng_range(rng, 1024, 8192);   /* a table, under the root */
      parent = root;
      tables--;
    } else {
      size = tree_node_size(rng);
    }
    node *n = (node *)new_obj(fn, size);
    if (size >= sizeof(node)) n->kids = NULL;
    n->o.next = (obj *)parent->kids;
    parent->kids = n;
    built_bytes += size;
    built++;
    if (size >= sizeof(node) && size < 1024 && depth < MAX_DEPTH && bench_rng_below(rng, 8) < 3)
      stack[depth++] = n;
    else if (depth > 1 && bench_rng_below(rng, 8) < 2)
      depth--;
    /* one identifier in 64 is a new global symbol */
    if (bench_rng_below(rng, 64) == 0) {
      obj *s = new_obj(globals, 16 + (size_t)bench_rng_range(rng, 4, 32));
      s->next = *symbols;
      *symbols = s;
    }
  }

  uint64_t walked = 0;
  use_obj(&root->o, sizeof(node), "root");
  uint64_t walked_bytes = root->o.size + walk(root->kids, &walked);
  if (walked + 1 != built || walked_bytes != built_bytes)
    bench_die("compiler: walked %llu nodes of %llu", (unsigned long long)walked + 1,
              (unsigned long long)built);
  rdead(fn, built_bytes);               /* the tree's last use: lowering does not read it */

  /* lowering: a list of instructions in the same region, while the tree is dead */
  obj *code = NULL;
  for (uint64_t i = 0; i < nodes / 2; i++) {
    obj *ins = new_obj(fn, (size_t)bench_rng_range(rng, 24, 48));
    ins->next = code;
    code = ins;
  }
  for (obj *ins = code; ins != NULL; ins = ins->next) use_obj(ins, sizeof(obj), "instruction");
  region_clear(fn);
}

static void run_compiler(uint64_t functions) {
  bench_rng rng;
  bench_rng_seed(&rng, 0x1cc);
  region *globals = region_new(NULL), *fn = region_new(NULL);
  obj *symbols = NULL;
  for (uint64_t f = 0; f < functions; f++) compile_function(fn, globals, &symbols, &rng);
  for (obj *s = symbols; s != NULL; s = s->next) use_obj(s, sizeof(obj), "global symbol");
  region_destroy(fn);
  region_destroy(globals);
}

/* ---- parser (197.parser-like) --------------------------------------------------------------- */

enum { MAX_STEPS = 65536, DICT_WORDS = 20000 };
static obj *live_stack[MAX_STEPS];

static size_t parser_size(bench_rng *rng) {
  uint64_t c = bench_rng_below(rng, 100);
  if (c < 50) return (size_t)bench_rng_range(rng, 16, 32);
  if (c < 85) return (size_t)bench_rng_range(rng, 33, 64);
  return (size_t)bench_rng_range(rng, 65, 128);
}

static void run_parser(uint64_t sentences) {
  bench_rng rng;
  bench_rng_seed(&rng, 0x197);
  memset(live_stack, 0, sizeof live_stack);
  region *dict = region_new(NULL), *sent = region_new(NULL);
  obj *words = NULL;
  for (uint64_t i = 0; i < DICT_WORDS; i++) {
    obj *w = new_obj(dict, parser_size(&rng));
    w->next = words;
    words = w;
  }
  const obj *cursor = words;
  for (uint64_t s = 0; s < sentences; s++) {
    uint64_t steps = log_spread(&rng, 256, MAX_STEPS);
    size_t top = 0;
    for (uint64_t i = 0; i < steps; i++) {
      if (top > 0 && bench_rng_below(&rng, 100) < 45) {
        size_t back = (size_t)bench_rng_below(&rng, top < 8 ? top : 8);
        size_t at = top - 1 - back;
        obj *o = live_stack[at];
        use_obj(o, sizeof(obj), "parser object");
        rfree(sent, o, o->size);
        memmove(&live_stack[at], &live_stack[at + 1], sizeof(obj *) * back);
        top--;
      } else {
        live_stack[top++] = new_obj(sent, parser_size(&rng));
      }
      if ((i & 63) == 0) {              /* a dictionary lookup */
        use_obj(cursor, sizeof(obj), "dictionary word");
        cursor = cursor->next ? cursor->next : words;
      }
    }
    for (size_t i = 0; i < top; i++) use_obj(live_stack[i], sizeof(obj), "parser object");
    region_clear(sent);
  }
  for (const obj *w = words; w != NULL; w = w->next) use_obj(w, sizeof(obj), "dictionary word");
  region_destroy(sent);
  region_destroy(dict);
}

/* ---- server (apache-like) ------------------------------------------------------------------ */

enum { MAX_BUCKETS = 128 };

static void handle(region *req, bench_rng *rng, int big) {
  region *h = region_new(req);
  obj *live[MAX_BUCKETS];
  unsigned n = (unsigned)bench_rng_range(rng, 4, big ? MAX_BUCKETS : 40), nl = 0;
  for (unsigned i = 0; i < n; i++) {
    live[nl++] = new_obj(h, (size_t)log_spread(rng, 32, big ? 16384 : 2048));
    if (nl > 1 && bench_rng_below(rng, 10) < 3) {      /* an older bucket consumed */
      unsigned j = (unsigned)bench_rng_below(rng, nl - 1);
      use_obj(live[j], sizeof(obj), "bucket");
      rfree(h, live[j], live[j]->size);
      live[j] = live[--nl];
    }
  }
  for (unsigned i = 0; i < nl; i++) use_obj(live[i], sizeof(obj), "bucket");
  if (bench_rng_below(rng, 2) == 0) region_destroy(h);
  else rdead(h, h->live);               /* dead, left to the request */
}

static void run_server(uint64_t requests) {
  bench_rng rng;
  bench_rng_seed(&rng, 0xa9ac4e);
  region *server = region_new(NULL);
  obj *config = NULL;
  for (unsigned i = 0; i < 2000; i++) {
    obj *c = new_obj(server, (size_t)log_spread(&rng, 16, 512));
    c->next = config;
    config = c;
  }
  uint64_t done = 0;
  while (done < requests) {
    region *conn = region_new(server);
    obj *log = NULL;
    unsigned per_conn = (unsigned)bench_rng_range(&rng, 1, 8);
    for (unsigned q = 0; q < per_conn && done < requests; q++, done++) {
      region *req = region_new(conn);
      int big = bench_rng_below(&rng, 100) < 2;
      obj *headers = NULL;
      unsigned nh = (unsigned)bench_rng_range(&rng, 10, 40);
      for (unsigned i = 0; i < nh; i++) {
        obj *hd = new_obj(req, (size_t)bench_rng_range(&rng, 16, 200));
        hd->next = headers;
        headers = hd;
      }
      obj *table = new_obj(req, (size_t)bench_rng_range(&rng, 1024, 4096));
      for (obj *hd = headers; hd != NULL; hd = hd->next) use_obj(hd, sizeof(obj), "header");
      unsigned handlers = (unsigned)bench_rng_range(&rng, 1, 4);
      for (unsigned i = 0; i < handlers; i++) handle(req, &rng, big);
      use_obj(table, sizeof(obj), "header table");
      obj *line = new_obj(conn, (size_t)bench_rng_range(&rng, 60, 200));
      line->next = log;
      log = line;
      region_destroy(req);
    }
    for (obj *l = log; l != NULL; l = l->next) use_obj(l, sizeof(obj), "log line");
    region_destroy(conn);
  }
  for (obj *c = config; c != NULL; c = c->next) use_obj(c, sizeof(obj), "config");
  region_destroy(server);
}

/* ---- main -------------------------------------------------------------------------------- */

static const struct {
  const char *name;
  void (*run)(uint64_t);
  uint64_t per_scale;                   /* functions, sentences, requests */
  uint64_t sample_every;                /* allocations between samples at full size */
} WORKLOADS[] = {
  {"compiler", run_compiler, 2400, 4096},
  {"parser", run_parser, 4000, 4096},
  {"server", run_server, 300000, 4096},
};

static void write_profile(const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) bench_die("cannot write %s: %s", path, strerror(errno));
  fprintf(f, "allocations,live_bytes,held_bytes\n");
  for (size_t i = 0; i < nsamples; i++)
    fprintf(f, "%llu,%llu,%llu\n", (unsigned long long)samples[i].t,
            (unsigned long long)samples[i].live, (unsigned long long)samples[i].held);
  if (fclose(f) != 0) bench_die("cannot write %s", path);
}

static const char *take_value(int *argc, char **argv, const char *flag) {
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], flag) != 0) continue;
    if (i + 1 >= *argc) {
      fprintf(stderr, "%s: %s needs a file name\nusage: %s %s\n", bench_name, flag, bench_name,
              USAGE);
      exit(2);
    }
    const char *v = argv[i + 1];
    memmove(&argv[i], &argv[i + 2], sizeof(char *) * (size_t)(*argc - i - 1));
    *argc -= 2;
    return v;
  }
  return NULL;
}

static void unknown(const char *what, const char *arg) {
  fprintf(stderr, "%s: unknown %s '%s'\nusage: %s %s\n", bench_name, what, arg, bench_name, USAGE);
  exit(2);
}

int main(int argc, char **argv) {
  bench_name = "regions";
  saved_argv = bench_malloc(sizeof(char *) * (size_t)(argc + 1));
  memcpy(saved_argv, argv, sizeof(char *) * (size_t)(argc + 1));
  const char *profile = take_value(&argc, argv, "--profile");
  int quick = bench_take_flag(&argc, argv, "--quick");
  bench_no_other_options(argc, argv, USAGE);
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s %s\n", bench_name, USAGE);
    exit(2);
  }
  int w = 0, m = 0;
  while (strcmp(argv[1], WORKLOADS[w].name) != 0)
    if (++w == (int)(sizeof WORKLOADS / sizeof WORKLOADS[0])) unknown("workload", argv[1]);
  while (strcmp(argv[2], MODES[m].name) != 0)
    if (++m == (int)(sizeof MODES / sizeof MODES[0])) unknown("mode", argv[2]);
  long scale = bench_scale_arg(argc, argv, 3, USAGE);
  uint64_t work = bench_work(scale, WORKLOADS[w].per_scale, quick);
  if (work == 0) work = 1;

  MODES[m].init();
  for (int i = MAX_REGIONS - 1; i >= 0; i--) {
    region_pool[i].next = free_regions;
    free_regions = &region_pool[i];
  }
  uint64_t every = WORKLOADS[w].sample_every / (quick ? BENCH_QUICK_DIVISOR : 1);
  start_sampling(every ? every : 1);
  WORKLOADS[w].run(work);
  take_sample();

  double held_area = 0, live_area = 0;
  for (size_t i = 0; i < nsamples; i++) {
    held_area += (double)samples[i].held;
    live_area += (double)samples[i].live;
  }
  long hwm = bench_status_kib("VmHWM");
  if (profile != NULL) write_profile(profile);
  printf("live_peak_kib=%llu\n", (unsigned long long)(g_live_peak / 1024));
  printf("held_peak_kib=%llu\n", (unsigned long long)(g_held_peak / 1024));
  printf("hwm_kib=%ld\n", hwm > rss_base_kib ? hwm - rss_base_kib : 0);
  printf("held_live_area=%.3f\n", live_area > 0 ? held_area / live_area : 0.0);
  printf("samples=%zu\nsample_every=%llu\n", nsamples, (unsigned long long)g_interval);
  printf("regions: %s scale=%ld units=%llu objects=%llu bytes=%llu frees=%llu clears=%llu "
         "checksum=%016llx\n", WORKLOADS[w].name, scale, (unsigned long long)work,
         (unsigned long long)g_allocs, (unsigned long long)g_bytes,
         (unsigned long long)g_frees, (unsigned long long)g_clears,
         (unsigned long long)checksum);
  return 0;
}
