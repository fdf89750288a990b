/* vam_quarantine.c.h — the quarantine of freed block objects (mitigation quarantine): a ring
 * per heap, poison checked when an object leaves it; the secure free path; the sized-delete
 * bound (design_usable_max). */

/* The mark word 0 of a quarantined object holds: keyed, so no program data matches it by chance
 * or by design. */
static inline uintptr_t vam_qmark(const void *p) { return (uintptr_t)p ^ vam_qsecret; }

/* Ends the program if p is in the quarantine (it was freed): for calls that read an object. */
static void vam_quarantine_check(const void *p, const char *call) {
  if (*(const uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "pointer to a freed object", p);
}

/* The bytes of the block object or large chunk p (head d) that the quarantine poisons. */
static size_t vam_poison_len(desc_t *d, void *p, const char *call) {
  size_t n;
  if (d->kind == KIND_VAM_BLOCK) {
    n = vam_usable(d);
  } else {
    bool alias;
    chunk_t *c = chunk_of(d, p, call, &alias);
    n = (size_t)((char *)c + chunk_size(c) - (char *)p);
  }
  return n < VAM_POISON_MAX ? n : VAM_POISON_MAX;
}

/* Where words 2-3 of a quarantined slot of the free fast path are poisoned, its usable bytes
 * being n (16, 24, 32 ...): in place if the object has both (32 bytes or more), else in the
 * heap's poison sink (a 16- or 24-byte object: one of them or both are canary). No branch: n
 * is a coin toss under churn of mixed sizes, and a branch on it mispredicted. */
static ALWAYS_INLINE uintptr_t *vam_poison_at(heap_t *h, uintptr_t *w, size_t n) {
  if (!mitigation(QUARANTINE)) return &w[2];
  uintptr_t inside = (uintptr_t)0 - (uintptr_t)(n >= 4 * sizeof(uintptr_t));
  __asm__("" : "+r"(inside));   /* opaque: keeps the selection arithmetic */
  return (uintptr_t *)(((uintptr_t)&w[2] & inside) | ((uintptr_t)vam_quarantine_of(h)->poison_sink & ~inside));
}

/* An object leaves the quarantine: its mark and poison must be intact (else it was written
 * after it was freed), then it is freed for reuse. A slot of the free fast path's blocks
 * (block b) goes the flagship's fast way (its mark, marker and words 2-3: vam_poison_at);
 * anything else (b NULL) the flagship's free (its first min(usable, VAM_POISON_MAX) bytes). */
static NOINLINE void vam_release_foreign(heap_t *h, desc_t *b, void *p);
static NOINLINE void vam_quarantine_release_other(heap_t *h, void *p) {
  uintptr_t *w = p;
  desc_t *d = desc_of_page(segment_of(p), p);
  size_t n = vam_poison_len(d - d->back, p, "free()");
  if (w[0] != vam_qmark(p) || !poison_intact(p, sizeof(uintptr_t), n)) locus_fatal("free()", "write after free to", p);
  w[0] = 0;   /* no longer marked */
  vam_free_plain(h, segment_of(p), p, "free()");
}
static ALWAYS_INLINE void vam_quarantine_release(heap_t *h, void *p, desc_t *b) {
  if (unlikely(!b)) { vam_quarantine_release_other(h, p); return; }
  uintptr_t *w = p, marker = free_marker(p);
  uintptr_t diff = (w[0] ^ vam_qmark(p)) | (w[1] ^ marker);
  size_t n = vam_usable(b);
  const uintptr_t *poison = vam_poison_at(h, w, n);
  diff |= (poison[0] ^ POISON_WORD) | (poison[1] ^ POISON_WORD);
  if (unlikely(diff)) locus_fatal("free()", "write after free to", p);
  if (unlikely(segment_of(p)->heap != h)) { vam_release_foreign(h, b, p); return; }
  vam_slot_push(h, b, p, marker);
}

/* p (of block b, or NULL: see the ring) enters the quarantine, the oldest object leaves it. */
static ALWAYS_INLINE void vam_quarantine_push(heap_t *h, void *p, desc_t *b) {
  if (!mitigation(QUARANTINE)) return;
  vam_quarantine_t *qs = vam_quarantine_of(h);
  vam_quarantined_t *q = &qs->ring[qs->next], old = *q;
  qs->next = (qs->next + 1) % VAM_QUARANTINE;
  q->p = p;
  q->block = b;
  if (old.p) vam_quarantine_release(h, old.p, old.block);
}

/* Empties the quarantine (thread exit, purge). */
static void vam_quarantine_flush(heap_t *h) {
  vam_quarantined_t *ring = mitigation(QUARANTINE) ? vam_quarantine_of(h)->ring : NULL;
  for (unsigned i = 0; mitigation(QUARANTINE) && i < VAM_QUARANTINE; i++) {
    vam_quarantined_t q = ring[i];
    ring[i].p = NULL;
    if (q.p) vam_quarantine_release(h, q.p, q.block);
  }
}

/* The secure build's free: p is checked as an object of its kind (block slot: below the end,
 * not slot 0, not free or quarantined, canaries on both sides intact; large chunk: its header
 * and its neighbours'), marked and poisoned, and takes the oldest object's place in the
 * quarantine, which is freed for reuse. Core runs (regions) are freed at once. */
static NOINLINE void vam_free_secure_other(heap_t *h, desc_t *d, void *p, const char *call) {
  desc_t *b = d - d->back;
  if (b->kind == KIND_VAM_BLOCK) {
    if (vam_slot_index(b, p, call) == 0 && mitigation(CANARIES)) locus_fatal(call, "invalid pointer", p);
    if ((char *)p >= b->u.blk.bump) vam_free_unbumped(p, b, p, call);   /* (no canary there yet) */
    if ((mitigation(QUARANTINE) && *(uintptr_t *)p == vam_qmark(p)) || vam_slot_listed(h, b, p, false))
      locus_fatal(call, "double free", p);
    if (mitigation(CANARIES)) vam_canaries_check(b, p, call);
  } else if (b->kind == KIND_VAM_LARGE && mitigation(QUARANTINE)) {
    bool alias;
    chunk_t *c = chunk_of(b, p, call, &alias);
    if (*(uintptr_t *)p == vam_qmark(p)) locus_fatal(call, "double free", p);
    chunk_trust(chunk_next(c), call);
    if (c->prev_size) chunk_trust((chunk_t *)((char *)c - c->prev_size), call);
  } else {
    vam_free_plain(h, segment_of(p), p, call);
    return;
  }
  if (!mitigation(QUARANTINE)) {   /* checked: freed at once */
    vam_free_plain(h, segment_of(p), p, call);
    return;
  }
  size_t n = vam_poison_len(b, p, call);
  *(uintptr_t *)p = vam_qmark(p);
  if (n > sizeof(uintptr_t)) memset((char *)p + sizeof(uintptr_t), POISON_BYTE, n - sizeof(uintptr_t));
  vam_quarantine_push(h, p, NULL);
}

/* The secure build's free. Its fast path takes what the flagship's does (a slot of a block
 * whose slots hold a link and a marker word): the slot must be handed out (below the block's
 * bump pointer, not slot 0), not free (marker) nor quarantined (mark), with the canary words next to
 * it intact (the one after it, and its lower neighbour's last, just before it: a 1-byte
 * overflow or underflow changes one of them); then it is marked (word 0, word 1 the free
 * marker), poisoned (words 2-3 where the object has them: vam_poison_at) and quarantined (the freeing thread's ring, also for another heap's object: vam_release_foreign
 * sends it on when it leaves). Everything else takes vam_free_secure_other. */
static ALWAYS_INLINE void vam_secure_retire(heap_t *h, desc_t *b, void *p, const char *call) {
  uintptr_t *w = p;
  if (unlikely((char *)p >= b->u.blk.bump)) vam_free_unbumped(p, b, p, call);
  if (unlikely(marker_says_free(w[1], free_marker(p)))) locus_fatal(call, "double free", p);   /* listed or quarantined */
  if (mitigation(CANARIES)) vam_canaries_check(b, p, call);
  if (!mitigation(QUARANTINE)) return;
  size_t n = vam_usable(b);
  _Static_assert(VAM_POISON_MAX == 32, "the fast path poisons up to four words");
  w[0] = vam_qmark(p);   /* usable sizes here: 16, 24, 32 ... */
  w[1] = free_marker(p);   /* as on the free list: the one double-free test */
  uintptr_t *poison = vam_poison_at(h, w, n);
  poison[0] = poison[1] = POISON_WORD;
}

static ALWAYS_INLINE void vam_free_secure(heap_t *h, segment_t *s, void *p, const char *call) {
  desc_t *d = desc_of_page(s, p);
  if (unlikely(!vam_slot_live(s, p) || (mitigation(CANARIES) && vam_run_offset(d, p) == 0))) { vam_free_secure_other(h, d, p, call); return; }
  desc_t *b = d - d->back;
  vam_secure_retire(h, b, p, call);
  if (mitigation(QUARANTINE)) vam_quarantine_push(h, p, b);
  else vam_slot_push(h, b, p, free_marker(p));
}

/* The most usable bytes an object that operator new(size) returned can have: a sized delete
 * whose object has more was given a wrong (smaller) size. */
static size_t design_usable_max(size_t size) {
  if (size <= VAM_MEDIUM_MAX) return vam_class_usable(sizeclass_of(&vam_classes, size));
  if (size <= VAM_LARGE_MAX) return align_up(size + CHUNK_HEADER, 16) - CHUNK_HEADER + LARGE_MIN_CHUNK;
  return size + os_page_size;
}
