/* sizeclass.h — size-class tables as data, built once at start-up and self-checked.
 *
 * A table maps a request size (<= max) to a class and a class to its object size, plus a
 * reciprocal per class so that "is this offset a multiple of the object size" (catching
 * interior pointers in free) costs a multiply instead of a division. */
#ifndef LOCUS_SIZECLASS_H
#define LOCUS_SIZECLASS_H

#define SIZECLASS_MAX_CLASSES 256
#define SIZECLASS_LOOKUP_MAX  (1u << 16)          /* largest size served by lookup */
#define RECIP_SHIFT 32        /* exact while offset * size < 2^32: true inside any block */

/* The index of size in a table's lookup (and in any table kept beside it, indexed the same). */
#define sizeclass_lookup_index(size) (((size) + 7) >> 3)

typedef struct sizeclass_table {
  unsigned count;
  size_t max;                                      /* largest size with a class */
  uint32_t size[SIZECLASS_MAX_CLASSES];
  uint32_t recip[SIZECLASS_MAX_CLASSES];     /* ceil(2^32 / size) */
  uint8_t lookup[sizeclass_lookup_index(SIZECLASS_LOOKUP_MAX) + 1]; /* sizeclass_lookup_index(size) -> class */
} sizeclass_table_t;

/* Class c's entries for object size sz (a table's own, or one kept past its count, indexed the
 * same: the lookup does not reach it). */
static void sizeclass_put(sizeclass_table_t *t, unsigned c, size_t sz) {
  t->size[c] = (uint32_t)sz;
  t->recip[c] = (uint32_t)(((1ull << RECIP_SHIFT) + sz - 1) / sz);
}

static void sizeclass_add(sizeclass_table_t *t, size_t sz) {
  sizeclass_put(t, t->count++, sz);
  t->max = sz;
}

/* Builds the lookup from the sizes added so far (ascending) and checks the round trip:
 * every size maps to the smallest class that holds it. */
static void sizeclass_finish(sizeclass_table_t *t) {
  unsigned c = 0;
  for (size_t i = 0; i <= sizeclass_lookup_index(t->max); i++) {
    while (t->size[c] < (i << 3) && c + 1 < t->count) c++;
    t->lookup[i] = (uint8_t)c;
  }
  for (size_t s = 1; s <= t->max; s++) {
    unsigned k = t->lookup[sizeclass_lookup_index(s)];
    if (t->size[k] < s || (k && t->size[k - 1] >= s)) {
      locus_printf(2, "locus: size-class table broken at %zu\n", s);
      abort();
    }
  }
}

/* Classes `fine` apart from `first` below `fine_limit`, then `step` apart up to `max`. */
__attribute__((unused)) static void sizeclass_two_steps(sizeclass_table_t *t, size_t first, size_t fine, size_t fine_limit,
                                                        size_t step, size_t max) {
  t->count = 0;
  size_t s = first;
  for (; s < fine_limit; s += fine) sizeclass_add(t, s);
  for (s = align_up(s, step); s <= max; s += step) sizeclass_add(t, s);
  sizeclass_finish(t);
}

/* More classes after a table's last: `step` apart up to `max`. */
__attribute__((unused)) static void sizeclass_extend(sizeclass_table_t *t, size_t step, size_t max) {
  for (size_t s = t->max + step; s <= max; s += step) sizeclass_add(t, s);
  sizeclass_finish(t);
}

/* Classes `step` apart up to `max`, preceded by an 8-byte class when step > 8. */
__attribute__((unused)) static void sizeclass_linear(sizeclass_table_t *t, size_t step, size_t max) {
  sizeclass_two_steps(t, 8, 8, step, step, max);
}

/* Powers of two from `min` to `max` (PHKmalloc's classes). */
__attribute__((unused)) static void sizeclass_pow2(sizeclass_table_t *t, size_t min, size_t max) {
  t->count = 0;
  for (size_t s = min; s <= max; s <<= 1) sizeclass_add(t, s);
  sizeclass_finish(t);
}

static inline unsigned sizeclass_of(const sizeclass_table_t *t, size_t size) {
  return t->lookup[sizeclass_lookup_index(size)];
}

/* offset / size when offset is an exact multiple of size, else -1; recip = ceil(2^32/size)
 * (the table's, or a copy kept next to the block). Exact while offset * size < 2^32. */
static inline long divide_exact(size_t offset, uint32_t size, uint32_t recip) {
  size_t q = (offset * recip) >> RECIP_SHIFT;
  return q * size == offset ? (long)q : -1;
}

static inline long sizeclass_index(const sizeclass_table_t *t, unsigned cls, size_t offset) {
  return divide_exact(offset, t->size[cls], t->recip[cls]);
}

/* realloc in place while the object's class still fits the new size and is not more than twice
 * it (PHKmalloc's rule; the smallest class always fits). */
static inline bool sizeclass_resize_fits(uint32_t obj_size, unsigned cls, size_t size) {
  return size <= obj_size && (size > obj_size / 2 || cls == 0);
}

#endif
