//! One circuit breaker per gRPC server for [`tonic`] clients, judged by
//! `grpc-status`.
//!
//! gRPC does not fail the way HTTP does: a server that is down, overloaded
//! or broken answers `200 OK` with a `grpc-status` of `UNAVAILABLE`,
//! `RESOURCE_EXHAUSTED` or `INTERNAL`, in the response headers (a
//! *trailers-only* response) or in the trailers after the messages. An
//! HTTP status classifier sees only 200s. [`GrpcCircuitBreakerLayer`] wraps
//! a tonic `Channel` (or any gRPC client service) and reads the status
//! where gRPC puts it:
//!
//! - **Failures by default** ([`GrpcStatusClassifier`]): `UNAVAILABLE`,
//!   `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `INTERNAL`, `UNKNOWN`,
//!   `DATA_LOSS`, and transport errors. The caller's own mistakes
//!   (`INVALID_ARGUMENT`, `NOT_FOUND`, `PERMISSION_DENIED`, ...) are
//!   successes: no open circuit fixes them.
//! - **One breaker per server.** Generated clients (`Client::new(channel)`)
//!   send requests whose URI is only a path (`/pkg.Svc/Method`): the
//!   channel adds its origin later. Those requests use the breaker named
//!   after the origin the layer was built for
//!   ([`for_origin`](GrpcCircuitBreakerLayer::for_origin), `host:port`) or
//!   a name of your choice ([`named`](GrpcCircuitBreakerLayer::named));
//!   never an error. A request that carries an authority (a client made
//!   `with_origin`) gets that authority's breaker.
//! - **The call ends with its status**: at the response headers for a
//!   trailers-only or non-200 response, else when the body's trailers
//!   arrive (a server stream is one call from the request to its final
//!   status, so the slow-call threshold covers the whole stream).
//!   Dropping the response or the body before the status cancels the call
//!   (a HALF_OPEN probe slot goes back).
//! - **Rejection before I/O, as gRPC**: an open breaker answers with
//!   [`tonic::Status::unavailable`], so generated clients return it as any
//!   other status; its metadata carries the breaker's wait in
//!   `grpc-retry-pushback-ms` (gRFC A6's retry pushback; absent when the
//!   breaker has no estimate: HALF_OPEN, FORCED_OPEN), and its `source()`
//!   is the [`CircuitOpenError`] ([`rejection`] finds it). The message
//!   names no breaker or host, so a server that passes the status on to
//!   its own callers leaks nothing internal.
//!
//! ```no_run
//! use interlock_tonic::GrpcCircuitBreakerLayer;
//! use tonic::transport::Endpoint;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let endpoint = Endpoint::from_static("http://inventory.internal:50051");
//! let breakers = GrpcCircuitBreakerLayer::for_origin(endpoint.uri()).build()?;
//! let channel = tower::ServiceBuilder::new()
//!     .layer(breakers.clone())
//!     .service(endpoint.connect_lazy());
//! // Any generated client takes it: `InventoryClient::new(channel)`.
//! let mut client = tonic::client::Grpc::new(channel);
//! # let _ = &mut client;
//! assert_eq!(breakers.default_name(), "inventory.internal:50051");
//! # Ok(())
//! # }
//! ```
//!
//! A rejected call, as the caller sees it:
//!
//! ```
//! use interlock::CircuitBreaker;
//!
//! let breaker = CircuitBreaker::new("inventory.internal:50051");
//! breaker.force_open();
//! let status = interlock_tonic::unavailable_status(breaker.acquire().unwrap_err());
//! assert_eq!(status.code(), tonic::Code::Unavailable);
//! assert_eq!(interlock_tonic::rejection(&status).unwrap().breaker_name(), "inventory.internal:50051");
//! assert_eq!(interlock_tonic::retry_pushback(&status), None); // no estimate after force_open
//! ```
//!
//! The options are the core's (see [`interlock::http`]): `config`, `clock`,
//! `listener`, `initial_state` build the layer's own registry; `registry`
//! shares the caller's (a blocking-coordinated one shares each server's
//! breaker across a fleet).
//!
//! # Minimum supported Rust version
//!
//! Rust 1.88, what tonic 0.14 needs. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod classify;
pub mod future;
mod layer;

pub use classify::{DEFAULT_FAILURE_CODES, GrpcStatusClassifier};
pub use interlock::CircuitOpenError;
pub use layer::{GrpcCircuitBreaker, GrpcCircuitBreakerLayer, GrpcCircuitBreakerLayerBuilder};

/// The error type of the layer's service: what tonic's clients turn into a
/// [`tonic::Status`] (a rejection already is one).
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The metadata key of the retry hint, in milliseconds (gRFC A6).
pub const RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// The status a rejected call gets: `UNAVAILABLE`, the wait in
/// [`RETRY_PUSHBACK_MS`] (milliseconds, rounded up; absent without an
/// estimate) and the rejection as its `source()`.
#[must_use]
pub fn unavailable_status(open: CircuitOpenError) -> tonic::Status {
    let mut status = tonic::Status::unavailable("circuit open: the request was not sent");
    if let Some(wait) = open.retry_after() {
        let millis = wait.as_nanos().div_ceil(1_000_000);
        let millis = u64::try_from(millis).unwrap_or(u64::MAX);
        status.metadata_mut().insert(
            RETRY_PUSHBACK_MS,
            tonic::metadata::MetadataValue::from(millis),
        );
    }
    status.set_source(Arc::new(open));
    status
}

/// [`unavailable_status`], boxed as the service's error.
pub(crate) fn unavailable(open: CircuitOpenError) -> BoxError {
    Box::new(unavailable_status(open))
}

/// The rejection behind a status, if the status is one (or any error in
/// its chain is).
#[must_use]
pub fn rejection(status: &tonic::Status) -> Option<&CircuitOpenError> {
    interlock::find_rejection(status)
}

/// The retry hint of a status: its `grpc-retry-pushback-ms`, if present
/// and a valid count of milliseconds.
#[must_use]
pub fn retry_pushback(status: &tonic::Status) -> Option<Duration> {
    let value = status.metadata().get(RETRY_PUSHBACK_MS)?.to_str().ok()?;
    value.parse::<u64>().ok().map(Duration::from_millis)
}

/// A layer that could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The default breaker name is blank (`named("")`, or `for_origin` with
    /// a URI without a host).
    BlankName,
    /// The registry options are invalid (see [`interlock::http::BuildError`]).
    Registry(interlock::http::BuildError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::BlankName => f.write_str(
                "default_name: the breaker name of requests without an authority is blank",
            ),
            BuildError::Registry(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::BlankName => None,
            BuildError::Registry(err) => err.source(),
        }
    }
}
