//! Two threads on one breaker, interlock alone: a steady load to profile or to compare two
//! builds of the core with.
//!
//! `paired mixed2` gives the ratio to the peers, but half of each process is the peers' time,
//! which is in the way under `perf record`, and each of its slices is short. This runs only
//! interlock's mixed workload (count window of 100 or 60 s time window, a failure every
//! `period` calls, `ours::mixed_count` / `ours::mixed_time`) on two threads pinned to two cores,
//! 20 rounds of 2,000,000 calls per thread, and prints the wall time per call of one thread,
//! with the host's cache-line handoff time (`line_handoff_ns`) measured before and after: a
//! run whose handoffs are slow was measured in the host's slow mode (most likely a placement
//! of the two vCPUs), not on a slower build.
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin two_threads -- count 10
//! # Two builds, alternating (copy each build's binary aside first):
//! for i in $(seq 10); do for v in a b; do echo "$v $(/tmp/two_threads-$v count 10)"; done; done
//! perf record -e cpu-clock target/release/two_threads time 10
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::time::Instant;

use interlock_benches::{SyncBreaker, line_handoff_ns, ours, pin_to_core};

const ROUNDS: u32 = 20;
const CALLS: u32 = 2_000_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let window = args.next().unwrap_or_else(|| "count".to_owned());
    let period = match args.next().map(|p| p.parse::<u32>()) {
        None => 10,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            eprintln!("the period must be a whole number of calls: {e}");
            std::process::exit(2);
        }
    };
    let breaker = match window.as_str() {
        "count" => ours::mixed_count(period),
        "time" => ours::mixed_time(period),
        other => {
            eprintln!("the window is `count` or `time`, not `{other}`");
            std::process::exit(2);
        }
    };
    let before = line_handoff_ns();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        std::thread::scope(|s| {
            for worker in 0..2 {
                let breaker = &breaker;
                s.spawn(move || {
                    pin_to_core(worker);
                    for _ in 0..CALLS {
                        black_box(black_box(breaker).call());
                    }
                });
            }
        });
    }
    let per_call = start.elapsed().as_secs_f64() * 1e9 / (f64::from(ROUNDS) * f64::from(CALLS));
    let after = line_handoff_ns();
    println!(
        "{per_call:.2} ns/call/thread (cache-line handoff {before:.0} ns before, {after:.0} ns after)"
    );
}
