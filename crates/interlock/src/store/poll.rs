//! [`PollRequest`]: what one poll asks about one breaker (R17.2), alone or
//! in a batch.

use std::time::Duration;

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
}

impl<'a> PollRequest<'a> {
    /// The breaker this request is about.
    #[must_use]
    pub fn name(&self) -> &'a str {
        match *self {
            PollRequest::Read { name } | PollRequest::BeginHalfOpen { name, .. } => name,
        }
    }
}
