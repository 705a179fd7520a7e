//! Helpers shared by integration test files (`mod support;` in each).

use interlock::{CircuitBreaker, State};

/// Failures a test makes before it gives up on a trip: far more than any of
/// these tests' configs needs.
pub(crate) const TRIP_BUDGET: u32 = 10_000;

/// Calls `call` while `breaker` is CLOSED, at most [`TRIP_BUDGET`] times,
/// and fails the test if it is still CLOSED then: a breaker that never
/// trips (a mutant of the trip rule, say) fails the test instead of hanging
/// it.
pub(crate) fn fail_until_tripped<M: interlock::mode::Mode>(
    breaker: &CircuitBreaker<M>,
    mut call: impl FnMut(),
) {
    for _ in 0..TRIP_BUDGET {
        if breaker.state() != State::Closed {
            return;
        }
        call();
    }
    assert_ne!(
        breaker.state(),
        State::Closed,
        "{TRIP_BUDGET} failures did not trip"
    );
}
