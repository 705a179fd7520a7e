//! A tiny seedable generator (SplitMix64) for chaos sampling: no
//! dependency, lock-free, reproducible from its seed.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64 over a shared counter: every draw advances one atomic word, so
/// concurrent callers each get a distinct value of one deterministic
/// sequence (in the order they drew).
#[derive(Debug)]
pub(crate) struct SplitMix {
    state: AtomicU64,
}

impl SplitMix {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

    pub(crate) fn new(seed: u64) -> Self {
        SplitMix {
            state: AtomicU64::new(seed),
        }
    }

    /// A seed nobody chose: the process's per-map hashing key (random at
    /// start-up), mixed with a per-call counter.
    pub(crate) fn random_seed() -> u64 {
        static CALLS: AtomicU64 = AtomicU64::new(0);
        RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed))
    }

    pub(crate) fn next_u64(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(Self::GOLDEN, Ordering::Relaxed)
            .wrapping_add(Self::GOLDEN);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw in `[0, 1)` (53 random bits, exactly representable).
    pub(crate) fn unit(&self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether a draw falls under `rate` (`0.0` never, `1.0` always).
    pub(crate) fn chance(&self, rate: f64) -> bool {
        self.unit() < rate
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let (a, b) = (SplitMix::new(42), SplitMix::new(42));
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(SplitMix::new(43).next_u64(), xs[0]);
    }

    #[test]
    fn the_first_value_of_seed_zero_is_splitmix64s() {
        // The published first output of SplitMix64 seeded with 0.
        assert_eq!(SplitMix::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn chance_is_never_at_zero_always_at_one_and_near_the_rate_between() {
        let rng = SplitMix::new(7);
        assert!((0..1_000).all(|_| !rng.chance(0.0)));
        assert!((0..1_000).all(|_| rng.chance(1.0)));
        let hits = (0..10_000).filter(|_| rng.chance(0.25)).count();
        assert!((2_300..2_700).contains(&hits), "{hits} of 10000 at 0.25");
        assert!((0..1_000).all(|_| (0.0..1.0).contains(&rng.unit())));
    }

    #[test]
    fn random_seeds_differ() {
        assert_ne!(SplitMix::random_seed(), SplitMix::random_seed());
    }
}
