//! Differential test against the released original, interlock-cb 2.8.2:
//! generated scenarios of calls, held and cancelled blocks, clock advances
//! and operator actions run on a local breaker of each library, compared
//! after every step (admission and `retry_after`, state, generation,
//! window counts, the breaker's `retry_after`, the last failure, and the
//! listener's events).
//!
//! Each scenario runs six times on interlock: its whole calls through
//! `acquire` and the permit, through `call` (errors through a classifier,
//! as 2.8.2's `unreachable_exceptions`) and through `call_async`, each with
//! a listener (events compared) and without one (where a plain success
//! takes the lock-free paths).
//!
//! The scenarios stay inside what 2.8.2 can express: the failure-rate trip
//! and the probe round (our other policies are not in it), no storage. Our ruling D7 (a stalled
//! HALF_OPEN round is abandoned) is not in 2.8.2, so the breakers here set
//! `max_wait_in_half_open` to `Duration::MAX`; the other rulings (D1–D6)
//! change nothing a valid local config shows, so everything else must match
//! 2.8.2 exactly.
//!
//! Every scenario goes, as one JSON line, to `driver.py` in one Python
//! process (the virtual environment of `scripts/interlock-cb-venv`, as for
//! the mixed-fleet tests). Time moves in ticks of 1/64 s, exact in both
//! libraries' clocks. `DIFF_CASES` sets the number of scenarios (default
//! 3,000) and `DIFF_SEED` the generator's seed. Only a machine without
//! `python3` skips this test, and says so.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

/// The virtual environment, found and made as the mixed-fleet tests do.
#[path = "../../../interlock-redis/tests/polyglot/venv.rs"]
mod venv;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CircuitBreaker, Config, Event, ManualClock, Permit, SlidingWindow, State, Verdict,
};

/// One tick of the scenarios' clock: 1/64 s.
const TICK: Duration = Duration::from_nanos(15_625_000);
const DEFAULT_CASES: usize = 3_000;
const DEFAULT_SEED: u64 = 0x2_8_2;
const MAX_STEPS: usize = 40;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, of: &[T]) -> T {
        of[usize::try_from(self.below(of.len() as u64)).unwrap()]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Debug)]
struct Settings {
    time: bool,
    size: u32,
    minimum: u32,
    failure_rate: f64,
    slow_rate: f64,
    slow_ticks: u32,
    wait_ticks: u32,
    multiplier: f64,
    wait_max_ticks: Option<u32>,
    permitted: u32,
    concurrent: u32,
    initial: State,
}

/// A step. Verdicts: `'s'` success, `'f'` failure, `'i'` inconclusive
/// (2.8.2: an exception among `unreachable_exceptions`).
#[derive(Clone, Debug)]
enum Step {
    Call {
        verdict: char,
        took: u32,
        error: u8,
    },
    Acquire,
    Settle {
        slot: usize,
        verdict: char,
        error: u8,
    },
    Drop {
        slot: usize,
    },
    Advance(u32),
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
}

#[derive(Clone, Debug)]
struct Scenario {
    settings: Settings,
    /// The clock's reading, in ticks, when the breaker is built: time
    /// buckets follow the clock's seconds, not the breaker's age.
    start: u32,
    steps: Vec<Step>,
}

fn error_text(n: u8) -> String {
    format!("dependency error #{n}")
}

/// A whole call's error: `Down` and `Unreachable` in `driver.py`.
#[derive(Debug)]
enum CallFailure {
    Down(String),
    Unreachable(String),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Down(text) | CallFailure::Unreachable(text) => f.write_str(text),
        }
    }
}

impl std::error::Error for CallFailure {}

/// A call's result for `verdict`.
fn outcome(verdict: char, error: u8) -> Result<(), CallFailure> {
    match verdict {
        's' => Ok(()),
        'f' => Err(CallFailure::Down(error_text(error))),
        _ => Err(CallFailure::Unreachable(error_text(error))),
    }
}

/// How a whole call goes through the breaker.
#[derive(Clone, Copy, Debug)]
enum Api {
    /// `acquire`, then the permit's `record` / `finish_with`.
    Permit,
    /// `call`, its error through the classifier.
    Call,
    /// `call_async`.
    Async,
}

fn settings(rng: &mut Rng) -> Settings {
    let time = rng.chance(40);
    let size = u32::try_from(1 + rng.below(if time { 4 } else { 6 })).unwrap();
    let permitted = u32::try_from(1 + rng.below(4)).unwrap();
    let wait_ticks = rng.pick(&[16, 64, 100, 128, 320]);
    Settings {
        time,
        size,
        minimum: u32::try_from(1 + rng.below(u64::from(size))).unwrap(),
        failure_rate: rng.pick(&[0.2, 0.25, 0.5, 0.75, 1.0]),
        slow_rate: rng.pick(&[0.25, 0.5, 1.0]),
        slow_ticks: rng.pick(&[16, 32, 64, 160]),
        wait_ticks,
        multiplier: rng.pick(&[1.0, 1.0, 2.0, 3.0]),
        wait_max_ticks: rng.chance(30).then(|| wait_ticks + rng.pick(&[0, 64, 300])),
        permitted,
        concurrent: u32::try_from(1 + rng.below(u64::from(permitted))).unwrap(),
        // Mostly CLOSED, each override one time in nine.
        initial: match rng.below(9) {
            6 => State::MetricsOnly,
            7 => State::Disabled,
            8 => State::ForcedOpen,
            _ => State::Closed,
        },
    }
}

fn verdict(rng: &mut Rng) -> char {
    rng.pick(&['f', 'f', 'f', 's', 's', 's', 'i'])
}

fn took(rng: &mut Rng, s: &Settings) -> u32 {
    match rng.below(8) {
        0..=3 => 0,
        4 => s.slow_ticks - 1,
        5 | 6 => s.slow_ticks,
        _ => u32::try_from(rng.below(u64::from(3 * s.slow_ticks))).unwrap(),
    }
}

/// Advances, steered onto the OPEN wait (and its backed-off multiples),
/// second boundaries and just short of them.
fn advance(rng: &mut Rng, s: &Settings, now: u64) -> u32 {
    let to_second = 64 - u32::try_from(now % 64).unwrap();
    match rng.below(10) {
        0 | 1 => u32::try_from(1 + rng.below(192)).unwrap(),
        2 => to_second,
        3 => 64,
        4 | 5 => s.wait_ticks,
        6 => s.wait_ticks - 1,
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        7 => (f64::from(s.wait_ticks) * s.multiplier) as u32,
        8 => s.wait_max_ticks.unwrap_or(s.wait_ticks),
        _ => 1,
    }
}

fn scenario(rng: &mut Rng) -> Scenario {
    let settings = settings(rng);
    let n = 1 + usize::try_from(rng.below(MAX_STEPS as u64)).unwrap();
    let start = if rng.chance(50) {
        0
    } else {
        u32::try_from(rng.below(640)).unwrap()
    };
    let mut now = u64::from(start);
    let mut steps = Vec::with_capacity(n);
    for _ in 0..n {
        let error = u8::try_from(rng.below(3)).unwrap();
        let step = match rng.below(100) {
            0..=39 => Step::Call {
                verdict: verdict(rng),
                took: took(rng, &settings),
                error,
            },
            40..=51 => Step::Acquire,
            52..=63 => Step::Settle {
                slot: usize::try_from(rng.below(4)).unwrap(),
                verdict: verdict(rng),
                error,
            },
            64..=67 => Step::Drop {
                slot: usize::try_from(rng.below(4)).unwrap(),
            },
            68..=93 => Step::Advance(advance(rng, &settings, now)),
            94 => Step::ForceOpen,
            95 => Step::Disable,
            96 => Step::MetricsOnly,
            _ => Step::Reset,
        };
        match step {
            Step::Call { took, .. } => now += u64::from(took),
            Step::Advance(d) => now += u64::from(d),
            _ => {}
        }
        steps.push(step);
    }
    Scenario {
        settings,
        start,
        steps,
    }
}

/// The scenario as `driver.py` reads it.
fn to_json(s: &Scenario) -> String {
    let c = &s.settings;
    let mut out = format!(
        "{{\"config\":{{\"time\":{},\"size\":{},\"minimum\":{},\"failure_rate\":{:?},\
         \"slow_rate\":{:?},\"slow_ticks\":{},\"wait_ticks\":{},\"multiplier\":{:?},\
         \"wait_max_ticks\":{},\"permitted\":{},\"concurrent\":{}}},\"initial\":\"{}\",\"start\":{},\"ops\":[",
        c.time,
        c.size,
        c.minimum,
        c.failure_rate,
        c.slow_rate,
        c.slow_ticks,
        c.wait_ticks,
        c.multiplier,
        c.wait_max_ticks
            .map_or_else(|| "null".to_owned(), |t| t.to_string()),
        c.permitted,
        c.concurrent,
        c.initial.as_str(),
        s.start,
    );
    for (i, step) in s.steps.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match *step {
            Step::Call {
                verdict,
                took,
                error,
            } => write!(
                out,
                "[\"call\",\"{verdict}\",{took},\"{}\"]",
                error_text(error)
            ),
            Step::Acquire => write!(out, "[\"acquire\"]"),
            Step::Settle {
                slot,
                verdict,
                error,
            } => write!(
                out,
                "[\"settle\",{slot},\"{verdict}\",\"{}\"]",
                error_text(error)
            ),
            Step::Drop { slot } => write!(out, "[\"drop\",{slot}]"),
            Step::Advance(t) => write!(out, "[\"advance\",{t}]"),
            Step::ForceOpen => write!(out, "[\"force_open\"]"),
            Step::Disable => write!(out, "[\"disable\"]"),
            Step::MetricsOnly => write!(out, "[\"metrics_only\"]"),
            Step::Reset => write!(out, "[\"reset\"]"),
        }
        .unwrap();
    }
    out.push_str("]}");
    out
}

fn ticks(n: u32) -> Duration {
    TICK * n
}

/// The events a listener heard, as `driver.py` writes them.
type Heard = Arc<Mutex<Vec<String>>>;

fn hear(heard: &Heard, event: &Event<'_>) {
    let line = match *event {
        Event::StateChanged { from, to, .. } => format!("state:{from}>{to}"),
        Event::CallRecorded {
            outcome, duration, ..
        } => format!("call:{outcome}:{}", micros(Some(duration))),
        Event::CallRejected { .. } => "rejected".to_owned(),
        Event::Reset { .. } => "reset".to_owned(),
        _ => format!("unexpected:{event}"),
    };
    heard.lock().unwrap().push(line);
}

/// A breaker with `s`, on `clock`, with a listener when `heard` is given.
fn breaker(s: &Settings, clock: &ManualClock, heard: Option<&Heard>) -> CircuitBreaker {
    let window = if s.time {
        SlidingWindow::time(Duration::from_secs(u64::from(s.size)))
    } else {
        SlidingWindow::count(s.size)
    };
    let config = Config::builder()
        .sliding_window(window)
        .minimum_number_of_calls(s.minimum)
        .failure_rate_threshold(s.failure_rate)
        .slow_call_rate_threshold(s.slow_rate)
        .slow_call_duration_threshold(ticks(s.slow_ticks))
        .wait_duration_in_open(ticks(s.wait_ticks))
        .wait_duration_backoff_multiplier(s.multiplier)
        .wait_duration_in_open_max(s.wait_max_ticks.map(ticks))
        .permitted_calls_in_half_open(s.permitted)
        .max_concurrent_probes(s.concurrent)
        .max_wait_in_half_open(Duration::MAX)
        .build()
        .unwrap();
    let builder = CircuitBreaker::builder("diff")
        .config(config)
        .clock(clock.clone())
        .initial_state(s.initial)
        // 2.8.2's `unreachable_exceptions=(Unreachable,)`.
        .classifier(|e| match e.downcast_ref::<CallFailure>() {
            Some(CallFailure::Unreachable(_)) => Verdict::Inconclusive,
            _ => Verdict::Failure,
        });
    match heard {
        Some(heard) => {
            let heard = Arc::clone(heard);
            builder.listener(move |e: &Event<'_>| hear(&heard, e))
        }
        None => builder,
    }
    .build()
    .unwrap()
}

/// Microseconds, as `driver.py` prints them (`-` for none).
fn micros(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| ((d.as_nanos() + 500) / 1_000).to_string(),
    )
}

/// A rejection as `driver.py` writes it: its `retry_after` and the last
/// failure it carries (spaces as `_`).
fn rejected(open: &interlock::CircuitOpenError) -> String {
    let carried = open
        .last_failure()
        .map_or_else(|| "-".to_owned(), |f| f.message().replace(' ', "_"));
    format!("rejected:{}:{carried}", micros(open.retry_after()))
}

fn admit(b: &CircuitBreaker) -> (Option<Permit>, String) {
    match b.acquire() {
        Ok(permit) => (Some(permit), "admitted".to_owned()),
        Err(open) => (None, rejected(&open)),
    }
}

fn settle(permit: Permit, verdict: char, error: u8) {
    match verdict {
        's' => permit.record(Verdict::Success),
        'f' => permit.finish_with(Verdict::Failure, &error_text(error)),
        _ => permit.finish_with(Verdict::Inconclusive, &error_text(error)),
    }
}

/// A whole call (`verdict`, running for `took` ticks, failing with error
/// number `error`) through `api`; what its admission showed.
fn call(
    b: &CircuitBreaker,
    clock: &ManualClock,
    api: Api,
    runtime: &tokio::runtime::Runtime,
    (verdict, took, error): (char, u32, u8),
) -> String {
    let run = || {
        clock.advance(ticks(took));
        outcome(verdict, error)
    };
    let result = match api {
        Api::Permit => {
            let (permit, shown) = admit(b);
            if let Some(permit) = permit {
                clock.advance(ticks(took));
                settle(permit, verdict, error);
            }
            return shown;
        }
        Api::Call => b.call(run),
        Api::Async => runtime.block_on(b.call_async(|| async move { run() })),
    };
    match result {
        Err(interlock::CallError::Rejected(open)) => rejected(&open),
        _ => "admitted".to_owned(),
    }
}

fn shown(b: &CircuitBreaker, admission: &str) -> String {
    let s = b.snapshot();
    let last = b
        .last_failure()
        .map_or_else(|| "-".to_owned(), |f| format!("\"{}\"", f.message()));
    format!(
        "{admission} {} {} {} {} {} {} {last}",
        b.state().as_str(),
        b.generation(),
        s.total_calls,
        s.failed_calls,
        s.slow_calls,
        micros(b.retry_after()),
    )
}

/// What interlock shows after each step of `s`; with `listen`, followed by
/// what its listener heard during the step. Without a listener a plain
/// success takes the breaker's lock-free paths, which a listener turns off:
/// both are run.
fn run(s: &Scenario, listen: bool, api: Api, runtime: &tokio::runtime::Runtime) -> Vec<String> {
    let clock = ManualClock::new();
    clock.advance(ticks(s.start));
    let heard: Heard = Arc::default();
    let b = breaker(&s.settings, &clock, listen.then_some(&heard));
    let mut held: Vec<Permit> = Vec::new();
    let mut lines = Vec::with_capacity(s.steps.len());
    for step in &s.steps {
        let mut admission = "-".to_owned();
        match *step {
            Step::Call {
                verdict,
                took,
                error,
            } => {
                admission = call(&b, &clock, api, runtime, (verdict, took, error));
            }
            Step::Acquire => {
                let (permit, shown) = admit(&b);
                admission = shown;
                held.extend(permit);
            }
            Step::Settle {
                slot,
                verdict,
                error,
            } => {
                if !held.is_empty() {
                    let len = held.len();
                    settle(held.remove(slot % len), verdict, error);
                }
            }
            Step::Drop { slot } => {
                if !held.is_empty() {
                    let len = held.len();
                    drop(held.remove(slot % len));
                }
            }
            Step::Advance(t) => clock.advance(ticks(t)),
            Step::ForceOpen => b.force_open(),
            Step::Disable => b.disable(),
            Step::MetricsOnly => b.metrics_only(),
            Step::Reset => b.reset(),
        }
        let mut line = shown(&b, &admission);
        if listen {
            let events = std::mem::take(&mut *heard.lock().unwrap());
            write!(line, " | {}", events.join(",")).unwrap();
        }
        lines.push(line);
    }
    lines
}

/// Runs every scenario on 2.8.2: the lines each one showed.
fn run_original(python: &Path, scenarios: &[Scenario]) -> Vec<Vec<String>> {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/driver.py");
    let mut child = Command::new(python)
        .arg(&driver)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for s in scenarios {
        input.push_str(&to_json(s));
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    // Written on a thread of its own: the driver answers as it reads.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut runs = Vec::with_capacity(scenarios.len());
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "end" {
            runs.push(std::mem::take(&mut lines));
        } else {
            lines.push(line);
        }
    }
    writer.join().unwrap().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "driver.py failed: {status}");
    assert_eq!(runs.len(), scenarios.len(), "a run per scenario");
    runs
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

#[test]
fn local_breakers_decide_exactly_as_interlock_cb_2_8_2() {
    let Some(python) = venv::interpreter() else {
        return; // no python3: said on stdout
    };
    let cases = env_number("DIFF_CASES").map_or(DEFAULT_CASES, |n| usize::try_from(n).unwrap());
    let mut rng = Rng(env_number("DIFF_SEED").unwrap_or(DEFAULT_SEED) | 1);
    let scenarios: Vec<Scenario> = (0..cases).map(|_| scenario(&mut rng)).collect();
    let original = run_original(&python, &scenarios);

    let mut report = String::new();
    let mut differing = 0;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let first = |ours: &[String], theirs: &[String]| {
        (0..ours.len().max(theirs.len())).find(|&i| ours.get(i) != theirs.get(i))
    };
    for (s, theirs) in scenarios.iter().zip(&original) {
        // Without a listener everything but the events is compared: a
        // plain success then takes the breaker's lock-free paths.
        let quiet_theirs: Vec<String> = theirs
            .iter()
            .map(|l| l.split(" | ").next().unwrap_or_default().to_owned())
            .collect();
        let found = [Api::Permit, Api::Call, Api::Async]
            .into_iter()
            .flat_map(|api| [(api, true), (api, false)])
            .find_map(|(api, listen)| {
                let ours = run(s, listen, api, &runtime);
                let theirs = if listen { theirs } else { &quiet_theirs };
                first(&ours, theirs).map(|at| (api, listen, ours, theirs.clone(), at))
            });
        let Some((api, listen, ours, theirs, at)) = found else {
            continue;
        };
        differing += 1;
        if differing == 1 {
            writeln!(
                report,
                "\n{:?}\nthrough {api:?}, listener: {listen}\nsteps:\n{}\nfirst difference at step {at} ({:?}):\n  2.8.2:     {}\n  interlock: {}\n",
                s.settings,
                s.steps
                    .iter()
                    .zip(&ours)
                    .zip(&theirs)
                    .enumerate()
                    .map(|(i, ((step, o), t))| format!("  {i:>2} {step:?}\n       2.8.2 {t}\n       ours  {o}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                s.steps.get(at),
                theirs.get(at).map_or("(nothing)", String::as_str),
                ours.get(at).map_or("(nothing)", String::as_str),
            )
            .unwrap();
        }
    }
    assert!(
        differing == 0,
        "{differing} of {cases} scenarios differ from interlock-cb 2.8.2; the first:{report}"
    );
    // The scenarios reach what they are for.
    let seen = |state: &str| {
        original
            .iter()
            .filter(|run| run.iter().any(|l| l.split(' ').nth(1) == Some(state)))
            .count()
    };
    assert!(seen("half_open") * 10 > cases, "HALF_OPEN in over a tenth");
    assert!(seen("open") * 5 > cases, "OPEN in over a fifth");
}
