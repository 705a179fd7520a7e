//! [`Permit`]: an admission held by code that is not a closure.

use std::error::Error;
use std::fmt;

use crate::classify::Verdict;

use super::{CircuitBreaker, Ticket};

/// The right to make one call through a breaker, from
/// [`CircuitBreaker::acquire`].
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
    breaker: CircuitBreaker,
    ticket: Ticket,
    settled: bool,
}

impl Permit {
    pub(super) fn new(breaker: CircuitBreaker, ticket: Ticket) -> Self {
        Permit {
            breaker,
            ticket,
            settled: false,
        }
    }

    /// Whether this call is a HALF_OPEN probe.
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.ticket.admission.probe
    }

    /// The breaker that issued the permit.
    #[must_use]
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// The call succeeded.
    pub fn success(self) {
        self.settle(Verdict::Success, None, "");
    }

    /// The call failed (no error value is kept as the last failure).
    pub fn failure(self) {
        self.settle(Verdict::Failure, None, "");
    }

    /// The call never reached the dependency (R9).
    pub fn inconclusive(self) {
        self.settle(Verdict::Inconclusive, None, "");
    }

    /// Records an explicit verdict.
    pub fn record(self, verdict: Verdict) {
        self.settle(verdict, None, "");
    }

    /// Records `result` as [`CircuitBreaker::call`] would: an error goes
    /// through the breaker's classifier and, if a failure, becomes the last
    /// failure.
    pub fn finish<T, E: Error + 'static>(self, result: &Result<T, E>) {
        let verdict = match result {
            Ok(_) => Verdict::Success,
            Err(e) => self.breaker.inner.classify_error(e),
        };
        let error = result.as_ref().err().map(|e| e as &dyn fmt::Display);
        self.settle(verdict, error, std::any::type_name::<E>());
    }

    /// Records `verdict`, keeping `error` as the last failure if the verdict
    /// is not a success.
    pub fn finish_with<E: fmt::Display>(self, verdict: Verdict, error: &E) {
        self.settle(verdict, Some(error), std::any::type_name::<E>());
    }

    fn settle(
        mut self,
        verdict: Verdict,
        error: Option<&dyn fmt::Display>,
        type_name: &'static str,
    ) {
        self.settled = true;
        self.breaker
            .inner
            .settle(self.ticket, verdict, error, type_name);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.inner.release(self.ticket.admission);
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.breaker.name())
            .field("generation", &self.ticket.admission.generation)
            .field("probe", &self.ticket.admission.probe)
            .finish()
    }
}
