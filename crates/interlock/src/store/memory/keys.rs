//! The keys of a [`MemoryStorage`](super::MemoryStorage): each breaker's
//! record with its expiry and the epoch of its last change, and the sweep
//! that forgets expired ones.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::store::{Epoch, SharedState};

/// The smallest key count at which an insert sweeps expired keys.
pub(super) const MIN_SWEEP: usize = 64;

/// A stored key: the state, the instant it expires on the storage clock,
/// and the epoch of its last change (R16.15).
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) state: SharedState,
    pub(super) expires_at: Timestamp,
    pub(super) changed: u64,
}

impl Entry {
    /// Whether the entry changed after `since`: written after it, or
    /// expired after it (it was live at `since.at` and is not at `now`).
    pub(super) fn changed_since(&self, since: &Epoch, now: Timestamp) -> bool {
        self.changed > since.counter || (self.expires_at > since.at && self.expires_at <= now)
    }

    /// Whether the entry's current record was written after `since` and is
    /// live at `now`: the storage can vouch for its version (R16.15).
    pub(super) fn written_since(&self, since: &Epoch, now: Timestamp) -> bool {
        self.changed > since.counter && now < self.expires_at
    }
}

/// Tells the histories of different storages apart (the `mark` of their
/// epochs).
static HISTORIES: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(super) struct Keys {
    /// Expired entries stay (reading as absent) until a sweep, so a change
    /// poll can tell that they expired.
    pub(super) entries: HashMap<Box<str>, Entry>,
    /// The next insert that finds at least this many keys sweeps the
    /// expired ones, so abandoned names cannot grow the map for ever.
    pub(super) sweep_at: usize,
    /// Applied changes so far (R16.15).
    pub(super) epoch: u64,
    /// This storage's history, for [`Epoch::mark`].
    pub(super) history: u64,
    /// The latest expiry a sweep forgot: a change poll from before it
    /// cannot be answered from the entries, and reads everything.
    pub(super) swept_upto: Timestamp,
}

impl Keys {
    pub(super) fn new() -> Self {
        Keys {
            entries: HashMap::new(),
            sweep_at: MIN_SWEEP,
            epoch: 0,
            history: HISTORIES.fetch_add(1, Ordering::Relaxed),
            swept_upto: Timestamp::ZERO,
        }
    }

    /// The live entry for `name`: `None` if absent or expired.
    pub(super) fn live(&mut self, name: &str, now: Timestamp) -> Option<&mut Entry> {
        self.entries.get_mut(name).filter(|e| now < e.expires_at)
    }

    /// The epoch as of now.
    pub(super) fn epoch(&self, now: Timestamp) -> Epoch {
        Epoch {
            counter: self.epoch,
            mark: self.history,
            at: now,
        }
    }

    /// Whether `since` can be answered from the entries: an epoch of this
    /// history, not from its future, and after the last sweep's expiries.
    pub(super) fn knows(&self, since: &Epoch, now: Timestamp) -> bool {
        since.mark == self.history
            && since.counter <= self.epoch
            && since.at <= now
            && since.at >= self.swept_upto
    }

    /// The current state of `name`: absent or expired is `closed()`.
    pub(super) fn current(&mut self, name: &str, now: Timestamp) -> SharedState {
        self.live(name, now)
            .map_or(SharedState::closed(), |e| e.state)
    }

    /// Writes `state` under `name`, expiring `ttl` from `now`.
    ///
    /// A write that changes the record (or creates it, or rewrites an
    /// expired one) bumps the epoch; one that only refreshes the TTL of an
    /// unchanged live record (an idempotent trip) does not.
    pub(super) fn write(&mut self, name: &str, state: SharedState, now: Timestamp, ttl: Duration) {
        let expires_at = now.saturating_add(ttl);
        if let Some(e) = self.entries.get_mut(name) {
            if e.state != state || now >= e.expires_at {
                self.epoch = self.epoch.saturating_add(1);
                e.changed = self.epoch;
            }
            e.state = state;
            e.expires_at = expires_at;
            return;
        }
        if self.entries.len() >= self.sweep_at {
            let mut forgot = self.swept_upto;
            self.entries.retain(|_, e| {
                let keep = now < e.expires_at;
                if !keep {
                    forgot = forgot.max(e.expires_at);
                }
                keep
            });
            self.swept_upto = forgot;
            self.sweep_at = MIN_SWEEP.max(self.entries.len().saturating_mul(2));
        }
        self.epoch = self.epoch.saturating_add(1);
        let changed = self.epoch;
        self.entries.insert(
            name.into(),
            Entry {
                state,
                expires_at,
                changed,
            },
        );
    }
}
