//! [`Hedge`]: when a call is slow, start another attempt and take the first
//! success.

use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use super::retry::UnlessOpen;
use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Predicate, Sleep, Sleeper, Strategy, emit};
use crate::clock::{Clock, MonotonicClock, Timestamp, duration_to_nanos};
use crate::error::{ConfigError, Shown};
use crate::event::{Event, EventListener, into_arc as listener_arc};

/// The largest [`latency_window`](HedgeBuilder::latency_window).
pub const MAX_LATENCY_WINDOW: usize = 100_000;

/// Hedges slow calls: when an attempt has not finished after the hedging
/// delay, starts another one (at most `max_hedged_attempts` more), and
/// returns the first success.
///
/// - **The delay** is fixed, or (with [`percentile`](HedgeBuilder::percentile))
///   the given percentile of the latencies of the last successful attempts,
///   so only the slowest calls are hedged; the fixed delay serves until the
///   window is full. [`Duration::MAX`] never hedges on time.
/// - **Failures**: an attempt that fails with an error the predicate selects
///   (default [`UnlessOpen`]: every error but a rejection) is replaced at
///   once while hedges remain; an error it does not select is the answer,
///   returned at once. When every attempt has failed, the last error comes
///   back as it was.
/// - **Never into an open circuit**: once an attempt is rejected by a
///   circuit breaker inside the hedge (or refused by a full bulkhead or a
///   spent rate limit), no further attempt is started; the attempts already
///   running go on, and if none succeeds the refusal comes back.
/// - **Losers are cancelled** on the async path: their futures are dropped
///   as soon as one attempt succeeds (or the answer is known). On the
///   blocking path each attempt runs on a worker thread, and a thread cannot
///   be killed: the losers run to completion and their results are thrown
///   away (see [`Timeout`](super::Timeout)).
///
/// Each hedge is reported as [`Event::HedgeStarted`] when it starts. Put
/// the hedge **outside** the breaker (the breaker counts every attempt and
/// refuses hedges once it opens) and inside a timeout that bounds the whole
/// operation: `Timeout(Hedge(CircuitBreaker(Timeout(call))))`.
///
/// Async delays sleep on the hedge's [`Sleeper`]; blocking delays wait on
/// real time. Latencies are measured on its [`Clock`] (default
/// [`MonotonicClock`]).
///
/// ```
/// use interlock::pipeline::{Hedge, ManualSleeper, Pipeline};
/// use interlock::ManualClock;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
///
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// let clock = ManualClock::new();
/// let hedge = Hedge::builder(Duration::from_millis(50))
///     .sleeper(ManualSleeper::new(clock.clone()))
///     .build()?;
/// let pipeline = Pipeline::builder().hedge(hedge).build();
///
/// // The first attempt hangs; the hedge started 50 ms later answers.
/// let attempts = AtomicU32::new(0);
/// let answer = block_on(pipeline.call_async(|| {
///     let first = attempts.fetch_add(1, Ordering::Relaxed) == 0;
///     async move {
///         if first {
///             std::future::pending::<()>().await;
///         }
///         Ok::<_, std::io::Error>("from the hedge")
///     }
/// }))?;
/// assert_eq!(answer, "from the hedge");
/// assert_eq!(attempts.load(Ordering::Relaxed), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Hedge<P = UnlessOpen> {
    shared: Arc<Shared>,
    when: Arc<P>,
}

impl<P> Clone for Hedge<P> {
    fn clone(&self) -> Self {
        Hedge {
            shared: Arc::clone(&self.shared),
            when: Arc::clone(&self.when),
        }
    }
}

impl<P> fmt::Debug for Hedge<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.shared;
        f.debug_struct("Hedge")
            .field("name", &shared.name)
            .field("max_hedged_attempts", &shared.max_hedged_attempts)
            .field("delay", &shared.delay)
            .field(
                "percentile",
                &shared.latencies.as_ref().map(|l| l.percentile),
            )
            .finish_non_exhaustive()
    }
}

struct Shared {
    name: Arc<str>,
    max_hedged_attempts: u32,
    delay: Duration,
    latencies: Option<Latencies>,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    listeners: Box<[Arc<dyn EventListener>]>,
}

/// The last `window` latencies of successful attempts and their percentile.
struct Latencies {
    percentile: f64,
    ring: Mutex<Ring>,
    /// The percentile of a full window, in nanoseconds; `u64::MAX` until full.
    current: AtomicU64,
}

struct Ring {
    samples: Vec<u64>,
    next: usize,
    full: bool,
    scratch: Vec<u64>,
}

impl Latencies {
    fn new(percentile: f64, window: usize) -> Self {
        Latencies {
            percentile,
            ring: Mutex::new(Ring {
                samples: vec![0; window],
                next: 0,
                full: false,
                scratch: Vec::with_capacity(window),
            }),
            current: AtomicU64::new(u64::MAX),
        }
    }

    fn record(&self, latency: Duration) {
        let mut guard = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let ring = &mut *guard;
        let window = ring.samples.len();
        ring.samples[ring.next] = duration_to_nanos(latency);
        ring.next = (ring.next + 1) % window;
        ring.full |= ring.next == 0;
        if !ring.full {
            return;
        }
        ring.scratch.clear();
        ring.scratch.extend_from_slice(&ring.samples);
        let rank = nearest_rank(self.percentile, window);
        let (_, value, _) = ring.scratch.select_nth_unstable(rank);
        self.current.store(*value, Ordering::Relaxed);
    }

    fn current(&self) -> Option<Duration> {
        match self.current.load(Ordering::Relaxed) {
            u64::MAX => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }
}

/// The 0-based index of the `p`-th percentile of `n` sorted samples
/// (nearest-rank: the smallest sample with at least `p * n` at or below it).
fn nearest_rank(p: f64, n: usize) -> usize {
    let rank = (p * n as f64).ceil() as usize;
    rank.clamp(1, n) - 1
}

/// Builds a [`Hedge`].
#[must_use = "a builder does nothing until `build()`"]
pub struct HedgeBuilder<P> {
    name: String,
    max_hedged_attempts: u32,
    delay: Duration,
    percentile: Option<f64>,
    latency_window: usize,
    when: P,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    listeners: Vec<Arc<dyn EventListener>>,
}

impl<P> fmt::Debug for HedgeBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeBuilder")
            .field("name", &self.name)
            .field("max_hedged_attempts", &self.max_hedged_attempts)
            .field("delay", &self.delay)
            .field("percentile", &self.percentile)
            .finish_non_exhaustive()
    }
}

impl Hedge {
    /// A builder for a hedge that starts one more attempt when the
    /// attempts before it have run for `delay`.
    pub fn builder(delay: Duration) -> HedgeBuilder<UnlessOpen> {
        HedgeBuilder {
            name: "hedge".into(),
            max_hedged_attempts: 1,
            delay,
            percentile: None,
            latency_window: 100,
            when: UnlessOpen,
            clock: Arc::new(MonotonicClock),
            sleeper: into_arc(StdSleeper),
            listeners: Vec::new(),
        }
    }
}

impl<P> HedgeBuilder<P> {
    /// How many attempts it may start besides the first (default 1).
    pub fn max_hedged_attempts(mut self, max: u32) -> Self {
        self.max_hedged_attempts = max;
        self
    }

    /// Hedges after the `percentile` (in `[0, 1]`, e.g. `0.95`) of the
    /// latencies of the last [`latency_window`](Self::latency_window)
    /// successful attempts, instead of the fixed delay; the fixed delay
    /// serves until the window is full.
    pub fn percentile(mut self, percentile: f64) -> Self {
        self.percentile = Some(percentile);
        self
    }

    /// How many latencies the percentile is taken over (default 100, at
    /// most [`MAX_LATENCY_WINDOW`]).
    pub fn latency_window(mut self, samples: usize) -> Self {
        self.latency_window = samples;
        self
    }

    /// Which failed attempts it replaces with a hedge at once (default
    /// [`UnlessOpen`]); any other error is the answer. A refusal (a
    /// rejection, a full bulkhead, a spent rate limit) never starts a
    /// hedge, whatever the predicate says.
    pub fn when<Q>(self, when: Q) -> HedgeBuilder<Q> {
        HedgeBuilder {
            name: self.name,
            max_hedged_attempts: self.max_hedged_attempts,
            delay: self.delay,
            percentile: self.percentile,
            latency_window: self.latency_window,
            when,
            clock: self.clock,
            sleeper: self.sleeper,
            listeners: self.listeners,
        }
    }

    /// The name its events carry (default `"hedge"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a listener for [`Event::HedgeStarted`].
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(listener_arc(listener));
        self
    }

    /// What async delays sleep on (default [`StdSleeper`]).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = into_arc(sleeper);
        self
    }

    /// What latencies are measured on (default [`MonotonicClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The hedge.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_hedged_attempts` if it is zero,
    /// `percentile` if it is outside `[0, 1]`, or `latency_window` if it is
    /// zero or above [`MAX_LATENCY_WINDOW`].
    pub fn build(self) -> Result<Hedge<P>, ConfigError> {
        if self.max_hedged_attempts == 0 {
            return Err(ConfigError::new(
                "max_hedged_attempts",
                "must be at least 1 (a hedge that never hedges), got 0",
            ));
        }
        let latencies = match self.percentile {
            None => None,
            Some(p) if !(0.0..=1.0).contains(&p) => {
                return Err(ConfigError::new(
                    "percentile",
                    format!("must be between 0 and 1, got {}", Shown(p)),
                ));
            }
            Some(_) if !(1..=MAX_LATENCY_WINDOW).contains(&self.latency_window) => {
                return Err(ConfigError::new(
                    "latency_window",
                    format!(
                        "must be between 1 and {MAX_LATENCY_WINDOW}, got {}",
                        self.latency_window
                    ),
                ));
            }
            Some(p) => Some(Latencies::new(p, self.latency_window)),
        };
        Ok(Hedge {
            shared: Arc::new(Shared {
                name: self.name.into(),
                max_hedged_attempts: self.max_hedged_attempts,
                delay: self.delay,
                latencies,
                clock: self.clock,
                sleeper: self.sleeper,
                listeners: self.listeners.into_boxed_slice(),
            }),
            when: Arc::new(self.when),
        })
    }
}

impl<P> Hedge<P> {
    /// The name its events carry.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// How many attempts it may start besides the first.
    #[must_use]
    pub fn max_hedged_attempts(&self) -> u32 {
        self.shared.max_hedged_attempts
    }

    /// The delay a call starting now would hedge after: the tracked
    /// percentile once its window is full, else the fixed delay.
    ///
    /// ```
    /// use interlock::pipeline::{Hedge, Pipeline};
    /// use interlock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let hedge = Hedge::builder(Duration::from_secs(1))
    ///     .percentile(0.5)
    ///     .latency_window(4)
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let pipeline = Pipeline::builder().hedge(hedge.clone()).build();
    /// for ms in [10, 20, 30, 40] {
    ///     assert_eq!(hedge.current_delay(), Duration::from_secs(1)); // window not full yet
    ///     let clock = clock.clone();
    ///     pipeline.call(move || {
    ///         clock.advance(Duration::from_millis(ms));
    ///         Ok::<_, std::io::Error>(())
    ///     })?;
    /// }
    /// assert_eq!(hedge.current_delay(), Duration::from_millis(20)); // the median
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn current_delay(&self) -> Duration {
        let shared = &self.shared;
        shared
            .latencies
            .as_ref()
            .and_then(Latencies::current)
            .unwrap_or(shared.delay)
    }

    fn started(&self, attempt: u32, delay: Duration) {
        emit(
            &self.shared.listeners,
            &Event::HedgeStarted {
                name: &self.shared.name,
                attempt,
                delay,
            },
        );
    }

    /// When an attempt starts, as far as the latency window needs it (the
    /// clock is read only when a percentile is tracked).
    fn start_time(&self) -> Timestamp {
        match self.shared.latencies {
            Some(_) => self.shared.clock.now(),
            None => Timestamp::ZERO,
        }
    }

    fn succeeded(&self, started: Timestamp) {
        if let Some(latencies) = &self.shared.latencies {
            latencies.record(self.shared.clock.now() - started);
        }
    }

    /// The timer for the next hedge, if one may still start on time.
    fn arm(&self, delay: Duration, plan: &Plan) -> Option<Sleep> {
        (plan.may_start() && delay != Duration::MAX).then(|| self.shared.sleeper.sleep(delay))
    }
}

/// What one operation has started and may still start.
struct Plan {
    started: u32,
    total: u32,
    /// An attempt was rejected by a breaker: start nothing more.
    blocked: bool,
}

impl Plan {
    fn new(max_hedged_attempts: u32) -> Self {
        Plan {
            started: 1,
            total: max_hedged_attempts.saturating_add(1),
            blocked: false,
        }
    }

    fn may_start(&self) -> bool {
        !self.blocked && self.started < self.total
    }

    /// The attempt number of the hedge being started.
    fn start(&mut self) -> u32 {
        self.started += 1;
        self.started
    }
}

/// What a failed attempt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Refused before it ran (open circuit, full bulkhead, spent limit):
    /// start nothing more.
    Refused,
    /// A failure worth a replacement.
    Selected,
    /// The answer: return it, dropping the other attempts.
    Final,
}

/// What to do with a failed attempt.
enum Failure {
    /// The answer: return it, dropping the other attempts.
    Final,
    /// Start a replacement now.
    Replace,
    /// Keep waiting for the attempts still running.
    Wait,
}

impl Plan {
    fn after(&mut self, judged: Judged) -> Failure {
        match judged {
            Judged::Final => Failure::Final,
            Judged::Refused => {
                self.blocked = true;
                Failure::Wait
            }
            Judged::Selected if self.may_start() => Failure::Replace,
            Judged::Selected => Failure::Wait,
        }
    }
}

impl<P> Hedge<P> {
    fn judge<E, K>(&self, error: &PipelineError<E>) -> Judged
    where
        P: Predicate<E, K>,
    {
        if refused(error) {
            Judged::Refused
        } else if Predicate::<E, K>::test(&*self.when, error) {
            Judged::Selected
        } else {
            Judged::Final
        }
    }
}

/// Whether the attempt was refused before it ran: by an open circuit, a
/// full bulkhead or a spent rate limit. Another attempt would only be
/// refused again.
fn refused<E>(error: &PipelineError<E>) -> bool {
    #[cfg(feature = "governor")]
    let limited = error.rate_limited().is_some();
    #[cfg(not(feature = "governor"))]
    let limited = false;
    error.is_rejected() || error.is_bulkhead_full() || limited
}

/// The error of an operation that ended without one.
fn lost<E>() -> PipelineError<E> {
    PipelineError::Other("every hedged attempt ended without a result".into())
}

/// What a blocking attempt sends back.
enum Report<T, E> {
    Done(Result<T, PipelineError<E>>, Timestamp),
    Panicked(Box<dyn std::any::Any + Send>),
}

impl<T, E, K, P: Predicate<E, K>> Strategy<T, E, K> for Hedge<P> {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let next = Arc::new(next);
        let (tx, rx) = mpsc::channel::<Report<T, E>>();
        let spawn = |attempt: u32| {
            let next = Arc::clone(&next);
            let tx = tx.clone();
            let started = self.start_time();
            std::thread::Builder::new()
                .name(format!("interlock-hedge-{attempt}"))
                .spawn(move || {
                    let report = match catch_unwind(AssertUnwindSafe(|| (*next)())) {
                        Ok(result) => Report::Done(result, started),
                        Err(panic) => Report::Panicked(panic),
                    };
                    // The receiver is gone once another attempt answered.
                    let _ = tx.send(report);
                })
        };
        if let Err(e) = spawn(1) {
            return Err(PipelineError::Other(Box::new(e)));
        }
        let mut plan = Plan::new(self.shared.max_hedged_attempts);
        let mut running = 1u32;
        let delay = self.current_delay();
        let mut last_error = None;
        loop {
            let wait = (plan.may_start() && delay != Duration::MAX).then_some(delay);
            let received = match wait {
                Some(wait) => rx.recv_timeout(wait),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let replace = match received {
                Ok(Report::Panicked(panic)) => resume_unwind(panic),
                Ok(Report::Done(Ok(value), started)) => {
                    self.succeeded(started);
                    return Ok(value);
                }
                Ok(Report::Done(Err(error), _)) => {
                    running -= 1;
                    let verdict = plan.after(self.judge::<E, K>(&error));
                    last_error = Some(error);
                    match verdict {
                        Failure::Final => break,
                        Failure::Replace => Some(Duration::ZERO),
                        Failure::Wait if running == 0 => break,
                        Failure::Wait => None,
                    }
                }
                Err(RecvTimeoutError::Timeout) => Some(delay),
                // Unreachable while `tx` lives; treat it as "nothing left".
                Err(RecvTimeoutError::Disconnected) => break,
            };
            if let Some(waited) = replace {
                let attempt = plan.start();
                self.started(attempt, waited);
                match spawn(attempt) {
                    Ok(_) => running += 1,
                    // No thread for the hedge: carry on with what runs.
                    Err(_) => plan.blocked = true,
                }
                if running == 0 {
                    break;
                }
            }
        }
        Err(last_error.unwrap_or_else(lost))
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        let mut run = self.begin(next());
        poll_fn(|cx| {
            self.drive(
                &mut run,
                cx,
                |error| self.judge::<E, K>(error),
                |_| Poll::Ready(Some(next())),
                lost,
            )
        })
        .await
    }
}

/// One hedged operation in progress on the async path: the attempts that
/// run, the timer of the next hedge, what may still start.
pub(crate) struct Run<F, X> {
    running: Vec<(Pin<Box<F>>, Timestamp)>,
    timer: Option<Sleep>,
    /// Whether the first timer was set: not before the attempts were first
    /// found pending, so an attempt that answers at once costs no timer.
    armed: bool,
    plan: Plan,
    delay: Duration,
    /// Hedges due to start, by the wait before each (zero for a
    /// replacement), until the caller can start them.
    due: Vec<Duration>,
    last_error: Option<X>,
}

impl<P> Hedge<P> {
    /// Starts an operation whose first attempt is `first`.
    pub(crate) fn begin<F, X>(&self, first: F) -> Run<F, X> {
        let plan = Plan::new(self.shared.max_hedged_attempts);
        let delay = self.current_delay();
        Run {
            running: vec![(Box::pin(first), self.start_time())],
            timer: None,
            armed: false,
            plan,
            delay,
            due: Vec::new(),
            last_error: None,
        }
    }

    /// Drives `run` to its answer: polls the attempts and the timer, and
    /// starts each hedge through `start`, which may not be able to yet
    /// (`Pending`, it will wake the task) or at all (`None`: no further
    /// hedge). Dropping `run` cancels every attempt still running. `lost`
    /// makes the error of an operation that ended without one (which the
    /// first attempt's presence rules out).
    pub(crate) fn drive<F, T, X>(
        &self,
        run: &mut Run<F, X>,
        cx: &mut Context<'_>,
        judge: impl Fn(&X) -> Judged,
        mut start: impl FnMut(&mut Context<'_>) -> Poll<Option<F>>,
        lost: fn() -> X,
    ) -> Poll<Result<T, X>>
    where
        F: Future<Output = Result<T, X>>,
    {
        'poll: loop {
            while let Some(&waited) = run.due.first() {
                if !run.plan.may_start() {
                    run.due.clear();
                    break;
                }
                match start(cx) {
                    Poll::Pending => break,
                    Poll::Ready(None) => {
                        run.due.clear();
                        run.plan.blocked = true;
                    }
                    Poll::Ready(Some(attempt)) => {
                        run.due.remove(0);
                        let number = run.plan.start();
                        self.started(number, waited);
                        run.running.push((Box::pin(attempt), self.start_time()));
                        run.timer = self.arm(run.delay, &run.plan);
                        run.armed = true;
                    }
                }
            }
            let mut i = 0;
            while i < run.running.len() {
                let Poll::Ready(result) = run.running[i].0.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                let (_, started) = run.running.swap_remove(i);
                let error = match result {
                    Ok(value) => {
                        self.succeeded(started);
                        run.running.clear();
                        return Poll::Ready(Ok(value));
                    }
                    Err(error) => error,
                };
                let verdict = run.plan.after(judge(&error));
                run.last_error = Some(error);
                match verdict {
                    Failure::Final => break 'poll,
                    Failure::Wait => {}
                    Failure::Replace => {
                        run.due.push(Duration::ZERO);
                        continue 'poll;
                    }
                }
            }
            if run.running.is_empty() && run.due.is_empty() {
                break 'poll;
            }
            if !run.armed {
                run.armed = true;
                run.timer = self.arm(run.delay, &run.plan);
            }
            let fired = run
                .timer
                .as_mut()
                .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
            if !fired {
                return Poll::Pending;
            }
            run.timer = None;
            if run.plan.may_start() {
                run.due.push(run.delay);
            }
        }
        // Dropping what still runs cancels it.
        run.running.clear();
        run.due.clear();
        Poll::Ready(Err(run.last_error.take().unwrap_or_else(lost)))
    }
}

#[cfg(test)]
mod tests {
    use super::nearest_rank;

    #[test]
    fn nearest_rank_percentiles() {
        // (p, n) -> 0-based index into the sorted samples.
        for (p, n, index) in [
            (0.0, 10, 0),
            (0.1, 10, 0),
            (0.5, 10, 4),
            (0.5, 4, 1),
            (0.95, 100, 94),
            (0.99, 100, 98),
            (0.999, 100, 99),
            (1.0, 100, 99),
            (1.0, 1, 0),
        ] {
            assert_eq!(nearest_rank(p, n), index, "p={p} n={n}");
        }
    }
}
