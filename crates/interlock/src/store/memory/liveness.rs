//! The two liveness operations of [`MemoryStorage`] (issue 21): ending a
//! stalled HALF_OPEN round (R16.13) and restoring a record whose history
//! went backwards (R16.14).

use std::time::Duration;

use crate::clock::Timestamp;
use crate::state::State;
use crate::store::SharedState;

use super::{MemoryStorage, Op};

impl MemoryStorage {
    /// Ends a stalled HALF_OPEN round (R16.13): if `name` is still at
    /// `expected_version`, HALF_OPEN with no probe slot left, a fresh round
    /// of `permitted` probes begins (version + 1, tallies cleared,
    /// `opened_at` kept); otherwise nothing changes, not even the TTL.
    ///
    /// ```
    /// use interlock::storage::MemoryStorage;
    /// use interlock::State;
    /// use std::time::Duration;
    ///
    /// let storage = MemoryStorage::new();
    /// let ttl = Duration::from_secs(60);
    /// storage.trip_open("db", ttl, None);
    /// storage.begin_half_open_if_elapsed("db", Duration::ZERO, 1, ttl);
    /// let spent = storage.lease_probe("db", ttl).state; // v3, no slot left
    /// // ... the probe's outcome is never written ...
    /// let fresh = storage.restart_stalled_round("db", spent.version, 1, ttl);
    /// assert_eq!((fresh.state, fresh.version, fresh.probes_remaining), (State::HalfOpen, 4, 1));
    /// // A second restart fenced on the old version changes nothing.
    /// assert_eq!(storage.restart_stalled_round("db", spent.version, 1, ttl), fresh);
    /// ```
    pub fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> SharedState {
        self.inner.ops.count(Op::Restart);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if current.version != expected_version || !current.no_slot_left() {
            return current;
        }
        let fresh = SharedState {
            state: State::HalfOpen,
            opened_at: current.opened_at,
            version: SharedState::next_version(current.version),
            probes_permitted: permitted,
            probes_remaining: permitted,
            ..SharedState::closed()
        };
        keys.write(name, fresh, now, ttl);
        drop(keys);
        self.notify(name, fresh.version);
        fresh
    }

    /// Writes `state` over `name` if it is still at `expected_version`
    /// (R16.14), at version `max(expected_version, state.version) + 1`,
    /// with `opened_at` clamped to the storage's now (zero when CLOSED);
    /// otherwise nothing changes. Returns the state after.
    ///
    /// ```
    /// use interlock::storage::{MemoryStorage, SharedState};
    /// use interlock::{ManualClock, State, Timestamp};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::starting_at(Timestamp::from_secs(100));
    /// let storage = MemoryStorage::builder().clock(clock).build();
    /// let ttl = Duration::from_secs(60);
    /// // The storage lost its history (say, restarted empty) while a
    /// // coordinator knew OPEN v7: it writes that back, above v7.
    /// let known = SharedState { state: State::Open, version: 7, opened_at: Timestamp::from_secs(90), ..SharedState::closed() };
    /// let repaired = storage.restore("db", 0, known, ttl);
    /// assert_eq!((repaired.state, repaired.version), (State::Open, 8));
    /// assert_eq!(repaired.opened_at, Timestamp::from_secs(90));
    /// // "Open now": an opened_at in the future is clamped to the clock.
    /// let now = SharedState { opened_at: Timestamp::from_nanos(u64::MAX), ..known };
    /// assert_eq!(storage.restore("db", 8, now, ttl).opened_at, Timestamp::from_secs(100));
    /// // Fenced: a stale expected version writes nothing.
    /// assert_eq!(storage.restore("db", 0, SharedState::closed(), ttl).version, 9);
    /// ```
    pub fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> SharedState {
        self.inner.ops.count(Op::Restore);
        let now = self.inner.clock.now();
        let mut keys = self.keys();
        let current = keys.current(name, now);
        if current.version != expected_version {
            return current;
        }
        let restored = restored(state, expected_version, now);
        keys.write(name, restored, now, ttl);
        drop(keys);
        self.notify(name, restored.version);
        restored
    }
}

/// What [`MemoryStorage::restore`] writes for `state` over a record at
/// `expected_version`, at `now` (R16.14).
pub(super) fn restored(state: SharedState, expected_version: u64, now: Timestamp) -> SharedState {
    SharedState {
        version: SharedState::next_version(expected_version.max(state.version)),
        opened_at: if state.state == State::Closed {
            Timestamp::ZERO
        } else {
            state.opened_at.min(now)
        },
        ..state
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::clock::Clock;

    const TTL: Duration = Duration::from_secs(100);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// A clock that can be stepped back, like a server's after an NTP step.
    #[derive(Debug, Default)]
    struct Stepped(std::sync::atomic::AtomicU64);

    impl Clock for Stepped {
        fn now(&self) -> Timestamp {
            Timestamp::from_nanos(self.0.load(Ordering::SeqCst))
        }
    }

    #[test]
    fn r16_3a_an_open_that_began_in_the_future_is_clamped_by_the_next_begin() {
        let clock = Arc::new(Stepped::default());
        clock.0.store(1_000_000_000_000, Ordering::SeqCst);
        let s = MemoryStorage::builder().clock(clock.clone()).build();
        let open = s.trip_open("db", TTL, None);
        clock.0.store(400_000_000_000, Ordering::SeqCst); // stepped back 600 s
        let clamped = s.begin_half_open_if_elapsed("db", secs(10), 1, TTL);
        assert_eq!(
            (clamped.state, clamped.version, clamped.opened_at),
            (State::Open, open.version + 1, Timestamp::from_secs(400)),
            "clamped to the storage's now, as an applied write"
        );
        // The wait now ends `wait` after the clamp, not 600 s later.
        clock.0.store(409_999_999_999, Ordering::SeqCst);
        assert_eq!(
            s.begin_half_open_if_elapsed("db", secs(10), 1, TTL),
            clamped
        );
        clock.0.store(410_000_000_000, Ordering::SeqCst);
        let half = s.begin_half_open_if_elapsed("db", secs(10), 1, TTL);
        assert_eq!(
            (half.state, half.version),
            (State::HalfOpen, open.version + 2)
        );
        // With no wait at all the clamp and the begin are one write.
        let t = s.trip_open("x", TTL, None);
        clock.0.store(1, Ordering::SeqCst);
        let x = s.begin_half_open_if_elapsed("x", Duration::ZERO, 1, TTL);
        assert_eq!(
            (x.state, x.version, x.opened_at),
            (State::HalfOpen, t.version + 1, Timestamp::from_nanos(1))
        );
    }
}
