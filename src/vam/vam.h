/* vam.h — the Vam design (Feng & Berger, MSP 2005), the flagship policy of Locus.
 *
 * Size categories (tunable constants below):
 *   small   <= 127 B   page blocks of one page, one size class each; classes 8 B apart, slots
 *                      rounded up to the quantum (24 and 32 B: both 32-byte slots, own blocks)
 *   medium  128 B-4 KiB page blocks of four pages; classes 16 B apart to 512 B, 64 B apart to
 *                      1 KiB, then the sizes that divide a block into 15 .. 4 slots (1088, 1168,
 *                      1248, 1360, 1488, 1632, 1808, 2048, 2336, 2720, 3264, 4096: 6-25% apart, no
 *                      room left at the block's end, 2 and 4 KiB objects on their own boundaries).
 *                      The paper's blocks end at 496 B; in boundary-tagged chunks, objects of
 *                      0.5-1 KiB (half of what a server's workers allocate in bench/turnover)
 *                      cost three times as much (headers, bins, merging), and objects of 1-4 KiB
 *                      (bench/randsmall's large ones) four times a block's pair. vam-sites stops
 *                      at 1 KiB: its class groups of all these would not fit 8-bit class indexes.
 *   large   4 KiB-32 KiB  boundary-tagged chunks in shared 20-page large areas, best fit through
 *                      an indexed free-list table (one exact bin per 16 B, a bitmap over bins)
 *   huge    > 32 KiB   runs of pages / own mappings (core, huge.h, osobj.h)
 *
 * Page blocks are headerless: the block's descriptor (in the segment header) holds its class,
 * free list, bump pointer and count. Allocation inside a block is reap-style: bump until the
 * end, then reuse the block's own free list. Per class, an available list and a full list;
 * allocation uses the first available block; a free into a full block moves it to the front
 * of the available list; an empty block goes back to the page manager (and, with the
 * immediate policy, its pages to the OS at once), except that each class keeps its most
 * recently emptied block on its list, reset to bump mode (spare[c]), and the heap keeps up to
 * VAM_CACHE_BLOCKS more empty blocks of each block size aside for the next new block of any
 * class (not with the immediate policy): a class used in batches refills without going
 * through the page manager. The full list is implicit: a full block is
 * linked nowhere (vam-bitmap flags it FLAG_FULL), because nothing ever walks it (the
 * consistency check finds full blocks through the segments); this saves two list updates per
 * transition.
 *
 * Invariants (checked by vam_check):
 *  - avail[c] is a list of blocks of class c ending at &d.none (its own head when empty); the
 *    first block's prev is NULL. No listed block is full, and every listed block has room
 *    (the malloc that takes a block's last object retires it at once; vam-bitmap retires in
 *    the slow path, so its head may be exhausted).
 *  - A block on no list is full: exhausted (vam-bitmap: also flagged FLAG_FULL).
 *  - hint_block[c] is NULL or a block of class c on no list with room (see the field).
 *  - spare[c] is NULL or a block of class c, on avail[c] while it is empty. Every listed block
 *    but the spares has used > 0; blocks in cache[k] are on no list, empty, of size k.
 *  - used + (objects on the free list) + (objects beyond bump) == capacity.
 *  - A freed small object holds its free marker (free_marker: a function of its address) in
 *    its second word (objects of 16 B and more): the cheap double-free test. Allocation
 *    clears it.
 *  - Every page of a block carries, in the segment's dense tag array (page_tag_t,
 *    core/pages.h), its slot-key offset (the tag's key, also the head descriptor's aux), whose
 *    low byte is the block's class (its class byte), and a bound (the tag's bound) such that
 *    an address on that page passes free's fast slot test (vam_slot_live: its key below the
 *    bound) exactly if it is the start of a slot below the bump pointer, for blocks of 16-byte
 *    slots or more; the bound is 0 on every other page (8-byte blocks never pass: their keys
 *    equal their bound), so the test is also the test of the page's kind. Bounds are cleared when a block resets to bump mode
 *    and before it goes back to the page manager; a page's class byte is always a class index
 *    or VAM_AREA_CLS (only blocks and areas write it). Free's fast paths, local and foreign, read no descriptor.
 *  - avail lists are doubly linked except that the head's prev is not kept (the head is known
 *    by avail[c] == b).
 *  - Exactly the pages of large areas (VAM_AREA_PAGES each) carry the class byte VAM_AREA_CLS
 *    in their tags, with their distance to the area's first page above it (vam_area_key) and
 *    a bound of 0: free goes from such a page straight to the chunk (vam_free_other), and
 *    the slow path finds the area from the key (vam_area_of). Area tags are cleared when the
 *    area goes back.
 *  - In a large area, chunks tile [start, end - 16); prev_size of each chunk equals the size of
 *    the chunk before it; no two free chunks are adjacent; every free chunk is in the bin of
 *    its size; the header at end - 16 is an in-use chunk of size 0.
 */
#ifndef LOCUS_VAM_H
#define LOCUS_VAM_H

#define VAM_SMALL_LIMIT   128      /* objects below this live in 1-page blocks */
#define VAM_MEDIUM_FINE   512      /* medium classes a quantum apart up to here, then: */
#define VAM_MEDIUM_STEP   64       /* classes this far apart up to: */
#define VAM_MEDIUM_STEPPED 1024    /* then the sizes that divide a medium block (VAM_MEDIUM_ROOM) */
#define VAM_MEDIUM_MIN_SLOTS 4     /* into 15 .. this many slots */
#define VAM_LARGE_MAX     32768    /* largest object in a large area */
#define VAM_SMALL_PAGES   1
#define VAM_MEDIUM_PAGES  4
#define VAM_AREA_PAGES  20
#define VAM_SITE_GROUPS   5        /* vam-sites: class groups (0 for cold sites, 4 hot) */
#define VAM_SITE_BITS     10       /* vam-sites: a heap's table of call sites, 2^10 slots */
#define VAM_CACHE_BLOCKS  16       /* empty blocks a heap keeps aside, per block size */
#define VAM_BLOCK_SIZES   3        /* small, medium and power-of-two blocks (vam_cache_index) */

/* Ablation knobs (seed 000, Table 2), each its own library:
 *   LOCUS_VAM_SMALL_HEADERS  vam-header: a header in front of every small object (< 128 B).
 *                            It is one quantum (16 B on x86-64, not the paper's 8) so objects
 *                            stay aligned; it holds the object's size.
 *   LOCUS_VAM_BITMAP         vam-bitmap: blocks keep a bitmap of free slots (at the block's
 *                            end) searched linearly, instead of reap allocation.
 * The q8 variant is LOCUS_QUANTUM=8 (classes 8 B apart as in the paper; weakly aligned). */
#ifndef LOCUS_VAM_SMALL_HEADERS
#define LOCUS_VAM_SMALL_HEADERS 0
#endif
#ifndef LOCUS_VAM_BITMAP
#define LOCUS_VAM_BITMAP 0
#endif
/* Site segregation (not in the paper: seed 002's call sites put to locality):
 *   LOCUS_VAM_SITES          vam-sites: a hot call site (LOCUS_LF_THRESHOLD allocations from
 *                            one return address) takes a class group of its own, so its
 *                            objects never share a page block with another site's of the same
 *                            size: what HALO does offline, online. Up to VAM_SITE_GROUPS - 1
 *                            hot sites per heap; later ones stay in group 0, counted. The
 *                            flagship has none of it: the knob compiles it out. */
#ifndef LOCUS_VAM_SITES
#define LOCUS_VAM_SITES 0
#endif
static const bool cfg_sites = LOCUS_VAM_SITES;
/* The bytes of a 4-page medium block its slots may fill (vam-bitmap: less its bitmap's word,
 * kept a quantum) and the least canary bytes after an object (the secure build's, below). */
#define VAM_MEDIUM_ROOM (VAM_MEDIUM_PAGES * 4096 - (LOCUS_VAM_BITMAP ? LOCUS_QUANTUM : 0))
#define VAM_CANARY ((size_t)(MITIGATION(CANARIES) ? 8 : 0))
/* The largest object in a page block: a quarter of a medium block (4 KiB), the object size
 * of its slot; vam-sites stops at 1 KiB (its class groups would not fit 8-bit class indexes). */
#define VAM_MEDIUM_DIVIDED(n) ((size_t)VAM_MEDIUM_ROOM / (n) / LOCUS_QUANTUM * LOCUS_QUANTUM - VAM_CANARY)
#define VAM_MEDIUM_MAX (LOCUS_VAM_SITES ? (size_t)VAM_MEDIUM_STEPPED : VAM_MEDIUM_DIVIDED(VAM_MEDIUM_MIN_SLOTS))
/* The flagship's own builds (and its debug and q8 builds): no ablation knob, no hardening. */
#define VAM_PLAIN (!LOCUS_VAM_SMALL_HEADERS && !LOCUS_VAM_BITMAP && !LOCUS_VAM_SITES && !(LOCUS_MITIGATIONS & MIT_BLOCKS))
/* Power-of-two objects of 8, 16 and 32 KiB (buffers: stdio's, I/O blocks, arrays) in page
 * blocks of their own, 64 KiB each (VAM_POW2_PAGES), so that they start on page boundaries
 * as in the peers: filling a 16 KiB object off a page boundary took this AMD CPU 9% longer
 * (docs/results.md, "Medium blocks to 4 KiB"). Other sizes above 4 KiB stay large chunks:
 * no size is rounded up to these. The flagship's own builds; their classes follow the size
 * classes' (vam_pow2_first). */
#define VAM_POW2_CLASSES (VAM_PLAIN ? 3 : 0)
#define VAM_POW2_MIN_SHIFT 13
#define VAM_POW2_PAGES 16
/* Class indexes: the size classes, and in vam-sites VAM_SITE_GROUPS copies of them, group g's
 * class c at g * (number of size classes) + c; then the power-of-two classes. */
#define VAM_CLASSES (VAM_SMALL_LIMIT / 8 + (VAM_MEDIUM_FINE - VAM_SMALL_LIMIT) / LOCUS_QUANTUM + 1 + \
                     (VAM_MEDIUM_STEPPED - VAM_MEDIUM_FINE) / VAM_MEDIUM_STEP + \
                     (LOCUS_VAM_SITES ? 0 : VAM_MEDIUM_ROOM / (VAM_MEDIUM_STEPPED + 1) - VAM_MEDIUM_MIN_SLOTS + 1) + \
                     VAM_POW2_CLASSES)   /* at most */
#define VAM_MAX_CLASSES (LOCUS_VAM_SITES ? VAM_CLASSES * VAM_SITE_GROUPS : VAM_CLASSES)
/* The class byte of a large area's pages in their tags (vam.h's invariants): no class's index,
 * so a tag whose class byte it is marks an area's page and nothing else. Free's fast path reads
 * its thread-cache bin (tbin[VAM_AREA_CLS], recip 0: never a hit) before it knows. */
#define VAM_AREA_CLS VAM_MAX_CLASSES
_Static_assert(VAM_AREA_CLS <= UINT8_MAX, "class indexes and the area's class byte are 8-bit");

static const bool cfg_small_headers = LOCUS_VAM_SMALL_HEADERS;
static const bool cfg_block_bitmap = LOCUS_VAM_BITMAP;
#define SMALL_HEADER QUANTUM

enum { KIND_VAM_BLOCK = KIND_DESIGN, KIND_VAM_LARGE, KIND_VAM_FOREIGN };

/* The foreign-object cache (flagship and secure builds: their slots hold a link and a marker
 * word). A small object that a thread frees but another heap owns is kept, up to
 * VAM_FOREIGN_MAX per class, in the freeing heap's foreign[c]: a descriptor that lives in the
 * heap, not in a segment, whose free list holds those objects and which sits on avail[c] while
 * the list is non-empty, so malloc's fast path hands them out like any block's free objects,
 * still hot in the cache of the thread that just freed them. Sending each one home instead
 * (the remote stack) made threads that pass objects around pay a cache miss per object on each
 * side; glibc's tcache and tcmalloc's thread caches keep them local the same way.
 * Invariants: foreign[c] is on avail[c] iff its list is non-empty; every object on it belongs
 * to a block of class c of another heap (or of this one, when the list came as a batch of the
 * transfer cache, vam_foreign.c.h), is counted as in use there, and holds the free marker (a
 * double free of it, by any thread, is caught); (uint16_t)-used is the list's length. A full
 * list goes to the transfer cache (if it has room), and the list goes home (to the owners'
 * remote stacks) at thread exit and on purge. */
#define VAM_FOREIGN_MAX 16

/* The secure build (LOCUS_SECURE; docs/secure.md) on top of the flagship:
 *  - free-list links are also xored with a per-heap key, and a link taken off a list must
 *    decode to a slot of the same block (or NULL);
 *  - a slot is the class size plus 8, rounded up to 16; the rest of the slot after the class
 *    size (8 or 16 bytes: in half the classes the canary takes the rounding's room) is a
 *    canary (vam_canary of each word's address), written when the bump pointer passes the
 *    slot and never by the allocator after that; a free checks the canary words on both sides
 *    of the object, so an overflow or underflow is reported by the next free of the object or
 *    a neighbour. A block's slot 0 is never handed out: its canary guards slot 1's front;
 *  - the bump pointer takes slots two at a time and a coin toss picks which one is handed out
 *    (the other is listed, and the secure build serves a block's list before its bump range,
 *    so it comes next): no constant distance between consecutive objects (vam_carve);
 *  - a freed block object or large chunk waits in a ring of VAM_QUARANTINE before it is
 *    reusable, marked (word 0; a slot's word 1 holds the free marker) and poisoned (a slot's
 *    words 2-3 if it has them, a chunk's first VAM_POISON_MAX bytes); leaving the ring, the
 *    poison is verified. An object of another heap waits in the freeing
 *    thread's ring, then goes to its foreign-object cache or home;
 *  - no 8-byte class: every slot holds a link and a marker word.
 * Invariants added: every slot of a block below its bump pointer holds vam_canary(address) in
 * its canary words; an object in the quarantine holds vam_qmark(address) in word 0 and is
 * counted in use. */
#define VAM_QUARANTINE 32
#define VAM_POISON_MAX 32          /* bytes of a quarantined object poisoned and verified */
/* Any of the block protections on: no 8-byte class (every slot holds a link and a marker
 * word), and free takes the checked path (vam_free_secure); each protection's own code is
 * under its bit. */
static const bool cfg_vam_hardened = (LOCUS_MITIGATIONS & MIT_BLOCKS) != 0;
#if (LOCUS_MITIGATIONS & MIT_BLOCKS) && (LOCUS_VAM_SMALL_HEADERS || LOCUS_VAM_BITMAP || LOCUS_VAM_SITES)
#error "the secure build is the flagship with hardening: no ablation knobs"
#endif

/* ---- large-object chunks ------------------------------------------------------------------ */

typedef struct chunk chunk_t;
struct chunk {
  uint32_t prev_size;   /* bytes of the previous chunk (0: first in its area); for an aligned
                           alias header, the distance back to the real header */
  uint32_t size;        /* bytes including this header, | CHUNK_INUSE | CHUNK_ALIAS */
  uint64_t check;       /* chunk_cookie ^ address: this really is a header */
  chunk_t *next, *prev; /* free chunks only: their bin */
};
#define CHUNK_HEADER    16u
#define CHUNK_INUSE     1u
#define CHUNK_ALIAS     2u           /* header in front of an aligned pointer inside a chunk */
#define CHUNK_CACHED    4u           /* in use, but freed into the thread cache (vam_lbin_t) */
#define CHUNK_FLAGS     15u
#define LARGE_MIN_CHUNK ((uint32_t)((VAM_MEDIUM_MAX + 1 + CHUNK_HEADER + 15) & ~15u))
#define LARGE_MAX_CHUNK ((uint32_t)(VAM_LARGE_MAX + CHUNK_HEADER))
/* The smallest free chunk a split leaves: a header and the bin links. Free chunks below
 * LARGE_MIN_CHUNK ("runts") hold no object; they wait in bin 0, which no allocation searches,
 * until a neighbour's free merges them back (malloc(1392) from a free 1,824-byte chunk keeps
 * 1,408 bytes, not 1,824). */
#define LARGE_MIN_SPLIT 64u
#define LARGE_BINS      ((LARGE_MAX_CHUNK - LARGE_MIN_CHUNK) / 16 + 3)   /* + runts, + bigger */

/* An entry of the secure build's quarantine: a freed object and, if it is a slot of a block
 * the free fast path serves, that block (its release then needs no lookup), else NULL. */
typedef struct vam_quarantined { void *p; desc_t *block; } vam_quarantined_t;
/* Per-heap state of the protections RANDOM_ORDER and QUARANTINE (mitigations.h). */
typedef struct vam_random {
  uint64_t rng;                  /* the coin tosses of vam_carve */
  uint64_t coins;                /* random bits not yet used, above a sentinel bit (vam_coin) */
} vam_random_t;
typedef struct vam_quarantine {
  vam_quarantined_t ring[VAM_QUARANTINE];   /* freed objects not yet reusable */
  unsigned next;                 /* the ring's oldest entry, replaced by the next free */
  uintptr_t poison_sink[2];      /* holds POISON_WORD: where the poison outside an object goes */
} vam_quarantine_t;

/* The thread cache (flagship and debug builds: the fast free path's blocks, no site groups, not
 * the secure build), glibc's tcache and tcmalloc's thread cache in front of Vam's blocks: per
 * class a list of up to VAM_TCACHE_SLOTS objects this heap freed (at most VAM_TCACHE_BYTES of
 * them), which malloc hands out first, most recent first. A pair of malloc and free then
 * touches no block: no list push or pop, no count, no move of a block that was full to the
 * front of its list and back off it (three quarters of churn's frees did that). What does not
 * change: free's checks all come first (segment map, slot and bump test, marker), and an
 * object in the cache holds the free marker, so a second free of it is caught like any other.
 * Other heaps' objects that this thread frees go into it too, before the foreign-object cache:
 * the thread reuses them, hot in its cache, whoever allocated them (a server's successor
 * thread frees mostly what its predecessor allocated).
 * The list runs through the objects' first words, each link keyed by a secret
 * (vam_tcache_link), not through an array of pointers in the heap: a free's stores then go to addresses it has in
 * hand (the object, the bin), where a push onto an array stored to the address its top held,
 * and a malloc that followed such a free of another class waited on it (a loop replacing 16-
 * and 32-byte objects at random: 25% slower than with one class; tcmalloc's lists, none).
 * Invariants: head is NULL or the first of cap - room objects, each linked to the next by its
 * word 0 (the last to NULL); they are distinct slots of blocks of class c (of this heap, or of
 * another heap's, which go back the foreign way), handed out before (below the bump pointer),
 * counted in use there (the block's used), each holding the free marker in word 1; the
 * statistics count them freed. Only the heap's own thread caches (never a free collected into
 * an exited thread's heap). A free that finds the bin full goes to its block (glibc's tcache
 * does the same: sending half the bin back instead cost bench/batches 30% and churn more
 * instructions); thread exit and purge send them all back (vam_tcache_flush). The immediate
 * discard policy and LOCUS_TCACHE=0 have none (cap 0). */
#define VAM_TCACHE VAM_PLAIN
static const bool cfg_tcache = VAM_TCACHE;
#define VAM_TCACHE_SLOTS 28
#define VAM_TCACHE_SIZED VAM_MEDIUM_STEPPED   /* malloc's hit path: sizes up to this (below) */
#define VAM_TCACHE_BYTES 16384
/* A bin grows when a free finds it full after mallocs found it empty: the program frees
 * bursts of the class bigger than the bin and allocates them again (a parser's nodes, a batch
 * of requests), where every object past the cap went to its block and back (bench/batches:
 * 82% of its frees; 95 allocator instructions a pair against 51 in the bin). It grows by the
 * mallocs that missed it since the last test (missed), at most doubling, up to
 * VAM_TCACHE_GROWN_SLOTS objects, only in the classes whose first cap is VAM_TCACHE_SLOTS
 * (up to 585 B), and only for a cycle of bursts: since the last test the bin
 * handed out at least its cap (drained, not just empty from the start: a program's first
 * burst does not grow it) and missed at least a quarter as often as it hit (a class whose
 * live count walks at random misses and overflows now and then, with far more hits). Without
 * these two tests, bins grew on bench/linked, which then took its nodes from freed objects in
 * the order freed rather than the blocks' reap order (its LRU misses in the paging
 * simulation +0.3%). The growth comes out of the heap's budget of LOCUS_TCACHE_GROW bytes
 * (tcache_spare). When the budget runs short, grown bins of other classes go back to their
 * first cap in turn (tcache_victim), their extra objects to their blocks, so the budget moves
 * to the classes in use (as the large side's room does). Thread exit, purge, and the heap
 * taking pages that were not resident (vam_tcache_trim) put every bin back to its first cap.
 * What a thread may hold is then its bins' first caps (674 KiB in all classes) and the
 * budget; tcmalloc's thread caches grow the same way, to 4 MiB a thread.
 * Reap mode. A bin hands a freed slot out again at once, wherever its block is; so where a
 * class's blocks are mostly empty slots (its program moved on to other sizes and left a few
 * long-lived objects in each), the successors of those objects land all over the old blocks
 * and none empties (bench/espresso: 1,467 blocks with 29% of their slots used at the peak, 47%
 * without the cache). The same growth test, when it does not grow the bin, counts the class's
 * blocks and objects: with at least VAM_REAP_BLOCKS blocks less than VAM_REAP_OFF_PCT used,
 * the bin goes off (cap 0, its objects back to their blocks), so that mallocs take the head
 * block's slots, as Vam's reap order would, and the blocks behind it drain; the bin comes back
 * at VAM_REAP_ON_PCT, or under VAM_REAP_BLOCKS blocks, on a later such test (a bin that is
 * off misses every malloc: a free of its class tests again once VAM_REAP_RETEST have). A cycle
 * of bursts grows its bin instead: its blocks look as sparse between bursts. */
#define VAM_TCACHE_GROWN_SLOTS 2048
#define VAM_REAP_BLOCKS 12
#define VAM_REAP_OFF_PCT 25
#define VAM_REAP_ON_PCT 60
#define VAM_REAP_RETEST 64
/* One class's bin: 32 bytes, two a cache line. 28 objects and 4 KiB a class against 12 and 8
 * KiB: 1.5 instructions a pair fewer on churn (fewer overflows), peak RSS +2-3% on batches and
 * prodcons (docs/results.md). 16 KiB a class rather than 4 (the classes of 160 B and more hold
 * more than 4 KiB of 28 objects): frees of mixed sizes overflow less, so malloc reuses the
 * lines freed last (localarrays' shape, 16 B-1 KiB: D1 read misses -3%, 4% faster, level with
 * tcmalloc); what a thread can hold is 674 KiB in all classes (316 KiB with 4 KiB; tcmalloc's
 * thread caches: up to 4 MiB). */
typedef struct __attribute__((aligned(32))) vam_tbin {
  void *head;          /* the newest cached object, NULL if none (heap_empty: none) */
  /* vam_class_recip of the bin's class, in every build: free's fast path finds it here, in the
   * line it then reads the bin from, from the page's class, with no table to address
   * (heap_empty: 0). */
  uint32_t recip;
  int32_t room;        /* the objects it may still take: cap - those it holds */
  /* Statistics, in the bin's line (no class index to scale, unlike the heap's counters): the
   * objects handed out of it. The objects put into it are not counted (a free's hit path then
   * makes no counter update): they are allocs + the count held + those sent back to their
   * blocks, which the heap's frees[] count when they go. */
  uint64_t allocs;
  int32_t cap;         /* the most it holds: vam_tcache_cap, or more once grown (below) */
  uint32_t missed;     /* the mallocs that found it empty since its last growth test */
} vam_tbin_t;
_Static_assert(sizeof(vam_tbin_t) == 32, "a thread-cache bin is 32 bytes");

/* The thread cache's large side: the large chunks this heap's thread freed last, per class of
 * usable size (four classes per doubling from 1 KiB to 32 KiB: vam_lclass_floor), LIFO. A
 * cached chunk keeps CHUNK_INUSE (its neighbours do not merge with it) and has CHUNK_CACHED
 * (a second free of it is a double free); malloc takes the last one of its size's class if it
 * fits and splits off what it does not need. Without it a malloc/free pair of 1-32 KiB took
 * ~300 instructions of bin search, split and coalescing (bench/localarrays' 2-32 KiB objects:
 * 1.6x tcmalloc's time). Invariants: the chunks of lbin[c] are of this heap, in use, cached,
 * of usable size at least class c's bound, and not aliases; their chunk bytes and lcache_room
 * add up to vam_lcache_cap (0: no cache, as for the small side), and lcache_room is never
 * negative but inside a put. Only the heap's own thread caches; thread exit, purge and a full
 * heap check's start find them all sent back by vam_lcache_flush. A class's chunks are a list,
 * as the small side's objects are (and for the same reason: vam.h's thread cache), linked
 * through their payloads' first words under the thread cache's key: head is the last freed.
 * The bytes are the only bound: how many a class holds is not (8 a class, as when the classes
 * were arrays: a loop replacing objects of 5,000, 6,000 and 7,000 bytes at random freed 7.6% of
 * them for real, and took as many from the bins). When they run short, the chunks of each
 * class in turn (lcache_victim) are freed for real until the new one fits: classes the program
 * stopped using give their room to the ones it uses (with a bound a class and none taken back,
 * a few classes of an earlier phase could hold the whole cache for good). */
#define VAM_LCLASSES     21          /* 1 KiB .. 32 KiB, four per doubling */
#define VAM_LCACHE_BYTES (256u << 10)
typedef struct vam_lbin {
  chunk_t *head;
} vam_lbin_t;

typedef struct design_heap {
  /* The thread cache (above); + VAM_AREA_CLS's. First in the heap: a bin's address is the heap's
   * plus 32 times the class, with no offset to add. */
  vam_tbin_t tbin[VAM_MAX_CLASSES + 1];
  desc_t *avail[VAM_MAX_CLASSES];
  /* The thread-cache bin of each size up to VAM_TCACHE_SIZED, by sizeclass_lookup_index:
   * malloc's hit path goes from the size to its bin in one load, as it goes to avail[] from
   * the class (heap_empty: all its one empty bin). Bigger medium sizes find their bin from
   * their class, after a test (a table to 4 KiB would be 4 KiB a heap, a page more). */
  struct vam_tbin *tbin_of_size[sizeclass_lookup_index(VAM_TCACHE_SIZED) + 1];
  /* Block objects handed out and freed, per class: statistics (design_stats) derive calls and
   * bytes from them. One counter per class, not one per heap: a single counter every malloc
   * and free update is a chain of dependent memory updates, which cost churn about 10%. */
  uint64_t allocs[VAM_MAX_CLASSES], frees[VAM_MAX_CLASSES];
  /* Per class, the one empty block kept for reuse (hysteresis; not with the immediate policy):
   * it stays where it was on avail[c], reset to bump mode, so a class whose objects come and
   * go in batches refills it without a slow path. NULL, or a block of class c; it may have
   * been refilled since (used > 0), then it is simply a block like the others. */
  desc_t *spare[VAM_MAX_CLASSES];
  /* Per class, the block hinted allocations fall back to when the hint's block and its
   * neighbours have no room (allocation near a hint): NULL, or a block of class c of this heap
   * that is on no list and not full, so that only hinted allocations take its slots. It serves
   * fallbacks until it is 3/4 full, then goes back on avail[c]; it is forgotten when it fills
   * (full, on no list, like any full block) and put back on avail[c] when it empties. */
  desc_t *hint_block[VAM_MAX_CLASSES];
  /* Empty blocks kept aside for any class of their size (0: one-page, 1: four-page, 2:
   * power-of-two blocks), most recent last: the next new block of that size is one of these
   * rather than a round trip through the page manager (not with the immediate policy). Off
   * every list. */
  desc_t *cache[VAM_BLOCK_SIZES][VAM_CACHE_BLOCKS];
  unsigned ncache[VAM_BLOCK_SIZES];
  chunk_t *bins[LARGE_BINS];
  bitmap2_t binmap;
  desc_t *spare_area;            /* an empty large area kept for reuse (not immediate policy) */
  uint64_t foreign_flushed;      /* cached foreign objects sent home (counted as a malloc and a
                                    free more than the program made; statistics subtract it) */
  desc_t foreign[VAM_MAX_CLASSES];   /* the foreign-object cache (above) */
  vam_lbin_t lbin[VAM_LCLASSES];      /* its large side (above) */
  int32_t tcache_spare;              /* the bytes its bins may still grow by (above) */
  uint32_t tcache_victim;            /* the class whose grown bin goes back first */
  /* The blocks of each class the heap holds (listed, full, its spare and hinted ones; not the
   * empty ones in its cache, which belong to no class): what the reap test (vam.h) weighs the
   * class's objects against. */
  uint32_t blocks[VAM_MAX_CLASSES];
  uint32_t tcache_hits_at[VAM_MAX_CLASSES];   /* tbin[c].allocs at its last growth test */
  int32_t lcache_room;               /* the bytes its large side may still take (above) */
  uint32_t lcache_victim;            /* the class it frees a chunk of next when they run short */
  /* The protections' state, each only when its bit is on (mitigations.h), reached only
   * through the accessors at the top of vam_block.c.h. */
#if MITIGATION(KEYED_LINKS)
  uintptr_t link_key;            /* xored into every free-list link of this heap's blocks */
#endif
#if MITIGATION(RANDOM_ORDER)
  vam_random_t random;
#endif
#if MITIGATION(QUARANTINE)
  vam_quarantine_t quarantine;
#endif
#if LOCUS_VAM_SITES
  /* vam-sites: call sites by return address, direct-mapped. A site's allocations are counted
   * until LOCUS_LF_THRESHOLD; the site then takes the next free class group, for good (a hot
   * site's slot is never taken over by a colliding site). */
  struct vam_site { uintptr_t ra; uint32_t count; uint32_t group; } sites[1u << VAM_SITE_BITS];
  unsigned groups_used;          /* class groups given to hot sites (1 .. VAM_SITE_GROUPS - 1) */
  unsigned pending_group;        /* the group of the allocation now in the slow path */
  uint64_t sites_unsegregated;   /* sites that turned hot when every group was taken */
#endif
  /* The end of every available list of this heap, and the head of an empty one: it reads as
   * a block with no room, so malloc's fast path falls through to the slow path without a NULL
   * test, and list updates need no NULL tests either. Only its prev field is ever written. */
  desc_t none;
} design_heap_t;

/* heap_empty's state: every list empty (see state.h). */
#define DESIGN_EMPTY_HEAP { .avail = { [0 ... VAM_MAX_CLASSES - 1] = &heap_empty.d.none }, \
                           .tbin_of_size = { [0 ... sizeclass_lookup_index(VAM_TCACHE_SIZED)] = &heap_empty.d.tbin[0] } }
/* Optional hooks (internal.h): a foreign-object cache, one free path for any heap's objects
 * (with the thread cache), counters of its own, sized-delete bounds,
 * the transfer cache's locks reset after fork, objects' bounds for the checked copies, a
 * small object's usable size from its page tag (realloc, malloc_usable_size). */
#define DESIGN_HAS_ALLOC_CACHED 1
#define DESIGN_HAS_FREE_FOREIGN 1
#define DESIGN_HAS_FREE_ANY VAM_TCACHE
#define DESIGN_HAS_STATS 1
#define DESIGN_HAS_USABLE_MAX 1
#define DESIGN_HAS_FORK_CHILD 1
#define DESIGN_HAS_BOUNDS 1
#define DESIGN_HAS_USABLE_QUICK 1

#endif
