//! The last failure (R11.3), kept under the breaker's lock.
//!
//! A failing call's error is shown (its `Display` run, outside any lock)
//! and then compared, under the lock the call's outcome is recorded under,
//! with a copy of the breaker's current last failure ([`KeptFailure`]); only
//! a different error touches the identity's versioned log (and its own
//! mutex). Every write of the last failure holds the breaker's lock, so the
//! copy is always exactly the log's current entry.

use super::*;

/// A failed call's error, as the breaker keeps it.
#[derive(Clone, Copy)]
pub(crate) struct ErrorText<'a> {
    pub(crate) display: &'a dyn fmt::Display,
    pub(crate) type_name: &'static str,
}

impl<'a> ErrorText<'a> {
    /// An error known only by its `Display`.
    #[inline]
    pub(crate) fn shown(display: &'a dyn fmt::Display, type_name: &'static str) -> Self {
        ErrorText { display, type_name }
    }

    /// A call's own error.
    #[inline]
    pub(crate) fn of<E: fmt::Display>(error: &'a E) -> Self {
        Self::shown(error, std::any::type_name::<E>())
    }
}

/// What the lock holder compares a failure with: the error's type name
/// and `Display` output.
#[derive(Clone, Copy)]
pub(super) struct Keep<'a> {
    type_name: &'static str,
    message: &'a str,
}

/// The breaker's current last failure, under its lock: the identity's
/// current last failure (its log's newest entry).
#[derive(Debug, Default)]
pub(crate) struct KeptFailure {
    last: Option<LastFailure>,
}

impl Inner {
    /// Under the lock: makes `keep` the last failure, unless it already is
    /// (the same error repeating during an outage allocates nothing and
    /// takes no other lock).
    #[inline]
    pub(super) fn keep_failure(&self, kept: &mut KeptFailure, keep: Keep<'_>) {
        let Keep { type_name, message } = keep;
        if kept
            .last
            .as_ref()
            .is_some_and(|f| f.same_as(type_name, message))
        {
            return;
        }
        self.set_last_failure(kept, Some(LastFailure::new(type_name, message.to_owned())));
    }

    #[cold]
    #[inline(never)]
    fn set_last_failure(&self, kept: &mut KeptFailure, next: Option<LastFailure>) {
        self.identity.publish_failure(next.clone());
        kept.last = next;
    }

    /// Clears the last failure (`reset()`), under the lock.
    pub(super) fn clear_last_failure(&self) {
        let mut core = self.core();
        if core.failure.last.is_some() {
            self.set_last_failure(&mut core.failure, None);
        }
    }

    /// Runs `record` with what the lock holder compares `text` with: its
    /// `Display` output, shown into a reused buffer (no allocation per
    /// failure during an outage). The error's `Display` is user code, run
    /// outside any lock: if it panics, the message is [`DISPLAY_PANICKED`]
    /// and the panic is returned, for the caller to resume once the call is
    /// settled.
    #[inline]
    pub(super) fn with_kept<R>(
        &self,
        text: ErrorText<'_>,
        record: impl FnOnce(Keep<'_>) -> R,
    ) -> (R, Option<Box<dyn Any + Send>>) {
        shown(text, record)
    }
}

fn shown<R>(
    text: ErrorText<'_>,
    record: impl FnOnce(Keep<'_>) -> R,
) -> (R, Option<Box<dyn Any + Send>>) {
    thread_local! {
        static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    let mut panicked = None;
    let mut show = |buf: &mut String| {
        buf.clear();
        let err = text.display;
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| write!(buf, "{err}"))) {
            buf.clear();
            buf.push_str(DISPLAY_PANICKED);
            panicked = Some(payload);
        }
    };
    let type_name = text.type_name;
    let r = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buf) => {
            show(&mut buf);
            let r = record(Keep {
                type_name,
                message: &buf,
            });
            if buf.capacity() > 4096 {
                *buf = String::new();
            }
            r
        }
        // Borrowed already: a `Display` that fails a call through a
        // breaker. A fresh buffer, then.
        Err(_) => {
            let mut message = String::new();
            show(&mut message);
            record(Keep {
                type_name,
                message: &message,
            })
        }
    });
    (r, panicked)
}
