/* threads2 — multi-thread churn, optionally with cross-thread frees.
 *
 * Models a multi-threaded server whose threads each keep a private working set of small
 * objects (per-request state) and churn it. Every thread does the same fixed amount of work,
 * so with perfect scaling the run time is the same for 1 thread and for as many threads as
 * there are cores; the lab times `threads2 S 1` and `threads2 S 2` and reports
 * scaling = 2 * time(1 thread) / time(2 threads) (2.0 is perfect on two cores). An allocator
 * with a global lock or false sharing between threads' objects loses here.
 *
 * --xfree adds a producer/consumer component (what thread-caching allocators find hardest):
 * every XFREE_EVERY operations a thread also allocates an object and sends it, in batches
 * through a mutex-protected queue, to the next thread in a ring, which checks and frees it.
 * Memory is thus freed by a thread that did not allocate it. With one thread the thread
 * sends to itself, so the work is the same and only the cross-thread part disappears.
 *
 * --split keeps the total work that of `threads2 S 2` whatever the thread count: each of N
 * threads does 2/N of a thread's usual operations (the lab's threads8 and threads16 compare
 * many threads against two doing the same work). --quick does 1/20 of the work.
 *
 * usage: threads2 [scale] [threads] [--xfree] [--split] [--quick]
 *        per-thread work grows linearly with scale
 */
#include "bench_util.h"

#include <pthread.h>
#include <stdatomic.h>

enum {
  SLOTS = 25000,                  /* live objects per thread */
  OPS_PER_SCALE = 20000000,       /* replacements per thread per unit of scale */
  MAX_THREADS = 64,
  SPLIT_THREADS = 2,              /* --split: total work that of this many threads */
  XFREE_EVERY = 4,                /* one object sent to the next thread per this many ops */
  BATCH = 64,                     /* objects per queue message */
  MAX_PENDING = 256,              /* batches a queue may hold before its producer waits */
};

typedef struct batch {
  struct batch *next;
  int count;
  bench_slot item[BATCH];
} batch;

/* A thread's inbox. Invariant: pending == length of the list head..tail, under lock.
 * `changed` is broadcast (under lock) whenever the list grows or is emptied, and when a
 * producer finishes, so a waiter re-checks its condition without a lost wakeup. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  batch *head, *tail;
  int pending;
  char pad[64];                   /* keep inboxes on separate cache lines */
} inbox;

typedef struct {
  int id;
  uint64_t ops;
  uint64_t sum;                   /* folded over the private churn, in program order */
  uint64_t received_sum;          /* sum of tags freed from the inbox (order-independent) */
  uint64_t received;
  pthread_t thread;
} worker;

static int nthreads = 2;
static int xfree_mode;
static inbox inboxes[MAX_THREADS];
static _Atomic int producers_done;

/* Checks and frees everything queued for thread w. Returns the number of objects freed. */
static uint64_t drain(worker *w) {
  inbox *in = &inboxes[w->id];
  pthread_mutex_lock(&in->lock);
  batch *b = in->head;
  in->head = in->tail = NULL;
  if (in->pending != 0) {
    in->pending = 0;
    pthread_cond_broadcast(&in->changed);         /* a producer may wait for room */
  }
  pthread_mutex_unlock(&in->lock);
  uint64_t n = 0;
  while (b != NULL) {
    batch *next = b->next;
    for (int i = 0; i < b->count; i++) {
      bench_slot *s = &b->item[i];
      bench_check(s->p, s->size, s->tag, "cross-thread object", w->received + n);
      w->received_sum += s->tag;
      free(s->p);
      n++;
    }
    free(b);
    b = next;
  }
  w->received += n;
  return n;
}

/* Queues a full batch for the next thread. While that queue holds MAX_PENDING batches the
 * producer blocks, so memory in flight stays bounded whichever thread runs ahead. It drains
 * its own inbox first: in a ring every thread is some thread's consumer, and a thread that
 * blocks with a full inbox could block the whole ring. */
static void send(worker *w, batch *b) {
  inbox *to = &inboxes[(w->id + 1) % nthreads];
  b->next = NULL;
  pthread_mutex_lock(&to->lock);
  while (to->pending >= MAX_PENDING) {
    pthread_mutex_unlock(&to->lock);
    drain(w);
    pthread_mutex_lock(&to->lock);
    if (to->pending >= MAX_PENDING && to != &inboxes[w->id])
      pthread_cond_wait(&to->changed, &to->lock);
  }
  if (to->tail != NULL) to->tail->next = b; else to->head = b;
  to->tail = b;
  to->pending++;
  pthread_cond_broadcast(&to->changed);
  pthread_mutex_unlock(&to->lock);
}

/* Called once by each thread when it has sent its last batch; wakes every waiting consumer. */
static void producer_finished(void) {
  atomic_fetch_add_explicit(&producers_done, 1, memory_order_release);
  for (int i = 0; i < nthreads; i++) {
    pthread_mutex_lock(&inboxes[i].lock);
    pthread_cond_broadcast(&inboxes[i].changed);
    pthread_mutex_unlock(&inboxes[i].lock);
  }
}

/* After its own work: free what arrives until every producer has finished and the inbox is
 * empty. Every send happens before its sender's producer_finished, so once all have counted
 * in, one more drain empties this inbox for good. */
static void drain_until_done(worker *w) {
  inbox *in = &inboxes[w->id];
  for (;;) {
    drain(w);
    pthread_mutex_lock(&in->lock);
    while (in->pending == 0 &&
           atomic_load_explicit(&producers_done, memory_order_acquire) < nthreads)
      pthread_cond_wait(&in->changed, &in->lock);
    int all_done = atomic_load_explicit(&producers_done, memory_order_acquire) == nthreads;
    pthread_mutex_unlock(&in->lock);
    if (all_done) break;
  }
  drain(w);
}

static void *run(void *arg) {
  worker *w = arg;
  bench_rng rng;
  bench_rng_seed(&rng, 0x7412 + (uint64_t)w->id * 1000003);
  bench_slot *slots = bench_malloc(sizeof(bench_slot) * SLOTS);
  uint64_t serial = (uint64_t)w->id << 48, sum = 0;

  for (uint32_t i = 0; i < SLOTS; i++) bench_slot_fill(&slots[i], &rng, &serial);

  batch *out = NULL;
  for (uint64_t k = 0; k < w->ops; k++) {
    bench_slot_replace(&slots[bench_rng_below(&rng, SLOTS)], &rng, &serial, &sum, k);

    if (xfree_mode && k % XFREE_EVERY == 0) {
      if (out == NULL) {
        out = bench_malloc(sizeof(batch));
        out->count = 0;
      }
      bench_slot *x = &out->item[out->count++];
      x->size = (uint32_t)bench_small_size(&rng);
      x->p = bench_malloc(x->size);
      x->tag = bench_mix(++serial);
      bench_fill(x->p, x->size, x->tag);
      if (out->count == BATCH) {
        send(w, out);
        out = NULL;
        drain(w);
      }
    }
  }
  if (out != NULL) send(w, out);

  if (xfree_mode) {
    producer_finished();
    drain_until_done(w);
  }

  for (uint32_t i = 0; i < SLOTS; i++) {
    bench_check(slots[i].p, slots[i].size, slots[i].tag, "object", i);
    sum = bench_fold(sum, slots[i].tag);
    free(slots[i].p);
  }
  free(slots);
  w->sum = sum;
  return NULL;
}

#define USAGE "[scale] [threads] [--xfree] [--split] [--quick]"

int main(int argc, char **argv) {
  bench_name = "threads2";
  xfree_mode = bench_take_flag(&argc, argv, "--xfree");
  int split = bench_take_flag(&argc, argv, "--split");
  int quick;
  long scale = bench_args(&argc, argv, 2, USAGE, &quick);
  if (argc > 2) nthreads = (int)bench_int_arg(argv[2], 1, MAX_THREADS, "thread count", USAGE);
  /* --split: the total work of `threads2 S 2`, divided evenly among the threads */
  uint64_t ops_per_thread = bench_work(scale, OPS_PER_SCALE, quick);
  if (split) ops_per_thread = ops_per_thread * SPLIT_THREADS / (uint64_t)nthreads;

  worker *workers = bench_malloc(sizeof(worker) * (size_t)nthreads);
  for (int i = 0; i < nthreads; i++) {
    pthread_mutex_init(&inboxes[i].lock, NULL);
    pthread_cond_init(&inboxes[i].changed, NULL);
    workers[i] = (worker){.id = i, .ops = ops_per_thread};
  }
  for (int i = 0; i < nthreads; i++)
    if (pthread_create(&workers[i].thread, NULL, run, &workers[i]) != 0)
      bench_die("pthread_create failed");
  uint64_t sum = 0, received = 0, sent_expected = 0;
  for (int i = 0; i < nthreads; i++) {
    pthread_join(workers[i].thread, NULL);
    sum = bench_fold(sum, workers[i].sum) + workers[i].received_sum;
    received += workers[i].received;
    if (xfree_mode) sent_expected += (workers[i].ops + XFREE_EVERY - 1) / XFREE_EVERY;
  }
  if (received != sent_expected)
    bench_die("cross-thread objects lost: freed %llu of %llu", (unsigned long long)received,
              (unsigned long long)sent_expected);
  free(workers);
  printf("threads2: scale=%ld threads=%d xfree=%d ops_per_thread=%llu cross_frees=%llu "
         "checksum=%016llx\n", scale, nthreads, xfree_mode,
         (unsigned long long)ops_per_thread, (unsigned long long)received,
         (unsigned long long)sum);
  return 0;
}
