//! axum integration for [`interlock`]: a call rejected by an open breaker
//! becomes `503 Service Unavailable` with a `Retry-After` header.
//!
//! Guard a route's *outgoing* call with a breaker; when the breaker rejects
//! it, the client of your service gets
//!
//! ```http
//! HTTP/1.1 503 Service Unavailable
//! content-type: application/json
//! retry-after: 30
//!
//! {"detail":"Service temporarily unavailable"}
//! ```
//!
//! The body names no breaker or host (they are internal); a
//! [`RejectionResponse`] sets your own text, headers or body, or opts in to
//! the name (`{"detail":"Circuit 'orders-db' is open"}`, as the Python
//! original).
//!
//! `Retry-After` is the breaker's estimate rounded up to whole seconds, and
//! is left out when there is none (a HALF_OPEN rejection, or after
//! `force_open`). See [`CircuitOpen`] for the details.
//!
//! | item                     | use                                                          |
//! |--------------------------|--------------------------------------------------------------|
//! | [`CircuitOpen`]          | the response; `From<CircuitOpenError>`                        |
//! | [`RejectionResponse`]    | the 503's body and extra headers, process-wide or per response |
//! | [`GuardError<E>`]        | a handler's error: `From<CallError<E>>`, so `?` works         |
//! | [`Breaker<N>`]           | extractor: the breaker named `N::NAME` from a shared [`Registry`](interlock::Registry) |
//! | [`handle_error`]         | for `HandleErrorLayer` in front of a fallible tower service   |
//!
//! ```
//! use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
//! use interlock::Registry;
//! use interlock_axum::{Breaker, BreakerName, GuardError};
//! use tower::ServiceExt;
//!
//! struct OrdersDb;
//! impl BreakerName for OrdersDb {
//!     const NAME: &'static str = "orders-db";
//! }
//!
//! async fn fetch_orders() -> Result<String, std::io::Error> {
//!     Ok("[]".to_owned())
//! }
//!
//! // The database's own errors answer 502 (`GuardError::Inner` answers with
//! // whatever its error turns into); a rejection answers 503.
//! fn bad_gateway(e: std::io::Error) -> (StatusCode, String) {
//!     (StatusCode::BAD_GATEWAY, e.to_string())
//! }
//!
//! // Both routes share one breaker: they depend on the same database.
//! async fn list(db: Breaker<OrdersDb>) -> Result<String, GuardError<(StatusCode, String)>> {
//!     Ok(db.call_async(fetch_orders).await.map_err(|e| e.map_inner(bad_gateway))?)
//! }
//! async fn count(db: Breaker<OrdersDb>) -> Result<String, GuardError<(StatusCode, String)>> {
//!     let orders = db.call_async(fetch_orders).await.map_err(|e| e.map_inner(bad_gateway))?;
//!     Ok(orders.len().to_string())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let registry = Registry::new();
//! let app = Router::new()
//!     .route("/orders", get(list))
//!     .route("/orders/count", get(count))
//!     .with_state(registry.clone());
//!
//! registry.get("orders-db").force_open(); // an operator takes the database out
//! for path in ["/orders", "/orders/count"] {
//!     let request = Request::get(path).body(Body::empty()).unwrap();
//!     let response = app.clone().oneshot(request).await.unwrap();
//!     assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
//! }
//! # }
//! ```
//!
//! Guard the outgoing call rather than the whole route: only the
//! dependency's failures count, and the breaker's probes still work.
//!
//! Recipes for poem and rocket are in the repository's
//! `docs/web-frameworks.md`.
//!
//! # Features
//!
//! - `reqwest-middleware`: `GuardError<E>: From<reqwest_middleware::Error>`,
//!   so `?` on a client call answers 503 for a rejection anywhere in the
//!   error's chain (behind `reqwest-retry` too). Needs Rust 1.88, as
//!   reqwest.
//!
//! The crate depends on `axum-core` and `http`, not on `axum`.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85, as the core. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod extract;
mod response;

pub use extract::{Breaker, BreakerName};
pub use interlock::rejection::{DEFAULT_DETAIL, InvalidHeader, RejectionResponse};
pub use response::{CircuitOpen, GuardError, handle_error};
