/* sites — two call sites interleave allocations of one size; only one site's objects are
 * traversed.
 *
 * Models a program that builds a structure it walks often (a list of records) while another
 * part of it keeps allocating objects of the same size that the walk never touches (log
 * entries, cache entries, messages). A size-segregated allocator puts both sites' objects in
 * the same blocks, one after the other, so the walk reads every other slot: twice the cache
 * lines and pages it needs. Segregating by call site (liblocus-vam-sites.so; HALO does it
 * offline) gives the walked objects blocks of their own.
 *
 * Each round: NODES list nodes from make_node() and as many 48-byte objects from make_other(),
 * interleaved one for one (both live until the end of the round), then PASSES walks of the
 * list summing its values, then everything is freed and checked.
 *
 * usage: sites [scale] [--quick]    rounds = scale; --quick: 1/20 of the nodes
 */
#include "bench_util.h"
#include <time.h>

enum { NODES = 400000, PASSES = 40, OBJECT_SIZE = 48 };

typedef struct node {
  struct node *next;
  uint64_t value;
  uint64_t check;          /* bench_mix(value) */
  uint64_t pad[3];         /* 48 bytes: the same size class as the other site's objects */
} node;

/* The two call sites, kept apart by the compiler (each its own return address). */
static __attribute__((noinline)) node *make_node(uint64_t value) {
  node *n = bench_malloc(sizeof *n);
  n->next = NULL;
  n->value = value;
  n->check = bench_mix(value);
  return n;
}

static __attribute__((noinline)) uint64_t *make_other(uint64_t tag) {
  uint64_t *o = bench_malloc(OBJECT_SIZE);
  for (size_t i = 0; i < OBJECT_SIZE / sizeof *o; i++) o[i] = tag + i;
  return o;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  bench_name = "sites";
  int quick;
  long rounds = bench_args(&argc, argv, 1, "[scale] [--quick]", &quick);
  size_t nodes = quick ? NODES / 20 : NODES;
  uint64_t **others = bench_malloc(nodes * sizeof *others);
  uint64_t sum = 0;
  double walk_s = 0;
  for (long r = 0; r < rounds; r++) {
    node *head = NULL, **tail = &head;
    for (size_t i = 0; i < nodes; i++) {
      node *n = make_node((uint64_t)r * nodes + i);
      *tail = n;
      tail = &n->next;
      others[i] = make_other(i);
    }
    double t0 = now_s();
    for (int p = 0; p < PASSES; p++)
      for (node *n = head; n; n = n->next) sum += n->value ^ (uint64_t)p;
    walk_s += now_s() - t0;
    for (size_t i = 0; i < nodes; i++) {
      if (others[i][5] != i + 5) bench_die("an object of the other site was overwritten");
      free(others[i]);
    }
    for (node *n = head, *next; n; n = next) {
      next = n->next;
      if (n->check != bench_mix(n->value)) bench_die("a list node was overwritten");
      free(n);
    }
  }
  free(others);
  printf("sites: scale=%ld nodes=%zu passes=%d checksum=%016llx\n", rounds, nodes, PASSES,
         (unsigned long long)sum);
  fprintf(stderr, "sites: walks took %.3f s\n", walk_s);   /* stdout stays deterministic */
  return 0;
}
