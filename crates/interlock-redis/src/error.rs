//! [`Error`]: why a Redis storage operation did not answer.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

/// Why a storage operation failed: Redis could not be reached or answered
/// with an error, or the breaker's hash holds data the scripts refuse.
///
/// A coordinated breaker never shows it to a call: any storage error makes
/// it degrade to its local state and report
/// [`Event::StorageDegraded`](interlock::Event::StorageDegraded) with this
/// error (as a [`StorageError`](interlock::storage::StorageError), from
/// which it can be downcast).
///
/// ```
/// use interlock_redis::Error;
///
/// fn explain(e: &interlock::storage::StorageError) -> String {
///     match e.downcast_ref::<Error>() {
///         Some(e) if e.is_corrupt() => format!("bad data in Redis: {e}"),
///         Some(e) => format!("Redis unavailable: {e}"),
///         None => e.to_string(),
///     }
/// }
/// # let _ = explain;
/// ```
#[derive(Debug)]
pub struct Error {
    operation: &'static str,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The client's error (I/O, timeout, server error other than ours),
    /// and, when the server refused the operation, its error code and
    /// message (without the script location Redis appends).
    Redis(redis::RedisError, Option<Refusal>),
    /// The scripts refused the hash, or the reply had the wrong shape.
    Corrupt(Cow<'static, str>),
}

/// A server's refusal: `WRONGTYPE Operation against a key ...`.
#[derive(Debug)]
struct Refusal {
    code: String,
    message: String,
}

impl Refusal {
    /// The refusal in `error`, if the server sent one.
    fn of(error: &redis::RedisError) -> Option<Refusal> {
        let detail = error.detail().unwrap_or_default();
        let (code, message) = match error.code() {
            Some(code) => (code.to_owned(), detail.to_owned()),
            // A batched poll's per-key error: `CODE message` as text.
            None => {
                let (code, rest) = detail.split_once(' ')?;
                if code.is_empty() || !code.bytes().all(|b| b.is_ascii_uppercase()) {
                    return None;
                }
                (code.to_owned(), rest.to_owned())
            }
        };
        // Redis appends where in the script the command failed.
        let message = message.split(" script: ").next().unwrap_or(&message);
        Some(Refusal {
            code,
            message: bounded(message.trim_end()),
        })
    }
}

/// The marker our scripts put in front of their error messages.
const SCRIPT_MARKER: &str = "interlock: ";

impl Error {
    pub(crate) fn redis(operation: &'static str, error: redis::RedisError) -> Self {
        let text = error.to_string();
        match text.find(SCRIPT_MARKER) {
            Some(at) => {
                // Redis appends where the script failed: not worth a log line.
                let detail = &text[at + SCRIPT_MARKER.len()..];
                let detail = detail.split(" script: ").next().unwrap_or(detail);
                Error {
                    operation,
                    kind: Kind::Corrupt(Cow::Owned(bounded(detail.trim_end()))),
                }
            }
            None => {
                let refusal = Refusal::of(&error);
                Error {
                    operation,
                    kind: Kind::Redis(error, refusal),
                }
            }
        }
    }

    pub(crate) fn server(operation: &'static str, error: redis::ServerError) -> Self {
        Error::redis(operation, redis::RedisError::from(error))
    }

    /// The error a batched `poll` reported for one of its keys: a message
    /// of our scripts (a corrupt hash) or of Redis (`WRONGTYPE ...`).
    pub(crate) fn script_item(operation: &'static str, message: &redis::Value) -> Self {
        let text = match message {
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            redis::Value::SimpleString(text) => text.clone(),
            _ => return Error::reply(operation, "an error item without a message"),
        };
        if text.contains(SCRIPT_MARKER) {
            return Error::redis(
                operation,
                redis::RedisError::from((redis::ErrorKind::Extension, "script error", text)),
            );
        }
        // `WRONGTYPE Operation against a key ...`: keep the code in front.
        let error =
            redis::RedisError::from((redis::ErrorKind::Extension, "server error", bounded(&text)));
        let refusal = Refusal::of(&error);
        Error {
            operation,
            kind: Kind::Redis(error, refusal),
        }
    }

    pub(crate) fn reply(operation: &'static str, detail: impl Into<Cow<'static, str>>) -> Self {
        let detail = detail.into();
        Error {
            operation,
            kind: Kind::Corrupt(Cow::Owned(format!("unexpected script reply: {detail}"))),
        }
    }

    /// The storage operation that failed: `read`, `trip_open`,
    /// `begin_half_open_if_elapsed`, `lease_probe`, `record_probe`,
    /// `close`, or `poll` when a batched poll failed as a whole (a batched
    /// poll's error for one breaker names that breaker's operation, `read`
    /// or `begin_half_open_if_elapsed`).
    #[must_use]
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// Whether the breaker's hash holds data the scripts refuse (a field
    /// missing, not a number, out of range, an unknown state or schema
    /// marker) or a script replied in an unexpected shape, as opposed to
    /// Redis being unreachable or failing.
    #[must_use]
    pub fn is_corrupt(&self) -> bool {
        matches!(self.kind, Kind::Corrupt(_))
    }

    /// Whether Redis Cluster refused a script over keys of several slots.
    pub(crate) fn is_cross_slot(&self) -> bool {
        self.redis_error().is_some_and(|e| {
            e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot)
        })
    }

    /// The client's error, when the failure came from the `redis` crate
    /// (I/O, timeout, `WRONGTYPE`, ...).
    #[must_use]
    pub fn redis_error(&self) -> Option<&redis::RedisError> {
        match &self.kind {
            Kind::Redis(e, _) => Some(e),
            Kind::Corrupt(_) => None,
        }
    }

    /// The server's error code when Redis refused the operation
    /// (`WRONGTYPE` for a key of another type, `NOPERM` for an ACL
    /// refusal, ...), as opposed to not answering.
    ///
    /// ```
    /// fn explain(e: &interlock_redis::Error) -> &'static str {
    ///     match e.server_code() {
    ///         Some("WRONGTYPE") => "the key holds something other than a breaker's hash",
    ///         Some("NOPERM") => "the user may not do this (ACLs)",
    ///         Some(_) => "Redis refused the operation",
    ///         None => "Redis did not answer, or the data was refused",
    ///     }
    /// }
    /// # let _ = explain;
    /// ```
    #[must_use]
    pub fn server_code(&self) -> Option<&str> {
        match &self.kind {
            Kind::Redis(_, Some(refusal)) => Some(&refusal.code),
            _ => None,
        }
    }
}

/// At most 200 characters of a server message: it may echo stored data.
fn bounded(text: &str) -> String {
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// What kind of failure a client error is, in a few words: the summary an
/// event or a log line shows before the client's own message (the source).
fn summary(error: &redis::RedisError) -> String {
    if error.is_timeout() {
        "timed out".to_owned()
    } else if error.is_connection_refusal() {
        "connection refused".to_owned()
    } else if error.is_connection_dropped() {
        "connection lost".to_owned()
    } else if error.is_io_error() {
        "I/O error".to_owned()
    } else if let Some(code) = error.code() {
        format!("server error {code}")
    } else {
        "client error".to_owned()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Redis(_, Some(r)) => write!(
                f,
                "redis storage: {} refused by the server: {} {}",
                self.operation, r.code, r.message
            ),
            Kind::Redis(e, None) => {
                write!(
                    f,
                    "redis storage: {} failed ({})",
                    self.operation,
                    summary(e)
                )
            }
            Kind::Corrupt(detail) => {
                write!(f, "redis storage: {} refused: {detail}", self.operation)
            }
        }
    }
}

impl StdError for Error {
    /// The client's error for a failure to talk to Redis; none when the
    /// server refused the operation (the message says it all) or the data
    /// was refused.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match &self.kind {
            Kind::Redis(e, None) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_operation_and_source_is_the_client_error() {
        let io = redis::RedisError::from(std::io::Error::other("refused"));
        let e = Error::redis("lease_probe", io);
        assert_eq!(
            e.to_string(),
            "redis storage: lease_probe failed (I/O error)"
        );
        let timeout = std::io::Error::from(std::io::ErrorKind::WouldBlock);
        let e = Error::redis("read", redis::RedisError::from(timeout));
        assert_eq!(e.to_string(), "redis storage: read failed (timed out)");
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = Error::redis("read", redis::RedisError::from(refused));
        assert_eq!(
            e.to_string(),
            "redis storage: read failed (connection refused)"
        );
        let server = redis::RedisError::from((
            redis::ErrorKind::Extension,
            "NOPERM",
            "no permissions".to_owned(),
        ));
        let e = Error::redis("read", server);
        assert!(
            e.to_string().starts_with("redis storage: read failed ("),
            "{e}"
        );
        assert!(e.source().is_some() && !e.is_corrupt() && e.redis_error().is_some());
        let e = Error::reply("read", "not an array");
        assert_eq!(
            e.to_string(),
            "redis storage: read refused: unexpected script reply: not an array"
        );
        assert!(e.is_corrupt() && e.source().is_none());
    }

    #[test]
    fn a_server_refusal_says_so_plainly_without_the_script_location() {
        let item = redis::Value::BulkString(
            b"WRONGTYPE Operation against a key holding the wrong kind of value script: \
              ead283e7afd13940e451723dcc24b38e059e1f31, on @user_script:24."
                .to_vec(),
        );
        let e = Error::script_item("read", &item);
        assert_eq!(
            e.to_string(),
            "redis storage: read refused by the server: WRONGTYPE Operation against a key \
             holding the wrong kind of value"
        );
        assert_eq!(e.server_code(), Some("WRONGTYPE"));
        assert!(e.source().is_none() && e.redis_error().is_some() && !e.is_corrupt());
        let io = Error::redis("read", redis::RedisError::from(std::io::Error::other("x")));
        assert_eq!(io.server_code(), None);
    }

    #[test]
    fn long_server_messages_are_cut() {
        assert_eq!(bounded("abc"), "abc");
        assert_eq!(bounded(&"x".repeat(500)).chars().count(), 201);
    }
}
