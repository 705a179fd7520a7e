//! One read of a breaker, and the JSON shape of `GET /breakers`.

use std::time::Duration;

use interlock::mode::Mode;
use interlock::storage::SharedState;
use interlock::{
    CircuitBreaker, Config, HalfOpenPolicy, SlidingWindow, Snapshot, State, Timestamp, TripPolicy,
};
use serde::Serialize;

/// Seconds as a JSON number.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Milliseconds of a duration, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One read of a breaker: everything the views are made of, taken in one
/// pass (a few short locks of the breaker, no storage call).
#[derive(Debug)]
pub(crate) struct Reading {
    pub(crate) name: String,
    pub(crate) state: State,
    pub(crate) snapshot: Snapshot,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) degraded: bool,
    pub(crate) coordinated: bool,
    pub(crate) shared: Option<SharedState>,
    /// On the breaker's clock, as `now`.
    pub(crate) since: Timestamp,
    pub(crate) created: Timestamp,
    pub(crate) now: Timestamp,
    pub(crate) failure_rate_threshold: f64,
}

impl Reading {
    pub(crate) fn of<M: Mode>(breaker: &CircuitBreaker<M>) -> Reading {
        Reading {
            name: breaker.name().to_owned(),
            state: breaker.state(),
            snapshot: breaker.snapshot(),
            retry_after: breaker.retry_after(),
            degraded: breaker.is_degraded(),
            coordinated: breaker.is_coordinated(),
            shared: breaker.shared_view(),
            since: breaker.state_since(),
            created: breaker.created_at(),
            now: breaker.now(),
            failure_rate_threshold: breaker.config().failure_rate_threshold(),
        }
    }

    /// `t` of the breaker's clock on a clock whose reading now is
    /// `feed_now` ms, through the time elapsed since (so the two clocks
    /// need not share an origin).
    pub(crate) fn to_feed_ms(&self, t: Timestamp, feed_now: u64) -> u64 {
        feed_now.saturating_sub(millis(self.now.saturating_duration_since(t)))
    }
}

/// Everything `GET /breakers` says about one breaker.
#[derive(Debug, Serialize)]
pub(crate) struct BreakerView {
    pub(crate) name: String,
    pub(crate) state: &'static str,
    /// When the current state began, in ms of the feed's clock (as `now`).
    pub(crate) state_since: u64,
    /// When the breaker was created, in ms of the feed's clock.
    pub(crate) created_at: u64,
    pub(crate) snapshot: SnapshotView,
    pub(crate) failure_rate: f64,
    pub(crate) slow_call_rate: f64,
    pub(crate) retry_after_secs: Option<f64>,
    pub(crate) last_failure: Option<FailureView>,
    pub(crate) is_coordinated: bool,
    pub(crate) is_degraded: bool,
    pub(crate) generation: u64,
    pub(crate) shared: Option<SharedView>,
    pub(crate) config: ConfigView,
}

impl BreakerView {
    /// The view of `breaker`, its times on a clock reading `feed_now` ms.
    pub(crate) fn of<M: Mode>(breaker: &CircuitBreaker<M>, feed_now: u64) -> BreakerView {
        let r = Reading::of(breaker);
        BreakerView {
            state: r.state.as_str(),
            state_since: r.to_feed_ms(r.since, feed_now),
            created_at: r.to_feed_ms(r.created, feed_now),
            snapshot: SnapshotView::from(r.snapshot),
            failure_rate: r.snapshot.failure_rate(),
            slow_call_rate: r.snapshot.slow_call_rate(),
            retry_after_secs: r.retry_after.map(secs),
            last_failure: breaker.last_failure().map(|f| FailureView {
                type_name: f.type_name(),
                message: f.message().to_owned(),
            }),
            is_coordinated: r.coordinated,
            is_degraded: r.degraded,
            generation: breaker.generation(),
            shared: r.shared.as_ref().map(SharedView::from),
            config: ConfigView::of(breaker.config()),
            name: r.name,
        }
    }
}

/// A window's totals.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct SnapshotView {
    pub(crate) total_calls: u64,
    pub(crate) failed_calls: u64,
    pub(crate) slow_calls: u64,
}

impl From<Snapshot> for SnapshotView {
    fn from(s: Snapshot) -> Self {
        SnapshotView {
            total_calls: s.total_calls,
            failed_calls: s.failed_calls,
            slow_calls: s.slow_calls,
        }
    }
}

/// The most recent failure.
#[derive(Debug, Serialize)]
pub(crate) struct FailureView {
    pub(crate) type_name: &'static str,
    pub(crate) message: String,
}

/// The shared state of a coordinated breaker, as this instance last read
/// it from the storage (or as a fleet write answered).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct SharedView {
    pub(crate) state: &'static str,
    pub(crate) version: u64,
    /// When the shared OPEN began, in ms of the storage's clock (Unix time
    /// for Redis).
    pub(crate) opened_at: u64,
    pub(crate) probes_permitted: u32,
    pub(crate) probes_remaining: u32,
    pub(crate) probes_completed: u32,
    pub(crate) probe_failures: u32,
    pub(crate) probe_slows: u32,
}

impl From<&SharedState> for SharedView {
    fn from(s: &SharedState) -> Self {
        SharedView {
            state: s.state.as_str(),
            version: s.version,
            opened_at: s.opened_at.as_nanos() / 1_000_000,
            probes_permitted: s.probes_permitted,
            probes_remaining: s.probes_remaining,
            probes_completed: s.probes_completed,
            probe_failures: s.probe_failures,
            probe_slows: s.probe_slows,
        }
    }
}

/// The config fields an operator reads.
#[derive(Debug, Serialize)]
pub(crate) struct ConfigView {
    pub(crate) failure_rate_threshold: f64,
    pub(crate) slow_call_rate_threshold: f64,
    pub(crate) slow_call_duration_threshold_secs: f64,
    pub(crate) minimum_number_of_calls: u32,
    pub(crate) sliding_window: WindowView,
    pub(crate) wait_duration_in_open_secs: f64,
    pub(crate) wait_duration_backoff_multiplier: f64,
    pub(crate) wait_duration_in_open_max_secs: Option<f64>,
    /// How long a HALF_OPEN round may stall before it is abandoned (ruling
    /// D7); `null` when it never is (`Duration::MAX`).
    pub(crate) max_wait_in_half_open_secs: Option<f64>,
    pub(crate) permitted_calls_in_half_open: u32,
    pub(crate) max_concurrent_probes: u32,
    pub(crate) auto_transition: bool,
    pub(crate) trip_policy: PolicyView,
    pub(crate) half_open_policy: PolicyView,
}

impl ConfigView {
    pub(crate) fn of(c: &Config) -> ConfigView {
        ConfigView {
            failure_rate_threshold: c.failure_rate_threshold(),
            slow_call_rate_threshold: c.slow_call_rate_threshold(),
            slow_call_duration_threshold_secs: secs(c.slow_call_duration_threshold()),
            minimum_number_of_calls: c.minimum_number_of_calls(),
            sliding_window: WindowView::from(c.sliding_window()),
            wait_duration_in_open_secs: secs(c.wait_duration_in_open()),
            wait_duration_backoff_multiplier: c.wait_duration_backoff_multiplier(),
            wait_duration_in_open_max_secs: c.wait_duration_in_open_max().map(secs),
            max_wait_in_half_open_secs: Some(c.max_wait_in_half_open())
                .filter(|d| *d != Duration::MAX)
                .map(secs),
            permitted_calls_in_half_open: c.permitted_calls_in_half_open(),
            max_concurrent_probes: c.max_concurrent_probes(),
            auto_transition: c.auto_transition(),
            trip_policy: PolicyView::trip(c.trip_policy()),
            half_open_policy: PolicyView::half_open(c.half_open_policy()),
        }
    }
}

/// `{"kind": "count", "size": 100}` or `{"kind": "time", "size": 30}` (seconds).
#[derive(Debug, Serialize)]
pub(crate) struct WindowView {
    pub(crate) kind: &'static str,
    pub(crate) size: u32,
}

impl From<SlidingWindow> for WindowView {
    fn from(w: SlidingWindow) -> Self {
        let kind = match w {
            SlidingWindow::Count(_) => "count",
            SlidingWindow::Time(_) => "time",
        };
        WindowView {
            kind,
            size: w.size(),
        }
    }
}

/// A policy: its kind and, where it has them, its parameters.
#[derive(Debug, Serialize)]
pub(crate) struct PolicyView {
    pub(crate) kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) threshold: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) failures: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) period_secs: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) successes: Option<u32>,
}

impl PolicyView {
    fn kind(kind: &'static str) -> PolicyView {
        PolicyView {
            kind,
            threshold: None,
            failures: None,
            period_secs: None,
            successes: None,
        }
    }

    fn trip(p: TripPolicy) -> PolicyView {
        match p {
            TripPolicy::FailureRate => PolicyView::kind("failure_rate"),
            TripPolicy::ConsecutiveFailures { threshold, .. } => PolicyView {
                threshold: Some(threshold),
                ..PolicyView::kind("consecutive_failures")
            },
            TripPolicy::FailuresWithin {
                failures, period, ..
            } => PolicyView {
                failures: Some(failures),
                period_secs: Some(secs(period)),
                ..PolicyView::kind("failures_within")
            },
            _ => PolicyView::kind("other"),
        }
    }

    fn half_open(p: HalfOpenPolicy) -> PolicyView {
        match p {
            HalfOpenPolicy::ProbeRound => PolicyView::kind("probe_round"),
            HalfOpenPolicy::ConsecutiveSuccesses { successes, .. } => PolicyView {
                successes: Some(successes),
                ..PolicyView::kind("consecutive_successes")
            },
            _ => PolicyView::kind("other"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_limit_shows_in_seconds_and_never_as_null() {
        let default = Config::builder()
            .wait_duration_in_open(Duration::from_secs(5))
            .build()
            .unwrap();
        let view = serde_json::to_value(ConfigView::of(&default)).unwrap();
        assert_eq!(
            view["max_wait_in_half_open_secs"], 5.0,
            "follows the open wait"
        );
        let set = default
            .to_builder()
            .max_wait_in_half_open(Duration::from_millis(1500))
            .build()
            .unwrap();
        let view = serde_json::to_value(ConfigView::of(&set)).unwrap();
        assert_eq!(view["max_wait_in_half_open_secs"], 1.5);
        let never = set
            .to_builder()
            .max_wait_in_half_open(Duration::MAX)
            .build()
            .unwrap();
        let view = serde_json::to_value(ConfigView::of(&never)).unwrap();
        assert!(view["max_wait_in_half_open_secs"].is_null(), "{view}");
    }
}
