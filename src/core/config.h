/* config.h — platform facts, compile-time knobs and the vocabulary every file shares.
 *
 * Vocabulary (used the same way in every file):
 *   page     an OS page (size from sysconf at start-up, never hard-coded).
 *   segment  an aligned 4 MiB reservation owned by one heap; its first pages hold the segment
 *            header and one descriptor per page.
 *   run      consecutive pages of a segment handed out by the page manager as one unit.
 *   block    a run dedicated to one size class of a design (vam: 1 page small, 4 pages medium).
 *   area     a run holding large objects with boundary tags (vam's "large area").
 *   region   a user's region (locus_region_*): chunks of objects freed together (region.h).
 *   heap     per-thread allocator state: the design's lists plus a page manager.
 *   huge     an object bigger than the design serves: a run object or, past the OS threshold,
 *            its own mapping (an "OS object").
 *
 * Knobs are macros so that a variant library can override them with -D; code reads them as
 * `static const` values so both branches of a knob always compile.
 */
#ifndef LOCUS_CONFIG_H
#define LOCUS_CONFIG_H

#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define LOCUS_API   __attribute__((visibility("default")))
#define NOINLINE    __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define COLD        __attribute__((cold, noinline))
#define UNUSED      __attribute__((unused))

/* The variant's name as locus_variant() reports it. */
#ifndef LOCUS_VARIANT
#define LOCUS_VARIANT "vam"
#endif

/* Debug build: internal assertions and periodic whole-heap consistency checks. */
#ifndef LOCUS_DEBUG
#define LOCUS_DEBUG 0
#endif
static const bool cfg_debug = LOCUS_DEBUG;

/* Hardened build (liblocus-secure.so, docs/secure.md): the preset of mitigations.h that turns
 * every protection on. Compiled out of every other library. */
#ifndef LOCUS_SECURE
#define LOCUS_SECURE 0
#endif

/* Fundamental alignment. 16 on x86-64/aarch64 (alignof(max_align_t)); the q8 ablation variant
 * sets it to 8 and is weakly aligned by name. */
#ifndef LOCUS_QUANTUM
#define LOCUS_QUANTUM 16
#endif
#define QUANTUM ((size_t)LOCUS_QUANTUM)

/* Segments: 4 MiB, aligned to their size, so that p & ~SEGMENT_MASK finds a header. */
#define SEGMENT_SHIFT 22
#define SEGMENT_SIZE  ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK  (SEGMENT_SIZE - 1)

/* User address space covered by the segment map (x86-64 and aarch64 with 4-level tables). */
#define ADDRESS_BITS 47

static inline size_t align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

/* Safe-linking: a free-list link stored in freed memory (at `at`) holds next ^ (at >> 12), as
 * glibc's do, and ^ a random cookie of the process. A use-after-free write of a plain pointer
 * there then decodes to an address nowhere near the heap, so a later malloc does not hand out
 * memory the writer chose; and a link is told from data (an 8-byte object has no room for a
 * double-free marker: its link decodes to NULL or to a slot of its block only if it is free).
 * The cookie is what makes that test safe: without it, a live 8-byte object holding the
 * number at >> 12 (a small integer where the heap lies low, as under valgrind) read as a free
 * one, and its free as a double free. Set once, before the first link is written. */
static uintptr_t link_cookie;
static inline uintptr_t link_encode(const void *at, const void *next) {
  return (uintptr_t)next ^ ((uintptr_t)at >> 12) ^ link_cookie;
}
static inline void *link_decode(const void *at, uintptr_t stored) {
  return (void *)(stored ^ ((uintptr_t)at >> 12) ^ link_cookie);
}
static inline void *link_load(const void *at) { return link_decode(at, *(const uintptr_t *)at); }

/* The secure build's poison: what a quarantined object is filled with (its first bytes), and
 * whether bytes [from, n) of p still hold it, a word at a time. */
#define POISON_BYTE 0xDB
#define POISON_WORD ((uintptr_t)0x0101010101010101ull * POISON_BYTE)
static inline bool poison_intact(const void *p, size_t from, size_t n) {
  const unsigned char *b = p;
  uintptr_t diff = 0;
  size_t i = from;
  for (; i + sizeof(uintptr_t) <= n; i += sizeof(uintptr_t)) {
    uintptr_t w;
    memcpy(&w, b + i, sizeof w);
    diff |= w ^ POISON_WORD;
  }
  for (; i < n; i++) diff |= b[i] ^ POISON_BYTE;
  return diff == 0;
}
static inline bool is_pow2(size_t x) { return x && !(x & (x - 1)); }
static inline unsigned log2_floor(size_t x) { return 63u - (unsigned)__builtin_clzl(x); }

#endif
