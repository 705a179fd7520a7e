//! One circuit breaker per host for [`reqwest`], as a
//! [`reqwest_middleware`] middleware.
//!
//! [`CircuitBreakerMiddleware`] keys a breaker on each request's host and
//! port (or on the name a resolver gives it), creates it on first use (and
//! forgets it after 10 idle minutes, keeping at most 10,000 hosts, unless
//! set otherwise with `expire_after_idle` and `max_hosts`) and
//! records every exchange: 429, 500, 502, 503, 504 and transport errors are
//! failures, other statuses successes, and a request reqwest refuses to
//! build (an unsupported scheme, an invalid header) is the caller's bug and
//! counts as a success ([`default_classifier`]). An open breaker answers
//! **before the request is sent** with a
//! [`reqwest_middleware::Error::Middleware`] holding a [`CircuitOpenError`]
//! (see [`rejection`]).
//!
//! The call ends when the response headers arrive: the breaker measures
//! the time to the headers, and the body is read afterwards, outside the
//! call. Dropping a request future in flight cancels the call and hands a
//! HALF_OPEN probe slot back.
//!
//! ```no_run
//! use interlock::State;
//! use interlock_reqwest::CircuitBreakerMiddleware;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let breakers = CircuitBreakerMiddleware::builder()
//!     .initial_state(State::MetricsOnly) // shadow mode first: count, never reject
//!     .build()?;
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(breakers.clone())
//!     .build();
//!
//! match client.get("http://inventory.internal/items").send().await {
//!     Ok(response) => println!("{}", response.text().await?),
//!     Err(err) => match interlock_reqwest::rejection(&err) {
//!         Some(open) => eprintln!("{} is open; retry in {:?}", open.breaker_name(), open.retry_after()),
//!         None => return Err(err.into()),
//!     },
//! }
//! // what the rollout saw, host by host
//! for (host, breaker) in breakers.registry().items() {
//!     println!("{host}: {:?}", breaker.snapshot());
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The options are the core's (see [`interlock::http`]): `config`, `clock`,
//! `listener` and `initial_state` build the middleware's own registry,
//! which it closes when [`close`](CircuitBreakerMiddleware::close)d or when
//! its last clone is dropped; `registry` shares the caller's instead (left
//! open, and exclusive with those four options). `name_resolver` and
//! `classifier` work with both.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.88, what the locked dependencies of reqwest need (the core itself
//! needs only 1.85). Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use std::fmt;
use std::sync::Arc;

use http::Extensions;
use interlock::http::{
    BuildError, HostAndPort, HostRegistry, HostRegistryBuilder, HttpStatusClassifier, NameError,
    NameResolver,
};
use interlock::mode::{AsyncApi, Local, Mode};
use interlock::{Clock, Config, EventListener, Registry, State, Verdict};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};

pub use interlock::CircuitOpenError;

/// The rejection inside a client error, if the error is one.
///
/// ```
/// use interlock::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new("api.example.com:443");
/// breaker.force_open();
/// let open = breaker.acquire().unwrap_err();
/// let err = reqwest_middleware::Error::middleware(open);
/// assert_eq!(interlock_reqwest::rejection(&err).unwrap().breaker_name(), "api.example.com:443");
/// ```
///
/// The whole chain is searched, through every
/// [`reqwest_middleware::Error::Middleware`] on the way, so a rejection is
/// found behind middleware that wraps the errors it passes on and keeps
/// them as a `source()`, as `reqwest-retry`'s `RetryTransientMiddleware`
/// does (`RetryError::WithRetries` and `RetryError::Error`).
#[must_use]
pub fn rejection(error: &reqwest_middleware::Error) -> Option<&CircuitOpenError> {
    interlock::register_opener(open_middleware_error);
    match error {
        reqwest_middleware::Error::Middleware(inner) => interlock::find_rejection(inner.as_ref()),
        reqwest_middleware::Error::Reqwest(e) => interlock::find_rejection(e),
    }
}

/// What the middleware reports in the rejection's place: a
/// [`reqwest_middleware::Error::Middleware`] holding the rejection under a
/// context that says the request was not sent. `Error`'s `source()` is then
/// the [`CircuitOpenError`], so [`interlock::find_rejection`] (and every
/// retry helper of `interlock`) finds it in the chain.
///
/// The context names the request (method and URL without its query or
/// fragment, which may carry secrets), so a log line says which call was
/// refused.
fn rejected(open: CircuitOpenError, request: &Request) -> reqwest_middleware::Error {
    let mut url = request.url().clone();
    url.set_query(None);
    url.set_fragment(None);
    let context = format!(
        "{} {url} not sent: its host's circuit is open",
        request.method()
    );
    reqwest_middleware::Error::Middleware(anyhow::Error::new(open).context(context))
}

/// Teaches [`interlock::find_rejection`] to look inside
/// [`reqwest_middleware::Error::Middleware`], whose `source()` skips the
/// error it holds: a rejection some other middleware put there is found too.
fn open_middleware_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a (dyn std::error::Error + 'static)> {
    match error.downcast_ref::<reqwest_middleware::Error>()? {
        reqwest_middleware::Error::Middleware(inner) => Some(inner.as_ref()),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// The name error inside a client error, if the request was refused for
/// having no host or a blank resolved name.
#[must_use]
pub fn name_error(error: &reqwest_middleware::Error) -> Option<&NameError> {
    match error {
        reqwest_middleware::Error::Middleware(inner) => inner.downcast_ref::<NameError>(),
        _ => None,
    }
}

/// The default policy: [`HttpStatusClassifier::new`], plus reqwest's
/// builder errors (a request that could not be built or has an
/// unsupported scheme) excluded as the caller's bugs, and a request a
/// connector layer shed before it was sent inconclusive.
///
/// # What "never sent" reqwest lets us tell apart
///
/// reqwest has no connection-pool limit of its own (its pool only bounds
/// *idle* connections), so "pool exhausted" exists only where the
/// application adds a limit with
/// [`ClientBuilder::connector_layer`](reqwest::ClientBuilder::connector_layer):
///
/// | the error | verdict | why |
/// |---|---|---|
/// | `tower::load_shed::error::Overloaded` in the chain (a `LoadShedLayer` over a `ConcurrencyLimitLayer` as a connector layer) | inconclusive | no local slot was free: the host was never asked. A HALF_OPEN probe hands its slot back; in CLOSED it still counts as a failure, as the Python original's `PoolTimeout` does |
/// | a full [`interlock::pipeline::Bulkhead`] in the chain | inconclusive | the same, for interlock's own bulkhead |
/// | `is_connect()`: DNS failure, connection refused, TLS handshake, `connect_timeout` | failure | the host (or the way to it) is down. A connect timeout while *waiting* for a connector slot looks the same to reqwest as one on a dead host, so it stays a failure |
/// | `is_builder()` | success (excluded) | the caller's bug |
///
/// ```
/// use interlock::Verdict;
///
/// let classifier = interlock_reqwest::default_classifier();
/// assert_eq!(classifier.classify_status(503), Verdict::Failure);
/// assert_eq!(classifier.classify_status(404), Verdict::Success);
/// ```
#[must_use]
pub fn default_classifier() -> HttpStatusClassifier {
    HttpStatusClassifier::new()
        .exclude_if("reqwest::Error::is_builder", |e| {
            e.downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_builder)
        })
        .inconclusive::<tower::load_shed::error::Overloaded>()
}

/// The default resolver: the URL's host and port, as `host:port`.
struct UrlHostAndPort;

impl NameResolver<Request> for UrlHostAndPort {
    fn resolve(&self, request: &Request) -> Option<String> {
        let url = request.url();
        let host = url.host_str().filter(|h| !h.is_empty())?;
        Some(HostAndPort::join(host, url.port_or_known_default()))
    }
}

/// Names breakers by host alone, as the Python original interlock-cb does
/// (`api.example.com` rather than `api.example.com:443`); see
/// [`interlock::http::HostOnly`]. For services whose breakers are shared
/// with Python ones through `interlock-redis`'s interlock-cb layout.
///
/// ```
/// use interlock_reqwest::{CircuitBreakerMiddleware, HostOnly};
///
/// let middleware = CircuitBreakerMiddleware::builder().name_resolver(HostOnly).build()?;
/// # let _ = middleware;
/// # Ok::<(), interlock::http::BuildError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostOnly;

impl NameResolver<Request> for HostOnly {
    fn resolve(&self, request: &Request) -> Option<String> {
        let host = request.url().host_str().filter(|h| !h.is_empty())?;
        Some(interlock::http::HostOnly::normalize(host))
    }
}

struct Shared<M> {
    registry: HostRegistry<M>,
    resolver: Box<dyn NameResolver<Request>>,
    classifier: HttpStatusClassifier,
}

/// A [`reqwest_middleware::Middleware`] with one circuit breaker per host;
/// see the [crate docs](crate).
///
/// Cloning is cheap and shares the breakers.
///
/// ```
/// use interlock::http::BuildError;
/// use interlock::{Config, Registry};
/// use interlock_reqwest::CircuitBreakerMiddleware;
///
/// // Two clients, one breaker per host between them: share a registry.
/// let hosts = Registry::builder().config(Config::builder().minimum_number_of_calls(20).build()?).build()?;
/// let a = CircuitBreakerMiddleware::builder().registry(hosts.clone()).build()?;
/// let b = CircuitBreakerMiddleware::builder().registry(hosts.clone()).build()?;
/// assert!(a.registry().get("api.example.com:443").ptr_eq(&b.registry().get("api.example.com:443")));
///
/// // The shared registry owns the breakers' config: setting it here too is refused.
/// let err = CircuitBreakerMiddleware::builder().registry(hosts).config(Config::default()).build();
/// assert!(matches!(err, Err(BuildError::SharedRegistry { option: "config" })));
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
        CircuitBreakerMiddleware::from_parts(
            HostRegistry::new(),
            UrlHostAndPort,
            default_classifier(),
        )
    }

    /// A builder for a middleware.
    pub fn builder() -> CircuitBreakerMiddlewareBuilder {
        CircuitBreakerMiddlewareBuilder {
            registry: HostRegistry::builder(),
            resolver: Box::new(UrlHostAndPort),
            classifier: default_classifier(),
        }
    }

    fn from_parts(
        registry: HostRegistry<Local>,
        resolver: impl NameResolver<Request>,
        classifier: HttpStatusClassifier,
    ) -> Self {
        interlock::register_opener(open_middleware_error);
        CircuitBreakerMiddleware {
            shared: Arc::new(Shared {
                registry,
                resolver: Box::new(resolver),
                classifier,
            }),
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

#[async_trait::async_trait]
impl<M: AsyncApi> Middleware for CircuitBreakerMiddleware<M> {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let shared = &*self.shared;
        let name = NameError::check(shared.resolver.resolve(&request), request.url())
            .map_err(reqwest_middleware::Error::middleware)?;
        let permit = shared
            .registry
            .breaker(&name)
            .acquire_async()
            .await
            .map_err(|open| rejected(open, &request))?;
        // Dropping this future here cancels the call (the permit goes back).
        let result = next.run(request, extensions).await;
        match &result {
            Ok(response) => {
                let status = response.status();
                match shared.classifier.classify_status(status.as_u16()) {
                    Verdict::Success => permit.success(),
                    verdict => permit.finish_with(verdict, &status),
                }
            }
            // Another breaker's rejection (from a middleware inside this
            // one) is ignored: the permit is dropped unrecorded.
            Err(error) if interlock::find_rejection(error).is_some() => drop(permit),
            Err(error) => {
                let verdict = match error {
                    reqwest_middleware::Error::Reqwest(e) => shared.classifier.classify_error(e),
                    reqwest_middleware::Error::Middleware(e) => {
                        shared.classifier.classify_error(&**e)
                    }
                };
                permit.finish_with(verdict, error);
            }
        }
        result
    }
}

/// Builds a [`CircuitBreakerMiddleware`]; every check happens in
/// [`build`](Self::build).
#[must_use]
pub struct CircuitBreakerMiddlewareBuilder<M = Local> {
    registry: HostRegistryBuilder<M>,
    resolver: Box<dyn NameResolver<Request>>,
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
    /// use interlock_reqwest::CircuitBreakerMiddleware;
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
    /// never closes. Any mode that serves the async API: a registry
    /// coordinated through an async storage
    /// ([`Registry<Async>`](interlock::mode::Async), e.g. Redis) shares
    /// each host's breaker across the fleet.
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

    /// Maps each request to its breaker name (by default `host:port`); a
    /// blank name refuses the request with a [`NameError`].
    ///
    /// ```
    /// let middleware = interlock_reqwest::CircuitBreakerMiddleware::builder()
    ///     .name_resolver(|request: &reqwest::Request| {
    ///         request.url().host_str().unwrap_or_default().trim_end_matches(".consul").to_owned()
    ///     })
    ///     .build()?;
    /// # let _ = middleware;
    /// # Ok::<(), interlock::http::BuildError>(())
    /// ```
    pub fn name_resolver(mut self, resolver: impl NameResolver<Request>) -> Self {
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
        interlock::register_opener(open_middleware_error);
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
