//! A [`pipeline::Hedge`] as tower middleware.

use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

use super::BoxError;
use super::future::HedgeFuture;
use crate::pipeline;
use crate::pipeline::hedge::Judged;

/// Wraps services in a [`Hedge`] service: a request still unanswered after
/// the hedge's delay is sent again (up to `max_hedged_attempts` more
/// times, each to a clone of the inner service, polled ready first), and
/// the first success is the response; the other requests' futures are
/// dropped.
///
/// The request type must be `Clone`, and so must the service. Every error
/// but a refusal is replaced by a hedge while hedges remain (the default
/// [`UnlessOpen`](crate::pipeline::UnlessOpen) rule); a refusal, a
/// [`CircuitOpenError`](crate::CircuitOpenError) from a
/// [`CircuitBreakerLayer`](super::CircuitBreakerLayer) inside the hedge (or
/// a full bulkhead, or a spent rate limit), stops hedging: put the breaker
/// layer *inside* the hedge, and no hedge is ever sent into an open
/// circuit. The delay, percentile, events and listeners are the hedge's.
///
/// ```
/// use interlock::pipeline::{Hedge, TokioSleeper};
/// use interlock::tower::HedgeLayer;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tower::{service_fn, Layer, Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), interlock::tower::BoxError> {
/// // The first request takes 10 s, later ones 20 ms.
/// let sent = Arc::new(AtomicU32::new(0));
/// let counter = sent.clone();
/// let backend = service_fn(move |req: String| {
///     let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
///     async move {
///         let takes = if first { 10_000 } else { 20 };
///         tokio::time::sleep(Duration::from_millis(takes)).await;
///         Ok::<_, std::io::Error>(req)
///     }
/// });
/// let hedge = Hedge::builder(Duration::from_millis(100)).sleeper(TokioSleeper).build()?;
/// let mut svc = HedgeLayer::new(hedge).layer(backend);
///
/// let start = tokio::time::Instant::now();
/// assert_eq!(svc.ready().await?.call("q".into()).await?, "q");
/// assert_eq!(start.elapsed(), Duration::from_millis(120)); // the hedge answered
/// assert_eq!(sent.load(Ordering::SeqCst), 2);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct HedgeLayer {
    hedge: pipeline::Hedge,
}

impl HedgeLayer {
    /// A layer for `hedge` (every service it wraps shares its latencies).
    #[must_use]
    pub fn new(hedge: pipeline::Hedge) -> Self {
        HedgeLayer { hedge }
    }
}

impl<S> Layer<S> for HedgeLayer {
    type Service = Hedge<S>;

    fn layer(&self, inner: S) -> Hedge<S> {
        Hedge::new(inner, self.hedge.clone())
    }
}

/// A service whose slow requests are hedged; see [`HedgeLayer`].
#[derive(Clone, Debug)]
pub struct Hedge<S> {
    inner: S,
    hedge: pipeline::Hedge,
}

impl<S> Hedge<S> {
    /// Hedges the requests of `inner` with `hedge`.
    pub fn new(inner: S, hedge: pipeline::Hedge) -> Self {
        Hedge { inner, hedge }
    }

    /// The hedge.
    pub fn hedge(&self) -> &pipeline::Hedge {
        &self.hedge
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

impl<S, R> Service<R> for Hedge<S>
where
    S: Service<R> + Clone,
    S::Error: Into<BoxError>,
    R: Clone,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = HedgeFuture<S, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let spare = self.inner.clone();
        let first = self.inner.call(request.clone());
        HedgeFuture::new(self.hedge.clone(), first, spare, request)
    }
}

/// Whether a boxed error is a refusal before the call ran.
fn judge(error: &BoxError) -> Judged {
    #[cfg(feature = "governor")]
    let limited = error.is::<pipeline::rate_limit::Exceeded>();
    #[cfg(not(feature = "governor"))]
    let limited = false;
    if error.is::<crate::CircuitOpenError>() || error.is::<pipeline::bulkhead::Full>() || limited {
        Judged::Refused
    } else {
        Judged::Selected
    }
}

pub(super) mod future {
    use std::fmt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, ready};

    use pin_project_lite::pin_project;
    use tower_service::Service;

    use crate::pipeline::Hedge;
    use crate::pipeline::hedge::Run;
    use crate::tower::BoxError;

    pin_project! {
        /// One attempt of a hedged request, its error boxed.
        pub(crate) struct Attempt<F> {
            #[pin]
            future: F,
        }
    }

    impl<F, T, E> Future for Attempt<F>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<BoxError>,
    {
        type Output = Result<T, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            Poll::Ready(ready!(self.project().future.poll(cx)).map_err(Into::into))
        }
    }

    impl<F> fmt::Debug for Attempt<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Attempt").finish_non_exhaustive()
        }
    }

    /// The response future of [`Hedge`](super::Hedge): the first success
    /// among the request and its hedges; dropping it drops them all.
    pub struct HedgeFuture<S: Service<R>, R> {
        hedge: Hedge,
        run: Run<Attempt<S::Future>, BoxError>,
        spare: S,
        request: R,
    }

    impl<S: Service<R>, R> HedgeFuture<S, R> {
        pub(crate) fn new(hedge: Hedge, first: S::Future, spare: S, request: R) -> Self {
            let run = hedge.begin(Attempt { future: first });
            HedgeFuture {
                hedge,
                run,
                spare,
                request,
            }
        }
    }

    // Every attempt is boxed and pinned inside `run`; nothing else is pinned.
    impl<S: Service<R>, R> Unpin for HedgeFuture<S, R> {}

    impl<S, R> Future for HedgeFuture<S, R>
    where
        S: Service<R>,
        S::Error: Into<BoxError>,
        R: Clone,
    {
        type Output = Result<S::Response, BoxError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.get_mut();
            let (spare, request) = (&mut this.spare, &this.request);
            this.hedge.drive(
                &mut this.run,
                cx,
                super::judge,
                |cx| match spare.poll_ready(cx) {
                    Poll::Pending => Poll::Pending,
                    // A clone that cannot serve: no further hedge.
                    Poll::Ready(Err(_)) => Poll::Ready(None),
                    Poll::Ready(Ok(())) => Poll::Ready(Some(Attempt {
                        future: spare.call(request.clone()),
                    })),
                },
                || "every hedged request ended without a response".into(),
            )
        }
    }

    impl<S: Service<R>, R> fmt::Debug for HedgeFuture<S, R> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("HedgeFuture")
                .field("hedge", &self.hedge)
                .finish_non_exhaustive()
        }
    }
}
