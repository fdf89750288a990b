/* os.h — the OS contract: reserve address space, give pages back, and the segment map that
 * says which 4 MiB granules of the address space are Locus's.
 *
 * Contracts:
 *  - os_map_aligned returns zeroed, readable/writable memory aligned to `align` or NULL.
 *  - os_discard(p, n): p and n page-aligned; afterwards the pages read as zero and no longer
 *    count in RSS (MADV_DONTNEED: RSS drops at once, unlike MADV_FREE).
 *  - Transparent huge pages are never changed process-wide.
 */
#ifndef LOCUS_OS_H
#define LOCUS_OS_H

#include <sys/mman.h>

/* The page size. x86-64 Linux always has 4 KiB pages, so there it is a constant and every
 * address-to-descriptor step shifts by an immediate; elsewhere (arm64 and ppc64 kernels with
 * 16 or 64 KiB pages) it is read once by os_init. */
#if defined(__x86_64__) || defined(__i386__)
#define LOCUS_FIXED_PAGE_SHIFT 12
static const size_t os_page_size = (size_t)1 << LOCUS_FIXED_PAGE_SHIFT;
static const unsigned os_page_shift = LOCUS_FIXED_PAGE_SHIFT;
#else
static size_t os_page_size;
static unsigned os_page_shift;
#endif

/* Counters the OS layer keeps for statistics (process-wide, relaxed atomics). os_calls counts
 * every mmap, munmap, madvise, mremap and mprotect Locus makes: each goes through OS_CALL. */
static _Atomic uint64_t os_bytes_mapped, os_bytes_discarded, os_discard_calls, os_calls;
#define OS_CALL(call) (atomic_fetch_add_explicit(&os_calls, 1, memory_order_relaxed), (call))

static void os_init(void) {
  long ps = sysconf(_SC_PAGESIZE);
#ifdef LOCUS_FIXED_PAGE_SHIFT
  if (ps > 0 && (size_t)ps != os_page_size) {
    static const char msg[] = "locus: this build assumes 4096-byte pages; the system's differ\n";
    if (write(2, msg, sizeof msg - 1) < 0) {}
    abort();
  }
#else
  os_page_size = (ps > 0 && is_pow2((size_t)ps)) ? (size_t)ps : 4096;
  os_page_shift = log2_floor(os_page_size);
#endif
}

static void *os_map(size_t size) {
  void *p = OS_CALL(mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (p == MAP_FAILED) return NULL;
  atomic_fetch_add_explicit(&os_bytes_mapped, size, memory_order_relaxed);
  return p;
}

static void os_unmap(void *p, size_t size) {
  OS_CALL(munmap(p, size));
  atomic_fetch_sub_explicit(&os_bytes_mapped, size, memory_order_relaxed);
}

/* Where size + align bytes of address space cannot be had (RLIMIT_AS nearly reached), a
 * mapping of `size` alone at an aligned address next to where the kernel puts one: the first
 * reservation of a process with 6 MiB of address space left then works (it needed 8). */
static void *os_map_aligned_tight(size_t size, size_t align) {
  char *p = os_map(size);
  if (!p || ((uintptr_t)p & (align - 1)) == 0) return p;
  os_unmap(p, size);
  uintptr_t down = (uintptr_t)p & ~(align - 1), tries[2] = { down + align, down };
  for (unsigned i = 0; i < 2; i++) {
    if (!tries[i]) continue;
    void *q = OS_CALL(mmap((void *)tries[i], size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0));
    if (q == MAP_FAILED) continue;
    if (q == (void *)tries[i]) {
      atomic_fetch_add_explicit(&os_bytes_mapped, size, memory_order_relaxed);
      return q;
    }
    OS_CALL(munmap(q, size));   /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
  }
  return NULL;
}

/* Maps `size` bytes aligned to `align` (a power of two >= page) by over-mapping and trimming. */
static void *os_map_aligned(size_t size, size_t align) {
  if (size + align < size) return NULL;
  char *p = os_map(size + align);
  if (!p) return os_map_aligned_tight(size, align);
  uintptr_t start = align_up((uintptr_t)p, align);
  size_t head = start - (uintptr_t)p, tail = align - head;
  if (head) os_unmap(p, head);
  if (tail) os_unmap((char *)start + size, tail);
  return (void *)start;
}

static void os_discard(void *p, size_t size) {
  if (!size) return;
  OS_CALL(madvise(p, size, MADV_DONTNEED));
  atomic_fetch_add_explicit(&os_bytes_discarded, size, memory_order_relaxed);
  atomic_fetch_add_explicit(&os_discard_calls, 1, memory_order_relaxed);
}

/* ---- segment map ------------------------------------------------------------------------
 * One byte per 4 MiB granule of the user address space (32 MiB reserved, touched sparsely:
 * one page of the map covers 16 GiB). Lets free() reject pointers Locus never handed out
 * before it reads any header. Writes happen only when granules are mapped or unmapped. */
enum granule_kind { GRANULE_NONE = 0, GRANULE_SEGMENT = 1, GRANULE_OS_HEAD = 2, GRANULE_OS_TAIL = 3 };

/* In .bss: zero-filled on demand, so it costs nothing until touched, and it is valid before
 * start-up runs (a free of a foreign pointer as the very first call must still be caught). */
#define SEGMAP_GRANULES ((uintptr_t)1 << (ADDRESS_BITS - SEGMENT_SHIFT))
static _Atomic(uint8_t) segmap[SEGMAP_GRANULES];

static inline unsigned segmap_get(const void *p) {
  uintptr_t g = (uintptr_t)p >> SEGMENT_SHIFT;
  if (unlikely(g >= SEGMAP_GRANULES)) return GRANULE_NONE;
  return atomic_load_explicit(&segmap[g], memory_order_relaxed);
}

/* Whether granule g (an address >> SEGMENT_SHIFT) is a segment's: segmap_get's test for free's
 * fast path, the byte compared in place (a plain read, which the compiler folds into the
 * comparison: the byte changes only when its granule is mapped or unmapped, and a free of an
 * object there cannot race with that). */
static ALWAYS_INLINE bool segmap_is_segment(uintptr_t g) {
  return g < SEGMAP_GRANULES && ((const uint8_t *)segmap)[g] == GRANULE_SEGMENT;
}

/* Marks [p, p+size) (granule-aligned p) as `head` for the first granule and `rest` after. */
static void segmap_set(const void *p, size_t size, unsigned head, unsigned rest) {
  uintptr_t g = (uintptr_t)p >> SEGMENT_SHIFT, n = (size + SEGMENT_MASK) >> SEGMENT_SHIFT;
  if (g + n > SEGMAP_GRANULES) return;
  for (uintptr_t i = 0; i < n; i++)
    atomic_store_explicit(&segmap[g + i], (uint8_t)(i ? rest : head), memory_order_release);
}

#endif
