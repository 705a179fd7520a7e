//! [`CircuitOpen`] and [`GuardError`]: a rejection as an HTTP response.

use std::error::Error;
use std::fmt;
use std::sync::{Arc, RwLock};

use axum_core::BoxError;
use axum_core::body::Body;
use axum_core::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, StatusCode};
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
        shape.respond(&self.0)
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
        RejectionResponse::installed().respond(&self.0)
    }
}

/// Makes the body of a rejection: its content type and bytes.
type BodyFn = Arc<dyn Fn(&CircuitOpenError) -> (HeaderValue, Vec<u8>) + Send + Sync>;

/// The text the default body's `detail` holds.
pub const DEFAULT_DETAIL: &str = "Service temporarily unavailable";

/// The installed shape (`None`: the default).
static INSTALLED: RwLock<Option<Arc<RejectionResponse>>> = RwLock::new(None);

/// What a [`CircuitOpen`] response looks like: always `503 Service
/// Unavailable` and (when the breaker has an estimate) `Retry-After`; the
/// body and any extra headers are yours.
///
/// | option | body |
/// |---|---|
/// | default | `{"detail":"Service temporarily unavailable"}`: nothing internal reaches public clients |
/// | [`detail`](Self::detail) | `{"detail":"<your text>"}` |
/// | [`include_breaker_name`](Self::include_breaker_name) | `{"detail":"Circuit 'NAME' is open"}` (opt in: the breaker name is often an internal host) |
/// | [`body`](Self::body) | anything, with its content type |
///
/// [`install`](Self::install) makes it the shape of every `CircuitOpen`
/// response of the process (`?` in handlers, [`handle_error`]);
/// [`CircuitOpen::into_response_with`] uses one for a single response.
///
/// ```
/// use axum::http::StatusCode;
/// use interlock::CircuitBreaker;
/// use interlock_axum::{CircuitOpen, RejectionResponse};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let shape = RejectionResponse::new()
///     .detail("Orders are unavailable; try again shortly")
///     .header("cache-control", "no-store")
///     .unwrap();
/// // At start-up: `shape.clone().install();`
///
/// let breaker = CircuitBreaker::new("10.0.3.7:5432");
/// breaker.force_open();
/// let open = CircuitOpen::from(breaker.acquire().unwrap_err());
/// let response = open.into_response_with(&shape);
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.headers()["cache-control"], "no-store");
/// let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
/// assert_eq!(&body[..], br#"{"detail":"Orders are unavailable; try again shortly"}"#);
/// # }
/// ```
#[derive(Clone)]
pub struct RejectionResponse {
    body: Option<BodyFn>,
    detail: Option<String>,
    include_name: bool,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Default for RejectionResponse {
    fn default() -> Self {
        RejectionResponse::new()
    }
}

impl RejectionResponse {
    /// The default shape: a JSON `detail` of [`DEFAULT_DETAIL`], no extra
    /// headers.
    #[must_use]
    pub fn new() -> Self {
        RejectionResponse {
            body: None,
            detail: None,
            include_name: false,
            headers: Vec::new(),
        }
    }

    /// The JSON `detail` text (escaped as JSON).
    #[must_use]
    pub fn detail(mut self, text: impl Into<String>) -> Self {
        self.detail = Some(text.into());
        self.include_name = false;
        self
    }

    /// The JSON `detail` names the breaker: `Circuit 'NAME' is open`, as
    /// the Python original answers (the name is escaped as JSON).
    #[must_use]
    pub fn include_breaker_name(mut self) -> Self {
        self.include_name = true;
        self.detail = None;
        self
    }

    /// A body of your own: `make` gives its bytes for a rejection, sent
    /// with `content_type`.
    ///
    /// ```
    /// use interlock_axum::RejectionResponse;
    ///
    /// let plain = RejectionResponse::new()
    ///     .body(axum::http::HeaderValue::from_static("text/plain"), |_open| b"busy, retry later".to_vec());
    /// # let _ = plain;
    /// ```
    #[must_use]
    pub fn body<F>(mut self, content_type: HeaderValue, make: F) -> Self
    where
        F: Fn(&CircuitOpenError) -> Vec<u8> + Send + Sync + 'static,
    {
        self.body = Some(Arc::new(move |open| (content_type.clone(), make(open))));
        self
    }

    /// Adds a header to every rejection (`Retry-After` and `Content-Type`
    /// are the response's own and cannot be added).
    ///
    /// # Errors
    ///
    /// [`InvalidHeader`] naming the header if the name or value is not
    /// valid HTTP, or is one of the two.
    pub fn header(mut self, name: &str, value: &str) -> Result<Self, InvalidHeader> {
        let invalid = || InvalidHeader {
            name: name.to_owned(),
        };
        let header = HeaderName::try_from(name).map_err(|_| invalid())?;
        if header == RETRY_AFTER || header == CONTENT_TYPE {
            return Err(invalid());
        }
        let value = HeaderValue::try_from(value).map_err(|_| invalid())?;
        self.headers.push((header, value));
        Ok(self)
    }

    /// Makes this the shape of every [`CircuitOpen`] response in the
    /// process, replacing the one installed before.
    pub fn install(self) {
        let mut installed = INSTALLED
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *installed = Some(Arc::new(self));
    }

    /// The installed shape (the default when none was installed).
    #[must_use]
    pub fn installed() -> Arc<RejectionResponse> {
        let installed = INSTALLED
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        installed
            .clone()
            .unwrap_or_else(|| Arc::new(RejectionResponse::new()))
    }

    /// The response for `open` in this shape.
    #[must_use]
    pub fn respond(&self, open: &CircuitOpenError) -> Response {
        let (content_type, body) = match &self.body {
            Some(make) => make(open),
            None => {
                let detail = if self.include_name {
                    format!("Circuit '{}' is open", open.breaker_name())
                } else {
                    self.detail
                        .clone()
                        .unwrap_or_else(|| DEFAULT_DETAIL.to_owned())
                };
                let json = serde_json::json!({ "detail": detail }).to_string();
                (
                    HeaderValue::from_static("application/json"),
                    json.into_bytes(),
                )
            }
        };
        let mut response = Body::from(body).into_response();
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, content_type);
        if let Some(secs) = open.retry_after_secs() {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        response
    }
}

impl fmt::Debug for RejectionResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RejectionResponse")
            .field("custom_body", &self.body.is_some())
            .field("detail", &self.detail)
            .field("include_breaker_name", &self.include_name)
            .field("headers", &self.headers)
            .finish()
    }
}

/// A header [`RejectionResponse::header`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidHeader {
    /// The header's name, as given.
    pub name: String,
}

impl fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "header `{}`: not a valid HTTP header, or one the rejection sets itself (content-type, retry-after)",
            self.name
        )
    }
}

impl Error for InvalidHeader {}

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
