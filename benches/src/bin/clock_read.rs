//! The default clock's read and a closed call, for comparing two builds of the
//! core crate: 200 slices of 100,000 `CoarseClock` reads and of 100,000 closed calls
//! through `CircuitBreaker::new`, printing the best and the median slice.
//!
//! Build it at each of the two commits (copy this file into the older checkout if it
//! lacks it) and run the two binaries one after the other, several times, in both orders:
//!
//! ```sh
//! cargo build --release -p interlock-benches --bin clock_read
//! cp "$CARGO_TARGET_DIR/release/clock_read" /tmp/clock_read-after   # and -before
//! for i in 1 2 3; do /tmp/clock_read-before; /tmp/clock_read-after; done
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::time::Instant;

use interlock::{CircuitBreaker, Clock, CoarseClock};

const SLICES: usize = 200;
const PER_SLICE: u32 = 100_000;

fn slice(f: &mut dyn FnMut(), n: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() * 1e9 / f64::from(n)
}

fn main() {
    let breaker = CircuitBreaker::new("clock-read");
    for _ in 0..1_000 {
        let _ = breaker.call(|| Ok::<_, std::io::Error>(()));
    }
    let mut read = || {
        black_box(black_box(&CoarseClock).now());
    };
    let mut call = || {
        let _ = black_box(black_box(&breaker).call(|| Ok::<_, std::io::Error>(())));
    };
    let (mut reads, mut calls) = (Vec::with_capacity(SLICES), Vec::with_capacity(SLICES));
    for _ in 0..SLICES {
        reads.push(slice(&mut read, PER_SLICE));
        calls.push(slice(&mut call, PER_SLICE));
    }
    reads.sort_by(f64::total_cmp);
    calls.sort_by(f64::total_cmp);
    println!(
        "CoarseClock read: min {:.2} ns, median {:.2} ns | closed call: min {:.2} ns, median {:.2} ns",
        reads[0],
        reads[SLICES / 2],
        calls[0],
        calls[SLICES / 2]
    );
}
