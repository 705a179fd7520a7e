//! What a web server answers for a rejected call, shaped once for every
//! framework adapter (`interlock-axum`, `interlock-actix`): always `503
//! Service Unavailable`, a `Retry-After` header when the breaker has an
//! estimate, and a body and extra headers of your choosing.
//!
//! This module holds the framework-neutral part: the shape
//! ([`RejectionResponse`]), the checks on the headers it is given, the
//! process-wide installed shape, and what a rejection renders to
//! ([`RenderedRejection`]). Each adapter turns a [`RenderedRejection`] into
//! its framework's response type.
//!
//! ```
//! use interlock::CircuitBreaker;
//! use interlock::rejection::RejectionResponse;
//!
//! let shape = RejectionResponse::new()
//!     .detail("Orders are unavailable; try again shortly")
//!     .header("cache-control", "no-store")?;
//!
//! let breaker = CircuitBreaker::new("10.0.3.7:5432");
//! breaker.force_open();
//! let rendered = shape.render(&breaker.acquire().unwrap_err());
//! assert_eq!(rendered.content_type, "application/json");
//! assert_eq!(rendered.body, br#"{"detail":"Orders are unavailable; try again shortly"}"#);
//! assert_eq!(rendered.retry_after_secs, None); // FORCED_OPEN has no estimate
//! assert_eq!(rendered.headers, [("cache-control", "no-store")]);
//! # Ok::<(), interlock::rejection::InvalidHeader>(())
//! ```

use std::error::Error;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use crate::CircuitOpenError;

/// The text the default body's `detail` holds: nothing internal (no
/// breaker or host name) reaches public clients.
pub const DEFAULT_DETAIL: &str = "Service temporarily unavailable";

/// Makes the bytes of a custom body.
type BodyFn = Arc<dyn Fn(&CircuitOpenError) -> Vec<u8> + Send + Sync>;

/// The installed shape (`None`: the default).
static INSTALLED: RwLock<Option<Arc<RejectionResponse>>> = RwLock::new(None);

/// What the response to a rejected call looks like: always `503 Service
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
/// [`install`](Self::install) makes it the shape every adapter uses for its
/// rejections in this process (`?` in handlers); the adapters' `CircuitOpen`
/// also takes one for a single response.
///
/// ```
/// use interlock::CircuitBreaker;
/// use interlock::rejection::RejectionResponse;
///
/// let plain = RejectionResponse::new()
///     .body("text/plain", |open| format!("{} is busy", open.breaker_name()).into_bytes())?;
/// let breaker = CircuitBreaker::new("search");
/// breaker.force_open();
/// let rendered = plain.render(&breaker.acquire().unwrap_err());
/// assert_eq!((rendered.content_type, &rendered.body[..]), ("text/plain", &b"search is busy"[..]));
/// # Ok::<(), interlock::rejection::InvalidHeader>(())
/// ```
#[derive(Clone)]
pub struct RejectionResponse {
    body: Option<(String, BodyFn)>,
    detail: Option<String>,
    include_name: bool,
    /// Lowercase names, checked values.
    headers: Vec<(String, String)>,
}

/// A rejection rendered in a [`RejectionResponse`]'s shape: what an
/// adapter sends with status `503 Service Unavailable`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RenderedRejection<'a> {
    /// The `Content-Type` header's value (a valid header value).
    pub content_type: &'a str,
    /// The body.
    pub body: Vec<u8>,
    /// The `Retry-After` header's value in whole seconds, rounded up;
    /// `None`: no such header (no estimate).
    pub retry_after_secs: Option<u64>,
    /// Extra headers, in the order they were added: lowercase valid names
    /// (never `content-type` or `retry-after`) and valid values.
    pub headers: Vec<(&'a str, &'a str)>,
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
    /// with `content_type`. It replaces the JSON body whatever
    /// [`detail`](Self::detail) says.
    ///
    /// # Errors
    ///
    /// [`InvalidHeader`] naming `content-type` if `content_type` is not a
    /// valid header value.
    pub fn body<F>(mut self, content_type: &str, make: F) -> Result<Self, InvalidHeader>
    where
        F: Fn(&CircuitOpenError) -> Vec<u8> + Send + Sync + 'static,
    {
        if !valid_value(content_type) {
            return Err(InvalidHeader {
                name: "content-type".to_owned(),
            });
        }
        self.body = Some((content_type.to_owned(), Arc::new(make)));
        Ok(self)
    }

    /// Adds a header to every rejection (`Retry-After` and `Content-Type`
    /// are the response's own and cannot be added).
    ///
    /// # Errors
    ///
    /// [`InvalidHeader`] naming the header if the name or value is not
    /// valid HTTP, or is one of the two.
    pub fn header(mut self, name: &str, value: &str) -> Result<Self, InvalidHeader> {
        let lower = name.to_ascii_lowercase();
        if !valid_name(&lower)
            || !valid_value(value)
            || lower == "retry-after"
            || lower == "content-type"
        {
            return Err(InvalidHeader {
                name: name.to_owned(),
            });
        }
        self.headers.push((lower, value.to_owned()));
        Ok(self)
    }

    /// Makes this the shape of every adapter's rejection responses in the
    /// process, replacing the one installed before.
    pub fn install(self) {
        let mut installed = INSTALLED.write().unwrap_or_else(PoisonError::into_inner);
        *installed = Some(Arc::new(self));
    }

    /// The installed shape (the default when none was installed).
    #[must_use]
    pub fn installed() -> Arc<RejectionResponse> {
        let installed = INSTALLED.read().unwrap_or_else(PoisonError::into_inner);
        installed
            .clone()
            .unwrap_or_else(|| Arc::new(RejectionResponse::new()))
    }

    /// `open` in this shape.
    #[must_use]
    pub fn render(&self, open: &CircuitOpenError) -> RenderedRejection<'_> {
        let (content_type, body) = match &self.body {
            Some((content_type, make)) => (content_type.as_str(), make(open)),
            None => {
                let mut json = String::from(r#"{"detail":""#);
                if self.include_name {
                    json.push_str("Circuit '");
                    push_json_escaped(&mut json, open.breaker_name());
                    json.push_str("' is open");
                } else {
                    push_json_escaped(&mut json, self.detail.as_deref().unwrap_or(DEFAULT_DETAIL));
                }
                json.push_str(r#""}"#);
                ("application/json", json.into_bytes())
            }
        };
        RenderedRejection {
            content_type,
            body,
            retry_after_secs: open.retry_after_secs(),
            headers: self
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect(),
        }
    }
}

impl fmt::Debug for RejectionResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RejectionResponse")
            .field("custom_body", &self.body.as_ref().map(|(ct, _)| ct))
            .field("detail", &self.detail)
            .field("include_breaker_name", &self.include_name)
            .field("headers", &self.headers)
            .finish()
    }
}

/// A header [`RejectionResponse::header`] (or the content type of
/// [`RejectionResponse::body`]) refused.
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

/// A header name as HTTP defines it (RFC 9110 `token`), here lowercase.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value the `http` crate accepts from a string: no control
/// characters but tabs, no DEL.
fn valid_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| (b >= b' ' && b != 0x7f) || b == b'\t')
}

/// Appends `text` as the inside of a JSON string: quotes, backslashes and
/// control characters escaped (as `serde_json` writes them), the rest as
/// it is.
fn push_json_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => {
                use fmt::Write as _;
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CircuitBreaker;

    fn open(name: &str) -> CircuitOpenError {
        let b = CircuitBreaker::new(name);
        b.force_open();
        b.acquire().unwrap_err()
    }

    #[test]
    fn the_default_body_names_nothing_internal() {
        let r = RejectionResponse::new();
        let rendered = r.render(&open("10.0.0.1:5432"));
        assert_eq!(
            rendered.body,
            br#"{"detail":"Service temporarily unavailable"}"#
        );
        assert_eq!(rendered.content_type, "application/json");
        assert!(rendered.headers.is_empty());
    }

    #[test]
    fn details_and_names_are_escaped_as_json() {
        let r = RejectionResponse::new().detail("say \"no\"\\\n\u{1}é");
        assert_eq!(
            String::from_utf8(r.render(&open("x")).body).unwrap(),
            r#"{"detail":"say \"no\"\\\n\u0001é"}"#
        );
        let r = RejectionResponse::new().include_breaker_name();
        assert_eq!(
            String::from_utf8(r.render(&open("a\"b")).body).unwrap(),
            r#"{"detail":"Circuit 'a\"b' is open"}"#
        );
    }

    #[test]
    fn headers_are_checked_and_lowercased() {
        let r = RejectionResponse::new()
            .header("Cache-Control", "no-store")
            .unwrap();
        assert_eq!(
            r.render(&open("x")).headers,
            [("cache-control", "no-store")]
        );
        for (name, value) in [
            ("bad header", "x"),
            ("", "x"),
            ("x-ok", "line\nbreak"),
            ("Retry-After", "5"),
            ("content-type", "text/plain"),
        ] {
            let err = RejectionResponse::new().header(name, value).unwrap_err();
            assert_eq!(err.name, name);
        }
        assert!(
            RejectionResponse::new()
                .body("text/\u{7f}", |_| Vec::new())
                .is_err()
        );
    }

    #[test]
    fn a_custom_body_wins_over_the_json_detail() {
        let r = RejectionResponse::new()
            .body("text/plain", |_| b"busy".to_vec())
            .unwrap()
            .detail("later");
        let rendered = r.render(&open("x"));
        assert_eq!(
            (rendered.content_type, &rendered.body[..]),
            ("text/plain", &b"busy"[..])
        );
    }

    #[test]
    fn retry_after_is_the_estimate_in_whole_seconds() {
        let b = CircuitBreaker::builder("x")
            .config(
                crate::Config::builder()
                    .minimum_number_of_calls(1)
                    .wait_duration_in_open(std::time::Duration::from_millis(1500))
                    .build()
                    .unwrap(),
            )
            .clock(crate::ManualClock::new())
            .build()
            .unwrap();
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
        let open = b.acquire().unwrap_err();
        assert_eq!(
            RejectionResponse::new().render(&open).retry_after_secs,
            Some(2)
        );
    }
}
