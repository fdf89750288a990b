/* copy_cost.c — the cost of the secure build's checked memcpy and memset (docs/secure.md), in
 * instructions: run under callgrind with N calls and with none, under liblocus.so and
 * liblocus-secure.so; (instructions with N - with 0) / N is the cost of one call, and the
 * difference between the two libraries what the check adds.
 *
 *   cc -O2 -o copy_cost tools/copy_cost.c
 *   tools/copy_cost.sh build        (every size and destination, both libraries: a table)
 *
 *   copy_cost SIZE heap|global|stack memcpy|memset N
 * heap: the destination is a malloc'd object of SIZE bytes (a 4096-byte one is the 10th large
 * chunk of its area, so the walk of the area's headers is not the shortest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;
static void *(*volatile set_fn)(void *, int, size_t) = memset;
static char src[256 << 10], global_dst[256 << 10];

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: copy_cost SIZE heap|global|stack memcpy|memset N\n");
    return 2;
  }
  size_t size = strtoul(argv[1], NULL, 0);
  long n = strtol(argv[4], NULL, 0);
  char stack_dst[256];
  char *dst = global_dst;
  if (!strcmp(argv[2], "heap")) {
    for (int i = 0; i < 9 && size == 4096; i++) if (!malloc(size)) return 1;
    dst = malloc(size);
  } else if (!strcmp(argv[2], "stack")) {
    if (size > sizeof stack_dst) return 2;
    dst = stack_dst;
  }
  if (!dst || size > sizeof src) return 1;
  int set = !strcmp(argv[3], "memset");
  for (long i = 0; i < n; i++) {
    if (set) set_fn(dst, (int)i, size);
    else copy_fn(dst, src, size);
  }
  return dst[size - 1] == 42;
}
