//! Trip and half-open decision policies.
//!
//! A policy only decides; the [`Machine`](crate::Machine) owns windows, probe
//! rounds, generations and transitions, so every policy gets the same
//! overrides, listeners, classification, slow-call detection and registry.
//! The defaults are the original's rate-based rules; the count-based ones
//! let a breaker migrated from failsafe, pybreaker or cachekit keep its
//! behaviour (see the migration guide, `docs/migration.md`).

use std::time::Duration;

use crate::error::ConfigError;

/// What trips a CLOSED breaker.
///
/// Whatever the policy, the slow-call rule stays on: the breaker also trips
/// once the window holds `minimum_number_of_calls` and its slow-call rate
/// reaches `slow_call_rate_threshold`.
///
/// ```
/// use interlock::{Config, TripPolicy};
/// use std::time::Duration;
///
/// // pybreaker's / failsafe's "5 failures in a row".
/// let in_a_row = Config::builder().trip_policy(TripPolicy::consecutive_failures(5)).build()?;
/// // cachekit's "5 failures within a rolling 60 s".
/// let rolling = Config::builder()
///     .trip_policy(TripPolicy::failures_within(5, Duration::from_secs(60)))
///     .build()?;
/// assert_ne!(in_a_row.trip_policy(), rolling.trip_policy());
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TripPolicy {
    /// Trip once the window holds `minimum_number_of_calls` and its failure
    /// rate reaches `failure_rate_threshold` (R7).
    #[default]
    FailureRate,
    /// Trip after `threshold` failures in a row; any success resets the count.
    #[non_exhaustive]
    ConsecutiveFailures {
        /// Failures in a row that trip the breaker (at least 1).
        threshold: u32,
    },
    /// Trip after `failures` failures within a rolling `period` (both ends
    /// inclusive); successes do not reset the count, older failures stop
    /// counting.
    #[non_exhaustive]
    FailuresWithin {
        /// Failures that trip the breaker (at least 1).
        failures: u32,
        /// How far back they count (not zero).
        period: Duration,
    },
}

/// The most failures a [`TripPolicy::FailuresWithin`] may count: it keeps
/// one timestamp per failure.
pub const MAX_FAILURES_WITHIN: u32 = 1 << 16;

impl TripPolicy {
    /// Trip after `threshold` failures in a row.
    #[must_use]
    pub const fn consecutive_failures(threshold: u32) -> Self {
        TripPolicy::ConsecutiveFailures { threshold }
    }

    /// Trip after `failures` failures within a rolling `period`.
    #[must_use]
    pub const fn failures_within(failures: u32, period: Duration) -> Self {
        TripPolicy::FailuresWithin { failures, period }
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            TripPolicy::FailureRate => Ok(()),
            TripPolicy::ConsecutiveFailures { threshold: 0 } => Err(ConfigError::new(
                "trip_policy",
                "consecutive_failures needs a threshold of at least 1",
            )),
            TripPolicy::ConsecutiveFailures { .. } => Ok(()),
            TripPolicy::FailuresWithin { failures, period } => {
                if failures == 0 || failures > MAX_FAILURES_WITHIN {
                    Err(ConfigError::new(
                        "trip_policy",
                        format!(
                            "failures_within needs between 1 and {MAX_FAILURES_WITHIN} failures, got {failures}"
                        ),
                    ))
                } else if period.is_zero() {
                    Err(ConfigError::new(
                        "trip_policy",
                        "failures_within needs a non-zero period",
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// What decides a HALF_OPEN probe round.
///
/// ```
/// use interlock::{Config, HalfOpenPolicy};
///
/// // Close after 3 good probes in a row, re-open on the first bad one.
/// let config = Config::builder()
///     .permitted_calls_in_half_open(3)
///     .half_open_policy(HalfOpenPolicy::consecutive_successes(3))
///     .build()?;
/// assert_eq!(config.half_open_policy(), HalfOpenPolicy::consecutive_successes(3));
///
/// // It cannot ask for more successes than the round has probes.
/// let err = Config::builder()
///     .permitted_calls_in_half_open(2)
///     .half_open_policy(HalfOpenPolicy::consecutive_successes(3))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "half_open_policy");
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HalfOpenPolicy {
    /// Admit `permitted_calls_in_half_open` probes; at the last verdict,
    /// re-open if the probes' failure or slow-call rate reaches its
    /// threshold, otherwise close (R8.3).
    #[default]
    ProbeRound,
    /// Close after `successes` probes in a row that neither failed nor ran
    /// slow; re-open on the first that did. Inconclusive probes hand their
    /// slot back without breaking the run. Like every policy, a round that
    /// a probe never reported back to is abandoned after
    /// [`max_wait_in_half_open`](crate::Config::max_wait_in_half_open).
    #[non_exhaustive]
    ConsecutiveSuccesses {
        /// Good probes in a row that close the breaker (1 to
        /// `permitted_calls_in_half_open`).
        successes: u32,
    },
    /// Progressive recovery (ruling D8): a single probe first, then each
    /// stage admits its share of the calls and is judged on its own
    /// verdicts; see [`ProgressiveStages`]. Local only: a coordinated
    /// breaker or registry refuses it at `build()`.
    Progressive(ProgressiveStages),
}

/// The most stages a [`ProgressiveStages`] may hold.
pub const MAX_PROGRESSIVE_STAGES: usize = 16;

/// Shares are kept in millionths of the calls, so that admission is exact
/// integer arithmetic.
const PER_MILLION: u32 = 1_000_000;

/// The stages of [`HalfOpenPolicy::Progressive`].
///
/// After the single probe of HALF_OPEN succeeded, stage `k` admits its
/// share of the admission attempts deterministically (a credit counter:
/// each attempt adds the share, an attempt is admitted once the credit
/// reaches one whole call, which it then spends; the others are refused as
/// in any HALF_OPEN), with no cap on concurrency. Once the stage holds
/// `minimum_calls` verdicts it is judged on them alone: a failure rate at
/// `failure_rate_threshold` or a slow-call rate at
/// `slow_call_rate_threshold` re-opens (a failed round for the backoff),
/// otherwise the next stage starts, and after the last the breaker closes.
/// Shares are kept in millionths of the calls.
///
/// ```
/// use interlock::{Config, HalfOpenPolicy};
///
/// let config = Config::builder().half_open_policy(HalfOpenPolicy::progressive()).build()?;
/// assert_eq!(config.half_open_policy(), HalfOpenPolicy::progressive());
///
/// // Shares must grow strictly, within (0, 1].
/// let err = Config::builder()
///     .half_open_policy(HalfOpenPolicy::progressive_stages(&[0.5, 0.25], 10))
///     .build()
///     .unwrap_err();
/// assert_eq!(err.field(), "half_open_policy");
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProgressiveStages {
    /// Each stage's share in millionths; only the first `len` count.
    shares: [u32; MAX_PROGRESSIVE_STAGES],
    /// The number of shares given (may exceed the array: refused at build).
    given: usize,
    minimum_calls: u32,
}

impl ProgressiveStages {
    /// The default stages: 0.1 %, 1 %, 5 %, 10 %, 25 %, 50 % of the calls,
    /// each judged on at least 10 verdicts.
    pub const DEFAULT_SHARES: [f64; 6] = [0.001, 0.01, 0.05, 0.10, 0.25, 0.50];

    /// The default minimum number of verdicts per stage.
    pub const DEFAULT_MINIMUM_CALLS: u32 = 10;

    /// Stages with these shares (fractions of the calls), each judged once
    /// it holds `minimum_calls` verdicts. Checked at `Config::build()`.
    #[must_use]
    pub fn new(shares: &[f64], minimum_calls: u32) -> Self {
        let mut kept = [0; MAX_PROGRESSIVE_STAGES];
        for (slot, share) in kept.iter_mut().zip(shares) {
            // `as` saturates (NaN and negatives become 0), and every value
            // out of range is refused by `validate`.
            *slot = (share * f64::from(PER_MILLION)).round() as u32;
        }
        ProgressiveStages {
            shares: kept,
            given: shares.len(),
            minimum_calls,
        }
    }

    /// The number of stages.
    #[must_use]
    pub fn len(&self) -> usize {
        self.given.min(MAX_PROGRESSIVE_STAGES)
    }

    /// Whether there is no stage (refused at build).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.given == 0
    }

    /// Stage `index`'s share in millionths of the calls.
    pub(crate) fn share_per_million(&self, index: usize) -> u32 {
        self.shares[index]
    }

    /// Stage `index`'s share of the calls (0-based), if there is one.
    #[must_use]
    pub fn share(&self, index: usize) -> Option<f64> {
        (index < self.len()).then(|| f64::from(self.shares[index]) / f64::from(PER_MILLION))
    }

    /// The verdicts a stage needs before it is judged.
    #[must_use]
    pub fn minimum_calls(&self) -> u32 {
        self.minimum_calls
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let refuse = |why: String| Err(ConfigError::new("half_open_policy", why));
        if self.given == 0 || self.given > MAX_PROGRESSIVE_STAGES {
            return refuse(format!(
                "progressive needs 1 to {MAX_PROGRESSIVE_STAGES} stages, got {}",
                self.given
            ));
        }
        if self.minimum_calls == 0 {
            return refuse("progressive needs a minimum of at least 1 call per stage".into());
        }
        let mut previous = 0;
        for &share in &self.shares[..self.given] {
            if share == 0 || share > PER_MILLION {
                return refuse(
                    "progressive stage shares must lie in (0, 1], at least one in a million".into(),
                );
            }
            if share <= previous {
                return refuse("progressive stage shares must grow strictly".into());
            }
            previous = share;
        }
        Ok(())
    }
}

impl Default for ProgressiveStages {
    fn default() -> Self {
        ProgressiveStages::new(&Self::DEFAULT_SHARES, Self::DEFAULT_MINIMUM_CALLS)
    }
}

impl HalfOpenPolicy {
    /// Progressive recovery with the default stages (see
    /// [`ProgressiveStages`]).
    #[must_use]
    pub fn progressive() -> Self {
        HalfOpenPolicy::Progressive(ProgressiveStages::default())
    }

    /// Progressive recovery with these shares and per-stage minimum.
    #[must_use]
    pub fn progressive_stages(shares: &[f64], minimum_calls: u32) -> Self {
        HalfOpenPolicy::Progressive(ProgressiveStages::new(shares, minimum_calls))
    }

    /// Close after `successes` good probes in a row.
    #[must_use]
    pub const fn consecutive_successes(successes: u32) -> Self {
        HalfOpenPolicy::ConsecutiveSuccesses { successes }
    }

    /// Checks the policy against the round's budget (the config's
    /// `permitted_calls_in_half_open`), passed in so that the policies stay
    /// below the config that holds them.
    pub(crate) fn validate(&self, permitted_calls_in_half_open: u32) -> Result<(), ConfigError> {
        match *self {
            HalfOpenPolicy::ProbeRound => Ok(()),
            HalfOpenPolicy::ConsecutiveSuccesses { successes } => {
                if successes == 0 || successes > permitted_calls_in_half_open {
                    Err(ConfigError::new(
                        "half_open_policy",
                        format!(
                            "consecutive_successes needs between 1 and permitted_calls_in_half_open = {} successes, got {successes}",
                            permitted_calls_in_half_open
                        ),
                    ))
                } else {
                    Ok(())
                }
            }
            HalfOpenPolicy::Progressive(stages) => stages.validate(),
        }
    }
}
