/* hints.c — allocation near a hint (locus_malloc_near, locus_calloc_near), every library.
 *
 * Sections (run one with `hints NAME`):
 *   fallback        NULL and foreign hints (stack, static data, unmapped, another mapping, the
 *                   top of the address space, a freed object, a huge object) give ordinary
 *                   objects of every size category: aligned, usable, writable, freeable
 *   calloc          calloc_near zeroes memory reused near the hint; overflow and impossible
 *                   sizes fail with ENOMEM
 *   same_page       hinting designs: with free slots of the class on the hint's page, every
 *                   hinted allocation lands on that page (small and medium sizes)
 *   list_churn      hinting designs: a list built by hinting each node with the previous one,
 *                   amid churn of same-size objects, has nearly every node (vam: >= 90%) on
 *                   its predecessor's page; plain malloc does much worse (printed)
 *   list_lines      hinting designs: a list hinted amid same-size temporaries (each freed 8,192
 *                   allocations later) keeps as many nodes right after their predecessor (at
 *                   most 64 bytes on) as the same list built without hints: hints must not
 *                   pull the temporaries into the hint's block and scatter the nodes there
 *                   (vam-bitmap did: a 2.8x slower walk at the same page accuracy)
 *   realloc         hinted objects grow and shrink with realloc, contents kept
 *   threads         hinted objects freed by other threads; hints into another thread's heap
 *   stats           the hint counters count exactly the hinted calls and where they landed
 *
 * The program is not linked against Locus: under glibc (`system`) the calls are absent (weak)
 * and it skips. Libraries whose design places objects near hints (vam, tp, medius) must
 * honour them; the others (phk) must still return correct objects.
 */
#include "check.h"
#include <malloc.h>
#include <sys/mman.h>

#pragma weak locus_malloc_near
#pragma weak locus_calloc_near

static locus_api_t L;

#define PAGE_OF(p) ((uintptr_t)(p) >> 12)

/* Whether the loaded design places objects near hints (see each design's docs). */
static bool design_hints(void) {
  const char *v = L.variant();
  return !strncmp(v, "vam", 3) || !strncmp(v, "tp", 2) || !strncmp(v, "medius", 6);
}

static locus_stats_t stats_now(void) {
  locus_stats_t s;
  memset(&s, 0, sizeof s);
  CHECK(L.stats_get(&s) == 0);
  CHECK_GE(s.version, 4);
  return s;
}

static void use_object(void *p, size_t size, const char *what) {
  CHECKF(p != NULL, "%s: %zu bytes: NULL", what, size);
  CHECK_ALIGNED(p, test_min_align(size));
  CHECKF(malloc_usable_size(p) >= size, "%s: usable %zu < %zu", what, malloc_usable_size(p), size);
  memset(p, 0xA5, size);
}

/* ---- fallback -------------------------------------------------------------------------- */

static const size_t sizes[] = {0, 1, 8, 16, 48, 100, 496, 1000, 5000, 20000, 40000, 300000, 3 << 20};
#define NSIZES (sizeof sizes / sizeof *sizes)
static char static_data[256];

static void t_fallback(void) {
  int on_stack = 0;
  void *mapping = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(mapping != MAP_FAILED);
  void *freed = malloc(48);
  free(freed);
  void *huge = malloc(5 << 20);
  CHECK(huge != NULL);
  const void *hints[] = {NULL, &on_stack, static_data, (void *)16, mapping, (void *)UINTPTR_MAX,
                         (void *)((uintptr_t)1 << 62), freed, huge, (char *)huge + 12345};
  void *keep[NSIZES * (sizeof hints / sizeof *hints)];
  size_t n = 0;
  for (size_t h = 0; h < sizeof hints / sizeof *hints; h++) {
    for (size_t i = 0; i < NSIZES; i++) {
      void *p = locus_malloc_near(sizes[i], opaque_ptr((void *)hints[h]));
      use_object(p, sizes[i], "locus_malloc_near");
      keep[n++] = p;
    }
  }
  for (size_t i = 0; i < n; i++) free(keep[i]);
  free(huge);
  munmap(mapping, 1 << 16);
  CHECK_EQ(L.check_heap(), 0);
}

/* ---- calloc ---------------------------------------------------------------------------- */


static void t_calloc(void) {
  for (size_t i = 0; i < NSIZES; i++) {
    size_t size = sizes[i];
    void *hint = malloc(size ? size : 1);
    void *dirty[8];
    for (int k = 0; k < 8; k++) {
      dirty[k] = locus_malloc_near(size, hint);
      use_object(dirty[k], size, "locus_malloc_near");
    }
    for (int k = 0; k < 8; k++) free(dirty[k]);   /* dirty memory next to the hint */
    for (int k = 0; k < 8; k++) {
      unsigned char *z = locus_calloc_near(1, size, hint);
      CHECK(z != NULL);
      for (size_t j = 0; j < size; j++) CHECKF(z[j] == 0, "byte %zu of %zu not zero", j, size);
      dirty[k] = z;
    }
    for (int k = 0; k < 8; k++) free(dirty[k]);
    free(hint);
  }
  void *hint = malloc(32);
  CHECK_ENOMEM(locus_calloc_near(opaque_size(SIZE_MAX / 2), 3, hint));
  CHECK_ENOMEM(locus_calloc_near(opaque_size((size_t)1 << 33), (size_t)1 << 33, NULL));
  CHECK_ENOMEM(locus_malloc_near(opaque_size(SIZE_MAX - 4096), hint));
  CHECK_ENOMEM(locus_malloc_near(opaque_size(PTRDIFF_MAX), NULL));
  free(hint);
}

/* ---- same_page ------------------------------------------------------------------------- */

#define NOBJ 3000

static void same_page_for(size_t size) {
  static void *obj[NOBJ];
  for (int i = 0; i < NOBJ; i++) CHECK((obj[i] = malloc(size)) != NULL);
  void *hint = obj[NOBJ / 2];
  size_t room = 0;
  for (int i = 0; i < NOBJ; i++) {
    if (obj[i] != hint && PAGE_OF(obj[i]) == PAGE_OF(hint)) {
      free(obj[i]);
      obj[i] = NULL;
      room++;
    }
  }
  CHECKF(room >= 2, "%zu-byte objects: only %zu others on the hint's page", size, room);
  locus_stats_t before = stats_now();
  void *got[64];
  size_t n = room < 64 ? room : 64;
  for (size_t k = 0; k < n; k++) {
    void *other = malloc(size * 3 + 40);   /* another class in between: must not matter */
    got[k] = locus_malloc_near(size, hint);
    use_object(got[k], size, "locus_malloc_near");
    CHECKF(PAGE_OF(got[k]) == PAGE_OF(hint), "%zu bytes, allocation %zu of %zu: %p, not on the hint's page (%p)",
           size, k, n, got[k], hint);
    free(other);
  }
  locus_stats_t after = stats_now();
  CHECK_EQ(after.hint_calls - before.hint_calls, n);
  CHECK_EQ(after.hint_same_page - before.hint_same_page, n);
  CHECK_GE(after.hint_same_kregion - before.hint_same_kregion, n);
  for (size_t k = 0; k < n; k++) free(got[k]);
  for (int i = 0; i < NOBJ; i++) free(obj[i]);
  CHECK_EQ(L.check_heap(), 0);
}

static void t_same_page(void) {
  if (!design_hints()) SECTION_SKIP("%s places objects by size only", L.variant());
  static const size_t page_sizes[] = {16, 24, 48, 64, 112, 200, 320, 480};
  for (size_t i = 0; i < sizeof page_sizes / sizeof *page_sizes; i++) same_page_for(page_sizes[i]);
}

/* ---- list_churn ------------------------------------------------------------------------ */

#define POOL 4096
#define NODES 1000

typedef struct node { struct node *next; long value; char pad[16]; } node_t;

static uint64_t rng = 88172645463325252ull;
static uint64_t next_random(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Builds a NODES-long list amid churn of a pool of same-size objects, half of which were
 * freed at random first (so every page of the pool has room, and plain malloc reuses the
 * holes in the order they were freed: scattered); returns the share (in percent) of nodes on
 * their predecessor's page. */
static unsigned build_list(bool hinted, node_t **head_out) {
  static void *pool[POOL];
  for (int i = 0; i < POOL; i++) pool[i] = malloc(sizeof(node_t));
  for (int i = 0; i < POOL; i++) {
    size_t j = next_random() % POOL;
    free(pool[j]);
    pool[j] = NULL;
  }
  node_t *head = NULL, *tail = NULL;
  unsigned near = 0;
  for (int i = 0; i < NODES; i++) {
    for (int k = 0; k < 2; k++) {     /* churn: free a pooled object or allocate one */
      size_t j = next_random() % POOL;
      if (pool[j]) { free(pool[j]); pool[j] = NULL; } else pool[j] = malloc(sizeof(node_t));
    }
    node_t *n = hinted && tail ? locus_malloc_near(sizeof *n, tail) : malloc(sizeof *n);
    CHECK(n != NULL);
    n->next = NULL;
    n->value = i;
    if (tail) {
      near += PAGE_OF(n) == PAGE_OF(tail);
      tail->next = n;
    } else {
      head = n;
    }
    tail = n;
  }
  for (int i = 0; i < POOL; i++) free(pool[i]);
  *head_out = head;
  return near * 100u / (NODES - 1);
}

static void free_list(node_t *n, bool check) {
  long i = 0;
  while (n) {
    node_t *next = n->next;
    if (check) CHECK_EQ(n->value, i++);
    free(n);
    n = next;
  }
  if (check) CHECK_EQ(i, NODES);
}

static void t_list_churn(void) {
  node_t *plain, *hinted;
  unsigned plain_pct = build_list(false, &plain);
  locus_stats_t before = stats_now();
  unsigned hinted_pct = build_list(true, &hinted);
  locus_stats_t after = stats_now();
  test_note("     %s: nodes on their predecessor's page: %u%% with hints, %u%% without\n",
            L.variant(), hinted_pct, plain_pct);
  uint64_t calls = after.hint_calls - before.hint_calls, page = after.hint_same_page - before.hint_same_page;
  CHECK_EQ(calls, NODES - 1);
  CHECK_EQ(page * 100 / calls, hinted_pct);   /* the library's count agrees with the addresses */
  free_list(plain, true);
  free_list(hinted, true);
  if (!strncmp(L.variant(), "vam", 3)) CHECK_GE(hinted_pct, 90);
  /* (vam-sites keeps the list's one call site apart from the pool's: near without hints too) */
  if (design_hints()) CHECKF(hinted_pct > plain_pct || hinted_pct >= 90, "%u%% with hints, %u%% without", hinted_pct, plain_pct);
}

/* The share (%) of a list's nodes that lie at most 64 bytes after their predecessor, the
 * list built with or without hints amid temporaries of the node's size and of other sizes
 * that are freed in order, WINDOW allocations later. */
static unsigned list_lines(bool hinted) {
  enum { WINDOW = 8192, STEPS = 30000 };
  void **ring = calloc(WINDOW, sizeof *ring);
  void **nodes = calloc(STEPS, sizeof *nodes);
  CHECK(ring != NULL && nodes != NULL);
  size_t next = 0;
  unsigned close = 0;
  for (int i = 0; i < STEPS; i++) {
    for (int k = 0; k < 2; k++) {
      free(ring[next]);
      ring[next] = malloc(k == 0 ? 40 : 16 + next_random() % 241);
      CHECK(ring[next] != NULL);
      next = (next + 1) % WINDOW;
    }
    nodes[i] = hinted && i ? locus_malloc_near(40, nodes[i - 1]) : malloc(40);
    CHECK(nodes[i] != NULL);
    if (i) close += (uintptr_t)nodes[i] - (uintptr_t)nodes[i - 1] <= 64;
  }
  for (int i = 0; i < WINDOW; i++) free(ring[i]);
  for (int i = 0; i < STEPS; i++) free(nodes[i]);
  free(ring);
  free(nodes);
  return close * 100u / (STEPS - 1);
}

static void t_list_lines(void) {
  unsigned plain = list_lines(false), hinted = list_lines(true);
  test_note("     %s: nodes at most 64 B after their predecessor: %u%% with hints, %u%% without\n",
            L.variant(), hinted, plain);
  if (design_hints()) CHECKF(hinted + 5 >= plain, "%u%% with hints, %u%% without", hinted, plain);
}

/* ---- realloc --------------------------------------------------------------------------- */

static void t_realloc(void) {
  void *hint = malloc(64);
  for (size_t i = 0; i < NSIZES; i++) {
    size_t size = sizes[i] ? sizes[i] : 1;
    unsigned char *p = locus_malloc_near(size, hint);
    CHECK(p != NULL);
    for (size_t j = 0; j < size; j++) p[j] = (unsigned char)(j * 7 + i);
    size_t bigger = size * 3 + 100;
    p = realloc(p, bigger);
    CHECK(p != NULL);
    for (size_t j = 0; j < size; j++) CHECK_EQ(p[j], (unsigned char)(j * 7 + i));
    p = realloc(p, size / 2 + 1);
    CHECK(p != NULL);
    for (size_t j = 0; j < size / 2 + 1; j++) CHECK_EQ(p[j], (unsigned char)(j * 7 + i));
    free(p);
  }
  free(hint);
}

/* ---- threads --------------------------------------------------------------------------- */

#define TOBJ 2000
static void *shared_objs[TOBJ];
static void *other_heap_hint;

static void *allocate_near_own(void *arg) {
  (void)arg;
  void *prev = malloc(40);
  other_heap_hint = prev;
  for (int i = 0; i < TOBJ; i++) {
    shared_objs[i] = locus_malloc_near(40 + (size_t)(i % 3) * 200, prev);
    CHECK(shared_objs[i] != NULL);
    memset(shared_objs[i], i & 0xFF, 40);
    prev = shared_objs[i];
  }
  return NULL;   /* exits: its heap is abandoned with other_heap_hint live */
}

static void *free_others(void *arg) {
  (void)arg;
  for (int i = 0; i < TOBJ; i += 2) {
    CHECK_EQ(((unsigned char *)shared_objs[i])[39], i & 0xFF);
    free(shared_objs[i]);
  }
  /* hints into another thread's heap: plain allocations in ours */
  void *mine[100];
  for (int i = 0; i < 100; i++) {
    mine[i] = locus_malloc_near(40, shared_objs[1 + 2 * i]);
    use_object(mine[i], 40, "hint into another heap");
  }
  for (int i = 0; i < 100; i++) free(mine[i]);
  return NULL;
}

static void t_threads(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, allocate_near_own, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(pthread_create(&t, NULL, free_others, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  /* this thread: hints into an abandoned heap, then frees the rest */
  void *q = locus_malloc_near(40, other_heap_hint);
  use_object(q, 40, "hint into an abandoned heap");
  free(q);
  for (int i = 1; i < TOBJ; i += 2) free(shared_objs[i]);
  free(other_heap_hint);
  CHECK_EQ(L.check_heap(), 0);
}

/* ---- stats ----------------------------------------------------------------------------- */

static void t_stats(void) {
  locus_stats_t a = stats_now();
  void *p = locus_malloc_near(32, NULL);      /* no hint: not counted */
  void *hint = malloc(32);
  void *q[10];
  for (int i = 0; i < 10; i++) q[i] = locus_malloc_near(32, hint);
  void *z = locus_calloc_near(4, 8, hint);
  locus_stats_t b = stats_now();
  CHECK_EQ(b.hint_calls - a.hint_calls, 11);
  CHECK_LE(b.hint_same_line - a.hint_same_line, b.hint_same_page - a.hint_same_page);
  CHECK_LE(b.hint_same_page - a.hint_same_page, 11);
  CHECK_LE(b.hint_same_kregion - a.hint_same_kregion, 11);
  CHECK_EQ(b.malloc_calls - a.malloc_calls, 13);
  char json[4096];
  CHECK(L.stats_json(json, sizeof json) < sizeof json);
  CHECK(strstr(json, "\"hint_calls\": ") && strstr(json, "\"hint_same_page\": ") &&
        strstr(json, "\"hint_same_line\": ") && strstr(json, "\"hint_same_kregion\": "));
  for (int i = 0; i < 10; i++) free(q[i]);
  free(z);
  free(hint);
  free(p);
}

int main(int argc, char **argv) {
  if (!locus_api_require(&L) || !locus_malloc_near) {
    test_note("hints: not a Locus library, skipped\n");
    return TEST_SKIP;
  }
  static const test_section_t sections[] = {
      {"fallback", t_fallback}, {"calloc", t_calloc},   {"same_page", t_same_page},
      {"list_churn", t_list_churn}, {"list_lines", t_list_lines}, {"realloc", t_realloc}, {"threads", t_threads},
      {"stats", t_stats},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
