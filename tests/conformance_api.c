/* conformance_api.c — the C malloc surface behaves like glibc's, under whatever allocator is
 * loaded (LD_PRELOAD set by CTest, or none for the "system" run).
 *
 * What "like glibc" means where the C standard leaves room (SPEC §1): malloc(0) returns a
 * unique freeable pointer, realloc(p, 0) frees and returns NULL, every NULL return sets
 * errno = ENOMEM, posix_memalign returns EINVAL for a bad alignment without touching *memptr,
 * size computations detect overflow, free preserves errno. The calls beyond the C standard and
 * POSIX (glibc's aliases and introspection, the Locus API) are conformance_ext.c's.
 *
 * Each section runs in its own child process (see check.h); "conformance_api <section>" runs
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
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static locus_api_t L;
static int have_locus;
static size_t page;

/* ---- helpers ----------------------------------------------------------------------------- */

static size_t next_pow2(size_t x) {
  size_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

/* The sizes most sections go through: every size to 1 KiB, then every 8 (plus a few odd
 * ones) to 64 KiB, then powers of two and their neighbours to 16 MiB. */
static size_t *size_list(size_t *count) {
  size_t cap = 16384, n = 0;
  size_t *s = malloc(cap * sizeof *s);
  CHECK(s != NULL);
  for (size_t i = 0; i <= 1024; i++) s[n++] = i;
  for (size_t i = 1032; i <= 65536; i += 8) {
    s[n++] = i;
    if (i % 1024 == 0) s[n++] = i + 3;
  }
  for (size_t b = 11; b <= 24; b++) {
    size_t p2 = (size_t)1 << b;
    s[n++] = p2 - 1;
    s[n++] = p2;
    s[n++] = p2 + 1;
  }
  CHECK(n <= cap);
  *count = n;
  return s;
}

/* ---- sections ---------------------------------------------------------------------------- */

/* Every size: non-NULL, aligned to 16 (8 for requests <= 8), usable size >= request, and the
 * whole usable size writable without touching the neighbours (checked with patterns on a
 * window of 32 live objects). */
static void t_alignment_sizes(void) {
  size_t n;
  size_t *sizes = size_list(&n);
  enum { WINDOW = 32 };
  void *live[WINDOW] = {0};
  size_t live_size[WINDOW] = {0};
  for (size_t i = 0; i < n; i++) {
    size_t sz = sizes[i], slot = i % WINDOW;
    if (live[slot]) {
      CHECK_PATTERN(live[slot], live_size[slot], live_size[slot] ^ (slot << 32));
      free(live[slot]);
    }
    void *p = checked_malloc(sz);
    CHECK_ALIGNED(p, test_min_align(sz));
    size_t us = malloc_usable_size(p);
    CHECKF(us >= sz, "malloc_usable_size(malloc(%zu)) = %zu", sz, us);
    memset(p, 0x5A, us); /* the whole usable size is ours */
    pattern_fill(p, sz, sz ^ (slot << 32));
    live[slot] = p;
    live_size[slot] = sz;
    /* every 97th size: all live objects still intact (no overlap with the new one) */
    if (i % 97 == 0)
      for (size_t k = 0; k < WINDOW; k++)
        if (live[k]) CHECK_PATTERN(live[k], live_size[k], live_size[k] ^ (k << 32));
  }
  for (size_t k = 0; k < WINDOW; k++) {
    if (live[k]) CHECK_PATTERN(live[k], live_size[k], live_size[k] ^ (k << 32));
    free(live[k]);
  }
  free(sizes);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* malloc(0) returns distinct non-NULL pointers that free accepts. */
static void t_malloc_zero(void) {
  enum { N = 2000 };
  void **v = malloc(N * sizeof *v);
  CHECK(v != NULL);
  for (int i = 0; i < N; i++) {
    v[i] = malloc(opaque_size(0));
    CHECKF(v[i] != NULL, "malloc(0) returned NULL (call %d)", i);
    CHECK_ALIGNED(v[i], 8);
  }
  qsort(v, N, sizeof *v, cmp_ptr);
  for (int i = 1; i < N; i++) CHECKF(v[i] != v[i - 1], "malloc(0) returned %p twice", v[i]);
  for (int i = 0; i < N; i++) free(v[i]);
  free(v);
  /* calloc(0, n) and calloc(n, 0) likewise */
  void *a = calloc(opaque_size(0), 16), *b = calloc(16, opaque_size(0));
  CHECK(a != NULL && b != NULL && a != b);
  free(a);
  free(b);
}

/* calloc returns zeroed memory even when it reuses blocks that were just dirtied. */
static void t_calloc_reuse(void) {
  static const size_t sizes[] = {1,     8,     16,    24,    32,     48,     64,     100,
                                 128,   200,   256,   384,   512,    1000,   1024,   2000,
                                 3000,  4096,  5000,  8192,  10000,  16384,  30000,  65536,
                                 70000, 102400, 131072, 200000, 262144, 1 << 20, 4 << 20};
  enum { K = 16 };
  for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
    size_t sz = sizes[si];
    int k = sz >= (1 << 20) ? 3 : K;
    void *v[K];
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < k; i++) {
        v[i] = checked_malloc(sz);
        memset(v[i], 0xAA, malloc_usable_size(v[i]));
      }
      for (int i = 0; i < k; i++) free(v[i]);
      for (int i = 0; i < k; i++) {
        /* alternate the two argument orders: both must give n*m zeroed bytes */
        v[i] = (i & 1) ? calloc(1, sz) : calloc(sz, 1);
        CHECKF(v[i] != NULL, "calloc(%zu) returned NULL", sz);
        const unsigned char *c = v[i];
        for (size_t j = 0; j < sz; j++)
          CHECKF(c[j] == 0, "calloc(%zu) byte %zu is 0x%02x (round %d)", sz, j, c[j], round);
        memset(v[i], 0xAA, malloc_usable_size(v[i]));
      }
      for (int i = 0; i < k; i++) free(v[i]);
    }
  }
  /* element count times element size */
  int *arr = calloc(1000, sizeof(int));
  CHECK(arr != NULL);
  for (int i = 0; i < 1000; i++) CHECK(arr[i] == 0);
  free(arr);
}

/* realloc keeps the common prefix across growth and shrink through every size category. */
static void t_realloc_content(void) {
  static const size_t walk[] = {1,      7,      16,     24,      100,    255,    1000,
                                4000,   5000,   40000,  70000,   300000, 2 << 20, 5 << 20,
                                9 << 20, 100000, 3000,  100,     10,     1,      33,
                                5 << 20, 17,     65536, 65537,   4096,   8 << 20, 64};
  for (int pass = 0; pass < 2; pass++) {
    size_t cur = walk[0];
    uint64_t seed = 1;
    char *p = checked_malloc(cur);
    pattern_fill(p, cur, seed);
    for (size_t i = 1; i < sizeof walk / sizeof *walk; i++) {
      size_t nsz = pass ? walk[sizeof walk / sizeof *walk - i] : walk[i];
      char *q = realloc(p, nsz);
      CHECKF(q != NULL, "realloc(%zu -> %zu) returned NULL", cur, nsz);
      CHECK_ALIGNED(q, test_min_align(nsz));
      CHECKF(malloc_usable_size(q) >= nsz, "usable %zu < %zu", malloc_usable_size(q), nsz);
      CHECK_PATTERN(q, cur < nsz ? cur : nsz, seed);
      /* a fresh pattern over the new size: the bytes past the old size must be writable */
      pattern_fill(q, nsz, ++seed);
      p = q;
      cur = nsz;
    }
    free(p);
  }
  /* a random walk with several objects alive at once */
  test_rng_t r = {42};
  enum { N = 24 };
  char *obj[N] = {0};
  size_t osz[N] = {0};
  uint64_t oseed[N] = {0};
  for (int step = 0; step < 10000; step++) {
    int i = (int)rng_below(&r, N);
    uint64_t cls = rng_below(&r, 100);
    size_t nsz = cls < 70 ? rng_below(&r, 512) : cls < 90 ? rng_below(&r, 16384)
               : cls < 99 ? rng_below(&r, 300000) : rng_below(&r, 3 << 20);
    if (obj[i]) CHECK_PATTERN(obj[i], osz[i], oseed[i]);
    char *q = realloc(obj[i], nsz);
    if (nsz == 0 && obj[i]) {
      /* glibc: realloc(p, 0) frees p and returns NULL */
      CHECKF(q == NULL, "realloc(p, 0) returned %p instead of freeing", (void *)q);
      obj[i] = NULL;
      osz[i] = 0;
      continue;
    }
    CHECKF(q != NULL, "realloc(%zu) returned NULL", nsz);
    CHECK_ALIGNED(q, test_min_align(nsz));
    if (obj[i]) CHECK_PATTERN(q, osz[i] < nsz ? osz[i] : nsz, oseed[i]);
    obj[i] = q;
    osz[i] = nsz;
    oseed[i] = (uint64_t)step * 7919 + 1;
    pattern_fill(q, nsz, oseed[i]);
  }
  for (int i = 0; i < N; i++) {
    if (obj[i]) CHECK_PATTERN(obj[i], osz[i], oseed[i]);
    free(obj[i]);
  }
}

/* realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL (glibc). */
static void t_realloc_edge(void) {
  for (size_t n = 0; n < 5000; n += 37) {
    char *p = realloc(NULL, n);
    CHECKF(p != NULL, "realloc(NULL, %zu) returned NULL", n);
    CHECK(malloc_usable_size(p) >= n);
    memset(p, 1, n);
    free(p);
  }
  static const size_t sizes[] = {1, 16, 100, 1000, 5000, 70000, 300000, 4 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char *p = checked_malloc(sizes[i]);
    memset(p, 1, sizes[i]);
    errno = 0;
    char *q = realloc(p, opaque_size(0));
    CHECKF(q == NULL, "realloc(p[%zu], 0) returned %p: glibc frees and returns NULL", sizes[i],
           (void *)q);
    CHECKF(errno == 0, "realloc(p, 0) set errno to %d", errno);
  }
  /* reallocarray without overflow is realloc(p, n * m) */
  char *ra = reallocarray(NULL, 10, 10);
  CHECK(ra != NULL);
  pattern_fill(ra, 100, 9);
  ra = reallocarray(ra, 1000, 10);
  CHECK(ra != NULL);
  CHECK_PATTERN(ra, 100, 9);
  CHECK(malloc_usable_size(ra) >= 10000);
  memset(ra, 0, 10000);
  free(ra);
  /* same size, and a block that does not move when shrunk a little */
  char *p = checked_malloc(1000);
  pattern_fill(p, 1000, 5);
  p = realloc(p, 1000);
  CHECK(p != NULL);
  CHECK_PATTERN(p, 1000, 5);
  p = realloc(p, 990);
  CHECK(p != NULL);
  CHECK_PATTERN(p, 990, 5);
  free(p);
}

/* Requests that cannot be satisfied: NULL with errno = ENOMEM (and for realloc the old block
 * intact). Four sections, so that one allocator's miss does not hide the next. */
static void t_enomem_malloc(void) {
  const size_t max = SIZE_MAX, pmax = (size_t)PTRDIFF_MAX;
  CHECK_ENOMEM(malloc(opaque_size(max)));
  CHECK_ENOMEM(malloc(opaque_size(pmax + 1)));
  CHECK_ENOMEM(malloc(opaque_size(pmax)));
  /* sizes whose rounding to a class, a page or an alignment overflows */
  for (size_t k = 0; k <= 2 * page; k += (k < 64 ? 1 : 509)) CHECK_ENOMEM(malloc(opaque_size(max - k)));
  void *q = checked_malloc(100); /* the heap is fine afterwards */
  free(q);
}

static void t_enomem_calloc(void) {
  const size_t max = SIZE_MAX, pmax = (size_t)PTRDIFF_MAX;
  for (size_t k = 0; k <= 2 * page; k += (k < 64 ? 1 : 509))
    CHECK_ENOMEM(calloc(1, opaque_size(max - k)));
  /* element count times element size overflows */
  CHECK_ENOMEM(calloc(opaque_size(max / 2), 3));
  CHECK_ENOMEM(calloc(opaque_size((size_t)1 << 32), (size_t)1 << 32));
  CHECK_ENOMEM(calloc(opaque_size(max), opaque_size(max)));
  CHECK_ENOMEM(calloc(opaque_size(pmax / 8 + 1), 16)); /* no overflow, but too big */
  CHECK_ENOMEM(reallocarray(NULL, opaque_size(max / 2), 3));
  CHECK_ENOMEM(reallocarray(NULL, opaque_size((size_t)1 << 33), (size_t)1 << 31));
  void *q = checked_malloc(100);
  free(q);
}

static void t_enomem_realloc(void) {
  const size_t max = SIZE_MAX, pmax = (size_t)PTRDIFF_MAX;
  static const size_t olds[] = {24, 3000, 100000, 3 << 20};
  for (size_t i = 0; i < sizeof olds / sizeof *olds; i++) {
    size_t n = olds[i];
    char *p = checked_malloc(n);
    pattern_fill(p, n, n);
    CHECK_ENOMEM(realloc(p, opaque_size(max)));
    CHECK_PATTERN(p, n, n);
    CHECK_ENOMEM(realloc(p, opaque_size(max - 15)));
    CHECK_PATTERN(p, n, n);
    CHECK_ENOMEM(realloc(p, opaque_size(pmax + 1)));
    CHECK_PATTERN(p, n, n);
    CHECK_ENOMEM(reallocarray(p, opaque_size(max / 2), 3));
    CHECK_PATTERN(p, n, n);
    CHECK_ENOMEM(reallocarray(p, opaque_size(1) << 40, (size_t)1 << 30));
    CHECK_PATTERN(p, n, n);
    /* the block still works */
    p = realloc(p, n * 2);
    CHECK(p != NULL);
    CHECK_PATTERN(p, n, n);
    free(p);
  }
}

/* The aligned and page-rounded entry points: alignment padding and page rounding overflow. */
static void t_enomem_aligned(void) {
  const size_t max = SIZE_MAX, pmax = (size_t)PTRDIFF_MAX;
  void *m = (void *)0x1;
  /* glibc sets errno as well as returning the error, and programs check errno */
  errno = 0;
  CHECK_EQ(posix_memalign(&m, 64, opaque_size(max - 10)), ENOMEM);
  CHECK_EQ(errno, ENOMEM);
  errno = 0;
  CHECK_EQ(posix_memalign(&m, 4096, opaque_size(max - 4000)), ENOMEM);
  CHECK_EQ(errno, ENOMEM);
  errno = 0;
  CHECK_EQ(posix_memalign(&m, 1 << 20, opaque_size(pmax)), ENOMEM);
  CHECK_EQ(errno, ENOMEM);
  CHECK_ENOMEM(aligned_alloc(4096, opaque_size(max - 100)));
  CHECK_ENOMEM(aligned_alloc(64, opaque_size(max)));
  CHECK_ENOMEM(memalign(64, opaque_size(max - 10)));
  CHECK_ENOMEM(memalign(1 << 21, opaque_size(max - (1 << 20))));
  CHECK_ENOMEM(valloc(opaque_size(max)));
  CHECK_ENOMEM(valloc(opaque_size(max - page + 2)));
  CHECK_ENOMEM(pvalloc(opaque_size(max)));
  CHECK_ENOMEM(pvalloc(opaque_size(max - page + 2)));
  CHECK_ENOMEM(pvalloc(opaque_size(max - 2 * page)));
  void *q = checked_malloc(100);
  free(q);
}

static const size_t am_sizes[] = {0,    1,     7,     8,     9,     15,    16,    17,    24,
                                  31,   32,    33,    48,    63,    64,    65,    100,   127,
                                  128,  129,   255,   256,   257,   500,   1000,  1023,  1024,
                                  1025, 2000,  4095,  4096,  4097,  8191,  8192,  8193,  10000,
                                  16384, 20000, 32768, 50000, 65535, 65536, 65537, 100000};
#define AM_N (sizeof am_sizes / sizeof *am_sizes)

/* posix_memalign: every power-of-two alignment from sizeof(void*) to 1 MiB, sizes 0..100k:
 * aligned, writable, usable >= request, no overlap; bad alignments give EINVAL and leave
 * *memptr alone. */
static void t_posix_memalign(void) {
  for (size_t al = sizeof(void *); al <= ((size_t)1 << 20); al <<= 1) {
    void *v[AM_N];
    for (size_t i = 0; i < AM_N; i++) {
      size_t sz = am_sizes[i];
      void *p = (void *)0x1;
      int rc = posix_memalign(&p, al, sz);
      CHECKF(rc == 0, "posix_memalign(%zu, %zu) = %d", al, sz, rc);
      CHECKF(p != NULL && p != (void *)0x1, "posix_memalign(%zu, %zu) gave %p", al, sz, p);
      CHECKF(((uintptr_t)p & (al - 1)) == 0, "posix_memalign(%zu, %zu) = %p: misaligned", al,
             sz, p);
      CHECK_ALIGNED(p, test_min_align(sz));
      size_t us = malloc_usable_size(p);
      CHECKF(us >= sz, "posix_memalign(%zu, %zu): usable %zu", al, sz, us);
      memset(p, 0x77, us);
      pattern_fill(p, sz, al * 131 + sz);
      v[i] = p;
    }
    for (size_t i = 0; i < AM_N; i++) {
      CHECK_PATTERN(v[i], am_sizes[i], al * 131 + am_sizes[i]);
      /* aligned blocks go through realloc like any other */
      if (i % 5 == 0) {
        v[i] = realloc(v[i], am_sizes[i] + 5000);
        CHECK(v[i] != NULL);
        CHECK_PATTERN(v[i], am_sizes[i], al * 131 + am_sizes[i]);
      }
      free(v[i]);
    }
  }
  static const size_t bad[] = {0, 1, 2, 3, 4, 5, 6, 7, 12, 24, 40, 48, 96, 100, 1000, 4097,
                               3 << 20, (size_t)-1, ((size_t)-1) / 2, ((size_t)-1) - 7};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    void *sentinel = (void *)&bad[i];
    void *p = sentinel;
    errno = 0;
    int rc = posix_memalign(&p, opaque_size(bad[i]), 64);
    CHECKF(rc == EINVAL, "posix_memalign(alignment %zu) = %d, not EINVAL", bad[i], rc);
    CHECKF(p == sentinel, "posix_memalign(alignment %zu) failed but changed *memptr to %p",
           bad[i], p);
  }
}

/* aligned_alloc and memalign: power-of-two alignments, including ones below the minimum
 * (1, 2, 4: the result has at least the malloc alignment) and large ones (2 MiB). */
static void t_aligned_alloc_memalign(void) {
  for (int which = 0; which < 2; which++) {
    const char *name = which ? "memalign" : "aligned_alloc";
    for (size_t al = 1; al <= ((size_t)2 << 20); al <<= 1) {
      void *v[AM_N];
      for (size_t i = 0; i < AM_N; i++) {
        size_t sz = am_sizes[i];
        /* C17 lets aligned_alloc take any size (glibc does); very large alignments with the
         * whole size list would map a lot: use every third size there. */
        if (al >= (1 << 16) && i % 3) { v[i] = NULL; continue; }
        void *p = which ? memalign(al, sz) : aligned_alloc(al, sz);
        CHECKF(p != NULL, "%s(%zu, %zu) returned NULL", name, al, sz);
        CHECKF(((uintptr_t)p & (al - 1)) == 0, "%s(%zu, %zu) = %p: misaligned", name, al, sz, p);
        CHECK_ALIGNED(p, test_min_align(sz));
        size_t us = malloc_usable_size(p);
        CHECKF(us >= sz, "%s(%zu, %zu): usable %zu", name, al, sz, us);
        memset(p, 0x33, us);
        pattern_fill(p, sz, al + sz);
        v[i] = p;
      }
      for (size_t i = 0; i < AM_N; i++) {
        if (!v[i]) continue;
        CHECK_PATTERN(v[i], am_sizes[i], al + am_sizes[i]);
        free(v[i]);
      }
    }
  }
}

/* A non-power-of-two alignment: glibc 2.36's memalign and aligned_alloc round it up to the
 * next power of two (newer glibc rejects it in aligned_alloc with EINVAL). Either answer is
 * accepted; what is not: NULL without errno, or a pointer aligned less than requested. */
static void t_align_not_pow2(void) {
  static const size_t odd[] = {3, 12, 24, 48, 100, 1000, 4097, 12288, 3 << 20};
  for (int which = 0; which < 2; which++) {
    const char *name = which ? "memalign" : "aligned_alloc";
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
      size_t al = odd[i];
      errno = 0;
      void *p = which ? memalign(opaque_size(al), 64) : aligned_alloc(opaque_size(al), 64);
      int e = errno;
      if (p == NULL) {
        CHECKF(e == EINVAL, "%s(%zu, 64) returned NULL with errno %d (%s), not EINVAL", name,
               al, e, strerror(e));
      } else {
        CHECKF(((uintptr_t)p & (next_pow2(al) - 1)) == 0,
               "%s(%zu, 64) = %p: not aligned to %zu", name, al, p, next_pow2(al));
        memset(p, 1, 64);
        free(p);
      }
    }
    /* an alignment so big no size fits */
    errno = 0;
    void *p = which ? memalign(opaque_size(((size_t)1 << 63) + 1), 64)
                    : aligned_alloc(opaque_size(((size_t)1 << 63) + 1), 64);
    int e = errno;
    CHECKF(p == NULL && (e == EINVAL || e == ENOMEM), "%s(2^63+1, 64) = %p, errno %d", name, p,
           e);
  }
}

/* valloc and pvalloc: page alignment; pvalloc rounds the size up to whole pages. */
static void t_valloc_pvalloc(void) {
  static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 10000, 65536, 100000, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t sz = sizes[i];
    char *p = valloc(sz);
    CHECKF(p != NULL, "valloc(%zu) returned NULL", sz);
    CHECK_ALIGNED(p, page);
    CHECK(malloc_usable_size(p) >= sz);
    memset(p, 1, malloc_usable_size(p));
    char *q = pvalloc(sz);
    CHECKF(q != NULL, "pvalloc(%zu) returned NULL", sz);
    CHECK_ALIGNED(q, page);
    size_t rounded = (sz + page - 1) & ~(page - 1);
    size_t us = malloc_usable_size(q);
    CHECKF(us >= rounded, "pvalloc(%zu): usable size %zu < %zu (whole pages)", sz, us, rounded);
    memset(q, 2, rounded);
    /* both go back through realloc and free like any block */
    p = realloc(p, sz + 3000);
    CHECK(p != NULL);
    q = realloc(q, sz / 2 + 1);
    CHECK(q != NULL);
    if (sz) CHECK(q[0] == 2 && q[sz / 2] == 2);
    free(p);
    free(q);
  }
}

/* malloc_usable_size: at least the request, all of it writable without damaging a neighbour. */
static void t_usable_size(void) {
  CHECK_EQ(malloc_usable_size(NULL), 0);
  for (size_t sz = 0; sz < 70000; sz = sz < 256 ? sz + 1 : sz * 9 / 8) {
    enum { K = 8 };
    char *v[K];
    for (int i = 0; i < K; i++) {
      v[i] = checked_malloc(sz);
      size_t us = malloc_usable_size(v[i]);
      CHECKF(us >= sz, "malloc_usable_size(malloc(%zu)) = %zu", sz, us);
      CHECKF(us <= 2 * sz + 4096, "malloc_usable_size(malloc(%zu)) = %zu: implausible", sz, us);
      pattern_fill(v[i], us, sz * 16 + (size_t)i);
    }
    for (int i = 0; i < K; i++) {
      CHECK_PATTERN(v[i], malloc_usable_size(v[i]), sz * 16 + (size_t)i);
      free(v[i]);
    }
  }
}

/* free(NULL) is a no-op; free never changes errno (glibc >= 2.33, POSIX 2024). */
static void t_free_errno(void) {
  free(NULL);
  static const size_t sizes[] = {0, 16, 500, 5000, 70000, 300000, 2 << 20, 16 << 20};
  for (int round = 0; round < 3; round++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
      void *p = checked_malloc(sizes[i]);
      memset(p, 1, sizes[i]);
      errno = EBADF;
      free(p);
      CHECKF(errno == EBADF, "free(%zu-byte block) changed errno to %d (%s)", sizes[i], errno,
             strerror(errno));
      errno = ENOENT;
      free(NULL);
      CHECK_EQ(errno, ENOENT);
    }
  /* after many frees, so that free has pages or a whole mapping to give back */
  void *v[64];
  for (int i = 0; i < 64; i++) v[i] = checked_malloc(100000);
  for (int i = 0; i < 64; i++) {
    errno = EXDEV;
    free(v[i]);
    CHECK_EQ(errno, EXDEV);
  }
}

/* cfree: a legacy name for free. glibc keeps it for old binaries only (not visible to dlsym);
 * a replacement that exports it must make it free. */
static void t_cfree(void) {
  void (*cf)(void *);
  void *s = dlsym(RTLD_DEFAULT, "cfree");
  if (!s) {
    if (have_locus) CHECKF(0, "cfree is not exported by the Locus library");
    SECTION_SKIP("cfree not exported");
  }
  memcpy(&cf, &s, sizeof s);
  for (int i = 0; i < 1000; i++) {
    void *p = checked_malloc((size_t)i * 7);
    cf(p);
  }
  cf(NULL);
  /* the memory really went back: the same churn does not grow without bound */
  void *a = checked_malloc(64);
  cf(a);
  void *b = checked_malloc(64);
  free(b);
}

/* The first malloc of a process with little address space left (RLIMIT_AS, 6 MiB above what
 * is mapped) must work: the allocator's first reservation falls back to smaller mappings.
 * Run in a fresh process (exec) in which nothing has allocated yet. */
static int rlimit_child(void) {
  if (!test_limit_address_space(6u << 20)) return 3;
  char *p = malloc(256);
  if (!p) return 1;
  memset(p, 1, 256);
  free(p);
  return 0;
}

static void t_rlimit_first_malloc(void) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    execl("/proc/self/exe", "conformance_api", "--rlimit-child", (char *)NULL);
    _exit(127);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) != 3, "the child could not set up the limit");
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "malloc(256) failed with 6 MiB of address space left (status %d)", st);
}

/* Allocation under an exhausted address space (RLIMIT_AS 64 MiB above what is mapped): every
 * size category fails with NULL and ENOMEM, never a crash; once the objects are freed, the
 * heap works again for every size. In a child, which keeps the limit. */
static void t_rlimit_exhaust(void) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (!test_limit_address_space(64u << 20)) _exit(3);
    static const size_t sizes[] = {24, 200, 3000, 40000, 600000, 3 << 20};
    enum { MAX = 1 << 20 };
    static void *objs[MAX];
    size_t count = 0;
    for (int round = 0; round < 2; round++) {
      for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (;;) {
          errno = 0;
          void *p = count < MAX ? malloc(sizes[s]) : NULL;
          if (!p) {
            if (count < MAX && errno != ENOMEM) _exit(10 + (int)s);
            break;
          }
          memset(p, (int)s, sizes[s] < 4096 ? sizes[s] : 4096);
          objs[count++] = p;
        }
      }
      if (count == 0) _exit(5);
      while (count) free(objs[--count]);   /* memory is back: everything works again */
      for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        void *p = malloc(sizes[s]);
        if (!p) _exit(20 + (int)s);
        memset(p, 1, sizes[s]);
        free(p);
      }
    }
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) != 3, "the child could not set up the limit");
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0,
         "under an exhausted address space: %s %d (10+k: NULL without ENOMEM for size k; 20+k: "
         "size k failed once memory was back)", WIFSIGNALED(st) ? "signal" : "status",
         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static const test_section_t sections[] = {
    {"alignment_sizes", t_alignment_sizes},
    {"malloc_zero", t_malloc_zero},
    {"calloc_reuse", t_calloc_reuse},
    {"realloc_content", t_realloc_content},
    {"realloc_edge", t_realloc_edge},
    {"enomem_malloc", t_enomem_malloc},
    {"enomem_calloc", t_enomem_calloc},
    {"enomem_realloc", t_enomem_realloc},
    {"enomem_aligned", t_enomem_aligned},
    {"posix_memalign", t_posix_memalign},
    {"aligned_alloc_memalign", t_aligned_alloc_memalign},
    {"align_not_pow2", t_align_not_pow2},
    {"valloc_pvalloc", t_valloc_pvalloc},
    {"usable_size", t_usable_size},
    {"free_errno", t_free_errno},
    {"cfree", t_cfree},
    {"rlimit_first_malloc", t_rlimit_first_malloc},
    {"rlimit_exhaust", t_rlimit_exhaust},
};

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--rlimit-child")) return rlimit_child();   /* before anything allocates */
  page = (size_t)sysconf(_SC_PAGESIZE);
  have_locus = locus_api_require(&L);
  test_note("conformance_api: %s, quantum %zu\n",
            have_locus ? L.variant() : "no Locus library (system or peer allocator)",
            test_quantum());
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
