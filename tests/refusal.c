/* refusal.c — memory comes back when the system refuses more (every library, and glibc).
 *
 * Each section runs in a child process under an address-space limit (RLIMIT_AS) a fixed
 * amount above what the child has mapped when it starts: it fills the heap until malloc
 * returns NULL (with errno ENOMEM), frees everything, then asks for memory of other shapes —
 * what the freed memory can serve only if the allocator gives back what it keeps for reuse
 * (cached blocks and runs, the huge-object pool, abandoned heaps) when a mapping is refused.
 *
 *   grow      objects of 1,000 B until NULL, all freed, then an int array grown by doubling
 *             (realloc) from 10,000 to 2,560,000 elements (10 MB)
 *   sizes     objects of many sizes (24 B .. 3 MiB) until NULL, all freed, then the array
 *   threads   four threads (256 KiB stacks) fill the heap with objects of many sizes until NULL
 *             and exit (their heaps are left behind); the main thread frees everything, then
 *             the array and one 16 MiB buffer
 *
 * The limit leaves LIMIT_MB above what the child mapped at start-up, so the filled heap is
 * about that size. */
#include "check.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>

enum { LIMIT_MB = 48, MAX_OBJECTS = 1 << 20, THREADS = 4 };

static void *objs[MAX_OBJECTS];
static size_t nobjs;
static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;

/* Allocates objects of the sizes in turn until one fails; returns false if a failure came
 * without ENOMEM. The objects go to objs (under its lock: threads share it). */
static bool fill(const size_t *sizes, size_t nsizes) {
  for (size_t i = 0;; i++) {
    size_t n = sizes[i % nsizes];
    errno = 0;
    void *p = malloc(n);
    if (!p) return errno == ENOMEM;
    memset(p, 1, n < 4096 ? n : 4096);
    pthread_mutex_lock(&objs_lock);
    bool room = nobjs < MAX_OBJECTS;
    if (room) objs[nobjs++] = p;
    pthread_mutex_unlock(&objs_lock);
    if (!room) {
      free(p);
      return true;
    }
  }
}

static void free_all(void) {
  while (nobjs) free(objs[--nobjs]);
}

/* An int array grown by doubling from 10,000 to 2,560,000 elements, every element written. */
static bool grow_array(void) {
  int *a = NULL;
  for (size_t len = 10000; len <= 2560000; len *= 2) {
    int *b = realloc(a, len * sizeof *b);
    if (!b) {
      free(a);
      return false;
    }
    a = b;
    for (size_t i = 0; i < len; i++) a[i] = (int)i;
  }
  bool ok = a[2559999] == 2559999;
  free(a);
  return ok;
}

static const size_t one_size[] = { 1000 };
static const size_t many_sizes[] = { 24, 200, 1000, 3000, 40000, 600000, 3 << 20, 64, 500 };

/* Exit statuses of a child: 3 no limit, 4 NULL without ENOMEM, 5 nothing allocated, 6 the
 * array could not grow, 7 the big buffer failed, 8 a thread failed. */
static int child_grow(const size_t *sizes, size_t n) {
  if (!test_limit_address_space((size_t)LIMIT_MB << 20)) return 3;
  if (!fill(sizes, n)) return 4;
  if (!nobjs) return 5;
  free_all();
  return grow_array() ? 0 : 6;
}

static void *thread_fill(void *arg) {
  (void)arg;
  return fill(many_sizes, sizeof many_sizes / sizeof *many_sizes) ? NULL : (void *)1;
}

static int child_threads(void) {
  if (!test_limit_address_space((size_t)LIMIT_MB << 20)) return 3;
  /* Small stacks: the C library keeps the stacks of joined threads for reuse, and 8 MiB ones
   * would take most of the limit. */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256u << 10);
  pthread_t t[THREADS];
  int started = 0;
  for (int i = 0; i < THREADS; i++) started += pthread_create(&t[started], &attr, thread_fill, NULL) == 0;
  pthread_attr_destroy(&attr);
  bool ok = started > 0;
  for (int i = 0; i < started; i++) {
    void *r;
    ok &= pthread_join(t[i], &r) == 0 && r == NULL;
  }
  if (!ok) return 8;
  if (!nobjs) return 5;
  free_all();
  if (!grow_array()) return 6;
  char *big = malloc(16u << 20);
  if (!big) return 7;
  memset(big, 1, 16u << 20);
  free(big);
  return 0;
}

static void run_child(int (*child)(void), const char *what) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) _exit(child());
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) != 3, "%s: the child could not set up the limit", what);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "%s: %s %d (4: NULL without ENOMEM, 5: nothing allocated, 6: the array could not grow "
         "after everything was freed, 7: a 16 MiB buffer failed, 8: a thread failed)", what,
         WIFSIGNALED(st) ? "signal" : "status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static int child_one_size(void) { return child_grow(one_size, 1); }
static int child_many_sizes(void) { return child_grow(many_sizes, sizeof many_sizes / sizeof *many_sizes); }

static void t_grow(void) { run_child(child_one_size, "1,000-byte objects"); }
static void t_sizes(void) { run_child(child_many_sizes, "objects of many sizes"); }
static void t_threads(void) { run_child(child_threads, "four threads"); }

int main(int argc, char **argv) {
  static const test_section_t sections[] = {
      {"grow", t_grow}, {"sizes", t_sizes}, {"threads", t_threads},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
