/* options.h — LOCUS_* environment options, read once at start-up without allocating.
 *
 * One X-macro table: name, kind, default, help. The README's option table mirrors it. */
#ifndef LOCUS_OPTIONS_H
#define LOCUS_OPTIONS_H

#include <fcntl.h>

enum discard_policy { DISCARD_IMMEDIATE, DISCARD_DELAYED, DISCARD_PRESSURE };

/* kind: B = on/off, N = number, S = size (K/M/G suffixes), P = discard policy */
#define LOCUS_OPTIONS(X) \
  X(VERBOSE,    verbose,    B, 0, "print library, version, variant and options at start-up") \
  X(STATS,      stats,      B, 0, "print statistics at exit") \
  X(DISCARD,    discard,    P, DISCARD_DELAYED, "when free pages go back to the OS: immediate|delayed|pressure") \
  X(DECAY_MS,   decay_ms,   N, 100, "delayed: discard free pages idle this long (ms)") \
  X(DIRTY_MAX,  dirty_max,  S, 32u << 20, "delayed: most free-but-undiscarded bytes a heap keeps") \
  X(PRESSURE_PCT, pressure_pct, N, 10, "pressure: discard when available memory falls below this %") \
  X(OS_THRESHOLD, os_threshold, S, 1u << 20, "objects at least this big get their own mapping") \
  X(HUGE_CACHE, huge_cache, S, 256u << 20, "most bytes of freed own-mapping objects kept for reuse (within recent demand)") \
  X(TCACHE,     tcache,     B, 1, "vam: each thread keeps its last freed small objects per class for its next mallocs") \
  X(TCACHE_GROW, tcache_grow, S, 1u << 20, "vam: bytes a thread's cache may grow by where bursts overflow it (0: never)") \
  X(CHECK_EVERY, check_every, N, 0, "debug builds: check the heap every N slow-path events (0: default)") \
  X(TP_K,       tp_k,       N, 12, "tp: K-regions of objects up to 512 B are 2^K bytes (7..16)") \
  X(MEDIUS_K,   medius_k,   N, 12, "medius: a K-region is 2^K bytes (12..20, at least the page)") \
  X(LF_THRESHOLD, lf_threshold, N, 100, "lf: allocations of one (call site, size) before it gets a custom bin") \
  X(LF_OPT,     lf_opt,     B, 1, "lf: a site that crossed the threshold gets custom bins for new sizes at once") \
  X(SITES,      sites,      B, 0, "count allocations per call site; print the top sites at exit (LOCUS_SITES_FILE: JSON too)")

/* Options whose value must lie in a range: a value outside it is a bad value (kept default). */
#define LOCUS_OPTION_RANGES(X) \
  X(tp_k, 7, 16) \
  X(medius_k, 12, 20)

typedef struct options {
#define X(NAME, field, kind, def, help) uint64_t field;
  LOCUS_OPTIONS(X)
#undef X
} options_t;

static options_t opt = {
#define X(NAME, field, kind, def, help) .field = (def),
  LOCUS_OPTIONS(X)
#undef X
};

static const char *const policy_names[] = { "immediate", "delayed", "pressure" };

static bool parse_number(const char *s, uint64_t *out, bool size) {
  uint64_t v = 0;
  if (*s < '0' || *s > '9') return false;
  while (*s >= '0' && *s <= '9') v = v * 10 + (uint64_t)(*s++ - '0');
  if (size && *s) {
    switch (*s | 0x20) {
      case 'k': v <<= 10; break;
      case 'm': v <<= 20; break;
      case 'g': v <<= 30; break;
      default: return false;
    }
    s++;
    if ((*s | 0x20) == 'i') s++;
    if ((*s | 0x20) == 'b') s++;
  }
  *out = v;
  return *s == 0;
}

static bool parse_option(char kind, const char *val, uint64_t *out) {
  switch (kind) {
    case 'B':
      if (!strcmp(val, "1") || !strcmp(val, "on") || !strcmp(val, "yes") || !strcmp(val, "true")) { *out = 1; return true; }
      if (!strcmp(val, "0") || !strcmp(val, "off") || !strcmp(val, "no") || !strcmp(val, "false") || !*val) { *out = 0; return true; }
      return false;
    case 'N': return parse_number(val, out, false);
    case 'S': return parse_number(val, out, true);
    case 'P':
      for (uint64_t i = 0; i < 3; i++) if (!strcmp(val, policy_names[i])) { *out = i; return true; }
      return false;
  }
  return false;
}

static bool option_in_range(const uint64_t *f, uint64_t v) {
#define X(field, lo, hi) if (f == &opt.field && (v < (lo) || v > (hi))) return false;
  LOCUS_OPTION_RANGES(X)
#undef X
  return true;
}

/* Handles one "NAME=value" string; ignores everything not starting with LOCUS_. */
static void option_apply(const char *entry) {
  if (strncmp(entry, "LOCUS_", 6)) return;
  const char *name = entry + 6, *eq = strchr(name, '=');
  if (!eq) return;
  size_t n = (size_t)(eq - name);
#define X(NAME, field, kind, def, help) \
  if (n == sizeof(#NAME) - 1 && !strncmp(name, #NAME, n)) { \
    uint64_t v; \
    if (parse_option(#kind[0], eq + 1, &v) && option_in_range(&opt.field, v)) opt.field = v; \
    else locus_printf(2, "locus: warning: bad value for LOCUS_%s: '%s' (kept default)\n", #NAME, eq + 1); \
    return; \
  }
  LOCUS_OPTIONS(X)
#undef X
  /* Names the lab or test harness set for their own use are not ours to warn about. */
  if (!strncmp(name, "TEST_", 5) || !strncmp(name, "LAB_", 4)) return;
  char shown[64];
  size_t k = n < sizeof shown - 1 ? n : sizeof shown - 1;
  memcpy(shown, name, k);
  shown[k] = 0;
  locus_printf(2, "locus: warning: unknown option LOCUS_%s ignored\n", shown);
}

extern char **environ;

/* Reads the environment once. `environ` is normally set before the first allocation; when it
 * is not (very early loader calls), /proc/self/environ gives the same initial environment. */
static void options_init(void) {
  if (environ) {
    for (char **e = environ; *e; e++) option_apply(*e);
    return;
  }
  int fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char buf[16384];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  for (char *e = buf; e < buf + n; e += strlen(e) + 1) option_apply(e);
}

static void options_print(outbuf_t *o, bool json) {
  const char *sep = "";
#define X(NAME, field, kind, def, help) \
  if (json) { out_fmt(o, "%s\"%s\": ", sep, #field); sep = ", "; \
    if (#kind[0] == 'P') out_fmt(o, "\"%s\"", policy_names[opt.field]); else out_fmt(o, "%lu", opt.field); } \
  else if (#kind[0] == 'P') out_fmt(o, "locus:   LOCUS_%s=%s\n", #NAME, policy_names[opt.field]); \
  else out_fmt(o, "locus:   LOCUS_%s=%lu\n", #NAME, opt.field);
  LOCUS_OPTIONS(X)
#undef X
}

#endif
