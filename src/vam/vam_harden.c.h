/* vam_harden.c.h — the protections inside blocks (mitigations.h): free-list links keyed per
 * heap, canaries between slots, random slot order at carve time, checked links. The flagship
 * compiles each to nothing. */

static inline uintptr_t vam_link_key(const heap_t *h) {
  return mitigation(KEYED_LINKS) ? *vam_link_key_of((heap_t *)h) : 0;
}
/* A block's free-list link: safe-linked (config.h), and in the secure build keyed per heap. */
static inline uintptr_t vam_link_encode(const heap_t *h, const void *at, const void *next) {
  return link_encode(at, next) ^ vam_link_key(h);
}
static inline void *vam_link_load(const heap_t *h, const void *at) {
  return link_decode(at, *(const uintptr_t *)at ^ vam_link_key(h));
}

/* A canary word: its address under the secret (a multiply would add nothing: it is invertible,
 * so one canary read out gives the secret either way). */
static inline uintptr_t vam_canary(const void *at) { return (uintptr_t)at ^ vam_secret; }

/* The canaries on both sides of the object p of block b (never slot 0: see vam.h): the word
 * after it catches an overflow of it, the word before it (its neighbour's) an underflow of it
 * or an overflow of the neighbour. One branch for both: the free fast path's test. */
static ALWAYS_INLINE void vam_canaries_check(const desc_t *b, const void *p, const char *call) {
  const uintptr_t *after = (const uintptr_t *)((const char *)p + vam_usable(b)), *before = (const uintptr_t *)p - 1;
  if (unlikely((*after ^ vam_canary(after)) | (*before ^ vam_canary(before))))
    locus_fatal(call, "heap overflow or underflow (canary overwritten) next to", p);
}

static inline uint64_t vam_random(heap_t *h) {
  if (!mitigation(RANDOM_ORDER)) return 0;
  return vam_mix(vam_random_of(h)->rng += 0x9E3779B97F4A7C15ull);
}

/* Secure build: a random bit (0 or 1), from a word of random bits drawn 63 at a time (the top
 * bit set on a fresh word is the sentinel that says the bits ran out). */
static ALWAYS_INLINE size_t vam_coin(heap_t *h) {
  if (!mitigation(RANDOM_ORDER)) return 0;
  vam_random_t *r = vam_random_of(h);
  uint64_t bits = r->coins;
  if (unlikely(bits <= 1)) bits = vam_random(h) | 1ull << 63;
  r->coins = bits >> 1;
  return bits & 1;
}

/* Secure build: writes the canary of slot (the one or two words after its usable bytes). */
static ALWAYS_INLINE void vam_canary_set(const desc_t *b, char *slot) {
  uintptr_t *first = (uintptr_t *)(slot + vam_usable(b)), *last = (uintptr_t *)(slot + b->obj_size) - 1;
  *first = vam_canary(first);
  *last = vam_canary(last);   /* the same word when the canary is 8 bytes */
}

/* Secure build: a block's slot 0 is never handed out (its canary guards slot 1's front): the
 * bump pointer starts past it, its canary written. */
static void vam_block_skip_first(desc_t *b) {
  if (!mitigation(CANARIES)) return;
  char *start = desc_start(b);
  vam_canary_set(b, start);
  b->u.blk.bump = start + b->obj_size;
  vam_bump_moved(b, start, NULL, b->u.blk.bump);
}

/* Puts slot p on block b's free list, marked free (marker: free_marker(p)); returns the list's
 * previous head. */
static ALWAYS_INLINE void *vam_slot_list(const heap_t *h, desc_t *b, void *p, uintptr_t marker) {
  uintptr_t *w = p;
  void *head = b->u.blk.free;
  w[1] = marker;
  b->u.blk.free = p;   /* between the two words' stores: kept as two plain stores */
  w[0] = vam_link_encode(h, p, head);
  return head;
}

/* The next object of block b from its bump pointer (below its end). The secure build takes
 * the slots two at a time, writing their canaries (so every slot below the bump pointer has
 * one): a coin toss picks which of the two is handed out, the other goes onto the block's free
 * list, which the secure build serves first, so it is the next one handed out. Consecutive
 * allocations are thus not a constant distance apart (an attacker cannot place an object next
 * to a victim by allocating in order), yet they stay within two slots of address order, so a
 * walk of them is still a stream the prefetchers follow: a shuffle within windows of 8 slots
 * made the walks of a freshly built list 2x slower, and handing the unpicked slot out later
 * (after the bump pointer reached the end) 1.3x. No branch depends on the coin (a mispredicted
 * branch per allocation cost batches 15%). */
static ALWAYS_INLINE char *vam_carve(heap_t *h, desc_t *b) {
  char *p = b->u.blk.bump;
  size_t size = b->obj_size;
  if (mitigation(CANARIES)) vam_canary_set(b, p);
  if (mitigation(RANDOM_ORDER)) {
    char *q = p + size;
    if (q < b->u.blk.end) {
      if (mitigation(CANARIES)) vam_canary_set(b, q);
      size_t pick = vam_coin(h) * size;
      char *other = q - pick;
      vam_slot_list(h, b, other, free_marker(other));
      p += pick;
      b->u.blk.bump = q + size;
      vam_bump_moved(b, q - size, q, q + size);
      return p;
    }
  }
  b->u.blk.bump = p + size;
  vam_bump_moved(b, p, NULL, p + size);
  return p;
}

/* Secure build: a link just decoded from the free list of block b (from the object at p) must
 * be NULL or a listed slot of b; anything else is a write after free over the link. */
static COLD void vam_link_corrupt(const void *p) { locus_fatal("malloc()", "corrupted free-list link (write after free) in", p); }
static inline void vam_link_check(const desc_t *b, const char *next, const void *p) {
  const char *start = desc_start(b);
  const char *first = start + (mitigation(CANARIES) ? b->obj_size : 0);   /* canaries: slot 0 is no object */
  if (next && (next < first || next >= b->u.blk.end ||
               vam_slot_of(b, (size_t)(next - start)) < 0)) vam_link_corrupt(p);
}
