/* locus.c.h — one library, in one translation unit: the core's layers in order (README.md),
 * the design's header after the layers it builds on, and the design's policy last. A unity
 * file (src/lib/<design>.c) names the design and includes this file:
 *
 *   #define LOCUS_DESIGN_HEADER "../vam/vam.h"      the design's vocabulary: design_heap_t, ...
 *   #define LOCUS_DESIGN_POLICY "../vam/vam.c.h"    the design's policy: the contract's hooks
 *   #include "../core/locus.c.h"
 *
 * The core reaches the design only through the hooks declared in internal.h; the design calls
 * whatever the core offers. */
#ifndef LOCUS_DESIGN_HEADER
#error "a unity file defines LOCUS_DESIGN_HEADER and LOCUS_DESIGN_POLICY before including locus.c.h"
#endif

/* Foundations: knobs, output, locks, the OS, options, bit and size-class helpers. */
#include "config.h"
#include "mitigations.h"
#include "print.h"
#include "lock.h"
#include "os.h"
#include "options.h"
#include "bitmap.h"
#include "sizeclass.h"
/* Pages: descriptors and segments; the list of descriptors. */
#include "pages.h"
#include "list.h"
/* The design's vocabulary, then the module map and the design contract. */
#include LOCUS_DESIGN_HEADER
#include "internal.h"
#include "stats_fields.h"
/* Heaps and the memory under them. */
#include "state.h"
#include "pagemgr.h"
#include "heap.h"
#include "osobj.h"
#include "reclaim.h"
#include "unwind.h"
#include "sites.h"
#include "init.h"
#include "huge.h"
#include "region.h"
#include "region_engine.h"
#include "region_api.h"
/* The operations every design shares, over the contract. */
#include "free.h"
#include "stats.h"
#include "api.h"
#include "copy.h"
/* The design's policy: the hooks. */
#include LOCUS_DESIGN_POLICY
