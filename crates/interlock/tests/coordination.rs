//! Coordinated breakers on one `MemoryStorage` (issue 6), driven by hand:
//! a shared `ManualClock`, manual coordinators (one per simulated process)
//! and explicit polls, so nothing sleeps. Rules: R15–R17 and D2, D6.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod support;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::{
    Coordinator, MemoryStorage, ProbeLease, SharedState, Storage, StorageError, StorageSettings,
};
use interlock::{
    CallError, CircuitBreaker, Config, ConfigBuilder, Event, ManualClock, Outcome, Registry,
    SlidingWindow, State,
};
use support::fail_until_tripped;

type Log = Arc<Mutex<Vec<String>>>;

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

const WAIT: Duration = Duration::from_secs(10);

fn config() -> ConfigBuilder {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(2)
}

struct Fleet<S: Storage + Clone> {
    clock: ManualClock,
    storage: S,
}

/// One simulated process: its own coordinator (lane) and breaker.
struct Instance {
    lane: Coordinator<Blocking>,
    breaker: CircuitBreaker<Blocking>,
    log: Log,
}

impl<S: Storage + Clone> Fleet<S> {
    fn instance(&self, config: ConfigBuilder) -> Instance {
        let lane = Coordinator::manual(self.storage.clone());
        let log: Log = Arc::default();
        let sink = log.clone();
        let breaker = CircuitBreaker::builder("payments")
            .config(config.build().unwrap())
            .clock(self.clock.clone())
            .coordinator(&lane)
            .listener(move |e: &Event<'_>| {
                if !matches!(e, Event::CallRecorded { .. }) {
                    sink.lock().unwrap().push(e.to_string());
                }
            })
            .build()
            .unwrap();
        Instance { lane, breaker, log }
    }
}

fn memory_fleet() -> Fleet<MemoryStorage> {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    Fleet { clock, storage }
}

fn ok(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Ok(()))
}

fn fail(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Err(std::io::Error::other("503")))
}

fn rejected(r: Result<(), CallError<std::io::Error>>) -> interlock::CircuitOpenError {
    match r {
        Err(CallError::Rejected(open)) => open,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// Trips `i` locally and runs its queued shared trip.
fn trip(i: &Instance) {
    fail_until_tripped(&i.breaker, || {
        let _ = fail(&i.breaker);
    });
    i.lane.run_writes();
}

#[test]
fn r15_4_a_local_trip_reaches_every_instance_through_the_storage() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    trip(&a);
    let shared = fleet.storage.peek("payments").unwrap();
    assert_eq!((shared.state, shared.version), (State::Open, 1));
    // A adopted the result of its own write: the shared OPEN governs, with
    // no local estimate (R15.2).
    assert_eq!(a.breaker.shared_view(), Some(shared));
    assert_eq!(rejected(ok(&a.breaker)).retry_after(), None);
    // B learns it at its next poll (R17.2: a read).
    assert_eq!(b.breaker.state(), State::Closed);
    b.lane.poll();
    assert_eq!(b.breaker.state(), State::Open);
    assert_eq!(take(&b.log), ["payments: state closed -> open"]);
    let open = rejected(ok(&b.breaker));
    assert_eq!((open.state(), open.retry_after()), (State::Open, None));
    // B's own window never saw a failure.
    assert_eq!(b.breaker.snapshot().total_calls, 0);
}

#[test]
fn r15_2_no_storage_calls_in_closed_and_open_one_per_half_open_admission() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    let before = fleet.storage.operations();
    for _ in 0..100 {
        ok(&a.breaker).unwrap();
    }
    assert_eq!((fleet.storage.operations() - before).total(), 0, "CLOSED");
    trip(&a);
    b.lane.poll();
    let before = fleet.storage.operations();
    for _ in 0..100 {
        let _ = ok(&b.breaker);
    }
    assert_eq!(
        (fleet.storage.operations() - before).total(),
        0,
        "shared OPEN"
    );
    fleet.clock.advance(WAIT);
    b.lane.poll(); // cached view OPEN: begin_half_open_if_elapsed
    assert_eq!(b.breaker.state(), State::HalfOpen);
    let before = fleet.storage.operations();
    let permit = b.breaker.acquire().unwrap();
    assert!(permit.is_leased());
    let delta = fleet.storage.operations() - before;
    assert_eq!(
        (delta.leases, delta.total()),
        (1, 1),
        "exactly one lease per admission"
    );
    drop(permit);
}

#[test]
fn r15_5_shared_open_moves_only_by_the_poller_on_the_storage_clock() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    trip(&a);
    fleet.clock.advance(WAIT);
    // No lazy path: the wait has elapsed, calls are still rejected.
    assert!(ok(&a.breaker).unwrap_err().is_rejected());
    // B never saw the OPEN: its first poll reads it, the second begins
    // HALF_OPEN (R17.2).
    b.lane.poll();
    assert_eq!(b.breaker.state(), State::Open);
    b.lane.poll();
    assert_eq!(b.breaker.state(), State::HalfOpen);
    assert_eq!(fleet.storage.peek("payments").unwrap().version, 2);
}

#[test]
fn r15_3_the_probe_budget_is_global_and_ignores_the_concurrency_cap() {
    let fleet = memory_fleet();
    let cfg = || {
        config()
            .permitted_calls_in_half_open(3)
            .max_concurrent_probes(1)
    };
    let (a, b, c) = (
        fleet.instance(cfg()),
        fleet.instance(cfg()),
        fleet.instance(cfg()),
    );
    trip(&a);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    b.lane.poll();
    c.lane.poll();
    assert!(
        [&a, &b, &c]
            .iter()
            .all(|i| i.breaker.state() == State::HalfOpen)
    );
    // A holds two probes at once although max_concurrent_probes is 1.
    let p1 = a.breaker.acquire().unwrap();
    let p2 = a.breaker.acquire().unwrap();
    let p3 = b.breaker.acquire().unwrap();
    let denied = c.breaker.acquire().unwrap_err();
    assert_eq!(
        (denied.state(), denied.retry_after()),
        (State::HalfOpen, None)
    );
    // D2: leased probes never enter local probe accounting.
    assert_eq!(a.breaker.probes(), interlock::ProbeCounters::default());
    for p in [p1, p2, p3] {
        p.success();
    }
    a.lane.run_writes();
    b.lane.run_writes(); // B's record completes the round: B decides
    let shared = fleet.storage.peek("payments").unwrap();
    assert_eq!(shared.state, State::Closed);
    // R15.6: a newer shared CLOSED resets A's local OPEN machine, silently.
    take(&a.log);
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::Closed);
    assert_eq!(take(&a.log), ["payments: state half_open -> closed"]);
    assert!(ok(&a.breaker).is_ok());
    assert_eq!(
        a.breaker.last_failure().unwrap().message(),
        "503",
        "no reset: kept"
    );
}

#[test]
fn r17_4_a_failed_shared_round_reopens_with_a_fresh_wait() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    trip(&a);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    b.lane.poll();
    let _ = fail(&a.breaker);
    let _ = fail(&b.breaker);
    a.lane.run_writes();
    b.lane.run_writes();
    let shared = fleet.storage.peek("payments").unwrap();
    assert_eq!(
        (shared.state, shared.opened_at),
        (State::Open, fleet.storage.now())
    );
    assert_eq!(b.breaker.state(), State::Open);
}

/// A storage that lets a racing instance trip the breaker between a
/// probe's record and the round decision.
#[derive(Clone)]
struct Racing {
    inner: MemoryStorage,
    race: Arc<AtomicBool>,
}

impl Storage for Racing {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Storage::read(&self.inner, name)
    }
    fn trip_open(
        &self,
        n: &str,
        ttl: Duration,
        v: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Storage::trip_open(&self.inner, n, ttl, v)
    }
    fn begin_half_open_if_elapsed(
        &self,
        n: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::begin_half_open_if_elapsed(&self.inner, n, wait, permitted, ttl)
    }
    fn lease_probe(&self, n: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Storage::lease_probe(&self.inner, n, ttl)
    }
    fn record_probe(
        &self,
        n: &str,
        o: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let view = Storage::record_probe(&self.inner, n, o, ttl)?;
        if self.race.swap(false, Ordering::SeqCst) {
            // Another instance trips in between (unfenced): a newer state.
            Storage::trip_open(&self.inner, n, ttl, None)?;
        }
        Ok(view)
    }
    fn close(&self, n: &str, ttl: Duration, v: Option<u64>) -> Result<SharedState, StorageError> {
        Storage::close(&self.inner, n, ttl, v)
    }
    fn restart_stalled_round(
        &self,
        n: &str,
        v: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restart_stalled_round(&self.inner, n, v, permitted, ttl)
    }
    fn restore(
        &self,
        n: &str,
        v: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restore(&self.inner, n, v, state, ttl)
    }
}

#[test]
fn r17_4_a_fenced_close_loses_to_a_newer_state() {
    let clock = ManualClock::new();
    let inner = MemoryStorage::builder().clock(clock.clone()).build();
    let race = Arc::new(AtomicBool::new(false));
    let fleet = Fleet {
        clock,
        storage: Racing {
            inner: inner.clone(),
            race: race.clone(),
        },
    };
    let a = fleet.instance(config().permitted_calls_in_half_open(1));
    trip(&a);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    ok(&a.breaker).unwrap(); // the only probe passes...
    race.store(true, Ordering::SeqCst);
    a.lane.run_writes(); // ...but a trip lands before A's fenced close
    let shared = inner.peek("payments").unwrap();
    assert_eq!(shared.state, State::Open, "the stale close was fenced out");
    assert_eq!(a.breaker.state(), State::Open);
}

/// A storage that fails while `down` is set.
#[derive(Clone)]
struct Flaky {
    inner: MemoryStorage,
    down: Arc<AtomicBool>,
    calls: Arc<AtomicU32>,
}

impl Flaky {
    fn check(&self) -> Result<(), StorageError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            Err("connection refused".into())
        } else {
            Ok(())
        }
    }
}

impl Storage for Flaky {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.check()?;
        Storage::read(&self.inner, name)
    }
    fn trip_open(
        &self,
        n: &str,
        ttl: Duration,
        v: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::trip_open(&self.inner, n, ttl, v)
    }
    fn begin_half_open_if_elapsed(
        &self,
        n: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::begin_half_open_if_elapsed(&self.inner, n, wait, permitted, ttl)
    }
    fn lease_probe(&self, n: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.check()?;
        Storage::lease_probe(&self.inner, n, ttl)
    }
    fn record_probe(
        &self,
        n: &str,
        o: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::record_probe(&self.inner, n, o, ttl)
    }
    fn close(&self, n: &str, ttl: Duration, v: Option<u64>) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::close(&self.inner, n, ttl, v)
    }
    fn restart_stalled_round(
        &self,
        n: &str,
        v: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::restart_stalled_round(&self.inner, n, v, permitted, ttl)
    }
    fn restore(
        &self,
        n: &str,
        v: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check()?;
        Storage::restore(&self.inner, n, v, state, ttl)
    }
    fn settings(&self) -> StorageSettings {
        StorageSettings::builder()
            .retry_backoff(Duration::from_secs(5))
            .retry_backoff_multiplier(2.0)
            .write_queue_size(2)
            .build()
            .unwrap()
    }
}

fn flaky_fleet() -> (Fleet<Flaky>, MemoryStorage, Arc<AtomicBool>, Arc<AtomicU32>) {
    let clock = ManualClock::new();
    let inner = MemoryStorage::builder().clock(clock.clone()).build();
    let down = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let storage = Flaky {
        inner: inner.clone(),
        down: down.clone(),
        calls: calls.clone(),
    };
    (Fleet { clock, storage }, inner, down, calls)
}

#[test]
fn r17_6_degradation_one_event_per_outage_backoff_and_recovery_adopting_a_shared_open() {
    let (fleet, inner, down, calls) = flaky_fleet();
    let a = fleet.instance(config());
    a.lane.poll();
    down.store(true, Ordering::SeqCst);
    a.lane.poll();
    assert!(a.breaker.is_degraded());
    assert_eq!(
        take(&a.log),
        ["payments: storage degraded: connection refused"]
    );
    // Local protection goes on: a local trip still works, no error reaches a call.
    let _ = fail(&a.breaker);
    let _ = fail(&a.breaker);
    assert_eq!(a.breaker.state(), State::Open);
    take(&a.log);
    // The gate is closed for retry_backoff (5 s): polls and writes skipped.
    let n = calls.load(Ordering::SeqCst);
    a.lane.poll();
    a.lane.run_writes(); // the queued trip is dropped silently
    assert_eq!(calls.load(Ordering::SeqCst), n);
    // After 5 s, one retry fails again: no second degraded event, and the
    // next delay doubles (10 s).
    fleet.clock.advance(Duration::from_secs(5));
    a.lane.poll();
    assert_eq!(calls.load(Ordering::SeqCst), n + 1);
    assert!(take(&a.log).is_empty());
    fleet.clock.advance(Duration::from_secs(9));
    a.lane.poll();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        n + 1,
        "still gated at 9 s of 10"
    );
    // Meanwhile another instance opened the shared breaker.
    let peer = Storage::trip_open(&inner, "payments", Duration::from_secs(300), None).unwrap();
    a.breaker.reset(); // local CLOSED now
    take(&a.log);
    down.store(false, Ordering::SeqCst);
    fleet.clock.advance(Duration::from_secs(1));
    a.lane.poll();
    assert!(!a.breaker.is_degraded());
    assert_eq!(
        take(&a.log),
        [
            "payments: storage recovered",
            "payments: state closed -> open"
        ],
        "R17.8: recovery adopts the shared OPEN written meanwhile"
    );
    assert_eq!(a.breaker.shared_view(), Some(peer));
}

#[test]
fn r15_2_a_failed_lease_degrades_and_admits_by_the_local_rules() {
    let (fleet, _inner, down, _) = flaky_fleet();
    let a = fleet.instance(config());
    let b = fleet.instance(config());
    trip(&b);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    take(&a.log);
    down.store(true, Ordering::SeqCst);
    // The inline lease fails: the call still runs, on A's CLOSED machine.
    ok(&a.breaker).unwrap();
    assert_eq!(
        take(&a.log),
        [
            "payments: storage degraded: connection refused",
            "payments: state half_open -> closed"
        ]
    );
}

#[test]
fn r17_5_a_full_write_queue_drops_the_arriving_write_with_an_event() {
    let (fleet, _inner, _, _) = flaky_fleet(); // write_queue_size 2
    let a = fleet.instance(config());
    for _ in 0..3 {
        fail_until_tripped(&a.breaker, || {
            let _ = fail(&a.breaker);
        });
        a.breaker.reset();
    }
    let dropped: Vec<_> = take(&a.log)
        .into_iter()
        .filter(|e| e.contains("write dropped"))
        .collect();
    assert_eq!(dropped, ["payments: storage write dropped, queue full"]);
    a.lane.run_writes();
    let _ = fail(&a.breaker);
    let _ = fail(&a.breaker);
    assert!(
        !take(&a.log).iter().any(|e| e.contains("write dropped")),
        "room again"
    );
}

#[test]
fn r17_9_close_drains_queued_writes_is_idempotent_terminal_and_drops_the_view() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    fail_until_tripped(&a.breaker, || {
        let _ = fail(&a.breaker);
    });
    assert!(
        fleet.storage.peek("payments").is_none(),
        "the trip is still queued"
    );
    a.breaker.close();
    assert_eq!(
        fleet.storage.peek("payments").unwrap().state,
        State::Open,
        "drained first"
    );
    assert_eq!(a.breaker.shared_view(), None);
    a.breaker.close(); // idempotent
    assert!(a.breaker.is_shut_down());
    // Terminal: later writes are dropped silently, polls change nothing.
    a.breaker.reset();
    let before = fleet.storage.operations();
    let _ = fail(&a.breaker);
    let _ = fail(&a.breaker);
    a.lane.run_writes();
    a.lane.poll();
    assert_eq!((fleet.storage.operations() - before).total(), 0);
    // B closing drops a cached shared OPEN: back to its local CLOSED.
    b.lane.poll();
    assert_eq!(b.breaker.state(), State::Open);
    take(&b.log);
    b.breaker.close();
    assert_eq!(b.breaker.state(), State::Closed);
    assert_eq!(take(&b.log), ["payments: state open -> closed"]);
}

#[test]
fn r17_9_close_wakes_a_parked_background_lane_at_once() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder()
        .clock(clock.clone())
        .settings(
            StorageSettings::builder()
                .poll_interval(Duration::from_secs(3600))
                .build()
                .unwrap(),
        )
        .build();
    let lane = Coordinator::blocking(storage.clone());
    let breaker = CircuitBreaker::builder("payments")
        .config(config().build().unwrap())
        .clock(clock)
        .coordinator(&lane)
        .build()
        .unwrap();
    fail_until_tripped(&breaker, || {
        let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("503")));
    });
    // With an hour between polls, only the shutdown's wake-up can have run
    // the queued trip by the time close() returns.
    breaker.close();
    assert_eq!(storage.peek("payments").unwrap().state, State::Open);
    assert_eq!(lane.breakers(), 0);
}

#[test]
fn r15_8_overrides_take_precedence_locally_and_reset_resumes_the_shared_state() {
    let fleet = memory_fleet();
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    trip(&b);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    let before = fleet.storage.operations();
    a.breaker.disable();
    for _ in 0..5 {
        ok(&a.breaker).unwrap(); // admitted locally, no lease
    }
    a.breaker.metrics_only();
    ok(&a.breaker).unwrap();
    assert_eq!((fleet.storage.operations() - before).leases, 0);
    a.breaker.force_open();
    assert_eq!(rejected(ok(&a.breaker)).state(), State::ForcedOpen);
    take(&a.log);
    a.breaker.reset();
    assert_eq!(
        take(&a.log),
        [
            "payments: state forced_open -> half_open",
            "payments: reset"
        ],
        "reset resumes the cached shared HALF_OPEN"
    );
    assert_eq!(
        fleet.storage.peek("payments").unwrap().version,
        2,
        "nothing written"
    );
}

#[test]
fn r2_4_backoff_is_rejected_with_a_coordinator_and_the_registry_shares_it() {
    let fleet = memory_fleet();
    let lane = Coordinator::manual(fleet.storage.clone());
    let backoff = config()
        .wait_duration_backoff_multiplier(2.0)
        .build()
        .unwrap();
    let err = CircuitBreaker::builder("x")
        .config(backoff.clone())
        .coordinator(&lane)
        .build();
    assert_eq!(err.unwrap_err().field(), "wait_duration_backoff_multiplier");
    let err = Registry::builder()
        .config(backoff.clone())
        .coordinator(&lane)
        .build();
    assert_eq!(err.unwrap_err().field(), "wait_duration_backoff_multiplier");
    // Without storage the same config is fine.
    CircuitBreaker::builder("x")
        .config(backoff.clone())
        .build()
        .unwrap();
    let registry: Registry<Blocking> = Registry::builder()
        .config(config().build().unwrap())
        .clock(fleet.clock.clone())
        .coordinator(&lane)
        .build()
        .unwrap();
    assert_eq!(
        registry.get_with_config("y", backoff).unwrap_err().field(),
        "wait_duration_backoff_multiplier"
    );
    let (p, q) = (registry.get("payments"), registry.get("search"));
    assert!(p.is_coordinated() && q.is_coordinated());
    assert_eq!(lane.breakers(), 2);
    // Each coordinates under its own name.
    let _ = p.call(|| Err::<(), _>(std::io::Error::other("x")));
    let _ = p.call(|| Err::<(), _>(std::io::Error::other("x")));
    lane.run_writes();
    assert_eq!(fleet.storage.peek("payments").unwrap().state, State::Open);
    assert!(fleet.storage.peek("search").is_none());
    registry.close_all();
    assert_eq!(lane.breakers(), 0);
}

#[tokio::test]
async fn d6_an_async_coordinated_breaker_serves_the_async_api() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let (la, lb) = (
        Coordinator::manual_async(storage.clone()),
        Coordinator::manual_async(storage.clone()),
    );
    let build = |lane| {
        CircuitBreaker::builder("payments")
            .config(config().build().unwrap())
            .clock(clock.clone())
            .coordinator(lane)
            .build()
            .unwrap()
    };
    let (a, b) = (build(&la), build(&lb));
    for _ in 0..2 {
        let _ = a
            .call_async(|| async { Err::<(), _>(std::io::Error::other("503")) })
            .await;
    }
    la.run_writes().await;
    lb.poll().await;
    assert_eq!(b.state(), State::Open);
    clock.advance(WAIT);
    lb.poll().await;
    let permit = b.acquire_async().await.unwrap();
    assert!(permit.is_leased());
    permit.success();
    b.close_async().await;
    assert_eq!(storage.peek("payments").unwrap().probes_completed, 1);
}

/// A storage whose every call panics, after `healthy` is cleared.
#[derive(Clone)]
struct Panicking {
    inner: MemoryStorage,
    healthy: Arc<AtomicBool>,
}

impl Panicking {
    fn check(&self) {
        assert!(self.healthy.load(Ordering::SeqCst), "a buggy storage");
    }
}

impl Storage for Panicking {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.check();
        Storage::read(&self.inner, name)
    }
    fn trip_open(
        &self,
        n: &str,
        ttl: Duration,
        v: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Storage::trip_open(&self.inner, n, ttl, v)
    }
    fn begin_half_open_if_elapsed(
        &self,
        n: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Storage::begin_half_open_if_elapsed(&self.inner, n, wait, permitted, ttl)
    }
    fn lease_probe(&self, n: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.check();
        Storage::lease_probe(&self.inner, n, ttl)
    }
    fn record_probe(
        &self,
        n: &str,
        o: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Storage::record_probe(&self.inner, n, o, ttl)
    }
    fn close(&self, n: &str, ttl: Duration, v: Option<u64>) -> Result<SharedState, StorageError> {
        self.check();
        Storage::close(&self.inner, n, ttl, v)
    }
    fn restart_stalled_round(
        &self,
        n: &str,
        v: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Storage::restart_stalled_round(&self.inner, n, v, permitted, ttl)
    }
    fn restore(
        &self,
        n: &str,
        v: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.check();
        Storage::restore(&self.inner, n, v, state, ttl)
    }
}

#[test]
fn a_panicking_storage_degrades_like_a_failing_one_and_never_reaches_the_call() {
    let clock = ManualClock::new();
    let inner = MemoryStorage::builder().clock(clock.clone()).build();
    let healthy = Arc::new(AtomicBool::new(true));
    let fleet = Fleet {
        clock,
        storage: Panicking {
            inner: inner.clone(),
            healthy: healthy.clone(),
        },
    };
    let (a, b) = (fleet.instance(config()), fleet.instance(config()));
    trip(&b);
    fleet.clock.advance(WAIT);
    a.lane.poll();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    take(&a.log);
    healthy.store(false, Ordering::SeqCst);
    // The inline lease panics inside the storage: the call runs on local
    // state, and the panic is reported as a degradation.
    ok(&a.breaker).unwrap();
    assert_eq!(
        take(&a.log),
        [
            "payments: storage degraded: the storage panicked",
            "payments: state half_open -> closed"
        ]
    );
    // The lane survives its storage panicking, and close() still returns.
    fleet.clock.advance(Duration::from_secs(60));
    a.lane.poll();
    a.breaker.close();
    assert!(a.breaker.is_shut_down());
}
