//! Calls and rejections reported to interlock's listeners, on one thread and on two threads
//! at once (one breaker), against the same breaker with a listener that does nothing.
//!
//! A listener hears every call, so what it does per event is on the call's path, and in an
//! outage every thread rejects at once. Each listener keeps its state per breaker name
//! (`interlock::PerBreaker`): the handles of the `metrics` listener, the attribute sets of
//! the OpenTelemetry one, the logging listener's count of the period's rejections. Measured
//! here:
//!
//! - `LoggingEventListener`, rejections (no `tracing` subscriber, as with a filter that drops
//!   DEBUG: the records cost next to nothing, the counting is what is timed);
//! - `interlock_metrics::MetricsEventListener`, successes and rejections, with no recorder
//!   (the listener's own work), or with `prometheus` as the argument behind a real
//!   `metrics-exporter-prometheus` recorder;
//! - `interlock_otel::OtelEventListener` on the global (no-op) meter, successes and
//!   rejections: the listener's own work;
//! - a closure that ignores the event, successes and rejections: the floor;
//! - the `metrics` listener shared by 32 or 100 breakers that one thread calls in turn, as a
//!   per-host client's (100 is more than a thread caches).
//!
//! Rounds alternate the cases, starting from a different one each round; the medians over
//! rounds are printed (nanoseconds per call, per thread).
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin listeners
//! cargo run --release -p interlock-benches --bin listeners -- prometheus
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::hint::black_box;
use std::time::Instant;

use interlock::{CircuitBreaker, Event, EventListener, LoggingEventListener};
use interlock_benches::{median, pin_to_core};

/// Calls per thread in one slice.
const SLICE: u32 = 100_000;
/// Rounds (each times every case once).
const ROUNDS: usize = 30;

/// A breaker reporting to `listener`: forced open for rejections, closed for successes.
fn breaker(listener: impl EventListener, rejecting: bool) -> CircuitBreaker {
    let breaker = CircuitBreaker::builder("payments")
        .listener(listener)
        .build()
        .expect("valid breaker");
    if rejecting {
        breaker.force_open();
    }
    breaker
}

/// One case: its label, its breakers (called in turn), whether they reject, on how many
/// threads.
struct Case {
    label: String,
    breakers: Vec<CircuitBreaker>,
    rejecting: bool,
    threads: usize,
}

/// Nanoseconds per call per thread of the case's threads calling `SLICE` times each.
fn slice(case: &Case) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for worker in 0..case.threads {
            s.spawn(move || {
                pin_to_core(worker);
                for i in 0..SLICE as usize {
                    let breaker = &case.breakers[i % case.breakers.len()];
                    let admitted = if case.rejecting {
                        black_box(breaker).acquire().is_ok()
                    } else {
                        black_box(breaker)
                            .call(|| Ok::<_, std::io::Error>(1))
                            .is_ok()
                    };
                    assert_eq!(admitted, !case.rejecting, "the breaker left its scenario");
                }
            });
        }
    });
    start.elapsed().as_secs_f64() * 1e9 / f64::from(SLICE)
}

fn main() {
    let prometheus = std::env::args().nth(1).as_deref() == Some("prometheus");
    let handle = prometheus.then(|| {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("the only recorder of this process")
    });
    let mut cases = Vec::new();
    let mut add = |name: &str, rejecting: bool, make: &dyn Fn() -> CircuitBreaker| {
        for threads in [1, 2] {
            cases.push(Case {
                label: format!(
                    "{name}, {}, {threads} thread{}",
                    if rejecting { "rejections" } else { "successes" },
                    if threads == 1 { "" } else { "s" }
                ),
                breakers: vec![make()],
                rejecting,
                threads,
            });
        }
    };
    add("logging", true, &|| {
        breaker(LoggingEventListener::new(), true)
    });
    for rejecting in [false, true] {
        let metrics = if prometheus {
            "metrics (prometheus)"
        } else {
            "metrics"
        };
        add(metrics, rejecting, &|| {
            breaker(interlock_metrics::MetricsEventListener::new(), rejecting)
        });
        if !prometheus {
            add("otel", rejecting, &|| {
                breaker(interlock_otel::OtelEventListener::new(), rejecting)
            });
        }
        add("no-op closure", rejecting, &|| {
            breaker(
                |event: &Event<'_>| {
                    black_box(event);
                },
                rejecting,
            )
        });
    }
    // A per-host client's listener: one thread calling many breakers in turn, more than a
    // thread caches (64) in the last case.
    let listener = std::sync::Arc::new(interlock_metrics::MetricsEventListener::new());
    for hosts in [32, 100] {
        cases.push(Case {
            label: format!("metrics, successes, {hosts} breakers in turn, 1 thread"),
            breakers: (0..hosts)
                .map(|i| {
                    CircuitBreaker::builder(format!("backend-{i:04}.svc.internal"))
                        .listener(listener.clone())
                        .build()
                        .expect("valid breaker")
                })
                .collect(),
            rejecting: false,
            threads: 1,
        });
    }
    let mut times = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for case in &cases {
        slice(case);
    }
    for round in 0..ROUNDS {
        for i in 0..cases.len() {
            let i = (i + round) % cases.len();
            times[i].push(slice(&cases[i]));
        }
        if let Some(handle) = &handle {
            handle.run_upkeep();
        }
    }
    println!("{ROUNDS} rounds of {SLICE} calls per thread; medians per call and thread");
    for (case, t) in cases.iter().zip(&mut times) {
        println!("{:<45} {:7.1} ns", case.label, median(t));
    }
}
