/* fuzz.c — a seeded random walk over the whole allocation API, checked against a shadow heap.
 *
 *   fuzz [--seed N] [--ops N] [--seconds S] [--threads T]
 *
 * Each thread draws operations from its own random stream (derived from the seed and the
 * thread's number): malloc, calloc, realloc (from NULL, grow, shrink, to 0), reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc, free, malloc_usable_size, C++ operator
 * new/delete (plain, sized, aligned; looked up with dlsym, used only when the loaded
 * allocator exports them) and, when the allocator has them, regions: locus_region_create
 * (sometimes nested), locus_region_malloc/calloc/realloc/aligned_alloc/free, plain free() and
 * realloc() of region objects, locus_region_clear/destroy. Sizes are skewed: mostly small,
 * some medium, large up to 64 KiB, rarely huge up to 4 MiB.
 *
 * The shadow heap knows every live object: its address, requested size, the bytes it filled
 * (the whole malloc_usable_size, so a usable size that lies shows up), the alignment asked
 * and a fill pattern from (seed, thread, object id). Every allocation is checked for
 * alignment, usable size, calloc zeroes and overlap with every other live object (a treap of
 * extents shared by all threads); every realloc for its preserved prefix; every free for the
 * whole contents; every object now and then (sampled when big), and the whole treap. Clearing
 * or destroying a region drops its objects and its descendants' from the shadow. The shadow
 * lives in mmap'd memory only: nothing of it comes from the allocator under test.
 *
 * With --threads T > 1, objects are handed to other threads through per-thread inboxes (a
 * locked ring) and freed there (or kept and later resized there): cross-thread frees,
 * region objects included (plain free() of a region object from any thread).
 *
 * A failure prints one line with the seed, the thread, the operation number and what failed,
 * then a command that replays the same walk up to that operation, and exits 1; a crash
 * (signal) inside the allocator is reported the same way. --ops counts per thread; without
 * --ops and --seconds the walk is 200,000 operations.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

enum {
  MAX_THREADS = 64,
  LIVE_MAX = 2000,      /* objects one thread keeps at most */
  INBOX = 256,          /* objects waiting in one thread's inbox */
  MAX_REGIONS = 12,     /* live regions of one thread */
  SWEEP_EVERY = 8192,   /* every object checked */
  TREE_EVERY = 65536,   /* the whole treap walked, locus_check_heap */
  SAMPLE_OVER = 4096,   /* objects bigger than this get a sampled check between touches */
  FULL_BEFORE_REALLOC = 65536,
};

#define HUGE_MAX ((size_t)4 << 20)

/* ---- what the walk does ------------------------------------------------------------------ */

#define OPS(X)                                                                                \
  X(malloc) X(calloc) X(realloc_null) X(reallocarray_null) X(posix_memalign) X(aligned_alloc) \
  X(memalign) X(valloc) X(new) X(new_aligned) X(free) X(delete) X(delete_sized)               \
  X(delete_aligned) X(realloc_grow) X(realloc_shrink) X(realloc_zero) X(reallocarray)        \
  X(usable) X(check) X(region_create) X(region_create_nested) X(region_clear)                 \
  X(region_destroy) X(region_malloc) X(region_calloc) X(region_aligned_alloc)                 \
  X(region_realloc_null) X(region_realloc) X(region_free) X(region_obj_free)                  \
  X(region_obj_realloc) X(handoff) X(take) X(take_free) X(take_region_obj_free) X(sweep)      \
  X(tree_walk) X(check_heap) X(malloc_near) X(calloc_near)
#define OP_ENUM(n) OP_##n,
#define OP_NAME(n) #n,
enum { OPS(OP_ENUM) OP_COUNT };
static const char *const op_names[] = {OPS(OP_NAME)};

/* how an object must be given back */
enum { FAM_MALLOC, FAM_NEW, FAM_NEW_ALIGNED, FAM_REGION };

typedef struct obj {
  unsigned char *p;
  size_t req;      /* requested size */
  size_t len;      /* bytes filled with the pattern: the usable size when it was made */
  size_t align;    /* alignment asked (the minimum for plain calls) */
  uint64_t seed;   /* pattern seed: from the walk's seed, the thread and the object's id */
  int family;
  int owner;       /* thread whose region holds it (FAM_REGION) */
  int region;      /* slot in the owner's region table (FAM_REGION) */
} obj_t;

typedef struct region_slot {
  locus_region_t *r;
  int parent;      /* slot of the parent, -1 for a top-level region */
  int live;
  atomic_long out; /* objects of this region now in other threads' hands */
} region_slot_t;

typedef struct inbox {
  pthread_mutex_t lock;
  int closed;
  unsigned head, count;
  obj_t item[INBOX];
} inbox_t;

typedef struct worker {
  int index;
  pthread_t thread;
  test_rng_t rng;
  obj_t *objs;     /* mmap'd, LIVE_MAX entries */
  size_t n, peak;
  uint64_t next_id;
  uint64_t ops;
  unsigned alloc_bias; /* percent of object steps that allocate, changed by phases */
  uint64_t count[OP_COUNT];
  region_slot_t regions[MAX_REGIONS];
  inbox_t inbox;
} worker_t;

/* ---- options and the allocator's optional entry points ---------------------------------- */

static uint64_t opt_seed = 1, opt_ops;
static double opt_seconds;
static int opt_threads = 1;
static double deadline;
static size_t page_size;
static locus_api_t L;
static worker_t *workers;

static struct {
  locus_region_t *(*create)(locus_region_t *);
  void *(*malloc)(locus_region_t *, size_t);
  void *(*calloc)(locus_region_t *, size_t, size_t);
  void *(*realloc)(locus_region_t *, void *, size_t);
  void *(*aligned_alloc)(locus_region_t *, size_t, size_t);
  void (*free)(locus_region_t *, void *);
  void (*clear)(locus_region_t *);
  void (*destroy)(locus_region_t *);
} R;
static int have_regions;

static struct {
  void *(*new_)(size_t);
  void *(*new_aligned)(size_t, size_t);
  void (*del)(void *);
  void (*del_sized)(void *, size_t);
  void (*del_aligned)(void *, size_t, size_t);
} X;
static int have_new, have_new_aligned;

static struct {
  void *(*malloc)(size_t, const void *);
  void *(*calloc)(size_t, size_t, const void *);
} H;
static int have_near;

static void lookup(void *fnp, const char *name) {
  void *s = dlsym(RTLD_DEFAULT, name);
  memcpy(fnp, &s, sizeof s);
}

/* ---- failure reports --------------------------------------------------------------------- */

static _Thread_local int cur_thread = -1;
static _Thread_local uint64_t cur_op;
static _Thread_local const char *cur_what = "start";

static void report(const char *what) {
  test_fdprintf(2, "fuzz: FAIL seed=%llu threads=%d thread=%d op=%llu (%s): %s\n",
                (unsigned long long)opt_seed, opt_threads, cur_thread,
                (unsigned long long)cur_op, cur_what, what);
  test_fdprintf(2, "fuzz: replay: fuzz --seed %llu --threads %d --ops %llu\n",
                (unsigned long long)opt_seed, opt_threads, (unsigned long long)cur_op + 1);
}

static TEST_PRINTF(1, 2) void fail(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  report(msg);
  _exit(1);
}

static void on_crash(int sig) {
  const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS"
                   : sig == SIGABRT ? "SIGABRT" : sig == SIGILL ? "SIGILL" : "SIGFPE";
  char msg[64];
  snprintf(msg, sizeof msg, "signal %d (%s)", sig, name);
  report(msg);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* ---- fill patterns: a byte is a function of (seed, offset), so any range can be checked -- */

static inline uint64_t pat_word(uint64_t seed, size_t word) {
  uint64_t z = seed + (uint64_t)word * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 31)) * 0xD6E8FEB86659FD93ull;
  return z ^ (z >> 29);
}
static inline unsigned char pat_byte(uint64_t seed, size_t at) {
  return (unsigned char)(pat_word(seed, at >> 3) >> (8 * (at & 7)));
}

static void pat_fill(unsigned char *b, size_t from, size_t to, uint64_t seed) {
  size_t j = from;
  for (; j < to && (j & 7); j++) b[j] = pat_byte(seed, j);
  for (; j + 8 <= to; j += 8) {
    uint64_t v = pat_word(seed, j >> 3);
    memcpy(b + j, &v, 8);
  }
  for (; j < to; j++) b[j] = pat_byte(seed, j);
}

/* The first offset in [from, to) that does not hold the pattern, or SIZE_MAX. */
static size_t pat_bad(const unsigned char *b, size_t from, size_t to, uint64_t seed) {
  size_t j = from;
  for (; j < to && (j & 7); j++)
    if (b[j] != pat_byte(seed, j)) return j;
  for (; j + 8 <= to; j += 8) {
    uint64_t v, want = pat_word(seed, j >> 3);
    memcpy(&v, b + j, 8);
    if (v != want) break;
  }
  for (; j < to; j++)
    if (b[j] != pat_byte(seed, j)) return j;
  return SIZE_MAX;
}

static void check_range(const obj_t *o, size_t from, size_t to, const char *when) {
  if (to > o->len) to = o->len;
  if (from >= to) return;
  size_t bad = pat_bad(o->p, from, to, o->seed);
  if (bad != SIZE_MAX)
    fail("%s: object %p (%zu bytes asked, %zu filled) corrupted at offset %zu: 0x%02x, not "
         "0x%02x", when, (void *)o->p, o->req, o->len, bad, o->p[bad], pat_byte(o->seed, bad));
}

static void check_full(const obj_t *o, const char *when) { check_range(o, 0, o->len, when); }

/* Small objects whole; big ones at both ends and in a few random windows. */
static void check_sampled(const obj_t *o, test_rng_t *rng, const char *when) {
  if (o->len <= SAMPLE_OVER) {
    check_full(o, when);
    return;
  }
  check_range(o, 0, 256, when);
  check_range(o, o->len - 256, o->len, when);
  for (int i = 0; i < 4; i++) {
    size_t at = rng_below(rng, o->len - 128);
    check_range(o, at, at + 128, when);
  }
}

/* ---- the shadow's extent index (fuzz_shadow.h) ---------------------------------------- */

#include "fuzz_shadow.h"

/* ---- choosing sizes and alignments -------------------------------------------------------- */

/* 0.2% 0 B, 65% 1..256 B, 23% ..4 KiB, 11.5% ..64 KiB (an eighth of them a power of two from
 * 4 to 64 KiB: buffers, which some designs serve apart), 0.3% huge up to 4 MiB. */
static size_t pick_size(test_rng_t *g) {
  uint64_t c = rng_below(g, 1000);
  if (c < 2) return 0;
  if (c < 652) return 1 + rng_below(g, rng_below(g, 4) ? 64 : 256);
  if (c < 882) return 257 + rng_below(g, 4096 - 256);
  if (c < 997) return rng_below(g, 8) ? 4097 + rng_below(g, 65536 - 4096) : (size_t)4096 << rng_below(g, 5);
  return 65537 + rng_below(g, HUGE_MAX - 65536);
}

/* A power of two in [1 << lo, 1 << hi], skewed small. */
static size_t pick_align(test_rng_t *g, unsigned lo, unsigned hi) {
  unsigned k = lo + (unsigned)rng_below(g, hi - lo + 1);
  if (rng_below(g, 3)) k = lo + (unsigned)rng_below(g, (k - lo) + 1);
  return (size_t)1 << k;
}

/* Two factors whose product is size (for calloc and reallocarray). */
static void split_size(test_rng_t *g, size_t size, size_t *n, size_t *m) {
  static const size_t f[] = {1, 2, 3, 4, 5, 8, 12, 16, 24};
  size_t k = f[rng_below(g, sizeof f / sizeof f[0])];
  if (size == 0 || size % k) k = 1;
  if (rng_below(g, 2)) {
    *n = k;
    *m = size / k;
  } else {
    *n = size / k;
    *m = k;
  }
}

/* ---- making, checking and dropping objects ----------------------------------------------- */

static void count(worker_t *w, int op) {
  w->count[op]++;
  cur_what = op_names[op];
}

/* A new object at p: checks alignment, usable size, zeroes (calloc) and overlap, records it
 * in the shadow and fills it. Returns 0 when p is NULL for a size 0 request (allowed). */
static int adopt_new(worker_t *w, obj_t *o, void *p, size_t req, size_t align, int zeroed,
                     const char *call) {
  if (!p) {
    if (req == 0) return 0;
    fail("%s(%zu bytes, alignment %zu) returned NULL", call, req, align);
  }
  if ((uintptr_t)p & (align - 1))
    fail("%s(%zu bytes) = %p: not aligned to %zu", call, req, p, align);
  size_t usable = malloc_usable_size(p);
  if (usable < req) fail("%s(%zu bytes) = %p: malloc_usable_size %zu", call, req, p, usable);
  if (zeroed) {
    const unsigned char *b = p;
    for (size_t i = 0; i < req; i++)
      if (b[i]) fail("%s(%zu bytes) = %p: byte %zu is 0x%02x, not 0", call, req, p, i, b[i]);
  }
  o->p = p;
  o->req = req;
  o->len = usable;
  o->align = align;
  o->seed = pat_word(opt_seed ^ ((uint64_t)w->index << 56), w->next_id++);
  shadow_insert((uintptr_t)p, (uintptr_t)p + (usable ? usable : 1), w->index);
  pat_fill(o->p, 0, o->len, o->seed);
  return 1;
}

static size_t plain_align(size_t size) { return test_min_align(size); }

static int live_region(worker_t *w, test_rng_t *g) {
  int live[MAX_REGIONS], n = 0;
  for (int i = 0; i < MAX_REGIONS; i++)
    if (w->regions[i].live) live[n++] = i;
  return n ? live[rng_below(g, (uint64_t)n)] : -1;
}

/* Makes one object in a random way; returns 0 when none was made. */
static int make(worker_t *w, obj_t *o) {
  test_rng_t *g = &w->rng;
  size_t size = pick_size(g), n, m;
  void *p = NULL;
  memset(o, 0, sizeof *o);
  o->family = FAM_MALLOC;
  int reg = have_regions && rng_below(g, 5) == 0 ? live_region(w, g) : -1;
  if (reg >= 0) {
    locus_region_t *r = w->regions[reg].r;
    o->family = FAM_REGION;
    o->owner = w->index;
    o->region = reg;
    uint64_t c = rng_below(g, 100);
    size_t al = plain_align(size);
    if (c < 55) {
      count(w, OP_region_malloc);
      return adopt_new(w, o, R.malloc(r, size), size, al, 0, "locus_region_malloc");
    }
    if (c < 75) {
      count(w, OP_region_calloc);
      split_size(g, size, &n, &m);
      return adopt_new(w, o, R.calloc(r, n, m), size, al, 1, "locus_region_calloc");
    }
    if (c < 90) {
      count(w, OP_region_aligned_alloc);
      al = pick_align(g, 0, 12);
      return adopt_new(w, o, R.aligned_alloc(r, al, size), size, al, 0,
                       "locus_region_aligned_alloc");
    }
    count(w, OP_region_realloc_null);
    return adopt_new(w, o, R.realloc(r, NULL, size), size, al, 0, "locus_region_realloc");
  }
  uint64_t c = rng_below(g, 100);
  if (c < 8 && have_near) {   /* near a live object of this thread (or, 1 in 8, a wild address) */
    const void *hint = w->n ? w->objs[rng_below(g, w->n)].p : NULL;
    if (rng_below(g, 8) == 0) hint = (const void *)(uintptr_t)rng_next(g);
    if (c < 5) {
      count(w, OP_malloc_near);
      return adopt_new(w, o, H.malloc(size, hint), size, plain_align(size), 0, "locus_malloc_near");
    }
    count(w, OP_calloc_near);
    split_size(g, size, &n, &m);
    return adopt_new(w, o, H.calloc(n, m, hint), size, plain_align(size), 1, "locus_calloc_near");
  }
  if (c < 40) {
    count(w, OP_malloc);
    return adopt_new(w, o, malloc(size), size, plain_align(size), 0, "malloc");
  }
  if (c < 52) {
    count(w, OP_calloc);
    split_size(g, size, &n, &m);
    return adopt_new(w, o, calloc(n, m), size, plain_align(size), 1, "calloc");
  }
  if (c < 57) {
    count(w, OP_realloc_null);
    return adopt_new(w, o, realloc(NULL, size), size, plain_align(size), 0, "realloc");
  }
  if (c < 61) {
    count(w, OP_reallocarray_null);
    split_size(g, size, &n, &m);
    return adopt_new(w, o, reallocarray(NULL, n, m), size, plain_align(size), 0,
                     "reallocarray");
  }
  if (c < 69) {
    count(w, OP_posix_memalign);
    size_t al = pick_align(g, 3, 16);
    int rc = posix_memalign(&p, al, size);
    if (rc) fail("posix_memalign(%zu, %zu) = %d", al, size, rc);
    return adopt_new(w, o, p, size, al, 0, "posix_memalign");
  }
  if (c < 75) {
    count(w, OP_aligned_alloc);
    size_t al = pick_align(g, 0, 16);
    return adopt_new(w, o, aligned_alloc(al, size), size, al, 0, "aligned_alloc");
  }
  if (c < 81) {
    count(w, OP_memalign);
    size_t al = pick_align(g, 0, 16);
    return adopt_new(w, o, memalign(al, size), size, al, 0, "memalign");
  }
  if (c < 83) {
    count(w, OP_valloc);
    return adopt_new(w, o, valloc(size), size, page_size, 0, "valloc");
  }
  if (c < 93 && have_new) {
    count(w, OP_new);
    o->family = FAM_NEW;
    return adopt_new(w, o, X.new_(size), size, plain_align(size), 0, "operator new");
  }
  if (have_new_aligned) {
    count(w, OP_new_aligned);
    o->family = FAM_NEW_ALIGNED;
    size_t al = pick_align(g, 5, 12);
    return adopt_new(w, o, X.new_aligned(size, al), size, al, 0, "operator new(align)");
  }
  count(w, OP_malloc);
  return adopt_new(w, o, malloc(size), size, plain_align(size), 0, "malloc");
}

static void check_usable(const obj_t *o, const char *when) {
  size_t u = malloc_usable_size(o->p);
  if (u < o->len)
    fail("%s: malloc_usable_size(%p) = %zu, was %zu (asked %zu)", when, (void *)o->p, u, o->len,
         o->req);
}

/* Gives o back the way its family requires (checked whole first). `mine`: the caller is the
 * thread that owns o's region (may use locus_region_free). */
static void release(worker_t *w, obj_t *o, int mine) {
  test_rng_t *g = &w->rng;
  check_full(o, "before free");
  check_usable(o, "before free");
  shadow_remove((uintptr_t)o->p);
  switch (o->family) {
  case FAM_MALLOC:
    count(w, OP_free);
    free(o->p);
    break;
  case FAM_NEW:
    if (X.del_sized && rng_below(g, 2)) {
      count(w, OP_delete_sized);
      X.del_sized(o->p, o->req);
    } else {
      count(w, OP_delete);
      X.del(o->p);
    }
    break;
  case FAM_NEW_ALIGNED:
    count(w, OP_delete_aligned);
    X.del_aligned(o->p, o->req, o->align);
    break;
  case FAM_REGION:
    if (mine && rng_below(g, 2)) {
      count(w, OP_region_free);
      R.free(w->regions[o->region].r, o->p);
    } else {
      count(w, OP_region_obj_free);
      free(o->p);
    }
    break;
  }
  o->p = NULL;
}

/* Tail of [from, len) filled after a realloc that kept [0, from). */
static void resize(worker_t *w, obj_t *o) {
  test_rng_t *g = &w->rng;
  if (o->len > FULL_BEFORE_REALLOC) check_sampled(o, g, "before realloc");
  else check_full(o, "before realloc");
  uint64_t c = rng_below(g, 100);
  size_t size;
  int op;
  if (c < 5) {
    size = 0;
    op = OP_realloc_zero;
  } else if (c < 50) {
    size = o->req + 1 + (rng_below(g, 4) ? rng_below(g, o->req + 64) : pick_size(g));
    if (size > HUGE_MAX) size = HUGE_MAX;
    op = OP_realloc_grow;
  } else {
    size = o->req ? rng_below(g, o->req) : 0;
    op = OP_realloc_shrink;
  }
  int use_array = o->family == FAM_MALLOC && size && rng_below(g, 5) == 0;
  if (use_array) op = OP_reallocarray;
  int region_call = o->family == FAM_REGION && rng_below(g, 2);
  if (o->family == FAM_REGION) op = region_call ? OP_region_realloc : OP_region_obj_realloc;
  count(w, op);
  obj_t old = *o;
  shadow_remove((uintptr_t)old.p);
  void *q;
  const char *call = "realloc";
  if (region_call) {
    call = "locus_region_realloc";
    q = R.realloc(w->regions[o->region].r, old.p, size);
  } else if (use_array) {
    size_t n, m;
    split_size(g, size, &n, &m);
    call = "reallocarray";
    q = reallocarray(old.p, n, m);
  } else {
    q = realloc(old.p, size);
  }
  if (!q) {
    if (size == 0) {
      o->p = NULL;   /* freed */
      return;
    }
    fail("%s(%p, %zu) returned NULL", call, (void *)old.p, size);
  }
  if ((uintptr_t)q & (plain_align(size) - 1))
    fail("%s(%p, %zu) = %p: not aligned to %zu", call, (void *)old.p, size, q, plain_align(size));
  size_t usable = malloc_usable_size(q);
  if (usable < size) fail("%s(%p, %zu) = %p: usable %zu", call, (void *)old.p, size, q, usable);
  size_t keep = old.req < size ? old.req : size;
  o->p = q;
  o->req = size;
  o->align = plain_align(size);
  /* the kept prefix must hold the old pattern: check it against the old seed */
  o->len = keep;
  check_range(o, 0, keep, call);
  o->len = usable;
  shadow_insert((uintptr_t)q, (uintptr_t)q + (usable ? usable : 1), w->index);
  pat_fill(o->p, keep, o->len, o->seed);
}

/* ---- the thread's object list ------------------------------------------------------------ */

static void list_remove(worker_t *w, size_t i) { w->objs[i] = w->objs[--w->n]; }

static void list_add(worker_t *w, const obj_t *o) {
  w->objs[w->n++] = *o;
  if (w->n > w->peak) w->peak = w->n;
}

/* ---- regions ----------------------------------------------------------------------------- */

static int descends(worker_t *w, int j, int i) {
  for (; j >= 0; j = w->regions[j].parent)
    if (j == i) return 1;
  return 0;
}

/* Nothing of region i or below is in another thread's hands. */
static int subtree_home(worker_t *w, int i) {
  for (int j = 0; j < MAX_REGIONS; j++)
    if (w->regions[j].live && descends(w, j, i) && atomic_load(&w->regions[j].out)) return 0;
  return 1;
}

/* Clear (destroy = 0) or destroy region i: its descendants die, and every object of the
 * subtree leaves the shadow (checked first). */
static void region_end(worker_t *w, int i, int destroy) {
  for (size_t k = 0; k < w->n;) {
    obj_t *o = &w->objs[k];
    if (o->family == FAM_REGION && descends(w, o->region, i)) {
      check_sampled(o, &w->rng, destroy ? "before region destroy" : "before region clear");
      shadow_remove((uintptr_t)o->p);
      list_remove(w, k);
    } else {
      k++;
    }
  }
  for (int j = 0; j < MAX_REGIONS; j++)
    if (j != i && w->regions[j].live && descends(w, j, i)) w->regions[j].live = 0;
  if (destroy) {
    R.destroy(w->regions[i].r);
    w->regions[i].live = 0;
  } else {
    R.clear(w->regions[i].r);
  }
}

static void region_step(worker_t *w) {
  test_rng_t *g = &w->rng;
  int free_slot = -1, live = 0;
  for (int i = 0; i < MAX_REGIONS; i++) {
    if (w->regions[i].live) live++;
    else if (free_slot < 0) free_slot = i;
  }
  uint64_t c = rng_below(g, 100);
  if (free_slot >= 0 && (live < 2 || c < 40)) {
    int parent = rng_below(g, 2) ? live_region(w, g) : -1;
    count(w, parent >= 0 ? OP_region_create_nested : OP_region_create);
    locus_region_t *r = R.create(parent >= 0 ? w->regions[parent].r : NULL);
    if (!r) fail("locus_region_create returned NULL");
    w->regions[free_slot].r = r;
    w->regions[free_slot].parent = parent;
    w->regions[free_slot].live = 1;
    atomic_store(&w->regions[free_slot].out, 0);
    return;
  }
  int i = live_region(w, g);
  if (i < 0 || !subtree_home(w, i)) return;
  int destroy = c >= 70;
  count(w, destroy ? OP_region_destroy : OP_region_clear);
  region_end(w, i, destroy);
}

/* ---- handing objects between threads ---------------------------------------------------- */

static int inbox_put(worker_t *to, const obj_t *o) {
  int ok = 0;
  pthread_mutex_lock(&to->inbox.lock);
  if (!to->inbox.closed && to->inbox.count < INBOX) {
    to->inbox.item[(to->inbox.head + to->inbox.count++) % INBOX] = *o;
    ok = 1;
  }
  pthread_mutex_unlock(&to->inbox.lock);
  return ok;
}

static int inbox_take(worker_t *w, obj_t *o) {
  int ok = 0;
  pthread_mutex_lock(&w->inbox.lock);
  if (w->inbox.count) {
    *o = w->inbox.item[w->inbox.head];
    w->inbox.head = (w->inbox.head + 1) % INBOX;
    w->inbox.count--;
    ok = 1;
  }
  pthread_mutex_unlock(&w->inbox.lock);
  return ok;
}

static void handoff(worker_t *w) {
  if (!w->n) return;
  size_t i = rng_below(&w->rng, w->n);
  int to = (int)rng_below(&w->rng, (uint64_t)opt_threads - 1);
  if (to >= w->index) to++;
  obj_t o = w->objs[i];
  if (o.family == FAM_REGION) atomic_fetch_add(&w->regions[o.region].out, 1);
  if (!inbox_put(&workers[to], &o)) {
    if (o.family == FAM_REGION) atomic_fetch_sub(&w->regions[o.region].out, 1);
    return;
  }
  count(w, OP_handoff);
  list_remove(w, i);
}

/* An object from another thread: checked, then freed here or (not region objects) kept. */
static void received(worker_t *w, obj_t *o, int may_keep) {
  count(w, OP_take);
  check_sampled(o, &w->rng, "received from another thread");
  if (o->family == FAM_REGION) {
    atomic_long *out = &workers[o->owner].regions[o->region].out;
    release(w, o, 0);
    w->count[OP_take_region_obj_free]++;
    atomic_fetch_sub(out, 1);
    return;
  }
  if (may_keep && w->n < LIVE_MAX && rng_below(&w->rng, 10) < 3) {
    list_add(w, o);
    return;
  }
  w->count[OP_take_free]++;
  release(w, o, 0);
}

/* ---- the walk ---------------------------------------------------------------------------- */

static void sweep(worker_t *w) {
  count(w, OP_sweep);
  for (size_t i = 0; i < w->n; i++) check_sampled(&w->objs[i], &w->rng, "sweep");
}

static void object_step(worker_t *w) {
  test_rng_t *g = &w->rng;
  if (w->n == 0 || (w->n < LIVE_MAX && rng_below(g, 100) < w->alloc_bias)) {
    obj_t o;
    if (make(w, &o)) list_add(w, &o);
    return;
  }
  size_t i = rng_below(g, w->n);
  obj_t *o = &w->objs[i];
  uint64_t c = rng_below(g, 100);
  if (c < 35) {
    release(w, o, 1);
    list_remove(w, i);
  } else if (c < 65 && (o->family == FAM_MALLOC || o->family == FAM_REGION)) {
    resize(w, o);
    if (!o->p) list_remove(w, i);
  } else if (c < 80) {
    count(w, OP_usable);
    check_usable(o, "malloc_usable_size");
  } else {
    count(w, OP_check);
    check_sampled(o, g, "check");
  }
}

static int time_is_up(const worker_t *w) {
  if (opt_ops && w->ops >= opt_ops) return 1;
  return opt_seconds > 0 && (w->ops & 1023) == 0 && test_now() >= deadline;
}

static void *run_worker(void *arg) {
  worker_t *w = arg;
  cur_thread = w->index;
  w->alloc_bias = 55;
  while (!time_is_up(w)) {
    cur_op = w->ops;
    if ((w->ops & 16383) == 0) {
      static const unsigned bias[] = {30, 50, 55, 60, 80};
      w->alloc_bias = bias[rng_below(&w->rng, 5)];
    }
    uint64_t c = rng_below(&w->rng, 1000);
    obj_t o;
    if (have_regions && c < 4) {
      region_step(w);
    } else if (opt_threads > 1 && c < 60) {
      if (c < 30 && inbox_take(w, &o)) received(w, &o, 1);
      else handoff(w);
    } else {
      object_step(w);
    }
    if (w->ops % SWEEP_EVERY == SWEEP_EVERY - 1) sweep(w);
    if (w->ops % TREE_EVERY == TREE_EVERY - 1) {
      count(w, OP_tree_walk);
      shadow_walk();
      if (L.check_heap) {
        count(w, OP_check_heap);
        if (L.check_heap() != 0) fail("locus_check_heap reported an inconsistent heap");
      }
    }
    w->ops++;
  }
  /* the end: no more objects arrive; what did is freed; ours are freed, regions destroyed */
  cur_what = "end";
  pthread_mutex_lock(&w->inbox.lock);
  w->inbox.closed = 1;
  pthread_mutex_unlock(&w->inbox.lock);
  obj_t o;
  while (inbox_take(w, &o)) received(w, &o, 0);
  while (w->n) {
    release(w, &w->objs[w->n - 1], 1);
    w->n--;
  }
  for (int i = 0; i < MAX_REGIONS; i++) {
    if (!w->regions[i].live || w->regions[i].parent >= 0) continue;
    while (!subtree_home(w, i)) usleep(100);
    region_end(w, i, 1);
  }
  return NULL;
}

/* ---- main -------------------------------------------------------------------------------- */

static void usage(void) {
  test_fdprintf(2, "usage: fuzz [--seed N] [--ops N] [--seconds S] [--threads T]\n");
  _exit(2);
}

int main(int argc, char **argv) {
  for (int a = 1; a < argc; a++) {
    if (a + 1 >= argc) usage();
    const char *v = argv[++a];
    char *end;
    if (!strcmp(argv[a - 1], "--seed")) opt_seed = strtoull(v, &end, 0);
    else if (!strcmp(argv[a - 1], "--ops")) opt_ops = strtoull(v, &end, 0);
    else if (!strcmp(argv[a - 1], "--seconds")) opt_seconds = strtod(v, &end);
    else if (!strcmp(argv[a - 1], "--threads")) opt_threads = (int)strtol(v, &end, 0);
    else usage();
    if (*end || !*v) usage();
  }
  if (opt_threads < 1 || opt_threads > MAX_THREADS) usage();
  if (!opt_ops && opt_seconds <= 0) opt_ops = 200000;

  locus_api_require(&L);
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  lookup(&R.create, "locus_region_create");
  lookup(&R.malloc, "locus_region_malloc");
  lookup(&R.calloc, "locus_region_calloc");
  lookup(&R.realloc, "locus_region_realloc");
  lookup(&R.aligned_alloc, "locus_region_aligned_alloc");
  lookup(&R.free, "locus_region_free");
  lookup(&R.clear, "locus_region_clear");
  lookup(&R.destroy, "locus_region_destroy");
  have_regions = R.create && R.malloc && R.calloc && R.realloc && R.aligned_alloc && R.free &&
                 R.clear && R.destroy;
  lookup(&X.new_, "_Znwm");
  lookup(&X.del, "_ZdlPv");
  lookup(&X.del_sized, "_ZdlPvm");
  lookup(&X.new_aligned, "_ZnwmSt11align_val_t");
  lookup(&X.del_aligned, "_ZdlPvmSt11align_val_t");
  have_new = X.new_ && X.del;
  have_new_aligned = X.new_aligned && X.del_aligned;
  lookup(&H.malloc, "locus_malloc_near");
  lookup(&H.calloc, "locus_calloc_near");
  have_near = H.malloc && H.calloc;

  static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
  for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
    signal(crash_signals[i], on_crash);

  node_cap = (uint32_t)(opt_threads * (LIVE_MAX + INBOX) + 1024);
  nodes = map_zeroed((size_t)node_cap * sizeof *nodes);
  workers = map_zeroed((size_t)opt_threads * sizeof *workers);
  for (int t = 0; t < opt_threads; t++) {
    worker_t *w = &workers[t];
    w->index = t;
    w->rng.s = opt_seed * 0x2545F4914F6CDD1Dull + (uint64_t)t * 0x9E3779B97F4A7C15ull + 1;
    w->objs = map_zeroed(LIVE_MAX * sizeof *w->objs);
    pthread_mutex_init(&w->inbox.lock, NULL);
    for (int i = 0; i < MAX_REGIONS; i++) w->regions[i].parent = -1;
  }

  double start = test_now();
  deadline = start + opt_seconds;
  if (opt_threads == 1) {
    run_worker(&workers[0]);
  } else {
    for (int t = 0; t < opt_threads; t++)
      if (pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]))
        fail("pthread_create failed");
    for (int t = 0; t < opt_threads; t++) pthread_join(workers[t].thread, NULL);
  }
  cur_thread = -1;
  cur_what = "final check";
  if (tree_live) fail("%zu objects still in the shadow after every thread ended", tree_live);

  uint64_t total[OP_COUNT] = {0}, ops = 0;
  size_t peak = 0;
  for (int t = 0; t < opt_threads; t++) {
    ops += workers[t].ops;
    peak += workers[t].peak;
    for (int k = 0; k < OP_COUNT; k++) total[k] += workers[t].count[k];
  }
  test_note("fuzz: seed %llu, %d thread(s), %llu operations in %.1f s, peak %zu live objects%s%s\n",
            (unsigned long long)opt_seed, opt_threads, (unsigned long long)ops,
            test_now() - start, peak, have_regions ? ", regions" : "",
            have_new ? ", operator new/delete" : "");
  char line[1024];
  size_t at = 0;
  for (int k = 0; k < OP_COUNT; k++) {
    if (!total[k]) continue;
    int n = snprintf(line + at, sizeof line - at, " %s=%llu", op_names[k],
                     (unsigned long long)total[k]);
    if (n < 0 || (size_t)n >= sizeof line - at) break;
    at += (size_t)n;
  }
  test_note("fuzz:%s\n", line);
  return 0;
}
