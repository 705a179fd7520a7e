//! [`tower_resilience_circuitbreaker`] `=0.14.0`: a tower middleware; the circuit lives behind a
//! `tokio::sync::Mutex` (plus an `AtomicU8` mirror of the state for `poll_ready`), and every
//! `call` returns a boxed future.
//!
//! API used (checked against the crate's source for 0.14.0):
//! - `CircuitBreakerLayer::builder()` with `sliding_window_size(n)` (count window, default 100),
//!   `slow_call_duration_threshold(d)` (turns slow-call detection on), `wait_duration_in_open(d)`,
//!   `sliding_window_type(SlidingWindowType::TimeBased)` + `sliding_window_duration(d)`,
//!   `build() -> Result<CircuitBreakerLayer, _>`; `layer.layer_fn(service) -> CircuitBreaker<S, C>`.
//! - `tower::ServiceExt::ready(&mut svc).await?.call(req).await` per call;
//!   `CircuitBreaker::force_open().await`, `state_sync() -> CircuitState`.
//!
//! The time-based window keeps one `CallRecord` per call in a `VecDeque` and recounts the whole
//! deque on every recorded call, so its cost grows with the number of calls in the window.
//!
//! Half-open: admission reserves a slot of a per-round `tokio::sync::Semaphore`
//! (`permitted_calls_in_half_open`, default 1). A call whose future is dropped after admission
//! but before the inner service answers gives its slot back without recording anything — the
//! same thing as dropping an interlock permit. So `half_open` wraps a service that never
//! answers, polls each call's future once (that runs the admission) and drops it; the default
//! of one probe per round is kept. Setup waits out a 1 ms open period with `tokio::time::sleep`.

use std::fmt;
use std::future::{Future, Pending, Ready};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::{Service, ServiceExt};
use tower_resilience_circuitbreaker::{
    CircuitBreaker, CircuitBreakerLayer, CircuitState, DefaultClassifier, SlidingWindowType,
};

use crate::{AsyncBreaker, OpError, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "tower-resilience";

/// Slow-call threshold: far above anything the trivial service takes, so nothing is slow,
/// but the detection (timing each call, counting slow ones) is on.
const SLOW_CALL: Duration = Duration::from_secs(1);

/// The protected service: answers `ok` at once.
#[derive(Clone, Copy, Debug, Default)]
pub struct OkService;

impl Service<()> for OkService {
    type Response = u64;
    type Error = OpError;
    type Future = Ready<Result<u64, OpError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), OpError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(ok())
    }
}

/// A service that never answers: admission happens, then the caller drops the call.
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverService;

impl Service<()> for NeverService {
    type Response = u64;
    type Error = OpError;
    type Future = Pending<Result<u64, OpError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), OpError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (): ()) -> Self::Future {
        std::future::pending()
    }
}

/// A tower-resilience circuit breaker around `S`; clones share the circuit.
#[derive(Clone)]
pub struct Breaker<S>(CircuitBreaker<S, DefaultClassifier>);

impl<S> fmt::Debug for Breaker<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Breaker")
            .field(&self.0.state_sync())
            .finish()
    }
}

impl<S> Breaker<S> {
    /// The circuit's state.
    #[must_use]
    pub fn state(&self) -> CircuitState {
        self.0.state_sync()
    }
}

impl AsyncBreaker for Breaker<OkService> {
    async fn call(&mut self) -> bool {
        match self.0.ready().await {
            Ok(svc) => svc.call(()).await.is_ok(),
            Err(_) => false,
        }
    }
}

impl AsyncBreaker for Breaker<NeverService> {
    /// One half-open admission: readiness, the call's admission (first poll of its future),
    /// then the call is dropped, which returns its probe slot.
    async fn call(&mut self) -> bool {
        let Ok(svc) = self.0.ready().await else {
            return false;
        };
        let mut fut = pin!(svc.call(()));
        // Admitted: the future is waiting on `NeverService`. Rejected: it is ready (Err).
        std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await
    }
}

fn build<S>(
    builder: tower_resilience_circuitbreaker::CircuitBreakerConfigBuilder,
    svc: S,
) -> Breaker<S> {
    let layer: CircuitBreakerLayer = builder.build().expect("tower-resilience: valid config");
    Breaker(layer.layer_fn(svc))
}

/// Count window of 100, slow-call detection on, closed.
///
/// # Panics
/// If the breaker rejects a call.
pub async fn closed() -> Breaker<OkService> {
    let mut b = build(
        CircuitBreakerLayer::builder()
            .sliding_window_size(100)
            .slow_call_duration_threshold(SLOW_CALL),
        OkService,
    );
    assert!(
        b.call().await,
        "tower-resilience: a fresh breaker must admit calls"
    );
    b
}

/// Forced open with a one-hour wait: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
pub async fn rejected() -> Breaker<OkService> {
    let mut b = build(
        CircuitBreakerLayer::builder()
            .sliding_window_size(100)
            .slow_call_duration_threshold(SLOW_CALL)
            .wait_duration_in_open(Duration::from_secs(3600)),
        OkService,
    );
    b.0.force_open().await;
    assert!(
        !b.call().await,
        "tower-resilience: open breaker admitted a call"
    );
    assert_eq!(b.state(), CircuitState::Open);
    b
}

/// Half-open with the default one probe per round; each `call` admits a probe and drops it.
///
/// # Panics
/// If the breaker is not half-open after setup, or does not re-admit after a dropped probe.
pub async fn half_open() -> Breaker<NeverService> {
    let mut b = build(
        CircuitBreakerLayer::builder()
            .sliding_window_size(100)
            .slow_call_duration_threshold(SLOW_CALL)
            .wait_duration_in_open(Duration::from_millis(1)),
        NeverService,
    );
    b.0.force_open().await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    for _ in 0..1000 {
        assert!(
            b.call().await,
            "tower-resilience: half-open breaker refused a probe"
        );
    }
    assert_eq!(b.state(), CircuitState::HalfOpen);
    b
}

/// A 60 s time-based window (slow-call detection on) already holding `n` successful calls.
///
/// # Panics
/// If a prefill call is rejected.
pub async fn time_window(n: usize) -> Breaker<OkService> {
    let mut b = build(
        CircuitBreakerLayer::builder()
            .sliding_window_type(SlidingWindowType::TimeBased)
            .sliding_window_duration(Duration::from_secs(60))
            .slow_call_duration_threshold(SLOW_CALL),
        OkService,
    );
    for _ in 0..n {
        assert!(b.call().await, "tower-resilience: prefill call rejected");
    }
    b
}
