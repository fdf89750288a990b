/* bigbuf — big zero-initialised buffers, replaced at random.
 *
 * Models a program that keeps a few large working buffers — image frames, decompression
 * windows, column chunks of a query, network receive buffers — and replaces them over and
 * over with new ones of another size: each new buffer comes from calloc and is then filled,
 * the old one is freed. What it rewards: calloc of large blocks that knows fresh pages are
 * already zero (no second pass of zeroing), reuse of freed large blocks or address space
 * without a page fault on every page each time, and not keeping hundreds of MiB of freed
 * buffers around.
 *
 * SLOTS buffers are live at any time (about 300 MiB). Each replacement picks a slot at
 * random, checks the stamp of its buffer (tag, fill byte at the middle, the end and a few
 * random pages) and frees it, then callocs a new one of 5..25 MiB, checks a sample of it is
 * zero (the first and last 4 KiB and ZERO_PAGES random pages: not the whole buffer, which
 * would fault in every page of an allocator that maps fresh memory), and fills the whole
 * buffer, as a program writing its data would.
 *
 * The work is REPLACEMENTS_PER_SCALE replacements per unit of scale (after SLOTS initial
 * buffers); every one writes 15 MiB on average, so most of the time goes to writing memory
 * and to page faults, which is what differs between allocators here.
 *
 * usage: bigbuf [scale] [--quick]     replacements grow linearly with scale
 */
#include "bench_util.h"

#define USAGE "[scale] [--quick]"

enum {
  SLOTS = 20,
  REPLACEMENTS_PER_SCALE = 400,
  MIN_MIB = 5,
  MAX_MIB = 25,
  PAGE = 4096,
  ZERO_PAGES = 4,                 /* random pages checked to be zero, besides first and last */
  CHECK_PAGES = 4,                /* random pages whose fill byte is checked before free */
};

typedef struct {
  unsigned char *p;
  size_t size;
  uint64_t tag;
} buffer;

/* A random offset in the buffer, aligned down to a page, such that len bytes fit. */
static size_t random_page(bench_rng *rng, size_t size, size_t len) {
  return (size_t)bench_rng_below(rng, (size - len) / PAGE + 1) * PAGE;
}

static void make(buffer *b, bench_rng *rng, uint64_t serial) {
  size_t count = (size_t)bench_rng_range(rng, ((size_t)MIN_MIB << 20) / 8,
                                         ((size_t)MAX_MIB << 20) / 8);
  b->size = count * 8;
  b->p = bench_calloc(count, 8);
  bench_check_zero(b->p, 0, PAGE, "calloc buffer", serial);
  bench_check_zero(b->p, b->size - PAGE, PAGE, "calloc buffer", serial);
  for (int i = 0; i < ZERO_PAGES; i++)
    bench_check_zero(b->p, random_page(rng, b->size, PAGE), PAGE, "calloc buffer", serial);
  b->tag = bench_mix(serial);
  bench_fill(b->p, b->size, b->tag);
}

/* Checks the buffer's stamp, folds it into *sum and frees it. */
static void retire(buffer *b, bench_rng *rng, uint64_t *sum, uint64_t index) {
  bench_check(b->p, b->size, b->tag, "buffer", index);
  unsigned char f = bench_fill_byte(b->tag);
  for (int i = 0; i < CHECK_PAGES; i++) {
    size_t at = random_page(rng, b->size, PAGE) + (size_t)bench_rng_below(rng, PAGE);
    if (at >= 8 && b->p[at] != f)
      bench_die("content mismatch in buffer #%llu at byte %zu of %zu",
                (unsigned long long)index, at, b->size);
  }
  *sum = bench_fold(*sum, b->tag ^ b->size);
  free(b->p);
}

int main(int argc, char **argv) {
  bench_name = "bigbuf";
  int quick;
  long scale = bench_args(&argc, argv, 1, USAGE, &quick);
  uint64_t replacements = bench_work(scale, REPLACEMENTS_PER_SCALE, quick);

  bench_rng rng;
  bench_rng_seed(&rng, 0xb16b);
  buffer slots[SLOTS];
  uint64_t serial = 0, sum = 0, bytes = 0;
  for (int i = 0; i < SLOTS; i++) {
    make(&slots[i], &rng, ++serial);
    bytes += slots[i].size;
  }
  for (uint64_t k = 0; k < replacements; k++) {
    buffer *b = &slots[bench_rng_below(&rng, SLOTS)];
    retire(b, &rng, &sum, k);
    make(b, &rng, ++serial);
    bytes += b->size;
  }
  for (int i = 0; i < SLOTS; i++) retire(&slots[i], &rng, &sum, replacements + (uint64_t)i);

  printf("bigbuf: scale=%ld slots=%d replacements=%llu mib_written=%llu checksum=%016llx\n",
         scale, SLOTS, (unsigned long long)replacements, (unsigned long long)(bytes >> 20),
         (unsigned long long)sum);
  return 0;
}
