//! A `RejectionResponse` installed process-wide shapes every 503 of a real
//! actix-web app on loopback (issue 25). Its own test binary: the installed
//! shape is global to the process.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

#[path = "../../interlock-axum/tests/support/mod.rs"]
mod support;

use actix_web::{App, HttpServer, web};
use interlock::{CircuitBreaker, Registry};
use interlock_actix::{GuardError, RejectionResponse};

async fn orders(
    db: web::Data<CircuitBreaker>,
) -> Result<&'static str, GuardError<actix_web::Error>> {
    let orders = db
        .call_async(|| async { Ok::<_, std::io::Error>("[]") })
        .await
        .map_err(|e| e.map_inner(actix_web::error::ErrorBadGateway))?;
    Ok(orders)
}

#[actix_web::test]
async fn the_installed_shape_answers_every_rejection() {
    RejectionResponse::new()
        .detail("Orders are unavailable; try again shortly")
        .header("cache-control", "no-store")
        .unwrap()
        .install();

    let registry = Registry::new();
    let db = web::Data::new(registry.get("10.0.3.7:5432"));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(db.clone())
            .route("/orders", web::get().to(orders))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)
    .unwrap()
    .run();
    let handle = server.handle();
    actix_web::rt::spawn(server);

    assert_eq!(support::get(addr, "/orders").await.status, 200);
    registry.get("10.0.3.7:5432").force_open();
    let reply = support::get(addr, "/orders").await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert_eq!(
        reply.json(),
        serde_json::json!({ "detail": "Orders are unavailable; try again shortly" })
    );
    assert!(!String::from_utf8_lossy(&reply.body).contains("10.0.3.7"));
    handle.stop(true).await;
}
