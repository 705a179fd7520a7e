//! [`RegistryBuilder`]: the template every breaker of a registry is made
//! from, and the registry's bounds.

use super::*;

/// Builds a [`Registry`]; every check happens in [`build`](Self::build).
#[must_use]
pub struct RegistryBuilder<M = Local> {
    pub(super) template: Template,
    pub(super) mode: PhantomData<fn() -> M>,
}

impl<M> Clone for RegistryBuilder<M> {
    fn clone(&self) -> Self {
        RegistryBuilder {
            template: self.template.clone(),
            mode: PhantomData,
        }
    }
}

impl<M> fmt::Debug for RegistryBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("config", &self.template.config)
            .field("initial_state", &self.template.initial_state)
            .finish_non_exhaustive()
    }
}

impl<M: Mode> RegistryBuilder<M> {
    /// Coordinates every breaker through `coordinator`'s storage, each under
    /// its own name (R14.1); the coordinator's mode becomes the registry's.
    pub fn coordinator<N: Mode>(self, coordinator: &Coordinator<N>) -> RegistryBuilder<N> {
        let mut template = self.template;
        template.lane = Some(Arc::clone(&coordinator.lane));
        RegistryBuilder {
            template,
            mode: PhantomData,
        }
    }

    /// The config of breakers created without one of their own.
    pub fn config(mut self, config: Config) -> Self {
        self.template.config = config;
        self
    }

    /// The clock every breaker uses. Without one, each breaker picks its
    /// own from its slow-call threshold, as
    /// [`CircuitBreakerBuilder::clock`](crate::CircuitBreakerBuilder::clock)
    /// says. It is also the registry's clock for
    /// [`expire_after_idle`](Self::expire_after_idle) (read as
    /// [`CoarseClock`](crate::CoarseClock) when none is given or it is
    /// [`MonotonicClock`](crate::MonotonicClock)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.template.clock = ClockHandle::from_clock(clock);
        self
    }

    /// Adds a listener every breaker reports to.
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.template.listeners.push(into_arc(listener));
        self
    }

    /// The error policy of every breaker (see
    /// [`CircuitBreakerBuilder::classifier`]).
    pub fn classifier<C>(mut self, classifier: C) -> Self
    where
        C: Fn(&(dyn std::error::Error + 'static)) -> Verdict + Send + Sync + 'static,
    {
        self.template.classifier = Some(ErrorClassifier(Arc::new(classifier)));
        self
    }

    /// The state every breaker starts in (applied before it is published).
    pub fn initial_state(mut self, state: State) -> Self {
        self.template.initial_state = state;
        self
    }

    /// Forgets a breaker neither handed out (by [`Registry::get`],
    /// [`get_with_config`](Registry::get_with_config) or
    /// [`get_existing`](Registry::get_existing)) nor called (admitted or
    /// rejected) for `idle`, on the registry's clock: it is gone at the
    /// latest after the first `get` of any name once `idle` has passed.
    /// Listing ([`Registry::items`]) and reading a breaker's state are not
    /// uses. Its listeners receive [`Event::BreakerRemoved`].
    ///
    /// Expiry is checked on `get`, with no thread of its own: a registry
    /// nobody asks for names keeps its breakers until the next `get`. The
    /// check is one clock read and one comparison per `get`; when one may
    /// have expired, the `get` goes over the registry once (at most once per
    /// 1/1024 of `idle`, so a breaker may outlive `idle` by that much when
    /// others expire just before it). A call on a breaker created with
    /// [`MonotonicClock`](crate::MonotonicClock) is stamped to about a
    /// millisecond, never earlier than it happened.
    ///
    /// ```
    /// use interlock::{ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::builder()
    ///     .clock(clock.clone())
    ///     .expire_after_idle(Duration::from_secs(600))
    ///     .build()?;
    /// let _ = registry.get("a.example.com:443");
    /// let busy = registry.get("b.example.com:443");
    /// clock.advance(Duration::from_secs(400));
    /// busy.call(|| Ok::<_, std::io::Error>(())).unwrap(); // a call is a use
    /// clock.advance(Duration::from_secs(200));
    /// let _ = registry.get("c.example.com:443"); // any get sweeps
    /// assert_eq!(registry.names(), ["b.example.com:443", "c.example.com:443"]);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn expire_after_idle(mut self, idle: Duration) -> Self {
        self.template.idle = Some(idle);
        self
    }

    /// Holds at most `max` breakers: creating one more first forgets the
    /// expired ones (with [`expire_after_idle`](Self::expire_after_idle)),
    /// then the least recently used (handed out or called, as for
    /// `expire_after_idle`; ties go to the oldest). It forgets 1/32 of
    /// `max` (at least one) at a time, so that a stream of new names past
    /// the bound costs amortized constant work per name, not a pass over
    /// the registry each. Their listeners receive [`Event::BreakerRemoved`].
    ///
    /// An evicted breaker's state is lost: a host it had tripped for is
    /// called again at once if asked for. Choose `max` well above the
    /// number of names in use at a time.
    ///
    /// ```
    /// use interlock::{ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::builder().clock(clock.clone()).max_breakers(2).build()?;
    /// let _ = registry.get("a");
    /// clock.advance(Duration::from_secs(1));
    /// let _ = registry.get("b");
    /// clock.advance(Duration::from_secs(1));
    /// let _ = registry.get("a"); // now "b" is the least recently used
    /// let _ = registry.get("c");
    /// assert_eq!(registry.names(), ["a", "c"]);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn max_breakers(mut self, max: usize) -> Self {
        self.template.max = Some(max);
        self
    }

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `initial_state` if it is OPEN or HALF_OPEN,
    /// `wait_duration_backoff_multiplier` if it is not 1.0 with a
    /// coordinator (R14.5, R2.4), `expire_after_idle` if it is zero, or
    /// `max_breakers` if it is zero.
    pub fn build(self) -> Result<Registry<M>, ConfigError> {
        crate::machine::Machine::new(self.template.config.clone(), self.template.initial_state)?;
        if self.template.lane.is_some() {
            self.template.config.validate_for_storage()?;
        }
        if self.template.idle == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                "expire_after_idle",
                "must be longer than zero (a breaker would expire as it is handed out)",
            ));
        }
        if self.template.max == Some(0) {
            return Err(ConfigError::new(
                "max_breakers",
                "must be at least 1 (a registry must hold the breaker it hands out)",
            ));
        }
        Ok(Registry::from_template(self.template))
    }
}
