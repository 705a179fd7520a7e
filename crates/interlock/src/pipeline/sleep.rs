//! The sleep abstraction behind timeouts, bulkhead waits and retry delays.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::breaker::timer::{Armed, Scheduler, TimerKey, TimerTarget};
use crate::clock::ManualClock;

/// A sleep in progress, as a [`Sleeper`] hands it out.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// How the pipeline waits: the one place its strategies meet time, so they
/// run on any executor and under any test clock.
///
/// ```
/// use interlock::pipeline::{Sleep, Sleeper};
/// use std::time::Duration;
///
/// /// Never waits (a test double).
/// #[derive(Debug)]
/// struct Instant;
///
/// impl Sleeper for Instant {
///     fn sleep(&self, _: Duration) -> Sleep {
///         Box::pin(std::future::ready(()))
///     }
///     fn sleep_blocking(&self, _: Duration) {}
/// }
///
/// let timeout = interlock::pipeline::Timeout::new(Duration::from_secs(1)).sleeper(Instant);
/// # let _ = timeout;
/// ```
pub trait Sleeper: Send + Sync + fmt::Debug + 'static {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Sleep;

    /// Blocks the current thread for `duration`.
    fn sleep_blocking(&self, duration: Duration);
}

impl<S: Sleeper + ?Sized> Sleeper for Arc<S> {
    fn sleep(&self, duration: Duration) -> Sleep {
        (**self).sleep(duration)
    }

    fn sleep_blocking(&self, duration: Duration) {
        (**self).sleep_blocking(duration)
    }
}

pub(crate) fn into_arc(sleeper: impl Sleeper) -> Arc<dyn Sleeper> {
    Arc::new(sleeper)
}

/// Real time, on any executor: async sleeps are woken by one thread of the
/// crate (`interlock-sleep`, which runs no listener: a slow or panicking
/// listener never delays a sleep), blocking sleeps use
/// [`std::thread::sleep`]. The default of every strategy.
///
/// `Duration::MAX` (or any delay past the largest representable instant)
/// never ends: it is "no deadline", not an overflow.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdSleeper;

impl Sleeper for StdSleeper {
    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(TimerSleep {
            alarm: Arc::new(Alarm::default()),
            delay: duration,
            key: None,
            armed: false,
        })
    }

    fn sleep_blocking(&self, duration: Duration) {
        #[allow(clippy::disallowed_methods)] // the real-time sleeper is the one place that sleeps
        std::thread::sleep(duration);
    }
}

#[derive(Default)]
struct Alarm {
    state: Mutex<(bool, Option<Waker>)>,
}

impl TimerTarget for Alarm {
    fn fire(&self, _generation: u64) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

struct TimerSleep {
    alarm: Arc<Alarm>,
    delay: Duration,
    key: Option<TimerKey>,
    armed: bool,
}

impl Future for TimerSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.delay.is_zero() {
            return Poll::Ready(());
        }
        {
            let mut state = self
                .alarm
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if state.0 {
                return Poll::Ready(());
            }
            state.1 = Some(cx.waker().clone());
        }
        if !self.armed {
            self.armed = true;
            let alarm: Arc<dyn TimerTarget> = self.alarm.clone();
            let target = Arc::downgrade(&alarm);
            match Scheduler::sleeps().schedule(self.delay, target, 0) {
                Armed::At(key) => self.key = Some(key),
                // No deadline: pending for ever (until dropped).
                Armed::Never => {}
                // No timer thread could be started: the deadline passes at
                // once rather than never (a visible error, not a lost layer).
                Armed::Failed => return Poll::Ready(()),
            }
        }
        Poll::Pending
    }
}

impl Drop for TimerSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            Scheduler::sleeps().cancel(key);
        }
    }
}

/// Sleeps on a [`ManualClock`]: every sleep advances the clock by its
/// duration and completes at once. For tests and demos whose breaker runs
/// on the same clock; it also keeps every duration asked for.
///
/// A timeout on this sleeper fires as soon as its call is pending, with the
/// clock moved past the deadline: the call "hung" for the whole duration.
///
/// ```
/// use interlock::pipeline::{ManualSleeper, Sleeper};
/// use interlock::{Clock, ManualClock, Timestamp};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let sleeper = ManualSleeper::new(clock.clone());
/// sleeper.sleep_blocking(Duration::from_secs(2));
/// assert_eq!(clock.now(), Timestamp::from_secs(2));
/// assert_eq!(sleeper.sleeps(), [Duration::from_secs(2)]);
/// ```
#[derive(Clone, Debug)]
pub struct ManualSleeper {
    clock: ManualClock,
    sleeps: Arc<Mutex<Vec<Duration>>>,
}

impl ManualSleeper {
    /// A sleeper that advances `clock`.
    #[must_use]
    pub fn new(clock: ManualClock) -> Self {
        ManualSleeper {
            clock,
            sleeps: Arc::default(),
        }
    }

    /// Every duration slept so far, in order.
    #[must_use]
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn advance(&self, duration: Duration) {
        self.sleeps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(duration);
        self.clock.advance(duration);
    }
}

impl Sleeper for ManualSleeper {
    fn sleep(&self, duration: Duration) -> Sleep {
        let this = self.clone();
        Box::pin(async move { this.advance(duration) })
    }

    fn sleep_blocking(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// tokio's timer: async sleeps are `tokio::time::sleep` (so they follow
/// `tokio::time::pause`), blocking sleeps are [`std::thread::sleep`].
///
/// Async sleeps must run inside a tokio runtime with the time driver on.
///
/// ```
/// use interlock::pipeline::{Timeout, TokioSleeper};
/// use std::time::Duration;
///
/// let timeout = Timeout::new(Duration::from_secs(1)).sleeper(TokioSleeper);
/// # let _ = timeout;
/// ```
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioSleeper;

#[cfg(feature = "tokio")]
impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }

    fn sleep_blocking(&self, duration: Duration) {
        #[allow(clippy::disallowed_methods)] // a sleeper is the one place that sleeps
        std::thread::sleep(duration);
    }
}
