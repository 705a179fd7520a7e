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
}

impl HalfOpenPolicy {
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
        }
    }
}
