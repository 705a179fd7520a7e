//! The rules the breaker's success lanes rely on (issue 22,
//! `breaker/tally.rs`): when a plain success changes nothing, when
//! successes may be counted outside the machine and recorded later in bulk,
//! and when an outcome may be recorded before the ones waiting. They are
//! decisions, so they live with the machine.

use super::*;

/// What a breaker's success lanes are tagged with while plain successes may
/// be counted without its lock (`breaker/tally.rs`): the machine's
/// generation and, for a time window, the second the successes belong to
/// (0 for a count window). See [`Machine::tally_key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TallyKey {
    pub(crate) generation: u64,
    pub(crate) second: u64,
}

impl Machine {
    /// Whether recording a plain [`Outcome::Success`] (neither failed nor
    /// slow) of the current generation would change nothing at all: no
    /// transition, no count, no policy memory. The breaker publishes this
    /// next to its state so that such a success can settle without its lock
    /// (`Inner::settle` in `breaker/mod.rs`); the rule itself lives here, with
    /// every other decision.
    ///
    /// True only in CLOSED with a count window full of successes:
    /// - the window: a success evicts a success (the ring turns, but every
    ///   slot holds the same outcome, so the window is the same) and the
    ///   totals stay `n / 0 / 0`;
    /// - the rate rules: a failure rate and a slow-call rate of zero never
    ///   reach a threshold (both are validated to be above zero);
    /// - the trip policy's memory: the failure rate keeps none,
    ///   `failures_within` ignores successes, and a `consecutive_failures`
    ///   run is above zero only when the latest CLOSED outcome failed, which
    ///   the window then still holds (entering CLOSED clears both), so here
    ///   the run is already zero, as a success would leave it.
    ///
    /// Never with a time window: a success lands in the current second's
    /// bucket.
    pub(crate) fn success_is_noop(&self) -> bool {
        let quiet = self.state == State::Closed
            && matches!(&self.window, Window::Count(w) if w.full_of_successes());
        debug_assert!(
            !quiet || !matches!(self.trip, TripState::Consecutive { count, .. } if count > 0)
        );
        quiet
    }

    /// Whether plain successes ([`Outcome::Success`]) of the current
    /// generation may be counted outside the machine and recorded later in
    /// bulk ([`absorb_successes`](Self::absorb_successes)), skipping their
    /// trip evaluations: `Some` with what they must match, or `None`.
    ///
    /// Some only in CLOSED, and only when no run of successes recorded from
    /// the current state, however long, could trip (R7.1), so skipping the
    /// evaluations changes no decision:
    /// - a success leaves the failed and slow counts as they are, or lowers
    ///   them (a count window evicting a failure or a slow call), and raises
    ///   the total or keeps it (a full count window); so over such a run the
    ///   rates, among the evaluations the gate lets through, are highest at
    ///   the first of them, the one at `first` calls below. Below the
    ///   thresholds there, below them for the whole run (f64 division is
    ///   monotonic in both operands);
    /// - a count window smaller than the gate never reaches it;
    /// - a time window's totals move with the second: the key carries the
    ///   head second, and only successes of that second (whose records would
    ///   not move the window) may wait;
    /// - the policy's memory: `consecutive_failures` is set to zero by a
    ///   success (never a trip, its threshold is at least 1; the bulk record
    ///   sets it to zero too), `failures_within` ignores successes, the rate
    ///   rule is the one above.
    pub(crate) fn tally_key(&self) -> Option<TallyKey> {
        if self.state != State::Closed {
            return None;
        }
        let (s, capacity, second) = match &self.window {
            Window::Count(w) => (w.snapshot(), w.capacity(), 0),
            Window::Time(w) => (w.totals(), u64::MAX, w.head()),
        };
        let minimum = u64::from(self.config.minimum_number_of_calls);
        let first = s.total_calls.saturating_add(1).min(capacity).max(minimum);
        let may_trip = first <= capacity && self.rates_trip(s.failed_calls, s.slow_calls, first);
        (!may_trip).then_some(TallyKey {
            generation: self.generation,
            second,
        })
    }

    /// Whether `outcome`, settling at `now` for `admission`, may be recorded
    /// before the plain successes waiting under the current
    /// [`tally_key`](Self::tally_key) are absorbed (`absorb_successes`),
    /// although they ended first: true only when recording it first
    /// changes neither the decision nor the window.
    ///
    /// - A time window, and `now` no later than its head second: the record
    ///   does not move the window, and the waiting successes belong to the
    ///   head second's bucket too (the key carries it), where outcomes have
    ///   no order. (In a count window the order of the ring is its future:
    ///   never.)
    /// - CLOSED, the current generation, and the failure-rate rule: a
    ///   `consecutive_failures` run is ended by a success, and a
    ///   `failures_within` trip would open before the waiting successes
    ///   were in the window its events report.
    /// - After the record, over the counts without the waiting successes,
    ///   the gate is reached and both rates are below their thresholds. The
    ///   waiting successes only raise the total, so with them the gate is
    ///   reached too and the rates are lower still (f64 division is
    ///   monotonic in both operands): no trip either way, and none for any
    ///   run of successes after it, so the key stays.
    ///
    /// On two threads this keeps the other thread's success lane where it
    /// is: a fold reads and writes it, a line that thread then fetches back
    /// for its next success.
    pub(crate) fn may_record_before_waiting_successes(
        &self,
        now: Timestamp,
        admission: Admission,
        outcome: Outcome,
    ) -> bool {
        if self.state != State::Closed
            || admission.generation != self.generation
            || !matches!(self.trip, TripState::Rate)
        {
            return false;
        }
        let Window::Time(w) = &self.window else {
            return false;
        };
        if now.as_secs() > w.head() {
            return false;
        }
        let s = w.totals();
        let total = s.total_calls.saturating_add(1);
        let failed = s.failed_calls + u64::from(outcome.is_failure());
        let slow = s.slow_calls + u64::from(outcome.is_slow());
        total >= u64::from(self.config.minimum_number_of_calls)
            && !self.rates_trip(failed, slow, total)
    }

    /// Whether `failed` and `slow` of `total` calls reach a rate rule's
    /// threshold: the failure rate (under that trip policy only) or the
    /// slow-call rate. The gate is the caller's to check.
    #[inline]
    fn rates_trip(&self, failed: u64, slow: u64, total: u64) -> bool {
        (matches!(self.trip, TripState::Rate)
            && rate(failed, total) >= self.config.failure_rate_threshold)
            || rate(slow, total) >= self.config.slow_call_rate_threshold
    }

    /// Whether [`tally_key`](Self::tally_key) stays `Some` for the rest of
    /// this generation, whatever is recorded: in CLOSED with a full count
    /// window. It never empties, and it holds at least the gate (config
    /// validation keeps `minimum_number_of_calls` within the window), so
    /// every record is evaluated over the whole window: a failure or slow
    /// call that would leave a success able to trip trips itself (a new
    /// generation), and successes only lower the rates. A time window never
    /// lasts: its calls expire.
    pub(crate) fn tally_key_lasts(&self) -> bool {
        self.state == State::Closed
            && matches!(&self.window, Window::Count(w)
                if w.snapshot().total_calls == w.capacity())
    }

    /// How many plain successes would make [`success_is_noop`](Self::success_is_noop)
    /// true (a count window full of successes), `u64::MAX` if none would.
    /// The success lanes fold themselves in once they hold that many, so
    /// that the quiet path comes back as soon as it may.
    pub(crate) fn successes_to_quiet(&self) -> u64 {
        if self.state == State::Closed {
            self.window.successes_to_clean()
        } else {
            u64::MAX
        }
    }

    /// Records `n` plain successes counted while [`tally_key`](Self::tally_key)
    /// was the current key (the machine has not changed since): into the
    /// window as `n` records would (a time window's head bucket), the
    /// `consecutive_failures` run ended, no trip evaluation (none could trip).
    pub(crate) fn absorb_successes(&mut self, n: u64) {
        debug_assert!(self.tally_key().is_some(), "no key: {self:?}");
        if n == 0 {
            return;
        }
        self.window.record_successes(n);
        if let TripState::Consecutive { count, .. } = &mut self.trip {
            *count = 0;
        }
    }
}
