/* known_calls.c — makes an exact, known sequence of malloc-family calls and prints every
 * block address it got ("name address" per line) so a test can compare them with a trace.
 * Output goes through write(2) into a static buffer: stdio would allocate and add calls. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[4096];
static size_t used;

static void note(const char *name, void *p) {
  used += (size_t)snprintf(out + used, sizeof out - used, "%s %lx\n", name,
                           (unsigned long)(uintptr_t)p);
}

int main(void) {
  void *volatile null = NULL; /* keeps the compiler from turning realloc(NULL, n) into malloc */
  void *a = malloc(24);                 note("malloc", a);
  void *b = calloc(3, 40);              note("calloc", b);
  void *c = realloc(null, 100);         note("realloc_null", c);
  void *c2 = realloc(c, 5000);          note("realloc_grow", c2);
  void *d = NULL;
  int rc = posix_memalign(&d, 64, 200); note("posix_memalign", rc == 0 ? d : NULL);
  void *e = aligned_alloc(128, 256);    note("aligned_alloc", e);
  void *f = memalign(32, 48);           note("memalign", f);
  void *g = valloc(10);                 note("valloc", g);
  void *h = pvalloc(10);                note("pvalloc", h);
  void *i = reallocarray(null, 7, 9);   note("reallocarray", i);
  void *j = malloc((size_t)1 << 62);    note("malloc_fail", j);  /* fails: NULL */
  free(NULL);                                                     /* not recorded */
  free(a);
  free(b);
  free(c2);
  free(d);
  free(e);
  free(f);
  free(g);
  free(h);
  void *k = realloc(i, 0);              note("realloc_zero", k); /* glibc frees i */
  void *leak = malloc(1000);            note("leak", leak);      /* live at exit */
  (void)leak;
  if (write(1, out, used) < 0) return 1;
  return 0;
}
