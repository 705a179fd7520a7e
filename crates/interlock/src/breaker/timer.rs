//! The `auto_transition` timer: one background thread for every breaker of
//! the process (R12), started the first time a timer is armed.
//!
//! Timers are scheduled on real time (the only place the crate reads it
//! outside `clock.rs`); whether a timer may act is decided on the breaker's
//! injected clock when it fires.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

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
    thread: bool,
}

#[derive(Default)]
pub(crate) struct Scheduler {
    queue: Mutex<Queue>,
    wake: Condvar,
}

fn now() -> Instant {
    #[allow(clippy::disallowed_methods)] // timers are scheduled on real time (R1.4)
    Instant::now()
}

impl Scheduler {
    pub(crate) fn global() -> &'static Arc<Scheduler> {
        static GLOBAL: OnceLock<Arc<Scheduler>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Scheduler::default()))
    }

    /// Arms a timer that calls `target.fire(generation)` after `delay`;
    /// `None` if no timer thread could be started (the lazy path still works).
    pub(crate) fn schedule(
        self: &Arc<Self>,
        delay: Duration,
        target: Weak<dyn TimerTarget>,
        generation: u64,
    ) -> Option<TimerKey> {
        let deadline = now().checked_add(delay)?;
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if !q.thread {
            let me = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("interlock-timer".into())
                .spawn(move || me.run());
            if spawned.is_err() {
                return None;
            }
            q.thread = true;
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
        Some(key)
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
                target.fire(entry.generation);
            }
            q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        }
    }
}
