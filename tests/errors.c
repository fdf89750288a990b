/* errors.c — misuse of the heap ends the program with a clear one-line message.
 *
 * Each case runs in a child process that commits one misuse (double free of each size
 * category, interior pointers, pointers the allocator never returned, realloc of a bad
 * pointer). The child must terminate abnormally (normally SIGABRT). Under a Locus library its
 * stderr must also be exactly one line naming the call ("free()", "realloc()") and the address
 * passed, in hex: e.g. "locus: free(): double free 0x7f3a5c001040".
 * For other allocators (the "system" run, peers) only the abnormal end is required: glibc
 * catches all of these; jemalloc, tcmalloc and mimalloc in their default builds do not.
 *
 *   errors            run every case
 *   errors <case>...  run the named cases (still each in a child)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "check.h"

static int report_fd = -1; /* child -> parent: the address the misuse passes */

static void report_address(const void *p) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%" PRIxPTR "\n", (uintptr_t)p);
  if (write(report_fd, buf, (size_t)n) != n) _exit(3);
}

/* After the misuse: a few more calls of the same size, so that a design that notices the
 * damage at its next use of that free list still gets to report it. */
static void aftermath(size_t size) {
  for (int i = 0; i < 4; i++) {
    void *a = malloc(size), *b = malloc(size);
    if (a) memset(a, 0x11, size);
    if (b) memset(b, 0x22, size);
    free(a);
    free(b);
  }
}

static void double_free(size_t size) {
  /* neighbours, so the block is not alone in its page/class */
  void *before = malloc(size);
  char *p = malloc(size);
  void *after = malloc(size);
  if (!p) _exit(4);
  memset(p, 0x5A, size);
  free(p);
  report_address(p);
  free(opaque_ptr(p));
  aftermath(size);
  free(before);
  free(after);
}

/* A double free of an object another thread allocated (the flagship keeps such an object in
 * the freeing thread's foreign-object cache after the first free). */
static void *allocate_one(void *arg) {
  *(void **)arg = malloc(48);
  return NULL;
}
static void c_double_free_foreign(void) {
  void *p = NULL;
  pthread_t t;
  if (pthread_create(&t, NULL, allocate_one, &p) != 0 || pthread_join(t, NULL) != 0 || !p) _exit(4);
  memset(p, 0x5A, 48);
  free(p);
  report_address(p);
  free(opaque_ptr(p));
  aftermath(48);
}

static void c_double_free_small(void) { double_free(32); }
static void c_double_free_medium(void) { double_free(300); }
static void c_double_free_large(void) { double_free(4000); }
static void c_double_free_huge(void) { double_free(200000); }

static void interior(size_t size, size_t offset) {
  char *p = malloc(size);
  if (!p) _exit(4);
  /* zeroed contents: a header-based allocator (glibc) reads a size of 0 there and aborts
   * instead of wandering */
  memset(p, 0, size);
  report_address(p + offset);
  free(opaque_ptr(p + offset));
  aftermath(size);
}

static void c_interior_small(void) { interior(64, 8); }
static void c_interior_large(void) { interior(4000, 16); }

static void c_free_stack(void) {
  _Alignas(64) char buf[512];
  memset(buf, 0, sizeof buf);
  report_address(buf + 256);
  free(opaque_ptr(buf + 256));
  aftermath(64);
}

static void c_free_mmap(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) _exit(4);
  /* the second page of a fresh mapping: the bytes before it are mapped and zero */
  report_address(m + page);
  free(opaque_ptr(m + page));
  aftermath(64);
}

static void c_realloc_invalid(void) {
  _Alignas(64) char buf[512];
  memset(buf, 0, sizeof buf);
  report_address(buf + 128);
  void *q = realloc(opaque_ptr(buf + 128), 1000);
  if (q) memset(q, 1, 1000);
  aftermath(64);
}

static void c_realloc_freed(void) {
  char *p = malloc(4000);
  void *keep = malloc(4000);
  if (!p) _exit(4);
  free(p);
  report_address(p);
  void *q = realloc(opaque_ptr(p), 8000);
  if (q) memset(q, 1, 8000);
  aftermath(4000);
  free(keep);
}

typedef struct error_case {
  const char *name;
  void (*fn)(void);
  const char *call; /* the call the message must name */
} error_case_t;

static const error_case_t cases[] = {
    {"double_free_small", c_double_free_small, "free()"},
    {"double_free_medium", c_double_free_medium, "free()"},
    {"double_free_large", c_double_free_large, "free()"},
    {"double_free_huge", c_double_free_huge, "free()"},
    {"double_free_foreign", c_double_free_foreign, "free()"},
    {"interior_small", c_interior_small, "free()"},
    {"interior_large", c_interior_large, "free()"},
    {"free_stack", c_free_stack, "free()"},
    {"free_mmap", c_free_mmap, "free()"},
    {"realloc_invalid", c_realloc_invalid, "realloc()"},
    {"realloc_freed", c_realloc_freed, "realloc()"},
};
#define NCASES (sizeof cases / sizeof *cases)

/* Reads fd to EOF (or a first newline when stop_at_newline, or until the deadline) into buf;
 * returns the length. */
static size_t read_all(int fd, char *buf, size_t len, double deadline, int stop_at_newline) {
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

/* Does this line name the call and the address (any 0x... token equal to it)? */
static int line_matches(const char *line, const char *call, uintptr_t addr) {
  if (!strstr(line, call)) return 0;
  for (const char *s = line; (s = strstr(s, "0x")) != NULL; s += 2) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s + 2, &end, 16);
    if (end != s + 2 && errno == 0 && (uintptr_t)v == addr) return 1;
  }
  return 0;
}

static int run_case(const error_case_t *c, int want_message) {
  int err_pipe[2], addr_pipe[2];
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
    report_fd = addr_pipe[1];
    c->fn();
    _exit(0);
  }
  close(err_pipe[1]);
  close(addr_pipe[1]);
  double deadline = test_now() + 20.0;
  static char err[65536];
  char addr_text[64];
  size_t an = read_all(addr_pipe[0], addr_text, sizeof addr_text, deadline, 1);
  size_t en = read_all(err_pipe[0], err, sizeof err, deadline, 0);
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
    test_fdprintf(2, "FAIL %-20s the child hung (killed after 20 s)\n", c->name);
    return 1;
  }
  uintptr_t addr = 0;
  if (an) addr = (uintptr_t)strtoull(addr_text, NULL, 16);

  /* stderr, one line per line, for the report */
  int lines = 0, matched = 0;
  for (char *s = err; *s;) {
    char *nl = strchr(s, '\n');
    if (nl) *nl = 0;
    if (*s) {
      lines++;
      if (line_matches(s, c->call, addr)) matched = 1;
    }
    if (!nl) break;
    *nl = '\n';
    s = nl + 1;
  }
  char how[64];
  if (WIFSIGNALED(st))
    snprintf(how, sizeof how, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else
    snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
  const char *first = en ? err : "(nothing on stderr)";
  int first_len = (int)strcspn(first, "\n");

  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    test_fdprintf(2, "FAIL %-20s not detected: the program went on and exited normally\n",
                  c->name);
    return 1;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) >= 3 && WEXITSTATUS(st) <= 4 && !an) {
    test_fdprintf(2, "FAIL %-20s the case could not be set up (%s)\n", c->name, how);
    return 1;
  }
  if (want_message) {
    if (!matched || lines != 1) {
      test_fdprintf(2, "FAIL %-20s ended by %s, but stderr is not one line naming %s and "
                    "0x%" PRIxPTR " (%d lines): %.*s\n", c->name, how, c->call, addr, lines,
                    first_len, first);
      return 1;
    }
  }
  test_note("ok   %-20s %s: %.*s\n", c->name, how, first_len, first);
  return 0;
}

int main(int argc, char **argv) {
  locus_api_t api;
  int have_locus = locus_api_require(&api);
  test_note("errors: %s\n", have_locus ? "Locus library: the one-line message is required"
                                       : "no Locus library: abnormal termination is required");
  int failed = 0, ran = 0;
  for (size_t i = 0; i < NCASES; i++) {
    int wanted = argc < 2;
    for (int a = 1; a < argc; a++)
      if (!strcmp(argv[a], cases[i].name)) wanted = 1;
    if (!wanted) continue;
    ran++;
    failed += run_case(&cases[i], have_locus);
  }
  if (!ran) {
    test_fdprintf(2, "no such case; cases:");
    for (size_t i = 0; i < NCASES; i++) test_fdprintf(2, " %s", cases[i].name);
    test_fdprintf(2, "\n");
    return 2;
  }
  if (failed) test_fdprintf(2, "%d of %d cases failed\n", failed, ran);
  return failed ? 1 : 0;
}
