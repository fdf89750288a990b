/* alloc_loop.c — an allocation-intensive loop: `alloc_loop ITERATIONS [THREADS [FORK]]`.
 * Each thread keeps a ring of 256 live blocks of varied small sizes and replaces one per
 * iteration (one malloc and one free), so the allocator's fast paths dominate. With FORK=1
 * the main thread forks once halfway; the child does the same work and exits. Prints the
 * number of calls made, so a test can compare it with a trace. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long iterations;

static void *work(void *arg) {
  void *ring[256] = {0};
  unsigned x = (unsigned)(size_t)arg * 2654435761u + 1;
  for (long i = 0; i < iterations; i++) {
    x = x * 1103515245u + 12345u;
    size_t size = 8 + (x >> 16) % 248;
    unsigned slot = (unsigned)i & 255;
    free(ring[slot]);
    ring[slot] = malloc(size);
    memset(ring[slot], 1, 8);
  }
  for (int i = 0; i < 256; i++) free(ring[i]);
  return NULL;
}

int main(int argc, char **argv) {
  iterations = argc > 1 ? atol(argv[1]) : 1000000;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  int do_fork = argc > 3 ? atoi(argv[3]) : 0;
  if (do_fork) {
    pid_t pid = fork();
    if (pid == 0) { work((void *)99); exit(0); }
    waitpid(pid, NULL, 0);
  }
  pthread_t tid[64];
  if (threads > 64) threads = 64;
  for (int t = 1; t < threads; t++) pthread_create(&tid[t], NULL, work, (void *)(size_t)t);
  work((void *)0);
  for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
  printf("%ld\n", iterations * threads);
  return 0;
}
