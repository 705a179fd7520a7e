//! A [`pipeline::RateLimit`] as tower middleware (features `tower` and
//! `governor`), globally or per request key.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::BoxError;
use super::future::RateLimitFuture;
use crate::pipeline::{self, KeyedRateLimit as Keys};

/// Wraps services in a [`RateLimit`] service sharing one limit.
///
/// Like [`CircuitBreakerLayer`](super::CircuitBreakerLayer), the limit is
/// applied in `call`, never in `poll_ready`: a refusal is the error of that
/// one request (a [`BoxError`] that downcasts to
/// [`rate_limit::Exceeded`](crate::pipeline::rate_limit::Exceeded)) and the
/// service never looks unready. With
/// [`max_wait`](crate::pipeline::RateLimitBuilder::max_wait), a request
/// over the limit waits for its turn inside its response future, then goes
/// to the (cloned, ready) inner service; dropping the future while it waits
/// costs the limit nothing.
///
/// ```
/// use interlock::pipeline::{rate_limit::Exceeded, RateLimit};
/// use interlock::tower::RateLimitLayer;
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), interlock::tower::BoxError> {
/// let limit = RateLimit::per_second(1).name("echo").build()?;
/// let mut svc = RateLimitLayer::new(limit)
///     .layer(service_fn(|req: String| async move { Ok::<_, std::io::Error>(req) }));
///
/// assert_eq!(svc.ready().await?.call("hi".into()).await?, "hi");
/// let err = svc.ready().await?.call("again".into()).await.unwrap_err();
/// assert_eq!(err.downcast_ref::<Exceeded>().unwrap().name(), "echo");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    limit: pipeline::RateLimit,
}

impl RateLimitLayer {
    /// A layer for `limit` (every service it wraps shares that limit).
    #[must_use]
    pub fn new(limit: pipeline::RateLimit) -> Self {
        RateLimitLayer { limit }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::new(inner, self.limit.clone())
    }
}

/// A service behind a rate limit; see [`RateLimitLayer`].
#[derive(Clone, Debug)]
pub struct RateLimit<S> {
    inner: S,
    limit: pipeline::RateLimit,
}

impl<S> RateLimit<S> {
    /// Limits `inner` with `limit`.
    pub fn new(inner: S, limit: pipeline::RateLimit) -> Self {
        RateLimit { inner, limit }
    }

    /// A [`RateLimitLayer`] for `limit`.
    #[must_use]
    pub fn layer(limit: pipeline::RateLimit) -> RateLimitLayer {
        RateLimitLayer::new(limit)
    }

    /// The limit.
    pub fn limit(&self) -> &pipeline::RateLimit {
        &self.limit
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

impl<S, Request> Service<Request> for RateLimit<S>
where
    S: Service<Request> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RateLimitFuture<S, Request>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        RateLimitFuture::start(self.limit.clone(), &mut self.inner, request)
    }
}

/// Wraps services in a [`KeyedRateLimit`] service: one limit per key of
/// the request (its host, its tenant), from one [`pipeline::KeyedRateLimit`].
///
/// `key` picks each request's key; for HTTP clients,
/// `|req: &http::Request<B>| req.uri().host().unwrap_or_default().to_owned()`
/// (or `http::HostAndPort::of_uri` with the `http` feature). Refusals and
/// waits are as for [`RateLimitLayer`]; the refusal's
/// [`key()`](crate::pipeline::rate_limit::Exceeded::key) names the key.
///
/// ```
/// use interlock::pipeline::{rate_limit::Exceeded, RateLimit};
/// use interlock::tower::KeyedRateLimitLayer;
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), interlock::tower::BoxError> {
/// // One call per second per tenant ("tenant/path" requests).
/// let tenants = RateLimit::per_second(1).name("tenants").build_keyed()?;
/// let mut svc = KeyedRateLimitLayer::new(tenants, |req: &String| {
///     req.split('/').next().unwrap_or_default().to_owned()
/// })
/// .layer(service_fn(|req: String| async move { Ok::<_, std::io::Error>(req) }));
///
/// svc.ready().await?.call("acme/orders".into()).await?;
/// svc.ready().await?.call("globex/orders".into()).await?; // its own budget
/// let err = svc.ready().await?.call("acme/users".into()).await.unwrap_err();
/// assert_eq!(err.downcast_ref::<Exceeded>().unwrap().key(), Some("acme"));
/// # Ok(())
/// # }
/// ```
pub struct KeyedRateLimitLayer<K> {
    limits: Keys,
    key: Arc<K>,
}

impl<K> KeyedRateLimitLayer<K> {
    /// A layer metering each request under the key `key` gives it.
    pub fn new(limits: Keys, key: K) -> Self {
        KeyedRateLimitLayer {
            limits,
            key: Arc::new(key),
        }
    }
}

impl<K> Clone for KeyedRateLimitLayer<K> {
    fn clone(&self) -> Self {
        KeyedRateLimitLayer {
            limits: self.limits.clone(),
            key: Arc::clone(&self.key),
        }
    }
}

impl<K> fmt::Debug for KeyedRateLimitLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimitLayer")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S, K> Layer<S> for KeyedRateLimitLayer<K> {
    type Service = KeyedRateLimit<S, K>;

    fn layer(&self, inner: S) -> KeyedRateLimit<S, K> {
        KeyedRateLimit {
            inner,
            limits: self.limits.clone(),
            key: Arc::clone(&self.key),
        }
    }
}

/// A service behind one rate limit per request key; see
/// [`KeyedRateLimitLayer`].
pub struct KeyedRateLimit<S, K> {
    inner: S,
    limits: Keys,
    key: Arc<K>,
}

impl<S: Clone, K> Clone for KeyedRateLimit<S, K> {
    fn clone(&self) -> Self {
        KeyedRateLimit {
            inner: self.inner.clone(),
            limits: self.limits.clone(),
            key: Arc::clone(&self.key),
        }
    }
}

impl<S: fmt::Debug, K> fmt::Debug for KeyedRateLimit<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimit")
            .field("inner", &self.inner)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S, K> KeyedRateLimit<S, K> {
    /// The limits, one per key.
    pub fn limits(&self) -> &Keys {
        &self.limits
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

impl<S, K, Request> Service<Request> for KeyedRateLimit<S, K>
where
    S: Service<Request> + Clone,
    S::Error: Into<BoxError>,
    K: Fn(&Request) -> String,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = RateLimitFuture<S, Request>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let limit = self.limits.key(&(self.key)(&request));
        RateLimitFuture::start(limit, &mut self.inner, request)
    }
}

pub(super) mod future {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use pin_project_lite::pin_project;
    use tower_service::Service;

    use crate::clock::Timestamp;
    use crate::pipeline::{RateLimit, Sleep};
    use crate::tower::BoxError;

    pin_project! {
        /// The response future of the rate-limit services: it waits for the
        /// request's turn (when the limit has a `max_wait`), then resolves
        /// to the inner service's response.
        pub struct RateLimitFuture<S, R>
        where
            S: Service<R>,
        {
            #[pin]
            state: State<S, R>,
        }
    }

    pin_project! {
        #[project = StateProj]
        enum State<S, R>
        where
            S: Service<R>,
        {
            Waiting {
                sleep: Sleep,
                limit: RateLimit,
                deadline: Option<Timestamp>,
                service: Option<(S, R)>,
            },
            Called {
                #[pin]
                future: S::Future,
            },
            Refused {
                error: Option<BoxError>,
            },
        }
    }

    impl<S: Service<R> + Clone, R> RateLimitFuture<S, R> {
        pub(crate) fn start(limit: RateLimit, inner: &mut S, request: R) -> Self {
            let deadline = limit.deadline();
            let state = match limit.admit(deadline) {
                Ok(None) => State::Called {
                    future: inner.call(request),
                },
                Ok(Some(wait)) => {
                    // The ready service goes into the future; a clone
                    // (polled ready before its own call) stays behind.
                    let clone = inner.clone();
                    let ready = std::mem::replace(inner, clone);
                    State::Waiting {
                        sleep: limit.sleep(wait),
                        limit,
                        deadline,
                        service: Some((ready, request)),
                    }
                }
                Err(exceeded) => State::Refused {
                    error: Some(Box::new(exceeded)),
                },
            };
            RateLimitFuture { state }
        }
    }

    impl<S, R> Future for RateLimitFuture<S, R>
    where
        S: Service<R>,
        S::Error: Into<BoxError>,
    {
        type Output = Result<S::Response, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let mut state = self.project().state;
            loop {
                match state.as_mut().project() {
                    StateProj::Waiting {
                        sleep,
                        limit,
                        deadline,
                        service,
                    } => {
                        ready!(sleep.as_mut().poll(cx));
                        match limit.admit(*deadline) {
                            Ok(Some(wait)) => *sleep = limit.sleep(wait),
                            Ok(None) => match service.take() {
                                Some((mut inner, request)) => {
                                    let future = inner.call(request);
                                    state.set(State::Called { future });
                                }
                                None => state.set(State::Refused { error: None }),
                            },
                            Err(exceeded) => {
                                return Poll::Ready(Err(Box::new(exceeded)));
                            }
                        }
                    }
                    StateProj::Called { future } => {
                        return future.poll(cx).map_err(Into::into);
                    }
                    StateProj::Refused { error } => {
                        return Poll::Ready(Err(error
                            .take()
                            .unwrap_or_else(|| "response future polled after completion".into())));
                    }
                }
            }
        }
    }

    impl<S: Service<R>, R> fmt::Debug for RateLimitFuture<S, R> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("RateLimitFuture").finish_non_exhaustive()
        }
    }
}
