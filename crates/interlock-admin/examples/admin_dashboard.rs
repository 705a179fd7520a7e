//! An axum service with two guarded dependencies and the interlock
//! dashboard mounted at `/interlock`.
//!
//!     cargo run -p interlock-admin --example admin_dashboard
//!
//! Then open the printed `/interlock` address in a browser. Built-in traffic
//! calls both upstreams ten times a second, and the payments gateway goes
//! through a short outage every minute, so the timelines have something to
//! show. Break things yourself from another shell:
//!
//!     curl -X POST 'localhost:3000/upstream/inventory?fail=100'  # inventory fails every call
//!     curl -X POST 'localhost:3000/upstream/inventory?fail=0'    # healthy again
//!     curl -i localhost:3000/stock                               # 200, 502, or 503 + Retry-After
//!     curl localhost:3000/interlock/breakers                     # the breakers as JSON
//!
//! The operator buttons need the bearer token printed at start (set
//! `INTERLOCK_ADMIN_TOKEN` to choose it). `ADDR` sets the address (default
//! `127.0.0.1:3000`), `TRAFFIC=0` turns the built-in traffic off.
#![allow(clippy::print_stdout)]

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use interlock::{CircuitBreaker, Config, Registry, SlidingWindow};
use interlock_admin::{Admin, EventFeed};
use interlock_axum::GuardError;
use serde::Deserialize;

/// A simulated upstream whose share of failing calls can be changed.
#[derive(Debug, Default)]
struct Upstream {
    /// Percent of calls that fail (0 to 100).
    fail_percent: AtomicU32,
    calls: AtomicU64,
}

#[derive(Debug)]
struct UpstreamError(&'static str);

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for UpstreamError {}

impl Upstream {
    async fn call(&self, what: &'static str) -> Result<&'static str, UpstreamError> {
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Spread failures evenly: call n fails when (n * 37) mod 100 falls
        // under the failing percentage.
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        if (n * 37) % 100 < u64::from(self.fail_percent.load(Ordering::Relaxed)) {
            Err(UpstreamError("upstream answered 503 Service Unavailable"))
        } else {
            Ok(what)
        }
    }
}

#[derive(Clone)]
struct AppState {
    registry: Registry,
    payments: Arc<Upstream>,
    inventory: Arc<Upstream>,
}

impl AppState {
    fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        match name {
            "payments" => Some(&self.payments),
            "inventory" => Some(&self.inventory),
            _ => None,
        }
    }
}

/// Calls `upstream` through `breaker`: its own failure answers 502, an
/// open breaker 503 with `Retry-After`.
async fn guarded(
    breaker: CircuitBreaker,
    upstream: &Upstream,
    what: &'static str,
) -> Result<&'static str, GuardError<StatusCode>> {
    Ok(breaker
        .call_async(|| upstream.call(what))
        .await
        .map_err(|e| e.map_inner(|_| StatusCode::BAD_GATEWAY))?)
}

async fn checkout(State(s): State<AppState>) -> Result<&'static str, GuardError<StatusCode>> {
    guarded(s.registry.get("payments-gateway"), &s.payments, "paid\n").await
}

async fn stock(State(s): State<AppState>) -> Result<&'static str, GuardError<StatusCode>> {
    guarded(
        s.registry.get("inventory-db"),
        &s.inventory,
        "42 in stock\n",
    )
    .await
}

#[derive(Deserialize)]
struct Fail {
    fail: u32,
}

/// `POST /upstream/{payments|inventory}?fail=PERCENT`.
async fn set_failures(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Query(Fail { fail }): Query<Fail>,
) -> Result<Json<u32>, StatusCode> {
    let upstream = s.upstream(&name).ok_or(StatusCode::NOT_FOUND)?;
    let fail = fail.min(100);
    upstream.fail_percent.store(fail, Ordering::Relaxed);
    Ok(Json(fail))
}

/// Ten requests a second to each upstream; payments fails 80% of its
/// calls for 20 s of every minute.
async fn traffic(state: AppState) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    for n in 0u64.. {
        tick.tick().await;
        let second = (n / 10) % 60;
        if n % 10 == 0 && state.payments.fail_percent.load(Ordering::Relaxed) <= 80 {
            let outage = (25..45).contains(&second);
            state
                .payments
                .fail_percent
                .store(if outage { 80 } else { 3 }, Ordering::Relaxed);
        }
        let _ = checkout(State(state.clone())).await;
        let _ = stock(State(state.clone())).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Operator actions (and refused attempts) are logged through `tracing`.
    tracing_subscriber::fmt().with_target(true).init();
    let feed = EventFeed::new();
    let registry = Registry::builder()
        .config(
            Config::builder()
                .failure_rate_threshold(0.5)
                .minimum_number_of_calls(10)
                .sliding_window(SlidingWindow::time(Duration::from_secs(10)))
                .wait_duration_in_open(Duration::from_secs(8))
                .permitted_calls_in_half_open(5)
                .auto_transition(true)
                .build()?,
        )
        .listener(feed.clone())
        .build()?;
    // Create both breakers now, so the dashboard shows them from the start.
    let _ = (
        registry.get("payments-gateway"),
        registry.get("inventory-db"),
    );

    let token = std::env::var("INTERLOCK_ADMIN_TOKEN").unwrap_or_else(|_| {
        // A throwaway demo token: RandomState is seeded from the OS.
        let word = || RandomState::new().hash_one(0u8);
        format!("{:016x}{:016x}", word(), word())
    });
    let admin = Admin::builder(registry.clone())
        .feed(feed)
        .bearer_token(token.clone())
        .build()?;

    let state = AppState {
        registry,
        payments: Arc::default(),
        inventory: Arc::default(),
    };
    if std::env::var("TRAFFIC").as_deref() != Ok("0") {
        tokio::spawn(traffic(state.clone()));
    }
    let app = Router::new()
        .route("/checkout", get(checkout))
        .route("/stock", get(stock))
        .route("/upstream/{name}", post(set_failures))
        .with_state(state);
    // At `/interlock` and `/interlock/` alike.
    let app = admin.mount(app, "/interlock")?;

    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "dashboard:      http://{}/interlock",
        listener.local_addr()?
    );
    println!("operator token: {token}");
    axum::serve(listener, app).await?;
    Ok(())
}
