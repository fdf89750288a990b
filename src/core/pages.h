/* pages.h — segments and page descriptors: the types of the page manager (pagemgr.h), runs of
 * pages, and the lookup from an address to its descriptor.
 *
 * A segment is a 4 MiB reservation aligned to its size and owned by one heap. Its first pages
 * hold the segment header and one descriptor per page, so any address inside finds its
 * descriptor with a mask and a shift. A run is a range of pages handed out as one unit; its
 * first page's descriptor (the head) describes it, every other page of a run in use points
 * back to the head (`back`).
 *
 * Invariants
 *  - In a run in use, desc[i].back == i - head for every page i of the run; the head's kind is
 *    the run's, every other page's KIND_INTERIOR (so a page whose kind is not KIND_INTERIOR is
 *    its own head: free finds one-page blocks without reading `back`).
 *  - In a free run, every page has kind KIND_FREE and flags 0 except on the head; back is 0
 *    except on the tail page, where it leads to the head (so a run freed just after can find
 *    and merge with it). Free runs are never adjacent: they are merged when freed.
 *  - A free run is in exactly one bin; it is in the dirty list iff FLAG_DIRTY (its pages may
 *    hold data and count in RSS). Clean free runs read as zero.
 *  - pages.dirty_pages is the sum of npages over dirty runs.
 *  - First-fit builds (LOCUS_PAGES_FIRST_FIT): every free run is in bins[0], sorted by address.
 */
#ifndef LOCUS_PAGES_H
#define LOCUS_PAGES_H

#include <time.h>
#include <sys/sysinfo.h>

enum desc_kind {
  KIND_FREE = 0,     /* page of a free run (fresh descriptors are zero, hence free) */
  KIND_HEADER = 1,   /* segment header pages */
  KIND_HUGE = 2,     /* a huge object served as a run of pages (core) */
  KIND_INTERIOR = 3, /* a page of a run in use other than its head (back leads to the head) */
  KIND_REGION = 4,   /* a region's chunk: objects laid end to end (core, region.h) */
  KIND_REGION_BIG = 5,   /* one region object too big for a chunk (region.h) */
  KIND_REGION_DEAD = 6,  /* debug builds: a destroyed region's run, inaccessible (region.h) */
  KIND_DESIGN = 8,   /* kinds >= 8 belong to the design (blocks, large areas, ...) */
};

static inline bool kind_is_region(unsigned kind) { return kind >= KIND_REGION && kind <= KIND_REGION_DEAD; }

enum desc_flags {
  FLAG_DIRTY = 1,    /* free run whose pages were not discarded */
  FLAG_CLEAN = 2,    /* run in use whose untouched part still reads as zero */
  FLAG_FULL = 4,     /* design block on its full list */
  FLAG_QUARANTINED = 8,   /* QUARANTINE: huge run freed, not yet reusable (huge.h) */
  FLAG_SEALED = 16,  /* HUGE_RELEASE: a quarantined huge run made inaccessible (huge.h) */
};

/* One cache line each, and aligned to one (segment_t puts desc[] on a line boundary): free
 * reads a descriptor and the fast paths write it, so it must not straddle two lines. */
typedef struct desc desc_t;
struct __attribute__((aligned(64))) desc {
  desc_t *next, *prev;                 /* the one list the run is on (design list or bin) */
  union {
    struct { void *free; char *bump; char *end; } blk;             /* design blocks */
    struct { desc_t *dnext, *dprev; uint64_t freed_ms; } run;      /* free runs */
    struct { size_t usable; } huge;                                /* KIND_HUGE */
    struct { struct locus_region *region; uint64_t salt; } rgn;   /* KIND_REGION* (region.h) */
    void *any[3];
  } u;
  uint16_t back;       /* pages back to the head of the run (a run lies in one segment) */
  uint16_t npages;     /* run length (head only) */
  uint32_t obj_size;   /* design blocks: object size */
  uint16_t used;       /* design blocks: objects handed out and not freed */
  uint8_t cls;         /* design blocks: size class */
  uint8_t kind;        /* enum desc_kind, or a design kind */
  uint16_t flags;      /* enum desc_flags */
  uint8_t marker_off;  /* design blocks: offset of the double-free marker word */
  uint8_t aux8;        /* design-specific (vam: header bytes or bitmap words of a block) */
  uint32_t aux, aux2;  /* design-specific */
};

/* A page's tag: design-specific words a free reads before anything else, in a dense array of
 * the segment header, 8 bytes a page (vam: the slot test's key offset and bound, and in the
 * key the block's class, on every page of a block: vam_block.c.h). Eight pages share a line
 * where each descriptor fills a line, so the first read of a free on a page whose metadata
 * went cold (a successor thread freeing what its predecessor allocated, a random free in a
 * large live set) stays in the nearer caches, and is one line. Zero on a new segment's pages;
 * a design that writes a page's tag clears what it must before the page goes back to the page
 * manager. */
typedef struct page_tag {
  uint32_t key;        /* design-specific */
  uint32_t bound;      /* design-specific */
} page_tag_t;

typedef struct segment segment_t;
struct segment {
  /* Written by the page manager. */
  segment_t *next, *prev;       /* the heap's segments */
  uint32_t free_pages;
  uint32_t committed;           /* GUARD_PAGES: pages below this are accessible (pagemgr.h) */
  /* Read by every free, from any thread: a line nobody writes while the segment lives. The
   * segment's second line, not its first: every segment's first line falls in the same L1
   * set as every page's first line, and with a dozen segments the free's read of heap missed
   * there a quarter of the time (cachegrind, randsmall: 0.90 M misses in 3.25 M frees; 0.57 M
   * in the second line). */
  uint64_t check __attribute__((aligned(64)));   /* segment_cookie ^ address: this really is a segment */
  struct heap *heap;            /* owner; never changes while the segment exists */
  uint32_t npages;              /* pages in the segment */
  uint32_t first;               /* first page after the header */
  page_tag_t tag[SEGMENT_SIZE >> 12] __attribute__((aligned(64)));   /* per page (pages of 4 KiB or more) */
  desc_t desc[];                /* aligned to 64 by desc_t's own alignment */
};
_Static_assert(sizeof(desc_t) == 64, "a descriptor is one cache line");
_Static_assert(SEGMENT_SIZE >> 12 <= UINT16_MAX, "a run's page count fits its fields");

static uint64_t segment_cookie;      /* random, from the kernel's AT_RANDOM bytes */

/* Free-run policy. Default (vam): size-binned best fit, each bin LIFO. LOCUS_PAGES_FIRST_FIT=1
 * (phk): one list of every free run sorted by address, and pages_alloc takes the first run that
 * fits, i.e. PHKmalloc's address-ordered first fit. Insertion walks the list (as PHKmalloc's
 * does); the default build compiles exactly as without the knob. */
#ifndef LOCUS_PAGES_FIRST_FIT
#define LOCUS_PAGES_FIRST_FIT 0
#endif
static const bool cfg_pages_first_fit = LOCUS_PAGES_FIRST_FIT;

#define RUN_BINS 128
typedef struct pages {
  segment_t *segments;
  desc_t *bins[RUN_BINS];       /* free runs: bins 0..63 hold runs of exactly i+1 pages,
                                   bin 64+k holds runs of 2^(6+k) .. 2^(7+k)-1 pages */
  bitmap2_t binmap;
  desc_t *dirty_oldest, *dirty_newest;
  size_t dirty_pages;
  size_t nsegments;
  uint64_t last_pressure_check_ms;
} pages_t;

static inline segment_t *segment_of(const void *p) {
  return (segment_t *)((uintptr_t)p & ~SEGMENT_MASK);
}
static inline size_t page_index(const segment_t *s, const void *p) {
  return ((uintptr_t)p - (uintptr_t)s) >> os_page_shift;
}
static inline desc_t *desc_head(segment_t *s, const void *p) {
  desc_t *d = &s->desc[page_index(s, p)];
  return d - d->back;
}
/* The descriptor of p's own page: the run's head, or a KIND_INTERIOR page of it. */
static inline desc_t *desc_of_page(segment_t *s, const void *p) {
  /* (offset >> page_shift) * sizeof(desc_t), spelled so the compiler forms one address */
  uintptr_t at = (((uintptr_t)p & SEGMENT_MASK) >> os_page_shift) * sizeof(desc_t);
  return (desc_t *)((char *)s->desc + at);
}
/* The tag of p's page (page_tag_t). */
static inline page_tag_t *tag_of_page(segment_t *s, const void *p) {
  uintptr_t at = (((uintptr_t)p & SEGMENT_MASK) >> os_page_shift) * sizeof(page_tag_t);
  return (page_tag_t *)((char *)s->tag + at);
}
/* The tag of the page whose descriptor is d. */
static inline page_tag_t *tag_of_desc(const desc_t *d) {
  segment_t *s = segment_of(d);
  return &s->tag[d - s->desc];
}
/* desc_head, plus p's byte offset from the start of its run: what free needs, in few steps. */
static inline desc_t *desc_locate(segment_t *s, const void *p, size_t *off) {
  size_t in_segment = (uintptr_t)p - (uintptr_t)s, index = in_segment >> os_page_shift;
  desc_t *d = &s->desc[index];
  if (likely(d->kind != KIND_INTERIOR)) {
    *off = in_segment & (os_page_size - 1);
    return d;
  }
  size_t head = index - d->back;
  *off = in_segment - (head << os_page_shift);
  return &s->desc[head];
}
static inline segment_t *desc_segment(const desc_t *d) { return segment_of(d); }
static inline char *desc_start(const desc_t *d) {
  segment_t *s = desc_segment(d);
  return (char *)s + ((size_t)(d - s->desc) << os_page_shift);
}
static inline size_t desc_bytes(const desc_t *d) { return (size_t)d->npages << os_page_shift; }

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
