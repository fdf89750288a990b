/* The LF design (seed 002) as a complete malloc: liblocus-pow2.so (its baseline, standard
 * power-of-two bins, LOCUS_LF=0), liblocus-lf.so and its debug build (LOCUS_LF=1). One
 * translation unit so the compiler specialises the building blocks for this design. */
#include "../core/config.h"
#include "../core/print.h"
#include "../core/lock.h"
#include "../core/os.h"
#include "../core/options.h"
#include "../core/bitmap.h"
#include "../core/sizeclass.h"
#include "../core/pages.h"
#include "../lf/lf.h"
#include "../core/heap.h"
#include "../core/sites.h"
#include "../core/huge.h"
#include "../core/region.h"
#include "../lf/lf.c.h"
#include "../core/api.h"
