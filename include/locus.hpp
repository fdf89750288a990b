// locus.hpp — C++17 wrappers over the region API of locus.h (header-only).
//
//   locus::region              owns a locus_region_t; make<T>() ties destructors to clear/destroy
//   locus::region_allocator<T> a standard Allocator over a region, for std containers
//   locus::region_resource     a std::pmr::memory_resource over a region
//
// Lifetimes: a region frees every object it holds when it is cleared or destroyed, so a
// container using one of its allocators must be gone (or never touched again) before that;
// destroying such a container afterwards frees into a cleared or destroyed region.
// Deallocation really frees, and the space goes to later allocations of the same size, so
// containers that grow and shrink stay within bounded memory; a region is still used by one
// thread at a time (see locus.h).
#ifndef LOCUS_HPP
#define LOCUS_HPP

#include <cstddef>
#include <limits>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>

#include "locus.h"

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

}  // namespace locus

#endif  // LOCUS_HPP
