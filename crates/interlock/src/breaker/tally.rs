//! Success lanes: plain successes counted without the breaker's lock, folded
//! into the machine's window the next time the lock is taken (issue 22).
//!
//! A breaker owns a few cache-line-sized lanes, one 64-bit word each; a
//! thread always uses the same lane (its index modulo the lane count), so
//! two threads rarely write the same line. A lane word is
//!
//! ```text
//! bit 63      valid: the machine said successes may wait (Machine::tally_key)
//! bits 48..63 the key's generation, low 15 bits
//! bits 16..48 the key's second (time window), low 32 bits; 0 for a count window
//! bits 0..16  successes counted since the last fold
//! ```
//!
//! A success adds one with a compare-and-swap that succeeds only on a valid
//! word whose tag is its own generation and second, with room left below
//! the flush point; anything else (no key, another generation or second, a
//! full lane, a lost race) takes the locked path instead, which is always
//! correct. Only the lock holder changes a tag.
//!
//! # Why it is exact
//!
//! The machine publishes a key only when no run of plain successes from its
//! current state could trip it (see `Machine::tally_key`), so skipping their
//! trip evaluation changes no decision. Every change of the machine happens
//! in `Inner::change`, which, under the lock:
//!
//! 1. folds first: takes every lane's count (the tags stay) and records
//!    those successes into the window, before anything else looks at it.
//!    A success whose add came before the fold's read of its lane is ordered
//!    before the locked operation; one whose add came after is ordered after
//!    it. Successes are indistinguishable, so which of two concurrent ones
//!    lands on which side does not matter: any split whose every success
//!    overlaps the operation, or ended before it began, is a valid order.
//! 2. runs the operation on the machine (record a failure, snapshot, ...);
//! 3. re-keys: if the machine's key is no longer exactly the lanes' key, the
//!    lanes are swapped to invalid (collecting the few successes added
//!    during steps 2 and 3, which raced the operation and are ordered right
//!    after it: stale ones are dropped, the others are recorded one by one
//!    through the machine's full path, with trip evaluation), and then
//!    tagged with the new key, if any. If the key did not change, successes
//!    added meanwhile stay in their lanes: they are ordered after the
//!    operation, in a state with the same key, where waiting is as valid.
//!
//! So a lane's count only ever holds successes that a state with the lane's
//! key was valid for, and the machine never changes while that key is up
//! without folding them first. `snapshot()` goes through the same path, so
//! the totals it returns always include every success added before its fold
//! (R5: never torn).

use std::sync::atomic::Ordering;

use crate::clock::Timestamp;
use crate::machine::TallyKey;
use crate::sync::AtomicU64;

const COUNT_BITS: u32 = 16;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const SECOND_SHIFT: u32 = COUNT_BITS;
const SECOND_MASK: u64 = (1 << 32) - 1;
const GENERATION_SHIFT: u32 = 48;
const GENERATION_MASK: u64 = (1 << 15) - 1;
const VALID: u64 = 1 << 63;
/// No key: successes take the lock.
const INVALID: u64 = 0;
/// The most successes a lane holds before its next one takes the lock
/// (which folds the lane): far below the count field's limit.
const MAX_PENDING: u64 = 1 << (COUNT_BITS - 1);
/// The most lanes a breaker has (a power of two).
#[cfg(not(all(test, interlock_loom)))]
const MAX_LANES: usize = 8;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// One lane, alone on its cache line.
#[repr(align(64))]
struct Lane(AtomicU64);

/// The tag bits of `key`.
fn tag(generation: u64, second: u64) -> u64 {
    VALID
        | ((generation & GENERATION_MASK) << GENERATION_SHIFT)
        | ((second & SECOND_MASK) << SECOND_SHIFT)
}

/// The lanes of one breaker.
pub(crate) struct Tally {
    lanes: Box<[Lane]>,
    mask: usize,
    /// A success that would make a lane hold this many takes the lock (and
    /// folds the lanes): at most [`MAX_PENDING`], and for a count window
    /// the number of successes that would leave it full of successes, so
    /// that its successes are soon quiet again (`Machine::success_is_noop`:
    /// no lane at all). Written under the lock.
    flush_at: AtomicU64,
    /// Whether the window is time-based (the tag carries the second).
    timed: bool,
}

impl Tally {
    /// Lanes for a count window (`timed` false) or a time window.
    pub(crate) fn new(timed: bool) -> Self {
        let n = lane_count();
        Tally {
            lanes: (0..n).map(|_| Lane(AtomicU64::new(INVALID))).collect(),
            mask: n - 1,
            flush_at: AtomicU64::new(MAX_PENDING),
            timed,
        }
    }

    /// Under the lock: a lane that would hold `n` successes folds itself
    /// (clamped to 1..=[`MAX_PENDING`]).
    pub(crate) fn flush_at(&self, n: u64) {
        let n = n.clamp(1, MAX_PENDING);
        if self.flush_at.load(Ordering::Relaxed) != n {
            self.flush_at.store(n, Ordering::Relaxed);
        }
    }

    /// Counts a plain success of `generation` that ended at `end`, without
    /// the lock; `false` if it must take the locked path instead.
    #[inline(always)]
    pub(crate) fn try_add(&self, generation: u64, end: Timestamp) -> bool {
        let second = if self.timed {
            end.as_nanos() / NANOS_PER_SEC
        } else {
            0
        };
        let lane = &self.lanes[lane_index() & self.mask].0;
        let word = lane.load(Ordering::Relaxed);
        if word & !COUNT_MASK != tag(generation, second)
            || (word & COUNT_MASK) + 1 >= self.flush_at.load(Ordering::Relaxed)
        {
            return false;
        }
        lane.compare_exchange(word, word + 1, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Under the lock: takes every lane's count, keeping the tags.
    pub(crate) fn collect(&self) -> u64 {
        let mut total = 0;
        for lane in &self.lanes[..] {
            if lane.0.load(Ordering::Relaxed) & COUNT_MASK != 0 {
                total += lane.0.fetch_and(!COUNT_MASK, Ordering::Relaxed) & COUNT_MASK;
            }
        }
        total
    }

    /// Under the lock: no success may be added any more; returns the ones
    /// added since the last [`collect`](Self::collect).
    pub(crate) fn invalidate(&self) -> u64 {
        self.lanes
            .iter()
            .map(|lane| lane.0.swap(INVALID, Ordering::Relaxed) & COUNT_MASK)
            .sum()
    }

    /// Under the lock, after [`invalidate`](Self::invalidate): successes of
    /// `key` may be added again.
    pub(crate) fn validate(&self, key: TallyKey) {
        let word = tag(key.generation, key.second);
        for lane in &self.lanes[..] {
            lane.0.store(word, Ordering::Relaxed);
        }
    }
}

/// Lanes per breaker: the machine's parallelism rounded up to a power of
/// two, at most [`MAX_LANES`] (read once per process).
#[cfg(not(all(test, interlock_loom)))]
fn lane_count() -> usize {
    static LANES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LANES.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .next_power_of_two()
            .min(MAX_LANES)
    })
}

/// This thread's lane number (modulo a breaker's lane count): threads are
/// numbered in the order they first record a success this way.
#[cfg(not(all(test, interlock_loom)))]
#[inline]
fn lane_index() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    thread_local! {
        static LANE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    LANE.try_with(|lane| {
        let i = lane.get();
        if i != usize::MAX {
            return i;
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
        lane.set(i);
        i
    })
    .unwrap_or(0)
}

/// Under loom: two lanes, and each modelled thread says which it uses
/// ([`set_lane`]), so the models are deterministic.
#[cfg(all(test, interlock_loom))]
fn lane_count() -> usize {
    2
}

#[cfg(all(test, interlock_loom))]
loom::thread_local! {
    static LOOM_LANE: std::cell::Cell<usize> = std::cell::Cell::new(0);
}

#[cfg(all(test, interlock_loom))]
fn lane_index() -> usize {
    LOOM_LANE.with(std::cell::Cell::get)
}

/// Under loom: the lane this modelled thread adds to.
#[cfg(all(test, interlock_loom))]
pub(crate) fn set_lane(i: usize) {
    LOOM_LANE.with(|lane| lane.set(i));
}

#[cfg(all(test, not(interlock_loom)))]
mod tests {
    use super::*;

    fn key(generation: u64, second: u64) -> TallyKey {
        TallyKey { generation, second }
    }

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_nanos(secs * NANOS_PER_SEC + 1)
    }

    #[test]
    fn nothing_is_added_without_a_key() {
        let t = Tally::new(false);
        assert!(!t.try_add(0, at(0)));
        assert_eq!(t.collect(), 0);
    }

    #[test]
    fn adds_only_for_its_own_generation_and_second() {
        let t = Tally::new(true);
        t.validate(key(3, 7));
        assert!(t.try_add(3, at(7)));
        assert!(t.try_add(3, at(7)));
        assert!(!t.try_add(2, at(7)), "another generation (R8.8)");
        assert!(!t.try_add(3, at(8)), "a later second (R5.2)");
        assert!(!t.try_add(3, at(6)), "an earlier second");
        assert_eq!(t.collect(), 2);
        assert_eq!(t.collect(), 0, "collected once");
        assert!(t.try_add(3, at(7)), "the tag stays after a collect");
        assert_eq!(t.invalidate(), 1);
        assert!(!t.try_add(3, at(7)), "invalid after invalidate");
        assert_eq!(t.invalidate(), 0);
    }

    #[test]
    fn a_count_window_ignores_the_second_and_folds_when_told() {
        let t = Tally::new(false);
        t.flush_at(4);
        t.validate(key(1, 0));
        assert!(t.try_add(1, at(5)));
        assert!(t.try_add(1, at(9)));
        assert!(t.try_add(1, at(9)));
        assert!(!t.try_add(1, at(9)), "the fourth would fill the lane");
        assert_eq!(t.collect(), 3);
        assert!(t.try_add(1, at(9)));
    }

    #[test]
    fn a_time_window_lane_holds_at_most_max_pending_minus_one() {
        let t = Tally::new(true);
        t.validate(key(0, 0));
        let mut added = 0;
        while t.try_add(0, at(0)) {
            added += 1;
        }
        assert_eq!(added, MAX_PENDING - 1);
        assert_eq!(t.collect(), MAX_PENDING - 1);
    }

    #[test]
    fn tags_keep_the_fields_apart() {
        assert_eq!(tag(0, 0), VALID);
        assert_ne!(tag(1, 0), tag(0, 1));
        assert_eq!(
            tag(GENERATION_MASK + 1, 0),
            tag(0, 0),
            "15 bits of generation"
        );
        for g in 1..=GENERATION_MASK {
            assert_ne!(
                tag(g, 0),
                tag(0, 0),
                "every 15-bit generation is its own tag"
            );
        }
        assert_eq!(tag(0, SECOND_MASK + 1), tag(0, 0), "32 bits of second");
        assert_eq!(tag(u64::MAX, u64::MAX) & COUNT_MASK, 0);
    }
}
