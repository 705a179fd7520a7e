//! One circuit breaker per host for HTTP clients (feature `http`).
//!
//! A failing `api-a.example.com` must not trip the breaker of
//! `api-b.example.com`, and nobody wants to wrap every call site. The
//! pieces here give every HTTP adapter the same behaviour; the tower one,
//! [`KeyedCircuitBreakerLayer`], serves hyper-util's client and
//! `reqwest::Client` used as a `Service`, and the `interlock-reqwest`
//! and `interlock-ureq` crates build on the rest. (tonic's generated
//! clients send path-only URIs and report errors in `grpc-status`: use the
//! `interlock-tonic` crate for them.)
//!
//! - **One breaker per name**, created on first use in a [`Registry`]
//!   ([`HostRegistry`]: owned by the adapter, or shared between clients).
//!   An owned registry is bounded: a host without requests for 10 minutes
//!   is forgotten, and at most 10,000 are kept, the least recently used
//!   evicted first ([`DEFAULT_EXPIRE_AFTER_IDLE`], [`DEFAULT_MAX_HOSTS`];
//!   `expire_after_idle` and `max_hosts` on every adapter's builder).
//!   The name comes from a [`NameResolver`], by default [`HostAndPort`]
//!   (`host:port`; [`HostOnly`] names breakers by host alone, as the Python
//!   original does); a request without a host, or a resolver returning a
//!   blank name, is a [`NameError`] before any I/O.
//! - **One failure policy**, [`HttpStatusClassifier`]: 429, 500, 502, 503,
//!   504 and transport errors are failures, the caller's own bugs are
//!   successes, a full local pool or bulkhead is inconclusive.
//! - **Rejection before I/O**: an open breaker answers with a
//!   [`CircuitOpenError`](crate::CircuitOpenError) and the request is never
//!   sent (the inner service is not called).
//! - **The call ends at the response headers.** The breaker measures the
//!   time to the headers (so a slow host is a slow call) and records the
//!   verdict then; the body streams later, outside the call, and an error
//!   while reading it is not recorded.
//! - **Cancellation**: dropping an in-flight request hands its HALF_OPEN
//!   probe slot back, recording nothing.
//! - **Safe rollout**: [`State::MetricsOnly`](crate::State::MetricsOnly) as
//!   the initial state makes every host created later count outcomes
//!   without ever rejecting; `registry()` on each adapter shows what was
//!   seen ([`Registry::get_existing`], [`Registry::names`],
//!   [`Registry::items`]). Deploy with the default initial state once the
//!   thresholds are tuned, rather than resetting the hosts seen so far.
//!
//! ```
//! use interlock::http::KeyedCircuitBreakerLayer;
//! use interlock::{CircuitOpenError, Config, SlidingWindow};
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::sync::Arc;
//! use tower::{service_fn, Layer, Service, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! // A stand-in for an HTTP client whose upstream answers 503.
//! let sent = Arc::new(AtomicUsize::new(0));
//! let counter = sent.clone();
//! let client = service_fn(move |_request: http::Request<()>| {
//!     counter.fetch_add(1, Ordering::SeqCst);
//!     async { http::Response::builder().status(503).body(()) }
//! });
//!
//! let layer = KeyedCircuitBreakerLayer::builder()
//!     .config(Config::builder().minimum_number_of_calls(2).sliding_window(SlidingWindow::count(2)).build()?)
//!     .build()?;
//! let mut client = layer.layer(client);
//! let get = || http::Request::get("http://inventory.internal/items").body(());
//!
//! for _ in 0..2 {
//!     let response = client.ready().await?.call(get()?).await?;
//!     assert_eq!(response.status(), 503); // returned, and counted as a failure
//! }
//! let err = client.ready().await?.call(get()?).await.unwrap_err();
//! let open = err.downcast_ref::<CircuitOpenError>().expect("rejected");
//! assert_eq!(open.breaker_name(), "inventory.internal:80");
//! assert_eq!(sent.load(Ordering::SeqCst), 2); // the rejection was never sent
//! assert_eq!(layer.registry().names(), ["inventory.internal:80"]);
//! # Ok(())
//! # }
//! ```
//!
//! # Sharing a registry
//!
//! Clients given the same [`Registry`] (with the builders' `registry`
//! option) share one breaker per name. The registry then owns the config,
//! clock, listeners and initial state, so passing those as well is a
//! [`BuildError::SharedRegistry`]; the classifier and name resolver stay
//! per adapter, because classification happens in the adapter (a breaker
//! taken from the same registry for other work is unaffected). A shared
//! registry is left open when the adapter closes; its owner closes it.
//!
//! # Other errors
//!
//! A [`NameError`] or a rejection is returned as the adapter's error type,
//! downcastable to the original. Errors of the client itself are returned
//! unchanged, whatever their verdict.

mod classify;
mod name;
mod registry;
mod service;

pub use classify::{DEFAULT_FAILURE_STATUSES, HttpStatusClassifier};
pub use name::{HostAndPort, HostOnly, NameError, NameResolver};
pub use registry::{
    BuildError, DEFAULT_EXPIRE_AFTER_IDLE, DEFAULT_MAX_HOSTS, HostRegistry, HostRegistryBuilder,
};
pub use service::{
    KeyedCircuitBreaker, KeyedCircuitBreakerLayer, KeyedCircuitBreakerLayerBuilder, future,
};

#[allow(unused_imports)] // intra-doc links
use crate::Registry;
