//! [`GrpcCircuitBreakerLayer`]: one breaker per gRPC authority.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use interlock::http::{
    BuildError as HttpBuildError, HostAndPort, HostRegistry, HostRegistryBuilder,
};
use interlock::mode::{Local, Mode, SyncApi};
use interlock::{Clock, Config, EventListener, Registry, State};
use tower_layer::Layer;
use tower_service::Service;

use crate::{BoxError, BuildError, GrpcStatusClassifier};

/// What the layer and every service it makes share.
pub(crate) struct Shared<M> {
    registry: HostRegistry<M>,
    /// The breaker of requests without an authority.
    default_name: String,
    per_authority: bool,
    classifier: Arc<GrpcStatusClassifier>,
}

impl<M: Mode> Shared<M> {
    fn name_of<B>(&self, request: &http::Request<B>) -> String {
        if self.per_authority
            && let Some(name) = HostAndPort::of_uri(request.uri())
        {
            return name;
        }
        self.default_name.clone()
    }
}

/// Wraps a tonic [`Channel`](https://docs.rs/tonic/0.14/tonic/transport/struct.Channel.html)
/// (or any gRPC client service) in a [`GrpcCircuitBreaker`]; see the
/// [crate docs](crate).
///
/// Cloning is cheap; every clone and every service it makes share the
/// registry. A registry the layer created is closed when the last of them
/// is dropped, or at once by [`close`](Self::close).
pub struct GrpcCircuitBreakerLayer<M = Local> {
    shared: Arc<Shared<M>>,
}

impl<M> Clone for GrpcCircuitBreakerLayer<M> {
    fn clone(&self) -> Self {
        GrpcCircuitBreakerLayer {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl GrpcCircuitBreakerLayer {
    /// A builder whose requests without an authority (what generated
    /// clients send: `Client::new(channel)` sets only the path) use the
    /// breaker named after `origin`, the URI the channel was built for
    /// (`Endpoint::uri()`): `host:port`, the port from the scheme when the
    /// URI has none (`http://inventory` is `inventory:80`).
    ///
    /// ```
    /// let origin: http::Uri = "http://inventory.internal:50051".parse()?;
    /// let layer = interlock_tonic::GrpcCircuitBreakerLayer::for_origin(&origin).build()?;
    /// assert_eq!(layer.default_name(), "inventory.internal:50051");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_origin(origin: &http::Uri) -> GrpcCircuitBreakerLayerBuilder {
        GrpcCircuitBreakerLayer::named(HostAndPort::of_uri(origin).unwrap_or_default())
    }

    /// A builder whose requests without an authority use the breaker
    /// `name` (a logical name: `"inventory"`, a service name).
    pub fn named(name: impl Into<String>) -> GrpcCircuitBreakerLayerBuilder {
        GrpcCircuitBreakerLayerBuilder {
            registry: HostRegistry::builder(),
            default_name: name.into(),
            per_authority: true,
            classifier: GrpcStatusClassifier::new(),
        }
    }
}

impl<M: Mode> GrpcCircuitBreakerLayer<M> {
    /// The registry of breakers, for diagnosis.
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        self.shared.registry.registry()
    }

    /// The name of the breaker of requests without an authority.
    #[must_use]
    pub fn default_name(&self) -> &str {
        &self.shared.default_name
    }

    /// Closes the breakers now if the layer created the registry; a shared
    /// registry is left open.
    pub fn close(&self) {
        self.shared.registry.close();
    }
}

impl<S, M> Layer<S> for GrpcCircuitBreakerLayer<M> {
    type Service = GrpcCircuitBreaker<S, M>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcCircuitBreaker {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<M: Mode> fmt::Debug for GrpcCircuitBreakerLayer<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcCircuitBreakerLayer")
            .field("default_name", &self.shared.default_name)
            .field("per_authority", &self.shared.per_authority)
            .field("registry", &self.shared.registry)
            .field("classifier", &self.shared.classifier)
            .finish()
    }
}

/// Builds a [`GrpcCircuitBreakerLayer`]; every check happens in
/// [`build`](Self::build).
#[must_use]
pub struct GrpcCircuitBreakerLayerBuilder<M = Local> {
    registry: HostRegistryBuilder<M>,
    default_name: String,
    per_authority: bool,
    classifier: GrpcStatusClassifier,
}

impl<M: Mode> GrpcCircuitBreakerLayerBuilder<M> {
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

    /// Takes breakers from the caller's `registry` (left open when the
    /// layer closes). A registry coordinated through a blocking storage
    /// ([`Registry<Blocking>`](interlock::mode::Blocking)) shares each
    /// server's state across a fleet.
    pub fn registry<N: Mode>(self, registry: Registry<N>) -> GrpcCircuitBreakerLayerBuilder<N> {
        GrpcCircuitBreakerLayerBuilder {
            registry: self.registry.registry(registry),
            default_name: self.default_name,
            per_authority: self.per_authority,
            classifier: self.classifier,
        }
    }

    /// The failure policy (by default [`GrpcStatusClassifier::new`]).
    pub fn classifier(mut self, classifier: GrpcStatusClassifier) -> Self {
        self.classifier = classifier;
        self
    }

    /// Whether a request that names its authority (a client made with
    /// `with_origin`, or a channel layer that sets it) gets the breaker of
    /// that authority (`true`, the default) or the default one like every
    /// other request (`false`: one breaker for the whole channel).
    pub fn per_authority(mut self, per_authority: bool) -> Self {
        self.per_authority = per_authority;
        self
    }

    /// Builds the layer.
    ///
    /// # Errors
    ///
    /// [`BuildError::BlankName`] if the default name is blank (an origin
    /// without a host); [`BuildError::Registry`] if a shared registry is
    /// combined with `config`, `clock`, `listener` or `initial_state`, or
    /// for an invalid initial state.
    pub fn build(self) -> Result<GrpcCircuitBreakerLayer<M>, BuildError> {
        if self.default_name.trim().is_empty() {
            return Err(BuildError::BlankName);
        }
        let registry = self
            .registry
            .build()
            .map_err(|e: HttpBuildError| BuildError::Registry(e))?;
        Ok(GrpcCircuitBreakerLayer {
            shared: Arc::new(Shared {
                registry,
                default_name: self.default_name,
                per_authority: self.per_authority,
                classifier: Arc::new(self.classifier),
            }),
        })
    }
}

impl<M> fmt::Debug for GrpcCircuitBreakerLayerBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcCircuitBreakerLayerBuilder")
            .field("default_name", &self.default_name)
            .field("per_authority", &self.per_authority)
            .field("registry", &self.registry)
            .field("classifier", &self.classifier)
            .finish()
    }
}

/// A gRPC client service with one circuit breaker per authority; see the
/// [crate docs](crate).
pub struct GrpcCircuitBreaker<S, M = Local> {
    inner: S,
    shared: Arc<Shared<M>>,
}

impl<S: Clone, M> Clone for GrpcCircuitBreaker<S, M> {
    fn clone(&self) -> Self {
        GrpcCircuitBreaker {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<S, M: Mode> GrpcCircuitBreaker<S, M> {
    /// The registry of breakers, for diagnosis.
    #[must_use]
    pub fn registry(&self) -> &Registry<M> {
        self.shared.registry.registry()
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

impl<S: fmt::Debug, M: Mode> fmt::Debug for GrpcCircuitBreaker<S, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcCircuitBreaker")
            .field("inner", &self.inner)
            .field("default_name", &self.shared.default_name)
            .finish_non_exhaustive()
    }
}

impl<S, M, B, RB> Service<http::Request<B>> for GrpcCircuitBreaker<S, M>
where
    M: SyncApi,
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<crate::future::GrpcBody<RB>>;
    type Error = BoxError;
    type Future = crate::future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let name = self.shared.name_of(&request);
        match self.shared.registry.breaker(&name).acquire() {
            Ok(permit) => crate::future::ResponseFuture::called(
                self.inner.call(request),
                permit,
                Arc::clone(&self.shared.classifier),
            ),
            Err(open) => crate::future::ResponseFuture::refused(crate::unavailable(open)),
        }
    }
}
