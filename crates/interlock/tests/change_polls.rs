//! Issue 29 in the core: a coordinator's batched poll asks the storage only
//! for what changed since the epoch of its previous poll (R17.12), on
//! `MemoryStorage` (which keeps the epoch and answers from it, R16.15).
//! Manual coordinators on a `ManualClock`; the storage's operation counts
//! show what each poll read.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::{Async, Blocking};
use interlock::storage::{
    ChangePoll, Coordinator, Epoch, MemoryStorage, PollAnswers, PollRequest, ProbeLease,
    SharedState, Storage, StorageError, StorageOps, StorageSettings,
};
use interlock::{CallError, CircuitBreaker, Config, ManualClock, SlidingWindow, State};

const TTL: Duration = Duration::from_secs(300);

/// A storage on `clock` (the storage's own), notices off, [`TTL`].
fn storage(clock: &(impl interlock::Clock + Clone)) -> MemoryStorage {
    MemoryStorage::builder()
        .clock(clock.clone())
        .settings(
            StorageSettings::builder()
                .notifications(false)
                .state_ttl(TTL)
                .build()
                .unwrap(),
        )
        .build()
}

fn config() -> Config {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn breaker(
    lane: &Coordinator<Blocking>,
    clock: &ManualClock,
    name: &str,
) -> CircuitBreaker<Blocking> {
    CircuitBreaker::builder(name)
        .config(config())
        .clock(clock.clone())
        .coordinator(lane)
        .build()
        .unwrap()
}

fn rejects(b: &CircuitBreaker<Blocking>) -> bool {
    matches!(
        b.call(|| Ok::<_, std::io::Error>(())),
        Err(CallError::Rejected(_))
    )
}

fn reads(n: u64) -> StorageOps {
    StorageOps {
        reads: n,
        batches: 1,
        ..StorageOps::default()
    }
}

/// `poll` once, returning what it cost the storage.
fn poll(storage: &MemoryStorage, lane: &Coordinator<Blocking>) -> StorageOps {
    let before = storage.operations();
    lane.poll();
    storage.operations() - before
}

#[test]
fn r17_12_an_idle_poll_reads_nothing_and_a_change_is_read_alone() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    let lane = Coordinator::manual(storage.clone());
    let breakers: Vec<_> = (0..100)
        .map(|i| breaker(&lane, &clock, &format!("host-{i}")))
        .collect();
    assert_eq!(
        poll(&storage, &lane),
        reads(100),
        "the first poll reads all"
    );
    assert_eq!(poll(&storage, &lane), reads(0), "nothing changed");
    clock.advance(Duration::from_secs(1));
    assert_eq!(poll(&storage, &lane), reads(0), "still nothing");

    // Another instance trips one breaker (no notices here): the next poll
    // reads that one only, and the breaker follows.
    storage.trip_open("host-42", TTL, None);
    storage.close("host-7", TTL, None);
    assert_eq!(poll(&storage, &lane), reads(2));
    assert!(rejects(&breakers[42]));
    assert!(!rejects(&breakers[41]));
    assert_eq!(breakers[7].shared_view().map(|v| v.version), Some(1));
    // The OPEN view's wait (10 s) cannot end before the next two polls:
    // no begin, and as nothing changed, nothing read (R17.13).
    assert_eq!(poll(&storage, &lane), reads(0));
    clock.advance(Duration::from_secs(6));
    assert_eq!(poll(&storage, &lane), reads(0), "still 3 s + 2 polls away");
}

#[test]
fn r17_13_an_open_view_asks_to_begin_from_two_polls_before_its_wait_ends() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "payments");
    let _idle = breaker(&lane, &clock, "search");
    assert_eq!(poll(&storage, &lane), reads(2), "first: full");
    storage.trip_open("payments", TTL, None);
    assert_eq!(poll(&storage, &lane), reads(1), "the trip");
    assert!(rejects(&b));
    let begin = StorageOps {
        begins: 1,
        batches: 1,
        ..StorageOps::default()
    };
    // wait 10 s, poll_interval 1 s: no begin while the wait ends more than
    // two polls away by the storage's clock, one at every poll after.
    clock.advance(Duration::from_millis(7_999));
    assert_eq!(poll(&storage, &lane), reads(0), "8 s - 1 ms: not due");
    clock.advance(Duration::from_millis(1));
    assert_eq!(poll(&storage, &lane), begin, "8 s: due within two polls");
    assert!(rejects(&b), "the begin was early: a no-op");
    clock.advance(Duration::from_secs(1));
    assert_eq!(poll(&storage, &lane), begin);
    clock.advance(Duration::from_secs(1));
    assert_eq!(poll(&storage, &lane), begin, "10 s: the wait ended");
    assert_eq!(b.shared_view().map(|v| v.state), Some(State::HalfOpen));
}

#[test]
fn r17_12_a_view_from_the_instances_own_write_is_vouched_for_not_read() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "payments");
    let _other = breaker(&lane, &clock, "search");
    lane.run_writes();
    assert_eq!(poll(&storage, &lane), reads(2), "no epoch yet: a full read");
    assert_eq!(poll(&storage, &lane), reads(0));
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("503")));
    }
    lane.run_writes(); // the trip, adopted from its answer
    assert_eq!(b.shared_view().map(|v| v.state), Some(State::Open));
    // The view came from the write's answer, not a poll: the poll asks the
    // storage to vouch for its version, which it does (the trip is the
    // record's last write since the epoch), so nothing is read; the OPEN's
    // wait is far off, so no begin either (R17.13).
    assert_eq!(poll(&storage, &lane), reads(0));
    storage.close("payments", TTL, None);
    assert_eq!(poll(&storage, &lane), reads(1), "the close is read");
    assert_eq!(b.state(), State::Closed);
    // The CLOSED view came from a poll: skipped from now on.
    assert_eq!(poll(&storage, &lane), reads(0));
}

#[test]
fn r17_12_a_view_the_storage_cannot_vouch_for_is_read() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "payments");
    let _other = breaker(&lane, &clock, "search");
    for _ in 0..2 {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("503")));
    }
    lane.run_writes(); // the trip, before any epoch
    assert_eq!(
        poll(&storage, &lane),
        StorageOps {
            reads: 1,
            begins: 1,
            batches: 1,
            ..StorageOps::default()
        },
        "no epoch yet: a full read, where an OPEN view asks to begin, due or not"
    );
    // Another instance closes and re-trips it: the view the poll read is
    // two versions behind, so it is read, not vouched for.
    storage.close("payments", TTL, None);
    let v = storage.trip_open("payments", TTL, None).version;
    assert_eq!(poll(&storage, &lane), reads(1));
    assert_eq!(b.shared_view().map(|s| s.version), Some(v));
}

#[test]
fn r17_12_with_r15_11_an_expired_record_is_read_and_repaired() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    storage.close("payments", TTL, None);
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "payments");
    let _idle = breaker(&lane, &clock, "search");
    assert_eq!(poll(&storage, &lane), reads(2));
    assert_eq!(b.shared_view().map(|v| v.version), Some(1));
    clock.advance(TTL);
    // Expired: no write happened, yet the change poll reads it, and finds
    // the storage behind the cached version, as a full read would.
    assert_eq!(poll(&storage, &lane), reads(1));
    let before = storage.operations();
    lane.run_writes();
    assert_eq!((storage.operations() - before).restores, 1, "repaired");
    assert_eq!(storage.peek("payments").map(|s| s.version), Some(2));
}

/// A storage whose whole history can be swapped for another one behind the
/// coordinator's back (a restart from an old dump, a failover to a replica
/// that lagged): every call goes to the current `MemoryStorage`.
#[derive(Clone)]
struct Swappable(Arc<Mutex<MemoryStorage>>);

impl Swappable {
    fn now(&self) -> MemoryStorage {
        self.0.lock().unwrap().clone()
    }
}

impl Storage for Swappable {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Storage::read(&self.now(), name)
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Storage::trip_open(&self.now(), name, ttl, expected)
    }
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::begin_half_open_if_elapsed(&self.now(), name, wait, permitted, ttl)
    }
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Storage::lease_probe(&self.now(), name, ttl)
    }
    fn record_probe(
        &self,
        name: &str,
        outcome: interlock::Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::record_probe(&self.now(), name, outcome, ttl)
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Storage::close(&self.now(), name, ttl, expected)
    }
    fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restart_stalled_round(&self.now(), name, expected, permitted, ttl)
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Storage::restore(&self.now(), name, expected, state, ttl)
    }
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        Storage::poll_many(&self.now(), requests)
    }
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        Storage::poll_changes(&self.now(), since, requests)
    }
    fn settings(&self) -> StorageSettings {
        Storage::settings(&self.now())
    }
}

#[test]
fn r17_12_with_r15_11_a_storage_on_another_history_is_read_in_full_and_repaired() {
    let clock = ManualClock::new();
    let old = storage(&clock);
    let live = storage(&clock);
    // The old history is the live one as it was before the trip.
    for s in [&old, &live] {
        s.close("payments", TTL, None);
        s.close("search", TTL, None);
    }
    let swappable = Swappable(Arc::new(Mutex::new(live.clone())));
    let lane = Coordinator::manual(swappable.clone());
    let b = breaker(&lane, &clock, "payments");
    let _idle = breaker(&lane, &clock, "search");
    assert_eq!(poll(&live, &lane), reads(2));
    live.trip_open("payments", TTL, None);
    assert_eq!(poll(&live, &lane), reads(1));
    assert!(rejects(&b));

    // The storage restarts on the old history, whose counter happens to be
    // as far along as the epoch the coordinator holds.
    old.close("other", TTL, None);
    *swappable.0.lock().unwrap() = old.clone();
    assert_eq!(
        poll(&old, &lane),
        reads(2),
        "another history: a full read (the OPEN view's wait is far off: a read, R17.13)"
    );
    lane.run_writes();
    let repaired = old.peek("payments").unwrap();
    assert_eq!(
        (repaired.state, repaired.version),
        (State::Open, 3),
        "the OPEN the old history lost is written back above every version seen"
    );
    assert!(rejects(&b));
}

#[test]
fn r17_12_async_coordinators_poll_changes_too() {
    let clock = ManualClock::new();
    let storage = storage(&clock);
    let lane: Coordinator<Async> = Coordinator::manual_async(storage.clone());
    let breakers: Vec<_> = (0..10)
        .map(|i| {
            CircuitBreaker::builder(format!("host-{i}"))
                .config(config())
                .clock(clock.clone())
                .coordinator(&lane)
                .build()
                .unwrap()
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let before = storage.operations();
        lane.poll().await;
        assert_eq!(storage.operations() - before, reads(10));
        let before = storage.operations();
        lane.poll().await;
        assert_eq!(storage.operations() - before, reads(0));
        storage.trip_open("host-3", TTL, None);
        let before = storage.operations();
        lane.poll().await;
        assert_eq!(storage.operations() - before, reads(1));
        assert_eq!(
            breakers[3].shared_view().map(|v| v.state),
            Some(State::Open)
        );
    });
}

#[test]
fn r17_12_every_full_poll_interval_a_poll_reads_everything() {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder()
        .clock(clock.clone())
        .settings(
            StorageSettings::builder()
                .notifications(false)
                .poll_interval(Duration::from_secs(1))
                .full_poll_interval(Duration::from_secs(3))
                .build()
                .unwrap(),
        )
        .build();
    let lane = Coordinator::manual(storage.clone());
    let _breakers: Vec<_> = (0..10)
        .map(|i| breaker(&lane, &clock, &format!("host-{i}")))
        .collect();
    let reads: Vec<u64> = (0..8).map(|_| poll(&storage, &lane).reads).collect();
    assert_eq!(reads, [10, 0, 0, 10, 0, 0, 10, 0]);
}

/// The storage's clock, which a test can step back (a server whose wall
/// clock was corrected): the breakers keep their own `ManualClock`.
#[derive(Clone, Debug, Default)]
struct ServerClock(Arc<std::sync::atomic::AtomicU64>);

impl ServerClock {
    fn set_secs(&self, secs: u64) {
        self.0
            .store(secs * 1_000_000_000, std::sync::atomic::Ordering::SeqCst);
    }
}

impl interlock::Clock for ServerClock {
    fn now(&self) -> interlock::Timestamp {
        interlock::Timestamp::from_nanos(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

#[test]
fn r17_13_an_open_from_the_storages_future_asks_to_begin_at_once_and_the_fleet_recovers() {
    let server = ServerClock::default();
    server.set_secs(100);
    let storage = storage(&server);
    let clock = ManualClock::new();
    let lane = Coordinator::manual(storage.clone());
    let b = breaker(&lane, &clock, "payments");
    assert_eq!(poll(&storage, &lane), reads(1), "first: full");
    storage.trip_open("payments", TTL, None); // opened at 100 s
    assert_eq!(poll(&storage, &lane), reads(1), "the trip");
    assert!(rejects(&b));
    // Far from the end of the 10 s wait: no begin (R17.13).
    assert_eq!(poll(&storage, &lane).begins, 0);
    // The server's clock steps back 50 s: the OPEN is now in its future.
    // Within two polls (the first still planned on the old reading) the
    // breaker asks to begin at once, and the begin clamps the OPEN to the
    // server's now (R16.3a) instead of leaving it 50 s away.
    server.set_secs(50);
    let begins: u64 = (0..2).map(|_| poll(&storage, &lane).begins).sum();
    assert!(
        begins >= 1,
        "no begin for an OPEN from the storage's future"
    );
    // The clamped wait ends 10 s later on the server's clock: the fleet
    // leaves OPEN then, not when the server reaches 110 s.
    server.set_secs(61);
    clock.advance(Duration::from_secs(11));
    let recovered = (0..3).any(|_| {
        poll(&storage, &lane);
        b.shared_view().map(|v| v.state) == Some(State::HalfOpen)
    });
    assert!(
        recovered,
        "still {:?} at 61 s",
        b.shared_view().map(|v| v.state)
    );
    assert!(!rejects(&b), "the first probe is admitted");
}
