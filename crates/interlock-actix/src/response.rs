//! [`CircuitOpen`] and [`GuardError`]: a rejection as an actix-web error.

use std::error::Error;
use std::fmt;

use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use actix_web::{HttpResponse, ResponseError};
use interlock::rejection::RejectionResponse;
use interlock::{CallError, CircuitOpenError};

/// A rejection by an open breaker, as an actix-web error whose response is
/// `503 Service Unavailable`, a `Retry-After` header and a JSON body.
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
/// The orphan rule keeps [`ResponseError`] off [`CircuitOpenError`]
/// itself; this newtype carries it, and `From` makes `?` convert.
///
/// ```
/// use actix_web::{App, http::StatusCode, test, web};
/// use interlock::CircuitBreaker;
/// use interlock_actix::CircuitOpen;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let breaker = CircuitBreaker::new("orders-db");
/// breaker.force_open();
///
/// let app = test::init_service(App::new().route(
///     "/orders",
///     web::get().to(move || {
///         let admitted = breaker.acquire().map(|permit| permit.success());
///         async move {
///             admitted.map_err(CircuitOpen::from)?;
///             Ok::<_, CircuitOpen>("[]")
///         }
///     }),
/// ))
/// .await;
///
/// let response = test::call_service(&app, test::TestRequest::get().uri("/orders").to_request()).await;
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert!(response.headers().get("retry-after").is_none()); // no estimate after force_open
/// let body = test::read_body(response).await;
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
    /// use interlock_actix::CircuitOpen;
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
    /// use interlock_actix::CircuitOpen;
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
    pub fn response_with(&self, shape: &RejectionResponse) -> HttpResponse {
        respond(shape, &self.0)
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

impl ResponseError for CircuitOpen {
    fn status_code(&self) -> StatusCode {
        StatusCode::SERVICE_UNAVAILABLE
    }

    fn error_response(&self) -> HttpResponse {
        respond(&RejectionResponse::installed(), &self.0)
    }
}

/// The response `shape` gives `open`: `503 Service Unavailable` with what
/// [`RejectionResponse::render`] makes of it.
fn respond(shape: &RejectionResponse, open: &CircuitOpenError) -> HttpResponse {
    let rendered = shape.render(open);
    let mut response = HttpResponse::build(StatusCode::SERVICE_UNAVAILABLE);
    // `RejectionResponse` checked every name and value: each converts.
    if let Ok(value) = HeaderValue::from_str(rendered.content_type) {
        response.insert_header((CONTENT_TYPE, value));
    }
    if let Some(secs) = rendered.retry_after_secs {
        response.insert_header((RETRY_AFTER, HeaderValue::from(secs)));
    }
    for (name, value) in rendered.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.append_header((name, value));
        }
    }
    response.body(rendered.body)
}

/// The error of a handler that guards a call: a rejection becomes the
/// [`CircuitOpen`] response, the call's own error its own response.
///
/// `From` impls for [`CallError<E>`], [`CircuitOpenError`] and
/// [`CircuitOpen`] let `?` convert in a handler returning
/// `Result<_, GuardError<E>>`. `Display` and `source` are those of the
/// wrapped error.
///
/// `E` is any error that converts into `actix_web::Error`: a
/// [`ResponseError`] type or `actix_web::Error` itself. `GuardError` turns
/// into `actix_web::Error` through `From` rather than implementing
/// [`ResponseError`], which is what lets `GuardError<actix_web::Error>`
/// work.
///
/// ```
/// use actix_web::{App, ResponseError, http::StatusCode, test, web};
/// use interlock::CircuitBreaker;
/// use interlock_actix::GuardError;
///
/// /// The dependency's own error, with a response of its own.
/// #[derive(Debug)]
/// struct Upstream;
/// impl std::fmt::Display for Upstream {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("upstream failed") }
/// }
/// impl std::error::Error for Upstream {}
/// impl ResponseError for Upstream {
///     fn status_code(&self) -> StatusCode { StatusCode::BAD_GATEWAY }
/// }
///
/// async fn fetch_orders() -> Result<&'static str, Upstream> {
///     Err(Upstream)
/// }
///
/// async fn orders(breaker: web::Data<CircuitBreaker>) -> Result<&'static str, GuardError<Upstream>> {
///     Ok(breaker.call_async(fetch_orders).await?)
/// }
///
/// # #[actix_web::main]
/// # async fn main() {
/// let breaker = web::Data::new(CircuitBreaker::new("orders-db"));
/// let app = test::init_service(App::new().app_data(breaker).route("/orders", web::get().to(orders))).await;
/// let response = test::call_service(&app, test::TestRequest::get().uri("/orders").to_request()).await;
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

/// The response of a handler's error: 503 for a rejection, `E`'s own
/// otherwise. `E` may be any [`ResponseError`] or `actix_web::Error`
/// itself.
impl<E: Into<actix_web::Error>> From<GuardError<E>> for actix_web::Error {
    fn from(err: GuardError<E>) -> Self {
        match err {
            GuardError::Rejected(open) => open.into(),
            GuardError::Inner(e) => e.into(),
        }
    }
}
