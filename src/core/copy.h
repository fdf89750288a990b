/* copy.h — memcpy, memmove and memset checked against the bounds of heap objects (mitigation
 * CHECKED_COPY: the secure build only; every other library defines none of this and exports
 * none of these names).
 *
 * The library exports memcpy, memmove, memset, __memcpy_chk, __memmove_chk and __memset_chk,
 * so a program's calls (and those of the libraries it loads, but not the C library's own
 * internal ones) come here. The destination decides:
 *  - not Locus memory (stack, globals, other mappings): one load of the segment map, then the
 *    C library's function;
 *  - in a Locus object (a block slot, a large chunk, a run object, an own mapping): the copy
 *    must end within the object's usable bytes (what malloc_usable_size says), else the
 *    program ends with "locus: memcpy(): heap overflow: the copy runs past the end of <object>";
 *  - in Locus memory but in no object (a canary, a header, slack, free pages): the copy starts
 *    outside any object, "heap underflow: the copy starts before <object>" when it runs into
 *    one, else "heap overflow: the copy starts outside any object at <address>";
 *  - in a region object (bounds not kept per object): the C library's function.
 * Only the destination is checked (a read past an object is not). A copy the compiler inlines
 * (a small constant size) is no call and is not checked.
 *
 * The C library's functions are found with dlsym(RTLD_NEXT) when the library is loaded (its
 * constructor); until then, and where dlsym finds none, plain string instructions copy. The
 * library's own copies call the unchecked functions below under other assembler names
 * (mitigations.h), so they pay no check and a copy into a free run or a header is no report. */
#ifndef LOCUS_COPY_H
#define LOCUS_COPY_H

#if MITIGATION(CHECKED_COPY)
#include <dlfcn.h>

/* ---- the unchecked copies (the library's own, and what the checked ones forward to) ------- */

static void *copy_bytes(void *d, const void *s, size_t n) {
  void *r = d;
#if defined(__x86_64__)
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
#else
  volatile char *to = d;
  const volatile char *from = s;
  for (size_t i = 0; i < n; i++) to[i] = from[i];
#endif
  return r;
}
static void *move_bytes(void *d, const void *s, size_t n) {
  if ((uintptr_t)d - (uintptr_t)s >= n) return copy_bytes(d, s, n);   /* no harmful overlap */
  volatile char *to = d;
  const volatile char *from = s;
  for (size_t i = n; i-- > 0;) to[i] = from[i];   /* backwards */
  return d;
}
static void *set_bytes(void *d, int c, size_t n) {
  void *r = d;
#if defined(__x86_64__)
  __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
#else
  volatile char *to = d;
  for (size_t i = 0; i < n; i++) to[i] = (char)c;
#endif
  return r;
}

typedef void *(*copy_fn_t)(void *, const void *, size_t);
typedef void *(*set_fn_t)(void *, int, size_t);
static copy_fn_t libc_memcpy = copy_bytes, libc_memmove = move_bytes;
static set_fn_t libc_memset = set_bytes;

__attribute__((constructor)) static void copy_resolve(void) {
  void *f;
  if ((f = dlsym(RTLD_NEXT, "memcpy"))) libc_memcpy = (copy_fn_t)f;
  if ((f = dlsym(RTLD_NEXT, "memmove"))) libc_memmove = (copy_fn_t)f;
  if ((f = dlsym(RTLD_NEXT, "memset"))) libc_memset = (set_fn_t)f;
}

void *copy_unchecked(void *restrict d, const void *restrict s, size_t n) __asm__("locus_copy_unchecked");
void *copy_unchecked(void *restrict d, const void *restrict s, size_t n) { return libc_memcpy(d, s, n); }
void *move_unchecked(void *d, const void *s, size_t n) __asm__("locus_move_unchecked");
void *move_unchecked(void *d, const void *s, size_t n) { return libc_memmove(d, s, n); }
void *set_unchecked(void *d, int c, size_t n) __asm__("locus_set_unchecked");
void *set_unchecked(void *d, int c, size_t n) { return libc_memset(d, c, n); }

/* ---- the check --------------------------------------------------------------------------- */

/* Where a (Locus memory, granule kind g) lies: in an object whose usable bytes are
 * [*start, *end) (BOUNDS_OBJECT), in no object (BOUNDS_NONE), or where the bounds are not
 * known (BOUNDS_UNKNOWN). */
static ALWAYS_INLINE int heap_bounds(const char *a, unsigned g, const char **start, const char **end) {
  if (g == GRANULE_SEGMENT) {
    desc_t *d = desc_head(segment_of(a), a);
    if (d->kind >= KIND_DESIGN) return design_bounds(d, a, start, end);
    if (kind_is_region(d->kind)) return BOUNDS_UNKNOWN;
    if (d->kind != KIND_HUGE) return BOUNDS_NONE;   /* free pages, the segment's header */
    *start = huge_user(d);
    *end = *start + d->u.huge.usable;
  } else {
    uintptr_t at = (uintptr_t)a & ~SEGMENT_MASK;
    while (at && segmap_get((void *)at) == GRANULE_OS_TAIL) at -= SEGMENT_SIZE;
    const os_obj_t *o = (const os_obj_t *)at;
    if (!at || segmap_get(o) != GRANULE_OS_HEAD || o->magic != (OS_OBJ_MAGIC ^ at)) return BOUNDS_UNKNOWN;
    /* A granule's entry covers all of it, the object's mapping perhaps only its start: past
     * the mapping (and its guard) the address may be anyone's. A freed object in the pool
     * may have been cut short since. */
    if (o->state != OS_OBJ_LIVE || a >= (const char *)o + o->map_size + os_obj_guard()) return BOUNDS_UNKNOWN;
    *start = (const char *)o + o->offset;
    *end = (const char *)o + o->map_size;
  }
  return a >= *start && a < *end ? BOUNDS_OBJECT : BOUNDS_NONE;
}

/* d lies in Locus memory (granule kind g) and [d, d + n) is not within one object (or the
 * bounds are not known, or n is 0: nothing to report): says which, and ends the program. */
static COLD void copy_report(const char *d, size_t n, unsigned g, const char *call) {
  const char *start, *end;
  int where = heap_bounds(d, g, &start, &end);
  if (where == BOUNDS_UNKNOWN || !n) return;
  if (where == BOUNDS_OBJECT) {
    if (n <= (size_t)(end - d)) return;
    locus_fatal(call, "heap overflow: the copy runs past the end of", start);
  }
  const char *last = n - 1 < (uintptr_t)-1 - (uintptr_t)d ? d + n - 1 : d;
  unsigned lg = segmap_get(last);
  if (lg != GRANULE_NONE && heap_bounds(last, lg, &start, &end) == BOUNDS_OBJECT && start > d)
    locus_fatal(call, "heap underflow: the copy starts before", start);
  locus_fatal(call, "heap overflow: the copy starts outside any object at", d);
}

/* Whether [d, d + n) lies within one object (d in Locus memory, granule kind g). */
static ALWAYS_INLINE bool copy_fits(const char *d, size_t n, unsigned g) {
  const char *start, *end;
  int where = heap_bounds(d, g, &start, &end);
  return where == BOUNDS_OBJECT ? n <= (size_t)(end - d) : where == BOUNDS_UNKNOWN;
}

/* The check, then the copy (out of line: the exported functions' common case needs no frame). */
static NOINLINE void *memcpy_heap(void *d, const void *s, size_t n, unsigned g, const char *call) {
  if (unlikely(!copy_fits(d, n, g))) copy_report(d, n, g, call);
  return libc_memcpy(d, s, n);
}
static NOINLINE void *memmove_heap(void *d, const void *s, size_t n, unsigned g, const char *call) {
  if (unlikely(!copy_fits(d, n, g))) copy_report(d, n, g, call);
  return libc_memmove(d, s, n);
}
static NOINLINE void *memset_heap(void *d, int c, size_t n, unsigned g, const char *call) {
  if (unlikely(!copy_fits(d, n, g))) copy_report(d, n, g, call);
  return libc_memset(d, c, n);
}

/* Each exported function: where d is not Locus memory, one load of the segment map and a jump
 * to the C library's function. */
#define COPY_CHECKED(fn, call, d, x, n)                                                          \
  do {                                                                                           \
    unsigned g_ = segmap_get(d);                                                                 \
    if (likely(g_ == GRANULE_NONE)) return libc_##fn(d, x, n);                                   \
    return fn##_heap(d, x, n, g_, call);                                                         \
  } while (0)

/* ---- the exported functions -------------------------------------------------------------- */

extern void __chk_fail(void) __attribute__((noreturn));

LOCUS_API void *checked_memcpy(void *restrict d, const void *restrict s, size_t n) __asm__("memcpy");
LOCUS_API void *checked_memcpy(void *restrict d, const void *restrict s, size_t n) {
  COPY_CHECKED(memcpy, "memcpy()", d, s, n);
}
LOCUS_API void *checked_memmove(void *d, const void *s, size_t n) __asm__("memmove");
LOCUS_API void *checked_memmove(void *d, const void *s, size_t n) {
  COPY_CHECKED(memmove, "memmove()", d, s, n);
}
LOCUS_API void *checked_memset(void *d, int c, size_t n) __asm__("memset");
LOCUS_API void *checked_memset(void *d, int c, size_t n) {
  COPY_CHECKED(memset, "memset()", d, c, n);
}
LOCUS_API void *__memcpy_chk(void *restrict d, const void *restrict s, size_t n, size_t dlen) {
  if (unlikely(n > dlen)) __chk_fail();
  COPY_CHECKED(memcpy, "__memcpy_chk()", d, s, n);
}
LOCUS_API void *__memmove_chk(void *d, const void *s, size_t n, size_t dlen) {
  if (unlikely(n > dlen)) __chk_fail();
  COPY_CHECKED(memmove, "__memmove_chk()", d, s, n);
}
LOCUS_API void *__memset_chk(void *d, int c, size_t n, size_t dlen) {
  if (unlikely(n > dlen)) __chk_fail();
  COPY_CHECKED(memset, "__memset_chk()", d, c, n);
}

#endif
#endif
