//! The three traces where interlock decided differently from the released
//! interlock-cb 2.8.2 (issue 20 item 6), now matching it: R9.4, R9.5 (with
//! ruling D3 as revised) and R15.4.
//!
//! Each trace was run on 2.8.2 itself with `tests/traces_2_8_2.py`
//! (`/work/ref-venv/bin/python crates/interlock/tests/traces_2_8_2.py`, in
//! any environment with `pip install interlock-cb==2.8.2`); its output is
//! quoted above each test, which asserts the same of interlock step by step.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::{
    Coordinator, MemoryStorage, ProbeLease, SharedState, Storage, StorageError,
};
use interlock::{
    CallError, CircuitBreaker, Config, ConfigBuilder, ManualClock, Outcome, SlidingWindow, State,
};

const SEC: Duration = Duration::from_secs(1);

/// count(1), minimum 1, wait 1 s.
fn trips_on_one_failure() -> ConfigBuilder {
    Config::builder()
        .sliding_window(SlidingWindow::count(1))
        .minimum_number_of_calls(1)
        .wait_duration_in_open(SEC)
}

fn local(config: ConfigBuilder) -> (CircuitBreaker, ManualClock) {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("svc")
        .config(config.build().unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    (b, clock)
}

fn fail<M: interlock::mode::SyncApi>(b: &CircuitBreaker<M>) {
    let r: Result<(), CallError<std::io::Error>> = b.call(|| Err(std::io::Error::other("down")));
    assert!(
        matches!(r, Err(CallError::Inner(_))),
        "the call ran and failed"
    );
}

/// R9.4 (2.8.2): inconclusive probes re-open the breaker only when no probe
/// of the round is still in flight, so a running probe's verdict is not
/// thrown away. 2.8.2 printed:
///
/// ```text
/// R9.4 after b, the second inconclusive probe, with c in flight: half_open
/// R9.4 after c succeeds: half_open
/// R9.4 after one more call: closed
/// ```
///
/// (Before, interlock re-opened at b.)
#[test]
fn r9_4_inconclusive_probes_reopen_only_with_no_probe_in_flight_2_8_2_trace() {
    let (breaker, clock) = local(
        trips_on_one_failure()
            .permitted_calls_in_half_open(2)
            .max_concurrent_probes(2),
    );
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(SEC);
    let a = breaker.acquire().unwrap();
    let b = breaker.acquire().unwrap();
    assert!(a.is_probe() && b.is_probe());
    a.inconclusive();
    let c = breaker.acquire().expect("a's slot came back (R9.3)");
    b.inconclusive();
    assert_eq!(breaker.probes().inconclusive, 2, "the budget of 2");
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "c is in flight: the round goes on"
    );
    c.success();
    assert_eq!(breaker.state(), State::HalfOpen, "one verdict of two");
    breaker.call(|| Ok::<_, std::io::Error>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
}

/// R9.5 / D3 (revised): a re-open caused only by inconclusive probes counts
/// as a failed round for the backoff. With multiplier 2 and wait 1 s, 2.8.2
/// printed:
///
/// ```text
/// R9.5 retry_after after the trip: 1.0
/// R9.5 after one inconclusive probe: open 2.0
/// ```
///
/// (Before, interlock waited 1 s again.)
#[test]
fn r9_5_an_inconclusive_reopen_counts_as_a_failed_round_2_8_2_trace() {
    let (breaker, clock) = local(
        trips_on_one_failure()
            .permitted_calls_in_half_open(1)
            .wait_duration_backoff_multiplier(2.0),
    );
    fail(&breaker);
    assert_eq!(breaker.retry_after(), Some(SEC));
    clock.advance(SEC);
    breaker.acquire().unwrap().inconclusive();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.retry_after(), Some(2 * SEC));
    let refused = breaker.acquire().unwrap_err();
    assert_eq!(refused.retry_after(), Some(2 * SEC));
}

/// The storage calls of a coordinated breaker, each with the state it found.
#[derive(Clone)]
struct Recording {
    inner: MemoryStorage,
    log: Arc<Mutex<Vec<String>>>,
}

impl Recording {
    fn note(&self, name: &str, what: String) {
        let found = self.inner.peek(name).map_or(State::Closed, |s| s.state);
        self.log.lock().unwrap().push(format!("{what} in {found}"));
    }
}

impl Storage for Recording {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Storage::read(&self.inner, name)
    }
    fn trip_open(
        &self,
        n: &str,
        ttl: Duration,
        v: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.note(n, "trip_open".into());
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
        self.note(n, "lease_probe".into());
        Storage::lease_probe(&self.inner, n, ttl)
    }
    fn record_probe(
        &self,
        n: &str,
        o: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let before = self.inner.peek(n).map_or(0, |s| s.probes_completed);
        let found = self.inner.peek(n).map_or(State::Closed, |s| s.state);
        let after = Storage::record_probe(&self.inner, n, o, ttl)?;
        let tallied = after.probes_completed > before;
        self.log.lock().unwrap().push(format!(
            "record_probe {o} in {found}: {}",
            if tallied { "tallied" } else { "dropped" }
        ));
        Ok(after)
    }
    fn close(&self, n: &str, ttl: Duration, v: Option<u64>) -> Result<SharedState, StorageError> {
        self.note(n, "close".into());
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

/// R15.4: a leased probe's outcome is queued before the local trip it
/// causes (a leased probe of a shared HALF_OPEN while the local machine is
/// CLOSED fails and trips it). 2.8.2 printed:
///
/// ```text
/// R15.4 shared half_open local closed
/// R15.4 local after the leased probe: open
/// R15.4 storage: lease_probe in half_open
/// R15.4 storage: record_probe failure in half_open: tallied
/// R15.4 storage: trip_open in half_open
/// ```
///
/// (Before, interlock queued the trip first: the shared round was over when
/// the probe arrived, and the probe was never counted.)
#[test]
fn r15_4_a_leased_probes_outcome_is_queued_before_the_local_trip_it_causes_2_8_2_trace() {
    let clock = ManualClock::new();
    let memory = MemoryStorage::builder().clock(clock.clone()).build();
    let storage = Recording {
        inner: memory.clone(),
        log: Arc::default(),
    };
    let lane: Coordinator<Blocking> = Coordinator::manual(storage.clone());
    let breaker = CircuitBreaker::builder("svc")
        .config(
            trips_on_one_failure()
                .permitted_calls_in_half_open(3)
                .max_concurrent_probes(3)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .coordinator(&lane)
        .build()
        .unwrap();
    // Another instance tripped the fleet; its wait is over.
    Storage::trip_open(&memory, "svc", Duration::from_secs(300), None).unwrap();
    clock.advance(SEC);
    lane.poll(); // reads the shared OPEN
    lane.poll(); // begins the shared HALF_OPEN
    assert_eq!(memory.peek("svc").unwrap().state, State::HalfOpen);
    assert_eq!(breaker.state(), State::HalfOpen, "the shared view governs");
    assert_eq!(
        breaker.probes(),
        Default::default(),
        "the local machine is CLOSED"
    );
    storage.log.lock().unwrap().clear();

    fail(&breaker); // leased; the local CLOSED machine records it and trips
    lane.run_writes();
    assert_eq!(
        *storage.log.lock().unwrap(),
        [
            "lease_probe in half_open",
            "record_probe failure in half_open: tallied",
            "trip_open in half_open",
        ]
    );
    assert_eq!(memory.peek("svc").unwrap().state, State::Open);
    assert_eq!(breaker.state(), State::Open);
}
