/* bitmap_search.c — unit test of the two chunk-bitmap searches in src/core/bitmap.h.
 *
 * bits_find_summary (the hybrid allocator's OR-tree + priority encoder, with a summary word)
 * must find the same first free chunk as bits_find_linear (PHKmalloc's search) for every
 * single-free-bit position and for random patterns, on bitmaps of 1 to 64 words; the linear
 * search inspects (index / 64) + 1 words, the summary search 2 whatever the position.
 * Links nothing of the allocators: it includes the core headers directly. */
#pragma GCC diagnostic ignored "-Wunused-function"   /* print.h's helpers, unused here */
#include "../src/core/config.h"
#include "../src/core/print.h"
#include "../src/core/bitmap.h"
#pragma GCC diagnostic warning "-Wunused-function"

#include <stdio.h>

static int failures;

#define EXPECT(c, ...) do { if (!(c)) { if (failures++ < 10) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
                                          printf(__VA_ARGS__); printf("\n"); } } } while (0)

static uint64_t summary_of(const uint64_t *w, unsigned nwords) {
  uint64_t s = 0;
  for (unsigned j = 0; j < nwords; j++) if (w[j]) s |= 1ull << j;
  return s;
}

/* Both searches over one bitmap; returns the index found. */
static int both(const uint64_t *w, unsigned nwords, int expect) {
  unsigned lin_words = 0, sum_words = 0;
  int a = bits_find_linear(w, nwords, &lin_words);
  int b = bits_find_summary(summary_of(w, nwords), w, &sum_words);
  EXPECT(a == expect, "linear: %d, expected %d (%u words)", a, expect, nwords);
  EXPECT(b == expect, "summary: %d, expected %d (%u words)", b, expect, nwords);
  if (expect >= 0) {
    EXPECT(lin_words == (unsigned)expect / 64 + 1, "linear inspected %u words for bit %d", lin_words, expect);
    EXPECT(sum_words == 2, "summary inspected %u words", sum_words);
  } else {
    EXPECT(lin_words == nwords && sum_words == 1, "empty: %u and %u words", lin_words, sum_words);
  }
  return b;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int main(void) {
  static const unsigned sizes[] = {1, 2, 3, 4, 8, 16, 63, 64};
  uint64_t w[BITMAP_MAX_WORDS];
  long cases = 0;
  for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    unsigned n = sizes[s];
    memset(w, 0, sizeof w);
    both(w, n, -1);
    /* every single free chunk, alone, and as the first of a run of free chunks after it */
    for (unsigned i = 0; i < n * 64; i++) {
      memset(w, 0, sizeof w);
      w[i / 64] = 1ull << (i % 64);
      both(w, n, (int)i);
      for (unsigned k = i; k < n * 64; k++) w[k / 64] |= 1ull << (k % 64);
      both(w, n, (int)i);
      cases += 2;
    }
    /* random patterns: a random number of leading full words, then random density */
    for (int r = 0; r < 20000; r++) {
      unsigned lead = (unsigned)(rnd() % (n + 1));
      int expect = -1;
      for (unsigned j = 0; j < n; j++) {
        uint64_t x = rnd();
        switch (rnd() % 4) {
          case 0: x &= rnd() & rnd(); break;           /* sparse */
          case 1: x = 1ull << (x % 64); break;         /* one bit */
          case 2: x = 0; break;
          default: break;
        }
        w[j] = j < lead ? 0 : x;
        if (expect < 0 && w[j]) expect = (int)(j * 64 + (unsigned)__builtin_ctzll(w[j]));
      }
      both(w, n, expect);
      cases++;
    }
  }
  printf("bitmap_search: %ld cases, %d failures\n", cases, failures);
  return failures ? 1 : 0;
}
