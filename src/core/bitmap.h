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

#endif
