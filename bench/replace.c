/* replace — one thread replacing random objects of a few sizes in a small array, with almost
 * no work between the calls.
 *
 * Models the innermost loop of an allocation-heavy program (an interpreter making and
 * dropping small values): a working set small enough for the first-level cache, where each
 * step checks and frees the object of a random slot and makes another of one of a few sizes,
 * cleared whole with memset (the malloc-then-memset idiom; its length decides the branches
 * memset takes, so they mispredict as the sizes mix). Only the thread cache's hit paths run,
 * back to back: what it measures is their latency when size classes interleave. Per-class
 * caches kept as arrays of pointers paid 20-25% for mixing two classes here, where lists
 * paid nothing (docs/results.md, "The thread cache as lists"); with a little more work
 * between the calls (a multiply-mixed checksum) the difference went away. Not in the default
 * suite (`localarrays` has this shape among bigger objects).
 *
 * usage: replace [scale] [size...] [--quick]   steps grow linearly with scale; sizes (bytes,
 *        1..65536, at most 16 of them, drawn with equal weights) default to 16 and 32
 */
#include "bench_util.h"

#define USAGE "[scale] [size...] [--quick]"

enum {
  SLOTS = 1024,                   /* live objects */
  STEPS_PER_SCALE = 20000000,
  MAX_SIZES = 16,
};

int main(int argc, char **argv) {
  bench_name = "replace";
  int quick;
  long scale = bench_args(&argc, argv, 1 + MAX_SIZES, USAGE, &quick);
  uint64_t steps = bench_work(scale, STEPS_PER_SCALE, quick);
  size_t sizes[MAX_SIZES] = {16, 32};
  int nsizes = argc > 2 ? argc - 2 : 2;
  for (int i = 0; argc > 2 && i < nsizes; i++) sizes[i] = (size_t)bench_int_arg(argv[2 + i], 1, 65536, "size", USAGE);

  static unsigned char *obj[SLOTS];
  static size_t len[SLOTS];
  static unsigned char fill[SLOTS];
  uint64_t x = 0x5e1ace5eed5eedull, sum = 0;   /* xorshift64: the cheapest generator that will do */
  for (uint64_t k = 0; k < steps; k++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    unsigned i = (unsigned)(x % SLOTS);
    unsigned char *b = obj[i];
    if (b) {
      if (b[0] != fill[i] || b[len[i] / 2] != fill[i] || b[len[i] - 1] != fill[i])
        bench_die("content mismatch in object #%u (%zu bytes): the allocator handed out memory "
                  "that was still in use or corrupted it", i, len[i]);
      sum += fill[i] ^ len[i];
      free(b);
    }
    size_t size = sizes[(x >> 32) % nsizes];
    b = malloc(size);
    if (!b) bench_die("malloc(%zu) failed", size);
    fill[i] = (unsigned char)k;
    memset(b, fill[i], size);
    obj[i] = b;
    len[i] = size;
  }
  for (unsigned i = 0; i < SLOTS; i++) free(obj[i]);
  printf("replace: scale=%ld steps=%llu sizes=%d checksum=%016llx\n", scale, (unsigned long long)steps, nsizes,
         (unsigned long long)bench_fold(sum, 0));
  return 0;
}
