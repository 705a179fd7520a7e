//! Which lane a thread uses: its shared lane's number, and the owned lane
//! *slot* it holds (one per lane, taken at its first lane success and given
//! back when it exits), and under loom the modelled threads' choice.

#[cfg(not(all(test, interlock_loom)))]
use std::sync::atomic::Ordering;

/// The most lanes a breaker has (a power of two).
#[cfg(not(all(test, interlock_loom)))]
pub(super) const MAX_LANES: usize = 8;

/// Lanes per breaker: twice the machine's parallelism rounded up to a
/// power of two, at most [`MAX_LANES`] (read once per process).
///
/// Twice, because a slot stays with its thread until the thread exits: a
/// main thread or a set-up thread that once settled a success holds one
/// for good, and with only one slot per core a busy worker would then be
/// left on the shared lanes (a compare-and-swap per success, and a line
/// the lock holder's fold writes). On two cores, a main thread that warmed
/// a breaker up and two workers: 54 → 37 ns per call with 10 % failures
/// (`two_threads count 10`, medians of eight alternating runs).
#[cfg(not(all(test, interlock_loom)))]
pub(super) fn lane_count() -> usize {
    static LANES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LANES.get_or_init(|| {
        lanes_for(std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
    })
}

/// [`lane_count`] on a machine of `parallelism`.
#[cfg(not(all(test, interlock_loom)))]
fn lanes_for(parallelism: usize) -> usize {
    // Bounded first: `MAX_LANES` is a power of two, and no rounding up
    // can overflow.
    parallelism
        .saturating_mul(2)
        .min(MAX_LANES)
        .next_power_of_two()
}

/// This thread's lane number (modulo a breaker's lane count): threads are
/// numbered in the order they first record a success this way.
#[cfg(not(all(test, interlock_loom)))]
#[inline]
pub(super) fn lane_index() -> usize {
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

/// No slot: the thread uses the shared lanes.
#[cfg(not(all(test, interlock_loom)))]
const NO_SLOT: u8 = u8::MAX - 1;
/// Not asked for a slot yet.
#[cfg(not(all(test, interlock_loom)))]
const UNCLAIMED: u8 = u8::MAX;

#[cfg(not(all(test, interlock_loom)))]
thread_local! {
    /// This thread's slot (below [`MAX_LANES`]), [`NO_SLOT`] or [`UNCLAIMED`].
    static SLOT: std::cell::Cell<u8> = const { std::cell::Cell::new(UNCLAIMED) };
    /// Gives the slot back when the thread exits.
    static RELEASE: SlotRelease = const { SlotRelease(std::cell::Cell::new(NO_SLOT)) };
}

/// The process's slots, one bit each: a slot's owner is the only thread
/// that writes owned lanes of its number, in every breaker.
#[cfg(not(all(test, interlock_loom)))]
static SLOTS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
#[cfg(not(all(test, interlock_loom)))]
const _: () = assert!(MAX_LANES <= u8::BITS as usize);
// `owned_slot` relies on it: a thread without a slot finds no owned lane.
#[cfg(not(all(test, interlock_loom)))]
const _: () = assert!(NO_SLOT as usize >= MAX_LANES);

/// Gives a thread's slot back when it exits. Release: the thread's last
/// lane stores happen before the next owner's loads (its claim acquires).
#[cfg(not(all(test, interlock_loom)))]
struct SlotRelease(std::cell::Cell<u8>);

#[cfg(not(all(test, interlock_loom)))]
impl Drop for SlotRelease {
    fn drop(&mut self) {
        let slot = self.0.replace(NO_SLOT);
        if usize::from(slot) < MAX_LANES {
            // A success counted later by this thread (from another
            // thread-local's destructor) takes the shared lanes.
            let _ = SLOT.try_with(|s| s.set(NO_SLOT));
            SLOTS.fetch_and(!(1 << slot), Ordering::Release);
        }
    }
}

/// This thread's owned lane number in every breaker; out of range
/// ([`NO_SLOT`], above every lane count) for a thread without a slot.
#[cfg(not(all(test, interlock_loom)))]
#[inline]
pub(super) fn owned_slot() -> usize {
    usize::from(
        SLOT.try_with(|slot| match slot.get() {
            UNCLAIMED => claim_slot(slot),
            s => s,
        })
        .unwrap_or(NO_SLOT),
    )
}

/// A thread's first lane success: takes the lowest free slot, if any
/// (threads beyond the lane count share the shared lanes). Acquire: the
/// slot's previous owner's stores are seen.
#[cfg(not(all(test, interlock_loom)))]
#[cold]
#[inline(never)]
fn claim_slot(slot: &std::cell::Cell<u8>) -> u8 {
    let claimed = take_slot(&SLOTS, lane_count()).unwrap_or(NO_SLOT);
    if claimed != NO_SLOT && RELEASE.try_with(|r| r.0.set(claimed)).is_err() {
        // Exiting already: nothing would give the slot back.
        SLOTS.fetch_and(!(1 << claimed), Ordering::Release);
        slot.set(NO_SLOT);
        return NO_SLOT;
    }
    slot.set(claimed);
    claimed
}

/// Takes the lowest of the first `count` slots free in `slots`, if any.
#[cfg(not(all(test, interlock_loom)))]
fn take_slot(slots: &std::sync::atomic::AtomicU8, count: usize) -> Option<u8> {
    let all = u8::MAX >> (u8::BITS as usize - count.min(u8::BITS as usize));
    let mut taken = slots.load(Ordering::Relaxed);
    loop {
        let free = !taken & all;
        if free == 0 {
            return None;
        }
        let bit = free & free.wrapping_neg();
        match slots.compare_exchange_weak(taken, taken | bit, Ordering::Acquire, Ordering::Relaxed)
        {
            #[allow(clippy::cast_possible_truncation, reason = "below 8")]
            Ok(_) => return Some(bit.trailing_zeros() as u8),
            Err(now) => taken = now,
        }
    }
}

/// Under loom: two lanes, and each modelled thread says which it uses
/// ([`set_lane`], [`set_shared_lane`]), so the models are deterministic.
#[cfg(all(test, interlock_loom))]
pub(super) fn lane_count() -> usize {
    2
}

#[cfg(all(test, interlock_loom))]
loom::thread_local! {
    static LOOM_LANE: std::cell::Cell<usize> = std::cell::Cell::new(0);
    static LOOM_OWNED: std::cell::Cell<bool> = std::cell::Cell::new(true);
}

#[cfg(all(test, interlock_loom))]
pub(super) fn lane_index() -> usize {
    LOOM_LANE.with(std::cell::Cell::get)
}

#[cfg(all(test, interlock_loom))]
pub(super) fn owned_slot() -> usize {
    if LOOM_OWNED.with(std::cell::Cell::get) {
        lane_index()
    } else {
        usize::MAX
    }
}

/// Under loom: this modelled thread owns lane `i` (the default: lane 0).
#[cfg(all(test, interlock_loom))]
pub(crate) fn set_lane(i: usize) {
    LOOM_LANE.with(|lane| lane.set(i));
    LOOM_OWNED.with(|owned| owned.set(true));
}

/// Under loom: this modelled thread adds to shared lane `i` (with a
/// compare-and-swap), as a thread without a slot does.
#[cfg(all(test, interlock_loom))]
pub(crate) fn set_shared_lane(i: usize) {
    LOOM_LANE.with(|lane| lane.set(i));
    LOOM_OWNED.with(|owned| owned.set(false));
}

#[cfg(all(test, not(interlock_loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_core_and_as_many_threads_again_get_a_slot_up_to_the_most_lanes() {
        let lanes: Vec<_> = [1, 2, 3, 4, 5, 64, usize::MAX].map(lanes_for).into();
        assert_eq!(lanes, [2, 4, 8, 8, 8, 8, 8]);
        assert!(lane_count().is_power_of_two() && lane_count() <= MAX_LANES);
    }

    #[test]
    fn slots_are_taken_lowest_first_once_each_and_taken_again_when_given_back() {
        use std::sync::atomic::AtomicU8;
        let slots = AtomicU8::new(0);
        assert_eq!(take_slot(&slots, 2), Some(0));
        assert_eq!(take_slot(&slots, 2), Some(1));
        assert_eq!(take_slot(&slots, 2), None, "two slots, two owners");
        slots.fetch_and(!1, Ordering::Release);
        assert_eq!(take_slot(&slots, 2), Some(0), "given back, taken again");
        let eight = AtomicU8::new(0);
        let all: Vec<_> = (0..9).map(|_| take_slot(&eight, MAX_LANES)).collect();
        assert_eq!(all[..8], (0..8).map(Some).collect::<Vec<_>>()[..]);
        assert_eq!(all[8], None);
    }
}
