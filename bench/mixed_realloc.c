/* mixed_realloc — growing strings and vectors: realloc-heavy, sizes 16 B to 1 MiB.
 *
 * Models programs that build text and arrays incrementally: string buffers appended to a few
 * bytes at a time, vectors doubling their capacity, buffers trimmed to fit, zeroed arrays
 * from calloc. A pool of buffers is worked at random; each buffer gets a size limit when it
 * is created (log-distributed between 16 B and 1 MiB, skewed toward small), grows by realloc
 * (+1..64 bytes or doubling), is sometimes shrunk, and is freed when it reaches its limit or
 * by chance. Every growth writes the new bytes; every realloc checks that the old contents
 * came along, and calloc'd memory is checked to be zero.
 *
 * What it rewards: in-place growth (size classes with room, coalescing with a free
 * neighbour, mremap for large blocks), cheap calloc of fresh memory, and the medium/large
 * size paths that the small-object workloads never reach.
 *
 * usage: mixed_realloc [scale] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

enum {
  BUFS = 1024,                    /* buffers in the pool */
  OPS_PER_SCALE = 4500000,        /* operations per unit of scale */
  MAX_SHIFT = 16,                 /* limits are 16 << 0 .. 16 << 16 = 1 MiB */
  SAMPLES = 4,                    /* random positions checked per verification */
};

typedef struct {
  unsigned char *p;
  size_t len;                     /* bytes allocated, all written with the pattern */
  size_t limit;                   /* freed once len reaches it */
  uint64_t tag;
} buffer;

/* The content of byte j: constant over each 64-byte block, so filling is a memset per block. */
static inline unsigned char pattern(uint64_t tag, size_t j) {
  return (unsigned char)((tag >> 8) + (j >> 6) * 0x9d);
}

static void fill_range(buffer *b, size_t from, size_t to) {
  while (from < to) {
    size_t end = (from | 63) + 1;
    if (end > to) end = to;
    memset(b->p + from, pattern(b->tag, from), end - from);
    from = end;
  }
}

static void verify(const buffer *b, size_t len, bench_rng *rng, uint64_t op) {
  size_t pos[SAMPLES + 3] = {0, len - 1, len / 2};
  for (int i = 0; i < SAMPLES; i++) pos[3 + i] = (size_t)bench_rng_below(rng, len);
  for (int i = 0; i < SAMPLES + 3; i++)
    if (b->p[pos[i]] != pattern(b->tag, pos[i]))
      bench_die("content mismatch at byte %zu of a %zu-byte buffer (operation %llu): realloc "
                "lost data or the memory was reused while live", pos[i], len,
                (unsigned long long)op);
}

static size_t pick_limit(bench_rng *r) {
  /* min of two uniform exponents: small limits common, 1 MiB rare (about 1 in 290) */
  uint64_t a = bench_rng_below(r, MAX_SHIFT + 1), c = bench_rng_below(r, MAX_SHIFT + 1);
  size_t lo = (size_t)16 << (a < c ? a : c);
  return lo + (size_t)bench_rng_below(r, lo);       /* not only powers of two */
}

int main(int argc, char **argv) {
  bench_name = "mixed_realloc";
  int quick;
  long scale = bench_args(&argc, argv, 1, "[scale] [--quick]", &quick);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);
  bench_rng rng;
  bench_rng_seed(&rng, 0x4ea110c);
  buffer *bufs = calloc(BUFS, sizeof(buffer));
  if (bufs == NULL) bench_die("calloc failed");
  uint64_t serial = 0, sum = 0, reallocs = 0, callocs = 0, retired = 0;

  for (uint64_t k = 0; k < ops; k++) {
    buffer *b = &bufs[bench_rng_below(&rng, BUFS)];
    if (b->p == NULL) {
      /* create: 16..64 bytes; a quarter of them zeroed by calloc */
      size_t n = (size_t)bench_rng_range(&rng, 16, 64);
      b->limit = pick_limit(&rng);
      if (b->limit > ((size_t)16 << MAX_SHIFT)) b->limit = (size_t)16 << MAX_SHIFT;
      if (n > b->limit) n = b->limit;
      b->tag = bench_mix(++serial);
      if (bench_rng_below(&rng, 4) == 0) {
        size_t count = n / 8 ? n / 8 : 1;
        b->p = calloc(count, 8);
        if (b->p == NULL) bench_die("calloc(%zu, 8) returned NULL", count);
        n = count * 8;
        for (size_t j = 0; j < n; j += 7)
          if (b->p[j] != 0) bench_die("calloc returned nonzero memory (byte %zu of %zu)", j, n);
        callocs++;
      } else {
        b->p = bench_malloc(n);
      }
      b->len = n;
      fill_range(b, 0, n);
      continue;
    }

    uint64_t r = bench_rng_below(&rng, 100);
    size_t n;
    if (r < 3 || b->len >= b->limit) {
      /* retire */
      verify(b, b->len, &rng, k);
      sum = bench_fold(sum, b->len ^ b->p[b->len - 1]);
      free(b->p);
      b->p = NULL;
      retired++;
      continue;
    } else if (r < 55) {
      n = b->len + (size_t)bench_rng_range(&rng, 1, 64);      /* append */
    } else if (r < 93) {
      n = b->len * 2;                                          /* vector doubling */
    } else {
      n = b->len / 2 > 16 ? b->len / 2 : 16;                   /* shrink to fit */
    }
    if (n > b->limit) n = b->limit;
    size_t keep = n < b->len ? n : b->len;
    unsigned char *q = realloc(b->p, n);
    if (q == NULL) bench_die("realloc(%zu) returned NULL", n);
    b->p = q;
    verify(b, keep, &rng, k);
    b->len = n;
    if (n > keep) fill_range(b, keep, n);
    reallocs++;
  }

  for (size_t i = 0; i < BUFS; i++) {
    if (bufs[i].p == NULL) continue;
    verify(&bufs[i], bufs[i].len, &rng, ops);
    sum = bench_fold(sum, bufs[i].len);
    free(bufs[i].p);
  }
  free(bufs);
  printf("mixed_realloc: scale=%ld ops=%llu reallocs=%llu callocs=%llu retired=%llu "
         "checksum=%016llx\n", scale, (unsigned long long)ops, (unsigned long long)reallocs,
         (unsigned long long)callocs, (unsigned long long)retired, (unsigned long long)sum);
  return 0;
}
