//! The operator token: validated once, compared in constant time.

use std::fmt;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use subtle::ConstantTimeEq;

use crate::error::BuildError;

/// A validated bearer token. `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct Token(Box<[u8]>);

impl Token {
    /// Checks that `token` can travel in an `Authorization: Bearer` header.
    pub(crate) fn new(token: &str) -> Result<Token, BuildError> {
        if token.is_empty() {
            return Err(BuildError::InvalidToken {
                reason: "it is empty",
            });
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BuildError::InvalidToken {
                reason: "only visible ASCII characters, no spaces",
            });
        }
        Ok(Token(token.as_bytes().into()))
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`.
    ///
    /// The comparison of the token's bytes takes the same time wherever
    /// they differ; only the length of a wrong token shows in the timing.
    pub(crate) fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(presented) = bearer(headers) else {
            return false;
        };
        bool::from(presented.ct_eq(&self.0))
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// The credentials of the one `Authorization: Bearer ...` header, if any.
/// Several `Authorization` headers are refused as ambiguous.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let value = value.as_bytes();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let credentials = rest.strip_prefix(b" ")?.trim_ascii();
    (!credentials.is_empty()).then_some(credentials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn admits_only_the_exact_token_with_the_bearer_scheme() {
        let token = Token::new("s3cret-token").unwrap();
        assert!(token.admits(&headers(&["Bearer s3cret-token"])));
        assert!(token.admits(&headers(&["bearer s3cret-token"])));
        assert!(token.admits(&headers(&["BEARER  s3cret-token "])));
        for wrong in [
            "Bearer s3cret-toke",
            "Bearer s3cret-token2",
            "Bearer S3CRET-TOKEN",
            "Bearer ",
            "Bearer",
            "Basic s3cret-token",
            "Bearers3cret-token",
            "s3cret-token",
            "",
        ] {
            assert!(!token.admits(&headers(&[wrong])), "{wrong:?}");
        }
        assert!(!token.admits(&HeaderMap::new()));
        assert!(
            !token.admits(&headers(&["Bearer s3cret-token", "Bearer s3cret-token"])),
            "two Authorization headers are ambiguous"
        );
    }

    #[test]
    fn rejects_tokens_a_header_cannot_carry() {
        for bad in ["", "two words", "tab\there", "caf\u{e9}", "new\nline"] {
            assert!(
                matches!(Token::new(bad), Err(BuildError::InvalidToken { .. })),
                "{bad:?}"
            );
        }
        assert!(Token::new("~!@#$%^&*()_+-=[]{}|;:',.<>/?").is_ok());
    }

    #[test]
    fn debug_hides_the_token() {
        let token = Token::new("hunter2").unwrap();
        assert!(!format!("{token:?}").contains("hunter2"));
    }
}
