//! The Locus memory allocators from Rust.
//!
//! - [`Locus`]: a [`GlobalAlloc`] over the Locus heap, for `#[global_allocator]`.
//! - [`Region`]: a region (arena) that still frees single objects, usable as an
//!   [`allocator_api2::alloc::Allocator`] for `allocator_api2`'s `Vec`, `Box`, ...
//! - [`stats`], [`Stats`]: the allocator's counters; [`version`], [`variant`], [`purge`].
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: locus::Locus = locus::Locus;
//!
//! let before = locus::stats();
//! let v: Vec<u64> = (0..1000).collect();
//! assert!(locus::stats().malloc_calls > before.malloc_calls);
//! # drop(v);
//! ```
//!
//! Linking this crate links a Locus library (see `locus-sys`), which replaces `malloc` for the
//! whole program: C dependencies and Rust's `System` allocator are served by Locus too.
#![no_std]

extern crate alloc;

mod region;

pub use region::{Region, RegionStats};

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_void, CStr};
use locus_sys as sys;

/// The alignment `malloc` guarantees for requests of at least this many bytes (16 on x86-64
/// and aarch64; smaller requests get their size's alignment, 8 for 8 bytes).
const MIN_ALIGN: usize = 16;

/// Whether malloc/calloc/realloc alone give `layout`'s alignment.
#[inline]
fn malloc_aligns(layout: &Layout) -> bool {
    layout.align() <= MIN_ALIGN && layout.align() <= layout.size()
}

/// The Locus heap as Rust's global allocator:
///
/// ```
/// #[global_allocator]
/// static GLOBAL: locus::Locus = locus::Locus;
/// ```
///
/// Alignments beyond `malloc`'s go through `aligned_alloc`; `realloc` is forwarded when the
/// alignment allows. `dealloc` calls `free`: locus.h has no sized free, and Locus finds an
/// object's size class from its page, so the layout's size would save it nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Locus;

unsafe impl GlobalAlloc for Locus {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(&layout) {
            sys::malloc(layout.size()) as *mut u8
        } else {
            sys::aligned_alloc(layout.align(), layout.size()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_aligns(&layout) {
            sys::calloc(1, layout.size()) as *mut u8
        } else {
            let p = self.alloc(layout);
            if !p.is_null() {
                core::ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        sys::free(ptr as *mut c_void)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if malloc_aligns(&new_layout) {
            return sys::realloc(ptr as *mut c_void, new_size) as *mut u8;
        }
        // realloc cannot keep an alignment beyond malloc's: move by hand.
        let q = self.alloc(new_layout);
        if !q.is_null() {
            core::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        q
    }
}

/// The allocator's counters, summed over all heaps (`locus_stats_t`; field meanings in
/// locus.h). Counters are read without stopping other threads: each field is consistent on
/// its own, not with the others.
pub type Stats = sys::locus_stats_t;

/// The counters now.
pub fn stats() -> Stats {
    let mut s = Stats::default();
    // SAFETY: s is a valid, writable locus_stats_t.
    unsafe { sys::locus_stats_get(&mut s) };
    s
}

/// The statistics as the library's JSON object (with the variant, version and options).
pub fn stats_json() -> alloc::string::String {
    let mut buf = alloc::vec![0u8; 4096];
    loop {
        // SAFETY: buf is writable for buf.len() bytes; the call NUL-terminates within them.
        let need = unsafe { sys::locus_stats_json(buf.as_mut_ptr() as *mut _, buf.len()) };
        if need < buf.len() {
            buf.truncate(need);
            return alloc::string::String::from_utf8_lossy(&buf).into_owned();
        }
        buf.resize(need + 1, 0);
    }
}

/// The library's version, `"0.2.0"`.
pub fn version() -> &'static str {
    // SAFETY: a static NUL-terminated ASCII string.
    unsafe { CStr::from_ptr(sys::locus_version()) }.to_str().unwrap_or("")
}

/// The library's variant: `"vam"` for the flagship.
pub fn variant() -> &'static str {
    // SAFETY: a static NUL-terminated ASCII string.
    unsafe { CStr::from_ptr(sys::locus_variant()) }.to_str().unwrap_or("")
}

/// Gives every free page back to the OS now; returns the bytes given back (`locus_purge`).
pub fn purge() -> usize {
    // SAFETY: no preconditions.
    unsafe { sys::locus_purge() }
}

/// Checks the calling thread's heap; true when every invariant holds (`locus_check_heap`).
pub fn check_heap() -> bool {
    // SAFETY: no preconditions.
    unsafe { sys::locus_check_heap() == 0 }
}
