/* design_phk.c — tests that fail if a named mechanism of the PHK design or one of its variants
 * breaks. Run with LD_PRELOAD of a phk library (liblocus-phk.so, -phk-hw, -phk-sc, -phk-reap,
 * -phk-sc-reap); other libraries skip. Sections:
 *   rounding      phk: power-of-two chunks from 16 B (usable(33) == 64, 17..32 share a chunk);
 *                 phk-sc: chunks 16 B apart (usable(33) == 48) with an 8-byte class
 *   whole_pages   half a page and more: whole pages (a page run up to 1 MiB, then own mapping)
 *   first_fit     free page runs: address-ordered first fit (the lowest run that fits, not the
 *                 best fit nor the most recently freed)
 *   lowest_chunk  bitmap variants: every allocation returns the lowest free chunk of its class
 *                 (pages with free chunks in address order, first free bit in the page)
 *   reap_order    reap variants: consecutive addresses; a freed chunk is reused only once the
 *                 page's bump area is exhausted (bitmap variants: reused at once)
 *   search_words  phk-hw: at most 2 bitmap words per search; phk: grows with chunks per page
 *   double_free   exact: a chunk freed twice with other frees in between is caught
 *   aligned       power-of-two chunks are aligned to their size; bigger alignments: page runs
 *   realloc       in place while the chunk fits and is not more than twice the request
 */
#include "check.h"

#include <malloc.h>
#include <sys/wait.h>

static size_t page;
static const char *variant;
static bool reap, sc, hw;
static int (*stats_get)(locus_stats_t *);

static locus_stats_t stats(void) {
  locus_stats_t s;
  CHECK(stats_get && stats_get(&s) == 0);
  return s;
}

/* The chunk size phk gives a request below half a page. */
static size_t expected_chunk(size_t n) {
  if (sc && n <= 2048) return n <= 8 ? 8 : (n + 15) & ~(size_t)15;
  size_t c = 16;
  while (c < n) c <<= 1;
  return c;
}

static void t_rounding(void) {
  if (sc) CHECK_EQ(malloc_usable_size(opaque_ptr(malloc(33))), 48);
  else CHECK_EQ(malloc_usable_size(opaque_ptr(malloc(33))), 64);
  for (size_t n = 0; n < page / 2; n += n < 300 ? 1 : 97) {
    void *p = malloc(n);
    CHECKF(malloc_usable_size(p) == expected_chunk(n ? n : 1), "usable(malloc(%zu)) = %zu", n,
           malloc_usable_size(p));
    free(p);
  }
  /* 17..32 share one class: the same chunk serves all of them in turn (bitmap variants reuse
   * the lowest free chunk at once; reap variants bump through one page). */
  char *first = malloc(17), *prev = first;
  if (!reap) free(first);
  for (size_t n = 18; n <= 32; n++) {
    char *p = malloc(n);
    if (reap) {
      CHECKF(p == prev + 32 || ((uintptr_t)p & (page - 1)) == 0, "malloc(%zu) not after %p", n,
             (void *)prev);
      prev = p;
    } else {
      CHECKF(p == first, "malloc(%zu) = %p, malloc(17) was %p", n, (void *)p, (void *)first);
      free(p);
    }
  }
}

/* From half a page up, whole pages from the page manager (pages_in_use grows by the run) up to
 * the OS threshold (1 MiB), then an own mapping. */
static void t_whole_pages(void) {
  size_t sizes[] = {page / 2, page / 2 + 1, page, 3 * page - 5, (1u << 20) - 1};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i], pages = (n + page - 1) / page;
    locus_stats_t a = stats();
    char *p = malloc(n);
    locus_stats_t b = stats();
    CHECK_ALIGNED(p, page);
    CHECK_EQ(malloc_usable_size(p), pages * page);
    CHECKF(b.pages_in_use - a.pages_in_use == pages, "malloc(%zu): %lu pages taken, not %zu", n,
           (unsigned long)(b.pages_in_use - a.pages_in_use), pages);
    free(p);
  }
  locus_stats_t a = stats();
  char *big = malloc(1u << 20);
  locus_stats_t b = stats();
  CHECK_EQ(b.pages_in_use, a.pages_in_use);
  CHECK_EQ(b.huge_in_use, a.huge_in_use + 1);
  free(big);
}

static void t_first_fit(void) {
  /* A B C D E, one page each; B and D freed (D last): the lowest fitting run is B. */
  char *o[5];
  for (int i = 0; i < 5; i++) o[i] = malloc(page);
  CHECK(o[0] < o[1] && o[1] < o[2] && o[2] < o[3] && o[3] < o[4]);
  free(o[1]);
  free(o[3]);
  char *x = malloc(page);
  CHECKF(x == o[1], "got %p, not the lowest free run %p (D %p)", (void *)x, (void *)o[1], (void *)o[3]);
  char *y = malloc(page);
  CHECK(y == o[3]);
  free(x);
  free(y);
  for (int i = 0; i < 5; i++) if (i != 1 && i != 3) free(o[i]);
  /* A B(2 pages) C D(1 page) E: a 1-page request takes the front of B (first fit), not D
   * (best fit), then the rest of B, then D. */
  char *a = malloc(page), *b = malloc(2 * page), *c = malloc(page), *d = malloc(page), *e = malloc(page);
  CHECK(a < b && b < c && c < d && d < e);
  free(b);
  free(d);
  char *p1 = malloc(page), *p2 = malloc(page), *p3 = malloc(page);
  CHECKF(p1 == b && p2 == b + page && p3 == d, "got %p %p %p; B %p D %p", (void *)p1, (void *)p2,
         (void *)p3, (void *)b, (void *)d);
}

static int cmp_ptr(const void *x, const void *y) {
  uintptr_t a = *(const uintptr_t *)x, b = *(const uintptr_t *)y;
  return a < b ? -1 : a > b;
}

static void t_lowest_chunk(void) {
  if (reap) { test_note("     (reap variant: no bitmap search)\n"); return; }
  enum { N = 400, FREED = 100 };
  char *o[N];
  uintptr_t freed[FREED];
  test_rng_t r = {42};
  for (int i = 0; i < N; i++) o[i] = malloc(100);   /* class 128 */
  for (int k = 0; k < FREED; k++) {
    int i;
    do i = (int)rng_below(&r, N); while (!o[i]);
    freed[k] = (uintptr_t)o[i];
    free(o[i]);
    o[i] = NULL;
  }
  qsort(freed, FREED, sizeof *freed, cmp_ptr);
  for (int k = 0; k < FREED; k++) {
    uintptr_t p = (uintptr_t)malloc(100);
    CHECKF(p == freed[k], "allocation %d: %#lx, the lowest free chunk is %#lx", k,
           (unsigned long)p, (unsigned long)freed[k]);
  }
}

static void t_reap_order(void) {
  size_t n = 300, slot = expected_chunk(n), per_page = page / slot;
  char *a = malloc(n), *b = malloc(n);
  CHECK(b == a + slot);
  free(a);
  char *c = malloc(n);
  if (!reap) {
    CHECKF(c == a, "bitmap: the freed lowest chunk is reused at once");
    return;
  }
  CHECKF(c == b + slot, "reap: allocation bumps past the freed chunk");
  /* a reap page has no in-page header: the first chunk of the class starts a fresh page */
  CHECKF(((uintptr_t)a & (page - 1)) == 0, "first %zu-byte chunk %p is not a fresh page", slot, (void *)a);
  for (size_t i = 3; i < per_page; i++) CHECK((char *)malloc(n) == a + i * slot);
  char *d = malloc(n);
  CHECKF(d == a, "bump area exhausted: the freed chunk %p comes back, got %p", (void *)a, (void *)d);
}

static void t_search_words(void) {
  if (reap) {
    locus_stats_t a = stats();
    for (int i = 0; i < 1000; i++) malloc(16);
    CHECK_EQ(stats().searches, a.searches);
    return;
  }
  size_t words16 = page / 16 / 64;          /* bitmap words of a 16-byte-chunk page */
  /* page/64-byte chunks (64 B on 4 KiB pages): one word per page; 16-byte chunks: page/1024 */
  locus_stats_t a = stats();
  for (int i = 0; i < 2000; i++) malloc(page / 64);
  locus_stats_t b = stats();
  size_t n16 = 2 * page / 16 > 4000 ? 2 * page / 16 : 4000;     /* a full page at least */
  for (size_t i = 0; i < n16; i++) malloc(16);
  locus_stats_t c = stats();
  uint64_t s1 = b.searches - a.searches, w1 = b.search_words - a.search_words;
  uint64_t s2 = c.searches - b.searches, w2 = c.search_words - b.search_words;
  CHECK_EQ(s1, 2000);
  CHECK_EQ(s2, n16);
  test_note("     %zu B: %.2f words/search; 16 B: %.2f words/search, max %lu\n", page / 64, (double)w1 / s1,
            (double)w2 / s2, (unsigned long)c.search_words_max);
  if (hw) {
    CHECK_EQ(w1, 2 * s1);                   /* summary word + bitmap word, whatever the page */
    CHECK_EQ(w2, 2 * s2);
    CHECK_LE(c.search_words_max, 2);
  } else {
    CHECK_EQ(w1, s1);
    CHECKF(w2 * 2 > s2 * words16, "linear search over %zu words: mean %.2f", words16,
           (double)w2 / s2);
    CHECK_GE(c.search_words_max, words16);
  }
}

/* A child frees `p` twice with another free in between; it must die naming a double free. */
static void double_free_child(size_t n) {
  char *p = malloc(n), *q = malloc(n);
  free(p);
  free(q);
  free(opaque_ptr(p));
}

static void t_double_free(void) {
  /* (reap pages of 8-byte chunks have no room for a marker: only a free of the list head is
   * caught there, so phk-sc-reap starts at 16) */
  for (size_t n = sc && reap ? 16 : 8; n <= 2048; n *= 2) test_expect_fatal(double_free_child, n, "double free");
}

static void t_aligned(void) {
  for (size_t align = 32; align <= page / 2; align *= 2) {
    void *p = NULL;
    CHECK(posix_memalign(&p, align, 10) == 0);
    CHECK_ALIGNED(p, align);
    size_t us = malloc_usable_size(p);
    CHECKF(us == align, "align %zu: usable %zu: not the chunk class of the alignment", align, us);
    free(p);
  }
  void *p = NULL;
  CHECK(posix_memalign(&p, 4 * page, 100) == 0);
  CHECK_ALIGNED(p, 4 * page);
  CHECK_EQ(malloc_usable_size(p), page);
  free(p);
}

static void t_realloc(void) {
  char *p = malloc(40);
  size_t us = malloc_usable_size(p);
  for (size_t n = us / 2 + 1; n <= us; n++) CHECKF(realloc(p, n) == p, "realloc to %zu moved", n);
  char *q = realloc(p, us + 1);
  CHECK(q != p && malloc_usable_size(q) > us);
  p = malloc(40);
  us = malloc_usable_size(p);
  q = realloc(p, us / 2);
  CHECK(q != p);
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  const char *(*var)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "locus_variant");
  if (!var || strncmp(var(), "phk", 3) != 0) {
    test_note("design_phk: not a phk library, skipped\n");
    return TEST_SKIP;
  }
  variant = var();
  reap = strstr(variant, "reap") != NULL;
  sc = strstr(variant, "-sc") != NULL;
  hw = strstr(variant, "-hw") != NULL;
  stats_get = (int (*)(locus_stats_t *))dlsym(RTLD_DEFAULT, "locus_stats_get");
  static const test_section_t sections[] = {
    {"rounding", t_rounding},
    {"whole_pages", t_whole_pages},
    {"first_fit", t_first_fit},
    {"lowest_chunk", t_lowest_chunk},
    {"reap_order", t_reap_order},
    {"search_words", t_search_words},
    {"double_free", t_double_free},
    {"aligned", t_aligned},
    {"realloc", t_realloc},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
