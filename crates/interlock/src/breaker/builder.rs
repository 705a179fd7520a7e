//! [`CircuitBreakerBuilder`].

use std::error::Error;
use std::marker::PhantomData;
use std::sync::Arc;

use super::coordinator::Coordinator;
use crate::breaker::coordinator::Lane;
use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{Clock, ClockHandle};
use crate::config::Config;
use crate::error::ConfigError;
use crate::event::{EventListener, into_arc};
use crate::machine::Machine;
use crate::mode::{Local, Mode};
use crate::state::State;

use super::CircuitBreaker;

/// Builds a [`CircuitBreaker`]; every check happens in [`build`](Self::build).
///
/// ```
/// use interlock::{CircuitBreaker, Config, Event, ManualClock, State};
///
/// let breaker = CircuitBreaker::builder("payments")
///     .config(Config::builder().minimum_number_of_calls(20).build()?)
///     .clock(ManualClock::new())
///     .listener(|event: &Event<'_>| eprintln!("{event}"))
///     .initial_state(State::MetricsOnly)
///     .build()?;
/// assert_eq!(breaker.state(), State::MetricsOnly);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[must_use]
pub struct CircuitBreakerBuilder<M = Local> {
    name: String,
    config: Config,
    clock: ClockHandle,
    listeners: Vec<Arc<dyn EventListener>>,
    classifier: Option<ErrorClassifier>,
    initial_state: State,
    lane: Option<Arc<Lane>>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for CircuitBreakerBuilder<M> {
    fn clone(&self) -> Self {
        CircuitBreakerBuilder {
            name: self.name.clone(),
            config: self.config.clone(),
            clock: self.clock.clone(),
            listeners: self.listeners.clone(),
            classifier: self.classifier.clone(),
            initial_state: self.initial_state,
            lane: self.lane.clone(),
            mode: PhantomData,
        }
    }
}

impl<M> std::fmt::Debug for CircuitBreakerBuilder<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreakerBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .field("clock", &self.clock)
            .field("listeners", &self.listeners.len())
            .field("initial_state", &self.initial_state)
            .field("coordinated", &self.lane.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Parts {
    pub(crate) name: String,
    pub(crate) config: Config,
    pub(crate) clock: ClockHandle,
    pub(crate) listeners: Vec<Arc<dyn EventListener>>,
    pub(crate) classifier: Option<ErrorClassifier>,
    pub(crate) machine: Machine,
    pub(crate) lane: Option<Arc<Lane>>,
}

impl CircuitBreakerBuilder {
    pub(crate) fn new(name: &str) -> Self {
        CircuitBreakerBuilder {
            name: name.to_owned(),
            config: Config::default(),
            clock: ClockHandle::default(),
            listeners: Vec::new(),
            classifier: None,
            initial_state: State::Closed,
            lane: None,
            mode: PhantomData,
        }
    }
}

impl<M: Mode> CircuitBreakerBuilder<M> {
    /// The breaker's config (default: [`Config::default`]).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The clock for waits and call durations. Without one, the breaker
    /// reads [`CoarseClock`](crate::CoarseClock) when its
    /// `slow_call_duration_threshold` is at least
    /// [`COARSE_MIN_SLOW_THRESHOLD`](crate::COARSE_MIN_SLOW_THRESHOLD)
    /// (100 ms; the default is 60 s) and
    /// [`MonotonicClock`](crate::MonotonicClock) below it.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = ClockHandle::from_clock(clock);
        self
    }

    /// Adds a listener; call it again to add more. Each is isolated from the
    /// others' panics.
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(into_arc(listener));
        self
    }

    /// The breaker-wide error policy for calls classified by default: it
    /// sees every error as `&(dyn Error + 'static)` (downcast it to inspect
    /// it) and returns a [`Verdict`]. Without one, every error is a failure.
    pub fn classifier<C>(mut self, classifier: C) -> Self
    where
        C: Fn(&(dyn Error + 'static)) -> Verdict + Send + Sync + 'static,
    {
        self.classifier = Some(ErrorClassifier(Arc::new(classifier)));
        self
    }

    /// The state the breaker starts in: CLOSED (default), FORCED_OPEN,
    /// DISABLED or METRICS_ONLY. Starting is not a transition: no event.
    pub fn initial_state(mut self, state: State) -> Self {
        self.initial_state = state;
        self
    }

    /// Coordinates the breaker through `coordinator`'s shared storage under
    /// its own name; the coordinator's mode becomes the breaker's (see
    /// [`crate::mode`]).
    pub fn coordinator<N: Mode>(self, coordinator: &Coordinator<N>) -> CircuitBreakerBuilder<N> {
        CircuitBreakerBuilder {
            name: self.name,
            config: self.config,
            clock: self.clock,
            listeners: self.listeners,
            classifier: self.classifier,
            initial_state: self.initial_state,
            lane: Some(Arc::clone(&coordinator.lane)),
            mode: PhantomData,
        }
    }

    pub(crate) fn shared(
        name: &str,
        config: Config,
        clock: ClockHandle,
        listeners: Vec<Arc<dyn EventListener>>,
        classifier: Option<ErrorClassifier>,
        initial_state: State,
        lane: Option<Arc<Lane>>,
    ) -> Self {
        CircuitBreakerBuilder {
            name: name.to_owned(),
            config,
            clock,
            listeners,
            classifier,
            initial_state,
            lane,
            mode: PhantomData,
        }
    }

    /// Builds the breaker.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `initial_state` if it is OPEN or HALF_OPEN
    /// (R3.1), or `wait_duration_backoff_multiplier` if it is not 1.0 on a
    /// coordinated breaker (R2.4).
    pub fn build(self) -> Result<CircuitBreaker<M>, ConfigError> {
        if self.lane.is_some() {
            self.config.validate_for_storage()?;
        }
        let machine = Machine::new(self.config.clone(), self.initial_state)?;
        Ok(CircuitBreaker::from_parts(Parts {
            name: self.name,
            config: self.config,
            clock: self.clock,
            listeners: self.listeners,
            classifier: self.classifier,
            machine,
            lane: self.lane,
        }))
    }
}
