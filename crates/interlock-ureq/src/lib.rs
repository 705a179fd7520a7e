//! One circuit breaker per host for [`ureq`] 3 agents (blocking clients),
//! as a [`ureq::middleware::Middleware`].
//!
//! [`CircuitBreakerMiddleware`] keys a breaker on each request's host and
//! port (or on the name a resolver gives it), creates it on first use (and
//! forgets it after 10 idle minutes, keeping at most 10,000 hosts, unless
//! set otherwise with `expire_after_idle` and `max_hosts`) and
//! records every exchange: 429, 500, 502, 503, 504 and transport errors are
//! failures, other statuses successes (whether ureq returns them as
//! responses or, with its default `http_status_as_error`, as
//! [`ureq::Error::StatusCode`]), and the caller's own bugs (a bad URI, an
//! invalid request, a bad proxy URL, HTTPS-only violations) count as
//! successes ([`default_classifier`]). An open breaker answers **before the
//! request is sent** with [`ureq::Error::Other`] holding a
//! [`CircuitOpenError`] (see [`rejection`]).
//!
//! The call ends when the response headers arrive: the breaker measures
//! the time to the headers, and the body is read afterwards, outside the
//! call. A call that unwinds (a panic in a middleware inside this one)
//! counts as cancelled: nothing is recorded and a HALF_OPEN probe slot is
//! handed back.
//!
//! ```no_run
//! use interlock::State;
//! use interlock_ureq::CircuitBreakerMiddleware;
//!
//! let breakers = CircuitBreakerMiddleware::builder()
//!     .initial_state(State::MetricsOnly) // shadow mode first: count, never reject
//!     .build()?;
//! let agent = ureq::Agent::config_builder()
//!     .middleware(breakers.clone())
//!     .build()
//!     .new_agent();
//!
//! match agent.get("http://inventory.internal/items").call() {
//!     Ok(mut response) => println!("{}", response.body_mut().read_to_string()?),
//!     Err(err) => match interlock_ureq::rejection(&err) {
//!         Some(open) => eprintln!("{} is open; retry in {:?}", open.breaker_name(), open.retry_after()),
//!         None => return Err(err.into()),
//!     },
//! }
//! for (host, breaker) in breakers.registry().items() {
//!     println!("{host}: {:?}", breaker.snapshot());
//! }
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! The options are the core's (see [`interlock::http`]): `config`, `clock`,
//! `listener` and `initial_state` build the middleware's own registry,
//! which it closes when [`close`](CircuitBreakerMiddleware::close)d or when
//! its last clone (the agent's included) is dropped; `registry` shares the
//! caller's instead (left open, and exclusive with those four options).
//! `name_resolver` and `classifier` work with both.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use std::fmt;
use std::sync::Arc;

use interlock::http::{
    BuildError, HostAndPort, HostRegistry, HostRegistryBuilder, HttpStatusClassifier, NameError,
    NameResolver,
};
use interlock::mode::{Local, Mode, SyncApi};
use interlock::{Clock, Config, EventListener, Registry, State, Verdict};
use ureq::http::request::Parts;
use ureq::http::{Request, Response};
use ureq::middleware::{Middleware, MiddlewareNext};
use ureq::{Body, SendBody};

pub use interlock::CircuitOpenError;

/// The rejection inside a ureq error, if the error is one.
///
/// ```
/// use interlock::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new("api.example.com:443");
/// breaker.force_open();
/// let err = ureq::Error::Other(Box::new(breaker.acquire().unwrap_err()));
/// assert_eq!(interlock_ureq::rejection(&err).unwrap().breaker_name(), "api.example.com:443");
/// ```
#[must_use]
pub fn rejection(error: &ureq::Error) -> Option<&CircuitOpenError> {
    match error {
        ureq::Error::Other(inner) => interlock::find_rejection(&**inner),
        _ => None,
    }
}

/// Teaches [`interlock::find_rejection`] to look inside
/// [`ureq::Error::Other`], which has no `source()`: then `interlock`'s retry
/// helpers and breakers find a rejection in a `ureq::Error`.
fn open_other<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    match error.downcast_ref::<ureq::Error>()? {
        ureq::Error::Other(inner) => Some(&**inner),
        _ => None,
    }
}

/// The name error inside a ureq error, if the request was refused for
/// having no host or a blank resolved name.
#[must_use]
pub fn name_error(error: &ureq::Error) -> Option<&NameError> {
    match error {
        ureq::Error::Other(inner) => inner.downcast_ref::<NameError>(),
        _ => None,
    }
}

/// Whether `error` is the caller's own bug rather than news about the host.
fn is_caller_bug(error: &ureq::Error) -> bool {
    matches!(
        error,
        ureq::Error::BadUri(_)
            | ureq::Error::Http(_)
            | ureq::Error::InvalidProxyUrl
            | ureq::Error::RequireHttpsOnly(_)
            | ureq::Error::TlsRequired
    )
}

/// The default policy: [`HttpStatusClassifier::new`], plus ureq's
/// caller-side errors excluded ([`ureq::Error::BadUri`],
/// [`Http`](ureq::Error::Http), [`InvalidProxyUrl`](ureq::Error::InvalidProxyUrl),
/// [`RequireHttpsOnly`](ureq::Error::RequireHttpsOnly) and
/// [`TlsRequired`](ureq::Error::TlsRequired)).
///
/// ```
/// use interlock::Verdict;
///
/// let classifier = interlock_ureq::default_classifier();
/// assert_eq!(classifier.classify_error(&ureq::Error::BadUri("no host".into())), Verdict::Success);
/// assert_eq!(classifier.classify_error(&ureq::Error::HostNotFound), Verdict::Failure);
/// ```
#[must_use]
pub fn default_classifier() -> HttpStatusClassifier {
    HttpStatusClassifier::new().exclude_if("ureq caller errors", |e| {
        e.downcast_ref::<ureq::Error>().is_some_and(is_caller_bug)
    })
}

/// The default resolver: the URI's host and port, as `host:port`.
struct UriHostAndPort;

impl NameResolver<Parts> for UriHostAndPort {
    fn resolve(&self, request: &Parts) -> Option<String> {
        HostAndPort::of_uri(&request.uri)
    }
}

/// Names breakers by host alone, as the Python original interlock-cb does
/// (`api.example.com` rather than `api.example.com:443`); see
/// [`interlock::http::HostOnly`]. For services whose breakers are shared
/// with Python ones through `interlock-redis`'s interlock-cb layout.
///
/// ```
/// use interlock_ureq::{CircuitBreakerMiddleware, HostOnly};
///
/// let middleware = CircuitBreakerMiddleware::builder().name_resolver(HostOnly).build()?;
/// # let _ = middleware;
/// # Ok::<(), interlock::http::BuildError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostOnly;

impl NameResolver<Parts> for HostOnly {
    fn resolve(&self, request: &Parts) -> Option<String> {
        interlock::http::HostOnly::of_uri(&request.uri)
    }
}

struct Shared<M> {
    registry: HostRegistry<M>,
    resolver: Box<dyn NameResolver<Parts>>,
    classifier: HttpStatusClassifier,
}

/// A [`ureq::middleware::Middleware`] with one circuit breaker per host;
/// see the [crate docs](crate).
///
/// Cloning is cheap and shares the breakers.
///
/// ```
/// use interlock::{Config, SlidingWindow, State};
/// use interlock_ureq::CircuitBreakerMiddleware;
///
/// let breakers = CircuitBreakerMiddleware::builder()
///     .config(Config::builder().sliding_window(SlidingWindow::count(50)).minimum_number_of_calls(20).build()?)
///     .initial_state(State::MetricsOnly) // shadow mode: count, never reject
///     .build()?;
/// let agent = ureq::Agent::config_builder().middleware(breakers.clone()).build().new_agent();
/// # let _ = agent;
/// // Nothing sent yet: no host, no breaker.
/// assert!(breakers.registry().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CircuitBreakerMiddleware<M = Local> {
    shared: Arc<Shared<M>>,
}

impl<M> Clone for CircuitBreakerMiddleware<M> {
    fn clone(&self) -> Self {
        CircuitBreakerMiddleware {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl CircuitBreakerMiddleware {
    /// A middleware with its own registry of default breakers, keyed by
    /// host and port, classified by [`default_classifier`].
    #[must_use]
    pub fn new() -> Self {
        interlock::register_opener(open_other);
        CircuitBreakerMiddleware {
            shared: Arc::new(Shared {
                registry: HostRegistry::new(),
                resolver: Box::new(UriHostAndPort),
                classifier: default_classifier(),
            }),
        }
    }

    /// A builder for a middleware.
    pub fn builder() -> CircuitBreakerMiddlewareBuilder {
        CircuitBreakerMiddlewareBuilder {
            registry: HostRegistry::builder(),
            resolver: Box::new(UriHostAndPort),
            classifier: default_classifier(),
        }
    }
}

impl<M: Mode> CircuitBreakerMiddleware<M> {
    /// The registry of per-host breakers, for diagnosis
    /// ([`Registry::get_existing`], [`Registry::names`],
    /// [`Registry::items`]).
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        self.shared.registry.registry()
    }

    /// Closes every breaker now if the middleware created the registry; a
    /// shared registry is left open for its owner to close.
    pub fn close(&self) {
        self.shared.registry.close();
    }

    /// The failure policy.
    #[must_use]
    pub fn classifier(&self) -> &HttpStatusClassifier {
        &self.shared.classifier
    }
}

impl Default for CircuitBreakerMiddleware {
    fn default() -> Self {
        CircuitBreakerMiddleware::new()
    }
}

impl<M: Mode> fmt::Debug for CircuitBreakerMiddleware<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerMiddleware")
            .field("registry", &self.shared.registry)
            .field("classifier", &self.shared.classifier)
            .finish_non_exhaustive()
    }
}

impl<M: SyncApi> Middleware for CircuitBreakerMiddleware<M> {
    fn handle(
        &self,
        request: Request<SendBody<'_>>,
        next: MiddlewareNext<'_>,
    ) -> Result<Response<Body>, ureq::Error> {
        let shared = &*self.shared;
        let (parts, body) = request.into_parts();
        let name = NameError::check(shared.resolver.resolve(&parts), &parts.uri)
            .map_err(|e| ureq::Error::Other(Box::new(e)))?;
        let permit = shared
            .registry
            .breaker(&name)
            .acquire()
            .map_err(|open| ureq::Error::Other(Box::new(open)))?;
        // An unwinding `next` drops the permit: the call is cancelled.
        let result = next.handle(Request::from_parts(parts, body));
        match &result {
            Ok(response) => {
                let status = response.status();
                match shared.classifier.classify_status(status.as_u16()) {
                    Verdict::Success => permit.success(),
                    verdict => permit.finish_with(verdict, &status),
                }
            }
            Err(error @ ureq::Error::StatusCode(status)) => {
                match shared.classifier.classify_status(*status) {
                    Verdict::Success => permit.success(),
                    verdict => permit.finish_with(verdict, error),
                }
            }
            // Another breaker's rejection (from a middleware inside this
            // one) is ignored: the permit is dropped unrecorded.
            Err(error) if interlock::find_rejection(error).is_some() => drop(permit),
            Err(ureq::Error::Other(inner)) => {
                permit.finish_with(shared.classifier.classify_error(&**inner), inner);
            }
            Err(error) => permit.finish_with(shared.classifier.classify_error(error), error),
        }
        result
    }
}

/// Builds a [`CircuitBreakerMiddleware`]; every check happens in
/// [`build`](Self::build).
#[must_use]
pub struct CircuitBreakerMiddlewareBuilder<M = Local> {
    registry: HostRegistryBuilder<M>,
    resolver: Box<dyn NameResolver<Parts>>,
    classifier: HttpStatusClassifier,
}

impl<M: Mode> CircuitBreakerMiddlewareBuilder<M> {
    /// The config of every breaker (not with a shared registry).
    pub fn config(mut self, config: Config) -> Self {
        self.registry = self.registry.config(config);
        self
    }

    /// The clock of every breaker (not with a shared registry).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.registry = self.registry.clock(clock);
        self
    }

    /// Adds a listener to every breaker (not with a shared registry).
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.registry = self.registry.listener(listener);
        self
    }

    /// The state every lazily created breaker starts in (not with a shared
    /// registry); [`State::MetricsOnly`] for a safe rollout.
    pub fn initial_state(mut self, state: State) -> Self {
        self.registry = self.registry.initial_state(state);
        self
    }

    /// How long a host may go without a request before its breaker is
    /// forgotten (not with a shared registry; default 10 minutes,
    /// [`DEFAULT_EXPIRE_AFTER_IDLE`](interlock::http::DEFAULT_EXPIRE_AFTER_IDLE)).
    pub fn expire_after_idle(mut self, idle: std::time::Duration) -> Self {
        self.registry = self.registry.expire_after_idle(idle);
        self
    }

    /// How many hosts' breakers are kept at most, the least recently used
    /// evicted first (not with a shared registry; default 10,000,
    /// [`DEFAULT_MAX_HOSTS`](interlock::http::DEFAULT_MAX_HOSTS)).
    ///
    /// ```
    /// use interlock_ureq::CircuitBreakerMiddleware;
    /// use std::time::Duration;
    ///
    /// // Bounded by default: 10 idle minutes, 10,000 hosts.
    /// let default = CircuitBreakerMiddleware::new();
    /// assert_eq!(default.registry().max_breakers(), Some(10_000));
    /// assert_eq!(default.registry().expire_after_idle(), Some(Duration::from_secs(600)));
    ///
    /// let wide = CircuitBreakerMiddleware::builder()
    ///     .max_hosts(100_000)
    ///     .expire_after_idle(Duration::from_secs(3600))
    ///     .build()?;
    /// assert_eq!(wide.registry().max_breakers(), Some(100_000));
    /// # Ok::<(), interlock::http::BuildError>(())
    /// ```
    pub fn max_hosts(mut self, max: usize) -> Self {
        self.registry = self.registry.max_hosts(max);
        self
    }

    /// Takes breakers from the caller's `registry`, which the middleware
    /// never closes. Any mode that serves the blocking API: a registry
    /// coordinated through a blocking storage
    /// ([`Registry<Blocking>`](interlock::mode::Blocking), e.g. Redis)
    /// shares each host's breaker across the fleet.
    pub fn registry<N: Mode>(self, registry: Registry<N>) -> CircuitBreakerMiddlewareBuilder<N> {
        CircuitBreakerMiddlewareBuilder {
            registry: self.registry.registry(registry),
            resolver: self.resolver,
            classifier: self.classifier,
        }
    }

    /// The failure policy (by default [`default_classifier`]).
    pub fn classifier(mut self, classifier: HttpStatusClassifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// Maps each request (its method, URI, headers and extensions) to its
    /// breaker name (by default `host:port`); a blank name refuses the
    /// request with a [`NameError`].
    ///
    /// ```
    /// use ureq::http::request::Parts;
    ///
    /// let middleware = interlock_ureq::CircuitBreakerMiddleware::builder()
    ///     .name_resolver(|request: &Parts| {
    ///         request.uri.host().unwrap_or_default().trim_end_matches(".consul").to_owned()
    ///     })
    ///     .build()?;
    /// # let _ = middleware;
    /// # Ok::<(), interlock::http::BuildError>(())
    /// ```
    pub fn name_resolver(mut self, resolver: impl NameResolver<Parts>) -> Self {
        self.resolver = Box::new(resolver);
        self
    }

    /// Builds the middleware.
    ///
    /// # Errors
    ///
    /// [`BuildError::SharedRegistry`] if a shared registry is combined with
    /// `config`, `clock`, `listener`, `initial_state`, `expire_after_idle`
    /// or `max_hosts`; [`BuildError::Config`] for an invalid initial state
    /// or a zero bound.
    pub fn build(self) -> Result<CircuitBreakerMiddleware<M>, BuildError> {
        interlock::register_opener(open_other);
        Ok(CircuitBreakerMiddleware {
            shared: Arc::new(Shared {
                registry: self.registry.build()?,
                resolver: self.resolver,
                classifier: self.classifier,
            }),
        })
    }
}

impl<M> fmt::Debug for CircuitBreakerMiddlewareBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerMiddlewareBuilder")
            .field("registry", &self.registry)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}
