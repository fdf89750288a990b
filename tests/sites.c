/* sites.c — per-call-site statistics (LOCUS_SITES, locus_sites_json), against every library.
 *
 * Without LOCUS_SITES the program checks that nothing is recorded, then runs itself again with
 * LOCUS_SITES=1, where it checks:
 *   apart     two call sites allocating the same size are two records with their own counts
 *   wrapper   strdup (a libc wrapper) is attributed to the function that called it, even when
 *             the stack below holds stale return addresses of another site (decoys)
 *   aligned   aligned_alloc (through the library's own memalign) is attributed to its caller
 *   calls     calloc and realloc are counted like malloc
 *   thread    a thread's sites stay in the JSON after the thread has exited
 *   json      the object's fields (variant, nsites, sites[] with symbol, calls, bytes, sizes)
 * Skipped (77) when the library is not Locus. The site functions are exported (-rdynamic) so
 * that dladdr names them. */
#include "check.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>

static size_t (*sites_json)(char *, size_t);

#define SITE(name, call)                                                                         \
  __attribute__((noinline)) void *name(size_t n) {                                               \
    void *p = call;                                                                              \
    __asm__ volatile("" : "+r"(p));                                                              \
    return p;                                                                                    \
  }
SITE(sites_test_one, malloc(n))
SITE(sites_test_two, malloc(n))
SITE(sites_test_aligned, aligned_alloc(64, n))
SITE(sites_test_thread, malloc(n))
SITE(sites_test_calloc, calloc(1, n))
SITE(sites_test_realloc, realloc(NULL, n))

/* Decoys: the return address of a call in sites_test_decoy (a plausible site: a word just
 * after a call instruction, in the program's code), written over the stack that strdup and
 * the allocator are about to use. A walk that picks up stale words names sites_test_decoy. */
static uintptr_t decoy_ra;
__attribute__((noinline)) static void record_ra(void) { decoy_ra = (uintptr_t)__builtin_return_address(0); }
__attribute__((noinline)) void sites_test_decoy(void) {
  record_ra();
  __asm__ volatile("");
}
__attribute__((noinline)) static void fill_stack_with_decoys(void) {
  volatile uintptr_t words[2048];
  for (size_t i = 0; i < 2048; i++) words[i] = decoy_ra;
  __asm__ volatile("" : : "r"(words) : "memory");
}

__attribute__((noinline)) char *sites_test_dup(const char *s) {
  char *p = strdup(s);
  __asm__ volatile("" : "+r"(p));
  return p;
}

static char *json_text(void) {
  size_t need = sites_json(NULL, 0) + 4096;   /* this malloc may add a site of its own */
  char *buf = malloc(need);
  CHECK(buf != NULL);
  size_t got = sites_json(buf, need);
  CHECK(got < need && strlen(buf) == got);
  return buf;
}

/* A number field of the record naming `symbol` (0 when absent: fails the check). */
static unsigned long field(const char *json, const char *symbol, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "\"symbol\": \"%s\"", symbol);
  const char *rec = strstr(json, key);
  CHECKF(rec != NULL, "no record for %s in %s", symbol, json);
  const char *end = strchr(rec, '}');
  snprintf(key, sizeof key, "\"%s\": ", name);
  const char *at = strstr(rec, key);
  CHECKF(at != NULL && at < end, "no %s in the record of %s", name, symbol);
  return strtoul(at + strlen(key), NULL, 10);
}

static void *thread_main(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) free(sites_test_thread(24));
  return NULL;
}

static int run_counted(void) {
  void *a[1000], *b[500];
  for (int i = 0; i < 1000; i++) a[i] = sites_test_one(48);
  for (int i = 0; i < 500; i++) b[i] = sites_test_two(48);
  char s[70];
  memset(s, 'x', 69);
  s[69] = 0;
  char *d[300];
  sites_test_decoy();
  for (int i = 0; i < 300; i++) {
    fill_stack_with_decoys();
    d[i] = sites_test_dup(s);
  }
  void *al[100];
  for (int i = 0; i < 100; i++) al[i] = sites_test_aligned(64);
  void *c[50], *r[60];
  for (int i = 0; i < 50; i++) c[i] = sites_test_calloc(40);
  for (int i = 0; i < 60; i++) r[i] = sites_test_realloc(32);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  char *json = json_text();
  CHECK(strncmp(json, "{\"variant\": \"", 13) == 0);
  CHECK(strstr(json, "\"enabled\": true") != NULL);
  CHECK(strstr(json, "\"sites\": [{\"site\": \"0x") != NULL);
  CHECK(json[strlen(json) - 1] == '}');
  /* apart */
  CHECK(field(json, "sites_test_one", "calls") == 1000);
  CHECK(field(json, "sites_test_one", "bytes") == 48000);
  CHECK(field(json, "sites_test_one", "min") == 48);
  CHECK(field(json, "sites_test_one", "max") == 48);
  CHECK(field(json, "sites_test_one", "mode") == 48);
  CHECK(field(json, "sites_test_two", "calls") == 500);
  CHECK(field(json, "sites_test_two", "bytes") == 24000);
  /* wrapper, aligned, thread */
  CHECK(field(json, "sites_test_dup", "calls") == 300);
  CHECK(field(json, "sites_test_dup", "bytes") == 300 * 70);
  CHECKF(!strstr(json, "\"symbol\": \"sites_test_decoy\""), "a stale word was taken for a site: %s", json);
  CHECK(field(json, "sites_test_aligned", "calls") == 100);
  CHECK(field(json, "sites_test_aligned", "bytes") == 100 * 64);
  CHECK(field(json, "sites_test_thread", "calls") == 200);
  CHECK(field(json, "sites_test_calloc", "calls") == 50);
  CHECK(field(json, "sites_test_calloc", "bytes") == 50 * 40);
  CHECK(field(json, "sites_test_realloc", "calls") == 60);
  CHECK(field(json, "sites_test_realloc", "bytes") == 60 * 32);
  /* records are sorted by bytes: one (48,000) before two (24,000) */
  CHECK(strstr(json, "\"sites_test_one\"") < strstr(json, "\"sites_test_two\""));
  test_note("sites: %.300s...\n", json);
  free(json);
  for (int i = 0; i < 1000; i++) free(a[i]);
  for (int i = 0; i < 500; i++) free(b[i]);
  for (int i = 0; i < 300; i++) free(d[i]);
  for (int i = 0; i < 100; i++) free(al[i]);
  for (int i = 0; i < 50; i++) free(c[i]);
  for (int i = 0; i < 60; i++) free(r[i]);
  return 0;
}

int main(int argc, char **argv) {
  (void)argc;
  sites_json = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "locus_sites_json");
  if (!sites_json) {
    test_note("sites: not a Locus library, skipped\n");
    return TEST_SKIP;
  }
  const char *on = getenv("LOCUS_SITES");
  if (on && !strcmp(on, "1")) return run_counted();
  /* Off: allocations from a site leave no record. */
  for (int i = 0; i < 100; i++) free(sites_test_one(48));
  char *json = json_text();
  CHECKF(strstr(json, "\"nsites\": 0,") != NULL && strstr(json, "\"enabled\": false") != NULL,
         "records without LOCUS_SITES: %s", json);
  free(json);
  /* On: the same program again. */
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("LOCUS_SITES", "1", 1);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "with LOCUS_SITES=1: status %#x", status);
  return 0;
}
