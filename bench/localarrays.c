/* localarrays — threads that only free their own objects, of sizes from 4 bytes to 32 KiB.
 *
 * Models worker threads with private state of varied sizes (the shape of glibc's own thread
 * benchmark): each of `threads` threads owns an array of SLOTS pointers and, again and again,
 * replaces the object of a random slot with a new one whose size comes from a fixed table
 * skewed to small sizes (4 B .. 32 KiB), writing every byte of it; the old object is checked
 * first. No object crosses threads. What it rewards: a fast thread-local path for small and
 * medium sizes, and memory that does not grow with the number of size classes in use.
 *
 * usage: localarrays [scale] [threads] [--quick]     operations grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [threads] [--quick]"

enum {
  SLOTS = 1024,                   /* objects per thread */
  OPS_PER_SCALE = 8000000,        /* replacements per thread per unit of scale */
  MAX_THREADS = 64,
};

/* Sizes and their weights (out of 1000): small ones most often, a few up to 32 KiB. */
static const uint32_t size_of[] = { 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192, 16384, 32768 };
static const uint16_t weight[] = { 60, 90, 120, 100, 100, 90, 80, 60, 60, 40, 40, 30, 30, 30, 25, 20, 15, 6, 4 };

static size_t table_size(bench_rng *r) {
  uint64_t w = bench_rng_below(r, 1000);
  for (size_t i = 0; i < sizeof size_of / sizeof size_of[0]; i++) {
    if (w < weight[i]) return size_of[i];
    w -= weight[i];
  }
  return size_of[0];
}

int main(int argc, char **argv) {
  bench_threaded_t a = bench_threaded_args(argc, argv, "localarrays", USAGE, 2, MAX_THREADS, OPS_PER_SCALE);
  uint32_t total = 0;
  for (size_t i = 0; i < sizeof weight / sizeof weight[0]; i++) total += weight[i];
  if (total != 1000) bench_die("the size weights add up to %u, not 1000", total);
  return bench_private_churn(a, SLOTS, table_size, 0x10ca1);
}
