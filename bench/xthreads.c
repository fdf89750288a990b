/* xthreads — short-lived threads that hand objects to each other through a shared table.
 *
 * Models a server whose worker threads come and go (a thread per connection or per task,
 * a pool that retires threads) and whose objects outlive the thread that made them: a
 * request's data left in a shared cache, picked up and freed later by whichever thread
 * displaces it. What it rewards: cheap thread start-up and exit in the allocator (heap
 * creation, adoption or release of an exited thread's memory), fast frees of objects that
 * another — often exited — thread allocated, and not hoarding memory per thread.
 *
 * A table of SLOTS atomic pointers is shared by all threads. `threads` workers (default 8)
 * run at a time. Each does a quota of operations: allocate a new object (8..256 B skewed
 * small; one in LARGE_EVERY is a large buffer of 4 KiB..256 KiB, unless --no-large), stamp
 * it, swap it into a random slot, and check and free the object it displaced, if any. A
 * worker that has done its quota exits and the main thread starts a new one in its place
 * (staggered replacement: the first wave's quotas are spread so that workers end at
 * different times). At the end the main thread checks and frees what is left in the table.
 *
 * Objects are self-describing (bench_sized_*: the tag holds the size) since the freeing
 * thread knows only the pointer. Which thread frees which object depends on scheduling; the
 * checksum does not: it combines each worker's own sequence of tags (a function of its
 * generation number) with order-independent sums, and the tags read back from freed objects
 * must add up to those created.
 *
 * usage: xthreads [scale] [threads] [--no-large] [--quick]   operations grow with scale
 */
#include "bench_util.h"

#include <stdatomic.h>

#define USAGE "[scale] [threads] [--no-large] [--quick]"

enum {
  SLOTS = 16384,                  /* the shared table */
  OPS_PER_SCALE = 15000000,       /* operations (allocations) per unit of scale, all threads */
  QUOTA = 10000,                  /* operations of one worker thread */
  LARGE_EVERY = 100,              /* about one object in this many is large */
  MAX_THREADS = 256,
};

static _Atomic(void *) table[SLOTS];
static int large_on = 1;

/* One worker: its generation number fixes its seed and quota, hence everything it creates. */
typedef struct {
  pthread_t thread;
  uint64_t gen;
  uint64_t quota;
  uint64_t created_fold;          /* fold of its own tags, in its program order */
  uint64_t created_sum, freed_sum;/* sums of tags created / read back from displaced objects */
  uint64_t freed, large;
  int seat;
} worker;

static bench_done_queue done;     /* seats whose worker has finished */
static int nthreads = 8;

static void *run(void *arg) {
  worker *w = arg;
  bench_rng rng;
  bench_rng_seed(&rng, 0x7e4d + w->gen * 0x10001);
  uint64_t serial = w->gen << 32;
  for (uint64_t k = 0; k < w->quota; k++) {
    size_t size;
    if (large_on && bench_rng_below(&rng, LARGE_EVERY) == 0) {
      size = bench_large_size(&rng);
      w->large++;
    } else {
      size = bench_small_size(&rng);
    }
    void *p = bench_malloc(size);
    uint64_t tag = bench_sized_fill(p, size, ++serial);
    w->created_sum += tag;
    w->created_fold = bench_fold(w->created_fold, tag);
    /* acq_rel: our stamp is visible to whoever takes p; the displaced object's is to us */
    void *old = atomic_exchange_explicit(&table[bench_rng_below(&rng, SLOTS)], p,
                                         memory_order_acq_rel);
    if (old != NULL) {
      w->freed_sum += bench_sized_check_free(old, "displaced object", serial);
      w->freed++;
    }
  }
  bench_done_post(&done, w->seat);
  return NULL;
}

static void start(worker *w, int seat, uint64_t gen, uint64_t quota) {
  *w = (worker){.gen = gen, .quota = quota, .seat = seat};
  bench_thread_start(&w->thread, run, w);
}

int main(int argc, char **argv) {
  bench_name = "xthreads";
  int quick;
  large_on = !bench_take_flag(&argc, argv, "--no-large");
  long scale = bench_args(&argc, argv, 2, USAGE, &quick);
  if (argc > 2) nthreads = (int)bench_int_arg(argv[2], 1, MAX_THREADS, "thread count", USAGE);

  /* Generations: the first wave's quotas are QUOTA*(i+1)/threads, so that its workers end
   * one after another; every later worker does QUOTA. */
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);
  uint64_t gens = ops / QUOTA;
  if (gens < (uint64_t)nthreads) gens = (uint64_t)nthreads;

  worker *seats = bench_malloc(sizeof(worker) * (size_t)nthreads);
  uint64_t next_gen = 0, total_ops = 0, created_sum = 0, freed_sum = 0, freed = 0, large = 0;
  uint64_t fold_sum = 0;
  bench_done_init(&done, nthreads);
  for (int i = 0; i < nthreads; i++, next_gen++)
    start(&seats[i], i, next_gen, bench_first_quota(i, nthreads, QUOTA));
  for (int live = nthreads; live > 0;) {
    worker *w = &seats[bench_done_wait(&done)];
    bench_thread_join(w->thread);
    total_ops += w->quota;
    created_sum += w->created_sum;
    freed_sum += w->freed_sum;
    freed += w->freed;
    large += w->large;
    fold_sum += bench_mix(w->created_fold ^ w->gen);   /* order-independent over workers */
    if (next_gen < gens)
      start(w, w->seat, next_gen++, QUOTA);
    else
      live--;
  }
  free(seats);

  for (uint32_t i = 0; i < SLOTS; i++) {
    void *p = atomic_load_explicit(&table[i], memory_order_acquire);
    if (p == NULL) continue;
    freed_sum += bench_sized_check_free(p, "remaining object", i);
    freed++;
  }
  if (freed != total_ops || freed_sum != created_sum)
    bench_die("objects lost or freed twice: %llu created, %llu freed (or their tags differ)",
              (unsigned long long)total_ops, (unsigned long long)freed);

  printf("xthreads: scale=%ld threads=%d large=%d workers=%llu ops=%llu large_objects=%llu "
         "checksum=%016llx\n", scale, nthreads, large_on, (unsigned long long)gens,
         (unsigned long long)total_ops, (unsigned long long)large,
         (unsigned long long)bench_fold(fold_sum, created_sum));
  return 0;
}
