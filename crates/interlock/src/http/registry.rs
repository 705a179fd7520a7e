//! [`HostRegistry`]: the per-host breakers of one adapter, owned or shared.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use crate::{CircuitBreaker, Clock, Config, ConfigError, EventListener, Registry, State};

/// The registry an HTTP adapter takes its per-host breakers from, and who
/// closes it.
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
#[derive(Clone)]
pub struct HostRegistry {
    registry: Registry,
    owner: Option<Arc<Owner>>,
}

/// Closes an owned registry when the last adapter holding it goes away.
struct Owner(Registry);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close_all();
    }
}

impl HostRegistry {
    /// An owned registry with the default config.
    #[must_use]
    pub fn new() -> Self {
        HostRegistry::owned(Registry::new())
    }

    /// A builder for an owned registry, or for a shared one with
    /// [`registry`](HostRegistryBuilder::registry).
    pub fn builder() -> HostRegistryBuilder {
        HostRegistryBuilder {
            builder: Registry::builder(),
            shared: None,
            options: Vec::new(),
        }
    }

    /// The caller's `registry`, left open when the adapter closes.
    #[must_use]
    pub fn shared(registry: Registry) -> Self {
        HostRegistry {
            registry,
            owner: None,
        }
    }

    fn owned(registry: Registry) -> Self {
        HostRegistry {
            owner: Some(Arc::new(Owner(registry.clone()))),
            registry,
        }
    }

    /// The registry, for diagnosis: [`Registry::get_existing`],
    /// [`Registry::names`] and [`Registry::items`] show the hosts seen so
    /// far.
    #[must_use]
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Whether the adapter created the registry (and so closes it).
    #[must_use]
    pub fn is_owned(&self) -> bool {
        self.owner.is_some()
    }

    /// The breaker for `name`, created on first use.
    #[must_use]
    pub fn breaker(&self, name: &str) -> CircuitBreaker {
        self.registry.get(name)
    }

    /// Closes every breaker of an owned registry now (they keep working on
    /// local state, see [`CircuitBreaker::close`]); does nothing to a
    /// shared one. Idempotent.
    pub fn close(&self) {
        if self.is_owned() {
            self.registry.close_all();
        }
    }
}

impl Default for HostRegistry {
    fn default() -> Self {
        HostRegistry::new()
    }
}

impl fmt::Debug for HostRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostRegistry")
            .field("registry", &self.registry)
            .field("owned", &self.is_owned())
            .finish()
    }
}

/// Builds a [`HostRegistry`]; conflicts are reported by
/// [`build`](Self::build).
#[must_use]
#[derive(Clone)]
pub struct HostRegistryBuilder {
    builder: crate::RegistryBuilder,
    shared: Option<Registry>,
    /// The breaker-construction options set, in order.
    options: Vec<&'static str>,
}

impl HostRegistryBuilder {
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

    /// Takes breakers from the caller's `registry` (left open on close).
    pub fn registry(mut self, registry: Registry) -> Self {
        self.shared = Some(registry);
        self
    }

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// [`BuildError::SharedRegistry`] naming the first breaker-construction
    /// option combined with a shared registry; [`BuildError::Config`] if the
    /// initial state is OPEN or HALF_OPEN.
    pub fn build(self) -> Result<HostRegistry, BuildError> {
        match self.shared {
            Some(registry) => match self.options.first() {
                Some(&option) => Err(BuildError::SharedRegistry { option }),
                None => Ok(HostRegistry::shared(registry)),
            },
            None => Ok(HostRegistry::owned(
                self.builder.build().map_err(BuildError::Config)?,
            )),
        }
    }
}

impl fmt::Debug for HostRegistryBuilder {
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
    /// (`config`, `clock`, `listener` or `initial_state`), which the
    /// registry already owns: set it on the registry instead.
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
        let cases: [(&str, HostRegistryBuilder); 4] = [
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
}
