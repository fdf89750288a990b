/* prodcons — producer threads allocate, consumer threads free, continuously.
 *
 * Models a pipeline stage: `pairs` producers each allocate stamped objects (8..256 bytes,
 * skewed small) and hand them, in batches of BATCH through a bounded queue, to their consumer,
 * which checks and frees them. Every free is of an object another thread allocated and is
 * still running. What it rewards: remote frees that cost about what a local free costs (an
 * allocator that sends each object home one at a time, or takes a lock per free, loses).
 * Give it no more threads (2 x pairs) than cores: a full or empty queue makes its side spin on
 * sched_yield, so with more threads than cores the time depends on which threads the
 * scheduler first put on the same core (a pair sharing a core frees nothing across cores).
 *
 * usage: prodcons [scale] [pairs] [--quick]     objects grow linearly with scale
 */
#include "bench_util.h"

#include <stdatomic.h>

#define USAGE "[scale] [pairs] [--quick]"

enum {
  OBJECTS_PER_SCALE = 16000000,   /* objects per unit of scale, all producers together */
  BATCH = 64,                     /* objects per queue entry */
  QUEUE = 64,                     /* batches a queue holds */
  MAX_PAIRS = 32,
};

typedef struct {
  unsigned char *p[BATCH];
  uint32_t size[BATCH];
  uint64_t tag[BATCH];
  int count;
} batch_t;

/* One producer's queue to its consumer: a ring of QUEUE batch pointers, single producer and
 * single consumer; a full or empty ring makes its side yield the processor. */
typedef struct {
  batch_t *ring[QUEUE];
  _Atomic uint64_t head, tail;     /* taken, put */
  uint64_t objects;                /* the producer's quota */
  bench_rng rng;
  uint64_t serial, sum;            /* the consumer's checksum */
  int index;
} pipe_t;

static void *producer(void *arg) {
  pipe_t *q = arg;
  uint64_t left = q->objects;
  while (left) {
    batch_t *b = bench_malloc(sizeof *b);
    b->count = (int)(left < BATCH ? left : BATCH);
    for (int i = 0; i < b->count; i++) {
      size_t n = bench_small_size(&q->rng);
      b->p[i] = bench_malloc(n);
      b->size[i] = (uint32_t)n;
      b->tag[i] = bench_mix(++q->serial * MAX_PAIRS + (uint64_t)q->index);
      bench_fill(b->p[i], n, b->tag[i]);
    }
    left -= (uint64_t)b->count;
    uint64_t put = atomic_load_explicit(&q->tail, memory_order_relaxed);
    while (put - atomic_load_explicit(&q->head, memory_order_acquire) >= QUEUE) sched_yield();
    q->ring[put % QUEUE] = b;
    atomic_store_explicit(&q->tail, put + 1, memory_order_release);
  }
  return NULL;
}

static void *consumer(void *arg) {
  pipe_t *q = arg;
  uint64_t got = 0, taken = 0;
  while (got < q->objects) {
    while (atomic_load_explicit(&q->tail, memory_order_acquire) == taken) sched_yield();
    batch_t *b = q->ring[taken % QUEUE];
    atomic_store_explicit(&q->head, ++taken, memory_order_release);
    for (int i = 0; i < b->count; i++) {
      bench_check(b->p[i], b->size[i], b->tag[i], "object", got + (uint64_t)i);
      q->sum = bench_fold(q->sum, b->tag[i] ^ b->p[i][b->size[i] - 1]);
      free(b->p[i]);
    }
    got += (uint64_t)b->count;
    free(b);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const bench_threaded_t run = bench_threaded_args(argc, argv, "prodcons", USAGE, 2, MAX_PAIRS, OBJECTS_PER_SCALE);

  pipe_t *q = bench_calloc((size_t)run.threads, sizeof *q);
  pthread_t *tid = bench_calloc(2 * (size_t)run.threads, sizeof *tid);
  for (int i = 0; i < run.threads; i++) {
    q[i].objects = bench_share(run.work, run.threads, i);
    q[i].index = i;
    bench_rng_seed(&q[i].rng, 0x9c0de + (uint64_t)i);
    if (pthread_create(&tid[2 * i], NULL, producer, &q[i]) != 0 ||
        pthread_create(&tid[2 * i + 1], NULL, consumer, &q[i]) != 0)
      bench_die("pthread_create failed");
  }
  uint64_t sum = 0;
  for (int i = 0; i < 2 * run.threads; i++)
    if (pthread_join(tid[i], NULL) != 0) bench_die("pthread_join failed");
  for (int i = 0; i < run.threads; i++) sum = bench_fold(sum, q[i].sum);
  free(tid);
  free(q);
  printf("prodcons: scale=%ld pairs=%d objects=%llu checksum=%016llx\n", run.scale, run.threads,
         (unsigned long long)run.work, (unsigned long long)sum);
  return 0;
}
