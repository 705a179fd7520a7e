//! `LoggingEventListener` end to end, captured with a `tracing-subscriber`
//! layer (the storage and pipeline events, which only the core can build,
//! are covered in `src/logging.rs`); and `FanOut`'s panic isolation.

#[cfg(feature = "tracing")]
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{CircuitBreaker, Config, Event, EventListener, FanOut, ManualClock, SlidingWindow};

fn breaker(clock: &ManualClock, listener: impl EventListener) -> CircuitBreaker {
    // Before any breaker exists, so no callsite is ever hit without it.
    #[cfg(feature = "tracing")]
    tracing_capture::install();
    let config = Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(Duration::from_secs(1))
        .build()
        .expect("test setup");
    CircuitBreaker::builder("payments")
        .config(config)
        .clock(clock.clone())
        .listener(listener)
        .build()
        .expect("test setup")
}

/// A call that takes `ms` on `clock` and succeeds or fails.
fn call(breaker: &CircuitBreaker, clock: &ManualClock, ms: u64, ok: bool) {
    let _ = breaker.call(|| {
        clock.advance(Duration::from_millis(ms));
        if ok {
            Ok(())
        } else {
            Err(io::Error::other("503"))
        }
    });
}

#[test]
fn fan_out_isolates_a_panicking_listener() {
    let clock = ManualClock::new();
    let first = Arc::new(Mutex::new(Vec::new()));
    let last = Arc::new(Mutex::new(Vec::new()));
    let (f, l) = (first.clone(), last.clone());
    let fan_out = FanOut::new()
        .with(move |e: &Event<'_>| f.lock().unwrap().push(e.kind()))
        .with(|e: &Event<'_>| {
            if let Event::CallRecorded { .. } | Event::Reset { .. } = e {
                panic!("a broken exporter")
            }
        })
        .with(move |e: &Event<'_>| l.lock().unwrap().push(e.kind()));
    assert_eq!(fan_out.len(), 3);
    let b = breaker(&clock, fan_out);

    call(&b, &clock, 10, false);
    call(&b, &clock, 10, false); // trips
    call(&b, &clock, 10, true); // rejected
    b.reset();

    let expected = [
        "call_recorded",
        "call_recorded",
        "state_changed",
        "call_rejected",
        "state_changed",
        "reset",
    ];
    assert_eq!(*first.lock().unwrap(), expected);
    assert_eq!(
        *last.lock().unwrap(),
        expected,
        "listeners after the panicking one still run"
    );
    assert_eq!(
        b.state(),
        interlock::State::Closed,
        "the breaker is unaffected"
    );
}

#[test]
fn a_panicking_listener_never_reaches_the_caller() {
    let b = CircuitBreaker::builder("svc")
        .listener(FanOut::new().with(|_: &Event<'_>| panic!("boom")))
        .build()
        .unwrap();
    assert_eq!(b.call(|| Ok::<_, io::Error>(7)).unwrap(), 7);
    let err = b
        .call(|| Err::<(), _>(io::Error::other("503")))
        .unwrap_err();
    assert_eq!(
        err.into_inner().unwrap().to_string(),
        "503",
        "the call keeps its own error"
    );
}

#[cfg(feature = "tracing")]
mod tracing_capture {
    use super::*;

    use interlock::LoggingEventListener;
    use tracing::Level;
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    /// Level, target, message and the other fields of one record.
    type Record = (Level, String, String, BTreeMap<String, String>);

    /// Forwards every record to the capture of the thread that made it, if
    /// that thread is capturing. Installed once as the global default: with
    /// scoped subscribers, tracing's process-wide interest cache races with
    /// tests on other threads (a callsite first hit by another thread while
    /// no scoped subscriber existed kept a stale "never" and dropped a
    /// record here about one run in six).
    struct Capture;

    thread_local! {
        static CAPTURED: std::cell::RefCell<Option<Vec<Record>>> =
            const { std::cell::RefCell::new(None) };
    }

    pub(super) fn install() {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Capture))
                .expect("no other global subscriber in this test binary");
        });
    }

    struct Fields(BTreeMap<String, String>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.insert(field.name().into(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), value.into());
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Capture {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut fields = Fields(BTreeMap::new());
            event.record(&mut fields);
            let message = fields.0.remove("message").unwrap_or_default();
            let meta = event.metadata();
            let record = (*meta.level(), meta.target().to_owned(), message, fields.0);
            CAPTURED.with(|c| {
                if let Some(records) = c.borrow_mut().as_mut() {
                    records.push(record);
                }
            });
        }
    }

    /// The records `f` makes on this thread.
    fn capture(f: impl FnOnce()) -> Vec<Record> {
        install();
        CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
        f();
        CAPTURED.with(|c| c.borrow_mut().take().unwrap_or_default())
    }

    fn record(level: Level, message: &str, fields: &[(&str, &str)]) -> Record {
        let fields = fields
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (level, "interlock".to_owned(), message.to_owned(), fields)
    }

    #[test]
    fn levels_and_structured_fields_through_a_trip_and_an_override() {
        let clock = ManualClock::new();
        let b = breaker(&clock, LoggingEventListener);
        let records = capture(|| {
            call(&b, &clock, 250, true);
            call(&b, &clock, 500, false); // 1 of 2 failed: trips
            call(&b, &clock, 0, true); // rejected
            b.reset();
            b.disable();
            call(&b, &clock, 125, false); // still logged
        });
        let p = ("breaker", "payments");
        assert_eq!(
            records,
            [
                record(
                    Level::DEBUG,
                    "call recorded",
                    &[p, ("duration_s", "0.25"), ("outcome", "success")]
                ),
                record(
                    Level::DEBUG,
                    "call recorded",
                    &[p, ("duration_s", "0.5"), ("outcome", "failure")]
                ),
                record(
                    Level::WARN,
                    "state changed",
                    &[p, ("from", "closed"), ("to", "open")]
                ),
                record(
                    Level::WARN,
                    "call rejected",
                    &[p, ("rejected_in_period", "1"), ("state", "open")]
                ),
                record(
                    Level::WARN,
                    "state changed",
                    &[p, ("from", "open"), ("rejected", "1"), ("to", "closed")]
                ),
                record(Level::INFO, "reset", &[p]),
                record(
                    Level::WARN,
                    "state changed",
                    &[p, ("from", "closed"), ("to", "disabled")]
                ),
                record(
                    Level::DEBUG,
                    "call recorded",
                    &[p, ("duration_s", "0.125"), ("outcome", "failure")]
                ),
            ]
        );
    }

    /// Issue 25: an outage's rejections are one WARN per OPEN period, the
    /// rest DEBUG; the transitions keep WARN and carry the count.
    #[test]
    fn one_warn_per_open_period_and_debug_for_the_rest() {
        let clock = ManualClock::new();
        let b = breaker(&clock, LoggingEventListener::new());
        let records = capture(|| {
            call(&b, &clock, 0, false);
            call(&b, &clock, 0, false); // trips
            for _ in 0..5 {
                call(&b, &clock, 0, true); // rejected
            }
            b.reset(); // the period ends
            call(&b, &clock, 0, false);
            call(&b, &clock, 0, false); // trips again
            for _ in 0..3 {
                call(&b, &clock, 0, true); // rejected, a new period
            }
        });
        let warns: Vec<_> = records
            .iter()
            .filter(|r| r.0 == Level::WARN)
            .map(|r| {
                let mut line = r.2.clone();
                for (k, v) in &r.3 {
                    if k != "breaker" {
                        line.push_str(&format!(" {k}={v}"));
                    }
                }
                line
            })
            .collect();
        assert_eq!(
            warns,
            [
                "state changed from=closed to=open",
                "call rejected rejected_in_period=1 state=open",
                "state changed from=open rejected=5 to=closed",
                "state changed from=closed to=open",
                "call rejected rejected_in_period=1 state=open",
            ]
        );
        let debug_rejections: Vec<_> = records
            .iter()
            .filter(|r| r.0 == Level::DEBUG && r.2 == "call rejected")
            .map(|r| r.3["rejected_in_period"].clone())
            .collect();
        assert_eq!(debug_rejections, ["2", "3", "4", "5", "2", "3"]);
    }

    #[test]
    fn one_listener_counts_each_breaker_apart() {
        let clock = ManualClock::new();
        let listener = std::sync::Arc::new(LoggingEventListener::new());
        let shared = |name: &str| {
            let listener = listener.clone();
            CircuitBreaker::builder(name)
                .clock(clock.clone())
                .listener(move |e: &Event<'_>| listener.on_event(e))
                .build()
                .unwrap()
        };
        let (a, b) = (shared("a"), shared("b"));
        a.force_open();
        b.force_open();
        let records = capture(|| {
            for breaker in [&a, &b, &a, &b] {
                let _ = breaker.acquire();
            }
        });
        let levels: Vec<_> = records
            .iter()
            .map(|r| (r.0, r.3["breaker"].clone()))
            .collect();
        assert_eq!(
            levels,
            [
                (Level::WARN, "a".to_owned()),
                (Level::WARN, "b".to_owned()),
                (Level::DEBUG, "a".to_owned()),
                (Level::DEBUG, "b".to_owned()),
            ]
        );
    }

    #[test]
    fn a_caught_listener_panic_is_logged_at_error() {
        let b = breaker(
            &ManualClock::new(),
            FanOut::new()
                .with(|_: &Event<'_>| panic!("boom"))
                .with(LoggingEventListener),
        );
        let records = capture(|| b.reset());
        assert_eq!(
            records,
            [
                record(
                    Level::ERROR,
                    "an event listener panicked; the panic was caught and ignored",
                    &[("event", "reset"), ("name", "payments")]
                ),
                record(Level::INFO, "reset", &[("breaker", "payments")]),
            ]
        );
    }

    /// The `rejected_in_period` of each rejection record and the
    /// `rejected` of each state change in `records`.
    fn counts(records: &[Record]) -> (Vec<u64>, Vec<u64>) {
        let field = |r: &Record, k: &str| r.3.get(k).map(|v| v.parse::<u64>().expect("a count"));
        let in_period = records
            .iter()
            .filter(|r| r.2 == "call rejected")
            .filter_map(|r| field(r, "rejected_in_period"))
            .collect();
        let ended = records
            .iter()
            .filter(|r| r.2 == "state changed")
            .map(|r| field(r, "rejected").unwrap_or(0))
            .collect();
        (in_period, ended)
    }

    /// A thread that rejects counts on its own cached period, without the
    /// listener's lock: four threads rejecting at once while another keeps
    /// ending the period (reset, then force_open again) must still count
    /// every rejection exactly once, and in one period only. So the running
    /// counts of all rejections are exactly 1..=n of each period, n being
    /// the total its closing state change reports (one WARN per period).
    #[test]
    fn rejections_on_four_threads_count_once_across_racing_state_changes() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        const CYCLES: usize = 300;
        let b = breaker(&ManualClock::new(), LoggingEventListener::new());
        b.force_open();
        let (started, progress) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let stop = AtomicBool::new(false);
        let (workers, main_records) = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut rejected = 0;
                        let records = capture(|| {
                            started.fetch_add(1, SeqCst);
                            while !stop.load(SeqCst) {
                                if b.acquire().is_err() {
                                    rejected += 1;
                                    progress.fetch_add(1, SeqCst);
                                }
                            }
                        });
                        (rejected, records)
                    })
                })
                .collect();
            let main_records = capture(|| {
                while started.load(SeqCst) < 4 {
                    std::thread::yield_now();
                }
                for _ in 0..CYCLES {
                    b.reset();
                    // Each period sees rejections, however loaded the machine.
                    let before = progress.load(SeqCst);
                    b.force_open();
                    while progress.load(SeqCst) < before + 8 {
                        std::thread::yield_now();
                    }
                }
                stop.store(true, SeqCst);
            });
            let workers: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
            (workers, main_records)
        });
        // Ends the last period, after every rejection was counted.
        let last = capture(|| b.reset());
        let mut running: Vec<u64> = Vec::new();
        let mut warns = 0;
        for (_, records) in &workers {
            running.extend(counts(records).0);
            warns += records
                .iter()
                .filter(|r| r.2 == "call rejected" && r.0 == Level::WARN)
                .count();
        }
        let total: usize = workers.iter().map(|(n, _)| n).sum();
        let ended: Vec<u64> = [main_records, last]
            .iter()
            .flat_map(|r| counts(r).1)
            .collect();
        let periods = ended.iter().filter(|&&n| n > 0).count();
        assert!(
            periods > CYCLES / 2,
            "rejections spanned {periods} of {CYCLES} periods"
        );
        assert_eq!(running.len(), total, "one record per rejection");
        let mut expected: Vec<u64> = ended.iter().flat_map(|&n| 1..=n).collect();
        running.sort_unstable();
        expected.sort_unstable();
        let first_difference = running.iter().zip(&expected).position(|(r, e)| r != e);
        assert!(
            running.len() == expected.len() && first_difference.is_none(),
            "running counts of {} rejections against the {} the state changes report \
             (periods {periods}); first difference at {first_difference:?}",
            running.len(),
            expected.len(),
        );
        assert_eq!(warns, periods, "one WARN per period");
    }

    /// Two listeners on one thread, one breaker name: each keeps its own
    /// counts (a thread's cached periods are per listener), and a thread
    /// that rejects on more breakers than it caches still counts each
    /// exactly.
    #[test]
    fn listeners_and_breakers_beyond_the_threads_cache_count_apart() {
        install();
        let (a, b) = (LoggingEventListener::new(), LoggingEventListener::new());
        let names = ["n0", "n1", "n2", "n3", "n4", "n5"];
        let records = capture(|| {
            for round in 0..3 {
                for name in names {
                    a.on_event(&Event::call_rejected(name, interlock::State::Open));
                    if round < 2 {
                        b.on_event(&Event::call_rejected(name, interlock::State::Open));
                    }
                }
            }
            for name in names {
                a.on_event(&Event::state_changed(
                    name,
                    interlock::State::Open,
                    interlock::State::HalfOpen,
                ));
                b.on_event(&Event::state_changed(
                    name,
                    interlock::State::Open,
                    interlock::State::HalfOpen,
                ));
            }
        });
        let (running, ended) = counts(&records);
        // Per round: a's count, then b's (b stops after two rounds).
        let mut expected = Vec::new();
        for round in 1..=3u64 {
            for _ in names {
                expected.push(round);
                if round < 3 {
                    expected.push(round);
                }
            }
        }
        assert_eq!(running, expected);
        assert_eq!(ended, [3, 2].repeat(names.len()));
        assert_eq!(
            format!("{a:?}"),
            "LoggingEventListener { open_periods: 0 }",
            "every period ended"
        );
        a.on_event(&Event::call_rejected("n0", interlock::State::Open));
        assert_eq!(format!("{a:?}"), "LoggingEventListener { open_periods: 1 }");
    }
}
