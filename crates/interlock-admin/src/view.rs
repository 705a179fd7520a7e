//! The JSON shapes of `GET /breakers`, the SSE messages and the history.

use std::time::Duration;

use interlock::mode::Mode;
use interlock::{CircuitBreaker, Config, HalfOpenPolicy, SlidingWindow, Snapshot, TripPolicy};
use serde::Serialize;

/// Seconds as a JSON number.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Everything `GET /breakers` says about one breaker: the live fields,
/// then the ones that rarely change.
#[derive(Debug, Serialize)]
pub(crate) struct BreakerView {
    #[serde(flatten)]
    pub(crate) live: LiveView,
    pub(crate) generation: u64,
    pub(crate) shared: Option<SharedView>,
    pub(crate) config: ConfigView,
}

impl BreakerView {
    pub(crate) fn of<M: Mode>(breaker: &CircuitBreaker<M>) -> BreakerView {
        BreakerView {
            live: LiveView::of(breaker),
            generation: breaker.generation(),
            shared: breaker.shared_view().map(|s| SharedView {
                state: s.state.as_str(),
                version: s.version,
            }),
            config: ConfigView::of(breaker.config()),
        }
    }
}

/// What changes from second to second: one breaker in a `sample` message.
#[derive(Debug, Serialize)]
pub(crate) struct LiveView {
    pub(crate) name: String,
    pub(crate) state: &'static str,
    pub(crate) snapshot: SnapshotView,
    pub(crate) failure_rate: f64,
    pub(crate) slow_call_rate: f64,
    pub(crate) retry_after_secs: Option<f64>,
    pub(crate) last_failure: Option<FailureView>,
    pub(crate) is_coordinated: bool,
    pub(crate) is_degraded: bool,
}

impl LiveView {
    pub(crate) fn of<M: Mode>(breaker: &CircuitBreaker<M>) -> LiveView {
        let snapshot = breaker.snapshot();
        LiveView {
            name: breaker.name().to_owned(),
            state: breaker.state().as_str(),
            snapshot: SnapshotView::from(snapshot),
            failure_rate: snapshot.failure_rate(),
            slow_call_rate: snapshot.slow_call_rate(),
            retry_after_secs: breaker.retry_after().map(secs),
            last_failure: breaker.last_failure().map(|f| FailureView {
                type_name: f.type_name(),
                message: f.message().to_owned(),
            }),
            is_coordinated: breaker.is_coordinated(),
            is_degraded: breaker.is_degraded(),
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

/// The cached shared state of a coordinated breaker.
#[derive(Debug, Serialize)]
pub(crate) struct SharedView {
    pub(crate) state: &'static str,
    pub(crate) version: u64,
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
