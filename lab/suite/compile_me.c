/* compile_me.c — the input of the lab's gcc workload: `gcc -O2 -c compile_me.c -DCOPIES=n`.
 *
 * A few hundred lines of ordinary C (a tokenizer, an expression parser and evaluator, a hash
 * table, a small bytecode VM, sorting and matrix routines). The body below is included
 * COPIES times, each copy with its own name prefix, so the compiler's work (and its
 * allocations: trees, RTL, hash tables, bitmaps) grows with COPIES without a larger file.
 * Nothing is ever run; it only has to compile cleanly.
 */
#ifndef BODY_PREFIX

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef COPIES
#define COPIES 1
#endif

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(BODY_PREFIX, name)

#define BODY_PREFIX c0
#include "compile_me.c"
#undef BODY_PREFIX
#if COPIES > 1
#define BODY_PREFIX c1
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 2
#define BODY_PREFIX c2
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 3
#define BODY_PREFIX c3
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 4
#define BODY_PREFIX c4
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 5
#define BODY_PREFIX c5
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 6
#define BODY_PREFIX c6
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 7
#define BODY_PREFIX c7
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 8
#define BODY_PREFIX c8
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 9
#define BODY_PREFIX c9
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 10
#define BODY_PREFIX c10
#include "compile_me.c"
#undef BODY_PREFIX
#endif
#if COPIES > 11
#define BODY_PREFIX c11
#include "compile_me.c"
#undef BODY_PREFIX
#endif

int compile_me_entry(const char *src, long *out) {
  long v = 0;
  int rc = c0_evaluate(src, &v);
  *out = v;
  return rc;
}

#else /* ---- the body, compiled once per copy ------------------------------------------- */

/* ---- tokens ---- */

enum F(tok_kind) { F(T_END), F(T_NUM), F(T_IDENT), F(T_OP), F(T_LPAREN), F(T_RPAREN) };

struct F(token) {
  enum F(tok_kind) kind;
  long value;
  char text[32];
};

struct F(lexer) {
  const char *src;
  size_t pos;
  struct F(token) cur;
};

static int F(is_ident_char)(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void F(next)(struct F(lexer) *lx) {
  const char *s = lx->src;
  while (s[lx->pos] == ' ' || s[lx->pos] == '\t' || s[lx->pos] == '\n') lx->pos++;
  char c = s[lx->pos];
  memset(&lx->cur, 0, sizeof lx->cur);
  if (c == 0) {
    lx->cur.kind = F(T_END);
  } else if (c >= '0' && c <= '9') {
    long v = 0;
    while (s[lx->pos] >= '0' && s[lx->pos] <= '9') v = v * 10 + (s[lx->pos++] - '0');
    lx->cur.kind = F(T_NUM);
    lx->cur.value = v;
  } else if (F(is_ident_char)(c)) {
    size_t n = 0;
    while (F(is_ident_char)(s[lx->pos]) && n < sizeof lx->cur.text - 1) lx->cur.text[n++] = s[lx->pos++];
    lx->cur.kind = F(T_IDENT);
  } else if (c == '(') {
    lx->cur.kind = F(T_LPAREN);
    lx->pos++;
  } else if (c == ')') {
    lx->cur.kind = F(T_RPAREN);
    lx->pos++;
  } else {
    lx->cur.kind = F(T_OP);
    lx->cur.text[0] = c;
    lx->pos++;
  }
}

/* ---- a hash table of variables ---- */

struct F(entry) {
  char name[32];
  long value;
  struct F(entry) *next;
};

struct F(table) {
  struct F(entry) *buckets[64];
  size_t count;
};

static unsigned F(hash)(const char *s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h;
}

static struct F(entry) *F(lookup)(struct F(table) *t, const char *name, int create) {
  unsigned b = F(hash)(name) & 63;
  for (struct F(entry) *e = t->buckets[b]; e; e = e->next)
    if (strcmp(e->name, name) == 0) return e;
  if (!create) return NULL;
  struct F(entry) *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  strncpy(e->name, name, sizeof e->name - 1);
  e->next = t->buckets[b];
  t->buckets[b] = e;
  t->count++;
  return e;
}

static void F(table_free)(struct F(table) *t) {
  for (int i = 0; i < 64; i++) {
    struct F(entry) *e = t->buckets[i];
    while (e) {
      struct F(entry) *n = e->next;
      free(e);
      e = n;
    }
    t->buckets[i] = NULL;
  }
  t->count = 0;
}

/* ---- expression trees ---- */

struct F(node) {
  char op; /* 0 = number, 'v' = variable, else a binary operator */
  long value;
  char name[32];
  struct F(node) *left, *right;
};

static struct F(node) *F(mk)(char op, struct F(node) *l, struct F(node) *r) {
  struct F(node) *n = calloc(1, sizeof *n);
  if (!n) return NULL;
  n->op = op;
  n->left = l;
  n->right = r;
  return n;
}

static void F(node_free)(struct F(node) *n) {
  if (!n) return;
  F(node_free)(n->left);
  F(node_free)(n->right);
  free(n);
}

static struct F(node) *F(parse_expr)(struct F(lexer) *lx, int min_prec);

static int F(prec)(char op) {
  switch (op) {
  case '|': return 1;
  case '^': return 2;
  case '&': return 3;
  case '+': case '-': return 4;
  case '*': case '/': case '%': return 5;
  default: return 0;
  }
}

static struct F(node) *F(parse_primary)(struct F(lexer) *lx) {
  struct F(node) *n = NULL;
  if (lx->cur.kind == F(T_NUM)) {
    n = F(mk)(0, NULL, NULL);
    if (n) n->value = lx->cur.value;
    F(next)(lx);
  } else if (lx->cur.kind == F(T_IDENT)) {
    n = F(mk)('v', NULL, NULL);
    if (n) memcpy(n->name, lx->cur.text, sizeof n->name);
    F(next)(lx);
  } else if (lx->cur.kind == F(T_LPAREN)) {
    F(next)(lx);
    n = F(parse_expr)(lx, 1);
    if (lx->cur.kind == F(T_RPAREN)) F(next)(lx);
  } else if (lx->cur.kind == F(T_OP) && lx->cur.text[0] == '-') {
    F(next)(lx);
    n = F(mk)('-', F(mk)(0, NULL, NULL), F(parse_primary)(lx));
  }
  return n;
}

static struct F(node) *F(parse_expr)(struct F(lexer) *lx, int min_prec) {
  struct F(node) *left = F(parse_primary)(lx);
  while (lx->cur.kind == F(T_OP) && F(prec)(lx->cur.text[0]) >= min_prec) {
    char op = lx->cur.text[0];
    F(next)(lx);
    struct F(node) *right = F(parse_expr)(lx, F(prec)(op) + 1);
    left = F(mk)(op, left, right);
  }
  return left;
}

static long F(eval)(const struct F(node) *n, struct F(table) *vars) {
  if (!n) return 0;
  if (n->op == 0) return n->value;
  if (n->op == 'v') {
    struct F(entry) *e = F(lookup)(vars, n->name, 0);
    return e ? e->value : 0;
  }
  long a = F(eval)(n->left, vars), b = F(eval)(n->right, vars);
  switch (n->op) {
  case '+': return a + b;
  case '-': return a - b;
  case '*': return a * b;
  case '/': return b ? a / b : 0;
  case '%': return b ? a % b : 0;
  case '&': return a & b;
  case '|': return a | b;
  case '^': return a ^ b;
  default: return 0;
  }
}

/* ---- a bytecode compiler and VM for the same trees ---- */

enum F(opcode) { F(OP_PUSH), F(OP_LOAD), F(OP_BIN), F(OP_HALT) };

struct F(insn) {
  enum F(opcode) code;
  long arg;
  char op;
  const char *name;
};

struct F(program) {
  struct F(insn) *code;
  size_t len, cap;
};

static int F(emit)(struct F(program) *p, struct F(insn) in) {
  if (p->len == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    struct F(insn) *c = realloc(p->code, cap * sizeof *c);
    if (!c) return -1;
    p->code = c;
    p->cap = cap;
  }
  p->code[p->len++] = in;
  return 0;
}

static int F(compile)(const struct F(node) *n, struct F(program) *p) {
  if (!n) return F(emit)(p, (struct F(insn)){F(OP_PUSH), 0, 0, NULL});
  if (n->op == 0) return F(emit)(p, (struct F(insn)){F(OP_PUSH), n->value, 0, NULL});
  if (n->op == 'v') return F(emit)(p, (struct F(insn)){F(OP_LOAD), 0, 0, n->name});
  if (F(compile)(n->left, p) || F(compile)(n->right, p)) return -1;
  return F(emit)(p, (struct F(insn)){F(OP_BIN), 0, n->op, NULL});
}

static long F(run)(const struct F(program) *p, struct F(table) *vars) {
  long stack[256];
  size_t sp = 0;
  for (size_t pc = 0; pc < p->len; pc++) {
    const struct F(insn) *in = &p->code[pc];
    switch (in->code) {
    case F(OP_PUSH):
      if (sp < 256) stack[sp++] = in->arg;
      break;
    case F(OP_LOAD): {
      struct F(entry) *e = F(lookup)(vars, in->name, 0);
      if (sp < 256) stack[sp++] = e ? e->value : 0;
      break;
    }
    case F(OP_BIN): {
      if (sp < 2) return 0;
      long b = stack[--sp], a = stack[--sp], r = 0;
      switch (in->op) {
      case '+': r = a + b; break;
      case '-': r = a - b; break;
      case '*': r = a * b; break;
      case '/': r = b ? a / b : 0; break;
      case '%': r = b ? a % b : 0; break;
      case '&': r = a & b; break;
      case '|': r = a | b; break;
      case '^': r = a ^ b; break;
      }
      stack[sp++] = r;
      break;
    }
    case F(OP_HALT):
      return sp ? stack[sp - 1] : 0;
    }
  }
  return sp ? stack[sp - 1] : 0;
}

/* ---- numeric helpers: sorting and matrices ---- */

static void F(sort)(long *a, size_t n) {
  if (n < 2) return;
  if (n < 16) {
    for (size_t i = 1; i < n; i++) {
      long v = a[i];
      size_t j = i;
      while (j > 0 && a[j - 1] > v) { a[j] = a[j - 1]; j--; }
      a[j] = v;
    }
    return;
  }
  long pivot = a[n / 2];
  size_t i = 0, j = n - 1;
  for (;;) {
    while (a[i] < pivot) i++;
    while (a[j] > pivot) j--;
    if (i >= j) break;
    long t = a[i]; a[i] = a[j]; a[j] = t;
    i++; j--;
  }
  F(sort)(a, j + 1);
  F(sort)(a + j + 1, n - j - 1);
}

static void F(matmul)(const double *a, const double *b, double *c, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
      c[i * n + j] = s;
    }
}

static double F(det)(double *m, int n) {
  double d = 1;
  for (int c = 0; c < n; c++) {
    int p = c;
    for (int r = c + 1; r < n; r++)
      if ((m[r * n + c] < 0 ? -m[r * n + c] : m[r * n + c]) > (m[p * n + c] < 0 ? -m[p * n + c] : m[p * n + c])) p = r;
    if (m[p * n + c] == 0) return 0;
    if (p != c) {
      for (int k = 0; k < n; k++) { double t = m[c * n + k]; m[c * n + k] = m[p * n + k]; m[p * n + k] = t; }
      d = -d;
    }
    d *= m[c * n + c];
    for (int r = c + 1; r < n; r++) {
      double f = m[r * n + c] / m[c * n + c];
      for (int k = c; k < n; k++) m[r * n + k] -= f * m[c * n + k];
    }
  }
  return d;
}

/* ---- the entry point of this copy ---- */

int F(evaluate)(const char *src, long *out) {
  struct F(table) vars = {{0}, 0};
  struct F(lexer) lx = {src, 0, {0, 0, {0}}};
  const char *names[] = {"x", "y", "z", "w"};
  for (int i = 0; i < 4; i++) {
    struct F(entry) *e = F(lookup)(&vars, names[i], 1);
    if (e) e->value = (long)(i + 1) * 7;
  }
  F(next)(&lx);
  struct F(node) *tree = F(parse_expr)(&lx, 1);
  struct F(program) prog = {NULL, 0, 0};
  int rc = F(compile)(tree, &prog);
  long a = F(eval)(tree, &vars), b = rc ? 0 : F(run)(&prog, &vars);
  long sorted[32];
  for (int i = 0; i < 32; i++) sorted[i] = (a * (i + 3)) ^ (b + i);
  F(sort)(sorted, 32);
  double m[16], n2[16], p[16];
  for (int i = 0; i < 16; i++) { m[i] = (double)(sorted[i] % 17); n2[i] = (double)(i % 5); }
  F(matmul)(m, n2, p, 4);
  *out = a + b + (long)F(det)(p, 4);
  free(prog.code);
  F(node_free)(tree);
  F(table_free)(&vars);
  return a == b ? 0 : 1;
}

#endif
