/* design_vam.c — tests that fail if a named mechanism of the Vam design breaks.
 * Run with LD_PRELOAD of a vam library (liblocus.so or a vam variant). Sections:
 *   reap_order      bump allocation inside a block, then the block's own free list (LIFO)
 *   front_move      a free into a full block moves it to the front of the available list
 *   coalescing      freed neighbouring large objects merge; best fit finds the merged chunk
 *   discard         empty blocks' pages leave RSS (mincore) after a purge, or at once under
 *                   LOCUS_DISCARD=immediate; pages inside a free large object too
 *   burst           RSS returns after a 200 MiB burst is freed and purged
 *   huge_cache      repeated 2 MiB allocations do not map memory each time; a freed cached
 *                   object beyond the resident quarter leaves RSS
 *   fine_classes    small requests 8 bytes apart get blocks of their own, in 16-byte slots
 * Each section allocates a size class nothing else in the process uses, so the block it sees
 * is fresh. */
#include "check.h"

#include <malloc.h>
#include <sys/mman.h>

static size_t page;

/* A section that cannot apply here passes with a note. */
#define TEST_SKIP_NOW(why) do { test_note("skip: %s\n", why); return; } while (0)

static bool bitmap_variant, weak_variant, header_variant;
static int (*stats_get)(locus_stats_t *);
static size_t (*purge)(void);

static bool resident(const void *p) {
  unsigned char v = 0;
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)(page - 1);
  CHECK(mincore((void *)a, page, &v) == 0);
  return v & 1;
}

static size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  CHECK(f && fscanf(f, "%lu %lu", &size, &res) == 2);
  fclose(f);
  return res * page;
}

static bool immediate(void) {
  const char *d = getenv("LOCUS_DISCARD");
  return d && !strcmp(d, "immediate");
}

/* Object size that lands in a medium class (4-page blocks): 232 -> class 240. */
#define REAP_SIZE 232

static void t_reap_order(void) {
  enum { N = 12 };
  char *a[N];
  for (int i = 0; i < N; i++) a[i] = malloc(REAP_SIZE);
  size_t slot = (size_t)(a[1] - a[0]);
  CHECKF(slot >= REAP_SIZE && slot <= REAP_SIZE + 16, "slot %zu", slot);
  for (int i = 1; i < N; i++) CHECKF(a[i] - a[i - 1] == (ptrdiff_t)slot, "bump order broken at %d", i);
  /* Freed objects are not reused while the block still has bump space. */
  free(a[3]);
  free(a[5]);
  char *next = malloc(REAP_SIZE);
  if (bitmap_variant) {   /* vam-bitmap: the first free slot by bitmap search instead */
    CHECKF(next == a[3], "bitmap search should return the first free slot");
    return;
  }
  CHECKF(next == a[N - 1] + slot, "after frees, allocation should bump: got %p", (void *)next);
  /* Exhaust the bump area: then the block's free list is used, most recently freed first. */
  char *start = (char *)((uintptr_t)a[0] & ~(uintptr_t)(page - 1));
  char *end = start + 4 * page;
  char *prev = next, *p;
  int reused = 0;
  for (int guard = 0; guard < 1000; guard++) {
    p = malloc(REAP_SIZE);
    if (p == a[5]) { CHECK(reused == 0); reused = 1; continue; }
    if (p == a[3]) { CHECK(reused == 1); reused = 2; break; }
    CHECKF(p == prev + slot && p + slot <= end, "bump continues in the block: %p after %p", (void *)p, (void *)prev);
    prev = p;
  }
  CHECKF(reused == 2, "the free list was not reused after the bump area ran out");
  /* The block is full now: the next object comes from another block. */
  p = malloc(REAP_SIZE);
  CHECK(p < start || p >= end);
}

static void t_front_move(void) {
  /* 200 -> class 208: fill one block entirely, and start a second. */
  enum { MAX = 400 };
  char *v[MAX];
  int n = 0;
  v[n++] = malloc(200);
  char *first_block = (char *)((uintptr_t)v[0] & ~(uintptr_t)(page - 1));
  while (n < MAX) {
    v[n] = malloc(200);
    if (v[n] < first_block || v[n] >= first_block + 4 * page) break;
    n++;
  }
  CHECKF(n < MAX, "no second block");
  size_t slot = (size_t)(v[1] - v[0]);
  char *in_second = v[n++];
  char *more = malloc(200);   /* the second block still has room */
  CHECK(more == in_second + slot);
  /* A free into the full first block moves it in front: the next object comes from there. */
  char *victim = v[n / 2];
  free(victim);
  char *again = malloc(200);
  CHECKF(again == victim, "expected the freed object of the full block, got %p", (void *)again);
  /* Then the full block is retired again and the second block continues. */
  char *then = malloc(200);
  CHECK(then == more + slot);
}

static void t_coalescing(void) {
  /* Three neighbouring large objects in a fresh region. */
  char *a = malloc(3000), *b = malloc(3000), *c = malloc(3000);
  size_t chunk = (size_t)(b - a);
  CHECKF(c - b == (ptrdiff_t)chunk && chunk >= 3000 && chunk < 3100, "not neighbours");
  char *guard = malloc(3000);   /* keeps the merged chunk from merging with the region's rest */
  free(a);
  free(c);
  free(b);
  /* Best fit: the merged chunk (3 * chunk) is the smallest free chunk that holds this. */
  char *big = malloc(3 * chunk - 64);
  CHECKF(big == a, "merged chunk not found: got %p, expected %p", (void *)big, (void *)a);
  /* Splitting: a small large request takes the front of a bigger free chunk. */
  free(big);
  char *part = malloc(1000);
  CHECK(part == a);
  char *rest = malloc(1000);
  CHECKF(rest > part && rest < guard, "split remainder not reused");
  free(part);
  free(rest);
  free(guard);
}

static void t_discard(void) {
  if (!purge) TEST_SKIP_NOW("no locus_purge");
  /* Medium objects of a class nobody uses (456 -> 464), several blocks. */
  enum { N = 2000 };
  char **v = malloc(N * sizeof *v);
  for (int i = 0; i < N; i++) { v[i] = malloc(456); memset(v[i], 0x5a, 456); }
  char *probe = v[N / 2];
  CHECK(resident(probe));
  for (int i = 0; i < N; i++) free(v[i]);
  if (!immediate()) purge();
  CHECKF(!resident(probe), "the pages of an empty block are still resident");
  /* Pages wholly inside a free large object are discarded too. */
  char *x = malloc(30000), *y = malloc(30000);
  memset(x, 1, 30000);
  memset(y, 1, 30000);
  free(x);
  if (!immediate()) purge();
  CHECKF(!resident(x + 3 * page), "pages inside a free large object are still resident");
  free(y);
  free(v);
}

static void t_burst(void) {
  if (!purge) TEST_SKIP_NOW("no locus_purge");
  size_t before = rss_bytes();
  enum { N = 200000 };
  char **v = malloc(N * sizeof *v);
  for (int i = 0; i < N; i++) {
    size_t n = i % 10 == 0 ? 4000 : 16 + (size_t)(i % 30) * 16;
    v[i] = malloc(n);
    memset(v[i], 1, n);
  }
  size_t peak = rss_bytes();
  for (int i = 0; i < N; i++) free(v[i]);
  free(v);
  purge();
  size_t after = rss_bytes();
  test_note("burst: rss before %zu KiB, peak %zu KiB, after free+purge %zu KiB\n", before >> 10,
            peak >> 10, after >> 10);
  CHECK(peak > before + (100u << 20));
  CHECKF(after < before + (8u << 20), "memory not returned after the burst");
}

static void t_huge_cache(void) {
  if (!stats_get || immediate()) TEST_SKIP_NOW("no statistics or immediate policy");
  locus_stats_t s0, s1;
  free(malloc(2u << 20));
  stats_get(&s0);
  for (int i = 0; i < 100; i++) {
    char *p = malloc(2u << 20);
    p[0] = p[(2u << 20) - 1] = 1;
    free(p);
  }
  stats_get(&s1);
  CHECKF(s1.discard_calls - s0.discard_calls < 10, "each 2 MiB allocation unmapped: %lu calls",
         (unsigned long)(s1.discard_calls - s0.discard_calls));
  /* A cached object beyond the cache's resident quarter (4 of 16 MiB) keeps its mapping but
   * not its pages; a cached object that no request fits is unmapped when a new one is mapped. */
  size_t big = 12u << 20;
  char *p = malloc(big);
  memset(p, 1, big);
  size_t before = rss_bytes();
  free(p);
  size_t after = rss_bytes();
  CHECKF(after + (big / 2) < before, "a freed 12 MiB object stayed resident: RSS %zu -> %zu KiB",
         before >> 10, after >> 10);
  char *q = malloc(big);               /* the cached mapping is reused ... */
  CHECKF(q == p, "the cached 12 MiB mapping was not reused");
  free(q);
  stats_get(&s0);
  char *r = malloc(3 * big / 2);       /* ... and dropped for a request it cannot serve */
  stats_get(&s1);
  CHECKF(s1.bytes_mapped < s0.bytes_mapped + big, "the cached mapping was kept beside a new "
         "one: mapped %lu -> %lu MiB", (unsigned long)(s0.bytes_mapped >> 20),
         (unsigned long)(s1.bytes_mapped >> 20));
  free(r);
}

static void t_fine_classes(void) {
  /* 88 and 96 bytes: one 96-byte slot size, two classes. Objects of each size follow one
   * another in their own block, and no block holds both. */
  enum { N = 8 };
  char *a[N], *b[N];
  for (int i = 0; i < N; i++) { a[i] = malloc(88); b[i] = malloc(96); }
  /* The slot: 96, or 88 in the weakly aligned q8 build, or 112 with vam-header's header. */
  size_t slot = (size_t)(a[1] - a[0]), want = weak_variant ? 88 : header_variant ? 112 : 96;
  CHECKF(slot == want, "88-byte objects %zu bytes apart, expected %zu", slot, want);
  for (int i = 0; i < N; i++) {
    CHECKF(((uintptr_t)a[i] & 15) == 0 || weak_variant, "88-byte object %p not 16-aligned", (void *)a[i]);
    CHECKF(malloc_usable_size(a[i]) >= 88, "usable size %zu", malloc_usable_size(a[i]));
    if (i) CHECKF(a[i] - a[i - 1] == (ptrdiff_t)slot && b[i] - b[i - 1] == b[1] - b[0],
                  "same-size objects not consecutive at %d", i);
  }
  uintptr_t block_a = (uintptr_t)a[0] & ~(uintptr_t)(page - 1), block_b = (uintptr_t)b[0] & ~(uintptr_t)(page - 1);
  CHECKF(block_a != block_b, "88- and 96-byte objects share the block at %p", (void *)block_a);
  for (int i = 0; i < N; i++) { free(a[i]); free(b[i]); }
}

int main(int argc, char **argv) {
  page = (size_t)sysconf(_SC_PAGESIZE);
  const char *(*variant)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "locus_variant");
  if (!variant || strncmp(variant(), "vam", 3) != 0) {
    test_note("design_vam: not a vam library, skipped\n");
    return TEST_SKIP;
  }
  bitmap_variant = !strcmp(variant(), "vam-bitmap");
  weak_variant = !strcmp(variant(), "vam-q8");
  header_variant = !strcmp(variant(), "vam-header");
  stats_get = (int (*)(locus_stats_t *))dlsym(RTLD_DEFAULT, "locus_stats_get");
  purge = (size_t (*)(void))dlsym(RTLD_DEFAULT, "locus_purge");
  static const struct test_section sections[] = {
    { "reap_order", t_reap_order },
    { "front_move", t_front_move },
    { "coalescing", t_coalescing },
    { "discard", t_discard },
    { "burst", t_burst },
    { "huge_cache", t_huge_cache },
    { "fine_classes", t_fine_classes },
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
