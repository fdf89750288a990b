//! Raw bindings to `include/locus.h`, the public interface of the Locus allocators.
//!
//! Linking this crate links a Locus library: by default the flagship (the Vam design) built
//! from the Locus source tree with the `cc` crate, with the `system` feature the installed
//! `liblocus.so` found with pkg-config. Like every Locus library, it exports the whole C
//! malloc surface, so **every** `malloc` of the program (its C dependencies', and Rust's
//! `System` allocator's) is served by Locus once this crate is linked; the `locus` crate's
//! `Locus` global allocator calls it directly.
//!
//! Safe wrappers are in the `locus` crate. Field and function documentation: `locus.h`.
#![cfg_attr(not(test), no_std)]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

/// `locus_stats_t`: counters summed over all heaps (layout version 5; see locus.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct locus_stats_t {
    pub version: u64,
    pub malloc_calls: u64,
    pub free_calls: u64,
    pub remote_frees: u64,
    pub bytes_allocated: u64,
    pub bytes_mapped: u64,
    pub bytes_committed: u64,
    pub bytes_discarded: u64,
    pub discard_calls: u64,
    pub pages_in_use: u64,
    pub pages_free: u64,
    pub blocks_in_use: u64,
    pub huge_in_use: u64,
    pub heaps: u64,
    pub heaps_abandoned: u64,
    pub search_words: u64,
    pub search_words_max: u64,
    pub searches: u64,
    pub lock_acquisitions: u64,
    pub lock_contended: u64,
    pub regions: u64,
    pub region_bytes: u64,
    pub hint_calls: u64,
    pub hint_same_page: u64,
    pub hint_same_line: u64,
    pub hint_same_kregion: u64,
    pub os_calls: u64,
}

/// The layout version of [`locus_stats_t`] these bindings describe.
pub const LOCUS_STATS_VERSION: u64 = 5;

/// `locus_region_t`: an opaque region (arena with per-object free).
#[repr(C)]
pub struct locus_region_t {
    _opaque: [u8; 0],
    _not_send_sync: core::marker::PhantomData<*mut u8>,
}

/// `locus_region_stats_t`: one region's counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct locus_region_stats_t {
    pub objects_live: u64,
    pub bytes_live: u64,
    pub bytes_held: u64,
    pub chunks: u64,
    pub children: u64,
    pub frees: u64,
    pub bump_mode: c_int,
}

extern "C" {
    pub fn locus_version() -> *const c_char;
    pub fn locus_variant() -> *const c_char;
    pub fn locus_purge() -> usize;

    pub fn locus_stats_get(out: *mut locus_stats_t) -> c_int;
    pub fn locus_stats_json(buf: *mut c_char, len: usize) -> usize;
    pub fn locus_stats_print(fd: c_int);
    pub fn locus_sites_json(buf: *mut c_char, len: usize) -> usize;

    pub fn locus_malloc_near(size: usize, hint: *const c_void) -> *mut c_void;
    pub fn locus_calloc_near(n: usize, size: usize, hint: *const c_void) -> *mut c_void;

    pub fn locus_region_create(parent: *mut locus_region_t) -> *mut locus_region_t;
    pub fn locus_region_malloc(region: *mut locus_region_t, size: usize) -> *mut c_void;
    pub fn locus_region_calloc(region: *mut locus_region_t, n: usize, size: usize) -> *mut c_void;
    pub fn locus_region_realloc(region: *mut locus_region_t, p: *mut c_void, size: usize) -> *mut c_void;
    pub fn locus_region_aligned_alloc(region: *mut locus_region_t, align: usize, size: usize) -> *mut c_void;
    pub fn locus_region_free(region: *mut locus_region_t, p: *mut c_void);
    pub fn locus_region_clear(region: *mut locus_region_t);
    pub fn locus_region_destroy(region: *mut locus_region_t);
    pub fn locus_region_on_destroy(
        region: *mut locus_region_t,
        f: Option<unsafe extern "C" fn(arg: *mut c_void)>,
        arg: *mut c_void,
    ) -> c_int;
    pub fn locus_region_of(p: *const c_void) -> *mut locus_region_t;
    pub fn locus_region_stats(region: *mut locus_region_t, out: *mut locus_region_stats_t) -> c_int;

    pub fn locus_check_heap() -> c_int;

    // The C malloc surface the library exports (the ones the `locus` crate calls).
    pub fn malloc(size: usize) -> *mut c_void;
    pub fn calloc(n: usize, size: usize) -> *mut c_void;
    pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void;
    pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void;
    pub fn free(p: *mut c_void);
    pub fn malloc_usable_size(p: *mut c_void) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_library_is_locus() {
        let v = unsafe { core::ffi::CStr::from_ptr(locus_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        let mut s = locus_stats_t::default();
        assert_eq!(unsafe { locus_stats_get(&mut s) }, 0);
        assert_eq!(s.version, LOCUS_STATS_VERSION);
    }
}
