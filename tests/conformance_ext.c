/* conformance_ext.c — the calls beyond the C standard and POSIX, under whatever allocator is
 * loaded (LD_PRELOAD set by CTest, or none for the "system" run): every entry point from the
 * allocator that defines malloc, glibc's internal aliases, mallinfo2 and the other
 * introspection calls; when a Locus library is loaded (locus_variant found by dlsym), the Locus
 * API, its LOCUS_* options, and the thread cache's links against a write after free.
 *
 * Each section runs in its own child process (see check.h); "conformance_ext <section>" runs
 * one section in-process.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static locus_api_t L;
static int have_locus;

/* ---- sections ---------------------------------------------------------------------------- */

/* Which object (shared library or executable) defines a symbol, as dlsym sees it. */
static const char *defining_object(const char *name, void **addr) {
  void *s = dlsym(RTLD_DEFAULT, name);
  if (addr) *addr = s;
  if (!s) return NULL;
  Dl_info info;
  if (!dladdr(s, &info) || !info.dli_fname) return "?";
  return info.dli_fname;
}

/* Every entry point that hands out or takes back a pointer comes from the object that defines
 * malloc: a pointer from one of them freed by another allocator's free is heap corruption
 * (jemalloc 5.3 lacks pvalloc and the __libc_ names, for example). The statistics calls must
 * come from a Locus library too (they report its heap); for other allocators a foreign one is
 * only noted. Under glibc everything is libc's. */
static void t_one_heap_surface(void) {
  static const char *const critical[] = {
      "free",           "calloc",        "realloc",       "posix_memalign", "aligned_alloc",
      "memalign",       "valloc",        "pvalloc",       "malloc_usable_size",
      "__libc_malloc",  "__libc_free",   "__libc_calloc", "__libc_realloc", "__libc_memalign"};
  /* glibc's reallocarray calls realloc through the PLT, so a foreign one still works */
  static const char *const reporting[] = {"reallocarray", "mallinfo",    "mallinfo2",
                                          "malloc_stats", "malloc_info", "malloc_trim",
                                          "mallopt"};
  const char *home = defining_object("malloc", NULL);
  CHECK(home != NULL);
  int bad = 0;
  for (size_t k = 0; k < 2; k++) {
    const char *const *names = k ? reporting : critical;
    size_t n = k ? sizeof reporting / sizeof *reporting : sizeof critical / sizeof *critical;
    int must = !k || have_locus;
    for (size_t i = 0; i < n; i++) {
      const char *obj = defining_object(names[i], NULL);
      if (!obj) {
        test_fdprintf(2, "  %s: not defined at all\n", names[i]);
        bad += must;
      } else if (strcmp(obj, home)) {
        test_fdprintf(must ? 2 : 1, "  %s%s comes from %s, malloc from %s\n",
                      must ? "" : "(note) ", names[i], obj, home);
        bad += must;
      }
    }
  }
  CHECKF(bad == 0, "%d entry points do not come from the allocator that defines malloc", bad);
}

/* The glibc-internal names: pointers move freely between them and the public calls. */
static void t_libc_aliases(void) {
  void *(*lmalloc)(size_t), *(*lcalloc)(size_t, size_t), *(*lrealloc)(void *, size_t);
  void *(*lmemalign)(size_t, size_t);
  void (*lfree)(void *);
  void *s;
#define GET_(var, name)                                                                       \
  do {                                                                                        \
    s = dlsym(RTLD_DEFAULT, name);                                                            \
    CHECKF(s != NULL, "%s is not defined", name);                                            \
    memcpy(&var, &s, sizeof s);                                                               \
  } while (0)
  GET_(lmalloc, "__libc_malloc");
  GET_(lfree, "__libc_free");
  GET_(lcalloc, "__libc_calloc");
  GET_(lrealloc, "__libc_realloc");
  GET_(lmemalign, "__libc_memalign");
#undef GET_
  if (have_locus) {
    /* the aliases must be the Locus library's own, not glibc's */
    void *v = dlsym(RTLD_DEFAULT, "locus_variant");
    Dl_info a, b;
    CHECK(dladdr(v, &a) && a.dli_fname);
    const char *names[] = {"__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc",
                           "__libc_memalign"};
    for (int i = 0; i < 5; i++) {
      CHECK(dladdr(dlsym(RTLD_DEFAULT, names[i]), &b) && b.dli_fname);
      CHECKF(!strcmp(a.dli_fname, b.dli_fname), "%s comes from %s, not from the Locus library %s",
             names[i], b.dli_fname, a.dli_fname);
    }
  }
  for (size_t sz = 1; sz < 300000; sz = sz * 3 + 1) {
    /* __libc_malloc -> free */
    char *p = lmalloc(sz);
    CHECK(p != NULL);
    CHECK(malloc_usable_size(p) >= sz);
    CHECK(malloc_usable_size(p) <= 2 * sz + 4096);
    pattern_fill(p, sz, sz);
    p = realloc(p, sz + 100);
    CHECK(p != NULL);
    CHECK_PATTERN(p, sz, sz);
    free(p);
    /* malloc -> __libc_realloc -> __libc_free */
    p = checked_malloc(sz);
    pattern_fill(p, sz, sz + 1);
    p = lrealloc(p, sz * 2);
    CHECK(p != NULL);
    CHECK_PATTERN(p, sz, sz + 1);
    lfree(p);
    /* __libc_calloc zeroes; __libc_memalign aligns */
    unsigned char *c = lcalloc(sz, 1);
    CHECK(c != NULL);
    for (size_t i = 0; i < sz; i++) CHECK(c[i] == 0);
    free(c);
    p = lmemalign(256, sz);
    CHECK(p != NULL);
    CHECK_ALIGNED(p, 256);
    CHECK(malloc_usable_size(p) >= sz);
    memset(p, 1, sz);
    lfree(p);
  }
}

/* mallinfo2 reports the heap the program actually uses: allocating 10 MiB in small objects
 * moves uordblks by about that much. */
static void t_mallinfo2(void) {
  struct mallinfo2 before = mallinfo2();
  enum { N = 10 * 1024 * 1024 / 64 };
  void **v = malloc(N * sizeof *v);
  CHECK(v != NULL);
  for (size_t i = 0; i < N; i++) {
    v[i] = checked_malloc(64);
    memset(v[i], 1, 64);
  }
  struct mallinfo2 after = mallinfo2();
  for (size_t i = 0; i < N; i++) free(v[i]);
  free(v);
  struct mallinfo2 freed = mallinfo2();
  CHECKF(after.uordblks >= before.uordblks + 9 * 1024 * 1024,
         "uordblks %zu -> %zu after allocating 10 MiB", before.uordblks, after.uordblks);
  CHECKF(after.arena + after.hblkhd >= after.uordblks,
         "arena %zu + hblkhd %zu < uordblks %zu", after.arena, after.hblkhd, after.uordblks);
  CHECKF(freed.uordblks + 8 * 1024 * 1024 <= after.uordblks,
         "uordblks %zu -> %zu after freeing 10 MiB", after.uordblks, freed.uordblks);
}

/* Reads a whole file descriptor (from the start) into buf. */
static size_t read_back(int fd, char *buf, size_t len) {
  lseek(fd, 0, SEEK_SET);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0) got += (size_t)r;
  buf[got] = 0;
  return got;
}

/* malloc_stats is no cancellation point (glibc's is not): a thread with a cancel pending
 * comes back from it and dies only at the next cancellation point. */
static pthread_barrier_t cancel_barrier;
static volatile int cancel_survived;
static void *stats_under_cancel(void *arg) {
  (void)arg;
  pthread_barrier_wait(&cancel_barrier);   /* the cancel is pending after this */
  pthread_barrier_wait(&cancel_barrier);
  malloc_stats();
  cancel_survived = 1;
  for (;;) pthread_testcancel();
  return NULL;
}
static void t_stats_not_cancellation_point(void) {
  int devnull = open("/dev/null", O_WRONLY), saved = dup(2);
  CHECK(devnull >= 0 && saved >= 0 && dup2(devnull, 2) == 2);
  CHECK(pthread_barrier_init(&cancel_barrier, NULL, 2) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, stats_under_cancel, NULL) == 0);
  pthread_barrier_wait(&cancel_barrier);
  CHECK(pthread_cancel(t) == 0);
  pthread_barrier_wait(&cancel_barrier);
  void *ret;
  CHECK(pthread_join(t, &ret) == 0);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  close(devnull);
  CHECK(ret == PTHREAD_CANCELED);
  CHECKF(cancel_survived, "the thread was cancelled inside malloc_stats()");
}

/* malloc_stats (to stderr), malloc_info (XML), malloc_trim, mallopt: present and sane. */
static void t_introspection(void) {
  char *buf = malloc(1 << 16);
  CHECK(buf != NULL);
  void *keep = checked_malloc(1000);

  /* malloc_stats writes to stderr: catch it in a temporary file */
  FILE *tmp = tmpfile();
  CHECK(tmp != NULL);
  fflush(stderr);
  int saved = dup(2);
  CHECK(saved >= 0);
  CHECK(dup2(fileno(tmp), 2) == 2);
  malloc_stats();
  fflush(stderr);
  CHECK(dup2(saved, 2) == 2);
  close(saved);
  size_t n = read_back(fileno(tmp), buf, 1 << 16);
  CHECKF(n > 0, "malloc_stats() printed nothing");
  fclose(tmp);

  tmp = tmpfile();
  CHECK(tmp != NULL);
  CHECK_EQ(malloc_info(0, tmp), 0);
  fflush(tmp);
  n = read_back(fileno(tmp), buf, 1 << 16);
  fclose(tmp);
  CHECKF(n > 0 && !strncmp(buf, "<malloc", 7), "malloc_info output starts with '%.20s'", buf);
  CHECKF(strstr(buf, "</malloc>") != NULL, "malloc_info output has no </malloc>");

  int t = malloc_trim(0);
  CHECKF(t == 0 || t == 1, "malloc_trim(0) = %d", t);
  t = malloc_trim(1 << 20);
  CHECKF(t == 0 || t == 1, "malloc_trim(1 MiB) = %d", t);
  int r = mallopt(M_ARENA_MAX, 8);
  (void)r; /* any int: replacements may ignore glibc's parameters */
  r = mallopt(M_MMAP_THRESHOLD, 1 << 20);
  (void)r;
  /* the heap still works after trimming */
  for (int i = 0; i < 1000; i++) free(checked_malloc((size_t)i * 13));
  memset(keep, 1, 1000);
  free(keep);
  free(buf);
}

/* The Locus API, when a Locus library is loaded. */
static void t_locus_api(void) {
  if (!have_locus) SECTION_SKIP("not a Locus library");
  CHECK(L.version && L.variant && L.purge && L.stats_get && L.stats_json && L.stats_print &&
        L.check_heap);
  CHECKF(!strcmp(L.version(), LOCUS_VERSION), "locus_version() = %s, header says %s",
         L.version(), LOCUS_VERSION);
  const char *var = L.variant();
  CHECK(var != NULL && var[0] != 0);
  test_note("     variant %s, version %s\n", var, L.version());

  locus_stats_t a, b;
  memset(&a, 0xFF, sizeof a);
  CHECK_EQ(L.stats_get(&a), 0);
  CHECK_EQ(a.version, 5);
  CHECK_LE(a.lock_contended, a.lock_acquisitions);
  enum { N = 1000 };
  void *v[N];
  for (int i = 0; i < N; i++) v[i] = checked_malloc(100);
  CHECK_EQ(L.stats_get(&b), 0);
  CHECK_GE(b.malloc_calls, a.malloc_calls + N);
  CHECK_GE(b.bytes_allocated, a.bytes_allocated + N * 100);
  CHECK_GE(b.bytes_mapped, b.bytes_committed);
  CHECK_GE(b.heaps, 1);
  CHECK_LE(b.search_words_max, b.search_words);
  for (int i = 0; i < N; i++) free(v[i]);
  CHECK_EQ(L.stats_get(&a), 0);
  CHECK_GE(a.free_calls, b.free_calls + N);
  CHECK_LE(a.bytes_allocated + N * 100, b.bytes_allocated);

  /* JSON: one object naming the variant; the return value is the full length */
  char json[16384];
  size_t need = L.stats_json(json, sizeof json);
  CHECKF(need > 0 && need < sizeof json, "locus_stats_json needs %zu bytes", need);
  CHECK_EQ(strlen(json), need);
  CHECKF(json[0] == '{' && json[need - 1] == '}', "JSON is not an object: %.60s", json);
  CHECKF(strstr(json, "\"variant\"") && strstr(json, var), "JSON lacks the variant: %.200s", json);
  CHECKF(strstr(json, "\"malloc_calls\""), "JSON lacks malloc_calls: %.200s", json);
  int depth = 0, in_str = 0;
  for (size_t i = 0; i < need; i++) {
    char c = json[i];
    if (in_str) {
      if (c == '\\') i++;
      else if (c == '"') in_str = 0;
    } else if (c == '"') in_str = 1;
    else if (c == '{' || c == '[') depth++;
    else if (c == '}' || c == ']') CHECKF(--depth >= 0, "JSON brackets unbalanced at %zu", i);
  }
  CHECKF(depth == 0 && !in_str, "JSON brackets or quotes unbalanced");
  /* truncation: NUL-terminated within len, same return value */
  char small[16];
  memset(small, 'x', sizeof small);
  CHECK_EQ(L.stats_json(small, sizeof small), need);
  CHECK_EQ(strlen(small), sizeof small - 1);

  /* locus_stats_print writes a table to the descriptor */
  FILE *tmp = tmpfile();
  CHECK(tmp != NULL);
  L.stats_print(fileno(tmp));
  CHECKF(lseek(fileno(tmp), 0, SEEK_END) > 0, "locus_stats_print wrote nothing");
  fclose(tmp);

  /* purge returns, and the heap works afterwards */
  for (int i = 0; i < N; i++) v[i] = checked_malloc((size_t)(i % 50) * 1000 + 1);
  for (int i = 0; i < N; i++) free(v[i]);
  (void)L.purge();
  (void)L.purge();
  for (int i = 0; i < N; i++) {
    v[i] = checked_malloc((size_t)(i % 50) * 1000 + 1);
    memset(v[i], 1, (size_t)(i % 50) * 1000 + 1);
  }
  CHECK_EQ(L.check_heap(), 0);
  for (int i = 0; i < N; i++) free(v[i]);
  CHECK_EQ(L.check_heap(), 0);
}

/* A section for the runs below: a little allocation work, then a normal exit. */
static void t_quiet_run(void) {
  for (size_t i = 0; i < 2000; i++) {
    void *p = checked_malloc(i * 37 % 70000);
    free(p);
  }
}

/* Runs this program's quiet_run section with one more environment entry (NULL: none) and every
 * other LOCUS_* option removed; collects its stderr. Returns the exit status. */
static int run_self(const char *extra, char *err, size_t len) {
  int pfd[2];
  CHECK(pipe(pfd) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    dup2(pfd[1], 2);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);
    extern char **environ;
    /* drop LOCUS_* options the caller may have set (keep the suite's LOCUS_TEST_*) */
    for (int again = 1; again;) {
      again = 0;
      for (char **e = environ; *e; e++)
        if (!strncmp(*e, "LOCUS_", 6) && strncmp(*e, "LOCUS_TEST_", 11)) {
          char name[128];
          size_t n = strcspn(*e, "=");
          if (n >= sizeof name) n = sizeof name - 1;
          memcpy(name, *e, n);
          name[n] = 0;
          unsetenv(name);
          again = 1;
          break;
        }
    }
    if (extra) putenv((char *)extra);
    execl("/proc/self/exe", "conformance_api", "quiet_run", (char *)NULL);
    _exit(127);
  }
  close(pfd[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(pfd[0], err + got, len - 1 - got)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += (size_t)r;
  }
  err[got] = 0;
  close(pfd[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The LOCUS_* options as a user sees them: silence by default, the verbose banner, statistics
 * at exit, warnings for unknown names and bad values (SPEC §1 "Options people can check"). */
static void t_locus_env(void) {
  if (!have_locus) SECTION_SKIP("not a Locus library");
  static char err[65536];
  CHECK_EQ(run_self(NULL, err, sizeof err), 0);
  CHECKF(err[0] == 0, "with no LOCUS_* options the library printed: %.300s", err);

  CHECK_EQ(run_self("LOCUS_VERBOSE=1", err, sizeof err), 0);
  CHECKF(strstr(err, L.variant()) && strstr(err, LOCUS_VERSION),
         "LOCUS_VERBOSE=1 did not print the variant (%s) and version: %.300s", L.variant(), err);

  CHECK_EQ(run_self("LOCUS_STATS=1", err, sizeof err), 0);
  int lines = 0;
  for (const char *c = err; *c; c++) lines += *c == '\n';
  CHECKF(lines >= 3, "LOCUS_STATS=1 printed %d lines at exit: %.300s", lines, err);

  CHECK_EQ(run_self("LOCUS_NO_SUCH_OPTION_XYZ=1", err, sizeof err), 0);
  CHECKF(strstr(err, "LOCUS_NO_SUCH_OPTION_XYZ") != NULL,
         "an unknown LOCUS_ option got no warning naming it: '%.300s'", err);

  CHECK_EQ(run_self("LOCUS_DISCARD=no-such-policy", err, sizeof err), 0);
  CHECKF(strstr(err, "LOCUS_DISCARD") != NULL,
         "a bad value for LOCUS_DISCARD got no warning naming it: '%.300s'", err);
}

/* A use-after-free write of a plain pointer over a freed object's first word (where a free
 * list keeps its link) must not make a later malloc return that pointer: the links are
 * encoded (safe-linking). In a child: what the allocator then makes of the decoded garbage
 * may crash it, which is fine; handing out the chosen address is not. */
static char uaf_target[256] __attribute__((aligned(64)));
static void t_uaf_link_redirect(void) {
  static const size_t sizes[] = {8, 32, 100, 300};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t size = sizes[i];
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      /* enough objects that the first ones' block is used up to its end: allocation then
       * comes from its free list (reap allocators bump first) */
      enum { N = 2 * 16384 / 8 + 8 };
      static char *keep[N];
      for (size_t k = 0; k < N && k * size < 4 * 16384; k++)
        if (!(keep[k] = malloc(size))) _exit(3);
      char *a = keep[0], *b = keep[1];
      free(a);
      free(b);
      *(void *volatile *)b = uaf_target;
      /* allocate until b comes back (other blocks of the class may have room first): the
       * allocation after it is the one a plain link would redirect */
      for (int k = 0; k < 100000; k++) {
        /* (opaque: the compiler takes malloc's result for no static object's address) */
        void *p = opaque_ptr(malloc(size));
        if (p == opaque_ptr(uaf_target)) _exit(1);
        if (p == b) _exit(opaque_ptr(malloc(size)) == opaque_ptr(uaf_target));
      }
      _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECKF(!(WIFEXITED(st) && WEXITSTATUS(st) == 1),
           "a write after free redirected malloc(%zu) to an address the writer chose", size);
  }
}

/* Live 8-byte objects hold data that would decode, under address-only safe-linking, to the
 * end of a free list (the number p >> 12) or to a neighbour in the block: freeing and
 * reallocating them must work (the test that tells a free 8-byte object from a live one reads
 * its link; it once reported such frees as double frees). In a child: a false report aborts. */
static void t_tiny_data_not_link(void) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    enum { N = 4096 };
    static uintptr_t *obj[N];
    for (int k = 0; k < N; k++) if (!(obj[k] = malloc(8))) _exit(3);
    for (int k = 0; k < N; k++) {
      uintptr_t at = (uintptr_t)obj[k];
      *obj[k] = k % 2 ? at >> 12 : (uintptr_t)obj[k ^ 2] ^ (at >> 12);
    }
    for (int k = 0; k < N; k += 4) if (!(obj[k] = realloc(obj[k], 8 + (size_t)(k % 3)))) _exit(3);
    for (int k = 0; k < N; k++) free(obj[k]);
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "freeing live 8-byte objects that hold link-like data failed (status %d)", st);
}

static const test_section_t sections[] = {
    {"one_heap_surface", t_one_heap_surface},
    {"libc_aliases", t_libc_aliases},
    {"mallinfo2", t_mallinfo2},
    {"introspection", t_introspection},
    {"stats_not_cancellation_point", t_stats_not_cancellation_point},
    {"uaf_link_redirect", t_uaf_link_redirect},
    {"tiny_data_not_link", t_tiny_data_not_link},
    {"locus_api", t_locus_api},
    {"locus_env", t_locus_env},
    {"quiet_run", t_quiet_run},
};

int main(int argc, char **argv) {
  have_locus = locus_api_require(&L);
  test_note("conformance_ext: %s\n", have_locus ? L.variant() : "no Locus library (system or peer allocator)");
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
