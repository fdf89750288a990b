/* mitigations.h — the hardened build's protections, as a named set.
 *
 * Every build makes the checks that cost next to nothing: safe-linked free lists (config.h),
 * the double-free markers of the designs (state.h), the large-object and segment headers
 * checked by the operation that reads them, pointers validated by free, realloc and
 * malloc_usable_size. Those are not switchable. The protections below are, one bit each; a
 * build's set is LOCUS_MITIGATIONS, from a preset:
 *
 *   flagship (LOCUS_SECURE=0)   none of them: the always-on checks only
 *   secure   (LOCUS_SECURE=1)   all of them (liblocus-secure.so; docs/secure.md)
 *
 * less LOCUS_MITIGATIONS_OFF, a mask of bits to leave out (an ablation: CMake's LOCUS_ABLATION
 * builds liblocus-secure-no-<name>.so for each bit; docs/secure.md). A bit's code is tested
 * with `if (mitigation(NAME))`, which folds away when the bit is off; `#if MITIGATION(NAME)`
 * appears only where a field exists for it, in a few small accessors. What each bit does, and
 * where:
 *
 *   KEYED_LINKS   free-list links also xored with a per-heap key, and a link taken off a
 *                 block's list checked to be a slot of the block (vam_harden.c.h)
 *   CANARIES      canaries after each small and medium slot, checked on both sides by free
 *                 (slot 0 never handed out); 16-byte canaries around huge runs and before
 *                 objects in own mappings (vam_harden.c.h, huge.h, osobj.h)
 *   RANDOM_ORDER  the bump pointer carves slots in pairs and a coin picks which is handed out;
 *                 a block's free list is served before its bump range (vam_harden.c.h)
 *   QUARANTINE    freed block objects and large chunks wait, marked and poisoned, in a ring
 *                 per heap; freed huge runs in a ring per page manager; the poison verified
 *                 when they leave (vam_quarantine.c.h, huge.h)
 *   GUARD_PAGES   an inaccessible last page in every segment, and after every own mapping,
 *                 objects placed against it (pagemgr.h, osobj.h)
 *   HUGE_RELEASE  a freed own-mapping object's pages moved away and its addresses unmapped,
 *                 never reused in place (osobj.h)
 *   SIZED_DELETE  operator delete(p, size) checks size against the object (api.h)
 *   FAULT_NAMING  a SIGSEGV handler names guard-page and unmapped-object faults; the last
 *                 objects unmapped are remembered (double frees of them named) (osobj.h)
 *   CHECKED_COPY  the library exports memcpy, memmove, memset (and their _chk entry points):
 *                 a copy into a heap object that runs past its usable end, or starts outside
 *                 it, is reported; anything else goes to the C library's (copy.h)
 *
 * GUARD_PAGES also keeps each segment's unused reserve inaccessible until the page manager
 * first hands its pages out (pagemgr.h); HUGE_RELEASE with QUARANTINE makes freed runs of
 * pages inaccessible while they wait in the quarantine (huge.h). */
#ifndef LOCUS_MITIGATIONS_H
#define LOCUS_MITIGATIONS_H

#define MIT_KEYED_LINKS  (1u << 0)
#define MIT_CANARIES     (1u << 1)
#define MIT_RANDOM_ORDER (1u << 2)
#define MIT_QUARANTINE   (1u << 3)
#define MIT_GUARD_PAGES  (1u << 4)
#define MIT_HUGE_RELEASE (1u << 5)
#define MIT_SIZED_DELETE (1u << 6)
#define MIT_FAULT_NAMING (1u << 7)
#define MIT_CHECKED_COPY (1u << 8)

/* The presets. */
#define MIT_PRESET_FLAGSHIP 0u
#define MIT_PRESET_SECURE                                                                        \
  (MIT_KEYED_LINKS | MIT_CANARIES | MIT_RANDOM_ORDER | MIT_QUARANTINE | MIT_GUARD_PAGES |        \
   MIT_HUGE_RELEASE | MIT_SIZED_DELETE | MIT_FAULT_NAMING | MIT_CHECKED_COPY)

#ifndef LOCUS_MITIGATIONS_OFF
#define LOCUS_MITIGATIONS_OFF 0u
#endif
#ifndef LOCUS_MITIGATIONS
#define LOCUS_MITIGATIONS ((LOCUS_SECURE ? MIT_PRESET_SECURE : MIT_PRESET_FLAGSHIP) & ~(LOCUS_MITIGATIONS_OFF))
#endif

/* For the preprocessor (fields, accessors) and for code (folds away when off). */
#define MITIGATION(name) ((LOCUS_MITIGATIONS & MIT_##name) != 0)
#define mitigation(name) ((bool)MITIGATION(name))

/* A field that exists only when its protection is on (declared under #if MITIGATION(NAME)) is
 * reached only through mitigation_field(NAME, lvalue): &lvalue when the bit is on, NULL (and
 * lvalue not compiled at all) when it is off. Every use of the pointer is under
 * mitigation(NAME), so the NULL is never followed. These are the protections' only #if besides
 * the fields' declarations. */
#define mitigation_field(name, lvalue) MIT_FIELD_##name(lvalue)
#if MITIGATION(KEYED_LINKS)
#define MIT_FIELD_KEYED_LINKS(lvalue) (&(lvalue))
#else
#define MIT_FIELD_KEYED_LINKS(lvalue) NULL
#endif
#if MITIGATION(CANARIES)
#define MIT_FIELD_CANARIES(lvalue) (&(lvalue))
#else
#define MIT_FIELD_CANARIES(lvalue) NULL
#endif
#if MITIGATION(RANDOM_ORDER)
#define MIT_FIELD_RANDOM_ORDER(lvalue) (&(lvalue))
#else
#define MIT_FIELD_RANDOM_ORDER(lvalue) NULL
#endif
#if MITIGATION(QUARANTINE)
#define MIT_FIELD_QUARANTINE(lvalue) (&(lvalue))
#else
#define MIT_FIELD_QUARANTINE(lvalue) NULL
#endif
#if MITIGATION(GUARD_PAGES)
#define MIT_FIELD_GUARD_PAGES(lvalue) (&(lvalue))
#else
#define MIT_FIELD_GUARD_PAGES(lvalue) NULL
#endif
#if MITIGATION(HUGE_RELEASE)
#define MIT_FIELD_HUGE_RELEASE(lvalue) (&(lvalue))
#else
#define MIT_FIELD_HUGE_RELEASE(lvalue) NULL
#endif
#if MITIGATION(SIZED_DELETE)
#define MIT_FIELD_SIZED_DELETE(lvalue) (&(lvalue))
#else
#define MIT_FIELD_SIZED_DELETE(lvalue) NULL
#endif
#if MITIGATION(FAULT_NAMING)
#define MIT_FIELD_FAULT_NAMING(lvalue) (&(lvalue))
#else
#define MIT_FIELD_FAULT_NAMING(lvalue) NULL
#endif

/* CHECKED_COPY: the library's own calls of memcpy, memmove and memset (and the compiler's,
 * for struct copies and the like) go to unchecked functions under other names (copy.h), never
 * to the exported, checked ones. GCC applies an assembler name given here to every call of the
 * unit, the few in inline functions before this point included. */
#if MITIGATION(CHECKED_COPY)
void *memcpy(void *restrict, const void *restrict, size_t) __asm__("locus_copy_unchecked");
void *memmove(void *, const void *, size_t) __asm__("locus_move_unchecked");
void *memset(void *, int, size_t) __asm__("locus_set_unchecked");
#endif

/* The protections of the designs' blocks (a design with none of them, or a build with none of
 * them on, keeps the flagship's block layout and free path). */
#define MIT_BLOCKS (MIT_KEYED_LINKS | MIT_CANARIES | MIT_RANDOM_ORDER | MIT_QUARANTINE)

#endif
