//! Delays between retries: any `Iterator<Item = Duration>` is a backoff.
//!
//! These are infinite; the [`Retry`](super::Retry) caps the attempts. A
//! finite iterator also works: the retry stops when it runs out.
//!
//! ```
//! use interlock::pipeline::backoff::Exponential;
//! use std::time::Duration;
//!
//! let delays: Vec<_> = Exponential::new(Duration::from_millis(100))
//!     .max(Duration::from_millis(500))
//!     .take(4)
//!     .collect();
//! assert_eq!(delays, [100, 200, 400, 500].map(Duration::from_millis));
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The same delay every time.
///
/// ```
/// use interlock::pipeline::backoff::Constant;
/// use std::time::Duration;
///
/// let mut delays = Constant::new(Duration::from_secs(1));
/// assert_eq!(delays.next(), Some(Duration::from_secs(1)));
/// assert_eq!(delays.next(), Some(Duration::from_secs(1)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant {
    delay: Duration,
}

impl Constant {
    /// Always `delay`.
    #[must_use]
    pub fn new(delay: Duration) -> Self {
        Constant { delay }
    }

    /// The same delays, each drawn at random from `[delay / 2, delay]` by a
    /// generator seeded with `seed` (see [`Jitter`]).
    #[must_use]
    pub fn jitter(self, seed: u64) -> Jitter<Self> {
        Jitter::new(self, seed)
    }
}

impl Iterator for Constant {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.delay)
    }
}

/// `initial`, then each delay `factor` times the one before (default 2),
/// never above `max` (default unbounded).
///
/// ```
/// use interlock::pipeline::backoff::Exponential;
/// use std::time::Duration;
///
/// let delays: Vec<u64> = Exponential::new(Duration::from_millis(100))
///     .factor(3)
///     .max(Duration::from_secs(1))
///     .take(5)
///     .map(|d| d.as_millis() as u64)
///     .collect();
/// assert_eq!(delays, [100, 300, 900, 1_000, 1_000]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exponential {
    next: Duration,
    factor: u32,
    max: Duration,
}

impl Exponential {
    /// Starts at `initial`, doubling.
    #[must_use]
    pub fn new(initial: Duration) -> Self {
        Exponential {
            next: initial,
            factor: 2,
            max: Duration::MAX,
        }
    }

    /// Multiplies each delay by `factor` (1 makes it constant).
    #[must_use]
    pub fn factor(mut self, factor: u32) -> Self {
        self.factor = factor;
        self
    }

    /// Caps every delay at `max`.
    #[must_use]
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// The same delays, each drawn at random from `[delay / 2, delay]` by a
    /// generator seeded with `seed` (see [`Jitter`]).
    #[must_use]
    pub fn jitter(self, seed: u64) -> Jitter<Self> {
        Jitter::new(self, seed)
    }
}

impl Iterator for Exponential {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next.min(self.max);
        self.next = self.next.saturating_mul(self.factor).min(self.max);
        Some(delay)
    }
}

/// Another backoff's delays, each drawn uniformly from `[delay / 2, delay]`
/// ("equal jitter"): callers that failed together do not retry together.
///
/// The generator (SplitMix64) is seeded, so a run is reproducible. Clones
/// share it, so the operations a [`Retry`](super::Retry) starts from one
/// backoff each draw different delays, in a deterministic sequence.
///
/// ```
/// use interlock::pipeline::backoff::Constant;
/// use std::time::Duration;
///
/// let a: Vec<_> = Constant::new(Duration::from_secs(1)).jitter(7).take(3).collect();
/// let b: Vec<_> = Constant::new(Duration::from_secs(1)).jitter(7).take(3).collect();
/// assert_eq!(a, b); // the same seed gives the same delays
/// assert!(a.iter().all(|d| *d >= Duration::from_millis(500) && *d <= Duration::from_secs(1)));
/// ```
#[derive(Clone, Debug)]
pub struct Jitter<I> {
    inner: I,
    state: Arc<AtomicU64>,
}

impl<I> Jitter<I> {
    /// Jitters `inner`'s delays with a generator seeded with `seed`.
    pub fn new(inner: I, seed: u64) -> Self {
        Jitter {
            inner,
            state: Arc::new(AtomicU64::new(seed)),
        }
    }

    /// A uniform draw in `[0, 1)`.
    fn unit(&self) -> f64 {
        unit(&self.state)
    }
}

/// A uniform draw in `[0, 1)` from the SplitMix64 generator whose state is
/// `state` (shared draws step it atomically).
pub(crate) fn unit(state: &AtomicU64) -> f64 {
    const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut z = state
        .fetch_add(GOLDEN, Ordering::Relaxed)
        .wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 53 random bits, exactly representable.
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A seed that differs between processes (and between calls), for
/// generators nobody seeded: std's per-process random hash keys.
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    static CALLS: AtomicU64 = AtomicU64::new(0);
    std::collections::hash_map::RandomState::new().hash_one(CALLS.fetch_add(1, Ordering::Relaxed))
}

/// A uniform extra wait in `[0, max]`.
pub(crate) fn jitter(state: &AtomicU64, max: Duration) -> Duration {
    max.mul_f64(unit(state))
}

impl<I: Iterator<Item = Duration>> Iterator for Jitter<I> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.inner.next()?;
        let half = delay / 2;
        // Saturating: `Duration::MAX` (no deadline) stays about that, and
        // the float rounding of a huge delay never overflows.
        Some(half.saturating_add(half.mul_f64(self.unit())))
    }
}
