/* tp.h — the TP ("Two Partitions") design: Jula & Rauchwerger, "Two Memory Allocators that Use
 * Hints to Improve Locality" (seed 001). Memory is partitioned twice, by address and by size:
 * it is organised in K-regions (2^K bytes aligned to their size), each K-region holds objects of
 * ONE size class on a free list, and allocation asks the address partition first (the hint's
 * K-region), the size partition second (any K-region of the class). Both steps are O(1).
 *
 * Size classes and K-regions (the seed's table; classes a quantum apart on x86-64, not 8 B):
 *   16 .. 512 B         32 classes 16 B apart     K = LOCUS_TP_K (default 12: 4 KiB)
 *   513 B .. 1 KiB       8 classes 64 B apart     K = 13 (8 KiB)
 *   1 .. 2 KiB           8 classes 128 B apart    K = 14
 *   2 .. 4 KiB           8 classes 256 B apart    K = 15
 *   4 .. 8 KiB           8 classes 512 B apart    K = 16
 *   8 .. 16 KiB          8 classes 1 KiB apart    K = 17 (128 KiB)
 *   above 16 KiB         the core's huge objects (page runs, own mappings; huge.h, osobj.h)
 * A K-region must hold its 16-byte header and one object: a class whose K is too small for that
 * uses the smallest K that fits (with LOCUS_TP_K=7, objects of 128..240 B get 8-regions, 256..496
 * B 9-regions, 512 B 10-regions). A page holds at most 64 K-regions (a word of bits, below), so on
 * pages over 8 KiB the smallest K is page_shift - 6.
 *
 * A K-region: [16-byte header: tp_region_t][object 0][object 1]...; objects start 16 B in and
 * are a multiple of 16 B, so every object is 16-aligned. Capacity (2^K - 16) / size.
 *
 * A TP block is the unit the page manager hands out: max(2^K, page) bytes aligned to their size
 * (pages_alloc with alignment), holding max(1, page >> K) K-regions of one class. Its first page's descriptor (desc_t, core pages.h), design fields:
 *   kind = KIND_TP_BLOCK (the run's other pages KIND_INTERIOR), cls, obj_size
 *   aux8              K
 *   aux               the capacity of one K-region
 *   used              objects of the block handed out and not freed
 *   u.any[0]          room bits: bit r set iff K-region r of the block has a free object
 *   u.any[1]          the block's serial (salts the double-free markers, see state.h)
 *   u.any[2]          the block's start (K-region r is at start + r * 2^K)
 *   next, prev        the class's list of blocks with room (avail)
 *   flags             FLAG_CLEAN (never-used objects read as zero), FLAG_FULL (on no list)
 *
 * Invariants (checked by design_check):
 *  - avail[c] is NULL or a NULL-terminated doubly linked list of blocks of class c whose room
 *    bits are nonzero; a block on no list is FLAG_FULL and its room bits are 0.
 *  - In a K-region, used + (objects on its free list) + (capacity - bump) == capacity; its room
 *    bit is set iff free != NULL or bump < capacity; the block's used is the sum of its regions'.
 *  - Objects [bump, capacity) of a region were never handed out (in a FLAG_CLEAN block they
 *    read as zero). A free object holds its safe-linked next in word 0 and the salted marker
 *    in word 1; a live one never holds the marker (allocation clears it).
 *  - An empty block (used == 0) is released to the page manager at once, except a block that
 *    empties while it is alone on its class's list (not with LOCUS_DISCARD=immediate): one
 *    object allocated and freed in a loop then keeps its block. So a class's list holds at
 *    most one empty block.
 */
#ifndef LOCUS_TP_H
#define LOCUS_TP_H

#define TP_HEADER       16u          /* bytes at the start of every K-region */
#define TP_SMALL_MAX    512u         /* objects up to here use LOCUS_TP_K */
#define TP_MAX          16384u       /* largest object in a K-region */
#define TP_MAX_CLASSES  72           /* 32 + 5 * 8 */
#define TP_MAX_REGIONS  64           /* K-regions per block at most: one word of room bits */

enum { KIND_TP_BLOCK = KIND_DESIGN };

/* A K-region's header: its own free list and the start of its never-used objects. */
typedef struct tp_region {
  void *free;         /* first free object; each links the next in word 0 (safe-linked) */
  uint16_t bump;      /* objects from this index on were never handed out */
  uint16_t used;      /* objects handed out and not freed */
  uint32_t reserved;
} tp_region_t;
_Static_assert(sizeof(tp_region_t) == TP_HEADER, "the seed's 16-byte K-region header");

typedef struct design_heap {
  desc_t *avail[TP_MAX_CLASSES];    /* per class: blocks with a free object (NULL: none) */
  uint32_t serial;                  /* blocks made so far (salts the markers) */
} design_heap_t;

/* Its counters go through heap_count; no foreign-object cache: no optional hooks (internal.h). */
#define DESIGN_EMPTY_HEAP { .avail = { NULL } }

#endif
