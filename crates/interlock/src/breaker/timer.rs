//! Timers on real time, each [`Scheduler`] one background thread started
//! the first time it arms one: [`Scheduler::global`] for the
//! `auto_transition` timers of every breaker of the process (R12), and
//! [`Scheduler::sleeps`] for the pipeline's default sleeper, so that a
//! sleep never waits behind a breaker's listeners (which its timer runs).
//!
//! Timers are scheduled on real time (the only place the crate reads it
//! outside `clock.rs`); whether a timer may act is decided on the breaker's
//! injected clock when it fires. A target that panics is caught and the
//! thread goes on; a thread lost to `fork()` is started again by the next
//! [`Scheduler::schedule`] in the child, and serves the timers the child
//! inherited.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::background::{self, Owner};

/// What a timer calls when it fires.
pub(crate) trait TimerTarget: Send + Sync {
    fn fire(&self, generation: u64);
}

/// Identifies one armed timer, to cancel it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct TimerKey {
    deadline: Instant,
    id: u64,
}

struct Entry {
    target: Weak<dyn TimerTarget>,
    generation: u64,
}

#[derive(Default)]
struct Queue {
    entries: BTreeMap<TimerKey, Entry>,
    next_id: u64,
    /// The process the thread was started in, if one was.
    thread: Option<Owner>,
}

pub(crate) struct Scheduler {
    queue: Mutex<Queue>,
    wake: Condvar,
    name: &'static str,
}

/// What [`Scheduler::schedule`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Armed {
    /// The timer fires at its deadline; the key cancels it.
    At(TimerKey),
    /// The delay reaches past any representable instant (`Duration::MAX`
    /// and the like): it never fires, and nothing was queued.
    Never,
    /// No timer thread could be started.
    Failed,
}

impl Armed {
    pub(crate) fn key(self) -> Option<TimerKey> {
        match self {
            Armed::At(key) => Some(key),
            Armed::Never | Armed::Failed => None,
        }
    }
}

fn now() -> Instant {
    #[allow(clippy::disallowed_methods)] // timers are scheduled on real time (R1.4)
    Instant::now()
}

impl Scheduler {
    fn new(name: &'static str) -> Self {
        Scheduler {
            queue: Mutex::default(),
            wake: Condvar::new(),
            name,
        }
    }

    /// The breakers' `auto_transition` timers (thread `interlock-timer`).
    pub(crate) fn global() -> &'static Arc<Scheduler> {
        static GLOBAL: OnceLock<Arc<Scheduler>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Scheduler::new("interlock-timer")))
    }

    /// The pipeline's async sleeps (thread `interlock-sleep`): no listener
    /// ever runs on it.
    pub(crate) fn sleeps() -> &'static Arc<Scheduler> {
        static SLEEPS: OnceLock<Arc<Scheduler>> = OnceLock::new();
        SLEEPS.get_or_init(|| Arc::new(Scheduler::new("interlock-sleep")))
    }

    /// After a `fork()` (see [`crate::background::forked`]): starts this
    /// process's thread if timers are pending (the ones the child
    /// inherited). Never blocks.
    fn revive(self: &Arc<Self>) {
        let Ok(mut q) = self.queue.try_lock() else {
            return;
        };
        if q.entries.is_empty() || q.thread.is_some_and(Owner::is_here) {
            return;
        }
        let me = Arc::clone(self);
        if background::spawn(self.name, move || me.run()).is_ok() {
            q.thread = Some(Owner::current());
        }
    }

    /// [`revive`](Self::revive) for both schedulers.
    pub(crate) fn revive_all() {
        Scheduler::global().revive();
        Scheduler::sleeps().revive();
    }

    /// Arms a timer that calls `target.fire(generation)` after `delay`.
    pub(crate) fn schedule(
        self: &Arc<Self>,
        delay: Duration,
        target: Weak<dyn TimerTarget>,
        generation: u64,
    ) -> Armed {
        let Some(deadline) = now().checked_add(delay) else {
            return Armed::Never;
        };
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !q.thread.is_some_and(Owner::is_here) {
            let forked = q.thread.is_some();
            let me = Arc::clone(self);
            background::on_fork(background::Hook::Timers, Scheduler::revive_all);
            if background::spawn(self.name, move || me.run()).is_err() {
                return Armed::Failed;
            }
            q.thread = Some(Owner::current());
            if forked {
                drop(q);
                background::forked();
                q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
        q.next_id += 1;
        let key = TimerKey {
            deadline,
            id: q.next_id,
        };
        let is_first = q
            .entries
            .first_key_value()
            .is_none_or(|(first, _)| key < *first);
        q.entries.insert(key, Entry { target, generation });
        drop(q);
        if is_first {
            self.wake.notify_one();
        }
        Armed::At(key)
    }

    pub(crate) fn cancel(&self, key: TimerKey) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .remove(&key);
    }

    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .len()
    }

    fn run(&self) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let Some((&key, _)) = q.entries.first_key_value() else {
                q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let current = now();
            if key.deadline > current {
                let wait = key.deadline - current;
                q = self
                    .wake
                    .wait_timeout(q, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
            let Some(entry) = q.entries.remove(&key) else {
                continue;
            };
            drop(q);
            if let Some(target) = entry.target.upgrade() {
                // A panicking target (a user's clock, a waker) costs its own
                // timer, never the thread and every later timer (D5).
                crate::event::isolate(|| target.fire(entry.generation));
            }
            q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        }
    }
}
