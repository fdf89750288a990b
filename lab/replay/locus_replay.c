/* locus_replay.c — replays an allocation trace (docs/trace-format.md) against whatever
 * allocator is loaded (glibc, or a library given with LD_PRELOAD).
 *
 *   locus_replay [--check] [--lenient] [--ordered] [--profile FILE] [--every N] TRACE
 *
 * Two phases:
 *   1. Preparation (not measured). The trace is put in event-clock (seq) order; every
 *      successful allocation becomes an object with its own slot, and every release is
 *      matched with the object its address belonged to at that moment, so address reuse,
 *      realloc chains and cross-thread frees are resolved once, here. A record that cannot
 *      be replayed (a release of an unknown block, ...) ends the program with one line
 *      naming it. The operations are then grouped per traced thread, in that thread's order.
 *   2. Replay (measured). One thread per traced thread runs its operations: malloc, calloc,
 *      realloc, the aligned calls, free. A thread that releases or reallocs an object another
 *      thread allocates waits until that thread has produced it (its slot is published with
 *      release/acquire). Every allocated object is written on each of its pages, so the
 *      allocator's pages are really touched, and a tag written at offset 0 is checked when
 *      the object is released (an allocator handing out a live block twice, or a realloc
 *      losing contents, is caught). With --ordered every thread also waits for its turn in
 *      the global event order, so the replay happens in exactly the trace's order (slower;
 *      for known-answer checks and exact profiles).
 *
 * Invariant that keeps the driver out of the measurement: it never calls malloc & co. for
 * itself. Its tables come from mmap and are touched before the replay starts; the resident
 * set measured then is the baseline, and the kernel's high-water mark is reset there
 * (/proc/self/clear_refs), so "held" below is what the allocator took for the replayed heap.
 *
 * Output: one line "replay: key=value ..." on stdout (see main). --check stops after the
 * preparation. --profile FILE writes "allocations,live_bytes,held_bytes" samples (every N
 * operations; the default gives about 1000 samples): the bytes the trace's live objects
 * requested and the resident memory above the baseline, over allocation time.
 *
 * Exit status: 0 done, 2 bad usage or a trace that cannot be replayed, 3 the allocator
 * failed (NULL for a request that succeeded in the trace, or a changed tag).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the trace format (docs/trace-format.md) ------------------------------------------- */

#define HEADER_SIZE 80u
#define RECORD_SIZE 24u
#define M48 ((UINT64_C(1) << 48) - 1)
#define SIZE_SATURATED ((UINT64_C(1) << 40) - 1)

enum trace_op {
  OP_MALLOC = 1, OP_CALLOC, OP_REALLOC, OP_REALLOC_RELEASE, OP_FREE, OP_POSIX_MEMALIGN,
  OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_VALLOC, OP_PVALLOC, OP_REALLOCARRAY, OP_NEW, OP_NEW_ARRAY,
  OP_DELETE, OP_DELETE_ARRAY, OP_THREAD_START, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
  "?", "malloc", "calloc", "realloc", "realloc (release)", "free", "posix_memalign",
  "aligned_alloc", "memalign", "valloc", "pvalloc", "reallocarray", "operator new",
  "operator new[]", "operator delete", "operator delete[]", "thread start"};

struct record { uint64_t clock, block, request; };

static bool is_alloc(unsigned op) {
  return (op >= OP_MALLOC && op <= OP_REALLOC) || (op >= OP_POSIX_MEMALIGN && op <= OP_NEW_ARRAY);
}
static bool is_release(unsigned op) {
  return op == OP_REALLOC_RELEASE || op == OP_FREE || op == OP_DELETE || op == OP_DELETE_ARRAY;
}

/* ---- what the replay threads run ------------------------------------------------------- */

#define NONE UINT32_MAX

/* One replayed call. Releases carry the size of the object they end (for the live count). */
struct op {
  uint64_t size;      /* bytes requested (allocations), or the released object's size */
  uint64_t old_size;  /* realloc: the size of the object it replaces */
  uint32_t obj;       /* the object allocated, or released */
  uint32_t old;       /* realloc: the object it replaces (NONE for realloc(NULL, n)) */
  uint32_t rank;      /* position in the global event order */
  uint32_t record;    /* index of the record in the file (for messages) */
  uint16_t thread;
  uint8_t code;       /* the trace's op code; releases are all OP_FREE */
  uint8_t align_log;
};

/* Objects' slots: the pointer the allocator returned, published with a release store by the
 * allocating thread; NULL until then. A size-0 allocation that returned NULL is kept as
 * NULL_RESULT so that waiting threads can tell it from "not produced yet". */
#define NULL_RESULT ((void *)1)
static _Atomic(void *) *slots;
static uint32_t *born_at;     /* record index of each object's allocation (messages) */

struct thread_state {
  const struct op *ops;
  size_t count;
  /* Counters read by the sampler in other threads (relaxed; each has one writer). */
  _Atomic int64_t live_bytes;
  _Atomic uint64_t allocations;
  pthread_t handle;
} __attribute__((aligned(64)));

static struct thread_state *threads;
static unsigned nthreads;
static bool ordered;
static _Atomic uint32_t next_rank;   /* --ordered: the rank whose turn it is */
static size_t page_size;

/* ---- messages ---------------------------------------------------------------------------- */

static const char *trace_path = "?";

static void die(int status, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void die(int status, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  /* write(2), not stdio: stdio may allocate, and other threads may be mid-call */
  if (write(2, "locus-replay: ", 14) < 0 || write(2, line, (size_t)n) < 0) _exit(status);
  _exit(status);
}

static const char *op_name(unsigned op) { return op < OP_COUNT ? op_names[op] : "?"; }

/* ---- memory of the driver itself (never malloc) ----------------------------------------- */

static void *region(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) die(2, "out of memory for the replay's tables (%zu bytes)", bytes);
  return p;
}

static void release_region(void *p, size_t bytes) { if (p) munmap(p, bytes ? bytes : 1); }

/* ---- preparation --------------------------------------------------------------------------- */

/* Sorts `n` (key << 32 | unused) pairs... keys are 48-bit seq values; the value is the record
 * index. LSD radix sort, 16 bits a pass: three passes, stable. */
struct keyed { uint64_t key; uint32_t index; uint32_t pad; };

static void radix_sort(struct keyed *a, struct keyed *tmp, size_t n) {
  size_t *count = region(sizeof(size_t) * 65536);
  for (int shift = 0; shift < 48; shift += 16) {
    memset(count, 0, sizeof(size_t) * 65536);
    for (size_t i = 0; i < n; i++) count[(a[i].key >> shift) & 0xFFFF]++;
    size_t sum = 0;
    for (size_t d = 0; d < 65536; d++) { size_t c = count[d]; count[d] = sum; sum += c; }
    for (size_t i = 0; i < n; i++) tmp[count[(a[i].key >> shift) & 0xFFFF]++] = a[i];
    memcpy(a, tmp, n * sizeof *a);
  }
  release_region(count, sizeof(size_t) * 65536);
}

/* Live blocks of the trace during preparation: address -> object, open addressing with
 * linear probing and backward-shift deletion (no tombstones), grown at half full. */
struct live_map { uint64_t *keys; uint32_t *values; size_t mask, used; };

static size_t slot_of(const struct live_map *m, uint64_t addr) {
  uint64_t h = addr * UINT64_C(0x9E3779B97F4A7C15);
  size_t i = (size_t)(h >> 20) & m->mask;
  while (m->keys[i] && m->keys[i] != addr) i = (i + 1) & m->mask;
  return i;
}

static void map_init(struct live_map *m, size_t capacity) {
  m->keys = region(capacity * sizeof *m->keys);
  m->values = region(capacity * sizeof *m->values);
  m->mask = capacity - 1;
  m->used = 0;
}

static void map_free(struct live_map *m) {
  release_region(m->keys, (m->mask + 1) * sizeof *m->keys);
  release_region(m->values, (m->mask + 1) * sizeof *m->values);
}

static void map_put(struct live_map *m, uint64_t addr, uint32_t obj) {
  if (2 * (m->used + 1) > m->mask + 1) {
    struct live_map bigger;
    map_init(&bigger, 2 * (m->mask + 1));
    for (size_t i = 0; i <= m->mask; i++)
      if (m->keys[i]) map_put(&bigger, m->keys[i], m->values[i]);
    map_free(m);
    *m = bigger;
  }
  size_t i = slot_of(m, addr);
  if (!m->keys[i]) m->used++;
  m->keys[i] = addr;
  m->values[i] = obj;
}

static uint32_t map_get(const struct live_map *m, uint64_t addr) {
  size_t i = slot_of(m, addr);
  return m->keys[i] ? m->values[i] : NONE;
}

static void map_remove(struct live_map *m, uint64_t addr) {
  size_t i = slot_of(m, addr);
  if (!m->keys[i]) return;
  /* Backward shift: move later entries of the probe run into the hole when their home slot
   * is not between the hole and them, so every lookup still finds its key. */
  for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
    size_t home = (size_t)((m->keys[j] * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & m->mask;
    bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      m->keys[i] = m->keys[j];
      m->values[i] = m->values[j];
      i = j;
    }
  }
  m->keys[i] = 0;
  m->used--;
}

struct prepared {
  struct op *ops;          /* grouped by thread, each thread's in its order */
  size_t nops, nobjects, ops_bytes;
  uint64_t peak_live_bytes, live_bytes_at_exit, live_objects_at_exit;
  uint64_t peak_live_objects, bytes_allocated;
  size_t failed, skipped_releases, leaked_overwritten, unknown_ops;
};

static void prepare(const struct record *rec, size_t n, bool lenient, struct prepared *out) {
  /* 1. event order (thread-start records and unknown ops left out) */
  struct keyed *order = region(n * sizeof *order);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned op = (unsigned)((rec[i].block >> 48) & 0xFF);
    if (is_alloc(op) || is_release(op)) {
      order[m].key = rec[i].clock & M48;
      order[m].index = (uint32_t)i;
      m++;
    } else if (op != OP_THREAD_START) {
      out->unknown_ops++;
    }
  }
  struct keyed *tmp = region(m * sizeof *tmp);
  radix_sort(order, tmp, m);
  release_region(tmp, m * sizeof *tmp);

  /* 2. objects and matched releases, in event order */
  struct op *ops = region(m * sizeof *ops);
  born_at = region(m * sizeof *born_at);
  uint64_t *obj_size = region(m * sizeof *obj_size);
  struct live_map live;
  map_init(&live, 1024);
  /* realloc's release, waiting for the realloc record of the same thread that follows it */
  uint32_t *pending = region(65536 * sizeof *pending);
  uint32_t *pending_rec = region(65536 * sizeof *pending_rec);
  memset(pending, 0xFF, 65536 * sizeof *pending);
  uint32_t *per_thread = region(65537 * sizeof *per_thread);
  size_t k = 0, nobj = 0;
  int64_t live_bytes = 0, peak = 0, live_objects = 0, peak_objects = 0;
  uint64_t bytes_allocated = 0;

  for (size_t s = 0; s < m; s++) {
    uint32_t ri = order[s].index;
    const struct record *r = &rec[ri];
    unsigned op = (unsigned)((r->block >> 48) & 0xFF);
    unsigned thread = (unsigned)(r->clock >> 48);
    uint64_t addr = r->block & M48, size = r->request & SIZE_SATURATED;
    bool realloc_new = (op == OP_REALLOC || op == OP_REALLOCARRAY) && addr != 0;

    if (pending[thread] != NONE && !realloc_new) {
      /* a realloc release not followed by its new block: realloc(p, 0) freed p */
      uint32_t o = pending[thread];
      live_bytes -= (int64_t)obj_size[o];
      live_objects--;
      ops[k++] = (struct op){.size = obj_size[o], .obj = o, .old = NONE, .record = pending_rec[thread],
                             .thread = (uint16_t)thread, .code = OP_FREE};
      pending[thread] = NONE;
    }
    if (is_alloc(op)) {
      if (addr == 0) { out->failed++; continue; }  /* a failure cannot be replayed: skipped */
      if (size == SIZE_SATURATED)
        die(2, "%s: record %u (%s, thread %u): a request of 1 TiB or more cannot be replayed",
            trace_path, ri, op_name(op), thread);
      uint32_t still = map_get(&live, addr);
      if (still != NONE) {
        if (!lenient)
          die(2, "%s: record %u (%s, thread %u): block 0x%llx returned while still live "
              "(allocated at record %u): a release is missing from the trace (--lenient "
              "keeps the old object as a leak)", trace_path, ri, op_name(op), thread,
              (unsigned long long)addr, born_at[still]);
        out->leaked_overwritten++;
      }
      struct op o = {.size = size, .obj = (uint32_t)nobj, .old = NONE, .record = ri,
                     .thread = (uint16_t)thread, .code = (uint8_t)op,
                     .align_log = (uint8_t)(r->block >> 56)};
      if (realloc_new && pending[thread] != NONE) {
        o.old = pending[thread];
        o.old_size = obj_size[o.old];
        pending[thread] = NONE;
        live_bytes -= (int64_t)o.old_size;
        live_objects--;
      }
      born_at[nobj] = ri;
      obj_size[nobj] = size;
      map_put(&live, addr, (uint32_t)nobj);
      nobj++;
      live_bytes += (int64_t)size;
      live_objects++;
      bytes_allocated += size;
      if (live_bytes > peak) peak = live_bytes;
      if (live_objects > peak_objects) peak_objects = live_objects;
      ops[k++] = o;
    } else {
      uint32_t o = map_get(&live, addr);
      if (o == NONE) {
        if (!lenient)
          die(2, "%s: record %u (%s, thread %u): release of block 0x%llx, which the trace "
              "never allocated or already released (--lenient skips such releases)",
              trace_path, ri, op_name(op), thread, (unsigned long long)addr);
        out->skipped_releases++;
        continue;
      }
      map_remove(&live, addr);
      if (op == OP_REALLOC_RELEASE) {
        pending[thread] = o;      /* replayed with the realloc record that follows */
        pending_rec[thread] = ri;
        continue;
      }
      live_bytes -= (int64_t)obj_size[o];
      live_objects--;
      ops[k++] = (struct op){.size = obj_size[o], .obj = o, .old = NONE, .record = ri,
                             .thread = (uint16_t)thread, .code = OP_FREE};
    }
  }
  for (unsigned t = 0; t < 65536; t++)
    if (pending[t] != NONE) {
      uint32_t o = pending[t];
      live_bytes -= (int64_t)obj_size[o];
      live_objects--;
      ops[k++] = (struct op){.size = obj_size[o], .obj = o, .old = NONE, .record = pending_rec[t],
                             .thread = (uint16_t)t, .code = OP_FREE};
    }
  map_free(&live);
  release_region(order, n * sizeof *order);
  release_region(obj_size, m * sizeof *obj_size);
  release_region(pending, 65536 * sizeof *pending);
  release_region(pending_rec, 65536 * sizeof *pending_rec);

  /* 3. group per thread (stable), keeping the global rank for --ordered. Traced thread
   * indices are renumbered densely in order of first appearance. */
  uint16_t *dense = region(65536 * sizeof *dense);
  memset(dense, 0xFF, 65536 * sizeof *dense);
  nthreads = 0;
  for (size_t i = 0; i < k; i++) {
    ops[i].rank = (uint32_t)i;
    if (dense[ops[i].thread] == 0xFFFF) dense[ops[i].thread] = (uint16_t)nthreads++;
    ops[i].thread = dense[ops[i].thread];
    per_thread[ops[i].thread + 1]++;
  }
  for (unsigned t = 0; t < nthreads; t++) per_thread[t + 1] += per_thread[t];
  struct op *grouped = region(k * sizeof *grouped);
  threads = region((nthreads ? nthreads : 1) * sizeof *threads);
  for (unsigned t = 0; t < nthreads; t++) {
    threads[t].ops = grouped + per_thread[t];
    threads[t].count = per_thread[t + 1] - per_thread[t];
  }
  for (size_t i = 0; i < k; i++) grouped[per_thread[ops[i].thread]++] = ops[i];
  release_region(ops, m * sizeof *ops);
  release_region(dense, 65536 * sizeof *dense);
  release_region(per_thread, 65537 * sizeof *per_thread);

  out->ops = grouped;
  out->ops_bytes = k * sizeof *grouped;
  out->nops = k;
  out->nobjects = nobj;
  out->peak_live_bytes = (uint64_t)peak;
  out->live_bytes_at_exit = (uint64_t)live_bytes;
  out->live_objects_at_exit = (uint64_t)live_objects;
  out->peak_live_objects = (uint64_t)peak_objects;
  out->bytes_allocated = bytes_allocated;
}

/* ---- memory measurements --------------------------------------------------------------------- */

/* The number that follows `key` in a /proc/self file; 0 when it cannot be read. */
static long proc_number(const char *file, const char *key) {
  char buf[4096];
  int fd = open(file, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *p = strstr(buf, key);
  return p ? strtol(p + strlen(key), NULL, 10) : 0;
}

/* statm: "size resident shared ...", in pages */
static long resident_pages(void) { return proc_number("/proc/self/statm", " "); }

static long status_kib(const char *field) { return proc_number("/proc/self/status", field); }

/* The kernel's resident high-water mark, reset to the current resident set (Linux >= 4.0);
 * false where that is not allowed. */
static bool reset_hwm(void) {
  int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd < 0) return false;
  bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

/* ---- the profile --------------------------------------------------------------------------- */

struct sample { uint64_t allocations; int64_t live_bytes; int64_t held_bytes; };
static struct sample *samples;
static size_t max_samples, every;
static _Atomic size_t nsamples;
static _Atomic uint64_t ops_done;    /* unordered: advanced in batches of BATCH operations */
static long base_pages;
static _Atomic long peak_sampled_pages;
#define BATCH 64

static void take_sample(void) {
  uint64_t allocations = 0;
  int64_t live = 0;
  for (unsigned t = 0; t < nthreads; t++) {
    allocations += atomic_load_explicit(&threads[t].allocations, memory_order_relaxed);
    live += atomic_load_explicit(&threads[t].live_bytes, memory_order_relaxed);
  }
  long pages = resident_pages();
  long seen = atomic_load_explicit(&peak_sampled_pages, memory_order_relaxed);
  while (pages > seen && !atomic_compare_exchange_weak(&peak_sampled_pages, &seen, pages)) {}
  size_t i = atomic_fetch_add(&nsamples, 1);
  if (i < max_samples)
    samples[i] = (struct sample){allocations, live > 0 ? live : 0,
                                 pages > base_pages ? (int64_t)(pages - base_pages) * (int64_t)page_size : 0};
}

/* ---- the replay ------------------------------------------------------------------------------ */

static void touch(unsigned char *p, uint64_t size, unsigned char tag) {
  for (uint64_t off = 0; off < size; off += page_size) p[off] = tag;
  if (size) p[size - 1] = tag;
}

static void *wait_for(uint32_t obj) {
  void *p;
  unsigned spins = 0;
  while (!(p = atomic_load_explicit(&slots[obj], memory_order_acquire))) {
    if (++spins < 64) __builtin_ia32_pause();
    else sched_yield();
  }
  return p == NULL_RESULT ? NULL : p;
}

static size_t round_up(uint64_t size, size_t align) {
  return (size_t)((size + align - 1) & ~(uint64_t)(align - 1));
}

/* The allocator's call and nothing else: `--toggle-collect=replay_call` makes callgrind
 * count the instructions spent inside the allocator (plus this dispatch). */
__attribute__((noinline)) void *replay_call(const struct op *o, void *old) {
  size_t size = (size_t)o->size;
  size_t align = o->align_log ? (size_t)1 << o->align_log : 0;
  void *p = NULL;
  switch (o->code) {
  case OP_FREE: free(old); return NULL;
  case OP_CALLOC: return calloc(1, size);
  case OP_REALLOC: case OP_REALLOCARRAY: return realloc(old, size);
  case OP_POSIX_MEMALIGN:
    return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL : p;
  case OP_ALIGNED_ALLOC: return aligned_alloc(align ? align : 1, size);
  case OP_MEMALIGN: return memalign(align ? align : 1, size);
  case OP_VALLOC: return valloc(size);
  /* pvalloc as what it means: not every allocator exports it (jemalloc does not) */
  case OP_PVALLOC: return memalign(page_size, round_up(size ? size : 1, page_size));
  default:  /* malloc, operator new and new[]; an aligned new as aligned memory */
    if (align) return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL : p;
    return malloc(size);
  }
}

/* Counters with one writer each (the owning thread), read by samplers in other threads. */
static void add_relaxed_i(_Atomic int64_t *c, int64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}
static void add_relaxed_u(_Atomic uint64_t *c, uint64_t d) {
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

static void replay_one(struct thread_state *me, const struct op *o) {
  unsigned char tag = (unsigned char)(o->obj * 151u + 7u);
  if (o->code == OP_FREE) {
    unsigned char *p = wait_for(o->obj);
    if (p && o->size && p[0] != (unsigned char)(o->obj * 151u + 7u))
      die(3, "record %u (free of the block of record %u): its contents changed while it was "
          "live (the allocator gave its memory to another block)", o->record, born_at[o->obj]);
    replay_call(o, p);
    add_relaxed_i(&me->live_bytes, -(int64_t)o->size);
    return;
  }
  void *old = NULL;
  if (o->old != NONE) {
    old = wait_for(o->old);
    unsigned char *q = old;
    if (q && o->old_size && q[0] != (unsigned char)(o->old * 151u + 7u))
      die(3, "record %u (realloc of the block of record %u): its contents changed while it "
          "was live", o->record, born_at[o->old]);
  }
  unsigned char *p = replay_call(o, old);
  if (!p && o->size)
    die(3, "record %u: %s(%llu) returned NULL under this allocator (it succeeded in the "
        "trace)", o->record, op_name(o->code), (unsigned long long)o->size);
  if (p && o->old != NONE && o->old_size && o->size && p[0] != (unsigned char)(o->old * 151u + 7u))
    die(3, "record %u: realloc did not keep the contents of the block of record %u",
        o->record, born_at[o->old]);
  if (p) touch(p, o->size, tag);
  /* the counts before the slot: a thread that frees the object counts after it */
  int64_t delta = (int64_t)o->size - (o->old != NONE ? (int64_t)o->old_size : 0);
  add_relaxed_i(&me->live_bytes, delta);
  add_relaxed_u(&me->allocations, 1);
  atomic_store_explicit(&slots[o->obj], p ? (void *)p : NULL_RESULT, memory_order_release);
}

static void *replay_thread(void *arg) {
  struct thread_state *me = arg;
  for (size_t i = 0; i < me->count; i++) {
    const struct op *o = &me->ops[i];
    if (ordered) {
      unsigned spins = 0;
      while (atomic_load_explicit(&next_rank, memory_order_acquire) != o->rank) {
        if (++spins < 64) __builtin_ia32_pause();
        else sched_yield();
      }
    }
    replay_one(me, o);
    if (ordered) {
      if (every && (o->rank + 1) % every == 0) take_sample();
      atomic_store_explicit(&next_rank, o->rank + 1, memory_order_release);
    } else if (every && (i + 1) % BATCH == 0) {
      uint64_t before = atomic_fetch_add_explicit(&ops_done, BATCH, memory_order_relaxed);
      if (before / every != (before + BATCH) / every) take_sample();
    }
  }
  return NULL;
}

/* ---- main ------------------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(void) {
  die(2, "usage: locus_replay [--check] [--lenient] [--ordered] [--profile FILE] "
      "[--every N] TRACE");
}

static void write_profile(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) die(2, "cannot write %s: %s", path, strerror(errno));
  char line[128];
  int n = snprintf(line, sizeof line, "allocations,live_bytes,held_bytes\n");
  bool ok = write(fd, line, (size_t)n) == n;
  size_t count = nsamples < max_samples ? nsamples : max_samples;
  for (size_t i = 0; i < count && ok; i++) {
    n = snprintf(line, sizeof line, "%llu,%lld,%lld\n", (unsigned long long)samples[i].allocations,
                 (long long)samples[i].live_bytes, (long long)samples[i].held_bytes);
    ok = write(fd, line, (size_t)n) == n;
  }
  if (close(fd) != 0 || !ok) die(2, "cannot write %s", path);
}

int main(int argc, char **argv) {
  bool check = false, lenient = false;
  const char *profile = NULL;
  long every_arg = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check = true;
    else if (!strcmp(argv[i], "--lenient")) lenient = true;
    else if (!strcmp(argv[i], "--ordered")) ordered = true;
    else if (!strcmp(argv[i], "--profile") && i + 1 < argc) profile = argv[++i];
    else if (!strcmp(argv[i], "--every") && i + 1 < argc) {
      char *end;
      every_arg = strtol(argv[++i], &end, 10);
      if (*end || every_arg < 1) usage();
    } else if (argv[i][0] == '-' || i != argc - 1) usage();
    else trace_path = argv[i];
  }
  if (!strcmp(trace_path, "?")) usage();
  page_size = (size_t)sysconf(_SC_PAGESIZE);

  int fd = open(trace_path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) die(2, "cannot read %s: %s", trace_path, strerror(errno));
  if ((size_t)st.st_size < HEADER_SIZE) die(2, "%s: not a Locus trace (too short)", trace_path);
  const unsigned char *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (file == MAP_FAILED) die(2, "cannot map %s: %s", trace_path, strerror(errno));
  uint32_t version, header_size, record_size, bom;
  memcpy(&version, file + 8, 4);
  memcpy(&header_size, file + 12, 4);
  memcpy(&record_size, file + 16, 4);
  memcpy(&bom, file + 20, 4);
  if (memcmp(file, "LOCUSTRC", 8) != 0) die(2, "%s: not a Locus trace (bad magic)", trace_path);
  if (version != 1) die(2, "%s: trace format version %u is not supported", trace_path, version);
  if (bom != 0x01020304u || record_size != RECORD_SIZE || header_size < HEADER_SIZE ||
      header_size > (size_t)st.st_size)
    die(2, "%s: unexpected byte order, header or record size", trace_path);
  size_t n = ((size_t)st.st_size - header_size) / RECORD_SIZE;
  if (n >= NONE) die(2, "%s: more than 2^32 records", trace_path);
  /* records are 8-byte aligned in the mapping when the header size is a multiple of 8 */
  struct record *rec = (struct record *)(file + header_size);
  if (header_size % 8) {
    rec = region(n * sizeof *rec);
    memcpy(rec, file + header_size, n * sizeof *rec);
  }

  struct prepared prep = {0};
  prepare(rec, n, lenient, &prep);
  munmap((void *)file, (size_t)st.st_size);
  if (header_size % 8) release_region(rec, n * sizeof *rec);

  printf("replay: records=%zu ops=%zu objects=%zu threads=%u failed_skipped=%zu "
         "unknown_releases_skipped=%zu overwritten_live=%zu peak_live_bytes=%llu "
         "live_bytes_at_exit=%llu live_objects_at_exit=%llu peak_live_objects=%llu "
         "bytes_allocated=%llu",
         n, prep.nops, prep.nobjects, nthreads, prep.failed, prep.skipped_releases,
         prep.leaked_overwritten, (unsigned long long)prep.peak_live_bytes,
         (unsigned long long)prep.live_bytes_at_exit, (unsigned long long)prep.live_objects_at_exit,
         (unsigned long long)prep.peak_live_objects, (unsigned long long)prep.bytes_allocated);
  if (check) {
    printf("\n");
    return 0;
  }
  fflush(stdout);

  slots = region(prep.nobjects * sizeof *slots);
  memset((void *)slots, 0, prep.nobjects * sizeof *slots);  /* touched now: in the baseline */
  every = every_arg ? (size_t)every_arg : (prep.nops / 1000 > BATCH ? prep.nops / 1000 : BATCH);
  if (!ordered && every % BATCH) every += BATCH - every % BATCH;
  max_samples = profile ? prep.nops / every + nthreads + 2 : 0;
  if (!profile) every = 0;
  samples = region(max_samples * sizeof *samples);
  memset(samples, 0, max_samples * sizeof *samples);

  base_pages = resident_pages();
  bool hwm_reset = reset_hwm();
  peak_sampled_pages = base_pages;
  if (every) take_sample();
  double start = now_s();
  if (nthreads <= 1) {
    if (nthreads) replay_thread(&threads[0]);
  } else {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (unsigned t = 0; t < nthreads; t++)
      if (pthread_create(&threads[t].handle, &attr, replay_thread, &threads[t]) != 0)
        die(3, "cannot start replay thread %u of %u", t, nthreads);
    for (unsigned t = 0; t < nthreads; t++) pthread_join(threads[t].handle, NULL);
  }
  double elapsed = now_s() - start;
  if (every) take_sample();
  long hwm_kib = status_kib("VmHWM:");
  long base_kib = base_pages * (long)(page_size / 1024);
  long held_peak_kib = hwm_reset ? hwm_kib - base_kib
      : (peak_sampled_pages - base_pages) * (long)(page_size / 1024);
  if (profile) write_profile(profile);
  printf(" replay_s=%.6f base_rss_kib=%ld hwm_kib=%ld held_peak_kib=%ld hwm_reset=%d "
         "end_rss_kib=%ld\n", elapsed, base_kib, hwm_kib, held_peak_kib < 0 ? 0 : held_peak_kib,
         hwm_reset, resident_pages() * (long)(page_size / 1024));
  return 0;
}
