//! One breaker on one thread, one mixed workload: a loop to profile, to time two builds
//! against each other, or to count instructions per call with the failures included.
//!
//! `paired mixed` gives the ratios, but each process runs every workload and both sides,
//! which is in the way of `perf record` and of callgrind. This runs one of them alone: a
//! count window of 100 or a 60 s time window (`ours::mixed_count` / `ours::mixed_time`), the
//! time window with a listener that ignores every event (`time-listened`,
//! `ours::mixed_time_listened`), or recloser's count ring of 100
//! (`peers::recloser::mixed_count`), with a failure every
//! `period` calls (0: none), in `rounds` slices of 20,000 calls, and prints the fastest
//! slice's time per call. `scripts/loop-instructions` runs it under callgrind at two round
//! counts and prints the instructions per call (the difference over the calls between
//! them, so set-up and warm-up cancel out).
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin one_thread -- count 100 2000
//! scripts/loop-instructions
//! perf record -e cpu-clock target/release/one_thread time 10 2000
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use interlock_benches::peers::recloser;
use interlock_benches::{SyncBreaker, ours};

/// Calls per slice.
const SLICE: u32 = 20_000;

/// The fastest of `rounds` slices of `b`, in nanoseconds per call.
fn fastest<B: SyncBreaker>(b: &B, rounds: u32) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let start = Instant::now();
        for _ in 0..SLICE {
            black_box(black_box(b).call());
        }
        best = best.min(start.elapsed().as_secs_f64() * 1e9 / f64::from(SLICE));
    }
    best
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: one_thread count|time|time-listened|recloser [period] [rounds]";
    let Some(window) = args.first() else {
        eprintln!("{usage}");
        return ExitCode::FAILURE;
    };
    let number = |i: usize, default: u32| args.get(i).map_or(Ok(default), |s| s.parse());
    let (Ok(period), Ok(rounds)) = (number(1, 10), number(2, 2000)) else {
        eprintln!("{usage}");
        return ExitCode::FAILURE;
    };
    let ns = match window.as_str() {
        "count" => fastest(&ours::mixed_count(period), rounds),
        "time" => fastest(&ours::mixed_time(period), rounds),
        "time-listened" => fastest(&ours::mixed_time_listened(period), rounds),
        "recloser" => fastest(&recloser::mixed_count(period), rounds),
        _ => {
            eprintln!("{usage}");
            return ExitCode::FAILURE;
        }
    };
    println!("{window} period {period}: {ns:.2} ns/call (fastest of {rounds} slices)");
    ExitCode::SUCCESS
}
