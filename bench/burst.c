/* burst — allocate a large burst, release it, keep working: is memory returned to the OS?
 *
 * Models programs with a phase of heavy allocation followed by a long quieter phase: loading
 * and parsing a large input, a compiler's per-function peak, a server after a traffic spike.
 * The most common complaint about malloc replacements is that memory freed after such a peak
 * never goes back; this workload measures it.
 *
 * Each round:
 *  1. burst: allocate about BURST_MIB MiB in objects of mixed sizes, roughly a third of the
 *     bytes each in small (8..256 B), medium (257 B..32 KiB) and large (32 KiB..1 MiB)
 *     objects, interleaved, every byte written;
 *  2. release: free all but 2% of them: runs of 4096 consecutively allocated objects, one
 *     run in every 50, spread over the whole burst (a program's long-lived data is allocated
 *     together, e.g. one structure built during the peak). They pin some pages, as a real
 *     program's long-lived objects do; an allocator that mixes objects of different ages on
 *     a page pins more. (Survivors chosen one by one at random would pin every small-object
 *     page of every allocator and hide the differences.)
 *  3. work: churn a small working set of small objects for a while (the quiet phase).
 * After the last round it prints its resident set size (from /proc/self/statm) at the peak,
 * right after the release and after the quiet phase, one `key=value` per line:
 *   rss_start_kib, rss_peak_kib, hwm_kib (the kernel's VmHWM), rss_after_free_kib,
 *   rss_after_release_kib, live_kib (bytes the program still holds, for comparison)
 * and then the usual result line. Memory figures depend on the allocator; the checksum does
 * not.
 *
 * usage: burst [scale]     rounds = scale
 */
#include "bench_util.h"

enum {
  BURST_MIB = 300,                /* bytes requested per burst */
  SURVIVE_PER_MILLE = 20,         /* share of burst objects that stay live (2%) ... */
  SURVIVOR_RUN = 4096,            /* ... in runs of this many consecutive allocations, */
  SURVIVOR_PHASE = 17,            /* the 17th run of every 50 */
  WORK_SLOTS = 20000,             /* quiet phase working set */
  WORK_OPS = 16000000,            /* quiet phase operations per round */
};

typedef struct {
  void *p;
  size_t size;
  uint64_t tag;
} object;

/* Object i of a round: its tag, and from the tag its size. Weights balance the bytes between
 * the three classes (mean sizes about 52 B, 6.7 KiB and 290 KiB). */
static size_t object_size(uint64_t tag) {
  uint64_t r = tag % 1000000;
  uint64_t v = tag >> 20;
  if (r < 180) {                                   /* large: 32 KiB .. 1 MiB, log-spread */
    unsigned shift = (unsigned)(v % 5);            /* 32K << 0..4 */
    size_t lo = (size_t)32768 << shift;
    return lo + (size_t)((v >> 8) % lo);
  }
  if (r < 180 + 7700) {                            /* medium: 257 B .. 32 KiB, log-spread */
    unsigned shift = (unsigned)(v % 7);            /* 256 << 0..6 */
    size_t lo = (size_t)256 << shift;
    return lo + 1 + (size_t)((v >> 8) % lo);
  }
  /* small: skewed toward small as in bench_small_size */
  uint64_t c = v % 100, w = v >> 8;
  if (c < 50) return 8 + (size_t)(w % 25);
  if (c < 80) return 33 + (size_t)(w % 32);
  if (c < 95) return 65 + (size_t)(w % 64);
  return 129 + (size_t)(w % 128);
}

static uint64_t burst_tag(long round, size_t i) {
  return bench_mix(((uint64_t)round << 40) ^ i ^ 0xb0b0);
}

/* Survivors: runs of SURVIVOR_RUN consecutive objects, the SURVIVOR_PHASE-th of every
 * PERIOD runs. survivor_index maps the k-th survivor back to its burst index. */
enum { PERIOD = 1000 / SURVIVE_PER_MILLE };

static int is_survivor(size_t i) {
  return (i / SURVIVOR_RUN) % PERIOD == SURVIVOR_PHASE;
}

static size_t survivor_index(size_t k) {
  return ((k / SURVIVOR_RUN) * PERIOD + SURVIVOR_PHASE) * SURVIVOR_RUN + k % SURVIVOR_RUN;
}

static void free_survivors(void **p, size_t n, long round, uint64_t *sum) {
  for (size_t k = 0; k < n; k++) {
    uint64_t tag = burst_tag(round, survivor_index(k));
    size_t size = object_size(tag);
    bench_check(p[k], size, tag, "survivor", k);
    *sum = bench_fold(*sum, tag);
    free(p[k]);
  }
  free(p);
}

int main(int argc, char **argv) {
  bench_name = "burst";
  long rounds = bench_scale_arg(argc, argv, 1, "[scale]");
  bench_rng rng;
  bench_rng_seed(&rng, 0xb0257);
  uint64_t sum = 0;
  long rss_start = bench_rss_kib(), rss_peak = 0, rss_after_free = 0, rss_after_release = 0;
  size_t live_bytes = 0;

  void **survivors = NULL;
  size_t nsurvivors = 0;
  long survivors_round = 0;
  object *work = bench_malloc(sizeof(object) * WORK_SLOTS);
  uint64_t serial = 0;
  for (size_t i = 0; i < WORK_SLOTS; i++) {
    work[i].size = bench_small_size(&rng);
    work[i].p = bench_malloc(work[i].size);
    work[i].tag = bench_mix(++serial);
    bench_fill(work[i].p, work[i].size, work[i].tag);
  }

  for (long round = 0; round < rounds; round++) {
    /* 1. burst. Only pointers are kept (8 bytes an object); tag and size are recomputed from
     * the index, so the bookkeeping adds little to the RSS being measured. */
    size_t cap = 1 << 20, n = 0, total = 0;
    void **ptrs = bench_malloc(sizeof(void *) * cap);
    const size_t target = (size_t)BURST_MIB << 20;
    while (total < target) {
      if (n == cap) {
        cap *= 2;
        void **q = realloc(ptrs, sizeof(void *) * cap);
        if (q == NULL) bench_die("realloc of the pointer table failed");
        ptrs = q;
      }
      uint64_t tag = burst_tag(round, n);
      size_t size = object_size(tag);
      ptrs[n] = bench_malloc(size);
      bench_fill(ptrs[n], size, tag);
      total += size;
      n++;
    }
    long rss = bench_rss_kib();
    if (rss > rss_peak) rss_peak = rss;

    /* the previous round's survivors die now, while this burst is live */
    free_survivors(survivors, nsurvivors, survivors_round, &sum);
    survivors = NULL;
    nsurvivors = 0;

    /* 2. release all but the survivor runs. Survivors are compacted to the front of the
     * pointer table, which then shrinks: no new bookkeeping block is allocated after the
     * burst (one placed above the freed memory would pin it in a sbrk heap and measure the
     * benchmark rather than the allocator). Survivor k is burst object survivor_index(k). */
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
      uint64_t tag = burst_tag(round, i);
      size_t size = object_size(tag);
      bench_check(ptrs[i], size, tag, "burst object", i);
      sum = bench_fold(sum, tag ^ size);
      if (is_survivor(i)) {
        if (survivor_index(keep) != i) bench_die("survivor bookkeeping broken");
        ptrs[keep++] = ptrs[i];
      } else {
        free(ptrs[i]);
      }
    }
    if (keep > 0) {
      void **q = realloc(ptrs, sizeof(void *) * keep);
      if (q == NULL) bench_die("shrinking realloc of the pointer table failed");
      ptrs = q;
    } else {
      free(ptrs);
      ptrs = NULL;
    }
    survivors = ptrs;
    nsurvivors = keep;
    survivors_round = round;
    rss_after_free = bench_rss_kib();

    /* 3. the quiet phase */
    for (uint64_t k = 0; k < WORK_OPS; k++) {
      object *o = &work[bench_rng_below(&rng, WORK_SLOTS)];
      bench_check(o->p, o->size, o->tag, "work object", k);
      free(o->p);
      o->size = bench_small_size(&rng);
      o->p = bench_malloc(o->size);
      o->tag = bench_mix(++serial);
      bench_fill(o->p, o->size, o->tag);
    }
    rss_after_release = bench_rss_kib();
  }

  live_bytes = 0;
  for (size_t k = 0; k < nsurvivors; k++)
    live_bytes += object_size(burst_tag(survivors_round, survivor_index(k)));
  for (size_t i = 0; i < WORK_SLOTS; i++) live_bytes += work[i].size;
  long hwm = bench_status_kib("VmHWM");

  printf("rss_start_kib=%ld\n", rss_start);
  printf("rss_peak_kib=%ld\n", rss_peak);
  printf("hwm_kib=%ld\n", hwm);
  printf("rss_after_free_kib=%ld\n", rss_after_free);
  printf("rss_after_release_kib=%ld\n", rss_after_release);
  printf("live_kib=%zu\n", live_bytes / 1024);

  free_survivors(survivors, nsurvivors, survivors_round, &sum);
  for (size_t i = 0; i < WORK_SLOTS; i++) {
    bench_check(work[i].p, work[i].size, work[i].tag, "work object", i);
    sum = bench_fold(sum, work[i].tag);
    free(work[i].p);
  }
  free(work);
  printf("burst: scale=%ld burst_mib=%d survivors=%zu checksum=%016llx\n", rounds, BURST_MIB,
         nsurvivors, (unsigned long long)sum);
  return 0;
}
