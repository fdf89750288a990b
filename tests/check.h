/* check.h — the few helpers every test program of the shared suite uses.
 *
 * Header-only (static functions), usable from C11 and C++. A failed CHECK prints
 * "FAIL file:line: expression: message" to stderr and ends the program with status 1, so the
 * first failure is the one reported (later checks would only read a damaged heap).
 * Exit status 77 means "skipped" (CTest SKIP_RETURN_CODE).
 *
 * Output goes through write(2) with a stack buffer: the heap under test may be the broken
 * part, and a report must not depend on it.
 */
#ifndef LOCUS_TEST_CHECK_H
#define LOCUS_TEST_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "locus.h"

#define TEST_SKIP 77

#if defined(__GNUC__)
#define TEST_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define TEST_UNUSED __attribute__((unused))
#else
#define TEST_PRINTF(a, b)
#define TEST_UNUSED
#endif

/* Formats into a stack buffer and writes it to fd in one write (one line stays one line
 * even when several threads or processes report at once). */
static TEST_PRINTF(2, 3) TEST_UNUSED void test_fdprintf(int fd, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, buf + done, len - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
}

#define test_note(...) test_fdprintf(1, __VA_ARGS__)

static TEST_UNUSED void test_fail_exit(void) { _exit(1); }

/* CHECK(cond): fails with the expression. CHECKF(cond, fmt, ...): adds a formatted message. */
#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      test_fdprintf(2, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                       \
      test_fail_exit();                                                                       \
    }                                                                                         \
  } while (0)

#define CHECKF(cond, ...)                                                                     \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      char check_msg_[512];                                                                   \
      snprintf(check_msg_, sizeof check_msg_, __VA_ARGS__);                                   \
      test_fdprintf(2, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, check_msg_);       \
      test_fail_exit();                                                                       \
    }                                                                                         \
  } while (0)

/* Two values compared as unsigned 64-bit integers, both printed on failure. */
#define CHECK_OP(a, op, b)                                                                    \
  do {                                                                                        \
    unsigned long long check_a_ = (unsigned long long)(a);                                    \
    unsigned long long check_b_ = (unsigned long long)(b);                                    \
    if (!(check_a_ op check_b_)) {                                                            \
      test_fdprintf(2, "FAIL %s:%d: %s %s %s (%llu vs %llu)\n", __FILE__, __LINE__, #a, #op, \
                    #b, check_a_, check_b_);                                                  \
      test_fail_exit();                                                                       \
    }                                                                                         \
  } while (0)
#define CHECK_EQ(a, b) CHECK_OP(a, ==, b)
#define CHECK_NE(a, b) CHECK_OP(a, !=, b)
#define CHECK_LE(a, b) CHECK_OP(a, <=, b)
#define CHECK_LT(a, b) CHECK_OP(a, <, b)
#define CHECK_GE(a, b) CHECK_OP(a, >=, b)
#define CHECK_GT(a, b) CHECK_OP(a, >, b)

/* A NULL result with errno = ENOMEM (errno is set to something else first, so a stale ENOMEM
 * cannot pass). */
#define CHECK_ENOMEM(expr)                                                                    \
  do {                                                                                        \
    errno = EDOM;                                                                             \
    void *r_ = (expr);                                                                        \
    int e_ = errno;                                                                           \
    CHECKF(r_ == NULL, "%s returned %p instead of NULL", #expr, r_);                         \
    CHECKF(e_ == ENOMEM, "%s: errno is %d (%s), not ENOMEM", #expr, e_, strerror(e_));       \
  } while (0)

#define CHECK_ALIGNED(p, a)                                                                   \
  CHECKF(((uintptr_t)(p) & ((uintptr_t)(a) - 1)) == 0, "%p is not aligned to %zu", (void *)(p), \
         (size_t)(a))

/* ---- values the compiler must not see through ---------------------------------------- */

/* Hides a constant from the optimiser: malloc(SIZE_MAX) and free(&stack) must reach the
 * library at run time (and not be folded or warned about at compile time). */
static TEST_UNUSED size_t opaque_size(size_t x) {
  volatile size_t v = x;
  return v;
}
static TEST_UNUSED void *opaque_ptr(void *p) {
  void *volatile v = p;
  return v;
}

/* malloc(n), failing the test if it returns NULL. */
static TEST_UNUSED void *checked_malloc(size_t n) {
  void *p = malloc(n);
  CHECKF(p != NULL, "malloc(%zu) returned NULL", n);
  return p;
}

/* ---- objects of another thread -------------------------------------------------------- */

/* Allocates n objects of `size` bytes (filled with `fill`) into out[] from a new thread that
 * exits before this returns: objects whose heap's thread is gone. */
typedef struct { void **out; size_t n, size; int fill; } test_alloc_job_t;
static TEST_UNUSED void *test_alloc_job(void *arg) {
  test_alloc_job_t *j = (test_alloc_job_t *)arg;
  for (size_t i = 0; i < j->n; i++) {
    j->out[i] = malloc(j->size);
    if (j->out[i]) memset(j->out[i], j->fill, j->size);
  }
  return NULL;
}
/* Runs fn(arg) on a new thread and waits until that thread has exited. */
static TEST_UNUSED void test_run_thread(void *(*fn)(void *), void *arg) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fn, arg) == 0 && pthread_join(t, NULL) == 0);
}
static TEST_UNUSED void test_allocate_in_thread(void **out, size_t n, size_t size, int fill) {
  test_alloc_job_t job = { out, n, size, fill };
  test_run_thread(test_alloc_job, &job);
}

/* ---- what is loaded -------------------------------------------------------------------- */

/* The Locus API looked up at run time: present when a Locus library is preloaded or linked. */
typedef struct locus_api {
  const char *(*version)(void);
  const char *(*variant)(void);
  size_t (*purge)(void);
  int (*stats_get)(locus_stats_t *);
  size_t (*stats_json)(char *, size_t);
  void (*stats_print)(int);
  int (*check_heap)(void);
} locus_api_t;

/* Fills *api and returns 1 when locus_variant is found, else returns 0 (api all NULL). */
static TEST_UNUSED int locus_api_load(locus_api_t *api) {
  memset(api, 0, sizeof *api);
  void *v = dlsym(RTLD_DEFAULT, "locus_variant");
  if (!v) return 0;
  /* POSIX guarantees that dlsym results convert to function pointers; memcpy keeps
   * -Wpedantic quiet about the object-to-function pointer cast. */
#define LOAD_(field, name)                                                                    \
  do {                                                                                        \
    void *s_ = dlsym(RTLD_DEFAULT, name);                                                     \
    memcpy(&api->field, &s_, sizeof s_);                                                      \
  } while (0)
  LOAD_(version, "locus_version");
  LOAD_(variant, "locus_variant");
  LOAD_(purge, "locus_purge");
  LOAD_(stats_get, "locus_stats_get");
  LOAD_(stats_json, "locus_stats_json");
  LOAD_(stats_print, "locus_stats_print");
  LOAD_(check_heap, "locus_check_heap");
#undef LOAD_
  return 1;
}

/* The suite's CMake sets LOCUS_TEST_EXPECT_LOCUS=1 when the preloaded library is a Locus
 * build: then not finding the Locus API means the preload did not take, which must fail
 * (otherwise every test would quietly check glibc instead). */
static TEST_UNUSED int test_env_flag(const char *name) {
  const char *v = getenv(name);
  return v && v[0] == '1';
}

static TEST_UNUSED int locus_api_require(locus_api_t *api) {
  int found = locus_api_load(api);
  if (!found && test_env_flag("LOCUS_TEST_EXPECT_LOCUS")) {
    const char *pre = getenv("LD_PRELOAD");
    test_fdprintf(2, "FAIL: a Locus library was expected (LD_PRELOAD=%s) but locus_variant is "
                  "not defined: the preload did not take effect\n", pre ? pre : "(unset)");
    _exit(1);
  }
  return found;
}

/* The alignment every request of at least 16 bytes must have: 16, or 8 under a weakly
 * aligned variant (LOCUS_TEST_WEAK_ALIGN=1, set by CMake for the "q8" builds). */
static TEST_UNUSED size_t test_quantum(void) {
  return test_env_flag("LOCUS_TEST_WEAK_ALIGN") ? 8 : 16;
}
/* The alignment a request of n bytes must have. */
static TEST_UNUSED size_t test_min_align(size_t n) {
  size_t q = test_quantum();
  return n <= 8 ? 8 : q;
}

/* ---- memory measurements --------------------------------------------------------------- */

/* Resident bytes that the kernel will not take back by itself: Rss minus LazyFree (pages given
 * back with MADV_FREE stay in Rss until reclaimed, but are free memory). Falls back to
 * /proc/self/statm when smaps_rollup is missing. */
static TEST_UNUSED size_t test_rss(void) {
  char buf[4096];
  size_t rss = 0, lazy = 0;
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f) {
    int got = 0;
    while (fgets(buf, sizeof buf, f)) {
      unsigned long kb;
      if (sscanf(buf, "Rss: %lu kB", &kb) == 1) { rss = (size_t)kb << 10; got = 1; }
      else if (sscanf(buf, "LazyFree: %lu kB", &kb) == 1) lazy = (size_t)kb << 10;
    }
    fclose(f);
    if (got) return rss > lazy ? rss - lazy : 0;
  }
  f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, res = 0;
  if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
  fclose(f);
  return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

/* Limits the process's address space (RLIMIT_AS) to what it has mapped now (VmSize) plus
 * `above` bytes. Reads /proc with open/read, not stdio, so that nothing allocates: a process
 * in which nothing has allocated yet may call it. False if the limit could not be set. */
static TEST_UNUSED bool test_limit_address_space(size_t above) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  char *v = strstr(buf, "VmSize:");
  if (!v) return false;
  rlim_t limit = ((rlim_t)strtoul(v + 7, NULL, 10) << 10) + above;
  struct rlimit rl = { limit, limit };
  return setrlimit(RLIMIT_AS, &rl) == 0;
}

/* ---- deterministic random numbers -------------------------------------------------------- */

typedef struct test_rng { uint64_t s; } test_rng_t;

static TEST_UNUSED uint64_t rng_next(test_rng_t *r) {
  /* splitmix64: good enough for choosing sizes, and any seed works. */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static TEST_UNUSED uint64_t rng_below(test_rng_t *r, uint64_t n) { return n ? rng_next(r) % n : 0; }

/* ---- content patterns ------------------------------------------------------------------- */

/* Fills [p, p+n) with a pattern determined by seed, so that any overlap between two live
 * objects or a lost realloc copy shows up when the bytes are verified. */
static TEST_UNUSED void pattern_fill(void *p, size_t n, uint64_t seed) {
  unsigned char *b = (unsigned char *)p;
  uint64_t w = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = w ^ (i * 0xD6E8FEB86659FD93ull);
    memcpy(b + i, &v, 8);
  }
  uint64_t v = w ^ (i * 0xD6E8FEB86659FD93ull);
  for (size_t k = 0; i < n; i++, k++) b[i] = (unsigned char)(v >> (8 * k));
}

/* Returns the offset of the first byte that differs from pattern_fill(p, n, seed), or
 * (size_t)-1 when all n bytes match. */
static TEST_UNUSED size_t pattern_find_bad(const void *p, size_t n, uint64_t seed) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t w = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = w ^ (i * 0xD6E8FEB86659FD93ull), got;
    memcpy(&got, b + i, 8);
    if (got != v) {
      for (size_t k = 0; k < 8; k++)
        if (b[i + k] != (unsigned char)(v >> (8 * k))) return i + k;
    }
  }
  uint64_t v = w ^ (i * 0xD6E8FEB86659FD93ull);
  for (size_t k = 0; i < n; i++, k++)
    if (b[i] != (unsigned char)(v >> (8 * k))) return i;
  return (size_t)-1;
}

#define CHECK_PATTERN(p, n, seed)                                                             \
  do {                                                                                        \
    size_t bad_ = pattern_find_bad((p), (n), (seed));                                         \
    CHECKF(bad_ == (size_t)-1, "object %p (%zu bytes) corrupted at offset %zu",               \
           (void *)(p), (size_t)(n), bad_);                                                   \
  } while (0)

/* ---- sections -------------------------------------------------------------------------- */

/* A test program is a list of named sections. By default each section runs in its own
 * child process, so that one failure (or crash) does not hide the others and every result is
 * reported; "prog name..." runs the named sections in-process (handy under a debugger). */
typedef struct test_section {
  const char *name;
  void (*fn)(void);
} test_section_t;

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>

static TEST_UNUSED double test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns the exit status for main: 0 when every section passed. */
static TEST_UNUSED int test_run_sections(int argc, char **argv, const test_section_t *sec,
                                         size_t n) {
  if (argc > 1) {
    for (int a = 1; a < argc; a++) {
      size_t i = 0;
      while (i < n && strcmp(sec[i].name, argv[a])) i++;
      if (i == n) {
        test_fdprintf(2, "unknown section '%s'; sections:", argv[a]);
        for (i = 0; i < n; i++) test_fdprintf(2, " %s", sec[i].name);
        test_fdprintf(2, "\n");
        return 2;
      }
      sec[i].fn();
      test_note("ok   %s\n", sec[i].name);
    }
    return 0;
  }
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    double t0 = test_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      test_fdprintf(2, "FAIL fork: %s\n", strerror(errno));
      return 1;
    }
    if (pid == 0) {
      sec[i].fn();
      fflush(NULL);
      _exit(0);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    double ms = (test_now() - t0) * 1e3;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      test_note("ok   %-24s %8.1f ms\n", sec[i].name, ms);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == TEST_SKIP) {
      test_note("skip %-24s\n", sec[i].name);
    } else {
      failed++;
      if (WIFSIGNALED(st))
        test_fdprintf(2, "FAIL %-24s killed by signal %d (%s)\n", sec[i].name, WTERMSIG(st),
                      strsignal(WTERMSIG(st)));
      else
        test_fdprintf(2, "FAIL %-24s exit status %d\n", sec[i].name, WEXITSTATUS(st));
    }
  }
  if (failed) test_fdprintf(2, "%d of %zu sections failed\n", failed, n);
  return failed ? 1 : 0;
}

/* ---- misuse in a child process ------------------------------------------------------------
 *
 * test_run_child(fn, &c) runs fn in a forked child with stderr captured, no core file, and
 * SIGABRT at its default action; the child reports the address its misuse passes with
 * test_report_address(p) before committing it. Afterwards c holds how the child ended, the
 * reported address and what it wrote to stderr. A child still running after 20 s is killed
 * (c.hung). Nothing here allocates in the child besides what fn does. */
typedef struct test_child {
  int status;      /* the wait status (when not hung) */
  bool hung;       /* still running at the deadline: killed */
  bool reported;   /* the child reported an address ... */
  uintptr_t addr;  /* ... this one */
  char *err;       /* its stderr, NUL-terminated (a static buffer: the next run reuses it) */
  size_t err_len;
  char how[64];    /* the end in words: "signal 6 (Aborted)", "exit status 1" */
} test_child_t;

static TEST_UNUSED int test_report_fd = -1; /* child -> parent: the address the misuse passes */

static TEST_UNUSED void test_report_address(const void *p) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%llx\n", (unsigned long long)(uintptr_t)p);
  if (write(test_report_fd, buf, (size_t)n) != n) _exit(3);
}

/* Reads fd to EOF (or a first newline when stop_at_newline, or until the deadline) into buf;
 * returns the length. */
static TEST_UNUSED size_t test_read_all(int fd, char *buf, size_t len, double deadline,
                                        int stop_at_newline) {
  size_t got = 0;
  for (;;) {
    double left = deadline - test_now();
    if (left <= 0) break;
    struct pollfd pfd = {fd, POLLIN, 0};
    int r = poll(&pfd, 1, (int)(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = read(fd, buf + got, len - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
    if (got + 1 >= len) break;
    if (stop_at_newline && memchr(buf, '\n', got)) break;
  }
  buf[got] = 0;
  return got;
}

static TEST_UNUSED void test_run_child(void (*fn)(void), test_child_t *c) {
  static char err[65536];
  int err_pipe[2], addr_pipe[2];
  memset(c, 0, sizeof *c);
  CHECK(pipe(err_pipe) == 0 && pipe(addr_pipe) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    /* SIGABRT must end the process even if something installed a handler */
    signal(SIGABRT, SIG_DFL);
    close(err_pipe[0]);
    close(addr_pipe[0]);
    dup2(err_pipe[1], 2);
    close(err_pipe[1]);
    test_report_fd = addr_pipe[1];
    fn();
    _exit(0);
  }
  close(err_pipe[1]);
  close(addr_pipe[1]);
  double deadline = test_now() + 20.0;
  char addr_text[64];
  size_t an = test_read_all(addr_pipe[0], addr_text, sizeof addr_text, deadline, 1);
  c->err_len = test_read_all(err_pipe[0], err, sizeof err, deadline, 0);
  c->err = err;
  close(addr_pipe[0]);
  close(err_pipe[0]);
  int st = 0, done = 0;
  while (!done && test_now() < deadline) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) done = 1;
    else if (w < 0 && errno != EINTR) break;
    else usleep(2000);
  }
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    c->hung = true;
  }
  c->status = st;
  c->reported = an > 0;
  if (an) c->addr = (uintptr_t)strtoull(addr_text, NULL, 16);
  if (WIFSIGNALED(st))
    snprintf(c->how, sizeof c->how, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    snprintf(c->how, sizeof c->how, "exit status %d", WEXITSTATUS(st));
}

/* Runs fn(arg) in a child (test_run_child) and fails unless the child was ended by a signal
 * with `want` in what it wrote to stderr (the allocator's one-line report). */
static void (*test_fatal_fn_)(size_t);
static size_t test_fatal_arg_;
static TEST_UNUSED void test_fatal_call_(void) { test_fatal_fn_(test_fatal_arg_); }
static TEST_UNUSED void test_expect_fatal(void (*fn)(size_t), size_t arg, const char *want) {
  test_child_t c;
  test_fatal_fn_ = fn;
  test_fatal_arg_ = arg;
  test_run_child(test_fatal_call_, &c);
  CHECKF(WIFSIGNALED(c.status) && strstr(c.err, want), "%zu: %s, '%s' (wanted '%s')", arg, c.how,
         c.err, want);
}

/* Runs a program's misuse cases: every case, or those the command line names. run(i) returns
 * 0 (passed), 1 (failed, reported) or -1 (does not apply here). Returns main's exit status:
 * 2 for a name that is no case. */
static TEST_UNUSED int test_run_cases(int argc, char **argv, size_t n,
                                      const char *(*name)(size_t), int (*run)(size_t)) {
  for (int a = 1; a < argc; a++) {
    size_t i = 0;
    while (i < n && strcmp(argv[a], name(i))) i++;
    if (i < n) continue;
    test_fdprintf(2, "no case '%s'; cases:", argv[a]);
    for (i = 0; i < n; i++) test_fdprintf(2, " %s", name(i));
    test_fdprintf(2, "\n");
    return 2;
  }
  int failed = 0, ran = 0;
  for (size_t i = 0; i < n; i++) {
    bool wanted = argc < 2;
    for (int a = 1; a < argc; a++) wanted |= !strcmp(argv[a], name(i));
    if (!wanted) continue;
    int r = run(i);
    if (r < 0) continue;
    ran++;
    failed += r;
  }
  if (failed) test_fdprintf(2, "%d of %d cases failed\n", failed, ran);
  return failed ? 1 : 0;
}

/* A section that does not apply ends its child with this (reported as "skip"). */
#define SECTION_SKIP(...)                                                                     \
  do {                                                                                        \
    test_note("     (skipped: ");                                                             \
    test_note(__VA_ARGS__);                                                                   \
    test_note(")\n");                                                                         \
    _exit(TEST_SKIP);                                                                         \
  } while (0)

#endif
