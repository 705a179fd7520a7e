//! OpenTelemetry metrics for [`interlock`] circuit breakers.
//!
//! [`OtelEventListener`] is an [`EventListener`] that turns every breaker,
//! storage and pipeline event into OpenTelemetry measurements. It is written
//! against the `opentelemetry` API crate only: which SDK, exporter and
//! runtime collect the numbers is the application's choice.
//!
//! ```
//! use interlock::{CircuitBreaker, ManualClock};
//! use interlock_otel::OtelEventListener;
//! use opentelemetry::metrics::MeterProvider as _;
//! use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
//! use std::time::Duration;
//!
//! // The application's side: an SDK with some exporter.
//! let exporter = InMemoryMetricExporter::default();
//! let provider = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(exporter.clone()).build())
//!     .build();
//!
//! // interlock's side: one listener, here on a meter passed in.
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder("payments")
//!     .clock(clock.clone())
//!     .listener(OtelEventListener::with_meter(&provider.meter("interlock")))
//!     .build()?;
//! breaker.call(|| {
//!     clock.advance(Duration::from_millis(40));
//!     Ok::<_, std::io::Error>(())
//! })?;
//! breaker.force_open();
//!
//! provider.force_flush()?;
//! let exported = exporter.get_finished_metrics()?;
//! let names: Vec<&str> = exported
//!     .iter()
//!     .flat_map(|r| r.scope_metrics())
//!     .flat_map(|s| s.metrics())
//!     .map(|m| m.name())
//!     .collect();
//! assert!(names.contains(&"interlock.call.duration"));
//! assert!(names.contains(&"interlock.state.changes"));
//! assert!(names.contains(&"interlock.state"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Instruments
//!
//! All on the meter named `interlock` (or the meter passed to
//! [`OtelEventListener::with_meter`]):
//!
//! | instrument | kind | unit | attributes | recorded on |
//! |---|---|---|---|---|
//! | `interlock.call.duration` | histogram (`f64`) | `s` | `breaker`, `outcome` | every settled call, in every state (`disabled` included) |
//! | `interlock.call.rejected` | counter | `{call}` | `breaker` | every rejected call (`open`, `half_open`, `forced_open`) |
//! | `interlock.state.changes` | counter | `{transition}` | `breaker`, `from`, `to` | every state change |
//! | `interlock.reset` | counter | `{reset}` | `breaker` | every `reset()` |
//! | `interlock.storage.events` | counter | `{event}` | `breaker`, `event` and `interlock.event`, `error` and `error.type` (only for `degraded`) | shared-storage outages, recoveries and dropped writes |
//! | `interlock.pipeline.events` | counter | `{event}` | `strategy` and `interlock.strategy`, `event` and `interlock.event`, `error` and `error.type` (fallbacks) | retries, bulkhead rejections, fallbacks, hedges, rate-limit refusals, chaos injections |
//! | `interlock.state` | up-down counter (`i64`) | `{state}` | `breaker`, `state` | per breaker: 1 for the current state, 0 for the five others; seeded with the state a breaker is built in |
//! | `interlock.failure_rate`, `interlock.slow_call_rate` | gauge (`f64`) | `1` | `breaker` | [`OtelEventListener::sample`]: the sliding window's rates |
//! | `interlock.buffered_calls` | gauge (`u64`) | `{call}` | `breaker` | `sample`: the calls in the sliding window |
//! | `interlock.retry_after` | gauge (`f64`) | `s` | `breaker` | `sample`: the wait left in OPEN; 0 once elapsed and in other states (alert on `> 0`) |
//!
//! Attribute values:
//!
//! - `outcome`: `success`, `failure`, `slow_success`, `slow_failure`
//!   ([`Outcome::as_str`]);
//! - `from`, `to`, `state`: `closed`, `open`, `half_open`, `forced_open`,
//!   `disabled`, `metrics_only` ([`State::as_str`]);
//! - `interlock.storage.events` `event`: `degraded`, `recovered`,
//!   `write_dropped`; `error` is the storage error's *type* (a
//!   `std::io::Error`'s kind, else the identifier its `Debug` form starts
//!   with, else `Error`), never its message, so the values stay few;
//! - `interlock.pipeline.events` `event`: `retry`, `bulkhead_rejected`,
//!   `fallback`, `hedge`, `rate_limit_rejected`, `fault_injected`,
//!   `latency_injected`, `outcome_injected`; `strategy` is the strategy's
//!   name, and a fallback's `error` the type of the error it replaced. The
//!   un-namespaced `strategy`, `event` and `error` are the Python
//!   original's names; `interlock.strategy`, `interlock.event` and
//!   OpenTelemetry's `error.type` carry the same values
//!   (a keyed rate limit's key is not an attribute: one series per
//!   limiter, however many hosts).
//!
//! `interlock.call.duration` advises the bucket boundaries
//! [`DURATION_BOUNDARIES`] (5 ms to 10 s) instead of the SDK's defaults,
//! which are meant for milliseconds. Through OpenTelemetry's Prometheus
//! naming rules these instruments come out as `interlock_call_duration_seconds`,
//! `interlock_call_rejected_total`, ... : the same names `interlock-metrics`
//! gives them, so dashboards work with either.
//!
//! # Operator overrides
//!
//! The instruments observe calls, not the breaker's sliding window. A
//! `disable()`d breaker records nothing in its window, yet every call it
//! admits still lands in `interlock.call.duration` with its classified
//! outcome, and a `force_open()`ed one counts each rejection in
//! `interlock.call.rejected`: dashboards keep moving while an operator has
//! taken a breaker out of enforcement. To silence a breaker, build it
//! without the listener.
//!
//! # The state gauge
//!
//! Events are published after the breaker's lock is released, so two
//! transitions racing on two threads can reach the listener in either
//! order. `interlock.state` is therefore kept as an up-down counter: each
//! state change moves one unit from `from` to `to`. Additions commute, so
//! once every event has been delivered exactly one state reads 1,
//! whatever the order of delivery; a scrape that falls between two racing
//! deliveries may briefly see a 2 or a -1. A breaker's series are created,
//! with 1 on its initial state, at the first event the listener sees from
//! it. That initial state is `closed` unless set with
//! [`OtelEventListener::initial_state`] (match it to the breaker's or the
//! registry's `initial_state`). Per call, the listener only looks up the
//! breaker's cached attribute sets, without a lock on a thread that
//! reported the breaker lately ([`interlock::PerBreaker`]); nothing is
//! allocated.
//!
//! # Removed breakers
//!
//! When a [`Registry`] forgets a breaker
//! ([`Registry::remove`](interlock::Registry::remove), `retain`,
//! `expire_after_idle`, `max_breakers`: [`Event::BreakerRemoved`]), the
//! listener takes back what it added to that breaker's `interlock.state`
//! series, so they read 0 in every state from the next export, and drops
//! its cached attribute sets ([`OtelEventListener::breaker_count`] goes
//! down). OpenTelemetry has no way to delete an attribute set from a
//! synchronous instrument: with cumulative temporality (Prometheus) the
//! SDK keeps exporting the forgotten breaker's counters and histograms at
//! their last values; with delta temporality (OTLP to most backends) they
//! stop at the next export, as nothing is recorded for them. A breaker
//! created later under the same name starts from its initial state again.
//!
//! Give each breaker name to one listener: share a single listener between
//! breakers or registries through an `Arc` (an `Arc` of a listener is a
//! listener). Two listeners seeing the same name would both count its
//! initial state.
//!
//! # Versions
//!
//! Each `opentelemetry` 0.x minor is a separate API with its own global
//! meter provider; this release builds on `opentelemetry` 0.33, and the
//! application must install its SDK through that same version.
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
use std::sync::atomic::{AtomicI64, Ordering};

use interlock::mode::Mode;
use interlock::{CircuitBreaker, Event, EventListener, Outcome, PerBreaker, Registry, State};
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter};
use opentelemetry::{InstrumentationScope, KeyValue, Value};

/// The name of the meter [`OtelEventListener::new`] creates.
pub const METER_NAME: &str = "interlock";

/// The bucket boundaries, in seconds, that `interlock.call.duration`
/// advises: those OpenTelemetry's semantic conventions recommend for
/// request durations.
///
/// ```
/// assert_eq!(interlock_otel::DURATION_BOUNDARIES.first(), Some(&0.005));
/// assert_eq!(interlock_otel::DURATION_BOUNDARIES.last(), Some(&10.0));
/// ```
pub const DURATION_BOUNDARIES: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

const OUTCOMES: [Outcome; 4] = [
    Outcome::Success,
    Outcome::Failure,
    Outcome::SlowSuccess,
    Outcome::SlowFailure,
];

/// An [`EventListener`] that records OpenTelemetry metrics.
///
/// See the [crate documentation](crate) for the instruments and their
/// attributes.
///
/// ```
/// use interlock::{Registry, State};
/// use interlock_otel::OtelEventListener;
/// use std::sync::Arc;
///
/// // The global meter provider, as installed by the application (here none,
/// // so the measurements go nowhere).
/// let otel = Arc::new(OtelEventListener::new().initial_state(State::MetricsOnly));
/// let registry = Registry::builder()
///     .initial_state(State::MetricsOnly)
///     .listener(otel.clone())
///     .build()?;
/// registry.get("inventory").force_open();
/// assert_eq!(otel.breaker_count(), 1);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub struct OtelEventListener {
    call_duration: Histogram<f64>,
    call_rejected: Counter<u64>,
    state_changes: Counter<u64>,
    reset: Counter<u64>,
    storage_events: Counter<u64>,
    pipeline_events: Counter<u64>,
    state: UpDownCounter<i64>,
    failure_rate: Gauge<f64>,
    slow_call_rate: Gauge<f64>,
    buffered_calls: Gauge<u64>,
    retry_after: Gauge<f64>,
    initial_state: State,
    /// Found without a lock by the threads that report a breaker often.
    breakers: PerBreaker<Series>,
}

/// The attribute sets of one breaker, built once at its first event.
struct Series {
    breaker: KeyValue,
    /// `[breaker, outcome]`, indexed like `OUTCOMES`.
    calls: [[KeyValue; 2]; 4],
    /// `[breaker, state]`, indexed like `State::ALL`.
    states: [[KeyValue; 2]; 6],
    /// What this listener has added to each state's series, so that a
    /// removal can take it all back (an up-down counter cannot be set).
    added: [AtomicI64; 6],
}

impl Series {
    fn new(name: &str) -> Self {
        let name: Arc<str> = Arc::from(name);
        let breaker = KeyValue::new("breaker", Value::from(name));
        Series {
            calls: OUTCOMES.map(|o| [breaker.clone(), KeyValue::new("outcome", o.as_str())]),
            states: State::ALL.map(|s| [breaker.clone(), KeyValue::new("state", s.as_str())]),
            breaker,
            added: Default::default(),
        }
    }

    /// Adds `value` to `state`'s series on `counter`, and remembers it.
    fn add_state(&self, counter: &UpDownCounter<i64>, state: State, value: i64) {
        self.added[state_index(state)].fetch_add(value, Ordering::Relaxed);
        counter.add(value, self.state(state));
    }

    fn call(&self, outcome: Outcome) -> &[KeyValue] {
        let i = match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::SlowSuccess => 2,
            Outcome::SlowFailure => 3,
        };
        &self.calls[i]
    }

    fn state(&self, state: State) -> &[KeyValue] {
        &self.states[state_index(state)]
    }
}

/// A state's index in `State::ALL`.
fn state_index(state: State) -> usize {
    match state {
        State::Closed => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::ForcedOpen => 3,
        State::Disabled => 4,
        State::MetricsOnly => 5,
    }
}

/// What a storage event reports, for `interlock.storage.events`.
#[derive(Clone, Copy, Debug)]
enum StorageEvent<'a> {
    Degraded(&'a (dyn Error + 'static)),
    Recovered,
    WriteDropped,
    NoticesUnavailable,
}

impl OtelEventListener {
    /// A listener on the meter [`METER_NAME`] (`interlock`, with this
    /// crate's version) of the global meter provider.
    ///
    /// The meter is taken from the provider installed at this call; install
    /// the SDK (`opentelemetry::global::set_meter_provider`) first.
    ///
    /// ```
    /// let listener = interlock_otel::OtelEventListener::new();
    /// let breaker = interlock::CircuitBreaker::builder("search").listener(listener).build()?;
    /// # drop(breaker);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new() -> Self {
        let scope = InstrumentationScope::builder(METER_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Self::with_meter(&opentelemetry::global::meter_with_scope(scope))
    }

    /// A listener that creates its instruments on `meter`.
    ///
    /// ```
    /// use opentelemetry::metrics::MeterProvider as _;
    /// use opentelemetry_sdk::metrics::SdkMeterProvider;
    ///
    /// let provider = SdkMeterProvider::builder().build();
    /// let listener = interlock_otel::OtelEventListener::with_meter(&provider.meter("edge"));
    /// # drop(listener);
    /// ```
    #[must_use]
    pub fn with_meter(meter: &Meter) -> Self {
        OtelEventListener {
            call_duration: meter
                .f64_histogram("interlock.call.duration")
                .with_unit("s")
                .with_description("Duration of the calls a circuit breaker admitted, by outcome")
                .with_boundaries(DURATION_BOUNDARIES.to_vec())
                .build(),
            call_rejected: meter
                .u64_counter("interlock.call.rejected")
                .with_unit("{call}")
                .with_description("Calls a circuit breaker rejected without running them")
                .build(),
            state_changes: meter
                .u64_counter("interlock.state.changes")
                .with_unit("{transition}")
                .with_description("State changes of a circuit breaker")
                .build(),
            reset: meter
                .u64_counter("interlock.reset")
                .with_unit("{reset}")
                .with_description("Operator resets of a circuit breaker")
                .build(),
            storage_events: meter
                .u64_counter("interlock.storage.events")
                .with_unit("{event}")
                .with_description("Shared-storage outages, recoveries and dropped writes")
                .build(),
            pipeline_events: meter
                .u64_counter("interlock.pipeline.events")
                .with_unit("{event}")
                .with_description(
                    "Retries, bulkhead rejections, fallbacks, hedges, rate-limit refusals and chaos injections of pipeline strategies",
                )
                .build(),
            state: meter
                .i64_up_down_counter("interlock.state")
                .with_unit("{state}")
                .with_description(
                    "Current state of a circuit breaker: 1 for its current state, 0 for the others",
                )
                .build(),
            failure_rate: meter
                .f64_gauge("interlock.failure_rate")
                .with_unit("1")
                .with_description(
                    "Failure rate over a circuit breaker's sliding window, 0 to 1, as last sampled",
                )
                .build(),
            slow_call_rate: meter
                .f64_gauge("interlock.slow_call_rate")
                .with_unit("1")
                .with_description(
                    "Slow-call rate over a circuit breaker's sliding window, 0 to 1, as last sampled",
                )
                .build(),
            buffered_calls: meter
                .u64_gauge("interlock.buffered_calls")
                .with_unit("{call}")
                .with_description("Calls in a circuit breaker's sliding window, as last sampled")
                .build(),
            retry_after: meter
                .f64_gauge("interlock.retry_after")
                .with_unit("s")
                .with_description(
                    "Seconds until an OPEN circuit breaker admits a probe; 0 once its wait has elapsed and in other states",
                )
                .build(),
            initial_state: State::Closed,
            breakers: PerBreaker::new(),
        }
    }

    /// Records the window gauges (`interlock.failure_rate`,
    /// `interlock.slow_call_rate`, `interlock.buffered_calls`) and
    /// `interlock.retry_after` of every breaker in `registry`, from its
    /// current snapshot. Call it before each export (a periodic task with
    /// the reader's interval) or where the metrics are read: the values are
    /// those of the moment of the call.
    ///
    /// ```
    /// use interlock::Registry;
    /// use interlock_otel::OtelEventListener;
    /// use std::sync::Arc;
    ///
    /// let listener = Arc::new(OtelEventListener::new());
    /// let registry = Registry::builder().listener(listener.clone()).build()?;
    /// let _ = registry.get("search");
    /// listener.sample(&registry);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn sample<M: Mode>(&self, registry: &Registry<M>) {
        for (_, breaker) in registry.items() {
            self.sample_breaker(&breaker);
        }
    }

    /// [`sample`](Self::sample) for one breaker.
    pub fn sample_breaker<M: Mode>(&self, breaker: &CircuitBreaker<M>) {
        let attribute = self.series(breaker.name(), |series| series.breaker.clone());
        let attributes = std::slice::from_ref(&attribute);
        let snapshot = breaker.snapshot();
        self.failure_rate
            .record(snapshot.failure_rate(), attributes);
        self.slow_call_rate
            .record(snapshot.slow_call_rate(), attributes);
        self.buffered_calls.record(snapshot.total_calls, attributes);
        let wait = breaker.retry_after().map_or(0.0, |d| d.as_secs_f64());
        self.retry_after.record(wait, attributes);
    }

    /// Sets the state every breaker is assumed to start in (default
    /// [`State::Closed`]), to match a breaker or registry built with
    /// `initial_state`. The state gauge puts its first 1 there, since
    /// building a breaker emits no event.
    ///
    /// ```
    /// use interlock::{CircuitBreaker, State};
    /// use interlock_otel::OtelEventListener;
    ///
    /// let breaker = CircuitBreaker::builder("shadow")
    ///     .initial_state(State::MetricsOnly)
    ///     .listener(OtelEventListener::new().initial_state(State::MetricsOnly))
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
    /// own series of `interlock.state`).
    ///
    /// ```
    /// let listener = interlock_otel::OtelEventListener::new();
    /// assert_eq!(listener.breaker_count(), 0);
    /// ```
    #[must_use]
    pub fn breaker_count(&self) -> usize {
        self.breakers.len()
    }

    /// Runs `f` on the breaker's attribute sets, created (and its state
    /// gauge seeded) at its first event.
    fn series<R>(&self, breaker: &str, f: impl FnMut(&Series) -> R) -> R {
        self.series_seeded(breaker, self.initial_state, f)
    }

    /// [`series`](Self::series), its state gauge seeded with `seed` if new.
    fn series_seeded<R>(&self, breaker: &str, seed: State, f: impl FnMut(&Series) -> R) -> R {
        let new = || {
            let series = Series::new(breaker);
            for state in State::ALL {
                let value = i64::from(state == seed);
                series.add_state(&self.state, state, value);
            }
            series
        };
        self.breakers.with(breaker, new, f)
    }

    /// Drops a breaker its registry forgot ([`Event::BreakerRemoved`]):
    /// takes back everything it added to the breaker's `interlock.state`
    /// series (they read 0 from the next export) and its cached attribute
    /// sets (see "Removed breakers").
    fn forget(&self, breaker: &str) {
        self.breakers.remove(breaker, |series| {
            for state in State::ALL {
                let added = series.added[state_index(state)].swap(0, Ordering::Relaxed);
                if added != 0 {
                    self.state.add(-added, series.state(state));
                }
            }
        });
    }

    fn storage_event(&self, breaker: &str, event: StorageEvent<'_>) {
        let attribute = self.series(breaker, |series| series.breaker.clone());
        let (kind, error) = match event {
            StorageEvent::Degraded(error) => ("degraded", Some(error)),
            StorageEvent::Recovered => ("recovered", None),
            StorageEvent::WriteDropped => ("write_dropped", None),
            StorageEvent::NoticesUnavailable => ("notices_unavailable", None),
        };
        let mut attributes = vec![
            attribute,
            KeyValue::new("event", kind),
            KeyValue::new("interlock.event", kind),
        ];
        if let Some(error) = error {
            let kind = error_type(error);
            attributes.push(KeyValue::new("error", kind.clone()));
            attributes.push(KeyValue::new("error.type", kind));
        }
        self.storage_events.add(1, &attributes);
    }

    /// A pipeline event, with the original's attribute names (`strategy`,
    /// `event`, `error`) and their namespaced forms (`interlock.strategy`,
    /// `interlock.event`, and OpenTelemetry's `error.type`).
    fn pipeline_event(
        &self,
        name: &str,
        kind: &'static str,
        error: Option<&(dyn Error + 'static)>,
    ) {
        let name: Arc<str> = Arc::from(name);
        let mut attributes = vec![
            KeyValue::new("strategy", Value::from(name.clone())),
            KeyValue::new("interlock.strategy", Value::from(name)),
            KeyValue::new("event", kind),
            KeyValue::new("interlock.event", kind),
        ];
        if let Some(error) = error {
            let kind = error_type(error);
            attributes.push(KeyValue::new("error", kind.clone()));
            attributes.push(KeyValue::new("error.type", kind));
        }
        self.pipeline_events.add(1, &attributes);
    }
}

impl Default for OtelEventListener {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for OtelEventListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtelEventListener")
            .field("initial_state", &self.initial_state)
            .field("breakers", &self.breaker_count())
            .finish_non_exhaustive()
    }
}

/// A bounded name for an error's type, for an attribute: the `ErrorKind`
/// of a `std::io::Error` (`TimedOut`), else the identifier its `Debug`
/// form starts with, which for a derived `Debug` is the type's name or the
/// enum variant's (`ReadFailed`, `Timeout`), else `Error`. Never the
/// message: an attribute's values must stay few.
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

impl EventListener for OtelEventListener {
    /// Seeds the breaker's state gauge with the state it starts in.
    fn on_breaker_created(&self, breaker: &str, state: State) {
        self.series_seeded(breaker, state, |_| ());
    }

    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::CallRecorded {
                breaker,
                outcome,
                duration,
                ..
            } => {
                self.series(breaker, |series| {
                    self.call_duration
                        .record(duration.as_secs_f64(), series.call(outcome));
                });
            }
            Event::CallRejected { breaker, .. } => {
                self.series(breaker, |series| {
                    self.call_rejected
                        .add(1, std::slice::from_ref(&series.breaker));
                });
            }
            Event::StateChanged {
                breaker, from, to, ..
            } => {
                self.series(breaker, |series| {
                    self.state_changes.add(
                        1,
                        &[
                            series.breaker.clone(),
                            KeyValue::new("from", from.as_str()),
                            KeyValue::new("to", to.as_str()),
                        ],
                    );
                    series.add_state(&self.state, from, -1);
                    series.add_state(&self.state, to, 1);
                });
            }
            Event::Reset { breaker, .. } => {
                self.series(breaker, |series| {
                    self.reset.add(1, std::slice::from_ref(&series.breaker));
                });
            }
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
            Event::RetryScheduled { name, .. } => self.pipeline_event(name, "retry", None),
            Event::BulkheadRejected { name, .. } => {
                self.pipeline_event(name, "bulkhead_rejected", None)
            }
            Event::FallbackUsed { name, error, .. } => {
                self.pipeline_event(name, "fallback", Some(error));
            }
            Event::HedgeStarted { name, .. } => self.pipeline_event(name, "hedge", None),
            Event::RateLimitRejected { name, .. } => {
                self.pipeline_event(name, "rate_limit_rejected", None);
            }
            Event::FaultInjected { name, .. } => self.pipeline_event(name, "fault_injected", None),
            Event::LatencyInjected { name, .. } => {
                self.pipeline_event(name, "latency_injected", None)
            }
            Event::OutcomeInjected { name, .. } => {
                self.pipeline_event(name, "outcome_injected", None)
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
