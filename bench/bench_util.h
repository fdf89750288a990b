/* bench_util.h — what every workload program shares: the deterministic PRNG, the scale
 * argument, size distributions, object stamping/verification, and error exits.
 *
 * The workloads use only the standard malloc API, so any allocator can be put under them with
 * LD_PRELOAD. Everything they print on stdout except memory figures (burst's RSS lines) is a
 * function of the fixed seeds alone, never of addresses or timing: two allocators that behave
 * correctly print the same checksum, and a broken one is caught by the content checks.
 */
#ifndef LOCUS_BENCH_UTIL_H
#define LOCUS_BENCH_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors --------------------------------------------------------------------------- */

static const char *bench_name = "bench";

/* One line on stderr, "<name>: <prefix><message>", then exit with the status. */
static void bench_vexit(int status, const char *prefix, const char *fmt, va_list ap)
    __attribute__((noreturn, format(printf, 3, 0)));
static void bench_vexit(int status, const char *prefix, const char *fmt, va_list ap) {
  fprintf(stderr, "%s: %s", bench_name, prefix);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  exit(status);
}

/* A failed check or a failed allocation: one line on stderr, exit status 1. */
static void bench_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void bench_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vexit(1, "error: ", fmt, ap);
}

static inline void *bench_malloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) bench_die("malloc(%zu) returned NULL", n);
  return p;
}

static inline void *bench_calloc(size_t count, size_t size) {
  void *p = calloc(count, size);
  if (p == NULL) bench_die("calloc(%zu, %zu) returned NULL", count, size);
  return p;
}

/* Checks that len bytes at p + off, memory from calloc, are zero. */
static inline void bench_check_zero(const void *p, size_t off, size_t len, const char *what,
                                    uint64_t index) {
  const unsigned char *b = (const unsigned char *)p + off;
  for (size_t i = 0; i < len; i++)
    if (b[i] != 0)
      bench_die("calloc returned nonzero memory in %s #%llu (byte %zu)", what,
                (unsigned long long)index, off + i);
}

/* ---- the scale argument --------------------------------------------------------------- */

/* Parses argv[idx] as the scale (a positive integer; absent means 1). Usage errors exit 2. */
static long bench_scale_arg(int argc, char **argv, int idx, const char *usage) {
  if (argc <= idx) return 1;
  char *end;
  errno = 0;
  long v = strtol(argv[idx], &end, 10);
  if (errno != 0 || end == argv[idx] || *end != '\0' || v < 1 || v > 100000) {
    fprintf(stderr, "%s: bad scale '%s' (a positive integer)\nusage: %s %s\n", bench_name,
            argv[idx], bench_name, usage);
    exit(2);
  }
  return v;
}

/* Parses a positive integer argument in [lo, hi] (thread counts and the like); `what` names it
 * in the message. Usage errors exit 2. */
static inline long bench_int_arg(const char *arg, long lo, long hi, const char *what,
                                 const char *usage) {
  char *end;
  errno = 0;
  long v = strtol(arg, &end, 10);
  if (errno != 0 || end == arg || *end != '\0' || v < lo || v > hi) {
    fprintf(stderr, "%s: bad %s '%s' (%ld..%ld)\nusage: %s %s\n", bench_name, what, arg, lo,
            hi, bench_name, usage);
    exit(2);
  }
  return v;
}

/* Removes every occurrence of the option `flag` from argv (so positional arguments can be
 * parsed as before) and returns whether it was there. */
static inline int bench_take_flag(int *argc, char **argv, const char *flag) {
  int found = 0, j = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], flag) == 0)
      found = 1;
    else
      argv[j++] = argv[i];
  }
  *argc = j;
  argv[j] = NULL;
  return found;
}

/* Any other argument starting with "--" is a usage error (exit 2). */
static inline void bench_no_other_options(int argc, char **argv, const char *usage) {
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--", 2) == 0) {
      fprintf(stderr, "%s: unknown option '%s'\nusage: %s %s\n", bench_name, argv[i],
              bench_name, usage);
      exit(2);
    }
  }
}

/* --quick (the lab passes it for `locus compare --quick`): the program does this fraction of
 * its work, 1/BENCH_QUICK_DIVISOR, with the same structure (sizes, live set, thread counts).
 * bench_work() is the number of work units for a scale. */
enum { BENCH_QUICK_DIVISOR = 20 };

/* The common command line, `name [scale] [more positional...] [--quick]`, once the program
 * has taken its own options out of argv: takes --quick (into *quick), rejects any other
 * option and more than max_positional positional arguments (exit 2), and returns the scale
 * (argv[1]). */
static inline long bench_args(int *argc, char **argv, int max_positional, const char *usage,
                              int *quick) {
  *quick = bench_take_flag(argc, argv, "--quick");
  bench_no_other_options(*argc, argv, usage);
  if (*argc - 1 > max_positional) {
    fprintf(stderr, "%s: too many arguments\nusage: %s %s\n", bench_name, bench_name, usage);
    exit(2);
  }
  return bench_scale_arg(*argc, argv, 1, usage);
}

static inline uint64_t bench_work(long scale, uint64_t per_scale, int quick) {
  return (uint64_t)scale * per_scale / (quick ? BENCH_QUICK_DIVISOR : 1);
}

/* The optional thread count, argv[2] (1..max; dflt without one). Usage errors exit 2. */
static inline int bench_threads_arg(int argc, char **argv, int dflt, int max,
                                    const char *usage) {
  return argc > 2 ? (int)bench_int_arg(argv[2], 1, max, "thread count", usage) : dflt;
}

/* The command line of a threaded program, `name [scale] [threads] [--quick]`: its scale,
 * thread count (dflt without one, 1..max) and the work of the run (per_scale units per unit
 * of scale, 1/BENCH_QUICK_DIVISOR of it with --quick). Sets bench_name. */
typedef struct { long scale; int threads; uint64_t work; } bench_threaded_t;

static inline bench_threaded_t bench_threaded_args(int argc, char **argv, const char *name, const char *usage,
                                                   int dflt, int max, uint64_t per_scale) {
  bench_name = name;
  int quick;
  bench_threaded_t a;
  a.scale = bench_args(&argc, argv, 2, usage, &quick);
  a.threads = bench_threads_arg(argc, argv, dflt, max, usage);
  a.work = bench_work(a.scale, per_scale, quick);
  return a;
}

/* Thread i's share of `total` units split evenly over n threads (the first total % n
 * threads do one more). */
static inline uint64_t bench_share(uint64_t total, int n, int i) {
  return total / (uint64_t)n + ((uint64_t)i < total % (uint64_t)n);
}

/* ---- PRNG: xorshift64* (Vigna), fixed seeds, one state per thread ------------------------ */

typedef struct { uint64_t s; } bench_rng;

/* The state must never be zero; splitmix64 of the seed guarantees a well-mixed nonzero start. */
static inline void bench_rng_seed(bench_rng *r, uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  r->s = z ? z : 0x2545f4914f6cdd1dull;
}

static inline uint64_t bench_rng_next(bench_rng *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, n), n > 0 (multiply-shift: no division, bias below 2^-32 for our n). */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t bench_rng_range(bench_rng *r, uint64_t lo, uint64_t hi) {
  return lo + bench_rng_below(r, hi - lo + 1);
}

/* Small-object size in 8..256 bytes, skewed toward small as in C/C++ programs' traces:
 * 50% 8..32, 30% 33..64, 15% 65..128, 5% 129..256 (mean about 49 bytes). */
static inline size_t bench_small_size(bench_rng *r) {
  uint64_t c = bench_rng_below(r, 100);
  if (c < 50) return (size_t)bench_rng_range(r, 8, 32);
  if (c < 80) return (size_t)bench_rng_range(r, 33, 64);
  if (c < 95) return (size_t)bench_rng_range(r, 65, 128);
  return (size_t)bench_rng_range(r, 129, 256);
}

/* ---- stamping and verifying object contents --------------------------------------------- */

/* A 64-bit mix used to derive per-object tags from counters (never from addresses). */
static inline uint64_t bench_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static inline unsigned char bench_fill_byte(uint64_t tag) {
  return (unsigned char)((tag >> 56) ^ 0xa5);
}

/* Writes the whole object: the tag in its first 8 bytes (if it has them), then a fill byte
 * derived from the tag. Two live objects that overlap will disagree on one of these. */
static inline void bench_fill(void *p, size_t n, uint64_t tag) {
  unsigned char *b = p;
  unsigned char f = bench_fill_byte(tag);
  if (n >= 8) {
    memcpy(b, &tag, 8);
    memset(b + 8, f, n - 8);
  } else {
    memset(b, f, n);
  }
}

/* Checks the tag, the last byte and a middle byte (cheap, but catches overlap and reuse of a
 * live object). Dies naming the workload's own object index. */
static inline void bench_check(const void *p, size_t n, uint64_t tag, const char *what,
                               uint64_t index) {
  const unsigned char *b = p;
  unsigned char f = bench_fill_byte(tag);
  int ok;
  if (n >= 8) {
    uint64_t t;
    memcpy(&t, b, 8);
    ok = t == tag && (n == 8 || (b[n - 1] == f && b[8 + (n - 8) / 2] == f));
  } else {
    ok = n == 0 || (b[0] == f && b[n - 1] == f);
  }
  if (!ok)
    bench_die("content mismatch in %s #%llu (%zu bytes): the allocator handed out memory "
              "that was still in use or corrupted it", what, (unsigned long long)index, n);
}

/* Allocates n objects of one size into obj[] and stamps object i with bench_mix(base + i). */
static inline void bench_batch_alloc(unsigned char **obj, unsigned n, size_t size,
                                     uint64_t base) {
  for (unsigned i = 0; i < n; i++) {
    obj[i] = bench_malloc(size);
    bench_fill(obj[i], size, bench_mix(base + i));
  }
}

/* Folds a value into a running checksum (order-dependent, deterministic). */
static inline uint64_t bench_fold(uint64_t sum, uint64_t v) {
  return bench_mix(sum ^ v) + 0x9e3779b97f4a7c15ull;
}

/* ---- self-describing objects (found through a pointer alone) --------------------------------
 * An object reached only through a shared pointer (another thread's, possibly exited) carries
 * its size in its tag: bits 0..19 the size, bits 20..31 a check on the rest, bits 32..63 from
 * the serial. A word that is not such a tag (memory reused or corrupted) fails the check with
 * probability 1 - 2^-12, and its size must also be in range, before anything else is read. */
enum { BENCH_SIZED_MAX = (1 << 20) - 1 };

static inline uint64_t bench_sized_check(uint64_t hi_and_size) {
  return (bench_mix(hi_and_size) >> 52) << 20;
}

static inline uint64_t bench_sized_tag(uint64_t serial, size_t size) {
  uint64_t t = (bench_mix(serial) & ~0xffffffffull) | (uint64_t)size;
  return t | bench_sized_check(t);
}

/* Stamps a new object of `size` (8..BENCH_SIZED_MAX bytes) and returns its tag. */
static inline uint64_t bench_sized_fill(void *p, size_t size, uint64_t serial) {
  uint64_t tag = bench_sized_tag(serial, size);
  bench_fill(p, size, tag);
  return tag;
}

/* A call site: a function of its own, never inlined and never folded with an identical one
 * (GCC's identical-code folding at -O2 would merge two sites of one size into one). */
#define BENCH_SITE static __attribute__((noinline, no_icf))

/* A new object of `size` bytes, stamped by bench_sized_fill. Inlined, so a function calling it is
 * a call site of its own (its own call instruction to malloc). */
static inline void *bench_sized_new(size_t size, uint64_t serial) {
  void *p = bench_malloc(size);
  bench_sized_fill(p, size, serial);
  return p;
}

/* Checks an object stamped by bench_sized_fill and frees it; returns its tag. */
static inline uint64_t bench_sized_check_free(void *p, const char *what, uint64_t index) {
  uint64_t tag;
  memcpy(&tag, p, 8);
  size_t size = (size_t)(tag & 0xfffff);
  if (size < 8 || (tag & 0xfff00000ull) != bench_sized_check(tag & ~0xfff00000ull))
    bench_die("content mismatch in %s #%llu: its tag was overwritten (the allocator handed "
              "out memory that was still in use or corrupted it)", what,
              (unsigned long long)index);
  bench_check(p, size, tag, what, index);
  free(p);
  return tag;
}

/* A large buffer's size: 4 KiB..256 KiB, log-spread (each power of two equally likely). */
static inline size_t bench_large_size(bench_rng *r) {
  size_t lo = (size_t)4096 << bench_rng_below(r, 6);
  return lo + (size_t)bench_rng_below(r, lo);
}

/* ---- memory figures (Linux) ------------------------------------------------------------ */

#include <unistd.h>

/* Resident set size in KiB from /proc/self/statm (field 2, in pages); -1 if unreadable. */
static inline long bench_rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  long size, resident;
  int n = fscanf(f, "%ld %ld", &size, &resident);
  fclose(f);
  if (n != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A field of /proc/self/status in KiB (e.g. "VmHWM"); -1 if absent. */
static inline long bench_status_kib(const char *field) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  size_t len = strlen(field);
  long v = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, field, len) == 0 && line[len] == ':') {
      v = strtol(line + len + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  return v;
}

/* ---- churn slots (churn, threads2) ------------------------------------------------------------
 * A live small object and what it must contain; a slot is refilled with a new object of a
 * fresh size and tag after its old object is checked and freed. */
typedef struct {
  unsigned char *p;
  uint32_t size;
  uint64_t tag;
} bench_slot;

/* Fills the slot with a new object of n bytes (n <= 2^32 - 1), stamped with the next serial. */
static inline void bench_slot_fill_size(bench_slot *s, size_t n, uint64_t *serial) {
  s->p = bench_malloc(n);
  s->size = (uint32_t)n;
  s->tag = bench_mix(++*serial);
  bench_fill(s->p, n, s->tag);
}

static inline void bench_slot_fill(bench_slot *s, bench_rng *rng, uint64_t *serial) {
  bench_slot_fill_size(s, bench_small_size(rng), serial);
}

/* Checks and frees the slot's object and folds it into *sum (the slot is then empty). */
static inline void bench_slot_retire(bench_slot *s, uint64_t *sum, uint64_t where) {
  bench_check(s->p, s->size, s->tag, "object", where);
  *sum = bench_fold(*sum, s->tag ^ s->p[s->size - 1]);
  free(s->p);
  s->p = NULL;
}

/* Checks and frees the slot's object, folds it into *sum, and refills the slot. */
static inline void bench_slot_replace(bench_slot *s, bench_rng *rng, uint64_t *serial, uint64_t *sum, uint64_t where) {
  bench_slot_retire(s, sum, where);
  bench_slot_fill(s, rng, serial);
}

/* A thread's private churn: fills n slots with objects of size(rng) bytes, replaces `ops`
 * random ones (each checked, freed and refilled), then checks and frees them all. */
static inline void bench_slots_churn(bench_slot *slot, size_t n, uint64_t ops, bench_rng *rng,
                                     size_t (*size)(bench_rng *), uint64_t *serial, uint64_t *sum) {
  for (size_t i = 0; i < n; i++) bench_slot_fill_size(&slot[i], size(rng), serial);
  for (uint64_t op = 0; op < ops; op++) {
    bench_slot *s = &slot[bench_rng_below(rng, n)];
    bench_slot_retire(s, sum, op);
    bench_slot_fill_size(s, size(rng), serial);
  }
  for (size_t i = 0; i < n; i++) bench_slot_retire(&slot[i], sum, (uint64_t)i);
}

/* ---- worker threads replaced as they finish (xthreads, xserver) ----------------------------
 * A worker posts its seat number when its work is done; the main thread takes finished seats
 * in the order they were posted, joins the worker and may start another in the same seat. */
#include <pthread.h>

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t posted;
  int *seat;                      /* ring of capacity cap (the number of seats) */
  int head, count, cap;
} bench_done_queue;

static inline void bench_done_init(bench_done_queue *q, int seats) {
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->posted, NULL);
  q->seat = bench_malloc(sizeof(int) * (size_t)seats);
  q->head = q->count = 0;
  q->cap = seats;
}

/* Called by a worker as its last act (each seat has at most one post pending). */
static inline void bench_done_post(bench_done_queue *q, int seat) {
  pthread_mutex_lock(&q->lock);
  q->seat[(q->head + q->count++) % q->cap] = seat;
  pthread_cond_signal(&q->posted);
  pthread_mutex_unlock(&q->lock);
}

/* Runs fn on n threads at once, thread i with &tasks[i] (tasks: an array of n objects of
 * task_size bytes), and waits for them all. */
static inline void bench_run_threads(int n, void *(*fn)(void *), void *tasks, size_t task_size) {
  pthread_t *tid = bench_calloc((size_t)n, sizeof *tid);
  for (int i = 0; i < n; i++)
    if (pthread_create(&tid[i], NULL, fn, (char *)tasks + (size_t)i * task_size) != 0)
      bench_die("pthread_create failed");
  for (int i = 0; i < n; i++)
    if (pthread_join(tid[i], NULL) != 0) bench_die("pthread_join failed");
  free(tid);
}

/* Programs whose threads each churn a private array of slots (localarrays, randsmall): the
 * run of a.threads threads, each with `slots` slots, a.work replacements, sizes from size()
 * and its own seed; prints the program's one line and returns main's status. */
typedef struct {
  bench_slot *slot;
  size_t nslots;
  size_t (*size)(bench_rng *);
  bench_rng rng;
  uint64_t ops, serial, sum;
} bench_churn_task;

static void *bench_churn_worker(void *arg) {
  bench_churn_task *t = arg;
  bench_slots_churn(t->slot, t->nslots, t->ops, &t->rng, t->size, &t->serial, &t->sum);
  return NULL;
}

static inline int bench_private_churn(bench_threaded_t a, size_t slots, size_t (*size)(bench_rng *), uint64_t seed) {
  bench_churn_task *t = bench_calloc((size_t)a.threads, sizeof *t);
  for (int i = 0; i < a.threads; i++) {
    t[i] = (bench_churn_task){ .slot = bench_calloc(slots, sizeof(bench_slot)), .nslots = slots, .size = size, .ops = a.work };
    bench_rng_seed(&t[i].rng, seed + (uint64_t)i);
  }
  bench_run_threads(a.threads, bench_churn_worker, t, sizeof *t);
  uint64_t sum = 0;
  for (int i = 0; i < a.threads; i++) {
    sum = bench_fold(sum, t[i].sum);
    free(t[i].slot);
  }
  free(t);
  printf("%s: scale=%ld threads=%d ops=%llu checksum=%016llx\n", bench_name, a.scale, a.threads,
         (unsigned long long)a.work * (unsigned long long)a.threads, (unsigned long long)sum);
  return 0;
}

/* Waits for a finished worker and returns its seat (the caller joins the thread). */
static inline int bench_done_wait(bench_done_queue *q) {
  pthread_mutex_lock(&q->lock);
  while (q->count == 0) pthread_cond_wait(&q->posted, &q->lock);
  int seat = q->seat[q->head];
  q->head = (q->head + 1) % q->cap;
  q->count--;
  pthread_mutex_unlock(&q->lock);
  return seat;
}

static inline void bench_thread_start(pthread_t *t, void *(*fn)(void *), void *arg) {
  if (pthread_create(t, NULL, fn, arg) != 0) bench_die("pthread_create failed");
}

static inline void bench_thread_join(pthread_t t) {
  if (pthread_join(t, NULL) != 0) bench_die("pthread_join failed");
}

/* Quota of the first worker in seat i of n when later ones do `quota`: spread from quota/n to
 * quota so the first wave ends one worker after another, not all at once. */
static inline uint64_t bench_first_quota(int i, int n, uint64_t quota) {
  return quota * (uint64_t)(i + 1) / (uint64_t)n;
}

#endif /* LOCUS_BENCH_UTIL_H */
