//! The reference model: what the behaviour spec says a breaker does, written
//! as plainly as possible and sharing no code with the engine.
//!
//! It keeps every recorded outcome in a `Vec` and filters it when asked for
//! a snapshot, a run of failures or the failures within a period, counts
//! probes in plain integers, and lists the events it expects. Only vocabulary types (`State`, `Outcome`, `Verdict`, `Snapshot`,
//! `ProbeCounters`) come from the crate.

use std::time::Duration;

use interlock::{Outcome, ProbeCounters, Snapshot, State, Verdict};

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Which window the breaker counts CLOSED outcomes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowKind {
    /// The last `n` calls.
    Count(u32),
    /// The whole seconds `[now - n + 1, now]`.
    Time(u32),
}

/// What trips a CLOSED breaker (besides the slow-call rate, which always can).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TripKind {
    /// The window's failure rate, once it holds `minimum_calls` (R7.1).
    Rate,
    /// This many failures in a row since the breaker last closed.
    Consecutive(u32),
    /// This many failures no older than the period (both ends inclusive).
    Within(u32, Duration),
}

/// What decides a HALF_OPEN round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HalfOpenKind {
    /// Rates over `permitted` verdicts (R8.3).
    ProbeRound,
    /// This many good probes in a row close; the first bad one re-opens.
    Successes(u32),
    /// D8: one probe, then the stages of `STAGE_SETS[set]` (shares in
    /// millionths), each judged on `minimum` verdicts.
    Progressive { set: usize, minimum: u32 },
}

/// The progressive stage sets the model draws from, in millionths.
pub(crate) const STAGE_SETS: [&[u32]; 4] = [
    &[500_000, 1_000_000],
    &[250_000, 1_000_000],
    &[1_000_000],
    &[200_000, 500_000, 750_000],
];

/// The configuration of one generated case, as plain numbers.
#[derive(Clone, Debug)]
pub(crate) struct Params {
    pub(crate) window: WindowKind,
    pub(crate) minimum_calls: u32,
    pub(crate) failure_threshold: f64,
    pub(crate) slow_threshold: f64,
    pub(crate) slow_call: Duration,
    /// Whole seconds, so that backoff products are exact.
    pub(crate) wait_secs: u64,
    /// A whole number, for the same reason.
    pub(crate) multiplier: u32,
    pub(crate) wait_max_secs: Option<u64>,
    /// `max_wait_in_half_open`: `None` follows the base wait,
    /// `Duration::MAX` never abandons a round (D7).
    pub(crate) max_wait: Option<Duration>,
    pub(crate) permitted: u32,
    pub(crate) max_concurrent: u32,
    pub(crate) auto_transition: bool,
    pub(crate) initial: State,
    pub(crate) trip: TripKind,
    pub(crate) half_open: HalfOpenKind,
}

/// An event as the model expects the listener to see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ev {
    Changed(State, State),
    Call(Outcome, Duration),
    Rejected(State),
    Reset,
}

/// One generated step.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A whole call: admitted (or not), runs for `took`, then settles.
    Call {
        verdict: Verdict,
        took: Duration,
        error: Option<u8>,
    },
    /// Admission only: the permit is held open.
    Acquire,
    /// Settles the held permit `slot` with `verdict`.
    Settle {
        slot: usize,
        verdict: Verdict,
        error: Option<u8>,
    },
    /// Drops the held permit `slot` unrecorded: a cancelled call.
    Drop {
        slot: usize,
    },
    /// Moves the manual clock forward.
    Advance(Duration),
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
}

/// The error text the harness uses for `error: Some(n)`.
pub(crate) fn error_text(n: u8) -> String {
    format!("dependency error #{n}")
}

/// A permit the model knows to be held.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    pub(crate) generation: u64,
    pub(crate) probe: bool,
    pub(crate) start: u64,
}

/// One outcome written to the window, with the time it was recorded.
#[derive(Clone, Copy, Debug)]
struct Record {
    at: u64,
    failed: bool,
    slow: bool,
}

/// What the last admission attempt gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    Admitted {
        probe: bool,
    },
    Rejected {
        state: State,
        retry_after: Option<Duration>,
    },
}

/// The whole expected state of one breaker.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub(crate) params: Params,
    /// Manual clock reading, in nanoseconds.
    pub(crate) now: u64,
    pub(crate) state: State,
    pub(crate) generation: u64,
    opened_at: u64,
    open_wait: Duration,
    /// When the current HALF_OPEN round last made progress: its start
    /// (entry or restart), or its latest probe admission or settlement.
    round_progress_at: u64,
    failed_rounds: u32,
    pub(crate) probes: ProbeCounters,
    /// Everything written to the window since it was last emptied.
    records: Vec<Record>,
    pub(crate) last_failure: Option<String>,
    pub(crate) held: Vec<Held>,
    /// Events of the last step, in order.
    pub(crate) events: Vec<Ev>,
    /// Admission results of the last step.
    pub(crate) admits: Vec<Admit>,
    /// Whether this case has been in HALF_OPEN.
    pub(crate) reached_half_open: bool,
    /// Stalled rounds abandoned in this case (D7).
    pub(crate) restarts: u32,
    /// D8: 0 during the single probe, then the 1-based stage.
    stage: usize,
    /// D8: the stage's admission credit, in millionths of a call.
    credit: u64,
    /// Whether this case has passed a single probe into a stage (D8).
    pub(crate) reached_stage: bool,
}

impl Model {
    pub(crate) fn new(params: Params) -> Self {
        Model {
            now: 0,
            state: params.initial,
            generation: 0,
            opened_at: 0,
            open_wait: Duration::from_secs(params.wait_secs),
            round_progress_at: 0,
            failed_rounds: 0,
            probes: ProbeCounters::default(),
            records: Vec::new(),
            last_failure: None,
            held: Vec::new(),
            events: Vec::new(),
            admits: Vec::new(),
            reached_half_open: false,
            restarts: 0,
            stage: 0,
            credit: 0,
            reached_stage: false,
            params,
        }
    }

    /// Applies one step.
    pub(crate) fn step(&mut self, op: &Op) {
        self.events.clear();
        self.admits.clear();
        match *op {
            Op::Call {
                verdict,
                took,
                error,
            } => {
                if let Some(held) = self.acquire() {
                    self.now += nanos(took);
                    self.settle(held, verdict, error);
                }
            }
            Op::Acquire => {
                if let Some(held) = self.acquire() {
                    self.held.push(held);
                }
            }
            Op::Settle {
                slot,
                verdict,
                error,
            } => {
                let held = self.held.remove(slot);
                self.settle(held, verdict, error);
            }
            Op::Drop { slot } => {
                let held = self.held.remove(slot);
                self.cancel(held);
            }
            Op::Advance(d) => self.now += nanos(d),
            Op::ForceOpen => self.operator(State::ForcedOpen),
            Op::Disable => self.operator(State::Disabled),
            Op::MetricsOnly => self.operator(State::MetricsOnly),
            Op::Reset => {
                let before = self.state;
                self.close();
                if before != State::Closed {
                    self.events.push(Ev::Changed(before, State::Closed));
                }
                self.last_failure = None;
                self.events.push(Ev::Reset);
            }
        }
        if self.state == State::HalfOpen {
            self.reached_half_open = true;
        }
    }

    /// When the current OPEN period ends.
    fn open_until(&self) -> u64 {
        self.opened_at.saturating_add(nanos(self.open_wait))
    }

    /// R6.2: only a local OPEN has a retry time, zero once it passed.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        if self.state == State::Open {
            Some(Duration::from_nanos(
                self.open_until().saturating_sub(self.now),
            ))
        } else {
            None
        }
    }

    /// R6: admission by state.
    fn acquire(&mut self) -> Option<Held> {
        let admitted = match self.state {
            State::Closed | State::Disabled | State::MetricsOnly => Some(false),
            State::ForcedOpen => None,
            State::Open => {
                if self.now >= self.open_until() {
                    // R6 / R8.1: lazy move; this call is the first probe.
                    self.generation += 1;
                    self.state = State::HalfOpen;
                    self.probes = ProbeCounters::default();
                    self.stage = 0;
                    self.credit = 0;
                    self.round_progress_at = self.now;
                    self.events.push(Ev::Changed(State::Open, State::HalfOpen));
                    self.probes.admitted = 1;
                    self.probes.in_flight = 1;
                    Some(true)
                } else {
                    None
                }
            }
            State::HalfOpen if self.stage > 0 => {
                // D8: a stage admits its share by credit; D7: calls out
                // with no progress for the bound become inconclusive.
                if self.round_stalled() {
                    self.restarts += 1;
                    let lost = self.probes.in_flight;
                    self.probes.in_flight = 0;
                    self.probes.admitted -= lost;
                    self.probes.inconclusive += lost;
                    self.round_progress_at = self.now;
                    self.generation += 1;
                }
                self.credit += u64::from(self.stages()[self.stage - 1]);
                if self.credit >= 1_000_000 {
                    self.credit -= 1_000_000;
                    self.probes.admitted += 1;
                    self.probes.in_flight += 1;
                    self.round_progress_at = self.now;
                    Some(true)
                } else {
                    None
                }
            }
            State::HalfOpen => {
                if self.round_stalled() {
                    // D7: the probes still out never reported back. They
                    // count as inconclusive now, in a new generation (their
                    // late outcomes are stale), and R9.4 / R9.5 apply.
                    self.restarts += 1;
                    let lost = self.probes.in_flight;
                    self.probes.in_flight = 0;
                    self.probes.admitted -= lost;
                    self.probes.inconclusive += lost;
                    self.round_progress_at = self.now;
                    if self.probes.inconclusive >= self.budget() {
                        self.failed_rounds += 1;
                        self.trip(State::HalfOpen);
                    } else {
                        self.generation += 1; // no event: still HALF_OPEN
                    }
                }
                if self.state == State::HalfOpen && self.probe_slot_free() {
                    self.probes.admitted += 1;
                    self.probes.in_flight += 1;
                    self.round_progress_at = self.now;
                    Some(true)
                } else {
                    None
                }
            }
        };
        match admitted {
            Some(probe) => {
                self.admits.push(Admit::Admitted { probe });
                Some(Held {
                    generation: self.generation,
                    probe,
                    start: self.now,
                })
            }
            None => {
                let retry_after = self.retry_after();
                self.events.push(Ev::Rejected(self.state));
                self.admits.push(Admit::Rejected {
                    state: self.state,
                    retry_after,
                });
                None
            }
        }
    }

    fn settle(&mut self, held: Held, verdict: Verdict, error: Option<u8>) {
        let took = self.now - held.start;
        let failed = verdict != Verdict::Success;
        let slow = Duration::from_nanos(took) >= self.params.slow_call;
        let outcome = match (failed, slow) {
            (false, false) => Outcome::Success,
            (true, false) => Outcome::Failure,
            (false, true) => Outcome::SlowSuccess,
            (true, true) => Outcome::SlowFailure,
        };
        // R11.3: any failure with an error is remembered, stale ones too.
        if let (Some(n), true) = (error, failed) {
            self.last_failure = Some(error_text(n));
        }
        // R13.4: the call is reported first, then what it caused.
        self.events
            .push(Ev::Call(outcome, Duration::from_nanos(took)));
        if held.generation != self.generation {
            return; // R8.8: a call of another era changes nothing
        }
        match self.state {
            State::Closed => {
                self.records.push(Record {
                    at: self.now,
                    failed,
                    slow,
                });
                let s = self.snapshot();
                let gated = s.total_calls >= u64::from(self.params.minimum_calls);
                let by_policy = match self.params.trip {
                    TripKind::Rate => {
                        gated
                            && ratio(s.failed_calls, s.total_calls) >= self.params.failure_threshold
                    }
                    TripKind::Consecutive(n) => self.failures_in_a_row() >= n,
                    TripKind::Within(n, period) => self.failures_within(period) >= n,
                };
                let by_slowness =
                    gated && ratio(s.slow_calls, s.total_calls) >= self.params.slow_threshold;
                if by_policy || by_slowness {
                    self.trip(State::Closed);
                }
            }
            State::MetricsOnly => self.records.push(Record {
                at: self.now,
                failed,
                slow,
            }),
            State::HalfOpen => {
                self.probes.in_flight -= 1;
                self.round_progress_at = self.now; // a settlement is progress
                if verdict == Verdict::Inconclusive && self.stage > 0 {
                    // D8: no verdict, and never a decision.
                    self.probes.admitted -= 1;
                    self.probes.inconclusive += 1;
                    return;
                }
                if verdict == Verdict::Inconclusive {
                    // R9.3: no verdict, slot back. R9.4 (2.8.2): enough of
                    // them re-open, once no probe of the round is in flight;
                    // R9.5: as a failed round.
                    self.probes.admitted -= 1;
                    self.probes.inconclusive += 1;
                    if self.probes.inconclusive >= self.budget() && self.probes.in_flight == 0 {
                        self.failed_rounds += 1;
                        self.trip(State::HalfOpen);
                    }
                    return;
                }
                self.probes.completed += 1;
                if failed {
                    self.probes.failures += 1;
                }
                if slow {
                    self.probes.slows += 1;
                }
                let decision = match self.params.half_open {
                    HalfOpenKind::Progressive { minimum, .. } => {
                        let bad = if self.stage == 0 {
                            Some(failed || slow)
                        } else if self.probes.completed < minimum {
                            None
                        } else {
                            let done = u64::from(self.probes.completed);
                            Some(
                                ratio(u64::from(self.probes.failures), done)
                                    >= self.params.failure_threshold
                                    || ratio(u64::from(self.probes.slows), done)
                                        >= self.params.slow_threshold,
                            )
                        };
                        if bad == Some(false) && self.stage < self.stages().len() {
                            // The next stage: fresh counts and credit, a new
                            // generation (no event: still HALF_OPEN).
                            self.stage += 1;
                            self.reached_stage = true;
                            self.credit = 0;
                            self.probes = ProbeCounters::default();
                            self.generation += 1;
                            None
                        } else {
                            bad
                        }
                    }
                    HalfOpenKind::ProbeRound => {
                        if self.probes.completed >= self.params.permitted {
                            let done = u64::from(self.probes.completed);
                            Some(
                                ratio(u64::from(self.probes.failures), done)
                                    >= self.params.failure_threshold
                                    || ratio(u64::from(self.probes.slows), done)
                                        >= self.params.slow_threshold,
                            )
                        } else {
                            None
                        }
                    }
                    // Every verdict so far was good, or the round would be
                    // over: `completed` is the run of good probes.
                    HalfOpenKind::Successes(n) => {
                        if failed || slow {
                            Some(true)
                        } else if self.probes.completed >= n {
                            Some(false)
                        } else {
                            None
                        }
                    }
                };
                match decision {
                    Some(true) => {
                        self.failed_rounds += 1; // R10.2
                        self.trip(State::HalfOpen);
                    }
                    Some(false) => {
                        self.close();
                        self.events
                            .push(Ev::Changed(State::HalfOpen, State::Closed));
                    }
                    None => {}
                }
            }
            State::Open | State::ForcedOpen | State::Disabled => {}
        }
    }

    /// The failures at the end of the record list. Every record since the
    /// breaker last entered CLOSED is a CLOSED one: METRICS_ONLY records can
    /// only be followed by CLOSED ones after `reset()` empties the list.
    fn failures_in_a_row(&self) -> u32 {
        let run = self.records.iter().rev().take_while(|r| r.failed).count();
        u32::try_from(run).unwrap_or(u32::MAX)
    }

    /// Recorded failures at most `period` old, both ends inclusive.
    fn failures_within(&self, period: Duration) -> u32 {
        let period = nanos(period);
        let count = self
            .records
            .iter()
            .filter(|r| r.failed && self.now - r.at <= period)
            .count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// R8.6: both caps have room.
    fn probe_slot_free(&self) -> bool {
        self.probes.in_flight < self.params.max_concurrent && self.probes.admitted < self.budget()
    }

    /// A round's probes: `permitted`, or one under progressive recovery.
    fn budget(&self) -> u32 {
        match self.params.half_open {
            HalfOpenKind::Progressive { .. } => 1,
            _ => self.params.permitted,
        }
    }

    /// The progressive stages' shares (empty for other policies).
    fn stages(&self) -> &'static [u32] {
        match self.params.half_open {
            HalfOpenKind::Progressive { set, .. } => STAGE_SETS[set],
            _ => &[],
        }
    }

    /// Whether admission is held up: no free slot in a round, calls out in
    /// a stage (D7 and D8).
    fn held_up(&self) -> bool {
        if self.stage > 0 {
            self.probes.in_flight > 0
        } else {
            !self.probe_slot_free()
        }
    }

    /// D7, under every policy: no free slot (either cap) and no probe
    /// admitted or settled for `max_wait_in_half_open`.
    fn round_stalled(&self) -> bool {
        match self.stall_bound() {
            Some(bound) => self.held_up() && self.now - self.round_progress_at >= bound,
            None => false,
        }
    }

    /// `max_wait_in_half_open` in nanoseconds; `None` for never.
    fn stall_bound(&self) -> Option<u64> {
        match self.params.max_wait {
            None => Some(self.params.wait_secs * NANOS_PER_SEC),
            Some(Duration::MAX) => None,
            Some(d) => Some(nanos(d)),
        }
    }

    /// R4.5 / R8.9: a cancelled probe of this round gives its slot back.
    fn cancel(&mut self, held: Held) {
        if held.probe && held.generation == self.generation && self.state == State::HalfOpen {
            self.probes.in_flight -= 1;
            self.probes.admitted -= 1;
        }
    }

    /// R7.4 / R8.5: OPEN from now, for the backed-off wait (R10).
    fn trip(&mut self, from: State) {
        self.generation += 1;
        self.state = State::Open;
        self.opened_at = self.now;
        self.open_wait = self.wait_for(self.failed_rounds);
        self.events.push(Ev::Changed(from, State::Open));
    }

    /// R10.1: `min(base * mult^min(n, 64), max)`, in whole seconds.
    fn wait_for(&self, rounds: u32) -> Duration {
        let mut secs = u128::from(self.params.wait_secs);
        for _ in 0..rounds.min(64) {
            secs = secs.saturating_mul(u128::from(self.params.multiplier));
        }
        let wait = u64::try_from(secs)
            .map(Duration::from_secs)
            .unwrap_or(Duration::MAX);
        match self.params.wait_max_secs {
            Some(max) => wait.min(Duration::from_secs(max)),
            None => wait,
        }
    }

    /// R5.3 / R8.4 / R11.2: CLOSED with an empty window and no backoff.
    fn close(&mut self) {
        self.generation += 1;
        self.state = State::Closed;
        self.records.clear();
        self.failed_rounds = 0;
        self.probes = ProbeCounters::default();
    }

    /// R11.1: overrides move the generation even when repeated.
    fn operator(&mut self, to: State) {
        let before = self.state;
        self.generation += 1;
        self.state = to;
        self.probes = ProbeCounters::default();
        if before != to {
            self.events.push(Ev::Changed(before, to));
        }
    }

    /// The window's totals now (R5.1, R5.2).
    pub(crate) fn snapshot(&self) -> Snapshot {
        let counted: Vec<Record> = match self.params.window {
            WindowKind::Count(n) => {
                let skip = self.records.len().saturating_sub(n as usize);
                self.records[skip..].to_vec()
            }
            WindowKind::Time(n) => {
                let current = self.now / NANOS_PER_SEC;
                let oldest = (current + 1).saturating_sub(u64::from(n));
                self.records
                    .iter()
                    .filter(|r| {
                        let second = r.at / NANOS_PER_SEC;
                        second >= oldest && second <= current
                    })
                    .copied()
                    .collect()
            }
        };
        Snapshot {
            total_calls: counted.len() as u64,
            failed_calls: counted.iter().filter(|r| r.failed).count() as u64,
            slow_calls: counted.iter().filter(|r| r.slow).count() as u64,
        }
    }

    /// How long until the oldest failure that still counts for a
    /// `failures_within` policy stops counting (zero: it is exactly a period
    /// old now), for steering clock advances.
    pub(crate) fn until_oldest_failure_expires(&self) -> Option<u64> {
        let TripKind::Within(_, period) = self.params.trip else {
            return None;
        };
        if self.state != State::Closed {
            return None;
        }
        let period = nanos(period);
        self.records
            .iter()
            .find(|r| r.failed && self.now - r.at <= period)
            .map(|r| r.at + period - self.now)
    }

    /// How long until a held-up round may be abandoned (D7), for steering
    /// clock advances.
    pub(crate) fn until_round_restart(&self) -> Option<u64> {
        let bound = self.stall_bound()?;
        (self.state == State::HalfOpen)
            .then(|| (self.round_progress_at + bound).saturating_sub(self.now))
    }

    /// Whether a round has no free slot (only time or a settlement can
    /// move it on), for steering.
    pub(crate) fn round_held_up(&self) -> bool {
        self.until_round_restart().is_some() && self.held_up()
    }

    /// The OPEN deadline, for steering clock advances.
    pub(crate) fn remaining_wait(&self) -> Option<u64> {
        (self.state == State::Open).then(|| self.open_until().saturating_sub(self.now))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// R1.3: a plain IEEE division, zero for an empty denominator.
fn ratio(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}
