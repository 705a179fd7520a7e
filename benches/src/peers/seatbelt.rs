//! [`seatbelt`] `=0.11.0` (feature `breaker`): `layered` middleware; the circuit is an engine
//! behind a `std::sync::Mutex`, read through a `tick::Clock`, with a time-based health window
//! split into 10 buckets.
//!
//! API used (checked against the crate's source for 0.11.0):
//! - `ResilienceContext::new(&tick::Clock::new_tokio())` (the clock needs a Tokio runtime).
//! - `seatbelt::breaker::Breaker::layer(name, &ctx)` → `BreakerLayer` with the two required
//!   settings `recovery_with(|out, _| RecoveryInfo::..)` and `rejected_input_error(|_, _| err)`,
//!   then `min_throughput(n)`, `sampling_duration(d)`, `break_duration(d)`;
//!   `layered::Layer::layer(&layer, inner)` → `Breaker<In, Out, S>`.
//! - `layered::Service::execute(&svc, input).await` per call.
//!
//! No count window (its only window is time-based: `sampling_duration`, default 30 s) and no
//! slow-call detection, so `closed` uses the defaults. No manual open: `rejected` trips it with
//! one failure (`min_throughput(1)`) and a one-hour `break_duration`.
//!
//! Half-open: in its first half-open stage seatbelt admits one probe per cooldown (the cooldown
//! is `break_duration`). An admitted probe whose future is dropped before it completes is an
//! *abandoned* execution; with the default `AbandonedPolicy` it decides nothing, so the breaker
//! stays half-open — the same thing as dropping an interlock permit. So `half_open` uses a
//! 1 ns `break_duration` (hence a 1 ns cooldown between probes), wraps a service that never
//! answers, polls each call's future once (that runs the admission) and drops it.

use std::future::{Future, Pending, Ready};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use layered::{Layer as _, Service};
use seatbelt::breaker::{Breaker as SbBreaker, BreakerLayer};
use seatbelt::{RecoveryInfo, ResilienceContext};

use crate::{AsyncBreaker, OpError, fail, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "seatbelt";

/// Input that makes the protected services fail (setup only, to trip the breaker).
const TRIP: u64 = u64::MAX;

type Out = Result<u64, OpError>;

/// The protected service: answers `ok` at once (fails only for `TRIP`).
#[derive(Clone, Copy, Debug, Default)]
pub struct OkService;

impl Service<u64> for OkService {
    type Out = Out;

    fn execute(&self, input: u64) -> impl Future<Output = Out> + Send {
        std::future::ready(if input == TRIP { fail() } else { ok() })
    }
}

/// A service that never answers (fails at once for `TRIP`).
#[derive(Clone, Copy, Debug, Default)]
pub struct NeverService;

/// Either never answers or fails at once.
#[derive(Debug)]
pub enum NeverOrFail {
    /// Never answers.
    Never(Pending<Out>),
    /// Fails at once.
    Fail(Ready<Out>),
}

impl Future for NeverOrFail {
    type Output = Out;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Out> {
        match self.get_mut() {
            Self::Never(p) => std::pin::Pin::new(p).poll(cx),
            Self::Fail(r) => std::pin::Pin::new(r).poll(cx),
        }
    }
}

impl Service<u64> for NeverService {
    type Out = Out;

    fn execute(&self, input: u64) -> impl Future<Output = Out> + Send {
        if input == TRIP {
            NeverOrFail::Fail(std::future::ready(fail()))
        } else {
            NeverOrFail::Never(std::future::pending())
        }
    }
}

/// A seatbelt breaker around `S`; clones share the circuit.
#[derive(Clone, Debug)]
pub struct Breaker<S>(SbBreaker<u64, Out, S>);

impl AsyncBreaker for Breaker<OkService> {
    async fn call(&mut self) -> bool {
        self.0.execute(0).await.is_ok()
    }
}

impl AsyncBreaker for Breaker<NeverService> {
    /// One half-open admission: the first poll of the call's future runs the admission, then
    /// the call is dropped (abandoned).
    async fn call(&mut self) -> bool {
        let mut fut = pin!(self.0.execute(0));
        // Admitted: the future is waiting on `NeverService`. Rejected: it is ready (Err).
        std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx).is_pending())).await
    }
}

/// The layer with its two required settings. Needs a Tokio runtime (for the clock).
fn layer() -> BreakerLayer<u64, Out> {
    let clock = tick::Clock::new_tokio();
    let ctx = ResilienceContext::new(&clock).name("bench");
    SbBreaker::layer("breaker", &ctx)
        .recovery_with(|out: &Out, _| {
            if out.is_ok() {
                RecoveryInfo::never()
            } else {
                RecoveryInfo::retry()
            }
        })
        // An `io::Error` from a kind does not allocate.
        .rejected_input_error(|_, _| OpError::from(std::io::ErrorKind::ConnectionRefused))
}

/// Default configuration, closed.
///
/// # Panics
/// If the breaker rejects a call.
pub async fn closed() -> Breaker<OkService> {
    let mut b = Breaker(layer().layer(OkService));
    assert!(b.call().await, "seatbelt: a fresh breaker must admit calls");
    b
}

/// Tripped by one failure with a one-hour break: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
pub async fn rejected() -> Breaker<OkService> {
    let l = layer()
        .min_throughput(1)
        .break_duration(Duration::from_secs(3600));
    let mut b = Breaker(l.layer(OkService));
    let _ = b.0.execute(TRIP).await;
    assert!(!b.call().await, "seatbelt: open breaker admitted a call");
    b
}

fn half_open_layer() -> BreakerLayer<u64, Out> {
    layer()
        .min_throughput(1)
        .break_duration(Duration::from_nanos(1))
}

/// Trips `b`, then admits and abandons 1000 probes.
async fn open_then_probe(b: &mut Breaker<NeverService>) {
    let _ = b.0.execute(TRIP).await;
    for _ in 0..1000 {
        assert!(
            b.call().await,
            "seatbelt: half-open breaker refused a probe"
        );
    }
}

/// Half-open (see the module docs); each `call` admits a probe and abandons it.
///
/// # Panics
/// If the breaker does not keep admitting probes after setup.
pub async fn half_open() -> Breaker<NeverService> {
    // seatbelt has no state accessor. A closed breaker would admit these calls too, so check
    // the recipe on a twin that counts probes (`on_probing` runs for half-open admissions only).
    let probes = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&probes);
    let twin_layer = half_open_layer().on_probing(move |_, _| {
        seen.fetch_add(1, Ordering::Relaxed);
    });
    let mut twin = Breaker(twin_layer.layer(NeverService));
    open_then_probe(&mut twin).await;
    assert_eq!(
        probes.load(Ordering::Relaxed),
        1000,
        "seatbelt: twin calls were not probes"
    );

    let mut b = Breaker(half_open_layer().layer(NeverService));
    open_then_probe(&mut b).await;
    b
}

/// A 60 s sampling window already holding `n` successful calls.
///
/// # Panics
/// If a prefill call is rejected.
pub async fn time_window(n: usize) -> Breaker<OkService> {
    let l = layer().sampling_duration(Duration::from_secs(60));
    let mut b = Breaker(l.layer(OkService));
    for _ in 0..n {
        assert!(b.call().await, "seatbelt: prefill call rejected");
    }
    b
}
