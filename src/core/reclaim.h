/* reclaim.h — giving pages back: a run returned to its page manager, after which the clocks
 * every heap shares run (the sweep of abandoned heaps and the huge-object pool's decay); a
 * design's block going back; the free runs a thread keeps for reuse (regions' chunks),
 * released when it exits. */
#ifndef LOCUS_RECLAIM_H
#define LOCUS_RECLAIM_H

/* The decay clocks shared by all heaps, run with no lock held: the sweep of heaps nobody owns
 * (delayed policy) and the huge-object pool's (its own rule, whatever the policy). */
static void pages_shared_decay(uint64_t now) {
  if (opt.discard == DISCARD_DELAYED) heap_sweep_abandoned(now);
  huge_cache_tick();
}

/* Returns run r to h's free pages and applies the discard policy. With p, r is a huge run
 * another thread frees: checked under the lock to still be p's live run, so of two racing
 * frees of p one is reported. */
static void pages_free_checked(heap_t *h, desc_t *r, const void *p, const char *call) {
  uint64_t now = now_ms();
  lock_acquire(&h->pages_lock);
  if (p && (r->kind != KIND_HUGE || p != huge_user(r))) {
    const char *what = r->kind == KIND_FREE ? "double free" : "invalid pointer";
    lock_release(&h->pages_lock);
    locus_fatal(call, what, p);
  }
  pages_give(h, r);
  pages_policy_locked(h, now);
  lock_release(&h->pages_lock);
  pages_shared_decay(now);
}

static void pages_free(heap_t *h, desc_t *r) { pages_free_checked(h, r, NULL, NULL); }

/* The discard policy when the design freed memory it keeps (caller owns h). */
__attribute__((unused)) static void pages_policy(heap_t *h) {
  if (!__atomic_load_n(&h->pages.dirty_oldest, __ATOMIC_RELAXED)) return;
  uint64_t now = now_ms();
  lock_acquire(&h->pages_lock);
  pages_policy_locked(h, now);
  lock_release(&h->pages_lock);
  pages_shared_decay(now);
}

/* A design's block or large area goes back to the page manager. */
static void block_release(heap_t *h, desc_t *r) {
  h->stats.blocks_in_use--;
  pages_free(h, r);
}

static void pages_shrink(heap_t *h, desc_t *r, size_t n) {
  size_t have = r->npages;
  if (n >= have) return;
  /* Outside the lock: these pages are the caller's, and another thread's merge reads only
   * free runs' descriptors (these stay KIND_INTERIOR until pages_free). */
  desc_t *tail = r + n;
  r->npages = (uint16_t)n;
  tail->npages = (uint16_t)(have - n);
  tail->back = 0;
  tail->kind = KIND_INTERIOR;
  pages_free(h, tail);
}

/* A free emptied block b of a design whose blocks of a class are on one list (*head): kept
 * when block_keep_empty (list.h) says so, else unlinked and released. */
UNUSED static void block_emptied(heap_t *h, desc_t **head, desc_t *b) {
  if (!block_keep_empty(*head, b)) {
    desc_list_remove(head, b);
    block_release(h, b);
  }
  heap_debug_tick(h);
}

/* Gives back the free runs h kept for reuse (regions' chunks, region_engine.h): at thread
 * exit and on locus_purge. */
static void heap_release_kept_runs(heap_t *h) {
  while (h->nchunks) {
    desc_t *d = h->chunks[--h->nchunks];
    heap_t *owner = desc_segment(d)->heap;
    if (!owner->fork_broken) pages_free(owner, d);
  }
  h->chunk_bytes = 0;
}


#endif
