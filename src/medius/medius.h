/* medius.h — the Medius design (Jula & Rauchwerger, "Two Memory Allocators that Use Hints to
 * Improve Locality", seed 001): allocation near a hint address through K-regions shared by
 * objects of every size. The policy is in medius.c.h; docs/medius.md has the whole story.
 *
 * Vocabulary
 *   K-region  2^K bytes aligned to their size (LOCUS_MEDIUS_K, default 12; the page shift .. 20).
 *   span      a run of 2^max(K, 18) bytes from the page manager, aligned to its size, so that a
 *             span holds whole K-regions (or is one). New blocks are bumped through the current
 *             span; a block keeps its size for the span's life (no splitting, no coalescing).
 *   block     a 16-byte header followed by the object; objects are 16 B apart in size (class c
 *             holds 16 * (c + 1) bytes) up to MEDIUS_MAX; larger requests are the core's (huge.h).
 *   record    a K-region's record: the descriptor (desc_t) of the K-region's first page; from
 *             any address, segment map -> segment -> page descriptor -> span head -> record,
 *             in O(1), without reading the address itself.
 *   node      one size class of one K-region: its free blocks. A record is a list of nodes (the
 *             seed's "list of lists"); the cache lists, per class, the nodes that hold a free
 *             block of the class (the seed's "cache for size classes").
 *
 * Header of a block whose object is at p (16 bytes, just below p):
 *   hdr[0] = (mix(key ^ cls) & ~0xFFFF) | cls     the size, checked: a 1-byte overflow of the
 *                                                  block below changes it and is caught
 *   hdr[1] = key ^ state                           key = p ^ cookie ^ serial << 48 (the span's
 *                                                  serial: a stale header of a span released
 *                                                  and taken again never matches)
 *   states: in use, free, remote (freed by another thread, on its way home), filler (the gap an
 *   aligned allocation skipped: hdr[0] is the gap's bytes).
 *
 * Descriptor fields (desc_t, core pages.h):
 *   span head   kind KIND_MEDIUS_SPAN; next, prev: the heap's spans; u.any[0]: the first
 *               K-region's nodes; u.any[1], u.any[2]: bump and end; aux: blocks in use;
 *               obj_size: serial; flags: FLAG_CLEAN while the bump area reads as zero.
 *   record      (the head, or the KIND_INTERIOR descriptor at each later K-region start)
 *               u.any[0]: the K-region's nodes. The core reads only kind and back there.
 *   node run    kind KIND_MEDIUS_NODES: a few pages of nodes, kept by the heap for reuse.
 *
 * Invariants (checked by design_check):
 *  - Every block of a span lies in [start, bump); walking headers from the start reaches bump
 *    exactly; blocks in use (in use or remote) == the span's aux.
 *  - A node is on its K-region's list and on cache[cls] iff count > 0; count is the length of
 *    its free list; every block on it is free, of class cls, in that K-region (by the object's
 *    address) of node->span. A K-region has at most one node per class.
 *  - A span with no block in use is released at once unless it is the current span.
 *  - blocks_in_use == spans + node runs.
 */
#ifndef LOCUS_MEDIUS_H
#define LOCUS_MEDIUS_H

#define MEDIUS_HEADER     16                      /* bytes of header before each object */
#define MEDIUS_MAX        (16u << 10)             /* larger objects: the core's huge path */
#define MEDIUS_CLASSES    (MEDIUS_MAX / 16)       /* 16, 32, ..., 16 KiB */
#define MEDIUS_SPAN_SHIFT 18                      /* spans: at least 256 KiB */
#define MEDIUS_K_MAX      20                      /* a span of 2^K must fit a segment's run */
#define MEDIUS_NODE_PAGES 4                       /* pages per node run */

enum { KIND_MEDIUS_SPAN = KIND_DESIGN, KIND_MEDIUS_NODES = KIND_DESIGN + 1 };

typedef struct medius_node mnode_t;
struct medius_node {
  mnode_t *rnext;           /* the K-region's next class */
  mnode_t *cnext, *cprev;   /* cache[cls]: nodes with a free block of the class */
  void *free;               /* free blocks (objects), safe-linked through their first word */
  desc_t *span;             /* the span holding the K-region */
  uint32_t count;           /* blocks on free */
  uint16_t cls;
  uint16_t spare;
};

typedef struct design_heap {
  mnode_t *cache[MEDIUS_CLASSES];   /* per class: K-regions (their nodes) with a free block */
  desc_t *span;                     /* the current span (bump allocation), or NULL */
  desc_t *spans;                    /* every span of the heap */
  mnode_t *node_free;               /* unused nodes */
  uint32_t serial;                  /* spans made so far (salts headers) */
  uint32_t node_runs;
} design_heap_t;

#define DESIGN_EMPTY_HEAP { .span = NULL }

#endif
