/* pagemgr.h — the page manager: each heap's segments and their runs of pages. Takes runs
 * (best fit from exact bins, aligned on request), gives them back merged with their free
 * neighbours, grows a run in place, and applies the discard policy to its free pages (caller
 * holds h->pages_lock where a function says so). Freeing a run with the clocks every heap
 * shares is reclaim.h's. */
#ifndef LOCUS_PAGEMGR_H
#define LOCUS_PAGEMGR_H

/* ---- bins -------------------------------------------------------------------------------- */

static inline unsigned run_bin(size_t n) {
  if (cfg_pages_first_fit) return 0;
  return n <= 64 ? (unsigned)(n - 1) : 64 + log2_floor(n) - 6;
}

/* Descriptors lie in their segment's header in page order, so comparing descriptor addresses
 * compares run addresses. */
static void bin_insert(pages_t *pm, desc_t *r) {
  unsigned b = run_bin(r->npages);
  desc_t *below = NULL;          /* first fit: the last run at a lower address */
  if (cfg_pages_first_fit)
    for (desc_t *c = pm->bins[b]; c && c < r; c = c->next) below = c;
  desc_list_insert(&pm->bins[b], below, r);
  bitmap2_set(&pm->binmap, b);
}

static void bin_remove(pages_t *pm, desc_t *r) {
  unsigned b = run_bin(r->npages);
  desc_list_remove(&pm->bins[b], r);
  if (!pm->bins[b]) bitmap2_clear(&pm->binmap, b);
}

static void dirty_push(pages_t *pm, desc_t *r, uint64_t when) {
  r->flags |= FLAG_DIRTY;
  r->u.run.freed_ms = when;
  r->u.run.dnext = NULL;
  r->u.run.dprev = pm->dirty_newest;
  if (pm->dirty_newest) pm->dirty_newest->u.run.dnext = r; else pm->dirty_oldest = r;
  pm->dirty_newest = r;
  pm->dirty_pages += r->npages;
}

static void dirty_remove(pages_t *pm, desc_t *r) {
  if (!(r->flags & FLAG_DIRTY)) return;
  if (r->u.run.dprev) r->u.run.dprev->u.run.dnext = r->u.run.dnext; else pm->dirty_oldest = r->u.run.dnext;
  if (r->u.run.dnext) r->u.run.dnext->u.run.dprev = r->u.run.dprev; else pm->dirty_newest = r->u.run.dprev;
  r->flags &= (uint16_t)~FLAG_DIRTY;
  pm->dirty_pages -= r->npages;
}

/* Makes the pages of [r, r+n), which a run in use held, plain free pages (kind FREE, back 0). */
static void run_clear(desc_t *r, size_t n) {
  for (size_t i = 0; i < n; i++) { r[i].kind = KIND_FREE; r[i].back = 0; r[i].flags = 0; }
}

/* Gives [r, r+n), whose pages are all plain free pages except perhaps r and the tail, the shape
 * of a free run: the head holds the length, the tail leads back to the head. Only the two ends
 * are written, so carving a block off a big free run, or merging free runs, costs O(1) and not
 * a store to every page's descriptor (which made a fresh segment's blocks cost O(pages) each). */
static void run_shape_free(desc_t *r, size_t n, uint16_t flags) {
  r->kind = KIND_FREE;
  r->back = 0;
  r->npages = (uint16_t)n;
  r->flags = flags;
  r[n - 1].kind = KIND_FREE;
  r[n - 1].back = (uint16_t)(n - 1);
}

/* Adds a free run (not yet in any list) to the bins and, if dirty, to the dirty list. */
static void run_insert(pages_t *pm, desc_t *r, bool dirty, uint64_t when) {
  bin_insert(pm, r);
  if (dirty) dirty_push(pm, r, when);
}

static void run_remove(pages_t *pm, desc_t *r) {
  bin_remove(pm, r);
  dirty_remove(pm, r);
}

/* ---- segments and runs -------------------------------------------------------------------- */

static size_t segment_header_pages;    /* the same for every segment */

/* Pages of a segment taken by its header and descriptors (the same for every segment). */
static inline size_t segment_header_count(void) {
  size_t npages = SEGMENT_SIZE >> os_page_shift;
  return align_up(sizeof(segment_t) + npages * sizeof(desc_t), os_page_size) >> os_page_shift;
}

/* Mitigation GUARD_PAGES: a segment's last page is inaccessible and belongs to no run,
 * so a linear overflow off the end of a segment faults before it reaches the next one. */
static inline size_t segment_guard_pages(void) { return mitigation(GUARD_PAGES) ? 1 : 0; }

/* GUARD_PAGES also keeps a segment's unused reserve inaccessible: its pages past the header are
 * PROT_NONE until the page manager first hands them out, then made accessible up to
 * `committed` in steps of SEGMENT_COMMIT_PAGES, 256 KiB (a fresh segment is carved from the
 * front; at most 16 mprotect calls per segment). A stray write far (1 MiB) past an object of a
 * young heap faults there, as it does past glibc's brk.
 * Pages once accessible stay so (a freed run is discarded, not protected again). */
#define SEGMENT_COMMIT_PAGES 64
static bool segment_commit(segment_t *s, size_t end) {
  if (!mitigation(GUARD_PAGES) || end <= s->committed) return true;
  size_t to = align_up(end, SEGMENT_COMMIT_PAGES);
  if (to > s->npages) to = s->npages;
  if (OS_CALL(mprotect((char *)s + ((size_t)s->committed << os_page_shift), (to - s->committed) << os_page_shift,
                       PROT_READ | PROT_WRITE)) != 0) return false;
  s->committed = (uint32_t)to;
  return true;
}

static segment_t *segment_create(heap_t *h) {
  segment_t *s = os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
  if (!s) return NULL;
  size_t npages = (SEGMENT_SIZE >> os_page_shift) - segment_guard_pages();
  size_t header = segment_header_count();
  segment_header_pages = header;
  s->check = segment_cookie ^ (uintptr_t)s;
  s->heap = h;
  s->npages = (uint32_t)npages;
  s->first = (uint32_t)header;
  for (size_t i = 0; i < header; i++) { s->desc[i].kind = KIND_HEADER; s->desc[i].back = 0; }
  if (mitigation(GUARD_PAGES)) s->committed = (uint32_t)header;
  if (segment_guard_pages()) {   /* the reserve and the guard page after it */
    s->desc[npages].kind = KIND_HEADER;   /* a free() there is an invalid pointer */
    OS_CALL(mprotect((char *)s + (header << os_page_shift), (npages + 1 - header) << os_page_shift, PROT_NONE));
  }
  s->prev = NULL;
  s->next = h->pages.segments;
  if (s->next) s->next->prev = s;
  h->pages.segments = s;
  h->pages.nsegments++;
  desc_t *r = &s->desc[header];
  run_shape_free(r, npages - header, 0);   /* fresh descriptors are zero: plain free pages */
  s->free_pages = (uint32_t)(npages - header);
  run_insert(&h->pages, r, false, 0);
  segmap_set(s, SEGMENT_SIZE, GRANULE_SEGMENT, GRANULE_SEGMENT);
  return s;
}

static void segment_destroy(heap_t *h, segment_t *s) {
  desc_t *r = &s->desc[s->first];
  run_remove(&h->pages, r);
  if (s->prev) s->prev->next = s->next; else h->pages.segments = s->next;
  if (s->next) s->next->prev = s->prev;
  h->pages.nsegments--;
  segmap_set(s, SEGMENT_SIZE, GRANULE_NONE, GRANULE_NONE);
  os_unmap(s, SEGMENT_SIZE);
  atomic_fetch_add_explicit(&os_bytes_discarded, SEGMENT_SIZE, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_discard_calls, 1, memory_order_relaxed);
}

static inline bool run_is_whole_segment(const desc_t *r) {
  const segment_t *s = desc_segment(r);
  return r == &s->desc[s->first] && r->npages == s->npages - s->first;
}

/* Takes n pages (aligned to `align` pages) from h. *clean tells whether they read as zero.
 * The run's pages point back to its head; the caller sets kind and the rest. Caller holds
 * h->pages_lock (pages_alloc below). */
static desc_t *pages_take(heap_t *h, size_t n, size_t align, bool *clean) {
  pages_t *pm = &h->pages;
  size_t want = n + (align > 1 ? align - 1 : 0);
  if (want > (SEGMENT_SIZE >> os_page_shift) - segment_header_count() - segment_guard_pages()) return NULL;
  desc_t *r = NULL;
  for (int b = bitmap2_find_from(&pm->binmap, run_bin(want)); b >= 0;
       b = bitmap2_find_from(&pm->binmap, (unsigned)b + 1)) {
    for (desc_t *c = pm->bins[b]; c; c = c->next)
      if (c->npages >= want) { r = c; break; }   /* exact bins: the first is a fit */
    if (r) break;
  }
  if (!r) {
    segment_t *s = segment_create(h);
    if (!s && memory_refused(h)) s = segment_create(h);
    if (!s) return NULL;
    r = &s->desc[s->first];
  }
  segment_t *s = desc_segment(r);
  if (mitigation(GUARD_PAGES) && !segment_commit(s, (size_t)(r - s->desc) + (want < r->npages ? want : r->npages)))
    return NULL;
  bool dirty_run = r->flags & FLAG_DIRTY;
  uint64_t when = dirty_run ? r->u.run.freed_ms : 0;
  run_remove(pm, r);
  size_t total = r->npages;
  /* Trim the front for alignment, then the tail; both go back as free runs. */
  size_t idx = (size_t)(r - s->desc), lead = 0;
  if (align > 1) lead = (align_up(((uintptr_t)s >> os_page_shift) + idx, align) - ((uintptr_t)s >> os_page_shift)) - idx;
  if (lead) {
    run_shape_free(r, lead, 0);
    run_insert(pm, r, dirty_run, when);
    r += lead;
    total -= lead;
  }
  if (total > n) {
    desc_t *rest = r + n;
    run_shape_free(rest, total - n, 0);
    run_insert(pm, rest, dirty_run, when);
  }
  for (size_t i = 0; i < n; i++) { r[i].back = (uint16_t)i; r[i].kind = KIND_INTERIOR; }
  r->npages = (uint16_t)n;
  r->flags = dirty_run ? 0 : FLAG_CLEAN;
  s->free_pages -= (uint32_t)n;
  h->stats.pages_in_use += n;
  *clean = !dirty_run;
  return r;
}

static desc_t *pages_alloc(heap_t *h, size_t n, size_t align, bool *clean) {
  lock_acquire(&h->pages_lock);
  desc_t *r = pages_take(h, n, align, clean);
  lock_release(&h->pages_lock);
  return r;
}

/* Discards one free run now (or unmaps its segment when it is the whole segment and the heap
 * has another). */
static void pages_purge_run(heap_t *h, desc_t *r) {
  if (run_is_whole_segment(r) && h->pages.nsegments > 1) {
    segment_destroy(h, desc_segment(r));
    return;
  }
  dirty_remove(&h->pages, r);
  os_discard(desc_start(r), desc_bytes(r));
}

/* Unmaps h's wholly free segments while more than `keep` segments remain (1 on a full purge;
 * 0 after the OS refused memory: the last one goes too). Caller holds h->pages_lock. */
static void pages_unmap_free_segments_locked(heap_t *h, size_t keep) {
  for (segment_t *s = h->pages.segments, *next; s && h->pages.nsegments > keep; s = next) {
    next = s->next;
    desc_t *r = &s->desc[s->first];
    if (r->kind == KIND_FREE && run_is_whole_segment(r)) segment_destroy(h, s);
  }
}

/* Discards the oldest dirty runs while more than `keep_pages` dirty pages remain and the
 * oldest was freed before `older_than` (UINT64_MAX: whatever its age). Returns the bytes
 * given back. Caller holds h->pages_lock (pages_purge below). */
static size_t pages_purge_locked(heap_t *h, uint64_t older_than, size_t keep_pages) {
  pages_t *pm = &h->pages;
  size_t before = atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed);
  while (pm->dirty_oldest && pm->dirty_pages > keep_pages && pm->dirty_oldest->u.run.freed_ms < older_than)
    pages_purge_run(h, pm->dirty_oldest);
  /* On a full purge, wholly free clean segments beyond the first go back too. */
  if (keep_pages == 0 && older_than == UINT64_MAX) pages_unmap_free_segments_locked(h, 1);
  return atomic_load_explicit(&os_bytes_discarded, memory_order_relaxed) - before;
}

static size_t pages_purge(heap_t *h, uint64_t older_than, size_t keep_pages) {
  lock_acquire(&h->pages_lock);
  size_t n = pages_purge_locked(h, older_than, keep_pages);
  lock_release(&h->pages_lock);
  return n;
}

static bool memory_under_pressure(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0 || !si.totalram) return false;
  uint64_t avail = ((uint64_t)si.freeram + si.bufferram) * si.mem_unit;
  return avail * 100 < (uint64_t)si.totalram * si.mem_unit * opt.pressure_pct;
}

/* The delayed policy. Free pages go back when the program is not reusing them: beyond
 * LOCUS_DIRTY_MAX the heap halves its dirty pages; below it, pages idle for LOCUS_DECAY_MS
 * go back, oldest first. */
static void pages_decay(heap_t *h, uint64_t now) {
  pages_t *pm = &h->pages;
  if (pm->dirty_pages > opt.dirty_max >> os_page_shift) pages_purge_locked(h, UINT64_MAX, pm->dirty_pages / 2);
  if (pm->dirty_oldest && now - pm->dirty_oldest->u.run.freed_ms > opt.decay_ms)
    pages_purge_locked(h, now - opt.decay_ms, 0);
}

/* Applies the discard policy to h's pages after some were freed (caller holds pages_lock). */
static void pages_policy_locked(heap_t *h, uint64_t now) {
  pages_t *pm = &h->pages;
  if (!pm->dirty_oldest) return;
  if (opt.discard == DISCARD_DELAYED) {
    pages_decay(h, now);
  } else if (opt.discard == DISCARD_PRESSURE && now - pm->last_pressure_check_ms >= 100) {
    pm->last_pressure_check_ms = now;
    if (memory_under_pressure()) pages_purge_locked(h, UINT64_MAX, 0);
  }
}

/* Returns a run to h's free pages, merging it with free neighbours. Caller holds pages_lock. */
static void pages_give(heap_t *h, desc_t *r) {
  pages_t *pm = &h->pages;
  segment_t *s = desc_segment(r);
  size_t n = r->npages, idx = (size_t)(r - s->desc);
  bool immediate = opt.discard == DISCARD_IMMEDIATE;
  h->stats.pages_in_use -= n;
  s->free_pages += (uint32_t)n;
  if (immediate) os_discard(desc_start(r), n << os_page_shift);
  bool dirty = !immediate;
  uint64_t when = now_ms();
  run_clear(r, n);
  /* Merge with free neighbours: their boundary pages become plain free pages. */
  if (idx > s->first && s->desc[idx - 1].kind == KIND_FREE) {
    desc_t *tail = &s->desc[idx - 1], *prev = tail - tail->back;
    dirty |= (prev->flags & FLAG_DIRTY) != 0;
    run_remove(pm, prev);
    tail->back = 0;
    n += prev->npages;
    r = prev;
    idx = (size_t)(r - s->desc);
  }
  if (idx + n < s->npages && s->desc[idx + n].kind == KIND_FREE) {
    desc_t *next = &s->desc[idx + n];
    dirty |= (next->flags & FLAG_DIRTY) != 0;
    run_remove(pm, next);
    next->flags = 0;
    n += next->npages;
  }
  run_shape_free(r, n, 0);
  if (immediate && run_is_whole_segment(r) && pm->nsegments > 1) {
    bin_insert(pm, r);
    segment_destroy(h, s);
    return;
  }
  run_insert(pm, r, dirty, when);
}

/* Grows the run r in place to n pages if the pages after it are free (caller holds the lock). */
static bool pages_extend(heap_t *h, desc_t *r, size_t n) {
  segment_t *s = desc_segment(r);
  size_t have = r->npages, idx = (size_t)(r - s->desc);
  if (n <= have) return true;
  if (idx + have >= s->npages || s->desc[idx + have].kind != KIND_FREE) return false;
  desc_t *next = &s->desc[idx + have];
  if (have + next->npages < n || !segment_commit(s, idx + n)) return false;
  bool dirty = next->flags & FLAG_DIRTY;
  uint64_t when = next->u.run.freed_ms;
  size_t total = next->npages;
  run_remove(&h->pages, next);
  size_t extra = n - have;
  if (total > extra) {
    desc_t *rest = next + extra;
    run_shape_free(rest, total - extra, 0);
    run_insert(&h->pages, rest, dirty, when);
  }
  for (size_t i = have; i < n; i++) { r[i].back = (uint16_t)i; r[i].kind = KIND_INTERIOR; r[i].flags = 0; }
  r->npages = (uint16_t)n;
  if (dirty) r->flags &= (uint16_t)~FLAG_CLEAN;
  s->free_pages -= (uint32_t)extra;
  h->stats.pages_in_use += extra;
  return true;
}

static bool pages_grow(heap_t *h, desc_t *r, size_t n) {
  lock_acquire(&h->pages_lock);
  bool grown = pages_extend(h, r, n);
  lock_release(&h->pages_lock);
  return grown;
}


/* ---- debugging --------------------------------------------------------------------------- */

/* Walks h's page manager: every page of every segment belongs to exactly one run, free runs
 * are binned and never adjacent, counts agree. Returns the number of problems found. */
static size_t pages_check(heap_t *h) {
  size_t bad = 0, dirty = 0;
  for (segment_t *s = h->pages.segments; s; s = s->next) {
    CHECK(s->check == (segment_cookie ^ (uintptr_t)s) && s->heap == h);
    size_t free_pages = 0;
    bool prev_free = false;
    for (size_t i = s->first; i < s->npages;) {
      desc_t *r = &s->desc[i];
      CHECK(r->back == 0 && r->npages >= 1 && i + r->npages <= s->npages);
      if (r->npages < 1 || i + r->npages > s->npages) return bad;
      if (r->kind == KIND_FREE) {
        CHECK(!prev_free);
        CHECK(r[r->npages - 1].back == r->npages - 1);
        for (size_t k = 1; k < r->npages; k++)
          CHECK(r[k].kind == KIND_FREE && r[k].flags == 0 && (r[k].back == 0 || k + 1 == r->npages));
        bool binned = false;
        for (desc_t *c = h->pages.bins[run_bin(r->npages)]; c && !binned; c = c->next) binned = c == r;
        CHECK(binned);
        free_pages += r->npages;
        if (r->flags & FLAG_DIRTY) dirty += r->npages;
      } else {
        for (size_t k = 1; k < r->npages; k++) CHECK(r[k].back == k && r[k].kind == KIND_INTERIOR);
      }
      prev_free = r->kind == KIND_FREE;
      i += r->npages;
    }
    CHECK(free_pages == s->free_pages);
  }
  CHECK(dirty == h->pages.dirty_pages);
  return bad;
}

/* For design_check: runs `body` for every run head r of kind `k` in h's segments, in address
 * order (walks run heads via npages, so free runs and runs of other kinds are stepped over). */
#define HEAP_FOR_EACH_RUN(h, k, r, body) \
  for (segment_t *s_ = (h)->pages.segments; s_; s_ = s_->next) \
    for (size_t i_ = s_->first; i_ < s_->npages; i_ += s_->desc[i_].npages ? s_->desc[i_].npages : 1) { \
      desc_t *r = &s_->desc[i_]; \
      if (r->kind == (k)) { body } \
    }

/* Walks h's page manager and the design's structures (caller owns h). */

#endif
