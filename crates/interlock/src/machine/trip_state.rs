//! The trip policy's own memory (the window is shared by every policy):
//! a failure rate, a run of consecutive failures, or failures within a period.

use super::*;

/// The trip policy's own memory (the window is shared by every policy).
#[derive(Clone, Debug)]
pub(super) enum TripState {
    Rate,
    Consecutive {
        threshold: u32,
        count: u32,
    },
    Within {
        failures: usize,
        period: Duration,
        times: VecDeque<Timestamp>,
    },
}

impl TripState {
    pub(super) fn new(policy: TripPolicy) -> Self {
        match policy {
            TripPolicy::ConsecutiveFailures { threshold } => TripState::Consecutive {
                threshold,
                count: 0,
            },
            TripPolicy::FailuresWithin { failures, period } => TripState::Within {
                failures: failures as usize,
                period,
                times: VecDeque::with_capacity(failures as usize),
            },
            // `FailureRate` and any later rate-based policy.
            _ => TripState::Rate,
        }
    }

    pub(super) fn clear(&mut self) {
        match self {
            TripState::Rate => {}
            TripState::Consecutive { count, .. } => *count = 0,
            TripState::Within { times, .. } => times.clear(),
        }
    }

    /// Counts `outcome` and says whether the policy's own rule trips, the
    /// window holding `total_calls` of which `failed_calls` failed.
    ///
    /// The two counts come as values, not as the window's [`Snapshot`]
    /// behind a reference: that made the caller copy the counts to the
    /// stack with one wide load right after the window's narrower stores
    /// of them, a load that waited for those stores on every failure.
    pub(super) fn failure_rule(
        &mut self,
        now: Timestamp,
        outcome: Outcome,
        total_calls: u64,
        failed_calls: u64,
        c: &Config,
    ) -> bool {
        match self {
            TripState::Rate => {
                let s = Snapshot {
                    total_calls,
                    failed_calls,
                    slow_calls: 0,
                };
                total_calls >= u64::from(c.minimum_number_of_calls)
                    && s.failure_rate() >= c.failure_rate_threshold
            }
            TripState::Consecutive { threshold, count } => {
                *count = if outcome.is_failure() {
                    count.saturating_add(1)
                } else {
                    0
                };
                *count >= *threshold
            }
            TripState::Within {
                failures,
                period,
                times,
            } => {
                if !outcome.is_failure() {
                    return false;
                }
                if times.len() == *failures {
                    times.pop_front();
                }
                times.push_back(now);
                while times
                    .front()
                    .is_some_and(|&t| now.saturating_duration_since(t) > *period)
                {
                    times.pop_front();
                }
                times.len() >= *failures
            }
        }
    }
}
