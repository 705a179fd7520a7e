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
//! - The outcome is recorded when the response future resolves: an error
//!   goes through the breaker's classifier (which sees the inner service's
//!   error itself); an `Ok` response is a success unless a response
//!   classifier says otherwise
//!   ([`classify_response`](CircuitBreakerLayer::classify_response)):
//!   hyper's client, for one, answers a 500 with `Ok`, so give it
//!   `http::HttpStatusClassifier` (feature `http`) or a closure returning a
//!   [`Verdict`].
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

use crate::Verdict;
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

/// Judges the `Ok` responses of a service guarded by [`CircuitBreakerLayer`]
/// (see [`classify_response`](CircuitBreakerLayer::classify_response)).
///
/// Implemented for [`AnyOk`] (the default: every response is a success),
/// for closures `Fn(&T) -> Verdict`, and, with the `http` feature, for
/// `http::HttpStatusClassifier` over `http::Response<B>` (its failure
/// statuses are failures). The classifier is cloned into each response
/// future, so keep it cheap to clone (an `Arc` around anything heavy).
pub trait ClassifyResponse<T> {
    /// The verdict on `response`.
    fn classify_response(&self, response: &T) -> Verdict;

    /// What the breaker keeps as its last failure when `response` is not a
    /// success (by default a fixed text).
    fn describe(&self, response: &T) -> String {
        let _ = response;
        "the response was classified as a failure".to_owned()
    }
}

/// The default response classifier: every `Ok` response is a success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnyOk;

impl<T> ClassifyResponse<T> for AnyOk {
    #[inline]
    fn classify_response(&self, _response: &T) -> Verdict {
        Verdict::Success
    }
}

impl<T, F: Fn(&T) -> Verdict> ClassifyResponse<T> for F {
    #[inline]
    fn classify_response(&self, response: &T) -> Verdict {
        self(response)
    }
}

/// Wraps services in a [`CircuitBreaker`] service guarded by one breaker.
#[derive(Clone, Debug)]
pub struct CircuitBreakerLayer<C = AnyOk> {
    breaker: crate::CircuitBreaker,
    classifier: C,
}

impl CircuitBreakerLayer {
    /// A layer for `breaker` (every service it wraps shares that breaker).
    #[must_use]
    pub fn new(breaker: crate::CircuitBreaker) -> Self {
        CircuitBreakerLayer {
            breaker,
            classifier: AnyOk,
        }
    }
}

impl<C> CircuitBreakerLayer<C> {
    /// Judges every `Ok` response with `classifier` (a
    /// [`ClassifyResponse`]): a service that reports its upstream's
    /// failures as responses (hyper's client and a 500, a gRPC status in a
    /// 200) then trips the breaker. Errors still go through the breaker's
    /// own classifier.
    ///
    /// ```
    /// use interlock::tower::CircuitBreakerLayer;
    /// use interlock::{CircuitBreaker, Config, SlidingWindow, State, Verdict};
    /// use tower::{service_fn, Layer, Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let config = Config::builder().minimum_number_of_calls(2).sliding_window(SlidingWindow::count(2)).build()?;
    /// let breaker = CircuitBreaker::builder("search").config(config).build()?;
    /// // A service that answers its failures with a status code.
    /// let search = service_fn(|_query: &str| async { Ok::<u16, std::io::Error>(500) });
    /// let mut search = CircuitBreakerLayer::new(breaker.clone())
    ///     .classify_response(|status: &u16| if *status >= 500 { Verdict::Failure } else { Verdict::Success })
    ///     .layer(search);
    /// for _ in 0..2 {
    ///     assert_eq!(search.ready().await?.call("rust").await?, 500);
    /// }
    /// assert_eq!(breaker.state(), State::Open);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn classify_response<D>(self, classifier: D) -> CircuitBreakerLayer<D> {
        CircuitBreakerLayer {
            breaker: self.breaker,
            classifier,
        }
    }

    /// The breaker.
    #[must_use]
    pub fn breaker(&self) -> &crate::CircuitBreaker {
        &self.breaker
    }
}

impl<S, C: Clone> Layer<S> for CircuitBreakerLayer<C> {
    type Service = CircuitBreaker<S, C>;

    fn layer(&self, inner: S) -> CircuitBreaker<S, C> {
        CircuitBreaker {
            inner,
            breaker: self.breaker.clone(),
            classifier: self.classifier.clone(),
        }
    }
}

/// A service guarded by a circuit breaker; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct CircuitBreaker<S, C = AnyOk> {
    inner: S,
    breaker: crate::CircuitBreaker,
    classifier: C,
}

impl<S> CircuitBreaker<S> {
    /// Guards `inner` with `breaker`.
    pub fn new(inner: S, breaker: crate::CircuitBreaker) -> Self {
        CircuitBreaker {
            inner,
            breaker,
            classifier: AnyOk,
        }
    }

    /// A [`CircuitBreakerLayer`] for `breaker`.
    #[must_use]
    pub fn layer(breaker: crate::CircuitBreaker) -> CircuitBreakerLayer {
        CircuitBreakerLayer::new(breaker)
    }
}

impl<S, C> CircuitBreaker<S, C> {
    /// The response classifier.
    pub fn classifier(&self) -> &C {
        &self.classifier
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

impl<S, C, Request> Service<Request> for CircuitBreaker<S, C>
where
    S: Service<Request>,
    S::Error: Into<BoxError>,
    C: ClassifyResponse<S::Response> + Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = future::ResponseFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match self.breaker.acquire() {
            Ok(permit) => future::ResponseFuture::called(
                self.inner.call(request),
                permit,
                self.classifier.clone(),
            ),
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

    use super::{AnyOk, BoxError, ClassifyResponse};
    use crate::{CircuitOpenError, Permit, Verdict};

    pub use super::chaos::future::ChaosFuture;
    pub use super::hedge::future::HedgeFuture;
    #[cfg(feature = "governor")]
    #[cfg_attr(docsrs, doc(cfg(feature = "governor")))]
    pub use super::rate_limit::future::RateLimitFuture;

    pin_project! {
        /// Resolves to the inner service's response, recording the outcome
        /// on the breaker; dropping it unresolved cancels the call.
        pub struct ResponseFuture<F, C = AnyOk> {
            #[pin]
            kind: Kind<F, C>,
        }
    }

    pin_project! {
        #[project = KindProj]
        enum Kind<F, C> {
            Called {
                #[pin]
                future: F,
                permit: Option<Permit>,
                classifier: C,
            },
            Rejected {
                error: Option<CircuitOpenError>,
            },
        }
    }

    impl<F, C> ResponseFuture<F, C> {
        pub(super) fn called(future: F, permit: Permit, classifier: C) -> Self {
            ResponseFuture {
                kind: Kind::Called {
                    future,
                    permit: Some(permit),
                    classifier,
                },
            }
        }

        pub(super) fn rejected(error: CircuitOpenError) -> Self {
            ResponseFuture {
                kind: Kind::Rejected { error: Some(error) },
            }
        }
    }

    impl<F, C, T, E> Future for ResponseFuture<F, C>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
        C: ClassifyResponse<T>,
    {
        type Output = Result<T, BoxError>;

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
                                match classifier.classify_response(&response) {
                                    Verdict::Success => permit.success(),
                                    verdict => {
                                        permit.finish_with(verdict, &classifier.describe(&response))
                                    }
                                }
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

    impl<F, C> fmt::Debug for ResponseFuture<F, C> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ResponseFuture").finish_non_exhaustive()
        }
    }
}
