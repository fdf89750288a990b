/* larson — a server whose threads free what other threads allocated.
 *
 * Our own program shaped like Larson and Krishnan's server benchmark (one of the
 * allocation-intensive benchmarks seed 002 measures): many threads work on one shared pool
 * of objects, each replacing objects at random, so almost every object is freed by a thread
 * other than the one that allocated it — a server whose requests are answered by whichever
 * worker is free. What it rewards: cheap frees of objects from other threads' heaps, and
 * giving that memory back to the threads that allocate, without the pool's footprint
 * growing (memory stranded in the heap of the thread that freed it is blowup).
 *
 * The pool has POOL slots, filled by the main thread. Each of `threads` workers (default 8)
 * does its share of the operations (OPS_PER_SCALE per unit of scale, all threads together):
 * allocate an object of a random size (16..200 B, 3 in 4 of one of the hot sizes 24, 72 and
 * 136 B), stamp it, swap it into a random slot (an atomic exchange) and check and free the
 * object it took out. At the end the main thread checks and frees what is left.
 *
 * Operations are counted, not timed, so the work is the same under every allocator. Which
 * thread frees which object depends on scheduling; what is printed does not: each thread's
 * sequence of sizes and tags depends on its seed alone, and the checksum is the sum of the
 * tags of every object allocated (an order-independent sum), checked against the number of
 * objects freed.
 *
 * usage: larson [scale] [threads] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [threads] [--quick]"

enum {
  POOL = 50000,                   /* shared slots */
  OPS_PER_SCALE = 8000000,        /* operations per unit of scale, all threads together */
  MIN_SIZE = 16,
  MAX_SIZE = 200,
  MAX_THREADS = 256,
};

static const size_t HOT[] = {24, 72, 136};

static void *pool[POOL];

typedef struct {
  pthread_t thread;
  int id;
  uint64_t ops;
  uint64_t allocated_sum;         /* sum of the tags of the objects it allocated */
  uint64_t freed;                 /* objects it checked and freed */
} worker;

static size_t pick_size(bench_rng *r) {
  if (bench_rng_below(r, 4) != 0) return HOT[bench_rng_below(r, 3)];
  return (size_t)bench_rng_range(r, MIN_SIZE, MAX_SIZE);
}

/* A new stamped object; its serial is the thread's id in the high bits and a count. */
static void *make(bench_rng *r, uint64_t serial, uint64_t *sum) {
  size_t size = pick_size(r);
  void *p = bench_malloc(size);
  *sum += bench_sized_fill(p, size, serial);
  return p;
}

static void *work(void *arg) {
  worker *w = arg;
  bench_rng rng;
  bench_rng_seed(&rng, 0x1a7503 + (uint64_t)w->id);
  for (uint64_t i = 0; i < w->ops; i++) {
    void *p = make(&rng, ((uint64_t)(w->id + 1) << 40) | i, &w->allocated_sum);
    void *old = __atomic_exchange_n(&pool[bench_rng_below(&rng, POOL)], p, __ATOMIC_ACQ_REL);
    bench_sized_check_free(old, "pool object", i);
    w->freed++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_name = "larson";
  bench_rng rng;                  /* the main thread's: the pool's first objects */
  bench_rng_seed(&rng, 0x1a75);
  int quick;
  long scale = bench_args(&argc, argv, 2, USAGE, &quick);
  int threads = bench_threads_arg(argc, argv, 8, MAX_THREADS, USAGE);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);

  uint64_t sum = 0, freed = 0;
  for (uint64_t i = 0; i < POOL; i++) pool[i] = make(&rng, i, &sum);
  worker *w = bench_calloc((size_t)threads, sizeof(worker));
  for (int t = 0; t < threads; t++) {
    w[t].id = t;
    w[t].ops = bench_share(ops, threads, t);
    bench_thread_start(&w[t].thread, work, &w[t]);
  }
  for (int t = 0; t < threads; t++) {
    bench_thread_join(w[t].thread);
    sum += w[t].allocated_sum;
    freed += w[t].freed;
  }
  for (uint64_t i = 0; i < POOL; i++) {
    bench_sized_check_free(pool[i], "pool object", i);
    freed++;
  }
  if (freed != ops + POOL)
    bench_die("freed %llu objects, allocated %llu", (unsigned long long)freed,
              (unsigned long long)(ops + POOL));
  free(w);
  printf("larson: scale=%ld threads=%d ops=%llu objects=%llu checksum=%016llx\n", scale,
         threads, (unsigned long long)ops, (unsigned long long)freed,
         (unsigned long long)bench_fold(0, sum));
  return 0;
}
