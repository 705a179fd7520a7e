//! [`HostRegistry`]: the per-host breakers of one adapter, owned or shared.

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::mode::{Local, Mode};
use crate::{
    CircuitBreaker, Clock, Config, ConfigError, EventListener, Registry, RegistryBuilder, State,
};

/// How long an owned per-host registry keeps a host neither requested nor
/// called: 10 minutes ([`HostRegistryBuilder::expire_after_idle`]).
pub const DEFAULT_EXPIRE_AFTER_IDLE: Duration = Duration::from_secs(600);

/// How many hosts an owned per-host registry keeps at most: 10,000
/// ([`HostRegistryBuilder::max_hosts`]).
pub const DEFAULT_MAX_HOSTS: usize = 10_000;

/// The registry an HTTP adapter takes its per-host breakers from, and who
/// closes it.
///
/// An owned registry is **bounded by default**: a client that follows
/// user-supplied or redirected URLs meets unboundedly many hosts, so it
/// forgets a host after [`DEFAULT_EXPIRE_AFTER_IDLE`] (10 minutes) without
/// requests and keeps at most [`DEFAULT_MAX_HOSTS`] (10,000), evicting the
/// least recently used (see [`RegistryBuilder::expire_after_idle`] and
/// [`RegistryBuilder::max_breakers`]). A forgotten host's breaker sends
/// [`Event::BreakerRemoved`](crate::Event::BreakerRemoved) to its
/// listeners; its next request starts a fresh breaker. A shared registry
/// is bounded (or not) as its owner built it.
///
/// - **Owned** (built from options): the adapter created the registry, so
///   [`close`](Self::close) or dropping the last clone of the adapter
///   closes every breaker in it ([`Registry::close_all`]).
/// - **Shared** ([`HostRegistry::shared`] or the builder's
///   [`registry`](HostRegistryBuilder::registry)): the registry belongs to
///   the caller, who closes it; the adapter leaves it open. It already owns
///   the config, clock, listeners and initial state of its breakers, so
///   passing any of those as well is a [`BuildError::SharedRegistry`].
///
/// Clones share the registry and the ownership.
///
/// The mode `M` is the shared registry's: a registry coordinated through a
/// storage ([`Registry<Blocking>`](crate::mode::Blocking) or
/// [`Registry<Async>`](crate::mode::Async), see
/// [`RegistryBuilder::coordinator`](crate::RegistryBuilder::coordinator))
/// makes every host's breaker fleet-wide. An owned registry is always
/// [`Local`].
///
/// ```
/// use interlock::http::{BuildError, HostRegistry};
/// use interlock::{Registry, State};
///
/// // Safe rollout: every host starts in METRICS_ONLY (it never rejects).
/// let owned = HostRegistry::builder().initial_state(State::MetricsOnly).build()?;
/// assert_eq!(owned.breaker("api.example.com:443").state(), State::MetricsOnly);
/// assert!(owned.is_owned());
///
/// let shared = Registry::new();
/// let err = HostRegistry::builder()
///     .registry(shared.clone())
///     .initial_state(State::MetricsOnly)
///     .build()
///     .unwrap_err();
/// assert_eq!(err, BuildError::SharedRegistry { option: "initial_state" });
/// # Ok::<(), BuildError>(())
/// ```
pub struct HostRegistry<M = Local> {
    registry: Registry<M>,
    owner: Option<Arc<Owner>>,
}

impl<M> Clone for HostRegistry<M> {
    fn clone(&self) -> Self {
        HostRegistry {
            registry: self.registry.clone(),
            owner: self.owner.clone(),
        }
    }
}

/// Closes an owned (always local) registry when the last adapter holding
/// it goes away.
struct Owner(Registry);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close_all();
    }
}

impl HostRegistry {
    /// An owned registry with the default config and bounds.
    #[must_use]
    pub fn new() -> Self {
        match HostRegistry::builder().build() {
            Ok(registry) => registry,
            Err(_) => unreachable!("the default options are valid"),
        }
    }

    /// A builder for an owned registry, or for a shared one with
    /// [`registry`](HostRegistryBuilder::registry).
    pub fn builder() -> HostRegistryBuilder {
        HostRegistryBuilder {
            builder: Registry::builder()
                .expire_after_idle(DEFAULT_EXPIRE_AFTER_IDLE)
                .max_breakers(DEFAULT_MAX_HOSTS),
            shared: None,
            options: Vec::new(),
        }
    }

    fn owned(registry: Registry) -> Self {
        HostRegistry {
            owner: Some(Arc::new(Owner(registry.clone()))),
            registry,
        }
    }
}

impl<M: Mode> HostRegistry<M> {
    /// The caller's `registry`, left open when the adapter closes.
    ///
    /// ```
    /// use interlock::http::HostRegistry;
    /// use interlock::storage::{Coordinator, MemoryStorage};
    /// use interlock::Registry;
    ///
    /// // Per-host breakers shared by a fleet through a storage.
    /// let coordinator = Coordinator::manual(MemoryStorage::new());
    /// let fleet_wide = Registry::builder().coordinator(&coordinator).build()?;
    /// let hosts = HostRegistry::shared(fleet_wide);
    /// assert!(hosts.breaker("api.example.com:443").is_coordinated());
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn shared(registry: Registry<M>) -> Self {
        HostRegistry {
            registry,
            owner: None,
        }
    }

    /// The registry, for diagnosis: [`Registry::get_existing`],
    /// [`Registry::names`] and [`Registry::items`] show the hosts seen so
    /// far.
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        &self.registry
    }

    /// Whether the adapter created the registry (and so closes it).
    #[must_use]
    pub fn is_owned(&self) -> bool {
        self.owner.is_some()
    }

    /// The breaker for `name`, created on first use.
    #[must_use]
    pub fn breaker(&self, name: &str) -> CircuitBreaker<M> {
        self.registry.get(name)
    }

    /// Closes every breaker of an owned registry now (they keep working on
    /// local state, see [`CircuitBreaker::close`]); does nothing to a
    /// shared one. Idempotent.
    pub fn close(&self) {
        if let Some(owner) = &self.owner {
            owner.0.close_all();
        }
    }
}

impl Default for HostRegistry {
    fn default() -> Self {
        HostRegistry::new()
    }
}

impl<M: Mode> fmt::Debug for HostRegistry<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistry")
            .field("registry", &self.registry)
            .field("owned", &self.is_owned())
            .finish()
    }
}

/// Builds a [`HostRegistry`]; conflicts are reported by
/// [`build`](Self::build).
///
/// `M` is the mode of a shared registry given with
/// [`registry`](Self::registry); without one the registry is owned and
/// [`Local`].
#[must_use]
pub struct HostRegistryBuilder<M = Local> {
    /// The owned registry's options (unused once a shared one is given).
    builder: RegistryBuilder,
    shared: Option<Registry<M>>,
    /// The breaker-construction options set, in order.
    options: Vec<&'static str>,
}

impl<M> Clone for HostRegistryBuilder<M> {
    fn clone(&self) -> Self {
        HostRegistryBuilder {
            builder: self.builder.clone(),
            shared: self.shared.clone(),
            options: self.options.clone(),
        }
    }
}

impl<M: Mode> HostRegistryBuilder<M> {
    /// The config of every breaker.
    pub fn config(mut self, config: Config) -> Self {
        self.builder = self.builder.config(config);
        self.options.push("config");
        self
    }

    /// The clock of every breaker.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.builder = self.builder.clock(clock);
        self.options.push("clock");
        self
    }

    /// Adds a listener every breaker reports to.
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.builder = self.builder.listener(listener);
        self.options.push("listener");
        self
    }

    /// The state every breaker starts in, applied before its first request:
    /// [`State::MetricsOnly`] records outcomes without ever rejecting.
    pub fn initial_state(mut self, state: State) -> Self {
        self.builder = self.builder.initial_state(state);
        self.options.push("initial_state");
        self
    }

    /// How long a host may go without a request before its breaker is
    /// forgotten (default [`DEFAULT_EXPIRE_AFTER_IDLE`], 10 minutes); see
    /// [`RegistryBuilder::expire_after_idle`]. Take it well above the
    /// longest `wait_duration_in_open` a host may stay rejected in without
    /// being asked for: a forgotten breaker's OPEN state is lost.
    ///
    /// ```
    /// use interlock::http::HostRegistry;
    /// use std::time::Duration;
    ///
    /// let hosts = HostRegistry::builder()
    ///     .expire_after_idle(Duration::from_secs(3600))
    ///     .max_hosts(50_000)
    ///     .build()?;
    /// assert_eq!(hosts.registry().expire_after_idle(), Some(Duration::from_secs(3600)));
    /// assert_eq!(hosts.registry().max_breakers(), Some(50_000));
    /// # Ok::<(), interlock::http::BuildError>(())
    /// ```
    pub fn expire_after_idle(mut self, idle: Duration) -> Self {
        self.builder = self.builder.expire_after_idle(idle);
        self.options.push("expire_after_idle");
        self
    }

    /// How many hosts it keeps at most (default [`DEFAULT_MAX_HOSTS`],
    /// 10,000), evicting the least recently used; see
    /// [`RegistryBuilder::max_breakers`].
    pub fn max_hosts(mut self, max: usize) -> Self {
        self.builder = self.builder.max_breakers(max);
        self.options.push("max_hosts");
        self
    }

    /// Takes breakers from the caller's `registry` (left open on close), of
    /// any mode: a coordinated registry makes the adapter's breakers
    /// fleet-wide.
    pub fn registry<N: Mode>(self, registry: Registry<N>) -> HostRegistryBuilder<N> {
        HostRegistryBuilder {
            builder: self.builder,
            shared: Some(registry),
            options: self.options,
        }
    }

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// [`BuildError::SharedRegistry`] naming the first breaker-construction
    /// option combined with a shared registry; [`BuildError::Config`] if the
    /// initial state is OPEN or HALF_OPEN, or `expire_after_idle` or
    /// `max_hosts` (reported as `max_breakers`) is zero.
    pub fn build(self) -> Result<HostRegistry<M>, BuildError> {
        if let Some(registry) = self.shared {
            return match self.options.first() {
                Some(&option) => Err(BuildError::SharedRegistry { option }),
                None => Ok(HostRegistry::shared(registry)),
            };
        }
        let owned = HostRegistry::owned(self.builder.build().map_err(BuildError::Config)?);
        // Without a shared registry the mode is `Local`: only `registry`
        // changes it, and it always sets one.
        (Box::new(owned) as Box<dyn Any>)
            .downcast::<HostRegistry<M>>()
            .map(|owned| *owned)
            .map_err(|_| BuildError::SharedRegistry { option: "registry" })
    }
}

impl<M> fmt::Debug for HostRegistryBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistryBuilder")
            .field("shared", &self.shared.is_some())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// An HTTP adapter that could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A shared registry was combined with a breaker-construction option
    /// (`config`, `clock`, `listener`, `initial_state`, `expire_after_idle`
    /// or `max_hosts`), which the registry already owns: set it on the
    /// registry instead.
    SharedRegistry {
        /// The option given alongside the registry.
        option: &'static str,
    },
    /// The options do not make a valid registry.
    Config(ConfigError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::SharedRegistry { option } => write!(
                f,
                "`{option}` cannot be combined with a shared registry, which owns it"
            ),
            BuildError::Config(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::SharedRegistry { .. } => None,
            // Transparent: `Display` is the config error's own.
            BuildError::Config(err) => err.source(),
        }
    }
}

impl From<ConfigError> for BuildError {
    fn from(err: ConfigError) -> Self {
        BuildError::Config(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_closes_on_last_drop_shared_stays_open() {
        let owned = HostRegistry::new();
        let a = owned.breaker("a");
        let clone = owned.clone();
        drop(owned);
        assert!(!a.is_shut_down());
        drop(clone);
        assert!(a.is_shut_down());

        let registry = Registry::new();
        let shared = HostRegistry::builder()
            .registry(registry.clone())
            .build()
            .unwrap();
        let b = shared.breaker("b");
        shared.close();
        drop(shared);
        assert!(!b.is_shut_down());
        assert!(registry.get_existing("b").is_some());
    }

    #[test]
    fn explicit_close_of_owned() {
        let owned = HostRegistry::new();
        let a = owned.breaker("a");
        owned.close();
        assert!(a.is_shut_down());
    }

    #[test]
    fn every_option_conflicts_with_a_shared_registry() {
        let shared = Registry::new();
        let cases: [(&str, HostRegistryBuilder); 6] = [
            (
                "expire_after_idle",
                HostRegistry::builder().expire_after_idle(Duration::from_secs(1)),
            ),
            ("max_hosts", HostRegistry::builder().max_hosts(5)),
            ("config", HostRegistry::builder().config(Config::default())),
            (
                "clock",
                HostRegistry::builder().clock(crate::ManualClock::new()),
            ),
            (
                "listener",
                HostRegistry::builder().listener(|_: &crate::Event<'_>| {}),
            ),
            (
                "initial_state",
                HostRegistry::builder().initial_state(State::MetricsOnly),
            ),
        ];
        for (option, builder) in cases {
            let err = builder.registry(shared.clone()).build().unwrap_err();
            assert_eq!(err, BuildError::SharedRegistry { option });
            assert!(err.to_string().contains(option));
        }
    }

    #[test]
    fn invalid_initial_state_is_a_config_error() {
        let err = HostRegistry::builder()
            .initial_state(State::Open)
            .build()
            .unwrap_err();
        assert!(matches!(err, BuildError::Config(ref e) if e.field() == "initial_state"));
    }

    #[test]
    fn an_owned_registry_is_bounded_by_default_and_as_configured() {
        let default = HostRegistry::new();
        assert_eq!(
            default.registry().expire_after_idle(),
            Some(DEFAULT_EXPIRE_AFTER_IDLE)
        );
        assert_eq!(default.registry().max_breakers(), Some(DEFAULT_MAX_HOSTS));
        let built = HostRegistry::builder()
            .expire_after_idle(Duration::from_secs(60))
            .max_hosts(2)
            .build()
            .unwrap();
        for host in ["a:443", "b:443", "c:443"] {
            let _ = built.breaker(host);
        }
        assert_eq!(built.registry().len(), 2);
        let shared = HostRegistry::shared(Registry::new());
        assert_eq!(shared.registry().max_breakers(), None, "the owner's choice");
        let err = HostRegistry::builder().max_hosts(0).build().unwrap_err();
        assert!(matches!(err, BuildError::Config(ref e) if e.field() == "max_breakers"));
    }
}
