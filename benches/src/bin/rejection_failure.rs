//! A rejection and its `last_failure()`, on one thread and on two threads at once (each on
//! its own breaker), timed in alternating slices.
//!
//! Issue 24: `CircuitOpenError::last_failure()` used to look the breaker up in one
//! process-wide mutex, so two threads rejecting on *different* breakers serialised on it.
//! This measures exactly that workload: an OPEN breaker per thread (tripped by a failure,
//! one-hour wait), and per iteration one rejected `call` plus a read of the rejection's
//! last failure. Rounds alternate "one thread" and "two threads" slices; each round gives
//! one figure per side, the median over rounds is reported (nanoseconds per iteration, per
//! thread).
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin rejection_failure
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use interlock::{CallError, CircuitBreaker, Config, State};
use interlock_benches::median;

/// Iterations per slice and thread.
const SLICE: u32 = 20_000;
/// Rounds (each times one single-thread slice and one two-thread slice).
const ROUNDS: usize = 200;

fn open_breaker(name: &str) -> CircuitBreaker {
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(3600))
        .build()
        .expect("valid config");
    let breaker = CircuitBreaker::builder(name)
        .config(config)
        .build()
        .expect("valid breaker");
    let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("connection refused")));
    assert_eq!(breaker.state(), State::Open, "the breaker did not open");
    breaker
}

/// One iteration: a rejected call and its last failure's length.
#[inline]
fn reject_and_read(breaker: &CircuitBreaker) -> usize {
    match black_box(breaker).call(|| Ok::<u32, std::io::Error>(1)) {
        Err(CallError::Rejected(open)) => open.last_failure().map_or(0, |f| f.message().len()),
        _ => panic!("the breaker admitted a call"),
    }
}

fn slice(breaker: &CircuitBreaker) -> Duration {
    let start = Instant::now();
    for _ in 0..SLICE {
        black_box(reject_and_read(breaker));
    }
    start.elapsed()
}

fn per_iteration(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9 / f64::from(SLICE)
}

fn main() {
    let a = open_breaker("orders");
    let b = open_breaker("payments");
    assert_eq!(reject_and_read(&a), "connection refused".len());

    // The second thread runs a slice whenever the main thread says so.
    let start = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    let worker = {
        let (start, done, b) = (start.clone(), done.clone(), b.clone());
        std::thread::spawn(move || {
            let mut times = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                start.wait();
                times.push(per_iteration(slice(&b)));
                done.wait();
            }
            times
        })
    };

    for _ in 0..20 {
        slice(&a);
    }
    let mut one = Vec::with_capacity(ROUNDS);
    let mut two = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let alone = |one: &mut Vec<f64>| one.push(per_iteration(slice(&a)));
        if round % 2 == 0 {
            alone(&mut one);
        }
        start.wait();
        two.push(per_iteration(slice(&a)));
        done.wait();
        if round % 2 == 1 {
            alone(&mut one);
        }
    }
    let mut other = worker.join().expect("the worker thread panicked");
    println!("{ROUNDS} rounds of {SLICE} iterations (a rejection and its last_failure()); medians");
    println!(
        "one thread:                     {:7.1} ns",
        median(&mut one)
    );
    println!(
        "two threads, different breakers: {:7.1} ns (main) {:7.1} ns (second)",
        median(&mut two),
        median(&mut other)
    );
}
