/* vam.c.h — the Vam policy: page blocks, ordered per-size allocation, large areas. Types and
 * invariants are in vam.h. Included once, by the library's unity file (after the whole core,
 * src/core/locus.c.h), in this order: */
#include "vam_block.c.h"
#include "vam_harden.c.h"
#include "vam_tcache.c.h"
#include "vam_foreign.c.h"
#include "vam_slot.c.h"
#include "vam_large.c.h"
#include "vam_free.c.h"
#include "vam_hints.c.h"
#include "vam_quarantine.c.h"
#include "vam_hooks.c.h"
