//! Real HTTP requests against an axum app served on loopback.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use axum::response::Response;
use axum::routing::get;
use axum::{BoxError, Router, body::Body, error_handling::HandleErrorLayer};
use interlock::{CircuitBreaker, Config, ManualClock, Registry, SlidingWindow, State as Circuit};
use interlock_axum::{Breaker, BreakerName, GuardError, RejectionResponse, handle_error};
use tower::{ServiceBuilder, service_fn};

use support::get as http_get;

struct OrdersDb;
impl BreakerName for OrdersDb {
    const NAME: &'static str = "orders-db";
}

/// A name no one should paste into JSON by hand.
const NASTY: &str = "a\"b' \\ <script>alert(1)</script>\n\u{7}";

/// A registry whose breakers trip on one failure and wait 30 s.
fn registry(clock: &ManualClock) -> Registry {
    Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(1)
                .sliding_window(SlidingWindow::count(1))
                .wait_duration_in_open(Duration::from_secs(30))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Calls the dependency through `breaker`; an unhealthy one answers 502.
async fn call_dependency(
    breaker: &CircuitBreaker,
    healthy: bool,
) -> Result<&'static str, GuardError<StatusCode>> {
    let result = breaker
        .call_async(|| async move {
            if healthy {
                Ok("ok")
            } else {
                Err(std::io::Error::other("connection refused"))
            }
        })
        .await;
    Ok(result.map_err(|e| e.map_inner(|_| StatusCode::BAD_GATEWAY))?)
}

async fn list_orders(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<StatusCode>> {
    call_dependency(&db, true).await
}

async fn one_order(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<StatusCode>> {
    call_dependency(&db, true).await
}

async fn failing_order(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<StatusCode>> {
    call_dependency(&db, false).await
}

/// Opts in to the breaker name in the body, for this one response.
async fn nasty(State(registry): State<Registry>) -> Response {
    match call_dependency(&registry.get(NASTY), true).await {
        Err(GuardError::Rejected(open)) => {
            open.into_response_with(&RejectionResponse::new().include_breaker_name())
        }
        other => other.into_response(),
    }
}

/// A fallible tower service behind `HandleErrorLayer`: `fail` makes it
/// return an error that is not a rejection.
fn guarded_service(
    breaker: CircuitBreaker,
    fail: bool,
) -> impl tower::Service<
    Request<Body>,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .layer(HandleErrorLayer::new(handle_error))
        .service(service_fn(move |_req: Request<Body>| {
            let admitted = breaker.acquire().map(|permit| permit.success());
            async move {
                admitted?;
                if fail {
                    return Err::<Response, BoxError>("internal detail".into());
                }
                Ok(Response::new(Body::from("found")))
            }
        }))
}

fn app(registry: &Registry) -> Router {
    Router::new()
        .route("/orders", get(list_orders))
        .route("/orders/{id}", get(one_order))
        .route("/orders-fail", get(failing_order))
        .route("/nasty", get(nasty))
        .route_service("/search", guarded_service(registry.get("search"), false))
        .route_service("/broken", guarded_service(registry.get("broken"), true))
        .with_state(registry.clone())
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn served() -> (SocketAddr, Registry, ManualClock) {
    let clock = ManualClock::new();
    let registry = registry(&clock);
    let addr = serve(app(&registry)).await;
    (addr, registry, clock)
}

fn assert_rejected(reply: &support::Reply, name: &str) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    // Issue 25: the default body names no breaker (often an internal host).
    assert_eq!(
        reply.json(),
        serde_json::json!({ "detail": "Service temporarily unavailable" })
    );
    assert!(
        !String::from_utf8_lossy(&reply.body).contains(name),
        "{reply:?}"
    );
}

/// The opt-in body of the Python original, naming the breaker.
fn assert_rejected_by_name(reply: &support::Reply, name: &str) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(
        reply.json(),
        serde_json::json!({ "detail": format!("Circuit '{name}' is open") })
    );
}

#[tokio::test]
async fn open_breaker_answers_503_with_retry_after_and_json_detail() {
    let (addr, registry, _clock) = served().await;
    assert_eq!(http_get(addr, "/orders").await.status, 200);

    // The dependency fails once: 502 from the inner error, and the breaker trips.
    assert_eq!(http_get(addr, "/orders-fail").await.status, 502);
    assert_eq!(registry.get("orders-db").state(), Circuit::Open);

    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), Some("30"));
    assert_eq!(
        reply.body,
        br#"{"detail":"Service temporarily unavailable"}"#
    );
}

#[tokio::test]
async fn retry_after_is_rounded_up_to_whole_seconds() {
    let (addr, _registry, clock) = served().await;
    assert_eq!(http_get(addr, "/orders-fail").await.status, 502);

    // Exactly 30.0 s left: 30.
    assert_eq!(
        http_get(addr, "/orders").await.header("retry-after"),
        Some("30")
    );
    // 0.2 s left: 1, never 0.
    clock.advance(Duration::from_millis(29_800));
    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), Some("1"));
    // 10.5 s left: 11.
    let clock2 = ManualClock::new();
    let registry2 = registry(&clock2);
    let addr2 = serve(app(&registry2)).await;
    assert_eq!(http_get(addr2, "/orders-fail").await.status, 502);
    clock2.advance(Duration::from_millis(19_500));
    assert_eq!(
        http_get(addr2, "/orders").await.header("retry-after"),
        Some("11")
    );
    // Once the wait is over a probe goes through.
    clock.advance(Duration::from_millis(200));
    assert_eq!(http_get(addr, "/orders").await.status, 200);
}

#[tokio::test]
async fn retry_after_is_absent_after_force_open() {
    let (addr, registry, _clock) = served().await;
    registry.get("orders-db").force_open();
    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), None, "{reply:?}");
}

#[tokio::test]
async fn two_routes_share_one_breaker() {
    let (addr, registry, _clock) = served().await;
    for path in ["/orders", "/orders/7"] {
        assert_eq!(http_get(addr, path).await.status, 200, "{path}");
    }
    // Tripped through a third route, the breaker rejects on both.
    assert_eq!(http_get(addr, "/orders-fail").await.status, 502);
    for path in ["/orders", "/orders/7"] {
        let reply = http_get(addr, path).await;
        assert_rejected(&reply, "orders-db");
        assert_eq!(reply.header("retry-after"), Some("30"), "{path}");
    }
    assert_eq!(registry.names(), ["search", "broken", "orders-db"]);
}

#[tokio::test]
async fn a_hostile_breaker_name_is_escaped_json() {
    let (addr, registry, _clock) = served().await;
    registry.get(NASTY).force_open();
    let reply = http_get(addr, "/nasty").await;
    assert_rejected_by_name(&reply, NASTY);
    let raw = String::from_utf8(reply.body).unwrap();
    assert!(raw.contains(r#"a\"b' \\ <script>"#), "{raw}");
    assert!(raw.contains(r"\n\u0007"), "{raw}");
    assert!(!raw.contains('\n'), "{raw}");
}

#[tokio::test]
async fn handle_error_layer_turns_a_boxed_rejection_into_503_and_the_rest_into_500() {
    let (addr, registry, _clock) = served().await;
    assert_eq!(http_get(addr, "/search").await.status, 200);
    registry.get("search").force_open();
    assert_rejected(&http_get(addr, "/search").await, "search");

    let broken = http_get(addr, "/broken").await;
    assert_eq!(broken.status, 500);
    assert!(
        !String::from_utf8_lossy(&broken.body).contains("internal detail"),
        "{broken:?}"
    );
}
