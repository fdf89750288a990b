/* The Vam design as a complete malloc: liblocus.so (and its debug and ablation builds, which
 * differ only in -D knobs). One translation unit so the compiler specialises the building
 * blocks for this design. */
#include "../core/config.h"
#include "../core/print.h"
#include "../core/lock.h"
#include "../core/os.h"
#include "../core/options.h"
#include "../core/bitmap.h"
#include "../core/sizeclass.h"
#include "../core/pages.h"
#include "../vam/vam.h"
#include "../core/heap.h"
#include "../core/sites.h"
#include "../core/huge.h"
#include "../core/region.h"
#include "../vam/vam.c.h"
#include "../core/api.h"
