/* xlarge — threads passing objects, large ones among them, through a shared table, in rounds
 * of threads that exit and are replaced.
 *
 * Models servers that hand buffers between threads (a request read by one thread, answered by
 * another) where some buffers are large: each round starts `threads` threads; each replaces
 * objects at random slots of one table shared by all (allocate and stamp a new object, swap it
 * into the slot atomically, check and free what was there — most often an object another
 * thread, often of an earlier round and now gone, allocated). Sizes: BASE-relative, mostly
 * 16..BASE bytes, but 1% up to 100 x BASE, 0.1% up to 1,000 x and 0.01% up to 10,000 x (about
 * 5 MiB). What it rewards: large objects freed by other threads reused without system calls,
 * a cache for them that all threads share, and cheap thread start and exit.
 *
 * usage: xlarge [scale] [threads] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#include <stdatomic.h>

#define USAGE "[scale] [threads] [--quick]"

enum {
  SLOTS_PER_THREAD = 1024,        /* the shared table: this many slots per thread */
  ROUNDS = 40,                    /* rounds of threads */
  OPS_PER_SCALE = 8000000,        /* replacements per unit of scale, all threads together */
  BASE = 512,                     /* the base object size */
  MAX_THREADS = 64,
};

typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} object_t;

typedef struct shared {
  _Atomic(object_t *) *slot;
  size_t nslots;
} shared_t;

typedef struct task {
  shared_t *table;
  bench_rng rng;
  uint64_t ops, serial;
  uint64_t allocated, freed;      /* bytes */
} task_t;

/* 16..BASE bytes, with a large one now and then: 1% up to 100 x BASE, 0.1% up to 1,000 x,
 * 0.01% up to 10,000 x (each uniform from BASE to its bound). */
static size_t object_size(bench_rng *r) {
  uint64_t c = bench_rng_below(r, 10000);
  if (c < 1) return (size_t)bench_rng_range(r, BASE, 10000 * (uint64_t)BASE);
  if (c < 10) return (size_t)bench_rng_range(r, BASE, 1000 * (uint64_t)BASE);
  if (c < 100) return (size_t)bench_rng_range(r, BASE, 100 * (uint64_t)BASE);
  return (size_t)bench_rng_range(r, 16, BASE);
}

/* A new stamped object (its descriptor and its bytes). */
static object_t *object_new(task_t *t) {
  object_t *o = bench_malloc(sizeof *o);
  o->size = object_size(&t->rng);
  o->p = bench_malloc(o->size);
  t->allocated += o->size;
  o->tag = bench_mix(++t->serial ^ (uint64_t)(uintptr_t)t->table);
  bench_fill(o->p, o->size, o->tag);
  return o;
}

static void object_free(object_t *o, uint64_t *freed, uint64_t where) {
  bench_check(o->p, o->size, o->tag, "object", where);
  *freed += o->size;
  free(o->p);
  free(o);
}

static void *worker(void *arg) {
  task_t *t = arg;
  for (uint64_t op = 0; op < t->ops; op++) {
    object_t *o = object_new(t);
    size_t i = (size_t)bench_rng_below(&t->rng, t->table->nslots);
    object_t *old = atomic_exchange_explicit(&t->table->slot[i], o, memory_order_acq_rel);
    if (old) object_free(old, &t->freed, op);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const bench_threaded_t run = bench_threaded_args(argc, argv, "xlarge", USAGE, 4, MAX_THREADS, OPS_PER_SCALE);

  shared_t table = { .nslots = (size_t)run.threads * SLOTS_PER_THREAD };
  table.slot = bench_calloc(table.nslots, sizeof *table.slot);
  task_t *task = bench_calloc((size_t)run.threads, sizeof *task);
  uint64_t allocated = 0, freed = 0, done = 0;
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < run.threads; i++) {
      task[i] = (task_t){ .table = &table, .ops = bench_share(bench_share(run.work, ROUNDS, round), run.threads, i) };
      bench_rng_seed(&task[i].rng, 0x1a26e + (uint64_t)round * MAX_THREADS + (uint64_t)i);
    }
    bench_run_threads(run.threads, worker, task, sizeof *task);
    for (int i = 0; i < run.threads; i++) {
      allocated += task[i].allocated;
      freed += task[i].freed;
      done += task[i].ops;
    }
  }
  for (size_t i = 0; i < table.nslots; i++) {
    object_t *o = atomic_load_explicit(&table.slot[i], memory_order_relaxed);
    if (o) object_free(o, &freed, i);
  }
  /* Which thread frees which object varies from run to run; the bytes do not. */
  if (freed != allocated) bench_die("%llu bytes allocated, %llu freed", (unsigned long long)allocated,
                                    (unsigned long long)freed);
  free(task);
  free(table.slot);
  printf("xlarge: scale=%ld threads=%d rounds=%d ops=%llu bytes=%llu checksum=%016llx\n", run.scale,
         run.threads, ROUNDS, (unsigned long long)done, (unsigned long long)allocated,
         (unsigned long long)bench_mix(allocated));
  return 0;
}
