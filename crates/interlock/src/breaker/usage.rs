//! [`Usage`]: when one of a registry's breakers was last used, kept in the
//! breaker itself so that a call and a registry hit can both mark it
//! without a lock.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{ClockHandle, Timestamp};

/// The `mask` of a breaker whose use nobody tracks.
const UNTRACKED: u64 = u64::MAX;

/// On [`MonotonicClock`](crate::MonotonicClock) every reading differs, so a
/// use is stored rounded up to the end of its 2^20 ns (about 1 ms) granule:
/// at most one store per millisecond per breaker, however many calls.
const MONOTONIC_GRANULE_MASK: u64 = (1 << 20) - 1;

/// A breaker's last use.
///
/// Untracked (the breaker is not in a registry that expires or bounds its
/// breakers) it costs a call one load and one comparison.
#[derive(Debug)]
pub(crate) struct Usage {
    /// When the breaker was last handed out or called (nanoseconds on its
    /// registry's clock, rounded up to the end of its granule): never
    /// earlier than the true last use, so a breaker is never taken for
    /// idle too soon.
    last: AtomicU64,
    /// [`UNTRACKED`], or the granule mask ored into each stamp.
    mask: AtomicU64,
}

impl Usage {
    /// Untracked.
    pub(crate) fn new() -> Self {
        Usage {
            last: AtomicU64::new(0),
            mask: AtomicU64::new(UNTRACKED),
        }
    }

    /// Starts tracking, used at `now`, for a breaker reading `clock`.
    /// Called by the registry before the breaker is handed out.
    pub(crate) fn track(&self, clock: &ClockHandle, now: Timestamp) {
        let mask = match clock {
            ClockHandle::Monotonic | ClockHandle::Auto => MONOTONIC_GRANULE_MASK,
            _ => 0,
        };
        self.last.store(now.as_nanos() | mask, Ordering::Relaxed);
        self.mask.store(mask, Ordering::Relaxed);
    }

    /// Marks a use at `now`, if tracked.
    #[inline]
    pub(crate) fn touch(&self, now: Timestamp) {
        let mask = self.mask.load(Ordering::Relaxed);
        if mask != UNTRACKED {
            self.touch_tracked(now.as_nanos() | mask);
        }
    }

    /// Marks a use now on `clock`, if tracked (a rejection, which may not
    /// have read the clock).
    #[inline]
    pub(crate) fn touch_on(&self, clock: &ClockHandle) {
        if self.mask.load(Ordering::Relaxed) != UNTRACKED {
            self.touch_now(clock);
        }
    }

    #[cold]
    #[inline(never)]
    fn touch_now(&self, clock: &ClockHandle) {
        self.touch(clock.now());
    }

    /// A store only when the stamp moves forward (once per tick of a
    /// coarse clock at most), so calls on many threads do not keep
    /// writing the same cache line.
    #[inline]
    fn touch_tracked(&self, at: u64) {
        if self.last.load(Ordering::Relaxed) < at {
            self.last.fetch_max(at, Ordering::Relaxed);
        }
    }

    /// Whether the registry tracks this breaker's use.
    #[cfg(test)]
    pub(crate) fn is_tracked(&self) -> bool {
        self.mask.load(Ordering::Relaxed) != UNTRACKED
    }

    /// The last use, in nanoseconds (see [`Usage::last`]).
    pub(crate) fn last(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untracked_ignores_uses_tracked_keeps_the_latest() {
        let usage = Usage::new();
        usage.touch(Timestamp::from_secs(5));
        assert!(!usage.is_tracked());
        assert_eq!(usage.last(), 0);
        usage.track(
            &ClockHandle::Manual(crate::ManualClock::new()),
            Timestamp::from_secs(1),
        );
        assert_eq!(usage.last(), 1_000_000_000);
        usage.touch(Timestamp::from_secs(3));
        usage.touch(Timestamp::from_secs(2)); // a reading from another thread, older
        assert_eq!(usage.last(), 3_000_000_000);
    }

    #[test]
    fn a_precise_clock_stamps_the_end_of_its_granule() {
        let usage = Usage::new();
        usage.track(&ClockHandle::Monotonic, Timestamp::from_nanos(5));
        assert_eq!(usage.last(), MONOTONIC_GRANULE_MASK);
        // Never earlier than the use itself.
        usage.touch(Timestamp::from_nanos(MONOTONIC_GRANULE_MASK + 7));
        assert!(usage.last() >= MONOTONIC_GRANULE_MASK + 7);
        assert_eq!(usage.last(), 2 * MONOTONIC_GRANULE_MASK + 1);
    }
}
