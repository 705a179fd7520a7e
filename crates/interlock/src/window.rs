//! Sliding windows: where CLOSED outcomes are counted.
//!
//! Both windows keep running totals, so recording an outcome and taking a
//! [`Snapshot`] cost O(1) whatever the traffic (a time-based window pays
//! one bucket reset per elapsed second, never per call).

use std::fmt;

use crate::clock::Timestamp;
use crate::state::Outcome;

/// The totals of a sliding window at one instant.
///
/// ```
/// use interlock::Snapshot;
///
/// let s = Snapshot { total_calls: 10, failed_calls: 3, slow_calls: 0 };
/// assert_eq!(s.failure_rate(), 0.3);
/// assert_eq!(Snapshot::default().failure_rate(), 0.0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Snapshot {
    /// Calls in the window.
    pub total_calls: u64,
    /// Calls classified as failures (slow or not).
    pub failed_calls: u64,
    /// Calls that took at least `slow_call_duration_threshold` (failed or not).
    pub slow_calls: u64,
}

impl Snapshot {
    /// `failed_calls / total_calls`, or `0.0` for an empty window.
    #[must_use]
    pub fn failure_rate(&self) -> f64 {
        rate(self.failed_calls, self.total_calls)
    }

    /// `slow_calls / total_calls`, or `0.0` for an empty window.
    #[must_use]
    pub fn slow_call_rate(&self) -> f64 {
        rate(self.slow_calls, self.total_calls)
    }
}

pub(crate) fn rate(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 / total as f64
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "total_calls={} failed_calls={} slow_calls={}",
            self.total_calls, self.failed_calls, self.slow_calls
        )
    }
}

const FAILED: u8 = 1;
const SLOW: u8 = 2;

fn bits(outcome: Outcome) -> u8 {
    (u8::from(outcome.is_failure()) * FAILED) | (u8::from(outcome.is_slow()) * SLOW)
}

/// The last `size` outcomes, in a ring (R5.1).
#[derive(Clone, Debug)]
pub(crate) struct CountWindow {
    ring: Box<[u8]>,
    next: usize,
    len: usize,
    failed: u64,
    slow: u64,
}

impl CountWindow {
    pub(crate) fn new(size: u32) -> Self {
        let size = (size as usize).max(1);
        CountWindow {
            ring: vec![0; size].into_boxed_slice(),
            next: 0,
            len: 0,
            failed: 0,
            slow: 0,
        }
    }

    #[inline]
    fn record(&mut self, outcome: Outcome) {
        let new = bits(outcome);
        let full = self.len == self.ring.len();
        let slot = &mut self.ring[self.next];
        if full {
            self.failed -= u64::from(*slot & FAILED);
            self.slow -= u64::from((*slot & SLOW) >> 1);
        } else {
            self.len += 1;
        }
        *slot = new;
        self.failed += u64::from(new & FAILED);
        self.slow += u64::from((new & SLOW) >> 1);
        self.next += 1;
        if self.next == self.ring.len() {
            self.next = 0;
        }
    }

    #[inline]
    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            total_calls: self.len as u64,
            failed_calls: self.failed,
            slow_calls: self.slow,
        }
    }

    /// Holds `size` outcomes, none failed or slow: recording a success
    /// then leaves the window as it was.
    #[inline]
    pub(crate) fn full_of_successes(&self) -> bool {
        self.len == self.ring.len() && self.failed == 0 && self.slow == 0
    }

    /// How many outcomes the window holds once full.
    pub(crate) fn capacity(&self) -> u64 {
        self.ring.len() as u64
    }

    /// How many plain successes from now on would leave the window full of
    /// successes ([`full_of_successes`](Self::full_of_successes)): enough to
    /// fill it, and to push out its newest failed or slow slot. O(distance
    /// back to that slot), usually one step (the newest slot is the failure
    /// just recorded).
    pub(crate) fn successes_to_clean(&self) -> u64 {
        let size = self.ring.len();
        let to_fill = size - self.len;
        // The newest slots first: `next - 1`, `next - 2`, ... of the `len`
        // recorded ones.
        let newest_dirty =
            (1..=self.len).find(|&back| self.ring[(self.next + size - back) % size] != 0);
        let evict = newest_dirty.map_or(0, |back| self.len - back + 1);
        (to_fill + evict) as u64
    }

    /// `n` plain successes, as if recorded one by one, in O(min(n, size))
    /// byte operations that vectorize: every slot from the cursor on is
    /// overwritten with a success, and what the overwritten slots held is
    /// subtracted (slots past `len` hold nothing: [`clear`](Self::clear)
    /// zeroes the ring).
    fn record_successes(&mut self, n: u64) {
        let size = self.ring.len();
        let mut left = usize::try_from(n).unwrap_or(usize::MAX).min(size);
        self.len = self.len.saturating_add(left).min(size);
        while left > 0 {
            let run = left.min(size - self.next);
            let slots = &mut self.ring[self.next..self.next + run];
            let (failed, slow) = slots.iter().fold((0u64, 0u64), |(f, s), &b| {
                (f + u64::from(b & FAILED), s + u64::from(b >> 1))
            });
            slots.fill(0);
            self.failed -= failed;
            self.slow -= slow;
            self.next = (self.next + run) % size;
            left -= run;
        }
    }

    fn clear(&mut self) {
        self.ring.fill(0);
        self.next = 0;
        self.len = 0;
        self.failed = 0;
        self.slow = 0;
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    total: u32,
    failed: u32,
    slow: u32,
}

/// One bucket per whole second of the last `size` seconds (R5.2).
///
/// Bucket `s % size` holds second `s`. The window covers seconds
/// `[head - size + 1, head]` where `head` is the latest second seen; moving
/// `head` forward subtracts and empties the buckets that fall out.
#[derive(Clone, Debug)]
pub(crate) struct TimeWindow {
    buckets: Box<[Bucket]>,
    head: u64,
    totals: Snapshot,
}

impl TimeWindow {
    pub(crate) fn new(size_secs: u32) -> Self {
        let size = (size_secs as usize).max(1);
        TimeWindow {
            buckets: vec![Bucket::default(); size].into_boxed_slice(),
            head: 0,
            totals: Snapshot::default(),
        }
    }

    fn size(&self) -> u64 {
        self.buckets.len() as u64
    }

    fn advance(&mut self, now: Timestamp) {
        let sec = now.as_secs();
        if sec <= self.head {
            return;
        }
        let gap = sec - self.head;
        if gap >= self.size() {
            self.buckets.fill(Bucket::default());
            self.totals = Snapshot::default();
        } else {
            for s in self.head + 1..=sec {
                let i = (s % self.size()) as usize;
                let b = std::mem::take(&mut self.buckets[i]);
                self.totals.total_calls -= u64::from(b.total);
                self.totals.failed_calls -= u64::from(b.failed);
                self.totals.slow_calls -= u64::from(b.slow);
            }
        }
        self.head = sec;
    }

    fn record(&mut self, now: Timestamp, outcome: Outcome) {
        self.advance(now);
        // A clock that went backwards (it must not) is clamped to the head.
        let i = (self.head % self.size()) as usize;
        let b = &mut self.buckets[i];
        let (failed, slow) = (
            u32::from(outcome.is_failure()),
            u32::from(outcome.is_slow()),
        );
        b.total = b.total.saturating_add(1);
        b.failed = b.failed.saturating_add(failed);
        b.slow = b.slow.saturating_add(slow);
        self.totals.total_calls += 1;
        self.totals.failed_calls += u64::from(failed);
        self.totals.slow_calls += u64::from(slow);
    }

    fn snapshot(&mut self, now: Timestamp) -> Snapshot {
        self.advance(now);
        self.totals
    }

    /// The latest second seen: calls of this second (or, clamped, earlier)
    /// land in its bucket without moving the window.
    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// The totals as of [`head`](Self::head), without moving the window.
    pub(crate) fn totals(&self) -> Snapshot {
        self.totals
    }

    /// `n` plain successes in the head second's bucket, as `n` records at a
    /// time of that second would leave it.
    fn record_successes(&mut self, n: u64) {
        let i = (self.head % self.size()) as usize;
        let b = &mut self.buckets[i];
        b.total = b.total.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        self.totals.total_calls += n;
    }

    fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.totals = Snapshot::default();
    }
}

/// Either window, chosen by the config.
#[derive(Clone, Debug)]
pub(crate) enum Window {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Window {
    #[inline]
    pub(crate) fn record(&mut self, now: Timestamp, outcome: Outcome) {
        match self {
            Window::Count(w) => w.record(outcome),
            Window::Time(w) => w.record(now, outcome),
        }
    }

    #[inline]
    pub(crate) fn snapshot(&mut self, now: Timestamp) -> Snapshot {
        match self {
            Window::Count(w) => w.snapshot(),
            Window::Time(w) => w.snapshot(now),
        }
    }

    pub(crate) fn clear(&mut self) {
        match self {
            Window::Count(w) => w.clear(),
            Window::Time(w) => w.clear(),
        }
    }

    /// For a count window, how many plain successes would leave it full of
    /// successes; `u64::MAX` for a time window (never).
    pub(crate) fn successes_to_clean(&self) -> u64 {
        match self {
            Window::Count(w) => w.successes_to_clean(),
            Window::Time(_) => u64::MAX,
        }
    }

    /// `n` plain successes: in a count window as `n` records; in a time
    /// window in the head second's bucket, without moving the window.
    pub(crate) fn record_successes(&mut self, n: u64) {
        match self {
            Window::Count(w) => w.record_successes(n),
            Window::Time(w) => w.record_successes(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    fn t(secs: f64) -> Timestamp {
        Timestamp::from_nanos((secs * 1e9) as u64)
    }

    #[test]
    fn r5_1_count_window_evicts_the_oldest_once_full() {
        let mut w = CountWindow::new(3);
        for o in [Failure, SlowSuccess, Success] {
            w.record(o);
        }
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 3,
                failed_calls: 1,
                slow_calls: 1
            }
        );
        w.record(Success); // evicts Failure
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 3,
                failed_calls: 0,
                slow_calls: 1
            }
        );
        w.record(SlowFailure); // evicts SlowSuccess
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 3,
                failed_calls: 1,
                slow_calls: 1
            }
        );
        w.record(Success);
        w.record(Success); // evicts a Success: the SlowFailure is still inside
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 3,
                failed_calls: 1,
                slow_calls: 1
            }
        );
        w.record(Success);
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 3,
                failed_calls: 0,
                slow_calls: 0
            }
        );
        w.clear();
        assert_eq!(w.snapshot(), Snapshot::default());
        w.record(Failure);
        assert_eq!(
            w.snapshot(),
            Snapshot {
                total_calls: 1,
                failed_calls: 1,
                slow_calls: 0
            }
        );
    }

    #[test]
    fn r5_2_time_window_keeps_whole_second_buckets() {
        // A call at t=0.9 with size 10 is counted at t=9.99 and gone at t=10.0.
        let mut w = TimeWindow::new(10);
        w.record(t(0.9), Failure);
        assert_eq!(w.snapshot(t(9.99)).total_calls, 1);
        assert_eq!(w.snapshot(t(10.0)).total_calls, 0);
    }

    #[test]
    fn r5_2_time_window_drains_by_time_alone_and_survives_large_jumps() {
        let mut w = TimeWindow::new(3);
        w.record(t(0.0), Failure);
        w.record(t(1.5), SlowSuccess);
        w.record(t(2.2), Success);
        assert_eq!(
            w.snapshot(t(2.9)),
            Snapshot {
                total_calls: 3,
                failed_calls: 1,
                slow_calls: 1
            }
        );
        assert_eq!(
            w.snapshot(t(3.0)),
            Snapshot {
                total_calls: 2,
                failed_calls: 0,
                slow_calls: 1
            }
        );
        assert_eq!(
            w.snapshot(t(4.0)),
            Snapshot {
                total_calls: 1,
                failed_calls: 0,
                slow_calls: 0
            }
        );
        w.record(t(4.1), Failure);
        // A jump far past the window never resurfaces old buckets.
        assert_eq!(w.snapshot(t(1000.0)), Snapshot::default());
        w.record(t(1000.5), Failure);
        assert_eq!(w.snapshot(t(1001.0)).failed_calls, 1);
        w.clear();
        assert_eq!(w.snapshot(t(1001.0)), Snapshot::default());
    }

    #[test]
    fn time_window_many_calls_in_one_second() {
        let mut w = TimeWindow::new(2);
        for i in 0..10_000u64 {
            w.record(
                Timestamp::from_nanos(i),
                if i % 2 == 0 { Failure } else { Success },
            );
        }
        let s = w.snapshot(t(1.0));
        assert_eq!((s.total_calls, s.failed_calls), (10_000, 5_000));
        assert_eq!(s.failure_rate(), 0.5);
        assert_eq!(w.snapshot(t(2.0)), Snapshot::default());
    }

    #[test]
    fn r5_1_successes_in_bulk_leave_a_count_window_as_one_by_one() {
        let outcomes = [Failure, SlowSuccess, Success, SlowFailure, Failure];
        for n in 0..12 {
            for prefix in 0..=outcomes.len() {
                let mut bulk = CountWindow::new(4);
                for &o in &outcomes[..prefix] {
                    bulk.record(o);
                }
                let mut single = bulk.clone();
                bulk.record_successes(n);
                for _ in 0..n {
                    single.record(Success);
                }
                assert_eq!(bulk.snapshot(), single.snapshot(), "n={n} prefix={prefix}");
                // And they keep agreeing afterwards (the cursor is equivalent).
                for &o in &outcomes {
                    bulk.record(o);
                    single.record(o);
                    assert_eq!(bulk.snapshot(), single.snapshot(), "n={n} prefix={prefix}");
                }
            }
        }
    }

    #[test]
    fn r5_1_successes_to_clean_is_exactly_what_makes_the_window_full_of_successes() {
        let outcomes = [Failure, Success, SlowSuccess, Success, Success, SlowFailure];
        for mask in 0..(1u32 << 7) {
            let mut w = CountWindow::new(4);
            for (i, &o) in outcomes.iter().cycle().take(7).enumerate() {
                if mask & (1 << i) != 0 {
                    w.record(o);
                }
            }
            let n = w.successes_to_clean();
            let mut probe = w.clone();
            for k in 0..n {
                assert!(
                    !probe.full_of_successes(),
                    "mask {mask}: clean after {k} < {n}"
                );
                probe.record(Success);
            }
            assert!(
                probe.full_of_successes(),
                "mask {mask}: not clean after {n}"
            );
        }
    }

    #[test]
    fn r5_2_successes_in_bulk_land_in_the_head_bucket() {
        let mut w = TimeWindow::new(3);
        w.record(t(5.5), Failure);
        w.record_successes(4);
        assert_eq!(w.head(), 5);
        assert_eq!(
            w.totals(),
            Snapshot {
                total_calls: 5,
                failed_calls: 1,
                slow_calls: 0
            }
        );
        assert_eq!(w.snapshot(t(7.9)).total_calls, 5);
        assert_eq!(
            w.snapshot(t(8.0)),
            Snapshot::default(),
            "drained with second 5"
        );
    }

    #[test]
    fn r1_3_rates_are_plain_divisions_and_zero_when_empty() {
        let s = Snapshot {
            total_calls: 10,
            failed_calls: 3,
            slow_calls: 10,
        };
        assert_eq!(s.failure_rate(), 0.3);
        assert_eq!(s.slow_call_rate(), 1.0);
        assert_eq!(Snapshot::default().slow_call_rate(), 0.0);
        assert_eq!(s.to_string(), "total_calls=10 failed_calls=3 slow_calls=10");
    }
}
