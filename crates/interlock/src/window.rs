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
    // A part of zero is a rate of exactly zero: no conversion, no division
    // (a window without slow calls asks this on every record).
    if total == 0 || part == 0 {
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

/// 64 slots of a count window: a bit per slot for failed, one for slow.
#[derive(Clone, Copy, Debug, Default)]
struct Slots {
    failed: u64,
    slow: u64,
}

/// The bits of `run` slots from bit `from` of a word (`from + run <= 64`).
#[inline]
fn span(from: usize, run: usize) -> u64 {
    let ones = if run >= 64 { u64::MAX } else { (1 << run) - 1 };
    ones << from
}

/// Words a count window keeps inline: windows of up to 128 outcomes (the
/// default 100 among them).
const INLINE_WORDS: usize = 2;

/// A count window's words: inline for small windows, so that recording a
/// failure writes no cache line besides the machine's own (with two
/// threads failing, each line the lock holder writes is one the next
/// holder has to fetch from the other core); on the heap beyond.
#[derive(Clone, Debug)]
enum Words {
    Inline([Slots; INLINE_WORDS]),
    Heap(Box<[Slots]>),
}

impl Words {
    /// Room for `n` words, all clear.
    fn new(n: usize) -> Self {
        if n <= INLINE_WORDS {
            Words::Inline([Slots::default(); INLINE_WORDS])
        } else {
            Words::Heap(vec![Slots::default(); n].into_boxed_slice())
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [Slots];

    #[inline]
    fn deref(&self) -> &[Slots] {
        match self {
            Words::Inline(words) => words,
            Words::Heap(words) => words,
        }
    }
}

impl std::ops::DerefMut for Words {
    #[inline]
    fn deref_mut(&mut self) -> &mut [Slots] {
        match self {
            Words::Inline(words) => words,
            Words::Heap(words) => words,
        }
    }
}

/// The last `size` outcomes, in a ring (R5.1): two bits per slot, so that
/// a run of successes clears a word's worth of slots at a time and the
/// newest failed or slow slot is a leading-zero count away.
#[derive(Clone, Debug)]
pub(crate) struct CountWindow {
    words: Words,
    size: usize,
    next: usize,
    len: usize,
    failed: u64,
    slow: u64,
}

impl CountWindow {
    pub(crate) fn new(size: u32) -> Self {
        let size = (size as usize).max(1);
        CountWindow {
            words: Words::new(size.div_ceil(64)),
            size,
            next: 0,
            len: 0,
            failed: 0,
            slow: 0,
        }
    }

    #[inline]
    fn record(&mut self, outcome: Outcome) {
        let (failed, slow) = (outcome.is_failure(), outcome.is_slow());
        let bit = self.next % 64;
        let Some(word) = self.words.get_mut(self.next / 64) else {
            return; // `next < size` always: the slot exists
        };
        // Slots past `len` hold nothing ([`clear`](Self::clear) zeroes
        // them), so what is evicted there is zero.
        self.failed -= (word.failed >> bit) & 1;
        self.slow -= (word.slow >> bit) & 1;
        word.failed = (word.failed & !(1 << bit)) | (u64::from(failed) << bit);
        word.slow = (word.slow & !(1 << bit)) | (u64::from(slow) << bit);
        self.failed += u64::from(failed);
        self.slow += u64::from(slow);
        self.len += usize::from(self.len < self.size);
        self.next += 1;
        if self.next == self.size {
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
        self.len == self.size && self.failed == 0 && self.slow == 0
    }

    /// How many outcomes the window holds once full.
    pub(crate) fn capacity(&self) -> u64 {
        self.size as u64
    }

    /// How many plain successes from now on would leave the window full of
    /// successes ([`full_of_successes`](Self::full_of_successes)): enough to
    /// fill it, and to push out its newest failed or slow slot. A word at a
    /// time back from the cursor, usually one (the newest slot is the
    /// failure just recorded).
    pub(crate) fn successes_to_clean(&self) -> u64 {
        let to_fill = self.size - self.len;
        if self.failed == 0 && self.slow == 0 {
            return to_fill as u64;
        }
        // The usual case: the newest slot is the failure just recorded, so
        // every recorded slot has to be pushed out.
        let newest = self.next.checked_sub(1).unwrap_or(self.size - 1);
        if self
            .words
            .get(newest / 64)
            .is_some_and(|w| (w.failed | w.slow) >> (newest % 64) & 1 != 0)
        {
            return (to_fill + self.len) as u64;
        }
        // The recorded slots, newest first: `next - 1` down to 0, then (once
        // the ring has turned, `len == size`) `size - 1` down to `next`.
        let back = match self.newest_dirty(0, self.next) {
            Some(slot) => self.next - slot,
            None if self.len == self.size => self
                .newest_dirty(self.next, self.size)
                .map_or(0, |slot| self.next + self.size - slot),
            None => 0,
        };
        let evict = if back == 0 { 0 } else { self.len - back + 1 };
        (to_fill + evict) as u64
    }

    /// The highest slot in `lo..hi` that is failed or slow.
    fn newest_dirty(&self, lo: usize, hi: usize) -> Option<usize> {
        let mut top = hi;
        while top > lo {
            let w = (top - 1) / 64;
            let from = lo.max(w * 64);
            let word = self.words.get(w)?;
            let dirty = (word.failed | word.slow) & span(from % 64, top - from);
            if dirty != 0 {
                return Some(w * 64 + 63 - dirty.leading_zeros() as usize);
            }
            top = from;
        }
        None
    }

    /// `n` plain successes, as if recorded one by one, a word at a time:
    /// every slot from the cursor on is overwritten with a success, and what
    /// the overwritten slots held is subtracted (slots past `len` hold
    /// nothing: [`clear`](Self::clear) zeroes the ring).
    fn record_successes(&mut self, n: u64) {
        let mut left = usize::try_from(n).unwrap_or(usize::MAX).min(self.size);
        self.len = self.len.saturating_add(left).min(self.size);
        while left > 0 {
            let bit = self.next % 64;
            let run = left.min(64 - bit).min(self.size - self.next);
            let mask = span(bit, run);
            match self.words.get_mut(self.next / 64) {
                // Usually successes evict successes: nothing to count.
                Some(word) if (word.failed | word.slow) & mask != 0 => {
                    self.failed -= u64::from((word.failed & mask).count_ones());
                    self.slow -= u64::from((word.slow & mask).count_ones());
                    word.failed &= !mask;
                    word.slow &= !mask;
                }
                _ => {}
            }
            self.next += run;
            if self.next == self.size {
                self.next = 0;
            }
            left -= run;
        }
    }

    fn clear(&mut self) {
        self.words.fill(Slots::default());
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
///
/// The head second's counts live in `head_bucket`, inside the machine, and
/// go to their slot only when a later second comes: recording in the
/// current second (every failure, every fold of successes) writes no line
/// besides the machine's own (with two threads failing, each line the lock
/// holder writes is one the next holder fetches from the other core), and
/// finds its bucket without a division.
#[derive(Clone, Debug)]
pub(crate) struct TimeWindow {
    /// Seconds before the head; the head's own slot stays empty.
    buckets: Box<[Bucket]>,
    head_bucket: Bucket,
    head: u64,
    totals: Snapshot,
}

impl TimeWindow {
    pub(crate) fn new(size_secs: u32) -> Self {
        let size = (size_secs as usize).max(1);
        TimeWindow {
            buckets: vec![Bucket::default(); size].into_boxed_slice(),
            head_bucket: Bucket::default(),
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
        // The head second becomes an ordinary one.
        let i = (self.head % self.size()) as usize;
        self.buckets[i] = std::mem::take(&mut self.head_bucket);
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
        let b = &mut self.head_bucket;
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
        let b = &mut self.head_bucket;
        b.total = b.total.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        self.totals.total_calls += n;
    }

    fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.head_bucket = Bucket::default();
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
    #[inline]
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

    /// The ring as a plain list of the last `size` outcomes, newest last.
    struct Naive {
        size: usize,
        slots: std::collections::VecDeque<Outcome>,
    }

    impl Naive {
        fn record(&mut self, o: Outcome) {
            if self.slots.len() == self.size {
                self.slots.pop_front();
            }
            self.slots.push_back(o);
        }

        fn snapshot(&self) -> Snapshot {
            Snapshot {
                total_calls: self.slots.len() as u64,
                failed_calls: self.slots.iter().filter(|o| o.is_failure()).count() as u64,
                slow_calls: self.slots.iter().filter(|o| o.is_slow()).count() as u64,
            }
        }

        fn successes_to_clean(&self) -> u64 {
            let newest_dirty = self
                .slots
                .iter()
                .rev()
                .position(|o| o.is_failure() || o.is_slow());
            let evict = newest_dirty.map_or(0, |i| self.slots.len() - i);
            (self.size - self.slots.len() + evict) as u64
        }
    }

    /// A xorshift generator from `seed`: the randomised tests' inputs,
    /// the same on every run.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    #[test]
    fn r5_1_the_bit_ring_agrees_with_a_plain_list_across_word_boundaries() {
        let outcomes = [Success, Failure, SlowSuccess, SlowFailure];
        let mut next = xorshift(0x2545_f491_4f6c_dd1d_u64);
        for size in [1, 2, 3, 63, 64, 65, 127, 128, 129, 200] {
            let mut w = CountWindow::new(size);
            // Both forms of the words are checked: inline up to 128.
            assert_eq!(
                matches!(w.words, Words::Inline(_)),
                size <= 128,
                "size {size}"
            );
            let mut naive = Naive {
                size: size as usize,
                slots: Default::default(),
            };
            for step in 0..3_000 {
                let r = next();
                match r % 8 {
                    0 => {
                        let n = (r >> 8) % (2 * u64::from(size) + 3);
                        w.record_successes(n);
                        for _ in 0..n {
                            naive.record(Success);
                        }
                    }
                    1 if r % 64 == 1 => {
                        w.clear();
                        naive.slots.clear();
                    }
                    // Mostly successes, as in production.
                    k => {
                        let o = if k < 5 {
                            Success
                        } else {
                            outcomes[((r >> 8) % 4) as usize]
                        };
                        w.record(o);
                        naive.record(o);
                    }
                }
                let ctx = format!("size {size} step {step}");
                assert_eq!(w.snapshot(), naive.snapshot(), "{ctx}");
                assert_eq!(w.successes_to_clean(), naive.successes_to_clean(), "{ctx}");
                assert_eq!(
                    w.full_of_successes(),
                    naive.slots.len() == size as usize
                        && naive.snapshot().failed_calls == 0
                        && naive.snapshot().slow_calls == 0,
                    "{ctx}"
                );
            }
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

    /// R5.2 against a plain list of (second, outcome): the head second's
    /// counts kept apart from the ring (`head_bucket`) must leave every
    /// snapshot as if each call sat in its second's bucket, across
    /// rollovers, jumps past the window, bulk successes, clamped late
    /// readings and clears.
    #[test]
    fn r5_2_the_time_window_agrees_with_a_plain_list_of_calls() {
        let outcomes = [Success, Failure, SlowSuccess, SlowFailure];
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15_u64);
        for size in [1u32, 2, 3, 7, 60] {
            let mut w = TimeWindow::new(size);
            let mut calls: Vec<(u64, Outcome)> = Vec::new();
            let mut now = 0u64; // the clock, in seconds
            for step in 0..4_000 {
                let r = next();
                match r % 16 {
                    // Time moves on: mostly within the window, sometimes far.
                    0..=2 => now += (r >> 8) % u64::from(size + 2),
                    3 if r % 256 == 3 => now += 10 * u64::from(size),
                    4 => {
                        let n = (r >> 8) % 5;
                        w.advance(Timestamp::from_secs(now));
                        w.record_successes(n);
                        let head = w.head();
                        calls.extend((0..n).map(|_| (head, Success)));
                    }
                    5 if r % 128 == 5 => {
                        w.clear();
                        calls.clear();
                    }
                    _ => {
                        let o = outcomes[((r >> 8) % 4) as usize];
                        // Now and then a reading a second late (another
                        // thread's), which is clamped to the head.
                        let at = if r % 16 == 15 {
                            now.saturating_sub(1)
                        } else {
                            now
                        };
                        w.record(Timestamp::from_secs(at), o);
                        calls.push((at.max(w.head()), o));
                    }
                }
                let seen = w.snapshot(Timestamp::from_secs(now));
                let head = w.head();
                let live: Vec<_> = calls
                    .iter()
                    .filter(|(sec, _)| sec + u64::from(size) > head)
                    .collect();
                let expect = Snapshot {
                    total_calls: live.len() as u64,
                    failed_calls: live.iter().filter(|(_, o)| o.is_failure()).count() as u64,
                    slow_calls: live.iter().filter(|(_, o)| o.is_slow()).count() as u64,
                };
                assert_eq!(seen, expect, "size {size} step {step}");
            }
        }
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
