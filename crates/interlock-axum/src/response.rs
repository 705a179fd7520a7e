//! [`CircuitOpen`] and [`GuardError`]: a rejection as an HTTP response.

use std::error::Error;
use std::fmt;

use axum_core::BoxError;
use axum_core::body::Body;
use axum_core::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, StatusCode};
use interlock::rejection::RejectionResponse;
use interlock::{CallError, CircuitOpenError};

/// A rejection by an open breaker, as an axum response: `503 Service
/// Unavailable`, a `Retry-After` header and a JSON body.
///
/// | part           | value                                                         |
/// |----------------|---------------------------------------------------------------|
/// | status         | `503 Service Unavailable`                                     |
/// | `Retry-After`  | [`retry_after`](CircuitOpenError::retry_after) rounded **up** to whole seconds; absent without an estimate (HALF_OPEN, FORCED_OPEN) |
/// | `Content-Type` | `application/json`                                            |
/// | body           | `{"detail":"Service temporarily unavailable"}`: no breaker or host name, which are internal |
///
/// A rejection whose wait has already elapsed (`retry_after` of zero) sends
/// `Retry-After: 0`: the breaker would admit a probe now.
///
/// The body and extra headers are configurable with a
/// [`RejectionResponse`], installed process-wide or used for one response;
/// [`RejectionResponse::include_breaker_name`] restores the Python
/// original's `{"detail":"Circuit 'NAME' is open"}`.
///
/// The orphan rule keeps `IntoResponse` off [`CircuitOpenError`] itself;
/// this newtype carries it, and `From` makes `?` convert.
///
/// ```
/// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
/// use interlock::CircuitBreaker;
/// use interlock_axum::CircuitOpen;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let breaker = CircuitBreaker::new("orders-db");
/// breaker.force_open();
///
/// let app = Router::new().route(
///     "/orders",
///     get(move || async move {
///         let permit = breaker.acquire().map_err(CircuitOpen::from)?;
///         permit.success();
///         Ok::<_, CircuitOpen>("[]")
///     }),
/// );
///
/// let response = app.oneshot(Request::get("/orders").body(Body::empty()).unwrap()).await.unwrap();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert!(response.headers().get("retry-after").is_none()); // no estimate after force_open
/// let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
/// assert_eq!(&body[..], br#"{"detail":"Service temporarily unavailable"}"#);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct CircuitOpen(CircuitOpenError);

impl CircuitOpen {
    /// Wraps a rejection.
    #[must_use]
    pub fn new(open: CircuitOpenError) -> Self {
        CircuitOpen(open)
    }

    /// The rejection.
    #[must_use]
    pub fn get_ref(&self) -> &CircuitOpenError {
        &self.0
    }

    /// The rejection, unwrapped.
    #[must_use]
    pub fn into_inner(self) -> CircuitOpenError {
        self.0
    }

    /// The `Retry-After` value in whole seconds, rounded up (0.2 s gives 1,
    /// 30.0 s gives 30), or `None` when the breaker has no estimate.
    ///
    /// For building a response of your own shape.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    /// use interlock_axum::CircuitOpen;
    ///
    /// let breaker = CircuitBreaker::new("search");
    /// breaker.force_open();
    /// let open = CircuitOpen::from(breaker.acquire().unwrap_err());
    /// assert_eq!(open.retry_after_secs(), None);
    /// ```
    #[must_use]
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.0.retry_after_secs()
    }

    /// The `detail` text naming the breaker, `Circuit 'NAME' is open` (the
    /// Python original's), for a response or a log line of your own. The
    /// default response does not send it; see
    /// [`RejectionResponse::include_breaker_name`].
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    /// use interlock_axum::CircuitOpen;
    ///
    /// let breaker = CircuitBreaker::new("search");
    /// breaker.force_open();
    /// let open = CircuitOpen::from(breaker.acquire().unwrap_err());
    /// assert_eq!(open.detail(), "Circuit 'search' is open");
    /// ```
    #[must_use]
    pub fn detail(&self) -> String {
        format!("Circuit '{}' is open", self.0.breaker_name())
    }

    /// The response `shape` gives this rejection (instead of the installed
    /// one).
    #[must_use]
    pub fn into_response_with(self, shape: &RejectionResponse) -> Response {
        respond(shape, &self.0)
    }

    /// Finds a rejection in a tower `BoxError`: the error itself or any
    /// error in its [`source`](Error::source) chain, or inside a wrapper
    /// [`interlock::find_rejection`] knows. Gives the error back untouched
    /// when there is none.
    ///
    /// Use it in a `HandleErrorLayer` function of your own; [`handle_error`]
    /// is the ready-made one.
    ///
    /// # Errors
    ///
    /// The original `err` if no [`CircuitOpenError`] is in its chain.
    ///
    /// ```
    /// use axum::{BoxError, http::StatusCode, response::IntoResponse};
    /// use interlock::CircuitBreaker;
    /// use interlock_axum::CircuitOpen;
    ///
    /// async fn on_error(err: BoxError) -> axum::response::Response {
    ///     match CircuitOpen::find(err) {
    ///         Ok(open) => open.into_response(),
    ///         Err(other) => (StatusCode::GATEWAY_TIMEOUT, other.to_string()).into_response(),
    ///     }
    /// }
    ///
    /// let breaker = CircuitBreaker::new("search");
    /// breaker.force_open();
    /// let err: BoxError = breaker.acquire().unwrap_err().into();
    /// assert!(CircuitOpen::find(err).is_ok());
    /// assert!(CircuitOpen::find("timed out".into()).is_err());
    /// # let _ = on_error;
    /// ```
    pub fn find(err: BoxError) -> Result<CircuitOpen, BoxError> {
        let found = interlock::find_rejection(&*err).cloned();
        found.map(CircuitOpen).ok_or(err)
    }
}

impl From<CircuitOpenError> for CircuitOpen {
    fn from(open: CircuitOpenError) -> Self {
        CircuitOpen(open)
    }
}

impl From<CircuitOpen> for CircuitOpenError {
    fn from(open: CircuitOpen) -> Self {
        open.0
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Error for CircuitOpen {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl IntoResponse for CircuitOpen {
    fn into_response(self) -> Response {
        respond(&RejectionResponse::installed(), &self.0)
    }
}

/// The response `shape` gives `open`: `503 Service Unavailable` with what
/// [`RejectionResponse::render`] makes of it.
fn respond(shape: &RejectionResponse, open: &CircuitOpenError) -> Response {
    let rendered = shape.render(open);
    let mut response = Body::from(rendered.body).into_response();
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    // `RejectionResponse` checked every name and value: each converts.
    if let Ok(value) = HeaderValue::from_str(rendered.content_type) {
        headers.insert(CONTENT_TYPE, value);
    }
    if let Some(secs) = rendered.retry_after_secs {
        headers.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    for (name, value) in rendered.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.append(name, value);
        }
    }
    response
}

/// The error of a handler that guards a call: a rejection becomes the
/// [`CircuitOpen`] response, the call's own error its own response.
///
/// `From` impls for [`CallError<E>`], [`CircuitOpenError`] and
/// [`CircuitOpen`] let `?` convert in a handler returning
/// `Result<_, GuardError<E>>`. `Display` and `source` are those of the
/// wrapped error.
///
/// ```
/// use axum::{Router, body::Body, http::{Request, StatusCode}, routing::get};
/// use interlock::CircuitBreaker;
/// use interlock_axum::GuardError;
/// use tower::ServiceExt;
///
/// /// The dependency's own error, with a response of its own.
/// #[derive(Debug)]
/// struct Upstream;
/// impl std::fmt::Display for Upstream {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("upstream failed") }
/// }
/// impl std::error::Error for Upstream {}
/// impl axum::response::IntoResponse for Upstream {
///     fn into_response(self) -> axum::response::Response { StatusCode::BAD_GATEWAY.into_response() }
/// }
///
/// async fn fetch_orders() -> Result<&'static str, Upstream> {
///     Err(Upstream)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let breaker = CircuitBreaker::new("orders-db");
/// let app = Router::new().route(
///     "/orders",
///     get(move || async move {
///         let orders = breaker.call_async(fetch_orders).await?;
///         Ok::<_, GuardError<Upstream>>(orders)
///     }),
/// );
/// let response = app.oneshot(Request::get("/orders").body(Body::empty()).unwrap()).await.unwrap();
/// assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GuardError<E> {
    /// The breaker rejected the call: answered with 503.
    Rejected(CircuitOpen),
    /// The call ran and failed: answered with `E`'s response.
    Inner(E),
}

impl<E> GuardError<E> {
    /// Whether the breaker rejected the call.
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        matches!(self, GuardError::Rejected(_))
    }

    /// The call's own error, if it ran.
    #[must_use]
    pub fn into_inner(self) -> Option<E> {
        match self {
            GuardError::Rejected(_) => None,
            GuardError::Inner(e) => Some(e),
        }
    }
}

impl<E> From<CallError<E>> for GuardError<E> {
    fn from(err: CallError<E>) -> Self {
        match err {
            CallError::Rejected(open) => GuardError::Rejected(CircuitOpen(open)),
            CallError::Inner(e) => GuardError::Inner(e),
        }
    }
}

impl<E> From<CircuitOpenError> for GuardError<E> {
    fn from(open: CircuitOpenError) -> Self {
        GuardError::Rejected(CircuitOpen(open))
    }
}

impl<E> From<CircuitOpen> for GuardError<E> {
    fn from(open: CircuitOpen) -> Self {
        GuardError::Rejected(open)
    }
}

/// A client error of the `reqwest-middleware` stack: a rejection anywhere
/// in its chain (from `interlock-reqwest`, behind `reqwest-retry` or any
/// middleware that keeps the error as a `source()`) becomes
/// [`GuardError::Rejected`], so the handler answers 503; any other error
/// becomes `E` (through `E: From<reqwest_middleware::Error>`).
///
/// ```
/// use axum::http::StatusCode;
/// use axum::response::IntoResponse;
/// use interlock::CircuitBreaker;
/// use interlock_axum::GuardError;
///
/// /// The upstream's own failures answer 502.
/// struct BadGateway;
/// impl From<reqwest_middleware::Error> for BadGateway {
///     fn from(_: reqwest_middleware::Error) -> Self { BadGateway }
/// }
/// impl IntoResponse for BadGateway {
///     fn into_response(self) -> axum::response::Response { StatusCode::BAD_GATEWAY.into_response() }
/// }
///
/// let breaker = CircuitBreaker::new("api.example.com:443");
/// breaker.force_open();
/// let err = reqwest_middleware::Error::middleware(breaker.acquire().unwrap_err());
/// let answer: GuardError<BadGateway> = err.into();
/// assert_eq!(answer.into_response().status(), StatusCode::SERVICE_UNAVAILABLE);
/// ```
#[cfg(feature = "reqwest-middleware")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
impl<E: From<reqwest_middleware::Error>> From<reqwest_middleware::Error> for GuardError<E> {
    fn from(err: reqwest_middleware::Error) -> Self {
        interlock::register_opener(open_middleware_error);
        match interlock::find_rejection(&err) {
            Some(open) => GuardError::Rejected(CircuitOpen(open.clone())),
            None => GuardError::Inner(E::from(err)),
        }
    }
}

/// Opens [`reqwest_middleware::Error::Middleware`], whose `source()` skips
/// the error it holds (see [`interlock::register_opener`]).
#[cfg(feature = "reqwest-middleware")]
fn open_middleware_error<'a>(
    error: &'a (dyn Error + 'static),
) -> Option<&'a (dyn Error + 'static)> {
    match error.downcast_ref::<reqwest_middleware::Error>()? {
        reqwest_middleware::Error::Middleware(inner) => Some(inner.as_ref()),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

impl<E: fmt::Display> fmt::Display for GuardError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::Rejected(open) => fmt::Display::fmt(open, f),
            GuardError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: Error> Error for GuardError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            GuardError::Rejected(open) => open.source(),
            GuardError::Inner(e) => e.source(),
        }
    }
}

impl<E: IntoResponse> IntoResponse for GuardError<E> {
    fn into_response(self) -> Response {
        match self {
            GuardError::Rejected(open) => open.into_response(),
            GuardError::Inner(e) => e.into_response(),
        }
    }
}

/// A ready-made function for axum's `HandleErrorLayer`: a rejection found
/// in the error (see [`CircuitOpen::find`]) becomes the [`CircuitOpen`]
/// response, anything else a bare `500 Internal Server Error`, so no
/// internal message reaches the client.
///
/// To answer other errors differently, write the function yourself around
/// [`CircuitOpen::find`].
///
/// ```
/// use axum::{BoxError, Router, body::Body, error_handling::HandleErrorLayer, http::{Request, StatusCode}};
/// use interlock::CircuitBreaker;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let breaker = CircuitBreaker::new("search");
/// breaker.force_open();
/// // A fallible tower service, as a breaker layer produces.
/// let search = service_fn(move |_req: Request<Body>| {
///     let admitted = breaker.acquire().map(|permit| permit.success());
///     async move {
///         admitted?;
///         Ok::<_, BoxError>(axum::response::Response::new(Body::empty()))
///     }
/// });
/// let app = Router::new().route_service(
///     "/search",
///     ServiceBuilder::new()
///         .layer(HandleErrorLayer::new(interlock_axum::handle_error))
///         .service(search),
/// );
/// let response = app.oneshot(Request::get("/search").body(Body::empty()).unwrap()).await.unwrap();
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// # }
/// ```
///
/// # Cancel safety
///
/// It completes at its first poll.
pub async fn handle_error(err: BoxError) -> Response {
    match CircuitOpen::find(err) {
        Ok(open) => open.into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}
