/* espresso — many small objects of varied sizes with a logic minimiser's lifetime mix.
 *
 * Our own program shaped like espresso (the PLA minimiser in the allocation benchmarks
 * seed 002 measures): it works on covers, lists of cubes, each cube a bit vector whose
 * length depends on the number of variables, and it spends its time making temporary cubes
 * and sets, combining them and dropping them, while the covers it keeps change slowly and
 * are rebuilt pass after pass. Sizes are small and varied, lifetimes very skewed. What it
 * rewards: fast small-object paths for a spread of sizes, quick reuse of the memory of
 * objects that die young, and keeping the long-lived cover compact as it is rebuilt.
 *
 * Sizes: a pass has a "cube size" (8 + 8 * (1..12) bytes, a few variables more or less per
 * pass, as the problems differ); 55% of the objects are cubes of that size, 25% are small
 * sets and list cells (8..48 B), 15% larger sets (cube size x 2..4) and 5% tables
 * (256..2048 B). Lifetimes:
 *   - 70% temporaries: kept in a ring of TEMPS objects and freed when the ring comes round
 *     (they die within a few dozen allocations, in allocation order);
 *   - 25% working set: replace a random object of a table of WORKING objects (random
 *     lifetimes, about WORKING allocations on average); 1 in 8 of these grows its object
 *     with realloc to up to twice its size instead, as espresso grows its set families;
 *   - 5% the cover: appended to the pass's cover, all freed when the pass ends (every
 *     PASS operations; the cover is freed in reverse order, half of it first, as a
 *     minimiser drops the cubes it proved redundant and then the rest).
 * Every object is stamped when allocated and checked before it is freed or reallocated.
 *
 * usage: espresso [scale] [--quick]    operations grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [--quick]"

enum {
  OPS_PER_SCALE = 10000000,       /* allocations per unit of scale */
  PASS = 200000,                  /* operations per pass */
  TEMPS = 48,                     /* temporaries alive at once */
  WORKING = 20000,                /* the working set's objects */
  COVER_MAX = PASS / 10,          /* cover entries of one pass, at most (5% expected) */
};

typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} obj;

static size_t cube_size;

static size_t pick_size(bench_rng *r) {
  uint64_t c = bench_rng_below(r, 100);
  if (c < 55) return cube_size;
  if (c < 80) return (size_t)bench_rng_range(r, 8, 48);
  if (c < 95) return cube_size * (size_t)bench_rng_range(r, 2, 4);
  return (size_t)bench_rng_range(r, 256, 2048);
}

static void make(obj *o, size_t size, uint64_t *serial) {
  o->p = bench_malloc(size);
  o->size = size;
  o->tag = bench_mix(++*serial);
  bench_fill(o->p, size, o->tag);
}

static void drop(obj *o, uint64_t *sum, uint64_t where) {
  if (o->p == NULL) return;
  bench_check(o->p, o->size, o->tag, "object", where);
  *sum = bench_fold(*sum, o->tag ^ o->size);
  free(o->p);
  o->p = NULL;
}

/* Grows o to new_size with realloc; the old contents must survive, the rest is stamped. */
static void grow(obj *o, size_t new_size, uint64_t where) {
  bench_check(o->p, o->size, o->tag, "object", where);
  unsigned char *q = realloc(o->p, new_size);
  if (q == NULL) bench_die("realloc(%zu) returned NULL", new_size);
  bench_check(q, o->size, o->tag, "reallocated object", where);
  o->p = q;
  o->size = new_size;
  bench_fill(q, new_size, o->tag);
}

int main(int argc, char **argv) {
  bench_name = "espresso";
  int quick;
  long scale = bench_args(&argc, argv, 1, USAGE, &quick);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);

  bench_rng rng;
  bench_rng_seed(&rng, 0xe5b7e550);
  obj temps[TEMPS] = {{0}};
  obj *working = bench_calloc(WORKING, sizeof(obj));
  obj *cover = bench_malloc(sizeof(obj) * COVER_MAX);
  uint64_t serial = 0, sum = 0, passes = 0, grown = 0;
  size_t ncover = 0;
  for (uint64_t op = 0; op < ops; op++) {
    if (op % PASS == 0) {
      /* a new pass: drop the cover (the redundant half first, then the rest) */
      for (size_t i = ncover / 2; i-- > 0;) drop(&cover[2 * i + 1], &sum, op);
      for (size_t i = ncover; i-- > 0;) drop(&cover[i], &sum, op);
      ncover = 0;
      cube_size = 8 + 8 * (size_t)bench_rng_range(&rng, 1, 12);
      passes++;
    }
    uint64_t c = bench_rng_below(&rng, 100);
    if (c >= 95 && ncover == COVER_MAX) c = 70; /* a full cover: into the working set */
    if (c < 70) {
      obj *t = &temps[op % TEMPS];
      drop(t, &sum, op);
      make(t, pick_size(&rng), &serial);
    } else if (c < 95) {
      obj *w = &working[bench_rng_below(&rng, WORKING)];
      if (w->p != NULL && bench_rng_below(&rng, 8) == 0) {
        grow(w, w->size + (size_t)bench_rng_range(&rng, 1, w->size), op);
        grown++;
      } else {
        drop(w, &sum, op);
        make(w, pick_size(&rng), &serial);
      }
    } else {
      make(&cover[ncover++], pick_size(&rng), &serial);
    }
  }
  for (size_t i = 0; i < ncover; i++) drop(&cover[i], &sum, ops);
  for (size_t i = 0; i < WORKING; i++) drop(&working[i], &sum, ops);
  for (size_t i = 0; i < TEMPS; i++) drop(&temps[i], &sum, ops);
  free(cover);
  free(working);
  printf("espresso: scale=%ld ops=%llu passes=%llu grown=%llu objects=%llu "
         "checksum=%016llx\n", scale, (unsigned long long)ops, (unsigned long long)passes,
         (unsigned long long)grown, (unsigned long long)serial, (unsigned long long)sum);
  return 0;
}
