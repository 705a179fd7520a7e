//! Mixed fleets (issue 26): Rust instances on `Layout::InterlockCb` and
//! Python instances of the original library, interlock-cb 2.8.2 installed
//! from PyPI into a virtual environment in the target directory
//! (`scripts/interlock-cb-venv`), sharing breakers on a `redis-server` the
//! test starts on a port of its own.
//!
//! Each Python instance is a process (`instance.py`) driven over stdin and
//! stdout; each Rust instance has its own storage, connections and
//! coordinator in this process. Every wait polls with a deadline, and every
//! process is killed when its test ends. Without `python3` the tests say so
//! and skip; any other missing piece (no PyPI) fails them.
#![cfg(feature = "tokio")]
#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    clippy::missing_errors_doc
)]
#![allow(missing_docs, unreachable_pub, missing_debug_implementations)]

#[path = "../redis/support.rs"]
#[allow(dead_code)]
mod support;

mod python;

mod fleet;
mod layout;
mod liveness;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::{Async, Blocking};
use interlock::storage::{
    AsyncStorage, Coordinator, NoticeSink, PollAnswers, PollRequest, ProbeLease, SharedState,
    Storage, StorageError, StorageSettings,
};
use interlock::{CallError, CircuitBreaker, Config, Outcome, SlidingWindow, State};
use interlock_redis::{AsyncRedisStorage, Layout, RedisStorage};

use python::{Options, Python};
use support::{Events, Server, eventually, pause};

/// A granted probe lease: the round it belongs to and the version it left.
///
/// A round is named by its `opened_at` (µs) and the version it began at.
/// Every lease and every tallied outcome of a round bumps the version once,
/// and nothing else does until the round ends, so a lease that left version
/// `v` with `r` of `p` slots remaining and `c` outcomes tallied belongs to
/// the round that began at `v − (p − r) − c`. This tells apart two rounds
/// of one OPEN period too (a stalled round restarted keeps `opened_at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark {
    pub round: (u64, u64),
    pub version: u64,
}

impl Mark {
    pub fn new(opened_at_us: u64, version: u64, permitted: u64, remaining: u64, done: u64) -> Mark {
        let began = version.saturating_sub(permitted.saturating_sub(remaining) + done);
        Mark {
            round: (opened_at_us, began),
            version,
        }
    }
}

/// The server, and the interpreter of the Python original; `None` when
/// there is no Python (the test then returns, having said so).
pub fn setup() -> Option<(Server, std::path::PathBuf)> {
    let python = python::interpreter()?;
    Some((Server::start(), python))
}

/// What one Rust instance observed.
#[derive(Default)]
pub struct Tally {
    pub calls: u64,
    pub rejected: u64,
    pub leases: Vec<Mark>,
    pub probe_calls: Vec<Mark>,
    /// Stalled rounds this instance restarted (R16.13), by `opened_at`.
    pub restarts: Vec<u64>,
}

thread_local! {
    /// The lease granted on this thread and not yet spent by a call.
    static CURRENT: Cell<Option<Mark>> = const { Cell::new(None) };
}

fn mark(lease: &ProbeLease) -> Mark {
    let s = &lease.state;
    Mark::new(
        s.opened_at.as_nanos() / 1_000,
        s.version,
        u64::from(s.probes_permitted),
        u64::from(s.probes_remaining),
        u64::from(s.probes_completed),
    )
}

/// The storage under test, noting every probe lease it is granted (the
/// Python instances do the same in `instance.py`).
pub struct Recording<S> {
    inner: S,
    tally: Arc<Mutex<Tally>>,
}

impl<S> Recording<S> {
    fn note_restart(&self, expected: u64, view: &SharedState) {
        if view.state == State::HalfOpen && view.version > expected && view.probes_completed == 0 {
            let at = view.opened_at.as_nanos() / 1_000;
            self.tally.lock().unwrap().restarts.push(at);
        }
    }

    fn note(&self, lease: &ProbeLease) {
        if lease.granted {
            self.tally.lock().unwrap().leases.push(mark(lease));
            CURRENT.with(|c| c.set(Some(mark(lease))));
        }
    }
}

impl<S: Storage> Storage for Recording<S> {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.inner.read(name)
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.trip_open(name, ttl, expected)
    }
    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
    }
    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        let lease = self.inner.lease_probe(name, ttl)?;
        self.note(&lease);
        Ok(lease)
    }
    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.record_probe(name, outcome, ttl)
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.close(name, ttl, expected)
    }
    fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let view = self
            .inner
            .restart_stalled_round(name, expected, permitted, ttl)?;
        self.note_restart(expected, &view);
        Ok(view)
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.restore(name, expected, state, ttl)
    }
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        self.inner.poll_many(requests)
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.inner.subscribe(sink)
    }
    fn settings(&self) -> StorageSettings {
        self.inner.settings()
    }
}

impl<S: AsyncStorage> AsyncStorage for Recording<S> {
    async fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.inner.read(name).await
    }
    async fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.trip_open(name, ttl, expected).await
    }
    async fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
            .await
    }
    async fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        let lease = self.inner.lease_probe(name, ttl).await?;
        self.note(&lease);
        Ok(lease)
    }
    async fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.record_probe(name, outcome, ttl).await
    }
    async fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.inner.close(name, ttl, expected).await
    }
    async fn restart_stalled_round(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let view = self
            .inner
            .restart_stalled_round(name, expected, permitted, ttl)
            .await?;
        self.note_restart(expected, &view);
        Ok(view)
    }
    async fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.inner.restore(name, expected, state, ttl).await
    }
    async fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        self.inner.poll_many(requests).await
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        AsyncStorage::subscribe(&self.inner, sink)
    }
    fn settings(&self) -> StorageSettings {
        AsyncStorage::settings(&self.inner)
    }
}

/// The breaker config both sides use (the Python side gets the same
/// numbers from [`Options`]).
fn config(o: &Options) -> Config {
    Config::builder()
        .sliding_window(SlidingWindow::count(o.window))
        .minimum_number_of_calls(o.min_calls)
        .wait_duration_in_open(o.wait)
        .permitted_calls_in_half_open(o.permitted)
        .build()
        .unwrap()
}

/// The protected call of every Rust instance: notes a spent lease, then
/// succeeds or fails.
fn dependency(tally: &Mutex<Tally>, up: bool) -> Result<(), std::io::Error> {
    if let Some(mark) = CURRENT.with(Cell::take) {
        tally.lock().unwrap().probe_calls.push(mark);
    }
    if up {
        Ok(())
    } else {
        Err(std::io::Error::other("the dependency is down"))
    }
}

fn outcome(result: &Result<(), CallError<std::io::Error>>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(CallError::Rejected(_)) => "rejected",
        Err(CallError::Inner(_)) => "failed",
    }
}

enum Flavour {
    Blocking(CircuitBreaker<Blocking>),
    Async(CircuitBreaker<Async>, tokio::runtime::Runtime),
}

/// One Rust instance: its own storage (so its own connections), its own
/// coordinator and breaker, blocking or async.
pub struct Node {
    pub label: String,
    flavour: Flavour,
    pub events: Events,
    tally: Arc<Mutex<Tally>>,
    up: Arc<AtomicBool>,
    running: Arc<AtomicBool>,
    traffic: Option<Traffic>,
}

enum Traffic {
    Thread(std::thread::JoinHandle<()>),
    Task(tokio::task::JoinHandle<()>),
}

impl Node {
    /// A blocking instance, or (`asynchronous`) one on a tokio runtime of
    /// its own with one worker thread.
    pub fn start(server: &Server, label: &str, o: &Options, asynchronous: bool) -> Node {
        let tally = Arc::new(Mutex::new(Tally::default()));
        let events = Events::default();
        let flavour = if asynchronous {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let storage = rt.block_on(async {
                let con = server.client().get_connection_manager().await.unwrap();
                AsyncRedisStorage::builder(con)
                    .layout(Layout::InterlockCb)
                    .poll_interval(o.poll)
                    .retry_backoff(o.retry_backoff)
                    .state_ttl(o.ttl)
                    .build()
                    .unwrap()
            });
            let lane = Coordinator::asynchronous(Recording {
                inner: storage,
                tally: tally.clone(),
            });
            let _entered = rt.enter();
            let breaker = CircuitBreaker::builder(o.name.as_str())
                .config(config(o))
                .coordinator(&lane)
                .listener(events.listener())
                .build()
                .unwrap();
            drop(_entered);
            Flavour::Async(breaker, rt)
        } else {
            let storage = RedisStorage::from_client(server.client(), Duration::from_secs(2))
                .layout(Layout::InterlockCb)
                .poll_interval(o.poll)
                .retry_backoff(o.retry_backoff)
                .state_ttl(o.ttl)
                .build()
                .unwrap();
            let lane = Coordinator::blocking(Recording {
                inner: storage,
                tally: tally.clone(),
            });
            let breaker = CircuitBreaker::builder(o.name.as_str())
                .config(config(o))
                .coordinator(&lane)
                .listener(events.listener())
                .build()
                .unwrap();
            Flavour::Blocking(breaker)
        };
        Node {
            label: label.to_owned(),
            flavour,
            events,
            tally,
            up: Arc::new(AtomicBool::new(false)),
            running: Arc::new(AtomicBool::new(false)),
            traffic: None,
        }
    }

    /// One call: `ok`, `failed` or `rejected`.
    pub fn call(&self, ok: bool) -> &'static str {
        let tally = &self.tally;
        match &self.flavour {
            Flavour::Blocking(b) => outcome(&b.call(|| dependency(tally, ok))),
            Flavour::Async(b, rt) => {
                outcome(&rt.block_on(b.call_async(|| async move { dependency(tally, ok) })))
            }
        }
    }

    pub fn state(&self) -> State {
        match &self.flavour {
            Flavour::Blocking(b) => b.state(),
            Flavour::Async(b, _) => b.state(),
        }
    }

    pub fn is_degraded(&self) -> bool {
        match &self.flavour {
            Flavour::Blocking(b) => b.is_degraded(),
            Flavour::Async(b, _) => b.is_degraded(),
        }
    }

    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    /// Starts calling the dependency in a loop (a thread, or a task).
    pub fn start_traffic(&mut self) {
        self.running.store(true, Ordering::SeqCst);
        let (running, up, tally) = (self.running.clone(), self.up.clone(), self.tally.clone());
        self.traffic = Some(match &self.flavour {
            Flavour::Blocking(b) => {
                let b = b.clone();
                Traffic::Thread(std::thread::spawn(move || {
                    while running.load(Ordering::SeqCst) {
                        let ok = up.load(Ordering::SeqCst);
                        let r = b.call(|| dependency(&tally, ok));
                        count(&tally, &r);
                        pause(Duration::from_millis(2));
                    }
                }))
            }
            Flavour::Async(b, rt) => {
                let b = b.clone();
                Traffic::Task(rt.spawn(async move {
                    while running.load(Ordering::SeqCst) {
                        let ok = up.load(Ordering::SeqCst);
                        let t = &tally;
                        let r = b.call_async(|| async move { dependency(t, ok) }).await;
                        count(&tally, &r);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                }))
            }
        });
    }

    pub fn stop_traffic(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        match (self.traffic.take(), &self.flavour) {
            (Some(Traffic::Thread(h)), _) => h.join().unwrap(),
            (Some(Traffic::Task(h)), Flavour::Async(_, rt)) => rt.block_on(h).unwrap(),
            _ => {}
        }
    }

    /// The leases granted to this instance, and those whose call ran.
    pub fn leases(&self) -> (Vec<Mark>, Vec<Mark>) {
        let t = self.tally.lock().unwrap();
        (t.leases.clone(), t.probe_calls.clone())
    }

    /// The stalled rounds this instance restarted, by `opened_at`.
    pub fn restarts(&self) -> Vec<u64> {
        self.tally.lock().unwrap().restarts.clone()
    }

    pub fn calls(&self) -> (u64, u64) {
        let t = self.tally.lock().unwrap();
        (t.calls, t.rejected)
    }
}

fn count(tally: &Mutex<Tally>, r: &Result<(), CallError<std::io::Error>>) {
    let mut t = tally.lock().unwrap();
    t.calls += 1;
    if matches!(r, Err(CallError::Rejected(_))) {
        t.rejected += 1;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_traffic();
        match &self.flavour {
            Flavour::Blocking(b) => b.close(),
            Flavour::Async(b, rt) => rt.block_on(b.close_async()),
        }
    }
}

/// The leases a Python instance was granted, and those whose call ran.
pub fn python_leases(p: &mut Python) -> (Vec<Mark>, Vec<Mark>, Vec<String>) {
    let stats = p.ask(serde_json::json!({"cmd": "stats"}));
    let marks = |key: &str| -> Vec<Mark> {
        stats[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let n = |i: usize| m[i].as_u64().unwrap();
                Mark::new(n(0), n(1), n(2), n(3), n(4))
            })
            .collect()
    };
    let unexpected = stats["unexpected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect();
    (marks("leases"), marks("probe_calls"), unexpected)
}

/// Leases per OPEN period (`opened_at`: one round, unless a stalled round
/// was restarted), with who got them, the version each left and the round
/// each belongs to.
pub fn rounds(all: &[(String, Vec<Mark>)]) -> BTreeMap<u64, Vec<(String, Mark)>> {
    let mut rounds: BTreeMap<u64, Vec<(String, Mark)>> = BTreeMap::new();
    for (who, marks) in all {
        for mark in marks {
            rounds
                .entry(mark.round.0)
                .or_default()
                .push((who.clone(), *mark));
        }
    }
    rounds
}

/// Waits up to `limit` for `cond`, failing the test with `what` otherwise.
pub fn expect_within(limit: Duration, what: &str, cond: impl FnMut() -> bool) {
    assert!(eventually(limit, cond), "not within {limit:?}: {what}");
}
