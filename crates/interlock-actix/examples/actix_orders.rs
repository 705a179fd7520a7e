//! An actix-web service whose two order routes share one breaker around a
//! (simulated) database, and answer 503 + Retry-After while it is open.
//!
//!     cargo run -p interlock-actix --example actix_orders
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{App, HttpResponse, HttpServer, ResponseError, web};
use interlock::{Config, Registry, SlidingWindow};
use interlock_actix::{Breaker, BreakerName, GuardError};

/// The breaker every order route shares.
struct OrdersDb;
impl BreakerName for OrdersDb {
    const NAME: &'static str = "orders-db";
}

/// The simulated database's health, flipped by `/db/down` and `/db/up`.
struct DbHealth(AtomicBool);

#[derive(Debug)]
struct DbError;

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("database unreachable")
    }
}

impl std::error::Error for DbError {}

/// A failure of the database itself answers 502.
impl ResponseError for DbError {
    fn status_code(&self) -> StatusCode {
        StatusCode::BAD_GATEWAY
    }
}

/// The guarded outgoing call.
async fn query(
    db: &Breaker<OrdersDb>,
    health: &DbHealth,
    what: String,
) -> Result<String, GuardError<DbError>> {
    let healthy = health.0.load(Ordering::Relaxed);
    let rows = db
        .call_async(|| async move { if healthy { Ok(what) } else { Err(DbError) } })
        .await?;
    Ok(rows)
}

async fn list_orders(
    db: Breaker<OrdersDb>,
    health: web::Data<DbHealth>,
) -> Result<String, GuardError<DbError>> {
    query(&db, &health, "all orders\n".to_owned()).await
}

async fn one_order(
    db: Breaker<OrdersDb>,
    health: web::Data<DbHealth>,
    id: web::Path<u32>,
) -> Result<String, GuardError<DbError>> {
    query(&db, &health, format!("order {id}\n")).await
}

async fn db_down(health: web::Data<DbHealth>) -> HttpResponse {
    health.0.store(false, Ordering::Relaxed);
    HttpResponse::NoContent().finish()
}

async fn db_up(health: web::Data<DbHealth>) -> HttpResponse {
    health.0.store(true, Ordering::Relaxed);
    HttpResponse::NoContent().finish()
}

async fn breakers(registry: web::Data<Registry>) -> HttpResponse {
    let states: serde_json::Map<String, serde_json::Value> = registry
        .items()
        .into_iter()
        .map(|(name, breaker)| (name, breaker.state().to_string().into()))
        .collect();
    HttpResponse::Ok()
        .content_type("application/json")
        .body(serde_json::Value::Object(states).to_string())
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let registry = web::Data::new(
        Registry::builder()
            .config(
                Config::builder()
                    .minimum_number_of_calls(4)
                    .sliding_window(SlidingWindow::count(4))
                    .wait_duration_in_open(Duration::from_secs(10))
                    .permitted_calls_in_half_open(2)
                    .build()?,
            )
            .build()?,
    );
    let health = web::Data::new(DbHealth(AtomicBool::new(true)));
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let server = HttpServer::new(move || {
        App::new()
            .app_data(registry.clone())
            .app_data(health.clone())
            .route("/orders", web::get().to(list_orders))
            .route("/orders/{id}", web::get().to(one_order))
            .route("/db/down", web::post().to(db_down))
            .route("/db/up", web::post().to(db_up))
            .route("/breakers", web::get().to(breakers))
    })
    .bind(&addr)?;
    for bound in server.addrs() {
        println!("listening on http://{bound}");
    }
    server.run().await?;
    Ok(())
}
