/* linked — linked structures built amid churn, then traversed.
 *
 * Models programs whose data structures are built piecemeal while they also allocate short-
 * lived temporaries (parsers building ASTs, compilers, graph and tree codes such as the Olden
 * benchmarks), and that then walk those structures over and over.
 *
 * Each round:
 *  1. fragment: allocate a pool of small objects and free a random 60% of them, so that the
 *     heap starts with scattered holes, as a program's heap does after a while;
 *  2. build: append nodes (24, 32, 48 and 64 bytes) to four singly linked lists and insert
 *     40-byte nodes into a binary search tree, while allocating and freeing temporary garbage
 *     objects between node allocations;
 *  3. traverse: walk every list and the tree (in order) many times, summing fields;
 *  4. tear down, checking every node.
 * An allocator that places successive same-size allocations next to each other (segregated
 * size classes, bump allocation) makes the lists sequential in memory and the traversals fast;
 * one that fills the scattered holes first, or mixes sizes in one area, spreads the nodes over
 * many more cache lines and pages. Traversal time dominates, so this measures locality.
 *
 * usage: linked [scale]    rounds = scale
 */
#include "bench_util.h"

enum {
  POOL = 300000,          /* fragmenting objects allocated before the build */
  LIST_NODES = 400000,    /* list nodes per round, spread over NLISTS lists */
  NLISTS = 4,
  TREE_EVERY = 2,         /* one tree insertion per TREE_EVERY list appends */
  GARBAGE_RING = 1024,    /* live temporaries during the build */
  PASSES = 16,            /* traversals of every structure per round */
  TREE_NODE_SIZE = 40,
};

static const size_t list_node_size[NLISTS] = {24, 32, 48, 64};

typedef struct lnode {
  struct lnode *next;
  uint64_t value;
  uint64_t check;           /* bench_mix(value): verified at tear-down */
} lnode;

typedef struct tnode {
  struct tnode *left, *right;
  uint64_t key;
  uint64_t check;           /* bench_mix(key) */
} tnode;

typedef struct {
  void *p;
  size_t size;
  uint64_t tag;
} object;

static uint64_t serial;

static void object_new(object *o, size_t size) {
  o->p = bench_malloc(size);
  o->size = size;
  o->tag = bench_mix(++serial);
  bench_fill(o->p, size, o->tag);
}

static void object_free(object *o, const char *what) {
  if (o->p == NULL) return;
  bench_check(o->p, o->size, o->tag, what, serial);
  free(o->p);
  o->p = NULL;
}

/* Inserts without recursion; duplicate keys go right. Returns the depth of the new node. */
static unsigned tree_insert(tnode **root, tnode *n) {
  unsigned depth = 0;
  while (*root != NULL) {
    root = n->key < (*root)->key ? &(*root)->left : &(*root)->right;
    depth++;
  }
  *root = n;
  return depth;
}

/* In-order sum with an explicit stack (depth bounded by the caller's max depth + 1). */
static uint64_t tree_sum(tnode *t, tnode **stack) {
  uint64_t sum = 0, prev = 0, order = 0;
  size_t sp = 0;
  while (t != NULL || sp > 0) {
    while (t != NULL) {
      stack[sp++] = t;
      t = t->left;
    }
    t = stack[--sp];
    if (t->key < prev) bench_die("tree out of order: the allocator corrupted a node");
    prev = t->key;
    sum += t->key ^ order++;
    t = t->right;
  }
  return sum;
}

static void tree_free(tnode *t, tnode **stack, uint64_t *count) {
  size_t sp = 0;
  if (t != NULL) stack[sp++] = t;
  while (sp > 0) {
    t = stack[--sp];
    if (t->check != bench_mix(t->key)) bench_die("tree node corrupted (key %llu)",
                                                 (unsigned long long)t->key);
    if (t->left != NULL) stack[sp++] = t->left;
    if (t->right != NULL) stack[sp++] = t->right;
    free(t);
    (*count)++;
  }
}

int main(int argc, char **argv) {
  bench_name = "linked";
  long rounds = bench_scale_arg(argc, argv, 1, "[scale]");
  bench_rng rng;
  bench_rng_seed(&rng, 0x11a7ed);
  uint64_t sum = 0;

  object *pool = bench_malloc(sizeof(object) * POOL);
  object *ring = bench_malloc(sizeof(object) * GARBAGE_RING);

  for (long round = 0; round < rounds; round++) {
    /* 1. fragment */
    for (size_t i = 0; i < POOL; i++) object_new(&pool[i], bench_small_size(&rng));
    for (size_t i = 0; i < POOL; i++)
      if (bench_rng_below(&rng, 100) < 60) object_free(&pool[i], "pool object");
    for (size_t i = 0; i < GARBAGE_RING; i++) ring[i].p = NULL;

    /* 2. build amid churn */
    lnode *head[NLISTS] = {0}, **tail[NLISTS];
    for (int l = 0; l < NLISTS; l++) tail[l] = &head[l];
    tnode *root = NULL;
    unsigned max_depth = 0;
    size_t ntree = 0;
    for (size_t i = 0; i < LIST_NODES; i++) {
      int l = (int)(i % NLISTS);
      lnode *n = bench_malloc(list_node_size[l]);
      memset(n, 0x3c, list_node_size[l]);
      n->next = NULL;
      n->value = bench_rng_next(&rng) >> 16;
      n->check = bench_mix(n->value);
      *tail[l] = n;
      tail[l] = &n->next;

      if (i % TREE_EVERY == 0) {
        tnode *t = bench_malloc(TREE_NODE_SIZE);
        memset(t, 0xc3, TREE_NODE_SIZE);
        t->left = t->right = NULL;
        t->key = bench_rng_next(&rng) >> 20;
        t->check = bench_mix(t->key);
        unsigned d = tree_insert(&root, t);
        if (d > max_depth) max_depth = d;
        ntree++;
      }

      /* one or two temporaries of 16..128 bytes replace older ones in the ring */
      int g = 1 + (int)bench_rng_below(&rng, 2);
      while (g-- > 0) {
        object *o = &ring[bench_rng_below(&rng, GARBAGE_RING)];
        object_free(o, "temporary");
        object_new(o, (size_t)bench_rng_range(&rng, 16, 128));
      }
    }
    for (size_t i = 0; i < GARBAGE_RING; i++) object_free(&ring[i], "temporary");

    /* 3. traverse */
    tnode **stack = bench_malloc(sizeof(tnode *) * (max_depth + 2));
    for (int pass = 0; pass < PASSES; pass++) {
      for (int l = 0; l < NLISTS; l++) {
        uint64_t s = 0;
        for (lnode *n = head[l]; n != NULL; n = n->next) s += n->value;
        sum = bench_fold(sum, s);
      }
      sum = bench_fold(sum, tree_sum(root, stack));
    }

    /* 4. tear down, checking every node */
    uint64_t nodes = 0;
    for (int l = 0; l < NLISTS; l++) {
      lnode *n = head[l];
      while (n != NULL) {
        lnode *next = n->next;
        if (n->check != bench_mix(n->value))
          bench_die("list node corrupted (list %d, node %llu)", l, (unsigned long long)nodes);
        free(n);
        nodes++;
        n = next;
      }
    }
    tree_free(root, stack, &nodes);
    if (nodes != LIST_NODES + ntree) bench_die("lost nodes: %llu of %zu",
                                               (unsigned long long)nodes, LIST_NODES + ntree);
    free(stack);
    for (size_t i = 0; i < POOL; i++) object_free(&pool[i], "pool object");
    sum = bench_fold(sum, max_depth);
  }
  free(ring);
  free(pool);
  printf("linked: scale=%ld list_nodes=%d tree_nodes=%d passes=%d checksum=%016llx\n", rounds,
         LIST_NODES, (LIST_NODES + TREE_EVERY - 1) / TREE_EVERY, PASSES,
         (unsigned long long)sum);
  return 0;
}
