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
//! the flush point (a compare-and-swap that lost to a word still so tagged,
//! as a fold's take leaves it, tries again); anything else (no key, another
//! generation or second, a full lane, races lost [`SHARED_TRIES`] times)
//! takes the locked path instead, which is always correct. Only the lock
//! holder changes a tag.
//!
//! # Owned lanes: no atomic read-modify-write
//!
//! The compare-and-swap above is about half of a lane success's time on
//! one thread (it drains the store buffer). So a thread that holds one of
//! the process's few *slots* (one per lane, taken at its first lane
//! success and given back when it exits) counts on its breaker's owned
//! lane of that number instead, with a plain load and store: only it ever
//! writes that word, so no increment can be lost. A thread without a slot
//! (more threads than lanes) uses the shared lanes above.
//!
//! An owned lane is three words on one line: `word`, written only by the
//! owner (`epoch << 32 | count`, the count wrapping), and two written only
//! by the lock holder: `folded`, the word as the last fold read it, and
//! `gate`, what the owner may add under. The lock holder keeps the owned
//! lanes' key (`Tally::key`: the tag above, valid or not, and in its low
//! 16 bits the key's number, moved at every re-key); an epoch is the key's
//! generation (low 15 bits) and number. While that key is valid every
//! lane's gate is open: `OPEN | epoch << 32 | limit`, the limit being what
//! the folds took of this epoch plus the flush point less one; it is
//! closed at every re-key and rewritten whenever a fold, the key or the
//! flush point moves. An owner reads its gate and its word, nothing
//! else: it adds one if the gate is open for its call's generation, the
//! word counts under the gate's epoch and the count is below the limit.
//! A lane still holding another epoch's unfolded successes takes the lock.
//! (Owned lanes open only for count windows; a time window's successes
//! always take the shared lanes, see below.)
//!
//! Without a read-modify-write (or a store-load fence, which costs as
//! much) an owner may read its gate, the lock holder re-key and fold, and the
//! owner's store land after both, however long after (the owner may be
//! descheduled in between): a *late* success, counted under an epoch no
//! longer current. Its store is where it takes effect: every fold that
//! read the lane before the store came before it, and the first fold that
//! sees it records it first, before its own operation. That is exact only
//! if recording it then changes no decision taken in between, so the
//! gates are open only while the machine's key **lasts the
//! generation** (`Machine::tally_key_lasts`: CLOSED with a full count
//! window). Then a late success is either of an older generation (stale,
//! R8.8: dropped) or of this one, whose key is still up, and no run of
//! successes can trip from it: recorded with the current ones. (Under a
//! key that can go, a failure could take it away, a success that then
//! should trip stays invisible until the next fold, and a call admitted
//! meanwhile would not be rejected: the loom model of a time window found
//! exactly that, so time windows and filling count windows count on the
//! shared lanes.) The fold still records a late success of this
//! generation without a key through the machine's full path, reporting a
//! trip it causes as a change of its own before the operation runs
//! (`Inner::change`), so that a mistake in that proof would cost a delay,
//! never a lost success.
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
//! without folding them first (one exception, below). `snapshot()` goes
//! through the same path, so the totals it returns always include every
//! success added before its fold (R5: never torn).
//!
//! One operation skips step 1: recording a failure or slow call of a time
//! window's head second that cannot trip on the machine's own counts
//! (`Machine::may_record_before_waiting_successes`). The waiting successes
//! only lower its rates, and in a second's bucket outcomes have no order,
//! so recording it before them leaves the same decision and the same
//! window; they stay in their lanes, under a key that stays, for the next
//! fold. On two threads, this keeps each thread's shared lane on its own
//! core while the other fails.

use std::sync::atomic::Ordering;

use crate::clock::Timestamp;
use crate::machine::TallyKey;
use crate::sync::AtomicU64;

mod slots;

use slots::{lane_count, lane_index, owned_slot};
#[cfg(all(test, interlock_loom))]
pub(crate) use slots::{set_lane, set_shared_lane};

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
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Compare-and-swaps a shared-lane success tries before it takes the lock.
///
/// A lost race is most often with a fold, whose take (`collect`) leaves
/// the tag as it was: on two threads with a time window and 10 % failures
/// about one success in 75 lost its first try, and took the lock for it.
/// Bounded, so that threads adding to one lane at once take the lock
/// rather than spin.
const SHARED_TRIES: u32 = 3;

/// One lane, alone on its cache line.
#[repr(align(64))]
struct Lane(AtomicU64);

/// The key word's number of the key (its low 16 bits).
const NUMBER_MASK: u64 = COUNT_MASK;
/// An owned lane word's count: its low 32 bits.
const OWNED_COUNT_MASK: u64 = (1 << 32) - 1;

/// An owned lane's gate is open (its bit 63; an owned word never has it).
const OPEN: u64 = 1 << 63;
/// A closed gate: the owner takes the shared lanes.
const CLOSED: u64 = 0;

/// One owned lane: its thread's count, what the folds took of it and
/// what the owner may add, on one line.
#[repr(align(64))]
struct Owned {
    /// `epoch << 32 | count`: written only by the lane's thread.
    word: AtomicU64,
    /// `OPEN | epoch << 32 | limit` while the owned lanes are open (the
    /// owner may count under `epoch` while its count stays below `limit`,
    /// both wrapping at 32 bits), [`CLOSED`] otherwise. Written only under
    /// the lock, after every change of `folded`, the key or the flush
    /// point, so an owner reads in one word what it used to read in three.
    gate: AtomicU64,
    /// The word as the last fold read it: written only under the lock.
    folded: AtomicU64,
}

impl Owned {
    /// The gate for an open key of `epoch` and flush point `flush`, the
    /// lane's `folded` word being `folded`: room for `flush - 1` successes
    /// past what the folds took of `epoch`.
    fn gate_for(folded: u64, epoch: u64, flush: u64) -> u64 {
        let base = if folded >> 32 == epoch {
            folded & OWNED_COUNT_MASK
        } else {
            // The owner starts `epoch` from zero (see `add_owned`).
            0
        };
        OPEN | (epoch << 32) | (base.wrapping_add(flush - 1) & OWNED_COUNT_MASK)
    }

    /// Under the lock: stores `gate` unless the lane has it already (the
    /// line is the owner's: no write that changes nothing).
    fn set_gate(&self, gate: u64) {
        if self.gate.load(Ordering::Relaxed) != gate {
            self.gate.store(gate, Ordering::Relaxed);
        }
    }
}

/// The epoch a key word names: its generation's low 15 bits and its number.
fn epoch_of(key: u64) -> u64 {
    (((key >> GENERATION_SHIFT) & GENERATION_MASK) << COUNT_BITS) | (key & NUMBER_MASK)
}

/// How many of `word`'s successes `folded` does not hold yet.
fn unfolded(word: u64, folded: u64) -> u64 {
    let base = if word >> 32 == folded >> 32 {
        folded
    } else {
        0
    };
    (word.wrapping_sub(base)) & OWNED_COUNT_MASK
}

/// What a fold took from the owned lanes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Folded {
    /// Successes of the key now published: recorded in bulk.
    pub(crate) current: u64,
    /// Successes of an earlier key of the machine's generation.
    pub(crate) late: u64,
}

/// The tag bits of `key`.
fn tag(generation: u64, second: u64) -> u64 {
    VALID
        | ((generation & GENERATION_MASK) << GENERATION_SHIFT)
        | ((second & SECOND_MASK) << SECOND_SHIFT)
}

/// The lanes of one breaker.
pub(crate) struct Tally {
    lanes: Box<[Lane]>,
    /// One per slot (`owned_slot`), as many as `lanes`.
    owned: Box<[Owned]>,
    /// The owned lanes' key: the shared lanes' tag while the machine's key
    /// lasts the generation (`Machine::tally_key_lasts`; no [`VALID`] bit
    /// otherwise, and every gate closed: owners then use the shared
    /// lanes), and the key's number in the low 16 bits. Read and written
    /// only under the lock (owners read their gates).
    key: AtomicU64,
    /// Whether the owned lanes were ever opened: until then no fold needs
    /// to read them (once opened, a late store may land at any time).
    /// Written only under the lock.
    ever_opened: std::sync::atomic::AtomicBool,
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
            owned: (0..n)
                .map(|_| Owned {
                    word: AtomicU64::new(0),
                    gate: AtomicU64::new(CLOSED),
                    folded: AtomicU64::new(0),
                })
                .collect(),
            key: AtomicU64::new(INVALID),
            ever_opened: std::sync::atomic::AtomicBool::new(false),
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
            self.open_gates();
        }
    }

    /// Under the lock: every owned lane's gate for the owned key (closed
    /// if the owned lanes are closed).
    fn open_gates(&self) {
        let key = self.key.load(Ordering::Relaxed);
        if key & VALID == 0 {
            return;
        }
        let (epoch, flush) = (epoch_of(key), self.flush_at.load(Ordering::Relaxed));
        for lane in &self.owned[..] {
            lane.set_gate(Owned::gate_for(
                lane.folded.load(Ordering::Relaxed),
                epoch,
                flush,
            ));
        }
    }

    /// Counts a plain success of `generation` that ended at `end`, without
    /// the lock; `false` if it must take the locked path instead.
    #[inline(always)]
    pub(crate) fn try_add(&self, generation: u64, end: Timestamp) -> bool {
        if self.timed {
            // A time window's key never lasts: its owned lanes never open.
            let second = end.as_nanos() / NANOS_PER_SEC;
            return self.add_shared(lane_index(), tag(generation, second));
        }
        if let Some(lane) = self.owned.get(owned_slot()) {
            let gate = lane.gate.load(Ordering::Relaxed);
            if let Some(added) = self.add_owned(lane, gate, generation) {
                return added;
            }
        }
        self.add_shared(lane_index(), tag(generation, 0))
    }

    /// [`try_add`](Self::try_add) on shared lane `index` (modulo the lane
    /// count): one compare-and-swap, tried again (at most
    /// [`SHARED_TRIES`] in all) while the word it lost to still has the
    /// success's tag and room, as a fold's take or another thread's add
    /// leave it.
    #[inline(always)]
    fn add_shared(&self, index: usize, tag: u64) -> bool {
        let lane = &self.lanes[index & self.mask].0;
        let mut word = lane.load(Ordering::Relaxed);
        for _ in 0..SHARED_TRIES {
            if word & !COUNT_MASK != tag
                || (word & COUNT_MASK) + 1 >= self.flush_at.load(Ordering::Relaxed)
            {
                return false;
            }
            match lane.compare_exchange(word, word + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => word = now,
            }
        }
        false
    }

    /// [`try_add`](Self::try_add) on this thread's own lane, under its
    /// `gate` as read: `None` if the gate is not open for `generation`
    /// (closed, or of another generation: the shared lanes then), else
    /// whether the success was added, with plain loads and one store.
    #[inline(always)]
    fn add_owned(&self, lane: &Owned, gate: u64, generation: u64) -> Option<bool> {
        // Bits 48..64 of an open gate: OPEN and the epoch's generation.
        if gate >> GENERATION_SHIFT != (OPEN >> GENERATION_SHIFT) | (generation & GENERATION_MASK) {
            return None;
        }
        let word = lane.word.load(Ordering::Relaxed);
        // A word never has the OPEN bit: this is "the same epoch".
        let next = if (gate ^ word) >> 32 == OPEN >> 32 {
            // Room while the count is below the limit (wrapping: the two
            // are never 2^31 apart). A gate read before a fold rewrote it
            // understates the room (the lane takes the lock early), one
            // read before the flush point fell overstates it (the lane
            // holds a few more before it folds): neither loses a success.
            #[allow(clippy::cast_possible_truncation, reason = "the low 32 bits")]
            #[allow(clippy::cast_possible_wrap, reason = "a signed distance")]
            let room = (gate as u32).wrapping_sub(word as u32) as i32;
            if room <= 0 {
                return Some(false);
            }
            (word & !OWNED_COUNT_MASK) | (word.wrapping_add(1) & OWNED_COUNT_MASK)
        } else {
            // Another key's count: start this one's only once the folds
            // took all of it (otherwise the lock folds it), and only if
            // the gate leaves room for one.
            #[allow(clippy::cast_possible_truncation, reason = "the low 32 bits")]
            #[allow(clippy::cast_possible_wrap, reason = "at most MAX_PENDING")]
            let room = gate as u32 as i32;
            if lane.folded.load(Ordering::Relaxed) != word || room <= 0 {
                return Some(false);
            }
            ((gate & !OPEN) & !OWNED_COUNT_MASK) | 1
        };
        lane.word.store(next, Ordering::Release);
        Some(true)
    }

    /// Under the lock: takes every shared lane's count, keeping the tags.
    pub(crate) fn collect(&self) -> u64 {
        let mut total = 0;
        for lane in &self.lanes[..] {
            let n = lane.0.load(Ordering::Relaxed) & COUNT_MASK;
            if n != 0 {
                // Only adds race this (the tag is the lock holder's): take
                // exactly the `n` seen, leave any added since.
                lane.0.fetch_sub(n, Ordering::Relaxed);
                total += n;
            }
        }
        total
    }

    /// Under the lock: takes what the owned lanes counted since the last
    /// fold, for a machine of `generation`: the successes of the key now
    /// published and the late ones of an earlier key of this generation
    /// (those of another generation are stale, R8.8, and dropped).
    #[inline]
    pub(crate) fn fold_owned(&self, generation: u64) -> Folded {
        if !self.ever_opened.load(Ordering::Relaxed) {
            return Folded::default();
        }
        let key = self.key.load(Ordering::Relaxed);
        let current = (key & VALID != 0).then(|| epoch_of(key));
        let flush = self.flush_at.load(Ordering::Relaxed);
        let mut folded = Folded::default();
        for lane in &self.owned[..] {
            let word = lane.word.load(Ordering::Acquire);
            let before = lane.folded.load(Ordering::Relaxed);
            if word == before {
                continue;
            }
            lane.folded.store(word, Ordering::Relaxed);
            if let Some(epoch) = current {
                lane.set_gate(Owned::gate_for(word, epoch, flush));
            }
            let n = unfolded(word, before);
            let epoch = word >> 32;
            if Some(epoch) == current {
                folded.current += n;
            } else if epoch >> COUNT_BITS == generation & GENERATION_MASK {
                folded.late += n;
            }
        }
        folded
    }

    /// Under the lock: no success may be added any more; returns the ones
    /// added since the last [`collect`](Self::collect).
    pub(crate) fn invalidate(&self) -> u64 {
        // The owned lanes' next key gets the next number: a success
        // counted under this one from now on is late.
        let key = self.key.load(Ordering::Relaxed);
        self.key.store((key + 1) & NUMBER_MASK, Ordering::Relaxed);
        if key & VALID != 0 {
            for lane in &self.owned[..] {
                lane.set_gate(CLOSED);
            }
        }
        self.lanes
            .iter()
            .map(|lane| lane.0.swap(INVALID, Ordering::Relaxed) & COUNT_MASK)
            .sum()
    }

    /// Under the lock, after [`invalidate`](Self::invalidate): successes of
    /// `key` may be added again.
    pub(crate) fn validate(&self, key: TallyKey, lasts: bool) {
        let word = tag(key.generation, key.second);
        for lane in &self.lanes[..] {
            lane.0.store(word, Ordering::Relaxed);
        }
        if lasts {
            self.open_owned(key);
        }
    }

    /// Under the lock, with `key` the lanes' key: owners may count on their
    /// own lanes from now on (the key lasts the generation). Idempotent.
    pub(crate) fn open_owned(&self, key: TallyKey) {
        self.ever_opened.store(true, Ordering::Relaxed);
        let number = self.key.load(Ordering::Relaxed) & NUMBER_MASK;
        self.key
            .store(tag(key.generation, key.second) | number, Ordering::Relaxed);
        self.open_gates();
    }

    /// Whether owners count on their own lanes.
    pub(crate) fn owned_open(&self) -> bool {
        self.key.load(Ordering::Relaxed) & VALID != 0
    }

    /// For tests: lane 0's gate now, and (`store_on_lane_0`) the store
    /// an owner of lane 0 that read `gate` makes for one success of the
    /// gate's generation.
    #[cfg(test)]
    pub(crate) fn owned_gate(&self) -> u64 {
        self.owned[0].gate.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn store_on_lane_0(&self, gate: u64) {
        let generation = (gate >> GENERATION_SHIFT) & GENERATION_MASK;
        assert_eq!(
            self.add_owned(&self.owned[0], gate, generation),
            Some(true),
            "lane 0 takes the store"
        );
    }
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

    /// Which lanes a test adds to.
    #[derive(Clone, Copy, Debug)]
    enum Kind {
        Shared,
        Owned,
    }

    const KINDS: [Kind; 2] = [Kind::Shared, Kind::Owned];

    impl Tally {
        /// A success on lane 0 of `kind`.
        fn add(&self, kind: Kind, generation: u64, end: Timestamp) -> bool {
            match kind {
                Kind::Shared => {
                    let second = if self.timed {
                        end.as_nanos() / NANOS_PER_SEC
                    } else {
                        0
                    };
                    self.add_shared(0, tag(generation, second))
                }
                // An owner of a count window (a time window's owners take
                // the shared lanes): the gate has no second.
                Kind::Owned => {
                    let lane = &self.owned[0];
                    let gate = lane.gate.load(Ordering::Relaxed);
                    self.add_owned(lane, gate, generation) == Some(true)
                }
            }
        }

        /// What a fold takes from lanes of `kind` (the current key's).
        fn take(&self, kind: Kind, generation: u64) -> u64 {
            match kind {
                Kind::Shared => self.collect(),
                Kind::Owned => self.fold_owned(generation).current,
            }
        }
    }

    #[test]
    fn nothing_is_added_without_a_key() {
        for kind in KINDS {
            let t = Tally::new(false);
            assert!(!t.add(kind, 0, at(0)), "{kind:?}");
            assert!(!t.try_add(0, at(0)), "{kind:?}: whichever lane");
            assert_eq!(t.take(kind, 0), 0, "{kind:?}");
        }
    }

    #[test]
    fn adds_only_for_its_own_generation_and_second() {
        for kind in KINDS {
            // Owned lanes open for count windows only (a time window's key
            // never lasts): their gate has a generation and no second.
            let timed = matches!(kind, Kind::Shared);
            let t = Tally::new(timed);
            t.validate(key(3, if timed { 7 } else { 0 }), true);
            assert!(t.add(kind, 3, at(7)));
            assert!(t.add(kind, 3, at(7)));
            assert!(
                !t.add(kind, 2, at(7)),
                "{kind:?}: another generation (R8.8)"
            );
            if timed {
                assert!(!t.add(kind, 3, at(8)), "{kind:?}: a later second (R5.2)");
                assert!(!t.add(kind, 3, at(6)), "{kind:?}: an earlier second");
            }
            assert_eq!(t.take(kind, 3), 2, "{kind:?}");
            assert_eq!(t.take(kind, 3), 0, "{kind:?}: collected once");
            assert!(
                t.add(kind, 3, at(7)),
                "{kind:?}: the tag stays after a collect"
            );
            let late = t.invalidate();
            assert!(!t.add(kind, 3, at(7)), "{kind:?}: invalid after invalidate");
            match kind {
                Kind::Shared => assert_eq!(late, 1),
                // An owned lane's count stays until a fold takes it: late
                // now, its key is gone.
                Kind::Owned => {
                    assert_eq!(late, 0);
                    let folded = t.fold_owned(3);
                    assert_eq!((folded.current, folded.late), (0, 1));
                }
            }
            assert_eq!(t.invalidate(), 0, "{kind:?}");
            assert_eq!(t.fold_owned(3), Folded::default(), "{kind:?}");
        }
    }

    #[test]
    fn a_count_window_ignores_the_second_and_folds_when_told() {
        for kind in KINDS {
            let t = Tally::new(false);
            t.flush_at(4);
            t.validate(key(1, 0), true);
            assert!(t.add(kind, 1, at(5)));
            assert!(t.add(kind, 1, at(9)));
            assert!(t.add(kind, 1, at(9)));
            assert!(
                !t.add(kind, 1, at(9)),
                "{kind:?}: the fourth would fill the lane"
            );
            assert_eq!(t.take(kind, 1), 3, "{kind:?}");
            assert!(t.add(kind, 1, at(9)), "{kind:?}");
        }
    }

    #[test]
    fn a_time_window_lane_holds_at_most_max_pending_minus_one() {
        for kind in KINDS {
            let t = Tally::new(true);
            t.validate(key(0, 0), true);
            let mut added = 0;
            while t.add(kind, 0, at(0)) {
                added += 1;
            }
            assert_eq!(added, MAX_PENDING - 1, "{kind:?}");
            assert_eq!(t.take(kind, 0), MAX_PENDING - 1, "{kind:?}");
        }
    }

    #[test]
    fn an_owned_success_that_raced_a_re_key_is_late_and_never_lost() {
        // The owner read key (1, 0), then the lock holder folded and
        // re-keyed to (1, 1) before the owner's store landed: the store
        // carries the old key's epoch. The next fold finds it late (same
        // generation), and the lane starts the new key only once that
        // fold has taken it.
        let t = Tally::new(true);
        t.validate(key(1, 0), true);
        assert!(t.add(Kind::Owned, 1, at(0)));
        let old_key = t.key.load(Ordering::Relaxed);
        assert_eq!(t.fold_owned(1).current, 1);
        let _ = t.invalidate();
        t.validate(key(1, 1), true);
        // The owner's late store, as `add_owned` makes it from `old_key`.
        let lane = &t.owned[0];
        let word = lane.word.load(Ordering::Relaxed);
        assert_eq!(word >> 32, epoch_of(old_key));
        lane.word.store(word + 1, Ordering::Release);
        assert!(
            !t.add(Kind::Owned, 1, at(1)),
            "an unfolded count of another key takes the lock"
        );
        assert_eq!(
            t.fold_owned(1),
            Folded {
                current: 0,
                late: 1
            }
        );
        assert!(
            t.add(Kind::Owned, 1, at(1)),
            "folded: the new key's count starts"
        );
        assert!(t.add(Kind::Owned, 1, at(1)));
        assert_eq!(
            t.fold_owned(1),
            Folded {
                current: 2,
                late: 0
            }
        );
        // Of another generation, a late success is stale (R8.8): dropped.
        assert!(t.add(Kind::Owned, 1, at(1)));
        let _ = t.invalidate();
        t.validate(key(2, 1), true);
        assert_eq!(t.fold_owned(2), Folded::default());
    }

    #[test]
    fn an_owned_count_wraps_without_losing_successes() {
        let t = Tally::new(false);
        t.validate(key(0, 0), true);
        let epoch = epoch_of(t.key.load(Ordering::Relaxed));
        let near = (epoch << 32) | (OWNED_COUNT_MASK - 1);
        t.owned[0].word.store(near, Ordering::Relaxed);
        t.owned[0].folded.store(near, Ordering::Relaxed);
        for _ in 0..3 {
            assert!(t.add(Kind::Owned, 0, at(0)));
        }
        assert_eq!(t.owned[0].word.load(Ordering::Relaxed) >> 32, epoch);
        assert_eq!(t.fold_owned(0).current, 3);
    }

    #[test]
    fn owned_lanes_open_only_for_a_key_that_lasts_and_close_at_every_re_key() {
        let t = Tally::new(false);
        assert!(!t.owned_open(), "no key at first");
        t.validate(key(4, 0), false);
        assert!(!t.owned_open(), "a key that may go: shared lanes only");
        assert!(!t.add(Kind::Owned, 4, at(0)));
        assert!(t.add(Kind::Shared, 4, at(0)));
        t.open_owned(key(4, 0));
        assert!(t.owned_open());
        assert!(t.add(Kind::Owned, 4, at(0)));
        let _ = t.invalidate();
        assert!(!t.owned_open(), "every re-key closes them");
        assert!(!t.add(Kind::Owned, 4, at(0)));
        t.validate(key(5, 0), true);
        assert!(t.owned_open());
        assert!(
            !t.add(Kind::Owned, 5, at(0)),
            "the lane still holds generation 4's unfolded success"
        );
        assert_eq!(t.fold_owned(5), Folded::default(), "stale (R8.8): dropped");
        assert!(t.add(Kind::Owned, 5, at(0)));
        assert_eq!(t.fold_owned(5).current, 1);
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
