/* misuse.c — the misuse suite: heap misuse of every kind, for every size category, each in a
 * child process, with the outcome expected of each allocator family.
 *
 * Outcomes: caught (the child ended abnormally: the allocator's report and abort, or a fault)
 * or missed (it ran to its end). The table says, per family — the Vam builds, the PHK builds
 * (and tp: neither has object headers nor boundary tags), glibc (`system`) — C (caught), M (missed) or ? (either: the outcome depends on layout or
 * on what the misuse overwrote). A case expected caught and missed fails the test: detection
 * regressed. A case expected missed and caught is reported as an improvement (update the
 * table). Under a Locus library a caught case that aborted must also have printed Locus's
 * one-line report (or faulted).
 *
 * Sizes: small 32 B, medium 300 B, large 4000 B (vam: boundary-tagged chunks), page 64 KiB
 * (a run of pages), huge 2 MiB (an own mapping). */
#include "check.h"

#include <signal.h>
#include <sys/wait.h>

static volatile char sink;

/* Neighbours on both sides, so the misused object is not alone in its block or area. */
static char *with_neighbours(size_t size, char **before, char **after) {
  *before = malloc(size);
  char *p = malloc(size);
  *after = malloc(size);
  if (!p || !*before || !*after) _exit(4);
  memset(p, 0x5A, size);
  return p;
}

/* The allocator's later work that may notice: more objects of the size, freed again. */
static void churn_after(size_t size) {
  void *keep[64];
  for (int i = 0; i < 64; i++) keep[i] = malloc(size);
  for (int i = 0; i < 64; i++) free(keep[i]);
}

static void double_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  free(opaque_ptr(p));
  churn_after(size);
}

static void interior_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(opaque_ptr(p + 16));
  churn_after(size);
}

/* Writes `n` bytes just past the end (or, n < 0, before the start), then frees the object and
 * its neighbours and allocates the size again. */
static void overflow(size_t size, long n) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  char *at = opaque_ptr(n >= 0 ? p + size : p + n);
  memset(at, 0xEE, (size_t)(n >= 0 ? n : -n));
  free(a);
  free(p);
  free(b);
  churn_after(size);
}

/* Writes into an object after freeing it, then allocates the size again (twice over what the
 * freed object's list held). */
static void write_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  memset(opaque_ptr(p), 0xEE, size < 64 ? size : 64);
  churn_after(size);
  free(a);
  free(b);
}

static void read_after_free(size_t size) {
  char *b, *a, *p = with_neighbours(size, &b, &a);
  free(p);
  sink = ((volatile char *)opaque_ptr(p))[size / 2];
  churn_after(size);
}

static char global_object[64];

static void c_double_free_small(void) { double_free(32); }
static void c_double_free_medium(void) { double_free(300); }
static void c_double_free_large(void) { double_free(4000); }
static void c_double_free_page(void) { double_free(64 << 10); }
static void c_double_free_huge(void) { double_free(2 << 20); }
static void c_interior_small(void) { interior_free(32); }
static void c_interior_large(void) { interior_free(4000); }
static void c_interior_huge(void) { interior_free(2 << 20); }
static void c_free_stack(void) { char buf[64]; free(opaque_ptr(buf)); }
static void c_free_global(void) { free(opaque_ptr(global_object)); }
static void c_overflow1_small(void) { overflow(32, 1); }
static void c_overflow1_large(void) { overflow(4000, 1); }
static void c_overflow32_small(void) { overflow(32, 32); }
static void c_overflow32_large(void) { overflow(4000, 32); }
static void c_underflow1_small(void) { overflow(32, -1); }
static void c_underflow1_large(void) { overflow(4000, -1); }
static void c_underflow16_large(void) { overflow(4000, -16); }
static void c_overflow_huge_1mib(void) { overflow(2 << 20, 1 << 20); }
static void c_write_after_free_small(void) { write_after_free(32); }
static void c_write_after_free_large(void) { write_after_free(4000); }
static void c_write_after_free_huge(void) { write_after_free(2 << 20); }
static void c_read_after_free_small(void) { read_after_free(32); }
static void c_read_after_free_huge(void) { read_after_free(2 << 20); }

typedef struct misuse {
  const char *name;
  void (*fn)(void);
  const char *expect;   /* vam, phk, glibc: C caught, M missed, ? either */
} misuse_t;

/* Measured on this round's builds (tests/README.md has the counts). vam's large-object header
 * catches large overflows and underflows; vam-header's small headers catch small overflows
 * (hence ? for the Vam family there); a write after free of a large chunk overwrites its bin
 * links, and the allocator faults on them (? : a fault, not a report). */
static const misuse_t cases[] = {
    {"double_free_small", c_double_free_small, "CCC"},
    {"double_free_medium", c_double_free_medium, "CCC"},
    {"double_free_large", c_double_free_large, "CCC"},
    {"double_free_page", c_double_free_page, "CCC"},
    {"double_free_huge", c_double_free_huge, "CCC"},
    {"interior_small", c_interior_small, "CCC"},
    {"interior_large", c_interior_large, "CCC"},
    {"interior_huge", c_interior_huge, "CCC"},
    {"free_stack", c_free_stack, "CCC"},
    {"free_global", c_free_global, "CCC"},
    {"overflow1_small", c_overflow1_small, "?MM"},
    {"overflow1_large", c_overflow1_large, "CMM"},
    {"overflow32_small", c_overflow32_small, "?MC"},
    {"overflow32_large", c_overflow32_large, "CMC"},
    {"underflow1_small", c_underflow1_small, "MMC"},
    {"underflow1_large", c_underflow1_large, "CMC"},
    {"underflow16_large", c_underflow16_large, "CMC"},
    {"overflow_huge_1mib", c_overflow_huge_1mib, "CCC"},
    {"write_after_free_small", c_write_after_free_small, "MMM"},
    {"write_after_free_large", c_write_after_free_large, "?M?"},
    {"write_after_free_huge", c_write_after_free_huge, "MM?"},
    {"read_after_free_small", c_read_after_free_small, "MMM"},
    {"read_after_free_huge", c_read_after_free_huge, "MM?"},
};
#define NCASES (sizeof cases / sizeof *cases)

static int family = -1;   /* 0 vam, 1 phk, 2 glibc; -1 another allocator (no expectations) */

static int run(size_t i) {
  const misuse_t *c = &cases[i];
  test_child_t r;
  test_run_child(c->fn, &r);
  bool caught = r.hung ? false : !(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 4) {
    test_fdprintf(2, "FAIL %-24s the case could not be set up\n", c->name);
    return 1;
  }
  char want = family >= 0 ? c->expect[family] : '?';
  int first = (int)strcspn(r.err_len ? r.err : "", "\n");
  test_note("%-7s %-24s %s%s%.*s\n", caught ? "caught" : "missed", c->name, r.how,
            r.err_len ? ": " : "", first, r.err_len ? r.err : "");
  if (want == 'C' && !caught) {
    test_fdprintf(2, "FAIL %-24s expected caught, missed (detection regressed)\n", c->name);
    return 1;
  }
  if (want == 'M' && caught)
    test_note("note    %-24s expected missed, now caught: update the table\n", c->name);
  if (caught && family <= 1 && family >= 0 && WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGABRT &&
      strncmp(r.err, "locus: ", 7) != 0) {
    test_fdprintf(2, "FAIL %-24s aborted without Locus's report: %.*s\n", c->name, first, r.err);
    return 1;
  }
  return 0;
}

static const char *name(size_t i) { return cases[i].name; }

int main(int argc, char **argv) {
  locus_api_t api;
  if (locus_api_require(&api))
    family = strncmp(api.variant(), "phk", 3) == 0 || strncmp(api.variant(), "tp", 2) == 0 ||
             strncmp(api.variant(), "pow2", 4) == 0 || strncmp(api.variant(), "lf", 2) == 0 ? 1 : 0;
  else if (!getenv("LD_PRELOAD") || !*getenv("LD_PRELOAD")) family = 2;
  test_note("misuse: %s\n", family == 0 ? "a Vam build" : family == 1 ? "a PHK, TP or LF build" :
                            family == 2 ? "glibc" : "another allocator (outcomes only)");
  return test_run_cases(argc, argv, NCASES, name, run);
}
