//! An axum handler that calls an upstream through the standard reqwest
//! stack (`reqwest-retry` outside `interlock-reqwest`'s per-host breakers),
//! both servers real and on loopback: `?` on the client error answers 503
//! for a rejection and 502 for anything else (issue 25).
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

#[allow(dead_code, reason = "the shared client's JSON helper is not used here")]
mod support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use interlock::{Config, ManualClock, SlidingWindow, State as Circuit};
use interlock_axum::GuardError;
use interlock_reqwest::CircuitBreakerMiddleware;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};

/// The upstream's own failures.
#[derive(Debug)]
struct BadGateway;

impl From<reqwest_middleware::Error> for BadGateway {
    fn from(_: reqwest_middleware::Error) -> Self {
        BadGateway
    }
}

impl IntoResponse for BadGateway {
    fn into_response(self) -> Response {
        StatusCode::BAD_GATEWAY.into_response()
    }
}

#[derive(Clone)]
struct App {
    client: ClientWithMiddleware,
    upstream: String,
}

async fn proxy(State(app): State<App>) -> Result<String, GuardError<BadGateway>> {
    let response = app.client.get(&app.upstream).send().await?;
    if !response.status().is_success() {
        return Err(GuardError::Inner(BadGateway));
    }
    let body = response
        .text()
        .await
        .map_err(reqwest_middleware::Error::from)?;
    Ok(body)
}

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_behind_reqwest_retry_answers_503_through_question_mark() {
    let upstream =
        serve(Router::new().route("/flaky", get(|| async { StatusCode::SERVICE_UNAVAILABLE })))
            .await;
    let breakers = CircuitBreakerMiddleware::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .wait_duration_in_open(Duration::from_secs(30))
                .build()
                .unwrap(),
        )
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(1))
        .build_with_max_retries(3);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .with(breakers.clone())
        .build();
    let app = App {
        client,
        upstream: format!("http://{upstream}/flaky"),
    };
    let service = serve(Router::new().route("/proxy", get(proxy)).with_state(app)).await;

    // The first request: 503, retried, 503 again: the breaker opens under
    // the retries and the third attempt is rejected, so the handler's `?`
    // sees reqwest-retry's error around the rejection.
    let reply = support::get(service, "/proxy").await;
    assert_eq!(
        reply.status,
        503,
        "{:?}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.header("retry-after"), Some("30"));
    let breaker = breakers
        .registry()
        .get_existing(&upstream.to_string())
        .unwrap();
    assert_eq!(breaker.state(), Circuit::Open);

    // Rejected at once now: still 503.
    assert_eq!(support::get(service, "/proxy").await.status, 503);

    // An upstream that refuses connections is the upstream's failure: 502.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let app = App {
        client: ClientBuilder::new(reqwest::Client::new())
            .with(CircuitBreakerMiddleware::new())
            .build(),
        upstream: format!("http://{closed}/"),
    };
    let service = serve(Router::new().route("/proxy", get(proxy)).with_state(app)).await;
    assert_eq!(support::get(service, "/proxy").await.status, 502);
}
