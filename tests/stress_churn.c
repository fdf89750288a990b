/* stress_churn.c — random allocation churn with content verification, in several threads,
 * with objects handed between threads so that frees cross heaps.
 *
 * Every object carries a pattern derived from a unique id and its size (check.h), written
 * over its whole length when it is made and checked before it is freed and after every
 * realloc (the preserved prefix). Sizes cover every category from 8 B to 256 KiB, skewed
 * small. Each thread owns an array of slots; a share of its objects go through a shared,
 * mutex-protected exchange array and are freed (or realloc'ed) by whichever thread takes them.
 * When a Locus library is loaded, each thread calls locus_check_heap every few thousand steps.
 *
 *   stress_churn            smoke size (a few seconds at most)
 *   stress_churn <scale>    <scale> times as many steps (e.g. 50 for a long run)
 *   stress_churn <scale> <threads>
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef struct obj {
  unsigned char *p;
  size_t size;
  uint64_t id; /* pattern seed */
} obj_t;

enum { SLOTS = 1500, EXCHANGE = 256, CHECK_EVERY = 4096 };

static obj_t exchange[EXCHANGE];
static pthread_mutex_t exchange_lock = PTHREAD_MUTEX_INITIALIZER;
static locus_api_t L;
static int have_locus;
static long steps_per_thread = 40000;
static _Atomic uint64_t next_id = 1;
static _Atomic uint64_t total_cross, total_realloc, total_checks;

/* 8 B .. 256 KiB, skewed small: 70% <= 256 B, 20% <= 4 KiB, 8% <= 64 KiB, 2% <= 256 KiB. */
static size_t pick_size(test_rng_t *r) {
  uint64_t c = rng_below(r, 1000);
  if (c < 700) return 8 + rng_below(r, 249);
  if (c < 900) return 257 + rng_below(r, 4096 - 256);
  if (c < 980) return 4097 + rng_below(r, 65536 - 4096);
  return 65537 + rng_below(r, 262144 - 65536);
}

static void verify(const obj_t *o) { CHECK_PATTERN(o->p, o->size, o->id); }

/* Makes a new object of the given size in one of several ways. */
static void make(obj_t *o, size_t size, test_rng_t *r) {
  o->id = next_id++;
  o->size = size;
  uint64_t how = rng_below(r, 20);
  if (how < 14) {
    o->p = malloc(size);
  } else if (how < 17) {
    o->p = calloc(1, size);
    CHECKF(o->p != NULL, "calloc(%zu) failed", size);
    for (size_t i = 0; i < size; i += 61) CHECKF(o->p[i] == 0, "calloc(%zu) not zero at %zu", size, i);
    CHECK(o->p[size - 1] == 0);
  } else if (how < 19) {
    size_t al = (size_t)16 << rng_below(r, 9); /* 16 .. 4096 */
    void *p = NULL;
    CHECK(posix_memalign(&p, al, size) == 0);
    CHECK_ALIGNED(p, al);
    o->p = p;
  } else {
    o->p = realloc(NULL, size);
  }
  CHECKF(o->p != NULL, "allocation of %zu bytes failed", size);
  CHECK_ALIGNED(o->p, test_min_align(size));
  CHECKF(malloc_usable_size(o->p) >= size, "usable %zu < %zu", malloc_usable_size(o->p), size);
  pattern_fill(o->p, size, o->id);
}

static void drop(obj_t *o) {
  verify(o);
  free(o->p);
  o->p = NULL;
}

/* realloc keeps the prefix; the whole new size is then rewritten under a new id. */
static void resize(obj_t *o, size_t size) {
  verify(o);
  unsigned char *q = realloc(o->p, size);
  CHECKF(q != NULL, "realloc(%zu -> %zu) failed", o->size, size);
  CHECK_ALIGNED(q, test_min_align(size));
  CHECK_PATTERN(q, o->size < size ? o->size : size, o->id);
  o->p = q;
  o->size = size;
  o->id = next_id++;
  pattern_fill(q, size, o->id);
  total_realloc++;
}

static void *worker(void *arg) {
  uintptr_t t = (uintptr_t)arg;
  test_rng_t r = {0x1234567ull * (t + 1)};
  obj_t *slot = calloc(SLOTS, sizeof *slot);
  CHECK(slot != NULL);
  uint64_t cross = 0;
  for (long step = 0; step < steps_per_thread; step++) {
    obj_t *o = &slot[rng_below(&r, SLOTS)];
    uint64_t op = rng_below(&r, 100);
    if (!o->p) {
      make(o, pick_size(&r), &r);
    } else if (op < 55) {
      drop(o);
    } else if (op < 75) {
      /* grow or shrink, sometimes across categories */
      size_t ns = rng_below(&r, 4) ? o->size / 2 + rng_below(&r, o->size + 64) : pick_size(&r);
      resize(o, ns ? ns : 1);
    } else if (op < 90) {
      verify(o);
    } else {
      /* swap with the exchange: ours goes in, whatever was there comes out (usually another
       * thread's) and is verified, resized or freed here */
      pthread_mutex_lock(&exchange_lock);
      obj_t *x = &exchange[rng_below(&r, EXCHANGE)];
      obj_t mine = *o;
      *o = *x;
      *x = mine;
      pthread_mutex_unlock(&exchange_lock);
      if (o->p) {
        cross++;
        if (rng_below(&r, 3) == 0) resize(o, pick_size(&r));
        else drop(o);
      }
    }
    if (have_locus && L.check_heap && step % CHECK_EVERY == CHECK_EVERY - 1) {
      CHECKF(L.check_heap() == 0, "locus_check_heap failed in thread %lu at step %ld",
             (unsigned long)t, step);
      total_checks++;
    }
  }
  for (int i = 0; i < SLOTS; i++)
    if (slot[i].p) drop(&slot[i]);
  free(slot);
  total_cross += cross;
  if (have_locus && L.check_heap) CHECK_EQ(L.check_heap(), 0);
  return NULL;
}

int main(int argc, char **argv) {
  have_locus = locus_api_require(&L);
  long scale = argc > 1 ? atol(argv[1]) : 1;
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  if (scale < 1) scale = 1;
  if (threads < 1 || threads > 256) threads = 4;
  steps_per_thread *= scale;

  double t0 = test_now();
  size_t rss0 = test_rss();
  for (int round = 0; round < 2; round++) {
    pthread_t th[256];
    for (int i = 0; i < threads; i++)
      CHECK(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + round * threads)) == 0);
    for (int i = 0; i < threads; i++) CHECK(pthread_join(th[i], NULL) == 0);
    /* what is left in the exchange was made by threads that have exited: free it here */
    for (int i = 0; i < EXCHANGE; i++)
      if (exchange[i].p) {
        verify(&exchange[i]);
        free(exchange[i].p);
        exchange[i].p = NULL;
      }
  }
  if (have_locus) {
    CHECK_EQ(L.check_heap(), 0);
    locus_stats_t s;
    CHECK_EQ(L.stats_get(&s), 0);
    test_note("stats: malloc_calls %llu free_calls %llu remote_frees %llu heaps %llu\n",
              (unsigned long long)s.malloc_calls, (unsigned long long)s.free_calls,
              (unsigned long long)s.remote_frees, (unsigned long long)s.heaps);
  }
  test_note("stress_churn: %d threads x 2 rounds x %ld steps, %llu cross-thread, %llu "
            "reallocs, %llu heap checks, RSS %zu -> %zu KiB, %.2f s\n",
            threads, steps_per_thread, (unsigned long long)total_cross,
            (unsigned long long)total_realloc, (unsigned long long)total_checks, rss0 >> 10,
            test_rss() >> 10, test_now() - t0);
  return 0;
}
