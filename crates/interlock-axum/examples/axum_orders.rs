//! An axum service whose two order routes share one breaker around a
//! (simulated) database, and answer 503 + Retry-After while it is open.
//!
//!     cargo run -p interlock-axum --example axum_orders
//!
//! Then, in another shell (the address is printed at start):
//!
//!     curl -i localhost:3000/orders          # 200
//!     curl -i -X POST localhost:3000/db/down # the database starts failing
//!     curl -i localhost:3000/orders          # 502, then 503 once the breaker trips
//!     curl -i -X POST localhost:3000/db/up   # healthy again: after Retry-After, probes close it
//!     curl -i localhost:3000/breakers        # every breaker and its state
//!
//! Set `ADDR` to listen elsewhere (default `127.0.0.1:3000`; port 0 picks one).
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{FromRef, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use interlock::{Config, Registry, SlidingWindow};
use interlock_axum::{Breaker, BreakerName, GuardError};

/// The breaker every order route shares.
struct OrdersDb;
impl BreakerName for OrdersDb {
    const NAME: &'static str = "orders-db";
}

/// The app's state: the registry, plus the simulated database's health.
#[derive(Clone)]
struct AppState {
    registry: Registry,
    db_healthy: Arc<AtomicBool>,
}

/// Lets `Breaker<_>` find the registry in the state.
impl FromRef<AppState> for Registry {
    fn from_ref(state: &AppState) -> Registry {
        state.registry.clone()
    }
}

#[derive(Debug)]
struct DbError;

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("database unreachable")
    }
}

impl std::error::Error for DbError {}

/// The guarded outgoing call; a failure of its own answers 502.
async fn query(
    db: &Breaker<OrdersDb>,
    state: &AppState,
    what: String,
) -> Result<String, GuardError<StatusCode>> {
    let healthy = state.db_healthy.load(Ordering::Relaxed);
    let rows = db
        .call_async(|| async move { if healthy { Ok(what) } else { Err(DbError) } })
        .await
        .map_err(|e| e.map_inner(|_| StatusCode::BAD_GATEWAY))?;
    Ok(rows)
}

async fn list_orders(
    db: Breaker<OrdersDb>,
    State(state): State<AppState>,
) -> Result<String, GuardError<StatusCode>> {
    query(&db, &state, "all orders\n".to_owned()).await
}

async fn one_order(
    db: Breaker<OrdersDb>,
    State(state): State<AppState>,
    Path(id): Path<u32>,
) -> Result<String, GuardError<StatusCode>> {
    query(&db, &state, format!("order {id}\n")).await
}

async fn set_health(state: &AppState, healthy: bool) -> StatusCode {
    state.db_healthy.store(healthy, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

async fn breakers(State(registry): State<Registry>) -> Json<BTreeMap<String, String>> {
    Json(
        registry
            .items()
            .into_iter()
            .map(|(name, breaker)| (name, breaker.state().to_string()))
            .collect(),
    )
}

fn app(state: AppState) -> Router {
    Router::new()
        .route("/orders", get(list_orders))
        .route("/orders/{id}", get(one_order))
        .route(
            "/db/down",
            post(|State(s): State<AppState>| async move { set_health(&s, false).await }),
        )
        .route(
            "/db/up",
            post(|State(s): State<AppState>| async move { set_health(&s, true).await }),
        )
        .route("/breakers", get(breakers))
        .with_state(state)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(10))
                .permitted_calls_in_half_open(2)
                .build()?,
        )
        .build()?;
    let state = AppState {
        registry,
        db_healthy: Arc::new(AtomicBool::new(true)),
    };
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(listener, app(state)).await?;
    Ok(())
}
