//! Threads reporting at once, through the process-wide recorder (its own
//! test binary: one global recorder per process). The listener finds a
//! breaker's handles without a lock on a thread that reported it lately
//! (`interlock::PerBreaker`): every call and rejection must still land on
//! its breaker's series, and a breaker removed and made again under the
//! same name must start from its initial state on every thread.

mod support;

use std::sync::{Arc, Barrier};

use interlock::Registry;
use interlock_metrics::MetricsEventListener;
use metrics_util::debugging::DebuggingRecorder;
use support::{Value, collect};

const THREADS: usize = 4;

fn ok() -> Result<(), std::io::Error> {
    Ok(())
}

#[test]
fn four_threads_report_every_call_on_its_breaker_and_a_remade_breaker_starts_afresh() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");
    let listener = Arc::new(MetricsEventListener::new());
    let registry = Registry::builder()
        .listener(listener.clone())
        .build()
        .unwrap();
    registry.get("b.example.com:443").force_open();
    let removed = Barrier::new(THREADS + 1);
    let remade = Barrier::new(THREADS + 1);
    let reset = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for worker in 0..THREADS {
            let (registry, removed, remade, reset) = (&registry, &removed, &remade, &reset);
            s.spawn(move || {
                for _ in 0..1000 {
                    registry.get("a.example.com:443").call(ok).unwrap();
                    assert!(registry.get("b.example.com:443").acquire().is_err());
                }
                removed.wait();
                remade.wait();
                if worker == 0 {
                    // This thread reported the removed breaker lately: the
                    // new one must still be seeded afresh.
                    let a = registry.get("a.example.com:443");
                    a.force_open();
                    a.reset();
                }
                reset.wait();
                for _ in 0..100 {
                    registry.get("a.example.com:443").call(ok).unwrap();
                }
            });
        }
        removed.wait();
        let values = collect(&snapshotter);
        let calls = "interlock_call_duration_seconds{breaker=a.example.com:443,outcome=success}";
        match &values[calls] {
            Value::Histogram(samples) => assert_eq!(samples.len(), THREADS * 1000),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            values["interlock_call_rejected_total{breaker=b.example.com:443}"],
            Value::Counter((THREADS * 1000) as u64)
        );
        // Every thread cached "a"; it goes.
        registry.remove("a.example.com:443").unwrap();
        remade.wait();
    });
    let values = collect(&snapshotter);
    let state = |s: &str| {
        values[&format!("interlock_state{{breaker=a.example.com:443,state={s}}}")].clone()
    };
    // Made again closed (seeded), forced open, reset: closed, and nothing
    // left on forced_open.
    assert_eq!(state("closed"), Value::Gauge(1.0));
    assert_eq!(state("forced_open"), Value::Gauge(0.0));
    match &values["interlock_call_duration_seconds{breaker=a.example.com:443,outcome=success}"] {
        Value::Histogram(samples) => assert_eq!(samples.len(), THREADS * 100),
        other => panic!("{other:?}"),
    }
    assert_eq!(listener.breaker_count(), 2);
}
