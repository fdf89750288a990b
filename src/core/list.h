/* list.h — the doubly linked list of descriptors (linked through next and prev, NULL at both
 * ends) that the page manager's bins and the designs' per-class lists share, and the policy
 * for a block a free emptied, for the designs that keep such lists. */
#ifndef LOCUS_LIST_H
#define LOCUS_LIST_H

/* Inserts d into *head after `below` (NULL: at the front). */
static inline void desc_list_insert(desc_t **head, desc_t *below, desc_t *d) {
  d->prev = below;
  d->next = below ? below->next : *head;
  if (d->next) d->next->prev = d;
  if (below) below->next = d; else *head = d;
}

static inline void desc_list_push(desc_t **head, desc_t *d) { desc_list_insert(head, NULL, d); }

static inline void desc_list_remove(desc_t **head, desc_t *d) {
  if (d->prev) d->prev->next = d->next; else *head = d->next;
  if (d->next) d->next->prev = d->prev;
}

/* A free emptied block b, on the list that starts at head: kept when it is alone there and the
 * discard policy is not immediate (so that one object allocated and freed in a loop does not
 * take and return pages each time); otherwise the design unlinks it and releases it
 * (block_emptied, reclaim.h, does both for a design whose blocks of a class are on one list). */
static inline bool block_keep_empty(const desc_t *head, const desc_t *b) {
  return opt.discard != DISCARD_IMMEDIATE && head == b && !b->next;
}

#endif
