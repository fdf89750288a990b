/* churn — small-object churn.
 *
 * Models the steady state of a long-running C/C++ program (an interpreter, a server handling
 * requests): a large working set of small objects of mixed sizes in which, at random, one dies
 * and a new one of another size is born. Every object is written in full when allocated and
 * its contents checked when freed. What it rewards: a fast malloc/free path for small sizes
 * and reuse of freed memory without a growing footprint.
 *
 * usage: churn [scale] [--quick]     work (replacements) grows linearly with scale
 */
#include "bench_util.h"

enum {
  SLOTS = 100000,                 /* live objects, always */
  OPS_PER_SCALE = 16000000,       /* replacements per unit of scale */
};

int main(int argc, char **argv) {
  bench_name = "churn";
  int quick;
  long scale = bench_args(&argc, argv, 1, "[scale] [--quick]", &quick);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);

  bench_rng rng;
  bench_rng_seed(&rng, 0xc4a2);
  bench_slot *slots = bench_malloc(sizeof(bench_slot) * SLOTS);
  uint64_t serial = 0, sum = 0;

  for (uint32_t i = 0; i < SLOTS; i++) bench_slot_fill(&slots[i], &rng, &serial);

  for (uint64_t k = 0; k < ops; k++) {
    bench_slot_replace(&slots[bench_rng_below(&rng, SLOTS)], &rng, &serial, &sum, serial);
  }

  for (uint32_t i = 0; i < SLOTS; i++) {
    bench_check(slots[i].p, slots[i].size, slots[i].tag, "object", i);
    sum = bench_fold(sum, slots[i].tag);
    free(slots[i].p);
  }
  free(slots);
  printf("churn: scale=%ld ops=%llu live=%d checksum=%016llx\n", scale, (unsigned long long)ops,
         SLOTS, (unsigned long long)sum);
  return 0;
}
