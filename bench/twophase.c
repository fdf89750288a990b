/* twophase — the same sizes from different call sites in two phases of a program.
 *
 * A program that loads its data in one loop and then works on it in another asks for the same
 * sizes from different places: the loader's calls and the worker's calls are different call
 * sites. Here three hot sizes (70, 100 and 150 bytes, each wasting much of a power-of-two bin)
 * are allocated in a first loop (LIVE objects, one call site per size), then replaced at
 * random in a second loop (free one, allocate one of the same size from the second loop's own
 * call site for that size), then everything is freed. As the second loop goes on, it frees the
 * first loop's objects at random: an allocator that gives each (call site, size) pair bins of
 * its own leaves the first loop's blocks half empty, with no other site allowed to reuse their
 * slots, and holds far more memory than bins shared by size. What it rewards: exact-size bins
 * shared by every site that asks for the size (or fine size classes), and reuse of freed slots
 * whatever site freed them.
 *
 * usage: twophase [scale] [--quick]     the replacements grow with scale (6 million per unit);
 *                                       the live set (LIVE objects, about 160 MB) does not
 */
#include "bench_util.h"

#define USAGE "[scale] [--quick]"

enum {
  LIVE = 1500000,                 /* objects alive at once */
  OPS_PER_SCALE = 6000000,        /* replacements per unit of scale */
};

static const size_t hot_size[3] = { 70, 100, 150 };

/* The call sites: one function per loop and size, so that the return addresses differ. */
BENCH_SITE void *load_small(uint64_t serial) { return bench_sized_new(70, serial); }
BENCH_SITE void *load_medium(uint64_t serial) { return bench_sized_new(100, serial); }
BENCH_SITE void *load_large(uint64_t serial) { return bench_sized_new(150, serial); }
BENCH_SITE void *work_small(uint64_t serial) { return bench_sized_new(70, serial); }
BENCH_SITE void *work_medium(uint64_t serial) { return bench_sized_new(100, serial); }
BENCH_SITE void *work_large(uint64_t serial) { return bench_sized_new(150, serial); }

static void *(*const load[3])(uint64_t) = { load_small, load_medium, load_large };
static void *(*const work[3])(uint64_t) = { work_small, work_medium, work_large };

int main(int argc, char **argv) {
  bench_name = "twophase";
  int quick;
  long scale = bench_args(&argc, argv, 1, USAGE, &quick);
  uint64_t ops = bench_work(scale, OPS_PER_SCALE, quick);
  uint64_t live = quick ? LIVE / 10 : LIVE;

  bench_rng rng;
  bench_rng_seed(&rng, 0x7770fa5e);
  void **slot = bench_malloc(sizeof(void *) * live);
  unsigned char *kind = bench_malloc(live);
  uint64_t serial = 0, sum = 0;
  for (uint64_t i = 0; i < live; i++) {
    kind[i] = (unsigned char)bench_rng_below(&rng, 3);
    slot[i] = load[kind[i]](++serial);
  }
  for (uint64_t op = 0; op < ops; op++) {
    uint64_t i = bench_rng_below(&rng, live);
    sum = bench_fold(sum, bench_sized_check_free(slot[i], "object", i));
    slot[i] = work[kind[i]](++serial);
  }
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < live; i++) {
    bytes += hot_size[kind[i]];
    sum = bench_fold(sum, bench_sized_check_free(slot[i], "object", i));
  }
  free(kind);
  free(slot);
  printf("twophase: scale=%ld live=%llu ops=%llu live_bytes=%llu checksum=%016llx\n", scale,
         (unsigned long long)live, (unsigned long long)ops, (unsigned long long)bytes,
         (unsigned long long)sum);
  return 0;
}
