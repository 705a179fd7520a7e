//! Issue 13 in the core: change notices pushed by the storage and batched
//! polls, on `MemoryStorage` (which pushes in-process) and on storages
//! written here to misbehave. Manual coordinators and a `ManualClock`
//! unless a test is about the background lane, which it then waits for
//! with a deadline.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use interlock::mode::Blocking;
use interlock::storage::{
    Coordinator, MemoryStorage, Notice, NoticeSink, PollAnswers, PollRequest, ProbeLease,
    SharedState, Storage, StorageError, StorageOps, StorageSettings,
};
use interlock::{
    CallError, CircuitBreaker, Config, Event, ManualClock, Outcome, SlidingWindow, State,
};

type Log = Arc<Mutex<Vec<String>>>;

fn settings(notifications: bool, batched: bool) -> StorageSettings {
    StorageSettings::builder()
        .notifications(notifications)
        .batched_polling(batched)
        .build()
        .unwrap()
}

fn storage(clock: &ManualClock, notifications: bool, batched: bool) -> MemoryStorage {
    MemoryStorage::builder()
        .clock(clock.clone())
        .settings(settings(notifications, batched))
        .build()
}

fn breaker(
    lane: &Coordinator<Blocking>,
    clock: &ManualClock,
    name: &str,
) -> CircuitBreaker<Blocking> {
    breaker_logged(lane, clock, name, &Log::default())
}

fn breaker_logged(
    lane: &Coordinator<Blocking>,
    clock: &ManualClock,
    name: &str,
    log: &Log,
) -> CircuitBreaker<Blocking> {
    let log = log.clone();
    CircuitBreaker::builder(name)
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .wait_duration_in_open(Duration::from_secs(10))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .coordinator(lane)
        .listener(move |e: &Event<'_>| {
            if !matches!(e, Event::CallRecorded { .. }) {
                log.lock().unwrap().push(e.to_string());
            }
        })
        .build()
        .unwrap()
}

fn trip(b: &CircuitBreaker<Blocking>, lane: &Coordinator<Blocking>) {
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("503")));
    }
    assert_eq!(b.state(), State::Open);
    lane.run_writes();
}

fn rejects(b: &CircuitBreaker<Blocking>) -> bool {
    matches!(
        b.call(|| Ok::<_, std::io::Error>(())),
        Err(CallError::Rejected(_))
    )
}

#[test]
fn a_notice_brings_another_instances_trip_without_a_poll() {
    let clock = ManualClock::new();
    let storage = storage(&clock, true, true);
    let (a, b) = (
        Coordinator::manual(storage.clone()),
        Coordinator::manual(storage.clone()),
    );
    let on_a = breaker(&a, &clock, "payments");
    let on_b = breaker(&b, &clock, "payments");
    let bystander = breaker(&b, &clock, "search");
    assert!(a.is_subscribed() && b.is_subscribed());
    a.run_writes(); // the newcomers' first polls
    b.run_writes();

    trip(&on_a, &a);
    let before = storage.operations();
    b.run_writes(); // runs the refresh the notice queued; no poll
    assert!(rejects(&on_b), "B follows A's trip at once");
    assert_eq!(on_b.state(), State::Open, "the shared OPEN governs");
    assert!(on_b.shared_view().is_some_and(|v| v.state == State::Open));
    assert_eq!(
        storage.operations() - before,
        StorageOps {
            reads: 1,
            ..StorageOps::default()
        },
        "one read, for the breaker named in the notice only"
    );
    assert!(!rejects(&bystander));

    // A's own notice carried the version A adopted from its write: no read.
    let before = storage.operations();
    a.run_writes();
    assert_eq!(storage.operations() - before, StorageOps::default());
}

#[test]
fn a_breaker_created_after_the_fleet_tripped_learns_it_without_waiting_for_a_poll() {
    for notifications in [true, false] {
        let clock = ManualClock::new();
        let storage = storage(&clock, notifications, true);
        storage.trip_open("payments", Duration::from_secs(60), None);
        let lane = Coordinator::manual(storage.clone());
        let late = breaker(&lane, &clock, "payments");
        let before = storage.operations();
        lane.run_writes(); // no poll: the join queued the newcomer's first read
        assert_eq!(
            storage.operations() - before,
            StorageOps {
                reads: 1,
                ..StorageOps::default()
            }
        );
        assert!(rejects(&late), "notifications {notifications}");
        let before = storage.operations();
        lane.run_writes();
        assert_eq!(storage.operations() - before, StorageOps::default(), "once");
    }
}

#[test]
fn with_notifications_off_a_change_waits_for_the_poll() {
    let clock = ManualClock::new();
    let storage = storage(&clock, false, true);
    let (a, b) = (
        Coordinator::manual(storage.clone()),
        Coordinator::manual(storage.clone()),
    );
    let on_a = breaker(&a, &clock, "payments");
    let on_b = breaker(&b, &clock, "payments");
    assert!(!a.is_subscribed() && !b.is_subscribed());
    a.run_writes(); // the newcomers' first polls
    b.run_writes();

    trip(&on_a, &a);
    b.run_writes();
    assert!(!rejects(&on_b), "no push: B has not heard yet");
    b.poll();
    assert!(rejects(&on_b), "the poll reconciles");
}

#[test]
fn one_batch_polls_every_breaker_and_answers_each_in_order() {
    let clock = ManualClock::new();
    let storage = storage(&clock, false, true);
    let lane = Coordinator::manual(storage.clone());
    let names: Vec<String> = (0..20).map(|i| format!("dep-{i}")).collect();
    let breakers: Vec<_> = names.iter().map(|n| breaker(&lane, &clock, n)).collect();
    let ttl = Duration::from_secs(300);
    storage.trip_open("dep-3", ttl, None);
    storage.trip_open("dep-7", ttl, None);

    let before = storage.operations();
    lane.poll();
    assert_eq!(
        storage.operations() - before,
        StorageOps {
            reads: 20,
            batches: 1,
            ..StorageOps::default()
        }
    );
    for (i, b) in breakers.iter().enumerate() {
        assert_eq!(rejects(b), i == 3 || i == 7, "{}", b.name());
    }

    // Next poll: the two cached OPEN views ask to begin HALF_OPEN, in the
    // same batch; the 18 others are asked only if they changed since the
    // first poll's epoch (R17.12), and none did, so none is read.
    clock.advance(Duration::from_secs(10));
    let before = storage.operations();
    lane.poll();
    assert_eq!(
        storage.operations() - before,
        StorageOps {
            reads: 0,
            begins: 2,
            batches: 1,
            ..StorageOps::default()
        }
    );
    assert_eq!(
        breakers[3].shared_view().map(|v| v.state),
        Some(State::HalfOpen)
    );
}

#[test]
fn batching_off_polls_one_request_per_breaker() {
    let clock = ManualClock::new();
    let storage = storage(&clock, false, false);
    let lane = Coordinator::manual(storage.clone());
    let _breakers: Vec<_> = (0..5)
        .map(|i| breaker(&lane, &clock, &format!("dep-{i}")))
        .collect();
    let before = storage.operations();
    lane.poll();
    assert_eq!(
        storage.operations() - before,
        StorageOps {
            reads: 5,
            ..StorageOps::default()
        }
    );
}

/// A storage that forwards to a `MemoryStorage` but answers batches its own
/// way, and pushes only what the test tells it to.
#[derive(Clone)]
struct Scripted {
    inner: MemoryStorage,
    batch: Arc<Mutex<Option<BatchFault>>>,
    sinks: Arc<Mutex<Vec<NoticeSink>>>,
    subscribes: Arc<AtomicUsize>,
    refuse_subscription: Arc<AtomicBool>,
}

#[derive(Clone, Copy)]
enum BatchFault {
    /// The whole batch fails.
    Down,
    /// Answers one request too few.
    Short,
    /// Only the request for this index fails.
    Item(usize),
}

#[derive(Debug)]
struct Boom(&'static str);

impl std::fmt::Display for Boom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Boom {}

impl Scripted {
    fn new(clock: &ManualClock) -> Self {
        Scripted {
            inner: storage(clock, true, true),
            batch: Arc::default(),
            sinks: Arc::default(),
            subscribes: Arc::default(),
            refuse_subscription: Arc::default(),
        }
    }

    fn push(&self, notice: Notice<'_>) {
        for sink in self.sinks.lock().unwrap().iter() {
            sink.deliver(notice);
        }
    }
}

impl Storage for Scripted {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(self.inner.read(name))
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(self.inner.trip_open(name, ttl, expected_version))
    }
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self
            .inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl))
    }
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Ok(self.inner.lease_probe(name, ttl))
    }
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self.inner.record_probe(name, outcome, ttl))
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(self.inner.close(name, ttl, expected_version))
    }
    fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self
            .inner
            .restart_stalled_round(name, expected, permitted, ttl))
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self.inner.restore(name, expected, state, ttl))
    }
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        let mut answers: PollAnswers = self.inner.poll_many(requests).into_iter().map(Ok).collect();
        match *self.batch.lock().unwrap() {
            None => {}
            Some(BatchFault::Down) => return Err(Box::new(Boom("batch refused"))),
            Some(BatchFault::Short) => {
                answers.pop();
            }
            Some(BatchFault::Item(i)) => answers[i] = Err(Box::new(Boom("corrupt key"))),
        }
        Ok(answers)
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.subscribes.fetch_add(1, Ordering::SeqCst);
        if self.refuse_subscription.load(Ordering::SeqCst) {
            return false;
        }
        self.sinks.lock().unwrap().push(sink);
        true
    }
    fn settings(&self) -> StorageSettings {
        self.inner.settings()
    }
}

fn degraded_count(log: &Log) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|e| e.contains("degraded"))
        .count()
}

#[test]
fn a_failed_batch_degrades_every_breaker_it_asked_about() {
    for fault in [BatchFault::Down, BatchFault::Short] {
        let clock = ManualClock::new();
        let storage = Scripted::new(&clock);
        let lane = Coordinator::manual(storage.clone());
        let logs: Vec<Log> = (0..3).map(|_| Log::default()).collect();
        let breakers: Vec<_> = logs
            .iter()
            .enumerate()
            .map(|(i, log)| breaker_logged(&lane, &clock, &format!("dep-{i}"), log))
            .collect();
        *storage.batch.lock().unwrap() = Some(fault);
        lane.poll();
        for (b, log) in breakers.iter().zip(&logs) {
            assert!(b.is_degraded(), "{}", b.name());
            assert_eq!(degraded_count(log), 1);
        }
    }
}

#[test]
fn an_error_for_one_item_degrades_only_that_breaker() {
    let clock = ManualClock::new();
    let storage = Scripted::new(&clock);
    let lane = Coordinator::manual(storage.clone());
    let breakers: Vec<_> = (0..3)
        .map(|i| breaker(&lane, &clock, &format!("dep-{i}")))
        .collect();
    storage
        .trip_open("dep-2", Duration::from_secs(60), None)
        .unwrap();
    *storage.batch.lock().unwrap() = Some(BatchFault::Item(1));
    lane.poll();
    let degraded: Vec<bool> = breakers.iter().map(CircuitBreaker::is_degraded).collect();
    assert_eq!(degraded, [false, true, false]);
    assert!(rejects(&breakers[2]), "the others still got their answers");
}

#[test]
fn resync_polls_every_breaker_and_a_changed_notice_only_its_own() {
    let clock = ManualClock::new();
    let storage = Scripted::new(&clock);
    let lane = Coordinator::manual(storage.clone());
    let breakers: Vec<_> = (0..4)
        .map(|i| breaker(&lane, &clock, &format!("dep-{i}")))
        .collect();
    assert_eq!(
        storage.subscribes.load(Ordering::SeqCst),
        1,
        "one subscription per lane"
    );
    lane.run_writes(); // the newcomers' first polls
    let ttl = Duration::from_secs(60);
    storage.inner.trip_open("dep-0", ttl, None);
    storage.inner.trip_open("dep-1", ttl, None);

    // A notice for dep-0 only: dep-1 stays unseen until a resync.
    storage.push(Notice::Changed {
        name: "dep-0",
        version: 1,
    });
    storage.push(Notice::Changed {
        name: "nobody-here",
        version: 1,
    });
    lane.run_writes();
    assert!(rejects(&breakers[0]));
    assert!(!rejects(&breakers[1]));

    let before = storage.inner.operations();
    storage.push(Notice::Resync);
    lane.run_writes();
    assert!(rejects(&breakers[1]));
    assert_eq!((storage.inner.operations() - before).batches, 1);

    // A notice repeating a version the breaker already holds costs nothing.
    let before = storage.inner.operations();
    storage.push(Notice::Changed {
        name: "dep-0",
        version: 1,
    });
    lane.run_writes();
    assert_eq!(storage.inner.operations() - before, StorageOps::default());
}

#[test]
fn a_storage_that_cannot_push_is_asked_again_at_the_next_attach() {
    let clock = ManualClock::new();
    let storage = Scripted::new(&clock);
    storage.refuse_subscription.store(true, Ordering::SeqCst);
    let lane = Coordinator::manual(storage.clone());
    let _first = breaker(&lane, &clock, "a");
    assert!(!lane.is_subscribed());
    storage.refuse_subscription.store(false, Ordering::SeqCst);
    let _second = breaker(&lane, &clock, "b");
    assert!(lane.is_subscribed());
    let _third = breaker(&lane, &clock, "c");
    assert_eq!(storage.subscribes.load(Ordering::SeqCst), 2);
}

#[test]
fn a_dropped_coordinator_ends_its_subscription() {
    let clock = ManualClock::new();
    let storage = Scripted::new(&clock);
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "a");
    let sink = storage.sinks.lock().unwrap()[0].clone();
    assert!(sink.is_alive());
    drop(b);
    drop(lane);
    assert!(!sink.is_alive());
    assert!(!sink.deliver(Notice::Resync));
}

#[allow(clippy::disallowed_methods)] // a real lane on real time: poll with a deadline
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_background_lane_follows_a_notice_long_before_its_poll() {
    // Real time: a poll interval of an hour, so only the notice can do it.
    let storage = MemoryStorage::builder()
        .settings(
            StorageSettings::builder()
                .poll_interval(Duration::from_secs(3600))
                .build()
                .unwrap(),
        )
        .build();
    let (a, b) = (
        Coordinator::blocking(storage.clone()),
        Coordinator::blocking(storage.clone()),
    );
    let on_a = CircuitBreaker::builder("payments")
        .coordinator(&a)
        .build()
        .unwrap();
    let on_b = CircuitBreaker::builder("payments")
        .coordinator(&b)
        .build()
        .unwrap();
    wait_for("B's first poll", || on_b.shared_view().is_some());
    on_a.force_open(); // overrides are local: nothing is shared...
    on_a.reset();
    storage.trip_open("payments", Duration::from_secs(60), None); // ...a trip is
    wait_for("B to reject", || rejects(&on_b));
    on_a.close();
    on_b.close();
}

#[cfg(feature = "tokio")]
#[tokio::test]
#[allow(clippy::disallowed_methods)] // a real lane on real time: poll with a deadline
async fn an_async_lane_follows_a_notice_too() {
    let storage = MemoryStorage::builder()
        .settings(
            StorageSettings::builder()
                .poll_interval(Duration::from_secs(3600))
                .build()
                .unwrap(),
        )
        .build();
    let lane = Coordinator::asynchronous(storage.clone());
    let b = CircuitBreaker::builder("payments")
        .coordinator(&lane)
        .build()
        .unwrap();
    assert!(lane.is_subscribed());
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.shared_view().is_none() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the first poll"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    storage.trip_open("payments", Duration::from_secs(60), None);
    loop {
        let rejected = matches!(
            b.call_async(|| async { Ok::<_, std::io::Error>(()) }).await,
            Err(CallError::Rejected(_))
        );
        if rejected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for the rejection"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    b.close_async().await;
}
