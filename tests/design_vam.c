/* design_vam.c — tests that fail if a named mechanism of the Vam design breaks.
 * Run with LD_PRELOAD of a vam library (liblocus.so or a vam variant). Sections:
 *   reap_order      bump allocation inside a block, then the block's own free list (LIFO);
 *                   the flagship's thread cache (its last freed objects, linked under a
 *                   secret key) before both
 *   front_move      a free into a full block moves it to the front of the available list
 *   tcache_reap     a class whose blocks are mostly empty slots turns its thread-cache bin
 *                   off while it churns, so that its sparse blocks drain and go back
 *   coalescing      freed neighbouring large objects merge; best fit finds the merged chunk
 *   large_cache     the flagship's thread cache keeps freed large objects whole: the next
 *                   request of their class takes the last freed first if it fits, split to
 *                   its size
 *   split_runt      a large object placed in a bigger free chunk gives back a rest smaller
 *                   than any large object (malloc(5392) in a freed 5,808-byte hole keeps 5,392
 *                   bytes), and the rest merges back when its neighbour is freed
 *   discard         empty blocks' pages leave RSS (mincore) after a purge, or at once under
 *                   LOCUS_DISCARD=immediate; pages inside a free large object too
 *   burst           RSS returns after a 200 MiB burst is freed and purged
 *   huge_cache      repeated 2 MiB allocations do not map memory each time; big buffers
 *                   replaced at random are made of freed ones' pages (few faults, calloc
 *                   zeroes); the cache stays within recent demand, is emptied by purge and
 *                   after the decay time, and is not used under LOCUS_DISCARD=immediate
 *   huge_threads    threads replacing, growing and freeing big buffers in shared slots keep
 *                   every buffer's content (the cache's pieces are never handed out twice)
 *   fine_classes    small requests 8 bytes apart get blocks of their own, in 16-byte slots
 *   page_sizes      2 and 4 KiB objects come from medium blocks on their own boundaries, and
 *                   in the flagship's builds 8, 16 and 32 KiB ones from power-of-two blocks:
 *                   page-aligned, their size exactly, freed ones reused first (thread cache)
 *   sites           vam-sites: once two call sites that allocate one size are hot
 *                   (LOCUS_LF_THRESHOLD calls, default 100), their objects never share a page
 *                   block; before that, and in every other vam build, they interleave
 * Each section allocates a size class nothing else in the process uses, so the block it sees
 * is fresh. */
#include "check.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

static size_t page;

/* A section that cannot apply here passes with a note. */
#define TEST_SKIP_NOW(why) do { test_note("skip: %s\n", why); return; } while (0)

static bool bitmap_variant, weak_variant, header_variant, sites_variant;
static bool thread_cache;   /* the flagship's thread cache is on (vam.h) */
static const char *variant_name;
static int (*stats_get)(locus_stats_t *);
static size_t (*purge)(void);
static int (*locus_check)(void);

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
  /* Freed objects are not reused while the block still has bump space (with the thread
   * cache: not after the cache's own, which come first, most recent first). */
  free(a[3]);
  free(a[5]);
  /* The thread cache links its objects through their first words under a secret key: a[5]'s
   * word is neither a plain pointer to a[3] nor a[3]'s NULL (a write after free cannot aim
   * malloc at an address it names in plain). */
  char *p5 = a[5], *p3 = a[3];
  __asm__ volatile("" : "+r"(p5), "+r"(p3) : : "memory");   /* (freed: the compiler may not read them) */
  uintptr_t link5 = *(volatile uintptr_t *)(void *)p5, link3 = *(volatile uintptr_t *)(void *)p3;
  (void)link5, (void)link3;   /* (other variants do not look at them) */
  char *next = malloc(REAP_SIZE);
  if (bitmap_variant) {   /* vam-bitmap: the first free slot by bitmap search instead */
    CHECKF(next == a[3], "bitmap search should return the first free slot");
    return;
  }
  if (thread_cache) {
    CHECKF(next == a[5], "the thread cache should hand out the last freed object first: got %p", (void *)next);
    CHECKF(link5 != (uintptr_t)a[3] && link3 != 0 && link5 != link3,
           "the thread cache's links are not keyed: %#lx, %#lx", (unsigned long)link5, (unsigned long)link3);
    CHECK(malloc(REAP_SIZE) == a[3]);
    next = malloc(REAP_SIZE);
    CHECKF(next == a[N - 1] + slot, "after the cached objects, allocation should bump: got %p", (void *)next);
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

/* The thread cache keeps freed large objects whole, unmerged; purge sends them back to their
 * areas, where they merge (the sections that test merging and splitting call this). */
static void large_settle(void) {
  if (thread_cache) purge();
}

static void t_large_cache(void) {
  if (!thread_cache) TEST_SKIP_NOW("no thread cache in this build");
  /* Neighbours in a large area, of a size nothing else uses. */
  char *a = malloc(9000), *b = malloc(9000), *c = malloc(9000);
  CHECKF(b - a == c - b && b - a >= 9000 && b - a < 9100, "not neighbours: %p %p %p", (void *)a, (void *)b, (void *)c);
  free(a);
  free(b);
  CHECK(locus_check == NULL || locus_check() == 0);   /* cached chunks pass the heap check */
  char *again = malloc(9000);
  CHECKF(again == b, "the last freed large object should come first: got %p, not %p", (void *)again, (void *)b);
  /* A request of the class below (7168-8191 bytes) does not take the other one; a smaller
   * request of its own class (8192-10239) does, split to its size. */
  char *below = malloc(8000);
  CHECKF(below != a, "a cached large object served the class below");
  char *part = malloc(8500);
  CHECKF(part == a, "a cached large object should serve a smaller request of its class: got %p, not %p", (void *)part, (void *)a);
  CHECK_EQ(malloc_usable_size(part), (size_t)8512);
  free(part);
  free(below);
  free(again);
  free(c);
  CHECK(locus_check == NULL || locus_check() == 0);
  large_settle();
  CHECK(locus_check == NULL || locus_check() == 0);
}

/* A program's phases: the large objects of an earlier one fill the cache's bytes (256 KiB),
 * then another size's are freed. The cache frees the old ones for real to take the new: the
 * last freed comes first again (without that, the new ones went to the bins, where two freed
 * neighbours merge and the front of the merged chunk comes first). */
static void t_large_cache_phases(void) {
  if (!thread_cache) TEST_SKIP_NOW("no thread cache in this build");
  enum { OLD = 80 };
  char *old[OLD];
  for (int i = 0; i < OLD; i++) CHECK((old[i] = malloc(5000)) != NULL);   /* 400 KB */
  for (int i = 0; i < OLD; i++) free(old[i]);
  char *x = malloc(20000), *y = malloc(20000);
  CHECKF(y - x >= 20000 && y - x < 20100, "not neighbours: %p %p", (void *)x, (void *)y);
  free(x);
  free(y);
  CHECK(locus_check == NULL || locus_check() == 0);
  char *again = malloc(20000);
  CHECKF(again == y, "the cache full of an earlier size's objects took no new one: got %p, not %p (the last freed)",
         (void *)again, (void *)y);
  char *other = malloc(20000);
  CHECKF(other == x, "the other cached object: got %p, not %p", (void *)other, (void *)x);
  free(again);
  free(other);
  large_settle();
  CHECK(locus_check == NULL || locus_check() == 0);
}

/* Frees the n objects of v in a shuffled order (v left in that order). */
static void shuffled_free(char **v, int n, test_rng_t *rng) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)rng_below(rng, (uint64_t)i + 1);
    char *t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
  for (int i = 0; i < n; i++) free(v[i]);
}

/* After shuffled_free: the first malloc's object is the last the bin took (v[k]); how many
 * came back from there on in the reverse of the order freed. They are freed again. */
static int lifo_run(size_t size, char **v, int n) {
  char *first = malloc(size);
  int k = n - 1;
  while (k >= 0 && v[k] != first) k--;
  int lifo = k >= 0;
  for (int i = k - 1; i >= 0; i--, lifo++)
    if (malloc(size) != v[i]) break;   /* (leaked on a mismatch: the test fails anyway) */
  free(first);
  for (int i = k - 1; i > k - lifo; i--) free(v[i]);
  return lifo;
}

/* `cycles` bursts of n objects of size: allocated, then freed in shuffled order; then how many
 * of the last burst come back in the reverse of the order freed (lifo_run). */
static int burst_cycles(size_t size, int n, char **v, test_rng_t *rng, int cycles) {
  for (int c = 0; c < cycles; c++) {
    for (int i = 0; i < n; i++) CHECK((v[i] = malloc(size)) != NULL);
    shuffled_free(v, n, rng);
  }
  return lifo_run(size, v, n);
}

/* One step of a live set of objects of size whose count walks at random between 0 and max
 * (v: its objects, *live of them): an allocation or the free of a random one, even odds. */
static void walk_step(char **v, int *live, int max, size_t size, test_rng_t *rng) {
  if (*live < max && (*live == 0 || rng_below(rng, 2))) {
    CHECK((v[(*live)++] = malloc(size)) != NULL);
  } else {
    unsigned i = (unsigned)rng_below(rng, (uint64_t)*live);
    free(v[i]);
    v[i] = v[--*live];
  }
}

/* Bursts of one size bigger than the thread cache's bin, freed in shuffled order and
 * allocated again: each cycle that missed the bin and overflowed it doubles the bin, up to
 * the burst, and then a burst's mallocs return exactly the objects freed, the last freed
 * first (from the blocks, the order would follow the blocks' lists). How many came back in
 * that order, from the last one the bin took. A bigger size's bursts then take the heap's
 * budget (LOCUS_TCACHE_GROW, 1 MiB) from the first size's grown bin, which the heap check counts. */
static void t_tcache_grows(void) {
  if (!thread_cache) TEST_SKIP_NOW("no thread cache in this build");
  enum { N = 600 };
  static char *v[N];
  test_rng_t rng = { 7 };
  int lifo = 0;
  lifo = burst_cycles(96, N, v, &rng, 6);   /* (28 doubled to 896) */
  const char *grow = getenv("LOCUS_TCACHE_GROW");
  if (grow && !strcmp(grow, "0")) {   /* bins of a fixed size */
    CHECKF(lifo <= 64, "LOCUS_TCACHE_GROW=0, yet the bin grew: %d came back in the order freed", lifo);
    return;
  }
  if (grow) TEST_SKIP_NOW("LOCUS_TCACHE_GROW set");
  CHECKF(lifo == N, "the bin did not grow to a burst of %d: %d came back in the order freed", N, lifo);
  CHECK(locus_check == NULL || locus_check() == 0);
  /* 2,048 objects of 576 bytes (the biggest class that grows): its bin doubles to 1,792
   * objects (then the misses are under a quarter of the hits), 1,004 KiB of growth, more than
   * the budget left: the 96-byte bin gives its growth back. */
  static char *w[2048];
  lifo = burst_cycles(576, 2048, w, &rng, 10);
  CHECKF(lifo == 1792, "a bin beyond the budget: %d of 2048 in the order freed", lifo);
  CHECK(locus_check == NULL || locus_check() == 0);
  lifo = burst_cycles(96, N, v, &rng, 1);
  CHECKF(lifo <= 64, "the 96-byte bin kept its growth: %d", lifo);
  /* A bigger class's bin (its 16 KiB cap: 16 objects of 1 KiB) does not grow. */
  lifo = burst_cycles(1024, 200, w, &rng, 6);
  CHECKF(lifo <= 16, "a 1 KiB bin grew: %d came back in the order freed", lifo);
  CHECK(locus_check == NULL || locus_check() == 0);
  /* A class whose live count walks up and down at random (a program's steady churn) misses
   * its bin and overflows it now and then, but far more of its mallocs hit: its bin does not
   * grow (vam.h; it would hand out freed objects in their scattered order rather than the
   * blocks' for nothing). */
  enum { WALK = 400 };
  static char *u[WALK];
  int live = 0;
  for (int step = 0; step < 40000; step++) walk_step(u, &live, WALK, 160, &rng);
  for (int i = 0; i < live; i++) free(u[i]);
  lifo = burst_cycles(160, WALK, u, &rng, 1);
  CHECKF(lifo <= 64, "a bin whose class walked at random grew: %d came back in the order freed", lifo);
  /* Purge puts every bin back to its first cap, and forgets the misses: a burst allocated
   * before it and freed after it overflows the bin, which does not grow (no malloc missed it
   * since), so only the bin's first cap comes back in the order freed. */
  lifo = burst_cycles(96, N, v, &rng, 6);   /* (grown again) */
  CHECKF(lifo == N, "the bin did not grow again after giving its growth back: %d", lifo);
  if (!purge) return;
  for (int i = 0; i < N; i++) CHECK((v[i] = malloc(96)) != NULL);
  purge();
  CHECK(locus_check == NULL || locus_check() == 0);
  shuffled_free(v, N, &rng);
  lifo = lifo_run(96, v, N);
  CHECKF(lifo >= 2 && lifo <= 64, "the bins kept their growth through a purge: %d in the order freed", lifo);
  purge();
}

/* A class whose blocks are mostly empty slots (8,000 objects of 200 B, all but every 40th
 * freed: 200 left in about 100 blocks) and then churns: temporaries whose count walks at
 * random, and its long-lived objects replaced one by one. With the thread cache's reuse of
 * any freed slot, the long-lived objects' successors land all over the old blocks and none
 * empties; the bin must go off for the class (reap mode, vam.h) so that mallocs take the head
 * block's slots and the old blocks drain: most of their pages go back to the page manager. */
static void t_tcache_reap(void) {
  if (!thread_cache) TEST_SKIP_NOW("no thread cache in this build");
  if (!stats_get) TEST_SKIP_NOW("no statistics");
  enum { N = 8000, KEEP_EVERY = 40, LONG = N / KEEP_EVERY, TEMPS = 100, STEPS = 60000 };
  static char *v[N], *lived[LONG], *temp[TEMPS];
  test_rng_t rng = { 11 };
  locus_stats_t st = { .version = 5 };
  for (int i = 0; i < N; i++) CHECK((v[i] = malloc(200)) != NULL);
  int n = 0;
  for (int i = 0; i < N; i++) {
    if (i % KEEP_EVERY == 0) lived[n++] = v[i];
    else free(v[i]);
  }
  CHECK(stats_get(&st) == 0);
  uint64_t sparse = st.pages_in_use;
  int temps = 0;
  for (int step = 0; step < STEPS; step++) {
    walk_step(temp, &temps, TEMPS, 200, &rng);
    if (step % 4 == 0) {   /* a long-lived object replaced */
      unsigned i = (unsigned)rng_below(&rng, LONG);
      free(lived[i]);
      CHECK((lived[i] = malloc(200)) != NULL);
    }
  }
  CHECK(stats_get(&st) == 0);
  test_note("pages in use: %llu sparse, %llu after the churn\n", (unsigned long long)sparse,
            (unsigned long long)st.pages_in_use);
  CHECKF(st.pages_in_use * 2 < sparse, "the sparse blocks did not drain: %llu pages in use, %llu before",
         (unsigned long long)st.pages_in_use, (unsigned long long)sparse);
  CHECK(locus_check == NULL || locus_check() == 0);
  for (int i = 0; i < temps; i++) free(temp[i]);
  for (int i = 0; i < LONG; i++) free(lived[i]);
}

static void t_coalescing(void) {
  /* Three neighbouring large objects in a fresh large area. */
  char *a = malloc(6000), *b = malloc(6000), *c = malloc(6000);
  size_t chunk = (size_t)(b - a);
  CHECKF(c - b == (ptrdiff_t)chunk && chunk >= 6000 && chunk < 6100, "not neighbours");
  char *guard = malloc(6000);   /* keeps the merged chunk from merging with the area's rest */
  free(a);
  free(c);
  free(b);
  large_settle();
  /* Best fit: the merged chunk (3 * chunk) is the smallest free chunk that holds this. */
  char *big = malloc(3 * chunk - 64);
  CHECKF(big == a, "merged chunk not found: got %p, expected %p", (void *)big, (void *)a);
  /* Splitting: a small large request takes the front of a bigger free chunk. */
  free(big);
  large_settle();
  char *part = malloc(4500);
  CHECK(part == a);
  char *rest = malloc(4500);
  CHECKF(rest > part && rest < guard, "split remainder not reused");
  free(part);
  free(rest);
  free(guard);
}

static void t_split_runt(void) {
  /* A 5,808-byte hole between two objects in a fresh large area (sizes nothing else uses). */
  char *before = malloc(4600), *hole = malloc(5808), *after = malloc(4600);
  CHECKF(after - hole == 5824 && hole - before == 4624, "not neighbours: %p %p %p", (void *)before, (void *)hole, (void *)after);
  free(hole);
  large_settle();
  char *p = malloc(5392);
  CHECKF(p == hole, "the hole was not reused: %p, not %p", (void *)p, (void *)hole);
  CHECK_EQ(malloc_usable_size(p), (size_t)5392);   /* the 416-byte rest was split off */
  /* The rest merges back: freeing p gives the whole hole again. */
  free(p);
  large_settle();
  char *again = malloc(5808);
  CHECKF(again == hole, "the rest did not merge back: %p, not %p", (void *)again, (void *)hole);
  free(again);
  free(before);
  free(after);
  CHECK(locus_check == NULL || locus_check() == 0);
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

static long minor_faults(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  return ru.ru_minflt;
}

/* Bytes waiting in the huge cache (mallinfo2's keepcost in Locus). */
static size_t huge_cached(void) { return mallinfo2().keepcost; }

static uint64_t huge_rng = 0x9E3779B97F4A7C15ull;
static size_t huge_random(size_t below) {
  huge_rng ^= huge_rng << 13;
  huge_rng ^= huge_rng >> 7;
  huge_rng ^= huge_rng << 17;
  return (size_t)(huge_rng % below);
}

static void t_huge_cache(void) {
  if (!stats_get || !purge) TEST_SKIP_NOW("no statistics or purge");
  bool imm = immediate();
  locus_stats_t s0, s1;
  /* Repeated 2 MiB allocations do not map memory each time. */
  free(malloc(2u << 20));
  stats_get(&s0);
  for (int i = 0; i < 100; i++) {
    char *p = malloc(2u << 20);
    p[0] = p[(2u << 20) - 1] = 1;
    free(p);
  }
  stats_get(&s1);
  if (!imm)
    CHECKF(s1.discard_calls - s0.discard_calls < 10, "each 2 MiB allocation unmapped: %lu calls",
           (unsigned long)(s1.discard_calls - s0.discard_calls));

  /* Big buffers replaced at random by new zeroed ones of other sizes: the new ones are made
   * of the old ones' pages, so the program faults in few pages, and calloc still zeroes. */
  enum { SLOTS = 6, ROUNDS = 150 };
  char *slot[SLOTS] = { 0 };
  size_t used = 0;
  long f0 = minor_faults();
  for (int r = 0; r < ROUNDS; r++) {
    int k = (int)huge_random(SLOTS);
    size_t n = (4u << 20) + huge_random(8u << 20);
    char *p = calloc(1, n);
    CHECK(p != NULL);
    for (size_t i = 0; i < n; i += page / 2) CHECKF(p[i] == 0, "calloc'ed byte %zu of %zu not zero", i, n);
    CHECK(p[n - 1] == 0);
    memset(p, 0x5a, n);
    used += n / page;
    free(slot[k]);
    slot[k] = p;
  }
  long faults = minor_faults() - f0;
  test_note("huge_cache: %ld minor faults for %zu pages written\n", faults, used);
  if (imm) CHECKF((size_t)faults > used / 2, "immediate policy: buffers reused (%ld faults, %zu pages)", faults, used);
  else CHECKF((size_t)faults < used / 4, "freed big buffers not reused: %ld faults for %zu pages", faults, used);
  /* The cache holds at most the recent peak of live buffers minus what is live. */
  for (int k = 0; k < SLOTS; k++) { free(slot[k]); slot[k] = NULL; }
  size_t cached = huge_cached();
  CHECKF(cached <= (size_t)(SLOTS + 1) * (12u << 20), "cache %zu MiB beyond the peak", cached >> 20);
  if (imm) CHECKF(cached == 0, "immediate policy cached %zu bytes", cached);

  /* The cached mapping is reused for the same size: no new mapping. */
  size_t big = 12u << 20;
  char *p = malloc(big);
  memset(p, 1, big);
  free(p);
  char *q = malloc(big);
  if (!imm) CHECKF(q == p, "the cached 12 MiB mapping was not reused");
  /* A bigger object grows in place or moves with its content. */
  for (size_t i = 0; i < big; i += page) q[i] = (char)(i / page);
  char *g = realloc(q, 3 * big);
  CHECK(g != NULL);
  for (size_t i = 0; i < big; i += page) CHECKF(g[i] == (char)(i / page), "realloc lost byte %zu", i);
  memset(g, 2, 3 * big);
  free(g);

  /* locus_purge empties the cache and its pages leave RSS. */
  if (!imm) CHECKF(huge_cached() >= big, "nothing cached after freeing %zu MiB", (3 * big) >> 20);
  size_t before = rss_bytes();
  purge();
  size_t after = rss_bytes();
  CHECKF(huge_cached() == 0, "purge left %zu bytes in the cache", huge_cached());
  CHECKF(imm || after + big <= before, "purge did not return the cache: RSS %zu -> %zu KiB",
         before >> 10, after >> 10);

  /* After the decay time the next allocator call returns the cache. */
  char *v[3];
  for (int i = 0; i < 3; i++) { v[i] = malloc(big); memset(v[i], 3, big); }
  for (int i = 0; i < 3; i++) free(v[i]);
  if (!imm) CHECKF(huge_cached() >= big, "nothing cached after freeing %zu MiB", (3 * big) >> 20);
  const char *d = getenv("LOCUS_DECAY_MS");
  long decay = d ? atol(d) : 100;
  before = rss_bytes();
  usleep((useconds_t)(decay + 50) * 1000);
  free(malloc(100000));
  after = rss_bytes();
  CHECKF(huge_cached() == 0, "%zu bytes still cached %ld ms after the last free", huge_cached(), decay + 50);
  CHECKF(imm || after + big <= before, "decay did not return the cache: RSS %zu -> %zu KiB",
         before >> 10, after >> 10);
}

/* huge_threads: threads replace, grow and free big buffers in shared slots (frees from other
 * threads than the allocating one), checking one word per page of each buffer's content and
 * the zeroing of calloc'ed ones: the cache's pieces never end up in two buffers at once. */
enum { HT_THREADS = 4, HT_SLOTS = 12, HT_OPS = 120 };
static _Atomic(uint64_t *) ht_slot[HT_SLOTS];

/* Word 0: the seed, word 1: the size; then at byte 16 of every page seed ^ page index. */
static void ht_mark(uint64_t *p, size_t n, uint64_t seed) {
  p[0] = seed;
  p[1] = n;
  for (size_t i = 0; i < n / page; i++) *(uint64_t *)((char *)p + i * page + 16) = seed ^ i;
}

static void ht_check(const uint64_t *p) {
  size_t n = p[1];
  for (size_t i = 0; i < n / page; i++)
    CHECKF(*(const uint64_t *)((const char *)p + i * page + 16) == (p[0] ^ i),
           "big buffer %p of %zu bytes changed at page %zu", (const void *)p, n, i);
}

static void *ht_thread(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  for (int op = 0; op < HT_OPS; op++) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    size_t n = ((1u << 20) + (size_t)(rng % (5u << 20))) & ~(size_t)15;
    uint64_t *old = atomic_exchange(&ht_slot[rng % HT_SLOTS], NULL), *p;
    if (old && rng % 4 == 0) {        /* grow or shrink it, keeping what fits */
      ht_check(old);
      size_t keep = old[1] < n ? old[1] : n;
      p = realloc(old, n);
      CHECK(p != NULL);
      p[1] = keep;
      ht_check(p);
    } else {
      if (old) { ht_check(old); free(old); }
      bool zero = rng % 3 == 0;
      p = zero ? calloc(1, n) : malloc(n);
      CHECK(p != NULL);
      if (zero) for (size_t i = 0; i < n; i += page) CHECKF(((char *)p)[i + 16] == 0, "calloc'ed page not zero");
    }
    ht_mark(p, n, rng);
    uint64_t *displaced = atomic_exchange(&ht_slot[(rng >> 20) % HT_SLOTS], p);
    if (displaced) { ht_check(displaced); free(displaced); }
  }
  return NULL;
}

static void t_huge_threads(void) {
  pthread_t t[HT_THREADS];
  for (int i = 0; i < HT_THREADS; i++) CHECK(pthread_create(&t[i], NULL, ht_thread, (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < HT_THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  for (int k = 0; k < HT_SLOTS; k++) {
    uint64_t *p = atomic_exchange(&ht_slot[k], NULL);
    if (p) { ht_check(p); free(p); }
  }
  if (purge) purge();
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

/* foreign_cache: an object another thread allocated, freed here, is what the next malloc of
 * its size returns (kept in this thread's foreign-object cache, still hot); the statistics
 * count each call once, and a purge sends the cached objects home without changing them. */
enum { FOREIGN_N = 64, FOREIGN_SIZE = 72 };   /* a class nothing else here uses */
static void *foreign_objects[FOREIGN_N];
static void t_page_sizes(void) {
  /* vam-sites keeps 1 KiB blocks; vam-bitmap's 4 KiB class leaves its bitmap room (4080) */
  if (sites_variant || bitmap_variant) TEST_SKIP_NOW("no 4 KiB class in this variant");
  bool pow2 = !header_variant;   /* the flagship's own builds (vam.h: VAM_PLAIN) */
  for (size_t size = 2048; size <= (pow2 ? 32768u : 4096u); size *= 2) {
    enum { N = 5 };
    char *p[N];
    for (int i = 0; i < N; i++) {
      p[i] = malloc(size);
      CHECKF(p[i] && (uintptr_t)p[i] % (size < page ? size : page) == 0, "a %zu-byte object at %p: not on its boundary", size, (void *)p[i]);
      CHECK_EQ(malloc_usable_size(p[i]), size);
      memset(p[i], 0x3c, size);
    }
    CHECKF(p[1] - p[0] == (ptrdiff_t)size, "%zu-byte objects not neighbours: %p %p", size, (void *)p[0], (void *)p[1]);
    free(p[2]);
    char *again = malloc(size);   /* (reap order without the thread cache: the block's bump range first) */
    CHECKF(again == p[2] || !thread_cache, "a freed %zu-byte object was not reused first: %p, not %p", size, (void *)again, (void *)p[2]);
    p[2] = again;
    for (int i = 0; i < N; i++) free(p[i]);
    CHECK(locus_check == NULL || locus_check() == 0);
  }
}

static void t_foreign_cache(void) {
  if (bitmap_variant || header_variant || !stats_get) TEST_SKIP_NOW("no foreign-object cache in this variant");
  test_allocate_in_thread(foreign_objects, FOREIGN_N, FOREIGN_SIZE, 7);
  locus_stats_t s0, s1, s2;
  CHECK(stats_get(&s0) == 0);
  free(foreign_objects[0]);
  void *q = malloc(FOREIGN_SIZE);
  CHECKF(q == foreign_objects[0], "malloc returned %p, not the foreign object %p just freed", q,
         foreign_objects[0]);
  free(q);
  for (int i = 1; i < FOREIGN_N; i++) free(foreign_objects[i]);
  CHECK(stats_get(&s1) == 0);
  CHECK(s1.malloc_calls >= s0.malloc_calls + 1 && s1.free_calls >= s0.free_calls + FOREIGN_N);
  purge();
  CHECK(stats_get(&s2) == 0);
  test_note("foreign_cache: calls %llu/%llu before the purge, %llu/%llu after\n",
            (unsigned long long)s1.malloc_calls, (unsigned long long)s1.free_calls,
            (unsigned long long)s2.malloc_calls, (unsigned long long)s2.free_calls);
  CHECK(s2.malloc_calls - s2.free_calls == s1.malloc_calls - s1.free_calls);
  CHECK(s2.bytes_allocated <= s1.bytes_allocated);
  CHECK(locus_check == NULL || locus_check() == 0);
}

/* Two call sites of one size (104 B: no other section's), interleaved. */
enum { SITE_OBJECTS = 400, SITE_SIZE = 104, SITE_THRESHOLD = 100 };
static char *site_a[SITE_OBJECTS], *site_b[SITE_OBJECTS];
static __attribute__((noinline)) char *alloc_site_a(void) { return malloc(opaque_size(SITE_SIZE)); }
static __attribute__((noinline)) char *alloc_site_b(void) { return malloc(opaque_size(SITE_SIZE)); }

static void *two_sites(void *arg) {   /* a thread of its own: a heap whose sites are all new */
  (void)arg;
  for (int i = 0; i < SITE_OBJECTS; i++) {
    site_a[i] = alloc_site_a();
    site_b[i] = alloc_site_b();
  }
  return NULL;
}

static bool pages_shared(int from, int to) {
  for (int i = from; i < to; i++)
    for (int j = from; j < to; j++)
      if ((uintptr_t)site_a[i] / page == (uintptr_t)site_b[j] / page) return true;
  return false;
}

static void t_sites(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, two_sites, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECKF(pages_shared(0, SITE_THRESHOLD - 1), "the sites' first objects should interleave");
  bool shared = pages_shared(SITE_THRESHOLD - 1, SITE_OBJECTS);
  if (sites_variant) CHECKF(!shared, "hot sites' objects share page blocks");
  else CHECKF(shared, "%s segregated call sites", variant_name);
  for (int i = 0; i < SITE_OBJECTS; i++) {
    free(site_a[i]);
    free(site_b[i]);
  }
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
  sites_variant = !strcmp(variant(), "vam-sites");
  variant_name = variant();
  const char *tcache = getenv("LOCUS_TCACHE");
  thread_cache = !bitmap_variant && !header_variant && !sites_variant && !immediate() && !(tcache && !strcmp(tcache, "0"));
  stats_get = (int (*)(locus_stats_t *))dlsym(RTLD_DEFAULT, "locus_stats_get");
  purge = (size_t (*)(void))dlsym(RTLD_DEFAULT, "locus_purge");
  locus_check = (int (*)(void))dlsym(RTLD_DEFAULT, "locus_check_heap");
  static const struct test_section sections[] = {
    { "reap_order", t_reap_order },
    { "front_move", t_front_move },
    { "coalescing", t_coalescing },
    { "large_cache", t_large_cache },
    { "large_cache_phases", t_large_cache_phases },
    { "tcache_grows", t_tcache_grows },
    { "tcache_reap", t_tcache_reap },
    { "split_runt", t_split_runt },
    { "discard", t_discard },
    { "burst", t_burst },
    { "huge_cache", t_huge_cache },
    { "huge_threads", t_huge_threads },
    { "fine_classes", t_fine_classes },
    { "page_sizes", t_page_sizes },
    { "foreign_cache", t_foreign_cache },
    { "sites", t_sites },
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
