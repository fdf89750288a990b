/* The PHK design as a complete malloc: liblocus-phk.so and its variants (phk-hw, phk-sc,
 * phk-reap, phk-sc-reap), which differ only in -D knobs (src/phk/phk.h). One translation unit so
 * the compiler specialises the building blocks for this design. */
#ifndef LOCUS_PAGES_FIRST_FIT
#define LOCUS_PAGES_FIRST_FIT 1      /* free page runs: address-ordered first fit (PHKmalloc) */
#endif
#define LOCUS_DESIGN_HEADER "../phk/phk.h"
#define LOCUS_DESIGN_POLICY "../phk/phk.c.h"
#include "../core/locus.c.h"
