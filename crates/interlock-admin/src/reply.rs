//! The dashboard's HTTP answers: JSON bodies, errors, the common security
//! headers and the bearer-token check. Below every route module.

use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, REFERRER_POLICY, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::auth::Token;

#[derive(Serialize)]
struct ErrorBody {
    error: &'static str,
}

pub(crate) fn with_common_headers(mut response: Response, content_type: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

pub(crate) fn json(status: StatusCode, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            let mut response =
                with_common_headers((status, bytes).into_response(), "application/json");
            response
                .headers_mut()
                .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Err(error) => {
            tracing::error!(target: "interlock_admin", %error, "could not encode a JSON answer");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

pub(crate) fn error(status: StatusCode, message: &'static str) -> Response {
    json(status, &ErrorBody { error: message })
}

/// Checks the bearer token of an operator request; the 401 to send if it
/// is missing or wrong (logged with the action and the name, never the
/// token).
pub(crate) fn refuse(
    token: Option<&Token>,
    headers: &HeaderMap,
    action: &'static str,
    name: Option<&str>,
) -> Option<Response> {
    let admitted = token.is_some_and(|token| token.admits(headers));
    if admitted {
        return None;
    }
    // The name is the client's: logged with Debug, so escaped.
    tracing::warn!(
        target: "interlock_admin",
        action,
        breaker = ?name.unwrap_or_default(),
        "operator action refused: missing or wrong bearer token"
    );
    let mut response = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"interlock\""),
    );
    Some(response)
}
