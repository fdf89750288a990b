/* regions_threads.c — regions used from several threads at once, and across fork.
 *
 * Skipped (77) when the preloaded allocator has no region calls (glibc, peers). Sections:
 *   thread_handoff   created in one thread, filled in a second, cleared and destroyed in a third
 *   thread_free      one thread allocates while another free()s objects it is handed: the
 *                    frees are applied and the stats are exact after the join
 *   thread_regions   two threads, each with many regions (nested, freed, cleared) at once
 *   thread_destroy   regions cleared and destroyed by another thread while their creator goes
 *                    on allocating
 *   fork             a child of fork goes on with regions of the main thread and of a thread
 *                    alive at the fork
 * Where the library has it, locus_check_heap runs after the heavier sections.
 */
#define _GNU_SOURCE
#include "regions.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/wait.h>

/* ---- thread_handoff ------------------------------------------------------------------- */

enum { HANDOFF = 5000 };
static locus_region_t *handoff_region;
static void *handoff_obj[HANDOFF];
static pthread_t handoff_cleaner;
static int handoff_cb_ran;

static size_t handoff_size(int i) { return 1 + (size_t)(i * 131) % 3000 + (i % 500 == 0) * 40000; }

static void handoff_cb(void *arg) {
  (void)arg;
  CHECK(pthread_equal(pthread_self(), handoff_cleaner));
  handoff_cb_ran++;
}

static void *handoff_create(void *arg) {
  (void)arg;
  handoff_region = region_new(NULL);
  return NULL;
}
static void *handoff_fill(void *arg) {
  (void)arg;
  for (int i = 0; i < HANDOFF; i++) handoff_obj[i] = ralloc(handoff_region, handoff_size(i), i);
  CHECK(locus_region_on_destroy(handoff_region, handoff_cb, NULL) == 0);
  locus_region_t *child = region_new(handoff_region);
  ralloc(child, 100, 0);
  return NULL;
}
static void *handoff_end(void *arg) {
  (void)arg;
  handoff_cleaner = pthread_self();
  uint64_t bytes = 0, freed = 0;
  for (int i = 0; i < HANDOFF; i++) {
    CHECK_PATTERN(handoff_obj[i], handoff_size(i), i);
    CHECK(locus_region_of(handoff_obj[i]) == handoff_region);
    bytes += malloc_usable_size(handoff_obj[i]);
    if (i % 2 == 0) freed += malloc_usable_size(handoff_obj[i]);
  }
  check_live(handoff_region, HANDOFF, bytes);
  for (int i = 0; i < HANDOFF; i += 2) locus_region_free(handoff_region, handoff_obj[i]);
  check_live(handoff_region, HANDOFF / 2, bytes - freed);
  CHECK_EQ(region_stats(handoff_region).children, 1);
  locus_region_clear(handoff_region);
  CHECK_EQ(handoff_cb_ran, 1);
  check_live(handoff_region, 0, 0);
  CHECK_EQ(region_stats(handoff_region).children, 0);
  locus_region_destroy(handoff_region);
  return NULL;
}

static void t_thread_handoff(void) {
  test_run_thread(handoff_create, NULL);
  test_run_thread(handoff_fill, NULL);
  test_run_thread(handoff_end, NULL);
}

/* ---- thread_free ---------------------------------------------------------------------- */

enum { QCAP = 1024, FREE_OBJECTS = 200000 };
static struct {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  void *slot[QCAP];
  size_t head, tail; /* head - tail objects wait */
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void queue_push(void *p) {
  pthread_mutex_lock(&queue.lock);
  while (queue.head - queue.tail == QCAP) pthread_cond_wait(&queue.changed, &queue.lock);
  queue.slot[queue.head++ % QCAP] = p;
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
}
static void *queue_pop(void) {
  pthread_mutex_lock(&queue.lock);
  while (queue.head == queue.tail) pthread_cond_wait(&queue.changed, &queue.lock);
  void *p = queue.slot[queue.tail++ % QCAP];
  pthread_cond_broadcast(&queue.changed);
  pthread_mutex_unlock(&queue.lock);
  return p;
}

/* Each handed object starts with its size and seed, the rest is its pattern. */
typedef struct handed { size_t n; uint64_t seed; } handed_t;

static void *freer(void *arg) {
  size_t *freed = arg;
  for (void *p; (p = queue_pop()) != NULL;) {
    handed_t h;
    memcpy(&h, p, sizeof h);
    CHECK_PATTERN((char *)p + sizeof h, h.n - sizeof h, h.seed);
    free(p);
    ++*freed;
  }
  return NULL;
}

static void t_thread_free(void) {
  locus_region_t *r = region_new(NULL);
  static void *kept[FREE_OBJECTS];
  static size_t kept_n[FREE_OBJECTS];
  size_t nkept = 0, handed_out = 0, freed = 0;
  uint64_t kept_bytes = 0;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, freer, &freed) == 0);
  test_rng_t g = {5};
  for (size_t i = 0; i < FREE_OBJECTS; i++) {
    size_t n = sizeof(handed_t) + (size_t)rng_below(&g, 600);
    char *p = locus_region_malloc(r, n);
    CHECK(p != NULL);
    CHECK_ALIGNED(p, 16);
    if (i % 3 == 0) {
      pattern_fill(p, n, i);
      kept[nkept] = p;
      kept_n[nkept++] = n;
      kept_bytes += region_size(n);
    } else {
      handed_t h = {n, i};
      memcpy(p, &h, sizeof h);
      pattern_fill(p + sizeof h, n - sizeof h, i);
      queue_push(p);
      handed_out++;
    }
  }
  queue_push(NULL);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK_EQ(freed, handed_out);
  locus_region_stats_t s = region_stats(r);
  test_note("thread_free: %zu kept, %zu freed by the other thread; %llu KiB held\n", nkept,
            freed, (unsigned long long)s.bytes_held >> 10);
  CHECK_EQ(s.objects_live, nkept);
  CHECK_EQ(s.bytes_live, kept_bytes);
  CHECK_EQ(s.frees, handed_out);
  CHECK_EQ(s.bump_mode, 0);
  for (size_t i = 0; i < nkept; i++) CHECK_PATTERN(kept[i], kept_n[i], 3 * i);
  locus_region_destroy(r);
  check_heap();
}

/* ---- thread_regions ------------------------------------------------------------------- */

enum { LIVE_REGIONS = 12, REGION_ROUNDS = 300, ROUND_OBJECTS = 200 };

typedef struct slot {
  locus_region_t *r;
  void *obj[ROUND_OBJECTS];
  size_t n[ROUND_OBJECTS];
  uint64_t seed[ROUND_OBJECTS];
} slot_t;

static void slot_verify(const slot_t *s) {
  uint64_t objects = 0, bytes = 0;
  for (int i = 0; i < ROUND_OBJECTS; i++) {
    if (!s->obj[i]) continue;
    CHECK_PATTERN(s->obj[i], s->n[i], s->seed[i]);
    CHECK(locus_region_of(s->obj[i]) == s->r);
    objects++;
    bytes += malloc_usable_size(s->obj[i]);
  }
  check_live(s->r, objects, bytes);
}

static void *region_worker(void *arg) {
  uint64_t id = (uintptr_t)arg;
  test_rng_t g = {id};
  static __thread slot_t slots[LIVE_REGIONS];
  for (int round = 0; round < REGION_ROUNDS; round++) {
    slot_t *s = &slots[rng_below(&g, LIVE_REGIONS)];
    if (s->r) {
      slot_verify(s);
      if (rng_below(&g, 2)) locus_region_destroy(s->r), s->r = NULL;
      else locus_region_clear(s->r);
      memset(s->obj, 0, sizeof s->obj);
    }
    if (!s->r) {
      /* sometimes the child of another live region: destroyed with it */
      slot_t *parent = &slots[rng_below(&g, LIVE_REGIONS)];
      s->r = region_new(NULL);
      if (parent != s && parent->r && rng_below(&g, 4) == 0) {
        locus_region_t *child = region_new(parent->r);
        ralloc(child, 1000, 0);
      }
    }
    for (int i = 0; i < ROUND_OBJECTS; i++) {
      s->n[i] = rng_below(&g, 50) ? (size_t)rng_below(&g, 3000) : 20000 + rng_below(&g, 50000);
      s->seed[i] = rng_next(&g);
      s->obj[i] = ralloc(s->r, s->n[i], s->seed[i]);
      if (rng_below(&g, 3) == 0) {
        int j = (int)rng_below(&g, (uint64_t)i + 1);
        if (rng_below(&g, 2)) locus_region_free(s->r, s->obj[j]);
        else free(s->obj[j]);
        s->obj[j] = NULL;
      }
      free(malloc(1 + rng_below(&g, 500)));
    }
    slot_verify(s);
  }
  for (int k = 0; k < LIVE_REGIONS; k++)
    if (slots[k].r) slot_verify(&slots[k]), locus_region_destroy(slots[k].r);
  check_heap();
  return NULL;
}

static void t_thread_regions(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    CHECK(pthread_create(&t[i], NULL, region_worker, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(t[i], NULL) == 0);
}

/* ---- thread_destroy: regions destroyed by another thread while their creator works ---- */

/* The creator fills regions and hands them over through the queue, going on with malloc and
 * free (and new regions) while the other thread checks, clears and destroys what it gets:
 * chunks go back to the creator's page manager from the other thread. */
enum { HANDED_REGIONS = 400, HANDED_OBJECTS = 100 };

static size_t handed_size(int i) { return i % 37 == 0 ? 20000 + (size_t)i * 100 : 1 + (size_t)i * 29; }

static void *region_destroyer(void *arg) {
  (void)arg;
  for (locus_region_t *r; (r = queue_pop()) != NULL;) {
    void **obj = locus_region_malloc(r, HANDED_OBJECTS * sizeof *obj);
    CHECK(obj != NULL);
    locus_region_stats_t s = region_stats(r);
    CHECK_EQ(s.objects_live, HANDED_OBJECTS + 1);
    locus_region_clear(r);
    ralloc(r, 30000, 0);
    locus_region_destroy(r);
  }
  check_heap();
  return NULL;
}

static void t_thread_destroy(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, region_destroyer, NULL) == 0);
  test_rng_t g = {3};
  void *plain[64] = {0};
  for (int k = 0; k < HANDED_REGIONS; k++) {
    locus_region_t *r = region_new(NULL);
    for (int i = 0; i < HANDED_OBJECTS; i++) {
      ralloc(r, handed_size(i), (uint64_t)i);
      size_t slot = (size_t)rng_below(&g, 64);
      free(plain[slot]);
      plain[slot] = malloc(1 + (size_t)rng_below(&g, rng_below(&g, 8) ? 2000 : 300000));
      CHECK(plain[slot] != NULL);
    }
    queue_push(r);
  }
  queue_push(NULL);
  CHECK(pthread_join(t, NULL) == 0);
  for (int i = 0; i < 64; i++) free(plain[i]);
  check_heap();
}

/* ---- fork: regions go on in a child ---------------------------------------------------- */

/* A region of the main thread and one of a thread that is alive at the fork (its heap is not
 * the child's): the child allocates in both (new chunks, big objects), frees, clears and
 * destroys them. */
static pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fork_cond = PTHREAD_COND_INITIALIZER;
static int fork_stage; /* 1: the helper's region is ready; 2: the helper may exit */
static locus_region_t *fork_region;

static void *fork_helper(void *arg) {
  (void)arg;
  locus_region_t *r = region_new(NULL);
  for (int i = 0; i < 500; i++) ralloc(r, 1 + (size_t)i * 13, (uint64_t)i);
  ralloc(r, 40000, 0);
  pthread_mutex_lock(&fork_lock);
  fork_region = r;
  fork_stage = 1;
  pthread_cond_broadcast(&fork_cond);
  while (fork_stage < 2) pthread_cond_wait(&fork_cond, &fork_lock);
  pthread_mutex_unlock(&fork_lock);
  return NULL;
}

static void fork_use(locus_region_t *r) {
  void *p[2000];
  for (int i = 0; i < 2000; i++) p[i] = ralloc(r, 1 + (size_t)(i * 97) % 3000 + (i % 100 == 0) * 50000, (uint64_t)i);
  for (int i = 0; i < 2000; i += 2) locus_region_free(r, p[i]);
  for (int i = 1; i < 2000; i += 2) CHECK_PATTERN(p[i], 1 + (size_t)(i * 97) % 3000 + (i % 100 == 0) * 50000, (uint64_t)i);
  CHECK_EQ(region_stats(r).objects_live >= 1000, 1);
  locus_region_clear(r);
  check_live(r, 0, 0);
  ralloc(r, 5000, 0);
}

static void t_fork(void) {
  locus_region_t *mine = region_new(NULL);
  for (int i = 0; i < 500; i++) ralloc(mine, 1 + (size_t)i * 7, (uint64_t)i);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fork_helper, NULL) == 0);
  pthread_mutex_lock(&fork_lock);
  while (fork_stage < 1) pthread_cond_wait(&fork_cond, &fork_lock);
  pthread_mutex_unlock(&fork_lock);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20); /* a hang ends the child (SIGALRM) */
    fork_use(mine);
    fork_use(fork_region);
    locus_region_destroy(fork_region);
    locus_region_destroy(mine);
    check_heap();
    _exit(0);
  }
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child ended with status %#x", st);
  pthread_mutex_lock(&fork_lock);
  fork_stage = 2;
  pthread_cond_broadcast(&fork_cond);
  pthread_mutex_unlock(&fork_lock);
  CHECK(pthread_join(t, NULL) == 0);
  fork_use(fork_region);
  locus_region_destroy(fork_region);
  locus_region_destroy(mine);
}
int main(int argc, char **argv) {
  int skip = regions_require("regions_threads", &region_lib);
  if (skip) return skip;
  static const test_section_t sections[] = {
      {"thread_handoff", t_thread_handoff},
      {"thread_free", t_thread_free},
      {"thread_regions", t_thread_regions},
      {"thread_destroy", t_thread_destroy},
      {"fork", t_fork},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
