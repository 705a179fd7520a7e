//! Instruction counts of interlock's hot paths, under callgrind (gungraun).
//!
//! Wall-clock benchmarks (`side_by_side`) drift with the machine's load; the number of
//! instructions one call executes does not, so this target is what to compare before and
//! after a change to the hot path. Each benchmark is ONE call: the breaker is built and warmed
//! by the argument expression (not measured), the benchmark function makes the call and hands
//! the breaker back, so its drop is not measured either.
//!
//! Run (valgrind and the matching `gungraun-runner` must be installed; see `README.md`):
//!
//! ```sh
//! cargo install gungraun-runner --version 0.18.2 --locked
//! CARGO_TARGET_DIR=/root/.cache/interlock-bench-target \
//!     cargo bench -p interlock-benches --bench instructions
//! ```
//!
//! Caveat: under valgrind `Instant::now()` is a real `clock_gettime` system call (no vDSO),
//! whose kernel side is not counted. The clock's instruction count is therefore low while its
//! wall-clock cost is not: see `reference/instant_now` in `side_by_side`.

#![allow(
    missing_docs,
    reason = "gungraun's macros generate undocumented modules and items"
)]

use std::hint::black_box;

use gungraun::{library_benchmark, library_benchmark_group, main};
use interlock::{Clock, CoarseClock, MonotonicClock};
use interlock_benches::ours::{self, Breaker, HalfOpen, Mixed, RegistryHit};
use interlock_benches::{SyncBreaker, peers};

// One successful call through a closed breaker (default config: count window 100,
// slow-call detection on, warmed until the window is full of successes), on each clock;
// and one with a failure among the last 100 calls (the success is then recorded under
// the lock).
#[library_benchmark]
#[bench::default_clock(ours::closed())]
#[bench::monotonic_clock(ours::closed_monotonic())]
#[bench::default_clock_failure_in_window(ours::closed_failure_in_window())]
fn closed_call(breaker: Breaker) -> (bool, Breaker) {
    let admitted = black_box(&breaker).call();
    (admitted, breaker)
}

// Issue 22, production-like windows: one successful call with one failure in 10 in the
// window (count window of 100, and a 60 s time window in the current second): the success
// is counted on the lock-free success lanes. And one failing call that folds 9 successes
// waiting on the lanes into the window before it is recorded under the lock.
#[library_benchmark]
#[bench::count_window_10pct(ours::mixed_count(10).after_successes(3))]
#[bench::time_window_10pct(ours::mixed_time(10).after_successes(3))]
#[bench::time_window_0pct(ours::mixed_time(0))]
#[bench::time_window_0pct_listener(ours::mixed_time_listened(0))]
fn mixed_success(m: Mixed) -> (bool, Mixed) {
    let admitted = black_box(&m).call_success();
    (admitted, m)
}

#[library_benchmark]
#[bench::count_window_folding_9(ours::mixed_count(10).after_successes(9))]
#[bench::time_window_folding_9(ours::mixed_time(10).after_successes(9))]
fn mixed_failure(m: Mixed) -> (bool, Mixed) {
    let admitted = black_box(&m).failure();
    (admitted, m)
}

// One call rejected by an OPEN breaker (`retry_after` computed from a clock read).
#[library_benchmark]
#[bench::default_clock(ours::rejected())]
#[bench::monotonic_clock(ours::rejected_monotonic())]
fn rejected_call(breaker: Breaker) -> (bool, Breaker) {
    let admitted = black_box(&breaker).call();
    (admitted, breaker)
}

// The same two calls through the fastest peers (recloser closed, failsafe and recloser
// rejected), for a load-independent comparison. Called through a `Box<dyn SyncBreaker>`
// (failsafe's setup returns an opaque type): one indirect call more than the rows above.
#[library_benchmark]
#[bench::recloser(boxed(peers::recloser::closed()))]
#[bench::failsafe(boxed(peers::failsafe::closed()))]
fn peer_closed_call(breaker: Box<dyn SyncBreaker>) -> (bool, Box<dyn SyncBreaker>) {
    let admitted = black_box(&breaker).call();
    (admitted, breaker)
}

#[library_benchmark]
#[bench::recloser(boxed(peers::recloser::rejected()))]
#[bench::failsafe(boxed(peers::failsafe::rejected()))]
fn peer_rejected_call(breaker: Box<dyn SyncBreaker>) -> (bool, Box<dyn SyncBreaker>) {
    let admitted = black_box(&breaker).call();
    (admitted, breaker)
}

fn boxed(b: impl SyncBreaker + 'static) -> Box<dyn SyncBreaker> {
    Box::new(b)
}

// One HALF_OPEN admission: `acquire()` then drop of the permit (the slot comes back).
#[library_benchmark]
#[bench::acquire_and_drop(ours::half_open())]
fn half_open_admission(breaker: HalfOpen) -> (bool, HalfOpen) {
    let admitted = black_box(&breaker).call();
    (admitted, breaker)
}

// One `Registry::get` of an existing name, among 1 and 1,000 names.
#[library_benchmark]
#[bench::names_1(ours::registry(1))]
#[bench::names_1000(ours::registry(1_000))]
fn registry_hit(hit: RegistryHit) -> (bool, RegistryHit) {
    let found = black_box(&hit).call();
    (found, hit)
}

// One read of each clock source (the coarse clock's thread is started by the argument).
#[library_benchmark]
#[bench::monotonic_clock(MonotonicClock.now())]
fn clock_monotonic(warm: interlock::Timestamp) -> (interlock::Timestamp, interlock::Timestamp) {
    (black_box(&MonotonicClock).now(), warm)
}

#[library_benchmark]
#[bench::coarse_clock(CoarseClock.now())]
fn clock_coarse(warm: interlock::Timestamp) -> (interlock::Timestamp, interlock::Timestamp) {
    (black_box(&CoarseClock).now(), warm)
}

library_benchmark_group!(
    name = hot_paths,
    benchmarks = [
        closed_call,
        mixed_success,
        mixed_failure,
        rejected_call,
        peer_closed_call,
        peer_rejected_call,
        half_open_admission,
        registry_hit,
        clock_monotonic,
        clock_coarse
    ]
);

main!(library_benchmark_groups = hot_paths);
