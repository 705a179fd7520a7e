//! Listeners cannot stall time (issue 20, item 3): whatever a listener does
//! on a background thread (block, panic, close a breaker), the pipeline's
//! sleeps, the other breakers' timers and the coordinator's lane go on, and
//! an `auto_transition` timer always belongs to the OPEN period it was
//! armed for.
//!
//! Real background threads on real time: every wait polls with a deadline,
//! and a blocked listener waits for the test to release it (never for a
//! fixed time), so the tests hold on a loaded machine.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions
#![allow(
    clippy::disallowed_methods,
    reason = "timers, sleeps and the coordinator's lane run on real time; every wait has a deadline"
)]

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use interlock::mode::Blocking;
use interlock::pipeline::{Sleeper, StdSleeper};
use interlock::storage::{Coordinator, MemoryStorage, StorageSettings};
use interlock::{CircuitBreaker, Config, Event, MonotonicClock, SlidingWindow, State};

#[derive(Debug)]
struct Boom;

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("boom")
    }
}

impl Error for Boom {}

const DEADLINE: Duration = Duration::from_secs(30);

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A listener's hold: it reports that it is blocked, then waits until the
/// test releases it (or a minute passes, so a failing test still ends).
#[derive(Default)]
struct Gate {
    entered: AtomicBool,
    released: AtomicBool,
}

impl Gate {
    fn hold(&self) {
        self.entered.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.released.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::park_timeout(Duration::from_millis(5));
        }
    }

    fn wait_entered(&self) {
        wait_until("the listener to block", || {
            self.entered.load(Ordering::SeqCst)
        });
    }

    fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

/// A panic payload whose own `Drop` panics: what a listener may throw
/// that a plain `catch_unwind` does not contain.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the panic payload's drop panics too");
        }
    }
}

/// Trips at the first failure; `auto_transition` after `wait`.
fn config(wait: Duration) -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(wait)
        .permitted_calls_in_half_open(1)
        .auto_transition(true)
        .build()
        .unwrap()
}

fn fail<M: interlock::mode::SyncApi>(breaker: &CircuitBreaker<M>) {
    let _ = breaker.call(|| Err::<(), _>(Boom));
}

/// Runs a future that is woken from another thread, with a deadline.
fn block_on_parking<F: Future>(f: F) -> Option<F::Output> {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
}

/// D5, R12: a listener that blocks on the `auto_transition` timer thread
/// does not delay the pipeline's async sleeps (before: a 3 s listener made
/// a 200 ms async `Timeout` fire after 2.9 s, as the sleeper shared that
/// thread). The timeout must fire while the listener is still blocked.
#[cfg(feature = "tokio")]
#[test]
fn r12_a_blocked_timer_listener_does_not_delay_an_async_timeout() {
    use interlock::pipeline::{Pipeline, PipelineError};

    let gate = Arc::new(Gate::default());
    let breaker = CircuitBreaker::builder("slow-timer-listener")
        .config(config(Duration::from_millis(10)))
        .listener({
            let gate = gate.clone();
            move |e: &Event<'_>| {
                if let Event::StateChanged {
                    to: State::HalfOpen,
                    ..
                } = e
                {
                    gate.hold();
                }
            }
        })
        .build()
        .unwrap();
    fail(&breaker);
    // The timer moves the breaker to HALF_OPEN and its listener blocks the
    // timer thread.
    gate.wait_entered();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .timeout(Duration::from_millis(200))
        .build();
    let outcome = runtime.block_on(async {
        tokio::time::timeout(
            DEADLINE,
            pipeline.call_async(std::future::pending::<Result<(), Boom>>),
        )
        .await
    });
    let still_blocked = !gate.released.load(Ordering::SeqCst);
    gate.release();
    match outcome {
        Ok(Err(PipelineError::Timeout(elapsed))) => {
            assert_eq!(elapsed.duration(), Duration::from_millis(200));
        }
        Ok(other) => panic!("the timeout returned {other:?}"),
        Err(_) => panic!("the 200 ms timeout never fired while the timer listener blocked"),
    }
    assert!(still_blocked);
}

/// D5: a listener's panic on the timer thread, even one whose payload
/// panics again when dropped, costs nothing: other breakers' timers still
/// fire and the default sleeper still wakes.
#[test]
fn d5_a_panicking_timer_listener_kills_neither_later_timers_nor_sleeps() {
    let panicked = Arc::new(AtomicU32::new(0));
    let bomber = CircuitBreaker::builder("bomber")
        .config(config(Duration::from_millis(10)))
        .listener({
            let panicked = panicked.clone();
            move |e: &Event<'_>| {
                if let Event::StateChanged {
                    to: State::HalfOpen,
                    ..
                } = e
                {
                    panicked.fetch_add(1, Ordering::SeqCst);
                    std::panic::panic_any(Bomb);
                }
            }
        })
        .build()
        .unwrap();
    fail(&bomber);
    wait_until("the bomber's timer", || {
        panicked.load(Ordering::SeqCst) == 1
    });

    // Another breaker's timer still fires...
    let next = CircuitBreaker::builder("after-the-bomb")
        .config(config(Duration::from_millis(10)))
        .build()
        .unwrap();
    fail(&next);
    assert_eq!(next.state(), State::Open);
    wait_until("a timer after the panic", || {
        next.state() == State::HalfOpen
    });

    // ...and so does a sleep.
    assert!(
        block_on_parking(StdSleeper.sleep(Duration::from_millis(5))).is_some(),
        "a sleep after the panic never woke"
    );

    // The bomber itself goes on: its next OPEN period's timer fires too.
    fail(&bomber);
    wait_until("the bomber's second timer", || {
        panicked.load(Ordering::SeqCst) == 2
    });
}

/// R12.1, R12.3: a thread held up between its trip and its timer work (here
/// by a slow first-trip listener) must not replace the timer of a newer
/// OPEN period with its own stale one (before: the state stayed OPEN after
/// the newer period's wait). Real time on both sides (`MonotonicClock`), so
/// the timer and the breaker agree on when a wait is over.
#[test]
fn r12_a_slow_first_trip_listener_does_not_misplace_the_newer_periods_timer() {
    let gate = Arc::new(Gate::default());
    let breaker = CircuitBreaker::builder("stale-trip")
        .config(config(Duration::from_millis(100)))
        .clock(MonotonicClock)
        .listener({
            let gate = gate.clone();
            move |e: &Event<'_>| {
                if let Event::StateChanged {
                    from: State::Closed,
                    to: State::Open,
                    ..
                } = e
                {
                    gate.hold();
                }
            }
        })
        .build()
        .unwrap();
    let tripper = {
        let breaker = breaker.clone();
        std::thread::spawn(move || fail(&breaker))
    };
    gate.wait_entered();
    // The first OPEN period's wait passes (the timer or the next call moves
    // it on); the probe fails and a second OPEN period begins.
    wait_until("the first wait", || {
        breaker.state() == State::HalfOpen || breaker.retry_after() == Some(Duration::ZERO)
    });
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    let reopened = breaker.generation();
    // Only now does the first trip's thread get past its listener.
    gate.release();
    tripper.join().unwrap();
    // The second period's timer must still be the armed one.
    wait_until("the second period's timer", || {
        breaker.state() == State::HalfOpen
    });
    assert!(breaker.generation() > reopened);
}

/// Two "instances" of a service on one storage: `lane` is this process's
/// background coordinator, `other` a manual one standing for another
/// process.
struct Fleet {
    storage: MemoryStorage,
    lane: Coordinator<Blocking>,
    other: Coordinator<Blocking>,
}

impl Fleet {
    fn new() -> Self {
        let settings = StorageSettings::builder()
            .poll_interval(Duration::from_millis(20))
            .build()
            .unwrap();
        let storage = MemoryStorage::builder().settings(settings).build();
        Fleet {
            lane: Coordinator::blocking(storage.clone()),
            other: Coordinator::manual(storage.clone()),
            storage,
        }
    }

    /// Trips `name` on the other instance and writes it to the storage.
    fn trip_elsewhere(&self, name: &str) -> CircuitBreaker<Blocking> {
        let there = CircuitBreaker::builder(name)
            .config(config(Duration::from_secs(60)))
            .coordinator(&self.other)
            .build()
            .unwrap();
        fail(&there);
        self.other.run_writes();
        assert_eq!(
            self.storage.peek(name).map(|s| s.state),
            Some(State::Open),
            "the other instance's trip is in the storage"
        );
        there
    }
}

/// R17.9, D5: a listener that closes its breaker from the coordinator's own
/// thread (the lane delivering a shared OPEN) returns, and the lane goes on
/// serving the other breakers of the storage (before: `close()` waited for
/// the lane, i.e. for itself, and coordination stopped for every breaker).
#[test]
fn r17_9_close_from_a_listener_on_the_coordinator_thread_returns() {
    let fleet = Fleet::new();
    let me: Arc<OnceLock<CircuitBreaker<Blocking>>> = Arc::default();
    let closed_on: Arc<Mutex<Option<String>>> = Arc::default();
    let x = CircuitBreaker::builder("x")
        .coordinator(&fleet.lane)
        .listener({
            let (me, closed_on) = (me.clone(), closed_on.clone());
            move |e: &Event<'_>| {
                if let Event::StateChanged {
                    to: State::Open, ..
                } = e
                {
                    if let Some(me) = me.get() {
                        me.close();
                        *closed_on.lock().unwrap() =
                            Some(std::thread::current().name().unwrap_or("").to_owned());
                    }
                }
            }
        })
        .build()
        .unwrap();
    me.set(x.clone()).unwrap();
    let y = CircuitBreaker::builder("y")
        .coordinator(&fleet.lane)
        .build()
        .unwrap();

    let _x_there = fleet.trip_elsewhere("x");
    wait_until("close() in the listener to return", || {
        closed_on.lock().unwrap().is_some()
    });
    assert_eq!(
        closed_on.lock().unwrap().as_deref(),
        Some("interlock-coordinator"),
        "the listener ran on the coordinator's thread"
    );
    assert!(x.is_shut_down());

    // The lane still serves `y`.
    let _y_there = fleet.trip_elsewhere("y");
    wait_until("the lane to deliver y's shared OPEN", || {
        y.state() == State::Open
    });
    y.close();
}

/// D5 on the coordinator's thread: a listener whose panic payload panics
/// again when dropped does not end the lane.
#[test]
fn d5_a_panicking_listener_on_the_coordinator_thread_does_not_end_the_lane() {
    let fleet = Fleet::new();
    let bombs = Arc::new(AtomicU32::new(0));
    let x = CircuitBreaker::builder("x")
        .coordinator(&fleet.lane)
        .listener({
            let bombs = bombs.clone();
            move |e: &Event<'_>| {
                if let Event::StateChanged {
                    to: State::Open, ..
                } = e
                {
                    if std::thread::current().name() == Some("interlock-coordinator") {
                        bombs.fetch_add(1, Ordering::SeqCst);
                        std::panic::panic_any(Bomb);
                    }
                }
            }
        })
        .build()
        .unwrap();
    let y = CircuitBreaker::builder("y")
        .coordinator(&fleet.lane)
        .build()
        .unwrap();
    let _x_there = fleet.trip_elsewhere("x");
    wait_until("the listener's panic", || bombs.load(Ordering::SeqCst) == 1);
    let _y_there = fleet.trip_elsewhere("y");
    wait_until("the lane to deliver y's shared OPEN", || {
        y.state() == State::Open
    });
    x.close();
    y.close();
}
