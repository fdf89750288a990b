/* turnover — server workers replaced by their own successors while they still hold memory.
 *
 * Models a server whose worker threads are retired and replaced by the worker itself: each
 * worker owns a table of SLOTS objects (8..1000 bytes, uniform), replaces objects at random in
 * it (check and free the old one, allocate and stamp a new one), and after its quota *creates
 * its successor, hands it the table, and exits*. The successor starts freeing the objects its
 * predecessor allocated while the predecessor is still running or just exiting, so an
 * allocator cannot simply adopt the old thread's heap at that moment: every object lives on
 * through a chain of threads, and most frees are of memory allocated by another thread that
 * is alive, dying or gone. (xserver's successors are started by the main thread after their
 * predecessor was joined: a different shape.)
 *
 * `chains` chains of workers run at once (default 4), each with its own table and random
 * sequence, GENERATIONS workers per chain; the work, OPS_PER_SCALE replacements per unit of
 * scale, is split evenly over the chains and their generations. A worker joins its
 * predecessor only after its own work, so the two overlap. The last worker of a chain checks
 * and frees the table. The checksum depends on the seed alone.
 *
 * usage: turnover [scale] [chains] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#include <stdbool.h>

#define USAGE "[scale] [chains] [--quick]"

enum {
  SLOTS = 4000,                   /* objects per chain */
  GENERATIONS = 64,               /* workers per chain */
  OPS_PER_SCALE = 16000000,       /* replacements per unit of scale, all chains together */
  MAX_CHAINS = 64,
  MIN_SIZE = 8,
  MAX_SIZE = 1000,
};

typedef struct chain {
  bench_slot slot[SLOTS];
  bench_rng rng;
  uint64_t serial, sum, ops_per_worker;
  int generation;
  pthread_t predecessor;          /* the worker that created the running one */
  bool has_predecessor;
  bench_done_queue *done;
  int seat;
} chain_t;

static void replace(chain_t *c, uint64_t where) {
  bench_slot *s = &c->slot[bench_rng_below(&c->rng, SLOTS)];
  bench_slot_retire(s, &c->sum, where);
  bench_slot_fill_size(s, (size_t)bench_rng_range(&c->rng, MIN_SIZE, MAX_SIZE), &c->serial);
}

static void *worker(void *arg) {
  chain_t *c = arg;
  if (c->generation == 0)
    for (int i = 0; i < SLOTS; i++)
      bench_slot_fill_size(&c->slot[i], (size_t)bench_rng_range(&c->rng, MIN_SIZE, MAX_SIZE), &c->serial);
  for (uint64_t op = 0; op < c->ops_per_worker; op++) replace(c, op);
  /* Only now is the predecessor (which created this thread and exited) joined. */
  if (c->has_predecessor && pthread_join(c->predecessor, NULL) != 0) bench_die("pthread_join failed");
  if (++c->generation < GENERATIONS) {
    c->predecessor = pthread_self();
    c->has_predecessor = true;
    pthread_t next;
    if (pthread_create(&next, NULL, worker, c) != 0) bench_die("pthread_create failed");
    return NULL;    /* the successor carries on with the table */
  }
  for (int i = 0; i < SLOTS; i++) bench_slot_retire(&c->slot[i], &c->sum, (uint64_t)i);
  c->has_predecessor = false;
  c->predecessor = pthread_self();   /* the main thread joins the last worker */
  bench_done_post(c->done, c->seat);
  return NULL;
}

int main(int argc, char **argv) {
  const bench_threaded_t run = bench_threaded_args(argc, argv, "turnover", USAGE, 4, MAX_CHAINS, OPS_PER_SCALE);

  bench_done_queue done;
  bench_done_init(&done, run.threads);
  chain_t *c = bench_calloc((size_t)run.threads, sizeof *c);
  for (int i = 0; i < run.threads; i++) {
    bench_rng_seed(&c[i].rng, 0x70e0e5 + (uint64_t)i);
    c[i].ops_per_worker = bench_share(run.work, run.threads, i) / GENERATIONS;
    c[i].done = &done;
    c[i].seat = i;
    pthread_t t;   /* joined by its successor, like every worker but the last */
    if (pthread_create(&t, NULL, worker, &c[i]) != 0) bench_die("pthread_create failed");
  }
  uint64_t sum = 0, total = 0;
  for (int n = 0; n < run.threads; n++) {
    int i = bench_done_wait(&done);
    if (pthread_join(c[i].predecessor, NULL) != 0) bench_die("pthread_join failed");
  }
  for (int i = 0; i < run.threads; i++) {
    sum = bench_fold(sum, c[i].sum);
    total += c[i].ops_per_worker * GENERATIONS;
  }
  free(c);
  printf("turnover: scale=%ld chains=%d generations=%d ops=%llu checksum=%016llx\n", run.scale, run.threads,
         GENERATIONS, (unsigned long long)total, (unsigned long long)sum);
  return 0;
}
