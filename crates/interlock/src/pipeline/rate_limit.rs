//! [`RateLimit`]: at most so many calls per period, on the [`governor`]
//! crate's GCRA (feature `governor`), globally or per key
//! ([`KeyedRateLimit`]: per host, per tenant).
//!
//! GCRA (the generic cell rate algorithm) is a leaky bucket that keeps one
//! timestamp per limiter: `calls` per `period` at a steady pace, with bursts
//! of up to `burst` calls (default `calls`) after a quiet spell. A call over
//! the limit is refused with [`Exceeded`] (carrying when the next call would
//! be admitted), or, with [`max_wait`](RateLimitBuilder::max_wait), waits
//! for its turn when that comes soon enough. Every refusal is reported as
//! [`Event::RateLimitRejected`].
//!
//! ```
//! use interlock::pipeline::{Pipeline, RateLimit};
//! use interlock::ManualClock;
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let pipeline = Pipeline::builder()
//!     .rate_limit(RateLimit::builder(2, Duration::from_secs(1)).name("geocoder").clock(clock.clone()).build()?)
//!     .build();
//! let call = || pipeline.call(|| Ok::<_, std::io::Error>(()));
//! assert!(call().is_ok() && call().is_ok()); // the burst
//! let err = call().unwrap_err();
//! let exceeded = err.rate_limited().unwrap();
//! assert_eq!(exceeded.retry_after(), Duration::from_millis(500)); // one call every 500 ms
//! assert_eq!(err.to_string(), "rate limit 'geocoder' exceeded, next call allowed in 0.500s");
//!
//! clock.advance(Duration::from_millis(500));
//! assert!(call().is_ok());
//! # Ok::<(), interlock::ConfigError>(())
//! ```
//!
//! A refusal means *this process* chose not to send the call: it is never a
//! circuit-open rejection. It comes back as [`Exceeded`] inside
//! [`PipelineError::Other`] ([`PipelineError::rate_limited`] finds it).
//! Put the limiter **inside the retry and outside the breaker**, so it
//! meters every attempt and its refusals never count as the dependency's
//! failures: `Retry(RateLimit(CircuitBreaker(Timeout(call))))`. (A breaker
//! outside the limiter sees the refusal itself and, like any error, counts
//! it as a failure unless its classifier says otherwise.)

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::Clock as _;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{NotUntil, Quota};

use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Sleeper, Strategy, emit};
use crate::clock::{Clock, MonotonicClock, Timestamp};
use crate::error::ConfigError;
use crate::event::{Event, EventListener, into_arc as listener_arc};

/// interlock's [`Clock`] as governor's clock, so a limiter runs on
/// [`ManualClock`](crate::ManualClock) in tests.
#[derive(Clone, Debug)]
struct GovernorClock(Arc<dyn Clock>);

impl governor::clock::Clock for GovernorClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.0.now().as_nanos())
    }
}

type Direct = governor::RateLimiter<NotKeyed, InMemoryState, GovernorClock, NoOpMiddleware<Nanos>>;
type Keyed = governor::RateLimiter<
    Arc<str>,
    DashMapStateStore<Arc<str>>,
    GovernorClock,
    NoOpMiddleware<Nanos>,
>;

enum Limiter {
    Direct(Direct),
    Keyed(Keyed),
}

struct Shared {
    name: Arc<str>,
    calls: u32,
    period: Duration,
    burst: u32,
    max_wait: Duration,
    limiter: Limiter,
    clock: GovernorClock,
    sleeper: Arc<dyn Sleeper>,
    listeners: Box<[Arc<dyn EventListener>]>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("name", &self.name)
            .field("calls", &self.calls)
            .field("period", &self.period)
            .field("burst", &self.burst)
            .field("max_wait", &self.max_wait)
            .field("keyed", &matches!(self.limiter, Limiter::Keyed(_)))
            .finish_non_exhaustive()
    }
}

/// Admits at most `calls` per `period` through a layer (with bursts of up to
/// `burst`), refusing the rest with [`Exceeded`] or making them wait up to
/// `max_wait`; see the [module docs](self).
///
/// Cloning is cheap and shares the limit. A `RateLimit` taken from a
/// [`KeyedRateLimit`] meters its own key only.
#[derive(Clone, Debug)]
pub struct RateLimit {
    shared: Arc<Shared>,
    /// The key of a keyed limiter's handle (empty for a direct limiter).
    key: Arc<str>,
}

/// One GCRA limit per key, created on first use: per host, per tenant, per
/// API key. Every key gets the same quota and its own budget.
///
/// [`key`](Self::key) hands out a [`RateLimit`] for one key (to put in that
/// key's pipeline); the tower layer
/// [`KeyedRateLimitLayer`](crate::tower::KeyedRateLimitLayer) picks the key
/// of each request. A key's state is a few bytes; [`retain_recent`](Self::retain_recent)
/// forgets the keys that have been idle long enough to be indistinguishable
/// from new ones (call it from time to time when keys come and go).
///
/// ```
/// use interlock::pipeline::{Pipeline, RateLimit};
/// use interlock::ManualClock;
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let per_host = RateLimit::builder(1, Duration::from_secs(1)).name("hosts").clock(clock.clone()).build_keyed()?;
/// let a = Pipeline::builder().rate_limit(per_host.key("a.example")).build();
/// let b = Pipeline::builder().rate_limit(per_host.key("b.example")).build();
/// assert!(a.call(|| Ok::<_, std::io::Error>(())).is_ok());
/// assert!(a.call(|| Ok::<_, std::io::Error>(())).unwrap_err().rate_limited().is_some());
/// assert!(b.call(|| Ok::<_, std::io::Error>(())).is_ok()); // its own budget
/// assert_eq!(per_host.len(), 2);
///
/// clock.advance(Duration::from_secs(2));
/// per_host.retain_recent(); // both are idle: nothing to remember
/// assert_eq!(per_host.len(), 0);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct KeyedRateLimit {
    shared: Arc<Shared>,
}

/// Builds a [`RateLimit`] or a [`KeyedRateLimit`].
#[must_use = "a builder does nothing until `build()`"]
pub struct RateLimitBuilder {
    name: String,
    calls: u32,
    period: Duration,
    burst: Option<u32>,
    max_wait: Duration,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    listeners: Vec<Arc<dyn EventListener>>,
}

impl fmt::Debug for RateLimitBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitBuilder")
            .field("name", &self.name)
            .field("calls", &self.calls)
            .field("period", &self.period)
            .field("burst", &self.burst)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl RateLimit {
    /// A builder for `calls` per `period`, in bursts of up to `calls`,
    /// refusing at once what is over the limit.
    pub fn builder(calls: u32, period: Duration) -> RateLimitBuilder {
        RateLimitBuilder {
            name: "rate-limit".into(),
            calls,
            period,
            burst: None,
            max_wait: Duration::ZERO,
            clock: Arc::new(MonotonicClock),
            sleeper: into_arc(StdSleeper),
            listeners: Vec::new(),
        }
    }

    /// A builder for `calls` per second.
    pub fn per_second(calls: u32) -> RateLimitBuilder {
        Self::builder(calls, Duration::from_secs(1))
    }

    /// The name its events and errors carry.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The key it meters, if it came from a [`KeyedRateLimit`].
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        self.shared.key(&self.key)
    }

    /// Takes one call's worth of budget now, if there is one, without
    /// waiting: for code that is not a pipeline.
    ///
    /// # Errors
    ///
    /// [`Exceeded`] (also reported to the listeners) when over the limit.
    ///
    /// ```
    /// use interlock::pipeline::RateLimit;
    ///
    /// let limit = RateLimit::per_second(1).build()?;
    /// assert!(limit.check().is_ok());
    /// assert!(limit.check().is_err());
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn check(&self) -> Result<(), Exceeded> {
        self.shared
            .check(&self.key)
            .map_err(|wait| self.reject(wait))
    }

    fn reject(&self, retry_after: Duration) -> Exceeded {
        let shared = &self.shared;
        let key = shared.key(&self.key);
        emit(
            &shared.listeners,
            &Event::RateLimitRejected {
                name: &shared.name,
                key,
                retry_after,
            },
        );
        Exceeded {
            name: Arc::clone(&shared.name),
            key: key.map(|_| Arc::clone(&self.key)),
            retry_after,
        }
    }

    /// Decides one call: `Ok(None)` to go now, `Ok(Some(wait))` to sleep
    /// and ask again, `Err` to refuse.
    pub(crate) fn admit(&self, deadline: Option<Timestamp>) -> Result<Option<Duration>, Exceeded> {
        let shared = &self.shared;
        let wait = match shared.check(&self.key) {
            Ok(()) => return Ok(None),
            // Never a zero wait: on a manual clock it would spin.
            Err(wait) => wait.max(Duration::from_nanos(1)),
        };
        let fits = match deadline {
            _ if shared.max_wait.is_zero() => false,
            None => true,
            Some(deadline) => shared.clock.0.now().saturating_add(wait) <= deadline,
        };
        if fits {
            Ok(Some(wait))
        } else {
            Err(self.reject(wait))
        }
    }

    /// When waiting must end, or `None` for "no deadline" (`Duration::MAX`).
    pub(crate) fn deadline(&self) -> Option<Timestamp> {
        let max_wait = self.shared.max_wait;
        (!max_wait.is_zero() && max_wait != Duration::MAX)
            .then(|| self.shared.clock.0.now().saturating_add(max_wait))
    }
}

impl RateLimit {
    /// A wait on the limit's sleeper.
    pub(crate) fn sleep(&self, wait: Duration) -> super::Sleep {
        self.shared.sleeper.sleep(wait)
    }
}

impl Shared {
    fn key<'a>(&self, key: &'a Arc<str>) -> Option<&'a str> {
        matches!(self.limiter, Limiter::Keyed(_)).then_some(&**key)
    }

    /// One GCRA decision; `Err` holds the wait until a call would conform.
    fn check(&self, key: &Arc<str>) -> Result<(), Duration> {
        let refused = |not_until: NotUntil<Nanos>| not_until.wait_time_from(self.clock.now());
        match &self.limiter {
            Limiter::Direct(limiter) => limiter.check().map_err(refused),
            Limiter::Keyed(limiter) => limiter.check_key(key).map_err(refused),
        }
    }
}

impl KeyedRateLimit {
    /// The limit of `key` (created at its first call), as a strategy.
    #[must_use]
    pub fn key(&self, key: &str) -> RateLimit {
        RateLimit {
            shared: Arc::clone(&self.shared),
            key: Arc::from(key),
        }
    }

    /// The name its events and errors carry.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Forgets the keys whose state is a new key's again (governor's
    /// `retain_recent`: idle for their whole budget's refill plus one
    /// emission interval).
    pub fn retain_recent(&self) {
        if let Limiter::Keyed(limiter) = &self.shared.limiter {
            limiter.retain_recent();
        }
    }

    /// How many keys it holds state for.
    #[must_use]
    pub fn len(&self) -> usize {
        match &self.shared.limiter {
            Limiter::Keyed(limiter) => limiter.len(),
            Limiter::Direct(_) => 0,
        }
    }

    /// Whether it holds state for no key.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RateLimitBuilder {
    /// The largest burst after a quiet spell (default `calls`).
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = Some(burst);
        self
    }

    /// How long a call over the limit may wait for its turn (default zero:
    /// refused at once). A call whose turn comes later than that is refused
    /// at once, without waiting; [`Duration::MAX`] waits as long as it takes.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// The name its events and errors carry (default `"rate-limit"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a listener for [`Event::RateLimitRejected`].
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(listener_arc(listener));
        self
    }

    /// What waits sleep on (default [`StdSleeper`]).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = into_arc(sleeper);
        self
    }

    /// The clock the limit runs on (default [`MonotonicClock`]); give it
    /// the clock its sleeper advances or follows.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// One limit for every call.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `calls`, `period` or `burst` if it is zero,
    /// or `period` if it is shorter than `calls` nanoseconds.
    pub fn build(self) -> Result<RateLimit, ConfigError> {
        let shared = self.shared(|quota, clock| {
            Limiter::Direct(Direct::new(quota, InMemoryState::default(), clock))
        })?;
        Ok(RateLimit {
            shared: Arc::new(shared),
            key: Arc::from(""),
        })
    }

    /// One limit per key ([`KeyedRateLimit`]).
    ///
    /// # Errors
    ///
    /// As for [`build`](Self::build).
    pub fn build_keyed(self) -> Result<KeyedRateLimit, ConfigError> {
        let shared = self.shared(|quota, clock| {
            Limiter::Keyed(Keyed::new(quota, DashMapStateStore::default(), clock))
        })?;
        Ok(KeyedRateLimit {
            shared: Arc::new(shared),
        })
    }

    fn shared(
        self,
        limiter: impl FnOnce(Quota, GovernorClock) -> Limiter,
    ) -> Result<Shared, ConfigError> {
        let calls = NonZeroU32::new(self.calls)
            .ok_or_else(|| ConfigError::new("calls", "must be at least 1, got 0"))?;
        if self.period.is_zero() {
            return Err(ConfigError::new("period", "must be longer than zero"));
        }
        let burst = self.burst.unwrap_or(self.calls);
        let burst = NonZeroU32::new(burst)
            .ok_or_else(|| ConfigError::new("burst", "must be at least 1, got 0"))?;
        let quota = Quota::with_period(self.period / calls.get())
            .ok_or_else(|| {
                ConfigError::new(
                    "period",
                    format!(
                        "{:?} is too short for {} calls: at least 1 ns per call",
                        self.period, self.calls
                    ),
                )
            })?
            .allow_burst(burst);
        let clock = GovernorClock(self.clock);
        Ok(Shared {
            name: self.name.into(),
            calls: self.calls,
            period: self.period,
            burst: burst.get(),
            max_wait: self.max_wait,
            limiter: limiter(quota, clock.clone()),
            clock,
            sleeper: self.sleeper,
            listeners: self.listeners.into_boxed_slice(),
        })
    }
}

impl<T, E, K> Strategy<T, E, K> for RateLimit {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let deadline = self.deadline();
        loop {
            match self.admit(deadline) {
                Ok(None) => return next(),
                Ok(Some(wait)) => self.shared.sleeper.sleep_blocking(wait),
                Err(exceeded) => return Err(PipelineError::Other(Box::new(exceeded))),
            }
        }
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        // Nothing is taken before the wait ends: dropping this future while
        // it waits costs the limiter nothing.
        let deadline = self.deadline();
        loop {
            match self.admit(deadline) {
                Ok(None) => return next().await,
                Ok(Some(wait)) => self.sleep(wait).await,
                Err(exceeded) => return Err(PipelineError::Other(Box::new(exceeded))),
            }
        }
    }
}

/// A [`RateLimit`] refused a call; it did not run.
///
/// ```
/// use interlock::pipeline::rate_limit::{Exceeded, RateLimit};
/// use std::time::Duration;
///
/// let limit = RateLimit::per_second(1).name("search").build()?;
/// limit.check()?;
/// let exceeded: Exceeded = limit.check().unwrap_err();
/// assert_eq!(exceeded.name(), "search");
/// assert_eq!(exceeded.key(), None);
/// assert!(exceeded.retry_after() <= Duration::from_secs(1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeded {
    name: Arc<str>,
    key: Option<Arc<str>>,
    retry_after: Duration,
}

impl Exceeded {
    /// The limiter's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The key that was over its limit, for a keyed limiter.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// How long until the limiter would admit a call (if nobody else takes
    /// the turn first).
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limit '{}' exceeded", self.name)?;
        if let Some(key) = &self.key {
            write!(f, " for '{key}'")?;
        }
        write!(
            f,
            ", next call allowed in {:.3}s",
            self.retry_after.as_secs_f64()
        )
    }
}

impl Error for Exceeded {}

impl<E> PipelineError<E> {
    /// The rate limiter's refusal, if a [`RateLimit`] refused the call.
    ///
    /// ```
    /// use interlock::pipeline::{Pipeline, RateLimit};
    ///
    /// let pipeline = Pipeline::builder().rate_limit(RateLimit::per_second(1).build()?).build();
    /// pipeline.call(|| Ok::<_, std::io::Error>(()))?;
    /// let err = pipeline.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
    /// assert!(err.rate_limited().is_some() && !err.is_rejected());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
    #[must_use]
    pub fn rate_limited(&self) -> Option<&Exceeded> {
        match self {
            PipelineError::Other(other) => other.downcast_ref(),
            _ => None,
        }
    }
}
