//! Time sources.
//!
//! Every decision the breaker takes reads time through a [`Clock`], as a
//! [`Timestamp`] in nanoseconds. Tests inject a [`ManualClock`] and move time
//! by hand, so no test ever has to sleep. A breaker built without a clock
//! reads [`CoarseClock`] (one atomic load) when its slow-call threshold is at
//! least [`COARSE_MIN_SLOW_THRESHOLD`] (the default threshold is 60 s), and
//! [`MonotonicClock`] otherwise, so a tight threshold is still measured to
//! the nanosecond.

use std::cell::Cell;
use std::fmt;
use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::background::{self, Owner};

/// A point in time: nanoseconds since an arbitrary, clock-specific origin.
///
/// Only differences between two timestamps of the same clock mean anything.
/// A `u64` of nanoseconds covers more than 584 years, fits in an atomic and
/// is `Copy`.
///
/// ```
/// use interlock::Timestamp;
/// use std::time::Duration;
///
/// let t = Timestamp::from_nanos(1_500_000_000);
/// assert_eq!(t + Duration::from_millis(500), Timestamp::from_secs(2));
/// assert_eq!(Timestamp::from_secs(2) - t, Duration::from_millis(500));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The origin of a clock.
    pub const ZERO: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the origin.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `secs` whole seconds after the origin (saturating).
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the origin.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Whole seconds since the origin (rounded down).
    #[must_use]
    pub const fn as_secs(self) -> u64 {
        self.0 / 1_000_000_000
    }

    /// The time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at the largest representable timestamp.
    #[must_use]
    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_to_nanos(d)))
    }
}

/// Converts a duration to whole nanoseconds, saturating at `u64::MAX`.
pub(crate) fn duration_to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        self.saturating_add(rhs)
    }
}

impl Sub for Timestamp {
    type Output = Duration;
    fn sub(self, rhs: Timestamp) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.0 as f64 / 1e9)
    }
}

/// A source of monotonic time.
///
/// Implementations must never go backwards. The breaker reads the clock at
/// admission and at settlement of each call (to measure its duration) and
/// when it rejects (to compute `retry_after`), so keep `now` cheap.
///
/// ```
/// use interlock::{Clock, Timestamp};
///
/// /// A clock that is always at the same instant.
/// #[derive(Debug)]
/// struct Frozen;
///
/// impl Clock for Frozen {
///     fn now(&self) -> Timestamp {
///         Timestamp::from_secs(7)
///     }
/// }
///
/// assert_eq!(Frozen.now().as_secs(), 7);
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time.
    fn now(&self) -> Timestamp;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// The precise clock: [`std::time::Instant`], measured from a process-wide
/// origin taken the first time any `MonotonicClock` is read.
///
/// A breaker built without a clock uses it when its slow-call threshold is
/// below [`COARSE_MIN_SLOW_THRESHOLD`]; pass it to
/// [`CircuitBreakerBuilder::clock`](crate::CircuitBreakerBuilder::clock) to
/// measure every call to the nanosecond whatever the threshold (a read costs
/// about 20–40 ns, more than the rest of a call through the breaker).
///
/// ```
/// use interlock::{Clock, MonotonicClock};
///
/// let clock = MonotonicClock;
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    #[allow(clippy::disallowed_methods)] // the one place that reads real time
    *ORIGIN.get_or_init(Instant::now)
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Timestamp {
        let origin = origin();
        #[allow(clippy::disallowed_methods)] // the one place that reads real time
        let elapsed = Instant::now().saturating_duration_since(origin);
        Timestamp(duration_to_nanos(elapsed))
    }
}

/// A cheap clock with millisecond resolution: reading it is one atomic load.
///
/// One background thread (`interlock-coarse-clock`, shared by the whole
/// process) stores the time every millisecond while someone reads the
/// clock, and parks itself after a second without readers; the first read
/// after that takes a precise reading and wakes it. A reading is at most
/// about a millisecond (plus scheduling delay) behind [`MonotonicClock`],
/// with the same origin, and never goes backwards.
///
/// The reading cannot freeze. Every 256th read on each thread compares it
/// with the precise clock: a reading more than 20 ms behind is replaced by
/// a precise one, and a thread that is gone (in a `fork()`ed child) is
/// started again. The thread also widens its CPU mask to every CPU first
/// thing, so one started by a pinned (or real-time) thread is not stuck
/// behind it.
///
/// A breaker built without a clock reads it when its slow-call threshold is
/// at least [`COARSE_MIN_SLOW_THRESHOLD`] (the default is 60 s): call
/// durations (and so slow-call detection and
/// [`Event::CallRecorded`](crate::Event::CallRecorded)) are then measured
/// to about a millisecond, and waits elapse up to a millisecond late; the
/// `auto_transition` timer takes a precise reading when it fires, so it is
/// never early. `docs/performance.md` gives the measured difference.
///
/// ```
/// use interlock::{CircuitBreaker, Clock, CoarseClock, MonotonicClock};
///
/// let breaker = CircuitBreaker::builder("hot-path").clock(CoarseClock).build()?;
/// breaker.call(|| Ok::<_, std::io::Error>(()))?;
/// let (coarse, precise) = (CoarseClock.now(), MonotonicClock.now());
/// assert!(coarse <= precise);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CoarseClock;

/// How often the coarse clock's thread refreshes it.
const COARSE_TICK: Duration = Duration::from_millis(1);
/// Ticks without a reader before the thread parks.
const COARSE_IDLE_TICKS: u32 = 1000;
/// Each thread checks every this many of its [`CoarseClock`] readings
/// against the precise clock (a call's second reading, the settlement's,
/// is not counted: see `ClockHandle::now_unmarked`). A check costs one
/// precise read (20–40 ns), so this many readings share it: about a
/// tenth of a nanosecond each. A power of two: the count is one byte.
const CHECK_EVERY: u32 = 1 << u8::BITS;
// The thread-local count is a byte that wraps to zero every `CHECK_EVERY`.
const _: () = assert!(CHECK_EVERY == u8::MAX as u32 + 1);
/// A reading this far behind the precise clock is stale: the clock's
/// thread did not run for at least this long (starved, or gone). Well
/// above a tick plus ordinary scheduling delay, so a thread that runs is
/// rarely second-guessed (and then only refreshed).
const STALE_AFTER: Duration = Duration::from_millis(20);

struct Ticker {
    nanos: AtomicU64,
    /// [`RUNNING`] and [`READ`]: one byte, so a read tests both at once.
    flags: AtomicU8,
    /// The thread, and the process it was started in (it is not in a
    /// `fork()`ed child).
    thread: Mutex<Option<(Thread, Owner)>>,
}

thread_local! {
    /// This thread's counted readings of the coarse clock, modulo
    /// [`CHECK_EVERY`].
    static UNCHECKED: Cell<u8> = const { Cell::new(0) };
}

/// The thread is refreshing `nanos`.
const RUNNING: u8 = 1;
/// Someone read the clock since the thread's last tick.
const READ: u8 = 2;

/// A plain static (no `OnceLock` check on every read): it starts stopped, so
/// the first read takes a precise reading through [`Ticker::wake`].
static TICKER: Ticker = Ticker {
    nanos: AtomicU64::new(0),
    flags: AtomicU8::new(0),
    thread: Mutex::new(None),
};

#[inline]
fn ticker() -> &'static Ticker {
    &TICKER
}

/// After a `fork()` (see [`background::forked`]): a child whose parent's
/// clock thread was ticking starts its own now (a parked one is started by
/// the next read).
pub(crate) fn revive() {
    let t = ticker();
    if t.flags.load(Ordering::Acquire) & RUNNING != 0 {
        t.ensure_thread(false);
    }
}

/// The smallest slow-call threshold for which a breaker built without a clock
/// reads [`CoarseClock`]: a millisecond tick is then at most 1 % of the
/// threshold. Below it, the breaker reads [`MonotonicClock`].
///
/// ```
/// use interlock::COARSE_MIN_SLOW_THRESHOLD;
/// use std::time::Duration;
///
/// assert_eq!(COARSE_MIN_SLOW_THRESHOLD, Duration::from_millis(100));
/// ```
pub const COARSE_MIN_SLOW_THRESHOLD: Duration = Duration::from_millis(100);

/// Whether this reading is the thread's [`CHECK_EVERY`]-th since its last
/// check: a thread-local byte counts the readings and wraps to zero every
/// [`CHECK_EVERY`] (one add to memory and a branch on its zero flag). The
/// first reading of a thread is not checked.
#[inline]
fn check_due() -> bool {
    UNCHECKED.with(|count| {
        let n = count.get().wrapping_add(1);
        count.set(n);
        n == 0
    })
}

/// Whether a coarse reading `reading` is stale next to the precise
/// reading `precise`.
fn is_stale(reading: u64, precise: u64) -> bool {
    precise.saturating_sub(reading) > duration_to_nanos(STALE_AFTER)
}

impl Ticker {
    fn refresh(&self) -> u64 {
        let now = MonotonicClock.now().0;
        self.nanos.fetch_max(now, Ordering::Relaxed).max(now)
    }

    #[cold]
    fn wake(&'static self) -> Timestamp {
        let now = self.refresh();
        // Release: the reading above is stored before `RUNNING` is set.
        if self.flags.fetch_or(RUNNING | READ, Ordering::AcqRel) & RUNNING == 0 {
            self.ensure_thread(true);
        }
        Timestamp(now)
    }

    /// Makes sure a thread of this process ticks: unparks it (if `unpark`)
    /// or starts one when there is none here (never started, or lost to a
    /// `fork()`). Never blocks: in a child forked while another thread held
    /// the slot's lock, the lock is never released, and readers keep
    /// repairing the reading themselves instead.
    fn ensure_thread(&'static self, unpark: bool) {
        let mut slot = match self.thread.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let forked = match slot.as_ref() {
            Some((t, owner)) if owner.is_here() => {
                if unpark {
                    t.unpark();
                }
                return;
            }
            Some(_) => true,
            None => false,
        };
        background::on_fork(background::Hook::Clock, revive);
        match background::spawn("interlock-coarse-clock", move || self.run()) {
            Ok(handle) => *slot = Some((handle.thread().clone(), Owner::current())),
            // No thread: stay stopped, so every read is precise.
            Err(_) => {
                *slot = None;
                self.flags.fetch_and(!RUNNING, Ordering::Release);
            }
        }
        drop(slot);
        if forked {
            // The first to notice: bring the timers and lanes back too.
            background::forked();
        }
    }

    /// A counted reading's check: `reading` against the precise clock. A
    /// stale reading (the thread did not run for [`STALE_AFTER`]) is
    /// replaced by the precise one, and the thread is started again if it
    /// is gone.
    #[cold]
    #[inline(never)]
    fn check(&'static self, reading: u64) -> Timestamp {
        let precise = MonotonicClock.now().0;
        if !is_stale(reading, precise) {
            return Timestamp(reading);
        }
        let now = self
            .nanos
            .fetch_max(precise, Ordering::Relaxed)
            .max(precise);
        self.ensure_thread(false);
        Timestamp(now)
    }

    fn run(&self) {
        let mut idle = 0;
        loop {
            #[allow(clippy::disallowed_methods)] // the clock's own tick
            std::thread::sleep(COARSE_TICK);
            self.refresh();
            let park;
            (idle, park) = after_tick(self.flags.fetch_and(!READ, Ordering::Relaxed), idle);
            if park {
                // Stop, unless a reader came since the line above.
                if self
                    .flags
                    .compare_exchange(RUNNING, 0, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                // A reader that saw `RUNNING` still set got a reading at
                // most one tick old; the next one wakes us.
                while self.flags.load(Ordering::Acquire) & RUNNING == 0 {
                    std::thread::park();
                }
                self.refresh();
            }
        }
    }
}

/// One tick's bookkeeping: from the flags as the tick found them (before it
/// cleared `READ`) and the unread ticks before it, the unread ticks after it
/// and whether the thread should park now.
fn after_tick(flags: u8, idle: u32) -> (u32, bool) {
    let idle = if flags & READ != 0 { 0 } else { idle + 1 };
    if idle >= COARSE_IDLE_TICKS {
        (0, true)
    } else {
        (idle, false)
    }
}

impl CoarseClock {
    /// A reading that does not tell the thread someone is reading: for the
    /// second read of a call, whose first read already did (the thread
    /// cannot park within a second of that).
    #[inline]
    fn now_unmarked() -> Timestamp {
        let t = ticker();
        if t.flags.load(Ordering::Acquire) & RUNNING != 0 {
            Timestamp(t.nanos.load(Ordering::Relaxed))
        } else {
            t.wake()
        }
    }
}

impl Ticker {
    /// A counted reading (see [`CoarseClock`]).
    #[inline]
    fn read(&'static self) -> Timestamp {
        // Acquire: `wake` stored a reading before it set `RUNNING`, so a
        // reader that sees the thread running never sees the initial zero.
        let flags = self.flags.load(Ordering::Acquire);
        if flags != RUNNING | READ {
            if flags & RUNNING == 0 {
                return self.wake();
            }
            // Once per tick: tell the thread someone reads.
            self.flags.fetch_or(READ, Ordering::Relaxed);
        }
        let reading = self.nanos.load(Ordering::Relaxed);
        if check_due() {
            return self.check(reading);
        }
        Timestamp(reading)
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Timestamp {
        ticker().read()
    }
}

/// A clock that only moves when told to: for tests, demos and simulations.
///
/// Clones share the same time, so a test keeps one handle and gives a clone
/// to the breaker. It starts at [`Timestamp::ZERO`].
///
/// ```
/// use interlock::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let handle = clock.clone();
/// handle.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now(), Timestamp::from_nanos(1_500_000_000));
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at [`Timestamp::ZERO`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock at `start`.
    #[must_use]
    pub fn starting_at(start: Timestamp) -> Self {
        let clock = Self::new();
        clock.nanos.store(start.0, Ordering::SeqCst);
        clock
    }

    /// Moves the clock forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Moves the clock to `to`, unless that is in its past (a clock never goes
    /// backwards): returns whether the clock moved.
    pub fn set(&self, to: Timestamp) -> bool {
        self.nanos.fetch_max(to.0, Ordering::SeqCst) < to.0
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::SeqCst))
    }
}

/// The clock a breaker holds: the two built-in clocks are dispatched without
/// a virtual call, anything else through `Arc<dyn Clock>`.
#[derive(Clone, Debug, Default)]
pub(crate) enum ClockHandle {
    /// No clock chosen: [`resolve`](Self::resolve) picks one from the
    /// breaker's slow-call threshold.
    #[default]
    Auto,
    Monotonic,
    Coarse,
    Manual(ManualClock),
    Custom(Arc<dyn Clock>),
}

impl ClockHandle {
    pub(crate) fn from_clock<C: Clock>(clock: C) -> Self {
        let any: &dyn std::any::Any = &clock;
        if any.is::<MonotonicClock>() {
            ClockHandle::Monotonic
        } else if any.is::<CoarseClock>() {
            ClockHandle::Coarse
        } else if let Some(manual) = any.downcast_ref::<ManualClock>() {
            ClockHandle::Manual(manual.clone())
        } else if let Some(handle) = any.downcast_ref::<ClockHandle>() {
            handle.clone()
        } else {
            ClockHandle::Custom(Arc::new(clock))
        }
    }

    /// The clock a breaker with this slow-call threshold reads: `Auto`
    /// becomes [`CoarseClock`] from [`COARSE_MIN_SLOW_THRESHOLD`] up and
    /// [`MonotonicClock`] below it; a chosen clock stays.
    pub(crate) fn resolve(self, slow_call_duration_threshold: Duration) -> ClockHandle {
        match self {
            ClockHandle::Auto if slow_call_duration_threshold >= COARSE_MIN_SLOW_THRESHOLD => {
                ClockHandle::Coarse
            }
            ClockHandle::Auto => ClockHandle::Monotonic,
            chosen => chosen,
        }
    }

    pub(crate) fn is_coarse(&self) -> bool {
        matches!(self, ClockHandle::Coarse)
    }

    /// A reading that does not trail real time, for a decision taken when a
    /// real-time deadline passes (the `auto_transition` timer): on the
    /// coarse clock it is a precise reading, stored into the coarse clock so
    /// that it never goes backwards.
    pub(crate) fn now_fresh(&self) -> Timestamp {
        match self {
            ClockHandle::Coarse => Timestamp(ticker().refresh()),
            other => other.now(),
        }
    }

    /// The current time: the coarse clock (the default) is tested first
    /// and read inline; the others are a call away.
    #[inline]
    pub(crate) fn now(&self) -> Timestamp {
        if let ClockHandle::Coarse = self {
            CoarseClock.now()
        } else {
            self.now_other()
        }
    }

    /// [`now`](Self::now) for a call's second reading: on the coarse clock
    /// it skips telling the clock's thread that someone reads (the call's
    /// first reading did, and the thread stays up a second after that).
    #[inline]
    pub(crate) fn now_unmarked(&self) -> Timestamp {
        if let ClockHandle::Coarse = self {
            CoarseClock::now_unmarked()
        } else {
            self.now_other()
        }
    }

    #[inline(never)]
    fn now_other(&self) -> Timestamp {
        match self {
            ClockHandle::Auto | ClockHandle::Monotonic => MonotonicClock.now(),
            ClockHandle::Coarse => CoarseClock.now(),
            ClockHandle::Manual(m) => m.now(),
            ClockHandle::Custom(c) => c.now(),
        }
    }
}

impl Clock for ClockHandle {
    fn now(&self) -> Timestamp {
        ClockHandle::now(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_is_shared_between_clones_and_never_goes_back() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.now(), Timestamp::from_secs(3));
        assert!(!b.set(Timestamp::from_secs(1)));
        assert_eq!(a.now(), Timestamp::from_secs(3));
        assert!(b.set(Timestamp::from_secs(5)));
        assert_eq!(a.now(), Timestamp::from_secs(5));
        // Setting the time it already shows does not move it.
        assert!(!a.set(Timestamp::from_secs(5)));
    }

    #[test]
    fn handle_recognises_builtin_clocks() {
        let manual = ManualClock::new();
        let h = ClockHandle::from_clock(manual.clone());
        assert!(matches!(h, ClockHandle::Manual(_)));
        manual.advance(Duration::from_secs(1));
        assert_eq!(h.now(), Timestamp::from_secs(1));
        assert!(matches!(
            ClockHandle::from_clock(MonotonicClock),
            ClockHandle::Monotonic
        ));
        #[derive(Debug)]
        struct Fixed;
        impl Clock for Fixed {
            fn now(&self) -> Timestamp {
                Timestamp::from_nanos(42)
            }
        }
        let h = ClockHandle::from_clock(Fixed);
        assert_eq!(h.now(), Timestamp::from_nanos(42));
        let h2 = ClockHandle::from_clock(h.clone());
        assert!(matches!(h2, ClockHandle::Custom(_)));
        assert_eq!(h2.now(), Timestamp::from_nanos(42));
        // A handle read through the `Clock` trait reads its clock.
        assert_eq!(<ClockHandle as Clock>::now(&h2), Timestamp::from_nanos(42));
    }

    #[test]
    fn coarse_clock_trails_the_precise_clock_and_never_goes_back() {
        assert!(matches!(
            ClockHandle::from_clock(CoarseClock),
            ClockHandle::Coarse
        ));
        let mut last = CoarseClock.now();
        for _ in 0..10_000 {
            let coarse = CoarseClock.now();
            let precise = MonotonicClock.now();
            assert!(coarse >= last, "went backwards");
            assert!(coarse <= precise, "ahead of the precise clock");
            last = coarse;
        }
        // It keeps moving: poll until it passes a precise reading.
        let target = MonotonicClock.now();
        let deadline = target + Duration::from_secs(10);
        while CoarseClock.now() < target {
            assert!(MonotonicClock.now() < deadline, "the coarse clock stopped");
            std::thread::yield_now();
        }
    }

    #[test]
    fn the_clock_thread_parks_after_a_second_of_unread_ticks() {
        let running = RUNNING;
        // A read since the last tick starts the count again.
        assert_eq!(after_tick(running | READ, 999), (0, false));
        let mut idle = 0;
        for tick in 1..COARSE_IDLE_TICKS {
            let park;
            (idle, park) = after_tick(running, idle);
            assert_eq!((idle, park), (tick, false));
        }
        assert_eq!(after_tick(running, idle), (0, true));
        assert_eq!(
            COARSE_IDLE_TICKS * u32::try_from(COARSE_TICK.as_millis()).unwrap(),
            1_000,
            "a second of ticks"
        );
    }

    #[test]
    fn a_reading_is_stale_only_well_behind_the_precise_clock() {
        let stale_after = duration_to_nanos(STALE_AFTER);
        assert!(!is_stale(1_000, 1_000));
        assert!(!is_stale(5_000, 1_000), "a reading ahead is fresh");
        assert!(!is_stale(1_000, 1_000 + stale_after));
        assert!(is_stale(1_000, 1_001 + stale_after));
        assert!(
            STALE_AFTER >= 10 * COARSE_TICK,
            "a ticking thread a few ticks late is not stale"
        );
    }

    /// The staleness guard: a ticker whose thread is gone (as in a
    /// `fork()`ed child: its flags still say it runs, its reading is
    /// frozen) is noticed within `CHECK_EVERY` readings on any thread,
    /// which then get a precise reading, and a new thread starts.
    #[test]
    fn a_frozen_reading_is_replaced_within_check_every_reads_and_the_thread_restarts() {
        static FROZEN: Ticker = Ticker {
            nanos: AtomicU64::new(1),
            flags: AtomicU8::new(RUNNING | READ),
            thread: Mutex::new(None),
        };
        // "Started in another process": a handle to a thread that does not
        // tick this ticker.
        *FROZEN.thread.lock().unwrap() = Some((std::thread::current(), Owner::elsewhere()));
        // The frozen reading (1 ns after the origin) must be stale.
        let stale_from = 2 * duration_to_nanos(STALE_AFTER);
        while MonotonicClock.now().0 < stale_from {
            std::thread::yield_now();
        }
        let before = MonotonicClock.now();
        let mut frozen_reads = 0;
        let repaired = loop {
            let t = FROZEN.read();
            if t.0 != 1 {
                break t;
            }
            frozen_reads += 1;
            assert!(
                frozen_reads < CHECK_EVERY,
                "still frozen after {frozen_reads} reads"
            );
        };
        assert!(repaired >= before, "the repair is a precise reading");
        let (_, owner) = FROZEN.thread.lock().unwrap().clone().unwrap();
        assert!(owner.is_here(), "a new thread was started here");
        // The new thread ticks: the reading moves on without further checks.
        let deadline = MonotonicClock.now() + Duration::from_secs(30);
        while FROZEN.nanos.load(Ordering::Relaxed) <= repaired.0 {
            assert!(
                MonotonicClock.now() < deadline,
                "the restarted thread does not tick"
            );
            std::thread::yield_now();
        }
        // A fresh reading is returned as it is: readings never go back.
        let mut last = FROZEN.read();
        for _ in 0..(4 * CHECK_EVERY) {
            let t = FROZEN.read();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn every_check_every_th_reading_on_a_thread_is_checked() {
        std::thread::spawn(|| {
            let due: Vec<bool> = (0..3 * CHECK_EVERY).map(|_| check_due()).collect();
            let checked: Vec<usize> = (0..due.len()).filter(|&i| due[i]).collect();
            let every = CHECK_EVERY as usize;
            // Readings 1, 2, ... of the thread: the 256th, 512th and 768th.
            assert_eq!(checked, [every - 1, 2 * every - 1, 3 * every - 1]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_nanos(u64::MAX - 1);
        assert_eq!((t + Duration::from_secs(1)).as_nanos(), u64::MAX);
        assert_eq!(Timestamp::ZERO - t, Duration::ZERO);
        assert_eq!(
            Timestamp::from_secs(5) - Timestamp::from_nanos(1_500_000_000),
            Duration::from_millis(3_500)
        );
        assert_eq!(Timestamp::from_secs(3).as_secs(), 3);
        assert_eq!(Timestamp::from_secs(2).to_string(), "2.000000000s");
    }
}
