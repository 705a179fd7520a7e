//! The public contract suite: checks a [`Storage`] or [`AsyncStorage`]
//! implementation against every rule of the shared-storage contract (R16).
//!
//! Run the whole suite with [`check_storage`] or [`check_async_storage`], or
//! one rule at a time through [`blocking`] and [`asynchronous`] (one function
//! per rule, with the same names in both). A violation panics with a message
//! that names the rule, e.g. `storage contract violated: R16.2
//! fencing_miss_writes_nothing: ...`, so each check reads well as a `#[test]`.
//!
//! The suite needs to let time pass on the *storage's* clock (for elapsed
//! waits and TTL expiry); a [`StorageTime`] does that. A storage on a
//! [`ManualClock`] passes the clock itself (it implements `StorageTime`), and
//! the suite never sleeps; a storage whose clock cannot be moved, such as a
//! Redis server, passes [`RealTime`], which waits by polling with a deadline
//! and makes every wait and TTL of the suite a small multiple of its tick.
//!
//! Every key the suite writes has a name unique to the run
//! (`interlock-contract:<random run id>:<rule>:<n>`) and a TTL of at most
//! [`LONG_TTL_TICKS`] ticks, so several runs can share one server and leave
//! nothing behind for long.
//!
//! ```
//! use interlock::storage::contract::{check_storage, RealTime};
//! use interlock::storage::MemoryStorage;
//! use interlock::ManualClock;
//! use std::time::Duration;
//!
//! // A storage with an injectable clock: move that clock.
//! let clock = ManualClock::new();
//! check_storage(&MemoryStorage::builder().clock(clock.clone()).build(), &clock);
//!
//! // A storage on real time (a Redis server, say) waits instead; here a
//! // single rule, with 50 ms ticks.
//! interlock::storage::contract::blocking::expired_key_reads_absent(
//!     &MemoryStorage::new(),
//!     &RealTime::new(Duration::from_millis(50)),
//! );
//! ```

use std::future::Future;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::clock::{Clock, ManualClock, MonotonicClock};
use crate::state::{Outcome, State};

use super::{
    AsyncStorage, ChangePoll, Epoch, PollAnswers, PollRequest, ProbeLease, SharedState, Storage,
    StorageError,
};

/// The longest TTL the suite writes, in [`StorageTime::tick`]s.
pub const LONG_TTL_TICKS: u32 = 100;

/// The TTL of the expiry checks, in ticks: each of them stays at least
/// four ticks clear of the expiry it tests, which is the delay a
/// [`RealTime`] run tolerates.
const SHORT_TTL_TICKS: u32 = 10;

/// How the suite lets time pass on the storage's clock.
///
/// The suite calls [`pass`](Self::pass) only between storage operations,
/// never while one is in flight, so a blocking implementation is fine even
/// inside the async suite on a current-thread runtime.
///
/// ```
/// use interlock::storage::contract::StorageTime;
/// use interlock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let time: &dyn StorageTime = &clock;
/// time.pass(time.tick() * 3);
/// assert_eq!(clock.now().as_secs(), 3);
/// assert!(time.is_exact());
/// ```
pub trait StorageTime: Send + Sync {
    /// Returns once at least `d` has passed on the storage's clock.
    fn pass(&self, d: Duration);

    /// The unit of every wait and TTL in the suite. With a real clock it is
    /// also the scheduling margin: each timed check tolerates a delay of up
    /// to four ticks (so 100 ms ticks tolerate 400 ms of lag).
    fn tick(&self) -> Duration;

    /// Whether [`pass`](Self::pass) moves the storage's clock by exactly
    /// `d`, and the clock stands still otherwise (a manual clock). The
    /// suite then also checks exact boundaries (to the microsecond); with a
    /// real clock those checks return without asserting anything.
    fn is_exact(&self) -> bool {
        false
    }
}

/// A [`ManualClock`] shared with the storage: `pass` advances it, a tick is
/// one second, and time is exact.
///
/// ```
/// use interlock::storage::contract::check_storage;
/// use interlock::storage::MemoryStorage;
/// use interlock::ManualClock;
///
/// let clock = ManualClock::new();
/// check_storage(&MemoryStorage::builder().clock(clock.clone()).build(), &clock);
/// ```
impl StorageTime for ManualClock {
    fn pass(&self, d: Duration) {
        self.advance(d);
    }

    fn tick(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn is_exact(&self) -> bool {
        true
    }
}

/// Real time, for a storage whose clock cannot be moved (a Redis server):
/// `pass` waits, polling [`MonotonicClock`] until a deadline.
///
/// Choose a tick well above the storage's round trip and TTL resolution
/// (Redis: whole milliseconds) and above the scheduling jitter of the
/// machine: the suite tolerates four ticks of lag per timed check. The
/// whole suite waits about 90 ticks in total.
///
/// ```
/// use interlock::storage::contract::{RealTime, StorageTime};
/// use std::time::Duration;
///
/// let time = RealTime::new(Duration::from_millis(20));
/// assert_eq!(time.tick(), Duration::from_millis(20));
/// assert!(!time.is_exact());
/// assert_eq!(RealTime::default().tick(), Duration::from_millis(100));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RealTime {
    tick: Duration,
}

impl RealTime {
    /// Real time with the given tick (at least a millisecond is used).
    #[must_use]
    pub fn new(tick: Duration) -> Self {
        RealTime {
            tick: tick.max(Duration::from_millis(1)),
        }
    }
}

impl Default for RealTime {
    /// A 100 ms tick: the suite then waits about nine seconds.
    fn default() -> Self {
        RealTime::new(Duration::from_millis(100))
    }
}

impl StorageTime for RealTime {
    fn pass(&self, d: Duration) {
        let deadline = MonotonicClock.now().saturating_add(d);
        loop {
            let now = MonotonicClock.now();
            if now >= deadline {
                return;
            }
            // Wakes early at worst; the deadline decides.
            std::thread::park_timeout(deadline.saturating_duration_since(now));
        }
    }

    fn tick(&self) -> Duration {
        self.tick
    }
}

/// A storage name unique to this process run and call.
fn unique_name(rule: &str) -> String {
    static RUN: OnceLock<u64> = OnceLock::new();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let run = *RUN.get_or_init(|| {
        let mut h = RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("interlock-contract:{run:016x}:{rule}:{n}")
}

/// Drives a future whose every await is already ready (the blocking
/// adapter's), on the calling thread.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// A future of [`join_all`] and its output once ready.
type Slot<F> = (Pin<Box<F>>, Option<<F as Future>::Output>);

/// Polls every future to completion concurrently, in one task.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut slots: Vec<Slot<F>> = futures.into_iter().map(|f| (Box::pin(f), None)).collect();
    std::future::poll_fn(|cx| {
        let mut done = true;
        for (fut, out) in &mut slots {
            if out.is_none() {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => done = false,
                }
            }
        }
        if done { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    slots.into_iter().filter_map(|(_, out)| out).collect()
}

/// The six operations, blocking or async, as futures: each rule is written
/// once against this.
trait Subject: Sync {
    fn read(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<SharedState>, StorageError>> + Send;
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn begin(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn lease(
        &self,
        name: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<ProbeLease, StorageError>> + Send;
    fn record(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn restart(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send;
    fn poll_many(
        &self,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<PollAnswers, StorageError>> + Send;
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<ChangePoll, StorageError>> + Send;
    /// `n` leases racing each other (threads, or one task's join).
    fn leases_at_once(
        &self,
        name: &str,
        n: usize,
        ttl: Duration,
    ) -> impl Future<Output = Vec<Result<ProbeLease, StorageError>>> + Send;
}

struct Blocking<'s, S>(&'s S);

impl<S: Storage> Subject for Blocking<'_, S> {
    fn read(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<SharedState>, StorageError>> + Send {
        std::future::ready(self.0.read(name))
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(self.0.trip_open(name, ttl, expected))
    }
    fn begin(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(
            self.0
                .begin_half_open_if_elapsed(name, wait, permitted, ttl),
        )
    }
    fn lease(
        &self,
        name: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<ProbeLease, StorageError>> + Send {
        std::future::ready(self.0.lease_probe(name, ttl))
    }
    fn record(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(self.0.record_probe(name, outcome, ttl))
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(self.0.close(name, ttl, expected))
    }
    fn restart(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(self.0.restart_stalled_round(name, expected, permitted, ttl))
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        std::future::ready(self.0.restore(name, expected, state, ttl))
    }
    fn poll_many(
        &self,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<PollAnswers, StorageError>> + Send {
        std::future::ready(self.0.poll_many(requests))
    }
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<ChangePoll, StorageError>> + Send {
        std::future::ready(self.0.poll_changes(since, requests))
    }
    fn leases_at_once(
        &self,
        name: &str,
        n: usize,
        ttl: Duration,
    ) -> impl Future<Output = Vec<Result<ProbeLease, StorageError>>> + Send {
        let start = std::sync::Barrier::new(n);
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        self.0.lease_probe(name, ttl)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        std::future::ready(results)
    }
}

struct NonBlocking<'s, S>(&'s S);

impl<S: AsyncStorage> Subject for NonBlocking<'_, S> {
    fn read(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<SharedState>, StorageError>> + Send {
        self.0.read(name)
    }
    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0.trip_open(name, ttl, expected)
    }
    fn begin(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
    }
    fn lease(
        &self,
        name: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<ProbeLease, StorageError>> + Send {
        self.0.lease_probe(name, ttl)
    }
    fn record(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0.record_probe(name, outcome, ttl)
    }
    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0.close(name, ttl, expected)
    }
    fn restart(
        &self,
        name: &str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0.restart_stalled_round(name, expected, permitted, ttl)
    }
    fn restore(
        &self,
        name: &str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> impl Future<Output = Result<SharedState, StorageError>> + Send {
        self.0.restore(name, expected, state, ttl)
    }
    fn poll_many(
        &self,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<PollAnswers, StorageError>> + Send {
        self.0.poll_many(requests)
    }
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> impl Future<Output = Result<ChangePoll, StorageError>> + Send {
        self.0.poll_changes(since, requests)
    }
    fn leases_at_once(
        &self,
        name: &str,
        n: usize,
        ttl: Duration,
    ) -> impl Future<Output = Vec<Result<ProbeLease, StorageError>>> + Send {
        join_all((0..n).map(|_| self.0.lease_probe(name, ttl)).collect())
    }
}

/// Panics with a message naming the violated rule.
macro_rules! violated {
    ($cx:expr, $($msg:tt)+) => {
        panic!("storage contract violated: {}: {}", $cx.rule, format_args!($($msg)+))
    };
}

/// `assert_eq!` with a message naming the violated rule.
macro_rules! expect_eq {
    ($cx:expr, $left:expr, $right:expr, $($msg:tt)+) => {{
        let (left, right) = (&$left, &$right);
        if left != right {
            violated!($cx, "{}\n  got:      {:?}\n  expected: {:?}", format_args!($($msg)+), left, right);
        }
    }};
}

/// One rule's run: the storage, the time, and the TTL its writes use.
struct Cx<'a, T> {
    s: &'a T,
    time: &'a dyn StorageTime,
    rule: &'static str,
    tick: Duration,
    ttl: Duration,
}

impl<T> Clone for Cx<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Cx<'_, T> {}

impl<'a, T: Subject> Cx<'a, T> {
    fn new(s: &'a T, time: &'a dyn StorageTime, rule: &'static str) -> Self {
        let tick = time.tick();
        Cx {
            s,
            time,
            rule,
            tick,
            ttl: tick.saturating_mul(LONG_TTL_TICKS),
        }
    }

    /// The same run, writing with a short TTL.
    fn short_ttl(self) -> Self {
        Cx {
            ttl: self.ticks(SHORT_TTL_TICKS),
            ..self
        }
    }

    fn name(&self) -> String {
        let short = self.rule.split(' ').nth(1).unwrap_or(self.rule);
        unique_name(short)
    }

    fn ticks(&self, n: u32) -> Duration {
        self.tick.saturating_mul(n)
    }

    /// Lets `n` ticks pass.
    fn pass(&self, n: u32) {
        self.time.pass(self.ticks(n));
    }

    /// Lets `n` ticks pass, plus one for margin unless time is exact.
    fn pass_beyond(&self, n: u32) {
        let extra = u32::from(!self.time.is_exact());
        self.pass(n.saturating_add(extra));
    }

    fn ok<V>(&self, op: &str, r: Result<V, StorageError>) -> V {
        r.unwrap_or_else(|e| {
            violated!(
                self,
                "`{op}` returned an error for a routine call (R16.10: only a backend failure \
                 may be an error): {e}"
            )
        })
    }

    async fn read(&self, name: &str) -> Option<SharedState> {
        self.ok("read", self.s.read(name).await)
    }
    async fn trip(&self, name: &str, expected: Option<u64>) -> SharedState {
        self.ok(
            "trip_open",
            self.s.trip_open(name, self.ttl, expected).await,
        )
    }
    async fn begin(&self, name: &str, wait: Duration, permitted: u32) -> SharedState {
        self.ok(
            "begin_half_open_if_elapsed",
            self.s.begin(name, wait, permitted, self.ttl).await,
        )
    }
    async fn lease(&self, name: &str) -> ProbeLease {
        self.ok("lease_probe", self.s.lease(name, self.ttl).await)
    }
    async fn record(&self, name: &str, outcome: Outcome) -> SharedState {
        self.ok("record_probe", self.s.record(name, outcome, self.ttl).await)
    }
    async fn close(&self, name: &str, expected: Option<u64>) -> SharedState {
        self.ok("close", self.s.close(name, self.ttl, expected).await)
    }
    async fn restart(&self, name: &str, expected: u64, permitted: u32) -> SharedState {
        self.ok(
            "restart_stalled_round",
            self.s.restart(name, expected, permitted, self.ttl).await,
        )
    }
    async fn restore(&self, name: &str, expected: u64, state: SharedState) -> SharedState {
        self.ok(
            "restore",
            self.s.restore(name, expected, state, self.ttl).await,
        )
    }

    /// Reads `name`, which must exist; returns its state.
    async fn present(&self, name: &str, when: &str) -> SharedState {
        match self.read(name).await {
            Some(s) => s,
            None => violated!(self, "`read` found no key {when}"),
        }
    }

    /// Reads `name`, which must be absent.
    async fn absent(&self, name: &str, when: &str) {
        if let Some(s) = self.read(name).await {
            violated!(self, "`read` found {s:?} {when}; expected no key");
        }
    }

    /// A fresh key in HALF_OPEN at version 2 with `permitted` probes.
    async fn half_open(&self, name: &str, permitted: u32) -> SharedState {
        self.trip(name, None).await;
        let half = self.begin(name, Duration::ZERO, permitted).await;
        expect_eq!(
            self,
            (half.state, half.version),
            (State::HalfOpen, 2),
            "begin_half_open_if_elapsed(wait = 0) after a trip must start a round"
        );
        half
    }
}

/// Probe accounting of a view, for compact comparisons.
fn probes(s: &SharedState) -> (u32, u32, u32, u32, u32) {
    (
        s.probes_permitted,
        s.probes_remaining,
        s.probes_completed,
        s.probe_failures,
        s.probe_slows,
    )
}

mod changes;
mod liveness;

/// The rules, each written once over [`Subject`].
mod rules {
    use super::*;

    pub(super) use super::changes::*;
    pub(super) use super::liveness::*;

    pub(super) async fn absent_key_reads_none<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.1 absent_key_reads_none");
        let base = cx.name();
        let long = "x".repeat(1000);
        for suffix in [
            "",
            " with spaces",
            ":colons:and/slashes",
            "-名前-ü",
            long.as_str(),
        ] {
            let name = format!("{base}{suffix}");
            cx.absent(&name, "for a name nobody wrote").await;
        }
    }

    pub(super) async fn trip_opens_at_version_one<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 trip_opens_at_version_one");
        for expected in [None, Some(0)] {
            let name = cx.name();
            let open = cx.trip(&name, expected).await;
            expect_eq!(
                cx,
                (open.state, open.version, probes(&open)),
                (State::Open, 1, (0, 0, 0, 0, 0)),
                "trip_open(expected_version = {expected:?}) on an absent key (version 0)"
            );
            let read = cx.present(&name, "after an applied trip_open").await;
            expect_eq!(
                cx,
                read,
                open,
                "read after trip_open must return the written state"
            );
        }
    }

    pub(super) async fn fencing_miss_writes_nothing<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 fencing_miss_writes_nothing");
        // Absent key: a fenced-out write must not create it.
        let name = cx.name();
        let v = cx.trip(&name, Some(1)).await;
        expect_eq!(
            cx,
            v,
            SharedState::closed(),
            "fenced-out trip_open on an absent key"
        );
        let v = cx.close(&name, Some(3)).await;
        expect_eq!(
            cx,
            v,
            SharedState::closed(),
            "fenced-out close on an absent key"
        );
        cx.absent(&name, "after fenced-out writes on an absent key")
            .await;

        // OPEN v1.
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        for expected in [0, 2, 7] {
            let v = cx.trip(&name, Some(expected)).await;
            expect_eq!(
                cx,
                v,
                open,
                "trip_open(expected {expected}) against OPEN v1"
            );
            let v = cx.close(&name, Some(expected)).await;
            expect_eq!(cx, v, open, "close(expected {expected}) against OPEN v1");
        }
        let read = cx.present(&name, "after fenced-out writes").await;
        expect_eq!(cx, read, open, "fenced-out writes must change nothing");

        // HALF_OPEN v2.
        let name = cx.name();
        let half = cx.half_open(&name, 2).await;
        let v = cx.trip(&name, Some(1)).await;
        expect_eq!(
            cx,
            v,
            half,
            "stale trip_open(expected 1) against HALF_OPEN v2"
        );
        let v = cx.close(&name, Some(1)).await;
        expect_eq!(cx, v, half, "stale close(expected 1) against HALF_OPEN v2");
        let read = cx.present(&name, "after fenced-out writes").await;
        expect_eq!(cx, read, half, "fenced-out writes must change nothing");

        // CLOSED v1.
        let name = cx.name();
        let closed = cx.close(&name, None).await;
        let v = cx.trip(&name, Some(0)).await;
        expect_eq!(
            cx,
            v,
            closed,
            "stale trip_open(expected 0) against CLOSED v1"
        );
    }

    pub(super) async fn fencing_match_applies<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 fencing_match_applies");
        let name = cx.name();
        cx.half_open(&name, 1).await;
        let v = cx.trip(&name, Some(2)).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Open, 3),
            "trip_open(expected 2) at v2"
        );
        cx.begin(&name, Duration::ZERO, 1).await;
        let v = cx.close(&name, Some(4)).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Closed, 5),
            "close(expected 4) at v4"
        );
        let v = cx.trip(&name, Some(5)).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Open, 6),
            "trip_open(expected 5) at v5"
        );
        let name = cx.name();
        let v = cx.close(&name, Some(0)).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Closed, 1),
            "close(expected 0) on an absent key (version 0) applies"
        );
    }

    pub(super) async fn trip_is_idempotent_while_open<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 trip_is_idempotent_while_open");
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        cx.pass(1);
        let again = cx.trip(&name, None).await;
        expect_eq!(
            cx,
            again,
            open,
            "a second trip_open while OPEN must keep version and opened_at"
        );
        let fenced_match = cx.trip(&name, Some(1)).await;
        expect_eq!(
            cx,
            fenced_match,
            open,
            "trip_open(expected 1) while OPEN v1 changes nothing"
        );
        let read = cx.present(&name, "after idempotent trips").await;
        expect_eq!(cx, read, open, "idempotent trips must not bump the version");
    }

    pub(super) async fn idempotent_trip_refreshes_ttl<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 idempotent_trip_refreshes_ttl").short_ttl();
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        cx.pass(6);
        cx.trip(&name, None).await; // refreshes the TTL to 10 ticks from now
        cx.pass(6); // 12 ticks after the first trip
        let read = cx.present(&name, "6 ticks after an idempotent trip_open with a 10-tick TTL (the trip must refresh the TTL)").await;
        expect_eq!(
            cx,
            read,
            open,
            "the idempotent trip must not change the state"
        );
    }

    pub(super) async fn trip_from_half_open_reopens<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.2 trip_from_half_open_reopens");
        let name = cx.name();
        let first = cx.trip(&name, None).await;
        cx.pass(2);
        cx.begin(&name, Duration::ZERO, 3).await;
        cx.lease(&name).await;
        cx.record(&name, Outcome::Failure).await;
        cx.pass(1);
        let reopened = cx.trip(&name, None).await;
        expect_eq!(
            cx,
            (reopened.state, reopened.version, probes(&reopened)),
            (State::Open, 5, (0, 0, 0, 0, 0)),
            "trip_open from HALF_OPEN v4 must re-open at v5 with cleared probe accounting"
        );
        if reopened.opened_at <= first.opened_at {
            violated!(
                cx,
                "trip_open from HALF_OPEN kept opened_at {:?} (first opened at {:?}); it must be \
                 the storage's current time",
                reopened.opened_at,
                first.opened_at
            );
        }
        // A fresh opened_at: a 2-tick wait has not elapsed (3 ticks have
        // since the first opening).
        let v = cx.begin(&name, cx.ticks(2), 3).await;
        expect_eq!(cx, v, reopened, "the wait must count from the re-opening");
    }

    pub(super) async fn half_open_begins_once_wait_elapsed<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.3 half_open_begins_once_wait_elapsed");
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        let wait = cx.ticks(3);
        let v = cx.begin(&name, wait, 2).await;
        expect_eq!(
            cx,
            v,
            open,
            "begin_half_open_if_elapsed before the wait is a no-op"
        );
        cx.pass_beyond(3);
        let half = cx.begin(&name, wait, 2).await;
        expect_eq!(
            cx,
            (half.state, half.version, probes(&half)),
            (State::HalfOpen, 2, (2, 2, 0, 0, 0)),
            "begin_half_open_if_elapsed(permitted 2) once the wait has elapsed"
        );
        let read = cx.present(&name, "after a round began").await;
        expect_eq!(cx, read, half, "read after begin_half_open_if_elapsed");
    }

    pub(super) async fn half_open_wait_is_inclusive<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.3 half_open_wait_is_inclusive");
        if !t.is_exact() {
            return;
        }
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        let wait = cx.ticks(3);
        let micro = Duration::from_micros(1);
        t.pass(wait.saturating_sub(micro));
        let v = cx.begin(&name, wait, 1).await;
        expect_eq!(
            cx,
            v,
            open,
            "1 µs before the wait has elapsed nothing changes"
        );
        t.pass(micro);
        let v = cx.begin(&name, wait, 1).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::HalfOpen, 2),
            "exactly `wait` after opened_at the round begins (the check is `>=`)"
        );
    }

    pub(super) async fn begin_needs_open<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.3 begin_needs_open");
        let name = cx.name();
        let v = cx.begin(&name, Duration::ZERO, 1).await;
        expect_eq!(
            cx,
            v,
            SharedState::closed(),
            "begin_half_open_if_elapsed on an absent key"
        );
        cx.absent(&name, "after begin_half_open_if_elapsed on an absent key")
            .await;
        let closed = cx.close(&name, None).await;
        let v = cx.begin(&name, Duration::ZERO, 1).await;
        expect_eq!(
            cx,
            v,
            closed,
            "begin_half_open_if_elapsed on CLOSED is a no-op"
        );
    }

    pub(super) async fn second_begin_does_not_reseed<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.3 second_begin_does_not_reseed");
        let name = cx.name();
        cx.half_open(&name, 2).await;
        cx.lease(&name).await;
        let tallied = cx.record(&name, Outcome::Success).await;
        let v = cx.begin(&name, Duration::ZERO, 5).await;
        expect_eq!(
            cx,
            v,
            tallied,
            "begin_half_open_if_elapsed while HALF_OPEN is a no-op"
        );
        let read = cx.present(&name, "after a second begin").await;
        expect_eq!(
            cx,
            read,
            tallied,
            "a second begin must not reseed the round"
        );
    }

    pub(super) async fn lease_denied_outside_half_open<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.4 lease_denied_outside_half_open");
        let name = cx.name();
        let lease = cx.lease(&name).await;
        expect_eq!(
            cx,
            lease,
            ProbeLease {
                granted: false,
                state: SharedState::closed()
            },
            "lease_probe on an absent key"
        );
        cx.absent(&name, "after a denied lease on an absent key")
            .await;
        let open = cx.trip(&name, None).await;
        let lease = cx.lease(&name).await;
        expect_eq!(
            cx,
            lease,
            ProbeLease {
                granted: false,
                state: open
            },
            "lease_probe while OPEN"
        );
        let closed = cx.close(&name, None).await;
        let lease = cx.lease(&name).await;
        expect_eq!(
            cx,
            lease,
            ProbeLease {
                granted: false,
                state: closed
            },
            "lease_probe while CLOSED"
        );
        let read = cx.present(&name, "after denied leases").await;
        expect_eq!(cx, read, closed, "denied leases must not bump the version");
    }

    pub(super) async fn lease_budget_is_global<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.4 lease_budget_is_global");
        let name = cx.name();
        cx.half_open(&name, 3).await;
        let mut last = SharedState::closed();
        for (i, remaining) in [2, 1, 0].into_iter().enumerate() {
            let lease = cx.lease(&name).await;
            let version = 3 + i as u64;
            expect_eq!(
                cx,
                (
                    lease.granted,
                    lease.state.state,
                    lease.state.version,
                    probes(&lease.state)
                ),
                (true, State::HalfOpen, version, (3, remaining, 0, 0, 0)),
                "lease {} of 3",
                i + 1
            );
            last = lease.state;
        }
        for _ in 0..2 {
            let lease = cx.lease(&name).await;
            expect_eq!(
                cx,
                lease,
                ProbeLease {
                    granted: false,
                    state: last
                },
                "a lease once the budget is spent is denied without a bump"
            );
        }
    }

    pub(super) async fn concurrent_leases_respect_budget<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.4 concurrent_leases_respect_budget");
        let name = cx.name();
        cx.half_open(&name, 5).await;
        let results = s.leases_at_once(&name, 16, cx.ttl).await;
        let mut granted: Vec<u64> = Vec::new();
        for r in results {
            let lease = cx.ok("lease_probe", r);
            if lease.granted {
                granted.push(lease.state.version);
            }
        }
        granted.sort_unstable();
        expect_eq!(
            cx,
            granted,
            vec![3, 4, 5, 6, 7],
            "16 racing leases on a budget of 5: exactly 5 granted, each with its own version"
        );
        let read = cx.present(&name, "after racing leases").await;
        expect_eq!(
            cx,
            (read.version, read.probes_remaining),
            (7, 0),
            "state after racing leases"
        );
    }

    pub(super) async fn record_only_while_half_open<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.5 record_only_while_half_open");
        let name = cx.name();
        let v = cx.record(&name, Outcome::Failure).await;
        expect_eq!(
            cx,
            v,
            SharedState::closed(),
            "record_probe on an absent key"
        );
        cx.absent(
            &name,
            "after record_probe on an absent key (no key creation)",
        )
        .await;
        let open = cx.trip(&name, None).await;
        let v = cx.record(&name, Outcome::Failure).await;
        expect_eq!(cx, v, open, "record_probe while OPEN is dropped");

        let name = cx.name();
        cx.half_open(&name, 4).await;
        let expected = [
            (Outcome::Success, 3, (4, 4, 1, 0, 0)),
            (Outcome::Failure, 4, (4, 4, 2, 1, 0)),
            (Outcome::SlowSuccess, 5, (4, 4, 3, 1, 1)),
            (Outcome::SlowFailure, 6, (4, 4, 4, 2, 2)),
        ];
        let mut last = SharedState::closed();
        for (outcome, version, counts) in expected {
            let v = cx.record(&name, outcome).await;
            expect_eq!(
                cx,
                (v.state, v.version, probes(&v)),
                (State::HalfOpen, version, counts),
                "record_probe({outcome}) while HALF_OPEN"
            );
            last = v;
        }
        if !last.round_finished() {
            violated!(cx, "{last:?} should read as a finished round");
        }
        let closed = cx.close(&name, Some(6)).await;
        let v = cx.record(&name, Outcome::Success).await;
        expect_eq!(cx, v, closed, "record_probe while CLOSED is dropped");
    }

    pub(super) async fn dropped_record_does_not_refresh_ttl<T: Subject>(
        s: &T,
        t: &dyn StorageTime,
    ) {
        let cx = Cx::new(s, t, "R16.5 dropped_record_does_not_refresh_ttl").short_ttl();
        let name = cx.name();
        cx.trip(&name, None).await;
        cx.pass(6);
        cx.record(&name, Outcome::Success).await; // dropped: OPEN
        cx.pass_beyond(4); // 10 ticks after the trip
        cx.absent(&name, "10 ticks after a trip with a 10-tick TTL (a dropped record_probe must not refresh the TTL)").await;
    }

    pub(super) async fn close_always_bumps<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.6 close_always_bumps");
        let name = cx.name();
        for version in 1..=3 {
            let v = cx.close(&name, None).await;
            expect_eq!(
                cx,
                v,
                SharedState {
                    version,
                    ..SharedState::closed()
                },
                "close #{version} (CLOSED or absent before it)"
            );
        }
        let v = cx.close(&name, Some(3)).await;
        expect_eq!(cx, v.version, 4, "close(expected 3) at v3");
        let read = cx
            .present(&name, "after close (an absent key is created)")
            .await;
        expect_eq!(cx, read, v, "read after close");

        let name = cx.name();
        cx.half_open(&name, 2).await;
        cx.lease(&name).await;
        cx.record(&name, Outcome::SlowFailure).await;
        let v = cx.close(&name, None).await;
        expect_eq!(
            cx,
            v,
            SharedState {
                version: 5,
                ..SharedState::closed()
            },
            "close from HALF_OPEN v4 clears opened_at and the probe accounting"
        );
    }

    pub(super) async fn version_sequence<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.7 version_sequence");
        let name = cx.name();
        let never = cx.ticks(LONG_TTL_TICKS);
        let mut got = Vec::new();
        let mut expect = |cx: &Cx<'_, T>, step: &str, v: SharedState, version: u64| {
            got.push(v.version);
            expect_eq!(
                cx,
                v.version,
                version,
                "version after {step} (so far {got:?})"
            );
        };
        expect(&cx, "trip_open", cx.trip(&name, None).await, 1);
        expect(
            &cx,
            "an idempotent trip_open",
            cx.trip(&name, None).await,
            1,
        );
        expect(
            &cx,
            "a no-op begin (wait not elapsed)",
            cx.begin(&name, never, 2).await,
            1,
        );
        expect(&cx, "a denied lease (OPEN)", cx.lease(&name).await.state, 1);
        expect(
            &cx,
            "a dropped record (OPEN)",
            cx.record(&name, Outcome::Success).await,
            1,
        );
        expect(
            &cx,
            "begin_half_open",
            cx.begin(&name, Duration::ZERO, 2).await,
            2,
        );
        expect(
            &cx,
            "a second begin",
            cx.begin(&name, Duration::ZERO, 2).await,
            2,
        );
        expect(&cx, "lease 1", cx.lease(&name).await.state, 3);
        expect(&cx, "lease 2", cx.lease(&name).await.state, 4);
        expect(
            &cx,
            "a denied lease (budget spent)",
            cx.lease(&name).await.state,
            4,
        );
        expect(&cx, "record 1", cx.record(&name, Outcome::Success).await, 5);
        expect(&cx, "record 2", cx.record(&name, Outcome::Failure).await, 6);
        expect(&cx, "a fenced-out close", cx.close(&name, Some(5)).await, 6);
        expect(&cx, "close(expected 6)", cx.close(&name, Some(6)).await, 7);
        expect(
            &cx,
            "a dropped record (CLOSED)",
            cx.record(&name, Outcome::Success).await,
            7,
        );
        expect(
            &cx,
            "a fenced-out trip_open",
            cx.trip(&name, Some(6)).await,
            7,
        );
    }

    pub(super) async fn expired_key_reads_absent<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.9 expired_key_reads_absent").short_ttl();
        let name = cx.name();
        let open = cx.trip(&name, None).await;
        let other = cx.name();
        cx.half_open(&other, 1).await;
        let read = cx
            .present(&name, "right after trip_open with a 10-tick TTL")
            .await;
        expect_eq!(cx, read, open, "read before expiry");
        cx.pass_beyond(SHORT_TTL_TICKS);
        cx.absent(&name, "a whole TTL after the last write").await;
        let lease = cx.lease(&other).await;
        expect_eq!(
            cx,
            lease,
            ProbeLease {
                granted: false,
                state: SharedState::closed()
            },
            "lease_probe on an expired HALF_OPEN key reads as CLOSED"
        );
        let v = cx.trip(&name, None).await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Open, 1),
            "trip_open after expiry starts the version sequence again"
        );
    }

    pub(super) async fn applied_writes_refresh_ttl<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.9 applied_writes_refresh_ttl").short_ttl();
        let name = cx.name();
        cx.trip(&name, None).await;
        let steps = [
            "trip_open",
            "begin_half_open_if_elapsed",
            "lease_probe",
            "record_probe",
        ];
        for (i, previous) in steps.into_iter().enumerate() {
            cx.pass(6);
            let when =
                format!("6 ticks after {previous} with a 10-tick TTL (it must refresh the TTL)");
            cx.present(&name, &when).await;
            match i {
                0 => _ = cx.begin(&name, Duration::ZERO, 1).await,
                1 => _ = cx.lease(&name).await,
                2 => _ = cx.record(&name, Outcome::Success).await,
                _ => _ = cx.close(&name, None).await,
            }
        }
        cx.pass(6);
        let v = cx
            .present(
                &name,
                "6 ticks after close with a 10-tick TTL (it must refresh the TTL)",
            )
            .await;
        expect_eq!(
            cx,
            (v.state, v.version),
            (State::Closed, 5),
            "state after the round"
        );
    }

    pub(super) async fn fenced_write_does_not_refresh_ttl<T: Subject>(s: &T, t: &dyn StorageTime) {
        let cx = Cx::new(s, t, "R16.9 fenced_write_does_not_refresh_ttl").short_ttl();
        let name = cx.name();
        cx.trip(&name, None).await;
        cx.pass(6);
        cx.trip(&name, Some(9)).await;
        cx.close(&name, Some(9)).await;
        cx.pass_beyond(4); // 10 ticks after the trip
        cx.absent(
            &name,
            "10 ticks after a trip with a 10-tick TTL (fenced-out writes must not refresh the TTL)",
        )
        .await;
    }

    pub(super) async fn poll_many_answers_like_single_requests<T: Subject>(
        s: &T,
        t: &dyn StorageTime,
    ) {
        let cx = Cx::new(s, t, "R17.2 poll_many_answers_like_single_requests").short_ttl();
        let empty = cx.ok("poll_many", s.poll_many(&[]).await);
        expect_eq!(cx, empty.len(), 0, "answers to an empty batch");

        let expired = cx.name();
        cx.trip(&expired, None).await;
        cx.pass_beyond(SHORT_TTL_TICKS);
        let absent = cx.name();
        let closed = cx.name();
        let closed_v = cx.close(&closed, None).await;
        let open = cx.name();
        let open_v = cx.trip(&open, None).await;
        let due = cx.name();
        let due_v = cx.trip(&due, None).await;
        let half = cx.name();
        let half_v = cx.half_open(&half, 2).await;
        cx.pass(2);

        let begin = |name, wait| PollRequest::BeginHalfOpen {
            name,
            wait,
            permitted: 3,
            ttl: cx.ttl,
        };
        let requests = [
            PollRequest::Read { name: &absent },
            PollRequest::Read { name: &expired },
            PollRequest::Read { name: &closed },
            PollRequest::Read { name: &open },
            begin(open.as_str(), cx.ticks(1000)),
            begin(due.as_str(), cx.ticks(1)),
            PollRequest::Read { name: &half },
            begin(absent.as_str(), Duration::ZERO),
        ];
        let answers = cx.ok("poll_many", s.poll_many(&requests).await);
        expect_eq!(
            cx,
            answers.len(),
            requests.len(),
            "poll_many must answer every request, in order"
        );
        let answers: Vec<SharedState> = answers
            .into_iter()
            .map(|a| cx.ok("poll_many (one answer)", a))
            .collect();
        let begun = SharedState {
            state: State::HalfOpen,
            version: 2,
            probes_permitted: 3,
            probes_remaining: 3,
            ..due_v
        };
        let expected = [
            SharedState::closed(),
            SharedState::closed(),
            closed_v,
            open_v,
            open_v,
            begun,
            half_v,
            SharedState::closed(),
        ];
        for (i, (got, want)) in answers.iter().zip(expected).enumerate() {
            expect_eq!(cx, *got, want, "answer {i} to {:?}", requests[i]);
        }
        let read = cx
            .present(&due, "after a batched begin whose wait elapsed")
            .await;
        expect_eq!(cx, read, begun, "the batched begin must be applied");
        cx.absent(&absent, "after a batched read and begin of an absent key")
            .await;
        cx.absent(&expired, "after a batched read of an expired key")
            .await;
    }
}

macro_rules! suite {
    ($($(#[doc = $doc:literal])+ $rule:ident;)+) => {
        /// Every rule for a blocking [`Storage`], one function each.
        ///
        /// Each takes the storage and a [`StorageTime`] for its clock and
        /// panics, naming the rule, on a violation.
        pub mod blocking {
            use super::{Blocking, StorageTime, block_on, rules};
            use crate::store::Storage;

            $(
                $(#[doc = $doc])+
                ///
                /// # Panics
                ///
                /// When the storage violates the rule, or returns an error.
                ///
                /// ```
                /// use interlock::storage::contract::blocking;
                /// use interlock::storage::MemoryStorage;
                /// use interlock::ManualClock;
                ///
                /// let clock = ManualClock::new();
                /// let storage = MemoryStorage::builder().clock(clock.clone()).build();
                #[doc = concat!("blocking::", stringify!($rule), "(&storage, &clock);")]
                /// ```
                pub fn $rule<S: Storage>(storage: &S, time: &dyn StorageTime) {
                    block_on(rules::$rule(&Blocking(storage), time));
                }
            )+
        }

        /// Every rule for an [`AsyncStorage`], one function each.
        ///
        /// Each takes the storage and a [`StorageTime`] for its clock and
        /// panics, naming the rule, on a violation. The futures are `Send`.
        pub mod asynchronous {
            use super::{NonBlocking, StorageTime, rules};
            use crate::store::AsyncStorage;

            $(
                $(#[doc = $doc])+
                ///
                /// # Panics
                ///
                /// When the storage violates the rule, or returns an error.
                ///
                /// ```
                /// use interlock::storage::contract::asynchronous;
                /// use interlock::storage::MemoryStorage;
                /// use interlock::ManualClock;
                ///
                /// let clock = ManualClock::new();
                /// let storage = MemoryStorage::builder().clock(clock.clone()).build();
                /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
                #[doc = concat!("rt.block_on(asynchronous::", stringify!($rule), "(&storage, &clock));")]
                /// # Ok::<(), std::io::Error>(())
                /// ```
                pub async fn $rule<S: AsyncStorage>(storage: &S, time: &dyn StorageTime) {
                    rules::$rule(&NonBlocking(storage), time).await;
                }
            )+
        }

        /// The names of every rule, in the order the suite runs them.
        ///
        /// ```
        /// use interlock::storage::contract::RULES;
        ///
        /// assert!(RULES.contains(&"fencing_miss_writes_nothing"));
        /// ```
        pub const RULES: &[&str] = &[$(stringify!($rule)),+];

        /// Runs every rule against a blocking storage.
        ///
        /// # Panics
        ///
        /// At the first violated rule, naming it.
        ///
        /// ```
        /// use interlock::storage::contract::check_storage;
        /// use interlock::storage::MemoryStorage;
        /// use interlock::ManualClock;
        ///
        /// let clock = ManualClock::new();
        /// check_storage(&MemoryStorage::builder().clock(clock.clone()).build(), &clock);
        /// ```
        pub fn check_storage<S: Storage>(storage: &S, time: &dyn StorageTime) {
            $(blocking::$rule(storage, time);)+
        }

        /// Runs every rule against an async storage.
        ///
        /// # Panics
        ///
        /// At the first violated rule, naming it.
        ///
        /// ```
        /// use interlock::storage::contract::check_async_storage;
        /// use interlock::storage::MemoryStorage;
        /// use interlock::ManualClock;
        ///
        /// let clock = ManualClock::new();
        /// let storage = MemoryStorage::builder().clock(clock.clone()).build();
        /// let rt = tokio::runtime::Builder::new_current_thread().build()?;
        /// rt.block_on(check_async_storage(&storage, &clock));
        /// # Ok::<(), std::io::Error>(())
        /// ```
        pub async fn check_async_storage<S: AsyncStorage>(storage: &S, time: &dyn StorageTime) {
            $(asynchronous::$rule(storage, time).await;)+
        }
    };
}

suite! {
    /// R16.1: a name nobody wrote reads as `None`, whatever its characters.
    absent_key_reads_none;
    /// R16.2: `trip_open` on an absent key (version 0) opens it at version 1
    /// with no probe accounting, unfenced or with `expected_version = 0`.
    trip_opens_at_version_one;
    /// R16.2, R16.6: a `trip_open` or `close` whose expected version does not
    /// match writes nothing (not even on an absent key) and returns the
    /// current state.
    fencing_miss_writes_nothing;
    /// R16.2, R16.6: a matching expected version applies the write.
    fencing_match_applies;
    /// R16.2: `trip_open` while OPEN keeps the first opener's `opened_at`
    /// and version.
    trip_is_idempotent_while_open;
    /// R16.2: an idempotent `trip_open` still refreshes the TTL.
    idempotent_trip_refreshes_ttl;
    /// R16.2: `trip_open` from HALF_OPEN re-opens with a fresh `opened_at`,
    /// a new version and cleared probe accounting.
    trip_from_half_open_reopens;
    /// R16.3: an OPEN key moves to HALF_OPEN with `permitted` probes only
    /// once the wait has elapsed on the storage's clock.
    half_open_begins_once_wait_elapsed;
    /// R16.3: the elapsed check is inclusive (`now − opened_at >= wait`);
    /// checked only with an exact [`StorageTime`].
    half_open_wait_is_inclusive;
    /// R16.3: `begin_half_open_if_elapsed` changes nothing unless OPEN, and
    /// creates no key.
    begin_needs_open;
    /// R16.3: a second `begin_half_open_if_elapsed` in HALF_OPEN does not
    /// reseed the round.
    second_begin_does_not_reseed;
    /// R16.4: leases are denied (without a bump, without creating a key)
    /// unless HALF_OPEN.
    lease_denied_outside_half_open;
    /// R16.4, R16.7: exactly `permitted` leases are granted, each bumping the
    /// version; the denied ones change nothing.
    lease_budget_is_global;
    /// R16.4: leases racing each other never exceed the budget (the
    /// operation is atomic).
    concurrent_leases_respect_budget;
    /// R16.5: `record_probe` tallies completed, failures and slows only while
    /// HALF_OPEN, and creates no key.
    record_only_while_half_open;
    /// R16.5: a dropped `record_probe` does not refresh the TTL.
    dropped_record_does_not_refresh_ttl;
    /// R16.6: an applied `close` always bumps the version, even when already
    /// CLOSED, and creates an absent key at version 1.
    close_always_bumps;
    /// R16.7: the version sequence trip v1, half-open v2, lease v3, lease
    /// v4, record v5, record v6, close v7, with no bump for any no-op.
    version_sequence;
    /// R16.9: a key expires a TTL after its last write and then reads as
    /// absent (CLOSED); the version sequence starts again.
    expired_key_reads_absent;
    /// R16.9: every applied write refreshes the TTL.
    applied_writes_refresh_ttl;
    /// R16.2, R16.9: fenced-out writes do not refresh the TTL.
    fenced_write_does_not_refresh_ttl;
    /// R17.2 (issue 13): `poll_many` answers each request as `read` (absent
    /// or expired = CLOSED) or `begin_half_open_if_elapsed` would, in
    /// order, and applies the begins whose wait elapsed.
    poll_many_answers_like_single_requests;
    /// R16.13 (issue 21): `restart_stalled_round` starts a fresh round only
    /// over a HALF_OPEN record at the expected version with no slot left
    /// (a finished round whose decision was lost included), keeping
    /// `opened_at`; anything else (absent, OPEN, CLOSED, slots left, a
    /// stale version) writes nothing and creates no key.
    restart_needs_a_stalled_round_at_the_expected_version;
    /// R16.13, R16.14: a restart or restore refreshes the TTL when applied
    /// and only then.
    restart_and_restore_refresh_ttl_only_when_applied;
    /// R16.14 (issue 21): `restore` writes the given state over a record at
    /// the expected version (absent = 0), lifting the version to
    /// `max(expected, state.version) + 1`, and writes nothing otherwise.
    restore_is_fenced_and_lifts_the_version;
    /// R16.14: `restore` keeps a past `opened_at` (the OPEN wait counts
    /// from it), clamps a future one to the storage's clock, and writes
    /// zero for a CLOSED record.
    restore_clamps_opened_at_to_the_storage_clock;
    /// R16.7 (issue 21): no operation writes a version above
    /// `SharedState::MAX_VERSION`.
    versions_never_pass_the_maximum;
    /// R16.15 (issue 29): `poll_changes` without an epoch, or from an epoch
    /// the storage never returned, answers every request as `poll_many`
    /// would (a full read), begins applied.
    poll_changes_without_a_known_epoch_reads_everything;
    /// R16.15: from an epoch it returned, `poll_changes` answers every
    /// record that changed since (each kind of applied write, and an
    /// expiry) with its current state, never leaves a read or a begin
    /// unanswered, and returns an epoch to go on from that misses nothing
    /// either.
    poll_changes_never_skips_a_change;
    /// R16.15: a `ReadUnlessAt` is answered unless the record is exactly
    /// the one its version names: a stale version, one overwritten since,
    /// an expired or absent record are read, and without an epoch every
    /// one is.
    poll_changes_vouches_only_for_the_version_it_holds;
}
