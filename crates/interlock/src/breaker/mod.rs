//! [`CircuitBreaker`]: the machine behind a lock, a lock-free fast path, and
//! everything around it (clock, classification, listeners, timer, and the
//! shared view of a coordinated breaker).

mod admission;
mod builder;
mod calls;
mod controls;
mod coordinated;
pub(crate) mod coordinator;
mod effects;
mod kept;
mod permit;
mod settlement;
mod shared_view;
mod tally;
pub(crate) mod timer;
mod usage;

use admission::{Door, Ticket, lock_free_deadline};
use effects::Effects;
use kept::{ErrorText, Keep, KeptFailure, with_kept};
use settlement::{DISPLAY_PANICKED, Guard, error_text};
pub(crate) use usage::Usage;

use std::any::Any;
use std::cell::RefCell;
use std::error::Error;
use std::fmt::{self, Write as _};
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

pub use builder::CircuitBreakerBuilder;
pub use permit::Permit;

use crate::breaker::coordinator::{Item, Lane, Write};
use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{ClockHandle, Timestamp, duration_to_nanos};
use crate::config::Config;
use crate::error::{CallError, CircuitOpenError, NO_ESTIMATE, estimate_nanos};
use crate::event::{Event, EventListener, emit};
use crate::failure::{CallErrorOf, Failure, find_rejection};
use crate::identity::{Identity, LastFailure};
use crate::machine::{Admission, Machine, ProbeCounters, TallyKey, Transition};
use crate::mode::{AsyncApi, Local, Mode, SyncApi};
use crate::state::{Outcome, State};
use crate::store::SharedState;
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
///
/// `repr(C)`: the lanes' key and the machine, its window first, follow the
/// mutex word, so that the window's counters a failure writes are on the
/// lock's own 128 bytes (issue 22: with two threads every line the lock
/// holder writes moves between the cores; a count window's bit words stay
/// on the heap, since keeping them inline cost one thread more than it
/// gave two).
#[repr(C)]
pub(crate) struct Core {
    /// The key the success lanes are tagged with (`None`: they are not
    /// valid), see `tally.rs`.
    tally_key: Option<TallyKey>,
    pub(crate) machine: Machine,
    pub(crate) shared: Option<SharedCell>,
    /// When the effective state last changed (or the breaker was built), on
    /// the breaker's clock: written only on transitions, which hold the lock.
    pub(crate) since: Timestamp,
    /// The last failure (R11.3), written only under this lock (`kept.rs`).
    failure: KeptFailure,
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
    /// Plain successes counted without the lock, folded into the machine
    /// whenever the lock is taken (`tally.rs`).
    tally: tally::Tally,
    /// The machine and what goes with it, behind the breaker's lock: in an
    /// allocation of its own lines ([`Locked`]), so that taking the lock on
    /// one core never takes `status` (read by every call) from another.
    core: Box<Locked>,
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
    /// Its last use and removal, for a registry that expires or bounds
    /// its breakers (untracked otherwise).
    pub(crate) usage: Usage,
}

/// The breaker's lock, alone on its cache lines: aligned to, and so sized
/// in multiples of, 128 bytes (two lines: some x86 cores prefetch lines in
/// pairs, the reason crossbeam pads to 128 there), in its own allocation.
/// Inline in [`Inner`] it shared a line with `status`, and every lock and
/// unlock on one core made the other core's next admission miss (issue 22,
/// two threads).
#[repr(align(128))]
struct Locked(Mutex<Core>);

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

impl Inner {
    /// The machine's lock (tried a few times before it is waited for:
    /// [`crate::sync::lock`]).
    fn core(&self) -> MutexGuard<'_, Core> {
        crate::sync::lock(&self.core.0)
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
    ///
    /// The success lanes are folded into the machine first and re-keyed
    /// after `op` (see `tally.rs` for why that is exact). Late successes
    /// the fold finds that trip the breaker are a change of their own: it
    /// is reported, with the lock released, before `op` runs.
    pub(crate) fn change<R>(
        &self,
        op: impl FnOnce(&mut Core) -> (R, Option<Transition>),
    ) -> (R, Effects) {
        self.change_unless(|_| false, op)
    }

    /// [`change`](Self::change), without the fold when `unfolded` says,
    /// under the lock, that `op` may run before the successes waiting in
    /// the lanes are recorded (`Machine::may_record_before_waiting_successes`):
    /// they stay in their lanes, still under the key, for the next fold.
    #[inline(always)]
    pub(crate) fn change_unless<R>(
        &self,
        unfolded: impl FnOnce(&Core) -> bool,
        op: impl FnOnce(&mut Core) -> (R, Option<Transition>),
    ) -> (R, Effects) {
        let mut core = self.core();
        if !unfolded(&core) {
            loop {
                let late = self.fold(&mut core);
                if late == 0 {
                    break;
                }
                match self.record_late_owned(&mut core, late) {
                    Some(effects) => {
                        drop(core);
                        self.after(effects);
                        core = self.core();
                    }
                    None => break,
                }
            }
        }
        let before = core.effective().0;
        let (r, local) = op(&mut core);
        (r, self.changed(&mut core, before, local))
    }

    /// Under the lock: records what the success lanes counted since the
    /// last fold; returns how many late successes of this generation are
    /// left for the machine's full path (the machine has no key: see
    /// `tally.rs`, never the case through the API).
    ///
    /// `fold`, `changed` and `rekey` are forced inline into each locked
    /// change: as calls, each saved and restored up to six registers
    /// inside the critical section (a count-window failure 1,369 → 1,299
    /// instructions, a half-open admission 517 → 446; `cargo bench -p
    /// interlock-benches --bench instructions`).
    #[inline(always)]
    fn fold(&self, core: &mut Core) -> u64 {
        let folded = self.tally.fold_owned(core.machine.generation());
        let mut pending = folded.current;
        let keyed = core.tally_key.is_some();
        if keyed {
            // Under a key no run of successes can trip: late ones of this
            // generation count as the current ones do.
            pending += self.tally.collect() + folded.late;
        }
        if pending > 0 {
            core.machine.absorb_successes(pending);
        }
        if keyed { 0 } else { folded.late }
    }

    /// Late successes of an owned lane while the machine has no key: one
    /// by one through its full path, as locked successes of the current
    /// generation; the effects if they changed the state (reported before
    /// the operation that found them runs).
    #[cold]
    #[inline(never)]
    fn record_late_owned(&self, core: &mut Core, late: u64) -> Option<Effects> {
        let before = core.effective().0;
        let mut local = None;
        let old = TallyKey {
            generation: core.machine.generation(),
            second: 0,
        };
        self.record_late(core, old, late, &mut local);
        local.map(|t| self.changed(core, before, Some(t)))
    }

    /// Under the lock, after the machine changed (or may have): re-keys
    /// the lanes, republishes, and says what changed since `before`.
    #[inline(always)]
    fn changed(&self, core: &mut Core, before: State, local: Option<Transition>) -> Effects {
        let local = self.rekey(core, local);
        let after = core.effective().0;
        if before != after {
            core.since = self.clock.now();
        }
        self.publish(core);
        Effects::new(
            local,
            (before != after).then_some((before, after)),
            core.machine.generation(),
        )
    }

    /// Under the lock, after a change: tags the success lanes with the
    /// machine's key if it moved. Successes added to the old key since the
    /// fold raced the change and are ordered right after it: dropped if
    /// stale (R8.8), otherwise recorded one by one with their trip
    /// evaluation, as a locked success would be; a trip they cause is
    /// returned with `local` (which is `None` whenever they can count: a
    /// transition moves the generation).
    #[inline(always)]
    fn rekey(&self, core: &mut Core, mut local: Option<Transition>) -> Option<Transition> {
        self.tally.flush_at(core.machine.successes_to_quiet());
        // Open owned lanes carry `core.tally_key` (a key that changes closes
        // them first, below), and a key that lasts is the machine's key until
        // a transition, after which the window does not last (OPEN, or a
        // fresh CLOSED window): nothing to compute or re-tag.
        if core.machine.tally_key_lasts() && self.tally.owned_open() {
            debug_assert_eq!(core.machine.tally_key(), core.tally_key);
            return local;
        }
        let key = core.machine.tally_key();
        if key == core.tally_key {
            if let Some(key) = key {
                // A count window that filled up: its key now lasts.
                if !self.tally.owned_open() && core.machine.tally_key_lasts() {
                    self.tally.open_owned(key);
                }
            }
            return local;
        }
        let late = self.tally.invalidate();
        if let (Some(old), true) = (core.tally_key.take(), late > 0) {
            self.record_late(core, old, late, &mut local);
        }
        let key = core.machine.tally_key();
        if let Some(key) = key {
            self.tally.validate(key, core.machine.tally_key_lasts());
        }
        core.tally_key = key;
        local
    }

    #[cold]
    #[inline(never)]
    fn record_late(
        &self,
        core: &mut Core,
        old: TallyKey,
        late: u64,
        local: &mut Option<Transition>,
    ) {
        let now = self.clock.now();
        let admission = Admission {
            generation: old.generation,
            probe: false,
        };
        for _ in 0..late {
            let t = core.machine.record(now, admission, Outcome::Success, false);
            *local = local.or(t);
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.identity.name()
    }

    /// The clock the breaker reads (resolved: never `Auto`).
    pub(crate) fn clock(&self) -> &ClockHandle {
        &self.clock
    }

    #[inline]
    pub(crate) fn emit(&self, event: &Event<'_>) {
        if !self.listeners.is_empty() {
            emit(&self.listeners, event);
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
        let tally = tally::Tally::new(matches!(
            config.sliding_window,
            crate::SlidingWindow::Time(_)
        ));
        tally.flush_at(machine.successes_to_quiet());
        let tally_key = machine.tally_key();
        if let Some(key) = tally_key {
            tally.validate(key, machine.tally_key_lasts());
        }
        let core = Core {
            machine,
            shared: lane.as_ref().map(|_| SharedCell::default()),
            since: created_at,
            tally_key,
            failure: KeptFailure::default(),
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
            tally,
            core: Box::new(Locked(Mutex::new(core))),
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
            usage: Usage::new(),
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
        // Through `change`: the success lanes are folded in first, and a
        // time window that moved re-keys them.
        let (snapshot, effects) = self.inner.change(|core| (core.machine.snapshot(now), None));
        self.inner.after(effects);
        snapshot
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

    /// The breaker `inner` is the state of.
    pub(crate) fn from_inner(inner: Arc<Inner>) -> Self {
        CircuitBreaker {
            inner,
            mode: PhantomData,
        }
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
