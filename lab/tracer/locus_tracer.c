/* locus_tracer.c — an LD_PRELOAD library that records every malloc-family call.
 *
 *   LOCUS_TRACE_FILE=out.trace LD_PRELOAD=liblocus_tracer.so program ...
 *
 * Every call is forwarded to whatever allocator is underneath (the next definition in the
 * lookup order: glibc, or a library preloaded after this one) and recorded as a 24-byte
 * record in a per-thread buffer that is written to the trace file with write(2) when full,
 * when the thread exits and when the process exits. The format is docs/trace-format.md.
 *
 * Environment:
 *   LOCUS_TRACE_FILE  output path; unset or empty: forward only, record nothing.
 *   LOCUS_TRACE_MODE  "events" (default): the binary event trace;
 *                     "summary": no events, only a few totals written at exit (peak live
 *                     bytes requested, peak objects, ...), for the fragmentation runs.
 *
 * Invariants that keep the tracer out of the measurement:
 *   - it never allocates through malloc: buffers and tables come from mmap, and the
 *     allocations dlsym makes while we resolve the real functions are served from a static
 *     bootstrap arena;
 *   - it adds nothing to objects (no headers), so the allocator underneath sees exactly the
 *     program's requests;
 *   - a per-thread "busy" flag makes calls the allocator or libstdc++ make internally while
 *     serving a call (operator new -> malloc, an allocator's calloc -> malloc) pass through
 *     unrecorded, so each program call is recorded once, at the outermost entry point.
 *
 * Processes: the first process opens LOCUS_TRACE_FILE with O_EXCL (the caller removes it
 * first); any other process that finds it taken (an exec'd child) writes FILE.<pid>; a forked
 * child drops the parent's unflushed records and writes FILE.<pid> too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- the file format (docs/trace-format.md) ---------------------------------------------- */

#define TRACE_MAGIC "LOCUSTRC"
#define TRACE_VERSION 1u
#define BYTE_ORDER_MARK 0x01020304u

struct trace_header {   /* 80 bytes, all fields little-endian on x86-64/aarch64 */
  char magic[8];        /* "LOCUSTRC" */
  uint32_t version;     /* 1 */
  uint32_t header_size; /* 80: records start here */
  uint32_t record_size; /* 24 */
  uint32_t byte_order;  /* 0x01020304 as written by the tracing machine */
  uint64_t pid;
  uint64_t ppid;
  uint64_t start_ns;    /* CLOCK_REALTIME when the file was opened */
  uint64_t page_size;
  uint64_t flags;       /* 0 */
  char comm[16];        /* the process name (/proc/self/comm), NUL-padded */
};
_Static_assert(sizeof(struct trace_header) == 80, "header layout");

/* A record is three little-endian 64-bit words (24 bytes):
 *   clock    bits 0-47: seq, the event clock (a total order of events across threads)
 *            bits 48-63: thread, the tracer's index of the calling thread
 *   block    bits 0-47: address returned (allocations) or released (frees); 0 = failed
 *            bits 48-55: op; bits 56-63: aux, log2(alignment) of aligned requests, else 0
 *   request  bits 0-39: bytes requested (calloc: n*size), saturated at 2^40-1
 *            bits 40-63: site, the call-site id (24 bits)
 * Packing keeps records small: writing them is most of the tracer's cost. */
struct trace_record { uint64_t clock, block, request; };
_Static_assert(sizeof(struct trace_record) == 24, "record layout");

#define SEQ_BITS 48
#define ADDR_MASK ((UINT64_C(1) << 48) - 1)
#define SIZE_MAX40 ((UINT64_C(1) << 40) - 1)

static inline struct trace_record pack(uint64_t seq, uint16_t thread, uint8_t op, uint8_t aux,
                                       const void *addr, uint64_t size, uint32_t site) {
  struct trace_record r;
  r.clock = (seq & ((UINT64_C(1) << SEQ_BITS) - 1)) | (uint64_t)thread << SEQ_BITS;
  r.block = ((uint64_t)(uintptr_t)addr & ADDR_MASK) | (uint64_t)op << 48 | (uint64_t)aux << 56;
  r.request = (size < SIZE_MAX40 ? size : SIZE_MAX40) | (uint64_t)(site & 0xFFFFFF) << 40;
  return r;
}

enum op {
  OP_MALLOC = 1, OP_CALLOC = 2, OP_REALLOC = 3, OP_REALLOC_FREE = 4, OP_FREE = 5,
  OP_POSIX_MEMALIGN = 6, OP_ALIGNED_ALLOC = 7, OP_MEMALIGN = 8, OP_VALLOC = 9,
  OP_PVALLOC = 10, OP_REALLOCARRAY = 11, OP_NEW = 12, OP_NEW_ARRAY = 13, OP_DELETE = 14,
  OP_DELETE_ARRAY = 15, OP_THREAD = 16,
};

/* ---- the real functions ------------------------------------------------------------------ */

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

/* dlsym may allocate (dlerror state) before real_calloc is known: those requests are served
 * from this arena and never freed. */
static _Alignas(64) char boot_arena[64 * 1024];
static size_t boot_used;

static bool in_boot_arena(const void *p) {
  return (const char *)p >= boot_arena && (const char *)p < boot_arena + sizeof boot_arena;
}

static void *boot_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  uintptr_t base = (uintptr_t)boot_arena;
  size_t start = (size_t)(((base + boot_used + align - 1) & ~(uintptr_t)(align - 1)) - base);
  if (start > sizeof boot_arena || size > sizeof boot_arena - start) return NULL;
  boot_used = start + size;
  return boot_arena + start; /* static storage: already zero */
}

enum { ST_NONE, ST_RESOLVING, ST_READY };
static _Atomic int init_state = ST_NONE;

/* ---- tracer state -------------------------------------------------------------------------- */

enum mode { MODE_OFF, MODE_EVENTS, MODE_SUMMARY };
static int mode = MODE_OFF;
static char trace_path[4096];
static char out_path[4096 + 32]; /* the file this process writes */
static int trace_fd = -1;
static bool need_open;           /* after fork: open FILE.<pid> at the first write */
static _Atomic bool broken;      /* a write failed: stop recording */
static _Atomic bool finished;    /* exit flush done: later events are written one by one */
/* The event clock, alone on its cache line: every event of every thread increments it. */
static struct { _Alignas(64) _Atomic uint64_t value; } seq_clock; /* sizeof == 64 */
static _Atomic uint32_t next_thread;
static pthread_key_t exit_key;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

#define BUF_RECORDS 4096 /* 96 KiB per thread */
enum { BUF_FREE, BUF_USED };
struct tbuf {
  _Atomic uint32_t n;    /* records filled; changed only by the owner thread */
  uint32_t flushed;      /* records [0, flushed) already written by the exit flush */
  atomic_flag lock;      /* held while writing the buffer out */
  _Atomic int state;     /* BUF_FREE: its thread exited, a new thread may take it */
  bool registered;       /* listed in `buffers` (else unmapped at thread exit) */
  struct trace_record rec[BUF_RECORDS];
};

/* Every buffer ever made, so the exit flush reaches threads that are still running. Entries
 * are published once and never removed: a thread that exits leaves its buffer BUF_FREE for
 * the next new thread, so thread churn does not grow memory and nothing is ever unmapped
 * under a concurrent flush. */
#define MAX_BUFFERS 1024
static struct tbuf *_Atomic buffers[MAX_BUFFERS];

struct tstate {
  struct tbuf *buf;      /* NULL until the thread's first record */
  uint16_t index;
  bool busy;             /* inside a forwarded call: nested calls are not recorded */
  bool direct;           /* the thread's buffer is gone (thread exit): write each record */
};
static TLS struct tstate ts;

/* ---- small helpers (no stdio: it allocates) ---------------------------------------------- */

static size_t u64_to_dec(uint64_t v, char *out) {
  char tmp[24];
  size_t n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

static void write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { atomic_store(&broken, true); return; }
    p += w;
    len -= (size_t)w;
  }
}

/* The call-site id: the top 24 bits of a multiplicative hash of the return address. */
static uint32_t site_hash(const void *ra) {
  uint64_t x = (uint64_t)(uintptr_t)ra * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(x >> 40);
}

static uint8_t log2_align(size_t a) {
  return a ? (uint8_t)__builtin_ctzll((unsigned long long)a) : 0;
}

static void child_path(char *out, size_t cap) {
  size_t n = strlen(trace_path);
  if (n + 24 > cap) n = cap - 24;
  memcpy(out, trace_path, n);
  out[n++] = '.';
  u64_to_dec((uint64_t)getpid(), out + n);
}

static void write_header(int fd) {
  struct trace_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, TRACE_MAGIC, 8);
  h.version = TRACE_VERSION;
  h.header_size = sizeof h;
  h.record_size = sizeof(struct trace_record);
  h.byte_order = BYTE_ORDER_MARK;
  h.pid = (uint64_t)getpid();
  h.ppid = (uint64_t)getppid();
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  h.start_ns = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
  h.page_size = (uint64_t)sysconf(_SC_PAGESIZE);
  int cf = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (cf >= 0) {
    ssize_t r = read(cf, h.comm, sizeof h.comm - 1);
    if (r > 0 && h.comm[r - 1] == '\n') h.comm[r - 1] = 0;
    close(cf);
  }
  write_all(fd, &h, sizeof h);
}

/* Opens this process's output. The first process takes LOCUS_TRACE_FILE itself. */
static void open_output(bool forked) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  int fd = -1;
  if (!forked) {
    strcpy(out_path, trace_path);
    fd = open(out_path, flags | O_EXCL, 0644);
  }
  if (fd < 0) {
    child_path(out_path, sizeof out_path);
    fd = open(out_path, flags | O_TRUNC, 0644);
  }
  if (fd < 0) { atomic_store(&broken, true); return; }
  if (mode == MODE_EVENTS) write_header(fd);
  trace_fd = fd;
}

static void ensure_open(void) {
  if (likely(!need_open)) return;
  pthread_mutex_lock(&open_lock);
  if (need_open) {
    open_output(true);
    need_open = false;
  }
  pthread_mutex_unlock(&open_lock);
}

/* ---- summary mode: live bytes by address (live_table.h) --------------------------------- */

#include "live_table.h"

static bool is_release(uint8_t op) {
  return op == OP_FREE || op == OP_DELETE || op == OP_DELETE_ARRAY || op == OP_REALLOC_FREE;
}

static void summary_event(uint8_t op, uint64_t addr, uint64_t size) {
  if (op == OP_THREAD) return;
  if (!addr) { if (!is_release(op)) atomic_fetch_add(&sum_failed, 1); return; }
  struct stripe *st = stripe_of(addr);
  pthread_mutex_lock(&st->lock);
  if (is_release(op)) stripe_remove(st, addr);
  else if (!stripe_insert(st, addr, size)) atomic_store(&broken, true);
  pthread_mutex_unlock(&st->lock);
}

static void summary_write(void) {
  ensure_open();
  if (trace_fd < 0) return;
  uint64_t allocs = 0, frees = 0, bytes = 0, unknown = 0;
  for (int i = 0; i < STRIPES; i++) {
    allocs += stripes[i].allocs;
    frees += stripes[i].frees;
    bytes += stripes[i].bytes;
    unknown += stripes[i].unknown_frees;
  }
  int64_t live = atomic_load(&sum_live), objects = atomic_load(&sum_objects);
  static const char *const names[] = {
    "peak_live_bytes", "peak_live_objects", "allocations", "frees", "bytes_allocated",
    "live_bytes_at_exit", "live_objects_at_exit", "unknown_frees", "failed_allocations",
    "pid", "ppid"};
  uint64_t values[] = {atomic_load(&sum_peak_live), atomic_load(&sum_peak_objects), allocs,
                       frees, bytes, live > 0 ? (uint64_t)live : 0,
                       objects > 0 ? (uint64_t)objects : 0, unknown, atomic_load(&sum_failed),
                       (uint64_t)getpid(), (uint64_t)getppid()};
  char line[128];
  static const char head[] = "locus-trace-summary 1\n";
  write_all(trace_fd, head, sizeof head - 1);
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    size_t n = strlen(names[i]);
    memcpy(line, names[i], n);
    line[n++] = ' ';
    n += u64_to_dec(values[i], line + n);
    line[n++] = '\n';
    write_all(trace_fd, line, n);
  }
}

/* ---- events mode: per-thread buffers ----------------------------------------------------- */

static void lock_buf(struct tbuf *b) { while (atomic_flag_test_and_set_explicit(&b->lock, memory_order_acquire)) {} }
static void unlock_buf(struct tbuf *b) { atomic_flag_clear_explicit(&b->lock, memory_order_release); }

static void write_records(const struct trace_record *r, uint32_t count) {
  if (!count || atomic_load_explicit(&broken, memory_order_relaxed)) return;
  ensure_open();
  if (trace_fd >= 0) write_all(trace_fd, r, (size_t)count * sizeof *r);
}

/* The owner writes out what the exit flush has not, and starts the buffer again. */
static void flush_buffer(struct tbuf *b) {
  lock_buf(b);
  uint32_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
  if (n > b->flushed) write_records(&b->rec[b->flushed], n - b->flushed);
  b->flushed = 0;
  atomic_store_explicit(&b->n, 0, memory_order_relaxed);
  unlock_buf(b);
}

/* Any thread (at process exit): write the whole records another thread has so far. */
static void flush_foreign(struct tbuf *b) {
  lock_buf(b);
  if (atomic_load(&b->state) == BUF_USED) {
    uint32_t n = atomic_load_explicit(&b->n, memory_order_acquire);
    if (n > b->flushed) write_records(&b->rec[b->flushed], n - b->flushed);
    b->flushed = n;
  }
  unlock_buf(b);
}

/* The event clock. Allocations take their number after the real call returns, releases
 * before the real call starts: a block can be handed out again (in another thread) only
 * after the release began, so the clock orders every release before the reuse. */
static inline uint64_t take_seq(void) {
  return atomic_fetch_add_explicit(&seq_clock.value, 1, memory_order_relaxed);
}

static inline void emit(uint64_t seq, uint8_t op, uint8_t aux, const void *addr,
                        uint64_t size, uint32_t site);

/* Thread exit (pthread key destructor): write the buffer out and hand it back. Records the
 * thread makes after this (other destructors) are written one at a time. */
static void thread_exit(void *arg) {
  struct tbuf *b = arg;
  bool was_busy = ts.busy;
  ts.busy = true;
  flush_buffer(b);
  ts.buf = NULL;
  ts.direct = true;
  if (b->registered) atomic_store(&b->state, BUF_FREE);
  else munmap(b, sizeof *b);
  ts.busy = was_busy;
}

static struct tbuf *take_buffer(void) {
  for (uint32_t i = 0; i < MAX_BUFFERS; i++) {
    struct tbuf *b = atomic_load(&buffers[i]);
    if (!b) break;
    int expected = BUF_FREE;
    if (atomic_compare_exchange_strong(&b->state, &expected, BUF_USED)) return b;
  }
  struct tbuf *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
  if (b == MAP_FAILED) return NULL;
  atomic_flag_clear(&b->lock);
  atomic_store(&b->state, BUF_USED);
  for (uint32_t i = 0; i < MAX_BUFFERS && !b->registered; i++) {
    struct tbuf *expected = NULL;
    if (atomic_compare_exchange_strong(&buffers[i], &expected, b)) b->registered = true;
  }
  return b;
}

static struct tbuf *thread_start(void) {
  struct tbuf *b = take_buffer();
  if (!b) return NULL;
  uint32_t index = atomic_fetch_add(&next_thread, 1);
  ts.index = (uint16_t)(index < 0xFFFF ? index : 0xFFFF);
  ts.buf = b;
  /* May calloc for high key numbers: our caller holds `busy`, so that is not recorded. */
  pthread_setspecific(exit_key, b);
  emit(take_seq(), OP_THREAD, 0, (void *)(uintptr_t)syscall(SYS_gettid), 0, 0);
  return b;
}

/* Everything but the common case: summary mode, a thread's first record, a full buffer. */
__attribute__((noinline)) static void emit_slow(uint64_t seq, uint8_t op, uint8_t aux,
                                                const void *addr, uint64_t size, uint32_t site) {
  if (mode == MODE_SUMMARY) { summary_event(op, (uint64_t)(uintptr_t)addr, size); return; }
  struct tbuf *b = ts.buf;
  if (!b && (ts.direct || !(b = thread_start()))) {
    struct trace_record r = pack(seq, ts.index, op, aux, addr, size, site);
    write_records(&r, 1);
    return;
  }
  emit(seq, op, aux, addr, size, site);
}

/* Appends one record to the thread's buffer (the hot path, inlined into every entry). */
static inline __attribute__((always_inline)) void emit(uint64_t seq, uint8_t op, uint8_t aux,
                                                       const void *addr, uint64_t size,
                                                       uint32_t site) {
  struct tbuf *b = ts.buf;
  if (unlikely(!b || mode == MODE_SUMMARY)) { emit_slow(seq, op, aux, addr, size, site); return; }
  uint32_t n = atomic_load_explicit(&b->n, memory_order_relaxed);
  b->rec[n] = pack(seq, ts.index, op, aux, addr, size, site);
  /* Release: a concurrent exit flush reads only whole records. */
  atomic_store_explicit(&b->n, n + 1, memory_order_release);
  if (unlikely(n + 1 == BUF_RECORDS || atomic_load_explicit(&finished, memory_order_relaxed)))
    flush_buffer(b);
}

/* ---- set-up, fork, exit ------------------------------------------------------------------ */

static void atfork_prepare(void) { if (mode == MODE_SUMMARY) lock_all_stripes(); }
static void atfork_parent(void) { if (mode == MODE_SUMMARY) unlock_all_stripes(); }
static void atfork_child(void) {
  if (mode == MODE_SUMMARY) unlock_all_stripes();
  if (mode == MODE_OFF) return;
  /* Only this thread exists now, and the parent writes its own records: drop the copies. */
  for (uint32_t i = 0; i < MAX_BUFFERS; i++) {
    struct tbuf *b = atomic_load(&buffers[i]);
    if (!b) break;
    atomic_flag_clear(&b->lock);
    atomic_store(&b->n, 0);
    b->flushed = 0;
    if (b != ts.buf) atomic_store(&b->state, BUF_FREE);
  }
  if (ts.buf && !ts.buf->registered) { atomic_store(&ts.buf->n, 0); ts.buf->flushed = 0; }
  pthread_mutex_init(&open_lock, NULL);
  trace_fd = -1;
  need_open = true;
}

static void resolve(void) {
  int expected = ST_NONE;
  if (!atomic_compare_exchange_strong(&init_state, &expected, ST_RESOLVING)) return;
  real_malloc = dlsym(RTLD_NEXT, "malloc");
  real_free = dlsym(RTLD_NEXT, "free");
  real_calloc = dlsym(RTLD_NEXT, "calloc");
  real_realloc = dlsym(RTLD_NEXT, "realloc");
  real_reallocarray = dlsym(RTLD_NEXT, "reallocarray");
  real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = dlsym(RTLD_NEXT, "memalign");
  real_valloc = dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
  atomic_store(&init_state, ST_READY);
}

/* Calls made before this constructor (other libraries' constructors) are forwarded but not
 * recorded. */
__attribute__((constructor)) static void tracer_init(void) {
  ts.busy = true;
  resolve();
  const char *path = getenv("LOCUS_TRACE_FILE");
  if (path && *path && strlen(path) < sizeof trace_path) {
    const char *m = getenv("LOCUS_TRACE_MODE");
    strcpy(trace_path, path);
    int md = (m && strcmp(m, "summary") == 0) ? MODE_SUMMARY : MODE_EVENTS;
    for (int i = 0; i < STRIPES; i++) pthread_mutex_init(&stripes[i].lock, NULL);
    pthread_key_create(&exit_key, thread_exit);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    mode = md;
    open_output(false);
  }
  ts.busy = false;
}

__attribute__((destructor)) static void tracer_fini(void) {
  if (mode == MODE_OFF) return;
  bool was_busy = ts.busy;
  ts.busy = true;
  if (mode == MODE_SUMMARY) {
    lock_all_stripes();
    summary_write();
    unlock_all_stripes();
  } else {
    for (uint32_t i = 0; i < MAX_BUFFERS; i++) {
      struct tbuf *b = atomic_load(&buffers[i]);
      if (!b) break;
      flush_foreign(b);
    }
    if (ts.buf && !ts.buf->registered) flush_buffer(ts.buf);
  }
  atomic_store(&finished, true);
  ts.busy = was_busy;
}

/* ---- the interposed functions ------------------------------------------------------------ */

/* Before the constructor ran or while dlsym resolves: just make the functions usable. */
static inline bool ready(void) {
  if (likely(atomic_load_explicit(&init_state, memory_order_acquire) == ST_READY)) return true;
  resolve();
  return atomic_load(&init_state) == ST_READY;
}

/* Record only outermost calls of a tracing process. */
static inline bool recording(void) {
  return mode != MODE_OFF && !ts.busy && !atomic_load_explicit(&broken, memory_order_relaxed);
}

#define RA() site_hash(__builtin_return_address(0))

EXPORT void *malloc(size_t size) {
  if (unlikely(!ready())) return boot_alloc(size, 16);
  if (!recording()) return real_malloc(size);
  ts.busy = true;
  void *p = real_malloc(size);
  emit(take_seq(), OP_MALLOC, 0, p, size, RA());
  ts.busy = false;
  return p;
}

EXPORT void free(void *p) {
  if (unlikely(!p || in_boot_arena(p))) return;
  if (unlikely(!ready())) return;
  if (!recording()) { real_free(p); return; }
  ts.busy = true;
  emit(take_seq(), OP_FREE, 0, p, 0, RA()); /* before: the block may be reused at once */
  real_free(p);
  ts.busy = false;
}

EXPORT void *calloc(size_t n, size_t size) {
  if (unlikely(!ready())) {
    size_t total;
    return __builtin_mul_overflow(n, size, &total) ? NULL : boot_alloc(total, 16);
  }
  if (!recording()) return real_calloc(n, size);
  ts.busy = true;
  void *p = real_calloc(n, size);
  size_t total = 0;
  if (__builtin_mul_overflow(n, size, &total)) total = SIZE_MAX;
  emit(take_seq(), OP_CALLOC, 0, p, total, RA());
  ts.busy = false;
  return p;
}

static void *boot_realloc(void *old, size_t size) {
  void *p = real_malloc ? real_malloc(size) : boot_alloc(size, 16);
  if (p && old) {
    size_t avail = (size_t)(boot_arena + sizeof boot_arena - (char *)old);
    memcpy(p, old, size < avail ? size : avail);
  }
  return p;
}

/* realloc and reallocarray. The old block is released (REALLOC_FREE, numbered before the
 * call) when the call succeeds, or when it was realloc(p, 0) returning NULL (glibc frees p
 * then); the new block is recorded like any allocation. In summary mode the old block's
 * stripe stays locked across the call, so no other thread can be handed the old block before
 * it leaves the table; the new block's stripe is locked only afterwards (one lock at a time:
 * no lock order to get wrong). */
static void *traced_realloc(void *old, size_t n, size_t size, bool array, uint32_t site) {
  size_t total;
  if (!array) total = size;
  else if (__builtin_mul_overflow(n, size, &total)) total = SIZE_MAX;
  uint8_t op = array ? OP_REALLOCARRAY : OP_REALLOC;
  struct stripe *st = mode == MODE_SUMMARY && old ? stripe_of((uint64_t)(uintptr_t)old) : NULL;
  if (st) pthread_mutex_lock(&st->lock);
  uint64_t seq = take_seq();
  void *p = array ? real_reallocarray(old, n, size) : real_realloc(old, size);
  if (old && (p || total == 0)) {
    if (st) stripe_remove(st, (uint64_t)(uintptr_t)old);
    else emit(seq, OP_REALLOC_FREE, 0, old, 0, site);
  }
  if (st) pthread_mutex_unlock(&st->lock);
  if (p || total != 0 || !old) emit(take_seq(), op, 0, p, total, site);
  return p;
}

EXPORT void *realloc(void *old, size_t size) {
  if (unlikely(!ready() || in_boot_arena(old))) return boot_realloc(old, size);
  if (!recording()) return real_realloc(old, size);
  ts.busy = true;
  void *p = traced_realloc(old, 1, size, false, RA());
  ts.busy = false;
  return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  if (unlikely(!ready() || in_boot_arena(old))) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) { errno = ENOMEM; return NULL; }
    return boot_realloc(old, total);
  }
  if (!recording()) return real_reallocarray(old, n, size);
  ts.busy = true;
  void *p = traced_realloc(old, n, size, true, RA());
  ts.busy = false;
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  if (unlikely(!ready())) {
    void *p = boot_alloc(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
  }
  if (!recording()) return real_posix_memalign(out, align, size);
  ts.busy = true;
  int rc = real_posix_memalign(out, align, size);
  emit(take_seq(), OP_POSIX_MEMALIGN, log2_align(align), rc == 0 ? *out : NULL, size, RA());
  ts.busy = false;
  return rc;
}

#define ALIGNED_ENTRY(name, op, params, call, align, size)                                   \
  EXPORT void *name params {                                                                 \
    if (unlikely(!ready())) return boot_alloc(size, align);                                  \
    if (!recording()) return real_##name call;                                               \
    ts.busy = true;                                                                          \
    void *p = real_##name call;                                                              \
    emit(take_seq(), op, log2_align(align), p, size, RA());                                  \
    ts.busy = false;                                                                         \
    return p;                                                                                \
  }

ALIGNED_ENTRY(aligned_alloc, OP_ALIGNED_ALLOC, (size_t align, size_t size), (align, size), align, size)
ALIGNED_ENTRY(memalign, OP_MEMALIGN, (size_t align, size_t size), (align, size), align, size)
ALIGNED_ENTRY(valloc, OP_VALLOC, (size_t size), (size), (size_t)sysconf(_SC_PAGESIZE), size)
ALIGNED_ENTRY(pvalloc, OP_PVALLOC, (size_t size), (size), (size_t)sysconf(_SC_PAGESIZE), size)

/* ---- C++ operators ----------------------------------------------------------------------
 * libstdc++'s operators call malloc/free, so C++ programs are traced without these; they are
 * here so that the call-site id names the program's `new`, not libstdc++. Each forwards to
 * the next definition (the allocator's own operators, or libstdc++'s). A throwing new unwinds
 * through this file (built with -fexceptions); the cleanup clears `busy` on the way out.
 */
typedef void *(*new_fn)();
typedef void (*delete_fn)();

static void clear_busy(bool *unused) { (void)unused; ts.busy = false; }
#define BUSY_SCOPE bool busy_scope __attribute__((cleanup(clear_busy))) = (ts.busy = true)

/* A `new` that throws leaves through the cleanup without having recorded: record it as a
 * failed allocation there. */
struct new_scope { uint32_t site; uint8_t op, aux; bool done; uint64_t size; };
static void end_new_scope(struct new_scope *s) {
  if (!s->done) emit(take_seq(), s->op, s->aux, NULL, s->size, s->site);
  ts.busy = false;
}

static void *next_symbol(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (!f) abort(); /* only C++ code calls these, and it links libstdc++ */
  return f;
}

#define NEW_ENTRY(sym, op, params, args, align, size)                                        \
  EXPORT void *sym params {                                                                  \
    static _Atomic(new_fn) next;                                                             \
    new_fn f = atomic_load_explicit(&next, memory_order_relaxed);                            \
    if (unlikely(!f)) atomic_store(&next, f = (new_fn)next_symbol(#sym));                    \
    if (!ready() || !recording()) return ((void *(*)params)f) args;                          \
    struct new_scope scope __attribute__((cleanup(end_new_scope))) =                         \
        {RA(), op, log2_align(align), false, size};                                          \
    ts.busy = true;                                                                          \
    void *p = ((void *(*)params)f) args;                                                     \
    emit(take_seq(), op, scope.aux, p, size, scope.site);                                    \
    scope.done = true;                                                                       \
    return p;                                                                                \
  }

#define DELETE_ENTRY(sym, op, params, args, ptr, align, size)                                \
  EXPORT void sym params {                                                                   \
    static _Atomic(delete_fn) next;                                                          \
    delete_fn f = atomic_load_explicit(&next, memory_order_relaxed);                         \
    if (unlikely(!f)) atomic_store(&next, f = (delete_fn)next_symbol(#sym));                 \
    if (!ptr || !ready() || !recording()) { ((void (*)params)f) args; return; }              \
    uint32_t site = RA();                                                                    \
    BUSY_SCOPE;                                                                              \
    emit(take_seq(), op, log2_align(align), ptr, size, site);                                \
    ((void (*)params)f) args;                                                                \
    (void)busy_scope;                                                                        \
  }

typedef struct { char c; } nothrow_t; /* passed by reference; never read here */

NEW_ENTRY(_Znwm, OP_NEW, (size_t n), (n), 0, n)
NEW_ENTRY(_Znam, OP_NEW_ARRAY, (size_t n), (n), 0, n)
NEW_ENTRY(_ZnwmRKSt9nothrow_t, OP_NEW, (size_t n, const nothrow_t *t), (n, t), 0, n)
NEW_ENTRY(_ZnamRKSt9nothrow_t, OP_NEW_ARRAY, (size_t n, const nothrow_t *t), (n, t), 0, n)
NEW_ENTRY(_ZnwmSt11align_val_t, OP_NEW, (size_t n, size_t a), (n, a), a, n)
NEW_ENTRY(_ZnamSt11align_val_t, OP_NEW_ARRAY, (size_t n, size_t a), (n, a), a, n)
NEW_ENTRY(_ZnwmSt11align_val_tRKSt9nothrow_t, OP_NEW, (size_t n, size_t a, const nothrow_t *t), (n, a, t), a, n)
NEW_ENTRY(_ZnamSt11align_val_tRKSt9nothrow_t, OP_NEW_ARRAY, (size_t n, size_t a, const nothrow_t *t), (n, a, t), a, n)

DELETE_ENTRY(_ZdlPv, OP_DELETE, (void *p), (p), p, 0, 0)
DELETE_ENTRY(_ZdaPv, OP_DELETE_ARRAY, (void *p), (p), p, 0, 0)
DELETE_ENTRY(_ZdlPvm, OP_DELETE, (void *p, size_t n), (p, n), p, 0, n)
DELETE_ENTRY(_ZdaPvm, OP_DELETE_ARRAY, (void *p, size_t n), (p, n), p, 0, n)
DELETE_ENTRY(_ZdlPvSt11align_val_t, OP_DELETE, (void *p, size_t a), (p, a), p, a, 0)
DELETE_ENTRY(_ZdaPvSt11align_val_t, OP_DELETE_ARRAY, (void *p, size_t a), (p, a), p, a, 0)
DELETE_ENTRY(_ZdlPvmSt11align_val_t, OP_DELETE, (void *p, size_t n, size_t a), (p, n, a), p, a, n)
DELETE_ENTRY(_ZdaPvmSt11align_val_t, OP_DELETE_ARRAY, (void *p, size_t n, size_t a), (p, n, a), p, a, n)
DELETE_ENTRY(_ZdlPvRKSt9nothrow_t, OP_DELETE, (void *p, const nothrow_t *t), (p, t), p, 0, 0)
DELETE_ENTRY(_ZdaPvRKSt9nothrow_t, OP_DELETE_ARRAY, (void *p, const nothrow_t *t), (p, t), p, 0, 0)
DELETE_ENTRY(_ZdlPvSt11align_val_tRKSt9nothrow_t, OP_DELETE, (void *p, size_t a, const nothrow_t *t), (p, a, t), p, a, 0)
DELETE_ENTRY(_ZdaPvSt11align_val_tRKSt9nothrow_t, OP_DELETE_ARRAY, (void *p, size_t a, const nothrow_t *t), (p, a, t), p, a, 0)
