/* randsmall — random small objects in a large live set, one thread or several.
 *
 * Models programs that keep many small objects alive and replace them in no particular order
 * (caches, interpreters' heaps, in-memory indexes): each of `threads` threads keeps a buffer of
 * SLOTS pointers and at each step checks and frees a random one and allocates a new object of
 * a random size skewed to small (mostly 8..256 bytes, 5% up to 4 KiB). The live set (about
 * 25 MB per thread) is bigger than the caches, so what it rewards is a short path on a cache
 * miss and objects that reuse the memory freed most recently.
 *
 * usage: randsmall [scale] [threads] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [threads] [--quick]"

enum {
  SLOTS = 250000,                 /* objects per thread */
  OPS_PER_SCALE = 3000000,        /* replacements per thread per unit of scale */
  MAX_THREADS = 64,
};

static size_t random_size(bench_rng *r) {
  return bench_rng_below(r, 100) < 5 ? (size_t)bench_rng_range(r, 257, 4096) : bench_small_size(r);
}

int main(int argc, char **argv) {
  bench_threaded_t a = bench_threaded_args(argc, argv, "randsmall", USAGE, 1, MAX_THREADS, OPS_PER_SCALE);
  return bench_private_churn(a, SLOTS, random_size, 0x5a11);
}
