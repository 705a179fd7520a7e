//! Chaos injection: [`Fault`], [`Latency`] and [`Outcome`] strategies that
//! make a share of calls fail, slow down or return a chosen result, to
//! check that the layers around them (and the service) cope.
//!
//! Each one:
//!
//! - injects into a share of the calls, its **injection rate** in `[0, 1]`
//!   (`0.0` never, `1.0` every call);
//! - has a [`Switch`] that turns it on and off **at run time**, from any
//!   thread; several strategies can share one switch;
//! - draws from a generator seeded with [`seed`](Builder::seed), so a test
//!   that makes the same calls in the same order sees the same injections;
//! - reports every injection to its listeners ([`Event::FaultInjected`],
//!   [`Event::LatencyInjected`], [`Event::OutcomeInjected`]).
//!
//! Nothing is injected unless such a strategy is built and added to a
//! pipeline: there is no global chaos switch to leave on by accident.
//!
//! Put chaos **innermost**, where the dependency would be, so the timeout,
//! breaker, retry and fallback above it see the injected faults as real
//! ones: `Fallback(Retry(CircuitBreaker(Timeout(Chaos(call)))))`.
//!
//! ```
//! use interlock::pipeline::{chaos, Pipeline};
//!
//! let fault = chaos::Fault::builder(|| std::io::Error::other("injected"))
//!     .injection_rate(1.0)
//!     .seed(7)
//!     .build()?;
//! let switch = fault.switch();
//! let pipeline = Pipeline::builder().chaos(fault).build();
//!
//! let err = pipeline.call(|| Ok::<_, std::io::Error>("real")).unwrap_err();
//! assert_eq!(err.to_string(), "injected"); // the call did not run
//!
//! switch.disable(); // at run time, e.g. from an admin endpoint
//! assert_eq!(pipeline.call(|| Ok::<_, std::io::Error>("real"))?, "real");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Event::FaultInjected`]: crate::Event::FaultInjected
//! [`Event::LatencyInjected`]: crate::Event::LatencyInjected
//! [`Event::OutcomeInjected`]: crate::Event::OutcomeInjected

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::rng::SplitMix;
use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Sleeper, Strategy, emit};
use crate::error::{ConfigError, Shown};
use crate::event::{Event, EventListener, into_arc as listener_arc};

/// Turns chaos strategies on and off at run time. Clones share the state.
///
/// ```
/// use interlock::pipeline::chaos::{self, Switch};
/// use std::time::Duration;
///
/// // One switch for every chaos strategy of a service, off to start with.
/// let switch = Switch::new(false);
/// let fault = chaos::Fault::builder(|| std::io::Error::other("chaos")).switch(switch.clone()).build()?;
/// let slow = chaos::Latency::builder(Duration::from_secs(1)).switch(switch.clone()).build()?;
/// assert!(!fault.switch().is_enabled() && !slow.switch().is_enabled());
/// switch.enable();
/// assert!(fault.switch().is_enabled() && slow.switch().is_enabled());
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Switch(Arc<AtomicBool>);

impl Switch {
    /// A switch, on or off.
    #[must_use]
    pub fn new(enabled: bool) -> Self {
        Switch(Arc::new(AtomicBool::new(enabled)))
    }

    /// Turns injection on.
    pub fn enable(&self) {
        self.set(true);
    }

    /// Turns injection off: calls pass through untouched.
    pub fn disable(&self) {
        self.set(false);
    }

    /// Turns injection on or off.
    pub fn set(&self, enabled: bool) {
        self.0.store(enabled, Ordering::Relaxed);
    }

    /// Whether injection is on.
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for Switch {
    /// A switch that is on.
    fn default() -> Self {
        Switch::new(true)
    }
}

/// What every chaos strategy shares: name, rate, switch, generator, listeners.
struct Common {
    name: Arc<str>,
    rate: f64,
    switch: Switch,
    rng: SplitMix,
    listeners: Box<[Arc<dyn EventListener>]>,
}

impl Common {
    /// Whether to inject into this call (draws only while switched on).
    fn roll(&self) -> bool {
        self.switch.is_enabled() && self.rng.chance(self.rate)
    }

    fn report(&self, event: &Event<'_>) {
        emit(&self.listeners, event);
    }
}

impl fmt::Debug for Common {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chaos")
            .field("name", &self.name)
            .field("injection_rate", &self.rate)
            .field("enabled", &self.switch.is_enabled())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Fault`], [`Latency`] or [`Outcome`]; `K` is the part that
/// differs ([`FaultKind`], [`LatencyKind`], [`OutcomeKind`]).
#[must_use = "a builder does nothing until `build()`"]
pub struct Builder<K> {
    kind: K,
    name: String,
    rate: f64,
    switch: Option<Switch>,
    enabled: bool,
    seed: Option<u64>,
    listeners: Vec<Arc<dyn EventListener>>,
}

impl<K> fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("chaos::Builder")
            .field("name", &self.name)
            .field("injection_rate", &self.rate)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl<K> Builder<K> {
    fn new(kind: K, name: &str) -> Self {
        Builder {
            kind,
            name: name.into(),
            rate: 0.1,
            switch: None,
            enabled: true,
            seed: None,
            listeners: Vec::new(),
        }
    }

    /// The share of calls to inject into, in `[0, 1]` (default `0.1`).
    pub fn injection_rate(mut self, rate: f64) -> Self {
        self.rate = rate;
        self
    }

    /// Whether it starts switched on (default `true`); see
    /// [`switch`](Self::switch) to flip it later.
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// Uses `switch` (shared with other strategies) instead of a switch of
    /// its own; overrides [`enabled`](Self::enabled).
    pub fn switch(mut self, switch: Switch) -> Self {
        self.switch = Some(switch);
        self
    }

    /// Seeds the generator that picks the calls (default: a random seed),
    /// for reproducible tests.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The name its events carry.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a listener for its injection events.
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(listener_arc(listener));
        self
    }

    fn common(
        name: String,
        rate: f64,
        switch: Option<Switch>,
        enabled: bool,
        seed: Option<u64>,
        listeners: Vec<Arc<dyn EventListener>>,
    ) -> Result<Common, ConfigError> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(ConfigError::new(
                "injection_rate",
                format!("must be between 0 and 1, got {}", Shown(rate)),
            ));
        }
        Ok(Common {
            name: name.into(),
            rate,
            switch: switch.unwrap_or_else(|| Switch::new(enabled)),
            rng: SplitMix::new(seed.unwrap_or_else(SplitMix::random_seed)),
            listeners: listeners.into_boxed_slice(),
        })
    }

    fn split(self) -> (K, Result<Common, ConfigError>) {
        let common = Self::common(
            self.name,
            self.rate,
            self.switch,
            self.enabled,
            self.seed,
            self.listeners,
        );
        (self.kind, common)
    }
}

/// The part of a [`Builder`] that makes a [`Fault`]: its error generator.
#[derive(Debug)]
pub struct FaultKind<G>(G);

/// The part of a [`Builder`] that makes a [`Latency`]: delay and sleeper.
#[derive(Debug)]
pub struct LatencyKind {
    latency: Duration,
    sleeper: Arc<dyn Sleeper>,
}

/// The part of a [`Builder`] that makes an [`Outcome`]: its result generator.
#[derive(Debug)]
pub struct OutcomeKind<G>(G);

/// Fails a share of calls with an error of the call's own type, made by
/// its generator, instead of running them ([`PipelineError::Inner`]).
///
/// Each injection is reported as [`Event::FaultInjected`].
///
/// ```
/// use interlock::pipeline::{chaos, Pipeline};
/// use interlock::{CircuitBreaker, Config, SlidingWindow, State};
///
/// // Does the breaker open when half the calls fail? Find out without an outage.
/// let breaker = CircuitBreaker::builder("payments")
///     .config(Config::builder().sliding_window(SlidingWindow::count(10)).minimum_number_of_calls(10).build()?)
///     .build()?;
/// let pipeline = Pipeline::builder()
///     .circuit_breaker(breaker.clone())
///     .chaos(chaos::Fault::builder(|| std::io::Error::other("injected")).injection_rate(0.5).seed(3).build()?)
///     .build();
/// for _ in 0..20 {
///     let _ = pipeline.call(|| Ok::<_, std::io::Error>(()));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Fault<G> {
    common: Arc<Common>,
    fault: Arc<G>,
}

impl<G> Fault<G> {
    /// A builder of faults made by `fault` (called once per injection).
    pub fn builder(fault: G) -> Builder<FaultKind<G>> {
        Builder::new(FaultKind(fault), "chaos-fault")
    }
}

impl<G> Builder<FaultKind<G>> {
    /// The strategy.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `injection_rate` if it is outside `[0, 1]`.
    pub fn build(self) -> Result<Fault<G>, ConfigError> {
        let (FaultKind(fault), common) = self.split();
        Ok(Fault {
            common: Arc::new(common?),
            fault: Arc::new(fault),
        })
    }
}

/// Delays a share of calls by a fixed latency before running them.
///
/// The wait goes through its [`Sleeper`] ([`StdSleeper`] unless told
/// otherwise). A latency of [`Duration::MAX`] is a hang: on the async path
/// the call never starts (a timeout above it fires); on the blocking path
/// the sleeper is asked to wait that long. Each injection is reported as
/// [`Event::LatencyInjected`] before the wait.
///
/// ```
/// use interlock::pipeline::{chaos, ManualSleeper, Pipeline, PipelineError, Timeout};
/// use interlock::ManualClock;
/// use std::time::Duration;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// // Is the 2 s timeout really there? Make every call hang and look.
/// let clock = ManualClock::new();
/// let sleeper = ManualSleeper::new(clock.clone());
/// let pipeline = Pipeline::builder()
///     .timeout(Timeout::new(Duration::from_secs(2)).sleeper(sleeper.clone()))
///     .chaos(chaos::Latency::builder(Duration::MAX).injection_rate(1.0).build()?)
///     .build();
/// let result = block_on(pipeline.call_async(|| async { Ok::<_, std::io::Error>(()) }));
/// assert!(matches!(result, Err(PipelineError::Timeout(_))));
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub struct Latency {
    common: Arc<Common>,
    latency: Duration,
    sleeper: Arc<dyn Sleeper>,
}

impl Latency {
    /// A builder of delays of `latency`.
    pub fn builder(latency: Duration) -> Builder<LatencyKind> {
        Builder::new(
            LatencyKind {
                latency,
                sleeper: into_arc(StdSleeper),
            },
            "chaos-latency",
        )
    }

    /// The injected delay.
    #[must_use]
    pub fn latency(&self) -> Duration {
        self.latency
    }
}

impl Builder<LatencyKind> {
    /// What the delays sleep on (default [`StdSleeper`]).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.kind.sleeper = into_arc(sleeper);
        self
    }

    /// The strategy.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `injection_rate` if it is outside `[0, 1]`.
    pub fn build(self) -> Result<Latency, ConfigError> {
        let (LatencyKind { latency, sleeper }, common) = self.split();
        Ok(Latency {
            common: Arc::new(common?),
            latency,
            sleeper,
        })
    }
}

/// Answers a share of calls with a result made by its generator (a value
/// or an error of the call's own type) instead of running them: stale data,
/// an empty list, a 503 response.
///
/// Each injection is reported as [`Event::OutcomeInjected`].
///
/// ```
/// use interlock::pipeline::{chaos, Pipeline};
///
/// let pipeline = Pipeline::builder()
///     .chaos(chaos::Outcome::builder(|| Ok::<_, std::io::Error>(Vec::<u32>::new())).injection_rate(1.0).build()?)
///     .build();
/// assert!(pipeline.call(|| Ok::<_, std::io::Error>(vec![1, 2, 3]))?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Outcome<G> {
    common: Arc<Common>,
    outcome: Arc<G>,
}

impl<G> Outcome<G> {
    /// A builder of results made by `outcome` (called once per injection).
    pub fn builder(outcome: G) -> Builder<OutcomeKind<G>> {
        Builder::new(OutcomeKind(outcome), "chaos-outcome")
    }
}

impl<G> Builder<OutcomeKind<G>> {
    /// The strategy.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `injection_rate` if it is outside `[0, 1]`.
    pub fn build(self) -> Result<Outcome<G>, ConfigError> {
        let (OutcomeKind(outcome), common) = self.split();
        Ok(Outcome {
            common: Arc::new(common?),
            outcome: Arc::new(outcome),
        })
    }
}

macro_rules! common_accessors {
    ($([$($g:ident)?] $ty:ty),*) => {$(
        impl<$($g)?> $ty {
            /// The switch that turns it on and off (shared by its clones).
            #[must_use]
            pub fn switch(&self) -> Switch {
                self.common.switch.clone()
            }

            /// The share of calls it injects into while switched on.
            #[must_use]
            pub fn injection_rate(&self) -> f64 {
                self.common.rate
            }

            /// The name its events carry.
            #[must_use]
            pub fn name(&self) -> &str {
                &self.common.name
            }
        }

        impl<$($g)?> fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.common.fmt(f)
            }
        }
    )*};
}

common_accessors!([G] Fault<G>, [] Latency, [G] Outcome<G>);

impl<G> Clone for Fault<G> {
    fn clone(&self) -> Self {
        Fault {
            common: Arc::clone(&self.common),
            fault: Arc::clone(&self.fault),
        }
    }
}

impl Clone for Latency {
    fn clone(&self) -> Self {
        Latency {
            common: Arc::clone(&self.common),
            latency: self.latency,
            sleeper: Arc::clone(&self.sleeper),
        }
    }
}

impl<G> Clone for Outcome<G> {
    fn clone(&self) -> Self {
        Outcome {
            common: Arc::clone(&self.common),
            outcome: Arc::clone(&self.outcome),
        }
    }
}

impl<T, E, K, G> Strategy<T, E, K> for Fault<G>
where
    G: Fn() -> E + Send + Sync + 'static,
{
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        match self.inject() {
            Some(error) => Err(error),
            None => next(),
        }
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        match self.inject() {
            Some(error) => Err(error),
            None => next().await,
        }
    }
}

impl<G> Fault<G> {
    fn inject<E>(&self) -> Option<PipelineError<E>>
    where
        G: Fn() -> E,
    {
        self.injected().map(PipelineError::Inner)
    }

    /// The injected error, if this call is one to fail (reported).
    pub(crate) fn injected<X>(&self) -> Option<X>
    where
        G: Fn() -> X,
    {
        let common = &self.common;
        if !common.roll() {
            return None;
        }
        common.report(&Event::FaultInjected { name: &common.name });
        Some((self.fault)())
    }
}

impl<T, E, K, G> Strategy<T, E, K> for Outcome<G>
where
    G: Fn() -> Result<T, E> + Send + Sync + 'static,
{
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        match self.inject() {
            Some(result) => result,
            None => next(),
        }
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        match self.inject() {
            Some(result) => result,
            None => next().await,
        }
    }
}

impl<G> Outcome<G> {
    fn inject<T, E>(&self) -> Option<Result<T, PipelineError<E>>>
    where
        G: Fn() -> Result<T, E>,
    {
        self.injected()
            .map(|result| result.map_err(PipelineError::Inner))
    }

    /// The injected result, if this call is one to answer (reported).
    pub(crate) fn injected<R>(&self) -> Option<R>
    where
        G: Fn() -> R,
    {
        let common = &self.common;
        if !common.roll() {
            return None;
        }
        common.report(&Event::OutcomeInjected { name: &common.name });
        Some((self.outcome)())
    }
}

impl Latency {
    /// Whether to delay this call (reported before the wait).
    pub(crate) fn inject(&self) -> bool {
        let common = &self.common;
        if !common.roll() {
            return false;
        }
        common.report(&Event::LatencyInjected {
            name: &common.name,
            latency: self.latency,
        });
        true
    }
}

impl Latency {
    /// The injected wait; for [`Duration::MAX`], a hang (no deadline, so
    /// no sleep to arm).
    pub(crate) fn delay(&self) -> super::Sleep {
        if self.latency == Duration::MAX {
            Box::pin(std::future::pending())
        } else {
            self.sleeper.sleep(self.latency)
        }
    }
}

impl<T, E, K> Strategy<T, E, K> for Latency {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        if self.inject() {
            self.sleeper.sleep_blocking(self.latency);
        }
        next()
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        if self.inject() {
            self.delay().await;
        }
        next().await
    }
}

/// The chaos strategies, for [`PipelineBuilder::chaos`](super::PipelineBuilder::chaos).
pub trait Injection: sealed::Sealed {}

impl<G> Injection for Fault<G> {}
impl Injection for Latency {}
impl<G> Injection for Outcome<G> {}

mod sealed {
    pub trait Sealed {}
    impl<G> Sealed for super::Fault<G> {}
    impl Sealed for super::Latency {}
    impl<G> Sealed for super::Outcome<G> {}
}
