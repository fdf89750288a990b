/* locus_marks — an LD_PRELOAD library that, under valgrind, prints a mark into valgrind's log
 * at every allocation and free, so that a reference log of lackey can be read in allocation
 * terms (object drag, `locus paging --drag`; lab/paging/locus_pages.c reads the marks).
 *
 *   B            the allocator is entered (malloc, calloc, realloc, aligned allocations)
 *   A ADDR SIZE  the allocator returned ADDR for SIZE bytes; the allocator is left
 *   F ADDR       ADDR is released and the allocator is entered (free, realloc)
 *   E            the allocator is left (after free)
 *
 * References between B or F and A or E are the allocator's own and are charged to no object.
 * Preloaded before the allocator under study, it forwards every call to the next definition
 * (RTLD_NEXT). Outside valgrind the marks are no-ops.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <valgrind/valgrind.h>

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
static int (*next_memalign)(void **, size_t, size_t);
static void *(*next_aligned)(size_t, size_t);

/* dlsym may allocate (calloc) before the pointers are known: such early requests are served
 * from this buffer and never freed to the allocator. */
static _Alignas(16) char early[8192];
static size_t early_used;
static int resolving;

static void *early_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (early_used + n > sizeof early)
        return NULL;
    void *p = early + early_used;
    early_used += n;
    return p;   /* static storage: already zero */
}

static int is_early(void *p)
{
    return (char *)p >= early && (char *)p < early + sizeof early;
}

static void resolve(void)
{
    if (next_malloc || resolving)
        return;
    resolving = 1;
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    next_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    next_aligned = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}

static void *allocated(void *p, size_t n)
{
    VALGRIND_PRINTF("A %p %zu\n", p, n);
    return p;
}

void *malloc(size_t n)
{
    resolve();
    if (!next_malloc)
        return early_alloc(n);
    VALGRIND_PRINTF("B\n");
    return allocated(next_malloc(n), n);
}

void *calloc(size_t k, size_t n)
{
    resolve();
    if (!next_calloc)
        return early_alloc(k * n);
    VALGRIND_PRINTF("B\n");
    return allocated(next_calloc(k, n), k * n);
}

void *realloc(void *p, size_t n)
{
    resolve();
    if (is_early(p) || !p)
        return malloc(n);
    VALGRIND_PRINTF("F %p\n", p);
    return allocated(next_realloc(p, n), n);
}

void free(void *p)
{
    if (!p || is_early(p))
        return;
    resolve();
    VALGRIND_PRINTF("F %p\n", p);
    next_free(p);
    VALGRIND_PRINTF("E\n");
}

int posix_memalign(void **out, size_t align, size_t n)
{
    resolve();
    VALGRIND_PRINTF("B\n");
    int r = next_memalign(out, align, n);
    allocated(r ? NULL : *out, n);
    return r;
}

void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    VALGRIND_PRINTF("B\n");
    return allocated(next_aligned(align, n), n);
}

void *memalign(size_t align, size_t n)
{
    void *p = NULL;
    return posix_memalign(&p, align, n) ? NULL : p;
}
