//! Coordinated-mode paths the scenario tests of `coordination.rs` leave out:
//! the async lane's writes, decisions and degradation, the background
//! tokio lane, consecutive-successes rounds decided on shared counters, an
//! async storage that keeps the default settings or panics, and the
//! storage vocabulary's accessors and text. Rules: R15–R17, D6.
#![cfg(all(feature = "tokio", feature = "testing"))] // the tokio lane, FlakyStorage
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::Async;
use interlock::storage::testing::FlakyStorage;
use interlock::storage::{
    AsyncStorage, Coordinator, MemoryStorage, ProbeLease, SharedState, StorageError,
    StorageSettings,
};
use interlock::{
    CircuitBreaker, Config, ConfigBuilder, Event, HalfOpenPolicy, ManualClock, Outcome,
    SlidingWindow, State,
};

type Log = Arc<Mutex<Vec<String>>>;

const WAIT: Duration = Duration::from_secs(10);

fn config() -> ConfigBuilder {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(2)
}

fn async_breaker(
    lane: &Coordinator<Async>,
    clock: &ManualClock,
    config: ConfigBuilder,
) -> (CircuitBreaker<Async>, Log) {
    let log: Log = Arc::default();
    let sink = log.clone();
    let breaker = CircuitBreaker::builder("payments")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .coordinator(lane)
        .listener(move |e: &Event<'_>| {
            if !matches!(e, Event::CallRecorded { .. }) {
                sink.lock().unwrap().push(e.to_string());
            }
        })
        .build()
        .unwrap();
    (breaker, log)
}

async fn fail(b: &CircuitBreaker<Async>) {
    let _ = b
        .call_async(|| async { Err::<(), _>(std::io::Error::other("503")) })
        .await;
}

async fn ok(b: &CircuitBreaker<Async>) -> bool {
    b.call_async(|| async { Ok::<_, std::io::Error>(()) })
        .await
        .is_ok()
}

/// Trips `b`, publishes the trip and, a wait later, begins the shared round.
async fn shared_half_open(
    b: &CircuitBreaker<Async>,
    lane: &Coordinator<Async>,
    clock: &ManualClock,
) {
    fail(b).await;
    fail(b).await;
    lane.run_writes().await;
    assert_eq!(b.state(), State::Open);
    clock.advance(WAIT);
    lane.poll().await;
    assert_eq!(b.state(), State::HalfOpen);
}

#[tokio::test]
async fn r17_4_async_lane_decides_a_consecutive_successes_round_on_shared_counters() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let lane = Coordinator::manual_async(storage.clone());
    let policy = config().half_open_policy(HalfOpenPolicy::consecutive_successes(2));
    let (b, _) = async_breaker(&lane, &clock, policy);

    // A failed probe re-opens the shared breaker at once.
    shared_half_open(&b, &lane, &clock).await;
    fail(&b).await;
    lane.run_writes().await;
    assert_eq!(storage.peek("payments").unwrap().state, State::Open);
    assert_eq!(b.state(), State::Open);

    // Two good probes in a row close it.
    clock.advance(WAIT);
    lane.poll().await;
    assert!(ok(&b).await);
    lane.run_writes().await;
    assert_eq!(storage.peek("payments").unwrap().state, State::HalfOpen);
    assert!(ok(&b).await);
    lane.run_writes().await;
    assert_eq!(storage.peek("payments").unwrap().state, State::Closed);
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test]
async fn r17_6_async_writes_degrade_then_drop_silently_until_the_retry_time() {
    let clock = ManualClock::new();
    let memory = MemoryStorage::builder().clock(clock.clone()).build();
    let flaky = FlakyStorage::new(memory.clone());
    let lane = Coordinator::manual_async(flaky.clone());
    let (b, log) = async_breaker(&lane, &clock, config());
    flaky.set_down(true);
    fail(&b).await;
    fail(&b).await;
    lane.run_writes().await; // the trip write fails: degraded
    assert!(b.is_degraded());
    assert_eq!(
        log.lock().unwrap().as_slice(),
        [
            "payments: state closed -> open",
            "payments: storage degraded: injected storage failure: trip_open(\"payments\")"
        ]
    );
    let calls = flaky.calls();
    b.reset();
    fail(&b).await;
    fail(&b).await;
    lane.run_writes().await; // inside the retry time: dropped unsent
    assert_eq!(flaky.calls(), calls);
    assert!(memory.peek("payments").is_none());
    flaky.set_down(false);
    clock.advance(Duration::from_secs(5));
    lane.poll().await;
    assert!(!b.is_degraded());
}

#[test]
fn r17_4_blocking_lane_reopens_a_consecutive_successes_round_on_its_first_bad_probe() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let lane = Coordinator::manual(storage.clone());
    let b = CircuitBreaker::builder("payments")
        .config(
            config()
                .half_open_policy(HalfOpenPolicy::consecutive_successes(2))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .coordinator(&lane)
        .build()
        .unwrap();
    let fail = || {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("503")));
    };
    fail();
    fail();
    lane.run_writes();
    clock.advance(WAIT);
    lane.poll();
    assert_eq!(b.state(), State::HalfOpen);
    assert!(b.call(|| Ok::<_, std::io::Error>(())).is_ok());
    lane.run_writes();
    assert_eq!(storage.peek("payments").unwrap().state, State::HalfOpen);
    fail();
    lane.run_writes();
    let view = storage.peek("payments").unwrap();
    assert_eq!(view.state, State::Open, "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r17_1_the_background_async_lane_writes_polls_and_detaches() {
    let settings = StorageSettings::builder()
        .poll_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder()
        .clock(clock.clone())
        .settings(settings.clone())
        .build();
    let lane = Coordinator::asynchronous(storage.clone());
    assert_eq!(lane.settings(), &settings);
    let text = format!("{lane:?}");
    assert!(
        text.contains("async: true") && text.contains("background: true"),
        "{text}"
    );
    let (b, _) = async_breaker(&lane, &clock, config());
    assert_eq!(lane.breakers(), 1);
    fail(&b).await;
    fail(&b).await;
    // The lane task runs the trip write on its own, on real time.
    let mut waited = 0;
    while storage.peek("payments").map(|v| v.state) != Some(State::Open) {
        assert!(waited < 10_000, "the background lane never wrote the trip");
        tokio::time::sleep(Duration::from_millis(5)).await;
        waited += 5;
    }
    // ...and polls: a wait later it begins the shared round by itself.
    clock.advance(WAIT);
    let mut waited = 0;
    while b.state() != State::HalfOpen {
        assert!(waited < 10_000, "the background lane never polled");
        tokio::time::sleep(Duration::from_millis(5)).await;
        waited += 5;
    }
    b.close_async().await;
    assert_eq!(lane.breakers(), 0);
    assert_eq!(b.shared_view(), None, "the view is dropped on close");
}

/// An async storage over `MemoryStorage` that keeps the default settings
/// and panics on demand.
#[derive(Clone)]
struct Plain {
    inner: MemoryStorage,
    panic: Arc<AtomicBool>,
}

impl Plain {
    fn check(&self) {
        assert!(!self.panic.load(Ordering::SeqCst), "a buggy storage");
    }
}

impl AsyncStorage for Plain {
    async fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.check();
        Ok(self.inner.read(name))
    }
    async fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self.inner.trip_open(name, ttl, expected))
    }
    async fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self
            .inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl))
    }
    async fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.check();
        Ok(self.inner.lease_probe(name, ttl))
    }
    async fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self.inner.record_probe(name, outcome, ttl))
    }
    async fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self.inner.close(name, ttl, expected))
    }
    async fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self
            .inner
            .restart_stalled_round(name, expected, permitted, ttl))
    }
    async fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Ok(self.inner.restore(name, expected, state, ttl))
    }
}

#[tokio::test]
async fn r16_12_an_async_storage_without_knobs_gets_the_defaults_and_a_panic_degrades() {
    let clock = ManualClock::new();
    let storage = Plain {
        inner: MemoryStorage::builder().clock(clock.clone()).build(),
        panic: Arc::default(),
    };
    let lane = Coordinator::manual_async(storage.clone());
    assert_eq!(lane.settings(), &StorageSettings::default());
    let (b, log) = async_breaker(&lane, &clock, config());
    shared_half_open(&b, &lane, &clock).await;
    // A leased probe: both probes of the round pass, the round closes.
    assert!(ok(&b).await);
    assert!(ok(&b).await);
    lane.run_writes().await;
    assert_eq!(b.state(), State::Closed);
    // A storage that panics is a failing storage, never the caller's panic.
    storage.panic.store(true, Ordering::SeqCst);
    fail(&b).await;
    fail(&b).await;
    lane.run_writes().await;
    assert!(b.is_degraded());
    assert!(
        log.lock()
            .unwrap()
            .iter()
            .any(|e| e.starts_with("payments: storage degraded")),
        "{:?}",
        log.lock().unwrap()
    );
}

#[test]
fn r1_5_shared_state_text_and_default() {
    assert_eq!(SharedState::default(), SharedState::closed());
    assert_eq!(SharedState::closed().to_string(), "closed v0");
    let storage = MemoryStorage::new();
    let ttl = Duration::from_secs(60);
    storage.trip_open("db", ttl, None);
    let _ = storage.begin_half_open_if_elapsed("db", Duration::ZERO, 3, ttl);
    let _ = storage.record_probe("db", Outcome::SlowFailure, ttl);
    let view = storage.lease_probe("db", ttl).state;
    assert_eq!(
        view.to_string(),
        "half_open v4 (probes 2/3 left, 1 done, 1 failed, 1 slow)"
    );
    assert!(!view.round_finished());
}

#[test]
fn r16_12_storage_settings_read_back_what_was_built() {
    let s = StorageSettings::builder()
        .state_ttl(Duration::from_secs(30))
        .poll_interval(Duration::from_millis(250))
        .retry_backoff(Duration::from_secs(2))
        .retry_backoff_multiplier(3.0)
        .retry_backoff_max(Duration::from_secs(20))
        .retry_jitter(0.5)
        .write_queue_size(7)
        .build()
        .unwrap();
    assert_eq!(s.state_ttl(), Duration::from_secs(30));
    assert_eq!(s.poll_interval(), Duration::from_millis(250));
    assert_eq!(s.retry_backoff(), Duration::from_secs(2));
    assert_eq!(s.retry_backoff_multiplier(), 3.0);
    assert_eq!(s.retry_backoff_max(), Some(Duration::from_secs(20)));
    assert_eq!(s.retry_jitter(), 0.5);
    assert_eq!(s.write_queue_size(), 7);
    // R17.7: 2, 6, 18, then capped at 20.
    let delays: Vec<u64> = (0..4).map(|k| s.retry_delay(k).as_secs()).collect();
    assert_eq!(delays, [2, 6, 18, 20]);
}

#[test]
fn r15_1_a_cached_shared_closed_never_overrides_a_local_open() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let lane = Coordinator::manual(storage.clone());
    let b = CircuitBreaker::builder("payments")
        .config(config().build().unwrap())
        .clock(clock.clone())
        .coordinator(&lane)
        .build()
        .unwrap();
    lane.poll(); // an absent key: the CLOSED baseline is cached
    assert_eq!(b.shared_view(), Some(SharedState::closed()));
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("503")));
    }
    // The trip is not written yet: the cached view is still CLOSED, and
    // the local OPEN governs.
    assert_eq!(b.shared_view(), Some(SharedState::closed()));
    assert_eq!(b.state(), State::Open);
    let open = b.acquire().unwrap_err();
    assert_eq!(open.state(), State::Open);
    assert_eq!(
        open.retry_after(),
        Some(WAIT),
        "a local OPEN has an estimate"
    );
}

#[test]
fn r15_4_a_leased_probe_on_a_locally_closed_instance_is_recorded_locally_too() {
    // Instance B never tripped itself: its local machine is CLOSED while the
    // shared breaker is HALF_OPEN. Its leased probe is tallied in the
    // storage, and recorded in B's own window like any CLOSED call; B's
    // local probe accounting stays untouched (D2).
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let (la, lb) = (
        Coordinator::manual(storage.clone()),
        Coordinator::manual(storage.clone()),
    );
    let build = |lane: &Coordinator<interlock::mode::Blocking>| {
        CircuitBreaker::builder("payments")
            .config(config().build().unwrap())
            .clock(clock.clone())
            .coordinator(lane)
            .build()
            .unwrap()
    };
    let (a, b) = (build(&la), build(&lb));
    for _ in 0..2 {
        let _ = a.call(|| Err::<(), _>(std::io::Error::other("503")));
    }
    la.run_writes();
    clock.advance(WAIT);
    lb.poll(); // B discovers the shared OPEN...
    lb.poll(); // ...and begins the shared round
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.acquire().unwrap();
    assert!(probe.is_leased());
    probe.failure();
    assert_eq!(
        b.snapshot().failed_calls,
        1,
        "recorded in B's CLOSED window"
    );
    assert_eq!(b.probes(), interlock::ProbeCounters::default());
    lb.run_writes();
    assert_eq!(storage.peek("payments").unwrap().probes_completed, 1);
}
