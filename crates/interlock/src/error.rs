//! Error types: rejections, call errors and configuration errors.

use std::borrow::Cow;
use std::error::Error;
use std::fmt;
use std::time::Duration;

mod pipeline;

pub use pipeline::{BoxError, Elapsed, Full, PipelineError};

use crate::clock::duration_to_nanos;
use crate::identity::{BreakerName, Identity, LastFailure};
use crate::state::State;

/// An invalid configuration, naming the field at fault.
///
/// Returned by every `build()` of the crate; nothing is validated later.
///
/// ```
/// use interlock::Config;
///
/// let err = Config::builder().max_concurrent_probes(0).build().unwrap_err();
/// assert_eq!(err.field(), "max_concurrent_probes");
/// assert_eq!(
///     err.to_string(),
///     "invalid max_concurrent_probes: must be in [1, permitted_calls_in_half_open = 10], got 0"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: Cow<'static, str>,
}

impl ConfigError {
    /// An error for `field`, explained by `reason`.
    #[must_use]
    pub fn new(field: &'static str, reason: impl Into<Cow<'static, str>>) -> Self {
        ConfigError {
            field,
            reason: reason.into(),
        }
    }

    /// The name of the invalid field, as spelled in the builder.
    #[must_use]
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// Why the value was rejected.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.field, self.reason)
    }
}

impl Error for ConfigError {}

/// A number as a [`ConfigError`] shows it: in plain notation where that is
/// short, in scientific notation beyond (`f64`'s `Display` would write
/// `1e300` with 301 digits).
pub(crate) struct Shown(pub(crate) f64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_finite() && v != 0.0 && !(1e-6..1e16).contains(&v.abs()) {
            write!(f, "{v:e}")
        } else {
            write!(f, "{v}")
        }
    }
}

/// A call rejected by an open breaker, before it ran (R6.4).
///
/// Cheap to make, clone and drop, `Send + Sync`, and it keeps no borrow of
/// the breaker: a name of up to 38 bytes is copied into it (a longer one is
/// shared), and it touches no counter shared with other threads.
///
/// ```
/// use interlock::{CallError, CircuitBreaker, State};
///
/// let breaker = CircuitBreaker::new("payments");
/// breaker.force_open();
/// match breaker.call(|| Ok::<_, std::io::Error>(1)) {
///     Err(CallError::Rejected(open)) => {
///         assert_eq!(open.breaker_name(), "payments");
///         assert_eq!(open.state(), State::ForcedOpen);
///         assert_eq!(open.retry_after(), None); // no estimate after force_open
///         assert_eq!(open.to_string(), "circuit 'payments' is open");
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Clone)]
pub struct CircuitOpenError {
    name: BreakerName,
    /// `id << 8 | state`: the breaker's [`Identity::id`] (to find its last
    /// failure) and the rejecting state's bits, in one word.
    id_and_state: u64,
    /// `retry_after` in nanoseconds, [`NO_ESTIMATE`] for `None`.
    retry_after_nanos: u64,
    /// The version of the breaker's last failure when it rejected the call.
    failure_version: u64,
}

/// `retry_after_nanos` of a rejection without an estimate.
pub(crate) const NO_ESTIMATE: u64 = u64::MAX;

/// `retry_after` as a rejection stores it: nanoseconds, [`NO_ESTIMATE`] for
/// none; a wait of 584 years or more saturates one nanosecond short of the
/// sentinel.
pub(crate) fn estimate_nanos(retry_after: Option<Duration>) -> u64 {
    retry_after.map_or(NO_ESTIMATE, |d| duration_to_nanos(d).min(NO_ESTIMATE - 1))
}

impl CircuitOpenError {
    /// A rejection with `retry_after` in nanoseconds, [`NO_ESTIMATE`] for
    /// none.
    #[inline]
    pub(crate) fn with_nanos(identity: &Identity, state: State, retry_after_nanos: u64) -> Self {
        CircuitOpenError {
            name: identity.rejection_name.clone(),
            id_and_state: (identity.id << 8) | state.to_bits(),
            retry_after_nanos,
            failure_version: identity.failure_version(),
        }
    }

    /// The name of the breaker that rejected the call.
    #[must_use]
    pub fn breaker_name(&self) -> &str {
        self.name.as_str()
    }

    /// The state that rejected the call: OPEN, HALF_OPEN (probe caps reached)
    /// or FORCED_OPEN.
    #[must_use]
    pub fn state(&self) -> State {
        State::from_bits(self.id_and_state)
    }

    /// How long until the breaker admits a probe: `Some` only for a rejection
    /// in OPEN, and zero once the wait has elapsed; `None` in HALF_OPEN and
    /// FORCED_OPEN (R6.2).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        (self.retry_after_nanos != NO_ESTIMATE)
            .then(|| Duration::from_nanos(self.retry_after_nanos))
    }

    /// [`retry_after`](Self::retry_after) rounded up to whole seconds, as an
    /// HTTP `Retry-After` header wants it (0.2 s gives 1, 30 s gives 30, an
    /// elapsed wait gives 0); `None` without an estimate.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("db");
    /// breaker.force_open();
    /// let open = breaker.acquire().unwrap_err();
    /// assert_eq!(open.retry_after_secs(), None);
    /// ```
    #[must_use]
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(ceil_secs)
    }

    /// The breaker's most recent failure when it rejected the call (R11.3):
    /// a later failure or a `reset()` does not change what this rejection
    /// reports. `None` if there was none then; also `None` once every
    /// handle to the breaker has been dropped, or after the breaker has
    /// recorded eight newer failures (or resets) since the rejection: it
    /// keeps only its last eight for the rejections that carry them.
    ///
    /// The rejection carries a version number, not the failure (an `Arc`
    /// clone would be a write to a line every rejecting thread shares); the
    /// read finds that version under the breaker's own lock.
    ///
    /// ```
    /// use interlock::{CallError, CircuitBreaker, Config, SlidingWindow};
    ///
    /// let breaker = CircuitBreaker::builder("db")
    ///     .config(Config::builder().minimum_number_of_calls(1).sliding_window(SlidingWindow::count(1)).build()?)
    ///     .build()?;
    /// let admitted = breaker.acquire()?; // in flight when the breaker trips
    /// let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("timeout")));
    /// let Err(CallError::Rejected(open)) = breaker.call(|| Ok::<_, std::io::Error>(())) else { panic!() };
    /// admitted.finish(&Err::<(), _>(std::io::Error::other("reset by peer")));
    /// breaker.reset();
    /// assert_eq!(open.last_failure().unwrap().message(), "timeout"); // what it knew
    /// assert!(breaker.last_failure().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn last_failure(&self) -> Option<LastFailure> {
        Identity::failure_at(self.id_and_state >> 8, self.failure_version)
    }
}

/// Whole seconds, rounded up (saturating).
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

impl fmt::Debug for CircuitOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitOpenError")
            .field("breaker_name", &self.breaker_name())
            .field("state", &self.state())
            .field("retry_after", &self.retry_after())
            .finish_non_exhaustive()
    }
}

impl fmt::Display for CircuitOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "circuit '{}' is open", self.breaker_name())?;
        if let Some(after) = self.retry_after() {
            write!(f, "; retry in ~{:.3}s", after.as_secs_f64())?;
        }
        Ok(())
    }
}

impl Error for CircuitOpenError {}

impl PartialEq for CircuitOpenError {
    fn eq(&self, other: &Self) -> bool {
        self.breaker_name() == other.breaker_name()
            && self.state() == other.state()
            && self.retry_after_nanos == other.retry_after_nanos
    }
}

/// The result of a guarded call that did not succeed: either the breaker
/// rejected it, or the call ran and returned its own error.
///
/// [`Inner`](CallError::Inner) is transparent: its `Display` and `source()`
/// are the call's own error's. [`Rejected`](CallError::Rejected) describes
/// this layer (`call not permitted`) and returns the [`CircuitOpenError`]
/// from `source()`, so the rejection stays findable after `?` has turned the
/// error into an `anyhow::Error` or a `Box<dyn Error>`
/// ([`find_rejection`](crate::find_rejection), `chain()`).
///
/// ```
/// use interlock::{CallError, CircuitBreaker, CircuitOpenError};
/// use std::error::Error;
///
/// let breaker = CircuitBreaker::new("svc");
/// let r: Result<(), CallError<std::io::Error>> =
///     breaker.call(|| Err(std::io::Error::other("boom")));
/// let err = r.unwrap_err();
/// assert!(!err.is_rejected());
/// assert_eq!(err.to_string(), "boom");
/// assert_eq!(err.into_inner().unwrap().to_string(), "boom");
///
/// breaker.force_open();
/// let err = breaker.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
/// assert_eq!(err.to_string(), "call not permitted");
/// let open = err.source().unwrap().downcast_ref::<CircuitOpenError>().unwrap();
/// assert_eq!(open.to_string(), "circuit 'svc' is open");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum CallError<E> {
    /// The breaker rejected the call; it did not run.
    Rejected(CircuitOpenError),
    /// The call ran and failed with its own error.
    Inner(E),
}

impl<E> CallError<E> {
    /// Whether the breaker rejected the call.
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }

    /// The rejection, if this is one.
    #[must_use]
    pub fn rejected(&self) -> Option<&CircuitOpenError> {
        match self {
            CallError::Rejected(open) => Some(open),
            CallError::Inner(_) => None,
        }
    }

    /// The call's own error, if it ran.
    #[must_use]
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Rejected(_) => None,
            CallError::Inner(e) => Some(e),
        }
    }

    /// Maps the call's own error, keeping a rejection as it is.
    pub fn map_inner<F, G: FnOnce(E) -> F>(self, f: G) -> CallError<F> {
        match self {
            CallError::Rejected(open) => CallError::Rejected(open),
            CallError::Inner(e) => CallError::Inner(f(e)),
        }
    }
}

impl<E> From<CircuitOpenError> for CallError<E> {
    fn from(open: CircuitOpenError) -> Self {
        CallError::Rejected(open)
    }
}

/// How a rejection describes the layer it came through; the
/// [`CircuitOpenError`] itself is the `source()`.
pub(crate) const NOT_PERMITTED: &str = "call not permitted";

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(_) => f.write_str(NOT_PERMITTED),
            CallError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: Error> Error for CallError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CallError::Rejected(open) => Some(open),
            CallError::Inner(e) => e.source(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_is_72_bytes_and_keeps_its_estimate() {
        assert_eq!(std::mem::size_of::<CircuitOpenError>(), 72);
        let identity = Identity::register("svc");
        for (state, after) in [
            (State::Open, Some(Duration::ZERO)),
            (State::Open, Some(Duration::from_millis(1500))),
            (State::Open, Some(Duration::MAX)),
            (State::HalfOpen, None),
        ] {
            let e = CircuitOpenError::with_nanos(&identity, state, estimate_nanos(after));
            assert_eq!(e.state(), state);
            assert_eq!(e.breaker_name(), "svc");
            let expected = after.map(|d| d.min(Duration::from_nanos(NO_ESTIMATE - 1)));
            assert_eq!(e.retry_after(), expected);
            assert_eq!(e.clone(), e);
        }
    }

    #[test]
    fn config_errors_show_extreme_numbers_in_scientific_notation() {
        for (v, shown) in [
            (0.5, "0.5"),
            (0.0, "0"),
            (1.0, "1"),
            (1e15, "1000000000000000"),
            (1e16, "1e16"),
            (1e308, "1e308"),
            (-2.5e300, "-2.5e300"),
            (1e-7, "1e-7"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(Shown(v).to_string(), shown, "{v:?}");
        }
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        for (d, secs) in [
            (Duration::ZERO, 0),
            (Duration::from_nanos(1), 1),
            (Duration::from_millis(200), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1_001), 2),
            (Duration::from_secs(30), 30),
            (Duration::new(30, 1), 31),
            (Duration::MAX, u64::MAX),
        ] {
            assert_eq!(ceil_secs(d), secs, "{d:?}");
        }
    }
}
