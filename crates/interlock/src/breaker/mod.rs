//! [`CircuitBreaker`]: the machine behind a lock, a lock-free fast path, and
//! everything around it (clock, classification, listeners, timer, and the
//! shared view of a coordinated breaker).

mod builder;
mod coordinated;
mod permit;
mod shared_view;
pub(crate) mod timer;

use std::cell::RefCell;
use std::error::Error;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

pub use builder::CircuitBreakerBuilder;
pub use permit::Permit;

use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{ClockHandle, Timestamp, duration_to_nanos};
use crate::config::Config;
use crate::error::{CallError, CircuitOpenError, LastFailure, NO_ESTIMATE, estimate_nanos};
use crate::event::{Event, EventListener, emit};
use crate::failure::{CallErrorOf, Failure, find_rejection};
use crate::identity::Identity;
use crate::machine::{Admission, Machine, Outcome, ProbeCounters, State, Transition};
use crate::mode::{AsyncApi, Local, Mode, SyncApi};
use crate::storage::SharedState;
use crate::storage::coordinator::{Item, Lane, Write};
use crate::sync::{AtomicU64, Mutex, MutexGuard};
use crate::window::Snapshot;
use timer::{Scheduler, TimerKey, TimerTarget};

/// A named circuit breaker.
///
/// Cloning is cheap (an `Arc`): every clone is the same breaker. The mode
/// `M` says which API it serves (see [`crate::mode`]): a breaker without
/// storage ([`Local`], the default) serves both the blocking and the async
/// API.
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
pub struct CircuitBreaker<M = Local> {
    pub(crate) inner: Arc<Inner>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for CircuitBreaker<M> {
    fn clone(&self) -> Self {
        CircuitBreaker {
            inner: Arc::clone(&self.inner),
            mode: PhantomData,
        }
    }
}

/// What the breaker's lock guards: the machine and, for a coordinated
/// breaker, its cached shared view and degradation state.
pub(crate) struct Core {
    pub(crate) machine: Machine,
    pub(crate) shared: Option<SharedCell>,
    /// When the effective state last changed (or the breaker was built), on
    /// the breaker's clock: written only on transitions, which hold the lock.
    pub(crate) since: Timestamp,
}

/// A coordinated breaker's view of the storage (R15, R17.6).
#[derive(Debug, Default)]
pub(crate) struct SharedCell {
    pub(crate) view: Option<SharedState>,
    pub(crate) degraded: bool,
    /// Consecutive storage failures of this outage (`k` of R17.7).
    pub(crate) failures: u32,
    pub(crate) retry_at: Timestamp,
    /// The liveness bookkeeping of issue 21 (stall rule, reconciliation,
    /// repair), kept in `shared_view.rs`.
    pub(crate) liveness: shared_view::Liveness,
}

impl Core {
    /// R15.1: an override wins; then a healthy shared OPEN or HALF_OPEN;
    /// then the local machine. The flag says the shared view governs.
    pub(crate) fn effective(&self) -> (State, bool) {
        let local = self.machine.state();
        if local.is_override() {
            return (local, false);
        }
        match &self.shared {
            Some(SharedCell {
                view: Some(v),
                degraded: false,
                ..
            }) if matches!(v.state, State::Open | State::HalfOpen) => (v.state, true),
            _ => (local, false),
        }
    }
}

pub(crate) struct Inner {
    identity: Arc<Identity>,
    /// `generation << 5 | quiet << 4 | shared << 3 | effective state`,
    /// republished after every change under the lock, so admission in
    /// CLOSED, DISABLED, METRICS_ONLY and FORCED_OPEN, rejection in OPEN, and
    /// a plain success while `quiet` is set (see [`QUIET_BIT`]) take no lock.
    status: AtomicU64,
    /// The local OPEN period's deadline (nanoseconds).
    open_until: AtomicU64,
    core: Mutex<Core>,
    config: Config,
    clock: ClockHandle,
    slow_nanos: u64,
    /// A call at least this long is measured again on a precise reading
    /// before it is judged (R4.3): half of `slow_nanos` on
    /// [`CoarseClock`](crate::CoarseClock), `slow_nanos` (never) otherwise.
    refine_nanos: u64,
    /// Only a success shorter than this may take the lock-free path:
    /// `refine_nanos`, or zero (never) when listeners want every call
    /// reported. One comparison instead of two on the hot path.
    quiet_below_nanos: u64,
    /// On `CoarseClock`, how close to the end of an OPEN wait a rejection
    /// takes a precise reading before it rejects (zero otherwise), so a
    /// caller who waited the whole `retry_after` is never turned away by a
    /// reading a tick behind.
    deadline_slack_nanos: u64,
    listeners: Box<[Arc<dyn EventListener>]>,
    classifier: Option<ErrorClassifier>,
    /// When the breaker was built, on its clock.
    created_at: Timestamp,
    /// Always `std`: the timer thread is not modelled under loom.
    timer: std::sync::Mutex<TimerSlot>,
    shut_down: AtomicBool,
    /// The coordinator's lane, for a coordinated breaker.
    lane: Option<Arc<Lane>>,
    /// Writes this breaker has queued on its lane and not yet run (R17.5).
    queued: AtomicUsize,
    weak_self: Weak<Inner>,
}

#[derive(Default)]
struct TimerSlot {
    key: Option<TimerKey>,
    /// The generation of the OPEN period the slot's timer (armed or last
    /// armed) belongs to: a late arm or cancel for an older period (a
    /// thread held up between its transition and its timer work, by a slow
    /// listener or the scheduler) never replaces or cancels a newer one.
    generation: u64,
    closed: bool,
}

/// The effective state's bits ([`State::to_bits`]).
const STATE_BITS: u64 = 7;
const SHARED_BIT: u64 = 8;
/// Set while the local machine says a plain success of its generation would
/// change nothing ([`Machine::success_is_noop`]): such a success settles
/// without the lock.
const QUIET_BIT: u64 = 16;
const STATUS_SHIFT: u32 = 5;
/// Set in the state bits of exactly the states that do not admit every call
/// without the lock ([`State::to_bits`]; CLOSED, DISABLED and METRICS_ONLY
/// admit).
const HOLDS_CALLS_BIT: u64 = 4;
/// How close to the end of an OPEN wait a rejection on `CoarseClock` reads
/// the precise clock: far more than a tick, so that even a clock thread the
/// scheduler kept waiting never turns away a caller who waited the whole
/// `retry_after`; a rejection in that last stretch costs one precise read.
const COARSE_DEADLINE_SLACK: Duration = Duration::from_millis(100);

/// The bits that say "a local OPEN": the state bits and the shared bit
/// (disjoint, so `+` is `|`).
const LOCAL_STATE_BITS: u64 = STATE_BITS + SHARED_BIT;

/// The parts never overlap (the state takes three bits, each flag one, the
/// generation the rest), so adding them is the same as or-ing them.
fn pack(core: &Core) -> u64 {
    let (state, shared) = core.effective();
    (core.machine.generation() << STATUS_SHIFT)
        + (u64::from(core.machine.success_is_noop()) * QUIET_BIT)
        + (u64::from(shared) * SHARED_BIT)
        + state.to_bits()
}

/// An admitted call, before it settles: two words, so it stays in
/// registers on the way from admission to settlement.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    pub(crate) start: Timestamp,
    /// Laid out like the status word it is checked against:
    /// `generation << 5 | QUIET_BIT | leased << 2 | probe`. Bits 0 and 1
    /// are ignored by [`quiet_in`](Self::quiet_in).
    tag: u64,
}

/// The ticket's `leased` bit: the status word's [`HOLDS_CALLS_BIT`]. While
/// the quiet bit is set the local machine is CLOSED, so that bit is set only
/// when a shared view governs, and then so is [`SHARED_BIT`], which a ticket
/// never has: a leased ticket never passes [`Ticket::quiet_in`].
const LEASED_TAG: u64 = HOLDS_CALLS_BIT;
const PROBE_TAG: u64 = 1;

impl Ticket {
    fn new(start: Timestamp, admission: Admission, leased: bool) -> Self {
        Ticket {
            start,
            tag: (admission.generation << STATUS_SHIFT)
                | QUIET_BIT
                | (u64::from(leased) * LEASED_TAG)
                | (u64::from(admission.probe) * PROBE_TAG),
        }
    }

    /// The admission's generation.
    #[inline]
    pub(crate) fn generation(self) -> u64 {
        self.tag >> STATUS_SHIFT
    }

    /// Whether a success of this ticket may skip the lock: `status` has the
    /// quiet bit, no shared view in charge, this ticket's generation, and
    /// the ticket is not leased. One xor and one mask test.
    #[inline]
    fn quiet_in(self, status: u64) -> bool {
        (status ^ self.tag) & !(PROBE_TAG | 2) == 0
    }

    /// Admitted as a HALF_OPEN probe.
    #[inline]
    pub(crate) fn probe(self) -> bool {
        self.tag & PROBE_TAG != 0
    }

    /// Admitted through a shared HALF_OPEN lease (R15.2).
    #[inline]
    pub(crate) fn leased(self) -> bool {
        self.tag & LEASED_TAG != 0
    }

    pub(crate) fn admission(self) -> Admission {
        Admission {
            generation: self.generation(),
            probe: self.probe(),
        }
    }
}

/// What one change under the lock did, to act on after unlocking.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Effects {
    /// The local machine's transition (timer, shared trip).
    pub(crate) local: Option<Transition>,
    /// The effective state before and after, if it changed (R13.5).
    pub(crate) effective: Option<(State, State)>,
    generation: u64,
    open_wait: Duration,
}

/// Releases an unsettled call's slot if dropped (cancellation, panic).
struct Guard<'a> {
    inner: &'a Inner,
    ticket: Ticket,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.inner.release(self.ticket);
    }
}

impl Guard<'_> {
    #[inline]
    fn settle(self, verdict: Verdict, error: Option<&dyn fmt::Display>, type_name: &'static str) {
        let this = std::mem::ManuallyDrop::new(self);
        this.inner.settle(this.ticket, verdict, error, type_name);
    }

    /// Settles a default-classified call; an error that carries another
    /// breaker's rejection is ignored (the guard is dropped: nothing is
    /// recorded, a probe slot goes back).
    #[inline]
    fn settle_result<T, E: Failure<K>, K>(self, result: &Result<T, E>) {
        match result {
            Ok(_) => self.settle(Verdict::Success, None, ""),
            Err(e) => {
                if let Some(verdict) = self.inner.classify_error(e.as_error()) {
                    self.settle(verdict, Some(e), std::any::type_name::<E>());
                }
            }
        }
    }
}

/// What lock-free admission found.
enum Door {
    /// Admitted without the lock.
    Admit(Admission),
    /// Rejected in this state, `retry_after` in nanoseconds ([`NO_ESTIMATE`]
    /// for none).
    Reject(State, u64),
    /// The lock (or the storage) decides.
    Decide,
}

/// The local OPEN deadline as lock-free readers see it: nanoseconds, at most
/// one below [`NO_ESTIMATE`] (a wait of 584 years saturates a nanosecond
/// early), so `deadline - now` is always an estimate.
fn lock_free_deadline(core: &Core) -> u64 {
    core.machine.open_until().as_nanos().min(NO_ESTIMATE - 1)
}

/// Whether the status word's state admits every call without the lock.
#[inline]
fn admits_all(status: u64) -> bool {
    status & HOLDS_CALLS_BIT == 0
}

impl Inner {
    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Republishes what lock-free readers see; most recorded calls change
    /// neither word, so each is stored only when it moved (writers hold the
    /// lock, so the loads cannot race another store).
    fn publish(&self, core: &Core) {
        let until = lock_free_deadline(core);
        if self.open_until.load(Ordering::Relaxed) != until {
            self.open_until.store(until, Ordering::Relaxed);
        }
        let status = pack(core);
        if self.status.load(Ordering::Relaxed) != status {
            self.status.store(status, Ordering::Release);
        }
    }

    /// Runs `op` under the lock, republishes, and reports what changed.
    pub(crate) fn change<R>(
        &self,
        op: impl FnOnce(&mut Core) -> (R, Option<Transition>),
    ) -> (R, Effects) {
        let mut core = self.core();
        let before = core.effective().0;
        let (r, local) = op(&mut core);
        let after = core.effective().0;
        if before != after {
            core.since = self.clock.now();
        }
        self.publish(&core);
        let effects = Effects {
            local,
            effective: (before != after).then_some((before, after)),
            generation: core.machine.generation(),
            open_wait: core.machine.open_wait(),
        };
        (r, effects)
    }

    pub(crate) fn name(&self) -> &str {
        self.identity.name()
    }

    #[inline]
    pub(crate) fn emit(&self, event: &Event<'_>) {
        if !self.listeners.is_empty() {
            emit(&self.listeners, event);
        }
    }

    /// [`reject`](Self::reject) with `retry_after` in nanoseconds
    /// ([`NO_ESTIMATE`] for none).
    #[inline]
    fn reject_nanos(&self, state: State, retry_after_nanos: u64) -> CircuitOpenError {
        if !self.listeners.is_empty() {
            self.report_rejection(state);
        }
        CircuitOpenError::with_nanos(&self.identity, state, retry_after_nanos)
    }

    #[inline]
    fn reject(&self, state: State, retry_after: Option<Duration>) -> CircuitOpenError {
        self.reject_nanos(state, estimate_nanos(retry_after))
    }

    /// Out of line, so a rejection nobody listens to builds no event.
    #[cold]
    #[inline(never)]
    fn report_rejection(&self, state: State) {
        emit(
            &self.listeners,
            &Event::CallRejected {
                breaker: self.name(),
                state,
            },
        );
    }

    #[inline]
    fn ticket(&self, admission: Admission, leased: bool) -> Ticket {
        // R4.2: the call's clock starts after admission.
        Ticket::new(self.clock.now(), admission, leased)
    }

    /// The lock-free part of admission (R6).
    #[inline]
    fn door(&self) -> Door {
        let status = self.status.load(Ordering::Acquire);
        if admits_all(status) {
            return Door::Admit(Admission {
                generation: status >> STATUS_SHIFT,
                probe: false,
            });
        }
        // A local OPEN (the state bits say OPEN, the shared bit is clear).
        if status & LOCAL_STATE_BITS == State::Open.to_bits() {
            let until = self.open_until.load(Ordering::Relaxed);
            let mut now = self.clock.now().as_nanos();
            if now < until && until - now <= self.deadline_slack_nanos {
                now = self.clock.now_fresh().as_nanos();
            }
            return if now < until {
                // Below `NO_ESTIMATE`: `until` is (`lock_free_deadline`).
                Door::Reject(State::Open, until - now)
            } else {
                Door::Decide
            };
        }
        match State::from_bits(status) {
            State::HalfOpen => Door::Decide,
            // FORCED_OPEN, and a shared OPEN (R15.5: no lazy path and no
            // estimate).
            state => Door::Reject(state, NO_ESTIMATE),
        }
    }

    /// Admission for the blocking API: a shared HALF_OPEN leases inline.
    ///
    /// Everything but the locked decision is inlined into the caller, so
    /// that neither the ticket nor the rejection is copied through memory
    /// on the way out.
    #[inline]
    pub(crate) fn admit(&self) -> Result<Ticket, CircuitOpenError> {
        match self.door() {
            Door::Admit(admission) => Ok(self.ticket(admission, false)),
            Door::Reject(state, nanos) => Err(self.reject_nanos(state, nanos)),
            Door::Decide => self.admit_slow_blocking(),
        }
    }

    #[cold]
    fn admit_slow_blocking(&self) -> Result<Ticket, CircuitOpenError> {
        let now = self.clock.now();
        if let Some(lane) = self.lease_lane(now) {
            if let Some(result) = self.lease_blocking(&lane, now) {
                return result;
            }
        }
        self.admit_locked(now).map(|a| self.ticket(a, false))
    }

    /// Admission for the async API.
    pub(crate) async fn admit_async(&self) -> Result<Ticket, CircuitOpenError> {
        if let Some(lane) = &self.lane {
            lane.ensure_running();
        }
        match self.door() {
            Door::Admit(admission) => Ok(self.ticket(admission, false)),
            Door::Reject(state, nanos) => Err(self.reject_nanos(state, nanos)),
            Door::Decide => {
                let now = self.clock.now();
                if let Some(lane) = self.lease_lane(now) {
                    if let Some(result) = self.lease_async(&lane, now).await {
                        return result;
                    }
                }
                self.admit_locked(now).map(|a| self.ticket(a, false))
            }
        }
    }

    /// The local rules under the lock (R6, R15.2 when the storage is out).
    #[cold]
    fn admit_locked(&self, now: Timestamp) -> Result<Admission, CircuitOpenError> {
        let (result, effects) = self.change(|core| {
            let r = core.machine.try_acquire(now);
            let local = r.as_ref().ok().and_then(|(_, t)| *t);
            (r, local)
        });
        self.after(effects);
        match result {
            Ok((admission, _)) => Ok(admission),
            Err(refusal) => Err(self.reject(refusal.state, refusal.retry_after)),
        }
    }

    /// Records a settled call (R4), then reports it (R13.4: the call, then
    /// any transition it caused), then queues shared writes (R15.4).
    #[inline]
    fn settle(
        &self,
        ticket: Ticket,
        verdict: Verdict,
        error: Option<&dyn fmt::Display>,
        type_name: &'static str,
    ) {
        if verdict == Verdict::Success {
            self.settle_success(ticket);
        } else {
            self.settle_at(ticket, self.clock.now(), verdict, error, type_name);
        }
    }

    /// Settles a success. The common case, a call that was not slow in a
    /// breaker whose machine said a success changes nothing (QUIET_BIT),
    /// with no listener to tell, returns after one clock read and one load:
    /// no lock and no shared write.
    #[inline]
    fn settle_success(&self, ticket: Ticket) {
        let end = self.clock.now_unmarked();
        // Wrapping: a clock that went backwards gives a huge duration, which
        // takes the general path (and its saturating arithmetic).
        let elapsed_nanos = end.as_nanos().wrapping_sub(ticket.start.as_nanos());
        if elapsed_nanos < self.quiet_below_nanos {
            // See `settle_at` for why skipping the lock is linearizable.
            let status = self.status.load(Ordering::Acquire);
            if ticket.quiet_in(status) {
                return;
            }
        }
        self.settle_at(ticket, end, Verdict::Success, None, "");
    }

    /// The call's end and duration in nanoseconds. On `CoarseClock` a call
    /// within a factor two below the slow threshold is measured again to a
    /// precise end, so a tick of lag never hides a slow call (R4.3).
    fn measure(&self, start: Timestamp, end: Timestamp) -> (Timestamp, u64) {
        let elapsed = end.as_nanos().saturating_sub(start.as_nanos());
        if (self.refine_nanos..self.slow_nanos).contains(&elapsed) {
            let end = self.clock.now_fresh();
            (end, end.as_nanos().saturating_sub(start.as_nanos()))
        } else {
            (end, elapsed)
        }
    }

    /// The general settlement, after the call ended at `end`.
    fn settle_at(
        &self,
        ticket: Ticket,
        end: Timestamp,
        verdict: Verdict,
        error: Option<&dyn fmt::Display>,
        type_name: &'static str,
    ) {
        let (end, elapsed_nanos) = self.measure(ticket.start, end);
        let slow = elapsed_nanos >= self.slow_nanos;
        let outcome = Outcome::from_flags(verdict.is_failure(), slow);
        if let (Some(err), true) = (error, verdict.is_failure()) {
            self.remember_failure(err, type_name);
        }
        let status = self.status.load(Ordering::Acquire);
        let current = status >> STATUS_SHIFT == ticket.generation();
        // Stale calls (R8.8) and DISABLED (R8.10) change nothing in the
        // machine: skip the lock. So does a plain success while the machine
        // of this generation has said that one changes nothing (QUIET_BIT).
        //
        // Why skipping is linearizable: the machine decides the bit, under
        // the lock, from its own state, and every change of that state
        // republishes it (with the generation, in the same word) before the
        // lock is released. The skipped success takes effect at the load
        // above. Any record that makes successes count again (a failure, a
        // slow call, a transition) either had published its word before
        // that load (then this load sees the bit cleared or the generation
        // moved, and takes the lock), or had not: then it is still in
        // progress, and the success is ordered before it, at a point where
        // recording it changed nothing. A concurrent failure that trips may
        // therefore be ordered after the skipped success, exactly as if the
        // success had won the lock first; the window it finds is the same.
        let quiet = status & QUIET_BIT != 0 && outcome == Outcome::Success;
        let effects = (current && !quiet && State::from_bits(status) != State::Disabled)
            .then(|| self.record(ticket, end, outcome, verdict == Verdict::Inconclusive));
        if !self.listeners.is_empty() {
            let duration = Duration::from_nanos(elapsed_nanos);
            emit(
                &self.listeners,
                &Event::call_recorded(self.name(), outcome, duration),
            );
        }
        if let Some(effects) = effects {
            self.after(effects);
        }
        if ticket.leased() {
            // R9.6: a leased probe's verdict always counts in the storage.
            self.enqueue(Write::Probe(outcome));
        }
    }

    /// The locked part of [`settle`](Self::settle): the machine records the
    /// outcome.
    fn record(
        &self,
        ticket: Ticket,
        end: Timestamp,
        outcome: Outcome,
        inconclusive: bool,
    ) -> Effects {
        let inconclusive = inconclusive && !ticket.leased();
        let ((), effects) = self.change(|core| {
            // D2: a leased probe never touches local probe accounting.
            if ticket.leased() && core.machine.state() == State::HalfOpen {
                return ((), None);
            }
            (
                (),
                core.machine
                    .record(end, ticket.admission(), outcome, inconclusive),
            )
        });
        effects
    }

    /// Hands back a cancelled call's probe slot (R4.5, R8.9). A leased probe
    /// is never handed back (there is no un-lease, R15.4).
    fn release(&self, ticket: Ticket) {
        if ticket.probe() && !ticket.leased() {
            self.core().machine.release(ticket.admission());
        }
    }

    fn remember_failure(&self, err: &dyn fmt::Display, type_name: &'static str) {
        thread_local! {
            static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
        }
        // The same error repeating keeps its record: no allocation per
        // failure during an outage.
        let store = |message: &str| self.identity.record_failure(type_name, message);
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

    /// Acts on a change after the lock is released: the state-change event,
    /// the timer (R12), and the shared trip of a coordinated breaker (R15.4).
    #[inline]
    pub(crate) fn after(&self, effects: Effects) {
        if effects.local.is_some() || effects.effective.is_some() {
            self.after_change(effects);
        }
    }

    fn after_change(&self, effects: Effects) {
        // The timer first, so that listeners (however slow) never delay it.
        if let Some(t) = effects.local {
            if t.from == State::Open {
                self.cancel_timer(effects.generation);
            }
            if t.to == State::Open && self.config.auto_transition() {
                self.arm_timer(effects.generation, effects.open_wait);
            }
        }
        if let Some((from, to)) = effects.effective {
            self.emit(&Event::state_changed(self.name(), from, to));
        }
        if let Some(t) = effects.local {
            if t.to == State::Open && self.lane.is_some() {
                self.local_opened(t.from); // issue 21: reconciliation
            }
            if t.from == State::Closed && t.to == State::Open {
                self.enqueue(Write::Trip);
            }
        }
    }

    /// Queues a shared write (R17.5): dropped silently after shutdown,
    /// dropped with an event when this breaker's queue is full.
    fn enqueue(&self, write: Write) {
        let Some(lane) = &self.lane else { return };
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        let limit = lane.settings.write_queue_size();
        let admitted = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q < limit).then_some(q + 1)
            })
            .is_ok();
        if admitted {
            lane.push(Item::Write(self.weak_self.clone(), write));
        } else {
            self.emit(&Event::StorageWriteDropped {
                breaker: self.name(),
            });
        }
    }

    /// Arms the timer of the OPEN period of `generation` (R12.1), replacing
    /// the timer of an older period, never that of a newer one.
    fn arm_timer(&self, generation: u64, delay: Duration) {
        let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.closed || generation < slot.generation {
            return;
        }
        let scheduler = Scheduler::global();
        if let Some(old) = slot.key.take() {
            scheduler.cancel(old);
        }
        let weak: Weak<dyn TimerTarget> = self.weak_self.clone();
        slot.generation = generation;
        slot.key = scheduler.schedule(delay, weak, generation).key();
    }

    /// Cancels the timer of an OPEN period the machine left, at
    /// `generation` (R12.3): only a timer armed for an older generation;
    /// and a late arm for a period older than `generation` is refused.
    fn cancel_timer(&self, generation: u64) {
        let key = {
            let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.generation < generation {
                slot.generation = generation;
                slot.key.take()
            } else {
                None
            }
        };
        if let Some(key) = key {
            Scheduler::global().cancel(key);
        }
    }

    /// The verdict on a call that failed with `err`, through the breaker's
    /// classifier; `None` (ignore the call) if `err` carries a circuit-open
    /// rejection: another breaker refused the call, which says nothing about
    /// this breaker's dependency.
    #[cold]
    fn classify_error(&self, err: &(dyn Error + 'static)) -> Option<Verdict> {
        if find_rejection(err).is_some() {
            return None;
        }
        Some(match &self.classifier {
            Some(c) => c.classify(err),
            None => Verdict::Failure,
        })
    }

    fn apply(&self, op: impl FnOnce(&mut Machine) -> Option<Transition>) {
        let ((), effects) = self.change(|core| ((), op(&mut core.machine)));
        self.after(effects);
    }

    /// Stops the timer for good (R12.3).
    fn stop_timer(&self) {
        let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        slot.closed = true;
        if let Some(key) = slot.key.take() {
            Scheduler::global().cancel(key);
        }
    }

    /// After shutdown: nothing refreshes the shared view, so drop it
    /// (R15.10), reporting the fall back to local state.
    fn drop_shared_view(&self) {
        let ((), effects) = self.change(|core| {
            if let Some(cell) = core.shared.as_mut() {
                cell.view = None;
            }
            ((), None)
        });
        self.after(effects);
    }
}

impl TimerTarget for Inner {
    fn fire(&self, generation: u64) {
        // The timer fired on real time; a coarse reading could still be a
        // tick short of the deadline, and a timer that finds the wait not
        // elapsed is not re-armed (R12.2).
        let now = self.clock.now_fresh();
        let ((), effects) = self.change(|core| ((), core.machine.on_timer(now, generation)));
        {
            // This timer is spent; a newer period's is not.
            let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
            if slot.generation == generation {
                slot.key = None;
            }
        }
        self.after(effects);
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
}

impl<M: Mode> CircuitBreaker<M> {
    pub(crate) fn from_parts(parts: builder::Parts) -> Self {
        let builder::Parts {
            name,
            config,
            clock,
            listeners,
            classifier,
            machine,
            lane,
        } = parts;
        let slow_nanos = duration_to_nanos(config.slow_call_duration_threshold());
        let clock = clock.resolve(config.slow_call_duration_threshold());
        let created_at = clock.now();
        let core = Core {
            machine,
            shared: lane.as_ref().map(|_| SharedCell::default()),
            since: created_at,
        };
        let status = AtomicU64::new(pack(&core));
        let open_until = AtomicU64::new(lock_free_deadline(&core));
        let (refine_nanos, deadline_slack_nanos) = if clock.is_coarse() {
            (slow_nanos / 2, duration_to_nanos(COARSE_DEADLINE_SLACK))
        } else {
            (slow_nanos, 0)
        };
        let quiet_below_nanos = if listeners.is_empty() {
            refine_nanos
        } else {
            0
        };
        let inner = Arc::new_cyclic(|weak_self| Inner {
            identity: Identity::register(&name),
            status,
            open_until,
            core: Mutex::new(core),
            config,
            clock,
            slow_nanos,
            refine_nanos,
            quiet_below_nanos,
            deadline_slack_nanos,
            listeners: listeners.into_boxed_slice(),
            classifier,
            created_at,
            timer: std::sync::Mutex::new(TimerSlot::default()),
            shut_down: AtomicBool::new(false),
            lane,
            queued: AtomicUsize::new(0),
            weak_self: weak_self.clone(),
        });
        if let Some(lane) = &inner.lane {
            lane.attach(Arc::downgrade(&inner));
        }
        if !inner.listeners.is_empty() {
            let state = State::from_bits(inner.status.load(Ordering::Acquire));
            crate::event::created(&inner.listeners, inner.name(), state);
        }
        CircuitBreaker {
            inner,
            mode: PhantomData,
        }
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

    /// The effective state (R15.1), without taking a lock.
    ///
    /// OPEN stays OPEN after its wait until a call (or the `auto_transition`
    /// timer) moves it to HALF_OPEN (R6.3). A coordinated breaker reports
    /// the shared OPEN or HALF_OPEN while its storage is healthy, unless an
    /// operator override is active.
    #[must_use]
    pub fn state(&self) -> State {
        State::from_bits(self.inner.status.load(Ordering::Acquire))
    }

    /// The local machine's generation, bumped by every transition and
    /// override (R8.8).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.inner.status.load(Ordering::Acquire) >> STATUS_SHIFT
    }

    /// When the breaker entered its current [`state`](Self::state), on the
    /// breaker's clock (compare it with [`now`](Self::now)); its creation
    /// time while it has never changed state.
    ///
    /// It follows the effective state: a coordinated breaker that adopts a
    /// shared OPEN records when it adopted it (the storage's own
    /// `opened_at` is in [`shared_view`](Self::shared_view)). An override or
    /// [`reset`](Self::reset) that leaves the state as it was does not move
    /// it. Recorded under the breaker's lock on transitions only, so reading
    /// it costs one short lock and calls nothing.
    ///
    /// ```
    /// use interlock::{CircuitBreaker, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = CircuitBreaker::builder("payments").clock(clock.clone()).build()?;
    /// clock.advance(Duration::from_secs(30));
    /// breaker.force_open();
    /// clock.advance(Duration::from_secs(12));
    /// assert_eq!(breaker.now() - breaker.state_since(), Duration::from_secs(12));
    /// assert_eq!(breaker.state_since() - breaker.created_at(), Duration::from_secs(30));
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn state_since(&self) -> Timestamp {
        self.inner.core().since
    }

    /// When the breaker was built, on its clock.
    #[must_use]
    pub fn created_at(&self) -> Timestamp {
        self.inner.created_at
    }

    /// The breaker's clock now: the reference for [`state_since`](Self::state_since)
    /// and [`created_at`](Self::created_at).
    #[must_use]
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// The window's totals now (R1.3), consistent under concurrent calls.
    /// Always the local window, also for a coordinated breaker.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let now = self.inner.clock.now();
        self.inner.core().machine.snapshot(now)
    }

    /// The probe accounting of the local HALF_OPEN round (leased probes of a
    /// shared round are counted by the storage, D2).
    #[must_use]
    pub fn probes(&self) -> ProbeCounters {
        self.inner.core().machine.probes()
    }

    /// How long until a probe may be admitted: `Some` only in a local OPEN,
    /// and zero once the wait has elapsed (R6.2).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        let now = self.inner.clock.now();
        let core = self.inner.core();
        match core.effective() {
            (State::Open, false) => core.machine.retry_after(now),
            _ => None,
        }
    }

    /// The most recent error judged a failure, kept until [`reset`](Self::reset) (R11.3).
    #[must_use]
    pub fn last_failure(&self) -> Option<LastFailure> {
        self.inner.identity.last_failure()
    }

    /// The cached shared view of a coordinated breaker, if any (`None`
    /// without storage, before the first poll, and after shutdown).
    #[must_use]
    pub fn shared_view(&self) -> Option<SharedState> {
        self.inner.core().shared.as_ref().and_then(|c| c.view)
    }

    /// Whether a coordinated breaker runs on local state because its storage
    /// failed (R15.7).
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.inner
            .core()
            .shared
            .as_ref()
            .is_some_and(|c| c.degraded)
    }

    /// Whether this breaker is coordinated through a storage.
    #[must_use]
    pub fn is_coordinated(&self) -> bool {
        self.inner.lane.is_some()
    }

    /// Back to CLOSED with a fresh window, no backoff and no last failure
    /// (R11.2). Emits the state change, if any, then [`Event::Reset`]. A
    /// coordinated breaker resumes the cached shared state and never writes
    /// to the storage (R15.8).
    pub fn reset(&self) {
        self.inner.apply(Machine::reset);
        self.inner.identity.clear_last_failure();
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

    /// Whether [`close`](CircuitBreaker::close) (or `close_async`) has been called.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        self.inner.shut_down.load(Ordering::Acquire)
    }

    /// Whether two handles are the same breaker.
    #[must_use]
    pub fn ptr_eq(&self, other: &CircuitBreaker<M>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The same breaker seen with another mode (internal: the registry's
    /// tables hold one type).
    pub(crate) fn cast<N>(self) -> CircuitBreaker<N> {
        CircuitBreaker {
            inner: self.inner,
            mode: PhantomData,
        }
    }

    /// Marks the breaker shut down; `false` if it already was.
    fn begin_shutdown(&self) -> bool {
        if self.inner.shut_down.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.inner.stop_timer();
        true
    }
}

impl<M: SyncApi> CircuitBreaker<M> {
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
    pub fn call<T, E, F, K, R>(&self, f: F) -> Result<T, R>
    where
        F: FnOnce() -> Result<T, E>,
        E: Failure<K, CallError = R>,
        R: CallErrorOf<E>,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: match self.inner.door() {
                Door::Admit(admission) => self.inner.ticket(admission, false),
                // Built straight into the returned error, not copied from an
                // intermediate `Result`.
                Door::Reject(state, nanos) => {
                    return Err(E::call_error(CallError::Rejected(
                        self.inner.reject_nanos(state, nanos),
                    )));
                }
                Door::Decide => match self.inner.admit_slow_blocking() {
                    Ok(ticket) => ticket,
                    Err(open) => return Err(E::call_error(CallError::Rejected(open))),
                },
            },
        };
        let result = f();
        guard.settle_result(&result);
        result.map_err(|e| E::call_error(CallError::Inner(e)))
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
            ticket: match self.inner.door() {
                Door::Admit(admission) => self.inner.ticket(admission, false),
                // Built straight into the returned error, not copied from an
                // intermediate `Result`.
                Door::Reject(state, nanos) => {
                    return Err(CallError::Rejected(self.inner.reject_nanos(state, nanos)));
                }
                Door::Decide => self.inner.admit_slow_blocking()?,
            },
        };
        let result = f();
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
        Ok(Permit::new(Arc::clone(&self.inner), ticket))
    }

    /// Stops background work: cancels the `auto_transition` timer for good,
    /// and for a coordinated breaker runs its queued writes, leaves the
    /// coordinator and drops the cached shared view (R15.10, R17.9). Not a
    /// state change (use [`reset`](Self::reset) to close the circuit); the
    /// breaker keeps working on local state. Idempotent.
    pub fn close(&self) {
        if !self.begin_shutdown() {
            return;
        }
        if let Some(lane) = &self.inner.lane {
            lane.detach_blocking(Arc::downgrade(&self.inner));
            self.inner.drop_shared_view();
        }
    }
}

impl<M: AsyncApi> CircuitBreaker<M> {
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
    /// As for [`call`](CircuitBreaker::call).
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
    pub async fn call_async<T, E, F, Fut, K, R>(&self, f: F) -> Result<T, R>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Failure<K, CallError = R>,
        R: CallErrorOf<E>,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: match self.inner.admit_async().await {
                Ok(ticket) => ticket,
                Err(open) => return Err(E::call_error(CallError::Rejected(open))),
            },
        };
        let result = f().await;
        guard.settle_result(&result);
        result.map_err(|e| E::call_error(CallError::Inner(e)))
    }

    /// [`call_async`](Self::call_async) with this call's own classification.
    ///
    /// # Cancel safety
    ///
    /// As for [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// As for [`call`](CircuitBreaker::call).
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
            ticket: self.inner.admit_async().await?,
        };
        let result = f().await;
        let verdict = classify(result.as_ref());
        guard.settle(verdict, error_display(&result), std::any::type_name::<E>());
        result.map_err(CallError::Inner)
    }

    /// The async form of [`acquire`](CircuitBreaker::acquire): in a shared
    /// HALF_OPEN the probe lease is awaited.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it resolves admits nothing (a lease
    /// already granted by the storage is not handed back, R15.4).
    ///
    /// # Errors
    ///
    /// [`CircuitOpenError`] if the breaker rejects the call.
    pub async fn acquire_async(&self) -> Result<Permit, CircuitOpenError> {
        let ticket = self.inner.admit_async().await?;
        Ok(Permit::new(Arc::clone(&self.inner), ticket))
    }

    /// The async form of [`close`](CircuitBreaker::close), for breakers
    /// coordinated through an async storage (and local ones).
    ///
    /// # Cancel safety
    ///
    /// The breaker is marked shut down at once; dropping the future may
    /// leave its queued writes to the lane and its shared view cached.
    pub async fn close_async(&self) {
        if !self.begin_shutdown() {
            return;
        }
        if let Some(lane) = &self.inner.lane {
            lane.detach_async(Arc::downgrade(&self.inner)).await;
            self.inner.drop_shared_view();
        }
    }
}

fn error_display<T, E: fmt::Display>(result: &Result<T, E>) -> Option<&dyn fmt::Display> {
    result.as_ref().err().map(|e| e as &dyn fmt::Display)
}

impl<M> fmt::Debug for CircuitBreaker<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.inner.status.load(Ordering::Acquire);
        f.debug_struct("CircuitBreaker")
            .field("name", &self.inner.name())
            .field("state", &State::from_bits(status))
            .field("generation", &(status >> STATUS_SHIFT))
            .field("coordinated", &self.inner.lane.is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod clock_tests;
#[cfg(all(test, interlock_loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
