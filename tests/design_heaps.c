/* design_heaps.c — tests that fail if a named mechanism of the core's thread heaps breaks.
 * Run with LD_PRELOAD of any Locus library (every design shares these blocks). Sections:
 *   adopt_warm      a thread that starts after another exited adopts its heap with the free
 *                   pages still resident: it refaults few of them (discarding them at exit
 *                   made thread churn refault every page; not under the immediate policy)
 *   abandoned_free  objects of an exited thread freed by another thread are freed at once
 *                   (the lock-free handoff to the abandoned heap), not left on a list
 *   sweep           an abandoned heap's idle free pages go back after the decay time, as
 *                   soon as any thread frees pages (the sweep), without a purge call
 *   huge_shared     a big object freed by one thread is reused by the next (one page
 *                   manager for huge runs, shared by all threads)
 *   locks           concurrent thread churn with cross-thread frees: the shared locks are
 *                   counted, and contention stays a small fraction of acquisitions
 *   fork_adopt      threads that come and go while another thread forks again and again
 *                   still adopt the heaps of exited ones (a fork holds every heap's lock
 *                   while it runs: a thread that then made a new heap instead grew the
 *                   registry by a heap a thread, and every fork got slower)
 */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

static locus_api_t L;
static size_t page;

#define MEDIUM 400                       /* a page-block class on every design */
enum { WARM_OBJECTS = 40000 };           /* 16 MB of medium objects */

static bool policy_is(const char *name) {
  const char *d = getenv("LOCUS_DISCARD");
  return d ? !strcmp(d, name) : !strcmp(name, "delayed");
}

static long thread_minflt(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_THREAD, &ru) == 0);
  return ru.ru_minflt;
}

static void *fill_and_free(void *arg) {
  (void)arg;
  char **v = malloc(WARM_OBJECTS * sizeof *v);
  for (int i = 0; i < WARM_OBJECTS; i++) { v[i] = malloc(MEDIUM); memset(v[i], 0x33, MEDIUM); }
  for (int i = 0; i < WARM_OBJECTS; i++) free(v[i]);
  free(v);
  return NULL;
}

static void *fill_and_count(void *arg) {
  long before = thread_minflt();
  fill_and_free(NULL);
  *(long *)arg = thread_minflt() - before;
  return NULL;
}

static void t_adopt_warm(void) {
  if (!policy_is("delayed")) SECTION_SKIP("pages are kept only under the delayed policy");
  long cold = 0, warm = 0;
  test_run_thread(fill_and_count, &cold);   /* a new heap: every page faults in */
  test_run_thread(fill_and_count, &warm);   /* adopts it right away (it may touch pages the first
                                          left untouched at the end of its last segment) */
  long pages = (long)((size_t)WARM_OBJECTS * MEDIUM / page);
  test_note("adopt_warm: first thread %ld faults, second %ld (%ld pages of objects)\n", cold,
            warm, pages);
  CHECK(cold > pages / 2);
  CHECKF(warm < pages / 2, "the adopting thread refaulted %ld of %ld pages", warm, pages);
}

enum { HANDOFF = 20000 };
static void *handed[HANDOFF];

static void t_abandoned_free(void) {
  locus_stats_t a, b;
  test_allocate_in_thread(handed, HANDOFF, MEDIUM, 0x44);
  CHECK(L.stats_get(&a) == 0);
  CHECK(a.heaps_abandoned >= 1);
  for (int i = 0; i < HANDOFF; i++) free(handed[i]);
  CHECK(L.stats_get(&b) == 0);
  test_note("abandoned_free: bytes allocated %llu -> %llu\n", (unsigned long long)a.bytes_allocated,
            (unsigned long long)b.bytes_allocated);
  CHECKF(b.bytes_allocated + (uint64_t)HANDOFF * MEDIUM <= a.bytes_allocated,
         "objects freed into an exited thread's heap were not freed");
}

static void t_sweep(void) {
  if (!policy_is("delayed")) SECTION_SKIP("the sweep belongs to the delayed policy");
  /* the trigger below is a free of a huge page run; the secure build maps big objects */
  if (!strcmp(L.variant(), "secure")) SECTION_SKIP("secure: big objects are own mappings");
  test_run_thread(fill_and_free, NULL);
  locus_stats_t a, b;
  CHECK(L.stats_get(&a) == 0);
  struct timespec nap = { 0, 300 * 1000 * 1000 };     /* beyond LOCUS_DECAY_MS (100) */
  nanosleep(&nap, NULL);
  /* Any free of pages by a live thread applies the policy, which sweeps abandoned heaps. */
  for (int i = 0; i < 4; i++) free(malloc(256 << 10));
  CHECK(L.stats_get(&b) == 0);
  test_note("sweep: committed %llu KiB -> %llu KiB\n", (unsigned long long)a.bytes_committed >> 10,
            (unsigned long long)b.bytes_committed >> 10);
  CHECKF(b.bytes_committed + ((uint64_t)8 << 20) < a.bytes_committed,
         "an exited thread's idle pages were not given back");
}

/* huge_shared: a big object (a page run) freed by one thread is reused by another: huge runs
 * come from one page manager all threads share. */
static void *alloc_free_big(void *arg) {
  void *p = malloc(200 << 10);
  memset(p, 1, 200 << 10);
  *(void **)arg = p;
  free(p);
  return NULL;
}
static void t_huge_shared(void) {
  if (!strcmp(L.variant(), "secure")) SECTION_SKIP("secure: big objects are unmapped on free");
  void *first = NULL, *second = NULL;
  alloc_free_big(&first);              /* this thread's heap stays owned: no adoption */
  test_run_thread(alloc_free_big, &second);
  test_note("huge_shared: %p then %p\n", first, second);
  CHECKF(first == second, "a big object freed by one thread was not reused by the next");
}

/* Rounds of threads that swap objects through a shared array and exit. */
enum { SLOTS = 4096, CHURN_THREADS = 8, CHURN_ROUNDS = 12, CHURN_OPS = 20000 };
static _Atomic(char *) shared[SLOTS];

static void *churn(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < CHURN_OPS; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    size_t n = (x % 97 == 0) ? 40000 + x % 100000 : 8 + x % 300;
    char *p = malloc(n);
    p[0] = (char)n;
    p[n - 1] = 1;
    free(atomic_exchange(&shared[(x >> 20) % SLOTS], p));
  }
  return NULL;
}

static void t_locks(void) {
  locus_stats_t a, b;
  CHECK(L.stats_get(&a) == 0);
  for (int r = 0; r < CHURN_ROUNDS; r++) {
    pthread_t t[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++)
      CHECK(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(r * CHURN_THREADS + i + 1)) == 0);
    for (int i = 0; i < CHURN_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  }
  for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&shared[i], NULL));
  CHECK(L.stats_get(&b) == 0);
  uint64_t got = b.lock_acquisitions - a.lock_acquisitions, waited = b.lock_contended - a.lock_contended;
  test_note("locks: %llu acquisitions, %llu contended, %llu heaps for %d threads\n",
            (unsigned long long)got, (unsigned long long)waited, (unsigned long long)b.heaps,
            CHURN_ROUNDS * CHURN_THREADS);
  CHECK(got > 0);
  CHECKF(waited * 10 <= got, "%llu of %llu lock acquisitions waited", (unsigned long long)waited,
         (unsigned long long)got);
  CHECKF(b.heaps <= a.heaps + CHURN_THREADS + 2, "heaps of exited threads were not adopted");
}

/* Threads of four that allocate a little and exit, round after round, until told to stop. */
static atomic_bool fork_done;

static void *short_lived(void *arg) {
  void *p[32];
  for (int i = 0; i < 32; i++) p[i] = malloc(16 + 24 * (size_t)i);
  for (int i = 0; i < 32; i++) free(p[i]);
  return arg;
}

static void *spawner(void *arg) {
  while (!atomic_load(&fork_done)) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, short_lived, NULL) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);
  }
  return arg;
}

enum { FORKS = 300 };

static void t_fork_adopt(void) {
  locus_stats_t a, b;
  CHECK(L.stats_get(&a) == 0);
  pthread_t s[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&s[i], NULL, spawner, NULL) == 0);
  for (int i = 0; i < FORKS; i++) {
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
      free(opaque_ptr(malloc(100)));
      _exit(0);
    }
    int status;
    CHECK(waitpid(c, &status, 0) == c && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  atomic_store(&fork_done, true);
  for (int i = 0; i < 2; i++) CHECK(pthread_join(s[i], NULL) == 0);
  CHECK(L.stats_get(&b) == 0);
  test_note("fork_adopt: %llu heaps after %d forks among threads that come and go\n",
            (unsigned long long)(b.heaps - a.heaps), FORKS);
  /* (at most 10 threads live at once; before the fix, ~400 heaps) */
  CHECKF(b.heaps <= a.heaps + 32, "%llu heaps made for threads that could have adopted one",
         (unsigned long long)(b.heaps - a.heaps));
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  if (!locus_api_require(&L)) {
    test_note("design_heaps: not a Locus library, skipped\n");
    return TEST_SKIP;
  }
  static const struct test_section sections[] = {
    { "adopt_warm", t_adopt_warm },
    { "abandoned_free", t_abandoned_free },
    { "sweep", t_sweep },
    { "huge_shared", t_huge_shared },
    { "locks", t_locks },
    { "fork_adopt", t_fork_adopt },
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
