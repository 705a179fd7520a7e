//! [`PollRequest`]: what one poll asks about one breaker (R17.2), alone or
//! in a batch; [`Epoch`] and [`ChangePoll`]: a poll that reads only what
//! changed (issue 29, R16.15).

use std::time::Duration;

use crate::clock::Timestamp;

use super::{PollAnswers, SharedState, StorageError};

/// What a coordinator's poll asks of one breaker's shared state (R17.2):
/// a read, or — when the last view it saw was OPEN — to begin HALF_OPEN if
/// the wait has elapsed.
///
/// ```
/// use interlock::storage::PollRequest;
/// use std::time::Duration;
///
/// let r = PollRequest::BeginHalfOpen {
///     name: "db",
///     wait: Duration::from_secs(30),
///     permitted: 3,
///     ttl: Duration::from_secs(300),
/// };
/// assert_eq!(r.name(), "db");
/// assert_eq!(PollRequest::Read { name: "db" }.name(), "db");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PollRequest<'a> {
    /// [`Storage::read`](super::Storage::read); an absent key answers
    /// [`SharedState::closed`](super::SharedState::closed).
    Read {
        /// The breaker.
        name: &'a str,
    },
    /// [`Storage::begin_half_open_if_elapsed`](super::Storage::begin_half_open_if_elapsed).
    BeginHalfOpen {
        /// The breaker.
        name: &'a str,
        /// The OPEN wait.
        wait: Duration,
        /// Probes the new round admits.
        permitted: u32,
        /// Key lifetime on an applied write.
        ttl: Duration,
    },
    /// [`Storage::read`](super::Storage::read), but in
    /// [`Storage::poll_changes`](super::Storage::poll_changes) a storage
    /// with a change index may leave it unanswered when the record has not
    /// changed since the poll's epoch (R16.15). Anywhere else it is a
    /// [`Read`](Self::Read).
    ReadIfChanged {
        /// The breaker.
        name: &'a str,
    },
    /// [`Storage::read`](super::Storage::read) of a breaker whose cached
    /// view is at `version`, but in
    /// [`Storage::poll_changes`](super::Storage::poll_changes) a storage
    /// with a change index may leave it unanswered when it can vouch that
    /// the record is the one its write of `version` left: that write was
    /// applied since the poll's epoch, in the storage's current history,
    /// it is the record's last one, and the record has not expired since
    /// (R16.15). A view adopted from a change notice or from a write's own
    /// answer is confirmed this way without reading it again. Anywhere else
    /// it is a [`Read`](Self::Read).
    ReadUnlessAt {
        /// The breaker.
        name: &'a str,
        /// The version of the caller's view.
        version: u64,
    },
}

impl<'a> PollRequest<'a> {
    /// The breaker this request is about.
    #[must_use]
    pub fn name(&self) -> &'a str {
        match *self {
            PollRequest::Read { name }
            | PollRequest::ReadIfChanged { name }
            | PollRequest::ReadUnlessAt { name, .. }
            | PollRequest::BeginHalfOpen { name, .. } => name,
        }
    }
}

/// Where a storage's change history stood when a poll read it: the cursor
/// of [`Storage::poll_changes`](super::Storage::poll_changes) (R16.15).
///
/// A storage with a change index bumps `counter` atomically with every
/// applied write. `mark` is the storage's own check that a cursor belongs
/// to its current history (the Redis storage: the server time of the write
/// that made `counter`, so a restart from an old dump, whose later writes
/// reuse counters, is told apart); `at` is the storage's clock when the
/// epoch was read, so records whose TTL ran out after it count as changed.
/// Only the storage that returned an epoch interprets it.
///
/// ```
/// use interlock::storage::Epoch;
/// use interlock::Timestamp;
///
/// let e = Epoch { counter: 7, mark: 42, at: Timestamp::from_secs(3) };
/// assert!(e.counter > Epoch { counter: 6, ..e }.counter);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Epoch {
    /// Applied writes so far, in this storage's history.
    pub counter: u64,
    /// Identifies the history (see above).
    pub mark: u64,
    /// The storage's clock when the epoch was read.
    pub at: Timestamp,
}

/// The answer of [`Storage::poll_changes`](super::Storage::poll_changes):
/// one entry per request, in order, `None` where a
/// [`PollRequest::ReadIfChanged`] was left unanswered because its record
/// did not change (or a [`PollRequest::ReadUnlessAt`] because the storage
/// vouched for its version), and the epoch to poll from next.
///
/// ```
/// use interlock::storage::{ChangePoll, SharedState};
///
/// let full = ChangePoll::full(vec![Ok(SharedState::closed())], None);
/// assert!(full.epoch.is_none());
/// assert!(full.answers[0].is_some());
/// assert_eq!(full.unanswered(), 0);
/// ```
#[derive(Debug)]
pub struct ChangePoll {
    /// Where the next poll goes on from: the epoch the answers are current
    /// as of, read atomically with them or before them. `None`: this
    /// storage keeps no change index (every poll reads everything).
    pub epoch: Option<Epoch>,
    /// One per request, in order.
    pub answers: Vec<Option<Result<SharedState, StorageError>>>,
}

impl ChangePoll {
    /// Every request answered (a full read), with the epoch it is current
    /// as of, if any.
    #[must_use]
    pub fn full(answers: PollAnswers, epoch: Option<Epoch>) -> Self {
        ChangePoll {
            epoch,
            answers: answers.into_iter().map(Some).collect(),
        }
    }

    /// How many requests were left unanswered (unchanged records).
    #[must_use]
    pub fn unanswered(&self) -> usize {
        self.answers.iter().filter(|a| a.is_none()).count()
    }
}
