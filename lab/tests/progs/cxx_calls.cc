// cxx_calls.cc — known C++ allocations for the tracer test (compile with -O0, so the
// compiler keeps every new/delete pair). Prints each block's address as "name address".
#include <cstdio>
#include <new>

struct alignas(64) Aligned { char bytes[100]; };

int main() {
  int *a = new int(5);
  std::printf("new %lx\n", (unsigned long)a);
  int *b = new int[10];
  std::printf("new[] %lx\n", (unsigned long)b);
  Aligned *c = new Aligned;
  std::printf("new_aligned %lx\n", (unsigned long)c);
  delete a;
  delete[] b;
  delete c;
  try {
    char *huge = new char[(size_t)1 << 60];
    delete[] huge;
  } catch (const std::bad_alloc &) {
    std::puts("bad_alloc");
  }
  return 0;
}
