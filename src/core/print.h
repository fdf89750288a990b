/* print.h — formatted output without the C library's allocator (stdio may call malloc).
 * Everything Locus prints goes through here: options, statistics, error reports. */
#ifndef LOCUS_PRINT_H
#define LOCUS_PRINT_H

#include <stdarg.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <signal.h>
#include <stdlib.h>

/* A bounded output buffer. Writers never overflow; `need` counts what the full text needs. */
typedef struct outbuf { char *buf; size_t len, pos, need; int fd; } outbuf_t;

/* The raw system call, not write(): write is a thread-cancellation point, and malloc_stats()
 * (like everything the allocator prints) must not be one; glibc's is not. */
static void out_flush(outbuf_t *o) {
  if (o->fd < 0 || o->pos == 0) return;
  size_t done = 0;
  while (done < o->pos) {
    ssize_t w = syscall(SYS_write, o->fd, o->buf + done, o->pos - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  o->pos = 0;
}

static void out_char(outbuf_t *o, char c) {
  o->need++;
  if (o->pos + 1 >= o->len) out_flush(o);
  if (o->pos + 1 < o->len) o->buf[o->pos++] = c;
}

static void out_str(outbuf_t *o, const char *s) { while (*s) out_char(o, *s++); }

static void out_uint(outbuf_t *o, uint64_t v, unsigned base, int width) {
  char tmp[24]; int n = 0;
  do { tmp[n++] = "0123456789abcdef"[v % base]; v /= base; } while (v);
  while (n < width) tmp[n++] = ' ';
  while (n) out_char(o, tmp[--n]);
}

/* Supports %s %d %u %zu %lu %llu %x %zx %lx %p %c %%, and a decimal width (%8zu). */
static void out_vfmt(outbuf_t *o, const char *f, va_list ap) {
  for (; *f; f++) {
    if (*f != '%') { out_char(o, *f); continue; }
    f++;
    int width = 0;
    while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
    int longs = 0;
    while (*f == 'l' || *f == 'z') { longs++; f++; }
    switch (*f) {
      case 's': { const char *s = va_arg(ap, const char *); s = s ? s : "(null)";
                  int n = (int)strlen(s); out_str(o, s); while (n++ < width) out_char(o, ' '); break; }
      case 'c': out_char(o, (char)va_arg(ap, int)); break;
      case 'd': { int64_t v = longs ? va_arg(ap, long) : va_arg(ap, int);
                  if (v < 0) { out_char(o, '-'); v = -v; } out_uint(o, (uint64_t)v, 10, width); break; }
      case 'u': out_uint(o, longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned), 10, width); break;
      case 'x': out_uint(o, longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned), 16, width); break;
      case 'p': out_str(o, "0x"); out_uint(o, (uintptr_t)va_arg(ap, void *), 16, 0); break;
      case '%': out_char(o, '%'); break;
      default: out_char(o, '?'); break;
    }
  }
}

static void out_fmt(outbuf_t *o, const char *f, ...) {
  va_list ap; va_start(ap, f); out_vfmt(o, f, ap); va_end(ap);
}

static void locus_printf(int fd, const char *f, ...) {
  char buf[512]; outbuf_t o = { buf, sizeof buf, 0, 0, fd };
  va_list ap; va_start(ap, f); out_vfmt(&o, f, ap); va_end(ap);
  out_flush(&o);
}

/* Misuse of the allocator (invalid or double free): one line naming the call and the address,
 * then abort, as glibc does. Never returns. */
COLD __attribute__((noreturn)) static void locus_fatal(const char *call, const char *what, const void *p) {
  locus_printf(2, "locus: %s: %s %p\n", call, what, p);
  abort();
}

/* locus_fatal for fast paths: `{ locus_fatal_jump(...); return; }` compiles to a jump, where a
 * call of a noreturn function would make the caller set up a stack frame for the call. */
COLD NOINLINE __attribute__((noipa)) static void locus_fatal_jump(const char *call, const char *what, const void *p) {
  locus_fatal(call, what, p);
}

COLD __attribute__((noreturn, unused)) static void locus_assert_fail(const char *c, const char *file, int line) {
  locus_printf(2, "locus: internal assertion failed: %s (%s:%d)\n", c, file, line);
  abort();
}

/* Debug builds' assertion (ASSERT) and walks of whole structures (CHECK, internal.h). */
#if LOCUS_DEBUG
#define ASSERT(c) ((c) ? (void)0 : locus_assert_fail(#c, __FILE__, __LINE__))
#else
#define ASSERT(c) ((void)0)
#endif

#endif
