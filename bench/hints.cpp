// hints — STL programs built amid churn, then traversed: the workloads of allocation near a
// hint (Jula & Rauchwerger, seed 001), each in two modes.
//
// Workloads (deterministic: the checksum depends on the seeds alone, never on addresses):
//   list    a std::list of 40-byte nodes built by push_back while temporaries of the node's
//           size and of other sizes come and go (each freed 8192 allocations later), then
//           walked end to end many times. Hint: the previous element.
//   churn   the list under churn: 48-byte nodes, and between two appends 20 operations on a
//           pool of 65,536 noise objects filled at the start (each replaces a random slot's
//           object with a new one of the node's size or of 16-256 bytes), so the hint's page
//           is often full and the free slots near it come and go. Hint: the previous element.
//   tree    a std::map of random keys built the same way (nodes of 72 bytes), then walked in
//           order many times and searched root to leaf. Hint: the node at lower_bound(key),
//           an ancestor of the new leaf (a leaf's in-order neighbours are its ancestors, one
//           of them its parent); the insertion is emplace_hint at that position.
//   events  an event-queue simulation over a std::multimap<time, event>: the earliest event
//           is taken out and each schedules one or two later ones (or none, keeping the queue
//           near its initial size), amid temporaries. Hint: the queue's node at the new event's
//           time (lower_bound), its neighbour in time. Build = the initial queue; traverse =
//           the simulation.
//   graph   adjacency lists (a std::list per vertex) filled edge by edge in random order amid
//           temporaries, then breadth-first searches from several sources. Hint: the previous
//           element of the same list (each list's allocator hints with its own last node).
// Modes:
//   --hints     locus::implicit_hint_allocator (include/locus.hpp): every node hints with its
//               allocator's previous node, and where the workload knows a better hint (tree,
//               events) it sets a locus::hint_cursor for the next node. Under an allocator
//               without hints (glibc, the peers) this is malloc.
//   --no-hints  std::allocator, the same operations.
// Both modes count, for every node with a hint (the one --hints would give), whether it landed
// on the hint's 4 KiB page and on its 64-byte cache line: the program's own page and line
// accuracy, from the addresses of the elements (the node's header is at a fixed offset before
// its element), so it is measured under every allocator, with hints or without.
//
// Output: one JSON line on stdout:
//   workload, mode, scale, nodes, hinted, same_page, same_line, page_accuracy, line_accuracy,
//   build_s, traverse_s (CLOCK_MONOTONIC), checksum (hex), peak_live_bytes (the most bytes
//   the program had allocated and not freed at once: nodes, bucket arrays and temporaries,
//   as requested), and "locus": {variant, hint_calls, hint_same_page, hint_same_line,
//   hint_same_kregion, bytes_allocated_peak} when locus_stats_get is in the process (dlsym),
//   else null. bytes_allocated_peak is the library's bytes_allocated at the end of the build.
//
// usage: hints WORKLOAD [--hints | --no-hints] [--scale F] [--passes N] [--quick]
//   --scale F   sizes times F (0 < F <= 100; default 1); --quick is --scale 0.05
//   --passes N  traversal passes (default per workload; the events' steps scale with F)
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <time.h>

#include "locus.hpp"

namespace {

const char *const kUsage =
    "usage: hints WORKLOAD [--hints | --no-hints] [--scale F] [--passes N] [--quick]  "
    "(WORKLOAD: list, churn, tree, events, graph)";

[[noreturn]] void usage_error(const std::string &why) {
  std::fprintf(stderr, "hints: %s\n%s\n", why.c_str(), kUsage);
  std::exit(2);
}

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "hints: error: %s\n", what);
  std::exit(1);
}

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// xorshift64*: the same sequence everywhere
struct rng {
  uint64_t s;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// ---- live bytes -------------------------------------------------------------------------------

size_t live_bytes, peak_bytes;

void add_live(size_t n) {
  live_bytes += n;
  if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

// An allocator that counts the bytes live through it and forwards to Base (std::allocator or
// a locus hint allocator), hinted allocate included.
template <class Base>
struct counted : Base {
  using value_type = typename Base::value_type;
  using base_traits = std::allocator_traits<Base>;
  template <class U>
  struct rebind {
    using other = counted<typename base_traits::template rebind_alloc<U>>;
  };
  using Base::Base;
  counted() = default;
  explicit counted(const Base &b) : Base(b) {}
  template <class B2>
  counted(const counted<B2> &o) : Base(static_cast<const B2 &>(o)) {}

  value_type *allocate(std::size_t n) {
    add_live(n * sizeof(value_type));
    return base_traits::allocate(*this, n);
  }
  value_type *allocate(std::size_t n, const void *hint) {
    add_live(n * sizeof(value_type));
    return base_traits::allocate(*this, n, hint);
  }
  void deallocate(value_type *p, std::size_t n) {
    live_bytes -= n * sizeof(value_type);
    base_traits::deallocate(*this, p, n);
  }
  counted select_on_container_copy_construction() const {
    return counted(base_traits::select_on_container_copy_construction(*this));
  }
  friend bool operator==(const counted &, const counted &) { return true; }
  friend bool operator!=(const counted &, const counted &) { return false; }
};

struct hinted {
  template <class T>
  using alloc = counted<locus::implicit_hint_allocator<T>>;
  static constexpr bool on = true;
  static constexpr const char *name = "hints";
};
struct plain {
  template <class T>
  using alloc = counted<std::allocator<T>>;
  static constexpr bool on = false;
  static constexpr const char *name = "no-hints";
};

// An allocator for a container: bound to the cursor in --hints, plain otherwise.
template <class A>
A make_alloc(locus::hint_cursor &cursor) {
  if constexpr (std::is_constructible_v<A, locus::hint_cursor &>) return A(cursor);
  else { (void)cursor; return A(); }
}

// ---- temporaries ------------------------------------------------------------------------------

// Objects that come and go around the structure: per call, one of `same` bytes (the node's
// size) and one of 16-256 bytes, each freed `window` allocations later (first in, first out).
// A stamped object of n bytes (its first word says its size), and its check and free: the
// noise the workloads allocate around their structures.
std::pair<void *, size_t> stamped_new(size_t n) {
  void *p = std::malloc(n);
  if (!p) die("malloc returned NULL");
  *static_cast<uint64_t *>(p) = (uint64_t)n * 0x100000001b3ull;
  add_live(n);
  return {p, n};
}

void stamped_free(const std::pair<void *, size_t> &e, const char *overwritten) {
  if (*static_cast<uint64_t *>(e.first) != (uint64_t)e.second * 0x100000001b3ull) die(overwritten);
  std::free(e.first);
  live_bytes -= e.second;
}

struct temporaries {
  std::vector<std::pair<void *, size_t>> ring;
  size_t next = 0;
  rng r{0x5eed};
  explicit temporaries(size_t window) : ring(window, {nullptr, 0}) {}
  ~temporaries() {
    for (auto &e : ring) std::free(e.first);
  }
  void one(size_t n) {
    auto &e = ring[next];
    if (e.first) stamped_free(e, "a temporary was overwritten");
    e = stamped_new(n);
    next = (next + 1) % ring.size();
  }
  void step(size_t same) {
    one(same);
    one(16 + r.below(241));
  }
};

// Noise that does not come and go in order: a pool of slots, filled at the start, where each
// operation replaces the object of a random slot (frees it, then allocates one of `same` bytes
// half the time, else of 16-256 bytes).
struct noise_pool {
  std::vector<std::pair<void *, size_t>> slot;
  rng r{0xc0ffee};
  size_t same;
  noise_pool(size_t slots, size_t same_size) : slot(slots, {nullptr, 0}), same(same_size) {
    for (auto &e : slot) e = stamped_new(size());
  }
  ~noise_pool() {
    for (auto &e : slot) std::free(e.first);
  }
  size_t size() { return r.below(2) ? same : 16 + r.below(241); }
  void ops(size_t count) {
    for (size_t i = 0; i < count; i++) {
      auto &e = slot[r.below(slot.size())];
      stamped_free(e, "a noise object was overwritten");
      e = stamped_new(size());
    }
  }
};

// ---- accuracy ---------------------------------------------------------------------------------

struct accuracy {
  uint64_t hinted = 0, same_page = 0, same_line = 0;
  void note(const void *hint, const void *p) {
    if (!hint) return;
    uintptr_t a = (uintptr_t)hint, b = (uintptr_t)p;
    hinted++;
    same_page += (a >> 12) == (b >> 12);
    same_line += (a >> 6) == (b >> 6);
  }
};

struct result {
  double build_s = 0, traverse_s = 0;
  uint64_t checksum = 0, nodes = 0;
  accuracy acc;
};

// The result with the phases' times (build from t0 to t1, traversal from t1 to now).
result finish(result res, double t0, double t1, uint64_t checksum, uint64_t nodes) {
  res.traverse_s = now_s() - t1;
  res.build_s = t1 - t0;
  res.checksum = checksum;
  res.nodes = nodes;
  return res;
}

struct item {
  uint64_t key;
  uint64_t payload[2];
};

// locus statistics, where a Locus library is loaded
using stats_fn = int (*)(locus_stats_t *);
using variant_fn = const char *(*)();

stats_fn find_stats() {
  void *f = dlsym(RTLD_DEFAULT, "locus_stats_get");
  stats_fn fn;
  std::memcpy(&fn, &f, sizeof fn);
  return fn;
}

uint64_t locus_bytes_allocated() {
  stats_fn f = find_stats();
  if (!f) return 0;
  locus_stats_t s;
  std::memset(&s, 0, sizeof s);
  f(&s);
  return s.bytes_allocated;
}

// ---- the workloads ----------------------------------------------------------------------------

struct params {
  double scale = 1.0;
  long passes = -1;  // -1: the workload's default
  size_t count(double n) const { return std::max<size_t>(16, (size_t)std::llround(n * scale)); }
  long passes_or(long d) const { return passes >= 0 ? passes : d; }
};

uint64_t g_bytes_at_build;  // the library's bytes_allocated at the end of the build

// A std::list of n Item built by push_back, each node hinting the previous one, with
// noise() between two appends; then walked end to end `passes` times.
template <class P, class Item, class Noise>
result build_and_walk_list(size_t n, long passes, Noise noise) {
  using A = typename P::template alloc<Item>;
  constexpr size_t payloads = sizeof(Item::payload) / sizeof(Item::payload[0]);
  locus::hint_cursor cursor;
  result res;
  std::list<Item, A> l(make_alloc<A>(cursor));
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) {
    noise();
    const void *hint = l.empty() ? nullptr : &l.back();
    Item it{};
    it.key = i * 2654435761u;
    for (size_t k = 0; k < payloads; k++) it.payload[k] = k == 0 ? i : k == 1 ? ~i : i ^ 0x5555;
    l.push_back(it);
    res.acc.note(hint, &l.back());
  }
  g_bytes_at_build = locus_bytes_allocated();
  double t1 = now_s();
  uint64_t h = 0;
  for (long p = 0; p < passes; p++) {
    uint64_t sum = 0;
    for (const Item &it : l) sum += it.key ^ it.payload[(size_t)p % payloads];
    h = mix(h, sum);
  }
  return finish(res, t0, t1, h, n);
}

template <class P>
result run_list(const params &prm) {
  temporaries tmp(8192);
  const size_t node = 2 * sizeof(void *) + sizeof(item);
  return build_and_walk_list<P, item>(prm.count(300000), prm.passes_or(100), [&] { tmp.step(node); });
}

struct item48 {
  uint64_t key;
  uint64_t payload[3];
};

template <class P>
result run_churn(const params &prm) {
  noise_pool noise(65536, 2 * sizeof(void *) + sizeof(item48));
  return build_and_walk_list<P, item48>(prm.count(300000), prm.passes_or(100), [&] { noise.ops(20); });
}

// The trees (std::map, std::multimap) of the tree and events workloads: their values, their
// allocator, and a node's size (the red-black links and colour, then the value).
using kv = std::pair<const uint64_t, item>;
template <class P>
using kv_alloc = typename P::template alloc<kv>;
constexpr size_t tree_node = 4 * sizeof(void *) + sizeof(kv);

// Inserts (key, value) at pos, the tree's lower_bound(key), hinted with the node there (an
// ancestor of the new leaf), or the last node when pos is the end.
template <class P, class Tree>
typename Tree::iterator insert_near(Tree &t, typename Tree::iterator pos, uint64_t key,
                                    const item &value, locus::hint_cursor &cursor,
                                    accuracy &acc) {
  const void *hint = pos != t.end() ? (const void *)&*pos
                     : t.empty() ? nullptr : (const void *)&*std::prev(pos);
  if (P::on) cursor.set(hint);
  auto it = t.emplace_hint(pos, key, value);
  acc.note(hint, &*it);
  return it;
}

template <class P>
result run_tree(const params &prm) {
  const size_t n = prm.count(200000);
  const long passes = prm.passes_or(10);
  locus::hint_cursor cursor;
  result res;
  std::map<uint64_t, item, std::less<uint64_t>, kv_alloc<P>> m(make_alloc<kv_alloc<P>>(cursor));
  temporaries tmp(8192);
  rng r{42};
  std::vector<uint64_t> probes;
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) {
    tmp.step(tree_node);
    uint64_t key = r.next() >> 16;
    if (i % 4 == 0) probes.push_back(key);
    auto pos = m.lower_bound(key);
    if (pos != m.end() && pos->first == key) continue;
    insert_near<P>(m, pos, key, item{key, {i, key ^ i}}, cursor, res.acc);
  }
  g_bytes_at_build = locus_bytes_allocated();
  double t1 = now_s();
  uint64_t h = 0;
  for (long p = 0; p < passes; p++) {
    uint64_t sum = 0;
    for (const auto &kv : m) sum += kv.second.payload[p & 1];
    h = mix(h, sum);
    for (size_t i = (size_t)p; i < probes.size(); i += 2) {
      auto it = m.find(probes[i]);
      if (it == m.end()) die("a key is missing");
      h = mix(h, it->second.payload[0]);
    }
  }
  return finish(res, t0, t1, mix(h, m.size()), m.size());
}

template <class P>
result run_events(const params &prm) {
  const size_t n = prm.count(100000);
  const size_t steps = prm.passes >= 0 ? (size_t)prm.passes * n : prm.count(1500000);
  locus::hint_cursor cursor;
  result res;
  std::multimap<uint64_t, item, std::less<uint64_t>, kv_alloc<P>> q(
      make_alloc<kv_alloc<P>>(cursor));
  temporaries tmp(8192);
  rng r{7};
  uint64_t ids = 0;
  auto schedule = [&](uint64_t at) {
    insert_near<P>(q, q.lower_bound(at), at, item{ids, {at, ids * 31}}, cursor, res.acc);
    ids++;
  };
  double t0 = now_s();
  for (size_t i = 0; i < n; i++) {
    tmp.step(tree_node);
    schedule(r.below(1u << 20));
  }
  g_bytes_at_build = locus_bytes_allocated();
  double t1 = now_s();
  uint64_t h = 0;
  for (size_t s = 0; s < steps && !q.empty(); s++) {
    auto first = q.begin();
    uint64_t at = first->first;
    h = mix(h, first->second.key ^ at);
    q.erase(first);
    tmp.step(tree_node);
    // one to two new events when the queue is short, zero to one when it is long
    uint64_t k = r.below(4);
    size_t count = q.size() < n ? 1 + (k == 0) : (k != 0);
    for (size_t c = 0; c < count; c++) schedule(at + 1 + r.below(1u << 16));
    if (s % 4096 == 0) {  // a look at the upcoming events
      size_t seen = 0;
      for (auto it = q.begin(); it != q.end() && seen < 256; ++it, ++seen)
        h = mix(h, it->second.payload[0]);
    }
  }
  return finish(res, t0, t1, mix(h, q.size()), ids);
}

template <class P>
result run_graph(const params &prm) {
  using A = typename P::template alloc<uint32_t>;
  using adj = std::list<uint32_t, A>;
  const size_t v = prm.count(60000), e = 8 * v;
  const long passes = prm.passes_or(16);
  locus::hint_cursor cursor;
  result res;
  std::vector<adj> g;
  g.reserve(v);
  for (size_t i = 0; i < v; i++) g.emplace_back(make_alloc<A>(cursor));
  temporaries tmp(8192);
  const size_t node = 2 * sizeof(void *) + sizeof(uint64_t);
  rng r{99};
  double t0 = now_s();
  for (size_t i = 0; i < e; i++) {
    tmp.step(node);
    // mostly near neighbours (a mesh-like graph), some far
    uint32_t a = (uint32_t)r.below(v);
    uint32_t b = r.below(8) ? (uint32_t)((a + 1 + r.below(64)) % v) : (uint32_t)r.below(v);
    const void *hint = g[a].empty() ? nullptr : &g[a].back();
    g[a].push_back(b);
    res.acc.note(hint, &g[a].back());
  }
  g_bytes_at_build = locus_bytes_allocated();
  double t1 = now_s();
  std::vector<uint32_t> dist(v), queue(v);
  uint64_t h = 0;
  for (long p = 0; p < passes; p++) {
    std::fill(dist.begin(), dist.end(), UINT32_MAX);
    uint32_t src = (uint32_t)((p * 7919u) % v);
    size_t head = 0, tail = 0;
    dist[src] = 0;
    queue[tail++] = src;
    uint64_t sum = 0;
    while (head < tail) {
      uint32_t x = queue[head++];
      for (uint32_t y : g[x])
        if (dist[y] == UINT32_MAX) {
          dist[y] = dist[x] + 1;
          sum += dist[y];
          queue[tail++] = y;
        }
    }
    h = mix(mix(h, sum), tail);
  }
  return finish(res, t0, t1, h, e);
}

template <class P>
result run(const std::string &w, const params &prm) {
  if (w == "list") return run_list<P>(prm);
  if (w == "churn") return run_churn<P>(prm);
  if (w == "tree") return run_tree<P>(prm);
  if (w == "events") return run_events<P>(prm);
  return run_graph<P>(prm);
}

double parse_double(const char *s, const char *what) {
  char *end;
  double v = std::strtod(s, &end);
  if (end == s || *end || !(v > 0) || v > 100) usage_error(std::string("bad ") + what + " '" + s + "'");
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) usage_error("no workload");
  std::string w = argv[1];
  if (w != "list" && w != "churn" && w != "tree" && w != "events" && w != "graph")
    usage_error("unknown workload '" + w + "'");
  bool hints = true;
  params prm;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--hints") hints = true;
    else if (a == "--no-hints") hints = false;
    else if (a == "--quick") prm.scale = 0.05;
    else if (a == "--scale" && i + 1 < argc) prm.scale = parse_double(argv[++i], "scale");
    else if (a == "--passes" && i + 1 < argc) {
      double p = parse_double(argv[++i], "passes");
      if (p != std::floor(p)) usage_error(std::string("bad passes '") + argv[i] + "'");
      prm.passes = (long)p;
    } else usage_error("unknown argument '" + a + "'");
  }
  stats_fn stats = find_stats();
  locus_stats_t before;
  std::memset(&before, 0, sizeof before);
  if (stats) stats(&before);
  result res = hints ? run<hinted>(w, prm) : run<plain>(w, prm);
  char locus[512] = "null";
  if (stats) {
    locus_stats_t s;
    std::memset(&s, 0, sizeof s);
    stats(&s);
    void *vf = dlsym(RTLD_DEFAULT, "locus_variant");
    variant_fn variant;
    std::memcpy(&variant, &vf, sizeof variant);
    bool v4 = s.version >= 4;
    std::snprintf(locus, sizeof locus,
                  "{\"variant\": \"%s\", \"hint_calls\": %" PRIu64 ", \"hint_same_page\": %" PRIu64
                  ", \"hint_same_line\": %" PRIu64 ", \"hint_same_kregion\": %" PRIu64
                  ", \"bytes_allocated_peak\": %" PRIu64 "}",
                  variant ? variant() : "?", v4 ? s.hint_calls - before.hint_calls : 0,
                  v4 ? s.hint_same_page - before.hint_same_page : 0,
                  v4 ? s.hint_same_line - before.hint_same_line : 0,
                  v4 ? s.hint_same_kregion - before.hint_same_kregion : 0, g_bytes_at_build);
  }
  const accuracy &a = res.acc;
  double hinted = a.hinted ? (double)a.hinted : 1.0;
  long hwm = -1;   /* the kernel's resident high-water mark: a quick run can end before the lab samples it */
  if (FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (hwm < 0 && std::fgets(line, sizeof line, f)) std::sscanf(line, "VmHWM: %ld", &hwm);
    std::fclose(f);
  }
  std::printf("{\"workload\": \"%s\", \"mode\": \"%s\", \"scale\": %g, \"nodes\": %" PRIu64
              ", \"hinted\": %" PRIu64 ", \"same_page\": %" PRIu64 ", \"same_line\": %" PRIu64
              ", \"page_accuracy\": %.4f, \"line_accuracy\": %.4f, \"build_s\": %.6f"
              ", \"traverse_s\": %.6f, \"checksum\": \"%016" PRIx64 "\", \"peak_live_bytes\": %zu"
              ", \"vmhwm_kib\": %ld, \"locus\": %s}\n",
              w.c_str(), hints ? hinted::name : plain::name, prm.scale, res.nodes, a.hinted,
              a.same_page, a.same_line, (double)a.same_page / hinted, (double)a.same_line / hinted,
              res.build_s, res.traverse_s, res.checksum, peak_bytes, hwm, locus);
  return 0;
}
