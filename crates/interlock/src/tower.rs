//! A circuit breaker as tower middleware (feature `tower`), for hyper,
//! tonic, axum and any other `tower::Service`.
//!
//! [`CircuitBreakerLayer`] wraps a service in a [`CircuitBreaker`] service
//! guarded by one breaker:
//!
//! - `poll_ready` only asks the inner service; **rejection happens in
//!   `call`**, so an open circuit never makes a service look unready (which
//!   would stall balancers and buffers) and the rejection is an error of
//!   that one request.
//! - The outcome is recorded when the response future resolves: `Ok` is a
//!   success, an error goes through the breaker's classifier (which sees
//!   the inner service's error itself).
//! - Dropping the response future cancels the call: its probe slot, if
//!   any, is handed back and nothing is recorded.
//! - Errors are a [`BoxError`] that downcasts to [`CircuitOpenError`] for a
//!   rejection, and to the inner service's error otherwise.
//!
//! For the other concerns use tower's own layers beside it:
//! `tower::timeout::TimeoutLayer` *inside* the breaker (so a timeout counts
//! as a failure), `tower::limit::ConcurrencyLimitLayer` for a bulkhead and
//! `tower::retry::RetryLayer` *outside* it (with a policy that does not
//! retry a [`CircuitOpenError`]). With the `governor` feature,
//! [`RateLimitLayer`] and [`KeyedRateLimitLayer`] (one limit per host or
//! tenant) put a GCRA rate limit *outside* the breaker; [`HedgeLayer`]
//! hedges slow requests outside it (and stops at an open circuit);
//! [`ChaosLayer`] injects faults, latency or chosen responses *inside* it. The
//! [`pipeline`](crate::pipeline) is for code that is not a tower stack. For one breaker per host of an HTTP
//! client, see `http::KeyedCircuitBreakerLayer` (feature `http`).
//!
//! ```
//! use interlock::tower::CircuitBreakerLayer;
//! use interlock::CircuitOpenError;
//! use tower::{service_fn, Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), interlock::pipeline::BoxError> {
//! let breaker = interlock::CircuitBreaker::new("echo");
//! let mut svc = CircuitBreakerLayer::new(breaker.clone())
//!     .layer(service_fn(|req: String| async move { Ok::<_, std::io::Error>(req) }));
//!
//! assert_eq!(svc.ready().await?.call("hi".into()).await?, "hi");
//!
//! breaker.force_open();
//! let err = svc.ready().await?.call("hi".into()).await.unwrap_err();
//! assert!(err.downcast_ref::<CircuitOpenError>().is_some());
//! # Ok(())
//! # }
//! ```
//!
//! [`CircuitOpenError`]: crate::CircuitOpenError

use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

pub use crate::pipeline::BoxError;

mod chaos;
mod hedge;
#[cfg(feature = "governor")]
mod rate_limit;

pub use chaos::{Chaos, ChaosLayer};
pub use hedge::{Hedge, HedgeLayer};
#[cfg(feature = "governor")]
#[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
pub use rate_limit::{KeyedRateLimit, KeyedRateLimitLayer, RateLimit, RateLimitLayer};

/// Wraps services in a [`CircuitBreaker`] service guarded by one breaker.
#[derive(Clone, Debug)]
pub struct CircuitBreakerLayer {
    breaker: crate::CircuitBreaker,
}

impl CircuitBreakerLayer {
    /// A layer for `breaker` (every service it wraps shares that breaker).
    #[must_use]
    pub fn new(breaker: crate::CircuitBreaker) -> Self {
        CircuitBreakerLayer { breaker }
    }
}

impl<S> Layer<S> for CircuitBreakerLayer {
    type Service = CircuitBreaker<S>;

    fn layer(&self, inner: S) -> CircuitBreaker<S> {
        CircuitBreaker::new(inner, self.breaker.clone())
    }
}

/// A service guarded by a circuit breaker; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct CircuitBreaker<S> {
    inner: S,
    breaker: crate::CircuitBreaker,
}

impl<S> CircuitBreaker<S> {
    /// Guards `inner` with `breaker`.
    pub fn new(inner: S, breaker: crate::CircuitBreaker) -> Self {
        CircuitBreaker { inner, breaker }
    }

    /// A [`CircuitBreakerLayer`] for `breaker`.
    #[must_use]
    pub fn layer(breaker: crate::CircuitBreaker) -> CircuitBreakerLayer {
        CircuitBreakerLayer::new(breaker)
    }

    /// The breaker.
    pub fn breaker(&self) -> &crate::CircuitBreaker {
        &self.breaker
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

impl<S, Request> Service<Request> for CircuitBreaker<S>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.breaker.acquire() {
            Ok(permit) => future::ResponseFuture::called(self.inner.call(request), permit),
            Err(open) => future::ResponseFuture::rejected(open),
        }
    }
}

/// The response future of [`CircuitBreaker`].
pub mod future {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use pin_project_lite::pin_project;

    use super::BoxError;
    use crate::{CircuitOpenError, Permit};

    pub use super::chaos::future::ChaosFuture;
    pub use super::hedge::future::HedgeFuture;
    #[cfg(feature = "governor")]
    #[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
    pub use super::rate_limit::future::RateLimitFuture;

    pin_project! {
        /// Resolves to the inner service's response, recording the outcome
        /// on the breaker; dropping it unresolved cancels the call.
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
            },
            Rejected {
                error: Option<CircuitOpenError>,
            },
        }
    }

    impl<F> ResponseFuture<F> {
        pub(super) fn called(future: F, permit: Permit) -> Self {
            ResponseFuture {
                kind: Kind::Called {
                    future,
                    permit: Some(permit),
                },
            }
        }

        pub(super) fn rejected(error: CircuitOpenError) -> Self {
            ResponseFuture {
                kind: Kind::Rejected { error: Some(error) },
            }
        }
    }

    impl<F, T, E> Future for ResponseFuture<F>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        type Output = Result<T, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            match self.project().kind.project() {
                KindProj::Called { future, permit } => {
                    let result = ready!(future.poll(cx));
                    let permit = permit.take();
                    Poll::Ready(match result {
                        Ok(response) => {
                            if let Some(permit) = permit {
                                permit.success();
                            }
                            Ok(response)
                        }
                        Err(error) => {
                            let error: BoxError = error.into();
                            if let Some(permit) = permit {
                                permit.finish_error(&*error, std::any::type_name::<E>());
                            }
                            Err(error)
                        }
                    })
                }
                KindProj::Rejected { error } => Poll::Ready(Err(match error.take() {
                    Some(open) => Box::new(open),
                    None => "response future polled after completion".into(),
                })),
            }
        }
    }

    impl<F> fmt::Debug for ResponseFuture<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}
