/* lf.h — the LF design: Li & Gulila, "Efficient Memory Allocator with Better Performance and
 * Less Memory Usage" (seed 002), over its baseline, Hoard-like power-of-two bins.
 *
 * Two libraries from one design, told apart by the knob LOCUS_LF:
 *   pow2 (LOCUS_LF=0)  standard bins only: 16, 32, 64, ..., 2048 B (powers of two from the
 *                      quantum), each a list of page blocks holding objects of one size. This is
 *                      "standard bins" / "Hoard" in every comparison. The fast path has no trace
 *                      of LF (cfg_lf folds away).
 *   lf   (LOCUS_LF=1)  the same, plus: a context id per allocation (the call site's return
 *                      address), a count per (context, size rounded to the quantum) in a bounded
 *                      per-heap hash table, and a custom bin of exactly that size for a pair seen
 *                      more than LOCUS_LF_THRESHOLD (100) times, when that size fits more
 *                      objects in a block than the standard bin (not for 64 B or 1500 B). The
 *                      bin is the size's, not the pair's: every context whose pair is decided
 *                      for that size shares it, so a slot freed by one site's objects is reused
 *                      by another's (bins private to a site left a program's first-phase blocks
 *                      half empty when a second phase allocated the same sizes elsewhere).
 *                      LF-opt (LOCUS_LF_OPT, on): a context that once crossed the threshold is
 *                      intense, and a new size from it is decided at its first allocation.
 *
 * Objects above LF_SMALL_MAX (half a block: 2 KiB, PHKmalloc's "less than half a page") are the
 * core's huge objects (huge.h): a block would hold one such object and waste up to half of it,
 * and page runs fit them to the page instead. Blocks are one page, not Hoard's 8-64 KiB
 * superblocks: see docs/lf.md ("limits") for the multi-page race that ruled them out for now.
 *
 * A block is one page (LF_BLOCK_BYTES, 4 KiB on x86-64) from the page manager.
 * Objects lie end to end from the block's start (no header), so a power-of-two object is aligned
 * to its size up to the page, which design_alloc_aligned uses. Its head descriptor (desc_t):
 *   kind = KIND_LF_BLOCK (other pages KIND_INTERIOR), cls = the bin, obj_size = the bin's size
 *   aux               the block's serial (salts the double-free markers, state.h)
 *   u.blk.free        free objects, safe-linked through word 0 (config.h)
 *   u.blk.bump        objects from here to u.blk.end were never handed out
 *   used              objects handed out and not freed
 *   next, prev        the bin's list of blocks with room; flags FLAG_CLEAN, FLAG_FULL
 *
 * Bins (design_heap_t.bins, per heap): 0 .. LF_STD_CLASSES-1 are the standard classes;
 * LF_STD_CLASSES .. nbins-1 are custom bins made by LF, one per exact size (in quanta) that some
 * decided pair asked for (exact_bin maps the size to it), never removed (their empty blocks go
 * back like any other). cls is 8 bits, so a heap has at most
 * LF_CUSTOM_MAX custom bins; a pair that crosses the threshold after that stays on the standard
 * bins and counts in bins_refused (one whose size would gain nothing, in bins_unneeded).
 *
 * The site table (lf only): LF_TABLE_SLOTS entries of 16 bytes mapped from the OS per heap,
 * open addressing with linear probing, filled to at most 3/4 (then new pairs are not recorded
 * and count in table_full: they use the standard bins). Entries are never removed. An entry
 * with qsize LF_INTENSE_Q marks its context intense. A decided pair's entry holds its bin, so
 * the fast path for it needs no size-class lookup.
 *
 * Invariants (checked by design_check):
 *  - bins[c].avail is NULL or a NULL-terminated doubly linked list of blocks of bin c with room;
 *    a block on no list is FLAG_FULL and has no room.
 *  - In a block: used + (objects on its free list) + (objects from bump to end) == capacity.
 *    A free object holds the salted marker in word 1; a live one never does.
 *  - An empty block goes back to the page manager at once, except one alone on its bin's list
 *    (not with LOCUS_DISCARD=immediate).
 *  - Table: at most LF_TABLE_MAX entries; each (ctx, qsize) appears once; bin is LF_COUNTING
 *    (always for intense marks), LF_WRAPPER (a wrapper's return address) or a bin in use
 *    (standard or custom).
 */
#ifndef LOCUS_LF_H
#define LOCUS_LF_H

#ifndef LOCUS_LF
#define LOCUS_LF 0
#endif
static const bool cfg_lf = LOCUS_LF;

#define LF_BLOCK_BYTES  4096u               /* a block: this or one page, whichever is more */
#define LF_SMALL_MAX    2048u               /* largest object in a block: half a block */
#define LF_STD_CLASSES  8                   /* 16, 32, ..., 2048 */
#define LF_MAX_BINS     256                 /* desc_t.cls is 8 bits */
#define LF_CUSTOM_MAX   (LF_MAX_BINS - LF_STD_CLASSES)
#define LF_TABLE_SHIFT  14
#define LF_TABLE_SLOTS  (1u << LF_TABLE_SHIFT)           /* 256 KiB per heap */
#define LF_TABLE_MAX    (LF_TABLE_SLOTS / 4 * 3)
#define LF_COUNTING     0xFFFFu             /* lf_entry_t.bin: the pair is still counting */
#define LF_WRAPPER      0xFFFEu             /* lf_entry_t.bin: ctx is a wrapper's (walk to the site) */
#define LF_INTENSE_Q    0xFFFFu             /* lf_entry_t.qsize of a context's "intense" mark */

enum { KIND_LF_BLOCK = KIND_DESIGN };

typedef struct lf_bin {
  desc_t *avail;        /* blocks with room (NULL: none) */
  uint32_t size;        /* object size (0: bin not made) */
  uint32_t recip;       /* ceil(2^32 / size), for free's check */
} lf_bin_t;

typedef struct lf_entry {
  uintptr_t ctx;        /* return address of the site (0: empty slot) */
  uint16_t qsize;       /* size in quanta (LF_INTENSE_Q: the context's "intense" mark) */
  uint16_t bin;         /* LF_COUNTING, else the bin that serves the pair: custom or standard */
  uint32_t count;       /* allocations seen while counting */
} lf_entry_t;

/* LF's own counters, per heap (owner only), summed by locus_lf_stats_json. */
#define LF_COUNTERS(X) \
  X(custom_blocks) X(bins_created) X(bins_shared) X(bins_refused) X(bins_unneeded) X(pairs) X(table_full) \
  X(intense) \
  X(wrapper_walks) X(walks_failed)

typedef struct lf_counters {
#define X(name) uint64_t name;
  LF_COUNTERS(X)
#undef X
} lf_counters_t;

typedef struct design_heap {
  lf_bin_t bins[LF_MAX_BINS];
  lf_entry_t *table;    /* lf: the site table (lf_no_table: none yet, or none could be mapped) */
  uint32_t serial;      /* blocks made so far (salts the markers) */
  uint32_t nbins;       /* bins in use: standard + custom */
  uint8_t exact_bin[LF_SMALL_MAX / QUANTUM + 1];   /* size in quanta -> its custom bin (0: none) */
  lf_counters_t lf;
} design_heap_t;

/* Optional hooks (internal.h): design_alloc_ra, the call site (LOCUS_SITES=1 passes the
 * caller's address). Counters go through heap_count; no foreign-object cache. */
#define DESIGN_HAS_ALLOC_RA 1

/* heap_empty's table, and a heap's whose table could not be mapped: all empty slots, never
 * written (untouched .bss: the zero page), so the fast path needs no test for "no table". */
#if LOCUS_LF
static lf_entry_t lf_no_table[LF_TABLE_SLOTS];
#define DESIGN_EMPTY_HEAP { .bins = { { NULL, 0, 0 } }, .table = lf_no_table }
#else
#define lf_no_table ((lf_entry_t *)NULL)
#define DESIGN_EMPTY_HEAP { .bins = { { NULL, 0, 0 } } }
#endif

#endif
