/* locus-hwcost — the hardware cost model of seed 003 (Li, Mohanty & Kavi, "A Page-based
 * Hybrid (Software-Hardware) Dynamic Memory Allocator"), Table I, from its formulas.
 *
 * Two designs search an allocation bitmap in hardware with an OR-tree (is anything free?) and
 * an AND-tree (where is the first free unit?):
 *  - the hybrid unit: one OR-tree and one AND-tree per small object size, each over the
 *    bitmap of ONE page (P/size leaves); the sizes are the powers of two from the smallest
 *    object S up to half a page. Its cost depends on P and S only.
 *  - Chang & Gehringer's allocator: one OR-tree and one AND-tree over the bitmap of the WHOLE
 *    memory (M/S leaves), joined by an interconnection network that feeds the OR-tree's
 *    levels into the AND-tree. Its cost grows with M.
 * All trees are binary trees of two-input gates: n leaves need n - 1 gates and lg n levels;
 * one level is one gate delay. See docs/hwcost.md for the formulas and how the paper's
 * figures (502 + 502 gates and 16 delays; height 27 and 108 delays) follow from them.
 *
 * usage: locus-hwcost [--page BYTES] [--min-object BYTES] [--memory SIZE] [--json]
 * Sizes accept K, M, G, T suffixes (binary: 2G = 2^31), optionally followed by B or iB.
 * Exit status: 0 on success, 2 on bad usage (one line on stderr).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "locus-hwcost"

/* Limits keep every product below 2^64: leaves <= 2^56, gates <= leaves * height < 2^62. */
#define MAX_BYTES ((uint64_t)1 << 56)

typedef struct {
  uint64_t page, min_object, memory;
  int json;
} options;

/* One object size of the hybrid unit: a tree pair over the bitmap of one page. */
typedef struct {
  uint64_t object_bytes;
  uint64_t leaves;          /* chunks per page = P / size: one bitmap bit each */
  unsigned height;          /* lg(leaves): levels of two-input gates */
  uint64_t or_gates;        /* leaves - 1 */
  uint64_t and_gates;       /* leaves - 1 */
  unsigned delay;           /* OR-tree + AND-tree = 2 * height */
} hybrid_size;

typedef struct {
  hybrid_size size[64];
  unsigned nsizes;
  uint64_t or_gates, and_gates, bitmap_bits;
  unsigned or_delay, and_delay, delay;      /* of the tallest tree pair (smallest object) */
} hybrid_cost;

typedef struct {
  uint64_t leaves;          /* M / S */
  unsigned height;          /* lg(M / S) */
  uint64_t or_gates, and_gates, interconnect_gates, total_gates;
  unsigned or_delay, interconnect_delay, and_delay, delay;
} chang_cost;

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [--page BYTES] [--min-object BYTES] [--memory SIZE] [--json]\n"
          "  --page BYTES        page size P (power of two, default 4096)\n"
          "  --min-object BYTES  smallest object S (power of two, < P, default 16)\n"
          "  --memory SIZE       memory M managed by Chang's design (power of two, > P,\n"
          "                      default 2G)\n"
          "  --json              machine-readable output\n"
          "Sizes accept K, M, G, T suffixes (powers of 1024), optionally followed by B or iB.\n");
}

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, PROG ": ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static int is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

static unsigned lg(uint64_t v) {          /* v a power of two */
  unsigned k = 0;
  while (v > 1) {
    v >>= 1;
    k++;
  }
  return k;
}

/* Parses "4096", "8K", "2G", "2GiB", "64kb". Returns 0 on a malformed or too large value. */
static int parse_size(const char *s, uint64_t *out) {
  if (*s < '0' || *s > '9') return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return 0;
  unsigned shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
  }
  if (shift != 0 && (end[0] == 'i' || end[0] == 'I') && (end[1] == 'b' || end[1] == 'B'))
    end += 2;
  else if (*end == 'b' || *end == 'B')
    end++;
  if (*end != '\0') return 0;
  if (v > (MAX_BYTES >> shift)) return 0;
  *out = (uint64_t)v << shift;
  return 1;
}

static options parse_args(int argc, char **argv) {
  options o = {.page = 4096, .min_object = 16, .memory = (uint64_t)2 << 30, .json = 0};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--json") == 0) {
      o.json = 1;
      continue;
    }
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    static const char *const names[] = {"--page", "--min-object", "--memory"};
    uint64_t *dest[] = {&o.page, &o.min_object, &o.memory};
    int matched = 0;
    for (int k = 0; k < 3 && !matched; k++) {
      size_t len = strlen(names[k]);
      if (strncmp(arg, names[k], len) != 0) continue;
      const char *val;
      if (arg[len] == '=') {
        val = arg + len + 1;
      } else if (arg[len] == '\0') {
        if (i + 1 >= argc) fail("%s needs a value", names[k]);
        val = argv[++i];
      } else {
        continue;
      }
      if (!parse_size(val, dest[k]))
        fail("%s: bad size '%s' (bytes, optionally with K/M/G/T; at most 2^56)", names[k], val);
      matched = 1;
    }
    if (!matched) fail("unknown argument '%s' (try --help)", arg);
  }
  if (!is_pow2(o.page))
    fail("--page must be a power of two (got %llu)", (unsigned long long)o.page);
  if (!is_pow2(o.min_object))
    fail("--min-object must be a power of two (got %llu)", (unsigned long long)o.min_object);
  if (!is_pow2(o.memory))
    fail("--memory must be a power of two (got %llu)", (unsigned long long)o.memory);
  if (o.min_object >= o.page)
    fail("--min-object (%llu) must be smaller than --page (%llu)",
         (unsigned long long)o.min_object, (unsigned long long)o.page);
  if (o.memory <= o.page)
    fail("--memory (%llu) must be larger than --page (%llu)", (unsigned long long)o.memory,
         (unsigned long long)o.page);
  return o;
}

/* The hybrid unit: for each size s = S, 2S, ..., P/2 a pair of trees over P/s bitmap bits.
 * The pairs work in parallel (a multiplexer picks the one for the request's size), so the
 * critical path is that of the tallest pair: the OR-tree then the AND-tree of the smallest
 * size, lg(P/S) levels each. */
static hybrid_cost hybrid_model(uint64_t P, uint64_t S) {
  hybrid_cost h = {0};
  for (uint64_t s = S; s <= P / 2; s *= 2) {
    hybrid_size *z = &h.size[h.nsizes++];
    z->object_bytes = s;
    z->leaves = P / s;
    z->height = lg(z->leaves);
    z->or_gates = z->leaves - 1;
    z->and_gates = z->leaves - 1;
    z->delay = 2 * z->height;
    h.or_gates += z->or_gates;
    h.and_gates += z->and_gates;
    h.bitmap_bits += z->leaves;
    if (z->height > h.or_delay) h.or_delay = h.and_delay = z->height;
  }
  h.delay = h.or_delay + h.and_delay;
  return h;
}

/* Chang's design: trees over all M/S units of memory. The paper gives
 *   D = D_OR-tree + D_Interconnection + D_AND-tree,
 * with D_OR-tree = D_AND-tree = lg(M/S) (one gate level per tree level), and says the
 * interconnection "has the same critical path delay as the OR-tree and the AND-tree": it is
 * read as both together, D_Interconnection = D_OR-tree + D_AND-tree (see docs/hwcost.md),
 * which gives 4 lg(M/S), the paper's 108 for height 27. The interconnection's gate count is
 * given only as O((M/S) lg(M/S)); we count (M/S) lg(M/S), one gate per leaf per level. */
static chang_cost chang_model(uint64_t M, uint64_t S) {
  chang_cost c = {0};
  c.leaves = M / S;
  c.height = lg(c.leaves);
  c.or_gates = c.leaves - 1;
  c.and_gates = c.leaves - 1;
  c.interconnect_gates = c.leaves * c.height;
  c.total_gates = c.or_gates + c.and_gates + c.interconnect_gates;
  c.or_delay = c.height;
  c.and_delay = c.height;
  c.interconnect_delay = c.or_delay + c.and_delay;
  c.delay = c.or_delay + c.interconnect_delay + c.and_delay;
  return c;
}

/* "2 GiB" when exact in a binary unit, else plain bytes. */
static const char *human_bytes(uint64_t v, char *buf, size_t n) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (u < 6 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    u++;
  }
  snprintf(buf, n, "%llu %s", (unsigned long long)v, unit[u]);
  return buf;
}

/* 3892314110 -> "3.89 billion" (decimal, for reading gate counts at a glance). */
static const char *human_count(uint64_t v, char *buf, size_t n) {
  if (v >= 1000000000ull)
    snprintf(buf, n, "%.2f billion", (double)v / 1e9);
  else if (v >= 1000000ull)
    snprintf(buf, n, "%.1f million", (double)v / 1e6);
  else
    snprintf(buf, n, "%llu", (unsigned long long)v);
  return buf;
}

static void print_text(const options *o, const hybrid_cost *h, const chang_cost *c) {
  char b1[64], b2[64];
  printf("Hybrid per-page OR/AND trees (seed 003, section III): page P = %llu B, "
         "smallest object S = %llu B\n",
         (unsigned long long)o->page, (unsigned long long)o->min_object);
  printf("  %10s %12s %7s %10s %10s %15s\n", "object_B", "chunks/page", "height", "OR_gates",
         "AND_gates", "delay(OR+AND)");
  for (unsigned i = 0; i < h->nsizes; i++) {
    const hybrid_size *z = &h->size[i];
    printf("  %10llu %12llu %7u %10llu %10llu %15u\n", (unsigned long long)z->object_bytes,
           (unsigned long long)z->leaves, z->height, (unsigned long long)z->or_gates,
           (unsigned long long)z->and_gates, z->delay);
  }
  printf("  object sizes: %u (%llu..%llu B)\n", h->nsizes, (unsigned long long)o->min_object,
         (unsigned long long)(o->page / 2));
  printf("  gates: %llu AND + %llu OR = %llu (bitmap latches: %llu bits)\n",
         (unsigned long long)h->and_gates, (unsigned long long)h->or_gates,
         (unsigned long long)(h->and_gates + h->or_gates), (unsigned long long)h->bitmap_bits);
  printf("  tree height lg(P/S): %u\n", h->or_delay);
  printf("  critical path: %u gate delays (OR-tree %u + AND-tree %u)\n", h->delay, h->or_delay,
         h->and_delay);
  printf("\n");
  printf("Chang's whole-memory trees (seed 003, sections II and IV): memory M = %s (%llu B)\n",
         human_bytes(o->memory, b1, sizeof b1), (unsigned long long)o->memory);
  printf("  leaves M/S: %llu (2^%u)\n", (unsigned long long)c->leaves, c->height);
  printf("  tree height lg(M/S): %u\n", c->height);
  printf("  gates: OR-tree %llu + AND-tree %llu + interconnection %llu [(M/S) lg(M/S)]\n",
         (unsigned long long)c->or_gates, (unsigned long long)c->and_gates,
         (unsigned long long)c->interconnect_gates);
  printf("  gates total: %llu (%s; trees alone %s)\n", (unsigned long long)c->total_gates,
         human_count(c->total_gates, b1, sizeof b1),
         human_count(c->or_gates + c->and_gates, b2, sizeof b2));
  printf("  critical path: %u gate delays (OR-tree %u + interconnection %u + AND-tree %u)\n",
         c->delay, c->or_delay, c->interconnect_delay, c->and_delay);
  printf("\n");
  printf("Chang / hybrid: %.0fx the gates, %.2fx the critical path\n",
         (double)c->total_gates / (double)(h->and_gates + h->or_gates),
         (double)c->delay / (double)h->delay);
}

static void print_json(const options *o, const hybrid_cost *h, const chang_cost *c) {
  printf("{\n");
  printf("  \"page_bytes\": %llu,\n", (unsigned long long)o->page);
  printf("  \"min_object_bytes\": %llu,\n", (unsigned long long)o->min_object);
  printf("  \"memory_bytes\": %llu,\n", (unsigned long long)o->memory);
  printf("  \"hybrid\": {\n");
  printf("    \"sizes\": [\n");
  for (unsigned i = 0; i < h->nsizes; i++) {
    const hybrid_size *z = &h->size[i];
    printf("      {\"object_bytes\": %llu, \"chunks_per_page\": %llu, \"tree_height\": %u, "
           "\"or_gates\": %llu, \"and_gates\": %llu, \"delay\": %u}%s\n",
           (unsigned long long)z->object_bytes, (unsigned long long)z->leaves, z->height,
           (unsigned long long)z->or_gates, (unsigned long long)z->and_gates, z->delay,
           i + 1 < h->nsizes ? "," : "");
  }
  printf("    ],\n");
  printf("    \"size_count\": %u,\n", h->nsizes);
  printf("    \"and_gates\": %llu,\n", (unsigned long long)h->and_gates);
  printf("    \"or_gates\": %llu,\n", (unsigned long long)h->or_gates);
  printf("    \"total_gates\": %llu,\n", (unsigned long long)(h->and_gates + h->or_gates));
  printf("    \"bitmap_bits\": %llu,\n", (unsigned long long)h->bitmap_bits);
  printf("    \"tree_height\": %u,\n", h->or_delay);
  printf("    \"critical_path\": {\"or_tree\": %u, \"and_tree\": %u, \"total\": %u}\n",
         h->or_delay, h->and_delay, h->delay);
  printf("  },\n");
  printf("  \"chang\": {\n");
  printf("    \"leaves\": %llu,\n", (unsigned long long)c->leaves);
  printf("    \"tree_height\": %u,\n", c->height);
  printf("    \"or_gates\": %llu,\n", (unsigned long long)c->or_gates);
  printf("    \"and_gates\": %llu,\n", (unsigned long long)c->and_gates);
  printf("    \"interconnect_gates\": %llu,\n", (unsigned long long)c->interconnect_gates);
  printf("    \"total_gates\": %llu,\n", (unsigned long long)c->total_gates);
  printf("    \"critical_path\": {\"or_tree\": %u, \"interconnection\": %u, \"and_tree\": %u, "
         "\"total\": %u}\n", c->or_delay, c->interconnect_delay, c->and_delay, c->delay);
  printf("  },\n");
  printf("  \"ratio\": {\"gates\": %.1f, \"critical_path\": %.4f}\n",
         (double)c->total_gates / (double)(h->and_gates + h->or_gates),
         (double)c->delay / (double)h->delay);
  printf("}\n");
}

int main(int argc, char **argv) {
  options o = parse_args(argc, argv);
  hybrid_cost h = hybrid_model(o.page, o.min_object);
  chang_cost c = chang_model(o.memory, o.min_object);
  if (o.json)
    print_json(&o, &h, &c);
  else
    print_text(&o, &h, &c);
  return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
