//! Trip and half-open decision policies.
//!
//! A policy only decides; the [`Machine`](crate::Machine) owns windows, probe
//! rounds, generations and transitions. The defaults are the original's
//! rate-based rules.

use crate::config::Config;
use crate::error::ConfigError;

/// What trips a CLOSED breaker.
///
/// ```
/// use interlock::{Config, TripPolicy};
///
/// let config = Config::builder().trip_policy(TripPolicy::FailureRate).build()?;
/// assert_eq!(config.trip_policy(), TripPolicy::FailureRate);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TripPolicy {
    /// Trip once the window holds `minimum_number_of_calls` and its failure
    /// rate reaches `failure_rate_threshold` or its slow-call rate reaches
    /// `slow_call_rate_threshold` (R7).
    #[default]
    FailureRate,
}

impl TripPolicy {
    pub(crate) fn validate(&self, _config: &Config) -> Result<(), ConfigError> {
        match self {
            TripPolicy::FailureRate => Ok(()),
        }
    }
}

/// What decides a HALF_OPEN probe round.
///
/// ```
/// use interlock::{Config, HalfOpenPolicy};
///
/// let config = Config::builder().half_open_policy(HalfOpenPolicy::ProbeRound).build()?;
/// assert_eq!(config.half_open_policy(), HalfOpenPolicy::ProbeRound);
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
}

impl HalfOpenPolicy {
    pub(crate) fn validate(&self, _config: &Config) -> Result<(), ConfigError> {
        match self {
            HalfOpenPolicy::ProbeRound => Ok(()),
        }
    }
}
