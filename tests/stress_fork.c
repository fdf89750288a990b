/* stress_fork.c — fork in a threaded program leaves a usable heap and never hangs.
 *
 * Three parts (SPEC §1, "fork"):
 *   alloc    fork 200 times while two threads allocate in a loop; each child allocates and
 *            frees a lot (sometimes from a new thread of its own) and exits 0.
 *   stdio    fork 100 times while two threads write with fprintf, call fflush(NULL) and read
 *            back with getline (allocator and stdio locks taken in both orders); each child
 *            calls fflush(NULL) and malloc.
 *   signal   fork from a SIGUSR1 handler (sent by a helper thread with pthread_kill, 100 times)
 *            while two other threads allocate; each child calls malloc/free and _exit(0).
 *            jemalloc and tcmalloc are known to hang here.
 * A child that does not finish within 10 s is a hang; an alarm per part is the watchdog for
 * the parent itself (a parent stuck in fork). Either kills every child and fails.
 * A fourth part, signal_any, is run only when named: there the signal interrupts the
 * allocating threads themselves (glibc and jemalloc deadlock; see part_signal_any).
 *
 *   stress_fork [part...]   default: alloc, stdio, signal
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MAX_CHILDREN 1024
#define WATCHDOG_S 45
#define CHILD_TIMEOUT_S 10.0

static volatile sig_atomic_t child_pids[MAX_CHILDREN]; /* children not yet reaped */
static atomic_int nchildren;
static const char *volatile current_part = "?";
static atomic_int stop_threads;
static int usr1_in_workers; /* part "signal_any": the allocating threads take SIGUSR1 */

/* ---- watchdog ----------------------------------------------------------------------------- */

/* Forks in progress in this process: lets the watchdog say whether the parent itself is stuck
 * inside fork() (its atfork handlers waiting for a lock) or waiting for a child. */
static atomic_int forks_in_progress;

static pid_t traced_fork(void) {
  atomic_fetch_add(&forks_in_progress, 1);
  pid_t pid = fork();
  if (pid != 0) atomic_fetch_sub(&forks_in_progress, 1);
  return pid;
}

static void kill_children(void) {
  int n = atomic_load(&nchildren);
  for (int i = 0; i < n && i < MAX_CHILDREN; i++)
    if (child_pids[i] > 0) kill((pid_t)child_pids[i], SIGKILL);
}

static void watchdog(int sig) {
  (void)sig;
  const char *part = current_part;
  char msg[200];
  int n = snprintf(msg, sizeof msg,
                   "FAIL stress_fork: part '%s' hung for %d s (%s); killing children\n", part,
                   WATCHDOG_S, atomic_load(&forks_in_progress) ? "the parent is stuck in fork()"
                                                              : "no fork in progress");
  if (n > 0 && write(2, msg, (size_t)n) < 0) {}
  kill_children();
  _exit(1);
}

static int record_child(pid_t pid) {
  int i = atomic_fetch_add(&nchildren, 1);
  if (i < MAX_CHILDREN) child_pids[i] = pid;
  return i;
}

/* Waits for child i; fails the test if it hangs or does not exit with status 0. */
static void reap(int i) {
  pid_t pid = (pid_t)child_pids[i];
  if (pid <= 0) return;
  double deadline = test_now() + CHILD_TIMEOUT_S;
  useconds_t pause = 50;
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    /* part signal_any: the main loop may have reaped (and checked) it before it was recorded */
    if (w < 0 && errno == ECHILD) {
      child_pids[i] = 0;
      return;
    }
    if (w < 0 && errno != EINTR) CHECKF(0, "waitpid(%d): %s", (int)pid, strerror(errno));
    if (test_now() > deadline) {
      kill_children();
      CHECKF(0, "part '%s': child %d hung (not finished after %.0f s)", current_part, (int)pid,
             CHILD_TIMEOUT_S);
    }
    usleep(pause);
    if (pause < 1000) pause *= 2;
  }
  child_pids[i] = 0;
  if (WIFSIGNALED(st))
    CHECKF(0, "part '%s': child %d killed by signal %d (%s)", current_part, (int)pid,
           WTERMSIG(st), strsignal(WTERMSIG(st)));
  CHECKF(WEXITSTATUS(st) == 0, "part '%s': child %d exited with status %d", current_part,
         (int)pid, WEXITSTATUS(st));
}

static void part_begin(const char *name) {
  current_part = name;
  atomic_store(&nchildren, 0);
  atomic_store(&stop_threads, 0);
  alarm(WATCHDOG_S);
}

/* ---- allocating threads ------------------------------------------------------------------- */

static void *allocator_thread(void *arg) {
  test_rng_t r = {(uintptr_t)arg * 7 + 3};
  enum { N = 256 };
  unsigned char *slot[N] = {0};
  size_t size[N] = {0};
  /* SIGUSR1 is for the main thread only (part "signal"), except in part "signal_any" */
  if (!usr1_in_workers) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
  }
  while (!atomic_load_explicit(&stop_threads, memory_order_relaxed)) {
    int i = (int)rng_below(&r, N);
    if (slot[i]) {
      CHECK(slot[i][0] == (unsigned char)size[i] && slot[i][size[i] - 1] == (unsigned char)i);
      if (rng_below(&r, 4) == 0) {
        size_t ns = 2 + rng_below(&r, 70000);
        slot[i] = realloc(slot[i], ns);
        CHECK(slot[i] != NULL);
        size[i] = ns;
        slot[i][0] = (unsigned char)ns;
        slot[i][ns - 1] = (unsigned char)i;
        continue;
      }
      free(slot[i]);
      slot[i] = NULL;
    } else {
      uint64_t c = rng_below(&r, 1000);
      /* at least 2 bytes: the first and last byte carry different marks */
      size[i] = c < 900 ? 2 + rng_below(&r, 512) : c < 995 ? 2 + rng_below(&r, 65536)
                                                   : 2 + rng_below(&r, 2 << 20);
      slot[i] = malloc(size[i]);
      CHECK(slot[i] != NULL);
      slot[i][0] = (unsigned char)size[i];
      slot[i][size[i] - 1] = (unsigned char)i;
    }
  }
  for (int i = 0; i < N; i++) free(slot[i]);
  return NULL;
}

static void start_threads(pthread_t *th, int n, void *(*fn)(void *)) {
  atomic_store(&stop_threads, 0);
  for (int i = 0; i < n; i++)
    CHECK(pthread_create(&th[i], NULL, fn, (void *)(uintptr_t)(i + 1)) == 0);
}

static void stop(pthread_t *th, int n) {
  atomic_store(&stop_threads, 1);
  for (int i = 0; i < n; i++) CHECK(pthread_join(th[i], NULL) == 0);
}

/* ---- what children do ---------------------------------------------------------------------- */

/* Allocation work in a child: every category, content checked. Returns normally or exits 1. */
static void child_work(uint64_t seed, int ops) {
  test_rng_t r = {seed};
  enum { N = 64 };
  void *p[N] = {0};
  size_t sz[N] = {0};
  for (int k = 0; k < ops; k++) {
    int i = (int)rng_below(&r, N);
    if (p[i]) {
      CHECK_PATTERN(p[i], sz[i], (uint64_t)i + seed);
      free(p[i]);
      p[i] = NULL;
    } else {
      uint64_t c = rng_below(&r, 1000);
      sz[i] = c < 900 ? rng_below(&r, 600) : c < 995 ? rng_below(&r, 16384) : rng_below(&r, 1 << 20);
      p[i] = c & 1 ? calloc(1, sz[i]) : malloc(sz[i]);
      CHECK(p[i] != NULL);
      pattern_fill(p[i], sz[i], (uint64_t)i + seed);
    }
  }
  for (int i = 0; i < N; i++) free(p[i]);
}

static void *child_thread(void *arg) {
  child_work((uintptr_t)arg, 300);
  return NULL;
}

/* ---- part alloc ------------------------------------------------------------------------------ */

static void part_alloc(void) {
  part_begin("alloc");
  pthread_t th[2];
  start_threads(th, 2, allocator_thread);
  for (int k = 0; k < 200; k++) {
    pid_t pid = traced_fork();
    CHECKF(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      child_work((uint64_t)k, 300);
      if (k % 10 == 0) {
        /* a new thread in the child gets a working heap too */
        pthread_t t;
        if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)k) != 0) _exit(2);
        pthread_join(t, NULL);
      }
      if (k % 2) exit(0); /* through exit handlers and stdio teardown */
      _exit(0);
    }
    reap(record_child(pid));
  }
  stop(th, 2);
  test_note("ok   alloc: 200 forks while 2 threads allocate\n");
}

/* ---- part storm -------------------------------------------------------------------------------
 * A fork storm: 4 threads fork at once, 40 times each, while 2 more allocate; every child
 * allocates, forks a grandchild that allocates too, and waits for it; up to 4 children (and
 * their grandchildren) are alive at any time. Each fork must find the allocator's locks
 * consistent whatever the other forking threads hold. */
static void *storm_thread(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  for (int k = 0; k < 40; k++) {
    void *mine = malloc(100 + (size_t)k * 37);
    pid_t pid = traced_fork();
    CHECKF(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      free(mine);
      child_work(id * 1000 + (uint64_t)k, 200);
      pid_t g = fork();
      if (g < 0) _exit(2);
      if (g == 0) {
        child_work(id * 1000 + (uint64_t)k + 500, 200);
        _exit(0);
      }
      int st;
      if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(3);
      _exit(0);
    }
    free(mine);
    reap(record_child(pid));
  }
  return NULL;
}

static void part_storm(void) {
  part_begin("storm");
  pthread_t th[2], forkers[4];
  start_threads(th, 2, allocator_thread);
  for (uintptr_t i = 0; i < 4; i++) CHECK(pthread_create(&forkers[i], NULL, storm_thread, (void *)(i + 1)) == 0);
  for (int i = 0; i < 4; i++) CHECK(pthread_join(forkers[i], NULL) == 0);
  stop(th, 2);
  test_note("ok   storm: 160 forks from 4 threads at once, each child forking again\n");
}

/* ---- part stdio ------------------------------------------------------------------------------ */

static void *stdio_thread(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  FILE *f = tmpfile();
  CHECK(f != NULL);
  char *line = NULL;
  size_t cap = 0;
  long rounds = 0;
  while (!atomic_load_explicit(&stop_threads, memory_order_relaxed)) {
    for (int i = 0; i < 50; i++)
      fprintf(f, "thread %lu round %ld line %d %0*d\n", (unsigned long)id, rounds, i,
              (int)(i * 7 % 300), 0);
    fflush(NULL);
    rewind(f);
    /* No checks on what is read back: a child's fflush(NULL) writes out (or, for a stream in
     * read mode, seeks) its copy of this FILE's buffer on the file description it shares with
     * us, so lines may repeat or break. What matters is the malloc work getline does. */
    long chars = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) chars += n;
    (void)chars;
    if (++rounds % 20 == 0) {
      /* start over so the file stays small; getline's buffer is reallocated from scratch */
      fclose(f);
      f = tmpfile();
      CHECK(f != NULL);
      free(line);
      line = NULL;
      cap = 0;
    } else {
      fseek(f, 0, SEEK_END);
    }
  }
  free(line);
  fclose(f);
  return NULL;
}

static void part_stdio(void) {
  part_begin("stdio");
  pthread_t th[3];
  start_threads(th, 2, stdio_thread);
  CHECK(pthread_create(&th[2], NULL, allocator_thread, (void *)(uintptr_t)9) == 0);
  for (int k = 0; k < 100; k++) {
    fflush(NULL);
    pid_t pid = traced_fork();
    CHECKF(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
      fflush(NULL);
      child_work((uint64_t)k + 1000, 200);
      char *s = NULL;
      if (asprintf(&s, "child %d", k) < 0) _exit(2);
      free(s);
      fflush(NULL);
      _exit(0);
    }
    reap(record_child(pid));
  }
  stop(th, 3);
  test_note("ok   stdio: 100 forks during fprintf/fflush(NULL)/getline in other threads\n");
}

/* ---- part signal ----------------------------------------------------------------------------- */

static atomic_int forks_in_handler, fork_failures;

static void usr1_handler(int sig) {
  (void)sig;
  int saved = errno;
  pid_t pid = traced_fork();
  if (pid == 0) {
    /* the child: one thread, whose parent was interrupted in a handler while other threads
     * were (possibly) inside malloc */
    for (int i = 0; i < 200; i++) {
      size_t n = (size_t)(i * 37 % 5000) + (i % 50 == 0 ? 300000 : 0);
      char *p = malloc(n);
      if (!p) _exit(2);
      memset(p, i, n);
      free(p);
    }
    _exit(0);
  }
  if (pid > 0) {
    record_child(pid);
    forks_in_handler++;
  } else {
    fork_failures++;
  }
  errno = saved;
}

static atomic_int signaler_done;

static void *signaler(void *arg) {
  pthread_t *targets = arg; /* one target, or (signal_any) the two allocating threads */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  for (int k = 0; k < 100; k++) {
    pthread_kill(targets[usr1_in_workers ? k % 2 : 0], SIGUSR1);
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&signaler_done, 1);
  return NULL;
}

static void part_signal(void) {
  part_begin(usr1_in_workers ? "signal_any" : "signal");
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = usr1_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  pthread_t th[2], sig;
  start_threads(th, 2, allocator_thread);
  pthread_t self = pthread_self();
  atomic_store(&signaler_done, 0);
  CHECK(pthread_create(&sig, NULL, signaler, usr1_in_workers ? th : &self) == 0);
  /* the main thread only sleeps (and reaps) while the handler runs in it: it is never inside
   * malloc when interrupted, so fork-in-handler is legitimate here */
  int reaped = 0;
  while (!atomic_load(&signaler_done)) {
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
    int st;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
      int n = atomic_load(&nchildren);
      for (int i = 0; i < n && i < MAX_CHILDREN; i++)
        if (child_pids[i] == w) child_pids[i] = 0;
      CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
             "part 'signal': child %d ended with status 0x%x", (int)w, st);
      reaped++;
    }
  }
  CHECK(pthread_join(sig, NULL) == 0);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  stop(th, 2);
  int n = atomic_load(&nchildren);
  for (int i = 0; i < n && i < MAX_CHILDREN; i++) reap(i);
  CHECKF(fork_failures == 0, "%d forks in the handler failed", (int)fork_failures);
  CHECKF(forks_in_handler >= 10, "only %d signals were handled", (int)forks_in_handler);
  test_note("ok   %s: %d forks from a signal handler while 2 threads allocate\n", current_part,
            (int)forks_in_handler);
}

/* Not run by default: the handler interrupts the allocating threads themselves, so fork (and
 * the child's malloc) can start while that same thread is inside malloc. malloc is not
 * async-signal-safe and glibc deadlocks here every time (its fork takes the arena lock the
 * interrupted thread holds); jemalloc too, tcmalloc sometimes. Kept as a diagnostic. */
static void part_signal_any(void) {
  usr1_in_workers = 1;
  part_signal();
  usr1_in_workers = 0;
}

int main(int argc, char **argv) {
  locus_api_t api;
  int have_locus = locus_api_require(&api);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = watchdog;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
  struct { const char *name; void (*fn)(void); int by_default; } parts[] = {
      {"alloc", part_alloc, 1}, {"storm", part_storm, 1}, {"stdio", part_stdio, 1}, {"signal", part_signal, 1},
      {"signal_any", part_signal_any, 0}};
  double t0 = test_now();
  int ran = 0;
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
    int wanted = argc < 2 && parts[i].by_default;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], parts[i].name)) wanted = 1;
    if (!wanted) continue;
    parts[i].fn();
    ran++;
  }
  alarm(0);
  CHECKF(ran > 0, "no such part (alloc, storm, stdio, signal, signal_any)");
  if (have_locus) CHECK_EQ(api.check_heap(), 0);
  test_note("stress_fork: %d parts in %.2f s\n", ran, test_now() - t0);
  return 0;
}
