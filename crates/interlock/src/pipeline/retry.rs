//! [`Retry`]: bounded retries with a pluggable backoff, aware of open
//! circuits.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::backoff::{Exponential, jitter, random_seed};
use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Predicate, Sleeper, Strategy, emit};
use crate::error::ConfigError;
use crate::event::{Event, EventListener, into_arc as listener_arc};
use crate::failure::Failure;

/// The default bound of the random extra wait after a probe estimate, as
/// the original's `wait_probe(jitter=0.1)`.
pub const DEFAULT_PROBE_JITTER: Duration = Duration::from_millis(100);

type Delays = Box<dyn Iterator<Item = Duration> + Send>;
type BackoffFactory = Arc<dyn Fn() -> Delays + Send + Sync>;

/// Runs the next layer again after selected errors, at most `max_attempts`
/// times in all, waiting between attempts as its backoff says.
///
/// - **Attempts are always capped**; when the budget (or the backoff) runs
///   out, the last error comes back as it was.
/// - **"Retry unless open"**: the default predicate, [`UnlessOpen`], retries
///   every error except a circuit-open rejection, which is not transient: an
///   open breaker rejects instantly, so retrying it only burns the budget.
///   It finds a rejection wherever it travels: from a breaker layer, or in
///   the call's own error (a breaker called inside the closure, an HTTP
///   adapter's rejection, one wrapped in `anyhow::Error` or a boxed error;
///   see [`find_rejection`](crate::find_rejection)).
/// - **"Wait for the probe"**: with
///   [`wait_for_probe`](RetryBuilder::wait_for_probe), a rejection that
///   says when the breaker admits its next probe is retried after that
///   long plus a random extra of at most
///   [`probe_jitter`](RetryBuilder::probe_jitter) (100 ms by default), so
///   the waiters of a fleet do not all arrive at the probe slot at once.
///   For background work that would rather wait than fail.
///
/// Each retry is reported as [`Event::RetryScheduled`] before its wait,
/// with the number of the attempt that failed.
/// Put the retry *outside* the breaker so the breaker counts every attempt.
///
/// ```
/// use interlock::pipeline::{backoff::Constant, ManualSleeper, Pipeline, Retry};
/// use interlock::ManualClock;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let sleeper = ManualSleeper::new(clock.clone());
/// let retry = Retry::builder(3)
///     .backoff(Constant::new(Duration::from_millis(100)))
///     .sleeper(sleeper.clone())
///     .build()?;
/// let pipeline = Pipeline::builder().retry(retry).build();
///
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = calls.clone();
/// let err = pipeline
///     .call(move || {
///         seen.fetch_add(1, Ordering::Relaxed);
///         Err::<(), _>(std::io::Error::other("flaky"))
///     })
///     .unwrap_err();
/// assert_eq!(calls.load(Ordering::Relaxed), 3);
/// assert_eq!(err.to_string(), "flaky"); // the original error
/// assert_eq!(sleeper.sleeps(), [Duration::from_millis(100); 2]);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Retry<P = UnlessOpen> {
    name: Arc<str>,
    max_attempts: u32,
    backoff: BackoffFactory,
    when: P,
    wait_for_probe: bool,
    probe_jitter: Duration,
    /// The generator of the probe jitter (SplitMix64), shared by clones.
    rng: Arc<AtomicU64>,
    sleeper: Arc<dyn Sleeper>,
    listeners: Arc<[Arc<dyn EventListener>]>,
}

impl<P> fmt::Debug for Retry<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("name", &self.name)
            .field("max_attempts", &self.max_attempts)
            .field("wait_for_probe", &self.wait_for_probe)
            .field("probe_jitter", &self.probe_jitter)
            .finish_non_exhaustive()
    }
}

/// The default retry predicate: every error except one that is or carries
/// a circuit-open rejection ([`PipelineError::find_rejection`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct UnlessOpen;

impl<E: Failure<K>, K> Predicate<E, K> for UnlessOpen {
    fn test(&self, error: &PipelineError<E>) -> bool {
        error.find_rejection::<K>().is_none()
    }
}

/// Builds a [`Retry`].
#[must_use = "a builder does nothing until `build()`"]
pub struct RetryBuilder<P> {
    name: String,
    max_attempts: u32,
    backoff: BackoffFactory,
    when: P,
    wait_for_probe: bool,
    probe_jitter: Duration,
    seed: Option<u64>,
    sleeper: Arc<dyn Sleeper>,
    listeners: Vec<Arc<dyn EventListener>>,
}

impl<P> fmt::Debug for RetryBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBuilder")
            .field("name", &self.name)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

impl Retry {
    /// A builder for at most `max_attempts` attempts in all (the first call
    /// included), with an exponential backoff from 100 ms (doubling, at most
    /// 10 s, no jitter) and the [`UnlessOpen`] predicate.
    ///
    /// The defaults against the original's (`RetryStrategy`, on tenacity):
    ///
    /// | setting | interlock | interlock-cb 2.8.2 | why |
    /// |---|---|---|---|
    /// | attempts | no default: `max_attempts` is required | 3 | the budget is the call site's decision |
    /// | first delay | 100 ms | 1 s (`wait_exponential_jitter(initial=1)`) | a request path's latency budget is usually under a second |
    /// | growth | doubling | doubling | |
    /// | cap | 10 s | none in practice (`max` = `sys.maxsize / 2`) | a retry loop should never sleep for minutes |
    /// | jitter on the backoff | none (add `.jitter(seed)`) | up to 1 s added to every delay | reproducible by default; opt in with a seed |
    /// | predicate | [`UnlessOpen`] | `retry_unless_open()` | the same |
    /// | probe wait jitter ([`wait_for_probe`](RetryBuilder::wait_for_probe)) | up to 100 ms | up to 0.1 s (`wait_probe(jitter=0.1)`) | the same |
    pub fn builder(max_attempts: u32) -> RetryBuilder<UnlessOpen> {
        RetryBuilder {
            name: "retry".into(),
            max_attempts,
            backoff: factory(
                Exponential::new(Duration::from_millis(100)).max(Duration::from_secs(10)),
            ),
            when: UnlessOpen,
            wait_for_probe: false,
            probe_jitter: DEFAULT_PROBE_JITTER,
            seed: None,
            sleeper: into_arc(StdSleeper),
            listeners: Vec::new(),
        }
    }
}

fn factory<B>(backoff: B) -> BackoffFactory
where
    B: IntoIterator<Item = Duration> + Clone + Send + Sync + 'static,
    B::IntoIter: Send + 'static,
{
    Arc::new(move || Box::new(backoff.clone().into_iter()))
}

impl<P> RetryBuilder<P> {
    /// The delays between attempts, restarted for every operation: any
    /// `IntoIterator<Item = Duration>` (see [`backoff`](super::backoff)).
    pub fn backoff<B>(mut self, backoff: B) -> Self
    where
        B: IntoIterator<Item = Duration> + Clone + Send + Sync + 'static,
        B::IntoIter: Send + 'static,
    {
        self.backoff = factory(backoff);
        self
    }

    /// Which errors to retry (default [`UnlessOpen`]), e.g.
    /// `|e: &PipelineError<MyError>| e.is_timeout()`.
    pub fn when<Q>(self, when: Q) -> RetryBuilder<Q> {
        RetryBuilder {
            name: self.name,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            when,
            wait_for_probe: self.wait_for_probe,
            probe_jitter: self.probe_jitter,
            seed: self.seed,
            sleeper: self.sleeper,
            listeners: self.listeners,
        }
    }

    /// The patient mode: a circuit-open rejection that carries a
    /// `retry_after` (from a breaker layer or anywhere in the call's own
    /// error) is retried after that long plus a random extra wait in
    /// `[0, probe_jitter]` (whatever the predicate says, and without using
    /// a backoff step). Rejections without an estimate (HALF_OPEN,
    /// FORCED_OPEN) go through the predicate.
    pub fn wait_for_probe(mut self) -> Self {
        self.wait_for_probe = true;
        self
    }

    /// The bound of the random extra wait after a probe estimate (default
    /// [`DEFAULT_PROBE_JITTER`], 100 ms; zero waits exactly `retry_after`).
    /// Each waiter draws its own, so a fleet of waiters spreads over the
    /// interval instead of hitting the probe slot at the same instant.
    pub fn probe_jitter(mut self, max: Duration) -> Self {
        self.probe_jitter = max;
        self
    }

    /// Seeds the generator of the probe jitter, for reproducible waits (in
    /// tests); unseeded, every retry gets a different random seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The name its events carry (default `"retry"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a listener for [`Event::RetryScheduled`].
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(listener_arc(listener));
        self
    }

    /// What the waits sleep on (default [`StdSleeper`]).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = into_arc(sleeper);
        self
    }

    /// The retry.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_attempts` if it is zero.
    pub fn build(self) -> Result<Retry<P>, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "max_attempts",
                "must be at least 1 (the first call), got 0",
            ));
        }
        Ok(Retry {
            name: self.name.into(),
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            when: self.when,
            wait_for_probe: self.wait_for_probe,
            probe_jitter: self.probe_jitter,
            rng: Arc::new(AtomicU64::new(self.seed.unwrap_or_else(random_seed))),
            sleeper: self.sleeper,
            listeners: self.listeners.into(),
        })
    }
}

impl<P> Retry<P> {
    /// The cap on attempts, the first call included.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// After attempt `attempt` failed with `error`: the wait before the
    /// next one, or `None` to give up.
    fn plan<E, K>(
        &self,
        attempt: u32,
        error: &PipelineError<E>,
        delays: &mut Delays,
    ) -> Option<Duration>
    where
        P: Predicate<E, K>,
        E: Failure<K>,
    {
        if attempt >= self.max_attempts {
            return None;
        }
        let probe_wait = if self.wait_for_probe {
            error
                .find_rejection::<K>()
                .and_then(crate::CircuitOpenError::retry_after)
        } else {
            None
        };
        let delay = match probe_wait {
            Some(wait) => wait.saturating_add(jitter(&self.rng, self.probe_jitter)),
            None if Predicate::<E, K>::test(&self.when, error) => delays.next()?,
            None => return None,
        };
        emit(
            &self.listeners,
            &Event::RetryScheduled {
                name: &self.name,
                attempt,
                delay,
            },
        );
        Some(delay)
    }
}

impl<T, E: Failure<K>, K, P: Predicate<E, K>> Strategy<T, E, K> for Retry<P> {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let mut delays = (self.backoff)();
        let mut attempt = 1;
        loop {
            let error = match next() {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let Some(delay) = self.plan::<E, K>(attempt, &error, &mut delays) else {
                return Err(error);
            };
            drop(error);
            self.sleeper.sleep_blocking(delay);
            attempt += 1;
        }
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        let mut delays = (self.backoff)();
        let mut attempt = 1;
        loop {
            let error = match next().await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            let Some(delay) = self.plan::<E, K>(attempt, &error, &mut delays) else {
                return Err(error);
            };
            drop(error);
            self.sleeper.sleep(delay).await;
            attempt += 1;
        }
    }
}
