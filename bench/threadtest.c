/* threadtest — threads each allocating and freeing batches of objects of one size.
 *
 * Our own program shaped like Hoard's threadtest (one of the allocation-intensive
 * benchmarks seed 002 measures): every thread repeatedly allocates a batch of objects of
 * its own size, writes them, and frees them all. Threads share nothing, so an allocator that
 * serialises them, or lets their objects share cache lines, pays for it; and since every
 * thread asks for one size again and again, a size that fits a size class badly wastes that
 * share of every batch. What it rewards: per-thread (or per-size) allocation paths without
 * locks, reusing a batch's memory for the next, and bins that fit the sizes asked for.
 *
 * `threads` threads (default 4); thread t uses SIZES[t % 4] (24, 72, 100 and 150 bytes),
 * batches of BATCH objects, and its share of the rounds (ROUNDS_PER_SCALE per unit of
 * scale, all threads together: the total work does not depend on the thread count). A
 * round: allocate the batch, stamp each object, then check and free them in allocation
 * order. Each thread's checksum depends on its size and round count alone; they are folded
 * in thread order after the threads are joined.
 *
 * usage: threadtest [scale] [threads] [--quick]     rounds grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [threads] [--quick]"

enum {
  BATCH = 20000,                  /* objects per batch */
  ROUNDS_PER_SCALE = 800,         /* batches per unit of scale, all threads together */
  MAX_THREADS = 256,
};

static const size_t SIZES[] = {24, 72, 100, 150};
#define NSIZES (sizeof(SIZES) / sizeof(SIZES[0]))

typedef struct {
  pthread_t thread;
  int id;
  uint64_t rounds;
  uint64_t sum;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  size_t size = SIZES[(size_t)w->id % NSIZES];
  unsigned char **obj = bench_malloc(sizeof(unsigned char *) * BATCH);
  uint64_t serial = (uint64_t)w->id << 40;
  for (uint64_t r = 0; r < w->rounds; r++) {
    uint64_t base = serial;
    bench_batch_alloc(obj, BATCH, size, base);
    serial += BATCH;
    for (unsigned i = 0; i < BATCH; i++) {
      uint64_t tag = bench_mix(base + i);
      bench_check(obj[i], size, tag, "object", base + i);
      w->sum = bench_fold(w->sum, tag ^ obj[i][size - 1]);
      free(obj[i]);
    }
  }
  free(obj);
  return NULL;
}

int main(int argc, char **argv) {
  bench_name = "threadtest";
  int quick;
  long scale = bench_args(&argc, argv, 2, USAGE, &quick);
  int threads = bench_threads_arg(argc, argv, 4, MAX_THREADS, USAGE);
  uint64_t rounds = bench_work(scale, ROUNDS_PER_SCALE, quick);

  worker *w = bench_calloc((size_t)threads, sizeof(worker));
  for (int t = 0; t < threads; t++) {
    w[t].id = t;
    w[t].rounds = bench_share(rounds, threads, t);
    bench_thread_start(&w[t].thread, work, &w[t]);
  }
  uint64_t sum = 0;
  for (int t = 0; t < threads; t++) {
    bench_thread_join(w[t].thread);
    sum = bench_fold(sum, w[t].sum);
  }
  free(w);
  printf("threadtest: scale=%ld threads=%d rounds=%llu objects=%llu checksum=%016llx\n",
         scale, threads, (unsigned long long)rounds, (unsigned long long)rounds * BATCH,
         (unsigned long long)sum);
  return 0;
}
