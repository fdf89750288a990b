/* live_table.h — the tracer's summary mode: the bytes live by address, in mmap'd
 * open-addressing tables, and the live and peak totals. Included once, by locus_tracer.c (the
 * lab compiles the tracer from its folder: this file travels with it). */
#ifndef LOCUS_TRACER_LIVE_TABLE_H
#define LOCUS_TRACER_LIVE_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

/* The address space is split over STRIPES tables, each under its own mutex, so threads
 * rarely wait for each other; the live totals are global atomics, and every change to them
 * happens while the block's stripe is locked, before a release reaches the allocator and
 * after an allocation returns, so their sequence is one the program could have produced and
 * the peak is exact. */

#define STRIPES 64
struct stripe {
  pthread_mutex_t lock;
  struct slot { uint64_t addr, size; } *table;
  size_t cap, used;
  uint64_t allocs, frees, bytes, unknown_frees;
} __attribute__((aligned(64)));
static struct stripe stripes[STRIPES];
static _Atomic int64_t sum_live, sum_objects;
static _Atomic uint64_t sum_peak_live, sum_peak_objects, sum_failed;

static size_t slot_of(uint64_t addr, size_t cap) {
  return (size_t)((addr >> 4) * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
}

static struct stripe *stripe_of(uint64_t addr) {
  return &stripes[((addr >> 4) * 0xD6E8FEB86659FD93ull >> 58) & (STRIPES - 1)];
}

static void raise_peak(_Atomic uint64_t *peak, int64_t value) {
  uint64_t v = value > 0 ? (uint64_t)value : 0, old = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > old && !atomic_compare_exchange_weak(peak, &old, v)) {}
}

static void add_live(int64_t bytes, int64_t objects) {
  int64_t live = atomic_fetch_add(&sum_live, bytes) + bytes;
  int64_t count = atomic_fetch_add(&sum_objects, objects) + objects;
  if (bytes > 0) raise_peak(&sum_peak_live, live);
  if (objects > 0) raise_peak(&sum_peak_objects, count);
}

static bool stripe_grow(struct stripe *st) {
  size_t cap = st->cap ? st->cap * 2 : 1024;
  struct slot *t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) return false;
  for (size_t i = 0; i < st->cap; i++) {
    if (!st->table[i].addr) continue;
    size_t j = slot_of(st->table[i].addr, cap);
    while (t[j].addr) j = (j + 1) & (cap - 1);
    t[j] = st->table[i];
  }
  if (st->table) munmap(st->table, st->cap * sizeof *st->table);
  st->table = t;
  st->cap = cap;
  return true;
}

/* Both run with the stripe of `addr` locked. Insert returns false when the table could not
 * grow (no memory for it): the block is then not recorded. */
static bool stripe_insert(struct stripe *st, uint64_t addr, uint64_t size) {
  st->allocs++;
  st->bytes += size;
  if (2 * (st->used + 1) > st->cap && !stripe_grow(st)) return false;
  size_t j = slot_of(addr, st->cap);
  while (st->table[j].addr && st->table[j].addr != addr) j = (j + 1) & (st->cap - 1);
  if (st->table[j].addr) { /* handed out twice: we missed its release */
    add_live(-(int64_t)st->table[j].size, -1);
  } else {
    st->used++;
  }
  st->table[j].addr = addr;
  st->table[j].size = size;
  add_live((int64_t)size, 1);
  return true;
}

static void stripe_remove(struct stripe *st, uint64_t addr) {
  st->frees++;
  if (!st->cap) { st->unknown_frees++; return; }
  size_t mask = st->cap - 1, j = slot_of(addr, st->cap);
  while (st->table[j].addr && st->table[j].addr != addr) j = (j + 1) & mask;
  if (!st->table[j].addr) { st->unknown_frees++; return; }
  add_live(-(int64_t)st->table[j].size, -1);
  st->used--;
  /* Backward-shift deletion keeps every probe chain unbroken without tombstones. */
  size_t hole = j;
  for (size_t k = (j + 1) & mask; st->table[k].addr; k = (k + 1) & mask) {
    size_t home = slot_of(st->table[k].addr, st->cap);
    bool movable = hole <= k ? (home <= hole || home > k) : (home <= hole && home > k);
    if (movable) {
      st->table[hole] = st->table[k];
      hole = k;
    }
  }
  st->table[hole].addr = 0;
  st->table[hole].size = 0;
}

static void lock_all_stripes(void) { for (int i = 0; i < STRIPES; i++) pthread_mutex_lock(&stripes[i].lock); }
static void unlock_all_stripes(void) { for (int i = STRIPES; i-- > 0;) pthread_mutex_unlock(&stripes[i].lock); }

#endif
