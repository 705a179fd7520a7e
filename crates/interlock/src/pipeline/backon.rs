//! "Retry unless open" and "wait for the probe" for code that retries with
//! the [`backon`] crate instead of [`Retry`](super::Retry).
//!
//! Both work on any error that may be a rejection ([`AsRejection`]):
//! [`CallError`](crate::CallError) from `CircuitBreaker::call`,
//! [`PipelineError`](super::PipelineError), a bare
//! [`CircuitOpenError`](crate::CircuitOpenError) or a [`BoxError`](super::BoxError).
//!
//! ```
//! use backon::{BlockingRetryable, ConstantBuilder};
//! use interlock::pipeline::backon::unless_open;
//! use interlock::{CallError, CircuitBreaker};
//!
//! let breaker = CircuitBreaker::new("search");
//! breaker.force_open();
//! let mut attempts = 0;
//! let result = (|| {
//!     attempts += 1;
//!     breaker.call(|| Ok::<_, std::io::Error>("hits"))
//! })
//! .retry(ConstantBuilder::default().with_max_times(5))
//! .when(unless_open) // fail fast: an open circuit is not transient
//! .call();
//! assert!(matches!(result, Err(CallError::Rejected(_))));
//! assert_eq!(attempts, 1);
//! ```

use std::time::Duration;

use super::AsRejection;

/// A `when` predicate: retry every error except a circuit-open rejection.
pub fn unless_open<E: AsRejection>(error: &E) -> bool {
    error.as_rejection().is_none()
}

/// A predicate that retries only rejections: combine it with your own,
/// `|e| transient(e) || is_open(e)`, for the patient mode.
pub fn is_open<E: AsRejection>(error: &E) -> bool {
    error.as_rejection().is_some()
}

/// An `adjust` hook: after a rejection that says when the breaker admits
/// its next probe, wait exactly that long instead of the backoff's delay.
/// It never extends the budget: when the backoff is spent (`None`), so is
/// the retry.
///
/// ```
/// use backon::{ConstantBuilder, Retryable};
/// use interlock::pipeline::backon::{is_open, wait_probe};
/// use interlock::{CallError, CircuitBreaker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let breaker = CircuitBreaker::new("nightly-export");
/// let result = (|| async { breaker.call(|| Ok::<_, std::io::Error>("done")) })
///     .retry(ConstantBuilder::default().with_delay(Duration::from_secs(1)).with_max_times(3))
///     .when(|e| is_open(e) || matches!(e, CallError::Inner(_)))
///     .adjust(wait_probe)
///     .await;
/// assert_eq!(result.unwrap(), "done");
/// # }
/// ```
pub fn wait_probe<E: AsRejection>(error: &E, backoff: Option<Duration>) -> Option<Duration> {
    let probe = error.as_rejection().and_then(|open| open.retry_after());
    backoff.map(|delay| probe.unwrap_or(delay))
}
