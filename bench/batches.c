/* batches — batches of same-size small objects, freed half FIFO and half LIFO.
 *
 * Models a program that works in batches: a parser or a request handler that allocates a
 * burst of nodes, messages or records of one type, uses them, and drops them when the batch
 * is done — some in arrival order (a queue drained from its head) and some in reverse (a
 * stack unwound from its top). The batch size varies widely (25..1600 objects) and so does
 * the object size (8..256 B), so an allocator sees its per-size caches overflow and drain
 * over and over. What it rewards: fast small-object paths under bursts, cheap refill and
 * flush of per-thread or per-size caches, and reuse of the memory freed by one batch for
 * the next, of another size.
 *
 * A cycle is one batch of each size in BATCH_N (25, 50, ..., 1600; 3175 objects); the
 * object size steps through OBJ_SIZE from batch to batch (8 sizes against 7 batch sizes, so
 * every pairing occurs). A batch: allocate n objects of one size and stamp each; walk them
 * once (reading each tag, as a program uses its data); then free them from both ends
 * alternately — the oldest, the newest, the next oldest, the next newest, ... — so half go
 * in FIFO order and half in LIFO order, meeting in the middle. Each object is checked
 * before it is freed.
 *
 * usage: batches [scale] [--quick]     cycles grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [--quick]"

enum {
  CYCLES_PER_SCALE = 20000,
  MAX_BATCH = 1600,
};

static const unsigned BATCH_N[] = {25, 50, 100, 200, 400, 800, 1600};
static const unsigned OBJ_SIZE[] = {8, 16, 24, 32, 48, 64, 128, 256};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Checks and frees object i of the batch whose first serial is base. */
static void release(unsigned char **obj, unsigned i, size_t size, uint64_t base,
                    uint64_t *sum) {
  uint64_t tag = bench_mix(base + i);
  bench_check(obj[i], size, tag, "object", base + i);
  *sum = bench_fold(*sum, tag ^ obj[i][size - 1]);
  free(obj[i]);
}

int main(int argc, char **argv) {
  bench_name = "batches";
  int quick;
  long scale = bench_args(&argc, argv, 1, USAGE, &quick);
  uint64_t cycles = bench_work(scale, CYCLES_PER_SCALE, quick);

  unsigned char **obj = bench_malloc(sizeof(unsigned char *) * MAX_BATCH);
  uint64_t serial = 0, sum = 0, batches = 0, walked = 0;
  for (uint64_t c = 0; c < cycles; c++) {
    for (unsigned b = 0; b < COUNT(BATCH_N); b++, batches++) {
      unsigned n = BATCH_N[b];
      size_t size = OBJ_SIZE[batches % COUNT(OBJ_SIZE)];
      uint64_t base = serial;
      bench_batch_alloc(obj, n, size, base);
      serial += n;
      for (unsigned i = 0; i < n; i++) {
        uint64_t t;
        memcpy(&t, obj[i], 8);
        walked += t >> 60;
      }
      for (unsigned lo = 0, hi = n; lo < hi;) {
        release(obj, lo++, size, base, &sum);          /* FIFO: the oldest left */
        if (lo < hi) release(obj, --hi, size, base, &sum); /* LIFO: the newest left */
      }
    }
  }
  free(obj);
  printf("batches: scale=%ld cycles=%llu batches=%llu objects=%llu checksum=%016llx\n", scale,
         (unsigned long long)cycles, (unsigned long long)batches, (unsigned long long)serial,
         (unsigned long long)bench_fold(sum, walked));
  return 0;
}
