//! [`KeyedCircuitBreaker`]: one breaker per host as tower middleware.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::{
    BuildError, HostAndPort, HostRegistry, HostRegistryBuilder, HttpStatusClassifier, NameError,
    NameResolver,
};
use crate::mode::{Local, Mode, SyncApi};
use crate::pipeline::BoxError;
use crate::{Clock, Config, EventListener, Registry, State};

/// What the layer and every service it makes share.
struct Shared<N, M> {
    registry: HostRegistry<M>,
    resolver: N,
    classifier: Arc<HttpStatusClassifier>,
}

/// Wraps HTTP services (hyper-util's client, `reqwest::Client` as a
/// service) in a [`KeyedCircuitBreaker`]: one breaker per host, from a
/// [`Registry`]. Requests must carry a host (see `interlock-tonic` for
/// tonic channels).
///
/// Cloning is cheap; every clone and every service it makes share the
/// registry. A registry the layer created is closed when the last of them
/// is dropped, or at once by [`close`](Self::close).
///
/// ```
/// use interlock::http::KeyedCircuitBreakerLayer;
/// use interlock::State;
///
/// let layer = KeyedCircuitBreakerLayer::builder()
///     .initial_state(State::MetricsOnly) // shadow mode: count, never reject
///     .name_resolver(|request: &http::Request<String>| {
///         request.uri().host().unwrap_or_default().trim_end_matches(".internal").to_owned()
///     })
///     .build()?;
/// assert!(layer.registry().is_empty());
/// # Ok::<(), interlock::http::BuildError>(())
/// ```
pub struct KeyedCircuitBreakerLayer<N = HostAndPort, M = Local> {
    shared: Arc<Shared<N, M>>,
}

impl<N, M> Clone for KeyedCircuitBreakerLayer<N, M> {
    fn clone(&self) -> Self {
        KeyedCircuitBreakerLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl KeyedCircuitBreakerLayer {
    /// A layer with an owned registry of default breakers, keyed by
    /// [`HostAndPort`] and classified by [`HttpStatusClassifier::new`].
    #[must_use]
    pub fn new() -> Self {
        KeyedCircuitBreakerLayer::from_parts(
            HostRegistry::new(),
            HostAndPort,
            HttpStatusClassifier::new(),
        )
    }

    /// A builder for a layer.
    pub fn builder() -> KeyedCircuitBreakerLayerBuilder {
        KeyedCircuitBreakerLayerBuilder {
            registry: HostRegistry::builder(),
            resolver: HostAndPort,
            classifier: HttpStatusClassifier::new(),
        }
    }
}

impl Default for KeyedCircuitBreakerLayer {
    fn default() -> Self {
        KeyedCircuitBreakerLayer::new()
    }
}

impl<N, M: Mode> KeyedCircuitBreakerLayer<N, M> {
    /// A layer over `registry`, keyed by `resolver`, classified by
    /// `classifier`.
    pub fn from_parts(
        registry: HostRegistry<M>,
        resolver: N,
        classifier: HttpStatusClassifier,
    ) -> Self {
        KeyedCircuitBreakerLayer {
            shared: Arc::new(Shared {
                registry,
                resolver,
                classifier: Arc::new(classifier),
            }),
        }
    }

    /// The registry of per-host breakers, for diagnosis.
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        self.shared.registry.registry()
    }

    /// Closes the breakers now if the layer created the registry; a shared
    /// registry is left open.
    pub fn close(&self) {
        self.shared.registry.close();
    }
}

impl<S, N, M> Layer<S> for KeyedCircuitBreakerLayer<N, M> {
    type Service = KeyedCircuitBreaker<S, N, M>;

    fn layer(&self, inner: S) -> Self::Service {
        KeyedCircuitBreaker {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<N, M: Mode> fmt::Debug for KeyedCircuitBreakerLayer<N, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCircuitBreakerLayer")
            .field("registry", &self.shared.registry)
            .field("classifier", &self.shared.classifier)
            .finish_non_exhaustive()
    }
}

/// Builds a [`KeyedCircuitBreakerLayer`]; every check happens in
/// [`build`](Self::build).
#[must_use]
pub struct KeyedCircuitBreakerLayerBuilder<N = HostAndPort, M = Local> {
    registry: HostRegistryBuilder<M>,
    resolver: N,
    classifier: HttpStatusClassifier,
}

impl<N, M: Mode> KeyedCircuitBreakerLayerBuilder<N, M> {
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
    /// [`DEFAULT_EXPIRE_AFTER_IDLE`](crate::http::DEFAULT_EXPIRE_AFTER_IDLE)).
    pub fn expire_after_idle(mut self, idle: std::time::Duration) -> Self {
        self.registry = self.registry.expire_after_idle(idle);
        self
    }

    /// How many hosts' breakers are kept at most, the least recently used
    /// evicted first (not with a shared registry; default 10,000,
    /// [`DEFAULT_MAX_HOSTS`](crate::http::DEFAULT_MAX_HOSTS)).
    pub fn max_hosts(mut self, max: usize) -> Self {
        self.registry = self.registry.max_hosts(max);
        self
    }

    /// Takes breakers from the caller's `registry`, which the layer never
    /// closes: a registry coordinated through a blocking storage
    /// ([`Registry<Blocking>`](crate::mode::Blocking)) shares each host's
    /// state across a fleet.
    pub fn registry<R: Mode>(self, registry: Registry<R>) -> KeyedCircuitBreakerLayerBuilder<N, R> {
        KeyedCircuitBreakerLayerBuilder {
            registry: self.registry.registry(registry),
            resolver: self.resolver,
            classifier: self.classifier,
        }
    }

    /// The failure policy (by default [`HttpStatusClassifier::new`]).
    pub fn classifier(mut self, classifier: HttpStatusClassifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// Maps each request to its breaker name (by default [`HostAndPort`]).
    pub fn name_resolver<R>(self, resolver: R) -> KeyedCircuitBreakerLayerBuilder<R, M> {
        KeyedCircuitBreakerLayerBuilder {
            registry: self.registry,
            resolver,
            classifier: self.classifier,
        }
    }

    /// Builds the layer.
    ///
    /// # Errors
    ///
    /// [`BuildError::SharedRegistry`] if a shared registry is combined with
    /// `config`, `clock`, `listener`, `initial_state`, `expire_after_idle`
    /// or `max_hosts`; [`BuildError::Config`] for an invalid initial state
    /// or a zero bound.
    pub fn build(self) -> Result<KeyedCircuitBreakerLayer<N, M>, BuildError> {
        Ok(KeyedCircuitBreakerLayer::from_parts(
            self.registry.build()?,
            self.resolver,
            self.classifier,
        ))
    }
}

impl<N, M> fmt::Debug for KeyedCircuitBreakerLayerBuilder<N, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCircuitBreakerLayerBuilder")
            .field("registry", &self.registry)
            .field("classifier", &self.classifier)
            .finish_non_exhaustive()
    }
}

/// An HTTP service with one circuit breaker per host; see the
/// [module docs](super).
pub struct KeyedCircuitBreaker<S, N = HostAndPort, M = Local> {
    inner: S,
    shared: Arc<Shared<N, M>>,
}

impl<S: Clone, N, M> Clone for KeyedCircuitBreaker<S, N, M> {
    fn clone(&self) -> Self {
        KeyedCircuitBreaker {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, N, M: Mode> KeyedCircuitBreaker<S, N, M> {
    /// The registry of per-host breakers, for diagnosis.
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        self.shared.registry.registry()
    }

    /// Closes the breakers now if the layer created the registry; a shared
    /// registry is left open.
    pub fn close(&self) {
        self.shared.registry.close();
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug, N, M: Mode> fmt::Debug for KeyedCircuitBreaker<S, N, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedCircuitBreaker")
            .field("inner", &self.inner)
            .field("registry", &self.shared.registry)
            .finish_non_exhaustive()
    }
}

impl<S, N, M, B, RB> Service<http::Request<B>> for KeyedCircuitBreaker<S, N, M>
where
    M: SyncApi,
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Into<BoxError>,
    N: NameResolver<http::Request<B>>,
{
    type Response = http::Response<RB>;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let shared = &*self.shared;
        let name = match NameError::check(shared.resolver.resolve(&request), request.uri()) {
            Ok(name) => name,
            Err(err) => return future::ResponseFuture::refused(Box::new(err)),
        };
        match shared.registry.breaker(&name).acquire() {
            Ok(permit) => future::ResponseFuture::called(
                self.inner.call(request),
                permit,
                Arc::clone(&shared.classifier),
            ),
            Err(open) => future::ResponseFuture::refused(Box::new(open)),
        }
    }
}

/// The response future of [`KeyedCircuitBreaker`].
pub mod future {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll, ready};

    use pin_project_lite::pin_project;

    use crate::http::HttpStatusClassifier;
    use crate::pipeline::BoxError;
    use crate::{Permit, Verdict};

    pin_project! {
        /// Resolves when the response headers arrive, recording the outcome
        /// on the host's breaker (the body is read later, outside the
        /// call); dropping it unresolved cancels the call.
        pub struct ResponseFuture<F> {
            #[pin]
            kind: Kind<F>,
        }
    }

    pin_project! {
        #[project = KindProj]
        enum Kind<F> {
            Called {
                #[pin]
                future: F,
                permit: Option<Permit>,
                classifier: Arc<HttpStatusClassifier>,
            },
            Refused {
                error: Option<BoxError>,
            },
        }
    }

    impl<F> ResponseFuture<F> {
        pub(super) fn called(
            future: F,
            permit: Permit,
            classifier: Arc<HttpStatusClassifier>,
        ) -> Self {
            ResponseFuture {
                kind: Kind::Called {
                    future,
                    permit: Some(permit),
                    classifier,
                },
            }
        }

        pub(super) fn refused(error: BoxError) -> Self {
            ResponseFuture {
                kind: Kind::Refused { error: Some(error) },
            }
        }
    }

    impl<F, B, E> Future for ResponseFuture<F>
    where
        F: Future<Output = Result<http::Response<B>, E>>,
        E: Into<BoxError>,
    {
        type Output = Result<http::Response<B>, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().kind.project() {
                KindProj::Called {
                    future,
                    permit,
                    classifier,
                } => {
                    let result = ready!(future.poll(cx));
                    let permit = permit.take();
                    Poll::Ready(match result {
                        Ok(response) => {
                            if let Some(permit) = permit {
                                let status = response.status();
                                match classifier.classify_status(status.as_u16()) {
                                    Verdict::Success => permit.success(),
                                    verdict => permit.finish_with(verdict, &status),
                                }
                            }
                            Ok(response)
                        }
                        Err(error) => {
                            let error: BoxError = error.into();
                            // Another breaker's rejection (an inner layer's)
                            // is ignored: the permit is dropped unrecorded.
                            if let Some(permit) = permit {
                                if crate::find_rejection(&*error).is_none() {
                                    permit.finish_with(classifier.classify_error(&*error), &error);
                                }
                            }
                            Err(error)
                        }
                    })
                }
                KindProj::Refused { error } => Poll::Ready(Err(error
                    .take()
                    .unwrap_or_else(|| "response future polled after completion".into()))),
            }
        }
    }

    impl<F> fmt::Debug for ResponseFuture<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}
