/* crash_under.c — `crash_under WORD`: dies with SIGSEGV when LD_PRELOAD contains WORD, else
 * allocates a little and exits 0. Lets a test make one allocator "crash". */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  const char *preload = getenv("LD_PRELOAD");
  if (argc > 1 && preload && strstr(preload, argv[1])) raise(SIGSEGV);
  for (int i = 0; i < 1000; i++) free(malloc(64 + i));
  return 0;
}
