//! What follows a change of state: listeners, the `auto_transition` timer
//! and the coordination lane's writes, run after the lock is released (R12, R13).

use std::num::NonZeroU64;

use super::*;

/// What one change under the lock did, to act on after unlocking.
///
/// Two words, so that it (and `Option<Effects>`) comes back from the
/// locked change in two registers. As a struct of its four fields it came
/// back through memory, and its copies were loads wider than the stores
/// that had just written the fields, each waiting for them: a stall on
/// every failure (`perf annotate` of `one_thread count 10`). A trip's OPEN
/// wait is not carried either: it is read again when its timer is armed
/// ([`Inner::open_wait_of`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Effects {
    generation: u64,
    /// [`CHANGED_MARK`] (never zero, so `Option<Effects>` needs no tag
    /// word), the local transition's states in bits 0..16 and the
    /// effective states in bits 16..32 ([`pack`]).
    changes: NonZeroU64,
}

/// Always set in [`Effects::changes`] (bit 63, above both pairs).
const CHANGED_MARK: NonZeroU64 = match NonZeroU64::new(1 << 63) {
    Some(mark) => mark,
    None => NonZeroU64::MAX, // not reached: 1 << 63 is not zero (a constant)
};
/// A packed pair's first byte when there is no pair (no state's
/// [`State::to_bits`] is).
const NO_PAIR: u64 = 0xFF;

/// `from` in bits 0..8 and `to` in bits 8..16 (their status-word bits,
/// [`State::to_bits`]), or [`NO_PAIR`].
fn pack(pair: Option<(State, State)>) -> u64 {
    match pair {
        Some((from, to)) => from.to_bits() | to.to_bits() << 8,
        None => NO_PAIR,
    }
}

/// Whether the low 16 bits of `bits` hold a pair.
fn holds_pair(bits: u64) -> bool {
    bits & 0xFF != NO_PAIR
}

fn unpack(bits: u64) -> Option<(State, State)> {
    holds_pair(bits).then(|| (State::from_bits(bits), State::from_bits(bits >> 8)))
}

impl Effects {
    /// The effects of a change at `generation`: the local machine's
    /// transition (timer, shared trip) and the effective states before and
    /// after, if they differ (R13.5).
    pub(super) fn new(
        local: Option<Transition>,
        effective: Option<(State, State)>,
        generation: u64,
    ) -> Self {
        let local = pack(local.map(|t| (t.from, t.to)));
        Effects {
            generation,
            changes: CHANGED_MARK | (local | pack(effective) << 16),
        }
    }

    /// The local machine's transition.
    pub(crate) fn local(self) -> Option<Transition> {
        unpack(self.changes.get()).map(|(from, to)| Transition { from, to })
    }

    /// The effective state before and after, if it changed.
    pub(crate) fn effective(self) -> Option<(State, State)> {
        unpack(self.changes.get() >> 16)
    }

    /// Whether anything changed (a transition of either kind).
    fn any(self) -> bool {
        let changes = self.changes.get();
        holds_pair(changes) || holds_pair(changes >> 16)
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

impl Inner {
    /// Acts on a change after the lock is released: the state-change event,
    /// the timer (R12), and the shared trip of a coordinated breaker (R15.4).
    #[inline]
    pub(crate) fn after(&self, effects: Effects) {
        if effects.any() {
            self.after_change(effects, None);
        }
    }

    /// [`after`](Self::after) for a settled call whose leased probe's
    /// outcome is still to be queued: after the events, before the trip it
    /// caused (R15.4).
    pub(super) fn after_settled(&self, effects: Effects, probe: Option<Write>) {
        if effects.any() {
            self.after_change(effects, probe);
        } else if let Some(probe) = probe {
            self.enqueue(probe);
        }
    }

    pub(super) fn after_change(&self, effects: Effects, probe: Option<Write>) {
        // The timer first, so that listeners (however slow) never delay it.
        let local = effects.local();
        if let Some(t) = local {
            if t.from == State::Open {
                self.cancel_timer(effects.generation);
            }
            if t.to == State::Open && self.config.auto_transition() {
                if let Some(wait) = self.open_wait_of(effects.generation) {
                    self.arm_timer(effects.generation, wait);
                }
            }
        }
        if let Some((from, to)) = effects.effective() {
            self.emit(&Event::state_changed(self.name(), from, to));
        }
        if let Some(probe) = probe {
            self.enqueue(probe);
        }
        if let Some(t) = local {
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

    /// The OPEN wait of `generation` (R12.1: the timer's delay), if the
    /// machine is still in that generation; `None` once a later change
    /// moved it on (that change cancels or arms the timer itself, R12.3).
    pub(super) fn open_wait_of(&self, generation: u64) -> Option<Duration> {
        let core = self.core();
        (core.machine.generation() == generation).then(|| core.machine.open_wait())
    }

    /// Arms the timer of the OPEN period of `generation` (R12.1), replacing
    /// the timer of an older period, never that of a newer one.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_give_back_every_transition_and_generation_they_were_made_with() {
        let pairs = std::iter::once(None).chain(
            State::ALL
                .iter()
                .flat_map(|&from| State::ALL.iter().map(move |&to| Some((from, to)))),
        );
        let pairs: Vec<_> = pairs.collect();
        for &local in &pairs {
            for &effective in &pairs {
                for generation in [0, 1, u64::MAX] {
                    let t = local.map(|(from, to)| Transition { from, to });
                    let e = Effects::new(t, effective, generation);
                    assert_eq!(e.local(), t);
                    assert_eq!(e.effective(), effective);
                    assert_eq!(e.generation, generation);
                    assert_eq!(e.any(), local.is_some() || effective.is_some());
                }
            }
        }
    }
}
