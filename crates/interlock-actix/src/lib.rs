//! actix-web integration for [`interlock`]: a call rejected by an open
//! breaker becomes `503 Service Unavailable` with a `Retry-After` header.
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
//! | item              | use                                                              |
//! |-------------------|------------------------------------------------------------------|
//! | [`CircuitOpen`]   | the error, a [`ResponseError`](actix_web::ResponseError); `From<CircuitOpenError>` |
//! | [`GuardError<E>`] | a handler's error: `From<CallError<E>>`, so `?` works             |
//! | [`RejectionResponse`] | the 503's body and extra headers, process-wide or per response |
//! | [`Breaker<N>`]    | extractor: the breaker named `N::NAME` from the app's `web::Data<Registry>` |
//!
//! ```
//! use actix_web::{App, http::StatusCode, test, web};
//! use interlock::Registry;
//! use interlock_actix::{Breaker, BreakerName, GuardError};
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
//! // Both routes share one breaker: they depend on the same database.
//! async fn list(db: Breaker<OrdersDb>) -> Result<String, GuardError<actix_web::Error>> {
//!     Ok(db.call_async(fetch_orders).await.map_err(|e| e.map_inner(actix_web::Error::from))?)
//! }
//! async fn count(db: Breaker<OrdersDb>) -> Result<String, GuardError<actix_web::Error>> {
//!     let orders = db.call_async(fetch_orders).await.map_err(|e| e.map_inner(actix_web::Error::from))?;
//!     Ok(orders.len().to_string())
//! }
//!
//! # #[actix_web::main]
//! # async fn main() {
//! let registry = Registry::new();
//! let app = test::init_service(
//!     App::new()
//!         .app_data(web::Data::new(registry.clone()))
//!         .route("/orders", web::get().to(list))
//!         .route("/orders/count", web::get().to(count)),
//! )
//! .await;
//!
//! registry.get("orders-db").force_open(); // an operator takes the database out
//! for path in ["/orders", "/orders/count"] {
//!     let response = test::call_service(&app, test::TestRequest::get().uri(path).to_request()).await;
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
//! None. `actix-web` is used without its default features.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.89, what current actix-web 4 releases need (the core itself needs
//! only 1.85). Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod extract;
mod response;

pub use extract::{Breaker, BreakerName};
pub use interlock::rejection::{DEFAULT_DETAIL, InvalidHeader, RejectionResponse};
pub use response::{CircuitOpen, GuardError};
