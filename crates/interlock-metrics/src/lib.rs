//! Metrics for [`interlock`] circuit breakers through the [`metrics`]
//! facade.
//!
//! [`MetricsEventListener`] is an [`EventListener`] that turns every breaker,
//! storage and pipeline event into `metrics` counters, histograms and
//! gauges, named the Prometheus way. Install any `metrics` recorder:
//! `metrics-exporter-prometheus` serves them to Prometheus with no
//! OpenTelemetry in the process (see the `prometheus` example, an axum
//! service with a `/metrics` route).
//!
//! ```
//! use interlock::{CircuitBreaker, ManualClock};
//! use interlock_metrics::MetricsEventListener;
//! use metrics_util::debugging::{DebugValue, DebuggingRecorder};
//! use std::time::Duration;
//!
//! let recorder = DebuggingRecorder::new();
//! let snapshotter = recorder.snapshotter();
//! let clock = ManualClock::new();
//! metrics::with_local_recorder(&recorder, || {
//!     let breaker = CircuitBreaker::builder("payments")
//!         .clock(clock.clone())
//!         .listener(MetricsEventListener::new())
//!         .build()?;
//!     breaker.call(|| {
//!         clock.advance(Duration::from_millis(250));
//!         Ok::<_, std::io::Error>(())
//!     })?;
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//!
//! let durations = snapshotter.snapshot().into_vec().into_iter().find_map(|(key, _, _, value)| {
//!     (key.key().name() == "interlock_call_duration_seconds").then_some(value)
//! });
//! assert_eq!(durations, Some(DebugValue::Histogram(vec![0.25.into()])));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Metrics
//!
//! | metric | kind | labels | recorded on |
//! |---|---|---|---|
//! | `interlock_call_duration_seconds` | histogram (seconds) | `breaker`, `outcome` | every settled call, in every state (`disabled` included) |
//! | `interlock_call_rejected_total` | counter | `breaker` | every rejected call (`open`, `half_open`, `forced_open`) |
//! | `interlock_state_changes_total` | counter | `breaker`, `from`, `to` | every state change |
//! | `interlock_reset_total` | counter | `breaker` | every `reset()` |
//! | `interlock_storage_events_total` | counter | `breaker`, `event`, `error` (only for `degraded`) | shared-storage outages, recoveries and dropped writes |
//! | `interlock_pipeline_events_total` | counter | `name`, `event` | retries, bulkhead rejections, fallbacks, hedges, rate-limit refusals, chaos injections |
//! | `interlock_state` | gauge | `breaker`, `state` | per breaker: 1 for the current state, 0 for the five others; seeded with the state a breaker is built in |
//! | `interlock_failure_rate`, `interlock_slow_call_rate` | gauge (0 to 1) | `breaker` | [`MetricsEventListener::sample`]: the sliding window's rates |
//! | `interlock_buffered_calls` | gauge | `breaker` | `sample`: the calls in the sliding window |
//! | `interlock_retry_after_seconds` | gauge (seconds) | `breaker` | `sample`: the wait left in OPEN; 0 once elapsed and in other states (alert on `> 0`) |
//!
//! The names are also constants in [`names`]. Label values:
//!
//! - `outcome`: `success`, `failure`, `slow_success`, `slow_failure`
//!   ([`Outcome::as_str`]);
//! - `from`, `to`, `state`: `closed`, `open`, `half_open`, `forced_open`,
//!   `disabled`, `metrics_only` ([`State::as_str`]);
//! - `interlock_storage_events_total` `event`: `degraded`, `recovered`,
//!   `write_dropped`; `error` is the storage error's *type* (a
//!   `std::io::Error`'s kind, else the identifier its `Debug` form starts
//!   with, else `Error`), never its message, so the label's values stay few;
//! - `interlock_pipeline_events_total` `event`: `retry`,
//!   `bulkhead_rejected`, `fallback`, `hedge`, `rate_limit_rejected`,
//!   `fault_injected`, `latency_injected`, `outcome_injected`; `name` is
//!   the strategy's name (a keyed rate limit's key is not a label: one
//!   series per limiter, however many hosts).
//!
//! These are the names OpenTelemetry's Prometheus exporter gives the
//! instruments of `interlock-otel`, so one dashboard serves both. How a
//! histogram is exposed (buckets or quantiles) is the recorder's choice;
//! [`DURATION_BUCKETS`] are the buckets `interlock-otel` uses, ready for
//! `metrics-exporter-prometheus`'s `set_buckets_for_metric`.
//!
//! # Operator overrides
//!
//! The metrics observe calls, not the breaker's sliding window. A
//! `disable()`d breaker records nothing in its window, yet every call it
//! admits is still timed in `interlock_call_duration_seconds` with its
//! classified outcome, and a `force_open()`ed one counts each rejection:
//! dashboards keep moving while an operator has taken a breaker out of
//! enforcement. To silence a breaker, build it without the listener.
//!
//! # The state gauge
//!
//! Events are published after the breaker's lock is released, so two
//! transitions racing on two threads can reach the listener in either
//! order. Each state change therefore moves one unit from `from` to `to`
//! (a decrement and an increment) instead of setting values: additions
//! commute, so once every event has been delivered exactly one state reads
//! 1, whatever the order of delivery; a scrape between two racing
//! deliveries may briefly see a 2 or a -1. A breaker's series are created,
//! with 1 on its initial state, at the first event the listener sees from
//! it; that state is `closed` unless set with
//! [`MetricsEventListener::initial_state`].
//!
//! # Handles and recorders
//!
//! Per breaker, the listener registers its call, rejection, reset and state
//! handles once, at the breaker's first event, and caches them: a call
//! costs a read-locked map lookup and an atomic update, with no allocation
//! and no registry lookup. The handles belong to the recorder installed at
//! that moment (the thread's local recorder, if any, else the global one),
//! so install the recorder before traffic starts. Registering them also
//! exports them at zero from that first event, so a breaker's rejection and
//! reset counters exist before anything happens to them. Descriptions and units
//! are registered at [`MetricsEventListener::new`] and again at each new
//! breaker.
//!
//! # Removed breakers
//!
//! When a [`Registry`] forgets a breaker
//! ([`Registry::remove`](interlock::Registry::remove), `retain`,
//! `expire_after_idle`, `max_breakers`: [`Event::BreakerRemoved`]), the
//! listener sets its six `interlock_state` series to 0 and drops its
//! handles (a thread that reported the breaker lately holds its copy
//! until newer breakers replace it in the thread's cache, never using it
//! again), so it keeps nothing per forgotten breaker
//! ([`MetricsEventListener::breaker_count`] goes down). The `metrics`
//! facade cannot delete a series; the recorder decides when one goes.
//! `metrics-exporter-prometheus` removes series not updated for its
//! `idle_timeout` (`PrometheusBuilder::idle_timeout(MetricKindMask::ALL,
//! Some(..))`): set one, a little longer than the registry's
//! `expire_after_idle`, and a per-host client's series stay bounded too. A
//! breaker created later under the same name starts its series again from
//! its initial state.
//!
//! Give each breaker name to one listener: share a single listener between
//! breakers or registries through an `Arc` (an `Arc` of a listener is a
//! listener). Two listeners seeing the same name would both count its
//! initial state.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85, like `interlock`. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use interlock::mode::Mode;
use interlock::{CircuitBreaker, Event, EventListener, Outcome, PerBreaker, Registry, State};
use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

pub mod names {
    //! The metric names, for bucket configuration and tests.
    //!
    //! ```
    //! assert_eq!(interlock_metrics::names::STATE, "interlock_state");
    //! ```

    /// Histogram of call durations in seconds; labels `breaker`, `outcome`.
    pub const CALL_DURATION: &str = "interlock_call_duration_seconds";
    /// Counter of rejected calls; label `breaker`.
    pub const CALL_REJECTED: &str = "interlock_call_rejected_total";
    /// Counter of state changes; labels `breaker`, `from`, `to`.
    pub const STATE_CHANGES: &str = "interlock_state_changes_total";
    /// Counter of resets; label `breaker`.
    pub const RESET: &str = "interlock_reset_total";
    /// Counter of storage events; labels `breaker`, `event`, `error`.
    pub const STORAGE_EVENTS: &str = "interlock_storage_events_total";
    /// Counter of pipeline events; labels `name`, `event`.
    pub const PIPELINE_EVENTS: &str = "interlock_pipeline_events_total";
    /// Gauge of the current state; labels `breaker`, `state`.
    pub const STATE: &str = "interlock_state";
    /// Gauge of the failure rate over the sliding window (0 to 1), as of
    /// the last [`sample`](crate::MetricsEventListener::sample); label
    /// `breaker`.
    pub const FAILURE_RATE: &str = "interlock_failure_rate";
    /// Gauge of the slow-call rate over the sliding window (0 to 1);
    /// label `breaker`.
    pub const SLOW_CALL_RATE: &str = "interlock_slow_call_rate";
    /// Gauge of the calls in the sliding window; label `breaker`.
    pub const BUFFERED_CALLS: &str = "interlock_buffered_calls";
    /// Gauge of the seconds until an OPEN breaker admits a probe: above 0
    /// while it waits, 0 once the wait has elapsed and in every other
    /// state; label `breaker`.
    pub const RETRY_AFTER: &str = "interlock_retry_after_seconds";
}

/// Histogram buckets for [`names::CALL_DURATION`], in seconds (5 ms to
/// 10 s): the boundaries OpenTelemetry's semantic conventions recommend for
/// request durations, which `interlock-otel` uses too.
///
/// ```
/// assert_eq!(interlock_metrics::DURATION_BUCKETS.len(), 14);
/// ```
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

const OUTCOMES: [Outcome; 4] = [
    Outcome::Success,
    Outcome::Failure,
    Outcome::SlowSuccess,
    Outcome::SlowFailure,
];

/// An [`EventListener`] that records through the `metrics` facade.
///
/// See the [crate documentation](crate) for the metrics and their labels.
///
/// ```
/// use interlock::{Registry, State};
/// use interlock_metrics::MetricsEventListener;
/// use std::sync::Arc;
///
/// // With no recorder installed the measurements go nowhere.
/// let listener = Arc::new(MetricsEventListener::new().initial_state(State::MetricsOnly));
/// let registry = Registry::builder()
///     .initial_state(State::MetricsOnly)
///     .listener(listener.clone())
///     .build()?;
/// registry.get("inventory").force_open();
/// assert_eq!(listener.breaker_count(), 1);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub struct MetricsEventListener {
    initial_state: State,
    /// Found without a lock by the threads that report a breaker often.
    breakers: PerBreaker<Handles>,
}

/// One breaker's cached handles.
struct Handles {
    breaker: SharedString,
    /// Indexed like `OUTCOMES`.
    calls: [Histogram; 4],
    rejected: Counter,
    reset: Counter,
    /// Indexed like `State::ALL`.
    states: [Gauge; 6],
}

impl Handles {
    fn new(name: &str) -> Self {
        let breaker = SharedString::from(Arc::<str>::from(name));
        Handles {
            calls: OUTCOMES.map(|o| {
                metrics::histogram!(names::CALL_DURATION, "breaker" => breaker.clone(), "outcome" => o.as_str())
            }),
            rejected: metrics::counter!(names::CALL_REJECTED, "breaker" => breaker.clone()),
            reset: metrics::counter!(names::RESET, "breaker" => breaker.clone()),
            states: State::ALL.map(|s| {
                metrics::gauge!(names::STATE, "breaker" => breaker.clone(), "state" => s.as_str())
            }),
            breaker,
        }
    }

    fn call(&self, outcome: Outcome) -> &Histogram {
        let i = match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::SlowSuccess => 2,
            Outcome::SlowFailure => 3,
        };
        &self.calls[i]
    }

    fn state(&self, state: State) -> &Gauge {
        let i = match state {
            State::Closed => 0,
            State::Open => 1,
            State::HalfOpen => 2,
            State::ForcedOpen => 3,
            State::Disabled => 4,
            State::MetricsOnly => 5,
        };
        &self.states[i]
    }
}

/// What a storage event reports, for `interlock_storage_events_total`.
#[derive(Clone, Copy, Debug)]
enum StorageEvent<'a> {
    Degraded(&'a (dyn Error + 'static)),
    Recovered,
    WriteDropped,
    NoticesUnavailable,
}

impl MetricsEventListener {
    /// A listener; registers the metrics' descriptions and units with the
    /// recorder installed now, if any.
    ///
    /// ```
    /// let listener = interlock_metrics::MetricsEventListener::new();
    /// let breaker = interlock::CircuitBreaker::builder("search").listener(listener).build()?;
    /// # drop(breaker);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new() -> Self {
        describe();
        MetricsEventListener {
            initial_state: State::Closed,
            breakers: PerBreaker::new(),
        }
    }

    /// Sets the state every breaker is assumed to start in (default
    /// [`State::Closed`]), to match a breaker or registry built with
    /// `initial_state`. The state gauge puts its first 1 there, since
    /// building a breaker emits no event.
    ///
    /// ```
    /// use interlock::{CircuitBreaker, State};
    /// use interlock_metrics::MetricsEventListener;
    ///
    /// let breaker = CircuitBreaker::builder("shadow")
    ///     .initial_state(State::MetricsOnly)
    ///     .listener(MetricsEventListener::new().initial_state(State::MetricsOnly))
    ///     .build()?;
    /// # drop(breaker);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn initial_state(mut self, state: State) -> Self {
        self.initial_state = state;
        self
    }

    /// How many breakers the listener has seen an event from (each has its
    /// own series of `interlock_state`).
    ///
    /// ```
    /// let listener = interlock_metrics::MetricsEventListener::new();
    /// assert_eq!(listener.breaker_count(), 0);
    /// ```
    #[must_use]
    pub fn breaker_count(&self) -> usize {
        self.breakers.len()
    }

    /// Sets the window gauges ([`names::FAILURE_RATE`],
    /// [`names::SLOW_CALL_RATE`], [`names::BUFFERED_CALLS`]) and
    /// [`names::RETRY_AFTER`] of every breaker in `registry` from its
    /// current snapshot. Call it where the metrics are read (in the
    /// `/metrics` handler, before rendering) or on a timer: the values are
    /// those of the moment of the call.
    ///
    /// ```
    /// use interlock::Registry;
    /// use interlock_metrics::MetricsEventListener;
    /// use std::sync::Arc;
    ///
    /// let listener = Arc::new(MetricsEventListener::new());
    /// let registry = Registry::builder().listener(listener.clone()).build()?;
    /// let _ = registry.get("search");
    /// listener.sample(&registry); // e.g. in the scrape handler
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn sample<M: Mode>(&self, registry: &Registry<M>) {
        for (_, breaker) in registry.items() {
            self.sample_breaker(&breaker);
        }
    }

    /// [`sample`](Self::sample) for one breaker.
    pub fn sample_breaker<M: Mode>(&self, breaker: &CircuitBreaker<M>) {
        // Registered at the first sample, so a listener that is never
        // sampled exports only the event series.
        let label = self.handles(breaker.name(), |h| h.breaker.clone());
        let snapshot = breaker.snapshot();
        metrics::gauge!(names::FAILURE_RATE, "breaker" => label.clone())
            .set(snapshot.failure_rate());
        metrics::gauge!(names::SLOW_CALL_RATE, "breaker" => label.clone())
            .set(snapshot.slow_call_rate());
        #[allow(
            clippy::cast_precision_loss,
            reason = "a window holds far fewer than 2^52 calls"
        )]
        let buffered = snapshot.total_calls as f64;
        metrics::gauge!(names::BUFFERED_CALLS, "breaker" => label.clone()).set(buffered);
        let wait = breaker.retry_after().map_or(0.0, |d| d.as_secs_f64());
        metrics::gauge!(names::RETRY_AFTER, "breaker" => label).set(wait);
    }

    /// Runs `f` on the breaker's handles, registered (and its state gauge
    /// seeded) at its creation or first event.
    fn handles<R>(&self, breaker: &str, f: impl FnMut(&Handles) -> R) -> R {
        self.handles_seeded(breaker, self.initial_state, f)
    }

    /// [`handles`](Self::handles), the state gauge seeded with `seed` if
    /// they are new.
    fn handles_seeded<R>(&self, breaker: &str, seed: State, f: impl FnMut(&Handles) -> R) -> R {
        let new = || {
            describe();
            let handles = Handles::new(breaker);
            for state in State::ALL {
                // Increment, never set: a state change delivered concurrently
                // by another thread may already have moved a unit.
                let value = if state == seed { 1.0 } else { 0.0 };
                handles.state(state).increment(value);
            }
            handles
        };
        self.breakers.with(breaker, new, f)
    }

    /// Drops a breaker its registry forgot ([`Event::BreakerRemoved`]): its
    /// state gauge goes to 0 in every state (so no dashboard counts it as
    /// open, closed or anything else) and its cached handles are dropped,
    /// which lets the recorder forget its series (see "Removed breakers").
    fn forget(&self, breaker: &str) {
        self.breakers.remove(breaker, |handles| {
            for state in State::ALL {
                handles.state(state).set(0.0);
            }
        });
    }

    fn storage_event(&self, breaker: &str, event: StorageEvent<'_>) {
        let breaker = self.handles(breaker, |h| h.breaker.clone());
        let counter = match event {
            StorageEvent::Degraded(error) => metrics::counter!(
                names::STORAGE_EVENTS,
                "breaker" => breaker, "event" => "degraded", "error" => error_type(error)
            ),
            StorageEvent::Recovered => metrics::counter!(
                names::STORAGE_EVENTS, "breaker" => breaker, "event" => "recovered"
            ),
            StorageEvent::WriteDropped => metrics::counter!(
                names::STORAGE_EVENTS, "breaker" => breaker, "event" => "write_dropped"
            ),
            StorageEvent::NoticesUnavailable => metrics::counter!(
                names::STORAGE_EVENTS, "breaker" => breaker, "event" => "notices_unavailable"
            ),
        };
        counter.increment(1);
    }

    fn pipeline_event(&self, name: &str, kind: &'static str) {
        metrics::counter!(names::PIPELINE_EVENTS, "name" => name.to_owned(), "event" => kind)
            .increment(1);
    }
}

/// A bounded name for an error's type, for a label: the `ErrorKind` of a
/// `std::io::Error` (`TimedOut`), else the identifier its `Debug` form
/// starts with, which for a derived `Debug` is the type's name or the
/// enum variant's (`ReadFailed`, `Timeout`), else `Error`. Never the
/// message: a label's values must stay few.
fn error_type(error: &(dyn Error + 'static)) -> String {
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        return format!("{:?}", io.kind());
    }
    let debug = format!("{error:?}");
    let ident: String = debug
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    if ident
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
    {
        ident
    } else {
        "Error".to_owned()
    }
}

/// Registers units and descriptions with the current recorder.
fn describe() {
    metrics::describe_histogram!(
        names::CALL_DURATION,
        Unit::Seconds,
        "Duration of the calls a circuit breaker admitted, by outcome"
    );
    metrics::describe_counter!(
        names::CALL_REJECTED,
        "Calls a circuit breaker rejected without running them"
    );
    metrics::describe_counter!(names::STATE_CHANGES, "State changes of a circuit breaker");
    metrics::describe_counter!(names::RESET, "Operator resets of a circuit breaker");
    metrics::describe_counter!(
        names::STORAGE_EVENTS,
        "Shared-storage outages, recoveries and dropped writes"
    );
    metrics::describe_counter!(
        names::PIPELINE_EVENTS,
        "Retries, bulkhead rejections, fallbacks, hedges, rate-limit refusals and chaos injections of pipeline strategies"
    );
    metrics::describe_gauge!(
        names::STATE,
        "Current state of a circuit breaker: 1 for its current state, 0 for the others"
    );
    metrics::describe_gauge!(
        names::FAILURE_RATE,
        "Failure rate over a circuit breaker's sliding window, 0 to 1, as last sampled"
    );
    metrics::describe_gauge!(
        names::SLOW_CALL_RATE,
        "Slow-call rate over a circuit breaker's sliding window, 0 to 1, as last sampled"
    );
    metrics::describe_gauge!(
        names::BUFFERED_CALLS,
        "Calls in a circuit breaker's sliding window, as last sampled"
    );
    metrics::describe_gauge!(
        names::RETRY_AFTER,
        Unit::Seconds,
        "Seconds until an OPEN circuit breaker admits a probe; 0 once its wait has elapsed and in other states"
    );
}

impl Default for MetricsEventListener {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MetricsEventListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsEventListener")
            .field("initial_state", &self.initial_state)
            .field("breakers", &self.breaker_count())
            .finish()
    }
}

impl EventListener for MetricsEventListener {
    /// Seeds the breaker's state gauge with the state it starts in.
    fn on_breaker_created(&self, breaker: &str, state: State) {
        self.handles_seeded(breaker, state, |_| ());
    }

    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::CallRecorded {
                breaker,
                outcome,
                duration,
                ..
            } => {
                self.handles(breaker, |h| h.call(outcome).record(duration.as_secs_f64()));
            }
            Event::CallRejected { breaker, .. } => {
                self.handles(breaker, |h| h.rejected.increment(1));
            }
            Event::StateChanged {
                breaker, from, to, ..
            } => {
                self.handles(breaker, |handles| {
                    metrics::counter!(
                        names::STATE_CHANGES,
                        "breaker" => handles.breaker.clone(), "from" => from.as_str(), "to" => to.as_str()
                    )
                    .increment(1);
                    handles.state(from).decrement(1.0);
                    handles.state(to).increment(1.0);
                });
            }
            Event::Reset { breaker, .. } => self.handles(breaker, |h| h.reset.increment(1)),
            Event::BreakerRemoved { breaker, .. } => self.forget(breaker),
            Event::StorageDegraded { breaker, error, .. } => {
                self.storage_event(breaker, StorageEvent::Degraded(error));
            }
            Event::StorageRecovered { breaker, .. } => {
                self.storage_event(breaker, StorageEvent::Recovered);
            }
            Event::StorageWriteDropped { breaker, .. } => {
                self.storage_event(breaker, StorageEvent::WriteDropped);
            }
            Event::StorageNoticesUnavailable { breaker, .. } => {
                self.storage_event(breaker, StorageEvent::NoticesUnavailable);
            }
            Event::RetryScheduled { name, .. } => self.pipeline_event(name, "retry"),
            Event::BulkheadRejected { name, .. } => self.pipeline_event(name, "bulkhead_rejected"),
            Event::FallbackUsed { name, .. } => self.pipeline_event(name, "fallback"),
            Event::HedgeStarted { name, .. } => self.pipeline_event(name, "hedge"),
            Event::RateLimitRejected { name, .. } => {
                self.pipeline_event(name, "rate_limit_rejected");
            }
            Event::FaultInjected { name, .. } => self.pipeline_event(name, "fault_injected"),
            Event::LatencyInjected { name, .. } => self.pipeline_event(name, "latency_injected"),
            Event::OutcomeInjected { name, .. } => self.pipeline_event(name, "outcome_injected"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
