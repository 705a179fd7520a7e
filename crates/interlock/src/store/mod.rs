//! The storage layer behind [`crate::storage`]: the contract
//! ([`Storage`], [`AsyncStorage`], [`SharedState`]) and [`MemoryStorage`].
//! It names no breaker internals; the coordination lane that connects
//! breakers to a storage lives in `breaker::coordinator`, above both.

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod contract;
mod memory;
mod notice;
mod poll;
mod settings;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use memory::{MemoryStorage, MemoryStorageBuilder, StorageOps};

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::state::{Outcome, State};

pub use notice::{Notice, NoticeHandler, NoticeSink};
pub use poll::{ChangePoll, Epoch, PollRequest};
pub use settings::{StorageSettings, StorageSettingsBuilder};

/// Any error a storage returns. The breaker treats every error as a sign to
/// degrade to local state (R16.10), so a routine outcome (a fencing miss, a
/// denied lease) must never be an error.
pub type StorageError = Box<dyn Error + Send + Sync + 'static>;

/// One breaker's shared state (R1.5): what an absent key means is
/// [`SharedState::closed`].
///
/// ```
/// use interlock::storage::SharedState;
/// use interlock::State;
///
/// let s = SharedState::closed();
/// assert_eq!(s.state, State::Closed);
/// assert_eq!(s.version, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedState {
    /// CLOSED, OPEN or HALF_OPEN.
    pub state: State,
    /// When the shared OPEN began, on the storage's clock.
    pub opened_at: Timestamp,
    /// Bumped by every applied write; used to fence writes.
    pub version: u64,
    /// Probes the current HALF_OPEN round admits in total.
    pub probes_permitted: u32,
    /// Probes still to lease this round.
    pub probes_remaining: u32,
    /// Probes that reported an outcome this round.
    pub probes_completed: u32,
    /// Of those, failures.
    pub probe_failures: u32,
    /// Of those, slow calls.
    pub probe_slows: u32,
}

impl SharedState {
    /// The largest version a storage may hold (2^50, about 10^15: a
    /// thousand applied writes a second for 35,000 years). A storage never
    /// bumps a version past it, a coordinated breaker refuses a view above
    /// it as corrupt (it degrades instead of adopting it), and
    /// `interlock-redis` refuses a hash that holds one: a version near the
    /// end of its range would stop fencing (R16.7).
    pub const MAX_VERSION: u64 = 1 << 50;

    /// The state of a breaker nobody has written yet: CLOSED at version 0.
    #[must_use]
    pub const fn closed() -> Self {
        SharedState {
            state: State::Closed,
            opened_at: Timestamp::ZERO,
            version: 0,
            probes_permitted: 0,
            probes_remaining: 0,
            probes_completed: 0,
            probe_failures: 0,
            probe_slows: 0,
        }
    }

    /// Whether the round of this HALF_OPEN view is complete (R17.4).
    #[must_use]
    pub fn round_finished(&self) -> bool {
        self.state == State::HalfOpen
            && self.probes_permitted > 0
            && self.probes_completed >= self.probes_permitted
    }
}

impl SharedState {
    /// Whether this is a HALF_OPEN view whose round has no probe slot left
    /// to lease: every slot is held by a probe in flight, or its outcome is
    /// in (R16.4). Such a round moves on only through outcomes; if none
    /// comes (a lost outcome write, a lease the storage ran after its caller
    /// gave up on it) it is *stalled* and
    /// [`Storage::restart_stalled_round`] ends it (R16.13).
    ///
    /// ```
    /// use interlock::storage::SharedState;
    /// use interlock::State;
    ///
    /// let spent = SharedState { state: State::HalfOpen, probes_permitted: 2, ..SharedState::closed() };
    /// assert!(spent.no_slot_left());
    /// assert!(!SharedState { probes_remaining: 1, ..spent }.no_slot_left());
    /// assert!(!SharedState::closed().no_slot_left());
    /// ```
    #[must_use]
    pub fn no_slot_left(&self) -> bool {
        self.state == State::HalfOpen && self.probes_remaining == 0
    }

    /// The next version after `version`: one more, but never past
    /// [`MAX_VERSION`](Self::MAX_VERSION).
    ///
    /// ```
    /// use interlock::storage::SharedState;
    ///
    /// assert_eq!(SharedState::next_version(6), 7);
    /// assert_eq!(SharedState::next_version(u64::MAX), SharedState::MAX_VERSION);
    /// ```
    #[must_use]
    pub const fn next_version(version: u64) -> u64 {
        if version < Self::MAX_VERSION {
            version + 1
        } else {
            Self::MAX_VERSION
        }
    }
}

impl Default for SharedState {
    fn default() -> Self {
        SharedState::closed()
    }
}

impl fmt::Display for SharedState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} v{}", self.state, self.version)?;
        if self.state == State::HalfOpen {
            write!(
                f,
                " (probes {}/{} left, {} done, {} failed, {} slow)",
                self.probes_remaining,
                self.probes_permitted,
                self.probes_completed,
                self.probe_failures,
                self.probe_slows
            )?;
        }
        Ok(())
    }
}

/// The answers of a batched poll: one per request, in order. An error in one
/// answer degrades only that breaker; an error for the whole batch degrades
/// all of them.
pub type PollAnswers = Vec<Result<SharedState, StorageError>>;

/// The answer to [`Storage::lease_probe`] (R1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeLease {
    /// Whether a probe slot was granted.
    pub granted: bool,
    /// The state after the attempt.
    pub state: SharedState,
}

/// A blocking shared-state backend (R16).
///
/// Every method is atomic against concurrent callers, and none may return an
/// error for a routine outcome: a fenced-out write or a denied lease returns
/// the current state. The public contract suite
/// (`interlock::storage::contract`, feature `testing`) checks an
/// implementation against every rule.
pub trait Storage: Send + Sync + 'static {
    /// The current state, or `None` if the key is absent or expired (R16.1).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError>;

    /// Opens the shared breaker (R16.2). Applied only if `expected_version`
    /// is `None` or equals the stored version (absent = 0); if already OPEN
    /// nothing changes but the TTL; a fenced-out call writes nothing at all.
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError>;

    /// Moves an OPEN breaker whose `wait` has elapsed on the storage's clock
    /// to HALF_OPEN with `permitted` probes (R16.3); otherwise no change.
    ///
    /// An OPEN whose `opened_at` lies in the storage's future (a foreign
    /// writer, a server clock stepped back) would never elapse: this call
    /// clamps it to the storage's now (an applied write: version + 1, TTL
    /// refreshed), so such an OPEN lasts at most `wait` after the first
    /// poll that finds it (R16.3a).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError>;

    /// Leases one probe slot: granted only while HALF_OPEN with slots left
    /// (R16.4).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError>;

    /// Tallies a probe's outcome, only while HALF_OPEN (R16.5).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError>;

    /// Closes the shared breaker, fenced like [`trip_open`](Self::trip_open);
    /// an applied close always bumps the version (R16.6).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError>;

    /// Ends a stalled HALF_OPEN round (R16.13): if the record is still at
    /// `expected_version` (absent = 0), HALF_OPEN, and has no probe slot
    /// left ([`SharedState::no_slot_left`]), starts a fresh round of
    /// `permitted` probes (version + 1, tallies cleared, `opened_at` kept)
    /// and refreshes the TTL; otherwise writes nothing, not even the TTL,
    /// and returns the current state.
    ///
    /// The version is the proof of "no progress": every lease and every
    /// tallied outcome bumps it, so a coordinator that has seen the same
    /// version for its whole stall bound knows the round's slots are held
    /// by probes that will never report (a lost outcome write, a lease run
    /// after its caller timed out), and a round that moved in between is
    /// left alone. Outcomes of the ended round that arrive later are
    /// tallied in the new one (there is no round identity in the record).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError>;

    /// Writes `state` over the record if it is still at `expected_version`
    /// (absent = 0), fenced like [`close`](Self::close) (R16.14): the
    /// written record is `state` with its version lifted to
    /// `max(expected_version, state.version) + 1` and an `opened_at` no
    /// later than the storage's clock (CLOSED: zero), so a record never
    /// claims an OPEN that began in the future; the TTL is refreshed.
    /// Otherwise nothing is written and the current state is returned.
    ///
    /// This is how a coordinator repairs a storage whose history went
    /// backwards (a restart from an old dump, a lagging replica, an empty
    /// restart): it writes back the newest state it knows, at a version
    /// above every one it has seen, so no instance takes the repaired
    /// record for an old one. To open "now", pass an `opened_at` in the far
    /// future (`Timestamp::from_nanos(u64::MAX)`): it is clamped to now.
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError>;

    /// Answers one poll request: [`read`](Self::read) (absent = CLOSED) or
    /// [`begin_half_open_if_elapsed`](Self::begin_half_open_if_elapsed).
    ///
    /// # Errors
    ///
    /// Only when the backend cannot answer.
    fn poll_one(&self, request: &PollRequest<'_>) -> Result<SharedState, StorageError> {
        match *request {
            PollRequest::Read { name }
            | PollRequest::ReadIfChanged { name }
            | PollRequest::ReadUnlessAt { name, .. } => self
                .read(name)
                .map(|v| v.unwrap_or_else(SharedState::closed)),
            PollRequest::BeginHalfOpen {
                name,
                wait,
                permitted,
                ttl,
            } => self.begin_half_open_if_elapsed(name, wait, permitted, ttl),
        }
    }

    /// Answers a whole poll — every breaker a coordinator serves — with one
    /// answer per request, in order. The default asks
    /// [`poll_one`](Self::poll_one) for each; a networked storage should
    /// override it to answer in one round trip.
    ///
    /// # Errors
    ///
    /// When the batch as a whole could not be answered.
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        Ok(requests.iter().map(|r| self.poll_one(r)).collect())
    }

    /// Answers a poll that needs only what changed (R16.15): like
    /// [`poll_many`](Self::poll_many), one answer per request in order,
    /// except that a [`PollRequest::ReadIfChanged`] may be left unanswered
    /// (`None`) when `since` is an epoch this storage returned, in its
    /// current history, and the record has had no applied write and has
    /// not expired since; and a [`PollRequest::ReadUnlessAt`] may be left
    /// unanswered when the record's last applied write since `since` wrote
    /// exactly its version and the record has not expired since. Every
    /// other request is always answered (a begin whose wait elapsed is
    /// applied), and an unanswered request is a promise: a `ReadIfChanged`
    /// that its record is as it was at `since`, a `ReadUnlessAt` that its
    /// record is the one the write of its version left.
    ///
    /// Returns the epoch the answers are current as of, read atomically
    /// with them or before them (never after: a change in between must
    /// show up in the next poll), for the next call. With `since` absent,
    /// unknown, from another history or too old for the storage's index,
    /// every request is answered (a full read).
    ///
    /// The default keeps no index: it answers everything through
    /// [`poll_many`](Self::poll_many) and returns no epoch, so a
    /// coordinator reads every breaker at every poll, as before.
    ///
    /// # Errors
    ///
    /// When the poll as a whole could not be answered.
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        let _ = since;
        Ok(ChangePoll::full(self.poll_many(requests)?, None))
    }

    /// Starts pushing change [`Notice`]s to `sink` and returns `true`, or
    /// returns `false` if this storage cannot push (the default).
    ///
    /// A pushing storage publishes a notice with every applied write,
    /// atomically with it, and holds one subscription per call to this
    /// method. It delivers [`Notice::Resync`] whenever notices may have been
    /// lost (each time a networked subscription is established or
    /// re-established), retries a dropped subscription with its own
    /// backoff, and ends it once [`NoticeSink::deliver`] returns `false`.
    /// Notices are at-most-once: polling reconciles any that are lost.
    ///
    /// A storage that cannot publish or subscribe for good reason (the
    /// server's ACLs) delivers [`Notice::Unavailable`] once; it may keep
    /// the sink for that even when it returns `false` (it publishes for
    /// others but cannot push to this coordinator).
    ///
    /// `deliver` only queues work for the coordinator's lane, so a storage
    /// may call it from any thread, even from inside one of its own
    /// operations (after releasing its own locks).
    fn subscribe(&self, sink: NoticeSink) -> bool {
        let _ = sink;
        false
    }

    /// The storage's knobs (R16.12); the defaults when not overridden.
    fn settings(&self) -> StorageSettings {
        StorageSettings::default()
    }
}

/// The async mirror of [`Storage`], with the same contract.
pub trait AsyncStorage: Send + Sync + 'static {
    /// See [`Storage::read`].
    fn read(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<SharedState>, StorageError>> + Send;

    /// See [`Storage::trip_open`].
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::begin_half_open_if_elapsed`].
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::lease_probe`].
    fn lease_probe(
        &self,
        name: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<ProbeLease, StorageError>> + Send;

    /// See [`Storage::record_probe`].
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::close`].
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::restart_stalled_round`].
    fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::restore`].
    fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;

    /// See [`Storage::poll_one`].
    fn poll_one(
        &self,
        request: &PollRequest<'_>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        let request = *request;
        async move {
            match request {
                PollRequest::Read { name }
                | PollRequest::ReadIfChanged { name }
                | PollRequest::ReadUnlessAt { name, .. } => self
                    .read(name)
                    .await
                    .map(|v| v.unwrap_or_else(SharedState::closed)),
                PollRequest::BeginHalfOpen {
                    name,
                    wait,
                    permitted,
                    ttl,
                } => {
                    self.begin_half_open_if_elapsed(name, wait, permitted, ttl)
                        .await
                }
            }
        }
    }

    /// See [`Storage::poll_many`].
    fn poll_many(
        &self,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<PollAnswers, StorageError>> + Send {
        async move {
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                answers.push(self.poll_one(request).await);
            }
            Ok(answers)
        }
    }

    /// See [`Storage::poll_changes`].
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<ChangePoll, StorageError>> + Send {
        let _ = since;
        async move { Ok(ChangePoll::full(self.poll_many(requests).await?, None)) }
    }

    /// See [`Storage::subscribe`]. Called from inside the async runtime the
    /// coordinator runs on, so a pushing storage can spawn its listener
    /// there.
    fn subscribe(&self, sink: NoticeSink) -> bool {
        let _ = sink;
        false
    }

    /// See [`Storage::settings`].
    fn settings(&self) -> StorageSettings {
        StorageSettings::default()
    }
}
