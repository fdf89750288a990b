/* The LF design (seed 002) as a complete malloc: liblocus-pow2.so (its baseline, standard
 * power-of-two bins, LOCUS_LF=0), liblocus-lf.so and its debug build (LOCUS_LF=1). One
 * translation unit so the compiler specialises the building blocks for this design. */
#define LOCUS_DESIGN_HEADER "../lf/lf.h"
#define LOCUS_DESIGN_POLICY "../lf/lf.c.h"
#include "../core/locus.c.h"
