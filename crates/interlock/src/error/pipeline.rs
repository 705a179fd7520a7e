//! The errors of the pipeline's strategies, kept here, below both the
//! pipeline and [`failure`](crate::failure), which converts between them
//! and the caller's error type. Re-exported at their public paths:
//! `interlock::pipeline::{PipelineError, BoxError}`,
//! `interlock::pipeline::timeout::Elapsed`, `interlock::pipeline::bulkhead::Full`.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{CallError, CircuitOpenError};

/// A boxed error that can cross threads, as tower uses.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why a call through a [`Pipeline`](crate::Pipeline) did not produce a value.
///
/// It keeps the call's own error type. Every variant but
/// [`Rejected`](Self::Rejected) is transparent (`Display` and `source()` are
/// the wrapped error's); `Rejected` describes this layer (`call not
/// permitted`) and returns the [`CircuitOpenError`] from `source()`, so the
/// rejection stays findable after `?` ([`find_rejection`](crate::find_rejection)).
/// [`into_boxed`](Self::into_boxed) unwraps it into a [`BoxError`] that
/// downcasts to the wrapped type (`E`, [`CircuitOpenError`],
/// [`Elapsed`](crate::pipeline::timeout::Elapsed), [`Full`](crate::pipeline::bulkhead::Full)).
///
/// ```
/// use interlock::pipeline::Pipeline;
/// use interlock::{find_rejection, CircuitBreaker, CircuitOpenError};
///
/// let breaker = CircuitBreaker::new("svc");
/// let pipeline = Pipeline::builder().circuit_breaker(breaker.clone()).build();
/// breaker.force_open();
/// let err = pipeline.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
/// assert!(err.is_rejected());
/// assert_eq!(err.to_string(), "call not permitted");
/// assert_eq!(find_rejection(&err).unwrap().to_string(), "circuit 'svc' is open");
/// assert!(err.into_boxed().downcast_ref::<CircuitOpenError>().is_some());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum PipelineError<E> {
    /// The call ran and returned its own error.
    Inner(E),
    /// A circuit breaker rejected the call; it did not run.
    Rejected(CircuitOpenError),
    /// A timeout gave up on the call.
    Timeout(Elapsed),
    /// A bulkhead had no free slot; the call did not run.
    BulkheadFull(Full),
    /// The error of a custom strategy (or a worker thread that could not start).
    Other(BoxError),
}

impl<E> PipelineError<E> {
    /// Whether the call ran and failed with its own error.
    #[must_use]
    pub fn is_inner(&self) -> bool {
        matches!(self, PipelineError::Inner(_))
    }

    /// Whether a circuit breaker rejected the call.
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        matches!(self, PipelineError::Rejected(_))
    }

    /// Whether a timeout gave up on the call.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self, PipelineError::Timeout(_))
    }

    /// Whether a bulkhead was full.
    #[must_use]
    pub fn is_bulkhead_full(&self) -> bool {
        matches!(self, PipelineError::BulkheadFull(_))
    }

    /// The call's own error, if it ran and failed.
    #[must_use]
    pub fn inner(&self) -> Option<&E> {
        match self {
            PipelineError::Inner(e) => Some(e),
            _ => None,
        }
    }

    /// The call's own error, by value.
    #[must_use]
    pub fn into_inner(self) -> Option<E> {
        match self {
            PipelineError::Inner(e) => Some(e),
            _ => None,
        }
    }

    /// The rejection, if a breaker rejected the call.
    #[must_use]
    pub fn rejected(&self) -> Option<&CircuitOpenError> {
        match self {
            PipelineError::Rejected(open) => Some(open),
            _ => None,
        }
    }

    /// Maps the call's own error, keeping every other variant.
    pub fn map_inner<F, G: FnOnce(E) -> F>(self, f: G) -> PipelineError<F> {
        match self {
            PipelineError::Inner(e) => PipelineError::Inner(f(e)),
            PipelineError::Rejected(open) => PipelineError::Rejected(open),
            PipelineError::Timeout(elapsed) => PipelineError::Timeout(elapsed),
            PipelineError::BulkheadFull(full) => PipelineError::BulkheadFull(full),
            PipelineError::Other(other) => PipelineError::Other(other),
        }
    }

    /// The wrapped error, boxed on its own (not inside a `PipelineError`),
    /// so it downcasts to `E`, [`CircuitOpenError`],
    /// [`Elapsed`](crate::pipeline::timeout::Elapsed) or [`Full`](crate::pipeline::bulkhead::Full).
    #[must_use]
    pub fn into_boxed(self) -> BoxError
    where
        E: Error + Send + Sync + 'static,
    {
        match self {
            PipelineError::Inner(e) => Box::new(e),
            PipelineError::Rejected(open) => Box::new(open),
            PipelineError::Timeout(elapsed) => Box::new(elapsed),
            PipelineError::BulkheadFull(full) => Box::new(full),
            PipelineError::Other(other) => other,
        }
    }

    /// The Rust type name of the wrapped error (for the breaker's last failure).
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            PipelineError::Inner(_) => std::any::type_name::<E>(),
            PipelineError::Rejected(_) => std::any::type_name::<CircuitOpenError>(),
            PipelineError::Timeout(_) => std::any::type_name::<Elapsed>(),
            PipelineError::BulkheadFull(_) => std::any::type_name::<Full>(),
            PipelineError::Other(_) => std::any::type_name::<BoxError>(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for PipelineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::Inner(e) => fmt::Display::fmt(e, f),
            PipelineError::Rejected(_) => f.write_str(super::NOT_PERMITTED),
            PipelineError::Timeout(elapsed) => fmt::Display::fmt(elapsed, f),
            PipelineError::BulkheadFull(full) => fmt::Display::fmt(full, f),
            PipelineError::Other(other) => fmt::Display::fmt(other, f),
        }
    }
}

impl<E: Error> Error for PipelineError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            PipelineError::Inner(e) => e.source(),
            PipelineError::Rejected(open) => Some(open),
            PipelineError::Timeout(elapsed) => elapsed.source(),
            PipelineError::BulkheadFull(full) => full.source(),
            PipelineError::Other(other) => other.source(),
        }
    }
}

impl<E> From<CircuitOpenError> for PipelineError<E> {
    fn from(open: CircuitOpenError) -> Self {
        PipelineError::Rejected(open)
    }
}

impl<E> From<Elapsed> for PipelineError<E> {
    fn from(elapsed: Elapsed) -> Self {
        PipelineError::Timeout(elapsed)
    }
}

impl<E> From<Full> for PipelineError<E> {
    fn from(full: Full) -> Self {
        PipelineError::BulkheadFull(full)
    }
}

impl<E> From<CallError<E>> for PipelineError<E> {
    fn from(err: CallError<E>) -> Self {
        match err {
            CallError::Rejected(open) => PipelineError::Rejected(open),
            CallError::Inner(e) => PipelineError::Inner(e),
        }
    }
}

/// A [`Timeout`](crate::pipeline::Timeout) gave up on a call (the Python port's `CallTimeoutError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elapsed {
    duration: Duration,
}

impl Elapsed {
    /// An elapsed deadline of `duration` (for custom timeouts and tests).
    #[must_use]
    pub fn new(duration: Duration) -> Self {
        Elapsed { duration }
    }

    /// The deadline that passed.
    #[must_use]
    pub fn duration(&self) -> Duration {
        self.duration
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "call timed out after {:.3}s",
            self.duration.as_secs_f64()
        )
    }
}

impl Error for Elapsed {}

/// A [`Bulkhead`](crate::pipeline::Bulkhead) had no free slot (the Python port's `BulkheadFullError`).
///
/// ```
/// use interlock::pipeline::{Bulkhead, Pipeline, PipelineError};
///
/// // One slot: a call made from inside a call finds it taken.
/// let pipeline = Pipeline::builder().bulkhead(Bulkhead::builder(1).name("db").build()?).build();
/// let inner = pipeline.clone();
/// let nested = pipeline.call(move || Ok::<_, std::io::Error>(inner.call(|| Ok::<_, std::io::Error>(()))))?;
/// let Err(PipelineError::BulkheadFull(full)) = nested else { panic!("the slot was free") };
/// assert_eq!((full.name(), full.max_concurrent()), ("db", 1));
/// assert_eq!(full.to_string(), "bulkhead 'db' is full (1 calls in flight)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Full {
    name: Arc<str>,
    max_concurrent: usize,
}

impl Full {
    pub(crate) fn new(name: Arc<str>, max_concurrent: usize) -> Self {
        Full {
            name,
            max_concurrent,
        }
    }

    /// The bulkhead's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its slots per pool, all taken.
    #[must_use]
    pub fn max_concurrent(&self) -> usize {
        self.max_concurrent
    }
}

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bulkhead '{}' is full ({} calls in flight)",
            self.name, self.max_concurrent
        )
    }
}

impl Error for Full {}
