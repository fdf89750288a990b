//! Locus as the global allocator: `cargo run --example global`.
#[global_allocator]
static GLOBAL: locus::Locus = locus::Locus;

fn main() {
    let before = locus::stats();
    let words: Vec<String> = (0..100_000).map(|i| format!("word{i}")).collect();
    let after = locus::stats();
    println!(
        "Locus {} ({}): {} allocations for {} words, {} bytes live",
        locus::version(),
        locus::variant(),
        after.malloc_calls - before.malloc_calls,
        words.len(),
        after.bytes_allocated
    );
}
