//! The chaos strategies of [`pipeline::chaos`] as tower middleware.

use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::BoxError;
use super::future::ChaosFuture;
use crate::pipeline::chaos;

/// Wraps services in a [`Chaos`] service that injects what its chaos
/// strategy says: a [`chaos::Fault`] (the error, made by its closure, must
/// convert into a [`BoxError`]), a [`chaos::Latency`] (the request waits in
/// its response future, then goes to the ready inner service it took; a
/// clone stays behind) or a [`chaos::Outcome`] (a `Result` of the inner
/// service's response type). A fault or an outcome never reaches the inner
/// service. Rate, seed, switch and events are the strategy's.
///
/// Put it innermost, where the dependency would be, so the breaker and
/// timeout layers above it see the injections as real:
///
/// ```
/// use interlock::pipeline::chaos;
/// use interlock::tower::{ChaosLayer, CircuitBreakerLayer};
/// use interlock::{CircuitBreaker, Config, SlidingWindow, State};
/// use tower::{service_fn, Service, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), interlock::tower::BoxError> {
/// let breaker = CircuitBreaker::builder("echo")
///     .config(Config::builder().sliding_window(SlidingWindow::count(2)).minimum_number_of_calls(2).build()?)
///     .build()?;
/// let faults = chaos::Fault::builder(|| std::io::Error::other("injected")).injection_rate(1.0).build()?;
/// let mut svc = ServiceBuilder::new()
///     .layer(CircuitBreakerLayer::new(breaker.clone()))
///     .layer(ChaosLayer::new(faults))
///     .service(service_fn(|req: String| async move { Ok::<_, std::io::Error>(req) }));
///
/// for _ in 0..2 {
///     let err = svc.ready().await?.call("hi".into()).await.unwrap_err();
///     assert_eq!(err.to_string(), "injected");
/// }
/// assert_eq!(breaker.state(), State::Open);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ChaosLayer<C> {
    chaos: C,
}

impl<C> ChaosLayer<C> {
    /// A layer injecting with `chaos` (every service it wraps shares it).
    pub fn new(chaos: C) -> Self {
        ChaosLayer { chaos }
    }
}

impl<S, C: Clone> Layer<S> for ChaosLayer<C> {
    type Service = Chaos<S, C>;

    fn layer(&self, inner: S) -> Chaos<S, C> {
        Chaos::new(inner, self.chaos.clone())
    }
}

/// A service with chaos injection; see [`ChaosLayer`].
#[derive(Clone, Debug)]
pub struct Chaos<S, C> {
    inner: S,
    chaos: C,
}

impl<S, C> Chaos<S, C> {
    /// Injects `chaos` into the calls of `inner`.
    pub fn new(inner: S, chaos: C) -> Self {
        Chaos { inner, chaos }
    }

    /// The chaos strategy.
    pub fn chaos(&self) -> &C {
        &self.chaos
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

impl<S, R, G, X> Service<R> for Chaos<S, chaos::Fault<G>>
where
    S: Service<R>,
    S::Error: Into<BoxError>,
    G: Fn() -> X,
    X: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: R) -> Self::Future {
        match self.chaos.injected() {
            Some(error) => ChaosFuture::injected(Err(error.into())),
            None => ChaosFuture::called(self.inner.call(request)),
        }
    }
}

impl<S, R, G, X> Service<R> for Chaos<S, chaos::Outcome<G>>
where
    S: Service<R>,
    S::Error: Into<BoxError>,
    G: Fn() -> Result<S::Response, X>,
    X: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: R) -> Self::Future {
        match self.chaos.injected() {
            Some(result) => ChaosFuture::injected(result.map_err(Into::into)),
            None => ChaosFuture::called(self.inner.call(request)),
        }
    }
}

impl<S, R> Service<R> for Chaos<S, chaos::Latency>
where
    S: Service<R> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ChaosFuture<S, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: R) -> Self::Future {
        if !self.chaos.inject() {
            return ChaosFuture::called(self.inner.call(request));
        }
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        ChaosFuture::delayed(self.chaos.delay(), ready, request)
    }
}

pub(super) mod future {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use pin_project_lite::pin_project;
    use tower_service::Service;

    use crate::pipeline::Sleep;
    use crate::tower::BoxError;

    pin_project! {
        /// The response future of [`Chaos`](super::Chaos): an injected
        /// result, or the inner response (after an injected delay).
        pub struct ChaosFuture<S, R>
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
            Injected {
                result: Option<Result<S::Response, BoxError>>,
            },
            Delayed {
                sleep: Sleep,
                service: Option<(S, R)>,
            },
            Called {
                #[pin]
                future: S::Future,
            },
        }
    }

    impl<S: Service<R>, R> ChaosFuture<S, R> {
        pub(crate) fn injected(result: Result<S::Response, BoxError>) -> Self {
            ChaosFuture {
                state: State::Injected {
                    result: Some(result),
                },
            }
        }

        pub(crate) fn called(future: S::Future) -> Self {
            ChaosFuture {
                state: State::Called { future },
            }
        }

        pub(crate) fn delayed(sleep: Sleep, service: S, request: R) -> Self {
            ChaosFuture {
                state: State::Delayed {
                    sleep,
                    service: Some((service, request)),
                },
            }
        }
    }

    impl<S, R> Future for ChaosFuture<S, R>
    where
        S: Service<R>,
        S::Error: Into<BoxError>,
    {
        type Output = Result<S::Response, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let mut state = self.project().state;
            loop {
                match state.as_mut().project() {
                    StateProj::Injected { result } => {
                        return Poll::Ready(result.take().unwrap_or_else(|| {
                            Err("response future polled after completion".into())
                        }));
                    }
                    StateProj::Delayed { sleep, service } => {
                        ready!(sleep.as_mut().poll(cx));
                        let next = match service.take() {
                            Some((mut inner, request)) => State::Called {
                                future: inner.call(request),
                            },
                            None => State::Injected { result: None },
                        };
                        state.set(next);
                    }
                    StateProj::Called { future } => {
                        return future.poll(cx).map_err(Into::into);
                    }
                }
            }
        }
    }

    impl<S: Service<R>, R> fmt::Debug for ChaosFuture<S, R> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("ChaosFuture").finish_non_exhaustive()
        }
    }
}
