//! One breaker, many threads and tasks at once: counts add up, snapshots are
//! never torn, both HALF_OPEN caps hold and a concurrent trip is reported
//! exactly once (R4.1, R8.6, R13.6).
//!
//! Time is a per-thread manual clock (each thread moves only its own
//! reading), so slow calls are exact and nothing sleeps.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use interlock::{
    CircuitBreaker, Clock, Config, Event, ManualClock, Registry, SlidingWindow, Snapshot, State,
    Timestamp, Verdict,
};

const THREADS: usize = 8;
const SLOW: Duration = Duration::from_secs(1);

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
}

/// A clock whose reading belongs to the calling thread: a thread makes its
/// own call slow by moving its own time, without disturbing the others.
#[derive(Clone, Copy, Debug)]
struct ThreadClock;

impl Clock for ThreadClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(NOW.with(Cell::get))
    }
}

fn tick(d: Duration) {
    NOW.with(|n| n.set(n.get() + u64::try_from(d.as_nanos()).unwrap()));
}

/// A breaker that never trips and never forgets: a count window far larger
/// than the traffic, and a minimum no test reaches.
fn counting_breaker() -> CircuitBreaker {
    let size = interlock::MAX_COUNT_WINDOW; // the largest allowed
    CircuitBreaker::builder("counts")
        .config(
            Config::builder()
                .sliding_window(SlidingWindow::count(size))
                .minimum_number_of_calls(size)
                .slow_call_duration_threshold(SLOW)
                .build()
                .unwrap(),
        )
        .clock(ThreadClock)
        .build()
        .unwrap()
}

/// Call `i` of a thread: every third a slow failure, otherwise a success, so
/// failed == slow in any consistent snapshot.
fn one_call(breaker: &CircuitBreaker, i: usize) {
    let permit = breaker.acquire().unwrap();
    if i % 3 == 0 {
        tick(SLOW);
        permit.failure();
    } else {
        permit.success();
    }
}

fn assert_consistent(s: Snapshot) {
    assert!(s.failed_calls <= s.total_calls, "torn snapshot {s}");
    assert!(s.slow_calls <= s.total_calls, "torn snapshot {s}");
    assert_eq!(s.failed_calls, s.slow_calls, "torn snapshot {s}");
}

#[test]
fn window_counts_add_up_and_snapshots_are_never_torn() {
    const CALLS: usize = 3_000;
    let breaker = counting_breaker();
    let done = AtomicBool::new(false);
    let start = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    for i in 0..CALLS {
                        one_call(&breaker, i);
                    }
                })
            })
            .collect();
        // A reader racing the writers: totals only grow and never tear.
        let reader = s.spawn(|| {
            start.wait();
            let mut last = 0;
            let mut reads = 0u64;
            while !done.load(Ordering::Acquire) {
                let snap = breaker.snapshot();
                assert_consistent(snap);
                assert!(snap.total_calls >= last, "the window went backwards");
                last = snap.total_calls;
                reads += 1;
            }
            reads
        });
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Release);
        assert!(reader.join().unwrap() > 0);
    });
    let expected_failed = (THREADS * CALLS.div_ceil(3)) as u64;
    assert_eq!(
        breaker.snapshot(),
        Snapshot {
            total_calls: (THREADS * CALLS) as u64,
            failed_calls: expected_failed,
            slow_calls: expected_failed,
        }
    );
}

#[test]
fn async_tasks_on_several_threads_add_up() {
    const TASKS: usize = 16;
    const CALLS: usize = 200;
    let breaker = counting_breaker();
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                start.wait();
                rt.block_on(async {
                    let mut tasks = tokio::task::JoinSet::new();
                    for _ in 0..TASKS {
                        let breaker = breaker.clone();
                        tasks.spawn(async move {
                            for i in 0..CALLS {
                                let r = breaker
                                    .call_async(|| async move {
                                        // Interleave with the other tasks mid-call.
                                        tokio::task::yield_now().await;
                                        if i % 3 == 0 {
                                            Err(std::io::Error::other("down"))
                                        } else {
                                            Ok(())
                                        }
                                    })
                                    .await;
                                assert_eq!(r.is_err(), i % 3 == 0);
                            }
                        });
                    }
                    while let Some(joined) = tasks.join_next().await {
                        joined.unwrap();
                    }
                });
            });
        }
    });
    let total = (4 * TASKS * CALLS) as u64;
    let s = breaker.snapshot();
    assert_eq!(s.total_calls, total);
    assert_eq!(s.failed_calls, (4 * TASKS * CALLS.div_ceil(3)) as u64);
    assert_eq!(s.slow_calls, 0);
}

fn state_changes(log: &Mutex<Vec<(State, State)>>, from: State, to: State) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|&&change| change == (from, to))
        .count()
}

type ChangeLog = Arc<Mutex<Vec<(State, State)>>>;

fn logged(config: Config, clock: ManualClock) -> (CircuitBreaker, ChangeLog) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = log.clone();
    let breaker = CircuitBreaker::builder("race")
        .config(config)
        .clock(clock)
        .listener(move |e: &Event<'_>| {
            if let Event::StateChanged { from, to, .. } = *e {
                sink.lock().unwrap().push((from, to));
            }
        })
        .build()
        .unwrap();
    (breaker, log)
}

#[test]
fn a_concurrent_trip_is_reported_exactly_once() {
    // R13.6: eight threads failing at once trip the breaker once.
    for _ in 0..20 {
        let config = Config::builder()
            .sliding_window(SlidingWindow::count(4))
            .minimum_number_of_calls(4)
            .build()
            .unwrap();
        let (breaker, log) = logged(config, ManualClock::new());
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..4 {
                        let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("down")));
                    }
                });
            }
        });
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(breaker.generation(), 1);
        assert_eq!(*log.lock().unwrap(), [(State::Closed, State::Open)]);
    }
}

/// A tripped breaker whose wait has elapsed: the next call opens a round.
fn ready_to_probe(permitted: u32, concurrent: u32) -> (CircuitBreaker, ChangeLog) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(1))
        .permitted_calls_in_half_open(permitted)
        .max_concurrent_probes(concurrent)
        .build()
        .unwrap();
    let (breaker, log) = logged(config, clock.clone());
    breaker.acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(1));
    (breaker, log)
}

#[test]
fn half_open_caps_hold_under_contention() {
    // R8.6: `permitted` caps the round's admissions, `max_concurrent_probes`
    // the probes in flight; the lazy OPEN -> HALF_OPEN happens once.
    for (permitted, concurrent, verdict) in [
        (6, 2, Verdict::Success),
        (6, 3, Verdict::Failure),
        (4, 1, Verdict::Success),
        (5, 5, Verdict::Failure),
    ] {
        let (breaker, log) = ready_to_probe(permitted, concurrent);
        let in_flight = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        let probes = AtomicUsize::new(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..200 {
                        let Ok(permit) = breaker.acquire() else {
                            std::thread::yield_now();
                            continue;
                        };
                        if !permit.is_probe() {
                            permit.success(); // the round closed: back to CLOSED
                            continue;
                        }
                        probes.fetch_add(1, Ordering::Relaxed);
                        // Counted after admission and uncounted before the
                        // verdict: never more than the machine's own figure.
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        permit.record(verdict);
                    }
                });
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!(
            most <= concurrent,
            "{most} probes in flight, cap {concurrent}"
        );
        assert_eq!(
            probes.load(Ordering::Relaxed),
            permitted as usize,
            "probes admitted"
        );
        let to = if verdict == Verdict::Success {
            State::Closed
        } else {
            State::Open
        };
        assert_eq!(
            *log.lock().unwrap(),
            [
                (State::Closed, State::Open),
                (State::Open, State::HalfOpen),
                (State::HalfOpen, to)
            ]
        );
        assert_eq!(state_changes(&log, State::Open, State::HalfOpen), 1);
    }
}

#[test]
fn held_probes_never_exceed_either_cap() {
    // Probes held open (never settled): admissions stop at the smaller cap,
    // and the machine's accounting agrees with what the threads hold.
    for (permitted, concurrent) in [(3, 3), (8, 2), (2, 1)] {
        let (breaker, _) = ready_to_probe(permitted, concurrent);
        let held = Mutex::new(Vec::new());
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..50 {
                        if let Ok(permit) = breaker.acquire() {
                            held.lock().unwrap().push(permit);
                        }
                    }
                });
            }
        });
        let held = held.into_inner().unwrap();
        assert_eq!(held.len(), concurrent as usize);
        let probes = breaker.probes();
        assert_eq!(
            (probes.admitted, probes.in_flight),
            (concurrent, concurrent)
        );
        // Cancelling them all hands every slot and budget back (R8.9).
        std::thread::scope(|s| {
            for permit in held {
                s.spawn(move || drop(permit));
            }
        });
        let probes = breaker.probes();
        assert_eq!((probes.admitted, probes.in_flight), (0, 0));
        assert_eq!(breaker.state(), State::HalfOpen);
    }
}

#[test]
fn operators_racing_calls_leave_a_consistent_breaker() {
    // reset / metrics_only / disable racing calls: each moves the
    // generation once, the last one decides the state, snapshots never tear.
    let breaker = counting_breaker();
    let start = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (breaker, start) = (&breaker, &start);
            s.spawn(move || {
                start.wait();
                for i in 0..500 {
                    if t == 0 && i % 50 == 0 {
                        match i / 50 % 3 {
                            0 => breaker.reset(),
                            1 => breaker.metrics_only(),
                            _ => breaker.disable(),
                        }
                    } else if let Ok(permit) = breaker.acquire() {
                        permit.record(if i % 2 == 0 {
                            Verdict::Failure
                        } else {
                            Verdict::Success
                        });
                    }
                    assert_consistent_counts(breaker.snapshot());
                }
            });
        }
    });
    // Ten operator actions, each its own generation.
    assert_eq!(breaker.generation(), 10);
    assert_eq!(breaker.state(), State::Closed); // the tenth action is a reset
}

fn assert_consistent_counts(s: Snapshot) {
    assert!(s.failed_calls <= s.total_calls, "torn snapshot {s}");
    assert!(s.slow_calls <= s.total_calls, "torn snapshot {s}");
}

#[test]
fn registry_hands_out_one_breaker_per_name_under_contention() {
    // R14.1: the same name is the same breaker, even on first access.
    for round in 0..20 {
        let registry = Registry::new();
        let name = format!("svc-{round}");
        let start = Barrier::new(THREADS);
        let breakers: Vec<CircuitBreaker> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        registry.get(&name)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(breakers.iter().all(|b| b.ptr_eq(&breakers[0])));
        assert_eq!(registry.names(), [name]);
    }
}
