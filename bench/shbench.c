/* shbench — millions of objects of a few awkward sizes from a few call sites.
 *
 * Our own program shaped like the shbench benchmark as seed 002 describes it: more than a
 * million objects alive at once, almost all of 64..180 bytes, and most of them of a few hot
 * sizes allocated in loops. The hot sizes are chosen to waste much of a power-of-two bin:
 * 70 bytes (in a 128-byte bin: 45% wasted), 100 (128: 22%) and 150 (256: 41%). Each hot size
 * comes from its own call site — a function of its own, never inlined — and 100 bytes comes
 * from two of them (a record and a key), so an allocator that keys its bins on (call site,
 * size) sees four hot contexts; 5% of the objects come from a fifth site with sizes spread
 * uniformly over 64..180. What it rewards: bins that fit the sizes actually asked for (an
 * exact-size bin per hot size, or fine size classes) — power-of-two bins hold about 1.6 times
 * the memory the program asks for here.
 *
 * The program keeps LIVE objects in a table: it first fills the table, then does its
 * operations — pick a random slot, check and free its object, allocate a new one from a
 * random call site — and in one operation in 64 replaces a whole run of RUN consecutive
 * slots instead (a burst of frees followed by a burst of allocations, as a program drops and
 * rebuilds a structure). At the end every object is checked and freed. Sites are chosen with
 * the weights 35% node (70 B), 20% record (100 B), 10% key (100 B), 30% buffer (150 B),
 * 5% misc (64..180 B).
 *
 * usage: shbench [scale] [--quick]     operations grow linearly with scale; the live set
 *                                      (LIVE objects, about 105 MB) does not
 */
#include "bench_util.h"

#define USAGE "[scale] [--quick]"

enum {
  LIVE = 1000000,                 /* objects alive at once */
  OPS_PER_SCALE = 1000000,        /* replacements per unit of scale */
  RUN = 256,                      /* slots replaced by a burst */
  MISC_MIN = 64,
  MISC_MAX = 180,
};

/* The call sites: each a function of its own, so that the return address differs. */
BENCH_SITE void *make_node(uint64_t serial) { return bench_sized_new(70, serial); }
BENCH_SITE void *make_record(uint64_t serial) { return bench_sized_new(100, serial); }
BENCH_SITE void *make_key(uint64_t serial) { return bench_sized_new(100, serial); }
BENCH_SITE void *make_buffer(uint64_t serial) { return bench_sized_new(150, serial); }
BENCH_SITE void *make_misc(uint64_t serial, size_t size) { return bench_sized_new(size, serial); }

/* A new object from a call site chosen with the weights above. */
static void *make(bench_rng *r, uint64_t serial) {
  uint64_t c = bench_rng_below(r, 100);
  if (c < 35) return make_node(serial);
  if (c < 55) return make_record(serial);
  if (c < 65) return make_key(serial);
  if (c < 95) return make_buffer(serial);
  return make_misc(serial, (size_t)bench_rng_range(r, MISC_MIN, MISC_MAX));
}

/* Checks and frees the object in slot i and folds its tag into *sum. */
static void drop(void **slot, uint64_t i, uint64_t *sum) {
  *sum = bench_fold(*sum, bench_sized_check_free(slot[i], "object", i));
  slot[i] = NULL;
}

int main(int argc, char **argv) {
  bench_name = "shbench";
  int quick;
  long scale = bench_args(&argc, argv, 1, USAGE, &quick);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);

  bench_rng rng;
  bench_rng_seed(&rng, 0x5bbe7c4);
  void **slot = bench_malloc(sizeof(void *) * LIVE);
  uint64_t serial = 0, sum = 0, bursts = 0;
  for (uint64_t i = 0; i < LIVE; i++) slot[i] = make(&rng, ++serial);
  for (uint64_t op = 0; op < ops; op++) {
    if (bench_rng_below(&rng, 64) == 0) {
      uint64_t first = bench_rng_below(&rng, LIVE - RUN);
      for (uint64_t i = first; i < first + RUN; i++) drop(slot, i, &sum);
      for (uint64_t i = first; i < first + RUN; i++) slot[i] = make(&rng, ++serial);
      bursts++;
    } else {
      uint64_t i = bench_rng_below(&rng, LIVE);
      drop(slot, i, &sum);
      slot[i] = make(&rng, ++serial);
    }
  }
  for (uint64_t i = 0; i < LIVE; i++) drop(slot, i, &sum);
  free(slot);
  printf("shbench: scale=%ld ops=%llu bursts=%llu objects=%llu checksum=%016llx\n", scale,
         (unsigned long long)ops, (unsigned long long)bursts, (unsigned long long)serial,
         (unsigned long long)sum);
  return 0;
}
