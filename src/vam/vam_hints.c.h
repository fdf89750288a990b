/* vam_hints.c.h — allocation near a hint (design_alloc_near): the hint's block, its
 * neighbours, and the class's hint block for hinted allocations that find no room near their
 * hint (docs/hints.md). */

/* Whether block b (of class cls, of heap h) is on avail[cls] with room: not full, and not an
 * empty block kept in the heap's cache (off every list, see vam.h's invariants). */
static inline bool vam_block_listed(heap_t *h, const desc_t *b) {
  bool listed = !cfg_block_bitmap || !(b->flags & FLAG_FULL);   /* vam-bitmap: may be exhausted */
  return listed && vam_has_room(b) && (b->used > 0 || h->d.spare[b->cls] == b);
}

/* The block of heap h serving size class cls (in any group: vam-sites) whose run holds page
 * descriptor d, if it has room; d may be any page of a segment of h (or a header page: not a
 * block). */
static inline desc_t *vam_block_near(heap_t *h, desc_t *d, unsigned cls) {
  if (d->kind != KIND_VAM_BLOCK && d->kind != KIND_INTERIOR) return NULL;
  desc_t *b = d - d->back;
  return b->kind == KIND_VAM_BLOCK && vam_base_class(b->cls) == cls && vam_block_listed(h, b) ? b : NULL;
}

/* Whether block b has room for a quarter of its capacity or more: the fill limit of hinted
 * allocations that cannot go on the hint's own page. A block that keeps a quarter free keeps
 * room for later objects whose hints point into it (NEXT.md's simulation: trees of random
 * keys get ~20% of nodes on their hint's page at 3/4, none when fallbacks fill blocks up). */
static inline bool vam_block_roomy(const desc_t *b) {
  size_t cap = vam_capacity(b);
  return cap - b->used >= (cap + 3) / 4;
}

/* Where a hinted allocation goes when the hint's block has no room and no neighbouring block
 * has a quarter free: the class's hint block while it is under 3/4 full, else a new one (the
 * old one goes back on the class's list). The hint block is on no list, so unhinted objects
 * never take its slots: a list built amid churn moves on to it, node after node, instead of
 * following its last node into old blocks with one freed slot each, between same-size objects
 * of the rest of the program (the flagship placed 30% of a churned list's nodes on their hint's
 * page, vam-bitmap's hinted walk was 1.5x slower than the plain one). NULL when no block can
 * be had. */
static desc_t *vam_hint_fallback(heap_t *h, unsigned cls) {
  desc_t *b = h->d.hint_block[cls];
  if (b && vam_block_roomy(b)) return b;
  if (b) list_push(&h->d.avail[b->cls], b);   /* it has room: back among the others */
  h->d.hint_block[cls] = NULL;
  if (!(b = vam_block_new(h, cls))) return NULL;
  list_unlink(&h->d.avail[cls], b);            /* vam_block_new listed it */
  h->d.hint_block[cls] = b;
  return b;
}

/* An object of block b (with room; on its class's list, or its hint block) for an allocation
 * near hint. The ordinary path serves the head of the class's list and keeps its invariants
 * (a block that gives its last object retires; vam-bitmap's too, here, as the flagship's do),
 * so b moves to the head for the take; afterwards a hint block with room goes back off the
 * list (one that filled is forgotten), and a listed block with room moves behind the block
 * after it, so that unhinted allocations do not follow hinted ones into their block and sit
 * between the hinted objects (vam-bitmap, whose full blocks were not retired at once, walked a
 * list built amid same-size temporaries 2.8x slower with hints than without). vam-bitmap
 * takes the first free slot after the hint's, when the hint is in b. */
static void *vam_take_near(heap_t *h, desc_t *b, const void *hint, bool zero) {
  unsigned cls = b->cls, base = vam_base_class(cls);
  desc_t **avail = &h->d.avail[cls];
  bool reserved = h->d.hint_block[base] == b;
  if (reserved || *avail != b) {
    if (!reserved) list_unlink(avail, b);
    list_push(avail, b);
  }
  const char *start = desc_start(b);
  unsigned from = cfg_block_bitmap && (const char *)hint >= start && (const char *)hint < b->u.blk.end
                ? (unsigned)(((const char *)hint - start) / b->obj_size) + 1 : 0;
  void *p = vam_block_take_from(h, b, cls, zero, from);   /* it has room: never NULL */
  if (cfg_block_bitmap && !vam_has_room(b)) vam_block_retire(h, b, cls);
  if (*avail != b) {                         /* it filled and retired */
    if (reserved) h->d.hint_block[base] = NULL;
  } else if (reserved) {
    list_unlink(avail, b);
  } else if (b->next != &h->d.none) {
    desc_t *next = b->next;
    list_unlink(avail, b);
    list_insert_after(next, b);
  }
  return p;
}

/* The hint's own block if it is of this class and has room, else the block on the page just
 * before or just after it if it has a quarter free (a neighbouring page is still near: the
 * same TLB reach and, for a sequential traversal, the next prefetched page), else the class's
 * hint block (vam_hint_fallback). Hints into another heap's memory, large areas and core runs
 * fall back to plain malloc: only page blocks place objects by address. */
static NOINLINE void *vam_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  if (size > VAM_MEDIUM_MAX || h == &heap_empty || segmap_get(hint) != GRANULE_SEGMENT) return vam_alloc(h, size, zero);
  segment_t *s = segment_of(hint);
  if (s->heap != h) return vam_alloc(h, size, zero);
  unsigned cls = sizeclass_of(&vam_classes, size);
  void *cached;
  if (cfg_tcache && (cached = vam_tcache_take_near(h, cls, hint, zero))) return cached;
  desc_t *d = desc_of_page(s, hint), *b = vam_block_near(h, d, cls);
  if (!b) {
    desc_t *head = d - (d->kind == KIND_INTERIOR ? d->back : 0);
    size_t first = (size_t)(head - s->desc);
    size_t after = first + (head->kind == KIND_FREE || !head->npages ? 1 : head->npages);
    if (first > s->first) b = vam_block_near(h, &s->desc[first - 1], cls);
    if (b && !vam_block_roomy(b)) b = NULL;
    if (!b && after < s->npages) b = vam_block_near(h, &s->desc[after], cls);
    if (b && !vam_block_roomy(b)) b = NULL;
    if (!b) b = vam_hint_fallback(h, cls);
  }
  return b ? vam_take_near(h, b, hint, zero) : vam_alloc(h, size, zero);
}

static void *design_alloc_near(heap_t *h, size_t size, const void *hint, bool zero) {
  return vam_alloc_near(h, size, hint, zero);
}
static unsigned design_kregion_shift(const void *hint) { (void)hint; return os_page_shift; }
