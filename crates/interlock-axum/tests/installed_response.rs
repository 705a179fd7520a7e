//! A `RejectionResponse` installed process-wide shapes every 503 of a real
//! axum app on loopback, `?` in handlers and `handle_error` alike (issue 25).
//! Its own test binary: the installed shape is global to the process.
#![allow(
    clippy::unwrap_used,
    reason = "setup helpers: a failure fails the test"
)]

#[allow(dead_code, reason = "the shared client's JSON helper is not used here")]
mod support;

use axum::http::StatusCode;
use axum::routing::get;
use axum::{BoxError, Router, body::Body, error_handling::HandleErrorLayer};
use interlock::Registry;
use interlock_axum::{GuardError, RejectionResponse, handle_error};
use tower::{ServiceBuilder, service_fn};

#[tokio::test]
async fn the_installed_shape_answers_every_rejection() {
    RejectionResponse::new()
        .body("text/plain; charset=utf-8", |open| {
            format!("busy, retry in {}s", open.retry_after_secs().unwrap_or(60)).into_bytes()
        })
        .unwrap()
        .header("cache-control", "no-store")
        .unwrap()
        .install();

    let registry = Registry::new();
    let db = registry.get("10.0.3.7:5432");
    let search = registry.get("search.internal:9200");
    let guarded = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(handle_error))
        .service(service_fn(move |_req: axum::http::Request<Body>| {
            let admitted = search.acquire().map(|permit| permit.success());
            async move {
                admitted?;
                Ok::<_, BoxError>(axum::response::Response::new(Body::empty()))
            }
        }));
    let app = Router::new()
        .route(
            "/orders",
            get(move || {
                let db = db.clone();
                async move {
                    let orders = db
                        .call_async(|| async { Ok::<_, std::io::Error>("[]") })
                        .await
                        .map_err(|e| e.map_inner(|_| StatusCode::BAD_GATEWAY))?;
                    Ok::<_, GuardError<StatusCode>>(orders)
                }
            }),
        )
        .route_service("/search", guarded);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    assert_eq!(support::get(addr, "/orders").await.status, 200);
    registry.get("10.0.3.7:5432").force_open();
    registry.get("search.internal:9200").force_open();
    for path in ["/orders", "/search"] {
        let reply = support::get(addr, path).await;
        assert_eq!(reply.status, 503, "{path}");
        assert_eq!(
            reply.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        assert_eq!(reply.body, b"busy, retry in 60s", "{path}");
    }

    // Refused at build, naming the header.
    let err = RejectionResponse::new()
        .header("retry-after", "5")
        .unwrap_err();
    assert_eq!(err.name, "retry-after");
    assert!(RejectionResponse::new().header("bad header", "x").is_err());
}
