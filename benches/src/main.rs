//! `ternio-bench`: the side-by-side comparison harness will live here (see
//! the benchmark issue). Today the crate holds the micro-benchmarks in
//! `benches/`: `cargo bench -p ternio-bench`.

fn main() {
    eprintln!(
        "the comparison harness is not built yet; run `cargo bench -p ternio-bench` for the micro-benchmarks"
    );
    std::process::exit(2);
}
