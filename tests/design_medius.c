/* design_medius.c — tests that fail if a named mechanism of the Medius design breaks. Run with
 * LD_PRELOAD of liblocus-medius.so (or its debug build); other libraries skip. Sections:
 *   hint_region    a hinted allocation takes a free block of its class in the hint's K-region,
 *                  even when the size-class cache would offer another K-region first
 *   hint_foreign   hints that are not Medius memory (stack, static, a huge object, odd
 *                  addresses) work and fall back to the size-class cache, then to new memory
 *   cache          a free block of the class in another K-region is reused before carving
 *   k_size         the K-region is 2^K bytes: a free block 2^K-near the hint is taken iff it
 *                  lies in the hint's K-region (run with LOCUS_MEDIUS_K=16 too)
 *   k_option       LOCUS_MEDIUS_K=16 is taken, values outside [page shift, 20] are rejected
 *   header         objects are 16 B apart in size with a 16-byte header; double and interior
 *                  frees are caught
 *   zero           calloc and locus_calloc_near zero reused blocks
 *   stats_balance  counters balance after a mixed workload (threads included), and the heap
 *                  check passes
 */
#include "check.h"

#include <malloc.h>
#include <sys/wait.h>

static size_t page;   /* (also a hint: a static address) */
static unsigned kshift;
static locus_api_t api;
static void *(*malloc_near)(size_t, const void *);
static void *(*calloc_near)(size_t, size_t, const void *);

static locus_stats_t stats(void) {
  locus_stats_t s;
  CHECK(api.stats_get(&s) == 0);
  return s;
}

/* The effective LOCUS_MEDIUS_K, read from the statistics JSON. */
static unsigned effective_k(void) {
  static char buf[8192];
  api.stats_json(buf, sizeof buf);
  const char *at = strstr(buf, "\"medius_k\": ");
  CHECKF(at, "no medius_k in %s", buf);
  return (unsigned)strtoul(at + strlen("\"medius_k\": "), NULL, 10);
}

static inline bool same_region(const void *a, const void *b) {
  return (((uintptr_t)a ^ (uintptr_t)b) >> kshift) == 0;
}

/* n objects of `size` bytes (consecutive in a fresh span, so they cover n*(size+16) bytes). */
static char **fill(size_t n, size_t size) {
  char **o = malloc(n * sizeof *o);
  CHECK(o);
  for (size_t i = 0; i < n; i++) CHECK((o[i] = malloc(size)) != NULL);
  return o;
}

static void t_hint_region(void) {
  size_t region = (size_t)1 << kshift, n = 3 * region / 128 + 64;
  char **o = fill(n, 100);                       /* class 112: 128-byte blocks */
  size_t a = 8, b;
  while (a + 4 < n && !same_region(o[a], o[a + 3])) a++;
  for (b = a + 4; b + 8 < n && (same_region(o[a], o[b]) || !same_region(o[b], o[b + 8])); b++) {}
  CHECK(b + 8 < n && same_region(o[a], o[a + 1]) && same_region(o[a], o[a + 3]));
  /* two free blocks in A, then two in B: B's K-region is the newer entry of the cache */
  char *fa1 = o[a + 1], *fa2 = o[a + 3], *fb1 = o[b + 1], *fb2 = o[b + 3];
  free(fa1); free(fa2); free(fb1); free(fb2);
  o[a + 1] = o[a + 3] = o[b + 1] = o[b + 3] = NULL;
  locus_stats_t s0 = stats();
  char *p = malloc_near(100, o[a]);
  CHECKF(p == fa1 || p == fa2, "hinted into %p's K-region: got %p, free there: %p %p", (void *)o[a],
         (void *)p, (void *)fa1, (void *)fa2);
  char *q = malloc_near(100, o[a] + 50);          /* an interior hint is as good */
  CHECK((q == fa1 || q == fa2) && q != p);
  locus_stats_t s1 = stats();
  CHECK_EQ(s1.hint_calls - s0.hint_calls, 2);
  CHECK_EQ(s1.hint_same_kregion - s0.hint_same_kregion, 2);
  CHECK_EQ(s1.pages_in_use, s0.pages_in_use);
  /* A is out of free blocks of the class: the hint now falls back to the cache (B) */
  char *r = malloc_near(100, o[a]);
  CHECKF(r == fb1 || r == fb2, "fallback: got %p, cached %p %p", (void *)r, (void *)fb1, (void *)fb2);
  free(p); free(q); free(r);
  for (size_t i = 0; i < n; i++) free(o[i]);
  free(o);
}

static char static_object[64];

static void t_hint_foreign(void) {
  char stack_object[64];
  char *huge = malloc(1u << 20);
  const void *hints[] = {stack_object, static_object, huge, (void *)1, (void *)(uintptr_t)-16,
                         (void *)(uintptr_t)0x7ff000000000ull, (void *)&page};
  for (size_t i = 0; i < sizeof hints / sizeof *hints; i++) {
    char *p = malloc_near(200, hints[i]);
    CHECKF(p && malloc_usable_size(p) >= 200, "hint %p", hints[i]);
    CHECK_ALIGNED(p, 16);
    memset(p, 0x33, 200);
    /* with a free block of the class cached, a foreign hint takes it */
    free(p);
    char *q = malloc_near(200, hints[i]);
    CHECKF(q == p, "hint %p: the cached block %p is not reused (got %p)", hints[i], (void *)p, (void *)q);
    free(q);
  }
  free(huge);
}

static void t_cache(void) {
  size_t region = (size_t)1 << kshift, n = 2 * region / 64 + 16;
  char **o = fill(n, 48);                        /* 64-byte blocks */
  char *victim = o[3];
  CHECK(!same_region(victim, o[n - 1]));
  free(victim);
  locus_stats_t s0 = stats();
  char *p = malloc(48);
  locus_stats_t s1 = stats();
  CHECKF(p == victim, "the free block %p in an older K-region is not reused (got %p)", (void *)victim,
         (void *)p);
  CHECK_EQ(s1.pages_in_use, s0.pages_in_use);
  /* another class is not served from it: a fresh block */
  free(p);
  char *x = malloc(64);
  CHECK(x != victim);
  free(x);
  o[3] = NULL;
  for (size_t i = 0; i < n; i++) free(o[i]);
  free(o);
}

static void t_k_size(void) {
  /* hint h; f: a free block in the same 64 KiB but (K = 12) another 4 KiB region than h;
   * g: a free block freed after f, in another 64 KiB. The hint takes f iff f is in h's
   * K-region. */
  size_t n = (3u << 16) / 176 + 64;
  char **o = fill(n, 150);                       /* class 160: 176-byte blocks */
  size_t ih = 0;
  while (ih < n && ((uintptr_t)o[ih] & 0xFFFF) > 0x8000) ih++;   /* room above h in its 64 KiB */
  CHECK(ih < n);
  size_t jf = ih + 1;
  while (jf < n && ((uintptr_t)o[jf] - (uintptr_t)o[ih] < 8192 || ((uintptr_t)o[jf] ^ (uintptr_t)o[ih]) >> 16)) jf++;
  size_t jg = jf + 1;
  while (jg < n && !(((uintptr_t)o[jg] ^ (uintptr_t)o[ih]) >> 16)) jg++;
  jg += 8;
  if (jf >= n || jg >= n) { test_note("     (objects not laid out as needed; skipped)\n"); return; }
  char *f = o[jf], *g = o[jg];
  free(f); free(g);
  o[jf] = o[jg] = NULL;
  char *p = malloc_near(150, o[ih]);
  bool near = same_region(f, o[ih]);
  test_note("     K=%u: free block %zu bytes above the hint is %s its K-region\n", kshift,
            (size_t)(f - o[ih]), near ? "in" : "outside");
  CHECKF(p == (near ? f : g), "K=%u: got %p, expected %p (f %p g %p hint %p)", kshift, (void *)p,
         (void *)(near ? f : g), (void *)f, (void *)g, (void *)o[ih]);
  free(p);
  for (size_t i = 0; i < n; i++) free(o[i]);
  free(o);
}

/* Runs this program with LOCUS_MEDIUS_K=value and returns what it printed (--print-k). */
static void run_with_k(const char *value, char *out, size_t len) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "LOCUS_MEDIUS_K=%s /proc/%d/exe --print-k 2>&1", value, (int)getpid());
  FILE *f = popen(cmd, "r");
  CHECK(f);
  size_t got = fread(out, 1, len - 1, f);
  out[got] = 0;
  CHECK(pclose(f) == 0);
}

static void t_k_option(void) {
  const char *env = getenv("LOCUS_MEDIUS_K");
  CHECK_EQ(kshift, env ? (unsigned)atoi(env) : 12u);
  char out[1024];
  run_with_k("16", out, sizeof out);
  CHECKF(strstr(out, "k=16") && !strstr(out, "warning"), "LOCUS_MEDIUS_K=16: '%s'", out);
  const char *bad[] = {"5", "21", "64", "x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    run_with_k(bad[i], out, sizeof out);
    CHECKF(strstr(out, "k=12") && strstr(out, "LOCUS_MEDIUS_K"), "LOCUS_MEDIUS_K=%s: '%s'", bad[i], out);
  }
}

static void double_free_child(size_t n) {
  char *p = malloc(n), *q = malloc(n);
  free(p);
  free(q);
  free(opaque_ptr(p));
}

static void interior_free_child(size_t n) {
  char *p = malloc(n);
  free(opaque_ptr(p + 16));
}

static void t_header(void) {
  for (size_t n = 1; n <= 16384; n += n < 600 ? 1 : 509) {
    char *p = malloc(n);
    size_t want = (n + 15) & ~(size_t)15;
    CHECKF(malloc_usable_size(p) == want, "usable(malloc(%zu)) = %zu", n, malloc_usable_size(p));
    free(p);
  }
  /* a class never used before is carved in a row: blocks one header apart */
  char *a = malloc(12000), *b = malloc(12000);
  CHECKF(b == a + 12000 + 16, "%p then %p", (void *)a, (void *)b);
  free(a); free(b);
  /* double and interior frees end the program with the usual report */
  for (size_t n = 16; n <= 16384; n *= 4) {
    test_expect_fatal(double_free_child, n, "double free");
    test_expect_fatal(interior_free_child, n, "invalid pointer");
  }
}

static void t_zero(void) {
  for (size_t n = 16; n <= 4096; n *= 2) {
    char *p = malloc(n);
    memset(p, 0xAB, n);
    free(p);
    char *q = calloc(1, n);
    CHECK(q == p);
    for (size_t i = 0; i < n; i++) CHECK(q[i] == 0);
    memset(q, 0xCD, n);
    free(q);
    char *r = calloc_near(1, n, q);
    CHECK(r == q);
    for (size_t i = 0; i < n; i++) CHECK(r[i] == 0);
    free(r);
  }
}

static void *thread_alloc(void *arg) {
  void **out = arg;
  for (int i = 0; i < 500; i++) out[i] = malloc(16 + (size_t)i * 24);
  return NULL;
}

static void t_stats_balance(void) {
  static void *warm[500];
  test_run_thread(thread_alloc, warm);   /* the C library's own thread set-up, before we count */
  for (int i = 0; i < 500; i++) free(warm[i]);
  locus_stats_t s0 = stats();
  enum { N = 3000 };
  static void *o[N], *remote[500];
  test_rng_t r = {7};
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)rng_below(&r, i % 50 == 0 ? 40000 : 2000);
    int how = (int)rng_below(&r, 4);
    o[i] = how == 0 ? calloc(1, n) : how == 1 && i ? malloc_near(n, o[i - 1]) : malloc(n);
    CHECK(o[i] || n == 0);
    if (rng_below(&r, 3) == 0) {
      int j = (int)rng_below(&r, (uint64_t)i + 1);
      o[j] = realloc(o[j], (size_t)rng_below(&r, 3000) + 1);
    }
    if (rng_below(&r, 2) == 0) {
      int j = (int)rng_below(&r, (uint64_t)i + 1);
      free(o[j]);
      o[j] = NULL;
    }
  }
  test_run_thread(thread_alloc, remote);
  for (int i = 0; i < 500; i++) free(remote[i]);   /* into the exited thread's heap */
  CHECK_EQ(api.check_heap(), 0);
  for (int i = 0; i < N; i++) free(o[i]);
  locus_stats_t s1 = stats();
  CHECK_EQ(s1.malloc_calls - s0.malloc_calls, s1.free_calls - s0.free_calls);
  CHECK_EQ(s1.bytes_allocated, s0.bytes_allocated);
  CHECK_EQ(s1.huge_in_use, s0.huge_in_use);
  CHECK_EQ(api.check_heap(), 0);
  api.purge();
  CHECK_EQ(api.check_heap(), 0);
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  if (!locus_api_require(&api) || strncmp(api.variant(), "medius", 6) != 0) {
    test_note("design_medius: not a medius library, skipped\n");
    return TEST_SKIP;
  }
  void *s1 = dlsym(RTLD_DEFAULT, "locus_malloc_near"), *s2 = dlsym(RTLD_DEFAULT, "locus_calloc_near");
  memcpy(&malloc_near, &s1, sizeof s1);
  memcpy(&calloc_near, &s2, sizeof s2);
  CHECK(malloc_near && calloc_near);
  free(malloc(1));   /* start-up: options read */
  kshift = effective_k();
  if (argc == 2 && !strcmp(argv[1], "--print-k")) {
    printf("k=%u\n", kshift);
    return 0;
  }
  static const test_section_t sections[] = {
    {"hint_region", t_hint_region},
    {"hint_foreign", t_hint_foreign},
    {"cache", t_cache},
    {"k_size", t_k_size},
    {"k_option", t_k_option},
    {"header", t_header},
    {"zero", t_zero},
    {"stats_balance", t_stats_balance},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
