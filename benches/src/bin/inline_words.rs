//! Two threads on one count window with 10 % failures, a window of 100 (its words inline in
//! the machine) against one of 150 (its words on the heap), alternated slice by slice in one
//! process, so that the host's slow and fast phases fall on both sides alike.
//!
//! Every failure takes the machine's lock, and each cache line the lock holder writes is one
//! the next holder fetches from the other core. A window of up to 128 outcomes keeps its words
//! inside the machine, on lines the lock holder brings along anyway; a larger one keeps them on
//! the heap, one line more per failure. Per-failure work is otherwise the same for both sizes.
//! Built before that change, the two sizes time alike (ratio 0.99–1.00), which is the control.
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin inline_words
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use interlock_benches::ours::{self, Mixed};
use interlock_benches::two_thread_slice;

/// Calls per thread in one slice.
const CALLS: u32 = 200_000;
/// Slices per window.
const ROUNDS: usize = 200;
/// One failure in this many calls, on each thread.
const PERIOD: u32 = 10;

/// Wall time per call of one two-thread slice on `b`.
fn slice(b: &Mixed) -> f64 {
    two_thread_slice(b, CALLS, true).as_secs_f64() * 1e9 / f64::from(CALLS)
}

fn main() {
    let (inline, heap) = (
        ours::mixed_count_of(100, PERIOD),
        ours::mixed_count_of(150, PERIOD),
    );
    let (mut ratios, mut a, mut b) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (x, y) = if round % 2 == 0 {
            let x = slice(&inline);
            (x, slice(&heap))
        } else {
            let y = slice(&heap);
            (slice(&inline), y)
        };
        ratios.push(x / y);
        a.push(x);
        b.push(y);
    }
    for v in [&mut ratios, &mut a, &mut b] {
        v.sort_by(f64::total_cmp);
    }
    let (q1, mid, q3) = (ROUNDS / 4, ROUNDS / 2, 3 * ROUNDS / 4);
    println!(
        "count(100) / count(150), two threads, 10 % failures: median {:.3} (quartiles {:.3}, {:.3}); \
         medians {:.1} ns and {:.1} ns per call",
        ratios[mid], ratios[q1], ratios[q3], a[mid], b[mid]
    );
}
