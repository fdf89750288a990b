/* The Medius design as a complete malloc: liblocus-medius.so (and its debug build). One
 * translation unit so the compiler specialises the building blocks for this design. */
#define LOCUS_DESIGN_HEADER "../medius/medius.h"
#define LOCUS_DESIGN_POLICY "../medius/medius.c.h"
#include "../core/locus.c.h"
