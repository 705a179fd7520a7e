//! The pure state machine: no clock reads, no locks, no I/O.
//!
//! Time is an argument and every transition is a returned value, so the
//! machine can be driven step by step in tests and simulations, and
//! [`CircuitBreaker`](crate::CircuitBreaker) only has to lock, call, unlock
//! and then publish what came back.

use std::collections::VecDeque;
use std::time::Duration;

// Re-exported so `crate::machine::{State, Outcome}` keeps working for code
// above the machine; code below it names `crate::state`.
use crate::SlidingWindow;
use crate::clock::Timestamp;
use crate::config::Config;
use crate::error::ConfigError;
use crate::policy::{HalfOpenPolicy, TripPolicy};
mod lanes;
mod trip_state;

pub(crate) use crate::state::{Outcome, State};
use crate::window::{CountWindow, Snapshot, TimeWindow, Window, rate};
pub(crate) use lanes::TallyKey;
use trip_state::TripState;

/// A change of state, returned by the machine for its owner to publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
}

/// A call let through by [`Machine::try_acquire`]; hand it back to
/// [`Machine::record`] or [`Machine::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Admission {
    /// The machine's generation when the call was admitted (R8.8).
    pub generation: u64,
    /// Whether the call is a HALF_OPEN probe.
    pub probe: bool,
}

/// A call turned away by [`Machine::try_acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// The state that refused.
    pub state: State,
    /// How long until a probe may be admitted: only in OPEN (R6.2).
    pub retry_after: Option<Duration>,
}

/// The probe accounting of the current HALF_OPEN round (R8).
///
/// Meaningful only in HALF_OPEN; it may hold the last round's figures in
/// OPEN (R8.11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProbeCounters {
    /// Probes admitted this round (settled ones included).
    pub admitted: u32,
    /// Probes admitted and not yet settled.
    pub in_flight: u32,
    /// Probes that gave a verdict.
    pub completed: u32,
    /// Verdicts that were failures.
    pub failures: u32,
    /// Verdicts that were slow.
    pub slows: u32,
    /// Probes that came back inconclusive (R9.4).
    pub inconclusive: u32,
}

/// The breaker's state machine (§6–§12 of the behaviour spec).
///
/// ```
/// use interlock::{Config, Machine, Outcome, State, Timestamp};
/// use std::time::Duration;
///
/// let config = Config::builder().minimum_number_of_calls(2).sliding_window(interlock::SlidingWindow::count(2)).build()?;
/// let mut m = Machine::new(config, State::Closed)?;
/// let t0 = Timestamp::ZERO;
/// for _ in 0..2 {
///     let (admission, _) = m.try_acquire(t0).unwrap();
///     m.record(t0, admission, Outcome::Failure, false);
/// }
/// assert_eq!(m.state(), State::Open);
/// let refused = m.try_acquire(t0 + Duration::from_secs(1)).unwrap_err();
/// assert_eq!(refused.retry_after, Some(Duration::from_secs(59)));
/// # Ok::<(), interlock::ConfigError>(())
/// ```
// `repr(C)`, window first: a breaker's lock holder writes the window's
// counters on every failure, so they sit right after the lock, on its
// cache lines (issue 22; see `Core` in `breaker/mod.rs`).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Machine {
    window: Window,
    trip: TripState,
    config: Config,
    generation: u64,
    opened_at: Timestamp,
    open_wait: Duration,
    /// When the current HALF_OPEN round last made progress: its start
    /// (entry or restart), or its latest probe admission or settlement.
    round_progress_at: Timestamp,
    /// Under [`HalfOpenPolicy::Progressive`] (D8): 0 while the single probe
    /// runs, then the 1-based stage whose calls `round` counts.
    stage: usize,
    round: ProbeCounters,
    failed_rounds: u32,
    /// The stage's admission credit in millionths of a call (D8).
    credit: u32,
    state: State,
}

impl Machine {
    /// A machine in `initial` state with an empty window (R3).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for `initial_state` when `initial` is OPEN or
    /// HALF_OPEN (R3.1).
    pub fn new(config: Config, initial: State) -> Result<Self, ConfigError> {
        if !initial.is_valid_initial() {
            return Err(ConfigError::new(
                "initial_state",
                format!(
                    "must be one of closed, forced_open, disabled, metrics_only; got {initial}"
                ),
            ));
        }
        let window = match config.sliding_window {
            SlidingWindow::Count(n) => Window::Count(CountWindow::new(n)),
            SlidingWindow::Time(n) => Window::Time(TimeWindow::new(n)),
        };
        Ok(Machine {
            open_wait: config.wait_duration_in_open,
            trip: TripState::new(config.trip_policy),
            config,
            state: initial,
            generation: 0,
            opened_at: Timestamp::ZERO,
            round_progress_at: Timestamp::ZERO,
            failed_rounds: 0,
            round: ProbeCounters::default(),
            stage: 0,
            credit: 0,
            window,
        })
    }

    /// The current state.
    #[must_use]
    pub fn state(&self) -> State {
        self.state
    }

    /// The generation: bumped by every transition and override, never repeated (R8.8).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The config the machine was built with.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// When the current (or last) OPEN period began.
    #[must_use]
    pub fn opened_at(&self) -> Timestamp {
        self.opened_at
    }

    /// The wait of the current (or last) OPEN period, backoff included (R10).
    #[must_use]
    pub fn open_wait(&self) -> Duration {
        self.open_wait
    }

    /// When the current OPEN period's wait elapses.
    #[must_use]
    pub fn open_until(&self) -> Timestamp {
        self.opened_at.saturating_add(self.open_wait)
    }

    /// Consecutive failed probe rounds, the backoff exponent (R10.1).
    #[must_use]
    pub fn failed_rounds(&self) -> u32 {
        self.failed_rounds
    }

    /// The current round's probe accounting.
    #[must_use]
    pub fn probes(&self) -> ProbeCounters {
        self.round
    }

    /// The window's totals at `now` (a time window drains as time passes).
    pub fn snapshot(&mut self, now: Timestamp) -> Snapshot {
        self.window.snapshot(now)
    }

    /// How long until a probe may be admitted: `Some` only in OPEN, and zero
    /// once the wait has elapsed (R6.2).
    #[must_use]
    pub fn retry_after(&self, now: Timestamp) -> Option<Duration> {
        (self.state == State::Open).then(|| self.open_until().saturating_duration_since(now))
    }

    /// Admits or refuses a call (R6).
    ///
    /// In OPEN with the wait elapsed (inclusive) the machine moves to
    /// HALF_OPEN and admits this call as the round's first probe, returning
    /// that transition with the admission.
    ///
    /// In HALF_OPEN, under every policy, a round with no free probe slot
    /// and no probe admitted or settled for
    /// [`max_wait_in_half_open`](Config::max_wait_in_half_open) is
    /// abandoned first (ruling D7): its outstanding probes count as
    /// inconclusive now and their late outcomes are stale (the generation
    /// moves, R8.8). If that brings the round's inconclusive probes to
    /// `permitted_calls_in_half_open`, the machine re-opens as for any
    /// inconclusive round (R9.4, R9.5: a failed round for the backoff) and
    /// this call is refused by the new OPEN period; the state then differs
    /// from before the call, which is how a caller of this method learns of
    /// that transition. Otherwise the round goes on with the freed slots and
    /// this call is its next probe.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] in OPEN before the wait elapses, in FORCED_OPEN, and in
    /// HALF_OPEN when either probe cap is reached.
    pub fn try_acquire(
        &mut self,
        now: Timestamp,
    ) -> Result<(Admission, Option<Transition>), Refusal> {
        match self.state {
            State::Closed | State::Disabled | State::MetricsOnly => Ok((
                Admission {
                    generation: self.generation,
                    probe: false,
                },
                None,
            )),
            State::ForcedOpen => Err(Refusal {
                state: State::ForcedOpen,
                retry_after: None,
            }),
            State::Open => {
                if now < self.open_until() {
                    return Err(Refusal {
                        state: State::Open,
                        retry_after: Some(self.open_until().saturating_duration_since(now)),
                    });
                }
                let transition = self.enter_half_open(now);
                self.admit_probe(now);
                Ok((
                    Admission {
                        generation: self.generation,
                        probe: true,
                    },
                    Some(transition),
                ))
            }
            State::HalfOpen if self.stage > 0 => self.admit_to_stage(now),
            State::HalfOpen => {
                // The stall check runs only when no slot is free, so a
                // round with room pays nothing for it.
                if !self.probe_slot_free() && self.round_stalled(now) {
                    self.abandon_round(now);
                    if self.state == State::Open {
                        return Err(Refusal {
                            state: State::Open,
                            retry_after: self.retry_after(now),
                        });
                    }
                }
                if self.probe_slot_free() {
                    self.admit_probe(now);
                    Ok((
                        Admission {
                            generation: self.generation,
                            probe: true,
                        },
                        None,
                    ))
                } else {
                    Err(Refusal {
                        state: State::HalfOpen,
                        retry_after: None,
                    })
                }
            }
        }
    }

    /// Records a settled call's outcome (R7, R8, R9).
    ///
    /// `inconclusive` marks a call that never reached the dependency: in
    /// HALF_OPEN it gives no verdict and hands its slot back; elsewhere it
    /// counts as `outcome`. An admission of another generation is ignored.
    pub fn record(
        &mut self,
        now: Timestamp,
        admission: Admission,
        outcome: Outcome,
        inconclusive: bool,
    ) -> Option<Transition> {
        if admission.generation != self.generation {
            return None; // R8.8: stale
        }
        match self.state {
            State::Closed => {
                self.window.record(now, outcome);
                self.should_trip(now, outcome)
                    .then(|| self.open(now, State::Closed))
            }
            State::MetricsOnly => {
                self.window.record(now, outcome);
                None
            }
            State::HalfOpen => self.record_probe(now, outcome, inconclusive),
            State::Open | State::ForcedOpen | State::Disabled => None, // R8.10
        }
    }

    /// Hands back the slot of a call that was cancelled before it settled:
    /// nothing is recorded (R4.5, R8.9).
    pub fn release(&mut self, admission: Admission) {
        if admission.generation == self.generation && self.state == State::HalfOpen {
            self.round.in_flight = self.round.in_flight.saturating_sub(1);
            self.round.admitted = self.round.admitted.saturating_sub(1);
            // Both caps now have room, so the round cannot be stalled until
            // its next admission, which counts as progress: no clock needed.
        }
    }

    /// Back to CLOSED with a fresh window and no backoff (R11.2); returns the
    /// transition if the state changed. The generation moves in any case.
    pub fn reset(&mut self) -> Option<Transition> {
        self.enter_closed()
    }

    /// Operator override: FORCED_OPEN, DISABLED or METRICS_ONLY (R11.1).
    /// Any other state is ignored and returns `None`. The generation moves
    /// even when the state does not.
    pub fn override_to(&mut self, to: State) -> Option<Transition> {
        if !to.is_override() {
            return None;
        }
        self.move_to(to)
    }

    /// The `auto_transition` timer fired for the OPEN period of generation
    /// `generation` (R12.2): moves to HALF_OPEN without admitting a probe if
    /// that period is still current and its wait has elapsed.
    pub fn on_timer(&mut self, now: Timestamp, generation: u64) -> Option<Transition> {
        if self.state == State::Open && self.generation == generation && now >= self.open_until() {
            Some(self.enter_half_open(now))
        } else {
            None
        }
    }

    /// Where the window lies in memory, for the breaker's layout test.
    #[cfg(test)]
    pub(crate) fn window_bytes(&self) -> std::ops::Range<usize> {
        let start = std::ptr::from_ref(&self.window).addr();
        start..start + size_of::<Window>()
    }

    /// Whether a HALF_OPEN probe may be admitted now: both caps have room
    /// (R8.6).
    fn probe_slot_free(&self) -> bool {
        self.round.in_flight < self.config.max_concurrent_probes
            && self.round.admitted < self.round_budget()
    }

    /// The probes of a HALF_OPEN round: `permitted_calls_in_half_open`, or
    /// the single probe that opens a progressive recovery (D8).
    fn round_budget(&self) -> u32 {
        match self.config.half_open_policy {
            HalfOpenPolicy::Progressive(_) => 1,
            _ => self.config.permitted_calls_in_half_open,
        }
    }

    /// Ruling D8: an admission attempt during a progressive stage. The
    /// attempt adds the stage's share to the credit; a whole call's credit
    /// admits it and is spent, otherwise the attempt is refused as in any
    /// HALF_OPEN. D7 holds here too: calls outstanding with no progress for
    /// `max_wait_in_half_open` are abandoned as inconclusive (which never
    /// decides a stage) in a new generation.
    fn admit_to_stage(
        &mut self,
        now: Timestamp,
    ) -> Result<(Admission, Option<Transition>), Refusal> {
        let HalfOpenPolicy::Progressive(stages) = self.config.half_open_policy else {
            unreachable!("a stage exists only under the progressive policy")
        };
        if self.round.in_flight > 0 && self.round_stalled(now) {
            let lost = self.round.in_flight;
            self.round.in_flight = 0;
            self.round.admitted = self.round.admitted.saturating_sub(lost);
            self.round.inconclusive = self.round.inconclusive.saturating_add(lost);
            self.mark_progress(now);
            self.generation += 1;
        }
        self.credit = self
            .credit
            .saturating_add(stages.share_per_million(self.stage - 1));
        if self.credit >= 1_000_000 {
            self.credit -= 1_000_000;
            self.admit_probe(now);
            Ok((
                Admission {
                    generation: self.generation,
                    probe: true,
                },
                None,
            ))
        } else {
            Err(Refusal {
                state: State::HalfOpen,
                retry_after: None,
            })
        }
    }

    /// Ruling D8: the single probe succeeded or a stage was judged healthy;
    /// the next stage starts with fresh counts, no credit and a new
    /// generation (the previous stage's outstanding calls no longer count),
    /// and after the last the breaker closes.
    fn next_stage(&mut self, now: Timestamp, stages: usize) -> Option<Transition> {
        if self.stage >= stages {
            return self.enter_closed();
        }
        self.stage += 1;
        self.credit = 0;
        self.round = ProbeCounters::default();
        self.generation += 1;
        self.mark_progress(now);
        None
    }

    /// The stall rule of ruling D7, for a round with no free probe slot
    /// (either cap reached, so admission would be refused): stalled once
    /// `max_wait_in_half_open` has passed since the round last made
    /// progress (its start, or its latest probe admission or settlement).
    /// Measuring from the last progress rather than the start keeps a slow
    /// but moving round alive, and never abandons a probe admitted less
    /// than the bound ago; checking either cap, not only the admission
    /// budget, catches a hung probe that holds the only concurrency slot.
    fn round_stalled(&self, now: Timestamp) -> bool {
        let bound = self.config.max_wait_in_half_open();
        bound != Duration::MAX && now.saturating_duration_since(self.round_progress_at) >= bound
    }

    /// Ruling D7: abandons a stalled round at `now`. Every outstanding
    /// probe settles as inconclusive (R9.3: its slot and budget come back),
    /// the generation moves so that their late outcomes are stale (R8.8),
    /// and R9.4 applies as if they had just settled: with nothing in flight
    /// any more, `permitted` inconclusive probes re-open as a failed round
    /// (R9.5). Otherwise the round keeps its verdicts and goes on.
    fn abandon_round(&mut self, now: Timestamp) {
        let lost = self.round.in_flight;
        self.round.in_flight = 0;
        self.round.admitted = self.round.admitted.saturating_sub(lost);
        self.round.inconclusive = self.round.inconclusive.saturating_add(lost);
        self.mark_progress(now);
        if self.round.inconclusive >= self.round_budget() {
            self.failed_rounds = self.failed_rounds.saturating_add(1);
            self.open(now, State::HalfOpen);
        } else {
            // Same state, new generation: no transition to report.
            self.generation += 1;
        }
    }

    fn admit_probe(&mut self, now: Timestamp) {
        self.round.admitted += 1;
        self.round.in_flight += 1;
        self.mark_progress(now);
    }

    /// A probe admission or settlement at `now` (stall rule). Never moves
    /// back: a settle may carry a clock reading taken before the lock, older
    /// than an admission that won the lock first.
    fn mark_progress(&mut self, now: Timestamp) {
        self.round_progress_at = self.round_progress_at.max(now);
    }

    /// R7.1: evaluated on every CLOSED record. The slow-call rule holds
    /// under every trip policy.
    fn should_trip(&mut self, now: Timestamp, outcome: Outcome) -> bool {
        let s = self.window.snapshot(now);
        let policy =
            self.trip
                .failure_rule(now, outcome, s.total_calls, s.failed_calls, &self.config);
        policy
            || (s.total_calls >= u64::from(self.config.minimum_number_of_calls)
                && s.slow_call_rate() >= self.config.slow_call_rate_threshold)
    }

    fn record_probe(
        &mut self,
        now: Timestamp,
        outcome: Outcome,
        inconclusive: bool,
    ) -> Option<Transition> {
        let permitted = self.round_budget();
        self.round.in_flight = self.round.in_flight.saturating_sub(1);
        self.mark_progress(now); // a settlement is progress (stall rule)
        if inconclusive && self.stage > 0 {
            // D8: an inconclusive call does not count toward its stage.
            self.round.admitted = self.round.admitted.saturating_sub(1);
            self.round.inconclusive += 1;
            return None;
        }
        if inconclusive {
            // R9.3: no verdict, slot back. R9.4: once `permitted` probes of
            // the round came back inconclusive (cumulative) and none is
            // still in flight (its verdict would be thrown away), the round
            // re-opens; R9.5: as a failed round for the backoff.
            self.round.admitted = self.round.admitted.saturating_sub(1);
            self.round.inconclusive += 1;
            if self.round.inconclusive >= permitted && self.round.in_flight == 0 {
                self.failed_rounds = self.failed_rounds.saturating_add(1);
                return Some(self.open(now, State::HalfOpen));
            }
            return None;
        }
        self.round.completed += 1;
        self.round.failures += u32::from(outcome.is_failure());
        self.round.slows += u32::from(outcome.is_slow());
        let failed = match self.config.half_open_policy {
            HalfOpenPolicy::Progressive(stages) => {
                // D8: the single probe decides on its own; a stage once it
                // holds its minimum of verdicts.
                let failed = if self.stage == 0 {
                    outcome.is_failure() || outcome.is_slow()
                } else if self.round.completed < stages.minimum_calls() {
                    return None;
                } else {
                    let completed = u64::from(self.round.completed);
                    rate(u64::from(self.round.failures), completed)
                        >= self.config.failure_rate_threshold
                        || rate(u64::from(self.round.slows), completed)
                            >= self.config.slow_call_rate_threshold
                };
                if !failed {
                    return self.next_stage(now, stages.len());
                }
                true
            }
            HalfOpenPolicy::ConsecutiveSuccesses { successes } => {
                if outcome.is_failure() || outcome.is_slow() {
                    true
                } else if self.round.completed >= successes {
                    false
                } else {
                    return None;
                }
            }
            // `ProbeRound` and any later round-based policy.
            _ => {
                if self.round.completed < permitted {
                    return None;
                }
                let completed = u64::from(self.round.completed);
                rate(u64::from(self.round.failures), completed)
                    >= self.config.failure_rate_threshold
                    || rate(u64::from(self.round.slows), completed)
                        >= self.config.slow_call_rate_threshold
            }
        };
        if failed {
            self.failed_rounds = self.failed_rounds.saturating_add(1);
            Some(self.open(now, State::HalfOpen))
        } else {
            self.enter_closed()
        }
    }

    /// Trip (from CLOSED) or re-open (from HALF_OPEN) at `now` (R7.4, R8.5).
    fn open(&mut self, now: Timestamp, from: State) -> Transition {
        debug_assert_eq!(self.state, from);
        self.opened_at = now;
        self.open_wait = self.config.open_wait(self.failed_rounds);
        self.move_to(State::Open).unwrap_or(Transition {
            from,
            to: State::Open,
        })
    }

    fn enter_half_open(&mut self, now: Timestamp) -> Transition {
        self.round = ProbeCounters::default();
        self.stage = 0;
        self.credit = 0;
        self.round_progress_at = now;
        self.move_to(State::HalfOpen).unwrap_or(Transition {
            from: State::Open,
            to: State::HalfOpen,
        })
    }

    fn enter_closed(&mut self) -> Option<Transition> {
        self.window.clear();
        self.trip.clear();
        self.failed_rounds = 0;
        self.move_to(State::Closed)
    }

    /// Every transition bumps the generation and resets probe accounting
    /// (except entering OPEN, which leaves the stale figures, R8.11).
    fn move_to(&mut self, to: State) -> Option<Transition> {
        let from = self.state;
        self.generation += 1;
        if to != State::Open {
            self.round = ProbeCounters::default();
        }
        self.stage = 0;
        self.credit = 0;
        self.state = to;
        (from != to).then_some(Transition { from, to })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SlidingWindow;

    fn machine(window: SlidingWindow, trip: TripPolicy) -> Machine {
        let config = Config::builder()
            .sliding_window(window)
            .minimum_number_of_calls(2)
            .trip_policy(trip)
            .build()
            .unwrap();
        Machine::new(config, State::Closed).unwrap()
    }

    fn record(m: &mut Machine, outcome: Outcome) -> Option<Transition> {
        let (admission, _) = m.try_acquire(Timestamp::ZERO).unwrap();
        m.record(Timestamp::ZERO, admission, outcome, false)
    }

    #[test]
    fn an_outcome_precedes_waiting_successes_only_in_a_closed_time_window_it_cannot_trip() {
        let config = |window: SlidingWindow, trip: TripPolicy, minimum: u32| {
            Config::builder()
                .sliding_window(window)
                .minimum_number_of_calls(minimum)
                .failure_rate_threshold(0.5)
                .slow_call_rate_threshold(0.5)
                .trip_policy(trip)
                .build()
                .unwrap()
        };
        let time = || SlidingWindow::time(Duration::from_secs(60));
        let mut m =
            Machine::new(config(time(), TripPolicy::FailureRate, 2), State::Closed).unwrap();
        let now = Timestamp::ZERO;
        let current = |m: &Machine| Admission {
            generation: m.generation(),
            probe: false,
        };
        for _ in 0..3 {
            record(&mut m, Outcome::Success);
        }
        let a = current(&m);
        assert!(
            m.may_record_before_waiting_successes(now, a, Outcome::Failure),
            "1 of 4"
        );
        assert!(m.may_record_before_waiting_successes(now, a, Outcome::SlowFailure));
        record(&mut m, Outcome::SlowSuccess);
        record(&mut m, Outcome::SlowSuccess);
        // 2 slow of 5: a third would be 3 of 6, at the slow-call threshold.
        assert!(!m.may_record_before_waiting_successes(now, a, Outcome::SlowSuccess));
        assert!(!m.may_record_before_waiting_successes(now, a, Outcome::SlowFailure));
        assert!(
            m.may_record_before_waiting_successes(now, a, Outcome::Failure),
            "1 of 6"
        );
        // After four failures (4 of 9), a fifth would be 5 of 10: at the
        // failure-rate threshold.
        for _ in 0..4 {
            assert_eq!(record(&mut m, Outcome::Failure), None);
        }
        assert!(!m.may_record_before_waiting_successes(now, a, Outcome::Failure));
        assert!(m.may_record_before_waiting_successes(now, a, Outcome::Success));
        // A later second moves the window; a stale call changes nothing.
        let later = Timestamp::from_nanos(1_000_000_000);
        assert!(!m.may_record_before_waiting_successes(later, a, Outcome::Success));
        let stale = Admission {
            generation: m.generation() + 1,
            probe: false,
        };
        assert!(!m.may_record_before_waiting_successes(now, stale, Outcome::Success));
        // Outside CLOSED, whatever the generation.
        m.override_to(State::MetricsOnly);
        assert!(!m.may_record_before_waiting_successes(now, current(&m), Outcome::Success));
        // Below the gate, in a count window, under the other trip policies.
        let fresh =
            Machine::new(config(time(), TripPolicy::FailureRate, 2), State::Closed).unwrap();
        assert!(!fresh.may_record_before_waiting_successes(now, current(&fresh), Outcome::Success));
        for (window, trip) in [
            (SlidingWindow::count(10), TripPolicy::FailureRate),
            (time(), TripPolicy::consecutive_failures(3)),
            (
                time(),
                TripPolicy::failures_within(3, Duration::from_secs(1)),
            ),
        ] {
            let mut m = Machine::new(config(window, trip, 1), State::Closed).unwrap();
            for _ in 0..4 {
                record(&mut m, Outcome::Success);
            }
            assert!(!m.may_record_before_waiting_successes(now, current(&m), Outcome::Failure));
        }
    }

    #[test]
    fn a_success_is_a_noop_only_in_closed_with_a_count_window_full_of_successes() {
        for trip in [
            TripPolicy::FailureRate,
            TripPolicy::consecutive_failures(3),
            TripPolicy::failures_within(3, Duration::from_secs(1)),
        ] {
            let mut m = machine(SlidingWindow::count(3), trip);
            for _ in 0..2 {
                record(&mut m, Outcome::Success);
                assert!(!m.success_is_noop(), "{trip:?}: window not full yet");
            }
            record(&mut m, Outcome::Success);
            assert!(m.success_is_noop(), "{trip:?}: full of successes");
            let before = m.clone();
            record(&mut m, Outcome::Success);
            assert!(m.success_is_noop());
            assert_eq!(
                m.snapshot(Timestamp::ZERO),
                before.clone().snapshot(Timestamp::ZERO)
            );
            assert_eq!(m.generation(), before.generation());

            for bad in [Outcome::SlowSuccess, Outcome::Failure, Outcome::SlowFailure] {
                let mut m = before.clone();
                assert_eq!(record(&mut m, bad), None, "{trip:?}: {bad} trips nothing");
                assert!(!m.success_is_noop(), "{trip:?}: {bad} in the window");
                // Three successes push it out again.
                for _ in 0..3 {
                    record(&mut m, Outcome::Success);
                }
                assert!(m.success_is_noop(), "{trip:?}: {bad} evicted");
            }

            // The same clean window outside CLOSED: overrides keep the window.
            for to in [State::ForcedOpen, State::Disabled, State::MetricsOnly] {
                let mut m = before.clone();
                m.override_to(to);
                assert!(!m.success_is_noop(), "{trip:?}: {to}");
                m.reset();
                assert!(!m.success_is_noop(), "{trip:?}: reset empties the window");
            }
        }
    }

    #[test]
    fn a_settle_with_an_older_clock_reading_does_not_move_round_progress_back() {
        // The stall rule counts from the round's latest progress. A settle
        // may carry a clock reading taken before the lock, older than an
        // admission that won the lock first: it must not make the round
        // look idle for longer than it was.
        let at = |s: u64| Timestamp::ZERO + Duration::from_secs(s);
        let config = Config::builder()
            .minimum_number_of_calls(1)
            .wait_duration_in_open(Duration::from_secs(10))
            .permitted_calls_in_half_open(3)
            .max_concurrent_probes(3)
            .half_open_policy(HalfOpenPolicy::consecutive_successes(3))
            .build()
            .unwrap();
        let mut m = Machine::new(config, State::Closed).unwrap();
        let (a, _) = m.try_acquire(at(0)).unwrap();
        m.record(at(0), a, Outcome::Failure, false);
        assert_eq!(m.state(), State::Open);
        let (first, _) = m.try_acquire(at(10)).unwrap();
        let (_, _) = m.try_acquire(at(10)).unwrap();
        let (_, _) = m.try_acquire(at(20)).unwrap(); // the latest progress
        let generation = m.generation();
        assert_eq!(m.record(at(15), first, Outcome::Success, false), None);
        let refused = m.try_acquire(at(29)).unwrap_err();
        assert_eq!(refused.state, State::HalfOpen, "9 s since progress");
        assert_eq!(m.generation(), generation, "not restarted");
        let (fresh, _) = m.try_acquire(at(30)).unwrap();
        assert_eq!(fresh.generation, generation + 1, "a wait since t = 20");
    }

    #[test]
    fn a_success_is_never_a_noop_with_a_time_window() {
        let mut m = machine(
            SlidingWindow::time(Duration::from_secs(1)),
            TripPolicy::FailureRate,
        );
        for _ in 0..10 {
            record(&mut m, Outcome::Success);
            assert!(!m.success_is_noop());
        }
    }
}
