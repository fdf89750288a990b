/* region_drag — a region-style program for object drag: each phase allocates objects into a
 * "region" (an array of pointers), uses every object only while it is being built, and frees
 * the whole region at the phase's end. One object in four is used again at the end of the
 * phase; the rest carry drag from their last use until the bulk free.
 * usage: region_drag [phases] [objects per phase] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int phases = argc > 1 ? atoi(argv[1]) : 8;
    int count = argc > 2 ? atoi(argv[2]) : 2000;
    char **region = malloc(sizeof *region * (size_t)count);
    unsigned long sum = 0;
    for (int p = 0; p < phases; p++) {
        for (int i = 0; i < count; i++) {
            size_t n = 32 + (size_t)(i * 7 % 97);
            region[i] = malloc(n);
            memset(region[i], i & 0xff, n);
        }
        for (int i = 0; i < count; i += 4)
            sum += (unsigned char)region[i][1];
        for (int i = 0; i < count; i++)
            free(region[i]);
    }
    free(region);
    printf("region_drag: phases=%d objects=%d sum=%lu\n", phases, count, sum);
    return 0;
}
