/* errors.c — misuse of the heap ends the program with a clear one-line message.
 *
 * Each case runs in a child process that commits one misuse (double free of each size
 * category, interior pointers, pointers the allocator never returned, realloc of a bad
 * pointer). The child must terminate abnormally (normally SIGABRT). Under a Locus library its
 * stderr must also be exactly one line naming the call ("free()", "realloc()") and the address
 * passed, in hex: e.g. "locus: free(): double free 0x7f3a5c001040".
 * For other allocators (the "system" run, peers) only the abnormal end is required: glibc
 * catches all of these; jemalloc, tcmalloc and mimalloc in their default builds do not.
 *
 *   errors            run every case
 *   errors <case>...  run the named cases (still each in a child)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "check.h"

/* After the misuse: a few more calls of the same size, so that a design that notices the
 * damage at its next use of that free list still gets to report it. */
static void aftermath(size_t size) {
  for (int i = 0; i < 4; i++) {
    void *a = malloc(size), *b = malloc(size);
    if (a) memset(a, 0x11, size);
    if (b) memset(b, 0x22, size);
    free(a);
    free(b);
  }
}

static void double_free(size_t size) {
  /* neighbours, so the block is not alone in its page/class */
  void *before = malloc(size);
  char *p = malloc(size);
  void *after = malloc(size);
  if (!p) _exit(4);
  memset(p, 0x5A, size);
  free(p);
  test_report_address(p);
  free(opaque_ptr(p));
  aftermath(size);
  free(before);
  free(after);
}

/* A double free of an object another thread allocated (the flagship keeps such an object in
 * the freeing thread's foreign-object cache after the first free). */
static void *allocate_one(void *arg) {
  *(void **)arg = malloc(48);
  return NULL;
}
static void c_double_free_foreign(void) {
  void *p = NULL;
  pthread_t t;
  if (pthread_create(&t, NULL, allocate_one, &p) != 0 || pthread_join(t, NULL) != 0 || !p) _exit(4);
  memset(p, 0x5A, 48);
  free(p);
  test_report_address(p);
  free(opaque_ptr(p));
  aftermath(48);
}

/* The owner frees again an object another thread freed and still holds (in its foreign-object
 * cache, flagship; its remote form of the free marker, not the owner's, is on the object). */
static void *free_one_and_stay(void *arg) {
  free(*(void **)arg);
  pause();   /* alive: what it keeps stays kept */
  return NULL;
}
static void c_double_free_owner_after_remote(void) {
  void *p = malloc(48);
  pthread_t t;
  if (!p) _exit(4);
  memset(p, 0x5A, 48);
  if (pthread_create(&t, NULL, free_one_and_stay, &p) != 0) _exit(4);
  usleep(100 * 1000);   /* (the thread's free is done long before) */
  test_report_address(p);
  free(opaque_ptr(p));
  aftermath(48);
}

static void c_double_free_small(void) { double_free(32); }
static void c_double_free_medium(void) { double_free(300); }
static void c_double_free_large(void) { double_free(6000); }
static void c_double_free_huge(void) { double_free(200000); }

static void interior(size_t size, size_t offset) {
  char *p = malloc(size);
  if (!p) _exit(4);
  /* zeroed contents: a header-based allocator (glibc) reads a size of 0 there and aborts
   * instead of wandering */
  memset(p, 0, size);
  test_report_address(p + offset);
  free(opaque_ptr(p + offset));
  aftermath(size);
}

static void c_interior_small(void) { interior(64, 8); }
static void c_interior_large(void) { interior(6000, 16); }

static void c_free_stack(void) {
  _Alignas(64) char buf[512];
  memset(buf, 0, sizeof buf);
  test_report_address(buf + 256);
  free(opaque_ptr(buf + 256));
  aftermath(64);
}

static void c_free_mmap(void) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) _exit(4);
  /* the second page of a fresh mapping: the bytes before it are mapped and zero */
  test_report_address(m + page);
  free(opaque_ptr(m + page));
  aftermath(64);
}

static void c_realloc_invalid(void) {
  _Alignas(64) char buf[512];
  memset(buf, 0, sizeof buf);
  test_report_address(buf + 128);
  void *q = realloc(opaque_ptr(buf + 128), 1000);
  if (q) memset(q, 1, 1000);
  aftermath(64);
}

static void c_realloc_freed(void) {
  char *p = malloc(6000);
  void *keep = malloc(6000);
  if (!p) _exit(4);
  free(p);
  test_report_address(p);
  void *q = realloc(opaque_ptr(p), 8000);
  if (q) memset(q, 1, 8000);
  aftermath(6000);
  free(keep);
}

/* A double free of an object whose block emptied meanwhile (both objects of the block were
 * freed, so it went back to bump mode): the message must still say "double free". 8-byte
 * objects have no room for a marker word. */
static void double_free_emptied(size_t size) {
  char *a = malloc(size), *b = malloc(size);
  if (!a || !b) _exit(4);
  free(a);
  free(b);
  test_report_address(a);
  free(opaque_ptr(a));
}
static void c_double_free_tiny_emptied(void) { double_free_emptied(8); }

/* An 8-byte object freed twice while another is freed between and a third stays live (the
 * block neither empties nor has it at the head of its list). */
static void c_double_free_tiny(void) {
  char *a = malloc(8), *b = malloc(8), *c = malloc(8);
  if (!a || !b || !c) _exit(4);
  free(a);
  free(b);
  test_report_address(a);
  free(opaque_ptr(a));
  free(c);
}
static void c_double_free_small_emptied(void) { double_free_emptied(32); }

/* A free of the slot after the last one handed out of a fresh block (vam: bump order, so b - a
 * is the slot size): no object was ever there. k slots on, for a medium block, lands on a
 * later page of the block than the objects handed out. */
static void never_handed_out(size_t size, int k) {
  char *a = malloc(size), *b = malloc(size);
  if (!a || !b) _exit(4);
  char *p = b + (ptrdiff_t)k * (b - a);
  test_report_address(p);
  free(opaque_ptr(p));
}
static void c_never_handed_out(void) { never_handed_out(48, 1); }
static void c_never_handed_out_medium(void) { never_handed_out(400, 11); }

/* The same, of a block another thread allocated from and still owns. */
static void *allocate_two_and_stay(void *arg) {
  char **v = arg;
  v[0] = malloc(48);
  v[1] = malloc(48);
  pause();
  return NULL;
}
static void c_never_handed_out_foreign(void) {
  char *v[2] = {NULL, NULL};
  pthread_t t;
  if (pthread_create(&t, NULL, allocate_two_and_stay, v) != 0) _exit(4);
  usleep(100 * 1000);
  if (!v[0] || !v[1]) _exit(4);
  char *p = v[1] + (v[1] - v[0]);
  test_report_address(p);
  free(opaque_ptr(p));
}

/* A corrupted large-object header (the word just before a freed 6000-byte object) is reported
 * as corruption by the allocation that reuses the object, not later as an invalid pointer. */
static void c_corrupt_large_header(void) {
  char *p = malloc(6000), *guard = malloc(6000);
  if (!p || !guard) _exit(4);
  free(p);
  ((volatile uintptr_t *)p)[-1] ^= 0x100;
  test_report_address(p);
  char *q = malloc(6000);
  if (q) memset(q, 1, 6000);
  free(q);
  free(guard);
}

/* A NUL written one byte past a 6,000-byte object (its chunk fits it exactly, so the byte is
 * the next header's prev_size) is reported as corruption by the free of the next object, from
 * that header alone (its check word covers its prev_size): the chunk before is not read. */
static void c_off_by_one_large(void) {
  char *p = malloc(6000), *next = malloc(6000), *guard = malloc(6000);
  if (!p || !next || !guard) _exit(4);
  memset(p, 'x', 6000);
  ((volatile char *)p)[6000] = 0;
  test_report_address(next);
  free(next);
  free(p);
  free(guard);
}

typedef struct error_case {
  const char *name;
  void (*fn)(void);
  const char *call;    /* the call the message must name */
  const char *what;    /* and this word in it (NULL: any) */
  const char *design;  /* only libraries whose variant starts so (NULL: every one); "!a,b":
                          every library but the variants a and b */
} error_case_t;

static const error_case_t cases[] = {
    {"double_free_small", c_double_free_small, "free()", NULL, NULL},
    {"double_free_medium", c_double_free_medium, "free()", NULL, NULL},
    {"double_free_large", c_double_free_large, "free()", NULL, NULL},
    {"double_free_huge", c_double_free_huge, "free()", "double free", NULL},
    {"double_free_foreign", c_double_free_foreign, "free()", NULL, NULL},
    /* not the bitmap designs: a remote free leaves their bitmap to the owner, who finds the
     * second free when it takes the first back (its next slow path), not at once */
    {"double_free_owner_after_remote", c_double_free_owner_after_remote, "free()", "double free",
     "!phk,phk-hw,phk-sc,vam-bitmap"},
    {"interior_small", c_interior_small, "free()", NULL, NULL},
    {"interior_large", c_interior_large, "free()", NULL, NULL},
    {"free_stack", c_free_stack, "free()", NULL, NULL},
    {"free_mmap", c_free_mmap, "free()", NULL, NULL},
    {"realloc_invalid", c_realloc_invalid, "realloc()", NULL, NULL},
    {"realloc_freed", c_realloc_freed, "realloc()", NULL, NULL},
    {"double_free_tiny_emptied", c_double_free_tiny_emptied, "free()", "double free", NULL},
    {"double_free_tiny", c_double_free_tiny, "free()", "double free", NULL},
    {"double_free_small_emptied", c_double_free_small_emptied, "free()", "double free", NULL},
    /* bump order: the next slot of a fresh block was never handed out */
    {"never_handed_out", c_never_handed_out, "free()", NULL, "vam"},
    {"never_handed_out_medium", c_never_handed_out_medium, "free()", NULL, "vam"},
    {"never_handed_out_foreign", c_never_handed_out_foreign, "free()", NULL, "vam"},
    /* a design with large-object headers: vam's (phk's large objects are page runs) */
    {"corrupt_large_header", c_corrupt_large_header, "malloc()", "corrupt", "vam"},
    {"off_by_one_large", c_off_by_one_large, "free()", "corrupt", "vam"},
};
#define NCASES (sizeof cases / sizeof *cases)

/* Does this line name the call and the address (any 0x... token equal to it)? */
static int line_matches(const char *line, const char *call, uintptr_t addr) {
  if (!strstr(line, call)) return 0;
  for (const char *s = line; (s = strstr(s, "0x")) != NULL; s += 2) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s + 2, &end, 16);
    if (end != s + 2 && errno == 0 && (uintptr_t)v == addr) return 1;
  }
  return 0;
}

static locus_api_t api;

/* Whether variant is one of the comma-separated names in list. */
static int variant_listed(const char *variant, const char *list) {
  size_t n = strlen(variant);
  for (const char *s = list;; s++) {
    size_t len = strcspn(s, ",");
    if (len == n && strncmp(s, variant, n) == 0) return 1;
    s += len;
    if (!*s) return 0;
  }
}

static int run_case(const error_case_t *c, int want_message) {
  if (c->design && c->design[0] == '!' && (!want_message || variant_listed(api.variant(), c->design + 1))) {
    test_note("skip %-20s (not for %s)\n", c->name, want_message ? api.variant() : "this library");
    return 0;
  }
  if (c->design && c->design[0] != '!' && (!want_message || strncmp(api.variant(), c->design, strlen(c->design)) != 0)) {
    test_note("skip %-20s (not a %s design)\n", c->name, c->design);
    return 0;
  }
  test_child_t r;
  test_run_child(c->fn, &r);
  if (r.hung) {
    test_fdprintf(2, "FAIL %-20s the child hung (killed after 20 s)\n", c->name);
    return 1;
  }
  int st = r.status;
  uintptr_t addr = r.addr;
  char *err = r.err;

  /* stderr, one line per line, for the report */
  int lines = 0, matched = 0;
  for (char *s = err; *s;) {
    char *nl = strchr(s, '\n');
    if (nl) *nl = 0;
    if (*s) {
      lines++;
      if (line_matches(s, c->call, addr) && (!want_message || !c->what || strstr(s, c->what))) matched = 1;
    }
    if (!nl) break;
    *nl = '\n';
    s = nl + 1;
  }
  const char *how = r.how;
  const char *first = r.err_len ? err : "(nothing on stderr)";
  int first_len = (int)strcspn(first, "\n");

  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    test_fdprintf(2, "FAIL %-20s not detected: the program went on and exited normally\n",
                  c->name);
    return 1;
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) >= 3 && WEXITSTATUS(st) <= 4 && !r.reported) {
    test_fdprintf(2, "FAIL %-20s the case could not be set up (%s)\n", c->name, how);
    return 1;
  }
  if (want_message) {
    if (!matched || lines != 1) {
      test_fdprintf(2, "FAIL %-20s ended by %s, but stderr is not one line naming %s and "
                    "0x%" PRIxPTR " (%d lines): %.*s\n", c->name, how, c->call, addr, lines,
                    first_len, first);
      return 1;
    }
  }
  test_note("ok   %-20s %s: %.*s\n", c->name, how, first_len, first);
  return 0;
}

static int have_locus;
static const char *case_name(size_t i) { return cases[i].name; }
static int case_run(size_t i) { return run_case(&cases[i], have_locus); }

int main(int argc, char **argv) {
  have_locus = locus_api_require(&api);
  test_note("errors: %s\n", have_locus ? "Locus library: the one-line message is required"
                                       : "no Locus library: abnormal termination is required");
  return test_run_cases(argc, argv, NCASES, case_name, case_run);
}
