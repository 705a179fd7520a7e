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

use interlock_benches::{alternate, ours, two_thread_slice};

/// Calls per thread in one slice.
const CALLS: u32 = 200_000;
/// Slices per window.
const ROUNDS: usize = 200;
/// One failure in this many calls, on each thread.
const PERIOD: u32 = 10;

fn main() {
    let (inline, heap) = (
        ours::mixed_count_of(100, PERIOD),
        ours::mixed_count_of(150, PERIOD),
    );
    let (ratio, inline_ns, heap_ns) = alternate(
        ROUNDS,
        CALLS,
        || (),
        |()| two_thread_slice(&inline, CALLS, true),
        |()| two_thread_slice(&heap, CALLS, true),
    );
    println!(
        "count(100) / count(150), two threads, 10 % failures: median {ratio:.3}; \
         medians {inline_ns:.1} ns and {heap_ns:.1} ns per call"
    );
}
