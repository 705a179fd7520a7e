//! What follows a change of state: listeners, the `auto_transition` timer
//! and the coordination lane's writes, run after the lock is released (R12, R13).

use super::*;

/// What one change under the lock did, to act on after unlocking.
///
/// Sixteen bytes, so that it (and `Option<Effects>`) comes back from the
/// locked change in two registers: returned through memory, its copies
/// read wider than the fields were written, and each such load waited for
/// the stores (a stall on every failure). A trip's OPEN wait is read again
/// when its timer is armed ([`Inner::open_wait_of`]), not carried here.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Effects {
    /// The local machine's transition (timer, shared trip).
    pub(crate) local: Option<Transition>,
    /// The effective state before and after, if it changed (R13.5).
    pub(crate) effective: Option<(State, State)>,
    pub(super) generation: u64,
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

impl Inner {
    /// Acts on a change after the lock is released: the state-change event,
    /// the timer (R12), and the shared trip of a coordinated breaker (R15.4).
    #[inline]
    pub(crate) fn after(&self, effects: Effects) {
        if effects.local.is_some() || effects.effective.is_some() {
            self.after_change(effects, None);
        }
    }

    /// [`after`](Self::after) for a settled call whose leased probe's
    /// outcome is still to be queued: after the events, before the trip it
    /// caused (R15.4).
    pub(super) fn after_settled(&self, effects: Effects, probe: Option<Write>) {
        if effects.local.is_some() || effects.effective.is_some() {
            self.after_change(effects, probe);
        } else if let Some(probe) = probe {
            self.enqueue(probe);
        }
    }

    pub(super) fn after_change(&self, effects: Effects, probe: Option<Write>) {
        // The timer first, so that listeners (however slow) never delay it.
        if let Some(t) = effects.local {
            if t.from == State::Open {
                self.cancel_timer(effects.generation);
            }
            if t.to == State::Open && self.config.auto_transition() {
                if let Some(wait) = self.open_wait_of(effects.generation) {
                    self.arm_timer(effects.generation, wait);
                }
            }
        }
        if let Some((from, to)) = effects.effective {
            self.emit(&Event::state_changed(self.name(), from, to));
        }
        if let Some(probe) = probe {
            self.enqueue(probe);
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
    pub(super) fn enqueue(&self, write: Write) {
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
    /// The OPEN wait of `generation` (R12.1: the timer's delay), if the
    /// machine is still in that generation; `None` once a later change
    /// moved it on (that change cancels or arms the timer itself, R12.3).
    pub(super) fn open_wait_of(&self, generation: u64) -> Option<Duration> {
        let core = self.core();
        (core.machine.generation() == generation).then(|| core.machine.open_wait())
    }

    pub(super) fn arm_timer(&self, generation: u64, delay: Duration) {
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
    pub(super) fn cancel_timer(&self, generation: u64) {
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

    pub(super) fn apply(&self, op: impl FnOnce(&mut Machine) -> Option<Transition>) {
        let ((), effects) = self.change(|core| ((), op(&mut core.machine)));
        self.after(effects);
    }

    /// Stops the timer for good (R12.3).
    pub(super) fn stop_timer(&self) {
        let mut slot = self.timer.lock().unwrap_or_else(PoisonError::into_inner);
        slot.closed = true;
        if let Some(key) = slot.key.take() {
            Scheduler::global().cancel(key);
        }
    }

    /// After shutdown: nothing refreshes the shared view, so drop it
    /// (R15.10), reporting the fall back to local state.
    pub(super) fn drop_shared_view(&self) {
        let ((), effects) = self.change(|core| {
            if let Some(cell) = core.shared.as_mut() {
                cell.view = None;
            }
            ((), None)
        });
        self.after(effects);
    }
}
