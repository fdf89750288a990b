/* phk.h — the PHK design: PHKmalloc (Kamp; described in Feng & Berger, MSP 2005, §2.2) and the
 * page-based hybrid allocator of Li, Mohanty & Kavi, with the Table 2 variants of Feng & Berger,
 * all as compile-time knobs of this one design.
 *
 * The heap is page-oriented. The page directory is the segments' page descriptors (core
 * pages.h): any address finds its page's descriptor with a mask and a shift.
 *   small   size < page/2     one page of equal chunks; chunk size = size rounded up to a power
 *                             of two, at least 16 (the quantum: x86-64 needs 16-byte alignment
 *                             for anything over 8 bytes, and PHKmalloc's own minimum is 16)
 *   pages   page/2 .. 1 MiB   whole pages (core huge.h: a run of pages from the page manager)
 *   OS      >= 1 MiB          own mapping (core osobj.h)
 * Free page runs: one list sorted by address, first fit (core pages.h, LOCUS_PAGES_FIRST_FIT).
 *
 * Knobs (macros, mirrored as static const bools):
 *   LOCUS_PHK_SEARCH_SUMMARY  phk-hw: find the first free chunk through a summary word (bit j set
 *                             iff bitmap word j has a free chunk): the OR-tree/AND-tree search of
 *                             the hybrid allocator in software, two words whatever the page holds.
 *                             Without it: PHKmalloc's linear search, first non-zero word then bit.
 *   LOCUS_PHK_QUANTUM_CLASSES phk-sc: size classes 16 B apart (plus an 8-byte class) up to half a
 *                             page instead of powers of two. (The paper's 8 B spacing is 32-bit
 *                             x86's quantum.) On pages over 4 KiB the classes above 2 KiB stay
 *                             powers of two, which keeps the table under 256 classes.
 *   LOCUS_PHK_REAP            phk-reap: no bitmaps; a chunk page bumps a pointer to its end, then
 *                             reuses a free list threaded through its freed chunks (as vam does).
 *
 * A chunk page's descriptor (desc_t, core pages.h), design fields:
 *   cls, obj_size     size class and chunk size
 *   used              chunks handed out and not freed
 *   next, prev        the class's list of pages with free chunks (avail)
 * bitmap variants:
 *   u.any[0]          the page's start (chunk i is at start + i * obj_size)
 *   u.any[1]          the summary word (phk-hw only)
 *   u.any[2]          the bitmap, when one word holds it (chunks of 64 B and more on 4 KiB pages)
 *   marker_off        bitmap words; aux8: chunks the in-page bitmap occupies
 *   aux               chunks the page hands out (its capacity: "full" is used == aux)
 * reap variants: u.blk {free, bump, end}, marker_off = offset of the double-free marker word,
 *   aux = the page's serial.
 *
 * Where the bitmap lives: in the descriptor when it is one word, else at the start of the page
 * itself (PHKmalloc puts its page-info header there for small chunks), taking the first chunks:
 * on 4 KiB pages 2 of 256 16-byte chunks, 1 of 128 32-byte chunks. Chunk indexes count from the
 * page start, so the bits of those first chunks are simply never 1.
 *
 * Invariants (checked by design_check):
 *  - avail[c] is &phk_none when empty, else a NULL-terminated list of pages of class c sorted by
 *    increasing address, each with a free chunk. Allocation takes the head's first free chunk;
 *    a page that gives out its last one leaves the list at once and is flagged FLAG_FULL.
 *  - A page on no list is FLAG_FULL and has no free chunk.
 *  - bitmap: bit i is 1 iff chunk i is free; bits of the in-page bitmap's chunks and bits past
 *    the last chunk are 0; used + (bits set) == capacity.
 *  - phk-hw: summary bit j is 1 iff bitmap word j is non-zero.
 *  - reap: used + (chunks on the free list) + (chunks beyond bump) == capacity; a freed chunk of
 *    16 B or more holds (address ^ cookie ^ serial << 32) in its second word (the cheap
 *    double-free test). The serial is new each time a page becomes a chunk page: a marker left
 *    in memory that later serves as a page run (never cleared) may be copied about by realloc
 *    of the bytes a program never wrote, and must not match when it lands on the same address
 *    in a later chunk page.
 */
#ifndef LOCUS_PHK_H
#define LOCUS_PHK_H

#ifndef LOCUS_PHK_SEARCH_SUMMARY
#define LOCUS_PHK_SEARCH_SUMMARY 0
#endif
#ifndef LOCUS_PHK_QUANTUM_CLASSES
#define LOCUS_PHK_QUANTUM_CLASSES 0
#endif
#ifndef LOCUS_PHK_REAP
#define LOCUS_PHK_REAP 0
#endif
static const bool cfg_phk_summary = LOCUS_PHK_SEARCH_SUMMARY;
static const bool cfg_phk_quantum_classes = LOCUS_PHK_QUANTUM_CLASSES;
static const bool cfg_phk_reap = LOCUS_PHK_REAP;

#if LOCUS_PHK_SEARCH_SUMMARY && LOCUS_PHK_REAP
#error "LOCUS_PHK_SEARCH_SUMMARY searches bitmaps, which LOCUS_PHK_REAP replaces"
#endif

#define PHK_MAX_CLASSES   160     /* 129 quantum classes to 2 KiB + powers of two above */
#define PHK_MAX_CHUNKS    (BITMAP_MAX_WORDS * 64)    /* one summary word covers 64 words */
#define PHK_FINE_MAX      2048    /* quantum classes stop here on pages over 4 KiB */

enum { KIND_PHK_PAGE = KIND_DESIGN };

typedef struct design_heap {
  desc_t *avail[PHK_MAX_CLASSES];   /* per class: pages with free chunks, by address */
  uint32_t serial;                  /* reap: chunk pages made so far (salts the markers) */
} design_heap_t;

/* The empty list: reads as a page with no free chunk (no bitmap words, summary 0, bump == end,
 * no free list), so the fast path falls through to the slow path without testing for it.
 * Never written. */
static desc_t phk_none;

/* Its counters go through heap_count; no foreign-object cache: no optional hooks (internal.h). */
#define DESIGN_EMPTY_HEAP { .avail = { [0 ... PHK_MAX_CLASSES - 1] = &phk_none } }

#endif
