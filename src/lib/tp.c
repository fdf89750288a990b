/* The TP design (seed 001) as a complete malloc: liblocus-tp.so and its debug build. One
 * translation unit so the compiler specialises the building blocks for this design. */
#define LOCUS_DESIGN_HEADER "../tp/tp.h"
#define LOCUS_DESIGN_POLICY "../tp/tp.c.h"
#include "../core/locus.c.h"
