//! Failure classification: what a settled call says about the dependency.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// The verdict on one settled call.
///
/// ```
/// use interlock::{CircuitBreaker, Verdict};
///
/// // A breaker-wide policy over any error type: a missing row is the
/// // caller's business, not a sign the database is down.
/// let breaker = CircuitBreaker::builder("db")
///     .classifier(|err: &(dyn std::error::Error + 'static)| {
///         match err.downcast_ref::<std::io::Error>() {
///             Some(io) if io.kind() == std::io::ErrorKind::NotFound => Verdict::Success,
///             _ => Verdict::Failure,
///         }
///     })
///     .build()?;
/// let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
/// let _ = breaker.call(|| Err::<(), _>(missing));
/// assert_eq!(breaker.snapshot().failed_calls, 0);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The dependency did its job (an error may still be returned to the caller).
    Success,
    /// The dependency failed.
    Failure,
    /// The call never reached the dependency (an exhausted local pool, a
    /// full bulkhead): in HALF_OPEN the probe hands its slot back without a
    /// verdict (R9.3); elsewhere it counts as a failure (R9.2).
    Inconclusive,
}

impl Verdict {
    /// Whether the call counts as a failure outside HALF_OPEN.
    #[must_use]
    pub const fn is_failure(self) -> bool {
        !matches!(self, Verdict::Success)
    }
}

/// A breaker-wide error policy, applied to the error of every call
/// classified by default (`call`, `call_async`, `Permit::finish`).
#[derive(Clone)]
pub(crate) struct ErrorClassifier(pub(crate) Arc<ClassifyFn>);

/// The shape of a breaker-wide error policy.
pub(crate) type ClassifyFn = dyn Fn(&(dyn Error + 'static)) -> Verdict + Send + Sync;

impl ErrorClassifier {
    pub(crate) fn classify(&self, err: &(dyn Error + 'static)) -> Verdict {
        (self.0)(err)
    }
}

impl fmt::Debug for ErrorClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ErrorClassifier(..)")
    }
}
