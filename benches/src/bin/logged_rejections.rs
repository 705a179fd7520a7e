//! Rejections of one OPEN breaker reported to a `LoggingEventListener`, on one thread and on
//! two threads at once, against the same breaker with a listener that does nothing.
//!
//! An outage is when every thread of a service rejects at once, and the logging listener
//! counts each period's rejections per breaker (one WARN per period, the running count on
//! the DEBUG records). It used to count under its own mutex, so two threads rejecting on one
//! breaker queued on that lock; a thread now counts on the period it cached, with one atomic
//! add. No `tracing` subscriber is installed, as in a service whose filter drops DEBUG: the
//! records cost next to nothing and the counting is what is timed. Rounds alternate the four
//! cases; the medians over rounds are printed (nanoseconds per rejection, per thread).
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin logged_rejections
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::time::Instant;

use interlock::{CircuitBreaker, Event, LoggingEventListener};
use interlock_benches::pin_to_core;

/// Rejections per thread in one slice.
const SLICE: u32 = 200_000;
/// Rounds (each times every case once).
const ROUNDS: usize = 40;

/// A forced-open breaker reporting to `listener`.
fn open(listener: impl interlock::EventListener) -> CircuitBreaker {
    let breaker = CircuitBreaker::builder("payments")
        .listener(listener)
        .build()
        .expect("valid breaker");
    breaker.force_open();
    breaker
}

/// Nanoseconds per rejection per thread of `threads` threads rejecting `SLICE` times each.
fn slice(breaker: &CircuitBreaker, threads: usize) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for worker in 0..threads {
            s.spawn(move || {
                pin_to_core(worker);
                for _ in 0..SLICE {
                    assert!(black_box(breaker).acquire().is_err(), "a call was admitted");
                }
            });
        }
    });
    start.elapsed().as_secs_f64() * 1e9 / f64::from(SLICE)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let logged = open(LoggingEventListener::new());
    let quiet = open(|event: &Event<'_>| {
        black_box(event);
    });
    let cases: [(&str, &CircuitBreaker, usize); 4] = [
        ("logging listener, one thread ", &logged, 1),
        ("logging listener, two threads", &logged, 2),
        ("no-op listener, one thread   ", &quiet, 1),
        ("no-op listener, two threads  ", &quiet, 2),
    ];
    let mut times = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for (_, breaker, threads) in cases {
        slice(breaker, threads);
    }
    for round in 0..ROUNDS {
        for i in 0..cases.len() {
            // A different case first every round.
            let i = (i + round) % cases.len();
            let (_, breaker, threads) = cases[i];
            times[i].push(slice(breaker, threads));
        }
    }
    println!("{ROUNDS} rounds of {SLICE} rejections per thread; medians per rejection and thread");
    for ((name, _, _), t) in cases.iter().zip(&mut times) {
        println!("{name}  {:7.1} ns", median(t));
    }
}
