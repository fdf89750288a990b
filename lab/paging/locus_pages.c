/* locus_pages — reduces a memory-reference log of valgrind's lackey tool
 * (`valgrind --tool=lackey --trace-mem=yes`) to page-level locality figures, in one pass:
 *
 *   - the LRU page-miss curve: misses for every memory size (in pages), from the LRU stack
 *     distance of every reference (Mattson et al.), seed 000 §4.6 Fig. 8;
 *   - swap prefetchability at given memory sizes: the misses of LRU at that size fed to a
 *     prefetch buffer filled in aligned clusters of pages, seed 000 Fig. 9;
 *   - with --drag, object drag (seed 004 §6): lines of the form `**PID** A ADDR SIZE`,
 *     `**PID** F ADDR`, `**PID** B` and `**PID** E` (client-request prints of the lab's
 *     marking preload, locus_marks.c) delimit allocations, frees and the allocator's own
 *     code; every other data reference is charged to the live object containing it.
 *
 * Usage: locus_pages [--sizes P1,P2,...] [--buffer PAGES] [--cluster PAGES] [--drag]
 *        [--page-shift N] < LOG
 *
 * Output (text, one fact a line, read by lab/locus_lab/paging.py):
 *   refs N            references after consecutive repeats of a page are dropped
 *   pages N           distinct pages (= cold misses)
 *   curve M0 M1 ...   misses at memory sizes 0, 1, 2, ... pages, up to the largest stack
 *                     distance (at every larger size the misses are the cold ones)
 *   prefetch SIZE MISSES PREFETCHABLE
 *   o T_ALLOC T_LAST T_FREE SIZE   (--drag) an object freed by the program
 *   u T_ALLOC T_LAST SIZE          (--drag) an object never freed
 * Times of --drag are allocation times: bytes allocated so far, this object's included.
 *
 * Only data references (lackey's L, S and M lines) are counted; instruction fetches are not.
 * An access spanning two pages references both, the lower first.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <search.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 8

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "locus_pages: out of memory\n");
        exit(1);
    }
    return q;
}

/* ---- pages seen: an open-addressing hash from page number to its state ---------------- */

struct page {
    uint64_t number;
    uint32_t last;              /* time of the last reference (0: never referenced) */
    uint32_t inbuf[MAX_SIZES];  /* sequence number in prefetch buffer k, 0 when not in it */
};

static struct page *table;
static size_t table_cap, table_used;

static size_t slot_of(uint64_t number)
{
    uint64_t h = number * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (table_cap - 1);
}

/* The entry of `number`, created when missing. Entries are never removed, so the index of
 * an entry is stable until the table grows (callers do not keep indexes across lookups). */
static struct page *page_entry(uint64_t number)
{
    if ((table_used + 1) * 2 > table_cap) {
        struct page *old = table;
        size_t old_cap = table_cap;
        table_cap = old_cap ? old_cap * 2 : 1 << 16;
        table = calloc(table_cap, sizeof *table);
        if (!table) {
            fprintf(stderr, "locus_pages: out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < old_cap; i++) {
            if (old[i].number == 0)
                continue;
            size_t s = slot_of(old[i].number);
            while (table[s].number)
                s = (s + 1) & (table_cap - 1);
            table[s] = old[i];
        }
        free(old);
    }
    /* Page numbers are stored plus one so that 0 marks an empty slot. */
    uint64_t key = number + 1;
    size_t s = slot_of(key);
    while (table[s].number && table[s].number != key)
        s = (s + 1) & (table_cap - 1);
    if (!table[s].number) {
        table[s].number = key;
        table_used++;
    }
    return &table[s];
}

/* ---- LRU stack distances: a Fenwick tree over time with a mark at each page's last time --
 * The stack distance of a reference to page p last referenced at time t0 is the number of
 * distinct pages referenced since t0, p included: the marks at times >= t0. When time runs
 * out of the tree, times are renumbered 1..P in order (only the P marks matter). */

static uint32_t *fenwick;       /* 1-based */
static uint32_t fen_cap, now, marks;

static void fen_add(uint32_t i, int32_t v)
{
    for (; i <= fen_cap; i += i & -i)
        fenwick[i] += (uint32_t)v;
}

static uint32_t fen_prefix(uint32_t i)
{
    uint32_t s = 0;
    for (; i; i -= i & -i)
        s += fenwick[i];
    return s;
}

static int by_last(const void *a, const void *b)
{
    uint32_t x = (*(struct page *const *)a)->last, y = (*(struct page *const *)b)->last;
    return (x > y) - (x < y);
}

static void renumber(void)
{
    struct page **live = xrealloc(NULL, (marks + 1) * sizeof *live);
    uint32_t n = 0;
    for (size_t i = 0; i < table_cap; i++)
        if (table[i].number && table[i].last)
            live[n++] = &table[i];
    qsort(live, n, sizeof *live, by_last);
    uint32_t cap = fen_cap;
    while (cap < 4 * n)
        cap *= 2;
    fenwick = xrealloc(fenwick, ((size_t)cap + 1) * sizeof *fenwick);
    memset(fenwick, 0, ((size_t)cap + 1) * sizeof *fenwick);
    fen_cap = cap;
    for (uint32_t i = 0; i < n; i++) {
        live[i]->last = i + 1;
        fen_add(i + 1, 1);
    }
    now = n;
    free(live);
}

/* ---- the prefetch buffer model ---------------------------------------------------------
 * A miss of a page in the buffer is prefetchable and takes the page out of the buffer. Any
 * other miss reads the page's aligned cluster: its other pages not yet buffered enter the
 * buffer, each evicting the oldest buffered page when the buffer is full. The buffer is a
 * FIFO with lazy deletion: an item is live while its page's inbuf[k] equals its sequence. */

struct item { uint64_t page; uint32_t seq; };

struct prefetch {
    uint64_t size;              /* LRU memory size in pages */
    uint64_t misses, prefetchable;
    struct item *fifo;
    size_t head, len, cap, live;
    uint32_t seq;
};

static struct prefetch sims[MAX_SIZES];
static int nsims;
static uint64_t buffer_pages = 256, cluster_pages = 8;

static void fifo_push(struct prefetch *s, uint64_t page, uint32_t seq)
{
    if (s->head > 4096 && s->head * 2 > s->len) {
        memmove(s->fifo, s->fifo + s->head, (s->len - s->head) * sizeof *s->fifo);
        s->len -= s->head;
        s->head = 0;
    }
    if (s->len == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->fifo = xrealloc(s->fifo, s->cap * sizeof *s->fifo);
    }
    s->fifo[s->len++] = (struct item){page, seq};
}

static void prefetch_miss(int k, uint64_t page)
{
    struct prefetch *s = &sims[k];
    s->misses++;
    struct page *e = page_entry(page);
    if (e->inbuf[k]) {
        e->inbuf[k] = 0;
        s->live--;
        s->prefetchable++;
        return;
    }
    uint64_t first = page - page % cluster_pages;
    for (uint64_t q = first; q < first + cluster_pages; q++) {
        if (q == page)
            continue;
        struct page *c = page_entry(q);
        if (c->inbuf[k])
            continue;
        while (s->live >= buffer_pages) {
            struct item old = s->fifo[s->head++];
            struct page *o = page_entry(old.page);
            if (o->inbuf[k] == old.seq) {
                o->inbuf[k] = 0;
                s->live--;
            }
        }
        c = page_entry(q);      /* the table may have grown */
        c->inbuf[k] = ++s->seq;
        s->live++;
        fifo_push(s, q, s->seq);
    }
}

/* ---- one page reference ------------------------------------------------------------------ */

static uint64_t refs, cold, *hist;
static size_t hist_cap;
static uint64_t previous_page = UINT64_MAX;

static void reference(uint64_t page)
{
    if (page == previous_page)
        return;
    previous_page = page;
    refs++;
    struct page *e = page_entry(page);
    uint64_t distance = 0;      /* 0: first reference, a miss at every size */
    if (e->last) {
        distance = marks - fen_prefix(e->last - 1);
        fen_add(e->last, -1);
        marks--;
        if (distance >= hist_cap) {
            size_t cap = hist_cap ? hist_cap : 1024;
            while (cap <= distance)
                cap *= 2;
            hist = xrealloc(hist, cap * sizeof *hist);
            memset(hist + hist_cap, 0, (cap - hist_cap) * sizeof *hist);
            hist_cap = cap;
        }
        hist[distance]++;
    } else {
        cold++;
    }
    if (now == fen_cap) {
        e->last = 0;            /* out of the renumbering: it is re-marked below */
        renumber();
        e = page_entry(page);
    }
    e->last = ++now;
    fen_add(now, 1);
    marks++;
    for (int k = 0; k < nsims; k++)
        if (distance == 0 || distance > sims[k].size)
            prefetch_miss(k, page);
}

/* ---- objects (--drag) ------------------------------------------------------------------ */

struct object { uint64_t start, end, size, t_alloc, t_last; };

static void *objects;           /* tsearch tree of live objects, disjoint by address */
static uint64_t alloc_clock;
static int inside_allocator;
static struct object *recent;   /* the last object found, tried first */

/* Live objects do not overlap, so "overlaps" is equality; a lookup key is one byte long. */
static int by_range(const void *a, const void *b)
{
    const struct object *x = a, *y = b;
    if (x->end <= y->start)
        return -1;
    if (y->end <= x->start)
        return 1;
    return 0;
}

static struct object *object_at(uint64_t addr)
{
    if (recent && addr >= recent->start && addr < recent->end)
        return recent;
    struct object key = {addr, addr + 1, 0, 0, 0};
    void *node = tfind(&key, &objects, by_range);
    return node ? (recent = *(struct object **)node) : NULL;
}

static void object_touch(uint64_t addr, uint64_t size)
{
    if (inside_allocator)
        return;
    struct object *o = object_at(addr);
    if (o)
        o->t_last = alloc_clock;
    if (size > 1 && (!o || addr + size > o->end)) {
        o = object_at(addr + size - 1);
        if (o)
            o->t_last = alloc_clock;
    }
}

static void object_new(uint64_t addr, uint64_t size)
{
    struct object *o = xrealloc(NULL, sizeof *o);
    alloc_clock += size;
    *o = (struct object){addr, addr + (size ? size : 1), size, alloc_clock, alloc_clock};
    /* A block the program never freed cannot be reissued, but a lost free (a path the
     * preload does not wrap) can: the older object at the address ends here. */
    void *node;
    while ((node = tfind(o, &objects, by_range))) {
        struct object *old = *(struct object **)node;
        printf("o %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", old->t_alloc,
               old->t_last, alloc_clock - size, old->size);
        tdelete(old, &objects, by_range);
        if (recent == old)
            recent = NULL;
        free(old);
    }
    tsearch(o, &objects, by_range);
}

static void object_free(uint64_t addr)
{
    struct object key = {addr, addr + 1, 0, 0, 0};
    void *node = tfind(&key, &objects, by_range);
    if (!node)
        return;                 /* a block allocated before the marks began */
    struct object *o = *(struct object **)node;
    if (o->start != addr)
        return;
    printf("o %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", o->t_alloc, o->t_last,
           alloc_clock, o->size);
    tdelete(o, &objects, by_range);
    if (recent == o)
        recent = NULL;
    free(o);
}

static void print_unfreed(const void *node, VISIT which, int depth)
{
    (void)depth;
    if (which != postorder && which != leaf)
        return;
    const struct object *o = *(struct object *const *)node;
    printf("u %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", o->t_alloc, o->t_last, o->size);
}

/* A client-request line: `**PID** A 0xADDR SIZE`, `**PID** F 0xADDR`, `**PID** B|E`. */
static void mark(const char *line)
{
    const char *p = strstr(line + 2, "**");
    if (!p)
        return;
    p += 2;
    while (*p == ' ')
        p++;
    char kind = *p;
    char *end;
    uint64_t addr, size;
    switch (kind) {
    case 'B':
        inside_allocator = 1;
        break;
    case 'E':
        inside_allocator = 0;
        break;
    case 'A':
        addr = strtoull(p + 1, &end, 16);
        size = strtoull(end, NULL, 10);
        if (addr)
            object_new(addr, size);
        inside_allocator = 0;
        break;
    case 'F':
        addr = strtoull(p + 1, NULL, 16);
        inside_allocator = 1;
        if (addr)
            object_free(addr);
        break;
    }
}

static void usage(void)
{
    fprintf(stderr, "usage: locus_pages [--sizes P1,P2,...] [--buffer PAGES] "
            "[--cluster PAGES] [--drag] [--page-shift N] < LACKEY-LOG\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int drag = 0;
    unsigned shift = 12;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--drag")) {
            drag = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--sizes")) {
            for (char *tok = strtok(argv[++i], ","); tok; tok = strtok(NULL, ",")) {
                if (nsims == MAX_SIZES) {
                    fprintf(stderr, "locus_pages: at most %d sizes\n", MAX_SIZES);
                    return 2;
                }
                sims[nsims++].size = strtoull(tok, NULL, 10);
            }
        } else if (i + 1 < argc && !strcmp(argv[i], "--buffer")) {
            buffer_pages = strtoull(argv[++i], NULL, 10);
        } else if (i + 1 < argc && !strcmp(argv[i], "--cluster")) {
            cluster_pages = strtoull(argv[++i], NULL, 10);
        } else if (i + 1 < argc && !strcmp(argv[i], "--page-shift")) {
            shift = (unsigned)strtoul(argv[++i], NULL, 10);
        } else {
            usage();
        }
    }
    if (!cluster_pages || !buffer_pages || shift > 30)
        usage();
    fen_cap = 1 << 20;
    fenwick = xrealloc(NULL, ((size_t)fen_cap + 1) * sizeof *fenwick);
    memset(fenwick, 0, ((size_t)fen_cap + 1) * sizeof *fenwick);

    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        /* Data references: " L addr,size", " S addr,size", " M addr,size". */
        if (line[0] == ' ' && (line[1] == 'L' || line[1] == 'S' || line[1] == 'M')) {
            char *end;
            uint64_t addr = strtoull(line + 2, &end, 16);
            uint64_t size = *end == ',' ? strtoull(end + 1, NULL, 10) : 1;
            if (!size)
                size = 1;
            uint64_t first = addr >> shift, last = (addr + size - 1) >> shift;
            reference(first);
            if (last != first)
                reference(last);
            if (drag)
                object_touch(addr, size);
        } else if (drag && line[0] == '*' && line[1] == '*') {
            mark(line);
        }
        /* A line longer than the buffer is never a reference line; skip its rest. */
        if (!strchr(line, '\n')) {
            int c;
            while ((c = getchar()) != EOF && c != '\n')
                ;
        }
    }

    printf("refs %" PRIu64 "\npages %" PRIu64 "\n", refs, cold);
    /* misses(m) = cold + references whose stack distance exceeds m */
    size_t maxd = 0;
    for (size_t d = 0; d < hist_cap; d++)
        if (hist[d])
            maxd = d;
    printf("curve");
    uint64_t above = 0;
    for (size_t d = 1; d < hist_cap; d++)
        above += hist[d];
    for (size_t m = 0; m <= maxd; m++) {
        if (m > 0 && m < hist_cap)
            above -= hist[m];
        printf(" %" PRIu64, cold + above);
    }
    printf("\n");
    for (int k = 0; k < nsims; k++)
        printf("prefetch %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", sims[k].size, sims[k].misses,
               sims[k].prefetchable);
    if (drag)
        twalk(objects, print_unfreed);
    return 0;
}
