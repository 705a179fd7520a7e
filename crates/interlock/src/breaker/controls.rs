//! Operator controls: `reset`, `force_open`, `disable`, `metrics_only` (R11).

use super::*;

impl<M: Mode> CircuitBreaker<M> {
    /// Back to CLOSED with a fresh window, no backoff and no last failure
    /// (R11.2). Emits the state change, if any, then [`Event::Reset`]. A
    /// coordinated breaker resumes the cached shared state and never writes
    /// to the storage (R15.8).
    pub fn reset(&self) {
        self.inner.apply(Machine::reset);
        self.inner.clear_last_failure();
        self.inner.emit(&Event::Reset {
            breaker: self.name(),
        });
    }

    /// Operator override: reject every call until [`reset`](Self::reset)
    /// (R11.1); local to this instance even when coordinated (R15.8).
    pub fn force_open(&self) {
        self.inner.apply(|m| m.override_to(State::ForcedOpen));
    }

    /// Operator override: admit every call, count nothing, never trip;
    /// listeners still see every call (R11.1). A coordinated breaker admits
    /// without leasing shared probes.
    pub fn disable(&self) {
        self.inner.apply(|m| m.override_to(State::Disabled));
    }

    /// Operator override: admit every call, count outcomes, never trip (R11.1).
    pub fn metrics_only(&self) {
        self.inner.apply(|m| m.override_to(State::MetricsOnly));
    }
}
