/* fuzz_shadow.h — fuzz.c's shadow extent index: the live objects' [lo, hi) ranges of every
 * thread in one treap under a lock, in mmap'd nodes (nothing of it comes from the allocator
 * under test), so that a new object overlapping a live one is caught at once. Part of fuzz.c,
 * included where it was: it calls fuzz.c's fail() and is used by nothing else.
 */
#ifndef LOCUS_TEST_FUZZ_SHADOW_H
#define LOCUS_TEST_FUZZ_SHADOW_H

typedef struct snode {
  uintptr_t lo, hi;
  uint32_t left, right, prio, thread;
} snode_t;

static snode_t *nodes;           /* nodes[0] is the null node */
static uint32_t node_cap, node_free, node_used = 1;
static uint32_t root;
static uint64_t prio_state = 0x5DEECE66Dull;
static size_t tree_live;
static pthread_mutex_t tree_lock = PTHREAD_MUTEX_INITIALIZER;

static void *map_zeroed(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) fail("mmap of %zu bytes for the shadow failed", bytes);
  return p;
}

static void split(uint32_t t, uintptr_t key, uint32_t *l, uint32_t *r) {
  if (!t) {
    *l = *r = 0;
  } else if (nodes[t].lo < key) {
    split(nodes[t].right, key, &nodes[t].right, r);
    *l = t;
  } else {
    split(nodes[t].left, key, l, &nodes[t].left);
    *r = t;
  }
}

static uint32_t merge(uint32_t a, uint32_t b) {
  if (!a || !b) return a ? a : b;
  if (nodes[a].prio > nodes[b].prio) {
    nodes[a].right = merge(nodes[a].right, b);
    return a;
  }
  nodes[b].left = merge(a, nodes[b].left);
  return b;
}

static uint32_t edge(uint32_t t, int rightmost) {
  while (t && (rightmost ? nodes[t].right : nodes[t].left))
    t = rightmost ? nodes[t].right : nodes[t].left;
  return t;
}

/* Records [lo, hi) as live: fails when it overlaps a live object. */
static void shadow_insert(uintptr_t lo, uintptr_t hi, int thread) {
  pthread_mutex_lock(&tree_lock);
  uint32_t l, r;
  split(root, lo, &l, &r);
  uint32_t pred = edge(l, 1), succ = edge(r, 0);
  if (pred && nodes[pred].hi > lo)
    fail("new object [%#lx, %#lx) overlaps live object [%#lx, %#lx) of thread %u",
         (unsigned long)lo, (unsigned long)hi, (unsigned long)nodes[pred].lo,
         (unsigned long)nodes[pred].hi, nodes[pred].thread);
  if (succ && nodes[succ].lo < hi)
    fail("new object [%#lx, %#lx) overlaps live object [%#lx, %#lx) of thread %u",
         (unsigned long)lo, (unsigned long)hi, (unsigned long)nodes[succ].lo,
         (unsigned long)nodes[succ].hi, nodes[succ].thread);
  uint32_t n = node_free;
  if (n) {
    node_free = nodes[n].left;
  } else {
    if (node_used == node_cap) fail("shadow full (%u nodes)", node_cap);
    n = node_used++;
  }
  prio_state = prio_state * 6364136223846793005ull + 1442695040888963407ull;
  nodes[n] = (snode_t){lo, hi, 0, 0, (uint32_t)(prio_state >> 32), (uint32_t)thread};
  root = merge(merge(l, n), r);
  tree_live++;
  pthread_mutex_unlock(&tree_lock);
}

static void shadow_remove(uintptr_t lo) {
  pthread_mutex_lock(&tree_lock);
  uint32_t l, m, r;
  split(root, lo, &l, &r);
  split(r, lo + 1, &m, &r);
  if (!m || nodes[m].left || nodes[m].right || nodes[m].lo != lo)
    fail("shadow has no live object at %#lx", (unsigned long)lo);
  nodes[m].left = node_free;
  node_free = m;
  root = merge(l, r);
  tree_live--;
  pthread_mutex_unlock(&tree_lock);
}

/* In order: every extent ends before the next begins. */
static void walk(uint32_t t, uintptr_t *last_hi, size_t *count) {
  if (!t) return;
  walk(nodes[t].left, last_hi, count);
  if (nodes[t].lo < *last_hi)
    fail("shadow walk: object at %#lx overlaps the one before (ending at %#lx)",
         (unsigned long)nodes[t].lo, (unsigned long)*last_hi);
  *last_hi = nodes[t].hi;
  ++*count;
  walk(nodes[t].right, last_hi, count);
}

static void shadow_walk(void) {
  pthread_mutex_lock(&tree_lock);
  uintptr_t last = 0;
  size_t count = 0;
  walk(root, &last, &count);
  if (count != tree_live) fail("shadow walk found %zu objects, %zu live", count, tree_live);
  pthread_mutex_unlock(&tree_lock);
}

#endif
