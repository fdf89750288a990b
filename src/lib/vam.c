/* The Vam design as a complete malloc: liblocus.so (and its debug and ablation builds, which
 * differ only in -D knobs). One translation unit so the compiler specialises the building
 * blocks for this design. */
#define LOCUS_DESIGN_HEADER "../vam/vam.h"
#define LOCUS_DESIGN_POLICY "../vam/vam.c.h"
#include "../core/locus.c.h"
