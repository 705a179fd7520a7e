//! [`Permit`]: an admission held by code that is not a closure.

use std::error::Error;
use std::fmt;

use crate::classify::Verdict;
use crate::failure::Failure;

use super::kept::Named;
use super::{ErrorText, Inner, Ticket};
use std::sync::Arc;

/// The right to make one call through a breaker, from
/// [`CircuitBreaker::acquire`](crate::CircuitBreaker::acquire).
///
/// Record how the call went with one of the consuming methods. Dropping the
/// permit unrecorded means the call was cancelled: its probe slot (if any)
/// goes back and nothing is recorded or reported (R4.5).
///
/// ```
/// use interlock::{CircuitBreaker, Verdict};
///
/// let breaker = CircuitBreaker::new("cache");
///
/// let permit = breaker.acquire()?;
/// let result: Result<u32, std::io::Error> = Ok(7); // the work
/// permit.finish(&result); // classified like `call` would
///
/// breaker.acquire()?.record(Verdict::Inconclusive); // no local slot was free
/// drop(breaker.acquire()?); // cancelled: nothing recorded
/// assert_eq!(breaker.snapshot().total_calls, 2);
/// # Ok::<(), interlock::CircuitOpenError>(())
/// ```
#[must_use = "dropping a permit cancels the call; record its outcome instead"]
pub struct Permit {
    breaker: Holder,
    ticket: Ticket,
    settled: bool,
}

impl Permit {
    pub(super) fn new(inner: Arc<Inner>, ticket: Ticket) -> Self {
        Permit {
            breaker: Holder { inner },
            ticket,
            settled: false,
        }
    }

    /// Whether this call is a HALF_OPEN probe.
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.ticket.probe()
    }

    /// The name of the breaker that issued the permit.
    #[must_use]
    pub fn breaker_name(&self) -> &str {
        self.breaker.inner.name()
    }

    /// Whether the probe was leased from a shared HALF_OPEN (R15.2).
    #[must_use]
    pub fn is_leased(&self) -> bool {
        self.ticket.leased()
    }

    /// The call succeeded.
    pub fn success(self) {
        self.settle(Verdict::Success, None);
    }

    /// The call failed (no error value is kept as the last failure).
    pub fn failure(self) {
        self.settle(Verdict::Failure, None);
    }

    /// The call never reached the dependency (R9).
    pub fn inconclusive(self) {
        self.settle(Verdict::Inconclusive, None);
    }

    /// Records an explicit verdict.
    pub fn record(self, verdict: Verdict) {
        self.settle(verdict, None);
    }

    /// Records `result` as [`CircuitBreaker::call`](crate::CircuitBreaker::call) would: an error goes
    /// through the breaker's classifier and, if a failure, becomes the last
    /// failure.
    ///
    /// Any error type [`call`](crate::CircuitBreaker::call) accepts works here
    /// (`anyhow::Error`, a boxed error, ...). An error that carries another
    /// breaker's rejection is ignored, as if the permit were dropped.
    pub fn finish<T, E: Failure<K>, K>(self, result: &Result<T, E>) {
        match result {
            Ok(_) => self.success(),
            Err(e) => match self.breaker.inner.classify_error(e.as_error()) {
                Some(verdict) => self.settle(verdict, Some(ErrorText::of(e))),
                None => drop(self),
            },
        }
    }

    /// Records `verdict`, keeping `error` as the last failure if the verdict
    /// is not a success.
    pub fn finish_with<E: fmt::Display>(self, verdict: Verdict, error: &E) {
        self.settle(verdict, Some(ErrorText::of(error)));
    }

    /// Records a failed call from its error alone, through the breaker's
    /// classifier (for pipeline and tower layers, whose error is a `dyn`).
    pub(crate) fn finish_error(self, error: &(dyn Error + 'static), type_name: &'static str) {
        match self.breaker.inner.classify_error(error) {
            Some(verdict) => {
                let named = Named { error, type_name };
                self.settle(verdict, Some(ErrorText::shown(&named)));
            }
            // Another breaker's rejection: ignored, the call is cancelled.
            None => drop(self),
        }
    }

    fn settle(mut self, verdict: Verdict, error: Option<ErrorText<'_>>) {
        self.settled = true;
        self.breaker.inner.settle(self.ticket, verdict, error);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.inner.release(self.ticket);
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.breaker.inner.name())
            .field("generation", &self.ticket.generation())
            .field("probe", &self.ticket.probe())
            .finish()
    }
}

/// The permit's hold on its breaker, whatever the breaker's mode.
struct Holder {
    inner: Arc<Inner>,
}
