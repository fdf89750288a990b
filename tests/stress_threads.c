/* stress_threads.c — memory of threads that exit, and of threads that only free, comes back.
 *
 *   stress_threads threads [count [extra_rounds]]   thousands (4000) of short-lived threads
 *       (8 at a time), each allocating and freeing, freeing from a TLS destructor, and leaving
 *       a few objects for the main thread to free after it has exited. A warm-up round of
 *       count/2 threads, then two rounds of count: the second must not grow the resident
 *       memory by more than 20 MiB (heaps and their pages are reused), and under a Locus
 *       library fewer than 64 heaps may have been created in all.
 *   stress_threads prodcons [count]  a producer thread allocates <count> (200k) objects and
 *       hands them to a consumer thread, which never allocates and frees them all; the
 *       producer exits without waiting. After locus_purge (malloc_trim(0) for other
 *       allocators) the resident memory must fall by at least half of what the objects took.
 *
 * "Resident" is Rss minus LazyFree (check.h): pages given back with MADV_FREE count as free.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static locus_api_t L;
static int have_locus;

#define MIB ((size_t)1 << 20)

/* ---- many short-lived threads ----------------------------------------------------------- */

enum { LEFT_PER_THREAD = 3, BATCH = 8, KEEP = 64 };

typedef struct left { void *p; size_t size; uint64_t seed; } left_t;
static left_t *leftovers; /* [threads * LEFT_PER_THREAD], filled by the threads */
static pthread_key_t tls_key;

/* A TLS destructor that frees and allocates: runs at thread exit, in an order relative to the
 * allocator's own thread teardown that nobody promises. */
static void tls_destructor(void *v) {
  left_t *l = v;
  CHECK_PATTERN(l->p, l->size, l->seed);
  free(l->p);
  void *extra = malloc(100);
  CHECK(extra != NULL);
  memset(extra, 1, 100);
  free(extra);
  free(l);
}

static size_t short_size(test_rng_t *r) {
  uint64_t c = rng_below(r, 1000);
  if (c < 850) return 16 + rng_below(r, 496);
  if (c < 990) return 512 + rng_below(r, 8192);
  /* big objects stay below glibc's mmap threshold: its threshold rises as mapped blocks are
   * freed, and the arenas then grow for a while, which is not what this test measures */
  return 8192 + rng_below(r, 32768);
}

static void *short_lived(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  test_rng_t r = {id * 977 + 1};
  void *keep[KEEP];
  size_t ksize[KEEP];
  for (int i = 0; i < KEEP; i++) {
    ksize[i] = short_size(&r);
    keep[i] = malloc(ksize[i]);
    CHECK(keep[i] != NULL);
    pattern_fill(keep[i], ksize[i], id * KEEP + (uint64_t)i);
  }
  /* free most in random order, leave a few for the main thread */
  for (int i = KEEP - 1; i > 0; i--) {
    int j = (int)rng_below(&r, (uint64_t)i + 1);
    void *tp = keep[i]; keep[i] = keep[j]; keep[j] = tp;
    size_t ts = ksize[i]; ksize[i] = ksize[j]; ksize[j] = ts;
  }
  for (int i = 0; i < KEEP; i++) {
    if (i < LEFT_PER_THREAD) {
      /* the seed went with the object: recover it by scanning would be slow, so re-fill */
      left_t *l = &leftovers[id * LEFT_PER_THREAD + (uintptr_t)i];
      l->p = keep[i];
      l->size = ksize[i];
      l->seed = id * 31 + (uint64_t)i;
      pattern_fill(l->p, l->size, l->seed);
    } else {
      free(keep[i]);
    }
  }
  left_t *t = malloc(sizeof *t);
  CHECK(t != NULL);
  t->size = 1000;
  t->seed = id;
  t->p = malloc(t->size);
  CHECK(t->p != NULL);
  pattern_fill(t->p, t->size, t->seed);
  CHECK(pthread_setspecific(tls_key, t) == 0);
  return NULL;
}

static void round_of_threads(unsigned count) {
  for (unsigned base = 0; base < count; base += BATCH) {
    pthread_t th[BATCH];
    unsigned n = count - base < BATCH ? count - base : BATCH;
    for (unsigned i = 0; i < n; i++) {
      int rc = pthread_create(&th[i], NULL, short_lived, (void *)(uintptr_t)(base + i));
      CHECKF(rc == 0, "pthread_create: %s", strerror(rc));
    }
    for (unsigned i = 0; i < n; i++) CHECK(pthread_join(th[i], NULL) == 0);
  }
  /* the objects left behind belong to heaps whose threads are gone */
  for (unsigned i = 0; i < count * LEFT_PER_THREAD; i++) {
    CHECK_PATTERN(leftovers[i].p, leftovers[i].size, leftovers[i].seed);
    free(leftovers[i].p);
    leftovers[i].p = NULL;
  }
}

static int extra_rounds;
static int mode_threads(unsigned count) {
  leftovers = calloc((size_t)count * LEFT_PER_THREAD, sizeof *leftovers);
  CHECK(leftovers != NULL);
  CHECK(pthread_key_create(&tls_key, tls_destructor) == 0);
  double t0 = test_now();
  size_t rss0 = test_rss();
  /* warm-up: allocators that grow a bounded set of arenas as contention shows up (glibc makes
   * up to 8 per core) settle here; what is measured is growth after that */
  round_of_threads(count / 2);
  round_of_threads(count);
  size_t rss1 = test_rss();
  round_of_threads(count);
  size_t rss2 = test_rss();
  for (int i = 0; i < extra_rounds; i++) {
    round_of_threads(count);
    test_note("extra round: resident %zu KiB\n", test_rss() >> 10);
  }
  test_note("threads: warm-up of %u threads, then 2 rounds of %u threads (%u at a time), %.2f s; "
            "resident %zu -> %zu -> %zu KiB\n", count / 2, count, BATCH, test_now() - t0,
            rss0 >> 10, rss1 >> 10, rss2 >> 10);
  CHECKF(rss2 <= rss1 + 20 * MIB,
         "the second round of threads grew resident memory by %zu KiB (limit 20 MiB): exited "
         "threads' memory is not reused", (rss2 - rss1) >> 10);
  if (have_locus) {
    locus_stats_t s;
    CHECK_EQ(L.stats_get(&s), 0);
    test_note("stats: heaps %llu (abandoned %llu) for %u threads, remote_frees %llu\n",
              (unsigned long long)s.heaps, (unsigned long long)s.heaps_abandoned,
              2 * count + count / 2,
              (unsigned long long)s.remote_frees);
    CHECKF(s.heaps < 64, "%llu heaps created for %u threads (at most %d alive at once): heaps of "
           "exited threads are not reused", (unsigned long long)s.heaps, 2 * count + count / 2,
           BATCH + 1);
    CHECK_EQ(L.check_heap(), 0);
  }
  free(leftovers);
  return 0;
}

/* ---- producer / consumer ---------------------------------------------------------------- */

static void **objs;
static unsigned nobjs;
static atomic_uint produced; /* objs[0 .. produced) are ready for the consumer */
static size_t peak_rss;

static void *producer(void *arg) {
  (void)arg;
  test_rng_t r = {99};
  for (unsigned i = 0; i < nobjs; i++) {
    size_t sz = 16 + rng_below(&r, 497);
    unsigned char *p = malloc(sz);
    CHECK(p != NULL);
    memset(p, (int)(i & 0xFF), sz);
    p[0] = (unsigned char)(i & 0xFF);
    objs[i] = p;
  }
  peak_rss = test_rss();
  /* hand them over in batches, then exit at once: the consumer's frees land on a heap whose
   * thread is gone */
  for (unsigned i = 0; i < nobjs; i += 1000) {
    unsigned upto = i + 1000 < nobjs ? i + 1000 : nobjs;
    atomic_store_explicit(&produced, upto, memory_order_release);
  }
  return NULL;
}

/* Never allocates: no stdio, no pthread calls that might, just frees. */
static void *consumer(void *arg) {
  (void)arg;
  unsigned done = 0;
  while (done < nobjs) {
    unsigned ready = atomic_load_explicit(&produced, memory_order_acquire);
    if (ready == done) {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
      continue;
    }
    for (; done < ready; done++) {
      unsigned char *p = objs[done];
      if (p[0] != (unsigned char)(done & 0xFF)) {
        test_fdprintf(2, "FAIL consumer: object %u corrupted\n", done);
        _exit(1);
      }
      free(p);
    }
  }
  return NULL;
}

static int mode_prodcons(unsigned count) {
  nobjs = count;
  objs = calloc(count, sizeof *objs);
  CHECK(objs != NULL);
  memset(objs, 0, count * sizeof *objs); /* resident before the base is measured */
  if (have_locus) L.purge();
  else malloc_trim(0);
  size_t base = test_rss();
  double t0 = test_now();
  pthread_t p, c;
  CHECK(pthread_create(&c, NULL, consumer, NULL) == 0);
  CHECK(pthread_create(&p, NULL, producer, NULL) == 0);
  CHECK(pthread_join(p, NULL) == 0);
  CHECK(pthread_join(c, NULL) == 0);
  size_t grown = peak_rss > base ? peak_rss - base : 0;
  CHECKF(grown >= 16 * MIB, "the objects only took %zu KiB: cannot judge", grown >> 10);
  /* give back: Locus purges synchronously; other allocators may need a moment */
  size_t after = 0;
  size_t purged = 0;
  double t1 = test_now();
  do {
    if (have_locus) purged += L.purge();
    else malloc_trim(0);
    after = test_rss();
    if (after < base + grown / 2) break;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  } while (test_now() - t1 < 1.0);
  test_note("prodcons: %u objects, resident base %zu KiB, peak %zu KiB, after %s %zu KiB "
            "(%.2f s, purge gave back %zu KiB)\n", count, base >> 10, peak_rss >> 10,
            have_locus ? "locus_purge" : "malloc_trim(0)", after >> 10, test_now() - t0,
            purged >> 10);
  if (after >= base + grown / 2) {
    /* glibc's malloc_trim does not give back the top of a thread arena's heap, and the peers'
     * malloc_trim is glibc's (a no-op for their heaps): for them this is only reported. */
    CHECKF(!have_locus,
           "resident memory stays at %zu KiB after the consumer freed everything (peak %zu KiB, "
           "base %zu KiB): memory freed by a thread that never allocates does not come back",
           after >> 10, peak_rss >> 10, base >> 10);
    test_note("note: memory did not come back (checked only under a Locus library)\n");
  }
  free(objs);
  if (have_locus) CHECK_EQ(L.check_heap(), 0);
  return 0;
}

int main(int argc, char **argv) {
  have_locus = locus_api_require(&L);
  const char *mode = argc > 1 ? argv[1] : "threads";
  if (!strcmp(mode, "threads")) {
    unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 4000;
    extra_rounds = argc > 3 ? atoi(argv[3]) : 0;
    return mode_threads(n ? n : 4000);
  }
  if (!strcmp(mode, "prodcons")) {
    unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 200000;
    return mode_prodcons(n ? n : 200000);
  }
  test_fdprintf(2, "usage: stress_threads threads|prodcons [count]\n");
  return 2;
}
