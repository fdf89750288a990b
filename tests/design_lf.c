/* design_lf.c — tests that fail if a named mechanism of the LF design (or its pow2 baseline)
 * breaks. Run with LD_PRELOAD of liblocus-lf.so, liblocus-lf-debug.so or liblocus-pow2.so
 * (other libraries skip), with LOCUS_LF_THRESHOLD unset or small, LOCUS_LF_OPT on or off.
 * Sections:
 *   classes      usable sizes are powers of two from 16 B to 2 KiB, then whole pages
 *   pow2_only    pow2: one site allocating one size a thousand times stays on the standard bin
 *   threshold    lf: a (site, size) pair is served by the standard bin for its first THRESHOLD
 *                allocations and by a custom bin of exactly its size (rounded to 16) after
 *   shared_bins  lf: a custom bin is its size's, shared by every site decided for that size:
 *                two sites of one size fill one bin (one bin made, one shared) and a slot
 *                freed by one site's object is reused by the other's; a custom bin's pages
 *                never hold objects of another size nor standard-bin objects
 *   opt          lf: a site that crossed the threshold gets a custom bin for a new size at once
 *                (LOCUS_LF_OPT=0: only after the threshold again)
 *   apart        lf: two sites allocating one size are counted apart
 *   wrappers     lf: strdup called from two functions counts as two sites (the allocator looks
 *                past libc to the caller)
 *   sites        lf with LOCUS_SITES=1: at exit a line per call site gives its module, calls and
 *                whether it got a custom bin
 *   bounds       lf: 100,000 distinct call sites (one function made of 100,000 calls to malloc
 *                by the assembler's .rept, see lf_many_sites below): the site table stops at its
 *                bound and says so (table_full), allocation goes on; with a threshold of at most
 *                3, thousands of pairs of one size are decided and share one custom bin
 */
#include "check.h"

#include <malloc.h>
#include <sys/mman.h>

static size_t page;
static unsigned long threshold = 100;
static bool lf_opt = true, is_lf;
static size_t (*lf_json)(char *, size_t);

/* 100,000 distinct call sites without generating 100,000 functions: the assembler repeats one
 * call to malloc, so every repetition has its own return address. out[i] = malloc(size). */
#define MANY_SITES 100000
void lf_many_sites(void **out, size_t size);
__asm__(".text\n"
        ".globl lf_many_sites\n"
        ".type lf_many_sites, @function\n"
        "lf_many_sites:\n"
        "  push %rbx\n"
        "  push %r12\n"
        "  push %r13\n"
        "  mov %rdi, %rbx\n"
        "  mov %rsi, %r12\n"
        "  .rept 100000\n"
        "  mov %r12, %rdi\n"
        "  call malloc@PLT\n"
        "  mov %rax, (%rbx)\n"
        "  add $8, %rbx\n"
        "  .endr\n"
        "  pop %r13\n"
        "  pop %r12\n"
        "  pop %rbx\n"
        "  ret\n"
        ".size lf_many_sites, .-lf_many_sites\n");

/* Distinct call sites: each function has its own call instruction (no tail call: the result is
 * used after the call). */
#define SITE(name)                                                                               \
  static __attribute__((noinline)) void *name(size_t n) {                                          \
    void *p = malloc(n);                                                                           \
    __asm__ volatile("" : "+r"(p));                                                                \
    return p;                                                                                      \
  }
SITE(site_a)
SITE(site_b)
SITE(site_c)
SITE(site_d)

static __attribute__((noinline)) char *dup_a(const char *s) {
  char *p = strdup(s);
  __asm__ volatile("" : "+r"(p));
  return p;
}
static __attribute__((noinline)) char *dup_b(const char *s) {
  char *p = strdup(s);
  __asm__ volatile("" : "+r"(p));
  return p;
}

/* locus_check_heap's count of problems found (0 where the library has none to check). */
static int locus_check_heap_if_any(void) {
  int (*check)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "locus_check_heap");
  return check ? check() : 0;
}

/* A counter of LF's statistics JSON ("name": value). */
static unsigned long lf_stat(const char *name) {
  char buf[2048], key[64];
  CHECK(lf_json != NULL);
  CHECK(lf_json(buf, sizeof buf) < sizeof buf);
  snprintf(key, sizeof key, "\"%s\": ", name);
  const char *at = strstr(buf, key);
  CHECKF(at != NULL, "no %s in %s", name, buf);
  return strtoul(at + strlen(key), NULL, 10);
}

static size_t pow2_size(size_t n) {
  size_t s = 16;
  while (s < n) s <<= 1;
  return s;
}

static void t_classes(void) {
  if (is_lf && threshold < 20) return;   /* one site, many sizes: would cross a tiny threshold */
  for (size_t n = 0; n <= 4096; n++) {
    void *p = malloc(n);
    size_t want = n <= 2048 ? pow2_size(n ? n : 1) : (n + page - 1) / page * page;
    CHECKF(malloc_usable_size(p) == want, "usable(malloc(%zu)) = %zu, not %zu", n, malloc_usable_size(p), want);
    free(p);
  }
}

static void t_pow2_only(void) {
  if (is_lf) return;
  void *v[1000];
  for (int i = 0; i < 1000; i++) {
    v[i] = site_a(70);
    CHECK_EQ(malloc_usable_size(v[i]), (size_t)128);
  }
  for (int i = 0; i < 1000; i++) free(v[i]);
  CHECK_EQ(lf_stat("custom_bins"), 0ul);
}

/* Allocates n objects of `size` from site f into v, checking each usable size: `before` for the
 * first `switch_at` of them, `after` from then on. */
static void run_site(void *(*f)(size_t), size_t size, void **v, size_t n, size_t switch_at, size_t before,
                     size_t after) {
  for (size_t i = 0; i < n; i++) {
    v[i] = f(size);
    size_t want = i < switch_at ? before : after;
    CHECKF(malloc_usable_size(v[i]) == want, "allocation %zu of %zu B: usable %zu, not %zu", i + 1, size,
           malloc_usable_size(v[i]), want);
  }
}

static void free_all(void **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
}

static void t_threshold(void) {
  if (!is_lf) return;
  unsigned long bins = lf_stat("bins_created");
  size_t n = threshold + 50;
  void **v = calloc(n, sizeof *v);
  run_site(site_a, 70, v, n, threshold, 128, 80);
  CHECK_EQ(lf_stat("bins_created"), bins + 1);
  CHECK_GE(lf_stat("custom_blocks"), 1ul);
  free_all(v, n);
  free(v);
  CHECK(locus_check_heap_if_any() == 0);
}

typedef struct tagged { uintptr_t page; int bin; } tagged_t;

static int cmp_tagged(const void *x, const void *y) {
  const tagged_t *a = x, *b = y;
  return a->page < b->page ? -1 : a->page > b->page;
}

static void t_shared_bins(void) {
  if (!is_lf) return;
  enum { EACH = 600 };
  size_t n = threshold + EACH;
  void **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b), **c = calloc(n, sizeof *c);
  unsigned long created = lf_stat("bins_created"), shared = lf_stat("bins_shared");
  run_site(site_a, 70, a, n, threshold, 128, 80);
  run_site(site_b, 70, b, n, threshold, 128, 80);
  run_site(site_c, 100, c, n, threshold, 128, 112);
  /* Sites a and b share one 80-B bin, whoever made it; c has the 112-B bin. */
  CHECK_GE(lf_stat("bins_shared") - shared, 1ul);
  CHECK_LE(lf_stat("bins_created") - created, 2ul);
  void *d[EACH];                                      /* standard 128-B objects of one more site */
  for (int i = 0; i < EACH; i++) d[i] = site_d(128);
  /* Tag the page of every object with its bin (80 B, 112 B or a standard bin); no page may
   * carry two tags. Objects are at most 128 B, so an object's first byte names its block's page. */
  tagged_t *t = calloc(4 * n, sizeof *t);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {        /* the first `threshold` of each: the standard bin */
    t[k++] = (tagged_t){ (uintptr_t)a[i] / page, i < threshold ? 128 : 80 };
    t[k++] = (tagged_t){ (uintptr_t)b[i] / page, i < threshold ? 128 : 80 };
    t[k++] = (tagged_t){ (uintptr_t)c[i] / page, i < threshold ? 128 : 112 };
  }
  for (int i = 0; i < EACH; i++) t[k++] = (tagged_t){ (uintptr_t)d[i] / page, 128 };
  qsort(t, k, sizeof *t, cmp_tagged);
  for (size_t i = 1; i < k; i++)
    CHECKF(t[i].page != t[i - 1].page || t[i].bin == t[i - 1].bin, "page %#lx holds objects of bins %d and %d",
           (unsigned long)t[i].page * page, t[i - 1].bin, t[i].bin);
  /* A slot freed by site a's object is reused by site b's next one (same bin). */
  void *freed = a[n - 1];
  free(freed);
  a[n - 1] = NULL;
  void *again = site_b(70);
  CHECKF(again == freed, "site b's object at %p, not in the slot %p site a freed", again, freed);
  free(again);
  free_all(a, n - 1);
  free_all(b, n);
  free_all(c, n);
  for (int i = 0; i < EACH; i++) free(d[i]);
  free(t);
  free(a);
  free(b);
  free(c);
  CHECK(locus_check_heap_if_any() == 0);
}

static void t_opt(void) {
  if (!is_lf) return;
  size_t n = threshold + 1;
  void **v = calloc(n, sizeof *v), **w = calloc(n, sizeof *w);
  run_site(site_a, 70, v, n, threshold, 128, 80);      /* site_a becomes intense */
  unsigned long intense = lf_stat("intense");
  CHECK_GE(intense, 1ul);
  /* A new size from the intense site: a custom bin at once with LF-opt, else after the
   * threshold. */
  run_site(site_a, 200, w, n, lf_opt ? 0 : threshold, 256, 208);
  /* Another site is not intense: its new size waits for the threshold. */
  free_all(w, n);
  run_site(site_b, 200, w, n, threshold, 256, 208);
  free_all(v, n);
  free_all(w, n);
  free(v);
  free(w);
}

static void t_apart(void) {
  if (!is_lf || threshold < 10) return;
  size_t part = threshold * 6 / 10, n = threshold + 20;
  void **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
  /* Together the two sites pass the threshold; each alone does not. */
  run_site(site_a, 70, a, part, part, 128, 80);
  run_site(site_b, 70, b, part, part, 128, 80);
  /* Site a goes on: its own count decides. */
  for (size_t i = part; i < n; i++) {
    a[i] = site_a(70);
    size_t want = i < threshold ? 128 : 80;
    CHECKF(malloc_usable_size(a[i]) == want, "site a, allocation %zu: usable %zu, not %zu", i + 1,
           malloc_usable_size(a[i]), want);
  }
  free_all(a, n);
  free_all(b, part);
  free(a);
  free(b);
}

static void t_wrappers(void) {
  if (!is_lf || threshold < 10) return;
  char s[70];
  memset(s, 'x', 69);
  s[69] = 0;                                            /* strdup asks for 70 B */
  size_t part = threshold * 6 / 10, n = threshold + 20;
  char **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
  for (size_t i = 0; i < part; i++) {
    a[i] = dup_a(s);
    b[i] = dup_b(s);
    CHECKF(malloc_usable_size(a[i]) == 128 && malloc_usable_size(b[i]) == 128,
           "strdup from two functions counted as one site (allocation %zu of each)", i + 1);
  }
  for (size_t i = part; i < n; i++) {
    a[i] = dup_a(s);
    size_t want = i < threshold ? 128 : 80;
    CHECKF(malloc_usable_size(a[i]) == want, "dup_a, allocation %zu: usable %zu, not %zu", i + 1,
           malloc_usable_size(a[i]), want);
    CHECK(strcmp(a[i], s) == 0);
  }
  CHECK_GE(lf_stat("wrapper_walks"), (unsigned long)(2 * part));
  free_all((void **)a, n);
  free_all((void **)b, part);
  free(a);
  free(b);
}

static void t_bounds(void) {
  if (!is_lf) return;
  void **v = malloc(MANY_SITES * sizeof *v);
  unsigned long table_max = lf_stat("table_max");
  lf_many_sites(v, 48);
  for (size_t i = 0; i < MANY_SITES; i++) {
    CHECK(v[i] != NULL);
    memset(v[i], 1, 48);
  }
  unsigned long pairs = lf_stat("pairs"), full = lf_stat("table_full");
  test_note("bounds: %lu pairs in the table (bound %lu), %lu not recorded\n", pairs, table_max, full);
  CHECK_LE(pairs, table_max);
  CHECK_GT(full, 0ul);
  free_all(v, MANY_SITES);
  if (threshold <= 3) {
    /* Enough rounds for every recorded site to cross the threshold: thousands of decided
     * pairs of one size, and one bin for them all (bins are the size's, not the site's). */
    unsigned long before = lf_stat("custom_bins"), shared = lf_stat("bins_shared");
    for (unsigned long r = 0; r < threshold + 1; r++) {
      lf_many_sites(v, 48);
      free_all(v, MANY_SITES);
    }
    unsigned long bins = lf_stat("custom_bins"), max = lf_stat("custom_bins_max");
    test_note("bounds: %lu custom bins (bound %lu), %lu pairs joined a bin\n", bins, max,
              lf_stat("bins_shared") - shared);
    CHECK_LE(bins, max);
    CHECK_LE(bins, before + 1);
    CHECK_GT(lf_stat("bins_shared") - shared, 1000ul);
  }
  void *p = site_a(48);                                /* allocation goes on */
  CHECK(p != NULL);
  free(p);
  free(v);
  CHECK(locus_check_heap_if_any() == 0);
}

static void sites_child(void) {
  for (unsigned long i = 0; i < threshold + 10; i++) site_c(70);   /* leaks: the report counts */
  exit(0);                                                          /* runs the exit report */
}

static void t_sites(void) {
  const char *on = getenv("LOCUS_SITES");
  if (!is_lf || !on || strcmp(on, "1") != 0) return;
  test_child_t c;
  test_run_child(sites_child, &c);
  CHECKF(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0, "child: %s", c.how);
  CHECKF(strstr(c.err, "locus: call sites") != NULL, "no site report in: %s", c.err);
  char want[128];
  snprintf(want, sizeof want, "(design_lf) calls %lu bytes %lu custom yes", threshold + 10, (threshold + 10) * 70);
  CHECKF(strstr(c.err, want) != NULL, "no line with '%s' in: %s", want, c.err);
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  const char *(*var)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "locus_variant");
  if (!var || (strcmp(var(), "pow2") != 0 && strncmp(var(), "lf", 2) != 0)) {
    test_note("design_lf: not a pow2 or lf library, skipped\n");
    return TEST_SKIP;
  }
  is_lf = strncmp(var(), "lf", 2) == 0;
  lf_json = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "locus_lf_stats_json");
  CHECK(lf_json != NULL);
  const char *t = getenv("LOCUS_LF_THRESHOLD");
  if (t && *t) threshold = strtoul(t, NULL, 10);
  const char *o = getenv("LOCUS_LF_OPT");
  if (o && (!strcmp(o, "0") || !strcmp(o, "off"))) lf_opt = false;
  static const test_section_t sections[] = {
    {"classes", t_classes},
    {"pow2_only", t_pow2_only},
    {"threshold", t_threshold},
    {"shared_bins", t_shared_bins},
    {"opt", t_opt},
    {"apart", t_apart},
    {"wrappers", t_wrappers},
    {"sites", t_sites},
    {"bounds", t_bounds},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
