//! The last failure (R11.3), kept under the breaker's lock.
//!
//! A failing call's error is shown (its `Display` run, outside any lock)
//! and then compared, under the lock the call's outcome is recorded under,
//! with a copy of the breaker's current last failure ([`KeptFailure`]); only
//! a different error touches the identity's versioned log (and its own
//! mutex). Every write of the last failure holds the breaker's lock, so the
//! copy is always exactly the log's current entry.

use super::*;

/// A failed call's error, as the breaker keeps it: one pointer pair, so
/// that settlement passes it in two registers (a struct of the error's
/// `Display` and its type name was four words, passed through memory and
/// read back wider than it was written: a stall on every failure).
#[derive(Clone, Copy)]
pub(crate) struct ErrorText<'a>(&'a dyn Shown);

/// An error the breaker can keep: its text and its type's name.
pub(crate) trait Shown {
    /// Writes the error's `Display` output to `buf`.
    fn show(&self, buf: &mut String) -> fmt::Result;
    /// The error's type name (`std::any::type_name`).
    fn type_name(&self) -> &'static str;
}

impl<E: fmt::Display> Shown for E {
    fn show(&self, buf: &mut String) -> fmt::Result {
        write!(buf, "{self}")
    }

    fn type_name(&self) -> &'static str {
        std::any::type_name::<E>()
    }
}

/// An error known only as a `dyn Error`, with the type name its caller
/// gives (pipeline and tower layers).
pub(crate) struct Named<'a> {
    pub(crate) error: &'a (dyn Error + 'static),
    pub(crate) type_name: &'static str,
}

impl Shown for Named<'_> {
    fn show(&self, buf: &mut String) -> fmt::Result {
        write!(buf, "{}", self.error)
    }

    fn type_name(&self) -> &'static str {
        self.type_name
    }
}

impl<'a> ErrorText<'a> {
    /// An error that knows how to be kept.
    #[inline]
    pub(crate) fn shown(error: &'a dyn Shown) -> Self {
        ErrorText(error)
    }

    /// A call's own error.
    #[inline]
    pub(crate) fn of<E: fmt::Display>(error: &'a E) -> Self {
        ErrorText(error)
    }
}

/// What the lock holder compares a failure with: the error's type name
/// and `Display` output.
///
/// The text is the buffer itself, not a `&str` of it: taking the slice
/// right after the `Display` read the buffer's pointer and length in one
/// wide load of words it had just stored one by one (a stall on every
/// failure); the lock holder takes it under the lock, long after.
#[derive(Clone, Copy)]
pub(super) struct Keep<'a> {
    type_name: &'static str,
    message: &'a String,
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
    pub(super) fn keep_failure(&self, kept: &mut KeptFailure, keep: &Keep<'_>) {
        let &Keep { type_name, message } = keep;
        let message = message.as_str();
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
}

/// Runs `record` with what the lock holder compares `text` with: its
/// `Display` output, shown into a reused buffer (no allocation per
/// failure during an outage). The error's `Display` is user code, run
/// outside any lock: if it panics, the message is [`DISPLAY_PANICKED`]
/// and the panic is returned, for the caller to resume once the call is
/// settled.
#[inline]
pub(super) fn with_kept<R>(
    text: ErrorText<'_>,
    record: impl FnOnce(&Keep<'_>) -> R,
) -> (R, Option<Box<dyn Any + Send>>) {
    thread_local! {
        static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    let mut panicked = None;
    let mut show = |buf: &mut String| {
        buf.clear();
        let err = text.0;
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| err.show(buf))) {
            buf.clear();
            buf.push_str(DISPLAY_PANICKED);
            panicked = Some(payload);
        }
    };
    let type_name = text.0.type_name();
    let r = SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buf) => {
            show(&mut buf);
            let r = record(&Keep {
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
            record(&Keep {
                type_name,
                message: &message,
            })
        }
    });
    (r, panicked)
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::fmt;
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};

    use crate::{CallError, CircuitBreaker, Config, SlidingWindow, State, Verdict};

    #[derive(Debug)]
    struct Boom(String);
    impl fmt::Display for Boom {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl Error for Boom {}

    #[derive(Debug)]
    struct Other(&'static str);
    impl fmt::Display for Other {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl Error for Other {}

    /// A breaker that counts every call and never trips (R11.1).
    fn breaker(name: &str) -> CircuitBreaker {
        CircuitBreaker::builder(name)
            .config(
                Config::builder()
                    .sliding_window(SlidingWindow::count(10))
                    .build()
                    .unwrap(),
            )
            .initial_state(State::MetricsOnly)
            .build()
            .unwrap()
    }

    fn fail<E: Error + 'static>(b: &CircuitBreaker, e: E) {
        let r: Result<(), CallError<E>> = b.call(|| Err(e));
        assert!(matches!(r, Err(CallError::Inner(_))));
    }

    fn version(b: &CircuitBreaker) -> u64 {
        b.inner.identity.failure_version()
    }

    #[test]
    fn r11_3_a_classified_calls_error_judged_a_failure_is_kept_and_a_forgiven_one_is_not() {
        // `call_classified` and `call_async_classified` keep the error of a
        // call their classifier judged a failure; an error it forgave
        // (success) leaves the last failure as it was.
        let b = breaker("classified");
        let judge = |r: Result<&(), &Boom>| match r {
            Err(e) if e.0 == "forgiven" => Verdict::Success,
            Err(_) => Verdict::Failure,
            Ok(()) => Verdict::Success,
        };
        let _ = b.call_classified(|| Err::<(), _>(Boom("timed out".to_owned())), judge);
        let last = b.last_failure().unwrap();
        assert_eq!(last.message(), "timed out");
        assert!(last.type_name().ends_with("Boom"), "{}", last.type_name());
        let _ = b.call_classified(|| Err::<(), _>(Boom("forgiven".to_owned())), judge);
        assert_eq!(b.last_failure().unwrap().message(), "timed out");
        let fut = b.call_async_classified(
            || async { Err::<(), _>(Boom("async refusal".to_owned())) },
            judge,
        );
        // Nothing in it waits: one poll completes it.
        let mut fut = std::pin::pin!(fut);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        assert_eq!(b.last_failure().unwrap().message(), "async refusal");
    }

    #[test]
    fn r11_3_an_error_known_only_as_dyn_error_keeps_its_text_and_the_name_it_came_with() {
        // Pipeline and tower layers hand the breaker a `dyn Error` and the
        // type name of the error they hold (`Permit::finish_error`): the last
        // failure is that error's `Display` under that name, not the
        // wrapper's.
        let b = breaker("named");
        let error = Boom("disk full".to_owned());
        b.acquire()
            .unwrap()
            .finish_error(&error, "storage::WriteError");
        let last = b.last_failure().unwrap();
        assert_eq!(
            (last.message(), last.type_name()),
            ("disk full", "storage::WriteError")
        );
        // A call's own error keeps its own type's name.
        fail(&b, Other("refused"));
        let last = b.last_failure().unwrap();
        assert_eq!(last.message(), "refused");
        assert!(last.type_name().ends_with("Other"), "{}", last.type_name());
    }

    #[test]
    fn r11_3_a_repeated_error_keeps_its_version_and_any_other_replaces_it() {
        let b = breaker("svc");
        assert!(b.last_failure().is_none());
        fail(&b, Boom("refused".into()));
        let first = version(&b);
        for _ in 0..5 {
            fail(&b, Boom("refused".into()));
        }
        assert_eq!(version(&b), first, "a repeat makes no version");
        let last = b.last_failure().unwrap();
        assert_eq!(
            (last.message(), last.type_name()),
            ("refused", std::any::type_name::<Boom>())
        );

        // The same text from another type is another failure (R11.3: type and message).
        fail(&b, Other("refused"));
        assert_eq!(version(&b), first + 1);
        assert_eq!(
            b.last_failure().unwrap().type_name(),
            std::any::type_name::<Other>()
        );
        fail(&b, Boom("refused".into()));
        fail(&b, Boom("reset by peer".into()));
        assert_eq!(version(&b), first + 3);
        assert_eq!(b.last_failure().unwrap().message(), "reset by peer");

        // A success keeps it; reset clears it, and the next failure is kept again.
        assert!(b.call(|| Ok::<_, Boom>(())).is_ok());
        assert_eq!(b.last_failure().unwrap().message(), "reset by peer");
        b.reset();
        assert!(b.last_failure().is_none());
        fail(&b, Boom("reset by peer".into()));
        assert_eq!(b.last_failure().unwrap().message(), "reset by peer");
        assert_eq!(version(&b), first + 5, "clear, then the failure");
    }

    #[test]
    fn r11_3_a_stale_or_disabled_failure_is_kept_and_compared_the_same_way() {
        let b = breaker("svc");
        let permit = b.acquire().unwrap();
        b.force_open(); // the permit's generation is stale now (R8.8)
        permit.finish(&Err::<(), _>(Boom("late".into())));
        assert_eq!(b.last_failure().unwrap().message(), "late");
        b.disable();
        let v = version(&b);
        fail(&b, Boom("late".into()));
        assert_eq!(version(&b), v, "a repeat in DISABLED makes no version");
        fail(&b, Boom("later".into()));
        assert_eq!(b.last_failure().unwrap().message(), "later");
    }

    /// An error whose `Display` fails a call through another breaker: the
    /// scratch buffer is in use, so the inner failure is shown into a fresh one.
    #[derive(Debug)]
    struct Nested(CircuitBreaker);
    impl fmt::Display for Nested {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fail(&self.0, Boom("inner".into()));
            f.write_str("outer")
        }
    }
    impl Error for Nested {}

    #[test]
    fn r11_3_a_display_that_fails_another_call_keeps_both_failures_exact() {
        let (outer, inner) = (breaker("outer"), breaker("inner"));
        fail(&outer, Nested(inner.clone()));
        assert_eq!(outer.last_failure().unwrap().message(), "outer");
        assert_eq!(inner.last_failure().unwrap().message(), "inner");
        // And the buffer is whole again afterwards.
        fail(&outer, Boom("plain".into()));
        assert_eq!(outer.last_failure().unwrap().message(), "plain");
    }

    #[test]
    fn r11_3_concurrent_failures_and_readers_see_only_whole_failures() {
        const MESSAGES: [&str; 3] = ["a", "bb", "a much longer message than the others"];
        let b = breaker("svc");
        let done = Arc::new(AtomicBool::new(false));
        let start = Arc::new(Barrier::new(3));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (b, start) = (b.clone(), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..2_000 {
                        fail(&b, Boom(MESSAGES[(i + t) % MESSAGES.len()].into()));
                    }
                })
            })
            .collect();
        let reader = {
            let (b, start, done) = (b.clone(), Arc::clone(&start), Arc::clone(&done));
            std::thread::spawn(move || {
                start.wait();
                let mut seen = 0;
                while !done.load(Ordering::Acquire) {
                    if let Some(f) = b.last_failure() {
                        assert!(MESSAGES.contains(&f.message()), "{f:?}");
                        assert_eq!(f.type_name(), std::any::type_name::<Boom>());
                        seen += 1;
                    }
                }
                seen
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        reader.join().unwrap();
        // Quiet again: the last settled failure is the last failure, and a
        // rejection made now carries the same one.
        fail(&b, Boom("final".into()));
        assert_eq!(b.last_failure().unwrap().message(), "final");
        b.force_open();
        let open = b.acquire().unwrap_err();
        assert_eq!(open.last_failure(), b.last_failure());
    }
}
