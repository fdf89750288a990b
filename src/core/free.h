/* free.h — the one place that knows every kind of memory a pointer can be: the free of each
 * (a design's object, a huge run, a region object, an OS object, another heap's object, not
 * ours), the usable size, and what a design's free hands over for a run that is not of its
 * one-page kind (free_in_run) or of none of its kinds (core_free). */
#ifndef LOCUS_FREE_H
#define LOCUS_FREE_H

/* design_free's other case: p is not on the head page of a run of the design's one-page kind.
 * Finds p's run head and its offset in the run, then design_free_run. */
static NOINLINE void free_in_run(heap_t *h, void *p, const char *call) {
  size_t off;
  desc_t *d = desc_locate(segment_of(p), p, &off);
  design_free_run(h, d, p, off, call);
}

/* design_free_run's other case: p's run d is of none of the design's kinds. A huge page run is
 * freed, a region object queued for its region; anything else means p is not an object. */
static NOINLINE void core_free(heap_t *h, desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_HUGE) huge_free(h, d, p, call);
  else if (kind_is_region(d->kind)) region_free_queued(d, p, call);
  else free_not_object(d, p, call);
}


/* A free of an object owned by another heap: a huge run goes straight back to its page manager
 * (huge.h), anything else, checked, onto the owner's remote stack (heap.h). */
static NOINLINE void heap_free_remote(heap_t *h, desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_HUGE && likely(!h->fork_broken)) {
    heap_free_remote_run(h, d, p, call);
    return;
  }
  if (d->kind >= KIND_DESIGN) design_check_remote(d, p, call);
  else if (d->kind != KIND_HUGE || p != huge_user(d)) locus_fatal(call, "invalid pointer", p);
  heap_push_remote(h, p, call);
}

/* free of anything not in a segment: NULL, an object with its own mapping, or not ours. Out of
 * line so that the common path needs no saved registers. */
static NOINLINE void free_outside_segments(void *p, const char *call) {
  if (!p) return;
  unsigned g = segmap_get(p);
  uintptr_t user;   /* secure: a big object unmapped on free is still known for a while */
  if (g == GRANULE_NONE)
    locus_fatal(call, mitigation(FAULT_NAMING) && guard_freed_find((uintptr_t)p, &user) && user == (uintptr_t)p ? "double free" : "invalid pointer", p);
  int saved = errno;
  os_obj_t *o = os_obj_of(p, call);
  if (o->region) region_free_queued_os(o, p);
  else os_obj_free(p, call);
  errno = saved;
}

/* A free of p, in a segment of heap h, by a thread that does not own h (page: the
 * descriptor of p's page), that the design did not keep: a region object goes to its
 * region's queue, anything else home (checked there). */
static NOINLINE void free_foreign_home(heap_t *h, desc_t *page, void *p, const char *call) {
  desc_t *d = page - page->back;
  if (d->kind == KIND_FREE) free_not_object(d, p, call);
  if (kind_is_region(d->kind)) { region_free_queued(d, p, call); return; }
  heap_free_remote(h, d, p, call);
}

#if !DESIGN_HAS_FREE_FOREIGN
static ALWAYS_INLINE void design_free_foreign(heap_t *me, heap_t *h, segment_t *s, void *p, const char *call) {
  (void)me;
  free_foreign_home(h, desc_of_page(s, p), p, call);
}
#endif

static NOINLINE void free_foreign_heap(void *p, heap_t *h, segment_t *s, const char *call) {
  design_free_foreign(tl_heap, h, s, p, call);
}

#if !DESIGN_HAS_FREE_ANY
static ALWAYS_INLINE void design_free_any(void *p, segment_t *s, const char *call) {
  heap_t *h = s->heap;
  if (likely(h == tl_heap)) design_free(h, s, p, call);
  else free_foreign_heap(p, h, s, call);
}
#endif

static ALWAYS_INLINE void free_impl(void *p, const char *call) {
  /* The map's index shifted back is the segment's address (kept so: one instruction, where
   * the mask the compiler makes of it is two). NULL lies in granule 0, never a segment. */
  uintptr_t g = (uintptr_t)p >> SEGMENT_SHIFT;
  if (likely(segmap_is_segment(g))) {
    __asm__("" : "+r"(g));
    design_free_any(p, (segment_t *)(g << SEGMENT_SHIFT), call);
  } else {
    free_outside_segments(p, call);
  }
}

/* Usable size of a live object; validates p like free does. */
static size_t usable_impl(const void *p, const char *call) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) {
    segment_t *s = segment_of(p);
    size_t quick = design_usable_quick(s, p, call);
    if (quick) return quick;
    desc_t *d = desc_head(s, p);
    if (d->kind >= KIND_DESIGN) return design_usable(d, p, call);
    if (kind_is_region(d->kind)) return region_usable(d, p, call);
    if (d->kind == KIND_HUGE && p == huge_user(d)) {
      if (mitigation(QUARANTINE) && (d->flags & FLAG_QUARANTINED)) locus_fatal(call, "pointer to a freed object", p);
      if (mitigation(CANARIES) && !big_canary_ok((const char *)p - 16)) locus_fatal(call, "heap underflow (canary overwritten) before", p);
      return d->u.huge.usable;
    }
    free_not_object(d, p, call);
  }
  if (g != GRANULE_NONE) return os_obj_usable(os_obj_of(p, call));
  locus_fatal(call, "invalid pointer", p);
}

/* Whether p is (or claims to be) a region object: realloc keeps those in their region. */
static bool is_region_object(const void *p) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) return kind_is_region(desc_head(segment_of(p), p)->kind);
  os_obj_t *o = g != GRANULE_NONE ? os_obj_find(p) : NULL;
  return o && o->region;
}

#endif
