/* stress_large.c — large objects handed between threads that come and go.
 *
 *   stress_large steady    rounds of THREADS threads (each round's threads exit before the
 *       next round starts) replace objects of 100 KiB to 4 MiB in a table they all share,
 *       freeing what another thread, most often of an earlier round, left there. After the
 *       warm-up rounds, a Locus library must make at most a few mapping calls (mmap, munmap,
 *       madvise, mremap, mprotect) per hundred objects: freed big objects are reused by any
 *       thread from a cache all threads share, not unmapped and mapped again. (Not the secure
 *       build: there every big object gets a fresh mapping with a guard page, by design.)
 *   stress_large giveback  the same, then everything is freed and the program goes quiet
 *       (beyond LOCUS_DECAY_MS, which CTest sets to 50 for this section): after a few small
 *       calls the resident memory must be back near where it started.
 *   stress_large span_tail  a big buffer freed, a smaller one in its place, then a big one
 *       again: the smaller one kept the span's resident pages up to twice its own size, so
 *       the big one faults in only the rest (discarding them all made it fault in 75%).
 *   stress_large span_fit  a 12 MiB buffer freed, then a 20 MiB one: it takes the first's
 *       span (spans are 32 MiB at least) and faults in only what the first never touched
 *       (with 16 MiB spans it got a fresh mapping and faulted in every page).
 *
 * The calls are counted here, whatever library is loaded: this program defines the five
 * functions (a preloaded library's calls resolve to the executable's definitions first) and
 * makes each system call itself. Under a Locus library the count is also compared with the
 * library's own count (locus_stats_t.os_calls). Other libraries only run the workload.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static locus_api_t L;
static int have_locus;

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- the mapping calls, counted ------------------------------------------------------------ */

static _Atomic uint64_t map_calls;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  atomic_fetch_add_explicit(&map_calls, 1, memory_order_relaxed);
  long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
}
int munmap(void *addr, size_t len) {
  atomic_fetch_add_explicit(&map_calls, 1, memory_order_relaxed);
  return (int)syscall(SYS_munmap, addr, len);
}
int madvise(void *addr, size_t len, int advice) {
  atomic_fetch_add_explicit(&map_calls, 1, memory_order_relaxed);
  return (int)syscall(SYS_madvise, addr, len, advice);
}
int mprotect(void *addr, size_t len, int prot) {
  atomic_fetch_add_explicit(&map_calls, 1, memory_order_relaxed);
  return (int)syscall(SYS_mprotect, addr, len, prot);
}
void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  void *to = (flags & MREMAP_FIXED) ? va_arg(ap, void *) : NULL;
  va_end(ap);
  atomic_fetch_add_explicit(&map_calls, 1, memory_order_relaxed);
  long r = syscall(SYS_mremap, old, old_len, new_len, flags, to);
  return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
}

static uint64_t os_calls(void) {
  locus_stats_t s;
  memset(&s, 0, sizeof s);
  if (!have_locus || L.stats_get(&s) != 0 || s.version < 5) return 0;
  return s.os_calls;
}

/* ---- the workload ------------------------------------------------------------------------ */

enum { THREADS = 4, SLOTS = 32, OPS = 64, WARM_ROUNDS = 8, ROUNDS = 24 };

typedef struct object { unsigned char *p; size_t size; uint64_t tag; } object_t;

static _Atomic(object_t *) table[SLOTS];

typedef struct task { test_rng_t rng; uint64_t serial; } task_t;

/* Every page of the object written (as a program filling a buffer would), its tag at both ends. */
static object_t *object_new(task_t *t) {
  object_t *o = malloc(sizeof *o);
  CHECK(o != NULL);
  o->size = 100 * KIB + (size_t)rng_below(&t->rng, 4 * MIB - 100 * KIB);
  o->p = malloc(o->size);
  CHECK(o->p != NULL);
  o->tag = rng_next(&t->rng) | 1;
  for (size_t i = 0; i + 8 <= o->size; i += 4096) memcpy(o->p + i, &o->tag, 8);
  memcpy(o->p + o->size - 8, &o->tag, 8);
  return o;
}

static void object_free(object_t *o) {
  uint64_t a, b;
  memcpy(&a, o->p, 8);
  memcpy(&b, o->p + o->size - 8, 8);
  CHECKF(a == o->tag && b == o->tag, "object of %zu bytes changed while live", o->size);
  free(o->p);
  free(o);
}

static void *worker(void *arg) {
  task_t *t = arg;
  for (int op = 0; op < OPS; op++) {
    object_t *o = object_new(t);
    object_t *old = atomic_exchange(&table[rng_below(&t->rng, SLOTS)], o);
    if (old) object_free(old);
  }
  return NULL;
}

static void run_rounds(int rounds, uint64_t seed) {
  for (int r = 0; r < rounds; r++) {
    pthread_t th[THREADS];
    task_t task[THREADS];
    for (int i = 0; i < THREADS; i++) {
      task[i].rng.s = seed + (uint64_t)r * THREADS + (uint64_t)i;
      CHECK(pthread_create(&th[i], NULL, worker, &task[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
  }
}

static void free_all(void) {
  for (int i = 0; i < SLOTS; i++) {
    object_t *o = atomic_exchange(&table[i], NULL);
    if (o) object_free(o);
  }
}

/* ---- sections ---------------------------------------------------------------------------- */

static void test_steady(void) {
  run_rounds(WARM_ROUNDS, 1);
  uint64_t calls0 = map_calls, own0 = os_calls();
  run_rounds(ROUNDS, 1000);
  uint64_t calls = map_calls - calls0, own = os_calls() - own0, objects = (uint64_t)ROUNDS * THREADS * OPS;
  test_note("     %llu objects of 100 KiB-4 MiB in %d rounds of %d threads: %llu mapping calls "
            "(library's count: %llu)\n", (unsigned long long)objects, ROUNDS, THREADS,
            (unsigned long long)calls, (unsigned long long)own);
  free_all();
  if (!have_locus || strstr(L.variant(), "secure")) return;
  /* Before the shared span cache: 4 calls an object (fresh mappings, mremap, munmap); now
   * about 1 in 60 (a loaded machine stretches the run past more decay periods: some slack). */
  CHECKF(calls <= 64 + objects / 16, "%llu mapping calls for %llu objects in steady state",
         (unsigned long long)calls, (unsigned long long)objects);
  CHECKF(own == 0 || own >= calls, "the library counted %llu calls, %llu were made",
         (unsigned long long)own, (unsigned long long)calls);
}

static void test_giveback(void) {
  size_t base = test_rss();
  run_rounds(WARM_ROUNDS + ROUNDS / 2, 7);
  size_t busy = test_rss();
  free_all();
  const char *d = getenv("LOCUS_DECAY_MS");
  long decay = d ? atol(d) : 100;
  /* Quiet, then a few small calls for the decay clocks to run on (nothing runs in between). */
  for (int i = 0; i < 4; i++) {
    struct timespec nap = { 0, (long)(decay + 20) * 1000 * 1000 };
    nanosleep(&nap, NULL);
    free(opaque_ptr(malloc(64 * KIB)));
    free(opaque_ptr(malloc(100)));
  }
  size_t after = test_rss();
  test_note("     resident: %zu KiB at start, %zu KiB busy, %zu KiB after a quiet %ld ms x 4\n",
            base >> 10, busy >> 10, after >> 10, decay + 20);
  if (!have_locus) return;
  CHECKF(after <= base + 16 * MIB, "resident memory %zu KiB after demand fell (started at %zu KiB, "
         "%zu KiB busy)", after >> 10, base >> 10, busy >> 10);
}

/* ---- spans: big buffers reused without refaults ------------------------------------------- */

static long minor_faults(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  return ru.ru_minflt;
}

/* Writes a byte on every page of p's first n bytes; returns the page faults that took. */
static long touch(char *p, size_t n) {
  long before = minor_faults();
  for (size_t i = 0; i < n; i += 4 * KIB) ((volatile char *)p)[i] = 1;
  return minor_faults() - before;
}

/* Whether this library keeps freed big objects in spans (the secure build maps each afresh;
 * the immediate discard policy and LOCUS_HUGE_CACHE=0 keep none). */
static bool spans_expected(void) {
  const char *d = getenv("LOCUS_DISCARD"), *c = getenv("LOCUS_HUGE_CACHE");
  return have_locus && !strstr(L.variant(), "secure") && !(d && !strcmp(d, "immediate")) && !(c && atol(c) == 0);
}

/* Buffers of sizes[0..n-1] MiB in turn, each written on every page and freed: the page
 * faults the last one's writes took. */
static long faults_of_last(const size_t *sizes, int n) {
  long faults = 0;
  for (int i = 0; i < n; i++) {
    char *p = opaque_ptr(malloc(sizes[i] * MIB));
    CHECK(p != NULL);
    faults = touch(p, sizes[i] * MIB);
    free(p);
  }
  return faults;
}

static void test_span_tail(void) {
  static const size_t mib[] = { 20, 5, 20 };
  long faults = faults_of_last(mib, 3), pages = (long)(20 * MIB / (4 * KIB));
  test_note("     20 MiB after 5 MiB in its span: %ld page faults of %ld pages\n", faults, pages);
  if (!spans_expected()) return;
  CHECKF(faults <= pages / 2, "the 20 MiB buffer faulted in %ld of its %ld pages: the 5 MiB one "
         "discarded the span's tail", faults, pages);
}

static void test_span_fit(void) {
  static const size_t mib[] = { 12, 20 };
  long faults = faults_of_last(mib, 2), pages = (long)(20 * MIB / (4 * KIB));
  test_note("     20 MiB after a freed 12 MiB: %ld page faults of %ld pages\n", faults, pages);
  if (!spans_expected()) return;
  CHECKF(faults <= pages * 7 / 10, "the 20 MiB buffer faulted in %ld of its %ld pages: it did not "
         "reuse the 12 MiB one's span", faults, pages);
}

int main(int argc, char **argv) {
  have_locus = locus_api_require(&L);
  static const test_section_t sections[] = {
    { "steady", test_steady },
    { "giveback", test_giveback },
    { "span_tail", test_span_tail },
    { "span_fit", test_span_fit },
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
