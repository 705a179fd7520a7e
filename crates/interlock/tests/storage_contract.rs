//! The public storage contract suite (R16) against `MemoryStorage`, blocking
//! and async, on a manual clock and on real time; the suite's own ability to
//! catch broken storages; and `FlakyStorage`.
#![cfg(feature = "testing")]
#![allow(clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use interlock::storage::contract::{
    RULES, RealTime, asynchronous, blocking, check_async_storage, check_storage,
};
use interlock::storage::testing::{FlakyStorage, InjectedFailure, is_injected};
use interlock::storage::{
    AsyncStorage, ChangePoll, Epoch, MemoryStorage, PollAnswers, PollRequest, ProbeLease,
    SharedState, Storage, StorageError, StorageOps,
};
use interlock::{ManualClock, Outcome, State};

fn manual() -> (MemoryStorage, ManualClock) {
    let clock = ManualClock::new();
    (MemoryStorage::builder().clock(clock.clone()).build(), clock)
}

#[test]
fn r16_memory_storage_passes_the_blocking_suite() {
    let (storage, clock) = manual();
    check_storage(&storage, &clock);
}

#[tokio::test]
async fn r16_memory_storage_passes_the_async_suite() {
    let (storage, clock) = manual();
    check_async_storage(&storage, &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r16_async_suite_futures_are_send() {
    let (storage, clock) = manual();
    tokio::spawn(async move { check_async_storage(&storage, &clock).await })
        .await
        .unwrap();
}

/// The path a Redis server takes: a clock nobody can move, so the suite
/// waits (polling with a deadline) instead. A 100 ms tick: the suite
/// tolerates four ticks of lag, and 40 ms ticks (160 ms) failed once at
/// load 10 on 2 cores.
#[test]
fn r16_memory_storage_on_real_time_passes_the_blocking_suite() {
    check_storage(
        &MemoryStorage::new(),
        &RealTime::new(Duration::from_millis(100)),
    );
}

#[test]
fn r16_each_rule_runs_alone_on_a_storage_shared_with_other_runs() {
    // One storage for every rule and both suites: names never collide.
    let (storage, clock) = manual();
    blocking::version_sequence(&storage, &clock);
    blocking::version_sequence(&storage, &clock);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(asynchronous::version_sequence(&storage, &clock));
    check_storage(&storage, &clock);
    let mut names = RULES.to_vec();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), RULES.len());
    assert_eq!(RULES.len(), 30);
}

// --- The suite catches broken storages -------------------------------------

/// Runs `f` and returns its panic message; fails if it does not panic.
fn violation(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("the suite accepted a broken storage");
    err.downcast_ref::<String>().cloned().unwrap_or_default()
}

/// Ways to break a `MemoryStorage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Breakage {
    IgnoreFencing,
    NeverExpire,
    GrantEveryLease,
    RefreshOnFencedWrite,
    /// `poll_many` reads where it should begin HALF_OPEN.
    BatchOnlyReads,
    /// `poll_many` answers in reverse order.
    BatchReversed,
    /// `restart_stalled_round` ignores the version fence.
    RestartUnfenced,
    /// `restore` bumps the stored version instead of lifting it above the
    /// given state's.
    RestoreWithoutLift,
    /// `poll_changes` takes any epoch for one of its own, as of now.
    ChangesTrustAnyEpoch,
    /// `poll_changes` sees writes since the epoch but not expiries.
    ChangesMissExpiry,
    /// `poll_changes` from an epoch vouches for every `ReadUnlessAt`,
    /// whatever its version.
    ChangesVouchForAnyVersion,
}

#[derive(Debug)]
struct Broken {
    inner: MemoryStorage,
    how: Breakage,
}

impl Storage for Broken {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(self.inner.read(name))
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(match self.how {
            Breakage::IgnoreFencing => self.inner.trip_open(name, self.ttl(ttl), None),
            Breakage::RefreshOnFencedWrite => {
                let applied = self.inner.trip_open(name, ttl, expected);
                if let Some(current) = self.inner.peek(name) {
                    // Rewrites the key with a fresh TTL whatever happened.
                    if current.state == State::Open {
                        self.inner.trip_open(name, ttl, None);
                    }
                }
                applied
            }
            _ => self.inner.trip_open(name, self.ttl(ttl), expected),
        })
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
            .begin_half_open_if_elapsed(name, wait, permitted, self.ttl(ttl)))
    }
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        let lease = self.inner.lease_probe(name, self.ttl(ttl));
        Ok(ProbeLease {
            granted: lease.granted || self.how == Breakage::GrantEveryLease,
            ..lease
        })
    }
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self.inner.record_probe(name, outcome, self.ttl(ttl)))
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let expected = if self.how == Breakage::IgnoreFencing {
            None
        } else {
            expected
        };
        Ok(self.inner.close(name, self.ttl(ttl), expected))
    }
    fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let expected = match (self.how, self.inner.peek(name)) {
            (Breakage::RestartUnfenced, Some(current)) => current.version,
            _ => expected,
        };
        Ok(self
            .inner
            .restart_stalled_round(name, expected, permitted, self.ttl(ttl)))
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let state = if self.how == Breakage::RestoreWithoutLift {
            SharedState {
                version: 0,
                ..state
            }
        } else {
            state
        };
        Ok(self.inner.restore(name, expected, state, self.ttl(ttl)))
    }
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        let mut answers: PollAnswers = match self.how {
            Breakage::BatchOnlyReads => requests
                .iter()
                .map(|r| {
                    Ok(self
                        .inner
                        .read(r.name())
                        .unwrap_or_else(SharedState::closed))
                })
                .collect(),
            _ => requests.iter().map(|r| self.poll_one(r)).collect(),
        };
        if self.how == Breakage::BatchReversed {
            answers.reverse();
        }
        Ok(answers)
    }
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        let since = match (self.how, since) {
            (Breakage::ChangesTrustAnyEpoch, Some(_)) => self.inner.poll_changes(None, &[]).epoch,
            (Breakage::ChangesMissExpiry, Some(e)) => Some(Epoch {
                at: self.inner.now(),
                ..e
            }),
            (_, since) => since,
        };
        let mut poll = self.inner.poll_changes(since, requests);
        if self.how == Breakage::ChangesVouchForAnyVersion && since.is_some() {
            for (answer, request) in poll.answers.iter_mut().zip(requests) {
                if matches!(request, PollRequest::ReadUnlessAt { .. }) {
                    *answer = None;
                }
            }
        }
        Ok(poll)
    }
}

impl Broken {
    fn new(how: Breakage) -> (Self, ManualClock) {
        let (inner, clock) = manual();
        (Broken { inner, how }, clock)
    }

    fn ttl(&self, ttl: Duration) -> Duration {
        if self.how == Breakage::NeverExpire {
            Duration::from_secs(1 << 40)
        } else {
            ttl
        }
    }
}

#[test]
fn r16_2_suite_catches_a_storage_without_fencing() {
    let (s, clock) = Broken::new(Breakage::IgnoreFencing);
    let msg = violation(|| blocking::fencing_miss_writes_nothing(&s, &clock));
    assert!(
        msg.contains("storage contract violated: R16.2 fencing_miss_writes_nothing"),
        "{msg}"
    );
    let msg = violation(|| check_storage(&s, &clock));
    assert!(msg.contains("R16.2"), "{msg}");
}

#[test]
fn r16_9_suite_catches_a_storage_without_expiry() {
    let (s, clock) = Broken::new(Breakage::NeverExpire);
    let msg = violation(|| blocking::expired_key_reads_absent(&s, &clock));
    assert!(msg.contains("R16.9 expired_key_reads_absent"), "{msg}");
}

#[test]
fn r16_4_suite_catches_a_storage_granting_leases_outside_half_open() {
    let (s, clock) = Broken::new(Breakage::GrantEveryLease);
    let msg = violation(|| blocking::lease_denied_outside_half_open(&s, &clock));
    assert!(
        msg.contains("R16.4 lease_denied_outside_half_open"),
        "{msg}"
    );
    let msg = violation(|| blocking::lease_budget_is_global(&s, &clock));
    assert!(msg.contains("R16.4 lease_budget_is_global"), "{msg}");
}

#[test]
fn r16_9_suite_catches_a_fenced_write_refreshing_the_ttl() {
    let (s, clock) = Broken::new(Breakage::RefreshOnFencedWrite);
    let msg = violation(|| blocking::fenced_write_does_not_refresh_ttl(&s, &clock));
    assert!(
        msg.contains("R16.9 fenced_write_does_not_refresh_ttl"),
        "{msg}"
    );
}

#[test]
fn r17_2_suite_catches_a_batch_that_skips_begins_or_scrambles_the_order() {
    for how in [Breakage::BatchOnlyReads, Breakage::BatchReversed] {
        let (s, clock) = Broken::new(how);
        let msg = violation(|| blocking::poll_many_answers_like_single_requests(&s, &clock));
        assert!(
            msg.contains("R17.2 poll_many_answers_like_single_requests"),
            "{how:?}: {msg}"
        );
    }
}

#[test]
fn r16_13_suite_catches_a_restart_without_its_fence() {
    let (s, clock) = Broken::new(Breakage::RestartUnfenced);
    let msg = violation(|| {
        blocking::restart_needs_a_stalled_round_at_the_expected_version(&s, &clock);
    });
    assert!(
        msg.contains("R16.13 restart_needs_a_stalled_round_at_the_expected_version"),
        "{msg}"
    );
}

#[test]
fn r16_14_suite_catches_a_restore_that_does_not_lift_the_version() {
    let (s, clock) = Broken::new(Breakage::RestoreWithoutLift);
    let msg = violation(|| blocking::restore_is_fenced_and_lifts_the_version(&s, &clock));
    assert!(
        msg.contains("R16.14 restore_is_fenced_and_lifts_the_version"),
        "{msg}"
    );
}

#[test]
fn r16_15_suite_catches_a_change_poll_that_trusts_any_epoch_or_misses_expiries() {
    let (s, clock) = Broken::new(Breakage::ChangesTrustAnyEpoch);
    let msg = violation(|| {
        blocking::poll_changes_without_a_known_epoch_reads_everything(&s, &clock);
    });
    assert!(
        msg.contains("R16.15 poll_changes_without_a_known_epoch_reads_everything"),
        "{msg}"
    );
    let (s, clock) = Broken::new(Breakage::ChangesMissExpiry);
    blocking::poll_changes_without_a_known_epoch_reads_everything(&s, &clock);
    let msg = violation(|| blocking::poll_changes_never_skips_a_change(&s, &clock));
    assert!(
        msg.contains("R16.15 poll_changes_never_skips_a_change") && msg.contains("unanswered"),
        "{msg}"
    );
}

#[test]
fn r16_15_suite_catches_a_change_poll_that_vouches_for_a_version_it_does_not_hold() {
    let (s, clock) = Broken::new(Breakage::ChangesVouchForAnyVersion);
    let msg = violation(|| {
        blocking::poll_changes_vouches_only_for_the_version_it_holds(&s, &clock);
    });
    assert!(
        msg.contains("R16.15 poll_changes_vouches_only_for_the_version_it_holds")
            && msg.contains("unanswered"),
        "{msg}"
    );
}

#[test]
fn r16_10_suite_reports_an_error_for_a_routine_call() {
    let clock = ManualClock::new();
    let flaky = FlakyStorage::new(MemoryStorage::builder().clock(clock.clone()).build());
    flaky.set_down(true);
    let msg = violation(|| blocking::absent_key_reads_none(&flaky, &clock));
    assert!(msg.contains("R16.1 absent_key_reads_none"), "{msg}");
    assert!(msg.contains("R16.10"), "{msg}");
    assert!(msg.contains("injected storage failure: read"), "{msg}");
}

// --- FlakyStorage ----------------------------------------------------------

#[test]
fn flaky_storage_is_transparent_while_healthy() {
    let (storage, clock) = manual();
    let flaky = FlakyStorage::new(storage);
    check_storage(&flaky, &clock);
    assert_eq!(flaky.failures(), 0);
    assert!(flaky.calls().total() > 0);
    assert_eq!(
        flaky.calls(),
        flaky.inner().operations(),
        "every call reached the inner storage"
    );
}

#[tokio::test]
async fn flaky_storage_is_transparent_while_healthy_async() {
    let (storage, clock) = manual();
    check_async_storage(&FlakyStorage::new(storage), &clock).await;
}

#[test]
fn flaky_storage_fails_on_command_without_reaching_the_inner_storage() {
    let ttl = Duration::from_secs(60);
    let flaky = FlakyStorage::new(MemoryStorage::new());
    let other_handle = flaky.clone();

    flaky.fail_next(2);
    let err = Storage::trip_open(&flaky, "db", ttl, None).unwrap_err();
    assert!(is_injected(&err));
    assert_eq!(
        InjectedFailure::from_error(&err).unwrap().operation(),
        "trip_open"
    );
    assert!(Storage::lease_probe(&flaky, "db", ttl).is_err());
    assert_eq!(
        flaky.inner().operations(),
        StorageOps::default(),
        "nothing reached the storage"
    );
    assert_eq!(Storage::read(&flaky, "db").unwrap(), None);

    other_handle.set_down(true);
    assert!(flaky.is_down());
    for _ in 0..3 {
        assert!(Storage::close(&flaky, "db", ttl, None).is_err());
    }
    other_handle.set_down(false);
    assert_eq!(Storage::close(&flaky, "db", ttl, None).unwrap().version, 1);
    assert_eq!(flaky.failures(), 5);
    assert_eq!(
        flaky.calls(),
        StorageOps {
            trips: 1,
            leases: 1,
            reads: 1,
            closes: 4,
            ..StorageOps::default()
        }
    );
    assert!(format!("{flaky:?}").contains("FlakyStorage"));
}

#[tokio::test]
async fn flaky_storage_fails_on_command_async() {
    let ttl = Duration::from_secs(60);
    let flaky = FlakyStorage::new(MemoryStorage::new());
    flaky.fail_next(1);
    let err = AsyncStorage::record_probe(&flaky, "db", Outcome::Failure, ttl)
        .await
        .unwrap_err();
    assert_eq!(
        InjectedFailure::from_error(&err).unwrap().operation(),
        "record_probe"
    );
    assert_eq!(InjectedFailure::from_error(&err).unwrap().name(), "db");
    let open = AsyncStorage::trip_open(&flaky, "db", ttl, None)
        .await
        .unwrap();
    assert_eq!((open.state, open.version), (State::Open, 1));
    flaky.set_down(true);
    assert!(
        AsyncStorage::begin_half_open_if_elapsed(&flaky, "db", Duration::ZERO, 1, ttl)
            .await
            .is_err()
    );
    assert_eq!(flaky.calls().total(), 3);
    assert_eq!(flaky.failures(), 2);
    assert_eq!(AsyncStorage::settings(&flaky), flaky.inner().settings());
}
