/* xserver — server threads that free what the threads before them allocated.
 *
 * Models a server with a fixed number of worker seats (a pool whose threads are retired and
 * replaced, or a thread per connection on a long-lived connection): each seat owns a table
 * of small objects (a session's state), and the thread serving the seat is replaced from
 * time to time while the table lives on. A new thread frees objects that its predecessor —
 * an exited thread — allocated, and allocates the ones its successor will free. What it
 * rewards: fast frees of memory from other (dead) threads' heaps, reclaiming and reusing an
 * exited thread's heap or caches, and cheap thread start and exit.
 *
 * `seats` workers run at once (default 4). Each seat has a table of SLOTS small objects
 * (8..512 B, uniform), filled by its first worker. A worker does its quota of operations —
 * pick a random slot of its seat, check and free the object there, allocate a new one of a
 * random size and stamp it — then exits, and the main thread starts a new worker on the same
 * seat, which carries on with the seat's table and random sequence. The first wave's quotas
 * are spread (quota/seats .. quota) so that seats change hands at different times. The total
 * work, OPS_PER_SCALE operations per unit of scale, is divided evenly among the seats.
 *
 * Seats are independent, so each seat's sequence of sizes, tags and checks — and the
 * checksum — depends on the seed alone, whichever threads run when.
 *
 * usage: xserver [scale] [seats] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [seats] [--quick]"

enum {
  SLOTS = 10000,                  /* objects per seat */
  OPS_PER_SCALE = 32000000,       /* operations per unit of scale, all seats together */
  QUOTA = 50000,                  /* operations of one worker */
  MIN_SIZE = 8,
  MAX_SIZE = 512,
  MAX_SEATS = 256,
};

/* A seat: what outlives its workers. Only the seat's current worker touches it, and the
 * main thread between workers (ordered by pthread_create and pthread_join). */
typedef struct {
  pthread_t thread;
  int id;
  bench_slot *slot;               /* NULL until its first worker fills it */
  bench_rng rng;
  uint64_t serial, sum;
  uint64_t left;                  /* operations the seat still has to do */
  uint64_t quota;                 /* operations of the current worker */
  uint64_t workers;
} seat;

static bench_done_queue done;

static void *work(void *arg) {
  seat *s = arg;
  if (s->slot == NULL) {
    s->slot = bench_malloc(sizeof(bench_slot) * SLOTS);
    for (uint32_t i = 0; i < SLOTS; i++)
      bench_slot_fill_size(&s->slot[i], bench_rng_range(&s->rng, MIN_SIZE, MAX_SIZE),
                           &s->serial);
  }
  for (uint64_t k = 0; k < s->quota; k++) {
    bench_slot *o = &s->slot[bench_rng_below(&s->rng, SLOTS)];
    bench_slot_retire(o, &s->sum, s->serial);
    bench_slot_fill_size(o, bench_rng_range(&s->rng, MIN_SIZE, MAX_SIZE), &s->serial);
  }
  bench_done_post(&done, s->id);
  return NULL;
}

/* Starts the seat's next worker, with a quota of at most q operations. */
static void start(seat *s, uint64_t q) {
  s->quota = q < s->left ? q : s->left;
  s->left -= s->quota;
  s->workers++;
  bench_thread_start(&s->thread, work, s);
}

int main(int argc, char **argv) {
  bench_name = "xserver";
  int quick;
  long scale = bench_args(&argc, argv, 2, USAGE, &quick);
  int nseats = 4;
  if (argc > 2) nseats = (int)bench_int_arg(argv[2], 1, MAX_SEATS, "seat count", USAGE);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);

  seat *seats = bench_malloc(sizeof(seat) * (size_t)nseats);
  bench_done_init(&done, nseats);
  for (int i = 0; i < nseats; i++) {
    seats[i] = (seat){.id = i, .serial = (uint64_t)i << 48, .left = ops / (uint64_t)nseats};
    bench_rng_seed(&seats[i].rng, 0x5e4e + (uint64_t)i * 7919);
    start(&seats[i], bench_first_quota(i, nseats, QUOTA));
  }
  for (int busy = nseats; busy > 0;) {
    seat *s = &seats[bench_done_wait(&done)];
    bench_thread_join(s->thread);
    if (s->left > 0)
      start(s, QUOTA);
    else
      busy--;
  }

  uint64_t sum = 0, workers = 0;
  for (int i = 0; i < nseats; i++) {
    seat *s = &seats[i];
    for (uint32_t j = 0; j < SLOTS; j++) bench_slot_retire(&s->slot[j], &s->sum, j);
    free(s->slot);
    sum = bench_fold(sum, s->sum);
    workers += s->workers;
  }
  free(seats);
  printf("xserver: scale=%ld seats=%d ops=%llu workers=%llu checksum=%016llx\n", scale, nseats,
         (unsigned long long)(ops / (uint64_t)nseats * (uint64_t)nseats),
         (unsigned long long)workers, (unsigned long long)sum);
  return 0;
}
