/* A program as a user of an installed Locus writes it: it allocates through plain malloc (and
 * through the C library, strdup) and asks Locus, through locus.h, whether those calls reached
 * it. Prints "<variant> <version> ok"; exits 1 if Locus did not serve the allocations. */
#include <locus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100
static void *volatile objects[N];

int main(void) {
  locus_stats_t before, after;
  locus_stats_get(&before);
  for (int i = 0; i < N / 2; i++)
    objects[i] = malloc(24 + i);
  for (int i = N / 2; i < N; i++)
    objects[i] = strdup("allocated by the C library");
  locus_stats_get(&after);
  unsigned long long calls = after.malloc_calls - before.malloc_calls;
  for (int i = 0; i < N; i++)
    free(objects[i]);
  if (calls < N) {
    fprintf(stderr, "app: only %llu of %d allocations went through Locus\n", calls, N);
    return 1;
  }
  printf("%s %s ok\n", locus_variant(), locus_version());
  return 0;
}
