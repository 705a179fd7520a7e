//! [`GrpcStatusClassifier`]: what a gRPC exchange says about the server.

use std::error::Error;
use std::fmt;

use http::HeaderMap;
use interlock::Verdict;
use interlock::http::HttpStatusClassifier;
use tonic::Code;

/// The gRPC codes that count as failures by default: the server (or the
/// way to it) is down, overloaded, too slow or broken.
pub const DEFAULT_FAILURE_CODES: [Code; 6] = [
    Code::Unavailable,
    Code::DeadlineExceeded,
    Code::ResourceExhausted,
    Code::Internal,
    Code::Unknown,
    Code::DataLoss,
];

/// The failure policy of [`GrpcCircuitBreakerLayer`](crate::GrpcCircuitBreakerLayer).
///
/// gRPC reports its errors as an HTTP `200 OK` with a `grpc-status`,
/// either in the response headers (a *trailers-only* response, what a
/// server sends for an error before any message) or in the trailers after
/// the messages. The verdict follows the code:
///
/// - a code in the failure set (by default [`DEFAULT_FAILURE_CODES`]:
///   `UNAVAILABLE`, `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `INTERNAL`,
///   `UNKNOWN`, `DATA_LOSS`) is a [`Failure`](Verdict::Failure);
/// - any other code is a [`Success`](Verdict::Success): `OK`, and the
///   caller's own mistakes (`INVALID_ARGUMENT`, `NOT_FOUND`,
///   `ALREADY_EXISTS`, `PERMISSION_DENIED`, `UNAUTHENTICATED`,
///   `FAILED_PRECONDITION`, `OUT_OF_RANGE`, `UNIMPLEMENTED`, ...), which no
///   open circuit can fix;
/// - a response that is not `200 OK` (a proxy's 503) gets the code gRPC
///   maps its HTTP status to (429, 502, 503 and 504 are `UNAVAILABLE`, 400
///   `INTERNAL`, 404 `UNIMPLEMENTED`, others `UNKNOWN`), then as above;
/// - a stream that ends without any `grpc-status` is `UNKNOWN`, as tonic
///   reports it;
/// - a transport error (no response) goes through an
///   [`HttpStatusClassifier`]'s error rules: a failure, unless excluded or
///   inconclusive (a full bulkhead).
///
/// ```
/// use interlock::Verdict;
/// use interlock_tonic::GrpcStatusClassifier;
/// use tonic::Code;
///
/// let classifier = GrpcStatusClassifier::new();
/// assert_eq!(classifier.classify_code(Code::Unavailable), Verdict::Failure);
/// assert_eq!(classifier.classify_code(Code::InvalidArgument), Verdict::Success);
///
/// // Also trip on ABORTED, and forgive RESOURCE_EXHAUSTED (a per-caller quota).
/// let classifier = GrpcStatusClassifier::new()
///     .failure_codes([Code::Unavailable, Code::DeadlineExceeded, Code::Internal, Code::Aborted]);
/// assert_eq!(classifier.classify_code(Code::Aborted), Verdict::Failure);
/// assert_eq!(classifier.classify_code(Code::ResourceExhausted), Verdict::Success);
/// ```
#[derive(Clone)]
pub struct GrpcStatusClassifier {
    /// One bit per code 0..=16.
    failures: u32,
    errors: HttpStatusClassifier,
}

impl Default for GrpcStatusClassifier {
    fn default() -> Self {
        GrpcStatusClassifier::new()
    }
}

impl GrpcStatusClassifier {
    /// The default policy: [`DEFAULT_FAILURE_CODES`] are failures, and
    /// transport errors follow [`HttpStatusClassifier::new`].
    #[must_use]
    pub fn new() -> Self {
        GrpcStatusClassifier {
            failures: 0,
            errors: HttpStatusClassifier::new(),
        }
        .failure_codes(DEFAULT_FAILURE_CODES)
    }

    /// Replaces the failure codes.
    #[must_use]
    pub fn failure_codes(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        self.failures = 0;
        for code in codes {
            self.failures |= 1 << code_bit(code);
        }
        self
    }

    /// The rules for transport errors (exclusions, inconclusive errors);
    /// its statuses are not used.
    #[must_use]
    pub fn errors(mut self, errors: HttpStatusClassifier) -> Self {
        self.errors = errors;
        self
    }

    /// The failure codes, in code order.
    #[must_use]
    pub fn codes(&self) -> Vec<Code> {
        (0..=16)
            .map(Code::from_i32)
            .filter(|&c| self.is_failure_code(c))
            .collect()
    }

    /// Whether `code` is in the failure set.
    #[must_use]
    pub fn is_failure_code(&self, code: Code) -> bool {
        self.failures & (1 << code_bit(code)) != 0
    }

    /// The verdict on a call that ended with `code`.
    #[must_use]
    pub fn classify_code(&self, code: Code) -> Verdict {
        if self.is_failure_code(code) {
            Verdict::Failure
        } else {
            Verdict::Success
        }
    }

    /// The `grpc-status` in `headers` (response headers or trailers), if
    /// there is one; an unreadable value is `UNKNOWN`.
    #[must_use]
    pub fn status_code(headers: &HeaderMap) -> Option<Code> {
        headers
            .get("grpc-status")
            .map(|value| Code::from_bytes(value.as_bytes()))
    }

    /// The code gRPC gives a response whose HTTP status is `status` and
    /// that carries no `grpc-status` (the gRPC HTTP-to-status mapping).
    #[must_use]
    pub fn code_of_http_status(status: http::StatusCode) -> Code {
        match status.as_u16() {
            200 => Code::Unknown,
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }

    /// The verdict on a call that ended in `error` (no response).
    #[must_use]
    pub fn classify_error(&self, error: &(dyn Error + 'static)) -> Verdict {
        self.errors.classify_error(error)
    }
}

/// `Code` as a bit index; codes outside 0..=16 do not exist (tonic maps
/// them to `UNKNOWN`).
fn code_bit(code: Code) -> u32 {
    // `Code` is a fieldless enum with the values 0..=16.
    (code as i32).clamp(0, 16).unsigned_abs()
}

/// The gRPC policy as a response classifier of the core's one-breaker
/// layer, [`interlock::tower::CircuitBreakerLayer`]. That layer sees the
/// response *headers* only, so it judges trailers-only responses (a
/// `grpc-status` in the headers, what servers send for errors) and non-200
/// answers; a status in the trailers is invisible to it (a success).
/// [`GrpcCircuitBreakerLayer`](crate::GrpcCircuitBreakerLayer) reads the
/// trailers too.
impl<B> interlock::tower::ClassifyResponse<http::Response<B>> for GrpcStatusClassifier {
    fn classify_response(&self, response: &http::Response<B>) -> Verdict {
        if response.status() != http::StatusCode::OK {
            return self.classify_code(Self::code_of_http_status(response.status()));
        }
        match Self::status_code(response.headers()) {
            Some(code) => self.classify_code(code),
            None => Verdict::Success,
        }
    }

    fn describe(&self, response: &http::Response<B>) -> String {
        let code = Self::status_code(response.headers())
            .unwrap_or_else(|| Self::code_of_http_status(response.status()));
        describe(code)
    }
}

/// The last-failure text of a call that ended with `code`.
pub(crate) fn describe(code: Code) -> String {
    format!("grpc-status {} ({code:?})", code as i32)
}

impl fmt::Debug for GrpcStatusClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcStatusClassifier")
            .field("failure_codes", &self.codes())
            .field("errors", &self.errors)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_codes_table() {
        let c = GrpcStatusClassifier::new();
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::ResourceExhausted,
            Code::Internal,
            Code::Unknown,
            Code::DataLoss,
        ] {
            assert_eq!(c.classify_code(code), Verdict::Failure, "{code:?}");
        }
        for code in [
            Code::Ok,
            Code::Cancelled,
            Code::InvalidArgument,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Unauthenticated,
        ] {
            assert_eq!(c.classify_code(code), Verdict::Success, "{code:?}");
        }
        assert_eq!(c.codes().len(), 6);
    }

    #[test]
    fn http_statuses_map_as_grpc_does() {
        let code = GrpcStatusClassifier::code_of_http_status;
        assert_eq!(
            code(http::StatusCode::SERVICE_UNAVAILABLE),
            Code::Unavailable
        );
        assert_eq!(code(http::StatusCode::TOO_MANY_REQUESTS), Code::Unavailable);
        assert_eq!(code(http::StatusCode::NOT_FOUND), Code::Unimplemented);
        assert_eq!(code(http::StatusCode::BAD_REQUEST), Code::Internal);
        assert_eq!(code(http::StatusCode::IM_A_TEAPOT), Code::Unknown);
    }

    #[test]
    fn the_status_header_is_read_and_garbage_is_unknown() {
        let mut headers = HeaderMap::new();
        assert_eq!(GrpcStatusClassifier::status_code(&headers), None);
        headers.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(
            GrpcStatusClassifier::status_code(&headers),
            Some(Code::NotFound)
        );
        headers.insert("grpc-status", http::HeaderValue::from_static("x"));
        assert_eq!(
            GrpcStatusClassifier::status_code(&headers),
            Some(Code::Unknown)
        );
    }
}
