//! Real HTTP requests against an actix-web app served on loopback.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

// The raw HTTP/1.1 test client is shared with interlock-axum's tests.
#[path = "../../interlock-axum/tests/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::{App, HttpServer, ResponseError, web};
use interlock::{CircuitBreaker, Config, ManualClock, Registry, SlidingWindow, State};
use interlock_actix::{Breaker, BreakerName, GuardError, RejectionResponse};

use support::get as http_get;

struct OrdersDb;
impl BreakerName for OrdersDb {
    const NAME: &'static str = "orders-db";
}

/// A name no one should paste into JSON by hand.
const NASTY: &str = "a\"b' \\ <script>alert(1)</script>\n\u{7}";

/// The dependency's own error: 502.
#[derive(Debug)]
struct Upstream;

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection refused")
    }
}

impl std::error::Error for Upstream {}

impl ResponseError for Upstream {
    fn status_code(&self) -> StatusCode {
        StatusCode::BAD_GATEWAY
    }
}

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

async fn call_dependency(
    breaker: &CircuitBreaker,
    healthy: bool,
) -> Result<&'static str, GuardError<Upstream>> {
    let orders = breaker
        .call_async(|| async move { if healthy { Ok("ok") } else { Err(Upstream) } })
        .await?;
    Ok(orders)
}

async fn list_orders(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<Upstream>> {
    call_dependency(&db, true).await
}

async fn one_order(
    db: Breaker<OrdersDb>,
    id: web::Path<u32>,
) -> Result<String, GuardError<Upstream>> {
    let order = call_dependency(&db, true).await?;
    Ok(format!("{order} {id}"))
}

async fn failing_order(db: Breaker<OrdersDb>) -> Result<&'static str, GuardError<Upstream>> {
    call_dependency(&db, false).await
}

/// Opts in to the breaker name in the body, for this one response.
async fn nasty(registry: web::Data<Registry>) -> actix_web::HttpResponse {
    match call_dependency(&registry.get(NASTY), true).await {
        Err(GuardError::Rejected(open)) => {
            open.response_with(&RejectionResponse::new().include_breaker_name())
        }
        Err(other) => actix_web::Error::from(other).error_response(),
        Ok(body) => actix_web::HttpResponse::Ok().body(body),
    }
}

/// Serves the app on a loopback port with one worker thread.
fn serve(registry: &Registry) -> (SocketAddr, ServerHandle) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let data = web::Data::new(registry.clone());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .route("/orders", web::get().to(list_orders))
            .route("/orders/{id}", web::get().to(one_order))
            .route("/orders-fail", web::get().to(failing_order))
            .route("/nasty", web::get().to(nasty))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    (addr, handle)
}

async fn served() -> (SocketAddr, ServerHandle, Registry, ManualClock) {
    let clock = ManualClock::new();
    let registry = registry(&clock);
    let (addr, handle) = serve(&registry);
    (addr, handle, registry, clock)
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

#[actix_web::test]
async fn open_breaker_answers_503_with_retry_after_and_json_detail() {
    let (addr, server, registry, _clock) = served().await;
    assert_eq!(http_get(addr, "/orders").await.status, 200);

    // The dependency fails once: 502 from the inner error, and the breaker trips.
    assert_eq!(http_get(addr, "/orders-fail").await.status, 502);
    assert_eq!(registry.get("orders-db").state(), State::Open);

    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), Some("30"));
    assert_eq!(
        reply.body,
        br#"{"detail":"Service temporarily unavailable"}"#
    );
    server.stop(true).await;
}

#[actix_web::test]
async fn retry_after_is_rounded_up_to_whole_seconds() {
    let (addr, server, _registry, clock) = served().await;
    assert_eq!(http_get(addr, "/orders-fail").await.status, 502);

    // Exactly 30.0 s left: 30.
    assert_eq!(
        http_get(addr, "/orders").await.header("retry-after"),
        Some("30")
    );
    // 10.5 s left: 11.
    clock.advance(Duration::from_millis(19_500));
    assert_eq!(
        http_get(addr, "/orders").await.header("retry-after"),
        Some("11")
    );
    // 0.2 s left: 1, never 0.
    clock.advance(Duration::from_millis(10_300));
    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), Some("1"));
    // Once the wait is over a probe goes through.
    clock.advance(Duration::from_millis(200));
    assert_eq!(http_get(addr, "/orders").await.status, 200);
    server.stop(true).await;
}

#[actix_web::test]
async fn retry_after_is_absent_after_force_open() {
    let (addr, server, registry, _clock) = served().await;
    registry.get("orders-db").force_open();
    let reply = http_get(addr, "/orders").await;
    assert_rejected(&reply, "orders-db");
    assert_eq!(reply.header("retry-after"), None, "{reply:?}");
    server.stop(true).await;
}

#[actix_web::test]
async fn two_routes_share_one_breaker() {
    let (addr, server, registry, _clock) = served().await;
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
    assert_eq!(registry.names(), ["orders-db"]);
    server.stop(true).await;
}

#[actix_web::test]
async fn a_hostile_breaker_name_is_escaped_json() {
    let (addr, server, registry, _clock) = served().await;
    registry.get(NASTY).force_open();
    let reply = http_get(addr, "/nasty").await;
    assert_rejected_by_name(&reply, NASTY);
    let raw = String::from_utf8(reply.body).unwrap();
    assert!(raw.contains(r#"a\"b' \\ <script>"#), "{raw}");
    assert!(raw.contains(r"\n\u0007"), "{raw}");
    assert!(!raw.contains('\n'), "{raw}");
    server.stop(true).await;
}

#[actix_web::test]
async fn a_missing_registry_is_a_500_not_a_panic() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = HttpServer::new(|| App::new().route("/orders", web::get().to(list_orders)))
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
    let handle = server.handle();
    actix_web::rt::spawn(server);
    assert_eq!(http_get(addr, "/orders").await.status, 500);
    handle.stop(true).await;
}
