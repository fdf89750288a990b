//! A region as an allocator: `cargo run --example region`.
use allocator_api2::vec::Vec;

fn main() {
    let mut region = locus::Region::new().expect("out of memory");
    for round in 0..3 {
        let mut lines = Vec::new_in(&region);
        for i in 0..1000 {
            let mut line = Vec::new_in(&region);
            line.extend_from_slice(format!("round {round} line {i}").as_bytes());
            lines.push(line);
        }
        let s = region.stats();
        println!("round {round}: {} objects, {} bytes held", s.objects_live, s.bytes_held);
        drop(lines);
        region.clear(); // one call frees what is left
    }
}
