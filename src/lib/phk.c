/* The PHK design as a complete malloc: liblocus-phk.so and its variants (phk-hw, phk-sc,
 * phk-reap, phk-sc-reap), which differ only in -D knobs (src/phk/phk.h). One translation unit so
 * the compiler specialises the building blocks for this design. */
#ifndef LOCUS_PAGES_FIRST_FIT
#define LOCUS_PAGES_FIRST_FIT 1      /* free page runs: address-ordered first fit (PHKmalloc) */
#endif
#include "../core/config.h"
#include "../core/print.h"
#include "../core/lock.h"
#include "../core/os.h"
#include "../core/options.h"
#include "../core/bitmap.h"
#include "../core/sizeclass.h"
#include "../core/pages.h"
#include "../phk/phk.h"
#include "../core/heap.h"
#include "../core/sites.h"
#include "../core/huge.h"
#include "../core/region.h"
#include "../phk/phk.c.h"
#include "../core/api.h"
