//! Resilience pipeline: timeout, bulkhead, circuit breaker, retry and
//! fallback composed around one call, in an explicit order.
//!
//! A [`Pipeline`] is a stack of [`Strategy`] layers. The first layer added
//! to the [`PipelineBuilder`] is the outermost, so
//! `.fallback(..).retry(..).circuit_breaker(..).bulkhead(..).timeout(..)`
//! runs as `Fallback(Retry(CircuitBreaker(Bulkhead(Timeout(call)))))`.
//! That is also the recommended order:
//!
//! | layer (outer to inner) | why there |
//! |---|---|
//! | [`fallback`](PipelineBuilder::fallback) | substitutes a value for what every inner layer gave up on, rejections included |
//! | [`retry`](PipelineBuilder::retry) | each attempt is a whole guarded call: the breaker counts every attempt and stops the loop when it opens |
//! | [`circuit_breaker`](PipelineBuilder::circuit_breaker) | counts timeouts like failures; an open circuit rejects before a bulkhead slot is taken |
//! | [`bulkhead`](PipelineBuilder::bulkhead) | inside the retry, so waiting between attempts holds no slot |
//! | [`timeout`](PipelineBuilder::timeout) | innermost: bounds one attempt, so one hang cannot eat the retry budget |
//!
//! Another order is legitimate when chosen on purpose: a breaker *outside*
//! the retry sees one outcome per operation instead of one per attempt.
//!
//! One pipeline serves both kinds of code: [`Pipeline::call`] for blocking
//! closures and [`Pipeline::call_async`] for futures, on any executor. Every
//! layer runs on both paths; none is skipped. Errors keep the caller's own
//! error type inside [`PipelineError`].
//!
//! ```
//! use interlock::pipeline::{Fallback, ManualSleeper, Pipeline, PipelineError, Retry, Timeout};
//! use interlock::{CircuitBreaker, ManualClock};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder("inventory").clock(clock.clone()).build()?;
//! let pipeline = Pipeline::builder()
//!     .fallback(Fallback::new(
//!         |e: &PipelineError<std::io::Error>| e.is_rejected(),
//!         |_| vec!["cached".to_string()],
//!     ))
//!     .retry(Retry::builder(3).sleeper(ManualSleeper::new(clock.clone())).build()?)
//!     .circuit_breaker(breaker.clone())
//!     .timeout(Timeout::new(Duration::from_secs(2)))
//!     .build();
//!
//! let items = pipeline.call(|| Ok::<_, std::io::Error>(vec!["widget".to_string()]))?;
//! assert_eq!(items, ["widget"]);
//!
//! breaker.force_open();
//! let items = pipeline.call(|| Ok::<_, std::io::Error>(vec!["widget".to_string()]))?;
//! assert_eq!(items, ["cached"]); // not retried: the circuit is open
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Blocking calls
//!
//! A blocking call cannot be interrupted from outside its thread, so a
//! blocking deadline runs the call on a worker thread and abandons it when
//! time is up (see [`Timeout`]). For that to be possible the closure given
//! to [`Pipeline::call`] owns what it uses (`Send + Sync + 'static`, as for
//! [`std::thread::spawn`]): clone an `Arc` into it rather than borrowing.

mod breaker;
mod rng;
mod sleep;

pub mod backoff;
#[cfg(feature = "backon")]
#[cfg_attr(docsrs, doc(cfg(feature = "backon")))]
pub mod backon;
pub mod bulkhead;
pub mod chaos;
pub mod fallback;
pub mod hedge;
#[cfg(feature = "governor")]
#[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
pub mod rate_limit;
pub mod retry;
pub mod timeout;

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use crate::error::{CallError, CircuitOpenError};
use crate::failure::{Concrete, Failure, PipelineErrorOf};

pub use bulkhead::{Bulkhead, BulkheadBuilder};
pub use fallback::Fallback;
pub use hedge::{Hedge, HedgeBuilder};
#[cfg(feature = "governor")]
#[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
pub use rate_limit::{KeyedRateLimit, RateLimit, RateLimitBuilder};
pub use retry::{DEFAULT_PROBE_JITTER, Retry, RetryBuilder, UnlessOpen};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use sleep::TokioSleeper;
pub use sleep::{ManualSleeper, Sleep, Sleeper, StdSleeper};
pub use timeout::{Timeout, TimeoutBuilder};

pub use crate::error::{BoxError, PipelineError};

/// One layer of a [`Pipeline`]: runs "the next layer" (every layer inside
/// it, then the call), on the blocking path and on the async path.
///
/// A layer returns the next layer's result or its own error, and must let
/// cancellation through: on the async path, dropping the future returned by
/// [`execute_async`](Self::execute_async) must drop the inner future.
///
/// `T` and `E` are the call's value and error types; a layer that does not
/// care implements the trait for every `T` and `E`. `K` is the error's kind
/// ([`Concrete`] by default; see [`Failure`]): implement the trait for every `K` too, as
/// below, so the layer also serves pipelines whose calls fail with
/// `anyhow::Error` or a boxed error.
///
/// ```
/// use interlock::pipeline::{Pipeline, PipelineError, Strategy};
/// use std::future::Future;
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// /// Counts the calls that pass through it.
/// #[derive(Debug, Default)]
/// struct Counting(AtomicU32);
///
/// impl<T, E, K> Strategy<T, E, K> for Counting {
///     fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
///     where
///         F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
///         T: Send + 'static,
///         E: Send + 'static,
///     {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         next()
///     }
///
///     async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
///     where
///         F: Fn() -> Fut + Send + Sync,
///         Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
///         T: Send,
///         E: Send,
///     {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         next().await
///     }
/// }
///
/// let pipeline = Pipeline::builder().add(Counting::default()).build();
/// assert_eq!(pipeline.call(|| Ok::<_, std::io::Error>(7))?, 7);
/// # Ok::<(), PipelineError<std::io::Error>>(())
/// ```
pub trait Strategy<T, E, K = Concrete>: Send + Sync + 'static {
    /// Runs `next` (the rest of the pipeline) on the blocking path.
    ///
    /// # Errors
    ///
    /// `next`'s error, or this layer's own ([`PipelineError`]).
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static;

    /// Runs `next` (the rest of the pipeline) on the async path.
    ///
    /// # Errors
    ///
    /// `next`'s error, or this layer's own ([`PipelineError`]).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future must drop whatever `next` started.
    fn execute_async<F, Fut>(
        &self,
        next: F,
    ) -> impl Future<Output = Result<T, PipelineError<E>>> + Send
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send;
}

/// The empty stack: runs the call as it is.
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl<T, E, K> Strategy<T, E, K> for Identity {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        next()
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        next().await
    }
}

/// Two layers, `outer` around `inner`: what the builder nests.
#[derive(Debug)]
pub struct Stack<O, I> {
    outer: O,
    inner: Arc<I>,
}

impl<O: Clone, I> Clone for Stack<O, I> {
    fn clone(&self) -> Self {
        Stack {
            outer: self.outer.clone(),
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<O, I> Stack<O, I> {
    /// `outer` around `inner`.
    pub fn new(outer: O, inner: I) -> Self {
        Stack {
            outer,
            inner: Arc::new(inner),
        }
    }

    /// The outer layer.
    pub fn outer(&self) -> &O {
        &self.outer
    }

    /// The inner layer.
    pub fn inner(&self) -> &I {
        &self.inner
    }
}

impl<T, E, K, O, I> Strategy<T, E, K> for Stack<O, I>
where
    O: Strategy<T, E, K>,
    I: Strategy<T, E, K>,
{
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let next = Arc::new(next);
        self.outer.execute(move || {
            let next = Arc::clone(&next);
            inner.execute(move || (*next)())
        })
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        let inner = &*self.inner;
        let next = &next;
        self.outer
            .execute_async(move || inner.execute_async(next))
            .await
    }
}

/// Strategies composed around a call; see the [module docs](self).
///
/// Cloning is cheap: clones share the same layers (the same bulkhead
/// slots, the same breaker).
#[derive(Debug)]
pub struct Pipeline<S = Identity> {
    stack: Arc<S>,
}

impl<S> Clone for Pipeline<S> {
    fn clone(&self) -> Self {
        Pipeline {
            stack: Arc::clone(&self.stack),
        }
    }
}

impl Pipeline {
    /// An empty builder.
    pub fn builder() -> PipelineBuilder<Identity> {
        PipelineBuilder { stack: Identity }
    }
}

impl<S> Pipeline<S> {
    /// A pipeline of one strategy (or of a stack built by hand).
    pub fn new(strategy: S) -> Self {
        Pipeline {
            stack: Arc::new(strategy),
        }
    }

    /// The layers.
    pub fn get_ref(&self) -> &S {
        &self.stack
    }

    /// Runs the blocking closure `f` through every layer.
    ///
    /// `f` may run more than once (under a retry) and on a worker thread
    /// (under a timeout), hence `Fn + Send + Sync + 'static`. Its error may
    /// be any type a breaker accepts ([`Failure`]): a concrete error type,
    /// or a handle such as `anyhow::Error` or a boxed error.
    ///
    /// # Errors
    ///
    /// For a concrete error type, [`PipelineError::Inner`] with `f`'s own
    /// error, or the error of the layer that gave up
    /// ([`PipelineError::Rejected`], [`PipelineError::Timeout`], ...). For an
    /// error handle, the handle: `f`'s own error, or the layer's error
    /// converted into it (it downcasts to [`CircuitOpenError`],
    /// [`timeout::Elapsed`], [`bulkhead::Full`]).
    ///
    /// ```
    /// use interlock::pipeline::Pipeline;
    /// use interlock::CircuitBreaker;
    ///
    /// let pipeline = Pipeline::builder().circuit_breaker(CircuitBreaker::new("db")).build();
    /// assert_eq!(pipeline.call(|| Ok::<_, std::io::Error>(1))?, 1);
    /// # Ok::<(), interlock::PipelineError<std::io::Error>>(())
    /// ```
    pub fn call<T, E, F, K, R>(&self, f: F) -> Result<T, R>
    where
        S: Strategy<T, E, K>,
        F: Fn() -> Result<T, E> + Send + Sync + 'static,
        T: Send + 'static,
        E: Failure<K, PipelineError = R> + Send + 'static,
        R: PipelineErrorOf<E>,
    {
        self.stack
            .execute(move || f().map_err(PipelineError::Inner))
            .map_err(E::pipeline_error)
    }

    /// Awaits the future made by `f` through every layer, on any executor.
    ///
    /// `f` is called once per attempt.
    ///
    /// # Errors
    ///
    /// As for [`call`](Self::call).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future cancels the call in every layer: the
    /// running attempt is dropped, a bulkhead slot and a probe slot are
    /// handed back, a retry stops, nothing is recorded.
    ///
    /// ```
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let waker = std::task::Waker::noop();
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// use interlock::pipeline::Pipeline;
    /// use interlock::CircuitBreaker;
    ///
    /// let pipeline = Pipeline::builder().circuit_breaker(CircuitBreaker::new("db")).build();
    /// let rows = block_on(pipeline.call_async(|| async { Ok::<_, std::io::Error>(3) }))?;
    /// assert_eq!(rows, 3);
    /// # Ok::<(), interlock::PipelineError<std::io::Error>>(())
    /// ```
    pub fn call_async<T, E, F, Fut, K, R>(&self, f: F) -> impl Future<Output = Result<T, R>> + Send
    where
        S: Strategy<T, E, K>,
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, E>> + Send,
        T: Send,
        E: Failure<K, PipelineError = R> + Send,
        R: PipelineErrorOf<E>,
    {
        let stack = Arc::clone(&self.stack);
        async move {
            let f = &f;
            stack
                .execute_async(move || {
                    let attempt = f();
                    async move { attempt.await.map_err(PipelineError::Inner) }
                })
                .await
                .map_err(E::pipeline_error)
        }
    }
}

/// Builds a [`Pipeline`]; the first layer added is the outermost.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct PipelineBuilder<S> {
    stack: S,
}

impl<S> PipelineBuilder<S> {
    /// Adds any [`Strategy`] as the next (inner) layer.
    #[allow(clippy::should_implement_trait)] // the builder step of the Python port, not `+`
    pub fn add<L>(self, layer: L) -> PipelineBuilder<Stack<S, L>> {
        PipelineBuilder {
            stack: Stack::new(self.stack, layer),
        }
    }

    /// Adds a [`Fallback`].
    pub fn fallback<P, H>(
        self,
        fallback: Fallback<P, H>,
    ) -> PipelineBuilder<Stack<S, Fallback<P, H>>> {
        self.add(fallback)
    }

    /// Adds a [`Retry`].
    pub fn retry<P>(self, retry: Retry<P>) -> PipelineBuilder<Stack<S, Retry<P>>> {
        self.add(retry)
    }

    /// Adds a circuit breaker, untouched: its window, listeners and manual
    /// controls behave as in direct use, and it can still be called directly.
    pub fn circuit_breaker(
        self,
        breaker: crate::CircuitBreaker,
    ) -> PipelineBuilder<Stack<S, crate::CircuitBreaker>> {
        self.add(breaker)
    }

    /// Adds a [`Bulkhead`].
    pub fn bulkhead(self, bulkhead: Bulkhead) -> PipelineBuilder<Stack<S, Bulkhead>> {
        self.add(bulkhead)
    }

    /// Adds a [`Timeout`] (a `Duration` is a timeout on real time).
    pub fn timeout(self, timeout: impl Into<Timeout>) -> PipelineBuilder<Stack<S, Timeout>> {
        self.add(timeout.into())
    }

    /// Adds a [`Hedge`].
    pub fn hedge<P>(self, hedge: Hedge<P>) -> PipelineBuilder<Stack<S, Hedge<P>>> {
        self.add(hedge)
    }

    /// Adds a chaos strategy: a [`chaos::Fault`], [`chaos::Latency`] or
    /// [`chaos::Outcome`].
    pub fn chaos<C: chaos::Injection>(self, chaos: C) -> PipelineBuilder<Stack<S, C>> {
        self.add(chaos)
    }

    /// Adds a [`RateLimit`] (feature `governor`).
    #[cfg(feature = "governor")]
    #[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
    pub fn rate_limit(self, limit: RateLimit) -> PipelineBuilder<Stack<S, RateLimit>> {
        self.add(limit)
    }

    /// The pipeline.
    pub fn build(self) -> Pipeline<S> {
        Pipeline::new(self.stack)
    }
}

/// Decides which errors a [`Retry`] retries or a [`Fallback`] handles.
///
/// Implemented for every `Fn(&PipelineError<E>) -> bool + Send + Sync + 'static`.
///
/// ```
/// use interlock::pipeline::{ManualSleeper, Pipeline, PipelineError, Retry};
/// use interlock::ManualClock;
/// use std::io::{Error, ErrorKind};
///
/// // Retry timeouts and the call's own "interrupted" errors, nothing else.
/// let retry = Retry::builder(3)
///     .when(|e: &PipelineError<Error>| {
///         e.is_timeout() || e.inner().is_some_and(|io| io.kind() == ErrorKind::Interrupted)
///     })
///     .sleeper(ManualSleeper::new(ManualClock::new()))
///     .build()?;
/// let pipeline = Pipeline::builder().retry(retry).build();
/// let err = pipeline.call(|| Err::<(), _>(Error::from(ErrorKind::PermissionDenied)));
/// assert!(err.unwrap_err().is_inner()); // not selected: not retried, returned as it was
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub trait Predicate<E, K = Concrete>: Send + Sync + 'static {
    /// Whether `error` is one this predicate selects.
    fn test(&self, error: &PipelineError<E>) -> bool;
}

impl<E, K, F> Predicate<E, K> for F
where
    F: Fn(&PipelineError<E>) -> bool + Send + Sync + 'static,
{
    fn test(&self, error: &PipelineError<E>) -> bool {
        self(error)
    }
}

/// Errors that may be a circuit-open rejection: what the retry helpers
/// look for, whatever the error type.
///
/// ```
/// use interlock::pipeline::AsRejection;
/// use interlock::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new("svc");
/// breaker.force_open();
/// let err = breaker.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
/// assert_eq!(err.as_rejection().unwrap().breaker_name(), "svc");
/// ```
pub trait AsRejection {
    /// The rejection, if this error is (or wraps) one.
    fn as_rejection(&self) -> Option<&CircuitOpenError>;
}

impl AsRejection for CircuitOpenError {
    fn as_rejection(&self) -> Option<&CircuitOpenError> {
        Some(self)
    }
}

impl<E> AsRejection for CallError<E> {
    fn as_rejection(&self) -> Option<&CircuitOpenError> {
        self.rejected()
    }
}

impl<E> AsRejection for PipelineError<E> {
    fn as_rejection(&self) -> Option<&CircuitOpenError> {
        self.rejected()
    }
}

impl AsRejection for BoxError {
    fn as_rejection(&self) -> Option<&CircuitOpenError> {
        self.downcast_ref()
    }
}

/// Polls `fut` until it completes or `deadline` fires (then drops `fut`).
pub(crate) async fn with_deadline<F: Future>(fut: F, mut deadline: Sleep) -> Option<F::Output> {
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        if let Poll::Ready(value) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(value));
        }
        if deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Poll::Pending
    })
    .await
}

/// Reports a pipeline event to a strategy's listeners, isolated like the
/// breaker's own events.
pub(crate) fn emit(listeners: &[Arc<dyn crate::EventListener>], event: &crate::Event<'_>) {
    if !listeners.is_empty() {
        crate::event::emit(listeners, event);
    }
}
