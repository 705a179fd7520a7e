//! Change notices: how a storage that can push tells a coordinator that a
//! breaker's shared state changed, so it need not wait for its next poll.

use std::fmt;
use std::sync::{Arc, Weak};

/// What a storage pushes to a coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice<'a> {
    /// A write to `name` was applied and left it at `version`.
    Changed {
        /// The breaker's name (decoded, as the breakers know it).
        name: &'a str,
        /// The version after the write.
        version: u64,
    },
    /// A write to `name` was applied and left its record as `state` (its
    /// version included): the coordinator adopts `state` at once, as it
    /// would a read's answer, with no storage call (a storage whose notices
    /// carry the whole record sends this rather than
    /// [`Changed`](Self::Changed)). The adoption runs on the delivering
    /// thread (it takes the breaker's lock briefly, and its listeners run
    /// there), so a storage delivers it outside its own operations, as a
    /// subscriber thread does.
    Written {
        /// The breaker's name.
        name: &'a str,
        /// The record after the write.
        state: super::SharedState,
    },
    /// Notices may have been lost (the subscription was just established or
    /// re-established): the coordinator polls every breaker now.
    Resync,
    /// The storage cannot send or receive change notices, for a reason
    /// that retrying will not fix soon (the server refuses `PUBLISH` or
    /// `SUBSCRIBE` to this user, say). Writes are not affected: a failed
    /// publish never fails the write it belongs to. The coordinator relies
    /// on polling alone and says so once (an
    /// [`Event::StorageNoticesUnavailable`](crate::Event::StorageNoticesUnavailable)
    /// to each of its breakers, and a log line).
    Unavailable {
        /// What the storage was told, for the event and the log.
        reason: &'a str,
    },
}

/// The handler behind a [`NoticeSink`].
pub type NoticeHandler = dyn Fn(Notice<'_>) + Send + Sync + 'static;

/// Where a storage delivers [`Notice`]s: handed to
/// [`Storage::subscribe`](super::Storage::subscribe) by the coordinator.
///
/// It holds its handler weakly, so a subscription never keeps a dropped
/// coordinator alive: once [`deliver`](Self::deliver) returns `false` the
/// storage should end the subscription.
///
/// ```
/// use interlock::storage::{Notice, NoticeHandler, NoticeSink};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let handler: Arc<NoticeHandler> = Arc::new(move |n: Notice<'_>| {
///     if let Notice::Changed { name, version } = n {
///         log.lock().unwrap().push((name.to_owned(), version));
///     }
/// });
/// let sink = NoticeSink::new(&handler);
/// assert!(sink.deliver(Notice::Changed { name: "db", version: 3 }));
/// assert_eq!(*seen.lock().unwrap(), [("db".to_owned(), 3)]);
///
/// drop(handler); // the coordinator is gone
/// assert!(!sink.is_alive());
/// assert!(!sink.deliver(Notice::Resync));
/// ```
#[derive(Clone)]
pub struct NoticeSink {
    handler: Weak<NoticeHandler>,
}

impl NoticeSink {
    /// A sink delivering to `handler` for as long as it lives.
    #[must_use]
    pub fn new(handler: &Arc<NoticeHandler>) -> Self {
        NoticeSink {
            handler: Arc::downgrade(handler),
        }
    }

    /// Hands `notice` to the coordinator; `false` when it is gone.
    pub fn deliver(&self, notice: Notice<'_>) -> bool {
        match self.handler.upgrade() {
            Some(handler) => {
                handler(notice);
                true
            }
            None => false,
        }
    }

    /// Whether the coordinator still listens.
    #[must_use]
    pub fn is_alive(&self) -> bool {
        self.handler.strong_count() > 0
    }
}

impl fmt::Debug for NoticeSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NoticeSink")
            .field("alive", &self.is_alive())
            .finish()
    }
}
