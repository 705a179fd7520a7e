//! [`CliError`]: every way a command can end other than success, each with
//! its own exit code.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code of a failure to reach or use Redis, or of any other error.
pub(crate) const EXIT_ERROR: u8 = 1;
/// Exit code of bad input: arguments, URL, prefix, name (also clap's).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code when the named breaker has no shared state.
pub(crate) const EXIT_ABSENT: u8 = 3;
/// Exit code when a fenced write lost to a newer state.
pub(crate) const EXIT_CHANGED: u8 = 4;
/// Exit code when a write was not confirmed.
pub(crate) const EXIT_DECLINED: u8 = 5;

/// Why a command did not succeed.
#[derive(Debug)]
pub(crate) enum CliError {
    /// The input is invalid (URL, prefix, name, options).
    Usage(String),
    /// No connection to Redis at `url` (already redacted): refused, timed
    /// out, or authentication failed.
    Unreachable {
        url: String,
        source: redis::RedisError,
    },
    /// Redis at `url` (redacted) did not answer within `timeout`: stopped,
    /// paused or overloaded.
    NoAnswer { url: String, timeout: Duration },
    /// The key of breaker `name` holds a value of another type.
    WrongType {
        name: String,
        key: String,
        kind: String,
    },
    /// A storage or inspection operation failed (Redis down mid-way, or a
    /// hash the storage refuses).
    Storage {
        context: String,
        source: Box<dyn StdError + Send + Sync + 'static>,
    },
    /// The breaker has no shared state under the prefix.
    Absent { name: String, prefix: String },
    /// A fenced write was fenced out, or the state was not the one the
    /// operator expected: nothing was written.
    Changed { message: String },
    /// The operator did not confirm a write: nothing was written.
    Declined(String),
    /// Writing the output failed.
    Output(io::Error),
}

impl CliError {
    /// The process exit code for this error.
    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::Unreachable { .. }
            | CliError::NoAnswer { .. }
            | CliError::WrongType { .. }
            | CliError::Storage { .. }
            | CliError::Output(_) => EXIT_ERROR,
            CliError::Absent { .. } => EXIT_ABSENT,
            CliError::Changed { .. } => EXIT_CHANGED,
            CliError::Declined(_) => EXIT_DECLINED,
        })
    }

    /// A storage error with what was being done.
    pub(crate) fn storage(
        context: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        CliError::Storage {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Whether this is a write to a closed pipe (`interlock list | head`),
    /// which ends the command quietly.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        matches!(self, CliError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// Whether `error` (a storage error) is Redis not answering in time.
pub(crate) fn is_timeout(error: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<interlock_redis::Error>() {
            return e.redis_error().is_some_and(redis::RedisError::is_timeout);
        }
        if let Some(e) = e.downcast_ref::<redis::RedisError>() {
            return e.is_timeout();
        }
        next = e.source();
    }
    false
}

/// `error` and each of its sources, joined by `: `, without repeating a
/// source whose text the previous one already ends with.
pub(crate) fn chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !part.is_empty() && !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(message) | CliError::Declined(message) => f.write_str(message),
            CliError::Unreachable { url, source } => {
                write!(f, "cannot connect to redis at {url}: {}", chain(source))
            }
            CliError::NoAnswer { url, timeout } => write!(
                f,
                "redis at {url} did not answer within {} (is it stopped, paused or overloaded? \
                 --timeout sets how long to wait)",
                crate::duration::human(*timeout)
            ),
            CliError::WrongType { name, key, kind } => write!(
                f,
                "the key of {name}, `{key}`, holds a {kind}, not a breaker's state (a hash): \
                 something other than interlock wrote it"
            ),
            CliError::Storage { context, source } => {
                write!(f, "{context}: {}", chain(source.as_ref()))
            }
            CliError::Absent { name, prefix } => write!(
                f,
                "no shared state for {name} under prefix `{prefix}` (it reads as CLOSED)"
            ),
            CliError::Changed { message } => f.write_str(message),
            CliError::Output(e) => write!(f, "cannot write the output: {e}"),
        }
    }
}

impl StdError for CliError {}

impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        CliError::Output(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("redis storage: read failed")
        }
    }

    impl StdError for Outer {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_chain_names_every_cause_once() {
        let e = Outer(io::Error::other("connection refused"));
        assert_eq!(chain(&e), "redis storage: read failed: connection refused");
    }

    #[test]
    fn each_kind_has_its_own_exit_code() {
        let codes = [
            CliError::Usage(String::new()).exit_code(),
            CliError::storage("x", "y").exit_code(),
            CliError::Absent {
                name: "n".into(),
                prefix: "p".into(),
            }
            .exit_code(),
            CliError::Changed {
                message: String::new(),
            }
            .exit_code(),
            CliError::Declined(String::new()).exit_code(),
        ];
        let want = [
            EXIT_USAGE,
            EXIT_ERROR,
            EXIT_ABSENT,
            EXIT_CHANGED,
            EXIT_DECLINED,
        ];
        for (code, want) in codes.iter().zip(want) {
            assert_eq!(*code, ExitCode::from(want));
        }
    }
}
