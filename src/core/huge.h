/* huge.h — objects bigger than the design serves.
 *
 * Up to the OS threshold (LOCUS_OS_THRESHOLD, 1 MiB) a huge object is a run of pages from the
 * heap's page manager (KIND_HUGE): page-aligned, no header, its descriptor holds the size, and
 * its pages are discarded with the page manager's policy when freed. From the threshold up it
 * gets its own mapping (an OS object), aligned to the segment size so the segment map finds
 * its header: [header page][object ...]. Freed OS objects wait in a small cache (LOCUS_HUGE_CACHE
 * bytes, at most 8, dropped after LOCUS_DECAY_MS, or as soon as a new mapping is needed) so a
 * program that repeatedly allocates big buffers of similar sizes makes no mmap/munmap calls
 * each time. Only a quarter of the cache stays resident; the rest keeps its mappings but not
 * its pages: with all 16 MiB resident, sqlite's peak RSS was 25% higher (other objects grew
 * while its big sort buffers sat in the cache). The immediate policy does not cache. */
#ifndef LOCUS_HUGE_H
#define LOCUS_HUGE_H

#define OS_OBJ_MAGIC 0x4c6f6375734f626aull   /* "LocusObj" */
enum { OS_OBJ_LIVE = 1, OS_OBJ_CACHED = 2 };

typedef struct os_obj {
  uint64_t magic;          /* OS_OBJ_MAGIC ^ address: a real header */
  size_t map_size;         /* bytes mapped, header included */
  size_t offset;           /* user pointer - mapping base */
  uint32_t state;
} os_obj_t;

#define HUGE_CACHE_SLOTS 8
static struct { os_obj_t *obj; uint64_t freed_ms; bool dirty; } huge_cache[HUGE_CACHE_SLOTS];
static size_t huge_cache_bytes, huge_cache_dirty;   /* mapped / still resident, in the cache */
static _Atomic uint64_t os_objects_live, os_objects_bytes;

static inline size_t os_obj_usable(const os_obj_t *o) { return o->map_size - o->offset; }

static void os_obj_unmap(os_obj_t *o) {
  size_t size = o->map_size;
  segmap_set(o, size, GRANULE_NONE, GRANULE_NONE);
  os_unmap(o, size);
  atomic_fetch_add_explicit(&os_bytes_discarded, size, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_discard_calls, 1, memory_order_relaxed);
}

/* Drops cached objects older than `older_than` (all with UINT64_MAX). Returns bytes freed. */
static size_t huge_cache_purge(uint64_t older_than) {
  size_t freed = 0;
  lock_acquire(&huge_cache_lock);
  for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
    os_obj_t *o = huge_cache[i].obj;
    if (o && huge_cache[i].freed_ms < older_than) {
      huge_cache[i].obj = NULL;
      huge_cache_bytes -= o->map_size;
      if (huge_cache[i].dirty) huge_cache_dirty -= o->map_size;
      freed += o->map_size;
      os_obj_unmap(o);
    }
  }
  lock_release(&huge_cache_lock);
  return freed;
}

/* Takes a cached mapping of at least `map_size` bytes and at most twice that. */
static os_obj_t *huge_cache_take(size_t map_size) {
  if (!huge_cache_bytes) return NULL;
  os_obj_t *best = NULL;
  int slot = -1;
  lock_acquire(&huge_cache_lock);
  for (int i = 0; i < HUGE_CACHE_SLOTS; i++) {
    os_obj_t *o = huge_cache[i].obj;
    if (o && o->map_size >= map_size && o->map_size / 2 <= map_size && (!best || o->map_size < best->map_size)) {
      best = o;
      slot = i;
    }
  }
  if (best) {
    huge_cache[slot].obj = NULL;
    huge_cache_bytes -= best->map_size;
    if (huge_cache[slot].dirty) huge_cache_dirty -= best->map_size;
  }
  lock_release(&huge_cache_lock);
  return best;
}

static bool huge_cache_put(os_obj_t *o) {
  if (opt.discard == DISCARD_IMMEDIATE || o->map_size > opt.huge_cache) return false;
  uint64_t now = now_ms();
  bool kept = false;
  lock_acquire(&huge_cache_lock);
  int slot = -1;
  for (int i = 0; i < HUGE_CACHE_SLOTS && slot < 0; i++) if (!huge_cache[i].obj) slot = i;
  if (slot >= 0 && huge_cache_bytes + o->map_size <= opt.huge_cache) {
    /* A quarter of the cache may stay resident (reuse then faults nothing in); beyond that the
     * mapping is kept but its pages are discarded. */
    bool dirty = huge_cache_dirty + o->map_size <= opt.huge_cache / 4;
    if (dirty) huge_cache_dirty += o->map_size;
    else os_discard((char *)o + os_page_size, o->map_size - os_page_size);
    o->state = OS_OBJ_CACHED;
    huge_cache[slot].obj = o;
    huge_cache[slot].freed_ms = now;
    huge_cache[slot].dirty = dirty;
    huge_cache_bytes += o->map_size;
    kept = true;
  }
  lock_release(&huge_cache_lock);
  huge_cache_purge(now - opt.decay_ms);
  return kept;
}

static void *os_obj_alloc(size_t size, size_t align, bool zero) {
  size_t page = os_page_size;
  if (align < page) align = page;
  if (size > PTRDIFF_MAX - 2 * align - SEGMENT_SIZE) return NULL;
  size_t offset = align_up(sizeof(os_obj_t), align);   /* header page (or one alignment unit) */
  size_t map_size = align_up(offset + size, page);
  os_obj_t *o = huge_cache_take(map_size);
  if (o && o->offset != offset) {    /* a cached mapping with another alignment: drop it */
    os_obj_unmap(o);
    o = NULL;
  }
  if (o) {
    if (zero) memset((char *)o + offset, 0, size);
  } else {
    /* No cached mapping fits: the cached ones do not suit what the program allocates now, so
     * they go before a new mapping is made. The cache then never adds to the peak footprint
     * (keeping them made sqlite's peak RSS 25% higher for no gain in time). */
    if (huge_cache_bytes) huge_cache_purge(UINT64_MAX);
    o = os_map_aligned(map_size, SEGMENT_SIZE);
    if (!o) return NULL;
    o->map_size = map_size;
    o->offset = offset;
    o->magic = OS_OBJ_MAGIC ^ (uintptr_t)o;
    segmap_set(o, map_size, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
  }
  o->state = OS_OBJ_LIVE;
  atomic_fetch_add_explicit(&os_objects_live, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_objects_bytes, o->map_size, memory_order_relaxed);
  return (char *)o + offset;
}

/* The header of the OS object holding p, checked; ends the program on a bad pointer. */
static os_obj_t *os_obj_of(const void *p, const char *call) {
  uintptr_t g = (uintptr_t)p & ~SEGMENT_MASK;
  while (segmap_get((void *)g) == GRANULE_OS_TAIL) g -= SEGMENT_SIZE;
  os_obj_t *o = (os_obj_t *)g;
  if (segmap_get(o) != GRANULE_OS_HEAD || o->magic != (OS_OBJ_MAGIC ^ g) || (char *)o + o->offset != p)
    locus_fatal(call, "invalid pointer", p);
  if (o->state != OS_OBJ_LIVE) locus_fatal(call, "double free", p);
  return o;
}

static void os_obj_free(void *p, const char *call) {
  os_obj_t *o = os_obj_of(p, call);
  atomic_fetch_sub_explicit(&os_objects_live, 1, memory_order_relaxed);
  atomic_fetch_sub_explicit(&os_objects_bytes, o->map_size, memory_order_relaxed);
  if (!huge_cache_put(o)) os_obj_unmap(o);
}

/* Resizes an OS object in place (mremap without moving); false if it cannot. */
static bool os_obj_resize(void *p, size_t size) {
  os_obj_t *o = os_obj_of(p, "realloc()");
  size_t need = align_up(o->offset + size, os_page_size);
  if (need == o->map_size) return true;
  if (need < o->map_size) {
    if (need < o->map_size / 2) return false;        /* moving is better than holding waste */
    return true;
  }
  if (need - o->offset > SIZE_MAX / 2) return false;
  /* Growing in place must not run into the next granule's owner: only within free space. */
  void *r = mremap(o, o->map_size, need, 0);
  if (r == MAP_FAILED) return false;
  atomic_fetch_add_explicit(&os_bytes_mapped, need - o->map_size, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_objects_bytes, need - o->map_size, memory_order_relaxed);
  segmap_set(o, need, GRANULE_OS_HEAD, GRANULE_OS_TAIL);
  o->map_size = need;
  return true;
}

/* ---- huge objects in runs of pages ---------------------------------------------------------- */

static NOINLINE void *huge_alloc(heap_t *h, size_t size, size_t align, bool zero) {
  if (unlikely(h == &heap_empty) && !(h = heap_acquire())) return alloc_failed();
  size_t pages = size ? (size + os_page_size - 1) >> os_page_shift : 1;
  if (size >= opt.os_threshold || size > PTRDIFF_MAX || pages + align / os_page_size > (SEGMENT_SIZE >> os_page_shift) / 2) {
    void *p = os_obj_alloc(size, align, zero);
    return p ? p : alloc_failed();
  }
  heap_collect(h);
  bool clean;
  desc_t *r = pages_alloc(h, pages, align > os_page_size ? align >> os_page_shift : 1, &clean);
  if (!r) return alloc_failed();
  r->kind = KIND_HUGE;
  r->u.huge.usable = pages << os_page_shift;
  h->stats.huge_in_use++;
  h->stats.malloc_calls++;
  h->stats.bytes_allocated += r->u.huge.usable;
  void *p = desc_start(r);
  if (zero && !clean) memset(p, 0, size);
  heap_debug_tick(h);
  return p;
}

static void huge_free(heap_t *h, desc_t *r, void *p, const char *call) {
  if (p != desc_start(r)) locus_fatal(call, "invalid pointer", p);
  h->stats.huge_in_use--;
  h->stats.free_calls++;
  h->stats.bytes_allocated -= r->u.huge.usable;
  pages_free(h, r);
  heap_debug_tick(h);
}

/* p's run d is of no design kind: design_free passes such runs here. A huge page run is freed;
 * anything else means p is not an object. */
static COLD __attribute__((noreturn)) void free_not_object(const desc_t *d, const void *p, const char *call) {
  locus_fatal(call, d->kind == KIND_FREE ? "double free or invalid pointer" : "invalid pointer", p);
}
static NOINLINE void core_free(heap_t *h, desc_t *d, void *p, const char *call) {
  if (d->kind == KIND_HUGE) huge_free(h, d, p, call);
  else free_not_object(d, p, call);
}

/* Resizes a huge run object in place when the pages allow it. Caller owns h. */
static bool huge_resize(heap_t *h, desc_t *r, size_t size) {
  size_t pages = (size + os_page_size - 1) >> os_page_shift;
  if (pages == 0 || size >= opt.os_threshold) return false;
  size_t old = r->npages;
  if (pages < old) {
    if (pages < old / 2) return false;
    pages_shrink(h, r, pages);
  } else if (!pages_grow(h, r, pages)) {
    return false;
  }
  h->stats.bytes_allocated += (pages << os_page_shift) - r->u.huge.usable;
  r->u.huge.usable = pages << os_page_shift;
  return true;
}

#endif
