//! `ChaosLayer`: faults and outcomes instead of the inner call, latency
//! before it on tokio's paused clock, and the run-time switch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::pipeline::{TokioSleeper, chaos};
use interlock::tower::{BoxError, ChaosLayer};
use tower::{Layer, Service, ServiceExt};

use super::echo;

#[derive(Debug)]
struct Injected;

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("injected")
    }
}

impl std::error::Error for Injected {}

#[tokio::test]
async fn a_fault_never_reaches_the_service_until_switched_off() {
    let fault = chaos::Fault::builder(|| Injected)
        .injection_rate(1.0)
        .build()
        .unwrap();
    let switch = fault.switch();
    let reached = Arc::new(AtomicU32::new(0));
    let mut svc = ChaosLayer::new(fault).layer(echo(&reached));
    let err: BoxError = svc
        .ready()
        .await
        .unwrap()
        .call("a".into())
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<Injected>().is_some());
    assert_eq!(reached.load(Ordering::SeqCst), 0);
    assert_eq!(svc.chaos().injection_rate(), 1.0);

    switch.disable();
    assert_eq!(
        svc.ready().await.unwrap().call("b".into()).await.unwrap(),
        "b"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_outcome_replaces_the_response() {
    let stale = chaos::Outcome::builder(|| Ok::<_, Injected>("stale".to_string()))
        .injection_rate(1.0)
        .build()
        .unwrap();
    let reached = Arc::new(AtomicU32::new(0));
    let mut svc = ChaosLayer::new(stale).layer(echo(&reached));
    assert_eq!(
        svc.ready()
            .await
            .unwrap()
            .call("fresh".into())
            .await
            .unwrap(),
        "stale"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn latency_delays_the_request_then_sends_it() {
    let slow = chaos::Latency::builder(Duration::from_millis(750))
        .injection_rate(1.0)
        .sleeper(TokioSleeper)
        .build()
        .unwrap();
    let reached = Arc::new(AtomicU32::new(0));
    let mut svc = ChaosLayer::new(slow).layer(echo(&reached));
    let start = tokio::time::Instant::now();
    let pending = svc.ready().await.unwrap().call("late".into());
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "not sent before the delay"
    );
    assert_eq!(pending.await.unwrap(), "late");
    assert_eq!(start.elapsed(), Duration::from_millis(750));
    assert_eq!(reached.load(Ordering::SeqCst), 1);

    // Duration::MAX is a hang that only a timeout above it ends.
    let hang = chaos::Latency::builder(Duration::MAX)
        .injection_rate(1.0)
        .build()
        .unwrap();
    let mut svc = ChaosLayer::new(hang).layer(echo(&reached));
    let call = svc.ready().await.unwrap().call("never".into());
    assert!(
        tokio::time::timeout(Duration::from_secs(3600), call)
            .await
            .is_err()
    );
    assert_eq!(reached.load(Ordering::SeqCst), 1);
}
