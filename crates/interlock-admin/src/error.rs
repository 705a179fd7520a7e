//! [`BuildError`]: an admin, feed or mount configuration that cannot work.

use std::error::Error;
use std::fmt;
use std::time::Duration;

/// An invalid [`AdminBuilder`](crate::AdminBuilder) or
/// [`EventFeedBuilder`](crate::EventFeedBuilder) setting, found by `build()`,
/// or a path [`Admin::mount`](crate::Admin::mount) cannot use.
///
/// ```
/// use interlock_admin::{Admin, BuildError};
///
/// let err = Admin::builder(interlock::Registry::new())
///     .bearer_token("two words")
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, BuildError::InvalidToken { .. }));
/// assert_eq!(
///     err.to_string(),
///     "invalid bearer token: only visible ASCII characters, no spaces"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The bearer token is empty or has characters an `Authorization`
    /// header cannot carry.
    #[non_exhaustive]
    InvalidToken {
        /// What is wrong with it (never the token itself).
        reason: &'static str,
    },
    /// The sample interval is outside 10 ms ..= 1 min.
    #[non_exhaustive]
    InvalidSampleInterval {
        /// The interval given.
        interval: Duration,
    },
    /// The history window is outside 1 s ..= 24 h.
    #[non_exhaustive]
    InvalidHistory {
        /// The window given.
        window: Duration,
    },
    /// [`Admin::mount`](crate::Admin::mount) was given a path axum cannot
    /// nest the routes under.
    #[non_exhaustive]
    InvalidMountPath {
        /// The path given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::InvalidToken { reason } => write!(f, "invalid bearer token: {reason}"),
            BuildError::InvalidSampleInterval { interval } => write!(
                f,
                "invalid sample interval: must be between 10ms and 60s, got {interval:?}"
            ),
            BuildError::InvalidHistory { window } => write!(
                f,
                "invalid history window: must be between 1s and 24h, got {window:?}"
            ),
            BuildError::InvalidMountPath { path, reason } => {
                write!(f, "invalid mount path {path:?}: {reason}")
            }
        }
    }
}

impl Error for BuildError {}
