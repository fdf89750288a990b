/* region_api.h — the locus_region_* API over the region engine, and what the core's realloc
 * calls for a region object. */
#ifndef LOCUS_REGION_API_H
#define LOCUS_REGION_API_H

/* ---- the API ------------------------------------------------------------------------------- */

LOCUS_API locus_region_t *locus_region_create(locus_region_t *parent) {
  if (parent) region_check_handle(parent, "locus_region_create()");
  if (atomic_load_explicit(&init_state, memory_order_acquire) != 2) global_init();
  bool clean;
  desc_t *d = region_chunk_take(NULL, REGION_CHUNK_MIN, &clean);
  if (!d) return alloc_failed();
  locus_region_t *r = (locus_region_t *)(desc_start(d) + region_bitmap_bytes(REGION_CHUNK_MIN));
  if (!clean) memset(r, 0, sizeof *r);
  r->magic = region_cookie ^ (uintptr_t)r;
  region_count_held(r, REGION_CHUNK_MIN);
  r->first = d;
  r->next_chunk = REGION_CHUNK_MIN * 2;
  d->u.rgn.region = r;
  d->next = NULL;
  r->chunks = d;
  r->nchunks = 1;
  region_chunk_reset(r, d, clean);
  region_chunk_use(r, d, clean);
  if (parent) {
    r->parent = parent;
    r->next_sibling = parent->child;
    if (parent->child) parent->child->prev_sibling = r;
    parent->child = r;
    parent->nchildren++;
  }
  atomic_fetch_add_explicit(&regions_live, 1, memory_order_relaxed);
  return r;
}

LOCUS_API void *locus_region_malloc(locus_region_t *r, size_t size) {
  return region_alloc(r, size, false, "locus_region_malloc()");
}

LOCUS_API void *locus_region_calloc(locus_region_t *r, size_t n, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) return alloc_failed();
  return region_alloc(r, total, true, "locus_region_calloc()");
}

LOCUS_API void *locus_region_aligned_alloc(locus_region_t *r, size_t align, size_t size) {
  if (cfg_debug) region_check_handle(r, "locus_region_aligned_alloc()");
  if (!is_pow2(align)) { errno = EINVAL; return NULL; }
  if (size > PTRDIFF_MAX - align) return alloc_failed();
  return region_alloc_slow(r, size, align < REGION_GRANULE ? REGION_GRANULE : align, false);
}

/* The run head of region object p, NULL for a big OS object; ends the program if p is not
 * one of r's objects (r NULL: any region's). */
static desc_t *region_locate(locus_region_t *r, void *p, const char *call) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) {
    desc_t *d = desc_head(segment_of(p), p);
    if (d->kind == KIND_REGION_DEAD) locus_fatal(call, "object of a destroyed region", p);
    /* A page-aligned pointer to a free run: most likely a big object freed before. */
    if (d->kind == KIND_FREE && !((uintptr_t)p & (os_page_size - 1))) locus_fatal(call, "double free", p);
    if (!kind_is_region(d->kind)) free_not_object(d, p, call);
    if (r && d->u.rgn.region != r) locus_fatal(call, "object of another region", p);
    return d;
  }
  if (g == GRANULE_NONE) locus_fatal(call, "invalid pointer", p);
  os_obj_t *o = os_obj_of(p, call);
  if (!o->region) locus_fatal(call, "invalid pointer", p);
  if (r && o->region != r) locus_fatal(call, "object of another region", p);
  return NULL;
}

/* locus_region_free of anything but a live chunk object of r: NULL, big objects, misuse. */
static NOINLINE void region_free_other(locus_region_t *r, void *p) {
  if (!p) return;
  region_free_object(r, region_locate(r, p, "locus_region_free()"), p, false, "locus_region_free()");
}

/* The checks of region_object_check in few steps, for the common case: a live object of one
 * of r's chunks (anything else takes region_free_other, which names the misuse). Granules
 * before a chunk's base (its bitmap, the region itself) never have their bit set. */
LOCUS_API void locus_region_free(locus_region_t *r, void *p) {
  if (cfg_debug) region_check_handle(r, "locus_region_free()");
  size_t off;
  desc_t *d;
  if (unlikely(segmap_get(p) != GRANULE_SEGMENT) ||
      unlikely((d = desc_locate(segment_of(p), p, &off))->kind != KIND_REGION || d->u.rgn.region != r)) {
    region_free_other(r, p);
    return;
  }
  const uint64_t *bits = chunk_bits(d);
  size_t i = off / REGION_GRANULE;
  uintptr_t *w = p, m = region_marker(d, p);
  if (unlikely((off & (REGION_GRANULE - 1)) || !((bits[i >> 6] >> (i & 63)) & 1) ||
               (d == r->cur && (char *)p >= r->bump) || (w[1] | 1) == (m | 1))) {
    region_free_other(r, p);
    return;
  }
  size_t j = i + 1;
  uint64_t word = bits[j >> 6] & (~0ull << (j & 63));
  if (unlikely(!word)) j = bit_next(bits, i);
  else j = (j & ~(size_t)63) + (size_t)__builtin_ctzll(word);
  region_bin_push_marked(r, p, (j - i) * REGION_GRANULE, m);
  r->reuse = true;
  r->limit = NULL;
  r->frees++;
}

/* realloc of region object p (of r, checked by the caller), by r's user: in place when the
 * object holds `size` without wasting more than half of it, else moved within the region. */
static void *region_realloc(locus_region_t *r, desc_t *d, void *p, size_t size, const char *call) {
  size_t usable = d ? region_usable(d, p, call) : os_obj_usable(os_obj_of(p, call));
  if (size <= usable && (size > usable / 2 || usable <= REGION_GRANULE)) return p;
  void *q = region_alloc(r, size, false, call);
  if (!q) return NULL;
  memcpy(q, p, usable < size ? usable : size);
  region_free_object(r, d, p, false, call);
  return q;
}

LOCUS_API void *locus_region_realloc(locus_region_t *r, void *p, size_t size) {
  if (!p) return locus_region_malloc(r, size);
  desc_t *d = region_locate(r, p, "locus_region_realloc()");
  if (size == 0) {
    region_free_object(r, d, p, false, "locus_region_realloc()");
    return NULL;
  }
  if (size > PTRDIFF_MAX) return alloc_failed();
  return region_realloc(r, d, p, size, "locus_region_realloc()");
}

LOCUS_API void locus_region_clear(locus_region_t *r) {
  region_check_handle(r, "locus_region_clear()");
  region_destroy_children(r);
  region_release(r, true);
}

LOCUS_API void locus_region_destroy(locus_region_t *r) {
  if (!r) return;
  region_check_handle(r, "locus_region_destroy()");
  region_destroy_children(r);
  region_release(r, false);
}

LOCUS_API int locus_region_on_destroy(locus_region_t *r, void (*fn)(void *), void *arg) {
  region_check_handle(r, "locus_region_on_destroy()");
  region_callback_t *c = region_alloc(r, sizeof *c, false, "locus_region_on_destroy()");
  if (!c) return ENOMEM;
  *c = (region_callback_t){ fn, arg, r->callbacks };
  r->callbacks = c;
  r->ncallbacks++;
  return 0;
}

LOCUS_API locus_region_t *locus_region_of(const void *p) {
  unsigned g = segmap_get(p);
  if (g == GRANULE_SEGMENT) return region_of_object(desc_head(segment_of(p), p), p);
  if (g == GRANULE_NONE) return NULL;
  os_obj_t *o = os_obj_find(p);
  return o && o->state == OS_OBJ_LIVE ? o->region : NULL;
}

LOCUS_API int locus_region_stats(locus_region_t *r, locus_region_stats_t *s) {
  region_check_handle(r, "locus_region_stats()");
  if (atomic_load_explicit(&r->remote, memory_order_relaxed)) region_collect(r);
  memset(s, 0, sizeof *s);
  uint64_t objects = 0, bytes = 0;
  for (desc_t *d = r->chunks; d; d = d->next) {
    char *base = chunk_base(r, d), *top = chunk_top(r, d);
    const uint64_t *bits = chunk_bits(d);
    for (size_t i = granule_of(d, base), end = granule_of(d, top); i < end; i = (i | 63) + 1) {
      uint64_t w = bits[i >> 6] & (~0ull << (i & 63));
      if ((i | 63) >= end) w &= ~0ull >> (63 - ((end - 1) & 63));
      objects += (uint64_t)__builtin_popcountll(w);
    }
    bytes += (uint64_t)(top - base);
  }
  /* The callback records live in the region but are not the program's objects. */
  size_t record = region_need(sizeof(region_callback_t));
  uint64_t free_objects = 0, free_bytes = 0;
  for (size_t i = 1; i < REGION_EXACT_BINS; i++)
    for (void *p = r->exact[i]; p; p = link_load(p)) free_objects++, free_bytes += i * REGION_GRANULE;
  for (unsigned b = 0; b < REGION_SIZED_BINS; b++)
    for (void *p = r->sized[b]; p; p = link_load(p)) free_objects++, free_bytes += free_object_size(p, 0);
  s->objects_live = objects - free_objects - r->ncallbacks + r->big_objects;
  s->bytes_live = bytes - free_bytes - r->ncallbacks * record + r->big_bytes;
  s->bytes_held = r->held;
  s->chunks = r->nchunks;
  s->children = r->nchildren;
  s->frees = r->frees;
  s->bump_mode = !r->reuse;
  return 0;
}

/* ---- what the core's free paths call ------------------------------------------------------- */

/* Realloc of p, a region object (core realloc: the caller is the region's user). */
static void *region_realloc_any(void *p, size_t size) {
  desc_t *d = region_locate(NULL, p, "realloc()");
  locus_region_t *r = d ? d->u.rgn.region : os_obj_of(p, "realloc()")->region;
  if (cfg_debug) region_check_handle(r, "realloc()");
  return region_realloc(r, d, p, size, "realloc()");
}

#endif
