//! Breaker names for requests: the default host-and-port key, the
//! original's host-only key, custom resolvers and the checks every adapter
//! applies before any I/O.

use std::error::Error;
use std::fmt;

/// Maps a request to the name of the breaker that guards it.
///
/// Implemented by [`HostAndPort`] (the default) and by every closure
/// `Fn(&R) -> String`. The name is the registry key and the name in every
/// rejection and listener event, so derive it here rather than renaming
/// things in a listener.
///
/// ```
/// use interlock::http::{HostAndPort, NameResolver};
///
/// // One breaker per upstream service behind a gateway: the first path segment.
/// let by_service = |request: &http::Request<()>| {
///     let service = request.uri().path().split('/').nth(1).unwrap_or_default();
///     format!("gateway/{service}")
/// };
/// let request = http::Request::get("https://gateway.internal/billing/invoices").body(())?;
/// assert_eq!(by_service.resolve(&request).as_deref(), Some("gateway/billing"));
/// assert_eq!(HostAndPort.resolve(&request).as_deref(), Some("gateway.internal:443"));
/// # Ok::<(), http::Error>(())
/// ```
pub trait NameResolver<R>: Send + Sync + 'static {
    /// The breaker name for `request`, or `None` if it has no identity (it
    /// is then refused with [`NameError::MissingHost`]).
    fn resolve(&self, request: &R) -> Option<String>;
}

impl<R, F> NameResolver<R> for F
where
    F: Fn(&R) -> String + Send + Sync + 'static,
{
    fn resolve(&self, request: &R) -> Option<String> {
        Some(self(request))
    }
}

/// The default resolver: the request URI's host and port, lower-cased, as
/// `host:port` (the port is the scheme's default when the URI has none).
///
/// ```
/// use interlock::http::{HostAndPort, NameResolver};
///
/// let request = http::Request::get("http://API.example.com/v1/users").body(())?;
/// assert_eq!(HostAndPort.resolve(&request).as_deref(), Some("api.example.com:80"));
/// let relative = http::Request::get("/v1/users").body(())?;
/// assert_eq!(HostAndPort.resolve(&relative), None);
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostAndPort;

impl HostAndPort {
    /// The name for `uri`, `None` without a host.
    #[must_use]
    pub fn of_uri(uri: &http::Uri) -> Option<String> {
        let host = uri.host().filter(|h| !h.is_empty())?;
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("ws") => Some(80),
            Some(s) if s.eq_ignore_ascii_case("https") || s.eq_ignore_ascii_case("wss") => {
                Some(443)
            }
            _ => None,
        });
        Some(HostAndPort::join(host, port))
    }

    /// The name for `host` and `port`, for clients whose URL type is not
    /// [`http::Uri`]: `host:port`, lower-cased, or the host alone without
    /// a port.
    #[must_use]
    pub fn join(host: &str, port: Option<u16>) -> String {
        let host = host.to_ascii_lowercase();
        match port {
            Some(port) => format!("{host}:{port}"),
            None => host,
        }
    }
}

impl<B> NameResolver<http::Request<B>> for HostAndPort {
    fn resolve(&self, request: &http::Request<B>) -> Option<String> {
        HostAndPort::of_uri(request.uri())
    }
}

/// Breaker names as the Python original (interlock-cb 2.8) forms them in
/// its httpx, requests and aiohttp integrations: the request URI's host
/// alone, lower-cased, an IPv6 literal without its brackets, no port.
///
/// Give it to a client adapter whose breakers share state with Python
/// services (the `interlock-redis` interlock-cb layout), so both sides key
/// the same dependency with the same name: `api.example.com`, where
/// [`HostAndPort`] would say `api.example.com:443`. Requests to two ports
/// of one host then share one breaker, as in the original.
///
/// Where the original's integrations disagree among themselves, name those
/// hosts with a resolver of your own on one side: httpx keeps the case of
/// an IPv6 literal (`FE80::1`) and shows an internationalised host whose
/// first label is punycode in Unicode, while requests gives both as this
/// resolver does (lower case, punycode as sent).
///
/// ```
/// use interlock::http::{HostOnly, NameResolver};
///
/// let request = http::Request::get("https://API.Example.com:8443/v1").body(())?;
/// assert_eq!(HostOnly.resolve(&request).as_deref(), Some("api.example.com"));
/// let v6 = http::Request::get("http://[::1]:9/").body(())?;
/// assert_eq!(HostOnly.resolve(&v6).as_deref(), Some("::1"));
/// assert_eq!(HostOnly.resolve(&http::Request::get("/v1").body(())?), None);
/// # Ok::<(), http::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostOnly;

impl HostOnly {
    /// The name for `uri`, `None` without a host.
    #[must_use]
    pub fn of_uri(uri: &http::Uri) -> Option<String> {
        uri.host()
            .filter(|h| !h.is_empty())
            .map(HostOnly::normalize)
    }

    /// The name for a host as a client's URL type gives it (with or
    /// without the brackets of an IPv6 literal): lower-cased, brackets
    /// removed.
    ///
    /// ```
    /// use interlock::http::HostOnly;
    ///
    /// assert_eq!(HostOnly::normalize("[FE80::1]"), "fe80::1");
    /// assert_eq!(HostOnly::normalize("Example.COM."), "example.com.");
    /// ```
    #[must_use]
    pub fn normalize(host: &str) -> String {
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        host.to_ascii_lowercase()
    }
}

impl<B> NameResolver<http::Request<B>> for HostOnly {
    fn resolve(&self, request: &http::Request<B>) -> Option<String> {
        HostOnly::of_uri(request.uri())
    }
}

/// A request that cannot be mapped to a breaker, refused before any I/O.
///
/// ```
/// use interlock::http::NameError;
///
/// let err = NameError::check(Some("  ".into()), &"http://10.0.0.7/").unwrap_err();
/// assert_eq!(err.url(), "http://10.0.0.7/");
/// assert_eq!(
///     err.to_string(),
///     "the name resolver returned a blank circuit breaker name for 'http://10.0.0.7/'"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// The URL has no host, so there is no dependency to key a breaker on.
    MissingHost {
        /// The request URL.
        url: String,
    },
    /// The name resolver returned an empty or all-whitespace name.
    BlankName {
        /// The request URL.
        url: String,
    },
}

impl NameError {
    /// The URL of the refused request.
    #[must_use]
    pub fn url(&self) -> &str {
        match self {
            NameError::MissingHost { url } | NameError::BlankName { url } => url,
        }
    }

    /// Checks a resolved `name` for the request at `url`.
    ///
    /// # Errors
    ///
    /// [`NameError::MissingHost`] for `None`, [`NameError::BlankName`] for
    /// a name that is empty or only whitespace.
    pub fn check(name: Option<String>, url: &dyn fmt::Display) -> Result<String, NameError> {
        match name {
            None => Err(NameError::MissingHost {
                url: url.to_string(),
            }),
            Some(name) if name.trim().is_empty() => Err(NameError::BlankName {
                url: url.to_string(),
            }),
            Some(name) => Ok(name),
        }
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::MissingHost { url } => {
                write!(
                    f,
                    "request url '{url}' has no host to key a circuit breaker on"
                )
            }
            NameError::BlankName { url } => write!(
                f,
                "the name resolver returned a blank circuit breaker name for '{url}'"
            ),
        }
    }
}

impl Error for NameError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_table() {
        for (uri, name) in [
            ("http://a.example/x", Some("a.example:80")),
            ("https://a.example/x", Some("a.example:443")),
            ("HTTP://A.Example:8080/", Some("a.example:8080")),
            ("http://127.0.0.1:1/", Some("127.0.0.1:1")),
            ("http://[::1]:9/", Some("[::1]:9")),
            ("ftp://files.example/", Some("files.example")),
            ("/relative", None),
            ("*", None),
        ] {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(HostAndPort::of_uri(&uri).as_deref(), name, "{uri}");
        }
    }

    #[test]
    fn host_only_table() {
        for (uri, name) in [
            ("http://a.example/x", Some("a.example")),
            ("HTTPS://A.Example:8443/", Some("a.example")),
            ("http://127.0.0.1:1/", Some("127.0.0.1")),
            ("http://[::1]:9/", Some("::1")),
            ("http://[FE80::1]/", Some("fe80::1")),
            (
                "http://xn--fiqs8s.icom.museum/",
                Some("xn--fiqs8s.icom.museum"),
            ),
            ("http://example.com./", Some("example.com.")),
            ("ftp://files.example/", Some("files.example")),
            ("/relative", None),
            ("*", None),
        ] {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(HostOnly::of_uri(&uri).as_deref(), name, "{uri}");
        }
        assert_eq!(HostOnly::normalize("[unclosed"), "[unclosed");
    }

    #[test]
    fn check_refuses_missing_and_blank_names() {
        assert_eq!(
            NameError::check(None, &"/x"),
            Err(NameError::MissingHost { url: "/x".into() })
        );
        for blank in ["", " ", "\t\n"] {
            assert!(matches!(
                NameError::check(Some(blank.into()), &"u"),
                Err(NameError::BlankName { .. })
            ));
        }
        assert_eq!(NameError::check(Some(" a ".into()), &"u").unwrap(), " a ");
    }
}
