// hints_cxx.cpp — include/locus.hpp's allocation near a hint: hint_allocator in both modes,
// the node containers over it (locus::list, map, set, unordered_map, ...), cursors, rebinding
// and container copies, allocator_traits' hinted allocate reaching locus_malloc_near, and
// under liblocus.so (vam) the page accuracy of a list built in implicit mode amid churn.
//
// Like every suite program this one is not linked against a Locus library: locus_malloc_near
// is a weak reference (locus.hpp) that the preloaded library fills in. Under glibc and the
// peers everything must work the same, with hints ignored; the accuracy checks are skipped.

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "locus.hpp"
#include "check.h"

static locus_api_t api;

// The loaded library's hint counters (zeros where there is no Locus library, or one whose
// statistics predate hints).
static locus_stats_t stats_now() {
  locus_stats_t s;
  memset(&s, 0, sizeof s);
  if (api.stats_get) {
    api.stats_get(&s);
    if (s.version < 4) memset(&s, 0, sizeof s);
  }
  return s;
}

static bool have_hint_stats() { return api.stats_get && stats_now().version >= 4; }

static bool is_vam() { return api.variant && strcmp(api.variant(), "vam") == 0; }

static uintptr_t page_of(const void *p) { return (uintptr_t)p >> 12; }

template <class T>
using xlist = std::list<T, locus::hint_allocator<T>>;  // explicit mode

// ---- containers in both modes --------------------------------------------------------------

template <class List>
static void exercise_list() {
  const int n = 6000;
  List l;
  for (int i = 0; i < n; i++) l.push_back(i);
  for (int i = 0; i < 100; i++) l.push_front(-1 - i);
  CHECK_EQ(l.size(), (size_t)n + 100);
  // erase every third element, then insert in the middle
  int k = 0;
  for (auto it = l.begin(); it != l.end();) it = (k++ % 3 == 0) ? l.erase(it) : std::next(it);
  auto mid = std::next(l.begin(), (long)l.size() / 2);
  for (int i = 0; i < 500; i++) l.insert(mid, 100000 + i);
  std::vector<int> want;
  {
    std::vector<int> all;
    for (int i = 99; i >= 0; i--) all.push_back(-1 - i);
    for (int i = 0; i < n; i++) all.push_back(i);
    for (size_t i = 0; i < all.size(); i++)
      if (i % 3 != 0) want.push_back(all[i]);
    auto pos = want.begin() + (long)want.size() / 2;
    std::vector<int> ins;
    for (int i = 0; i < 500; i++) ins.push_back(100000 + i);
    want.insert(pos, ins.begin(), ins.end());
  }
  CHECK(std::equal(l.begin(), l.end(), want.begin(), want.end()));

  List copy(l);
  CHECK(copy == l);
  List moved(std::move(copy));
  CHECK(moved == l);
  CHECK(copy.empty());
  List other;
  other.push_back(7);
  other.swap(moved);
  CHECK_EQ(moved.size(), 1);
  CHECK(other == l);
  moved = l;  // copy assignment over existing nodes
  CHECK(moved == l);
  other = std::move(moved);
  CHECK(other == l);
  l.sort(std::greater<int>());
  CHECK(std::is_sorted(l.begin(), l.end(), std::greater<int>()));
  l.unique();
  l.clear();
  CHECK(l.empty());
}

static void t_list() {
  exercise_list<xlist<int>>();
  exercise_list<locus::list<int>>();
}

// A map of strings against a reference std::map, through inserts, erases and lookups.
template <class Map>
static void exercise_map() {
  Map m;
  std::map<int, std::string> ref;
  test_rng_t r = {42};
  for (int i = 0; i < 20000; i++) {
    int key = (int)rng_below(&r, 8000);
    if (rng_below(&r, 4) == 0) {
      CHECK_EQ(m.erase(key), ref.erase(key));
    } else {
      std::string v = "value-" + std::to_string(key * 7) + std::string(key % 40, 'x');
      m[key] = v;
      ref[key] = v;
    }
  }
  CHECK_EQ(m.size(), ref.size());
  CHECK(std::equal(m.begin(), m.end(), ref.begin(), ref.end()));
  Map copy(m);
  Map moved(std::move(copy));
  Map other;
  other.swap(moved);
  CHECK(std::equal(other.begin(), other.end(), ref.begin(), ref.end()));
  for (auto &kv : ref) CHECK(other.at(kv.first) == kv.second);
  other.clear();
  m = other;
  CHECK(m.empty());
}

static void t_map() {
  exercise_map<std::map<int, std::string, std::less<int>,
                        locus::hint_allocator<std::pair<const int, std::string>>>>();
  exercise_map<locus::map<int, std::string>>();
  // set and multiset, multimap
  locus::set<int> s;
  locus::multiset<int> ms;
  locus::multimap<int, int> mm;
  std::multiset<int> ref;
  for (int i = 0; i < 5000; i++) {
    int k = (i * 7919) % 3001;
    s.insert(k);
    ms.insert(k);
    mm.emplace(k, i);
    ref.insert(k);
  }
  CHECK_EQ(ms.size(), ref.size());
  CHECK(std::equal(ms.begin(), ms.end(), ref.begin(), ref.end()));
  CHECK_EQ(s.size(), std::set<int>(ref.begin(), ref.end()).size());
  for (int k = 0; k < 3001; k += 2) {
    ms.erase(k);
    s.erase(k);
    mm.erase(k);
    ref.erase(k);
  }
  CHECK(std::equal(ms.begin(), ms.end(), ref.begin(), ref.end()));
  CHECK_EQ(mm.size(), ref.size());
  for (int k : s) CHECK(k % 2 == 1);
}

static void t_unordered() {
  locus::unordered_map<int, int> m;
  std::unordered_map<int, int, std::hash<int>, std::equal_to<int>,
                     locus::hint_allocator<std::pair<const int, int>>> x;
  locus::unordered_set<std::string> us;
  for (int i = 0; i < 30000; i++) {
    m[i * 3] = i;
    x.emplace(i, -i);
    if (i % 10 == 0) us.insert("k" + std::to_string(i));
  }
  for (int i = 0; i < 30000; i += 2) {
    m.erase(i * 3);
    x.erase(i);
  }
  m.rehash(100000);
  CHECK_EQ(m.size(), 15000);
  CHECK_EQ(x.size(), 15000);
  for (int i = 1; i < 30000; i += 2) {
    CHECK(m.at(i * 3) == i);
    CHECK(x.at(i) == -i);
  }
  CHECK(us.count("k100") == 1 && us.count("k101") == 0 && us.size() == 3000);
  auto copy = m;
  decltype(m) moved(std::move(copy));
  CHECK(moved == m);
  decltype(m) other;
  other.swap(moved);
  CHECK(other == m);
}

// ---- the allocator itself --------------------------------------------------------------------

struct node {
  node *next;
  long value;
  char pad[16];
};

static void t_traits_hint() {
  using A = locus::hint_allocator<node>;
  using traits = std::allocator_traits<A>;
  A a;
  node *first = traits::allocate(a, 1);
  first->value = 1;
  locus_stats_t before = stats_now();
  const int n = 1000;
  std::vector<node *> nodes;
  node *prev = first;
  for (int i = 0; i < n; i++) {
    node *p = traits::allocate(a, 1, prev);  // allocate(n, hint)
    CHECK(p != nullptr);
    CHECK_ALIGNED(p, test_quantum());
    p->value = i;
    prev->next = p;
    nodes.push_back(p);
    prev = p;
  }
  locus_stats_t after = stats_now();
  if (have_hint_stats()) {
    CHECKF(after.hint_calls - before.hint_calls >= (uint64_t)n,
           "%d hinted allocations counted as %llu hint calls", n,
           (unsigned long long)(after.hint_calls - before.hint_calls));
  }
  for (int i = 0; i < n; i++) CHECK_EQ(nodes[(size_t)i]->value, i);
  // explicit mode: allocate(n) is plain (no hint call); a null hint is plain too
  before = stats_now();
  node *plain = traits::allocate(a, 1);
  node *null_hint = traits::allocate(a, 1, nullptr);
  after = stats_now();
  CHECK_EQ(after.hint_calls, before.hint_calls);
  traits::deallocate(a, plain, 1);
  traits::deallocate(a, null_hint, 1);
  // arrays, zero sizes, and memory freed through another allocator (all are equal) or free()
  node *arr = traits::allocate(a, 64, first);
  memset(arr, 0, 64 * sizeof(node));
  locus::hint_allocator<int> b(a);
  CHECK(a == b);
  std::allocator_traits<locus::hint_allocator<int>>::deallocate(b, reinterpret_cast<int *>(arr), 64);
  int *zero = b.allocate(0);
  CHECK(zero != nullptr);
  free(zero);
  bool threw = false;
  try {
    (void)a.allocate(SIZE_MAX / 2);
  } catch (const std::bad_array_new_length &) {
    threw = true;
  }
  CHECK(threw);
  for (node *p : nodes) traits::deallocate(a, p, 1);
  traits::deallocate(a, first, 1);

  // implicit mode: allocate(1) hints with the previous single object
  locus::implicit_hint_allocator<node> im;
  CHECK(im.peek_hint() == nullptr);
  node *p0 = im.allocate(1);
  CHECK(im.peek_hint() == p0 && im.previous() == p0);
  before = stats_now();
  node *p1 = im.allocate(1);
  after = stats_now();
  CHECK(im.previous() == p1);
  if (have_hint_stats()) CHECK_EQ(after.hint_calls - before.hint_calls, 1);
  node *block = im.allocate(8);  // arrays neither hint nor become the previous allocation
  CHECK(im.previous() == p1 && im.peek_hint(8) == nullptr);
  im.deallocate(block, 8);
  im.deallocate(p1, 1);
  im.deallocate(p0, 1);
}

struct alignas(64) wide {
  char bytes[64];
};

static void t_state() {
  // rebinding copies the previous allocation and the cursor
  locus::hint_cursor cursor;
  locus::implicit_hint_allocator<node> a(cursor);
  node *p = a.allocate(1);
  locus::implicit_hint_allocator<long> b(a);
  CHECK(b.previous() == p && b.cursor() == &cursor);
  // a container's copy starts afresh but keeps the cursor
  auto c = std::allocator_traits<decltype(a)>::select_on_container_copy_construction(a);
  CHECK(c.previous() == nullptr && c.cursor() == &cursor);
  // a cursor hint is used once, by whichever allocator made from it allocates next, and
  // outranks the implicit hint
  cursor.set(p);
  CHECK(b.peek_hint() == p && c.peek_hint() == p);
  locus_stats_t before = stats_now();
  long *q = b.allocate(1);
  locus_stats_t after = stats_now();
  if (have_hint_stats()) CHECK_EQ(after.hint_calls - before.hint_calls, 1);
  CHECK(cursor.peek() == nullptr && c.peek_hint() == nullptr);
  CHECK(b.previous() == q);
  // explicit mode with a cursor: plain until the cursor holds a hint
  locus::hint_allocator<node> x(cursor);
  CHECK(x.peek_hint() == nullptr);
  cursor.set(q);
  CHECK(x.peek_hint() == q);
  node *r = x.allocate(1);
  CHECK(cursor.peek() == nullptr);
  x.deallocate(r, 1);
  b.deallocate(q, 1);
  a.deallocate(p, 1);

  // containers bound to a cursor: a tree hinted with the node at lower_bound (an ancestor)
  using amap = locus::map<int, int>;
  amap m{amap::allocator_type(cursor)};
  for (int i = 0; i < 3000; i++) {
    int key = (i * 7919) % 10007;
    auto it = m.lower_bound(key);
    if (it != m.end()) cursor.set(&*it);
    m.emplace(key, i);
    cursor.set(nullptr);
  }
  CHECK_EQ(m.size(), 3000);
  CHECK(m.get_allocator().cursor() == &cursor);
  // swap carries the allocators (and their state) with the nodes
  amap n;
  n.emplace(1, 1);
  m.swap(n);
  CHECK(m.size() == 1 && n.size() == 3000);
  CHECK(n.get_allocator().cursor() == &cursor && m.get_allocator().cursor() == nullptr);

  // over-aligned values
  locus::list<wide> lw;
  for (int i = 0; i < 200; i++) {
    lw.emplace_back();
    CHECK_ALIGNED(&lw.back(), 64);
    memset(&lw.back(), i, sizeof(wide));
  }
  int i = 0;
  for (auto &w : lw) CHECK_EQ(w.bytes[63], (char)i++);
}

// ---- accuracy under vam ---------------------------------------------------------------------

// A list built in implicit mode amid temporaries: per node, one object of the node's size
// and one of another size, each freed 4096 allocations later. vam puts each node in its
// predecessor's page block (or a neighbouring page's) when that has room. (Temporaries freed
// at random instead leave single holes in many blocks, each of which takes a node that the
// next node cannot follow: about 65% under vam, 14% under glibc.)
static void t_accuracy() {
  if (!have_hint_stats()) {
    test_note("skip: no Locus hint statistics (%s)\n",
              api.variant ? api.variant() : "not a Locus library");
    _exit(TEST_SKIP);
  }
  using L = locus::list<long>;  // nodes of 24 bytes: two links and the value
  const size_t node_size = 2 * sizeof(void *) + sizeof(long);
  L l;
  std::vector<void *> window(4096, nullptr);  // the temporaries, freed first in first out
  size_t oldest = 0;
  test_rng_t r = {7};
  const int n = 50000;
  l.push_back(0);
  locus_stats_t before = stats_now();
  std::vector<const long *> addr;
  addr.reserve(n);
  addr.push_back(&l.back());
  for (int i = 1; i < n; i++) {
    for (int k = 0; k < 2; k++) {
      free(window[oldest]);
      window[oldest] = malloc(k == 1 ? 16 + rng_below(&r, 200) : node_size);
      CHECK(window[oldest] != nullptr);
      oldest = (oldest + 1) % window.size();
    }
    l.push_back(i);
    addr.push_back(&l.back());
  }
  locus_stats_t after = stats_now();
  uint64_t calls = after.hint_calls - before.hint_calls;
  uint64_t same_page = after.hint_same_page - before.hint_same_page;
  CHECKF(calls >= (uint64_t)n - 1, "%d hinted pushes counted as %llu hint calls", n - 1,
         (unsigned long long)calls);
  // the same from the addresses: each node against its predecessor
  int same = 0;
  for (size_t i = 1; i < addr.size(); i++) same += page_of(addr[i]) == page_of(addr[i - 1]);
  double stats_acc = (double)same_page / (double)calls;
  double addr_acc = (double)same / (double)(addr.size() - 1);
  test_note("%s: page accuracy %.1f%% (statistics), %.1f%% (addresses), line %.1f%%\n",
            api.variant(), 100 * stats_acc, 100 * addr_acc,
            100.0 * (double)(after.hint_same_line - before.hint_same_line) / (double)calls);
  if (is_vam()) {
    CHECKF(stats_acc >= 0.90, "vam placed %.1f%% of hinted nodes on the hint's page", 100 * stats_acc);
    CHECKF(addr_acc >= 0.90, "%.1f%% of the nodes share their predecessor's page", 100 * addr_acc);
  }
  long want = 0;
  for (long v : l) CHECK_EQ(v, want++);
  for (void *p : window) free(p);
}

int main(int argc, char **argv) {
  locus_api_require(&api);
  static const test_section_t sections[] = {
      {"list", t_list},           {"map", t_map},     {"unordered", t_unordered},
      {"traits_hint", t_traits_hint}, {"state", t_state}, {"accuracy", t_accuracy},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
