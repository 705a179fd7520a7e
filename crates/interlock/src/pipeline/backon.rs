//! "Retry unless open" and "wait for the probe" for code that retries with
//! the [`backon`] crate instead of [`Retry`](super::Retry).
//!
//! They work on any error type a breaker accepts ([`Failure`]):
//! [`CallError`](crate::CallError) from `CircuitBreaker::call`,
//! [`PipelineError`](super::PipelineError), a bare
//! [`CircuitOpenError`], an `anyhow::Error`, a boxed error, an HTTP
//! client's error (`reqwest_middleware::Error`, `ureq::Error`), and find a
//! rejection anywhere in its chain ([`find_rejection`]).
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

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::backoff::{jitter, random_seed};
use super::retry::DEFAULT_PROBE_JITTER;
use crate::error::CircuitOpenError;
use crate::failure::{Failure, find_rejection};

fn rejection<E: Failure<K>, K>(error: &E) -> Option<&CircuitOpenError> {
    find_rejection(error.as_error())
}

/// A `when` predicate: retry every error except one that is or carries a
/// circuit-open rejection.
pub fn unless_open<E: Failure<K>, K>(error: &E) -> bool {
    rejection(error).is_none()
}

/// A predicate that retries only rejections: combine it with your own,
/// `|e| transient(e) || is_open(e)`, for the patient mode.
pub fn is_open<E: Failure<K>, K>(error: &E) -> bool {
    rejection(error).is_some()
}

/// An `adjust` hook: after a rejection that says when the breaker admits
/// its next probe, wait that long plus a random extra of at most 100 ms
/// ([`DEFAULT_PROBE_JITTER`], as the original's `wait_probe`), instead of
/// the backoff's delay. It never extends the budget: when the backoff is
/// spent (`None`), so is the retry. [`wait_probe_with`] sets the jitter and
/// seeds it.
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
pub fn wait_probe<E: Failure<K>, K>(error: &E, backoff: Option<Duration>) -> Option<Duration> {
    static RNG: std::sync::OnceLock<AtomicU64> = std::sync::OnceLock::new();
    let rng = RNG.get_or_init(|| AtomicU64::new(random_seed()));
    probe_wait(error, backoff, DEFAULT_PROBE_JITTER, rng)
}

/// [`wait_probe`] with its own jitter bound (zero: exactly `retry_after`)
/// and a generator seeded with `seed`, for reproducible waits.
///
/// ```
/// use interlock::pipeline::backon::wait_probe_with;
/// use interlock::{CircuitBreaker, Config, ManualClock, SlidingWindow};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder("db")
///     .config(Config::builder().minimum_number_of_calls(1).sliding_window(SlidingWindow::count(1))
///         .wait_duration_in_open(Duration::from_secs(5)).build()?)
///     .clock(clock)
///     .build()?;
/// let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("down")));
/// let open = breaker.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
///
/// let mut adjust = wait_probe_with(Duration::from_millis(200), 7);
/// let wait = adjust(&open, Some(Duration::from_secs(1))).unwrap();
/// assert!(wait >= Duration::from_secs(5) && wait <= Duration::from_millis(5_200));
/// assert_eq!(wait_probe_with(Duration::from_millis(200), 7)(&open, Some(Duration::ZERO)), Some(wait));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn wait_probe_with<E: Failure<K>, K>(
    jitter: Duration,
    seed: u64,
) -> impl FnMut(&E, Option<Duration>) -> Option<Duration> {
    let rng = AtomicU64::new(seed);
    move |error, backoff| probe_wait(error, backoff, jitter, &rng)
}

fn probe_wait<E: Failure<K>, K>(
    error: &E,
    backoff: Option<Duration>,
    max_jitter: Duration,
    rng: &AtomicU64,
) -> Option<Duration> {
    let delay = backoff?;
    Some(
        match rejection(error).and_then(CircuitOpenError::retry_after) {
            Some(wait) => wait.saturating_add(jitter(rng, max_jitter)),
            None => delay,
        },
    )
}
