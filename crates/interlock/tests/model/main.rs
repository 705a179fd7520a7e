//! Model-based test: generated sequences of calls, held and dropped permits,
//! clock advances and operator actions, over configs drawn across every
//! trip and half-open policy, run against a real
//! [`CircuitBreaker`] and against the independent model in `reference.rs`,
//! compared after every step.
//!
//! Every case also drives a twin: the same breaker built WITHOUT a listener,
//! on its own manual clock moved in step. Without listeners a plain success
//! takes the lock-free paths (the quiet bit, and the success lanes of
//! `breaker/tally.rs`, issue 22), which a listener turns off; the twin must
//! match the model in everything but the events (R4–R8 on the lock-free
//! path).
//!
//! `PROPTEST_CASES` sets the number of cases (default 10,000).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod reference;

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CircuitBreaker, Config, Event, HalfOpenPolicy, ManualClock, Permit, SlidingWindow, State,
    TripPolicy, Verdict,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use proptest_state_machine::{ReferenceStateMachine, StateMachineTest};

use reference::{
    Admit, Ev, HalfOpenKind, Model, Op, Params, STAGE_SETS, TripKind, WindowKind, error_text,
};

const DEFAULT_CASES: u32 = 10_000;
const MAX_STEPS: usize = 48;

// ---------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------

fn params() -> impl Strategy<Value = Params> {
    let window = prop_oneof![
        (1u32..=5).prop_map(WindowKind::Count),
        (1u32..=5).prop_map(WindowKind::Time),
    ];
    let thresholds = (
        prop::sample::select(vec![0.2, 0.25, 0.5, 0.75, 1.0]),
        prop::sample::select(vec![0.25, 0.5, 1.0]),
    );
    // `max_wait_in_half_open`: mostly following the base wait (the
    // default), else its own 1–8 s, now and then never (D7).
    let max_wait = prop_oneof![
        3 => Just(None),
        2 => (1u64..=8).prop_map(|s| Some(Duration::from_secs(s))),
        1 => Just(Some(Duration::MAX)),
    ];
    let waits = (
        max_wait,
        1u64..=8,
        prop::sample::select(vec![1u32, 1, 2, 3]),
        prop::option::of(0u64..=40),
    );
    // A round's size, its concurrency cap and its policy (consecutive
    // successes cannot ask for more than the round's slots).
    let rounds = (1u32..=4).prop_flat_map(|p| {
        (
            Just(p),
            1..=p,
            prop_oneof![
                Just(HalfOpenKind::ProbeRound),
                (1..=p).prop_map(HalfOpenKind::Successes),
                (0..STAGE_SETS.len(), 1u32..=3)
                    .prop_map(|(set, minimum)| HalfOpenKind::Progressive { set, minimum }),
            ],
        )
    });
    let trip = prop_oneof![
        2 => Just(TripKind::Rate),
        1 => (1u32..=4).prop_map(TripKind::Consecutive),
        1 => (
            1u32..=4,
            prop::sample::select(vec![
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_millis(2500),
                Duration::from_secs(4),
            ]),
        )
            .prop_map(|(n, period)| TripKind::Within(n, period)),
    ];
    let initial = prop::sample::select(vec![
        State::Closed,
        State::Closed,
        State::Closed,
        State::Closed,
        State::Closed,
        State::Closed,
        State::MetricsOnly,
        State::Disabled,
        State::ForcedOpen,
    ]);
    (
        window,
        0u32..5,
        thresholds,
        prop::sample::select(vec![500u64, 1000, 2500]),
        waits,
        rounds,
        prop::bool::weighted(0.2),
        initial,
        trip,
    )
        .prop_map(
            |(
                window,
                min_seed,
                (failure_threshold, slow_threshold),
                slow_ms,
                (max_wait, wait, multiplier, max_extra),
                (permitted, max_concurrent, half_open),
                auto_transition,
                initial,
                trip,
            )| {
                let size = match window {
                    WindowKind::Count(n) | WindowKind::Time(n) => n,
                };
                // Auto-transition timers run on real time: a long wait keeps
                // them from ever firing inside a case (the clock is manual).
                let wait_secs = if auto_transition { wait + 600 } else { wait };
                Params {
                    window,
                    minimum_calls: 1 + min_seed % size,
                    failure_threshold,
                    slow_threshold,
                    slow_call: Duration::from_millis(slow_ms),
                    wait_secs,
                    multiplier,
                    wait_max_secs: max_extra.map(|extra| wait_secs + extra),
                    max_wait,
                    permitted,
                    max_concurrent,
                    auto_transition,
                    initial,
                    trip,
                    half_open,
                }
            },
        )
}

/// Verdicts, leaning towards failures while CLOSED so that most cases trip.
fn verdict(state: State) -> impl Strategy<Value = Verdict> {
    let failure = if state == State::HalfOpen { 4 } else { 6 };
    prop_oneof![
        failure => Just(Verdict::Failure),
        4 => Just(Verdict::Success),
        1 => Just(Verdict::Inconclusive),
    ]
}

fn error() -> impl Strategy<Value = Option<u8>> {
    prop::option::weighted(0.5, 0u8..4)
}

/// How long a call runs: often exactly at the slow threshold's edges.
fn took(slow: Duration) -> BoxedStrategy<Duration> {
    let ns = u64::try_from(slow.as_nanos()).unwrap_or(u64::MAX);
    prop_oneof![
        4 => Just(Duration::ZERO),
        1 => Just(Duration::from_nanos(ns - 1)),
        2 => Just(slow),
        1 => (0..3 * ns).prop_map(Duration::from_nanos),
    ]
    .boxed()
}

/// Clock advances, steered onto the OPEN deadline, second boundaries and
/// the edges of the count-based policies' periods.
fn advance(model: &Model) -> BoxedStrategy<Duration> {
    let to_next_second = 1_000_000_000 - model.now % 1_000_000_000;
    let mut choices: Vec<(u32, BoxedStrategy<Duration>)> = vec![
        (
            2,
            (1u64..3_000_000_000).prop_map(Duration::from_nanos).boxed(),
        ),
        (1, Just(Duration::from_nanos(to_next_second)).boxed()),
        (1, Just(Duration::from_secs(1)).boxed()),
    ];
    if let Some(left) = model.remaining_wait() {
        if left > 0 {
            choices.push((6, Just(Duration::from_nanos(left)).boxed()));
            choices.push((1, Just(Duration::from_nanos(left - 1)).boxed()));
        }
    }
    // `failures_within`: onto the last instant the oldest counted failure
    // still counts, and just past it.
    if let Some(left) = model.until_oldest_failure_expires() {
        if left > 0 {
            choices.push((2, Just(Duration::from_nanos(left)).boxed()));
        }
        choices.push((2, Just(Duration::from_nanos(left + 1)).boxed()));
    }
    // Onto the moment a held-up round may be abandoned (D7), under every
    // policy. Heavily so once every slot is taken.
    if let Some(left) = model.until_round_restart() {
        if left > 0 {
            let weight = if model.round_held_up() { 30 } else { 2 };
            choices.push((weight, Just(Duration::from_nanos(left)).boxed()));
            choices.push((1, Just(Duration::from_nanos(left - 1)).boxed()));
        }
    }
    prop::strategy::Union::new_weighted(choices).boxed()
}

struct BreakerModel;

impl ReferenceStateMachine for BreakerModel {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        params().prop_map(Model::new).boxed()
    }

    fn transitions(model: &Model) -> BoxedStrategy<Op> {
        let slow = model.params.slow_call;
        let held = model.held.len();
        let call =
            (verdict(model.state), took(slow), error()).prop_map(|(verdict, took, error)| {
                Op::Call {
                    verdict,
                    took,
                    error,
                }
            });
        let mut choices: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (40, call.boxed()),
            (
                if model.state == State::HalfOpen {
                    16
                } else {
                    10
                },
                Just(Op::Acquire).boxed(),
            ),
            (
                if model.state == State::Open || model.round_held_up() {
                    40
                } else {
                    12
                },
                advance(model).prop_map(Op::Advance).boxed(),
            ),
            (1, Just(Op::ForceOpen).boxed()),
            (1, Just(Op::Disable).boxed()),
            (1, Just(Op::MetricsOnly).boxed()),
            (2, Just(Op::Reset).boxed()),
        ];
        if held > 0 {
            choices.push((
                14,
                (0..held, verdict(model.state), error())
                    .prop_map(|(slot, verdict, error)| Op::Settle {
                        slot,
                        verdict,
                        error,
                    })
                    .boxed(),
            ));
            choices.push((4, (0..held).prop_map(|slot| Op::Drop { slot }).boxed()));
        }
        prop::strategy::Union::new_weighted(choices).boxed()
    }

    fn preconditions(model: &Model, op: &Op) -> bool {
        match *op {
            Op::Settle { slot, .. } | Op::Drop { slot } => slot < model.held.len(),
            _ => true,
        }
    }

    fn apply(mut model: Model, op: &Op) -> Model {
        model.step(op);
        model
    }
}

// ---------------------------------------------------------------------------
// The system under test
// ---------------------------------------------------------------------------

struct Sut {
    breaker: CircuitBreaker,
    clock: ManualClock,
    held: Vec<Permit>,
    /// The listener-less twin, its clock and its held permits.
    twin: CircuitBreaker,
    twin_clock: ManualClock,
    twin_held: Vec<Permit>,
    /// Steps so far: the twin's snapshot is compared every fourth step only,
    /// since a snapshot folds the success lanes (so that, in between, the
    /// successes counted there are folded by the failures, rollovers and
    /// transitions that come, as in production).
    steps: usize,
    events: Arc<Mutex<Vec<Ev>>>,
    reached_half_open: bool,
    count_trip: bool,
    successes_policy: bool,
    staged: bool,
    restarted: bool,
}

static CASES: AtomicUsize = AtomicUsize::new(0);
static HALF_OPEN_CASES: AtomicUsize = AtomicUsize::new(0);
static COUNT_TRIP_CASES: AtomicUsize = AtomicUsize::new(0);
static SUCCESSES_CASES: AtomicUsize = AtomicUsize::new(0);
static RESTART_CASES: AtomicUsize = AtomicUsize::new(0);
static STAGE_CASES: AtomicUsize = AtomicUsize::new(0);

fn config(p: &Params) -> Config {
    let builder = Config::builder()
        .sliding_window(match p.window {
            WindowKind::Count(n) => SlidingWindow::count(n),
            WindowKind::Time(n) => SlidingWindow::time(Duration::from_secs(u64::from(n))),
        })
        .minimum_number_of_calls(p.minimum_calls)
        .failure_rate_threshold(p.failure_threshold)
        .slow_call_rate_threshold(p.slow_threshold)
        .slow_call_duration_threshold(p.slow_call)
        .wait_duration_in_open(Duration::from_secs(p.wait_secs))
        .wait_duration_backoff_multiplier(f64::from(p.multiplier))
        .wait_duration_in_open_max(p.wait_max_secs.map(Duration::from_secs));
    let builder = match p.max_wait {
        Some(max) => builder.max_wait_in_half_open(max),
        None => builder,
    };
    builder
        .permitted_calls_in_half_open(p.permitted)
        .max_concurrent_probes(p.max_concurrent)
        .auto_transition(p.auto_transition)
        .trip_policy(match p.trip {
            TripKind::Rate => TripPolicy::FailureRate,
            TripKind::Consecutive(n) => TripPolicy::consecutive_failures(n),
            TripKind::Within(n, period) => TripPolicy::failures_within(n, period),
        })
        .half_open_policy(match p.half_open {
            HalfOpenKind::ProbeRound => HalfOpenPolicy::ProbeRound,
            HalfOpenKind::Successes(n) => HalfOpenPolicy::consecutive_successes(n),
            HalfOpenKind::Progressive { set, minimum } => {
                let shares: Vec<f64> = STAGE_SETS[set]
                    .iter()
                    .map(|&ppm| f64::from(ppm) / 1e6)
                    .collect();
                HalfOpenPolicy::progressive_stages(&shares, minimum)
            }
        })
        .build()
        .expect("generated configs are valid")
}

fn record_event(sink: &Mutex<Vec<Ev>>, event: &Event<'_>) {
    let ev = match *event {
        Event::StateChanged { from, to, .. } => Ev::Changed(from, to),
        Event::CallRecorded {
            outcome, duration, ..
        } => Ev::Call(outcome, duration),
        Event::CallRejected { state, .. } => Ev::Rejected(state),
        Event::Reset { .. } => Ev::Reset,
        _ => panic!("unexpected event {event}"),
    };
    sink.lock().unwrap().push(ev);
}

impl Sut {
    fn new(p: &Params) -> Self {
        let clock = ManualClock::new();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let breaker = CircuitBreaker::builder("model")
            .config(config(p))
            .clock(clock.clone())
            .initial_state(p.initial)
            .listener(move |e: &Event<'_>| record_event(&sink, e))
            .build()
            .expect("valid breaker");
        let twin_clock = ManualClock::new();
        let twin = CircuitBreaker::builder("model-twin")
            .config(config(p))
            .clock(twin_clock.clone())
            .initial_state(p.initial)
            .build()
            .expect("valid breaker");
        Sut {
            breaker,
            clock,
            held: Vec::new(),
            twin,
            twin_clock,
            twin_held: Vec::new(),
            steps: 0,
            events,
            reached_half_open: false,
            count_trip: p.trip != TripKind::Rate,
            successes_policy: matches!(p.half_open, HalfOpenKind::Successes(_)),
            staged: false,
            restarted: false,
        }
    }

    /// Admission, returning what the model calls it.
    fn acquire(&self) -> (Option<Permit>, Admit) {
        Self::acquire_on(&self.breaker)
    }

    fn acquire_on(breaker: &CircuitBreaker) -> (Option<Permit>, Admit) {
        match breaker.acquire() {
            Ok(permit) => {
                let probe = permit.is_probe();
                (Some(permit), Admit::Admitted { probe })
            }
            Err(open) => (
                None,
                Admit::Rejected {
                    state: open.state(),
                    retry_after: open.retry_after(),
                },
            ),
        }
    }

    fn settle(permit: Permit, verdict: Verdict, error: Option<u8>) {
        match error {
            Some(n) => permit.finish_with(verdict, &error_text(n)),
            None => permit.record(verdict),
        }
    }

    fn step(&mut self, op: &Op) -> Vec<Admit> {
        self.steps += 1;
        let mut admits = Vec::new();
        match *op {
            Op::Call {
                verdict,
                took,
                error,
            } => {
                let (permit, admit) = self.acquire();
                admits.push(admit);
                if let Some(permit) = permit {
                    self.clock.advance(took);
                    Self::settle(permit, verdict, error);
                }
            }
            Op::Acquire => {
                let (permit, admit) = self.acquire();
                admits.push(admit);
                self.held.extend(permit);
            }
            Op::Settle {
                slot,
                verdict,
                error,
            } => Self::settle(self.held.remove(slot), verdict, error),
            Op::Drop { slot } => drop(self.held.remove(slot)),
            Op::Advance(d) => self.clock.advance(d),
            Op::ForceOpen => self.breaker.force_open(),
            Op::Disable => self.breaker.disable(),
            Op::MetricsOnly => self.breaker.metrics_only(),
            Op::Reset => self.breaker.reset(),
        }
        if self.breaker.state() == State::HalfOpen {
            self.reached_half_open = true;
        }
        let twin_admits = self.step_twin(op);
        assert_eq!(twin_admits, admits, "twin admission");
        admits
    }

    /// The same step on the listener-less twin.
    fn step_twin(&mut self, op: &Op) -> Vec<Admit> {
        let mut admits = Vec::new();
        let b = &self.twin;
        match *op {
            Op::Call {
                verdict,
                took,
                error,
            } => {
                let (permit, admit) = Self::acquire_on(b);
                admits.push(admit);
                if let Some(permit) = permit {
                    self.twin_clock.advance(took);
                    Self::settle(permit, verdict, error);
                }
            }
            Op::Acquire => {
                let (permit, admit) = Self::acquire_on(b);
                admits.push(admit);
                self.twin_held.extend(permit);
            }
            Op::Settle {
                slot,
                verdict,
                error,
            } => Self::settle(self.twin_held.remove(slot), verdict, error),
            Op::Drop { slot } => drop(self.twin_held.remove(slot)),
            Op::Advance(d) => self.twin_clock.advance(d),
            Op::ForceOpen => b.force_open(),
            Op::Disable => b.disable(),
            Op::MetricsOnly => b.metrics_only(),
            Op::Reset => b.reset(),
        }
        admits
    }

    /// Everything observable must match the model.
    fn check(&self, model: &Model, admits: &[Admit]) {
        let b = &self.breaker;
        assert_eq!(admits, model.admits, "admission");
        let events = std::mem::take(&mut *self.events.lock().unwrap());
        assert_eq!(events, model.events, "listener events, in order");
        assert_eq!(b.state(), model.state, "state");
        assert_eq!(b.generation(), model.generation, "generation");
        assert_eq!(b.snapshot(), model.snapshot(), "snapshot");
        assert_eq!(b.probes(), model.probes, "probe counters");
        assert_eq!(b.retry_after(), model.retry_after(), "retry_after");
        assert_eq!(
            b.last_failure().map(|f| f.message().to_owned()),
            model.last_failure,
            "last_failure"
        );
        assert_eq!(self.held.len(), model.held.len(), "held permits");
        let twin = &self.twin;
        assert_eq!(twin.state(), model.state, "twin state");
        assert_eq!(twin.generation(), model.generation, "twin generation");
        if self.steps % 4 == 0 {
            assert_eq!(twin.snapshot(), model.snapshot(), "twin snapshot");
        }
        assert_eq!(twin.probes(), model.probes, "twin probe counters");
        assert_eq!(twin.retry_after(), model.retry_after(), "twin retry_after");
        assert_eq!(
            twin.last_failure().map(|f| f.message().to_owned()),
            model.last_failure,
            "twin last_failure"
        );
        assert_eq!(self.twin_held.len(), model.held.len(), "twin held permits");
        for (permit, held) in self.held.iter().zip(&model.held) {
            assert_eq!(permit.is_probe(), held.probe, "held permit is a probe");
        }
    }
}

struct BreakerTest;

impl StateMachineTest for BreakerTest {
    type SystemUnderTest = Sut;
    type Reference = BreakerModel;

    fn init_test(model: &Model) -> Sut {
        let sut = Sut::new(&model.params);
        sut.check(model, &[]);
        sut
    }

    fn apply(mut sut: Sut, model: &Model, op: Op) -> Sut {
        let admits = sut.step(&op);
        sut.check(model, &admits);
        sut.restarted |= model.restarts > 0;
        sut.staged |= model.reached_stage;
        sut
    }

    fn teardown(sut: Sut) {
        CASES.fetch_add(1, Ordering::Relaxed);
        for (flag, counter) in [
            (sut.reached_half_open, &HALF_OPEN_CASES),
            (sut.count_trip, &COUNT_TRIP_CASES),
            (sut.successes_policy, &SUCCESSES_CASES),
            (sut.restarted, &RESTART_CASES),
            (sut.staged, &STAGE_CASES),
        ] {
            if flag {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn cases() -> u32 {
    env_u32("PROPTEST_CASES").unwrap_or(DEFAULT_CASES)
}

#[test]
fn breaker_matches_the_reference_model() {
    let config = ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        // `PROPTEST_MAX_SHRINK_ITERS=0` (scripts/mutants) reports a failure
        // at once instead of shrinking it.
        max_shrink_iters: env_u32("PROPTEST_MAX_SHRINK_ITERS").unwrap_or(10_000),
        ..ProptestConfig::default()
    };
    let strategy = BreakerModel::sequential_strategy(1..=MAX_STEPS);
    let mut runner = TestRunner::new(config.clone());
    let result = runner.run(&strategy, |(initial, ops, seen)| {
        BreakerTest::test_sequential(config.clone(), initial, ops, seen);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let cases = CASES.load(Ordering::Relaxed);
    let half_open = HALF_OPEN_CASES.load(Ordering::Relaxed);
    let share = half_open as f64 / cases.max(1) as f64;
    // Written straight to stderr so that it shows in CI logs of passing runs.
    let _ = writeln!(
        std::io::stderr(),
        "model: {cases} cases, {half_open} reached HALF_OPEN ({:.1}%); \
         {} with a count-based trip policy, {} with consecutive successes, \
         {} reached a progressive stage (D8), {} abandoned a stalled round (D7)",
        share * 100.0,
        COUNT_TRIP_CASES.load(Ordering::Relaxed),
        SUCCESSES_CASES.load(Ordering::Relaxed),
        STAGE_CASES.load(Ordering::Relaxed),
        RESTART_CASES.load(Ordering::Relaxed),
    );
    assert!(
        share >= 0.30,
        "only {:.1}% of cases reached HALF_OPEN",
        share * 100.0
    );
}

// ---------------------------------------------------------------------------
// Named regressions: shrunk counterexamples, replayed step by step.
// ---------------------------------------------------------------------------

/// Runs `ops` on both the model and the breaker, comparing after each step.
fn replay(params: Params, ops: &[Op]) {
    let mut model = Model::new(params);
    let mut sut = BreakerTest::init_test(&model);
    for op in ops {
        model.step(op);
        sut = BreakerTest::apply(sut, &model, op.clone());
    }
}

fn base() -> Params {
    Params {
        window: WindowKind::Count(2),
        minimum_calls: 1,
        failure_threshold: 0.5,
        slow_threshold: 1.0,
        slow_call: Duration::from_secs(1),
        wait_secs: 1,
        multiplier: 1,
        wait_max_secs: None,
        max_wait: None,
        permitted: 2,
        max_concurrent: 1,
        auto_transition: false,
        initial: State::Closed,
        trip: TripKind::Rate,
        half_open: HalfOpenKind::ProbeRound,
    }
}

fn call(verdict: Verdict) -> Op {
    Op::Call {
        verdict,
        took: Duration::ZERO,
        error: None,
    }
}

fn settle(slot: usize, verdict: Verdict) -> Op {
    Op::Settle {
        slot,
        verdict,
        error: None,
    }
}

fn secs(s: u64) -> Op {
    Op::Advance(Duration::from_secs(s))
}

#[test]
fn regression_inconclusive_probes_reopen_as_a_failed_round() {
    // R9.4 / R9.5 / D3 (revised after 2.8.2): `permitted` inconclusive
    // probes re-open as a failed round: the wait doubles to 2 s, and the
    // next failed round waits 4 s.
    let params = Params {
        multiplier: 2,
        ..base()
    };
    let mut ops = vec![call(Verdict::Failure), secs(1)];
    ops.extend([call(Verdict::Inconclusive), call(Verdict::Inconclusive)]);
    ops.extend([secs(1), call(Verdict::Failure)]); // still OPEN: wait is 2 s
    let failed_round = [secs(1), call(Verdict::Failure), call(Verdict::Failure)];
    ops.extend(failed_round); // the second failed round: 4 s
    ops.extend([secs(3), call(Verdict::Success)]); // still OPEN
    ops.extend([secs(1), call(Verdict::Success)]); // a probe
    replay(params, &ops);
}

#[test]
fn regression_r9_4_inconclusive_probes_wait_for_the_probe_in_flight() {
    // The 2.8.2 trace of R9.4: the second inconclusive probe reaches the
    // budget while `c` runs, so the round goes on; `c` and the next call
    // succeed and the round closes.
    let params = Params {
        window: WindowKind::Count(1),
        permitted: 2,
        max_concurrent: 2,
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,                      // a
        Op::Acquire,                      // b
        settle(0, Verdict::Inconclusive), // a
        Op::Acquire,                      // c
        settle(0, Verdict::Inconclusive), // b: c is in flight
        settle(0, Verdict::Success),      // c
        call(Verdict::Success),           // CLOSED
    ];
    replay(params, &ops);
}

#[test]
fn regression_d7_a_hung_probe_of_a_probe_round_is_abandoned_after_max_wait() {
    // D7 under the default policy: the only concurrency slot is held; a
    // whole `max_wait_in_half_open` (3 s here, not the 1 s base wait) after
    // the last progress the hung probe counts as inconclusive, the round
    // goes on in a new generation and the late failure is stale.
    let params = Params {
        permitted: 2,
        max_concurrent: 1,
        max_wait: Some(Duration::from_secs(3)),
        slow_call: Duration::from_secs(100),
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,
        call(Verdict::Success), // refused: the slot is held
        Op::Advance(Duration::from_nanos(2_999_999_999)),
        call(Verdict::Success), // still refused
        Op::Advance(Duration::from_nanos(1)),
        call(Verdict::Success),      // abandoned: this call is a probe
        settle(0, Verdict::Failure), // stale
        call(Verdict::Success),      // 2 verdicts + 1 inconclusive: CLOSED
    ];
    replay(params, &ops);
}

#[test]
fn regression_d7_never_abandons_with_duration_max() {
    let params = Params {
        permitted: 1,
        max_wait: Some(Duration::MAX),
        slow_call: Duration::from_secs(1_000_000),
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,
        secs(365 * 24 * 3600),
        call(Verdict::Success), // still refused
        settle(0, Verdict::Success),
    ];
    replay(params, &ops);
}

#[test]
fn regression_backoff_is_capped_and_reset_by_a_passing_round() {
    // R10.1–R10.3: 1 s, then 3 s, 9 s capped at 5 s; a passing round resets.
    let params = Params {
        multiplier: 3,
        wait_max_secs: Some(5),
        permitted: 1,
        ..base()
    };
    let mut ops = vec![call(Verdict::Failure)];
    for wait in [1, 3, 5, 5] {
        ops.extend([secs(wait), call(Verdict::Failure)]);
    }
    ops.extend([secs(5), call(Verdict::Success), call(Verdict::Failure)]);
    replay(params, &ops);
}

#[test]
fn regression_stale_probe_after_reset_and_new_round() {
    // R8.8: a probe held across reset() and a whole new round settles into
    // nothing; dropping a stale probe hands back nothing (R8.9).
    let params = Params {
        permitted: 2,
        max_concurrent: 2,
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,
        Op::Acquire,
        Op::Reset,
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,
        settle(0, Verdict::Failure),
        Op::Drop { slot: 0 },
        settle(0, Verdict::Success),
    ];
    replay(params, &ops);
}

#[test]
fn regression_time_window_bucket_edges() {
    // R5.2: a call at t = 0.9 s counts until t < 2.0 s in a 2 s window, and
    // a slow call is timed inclusively at the threshold (R4.3).
    let params = Params {
        window: WindowKind::Time(2),
        minimum_calls: 2,
        failure_threshold: 1.0,
        ..base()
    };
    let ops = vec![
        Op::Advance(Duration::from_millis(900)),
        call(Verdict::Failure),
        Op::Advance(Duration::from_millis(1099)),
        Op::Call {
            verdict: Verdict::Success,
            took: Duration::from_secs(1),
            error: Some(1),
        },
        Op::Advance(Duration::from_nanos(1)),
        call(Verdict::Failure),
        call(Verdict::Failure),
    ];
    replay(params, &ops);
}

#[test]
fn regression_overrides_repeat_and_keep_the_window() {
    // R11.1: a repeated override moves the generation but emits nothing;
    // METRICS_ONLY counts without tripping; last_failure survives all but
    // reset() (R11.3).
    let params = Params {
        initial: State::MetricsOnly,
        ..base()
    };
    let ops = vec![
        Op::Call {
            verdict: Verdict::Failure,
            took: Duration::ZERO,
            error: Some(3),
        },
        Op::MetricsOnly,
        Op::Disable,
        call(Verdict::Failure),
        Op::ForceOpen,
        Op::ForceOpen,
        Op::Acquire,
        Op::Reset,
        Op::Reset,
    ];
    replay(params, &ops);
}

#[test]
fn regression_concurrency_cap_frees_one_slot_per_settle() {
    // R8.6: with 3 permitted and 2 at once, a settle frees one slot, a
    // cancel frees a slot and a budget unit; the round ends at the third
    // verdict.
    let params = Params {
        permitted: 3,
        max_concurrent: 2,
        failure_threshold: 0.5,
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(1),
        Op::Acquire,
        Op::Acquire,
        Op::Acquire,
        settle(0, Verdict::Success),
        Op::Acquire,
        Op::Drop { slot: 1 },
        Op::Acquire,
        Op::Acquire,
        settle(0, Verdict::Failure),
        settle(0, Verdict::Success),
        Op::Acquire,
    ];
    replay(params, &ops);
}

#[test]
fn regression_failures_within_counts_a_failure_exactly_one_period_old() {
    // Both ends of the period are inclusive: a failure 1 s old still
    // counts for a 1 s period, one a nanosecond older does not; successes
    // in between change nothing.
    let params = Params {
        trip: TripKind::Within(2, Duration::from_secs(1)),
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        call(Verdict::Success),
        Op::Advance(Duration::from_nanos(1_000_000_001)),
        call(Verdict::Failure), // the first is too old now
        secs(1),
        call(Verdict::Success),
        call(Verdict::Failure), // exactly 1 s after the second: trips
    ];
    replay(params, &ops);
}

#[test]
fn regression_consecutive_failures_are_reset_by_a_slow_success() {
    // A slow success is not a failure: it ends the run. The slow-call rule
    // still applies on its own (R7.3).
    let params = Params {
        trip: TripKind::Consecutive(2),
        minimum_calls: 2,
        window: WindowKind::Count(3),
        ..base()
    };
    let slow_success = Op::Call {
        verdict: Verdict::Success,
        took: Duration::from_secs(1),
        error: None,
    };
    let ops = vec![
        call(Verdict::Failure),
        slow_success,
        call(Verdict::Failure),
        call(Verdict::Inconclusive), // counts as a failure when CLOSED (R9.2)
    ];
    replay(params, &ops);
}

#[test]
fn regression_a_held_up_consecutive_successes_round_reopens_after_one_wait() {
    // D7: every slot taken and no verdict: refused until a whole base wait
    // after the round's last progress (here its last admission); then both
    // lost probes count as inconclusive, which is the whole budget: the
    // round re-opens as a failed round (R9.4, R9.5), and the lost probes'
    // outcomes are stale.
    let params = Params {
        half_open: HalfOpenKind::Successes(2),
        permitted: 2,
        max_concurrent: 2,
        wait_secs: 2,
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(2),
        Op::Acquire,
        Op::Acquire,
        call(Verdict::Success), // refused: both slots held
        Op::Advance(Duration::from_nanos(1_999_999_999)),
        call(Verdict::Success), // still refused
        Op::Advance(Duration::from_nanos(1)),
        call(Verdict::Success), // abandoned: re-opened, refused for 2 s
        settle(0, Verdict::Failure),
        Op::Drop { slot: 0 },
        secs(2),
        call(Verdict::Success), // a new round: probe 1 of 2
        call(Verdict::Success), // second good probe: CLOSED
    ];
    replay(params, &ops);
}

#[test]
fn regression_a_hung_probe_holding_the_only_concurrency_slot_is_abandoned() {
    // D7: no free slot by either cap. One probe of 2 permitted holds the
    // only concurrency slot; a whole base wait without progress later it
    // counts as inconclusive, the round goes on in a new generation, and
    // the hung probe's success is stale.
    let params = Params {
        half_open: HalfOpenKind::Successes(2),
        permitted: 2,
        max_concurrent: 1,
        wait_secs: 2,
        ..base()
    };
    let ops = vec![
        call(Verdict::Failure),
        secs(2),
        Op::Acquire,
        call(Verdict::Success), // refused: the concurrency slot is held
        Op::Advance(Duration::from_nanos(1_999_999_999)),
        call(Verdict::Success), // still refused
        Op::Advance(Duration::from_nanos(1)),
        call(Verdict::Success),      // abandoned: probe 1 of 2
        settle(0, Verdict::Success), // stale
        call(Verdict::Success),      // second good probe: CLOSED
    ];
    replay(params, &ops);
}

#[test]
fn regression_a_consecutive_successes_round_that_keeps_settling_is_not_abandoned() {
    // D7 counts from the last admission or settlement: probes settling one
    // at a time keep a round alive past a wait after its start.
    let params = Params {
        half_open: HalfOpenKind::Successes(3),
        permitted: 3,
        max_concurrent: 1,
        wait_secs: 2,
        slow_call: Duration::from_secs(10), // held probes are not slow
        ..base()
    };
    let almost = Op::Advance(Duration::from_nanos(1_999_999_999));
    let ops = vec![
        call(Verdict::Failure),
        secs(2),
        Op::Acquire,
        almost.clone(),
        settle(0, Verdict::Success),
        Op::Acquire,
        almost.clone(),
        call(Verdict::Success), // refused, not abandoned
        settle(0, Verdict::Success),
        Op::Acquire,
        almost,
        call(Verdict::Success), // refused: every slot admitted, not abandoned
        settle(0, Verdict::Success), // the third in a row: CLOSED
    ];
    replay(params, &ops);
}
