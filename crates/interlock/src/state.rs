//! The leaf types of a breaker's state: [`State`] and the [`Outcome`] of
//! a call. They import nothing from the crate, so every layer above (the
//! windows, the machine, errors, events, storage) can name them.

use std::fmt;
use std::str::FromStr;

/// The six states of a breaker (R1.1).
///
/// `Display` and [`as_str`](Self::as_str) give the stable lowercase
/// identifiers, which [`FromStr`] parses back.
///
/// ```
/// use interlock::State;
///
/// assert_eq!(State::HalfOpen.to_string(), "half_open");
/// assert_eq!("forced_open".parse::<State>(), Ok(State::ForcedOpen));
/// assert!(State::ForcedOpen.is_override());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Traffic flows and outcomes are counted.
    Closed,
    /// Calls are rejected until the open wait elapses.
    Open,
    /// A bounded round of probe calls decides whether to close or re-open.
    HalfOpen,
    /// Operator override: reject everything until [`reset`](crate::CircuitBreaker::reset).
    ForcedOpen,
    /// Operator override: admit everything, count nothing, never trip.
    Disabled,
    /// Operator override: admit everything, count outcomes, never trip.
    MetricsOnly,
}

impl State {
    /// All six states, in declaration order.
    pub const ALL: [State; 6] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
        State::MetricsOnly,
    ];

    /// The stable lowercase identifier (`"closed"`, `"half_open"`, ...).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half_open",
            State::ForcedOpen => "forced_open",
            State::Disabled => "disabled",
            State::MetricsOnly => "metrics_only",
        }
    }

    /// Whether this is one of the three operator overrides.
    #[must_use]
    pub const fn is_override(self) -> bool {
        matches!(
            self,
            State::ForcedOpen | State::Disabled | State::MetricsOnly
        )
    }

    /// Whether a breaker in this state admits every call.
    #[must_use]
    pub const fn admits_all(self) -> bool {
        matches!(self, State::Closed | State::Disabled | State::MetricsOnly)
    }

    /// A state a breaker may be built in (R3.1): everything but OPEN and
    /// HALF_OPEN, which need timing and probe history.
    #[must_use]
    pub const fn is_valid_initial(self) -> bool {
        !matches!(self, State::Open | State::HalfOpen)
    }

    /// Three bits, laid out so that bit 2 is set exactly in the states
    /// that do not admit every call: admission tests one bit.
    pub(crate) const fn to_bits(self) -> u64 {
        match self {
            State::Closed => 0,
            State::Disabled => 1,
            State::MetricsOnly => 2,
            State::Open => 4,
            State::HalfOpen => 5,
            State::ForcedOpen => 6,
        }
    }

    /// The state in the low three bits of `bits` (a table lookup: this
    /// runs on every admission). 3 and 7 are never stored.
    #[inline]
    pub(crate) const fn from_bits(bits: u64) -> State {
        const BY_BITS: [State; 8] = [
            State::Closed,
            State::Disabled,
            State::MetricsOnly,
            State::MetricsOnly,
            State::Open,
            State::HalfOpen,
            State::ForcedOpen,
            State::ForcedOpen,
        ];
        BY_BITS[(bits & 7) as usize]
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an unknown state identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseStateError(String);

impl fmt::Display for ParseStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown breaker state {:?}", self.0)
    }
}

impl std::error::Error for ParseStateError {}

impl FromStr for State {
    type Err = ParseStateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| ParseStateError(s.to_owned()))
    }
}

/// How one settled call is counted (R1.2).
///
/// ```
/// use interlock::Outcome;
///
/// let o = Outcome::from_flags(true, true);
/// assert_eq!(o, Outcome::SlowFailure);
/// assert!(o.is_failure() && o.is_slow());
/// assert_eq!(o.to_string(), "slow_failure");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Succeeded in time.
    Success,
    /// Failed in time.
    Failure,
    /// Succeeded, but took at least the slow-call threshold.
    SlowSuccess,
    /// Failed, and took at least the slow-call threshold.
    SlowFailure,
}

impl Outcome {
    /// The outcome for a (failed, slow) pair.
    #[must_use]
    pub const fn from_flags(failure: bool, slow: bool) -> Self {
        match (failure, slow) {
            (false, false) => Outcome::Success,
            (true, false) => Outcome::Failure,
            (false, true) => Outcome::SlowSuccess,
            (true, true) => Outcome::SlowFailure,
        }
    }

    /// `Failure` or `SlowFailure`.
    #[must_use]
    pub const fn is_failure(self) -> bool {
        matches!(self, Outcome::Failure | Outcome::SlowFailure)
    }

    /// `SlowSuccess` or `SlowFailure`.
    #[must_use]
    pub const fn is_slow(self) -> bool {
        matches!(self, Outcome::SlowSuccess | Outcome::SlowFailure)
    }

    /// The stable lowercase identifier (`"slow_success"`, ...).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::SlowSuccess => "slow_success",
            Outcome::SlowFailure => "slow_failure",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
