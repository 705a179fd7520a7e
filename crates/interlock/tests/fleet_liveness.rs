//! Fleet liveness (issue 21) on `MemoryStorage`, driven by hand: a shared
//! `ManualClock`, one manual coordinator per simulated process, explicit
//! polls and writes. A shared round whose probes never report restarts
//! (R17.10); a spent round rejects without asking the storage (R15.2a);
//! answers older than the cached view are never adopted (R15.6a); a storage
//! that went backwards is repaired (R15.11); a local OPEN the fleet missed
//! is shared on recovery (R15.12); unavailable notices are said once
//! (R17.11); absurd versions degrade (R16.7).
#![cfg(feature = "testing")]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::testing::FlakyStorage;
use interlock::storage::{
    Coordinator, MemoryStorage, Notice, NoticeSink, ProbeLease, SharedState, Storage, StorageError,
    StorageSettings,
};
use interlock::{
    CallError, CircuitBreaker, Config, ConfigBuilder, Event, ManualClock, Outcome, SlidingWindow,
    State,
};

const WAIT: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(300);

fn config() -> ConfigBuilder {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(2)
}

type Log = Arc<Mutex<Vec<String>>>;

/// One simulated process: its own coordinator and breaker, events logged.
struct Instance<S: Storage + Clone> {
    lane: Coordinator<Blocking>,
    breaker: CircuitBreaker<Blocking>,
    log: Log,
    storage: S,
}

impl<S: Storage + Clone> Instance<S> {
    fn new(storage: S, clock: &ManualClock, config: ConfigBuilder) -> Self {
        let lane = Coordinator::manual(storage.clone());
        let log: Log = Arc::default();
        let sink = log.clone();
        let breaker = CircuitBreaker::builder("payments")
            .config(config.build().unwrap())
            .clock(clock.clone())
            .coordinator(&lane)
            .listener(move |e: &Event<'_>| {
                if !matches!(e, Event::CallRecorded { .. } | Event::CallRejected { .. }) {
                    sink.lock().unwrap().push(e.to_string());
                }
            })
            .build()
            .unwrap();
        Instance {
            lane,
            breaker,
            log,
            storage,
        }
    }

    fn events(&self, needle: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.contains(needle))
            .count()
    }

    /// One turn of the lane: queued writes (and what notices asked for),
    /// then a poll, then the writes that poll queued.
    fn turn(&self) {
        self.lane.run_writes();
        self.lane.poll();
        self.lane.run_writes();
    }

    fn trip_locally(&self) {
        support::fail_until_tripped(&self.breaker, || {
            let _ = fail(&self.breaker);
        });
    }
}

fn ok(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Ok(()))
}

fn fail(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Err(std::io::Error::other("503")))
}

fn manual() -> (MemoryStorage, ManualClock) {
    let clock = ManualClock::new();
    (MemoryStorage::builder().clock(clock.clone()).build(), clock)
}

/// The shared record, which must exist.
fn shared(storage: &MemoryStorage) -> SharedState {
    storage.peek("payments").unwrap()
}

// --- R17.10: a shared round whose probes never report restarts -------------

/// Two instances in a shared HALF_OPEN round of `permitted` probes.
fn half_open_fleet(
    permitted: u32,
) -> (
    MemoryStorage,
    ManualClock,
    Instance<FlakyStorage<MemoryStorage>>,
    Instance<MemoryStorage>,
) {
    let (storage, clock) = manual();
    let cfg = || config().permitted_calls_in_half_open(permitted);
    let a = Instance::new(FlakyStorage::new(storage.clone()), &clock, cfg());
    let b = Instance::new(storage.clone(), &clock, cfg());
    storage.trip_open("payments", TTL, None);
    clock.advance(WAIT);
    a.turn(); // reads OPEN
    a.turn(); // begins HALF_OPEN
    b.turn();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    assert_eq!(b.breaker.state(), State::HalfOpen);
    (storage, clock, a, b)
}

#[test]
fn r17_10_a_round_whose_outcome_write_was_lost_restarts_after_the_stall_bound() {
    let (storage, clock, a, b) = half_open_fleet(1);
    // A leases the only probe; the storage fails before its outcome is
    // written: the write is dropped while A is degraded.
    let permit = a.breaker.acquire().unwrap();
    assert!(permit.is_leased());
    a.storage.set_down(true);
    permit.success();
    a.lane.run_writes();
    assert!(a.breaker.is_degraded());
    let spent = shared(&storage);
    assert_eq!((spent.probes_remaining, spent.probes_completed), (0, 0));

    // B learns the round is spent and waits a whole stall bound
    // (`max_wait_in_half_open`, which follows the OPEN wait) from then.
    b.turn();
    assert!(b.breaker.shared_view().unwrap().no_slot_left());
    clock.advance(WAIT - Duration::from_millis(1));
    b.turn();
    assert_eq!(shared(&storage), spent, "restarted before the stall bound");
    assert!(ok(&b.breaker).unwrap_err().is_rejected());

    clock.advance(Duration::from_millis(1));
    b.turn();
    let fresh = shared(&storage);
    assert_eq!(
        (fresh.state, fresh.version, fresh.probes_remaining),
        (State::HalfOpen, spent.version + 1, 1),
        "a fresh round of the budget, fenced on the stalled version"
    );
    assert_eq!(fresh.opened_at, spent.opened_at);
    assert_eq!(storage.operations().restarts, 1);
    // The new round admits and decides.
    ok(&b.breaker).unwrap();
    b.lane.run_writes();
    assert_eq!(shared(&storage).state, State::Closed);
    assert_eq!(b.breaker.state(), State::Closed);
}

#[test]
fn r17_10_a_lease_the_storage_ran_after_its_caller_gave_up_restarts_too() {
    let (storage, clock, a, b) = half_open_fleet(2);
    // Two leases run by the storage whose callers never learnt of them (a
    // client timeout while the server was paused, say).
    assert!(storage.lease_probe("payments", TTL).granted);
    assert!(storage.lease_probe("payments", TTL).granted);
    a.turn();
    b.turn();
    clock.advance(WAIT);
    a.turn(); // the first instance past the bound restarts
    b.turn(); // the other adopts the fresh round, fenced out of its own
    assert_eq!(storage.operations().restarts, 1);
    assert_eq!(shared(&storage).probes_remaining, 2);
    assert!(a.breaker.acquire().unwrap().is_leased());
    assert!(b.breaker.acquire().unwrap().is_leased());
}

/// The stall bound of a shared round is the local one, D7's
/// `max_wait_in_half_open`, shorter or longer than the OPEN wait; with
/// `Duration::MAX` a shared round is never restarted.
#[test]
fn r17_10_the_stall_bound_is_max_wait_in_half_open() {
    for max in [Duration::from_secs(2), WAIT * 3, Duration::MAX] {
        let (storage, clock) = manual();
        let a = Instance::new(storage.clone(), &clock, config().max_wait_in_half_open(max));
        storage.trip_open("payments", TTL, None);
        clock.advance(WAIT);
        a.turn(); // reads OPEN
        a.turn(); // begins HALF_OPEN
        assert_eq!(a.breaker.state(), State::HalfOpen);
        // Both slots leased by callers the fleet never hears from again.
        assert!(storage.lease_probe("payments", TTL).granted);
        assert!(storage.lease_probe("payments", TTL).granted);
        a.turn(); // sees the round spent
        let spent = shared(&storage);
        if max == Duration::MAX {
            // Far past any bound, within the record's TTL (an expired
            // record is another story, R15.11).
            for _ in 0..29 {
                clock.advance(WAIT);
                a.turn();
            }
            assert_eq!(storage.operations().restarts, 0, "never restarted");
            assert_eq!(shared(&storage), spent);
            continue;
        }
        clock.advance(max - Duration::from_millis(1));
        a.turn();
        assert_eq!(storage.operations().restarts, 0, "{max:?}: too early");
        clock.advance(Duration::from_millis(1));
        a.turn();
        assert_eq!(storage.operations().restarts, 1, "{max:?}: at the bound");
        assert_eq!(shared(&storage).version, spent.version + 1);
        assert!(a.breaker.acquire().unwrap().is_leased());
    }
}

#[test]
fn r17_10_a_round_that_moves_is_never_restarted() {
    let (storage, clock, a, b) = half_open_fleet(2);
    let first = a.breaker.acquire().unwrap();
    let second = b.breaker.acquire().unwrap();
    a.turn();
    b.turn();
    // A slow probe reports just before the bound: progress (a new version).
    clock.advance(WAIT - Duration::from_secs(1));
    first.success();
    a.turn();
    b.turn();
    clock.advance(Duration::from_secs(2)); // past the bound since the lease
    a.turn();
    b.turn();
    assert_eq!(
        storage.operations().restarts,
        0,
        "the round moved {:?} ago",
        Duration::from_secs(2)
    );
    // The last probe reports within its own bound and the round closes.
    second.success();
    b.turn();
    assert_eq!(shared(&storage).state, State::Closed);
    assert_eq!(storage.operations().restarts, 0);
}

#[test]
fn r17_10_a_degraded_instance_does_not_restart_rounds() {
    let (storage, clock, a, _b) = half_open_fleet(1);
    assert!(storage.lease_probe("payments", TTL).granted);
    a.turn();
    a.storage.set_down(true);
    a.turn();
    assert!(a.breaker.is_degraded());
    clock.advance(WAIT);
    a.lane.poll();
    assert_eq!(storage.operations().restarts, 0);
}

// --- R15.2a: a spent round rejects without asking the storage --------------

#[test]
fn r15_2a_once_the_round_is_spent_rejections_cost_no_storage_call() {
    let (storage, _clock, a, b) = half_open_fleet(2);
    let _p1 = a.breaker.acquire().unwrap();
    let _p2 = a.breaker.acquire().unwrap();
    // B has not heard that the budget is gone: one refused lease tells it.
    let before = storage.operations();
    let refused = b.breaker.acquire().unwrap_err();
    assert_eq!(
        (refused.state(), refused.retry_after()),
        (State::HalfOpen, None)
    );
    assert_eq!((storage.operations() - before).leases, 1);
    // From then on every rejection is local, on both instances.
    let before = storage.operations();
    for _ in 0..100 {
        let open = b.breaker.acquire().unwrap_err();
        assert_eq!((open.state(), open.retry_after()), (State::HalfOpen, None));
        assert!(a.breaker.acquire().is_err());
    }
    assert_eq!((storage.operations() - before).total(), 0);
    // A newer version (here a fresh round by another instance) arrives by
    // poll: admission asks the storage again.
    let spent = shared(&storage);
    storage.restart_stalled_round("payments", spent.version, 2, TTL);
    b.lane.poll();
    assert!(b.breaker.acquire().unwrap().is_leased());
}

// --- A storage to stage faults with --------------------------------------

/// Something to run once, after the next lease, before its answer returns.
type Hook = Box<dyn FnOnce() + Send>;

/// A `MemoryStorage` that can be replaced (like a Redis server restarted
/// from a dump, or empty), with faults to stage: a lease answer overtaken
/// in flight, reads that answer an absurd version, notices said to be
/// unavailable.
#[derive(Clone)]
struct Staged {
    current: Arc<Mutex<MemoryStorage>>,
    after_lease: Arc<Mutex<Option<Hook>>>,
    /// Reads answer this version instead of the stored one.
    read_version: Option<u64>,
    /// The sinks `subscribe` was given (it cannot push).
    sinks: Arc<Mutex<Vec<NoticeSink>>>,
    /// Every trip says notices are unavailable.
    complain_on_trip: bool,
}

impl Staged {
    fn new(storage: MemoryStorage) -> Self {
        Staged {
            current: Arc::new(Mutex::new(storage)),
            after_lease: Arc::default(),
            read_version: None,
            sinks: Arc::default(),
            complain_on_trip: false,
        }
    }
    fn now(&self) -> MemoryStorage {
        self.current.lock().unwrap().clone()
    }
    /// The storage restarts with `with` as its contents.
    fn replace(&self, with: MemoryStorage) {
        *self.current.lock().unwrap() = with;
    }
    fn complain(&self) {
        for sink in self.sinks.lock().unwrap().iter() {
            sink.deliver(Notice::Unavailable {
                reason: "NOPERM no channel rights",
            });
        }
    }
}

impl Storage for Staged {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        let read = Storage::read(&self.now(), name)?;
        Ok(match self.read_version {
            Some(version) => read.map(|s| SharedState { version, ..s }),
            None => read,
        })
    }
    fn trip_open(
        &self,
        n: &str,
        ttl: Duration,
        v: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let answer = Storage::trip_open(&self.now(), n, ttl, v);
        if self.complain_on_trip {
            self.complain();
        }
        answer
    }
    fn begin_half_open_if_elapsed(
        &self,
        n: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::begin_half_open_if_elapsed(&self.now(), n, wait, permitted, ttl)
    }
    fn lease_probe(&self, n: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        let answer = Storage::lease_probe(&self.now(), n, ttl)?;
        let hook = self.after_lease.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        Ok(answer)
    }
    fn record_probe(
        &self,
        n: &str,
        o: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::record_probe(&self.now(), n, o, ttl)
    }
    fn close(&self, n: &str, ttl: Duration, v: Option<u64>) -> Result<SharedState, StorageError> {
        Storage::close(&self.now(), n, ttl, v)
    }
    fn restart_stalled_round(
        &self,
        n: &str,
        v: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restart_stalled_round(&self.now(), n, v, permitted, ttl)
    }
    fn restore(
        &self,
        n: &str,
        v: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restore(&self.now(), n, v, state, ttl)
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.sinks.lock().unwrap().push(sink);
        false // cannot push
    }
}

// --- R15.6a: never adopt an older view --------------------------------------

#[test]
fn r15_6a_a_lease_answer_overtaken_by_a_newer_view_is_not_adopted() {
    let (inner, clock) = manual();
    let storage = Staged::new(inner.clone());
    let a = Instance::new(storage.clone(), &clock, config());
    inner.trip_open("payments", TTL, None);
    inner.begin_half_open_if_elapsed("payments", Duration::ZERO, 2, TTL);
    a.turn();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    // Before the lease's answer returns, another instance closes the round
    // and this instance's lane polls: the answer arrives overtaken.
    let (other, lane) = (inner.clone(), a.lane.clone());
    *storage.after_lease.lock().unwrap() = Some(Box::new(move || {
        other.close("payments", TTL, None);
        lane.poll();
    }));
    let permit = a.breaker.acquire().unwrap(); // granted at v3, answered after v4 was adopted
    let view = a.breaker.shared_view().unwrap();
    assert_eq!(
        (view.state, view.version),
        (State::Closed, 4),
        "the older lease answer replaced the newer CLOSED"
    );
    assert_eq!(a.breaker.state(), State::Closed);
    drop(permit);
    assert_eq!(a.events("half_open -> closed"), 1, "{:?}", a.log);
    assert_eq!(
        a.events("closed -> half_open"),
        1,
        "no flap back: {:?}",
        a.log
    );
}

// --- R15.11: a storage that went backwards is repaired ---------------------

#[test]
fn r15_11_a_dump_restored_over_newer_state_rejects_no_healthy_call() {
    let (first, clock) = manual();
    // The dump: the breaker OPEN at v1.
    let dump = MemoryStorage::builder().clock(clock.clone()).build();
    dump.trip_open("payments", TTL, None);
    let storage = Staged::new(first.clone());
    let (a, b) = (
        Instance::new(storage.clone(), &clock, config()),
        Instance::new(storage.clone(), &clock, config()),
    );
    // Meanwhile the fleet tripped, recovered and closed: CLOSED v5.
    first.trip_open("payments", TTL, None);
    clock.advance(WAIT);
    first.begin_half_open_if_elapsed("payments", WAIT, 1, TTL);
    first.lease_probe("payments", TTL);
    first.record_probe("payments", Outcome::Success, TTL);
    first.close("payments", TTL, Some(4));
    a.turn();
    b.turn();
    assert_eq!(a.breaker.shared_view().unwrap().version, 5);

    storage.replace(dump.clone()); // restarted from the old dump
    for _ in 0..3 {
        a.turn();
        b.turn();
        for i in [&a, &b] {
            ok(&i.breaker).expect("a healthy call was rejected after the restore");
            assert_eq!(i.breaker.state(), State::Closed);
        }
    }
    let repaired = dump.peek("payments").unwrap();
    assert_eq!(
        (repaired.state, repaired.version),
        (State::Closed, 6),
        "repaired toward the newest state known, above it"
    );
    assert_eq!(dump.operations().restores, 1, "the first to notice repairs");
    assert_eq!(a.breaker.shared_view(), Some(repaired));
    assert_eq!(b.breaker.shared_view(), Some(repaired));
}

#[test]
fn r15_11_a_repair_dropped_while_degraded_is_queued_again_after_recovery() {
    let (first, clock) = manual();
    let storage = Staged::new(first.clone());
    let a = Instance::new(FlakyStorage::new(storage.clone()), &clock, config());
    first.close("payments", TTL, None);
    first.close("payments", TTL, Some(1));
    a.turn();
    let dump = MemoryStorage::builder().clock(clock.clone()).build();
    dump.trip_open("payments", TTL, None);
    storage.replace(dump.clone());
    a.lane.poll(); // the regression is seen, its repair queued...
    a.storage.set_down(true);
    a.lane.poll(); // ...and the storage fails before it runs
    a.lane.run_writes(); // dropped while degraded
    assert_eq!(dump.operations().restores, 0);
    a.storage.set_down(false);
    clock.advance(StorageSettings::default().retry_backoff());
    a.turn();
    let repaired = shared(&dump);
    assert_eq!((repaired.state, repaired.version), (State::Closed, 3));
    assert!(ok(&a.breaker).is_ok());
}

#[test]
fn r15_11_an_empty_restart_keeps_the_fleet_open_until_its_wait_ends() {
    let (first, clock) = manual();
    let storage = Staged::new(first.clone());
    let a = Instance::new(storage.clone(), &clock, config());
    first.trip_open("payments", TTL, None);
    a.turn();
    let open = a.breaker.shared_view().unwrap();
    // Half-way through the wait the storage restarts empty.
    clock.advance(WAIT / 2);
    let empty = MemoryStorage::builder().clock(clock.clone()).build();
    storage.replace(empty.clone());
    a.turn();
    let repaired = empty.peek("payments").unwrap();
    assert_eq!(
        (repaired.state, repaired.version, repaired.opened_at),
        (State::Open, open.version + 1, open.opened_at),
        "the OPEN is written back with its own opened_at"
    );
    assert!(ok(&a.breaker).unwrap_err().is_rejected());
    // The wait still ends when it would have.
    clock.advance(WAIT / 2);
    a.turn();
    assert_eq!(a.breaker.state(), State::HalfOpen);
}

#[test]
fn r15_11_an_expired_closed_key_is_written_back_so_versions_never_restart() {
    let (storage, clock) = manual();
    let (a, b) = (
        Instance::new(storage.clone(), &clock, config()),
        Instance::new(storage.clone(), &clock, config()),
    );
    storage.close("payments", TTL, None);
    storage.close("payments", TTL, Some(1));
    a.turn();
    b.turn();
    clock.advance(TTL); // nobody wrote for a whole TTL: the key expired
    assert_eq!(storage.peek("payments"), None);
    a.turn();
    let back = shared(&storage);
    assert_eq!((back.state, back.version), (State::Closed, 3));
    // A trip after that is newer for every instance.
    b.trip_locally();
    b.lane.run_writes();
    a.turn();
    assert_eq!(a.breaker.state(), State::Open);
    assert_eq!(shared(&storage).version, 4);
}

// --- R15.12: a local OPEN the fleet missed is shared on recovery ----------

#[test]
fn r15_12_trips_during_an_outage_become_one_shared_open_after_recovery() {
    let (storage, clock) = manual();
    let fleet: Vec<_> = (0..4)
        .map(|_| Instance::new(FlakyStorage::new(storage.clone()), &clock, config()))
        .collect();
    for i in &fleet {
        i.turn();
    }
    let before = shared_or_closed(&storage);
    for i in &fleet {
        i.storage.set_down(true);
        i.turn(); // degrades
        i.trip_locally(); // its shared trip is dropped while degraded
        i.turn();
        assert!(i.breaker.is_degraded());
    }
    assert_eq!(
        shared_or_closed(&storage),
        before,
        "nothing reached the storage"
    );
    for i in &fleet {
        i.storage.set_down(false);
    }
    clock.advance(StorageSettings::default().retry_backoff());
    // All recover at once: each sees the CLOSED the fleet stayed in and
    // sends its trip, fenced by that CLOSED's version.
    for i in &fleet {
        i.lane.poll();
    }
    for i in &fleet {
        i.lane.run_writes();
    }
    let open = shared(&storage);
    assert_eq!(
        (open.state, open.version),
        (State::Open, 1),
        "one trip applied, the others fenced out"
    );
    assert_eq!(storage.operations().trips, 4);
    for i in &fleet {
        assert!(!i.breaker.is_degraded());
        assert_eq!(i.breaker.shared_view(), Some(open));
    }
    // The fleet probes with one budget, not one per instance.
    clock.advance(WAIT);
    for i in &fleet {
        i.turn();
        i.turn();
    }
    let leased = fleet
        .iter()
        .flat_map(|i| (0..3).map(|_| i.breaker.acquire()).collect::<Vec<_>>())
        .filter(Result::is_ok)
        .count();
    assert_eq!(
        leased, 2,
        "permitted_calls_in_half_open for the whole fleet"
    );
}

fn shared_or_closed(storage: &MemoryStorage) -> SharedState {
    storage.peek("payments").unwrap_or_else(SharedState::closed)
}

#[test]
fn r15_12_a_local_open_that_ended_is_not_shared() {
    let (storage, clock) = manual();
    let a = Instance::new(FlakyStorage::new(storage.clone()), &clock, config());
    a.turn();
    a.storage.set_down(true);
    a.turn();
    a.trip_locally();
    a.lane.run_writes(); // the shared trip is dropped while degraded
    // Still cut off, the local round passes: the trip is no longer current.
    clock.advance(WAIT);
    ok(&a.breaker).unwrap();
    ok(&a.breaker).unwrap();
    assert_eq!(a.breaker.state(), State::Closed);
    a.storage.set_down(false);
    clock.advance(StorageSettings::default().retry_backoff());
    a.turn();
    a.turn();
    assert!(!a.breaker.is_degraded());
    assert_eq!(storage.operations().trips, 0);
    assert_eq!(shared_or_closed(&storage).state, State::Closed);
}

#[test]
fn r15_12_a_local_re_open_after_recovery_is_shared_at_once() {
    let (storage, clock) = manual();
    let one_probe = config().permitted_calls_in_half_open(1);
    let a = Instance::new(FlakyStorage::new(storage.clone()), &clock, one_probe);
    a.turn();
    a.storage.set_down(true);
    a.turn();
    a.trip_locally();
    a.lane.run_writes(); // the shared trip is dropped while degraded
    // Still cut off when the wait ends: A probes on its own.
    clock.advance(WAIT);
    let probe = a.breaker.acquire().unwrap();
    assert!(!probe.is_leased());
    // Recovered while the local probe runs: a probing machine's trip is
    // not current, so nothing is sent yet.
    a.storage.set_down(false);
    a.turn();
    assert!(!a.breaker.is_degraded());
    assert_eq!(storage.operations().trips, 0);
    // The probe fails: the re-open is shared, fenced by the CLOSED view.
    probe.failure();
    a.lane.run_writes();
    let s = shared(&storage);
    assert_eq!(
        (s.state, s.version),
        (State::Open, 1),
        "the re-open was not shared"
    );
    assert_eq!(a.breaker.shared_view(), Some(s));
}

// --- R17.11: notices unavailable, said once --------------------------------

#[test]
fn r17_11_unavailable_notices_are_reported_once_and_writes_still_apply() {
    let (inner, clock) = manual();
    let storage = Staged {
        complain_on_trip: true,
        ..Staged::new(inner.clone())
    };
    let a = Instance::new(storage.clone(), &clock, config());
    a.turn();
    a.trip_locally();
    a.turn();
    storage.complain();
    a.turn();
    assert_eq!(shared(&inner).state, State::Open, "the write applied");
    assert!(
        !a.breaker.is_degraded(),
        "a failed notice is not a failed write"
    );
    assert!(!a.lane.is_subscribed());
    assert_eq!(
        a.events("storage change notices unavailable, polling only: NOPERM no channel rights"),
        1,
        "{:?}",
        a.log
    );
    assert_eq!(a.events("degraded"), 0);
}

// --- R16.7: absurd versions degrade -----------------------------------------

#[test]
fn r16_7_a_view_with_an_absurd_version_is_refused_as_corrupt() {
    let (inner, clock) = manual();
    inner.trip_open("payments", TTL, None);
    let absurd = Staged {
        read_version: Some((1 << 53) - 1),
        ..Staged::new(inner)
    };
    let a = Instance::new(absurd, &clock, config());
    a.turn();
    assert!(a.breaker.is_degraded());
    assert_eq!(a.breaker.shared_view(), None, "nothing adopted");
    assert_eq!(
        a.events("above the largest valid version 2^50: a corrupt record"),
        1,
        "{:?}",
        a.log
    );
    ok(&a.breaker).unwrap(); // local rules decide
}
