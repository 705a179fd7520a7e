//! [`CircuitBreaker`]: the machine behind a lock, a lock-free fast path, and
//! everything around it (clock, classification, listeners, timer).

mod builder;
mod permit;
pub(crate) mod timer;

use std::cell::RefCell;
use std::error::Error;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

pub use builder::CircuitBreakerBuilder;
pub use permit::Permit;

use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{ClockHandle, Timestamp, duration_to_nanos};
use crate::config::Config;
use crate::error::{CallError, CircuitOpenError, Identity, LastFailure};
use crate::event::{Event, EventListener, emit};
use crate::machine::{Admission, Machine, Outcome, ProbeCounters, State, Transition};
use crate::sync::{AtomicU64, Mutex, MutexGuard};
use crate::window::Snapshot;
use timer::{Scheduler, TimerKey, TimerTarget};

/// A named circuit breaker, for sync and async code alike.
///
/// Cloning is cheap (an `Arc`): every clone is the same breaker.
///
/// ```
/// use interlock::{CallError, CircuitBreaker, Config, ManualClock, SlidingWindow, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder("payments")
///     .config(
///         Config::builder()
///             .minimum_number_of_calls(2)
///             .sliding_window(SlidingWindow::count(4))
///             .wait_duration_in_open(Duration::from_secs(5))
///             .permitted_calls_in_half_open(1)
///             .build()?,
///     )
///     .clock(clock.clone())
///     .build()?;
///
/// let fail = || Err::<(), _>(std::io::Error::other("503"));
/// let _ = breaker.call(fail);
/// let _ = breaker.call(fail); // 2 of 2 failed: trips
/// assert_eq!(breaker.state(), State::Open);
///
/// let Err(CallError::Rejected(open)) = breaker.call(|| Ok::<_, std::io::Error>(())) else {
///     unreachable!()
/// };
/// assert_eq!(open.retry_after(), Some(Duration::from_secs(5)));
///
/// clock.advance(Duration::from_secs(5));
/// breaker.call(|| Ok::<_, std::io::Error>(())).unwrap(); // the probe passes
/// assert_eq!(breaker.state(), State::Closed);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct CircuitBreaker {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    identity: Arc<Identity>,
    /// `generation << 3 | state`, republished after every machine change, so
    /// admission in CLOSED, DISABLED, METRICS_ONLY and FORCED_OPEN, and
    /// rejection in OPEN, take no lock.
    status: AtomicU64,
    /// The OPEN period's deadline (nanoseconds), valid while status is OPEN.
    open_until: AtomicU64,
    machine: Mutex<Machine>,
    config: Config,
    clock: ClockHandle,
    slow_nanos: u64,
    listeners: Box<[Arc<dyn EventListener>]>,
    classifier: Option<ErrorClassifier>,
    /// Always `std`: the timer thread is not modelled under loom.
    timer: std::sync::Mutex<TimerSlot>,
    shut_down: AtomicBool,
    weak_self: Weak<Inner>,
}

#[derive(Default)]
struct TimerSlot {
    key: Option<TimerKey>,
    closed: bool,
}

fn pack(machine: &Machine) -> u64 {
    machine.generation() << 3 | machine.state().to_bits()
}

/// An admitted call, before it settles.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub(crate) admission: Admission,
    pub(crate) start: Timestamp,
}

/// Releases an unsettled call's slot if dropped (cancellation, panic).
struct Guard<'a> {
    inner: &'a Inner,
    ticket: Ticket,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.inner.release(self.ticket.admission);
    }
}

impl Guard<'_> {
    fn settle(self, verdict: Verdict, error: Option<&dyn fmt::Display>, type_name: &'static str) {
        let this = std::mem::ManuallyDrop::new(self);
        this.inner.settle(this.ticket, verdict, error, type_name);
    }
}

impl Inner {
    fn machine(&self) -> MutexGuard<'_, Machine> {
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, machine: &Machine) {
        self.open_until
            .store(machine.open_until().as_nanos(), Ordering::Relaxed);
        self.status.store(pack(machine), Ordering::Release);
    }

    pub(crate) fn name(&self) -> &str {
        &self.identity.name
    }

    fn emit(&self, event: &Event<'_>) {
        if !self.listeners.is_empty() {
            emit(&self.listeners, event);
        }
    }

    fn reject(&self, state: State, retry_after: Option<Duration>) -> CircuitOpenError {
        self.emit(&Event::CallRejected {
            breaker: self.name(),
            state,
        });
        CircuitOpenError::new(Arc::clone(&self.identity), state, retry_after)
    }

    /// Admits a call or rejects it (R6), lock-free unless the machine must
    /// decide (lazy OPEN -> HALF_OPEN, HALF_OPEN probe caps).
    #[inline]
    pub(crate) fn admit(&self) -> Result<Ticket, CircuitOpenError> {
        let status = self.status.load(Ordering::Acquire);
        let state = State::from_bits(status);
        let admission = match state {
            State::Closed | State::Disabled | State::MetricsOnly => Admission {
                generation: status >> 3,
                probe: false,
            },
            State::ForcedOpen => return Err(self.reject(State::ForcedOpen, None)),
            State::Open => {
                let now = self.clock.now();
                let until = Timestamp::from_nanos(self.open_until.load(Ordering::Relaxed));
                if now < until {
                    return Err(self.reject(State::Open, Some(until - now)));
                }
                self.admit_locked(now)?
            }
            State::HalfOpen => self.admit_locked(self.clock.now())?,
        };
        // R4.2: the call's clock starts after admission.
        Ok(Ticket {
            admission,
            start: self.clock.now(),
        })
    }

    #[cold]
    fn admit_locked(&self, now: Timestamp) -> Result<Admission, CircuitOpenError> {
        let mut m = self.machine();
        let result = m.try_acquire(now);
        // A transition, or a restarted round (new generation, same state).
        if result.is_ok() {
            self.publish(&m);
        }
        drop(m);
        match result {
            Ok((admission, transition)) => {
                if let Some(t) = transition {
                    self.after_transition(t, 0, Duration::ZERO);
                }
                Ok(admission)
            }
            Err(refusal) => Err(self.reject(refusal.state, refusal.retry_after)),
        }
    }

    /// Records a settled call (R4), then reports it (R13.4: the call, then
    /// any transition it caused).
    fn settle(
        &self,
        ticket: Ticket,
        verdict: Verdict,
        error: Option<&dyn fmt::Display>,
        type_name: &'static str,
    ) {
        let end = self.clock.now();
        let elapsed_nanos = end.as_nanos().saturating_sub(ticket.start.as_nanos());
        let slow = elapsed_nanos >= self.slow_nanos;
        let outcome = Outcome::from_flags(verdict.is_failure(), slow);
        if let (Some(err), true) = (error, verdict.is_failure()) {
            self.remember_failure(err, type_name);
        }
        let status = self.status.load(Ordering::Acquire);
        let current = status >> 3 == ticket.admission.generation;
        // Stale calls (R8.8) and DISABLED (R8.10) change nothing in the
        // machine: skip the lock.
        let mut transition = None;
        let mut opened = (0, Duration::ZERO);
        if current && State::from_bits(status) != State::Disabled {
            let mut m = self.machine();
            transition = m.record(
                end,
                ticket.admission,
                outcome,
                verdict == Verdict::Inconclusive,
            );
            if transition.is_some() {
                self.publish(&m);
                opened = (m.generation(), m.open_wait());
            }
        }
        if !self.listeners.is_empty() {
            let duration = Duration::from_nanos(elapsed_nanos);
            emit(
                &self.listeners,
                &Event::call_recorded(self.name(), outcome, duration),
            );
        }
        if let Some(t) = transition {
            self.after_transition(t, opened.0, opened.1);
        }
    }

    /// Hands back a cancelled call's probe slot (R4.5, R8.9).
    fn release(&self, admission: Admission) {
        if admission.probe {
            let mut m = self.machine();
            m.release(admission);
        }
    }

    fn remember_failure(&self, err: &dyn fmt::Display, type_name: &'static str) {
        thread_local! {
            static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
        }
        let store = |message: &str| {
            let mut slot = self
                .identity
                .last_failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // Keep the existing record when the same error repeats: no
            // allocation per failure during an outage.
            if !slot.as_ref().is_some_and(|f| f.same_as(type_name, message)) {
                *slot = Some(LastFailure::new(type_name, message.to_owned()));
            }
        };
        let reused = SCRATCH.with(|scratch| {
            let Ok(mut buf) = scratch.try_borrow_mut() else {
                return false;
            };
            buf.clear();
            let _ = write!(buf, "{err}");
            store(&buf);
            if buf.capacity() > 4096 {
                *buf = String::new();
            }
            true
        });
        if !reused {
            store(&err.to_string());
        }
    }

    /// Publishes a transition and keeps the timer in step with it (R12).
    fn after_transition(&self, t: Transition, generation: u64, open_wait: Duration) {
        if t.from == State::Open {
            self.cancel_timer();
        }
        self.emit(&Event::state_changed(self.name(), t.from, t.to));
        if t.to == State::Open && self.config.auto_transition() {
            self.arm_timer(generation, open_wait);
        }
    }

    fn arm_timer(&self, generation: u64, delay: Duration) {
        let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.closed {
            return;
        }
        let scheduler = Scheduler::global();
        if let Some(old) = slot.key.take() {
            scheduler.cancel(old);
        }
        let weak: Weak<dyn TimerTarget> = self.weak_self.clone();
        slot.key = scheduler.schedule(delay, weak, generation);
    }

    fn cancel_timer(&self) {
        let key = self
            .timer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .key
            .take();
        if let Some(key) = key {
            Scheduler::global().cancel(key);
        }
    }

    fn classify_error(&self, err: &(dyn Error + 'static)) -> Verdict {
        match &self.classifier {
            Some(c) => c.classify(err),
            None => Verdict::Failure,
        }
    }

    fn apply(&self, op: impl FnOnce(&mut Machine) -> Option<Transition>) -> Option<Transition> {
        let mut m = self.machine();
        let t = op(&mut m);
        self.publish(&m);
        let opened = (m.generation(), m.open_wait());
        drop(m);
        if let Some(t) = t {
            self.after_transition(t, opened.0, opened.1);
        }
        t
    }
}

impl TimerTarget for Inner {
    fn fire(&self, generation: u64) {
        let now = self.clock.now();
        let mut m = self.machine();
        let t = m.on_timer(now, generation);
        if t.is_some() {
            self.publish(&m);
        }
        drop(m);
        if let Some(t) = t {
            self.timer
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .key = None;
            self.emit(&Event::state_changed(self.name(), t.from, t.to));
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let key = self
            .timer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .key
            .take();
        if let Some(key) = key {
            Scheduler::global().cancel(key);
        }
    }
}

impl CircuitBreaker {
    /// A breaker with the default [`Config`], clock and no listener.
    ///
    /// ```
    /// let breaker = interlock::CircuitBreaker::new("search");
    /// assert_eq!(breaker.name(), "search");
    /// ```
    #[must_use]
    pub fn new(name: impl AsRef<str>) -> Self {
        match Self::builder(name).build() {
            Ok(breaker) => breaker,
            // The defaults are valid; this arm is never taken.
            Err(_) => unreachable!("the default configuration is valid"),
        }
    }

    /// A builder for a breaker named `name`.
    pub fn builder(name: impl AsRef<str>) -> CircuitBreakerBuilder {
        CircuitBreakerBuilder::new(name.as_ref())
    }

    pub(crate) fn from_parts(parts: builder::Parts) -> Self {
        let builder::Parts {
            name,
            config,
            clock,
            listeners,
            classifier,
            machine,
        } = parts;
        let status = AtomicU64::new(pack(&machine));
        let open_until = AtomicU64::new(machine.open_until().as_nanos());
        let slow_nanos = duration_to_nanos(config.slow_call_duration_threshold());
        let inner = Arc::new_cyclic(|weak_self| Inner {
            identity: Arc::new(Identity::new(&name)),
            status,
            open_until,
            machine: Mutex::new(machine),
            config,
            clock,
            slow_nanos,
            listeners: listeners.into_boxed_slice(),
            classifier,
            timer: std::sync::Mutex::new(TimerSlot::default()),
            shut_down: AtomicBool::new(false),
            weak_self: weak_self.clone(),
        });
        CircuitBreaker { inner }
    }

    /// The breaker's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The breaker's config.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The current state, without taking a lock.
    ///
    /// OPEN stays OPEN after its wait until a call (or the `auto_transition`
    /// timer) moves it to HALF_OPEN (R6.3).
    #[must_use]
    pub fn state(&self) -> State {
        State::from_bits(self.inner.status.load(Ordering::Acquire))
    }

    /// The machine's generation, bumped by every transition and override (R8.8).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.inner.status.load(Ordering::Acquire) >> 3
    }

    /// The window's totals now (R1.3), consistent under concurrent calls.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let now = self.inner.clock.now();
        self.inner.machine().snapshot(now)
    }

    /// The probe accounting of the current HALF_OPEN round.
    #[must_use]
    pub fn probes(&self) -> ProbeCounters {
        self.inner.machine().probes()
    }

    /// How long until a probe may be admitted: `Some` only in OPEN, and zero
    /// once the wait has elapsed (R6.2).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        let now = self.inner.clock.now();
        self.inner.machine().retry_after(now)
    }

    /// The most recent error judged a failure, kept until [`reset`](Self::reset) (R11.3).
    #[must_use]
    pub fn last_failure(&self) -> Option<LastFailure> {
        self.inner.identity.last_failure()
    }

    /// Runs `f` if the breaker admits it, and records how it went.
    ///
    /// An `Err` is a failure unless the breaker's
    /// [`classifier`](CircuitBreakerBuilder::classifier) says otherwise; an
    /// `Ok` is a success. A call lasting at least
    /// `slow_call_duration_threshold` is also slow. If `f` panics, the panic
    /// propagates and the call counts as cancelled: nothing is recorded.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] if the breaker rejected the call (`f` did not
    /// run), [`CallError::Inner`] with `f`'s own error otherwise.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("inventory");
    /// let stock = breaker.call(|| Ok::<_, std::io::Error>(42)).unwrap();
    /// assert_eq!(stock, 42);
    /// ```
    #[inline]
    pub fn call<T, E, F>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        E: Error + 'static,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: self.inner.admit()?,
        };
        let result = f();
        let verdict = match &result {
            Ok(_) => Verdict::Success,
            Err(e) => self.inner.classify_error(e),
        };
        guard.settle(verdict, error_display(&result), std::any::type_name::<E>());
        result.map_err(CallError::Inner)
    }

    /// Like [`call`](Self::call), with this call's own classification over
    /// the result, e.g. to count an HTTP 503 response as a failure.
    ///
    /// An error classified as a failure (or inconclusive) becomes the
    /// breaker's last failure.
    ///
    /// # Errors
    ///
    /// As for [`call`](Self::call).
    ///
    /// ```
    /// use interlock::{CircuitBreaker, Verdict};
    ///
    /// let breaker = CircuitBreaker::new("api");
    /// let status = breaker
    ///     .call_classified(
    ///         || Ok::<u16, String>(503),
    ///         |r| match r {
    ///             Ok(&status) if status >= 500 => Verdict::Failure,
    ///             Ok(_) => Verdict::Success,
    ///             Err(_) => Verdict::Failure,
    ///         },
    ///     )
    ///     .unwrap();
    /// assert_eq!(status, 503);
    /// assert_eq!(breaker.snapshot().failed_calls, 1);
    /// ```
    pub fn call_classified<T, E, F, C>(&self, f: F, classify: C) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        C: FnOnce(Result<&T, &E>) -> Verdict,
        E: fmt::Display,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: self.inner.admit()?,
        };
        let result = f();
        let verdict = classify(result.as_ref());
        guard.settle(verdict, error_display(&result), std::any::type_name::<E>());
        result.map_err(CallError::Inner)
    }

    /// Awaits the future made by `f` if the breaker admits it, and records
    /// how it went, on any executor.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future before it completes cancels the call:
    /// its probe slot (if any) is handed back and nothing is recorded (R4.5).
    ///
    /// # Errors
    ///
    /// As for [`call`](Self::call).
    ///
    /// ```
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let waker = std::task::Waker::noop();
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("recommendations");
    /// let picks = block_on(breaker.call_async(|| async { Ok::<_, std::io::Error>(vec!["a", "b"]) }));
    /// assert_eq!(picks.unwrap(), ["a", "b"]);
    /// ```
    pub async fn call_async<T, E, F, Fut>(&self, f: F) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Error + 'static,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: self.inner.admit()?,
        };
        let result = f().await;
        let verdict = match &result {
            Ok(_) => Verdict::Success,
            Err(e) => self.inner.classify_error(e),
        };
        guard.settle(verdict, error_display(&result), std::any::type_name::<E>());
        result.map_err(CallError::Inner)
    }

    /// [`call_async`](Self::call_async) with this call's own classification.
    ///
    /// # Cancel safety
    ///
    /// As for [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// As for [`call`](Self::call).
    pub async fn call_async_classified<T, E, F, Fut, C>(
        &self,
        f: F,
        classify: C,
    ) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: FnOnce(Result<&T, &E>) -> Verdict,
        E: fmt::Display,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: self.inner.admit()?,
        };
        let result = f().await;
        let verdict = classify(result.as_ref());
        guard.settle(verdict, error_display(&result), std::any::type_name::<E>());
        result.map_err(CallError::Inner)
    }

    /// Asks for admission without running anything: for code that is not a
    /// closure. Record the outcome on the [`Permit`]; dropping it unrecorded
    /// cancels the call.
    ///
    /// # Errors
    ///
    /// [`CircuitOpenError`] if the breaker rejects the call.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("queue");
    /// let permit = breaker.acquire()?;
    /// // ... talk to the dependency ...
    /// permit.success();
    /// assert_eq!(breaker.snapshot().total_calls, 1);
    /// # Ok::<(), interlock::CircuitOpenError>(())
    /// ```
    pub fn acquire(&self) -> Result<Permit, CircuitOpenError> {
        let ticket = self.inner.admit()?;
        Ok(Permit::new(self.clone(), ticket))
    }

    /// Back to CLOSED with a fresh window, no backoff and no last failure
    /// (R11.2). Emits the state change, if any, then [`Event::Reset`].
    pub fn reset(&self) {
        self.inner.apply(Machine::reset);
        self.inner.identity.set_last_failure(None);
        self.inner.emit(&Event::Reset {
            breaker: self.name(),
        });
    }

    /// Operator override: reject every call until [`reset`](Self::reset) (R11.1).
    pub fn force_open(&self) {
        self.inner.apply(|m| m.override_to(State::ForcedOpen));
    }

    /// Operator override: admit every call, count nothing, never trip;
    /// listeners still see every call (R11.1).
    pub fn disable(&self) {
        self.inner.apply(|m| m.override_to(State::Disabled));
    }

    /// Operator override: admit every call, count outcomes, never trip (R11.1).
    pub fn metrics_only(&self) {
        self.inner.apply(|m| m.override_to(State::MetricsOnly));
    }

    /// Stops background work: cancels the `auto_transition` timer and never
    /// arms it again. Not a state change (use [`reset`](Self::reset) to
    /// close the circuit); the breaker keeps working. Idempotent.
    pub fn close(&self) {
        if self.inner.shut_down.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut slot = self
            .inner
            .timer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.closed = true;
        if let Some(key) = slot.key.take() {
            Scheduler::global().cancel(key);
        }
    }

    /// Whether [`close`](Self::close) has been called.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        self.inner.shut_down.load(Ordering::Acquire)
    }

    /// Whether two handles are the same breaker.
    #[must_use]
    pub fn ptr_eq(&self, other: &CircuitBreaker) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

fn error_display<T, E: fmt::Display>(result: &Result<T, E>) -> Option<&dyn fmt::Display> {
    result.as_ref().err().map(|e| e as &dyn fmt::Display)
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.name())
            .field("state", &self.state())
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
