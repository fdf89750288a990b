/* smallobj — small objects only (8-48 bytes), in the spirit of the benchmarks of the hybrid
 * allocator paper (Li, Mohanty & Kavi: cfrac, parser, treeadd, bisort, health, perimeter, whose
 * average objects are 8 to 48 bytes). Per round:
 *   1. tree:  build a complete binary tree of 24-byte nodes (treeadd, 2^17 nodes), sum it,
 *             free it bottom-up;
 *   2. churn: 50,000 live objects of 8..48 bytes; one dies and another is born, 2 M times;
 *   3. burst: many short-lived 8..16-byte objects (cfrac's bignum digits) allocated in bursts of
 *             1..64 and freed in reverse order, 1 M objects.
 * Every object is written when allocated and checked before it is freed. Work grows linearly
 * with the scale; one unit is about 3.3 M allocations.
 *
 * usage: smallobj [scale [min max]]
 * With a size range, churn and burst take every size from [min, max] (8 <= min <= max <= 4096)
 * and the tree is left out: one chunk size at a time, e.g. to see how a bitmap search's cost
 * depends on the number of chunks per page.
 */
#include <stdbool.h>

#include "bench_util.h"

enum {
  TREE_DEPTH = 17,
  LIVE = 50000,
  CHURN_OPS = 2000000,
  BURST_OBJECTS = 1000000,
};

typedef struct node { struct node *left, *right; uint64_t value; } node;   /* 24 bytes */

static node *tree_build(int depth, uint64_t *serial) {
  node *n = bench_malloc(sizeof *n);
  n->value = bench_mix(++*serial);
  n->left = depth > 0 ? tree_build(depth - 1, serial) : NULL;
  n->right = depth > 0 ? tree_build(depth - 1, serial) : NULL;
  return n;
}

static uint64_t tree_sum_free(node *n) {
  if (!n) return 0;
  uint64_t s = tree_sum_free(n->left) + tree_sum_free(n->right) + n->value;
  free(n);
  return s;
}

typedef struct { unsigned char *p; uint32_t size; uint64_t tag; } slot;

#define USAGE "[scale [min max]]"

int main(int argc, char **argv) {
  bench_name = "smallobj";
  long scale = bench_scale_arg(argc, argv, 1, USAGE);
  uint64_t churn_lo = 8, churn_hi = 48, burst_lo = 8, burst_hi = 16;
  bool tree = argc < 4;
  if (argc == 3 || argc > 4) {
    fprintf(stderr, "usage: smallobj %s\n", USAGE);
    return 2;
  }
  if (argc == 4) {
    char *e1, *e2;
    churn_lo = burst_lo = strtoull(argv[2], &e1, 10);
    churn_hi = burst_hi = strtoull(argv[3], &e2, 10);
    if (*e1 || *e2 || churn_lo < 8 || churn_lo > churn_hi || churn_hi > 4096) {
      fprintf(stderr, "smallobj: bad size range '%s %s' (8 <= min <= max <= 4096)\n", argv[2], argv[3]);
      return 2;
    }
  }
  bench_rng rng;
  bench_rng_seed(&rng, 0x5a11);
  uint64_t serial = 0, sum = 0, allocs = 0;
  slot *live = bench_malloc(sizeof(slot) * LIVE);
  unsigned char *stack[64];
  uint64_t tags[64];
  size_t sizes[64];

  for (long round = 0; round < scale; round++) {
    /* 1. tree */
    if (tree) {
      uint64_t before = serial;
      node *root = tree_build(TREE_DEPTH, &serial);
      sum = bench_fold(sum, tree_sum_free(root));
      allocs += serial - before;
    }

    /* 2. churn */
    for (uint32_t i = 0; i < LIVE; i++) {
      size_t n = (size_t)bench_rng_range(&rng, churn_lo, churn_hi);
      live[i].p = bench_malloc(n);
      live[i].size = (uint32_t)n;
      live[i].tag = bench_mix(++serial);
      bench_fill(live[i].p, n, live[i].tag);
    }
    for (uint32_t k = 0; k < CHURN_OPS; k++) {
      slot *s = &live[bench_rng_below(&rng, LIVE)];
      bench_check(s->p, s->size, s->tag, "object", serial);
      sum = bench_fold(sum, s->tag);
      free(s->p);
      size_t n = (size_t)bench_rng_range(&rng, churn_lo, churn_hi);
      s->p = bench_malloc(n);
      s->size = (uint32_t)n;
      s->tag = bench_mix(++serial);
      bench_fill(s->p, n, s->tag);
    }
    for (uint32_t i = 0; i < LIVE; i++) {
      bench_check(live[i].p, live[i].size, live[i].tag, "object", i);
      free(live[i].p);
    }
    allocs += LIVE + CHURN_OPS;

    /* 3. burst */
    for (uint64_t done = 0; done < BURST_OBJECTS;) {
      int k = (int)bench_rng_range(&rng, 1, 64);
      for (int i = 0; i < k; i++) {
        sizes[i] = (size_t)bench_rng_range(&rng, burst_lo, burst_hi);
        stack[i] = bench_malloc(sizes[i]);
        tags[i] = bench_mix(++serial);
        bench_fill(stack[i], sizes[i], tags[i]);
      }
      while (k-- > 0) {
        bench_check(stack[k], sizes[k], tags[k], "digit", (uint64_t)k);
        sum = bench_fold(sum, tags[k]);
        free(stack[k]);
        done++;
      }
    }
    allocs += BURST_OBJECTS;
  }
  free(live);
  printf("smallobj: scale=%ld allocations=%llu checksum=%016llx\n", scale,
         (unsigned long long)allocs, (unsigned long long)sum);
  return 0;
}
