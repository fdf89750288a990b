//! A program with Locus as its #[global_allocator]: its allocations must reach Locus, as its
//! statistics show, whatever their size and alignment.

#[global_allocator]
static GLOBAL: locus::Locus = locus::Locus;

#[repr(C, align(4096))]
struct PageAligned([u8; 100]);

mod common;
use common::serial;

#[test]
fn allocations_go_through_locus() {
    let _serial = serial();
    let before = locus::stats();
    let boxes: Vec<Box<[u8; 100]>> = (0..1000).map(|i| Box::new([i as u8; 100])).collect();
    let during = locus::stats();
    assert!(during.malloc_calls - before.malloc_calls >= 1000, "{before:?}\n{during:?}");
    assert!(during.bytes_allocated >= before.bytes_allocated + 100 * 1000);
    drop(boxes);
    let after = locus::stats();
    assert!(after.free_calls - during.free_calls >= 1000);
    assert_eq!(locus::variant(), "vam");
    assert_eq!(locus::version(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn aligned_zeroed_and_reallocated() {
    let _serial = serial();
    let before = locus::stats().malloc_calls;
    let pages: Vec<Box<PageAligned>> = (0..64).map(|_| Box::new(PageAligned([7; 100]))).collect();
    for p in &pages {
        assert_eq!(&**p as *const PageAligned as usize % 4096, 0);
        assert!(p.0.iter().all(|&b| b == 7));
    }
    assert!(locus::stats().malloc_calls - before >= 64);
    let zeros = vec![0u64; 100_000]; // alloc_zeroed (calloc)
    assert!(zeros.iter().all(|&z| z == 0));
    let mut grown: Vec<u32> = Vec::new();
    for i in 0..100_000u32 {
        grown.push(i); // realloc, through small, medium, large and huge sizes
    }
    assert_eq!(grown.iter().map(|&x| x as u64).sum::<u64>(), 4_999_950_000);
    assert!(locus::check_heap());
}

#[test]
fn threads_allocate_through_locus() {
    let _serial = serial();
    let before = locus::stats();
    let handles: Vec<_> = (0..4)
        .map(|t| std::thread::spawn(move || (0..10_000).map(|i| format!("{t}-{i}")).collect::<Vec<_>>()))
        .collect();
    let strings: Vec<String> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert_eq!(strings.len(), 40_000);
    let after = locus::stats();
    assert!(after.malloc_calls - before.malloc_calls >= 40_000);
    assert!(after.heaps > 1, "threads got heaps of their own: {after:?}");
    assert!(locus::stats_json().contains("\"variant\""));
}
