/* bitmap.h — bit sets with a summary word, for "first set bit at or after i" in O(1) words.
 * Used for indexed free-list tables (vam's large bins, the page manager's run bins) and for
 * the per-page chunk bitmaps of the PHK designs. Up to 64*64 = 4096 bits. */
#ifndef LOCUS_BITMAP_H
#define LOCUS_BITMAP_H

#define BITMAP_MAX_WORDS 64

typedef struct bitmap2 {
  uint64_t summary;                  /* bit w set <=> words[w] != 0 */
  uint64_t words[BITMAP_MAX_WORDS];
} bitmap2_t;

static inline void bitmap2_set(bitmap2_t *b, unsigned i) {
  b->words[i >> 6] |= 1ull << (i & 63);
  b->summary |= 1ull << (i >> 6);
}

static inline void bitmap2_clear(bitmap2_t *b, unsigned i) {
  uint64_t w = b->words[i >> 6] &= ~(1ull << (i & 63));
  if (!w) b->summary &= ~(1ull << (i >> 6));
}

/* First set bit >= i, or -1. */
static inline int bitmap2_find_from(const bitmap2_t *b, unsigned i) {
  unsigned w = i >> 6;
  if (w >= BITMAP_MAX_WORDS) return -1;
  uint64_t here = b->words[w] & (~0ull << (i & 63));
  if (here) return (int)(w * 64 + (unsigned)__builtin_ctzll(here));
  uint64_t later = w + 1 < 64 ? b->summary & (~0ull << (w + 1)) : 0;
  if (!later) return -1;
  w = (unsigned)__builtin_ctzll(later);
  return (int)(w * 64 + (unsigned)__builtin_ctzll(b->words[w]));
}


/* ---- chunk bitmaps (1 = free chunk) -----------------------------------------------------------
 * The two searches the PHK designs compare, shared by every design that keeps bitmaps.
 * Each reports how many bitmap words it inspected, for the statistics. */

/* PHKmalloc's software search: the first word with a free chunk, then the bit. Cost grows with
 * the number of words before the first free chunk. Returns the chunk index or -1. */
static inline int bits_find_linear(const uint64_t *w, unsigned nwords, unsigned *inspected) {
  for (unsigned i = 0; i < nwords; i++) {
    if (w[i]) { *inspected = i + 1; return (int)(i * 64 + (unsigned)__builtin_ctzll(w[i])); }
  }
  *inspected = nwords;
  return -1;
}

/* The same search from chunk `from` on, wrapping around to the start: the free chunk nearest
 * after a given one (allocation near a hint). */
static inline int bits_find_linear_from(const uint64_t *w, unsigned nwords, unsigned from, unsigned *inspected) {
  unsigned first = from / 64 < nwords ? from / 64 : 0;
  uint64_t here = w[first] & (~0ull << (from % 64 * (first == from / 64)));
  for (unsigned n = 0; n <= nwords; n++) {
    unsigned i = (first + n) % nwords;
    uint64_t bits = n == 0 ? here : w[i];
    if (bits) { *inspected = n + 1; return (int)(i * 64 + (unsigned)__builtin_ctzll(bits)); }
  }
  *inspected = nwords + 1;
  return -1;
}

/* The hybrid allocator's search in software: a summary word has bit i set iff word i has a
 * free chunk (the OR-tree's answer per word); the first set summary bit, then the first set
 * bit of that word (the AND-tree's priority encoder), is the first free chunk. Two words
 * inspected whatever the page holds (up to 64 words = 4096 chunks). */
static inline int bits_find_summary(uint64_t summary, const uint64_t *w, unsigned *inspected) {
  if (!summary) { *inspected = 1; return -1; }
  unsigned i = (unsigned)__builtin_ctzll(summary);
  *inspected = 2;
  return (int)(i * 64 + (unsigned)__builtin_ctzll(w[i]));
}

#endif
