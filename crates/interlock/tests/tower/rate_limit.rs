//! `RateLimitLayer` and `KeyedRateLimitLayer`: refusals in `call`, waits in
//! the response future on tokio's paused clock, keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::pipeline::rate_limit::Exceeded;
use interlock::pipeline::{RateLimit, TokioSleeper};
use interlock::tower::{BoxError, KeyedRateLimitLayer, RateLimitLayer};
use interlock::{Clock, ManualClock, Timestamp};
use tower::{Layer, Service, ServiceExt};

use super::echo;

/// tokio's paused clock as an interlock `Clock`.
#[derive(Debug)]
struct TokioTime(tokio::time::Instant);

impl Clock for TokioTime {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(u64::try_from(self.0.elapsed().as_nanos()).unwrap())
    }
}

#[tokio::test]
async fn a_refused_request_never_reaches_the_service_and_the_service_stays_ready() {
    let clock = ManualClock::new();
    let limit = RateLimit::per_second(2)
        .name("api")
        .clock(clock.clone())
        .build()
        .unwrap();
    let reached = Arc::new(AtomicU32::new(0));
    let mut svc = RateLimitLayer::new(limit).layer(echo(&reached));
    for _ in 0..2 {
        svc.ready().await.unwrap().call("ok".into()).await.unwrap();
    }
    let err: BoxError = svc
        .ready()
        .await
        .unwrap()
        .call("over".into())
        .await
        .unwrap_err();
    let exceeded = err.downcast_ref::<Exceeded>().unwrap();
    assert_eq!((exceeded.name(), exceeded.key()), ("api", None));
    assert_eq!(exceeded.retry_after(), Duration::from_millis(500));
    assert_eq!(reached.load(Ordering::SeqCst), 2);
    assert_eq!(svc.limit().name(), "api");

    clock.advance(Duration::from_millis(500));
    assert_eq!(
        svc.ready()
            .await
            .unwrap()
            .call("later".into())
            .await
            .unwrap(),
        "later"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn with_max_wait_a_request_waits_for_its_turn_and_a_dropped_wait_costs_nothing() {
    let limit = RateLimit::builder(1, Duration::from_secs(1))
        .max_wait(Duration::from_secs(5))
        .clock(TokioTime(tokio::time::Instant::now()))
        .sleeper(TokioSleeper)
        .build()
        .unwrap();
    let reached = Arc::new(AtomicU32::new(0));
    let mut svc = RateLimitLayer::new(limit).layer(echo(&reached));
    let start = tokio::time::Instant::now();
    svc.ready()
        .await
        .unwrap()
        .call("first".into())
        .await
        .unwrap();
    // The second request waits a second inside its future, then goes out.
    let second = svc
        .ready()
        .await
        .unwrap()
        .call("second".into())
        .await
        .unwrap();
    assert_eq!(second, "second");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(reached.load(Ordering::SeqCst), 2);

    // A third request given up while it waits leaves its turn (at 2 s) free.
    let third = svc.ready().await.unwrap().call("third".into());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), third)
            .await
            .is_err()
    );
    assert_eq!(reached.load(Ordering::SeqCst), 2, "it never went out");
    let fourth = svc
        .ready()
        .await
        .unwrap()
        .call("fourth".into())
        .await
        .unwrap();
    assert_eq!(fourth, "fourth");
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

#[tokio::test]
async fn a_keyed_layer_gives_every_key_its_own_budget() {
    let clock = ManualClock::new();
    let tenants = RateLimit::per_second(1)
        .name("tenants")
        .clock(clock.clone())
        .build_keyed()
        .unwrap();
    let reached = Arc::new(AtomicU32::new(0));
    let layer = KeyedRateLimitLayer::new(tenants.clone(), |req: &String| {
        req.split('/').next().unwrap_or_default().to_owned()
    });
    let mut svc = layer.clone().layer(echo(&reached));
    svc.ready()
        .await
        .unwrap()
        .call("acme/a".into())
        .await
        .unwrap();
    svc.ready()
        .await
        .unwrap()
        .call("globex/a".into())
        .await
        .unwrap();
    let err = svc
        .ready()
        .await
        .unwrap()
        .call("acme/b".into())
        .await
        .unwrap_err();
    let exceeded = err.downcast_ref::<Exceeded>().unwrap();
    assert_eq!(exceeded.key(), Some("acme"));
    assert_eq!(
        exceeded.to_string(),
        "rate limit 'tenants' exceeded for 'acme', next call allowed in 1.000s"
    );
    assert_eq!(reached.load(Ordering::SeqCst), 2);
    // A second service from the same layer shares the budgets.
    let mut other = layer.clone().layer(echo(&reached));
    assert!(
        other
            .ready()
            .await
            .unwrap()
            .call("globex/b".into())
            .await
            .is_err()
    );
    assert_eq!(svc.limits().len(), 2);
    assert!(format!("{layer:?}").contains("KeyedRateLimitLayer"));
}
