//! Region as an allocator_api2 Allocator: objects land in the region, single frees are
//! counted, clear frees everything, and over-aligned layouts are honoured.
use allocator_api2::boxed::Box;
use allocator_api2::vec::Vec;
use locus::Region;

mod common;
use common::serial;

#[test]
fn collections_live_in_the_region() {
    let _serial = serial();
    let mut region = Region::new().unwrap();
    let before = locus::stats().regions;
    assert!(before >= 1);
    {
        let b = Box::new_in([1u8; 300], &region);
        assert!(region.contains(&*b as *const [u8; 300]));
        assert_eq!(region.stats().objects_live, 1);
        assert_eq!(region.stats().bump_mode, 1, "nothing freed yet");
        let mut v: Vec<u64, &Region> = Vec::new_in(&region);
        for i in 0..10_000 {
            v.push(i); // grows through locus_region_realloc, in the region
        }
        assert!(region.contains(v.as_ptr()));
        assert_eq!(region.stats().objects_live, 2);
        let frees = region.stats().frees;
        drop(b); // a single free
        assert_eq!(region.stats().frees, frees + 1);
        assert_eq!(region.stats().bump_mode, 0);
        assert_eq!(region.stats().objects_live, 1);
        assert_eq!(v.iter().sum::<u64>(), 49_995_000);
    }
    assert!(region.stats().bytes_held > 0);
    region.clear();
    let s = region.stats();
    assert_eq!((s.objects_live, s.bytes_live, s.bump_mode), (0, 0, 1));
}

#[repr(align(256))]
struct Wide([u8; 16]);

#[test]
fn over_aligned_and_zeroed() {
    let _serial = serial();
    let region = Region::new().unwrap();
    let boxes: std::vec::Vec<Box<Wide, &Region>> = (0..100).map(|_| Box::new_in(Wide([3; 16]), &region)).collect();
    for b in &boxes {
        assert_eq!(&**b as *const Wide as usize % 256, 0);
        assert!(region.contains(&**b as *const Wide));
        assert_eq!(b.0, [3; 16]);
    }
    let z: Box<[u64], &Region> = unsafe { Box::new_zeroed_slice_in(1000, &region).assume_init() };
    assert!(z.iter().all(|&x| x == 0));
    drop(boxes);
    drop(z);
    assert_eq!(region.stats().objects_live, 0);
}

#[test]
fn dropping_the_region_releases_it() {
    let _serial = serial();
    let before = locus::stats().regions;
    let region = Region::new().unwrap();
    assert_eq!(locus::stats().regions, before + 1);
    std::thread::spawn(move || drop(region)).join().unwrap(); // Send
    assert_eq!(locus::stats().regions, before);
}
