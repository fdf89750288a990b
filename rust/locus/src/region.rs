//! Regions: arenas that still free single objects (locus.h's `locus_region_*`, the Reap design;
//! docs/regions.md). Allocation bumps a pointer until the first free, then reuses freed space
//! by exact size; [`Region::clear`] frees everything at once.

use core::alloc::Layout;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use allocator_api2::alloc::{AllocError, Allocator};
use locus_sys as sys;

/// A region's counters (`locus_region_stats_t`).
pub type RegionStats = sys::locus_region_stats_t;

/// A Locus region. Objects are allocated through its [`Allocator`] implementation (by
/// reference: `allocator_api2::vec::Vec::new_in(&region)`), and all of them are freed by
/// [`clear`](Region::clear) or when the region is dropped. The borrow checker keeps
/// collections from outliving the region or a clear (which needs `&mut`).
///
/// A region is used by one thread at a time: it may move to another thread (`Send`), but not
/// be shared between threads (`!Sync`), as locus.h requires.
///
/// ```
/// use allocator_api2::vec::Vec;
///
/// let mut region = locus::Region::new().expect("out of memory");
/// {
///     let mut v = Vec::new_in(&region);
///     v.extend(0..1000u32);
///     assert_eq!(v.iter().sum::<u32>(), 499500);
///     assert_eq!(region.stats().objects_live, 1);
/// }
/// region.clear(); // everything allocated in it is gone
/// assert_eq!(region.stats().objects_live, 0);
/// ```
pub struct Region {
    raw: NonNull<sys::locus_region_t>,
    // !Sync (a raw pointer's default), Send below.
    _marker: PhantomData<*mut u8>,
}

// SAFETY: locus.h lets a region move between threads with the program's own synchronisation,
// which moving a value provides; its objects may be freed from any thread.
unsafe impl Send for Region {}

impl Region {
    /// A new, empty region; `None` when memory runs out.
    pub fn new() -> Option<Region> {
        // SAFETY: a NULL parent makes a top-level region.
        let raw = unsafe { sys::locus_region_create(core::ptr::null_mut()) };
        NonNull::new(raw).map(|raw| Region { raw, _marker: PhantomData })
    }

    /// Frees every object of the region at once and goes back to bump allocation; the region
    /// keeps some of its memory for reuse.
    pub fn clear(&mut self) {
        // SAFETY: the region is live; &mut self means no allocation of it is borrowed.
        unsafe { sys::locus_region_clear(self.raw.as_ptr()) }
    }

    /// The region's counters.
    pub fn stats(&self) -> RegionStats {
        let mut s = RegionStats::default();
        // SAFETY: the region is live and s is writable.
        unsafe { sys::locus_region_stats(self.raw.as_ptr(), &mut s) };
        s
    }

    /// Whether `p` is a live object of this region.
    pub fn contains<T: ?Sized>(&self, p: *const T) -> bool {
        // SAFETY: locus_region_of accepts any address.
        unsafe { sys::locus_region_of(p as *const c_void) == self.raw.as_ptr() }
    }

    /// The underlying `locus_region_t`, for the raw API.
    pub fn as_raw(&self) -> *mut sys::locus_region_t {
        self.raw.as_ptr()
    }

    fn raw_alloc(&self, layout: Layout) -> *mut u8 {
        let region = self.raw.as_ptr();
        // SAFETY: the region is live; both calls accept any size (and a power-of-two align).
        unsafe {
            if layout.align() <= super::MIN_ALIGN {
                sys::locus_region_malloc(region, layout.size()) as *mut u8
            } else {
                sys::locus_region_aligned_alloc(region, layout.align(), layout.size()) as *mut u8
            }
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the region is live and nothing borrows it any more.
        unsafe { sys::locus_region_destroy(self.raw.as_ptr()) }
    }
}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Region").field("raw", &self.raw).field("stats", &self.stats()).finish()
    }
}

fn slice(p: *mut u8, len: usize) -> Result<NonNull<[u8]>, AllocError> {
    let p = NonNull::new(p).ok_or(AllocError)?;
    Ok(NonNull::slice_from_raw_parts(p, len))
}

// SAFETY: blocks stay valid until deallocated, cleared (needs &mut self, so no Allocator
// borrow is alive) or the region is dropped (likewise); the region's objects are aligned as
// asked (malloc's alignment, or aligned_alloc's).
unsafe impl Allocator for Region {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        slice(self.raw_alloc(layout), layout.size())
    }

    fn allocate_zeroed(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.align() <= super::MIN_ALIGN {
            // SAFETY: the region is live.
            let p = unsafe { sys::locus_region_calloc(self.raw.as_ptr(), 1, layout.size()) };
            return slice(p as *mut u8, layout.size());
        }
        let block = self.allocate(layout)?;
        // SAFETY: the block is writable for layout.size() bytes.
        unsafe { core::ptr::write_bytes(block.as_ptr() as *mut u8, 0, layout.size()) };
        Ok(block)
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, _layout: Layout) {
        sys::locus_region_free(self.raw.as_ptr(), ptr.as_ptr() as *mut c_void)
    }

    unsafe fn grow(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.resize(ptr, old, new)
    }

    unsafe fn shrink(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        self.resize(ptr, old, new)
    }
}

impl Region {
    /// grow/shrink: locus_region_realloc (which keeps the object in the region) when malloc's
    /// alignment is enough, else a new object, a copy and a free.
    unsafe fn resize(&self, ptr: NonNull<u8>, old: Layout, new: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if new.align() <= super::MIN_ALIGN && old.align() <= super::MIN_ALIGN && new.size() > 0 {
            let p = sys::locus_region_realloc(self.raw.as_ptr(), ptr.as_ptr() as *mut c_void, new.size());
            return slice(p as *mut u8, new.size());
        }
        let block = self.allocate(new)?;
        core::ptr::copy_nonoverlapping(ptr.as_ptr(), block.as_ptr() as *mut u8, old.size().min(new.size()));
        self.deallocate(ptr, old);
        Ok(block)
    }
}
