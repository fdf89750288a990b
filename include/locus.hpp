// locus.hpp — C++17 wrappers over the region and hint APIs of locus.h (header-only).
//
//   locus::region              owns a locus_region_t; make<T>() ties destructors to clear/destroy
//   locus::region_allocator<T> a standard Allocator over a region, for std containers
//   locus::region_resource     a std::pmr::memory_resource over a region
//   locus::hint_allocator<T>   a standard Allocator whose allocate(n, hint) is locus_malloc_near
//   locus::implicit_hint_allocator<T>  hints each node with the previous one it allocated
//   locus::list, map, set, ... the std node containers over implicit_hint_allocator
//   locus::hint_cursor         a one-shot hint for the next node of containers bound to it
//
// Regions:
// Lifetimes: a region frees every object it holds when it is cleared or destroyed, so a
// container using one of its allocators must be gone (or never touched again) before that;
// destroying such a container afterwards frees into a cleared or destroyed region.
// Deallocation really frees, and the space goes to later allocations of the same size, so
// containers that grow and shrink stay within bounded memory; a region is still used by one
// thread at a time (see locus.h).
#ifndef LOCUS_HPP
#define LOCUS_HPP

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory_resource>
#include <new>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <dlfcn.h>

#include "locus.h"

// The hint calls are weak references: a program that includes this header runs under any
// allocator (glibc, jemalloc, ...) and gets plain malloc where no Locus library is loaded.
#pragma weak locus_malloc_near

namespace locus {

namespace detail {

// The alignment every region object has without asking (malloc's, by locus.h's contract).
constexpr std::size_t region_min_align = alignof(std::max_align_t);

inline void *region_alloc(locus_region_t *r, std::size_t bytes, std::size_t align) {
  // A C++ allocation of 0 bytes must still return a distinct pointer; malloc(0) need not.
  if (bytes == 0) bytes = 1;
  void *p = align <= region_min_align ? locus_region_malloc(r, bytes)
                                      : locus_region_aligned_alloc(r, align, bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace detail

// An owned region. region(parent) makes a child, never a copy (regions are not copyable).
// A child is destroyed by whichever comes first: this object's destructor, or the parent's
// clear/destroy; in the second case this object is left empty, so it never destroys a region
// twice. Clear a child through this object, not with locus_region_clear on get(): the object
// would take that for the child's destruction. An empty object (moved from, released, or a
// child its parent destroyed) allows only assignment, destruction, clear() (nothing),
// stats() (zeros), get() and operator bool.
class region {
 public:
  region() : r_(locus_region_create(nullptr)) {
    if (!r_) throw std::bad_alloc();
  }

  explicit region(region &parent) : link_(new link{this, false}) {
    r_ = locus_region_create(parent.get());
    if (r_ && locus_region_on_destroy(r_, &unlink, link_) == 0) return;
    if (r_) locus_region_destroy(r_);
    delete link_;
    throw std::bad_alloc();
  }

  region(region &&o) noexcept { take(o); }
  region &operator=(region &&o) noexcept {
    if (this != &o) {
      reset();
      take(o);
    }
    return *this;
  }
  region(const region &) = delete;
  region &operator=(const region &) = delete;
  ~region() { reset(); }

  // Throws std::bad_alloc. Any power-of-two align; above malloc's alignment it costs the
  // aligned path.
  void *allocate(std::size_t bytes, std::size_t align = alignof(std::max_align_t)) {
    return detail::region_alloc(r_, bytes, align);
  }
  void deallocate(void *p) noexcept { locus_region_free(r_, p); }

  // Runs the destructors registered by make() (newest first), destroys the children, and
  // frees every object.
  void clear() noexcept {
    if (!r_) return;
    if (!link_) {
      locus_region_clear(r_);
      return;
    }
    // Clearing runs and forgets the child's callbacks, the link among them: the flag tells
    // unlink that the region survives, and the link is registered again afterwards. That
    // cannot run out of memory in practice (a cleared region keeps its first chunk); if it
    // does, the parent could destroy the child unnoticed and this object destroy it again,
    // so the object gives the child up to its parent instead.
    link_->clearing = true;
    locus_region_clear(r_);
    link_->clearing = false;
    if (locus_region_on_destroy(r_, &unlink, link_) != 0) {
      delete link_;
      r_ = nullptr;
      link_ = nullptr;
    }
  }

  // Constructs a T in the region. Unless T is trivially destructible, its destructor runs at
  // the next clear or destroy, in reverse order of construction, before any memory goes. So
  // an object made this way must not be deallocate()d or destroyed by hand: the registered
  // destructor would run again on freed memory. Throws what T's constructor throws, or
  // std::bad_alloc; then nothing is left in the region.
  template <class T, class... Args>
  T *make(Args &&...args) {
    void *p = allocate(sizeof(T), alignof(T));
    T *obj;
    try {
      obj = ::new (p) T(std::forward<Args>(args)...);
    } catch (...) {
      deallocate(p);
      throw;
    }
    if constexpr (!std::is_trivially_destructible_v<T>) {
      if (locus_region_on_destroy(r_, &destroy<T>, obj) != 0) {
        obj->~T();
        deallocate(p);
        throw std::bad_alloc();
      }
    }
    return obj;
  }

  // The region's own counters (not its children's); zeros for an empty object.
  locus_region_stats_t stats() const {
    locus_region_stats_t s{};
    if (r_) locus_region_stats(r_, &s);
    return s;
  }

  locus_region_t *get() const noexcept { return r_; }
  explicit operator bool() const noexcept { return r_ != nullptr; }

  // Hands the region to the caller, who destroys it (or leaves that to the parent).
  locus_region_t *release() noexcept {
    locus_region_t *r = r_;
    if (link_) link_->owner = nullptr;  // unlink then only frees the link
    r_ = nullptr;
    link_ = nullptr;
    return r;
  }

 private:
  // A child's registration with its own region: it runs when the region is cleared or
  // destroyed, and outside a clear() of ours that means destroyed (by the parent, by us, or by
  // whoever release() handed it to). owner follows moves; null after release().
  struct link {
    region *owner;
    bool clearing;
  };

  static void unlink(void *arg) {
    link *l = static_cast<link *>(arg);
    if (l->clearing) return;
    if (l->owner) {
      l->owner->r_ = nullptr;
      l->owner->link_ = nullptr;
    }
    delete l;
  }

  template <class T>
  static void destroy(void *obj) {
    static_cast<T *>(obj)->~T();
  }

  void take(region &o) noexcept {
    r_ = o.r_;
    link_ = o.link_;
    if (link_) link_->owner = this;
    o.r_ = nullptr;
    o.link_ = nullptr;
  }

  // For a child, destroying runs unlink, which empties this object and frees the link.
  void reset() noexcept {
    if (r_) locus_region_destroy(r_);
    r_ = nullptr;
  }

  locus_region_t *r_ = nullptr;
  link *link_ = nullptr;  // children only
};

// A standard Allocator drawing from a region it does not own. Copies (and rebinds) share the
// region and compare equal exactly when the regions are the same; the allocator travels with
// the contents on copy/move assignment and swap, so a container's memory always belongs to the
// region its allocator names.
template <class T>
class region_allocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  region_allocator(region &r) noexcept : r_(r.get()) {}
  explicit region_allocator(locus_region_t *r) noexcept : r_(r) {}
  template <class U>
  region_allocator(const region_allocator<U> &o) noexcept : r_(o.get()) {}

  T *allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T *>(detail::region_alloc(r_, n * sizeof(T), alignof(T)));
  }
  void deallocate(T *p, std::size_t) noexcept { locus_region_free(r_, p); }

  locus_region_t *get() const noexcept { return r_; }

 private:
  locus_region_t *r_;
};

template <class T, class U>
bool operator==(const region_allocator<T> &a, const region_allocator<U> &b) noexcept {
  return a.get() == b.get();
}
template <class T, class U>
bool operator!=(const region_allocator<T> &a, const region_allocator<U> &b) noexcept {
  return a.get() != b.get();
}

// A memory resource over a region it does not own. Unlike std::pmr::monotonic_buffer_resource,
// deallocate really frees: a long-lived pmr container that churns reuses its space instead of
// growing until the region is cleared. Resources are equal when their regions are, so memory
// from one may be given back through another.
class region_resource : public std::pmr::memory_resource {
 public:
  explicit region_resource(region &r) noexcept : r_(r.get()) {}
  explicit region_resource(locus_region_t *r) noexcept : r_(r) {}

  locus_region_t *get() const noexcept { return r_; }

 private:
  void *do_allocate(std::size_t bytes, std::size_t align) override {
    return detail::region_alloc(r_, bytes, align);
  }
  void do_deallocate(void *p, std::size_t, std::size_t) override { locus_region_free(r_, p); }
  bool do_is_equal(const std::pmr::memory_resource &o) const noexcept override {
    const region_resource *other = dynamic_cast<const region_resource *>(&o);
    return other && other->r_ == r_;
  }

  locus_region_t *r_;
};

// ---- allocation near a hint ----------------------------------------------------------------
//
// hint_allocator<T> is a standard Allocator over malloc/free whose allocate(n, hint) is
// locus_malloc_near(n * sizeof(T), hint): std::allocator_traits<A>::allocate(a, n, hint)
// reaches it, so code written for the C++ standard's hinted allocate gets placement near the
// hint. Under an allocator without hints (glibc, the peers, or a Locus design that cannot place
// by address) the hint is ignored and the call is malloc: the same binary runs everywhere.
// Every hint_allocator frees with free(), so all of them compare equal and memory from one may
// be freed through any other (or with free()).
//
// Modes (the second template argument):
//   hints::explicit_only  allocate(n) is plain; allocate(n, hint) and a cursor's hint are used.
//   hints::implicit       allocate(1) hints with this allocator's own previous single-object
//                         allocation (the "implicit hint"): unmodified node containers place
//                         each node near the one allocated before it.
// What implicit mode amounts to per container (libstdc++ and libc++ never call the hinted
// allocate themselves, and an allocator never sees where a node will be linked):
//   std::list, std::forward_list  push_back/push_front/emplace at one end: the previous
//       allocation is the neighbouring element, the seed's hint for lists. Inserting in the
//       middle hints with the last node allocated, not the new neighbour: use a cursor.
//   std::map, std::set (and multi-)  the previous allocation, not the parent (the tree's
//       shape is decided after the node exists). For keys inserted in order it is the
//       in-order predecessor, an ancestor or the parent; in random order it keeps the
//       container's nodes together (away from other objects of the same size) rather than
//       near their parents. For the parent, set a cursor to the node at lower_bound(key)
//       before inserting: a new leaf's in-order neighbours are its ancestors, one its parent.
//   std::unordered_map, std::unordered_set  nodes hint with the previous node; the bucket
//       array (n > 1) is allocated plainly and does not become the previous allocation.
// Arrays (n != 1) never hint and never become the previous allocation in either mode.
//
// State: the previous allocation is per allocator instance. A container keeps its own rebound
// copy and allocates every node through it, so each container (each adjacency list of a graph,
// say) hints within itself. Rebinding and copying copy the state; a container's copy
// (select_on_container_copy_construction) starts afresh; the allocator travels with the nodes
// on move assignment and swap. A cursor (hint_cursor, owned by the program) is shared by every
// copy and rebind of the allocators made from it: set() gives the next single-object allocation
// of any of them its hint, once; it outranks the implicit hint. Neither the state nor a cursor
// is synchronised: like the containers, each is used by one thread at a time.

enum class hints { explicit_only, implicit };

// A one-shot hint for the next node of the containers whose allocators were made from it.
class hint_cursor {
 public:
  void set(const void *hint) noexcept { next_ = hint; }
  const void *peek() const noexcept { return next_; }
  const void *take() noexcept {
    const void *h = next_;
    next_ = nullptr;
    return h;
  }

 private:
  const void *next_ = nullptr;
};

namespace detail {

using near_fn = void *(*)(std::size_t, const void *);

// locus_malloc_near where a Locus library is loaded, else null: the weak reference, or for
// builds where the linker settled it to null (non-PIE executables) a lookup, done once.
inline near_fn resolve_near() noexcept {
  static const near_fn fn = [] {
    near_fn f = &::locus_malloc_near;
    if (!f) f = reinterpret_cast<near_fn>(dlsym(RTLD_DEFAULT, "locus_malloc_near"));
    return f;
  }();
  return fn;
}

inline void *hint_alloc(std::size_t bytes, std::size_t align, const void *hint) {
  if (bytes == 0) bytes = 1;
  void *p;
  if (align > alignof(std::max_align_t)) {
    bytes = (bytes + align - 1) / align * align;  // aligned_alloc wants a multiple
    p = std::aligned_alloc(align, bytes);
  } else if (hint) {
    near_fn f = resolve_near();
    p = f ? f(bytes, hint) : std::malloc(bytes);
  } else {
    p = std::malloc(bytes);
  }
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace detail

template <class T, hints Mode = hints::explicit_only>
class hint_allocator {
 public:
  using value_type = T;
  template <class U>
  struct rebind {
    using other = hint_allocator<U, Mode>;
  };
  static constexpr hints mode = Mode;
  // Every one frees with free(): all are equal. A container keeps its own state on copy
  // assignment; the state goes with the nodes on move assignment and swap.
  using is_always_equal = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  hint_allocator() noexcept = default;
  explicit hint_allocator(hint_cursor &cursor) noexcept : cursor_(&cursor) {}
  template <class U>
  hint_allocator(const hint_allocator<U, Mode> &o) noexcept
      : prev_(o.previous()), cursor_(o.cursor()) {}

  // Plain in explicit mode, unless a cursor holds a hint; implicit mode hints a single object
  // with the cursor's hint or the previous allocation.
  T *allocate(std::size_t n) { return allocate(n, next_hint(n)); }

  // Near hint (null: plain). A single object becomes the previous allocation.
  T *allocate(std::size_t n, const void *hint) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    T *p = static_cast<T *>(detail::hint_alloc(n * sizeof(T), alignof(T), hint));
    if (n == 1) prev_ = p;
    return p;
  }

  void deallocate(T *p, std::size_t) noexcept { std::free(p); }

  // The hint allocate(n) would use now (the cursor's, else the previous allocation in implicit
  // mode, else none).
  const void *peek_hint(std::size_t n = 1) const noexcept {
    if (n != 1) return nullptr;
    if (cursor_ && cursor_->peek()) return cursor_->peek();
    return Mode == hints::implicit ? prev_ : nullptr;
  }

  // A container's copy starts with no previous allocation (and keeps the cursor).
  hint_allocator select_on_container_copy_construction() const noexcept {
    hint_allocator a;
    a.cursor_ = cursor_;
    return a;
  }

  const void *previous() const noexcept { return prev_; }
  hint_cursor *cursor() const noexcept { return cursor_; }

 private:
  const void *next_hint(std::size_t n) noexcept {
    if (n != 1) return nullptr;
    if (cursor_ && cursor_->peek()) return cursor_->take();
    return Mode == hints::implicit ? prev_ : nullptr;
  }

  const void *prev_ = nullptr;
  hint_cursor *cursor_ = nullptr;
};

template <class T, class U, hints M>
constexpr bool operator==(const hint_allocator<T, M> &, const hint_allocator<U, M> &) noexcept {
  return true;
}
template <class T, class U, hints M>
constexpr bool operator!=(const hint_allocator<T, M> &, const hint_allocator<U, M> &) noexcept {
  return false;
}

template <class T>
using implicit_hint_allocator = hint_allocator<T, hints::implicit>;

// The node containers with implicit hints (see above for what each gets).
template <class T>
using list = std::list<T, implicit_hint_allocator<T>>;
template <class K, class V, class Compare = std::less<K>>
using map = std::map<K, V, Compare, implicit_hint_allocator<std::pair<const K, V>>>;
template <class K, class V, class Compare = std::less<K>>
using multimap = std::multimap<K, V, Compare, implicit_hint_allocator<std::pair<const K, V>>>;
template <class K, class Compare = std::less<K>>
using set = std::set<K, Compare, implicit_hint_allocator<K>>;
template <class K, class Compare = std::less<K>>
using multiset = std::multiset<K, Compare, implicit_hint_allocator<K>>;
template <class K, class V, class Hash = std::hash<K>, class Eq = std::equal_to<K>>
using unordered_map =
    std::unordered_map<K, V, Hash, Eq, implicit_hint_allocator<std::pair<const K, V>>>;
template <class K, class Hash = std::hash<K>, class Eq = std::equal_to<K>>
using unordered_set = std::unordered_set<K, Hash, Eq, implicit_hint_allocator<K>>;

}  // namespace locus

#endif  // LOCUS_HPP
