//! [`MemoryStorage`]: the in-process storage, with its own clock and TTLs.

mod impls;
mod keys;
mod liveness;
mod ops;

use keys::Keys;
pub use ops::StorageOps;
pub(crate) use ops::{Op, OpCounters};

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::clock::{Clock, ClockHandle, Timestamp};
use crate::state::{Outcome, State};

use super::{
    ChangePoll, Epoch, Notice, NoticeSink, PollRequest, ProbeLease, SharedState, StorageSettings,
};

struct Inner {
    clock: ClockHandle,
    settings: StorageSettings,
    keys: Mutex<Keys>,
    ops: OpCounters,
    /// Coordinators subscribed to change notices.
    sinks: Mutex<Vec<NoticeSink>>,
}

/// An in-process [`Storage`](crate::storage::Storage) and [`AsyncStorage`](crate::storage::AsyncStorage): the embedded default for
/// tests, demos and several breakers of one process sharing one state.
///
/// Clones share the same keys (it is an `Arc` inside), so give one clone to
/// each simulated instance. Every operation is atomic (one mutex), elapsed
/// checks and TTLs run on the storage's own clock ([`MonotonicClock`](crate::MonotonicClock) by
/// default, or any [`Clock`] given to the builder), and every rule of R16
/// holds: the public contract suite (`storage::contract`, feature
/// `testing`) passes against it.
///
/// Besides the trait methods, `MemoryStorage` has inherent methods of the
/// same names that cannot fail (so `storage.read(name)` is an
/// `Option<SharedState>`), [`peek`](Self::peek) to look without counting,
/// and [`operations`](Self::operations) to count calls.
///
/// TTL: every applied write and every idempotent trip refresh the key's
/// expiry to `ttl` from now; a key whose expiry has come reads as absent.
/// A fenced-out write, a no-op `begin_half_open_if_elapsed`, a denied lease,
/// a dropped record and a fenced-out restart or restore leave the expiry
/// alone. (A probe slot leaked by an interrupted probe no longer waits for
/// the expiry: a coordinator restarts the stalled round, R16.13.)
///
/// ```
/// use interlock::storage::MemoryStorage;
/// use interlock::{ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let storage = MemoryStorage::builder().clock(clock.clone()).build();
/// let ttl = Duration::from_secs(300);
///
/// assert_eq!(storage.read("payments"), None); // R16.1
/// let open = storage.trip_open("payments", ttl, None);
/// assert_eq!((open.state, open.version), (State::Open, 1));
///
/// clock.advance(Duration::from_secs(30));
/// let half = storage.begin_half_open_if_elapsed("payments", Duration::from_secs(30), 2, ttl);
/// assert_eq!((half.state, half.probes_remaining), (State::HalfOpen, 2));
/// assert!(storage.lease_probe("payments", ttl).granted);
///
/// clock.advance(ttl); // nobody wrote for a whole TTL: the key expired
/// assert_eq!(storage.read("payments"), None);
/// ```
#[derive(Clone)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

impl fmt::Debug for MemoryStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStorage")
            .field("clock", &self.inner.clock)
            .field("settings", &self.inner.settings)
            .field("operations", &self.inner.ops.snapshot())
            .finish_non_exhaustive()
    }
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage::new()
    }
}

impl MemoryStorage {
    /// An empty storage on [`MonotonicClock`](crate::MonotonicClock) with
    /// the default [`StorageSettings`].
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    ///
    /// let storage = MemoryStorage::new();
    /// assert_eq!(storage.read("anything"), None);
    /// ```
    #[must_use]
    pub fn new() -> Self {
        MemoryStorage::builder().build()
    }

    /// A builder, to choose the clock and the settings.
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, StorageSettings};
    /// use interlock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let settings = StorageSettings::builder().poll_interval(Duration::from_millis(100)).build()?;
    /// let storage = MemoryStorage::builder().clock(ManualClock::new()).settings(settings).build();
    /// assert_eq!(storage.settings().poll_interval(), Duration::from_millis(100));
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn builder() -> MemoryStorageBuilder {
        MemoryStorageBuilder {
            clock: ClockHandle::Monotonic,
            settings: StorageSettings::default(),
        }
    }

    /// The time on the storage's clock: the clock of `opened_at` and of
    /// every elapsed and expiry check.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::{ManualClock, Timestamp};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::starting_at(Timestamp::from_secs(5));
    /// let storage = MemoryStorage::builder().clock(clock).build();
    /// assert_eq!(storage.now(), Timestamp::from_secs(5));
    /// let open = storage.trip_open("db", Duration::from_secs(60), None);
    /// assert_eq!(open.opened_at, storage.now());
    /// ```
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// The settings breakers coordinated through this storage use (R16.12).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use std::time::Duration;
    ///
    /// assert_eq!(MemoryStorage::new().settings().state_ttl(), Duration::from_secs(300));
    /// ```
    #[must_use]
    pub fn settings(&self) -> StorageSettings {
        self.inner.settings.clone()
    }

    /// The calls received so far, per operation, through either trait or
    /// the inherent methods ([`peek`](Self::peek) is not counted).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let lease = storage.lease_probe("db", Duration::from_secs(60));
    /// assert!(!lease.granted); // nothing is HALF_OPEN
    /// assert_eq!(storage.operations().leases, 1);
    /// ```
    #[must_use]
    pub fn operations(&self) -> StorageOps {
        self.inner.ops.snapshot()
    }

    /// Like [`read`](Self::read), but not counted in
    /// [`operations`](Self::operations): for tests that inspect the shared
    /// state while proving a breaker made no storage call.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    ///
    /// let storage = MemoryStorage::new();
    /// assert_eq!(storage.peek("db"), None);
    /// assert_eq!(storage.operations().total(), 0);
    /// ```
    #[must_use]
    pub fn peek(&self, name: &str) -> Option<SharedState> {
        let now = self.inner.clock.now();
        self.keys().live(name, now).map(|e| e.state)
    }

    /// The current state of `name`, or `None` if absent or expired (R16.1).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::State;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// assert_eq!(storage.read("db"), None);
    /// storage.close("db", Duration::from_secs(60), None);
    /// assert_eq!(storage.read("db").map(|s| (s.state, s.version)), Some((State::Closed, 1)));
    /// ```
    #[must_use]
    pub fn read(&self, name: &str) -> Option<SharedState> {
        self.inner.ops.count(Op::Read);
        let now = self.inner.clock.now();
        self.keys().live(name, now).map(|e| e.state)
    }

    /// Opens the shared breaker (R16.2): applied only if `expected_version`
    /// is `None` or matches (absent = 0); while already OPEN only the TTL is
    /// refreshed; a fenced-out call writes nothing. Returns the state after.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::State;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// assert_eq!(storage.trip_open("db", ttl, Some(0)).version, 1);
    /// assert_eq!(storage.trip_open("db", ttl, None).version, 1); // idempotent
    /// let fenced = storage.close("db", ttl, Some(0)); // stale: no-op
    /// assert_eq!((fenced.state, fenced.version), (State::Open, 1));
    /// ```
    pub fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> SharedState {
        self.inner.ops.count(Op::Trip);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if expected_version.is_some_and(|v| v != current.version) {
            return current;
        }
        if current.state == State::Open {
            keys.write(name, current, now, ttl);
            return current;
        }
        let open = SharedState {
            state: State::Open,
            opened_at: now,
            version: SharedState::next_version(current.version),
            ..SharedState::closed()
        };
        keys.write(name, open, now, ttl);
        drop(keys);
        self.notify(name, open.version);
        open
    }

    /// Moves an OPEN breaker to HALF_OPEN with `permitted` probes once
    /// `wait` has elapsed since `opened_at` on the storage's clock
    /// (inclusive); otherwise nothing changes, not even the TTL (R16.3).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::{ManualClock, State};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let storage = MemoryStorage::builder().clock(clock.clone()).build();
    /// let (ttl, wait) = (Duration::from_secs(60), Duration::from_secs(10));
    /// storage.trip_open("db", ttl, None);
    /// clock.advance(Duration::from_secs(9));
    /// assert_eq!(storage.begin_half_open_if_elapsed("db", wait, 3, ttl).state, State::Open);
    /// clock.advance(Duration::from_secs(1));
    /// assert_eq!(storage.begin_half_open_if_elapsed("db", wait, 3, ttl).state, State::HalfOpen);
    /// ```
    pub fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> SharedState {
        self.inner.ops.count(Op::Begin);
        let now = self.inner.clock.now();
        let (state, applied) = Self::begin(&mut self.keys(), now, name, wait, permitted, ttl);
        if applied {
            self.notify(name, state.version);
        }
        state
    }

    /// R16.3 under the lock: the state after, and whether it was written.
    fn begin(
        keys: &mut Keys,
        now: Timestamp,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> (SharedState, bool) {
        let mut current = keys.current(name, now);
        // R16.3a: an OPEN that began in the future would never elapse.
        let future = current.state == State::Open && current.opened_at > now;
        if future {
            current.opened_at = now;
        }
        if current.state != State::Open || now.saturating_duration_since(current.opened_at) < wait {
            if future {
                current.version = SharedState::next_version(current.version);
                keys.write(name, current, now, ttl);
            }
            return (current, future);
        }
        let half_open = SharedState {
            state: State::HalfOpen,
            opened_at: current.opened_at,
            version: SharedState::next_version(current.version),
            probes_permitted: permitted,
            probes_remaining: permitted,
            ..SharedState::closed()
        };
        keys.write(name, half_open, now, ttl);
        (half_open, true)
    }

    /// Leases one probe slot: granted only while HALF_OPEN with slots left,
    /// and then the version bumps; a denied lease changes nothing (R16.4).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// storage.trip_open("db", ttl, None);
    /// storage.begin_half_open_if_elapsed("db", Duration::ZERO, 1, ttl);
    /// assert!(storage.lease_probe("db", ttl).granted);
    /// assert!(!storage.lease_probe("db", ttl).granted); // budget spent
    /// ```
    pub fn lease_probe(&self, name: &str, ttl: Duration) -> ProbeLease {
        self.inner.ops.count(Op::Lease);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if current.state != State::HalfOpen || current.probes_remaining == 0 {
            return ProbeLease {
                granted: false,
                state: current,
            };
        }
        let leased = SharedState {
            version: SharedState::next_version(current.version),
            probes_remaining: current.probes_remaining - 1,
            ..current
        };
        keys.write(name, leased, now, ttl);
        drop(keys);
        self.notify(name, leased.version);
        ProbeLease {
            granted: true,
            state: leased,
        }
    }

    /// Tallies a probe's outcome, only while HALF_OPEN; otherwise nothing
    /// changes and no key is created (R16.5).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::Outcome;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// storage.record_probe("db", Outcome::Failure, ttl); // not HALF_OPEN: dropped
    /// assert_eq!(storage.read("db"), None);
    /// storage.trip_open("db", ttl, None);
    /// storage.begin_half_open_if_elapsed("db", Duration::ZERO, 1, ttl);
    /// let s = storage.record_probe("db", Outcome::SlowFailure, ttl);
    /// assert_eq!((s.probes_completed, s.probe_failures, s.probe_slows), (1, 1, 1));
    /// assert!(s.round_finished());
    /// ```
    pub fn record_probe(&self, name: &str, outcome: Outcome, ttl: Duration) -> SharedState {
        self.inner.ops.count(Op::Record);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if current.state != State::HalfOpen {
            return current;
        }
        let tallied = SharedState {
            version: SharedState::next_version(current.version),
            probes_completed: current.probes_completed.saturating_add(1),
            probe_failures: current
                .probe_failures
                .saturating_add(u32::from(outcome.is_failure())),
            probe_slows: current
                .probe_slows
                .saturating_add(u32::from(outcome.is_slow())),
            ..current
        };
        keys.write(name, tallied, now, ttl);
        drop(keys);
        self.notify(name, tallied.version);
        tallied
    }

    /// Closes the shared breaker, fenced like
    /// [`trip_open`](Self::trip_open); an applied close always bumps the
    /// version, even when already CLOSED or absent (R16.6).
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// assert_eq!(storage.close("db", ttl, None).version, 1); // created
    /// assert_eq!(storage.close("db", ttl, Some(1)).version, 2);
    /// assert_eq!(storage.close("db", ttl, Some(1)).version, 2); // fenced out
    /// ```
    pub fn close(&self, name: &str, ttl: Duration, expected_version: Option<u64>) -> SharedState {
        self.inner.ops.count(Op::Close);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if expected_version.is_some_and(|v| v != current.version) {
            return current;
        }
        let closed = SharedState {
            version: SharedState::next_version(current.version),
            ..SharedState::closed()
        };
        keys.write(name, closed, now, ttl);
        drop(keys);
        self.notify(name, closed.version);
        closed
    }

    /// Answers a whole poll under one lock: a read (absent = CLOSED) or a
    /// begin per request, in order. Counted as one batch plus its reads and
    /// begins.
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, PollRequest};
    /// use interlock::State;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// storage.trip_open("db", ttl, None);
    /// let views = storage.poll_many(&[
    ///     PollRequest::Read { name: "db" },
    ///     PollRequest::Read { name: "cache" },
    /// ]);
    /// assert_eq!(views[0].state, State::Open);
    /// assert_eq!(views[1], interlock::storage::SharedState::closed());
    /// assert_eq!(storage.operations().batches, 1);
    /// ```
    pub fn poll_many(&self, requests: &[PollRequest<'_>]) -> Vec<SharedState> {
        self.answer(None, requests)
            .1
            .into_iter()
            .map(|a| a.unwrap_or_else(SharedState::closed))
            .collect()
    }

    /// Answers a poll that needs only what changed (R16.15), under one
    /// lock: every request as [`poll_many`](Self::poll_many) would, except
    /// that a [`PollRequest::ReadIfChanged`] whose record had no change
    /// since `since` (no write, no expiry), and a
    /// [`PollRequest::ReadUnlessAt`] whose record was last written since
    /// `since` at exactly its version (and is live), are left unanswered, when
    /// `since` is an epoch of this storage, not from before its last sweep
    /// of expired keys. Counted as one batch plus the reads and begins
    /// answered.
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, PollRequest};
    /// use interlock::State;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// let reqs = [PollRequest::ReadIfChanged { name: "db" }, PollRequest::ReadIfChanged { name: "cache" }];
    /// let first = storage.poll_changes(None, &reqs); // no epoch yet: a full read
    /// assert!(first.answers.iter().all(Option::is_some));
    /// storage.trip_open("db", ttl, None);
    /// let next = storage.poll_changes(first.epoch, &reqs);
    /// assert_eq!(next.answers[0].as_ref().unwrap().as_ref().unwrap().state, State::Open);
    /// assert!(next.answers[1].is_none()); // unchanged: not read
    /// assert!(next.epoch.unwrap().counter > first.epoch.unwrap().counter);
    /// ```
    pub fn poll_changes(&self, since: Option<Epoch>, requests: &[PollRequest<'_>]) -> ChangePoll {
        let (epoch, answers) = self.answer(since, requests);
        ChangePoll {
            epoch: Some(epoch),
            answers: answers.into_iter().map(|a| a.map(Ok)).collect(),
        }
    }

    /// One batch under the lock: the epoch before it, and an answer per
    /// request (`None`: unchanged since `since`).
    fn answer(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> (Epoch, Vec<Option<SharedState>>) {
        self.inner.ops.count(Op::Batch);
        let now = self.inner.clock.now();
        let mut applied = Vec::new();
        let mut keys = self.keys();
        let epoch = keys.epoch(now);
        let since = since.filter(|e| keys.knows(e, now));
        let views = requests
            .iter()
            .map(|request| match *request {
                PollRequest::ReadIfChanged { name }
                    if since.is_some_and(|e| {
                        !keys
                            .entries
                            .get(name)
                            .is_some_and(|entry| entry.changed_since(&e, now))
                    }) =>
                {
                    None
                }
                PollRequest::ReadUnlessAt { name, version }
                    if since.is_some_and(|e| {
                        keys.entries.get(name).is_some_and(|entry| {
                            entry.written_since(&e, now) && entry.state.version == version
                        })
                    }) =>
                {
                    None
                }
                PollRequest::Read { name }
                | PollRequest::ReadIfChanged { name }
                | PollRequest::ReadUnlessAt { name, .. } => {
                    self.inner.ops.count(Op::Read);
                    Some(keys.current(name, now))
                }
                PollRequest::BeginHalfOpen {
                    name,
                    wait,
                    permitted,
                    ttl,
                } => {
                    self.inner.ops.count(Op::Begin);
                    let (state, written) = Self::begin(&mut keys, now, name, wait, permitted, ttl);
                    if written {
                        applied.push((name, state.version));
                    }
                    Some(state)
                }
            })
            .collect();
        drop(keys);
        for (name, version) in applied {
            self.notify(name, version);
        }
        (epoch, views)
    }

    /// Pushes change notices to `sink` from now on (in-process, so none is
    /// ever lost): every applied write delivers
    /// [`Notice::Changed`] to every live subscriber, from the writer's
    /// thread, after the storage's lock is released. Always `true`.
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, Notice, NoticeHandler, NoticeSink};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let handler: Arc<NoticeHandler> = Arc::new(move |n: Notice<'_>| {
    ///     if let Notice::Changed { name, version } = n {
    ///         log.lock().unwrap().push((name.to_owned(), version));
    ///     }
    /// });
    /// assert!(storage.subscribe(NoticeSink::new(&handler)));
    /// storage.trip_open("db", Duration::from_secs(60), None);
    /// storage.trip_open("db", Duration::from_secs(60), None); // already OPEN: no change, no notice
    /// assert_eq!(*seen.lock().unwrap(), [("db".to_owned(), 1)]);
    /// ```
    pub fn subscribe(&self, sink: NoticeSink) -> bool {
        let mut sinks = self.sinks();
        sinks.retain(NoticeSink::is_alive);
        sinks.push(sink);
        true
    }

    /// Delivers a change notice to every live subscriber.
    fn notify(&self, name: &str, version: u64) {
        let sinks = {
            let mut sinks = self.sinks();
            if sinks.is_empty() {
                return;
            }
            sinks.retain(NoticeSink::is_alive);
            sinks.clone()
        };
        for sink in sinks {
            sink.deliver(Notice::Changed { name, version });
        }
    }

    fn sinks(&self) -> std::sync::MutexGuard<'_, Vec<NoticeSink>> {
        self.inner
            .sinks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        // Nothing panics while the lock is held, and a poisoned map is
        // still consistent: every write replaces a whole entry.
        self.inner
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Builds a [`MemoryStorage`].
///
/// ```
/// use interlock::storage::MemoryStorage;
/// use interlock::ManualClock;
///
/// let clock = ManualClock::new();
/// let storage = MemoryStorage::builder().clock(clock.clone()).build();
/// assert_eq!(storage.now(), interlock::Timestamp::ZERO);
/// ```
#[must_use]
pub struct MemoryStorageBuilder {
    clock: ClockHandle,
    settings: StorageSettings,
}

impl fmt::Debug for MemoryStorageBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStorageBuilder")
            .field("clock", &self.clock)
            .field("settings", &self.settings)
            .finish()
    }
}

impl MemoryStorageBuilder {
    /// The storage's clock, for `opened_at`, elapsed checks and TTLs
    /// (default [`MonotonicClock`](crate::MonotonicClock)). Give a test the
    /// same [`ManualClock`](crate::ManualClock) as its breakers.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::{ManualClock, Timestamp};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let storage = MemoryStorage::builder().clock(clock.clone()).build();
    /// clock.advance(Duration::from_secs(2));
    /// assert_eq!(storage.now(), Timestamp::from_secs(2));
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = ClockHandle::from_clock(clock);
        self
    }

    /// The settings reported to coordinated breakers (default
    /// [`StorageSettings::default`]).
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, StorageSettings};
    /// use std::time::Duration;
    ///
    /// let settings = StorageSettings::builder().state_ttl(Duration::from_secs(30)).build()?;
    /// let storage = MemoryStorage::builder().settings(settings).build();
    /// assert_eq!(storage.settings().state_ttl(), Duration::from_secs(30));
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn settings(mut self, settings: StorageSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The storage, empty.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    ///
    /// let storage = MemoryStorage::builder().build();
    /// assert_eq!(storage.read("db"), None);
    /// ```
    pub fn build(self) -> MemoryStorage {
        MemoryStorage {
            inner: Arc::new(Inner {
                clock: self.clock,
                settings: self.settings,
                keys: Mutex::new(Keys::new()),
                ops: OpCounters::default(),
                sinks: Mutex::new(Vec::new()),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keys::MIN_SWEEP;
    use super::*;
    use crate::clock::ManualClock;
    use crate::store::{AsyncStorage, Storage};

    const TTL: Duration = Duration::from_secs(100);

    fn storage() -> (MemoryStorage, ManualClock) {
        let clock = ManualClock::new();
        (MemoryStorage::builder().clock(clock.clone()).build(), clock)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn r16_1_unknown_names_read_none_and_never_panic() {
        let (s, _) = storage();
        for name in [
            "",
            "db",
            "interlock:cb:x",
            "名前",
            "a\0b",
            &"x".repeat(10_000),
        ] {
            assert_eq!(s.read(name), None);
            assert_eq!(s.peek(name), None);
            assert!(!s.lease_probe(name, TTL).granted);
            assert_eq!(
                s.record_probe(name, Outcome::Failure, TTL),
                SharedState::closed()
            );
            assert_eq!(
                s.begin_half_open_if_elapsed(name, Duration::ZERO, 1, TTL),
                SharedState::closed()
            );
            assert_eq!(s.read(name), None, "no operation above may create {name:?}");
        }
    }

    #[test]
    fn r16_2_trip_sets_opened_at_on_the_storage_clock_and_is_idempotent() {
        let clock = ManualClock::starting_at(Timestamp::from_secs(1000));
        let s = MemoryStorage::builder().clock(clock.clone()).build();
        let open = s.trip_open("db", TTL, None);
        assert_eq!(open.opened_at, Timestamp::from_secs(1000));
        clock.advance(secs(5));
        assert_eq!(s.trip_open("db", TTL, None), open);
        assert_eq!(s.trip_open("db", TTL, Some(1)), open);
        assert_eq!(s.trip_open("db", TTL, Some(9)), open);
    }

    #[test]
    fn r16_2_idempotent_trip_refreshes_the_ttl_but_a_fenced_one_does_not() {
        let (s, clock) = storage();
        s.trip_open("a", secs(10), None);
        s.trip_open("b", secs(10), None);
        clock.advance(secs(6));
        s.trip_open("a", secs(10), None); // idempotent: refresh to t=16
        s.trip_open("b", secs(10), Some(7)); // fenced out: expiry stays t=10
        clock.advance(secs(4)); // t=10
        assert!(s.read("a").is_some());
        assert_eq!(s.read("b"), None);
        clock.advance(secs(6)); // t=16
        assert_eq!(s.read("a"), None);
    }

    #[test]
    fn r16_3_begin_is_inclusive_and_does_not_reseed() {
        let (s, clock) = storage();
        s.trip_open("db", TTL, None);
        clock.advance(Duration::from_nanos(9_999_999_999));
        assert_eq!(
            s.begin_half_open_if_elapsed("db", secs(10), 2, TTL).version,
            1
        );
        clock.advance(Duration::from_nanos(1));
        let half = s.begin_half_open_if_elapsed("db", secs(10), 2, TTL);
        assert_eq!(
            (half.state, half.version, half.probes_permitted),
            (State::HalfOpen, 2, 2)
        );
        assert_eq!(half.opened_at, Timestamp::ZERO, "opened_at is kept");
        assert!(s.lease_probe("db", TTL).granted);
        let again = s.begin_half_open_if_elapsed("db", Duration::ZERO, 5, TTL);
        assert_eq!(
            (
                again.version,
                again.probes_permitted,
                again.probes_remaining
            ),
            (3, 2, 1)
        );
    }

    #[test]
    fn r16_7_version_sequence() {
        let (s, _) = storage();
        let versions = [
            s.trip_open("db", TTL, None).version,
            s.begin_half_open_if_elapsed("db", Duration::ZERO, 2, TTL)
                .version,
            s.lease_probe("db", TTL).state.version,
            s.lease_probe("db", TTL).state.version,
            s.record_probe("db", Outcome::Success, TTL).version,
            s.record_probe("db", Outcome::Success, TTL).version,
            s.close("db", TTL, Some(6)).version,
        ];
        assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn r16_9_expiry_is_at_ttl_after_the_last_applied_write() {
        let (s, clock) = storage();
        s.close("db", secs(10), None);
        clock.advance(Duration::from_nanos(9_999_999_999));
        assert!(s.peek("db").is_some());
        clock.advance(Duration::from_nanos(1));
        assert_eq!(s.peek("db"), None);
        // The version sequence restarts after expiry (Q2).
        assert_eq!(s.trip_open("db", secs(10), None).version, 1);
    }

    #[test]
    fn r16_9_a_zero_ttl_write_applies_and_expires_at_once() {
        let (s, _) = storage();
        let open = s.trip_open("db", Duration::ZERO, None);
        assert_eq!((open.state, open.version), (State::Open, 1));
        assert_eq!(s.read("db"), None);
    }

    #[test]
    fn no_op_begin_and_denied_lease_leave_the_expiry_alone() {
        let (s, clock) = storage();
        s.trip_open("db", secs(10), None);
        s.begin_half_open_if_elapsed("db", Duration::ZERO, 1, secs(10));
        s.lease_probe("db", secs(10)); // granted: expiry t=10
        clock.advance(secs(6));
        assert!(!s.lease_probe("db", secs(10)).granted);
        s.begin_half_open_if_elapsed("db", Duration::ZERO, 1, secs(10));
        clock.advance(secs(4));
        assert_eq!(s.read("db"), None, "a leaked slot is bounded by the TTL");
    }

    #[test]
    fn expired_keys_are_swept_as_the_map_grows() {
        let (s, clock) = storage();
        for i in 0..MIN_SWEEP {
            s.close(&format!("old-{i}"), secs(1), None);
        }
        clock.advance(secs(1));
        s.close("new", secs(1), None);
        assert_eq!(s.keys().entries.len(), 1);
    }

    #[test]
    fn operations_count_every_call_through_every_api_but_not_peek() {
        let (s, _) = storage();
        let _ = Storage::read(&s, "db");
        let _ = Storage::trip_open(&s, "db", TTL, None);
        let _ = Storage::begin_half_open_if_elapsed(&s, "db", Duration::ZERO, 1, TTL);
        let _ = Storage::lease_probe(&s, "db", TTL);
        let _ = Storage::record_probe(&s, "db", Outcome::Success, TTL);
        let _ = Storage::close(&s, "db", TTL, None);
        let _ = s.peek("db");
        let one_each = StorageOps {
            reads: 1,
            trips: 1,
            begins: 1,
            leases: 1,
            records: 1,
            closes: 1,
            restarts: 0,
            restores: 0,
            batches: 0,
        };
        assert_eq!(s.operations(), one_each);
        let clone = s.clone();
        let _ = clone.read("db");
        assert_eq!(
            (s.operations() - one_each).reads,
            1,
            "clones share the counters"
        );
    }

    #[test]
    fn clones_share_keys_and_settings_are_reported_through_both_traits() {
        let settings = StorageSettings::builder()
            .poll_interval(Duration::from_millis(250))
            .build()
            .unwrap_or_default();
        let s = MemoryStorage::builder().settings(settings.clone()).build();
        assert_eq!(Storage::settings(&s), settings);
        assert_eq!(AsyncStorage::settings(&s), settings);
        s.clone().trip_open("db", TTL, None);
        assert_eq!(s.read("db").map(|v| v.state), Some(State::Open));
        assert!(format!("{s:?}").contains("MemoryStorage"));
    }

    #[test]
    fn async_methods_run_the_same_logic() {
        let (s, _) = storage();
        let fut = async {
            let open = AsyncStorage::trip_open(&s, "db", TTL, None).await;
            let read = AsyncStorage::read(&s, "db").await;
            (open.ok(), read.ok().flatten())
        };
        let (open, read) = block_on(fut);
        assert_eq!(open.map(|o| o.version), Some(1));
        assert_eq!(read, open);
    }

    fn block_on<F: std::future::Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
