// regions_cxx.cpp — the C++ wrappers of include/locus.hpp over the region API: std containers
// through region_allocator, std::pmr containers through region_resource, make<T> destructors,
// children, moves, over-aligned types.
//
// Like every suite program this one is not linked against a Locus library: the region calls
// are weak references that the preloaded library fills in. Where nothing defines them (glibc,
// the peers) the whole program is skipped.

#include <cstdint>
#include <map>
#include <memory_resource>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "locus.hpp"
#include "regions.h"   // check.h, and the region calls as weak references

template <class T>
using rvector = std::vector<T, locus::region_allocator<T>>;
using rmap = std::map<int, int, std::less<int>, locus::region_allocator<std::pair<const int, int>>>;

static uint64_t live(const locus::region &r) { return r.stats().objects_live; }

// Destructor bookkeeping for make<T>: each destroyed object appends its id.
static int destroyed_ids[256];
static int destroyed;

struct counted {
  int id;
  explicit counted(int i = -1) : id(i) {}
  ~counted() {
    if (destroyed < 256) destroyed_ids[destroyed] = id;
    destroyed++;
  }
};

struct alignas(64) line {
  unsigned char bytes[64];
};

// ---- sections -------------------------------------------------------------------------------

static void t_vector() {
  locus::region r;
  rvector<int> v(r);
  for (int i = 0; i < 100000; i++) {
    v.push_back(i);
    CHECK(locus_region_of(v.data()) == r.get());
  }
  CHECK_ALIGNED(v.data(), test_quantum());
  for (int i = 0; i < 100000; i++) CHECK_EQ(v[(size_t)i], i);
  // every outgrown buffer went back to the region
  locus_region_stats_t s = r.stats();
  CHECK_EQ(s.objects_live, 1);
  CHECK_GE(s.bytes_live, v.capacity() * sizeof(int));
  CHECK_EQ(s.bump_mode, 0);
  v.clear();
  v.shrink_to_fit();
  CHECK_EQ(live(r), 0);
}

static void t_map_reuse() {
  locus::region r;
  rmap m(r);
  const int n = 10000;
  for (int i = 0; i < n; i++) m.emplace(i, i);
  CHECK_EQ(live(r), (size_t)n);
  uint64_t held = 0;
  for (int round = 0; round < 40; round++) {
    // erase the lower half of the keys and insert as many above: the new nodes take the
    // erased nodes' space, so after the first round the region holds no more memory
    for (int i = 0; i < n / 2; i++) m.erase(m.begin());
    int top = m.rbegin()->first;
    for (int i = 1; i <= n / 2; i++) m.emplace(top + i, i);
    locus_region_stats_t s = r.stats();
    CHECK_EQ(s.objects_live, m.size());
    if (round == 0) held = s.bytes_held;
    CHECKF(s.bytes_held <= held, "round %d: the region holds %llu bytes, %llu after round 0",
           round, (unsigned long long)s.bytes_held, (unsigned long long)held);
  }
  CHECK_EQ(m.size(), (size_t)n);
  CHECK_GE(r.stats().frees, 40u * (n / 2));
  m.clear();
  CHECK_EQ(live(r), 0);
}

static void t_pmr() {
  locus::region r;
  locus::region_resource res(r);
  const std::string text(100, 'x');  // longer than any small-string buffer
  {
    std::pmr::vector<int> v(&res);
    for (int i = 0; i < 10000; i++) v.push_back(i);
    CHECK(locus_region_of(v.data()) == r.get());
    CHECK_EQ(live(r), 1);

    // the map hands its resource to the strings it holds (uses-allocator construction)
    std::pmr::map<int, std::pmr::string> m(&res);
    for (int i = 0; i < 1000; i++) m.emplace(i, text.c_str());
    for (auto &kv : m) {
      CHECK(locus_region_of(kv.second.data()) == r.get());
      CHECK(kv.second == text.c_str());
    }
    CHECK_EQ(live(r), 1 + 2 * 1000);
    for (int i = 0; i < 1000; i += 2) m.erase(i);
    CHECK_EQ(live(r), 1 + 2 * 500);  // do_deallocate freed node and string

    std::pmr::string s(&res);
    for (int i = 0; i < 100; i++) s += text;
    CHECK(locus_region_of(s.data()) == r.get());
    CHECK_EQ(s.size(), 100 * text.size());
    m.clear();
    v = std::pmr::vector<int>(&res);
    CHECK_EQ(live(r), 1);
  }
  CHECK_EQ(live(r), 0);

  // strings made and dropped over and over live in the space of the first one
  uint64_t held = 0;
  for (int i = 0; i < 10000; i++) {
    std::pmr::string t(text.c_str(), &res);
    t += t;
    if (i == 0) held = r.stats().bytes_held;
  }
  CHECK_EQ(r.stats().bytes_held, held);
  CHECK_EQ(live(r), 0);

  locus::region other;
  locus::region_resource same(r.get()), different(other);
  CHECK(res == same);
  CHECK(res.is_equal(same));
  CHECK(!(res == different));
  CHECK(!res.is_equal(*std::pmr::new_delete_resource()));
  // equal resources may free each other's memory
  void *p = res.allocate(48);
  same.deallocate(p, 48);
  CHECK_EQ(live(r), 0);
  // 0 bytes still gives a distinct region object
  void *z1 = res.allocate(0), *z2 = res.allocate(0);
  CHECK(z1 && z2 && z1 != z2);
  res.deallocate(z1, 0);
  res.deallocate(z2, 0);
}

static void t_children() {
  locus::region parent;
  {
    locus::region child(parent);
    CHECK_EQ(parent.stats().children, 1);
    for (int i = 0; i < 10; i++) child.make<counted>(i);
    void *p = child.allocate(100);
    CHECK(locus_region_of(p) == child.get());
    CHECK(locus_region_of(p) != parent.get());
    parent.clear();
    CHECK_EQ(destroyed, 10);
    CHECK(!child);  // the parent destroyed it; this object's destructor must not again
    CHECK_EQ(parent.stats().children, 0);
  }
  {
    // the child object goes first: the parent has nothing left to destroy
    locus::region child(parent);
    child.make<counted>(10);
    CHECK_EQ(parent.stats().children, 1);
  }
  CHECK_EQ(destroyed, 11);
  CHECK_EQ(parent.stats().children, 0);
  {
    // a clear through the object keeps the child tied to its parent, and so does a move
    locus::region child(parent);
    child.make<counted>(11);
    child.clear();
    CHECK_EQ(destroyed, 12);
    CHECK(child);
    child.make<counted>(12);
    locus::region moved(std::move(child));
    CHECK(!child);
    parent.clear();
    CHECK_EQ(destroyed, 13);
    CHECK(!moved);
  }
  {
    // grandchildren are destroyed first, then each region's own destructors
    locus::region a(parent);
    locus::region b(a);
    a.make<counted>(20);
    b.make<counted>(21);
    CHECK_EQ(a.stats().children, 1);
    parent.clear();
    CHECK(!a && !b);
    CHECK_EQ(destroyed, 15);
    CHECK_EQ(destroyed_ids[13], 21);
    CHECK_EQ(destroyed_ids[14], 20);
  }
  {
    // the parent's destructor destroys the child too
    std::optional<locus::region> top(std::in_place);
    locus::region child(*top);
    child.make<counted>(30);
    top.reset();
    CHECK_EQ(destroyed, 16);
    CHECK(!child);
  }
  {
    // a released child is the parent's (or the caller's) alone
    locus::region child(parent);
    child.make<counted>(40);
    locus_region_t *raw = child.release();
    CHECK(!child);
    CHECK_EQ(parent.stats().children, 1);
    parent.clear();
    CHECK_EQ(destroyed, 17);
    CHECK_EQ(parent.stats().children, 0);
    (void)raw;
  }
}

static void t_make() {
  {
    locus::region r;
    for (int i = 0; i < 10; i++) {
      counted *c = r.make<counted>(i);
      CHECK_EQ(c->id, i);
      CHECK(locus_region_of(c) == r.get());
    }
    CHECK_EQ(destroyed, 0);
    r.clear();
    CHECK_EQ(destroyed, 10);
    for (int i = 0; i < 10; i++) CHECK_EQ(destroyed_ids[i], 9 - i);
    CHECK_EQ(live(r), 0);
    // registrations made after a clear run at destroy
    for (int i = 100; i < 103; i++) r.make<counted>(i);
    int *plain = r.make<int>(7);
    CHECK_EQ(*plain, 7);
  }
  CHECK_EQ(destroyed, 13);
  CHECK_EQ(destroyed_ids[10], 102);
  CHECK_EQ(destroyed_ids[12], 100);

  // a constructor that throws leaves nothing behind
  struct thrower {
    thrower() { throw 42; }
    ~thrower() { destroyed++; }
  };
  locus::region r;
  r.make<counted>(1);
  uint64_t before = live(r);
  bool caught = false;
  try {
    r.make<thrower>();
  } catch (int e) {
    caught = e == 42;
  }
  CHECK(caught);
  CHECK_EQ(live(r), before);

  // destructors that free into the region being cleared: containers made in the region
  locus::region_resource res(r);
  auto *pv = r.make<std::pmr::vector<std::pmr::string>>(&res);
  for (int i = 0; i < 200; i++) pv->emplace_back(std::string(64, (char)('a' + i % 26)).c_str());
  auto *rv = r.make<rvector<int>>(r);
  for (int i = 0; i < 5000; i++) rv->push_back(i);
  CHECK_GE(live(r), 200 + 4);
  r.clear();
  CHECK_EQ(live(r), 0);
  CHECK_EQ(r.stats().bump_mode, 1);
}

static void t_move() {
  locus::region a;
  void *p = a.allocate(64);
  locus_region_t *ra = a.get();
  locus::region b(std::move(a));
  CHECK(!a);
  CHECK(a.get() == nullptr);
  CHECK_EQ(a.stats().objects_live, 0);
  a.clear();  // nothing
  CHECK(b.get() == ra);
  CHECK(locus_region_of(p) == ra);

  // move assignment destroys what the target owned
  locus::region c;
  c.make<counted>(1);
  c = std::move(b);
  CHECK_EQ(destroyed, 1);
  CHECK(!b);
  CHECK(c.get() == ra);
  CHECK_EQ(c.stats().objects_live, 1);

  // regions in a vector move when it grows (the move is noexcept)
  static_assert(std::is_nothrow_move_constructible_v<locus::region>);
  static_assert(!std::is_copy_constructible_v<locus::region>);
  std::vector<locus::region> rs;
  std::vector<void *> objs;
  for (int i = 0; i < 20; i++) {
    rs.emplace_back();
    objs.push_back(rs.back().allocate(32));
  }
  for (int i = 0; i < 20; i++) CHECK(locus_region_of(objs[(size_t)i]) == rs[(size_t)i].get());

  locus_region_t *raw = c.release();
  CHECK(!c);
  CHECK(raw == ra);
  CHECK(locus_region_of(p) == raw);
  locus_region_destroy(raw);
}

static void t_allocator() {
  using A = locus::region_allocator<int>;
  using traits = std::allocator_traits<A>;
  static_assert(traits::propagate_on_container_copy_assignment::value);
  static_assert(traits::propagate_on_container_move_assignment::value);
  static_assert(traits::propagate_on_container_swap::value);
  static_assert(!traits::is_always_equal::value);
  static_assert(std::is_same_v<traits::rebind_alloc<long>, locus::region_allocator<long>>);

  locus::region r1, r2;
  A a1(r1), a1raw(r1.get()), a2(r2);
  locus::region_allocator<long> l1(a1);
  CHECK(a1 == a1raw);
  CHECK(a1 == l1);
  CHECK(!(a1 != l1));
  CHECK(a1 != a2);
  CHECK(l1.get() == r1.get());

  // the allocator goes with the contents on copy and move assignment, and on swap
  rvector<int> v1(a1), v2(a2), v3(a2);
  for (int i = 0; i < 1000; i++) v1.push_back(i);
  v2 = v1;
  CHECK(v2.get_allocator() == a1);
  CHECK(locus_region_of(v2.data()) == r1.get());
  v3 = std::move(v1);
  CHECK(v3.get_allocator() == a1);
  rvector<int> v4(a2);
  v4.push_back(1);
  void *d4 = v4.data();
  std::swap(v3, v4);
  CHECK(v3.get_allocator() == a2 && v4.get_allocator() == a1);
  CHECK(v3.data() == d4);

  // too many elements: std::bad_array_new_length; too many bytes: std::bad_alloc
  bool overflow = false, nomem = false, region_nomem = false;
  try {
    (void)a1.allocate(opaque_size(SIZE_MAX / sizeof(int) + 1));
  } catch (const std::bad_array_new_length &) {
    overflow = true;
  }
  try {
    (void)a1.allocate(opaque_size(SIZE_MAX / 8));
  } catch (const std::bad_array_new_length &) {
  } catch (const std::bad_alloc &) {
    nomem = true;
  }
  try {
    (void)r1.allocate(opaque_size(SIZE_MAX / 2));
  } catch (const std::bad_alloc &) {
    region_nomem = true;
  }
  CHECK(overflow && nomem && region_nomem);
}

static void t_overaligned() {
  locus::region r;
  rvector<line> v(r);
  for (int i = 0; i < 2000; i++) {
    v.push_back(line{});
    v.back().bytes[0] = (unsigned char)i;
    CHECK_ALIGNED(v.data(), 64);
  }
  for (int i = 0; i < 2000; i++) CHECK_EQ(v[(size_t)i].bytes[0], (unsigned char)i);
  CHECK(locus_region_of(v.data()) == r.get());

  line *l = r.make<line>();
  CHECK_ALIGNED(l, 64);
  for (size_t align = 32; align <= 8192; align *= 2) {
    for (size_t n : {(size_t)1, align / 2, align, align * 3 + 5}) {
      void *p = r.allocate(n, align);
      CHECK_ALIGNED(p, align);
      CHECK(locus_region_of(p) == r.get());
      memset(p, 0x5a, n);
      r.deallocate(p);
    }
  }
  locus::region_resource res(r);
  std::pmr::vector<line> pv(&res);
  for (int i = 0; i < 500; i++) {
    pv.emplace_back();
    CHECK_ALIGNED(pv.data(), 64);
  }
  void *p = res.allocate(100, 256);
  CHECK_ALIGNED(p, 256);
  res.deallocate(p, 100, 256);
}

static void t_region_of() {
  locus::region r, other;
  void *small = r.allocate(40);
  void *big = r.allocate(1 << 20);  // beyond any chunk: an object of its own
  int *made = r.make<int>(3);
  rvector<char> v(other);
  v.resize(300);
  CHECK(locus_region_of(small) == r.get());
  CHECK(locus_region_of(big) == r.get());
  CHECK(locus_region_of(made) == r.get());
  CHECK(locus_region_of(v.data()) == other.get());
  void *heap = malloc(40);
  CHECK(locus_region_of(heap) == nullptr);
  free(heap);
  r.deallocate(small);
  r.deallocate(big);
  CHECK(locus_region_of(small) == nullptr);
  CHECK(locus_region_of(big) == nullptr);
}

int main(int argc, char **argv) {
  locus_api_t api;
  locus_api_require(&api);
  if (!locus_region_create) {
    // every Locus library has regions: only other allocators may lack them
    CHECKF(!test_env_flag("LOCUS_TEST_EXPECT_LOCUS"), "%s has no locus_region_create",
           api.variant ? api.variant() : "the Locus library");
    test_note("skip: the loaded allocator has no regions (locus_region_create)\n");
    return TEST_SKIP;
  }
  static const test_section_t sections[] = {
      {"vector", t_vector},         {"map_reuse", t_map_reuse}, {"pmr", t_pmr},
      {"children", t_children},     {"make", t_make},           {"move", t_move},
      {"allocator", t_allocator},   {"overaligned", t_overaligned},
      {"region_of", t_region_of},
  };
  return test_run_sections(argc, argv, sections, sizeof sections / sizeof *sections);
}
