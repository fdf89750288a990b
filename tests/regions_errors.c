/* regions_errors.c — misuse of a region ends the program with one exact line.
 *
 * Each case runs in a child process that commits one misuse. The child must die of the
 * expected signal (SIGABRT) and write exactly one line to stderr,
 *   locus: <call>: <what> <address>
 * with the address as printf's %p writes it, e.g.
 *   locus: locus_region_free(): double free 0x7f3a5c001040
 * Debug builds (the library's name contains "debug") also catch a plain free() of an object
 * of a destroyed region, and fault (SIGSEGV, no message required) on reading one; those cases
 * are skipped elsewhere. Skipped (77) when the allocator has no regions.
 *
 *   regions_errors            run every case
 *   regions_errors <case>...  run the named cases (still each in a child)
 */
#define _GNU_SOURCE
#include "regions.h"

/* Nothing may allocate between the misuse's setup and the misuse: a destroyed region is
 * recognised while its memory has not been reused. */

static locus_region_t *new_region(locus_region_t *parent) {
  locus_region_t *r = locus_region_create(parent);
  if (!r) _exit(4);
  return r;
}
static void *new_object(locus_region_t *r, size_t n) {
  void *p = locus_region_malloc(r, n);
  if (!p) _exit(4);
  memset(p, 0x5A, n);
  return p;
}

static void other_region(size_t n) {
  locus_region_t *a = new_region(NULL), *b = new_region(NULL);
  new_object(b, n);
  void *p = new_object(a, n);
  test_report_address(p);
  locus_region_free(b, opaque_ptr(p));
}
static void c_other_region(void) { other_region(40); }
static void c_other_region_big(void) { other_region(100 << 10); }

/* a child's object freed with its parent's handle */
static void c_other_region_child(void) {
  locus_region_t *a = new_region(NULL), *b = new_region(a);
  void *p = new_object(b, 40);
  test_report_address(p);
  locus_region_free(a, opaque_ptr(p));
}

static void double_free(size_t n) {
  locus_region_t *r = new_region(NULL);
  new_object(r, n);
  void *p = new_object(r, n);
  new_object(r, n);
  locus_region_free(r, p);
  test_report_address(p);
  locus_region_free(r, opaque_ptr(p));
}
static void c_double_free(void) { double_free(40); }
static void c_double_free_big(void) { double_free(100 << 10); }

/* freed with free(), then with locus_region_free() */
static void c_double_free_mixed(void) {
  locus_region_t *r = new_region(NULL);
  void *p = new_object(r, 200);
  new_object(r, 200);
  free(p);
  test_report_address(p);
  locus_region_free(r, opaque_ptr(p));
}

static void c_invalid_malloced(void) {
  locus_region_t *r = new_region(NULL);
  new_object(r, 64);
  void *p = malloc(64);
  if (!p) _exit(4);
  memset(p, 0, 64);
  test_report_address(p);
  locus_region_free(r, opaque_ptr(p));
}

static void c_invalid_interior(void) {
  locus_region_t *r = new_region(NULL);
  char *p = new_object(r, 64);
  new_object(r, 64);
  memset(p, 0, 64);
  test_report_address(p + 16);
  locus_region_free(r, opaque_ptr(p + 16));
}

/* A region destroyed just now (nothing allocated since), its address reported. */
static locus_region_t *destroyed_region(void) {
  locus_region_t *r = new_region(NULL);
  new_object(r, 100);
  locus_region_destroy(r);
  test_report_address(r);
  return opaque_ptr(r);
}

static void c_destroy_twice(void) { locus_region_destroy(destroyed_region()); }
static void c_clear_destroyed(void) { locus_region_clear(destroyed_region()); }
static void c_stats_destroyed(void) {
  locus_region_stats_t s;
  locus_region_stats(destroyed_region(), &s);
}

/* the parent's destroy already destroyed the child */
static void c_destroy_child_after_parent(void) {
  locus_region_t *a = new_region(NULL), *b = new_region(a);
  new_object(b, 100);
  locus_region_destroy(a);
  test_report_address(b);
  locus_region_destroy(opaque_ptr(b));
}

static void c_free_destroyed(void) {
  locus_region_t *r = new_region(NULL);
  void *p = new_object(r, 48);
  locus_region_destroy(r);
  test_report_address(p);
  free(opaque_ptr(p));
}

static void c_read_destroyed(void) {
  locus_region_t *r = new_region(NULL);
  volatile char *p = new_object(r, 48);
  locus_region_destroy(r);
  test_report_address((void *)p);
  char c = p[0];
  (void)c;
}

typedef struct region_case {
  const char *name;
  void (*fn)(void);
  const char *call, *what; /* the message; NULL: none required */
  int sig;                 /* the signal the child must die of */
  bool debug_only;
} region_case_t;

static const region_case_t cases[] = {
    {"other_region", c_other_region, "locus_region_free()", "object of another region", SIGABRT, false},
    {"other_region_big", c_other_region_big, "locus_region_free()", "object of another region", SIGABRT, false},
    {"other_region_child", c_other_region_child, "locus_region_free()", "object of another region", SIGABRT, false},
    {"double_free", c_double_free, "locus_region_free()", "double free", SIGABRT, false},
    {"double_free_big", c_double_free_big, "locus_region_free()", "double free", SIGABRT, false},
    {"double_free_mixed", c_double_free_mixed, "locus_region_free()", "double free", SIGABRT, false},
    {"invalid_malloced", c_invalid_malloced, "locus_region_free()", "invalid pointer", SIGABRT, false},
    {"invalid_interior", c_invalid_interior, "locus_region_free()", "invalid pointer", SIGABRT, false},
    {"destroy_twice", c_destroy_twice, "locus_region_destroy()", "destroyed or invalid region", SIGABRT, false},
    {"destroy_child_after_parent", c_destroy_child_after_parent, "locus_region_destroy()", "destroyed or invalid region", SIGABRT, false},
    {"clear_destroyed", c_clear_destroyed, "locus_region_clear()", "destroyed or invalid region", SIGABRT, false},
    {"stats_destroyed", c_stats_destroyed, "locus_region_stats()", "destroyed or invalid region", SIGABRT, false},
    {"free_destroyed", c_free_destroyed, "free()", "object of a destroyed region", SIGABRT, true},
    {"read_destroyed", c_read_destroyed, NULL, NULL, SIGSEGV, true},
};
#define NCASES (sizeof cases / sizeof *cases)

/* 0 when the case ended as it must, else 1 (reported). */
static int run_case(const region_case_t *c) {
  test_child_t r;
  test_run_child(c->fn, &r);
  int first_len = (int)strcspn(r.err, "\n");
  if (r.hung) {
    test_fdprintf(2, "FAIL %-28s the child hung (killed after 20 s)\n", c->name);
    return 1;
  }
  if (!r.reported) {
    test_fdprintf(2, "FAIL %-28s the case could not be set up (%s)\n", c->name, r.how);
    return 1;
  }
  if (!WIFSIGNALED(r.status) || WTERMSIG(r.status) != c->sig) {
    test_fdprintf(2, "FAIL %-28s ended by %s, not by signal %d (%s); stderr: %.*s\n", c->name,
                  r.how, c->sig, strsignal(c->sig), first_len, r.err);
    return 1;
  }
  if (c->call) {
    char want[256];
    snprintf(want, sizeof want, "locus: %s: %s %p\n", c->call, c->what, (void *)r.addr);
    if (strcmp(r.err, want)) {
      test_fdprintf(2, "FAIL %-28s ended by %s, but stderr is not the line\n  %s  it is (%zu "
                    "bytes):\n  %s%s", c->name, r.how, want, r.err_len, r.err,
                    r.err_len && r.err[r.err_len - 1] == '\n' ? "" : "\n");
      return 1;
    }
  }
  test_note("ok   %-28s %s: %.*s\n", c->name, r.how, first_len, r.err);
  return 0;
}

static bool debug;
static const char *case_name(size_t i) { return cases[i].name; }
static int case_run(size_t i) {
  if (cases[i].debug_only && !debug) {
    test_note("skip %-28s (debug builds only)\n", cases[i].name);
    return -1;
  }
  return run_case(&cases[i]);
}

int main(int argc, char **argv) {
  locus_api_t api;
  int skip = regions_require("regions_errors", &api);
  if (skip) return skip;
  debug = regions_debug_build();
  return test_run_cases(argc, argv, NCASES, case_name, case_run);
}
