//! [`LoggingEventListener`](struct@LoggingEventListener): every event as a structured `tracing` record.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::PerBreaker;
use crate::event::{Event, EventListener};

/// Reports every event through `tracing`, as structured records under the
/// target `interlock`.
///
/// | event | level | message | fields |
/// |---|---|---|---|
/// | [`StateChanged`](Event::StateChanged) | WARN | `state changed` | `breaker`, `from`, `to`; `rejected` (the calls rejected since the previous change) when there were any |
/// | [`CallRejected`](Event::CallRejected), the first of a period | WARN | `call rejected` | `breaker`, `state`, `rejected_in_period` (1) |
/// | [`CallRejected`](Event::CallRejected), the others | DEBUG | `call rejected` | `breaker`, `state`, `rejected_in_period` (the count so far) |
/// | [`Reset`](Event::Reset) | INFO | `reset` | `breaker` |
/// | [`CallRecorded`](Event::CallRecorded) | DEBUG | `call recorded` | `breaker`, `outcome`, `duration_s` |
/// | [`StorageDegraded`](Event::StorageDegraded) | WARN | `storage degraded` | `breaker`, `error`, `cause` |
/// | [`StorageRecovered`](Event::StorageRecovered) | INFO | `storage recovered` | `breaker` |
/// | [`StorageWriteDropped`](Event::StorageWriteDropped) | WARN | `storage write dropped` | `breaker` |
/// | [`StorageNoticesUnavailable`](Event::StorageNoticesUnavailable) | WARN | `storage notices unavailable` | `breaker`, `reason` |
/// | [`BreakerRemoved`](Event::BreakerRemoved) | INFO | `breaker removed` | `breaker` |
/// | [`RetryScheduled`](Event::RetryScheduled) | INFO | `retry scheduled` | `name`, `attempt` (the one that failed), `delay_s` |
/// | [`BulkheadRejected`](Event::BulkheadRejected) | WARN | `bulkhead rejected` | `name` |
/// | [`FallbackUsed`](Event::FallbackUsed) | WARN | `fallback used` | `name`, `error` |
/// | [`HedgeStarted`](Event::HedgeStarted) | INFO | `hedge started` | `name`, `attempt`, `delay_s` |
/// | [`RateLimitRejected`](Event::RateLimitRejected) | WARN | `rate limit rejected` | `name`, `key` (keyed limiters only), `retry_after_s` |
/// | [`FaultInjected`](Event::FaultInjected) | INFO | `fault injected` | `name` |
/// | [`LatencyInjected`](Event::LatencyInjected) | INFO | `latency injected` | `name`, `latency_s` |
/// | [`OutcomeInjected`](Event::OutcomeInjected) | INFO | `outcome injected` | `name` |
///
/// States and outcomes are their lowercase identifiers ([`State::as_str`],
/// [`Outcome::as_str`]); `duration_s`, `delay_s`, `retry_after_s` and
/// `latency_s` are seconds as `f64`;
/// `error` is recorded as an error value, so subscribers that understand
/// errors can walk its sources, and `cause` is the error with all its
/// sources as one line of text (`redis storage: read failed (timed out):
/// ...`), for the ones that do not. Calls are logged in every state, a
/// disabled breaker's included.
///
/// [`State::as_str`]: crate::State::as_str
/// [`Outcome::as_str`]: crate::Outcome::as_str
///
/// # One WARN per OPEN period
///
/// An outage rejects thousands of calls a second; one WARN each would bury
/// the transitions under the flood, at the same level. So a *period*, the
/// time between two state changes of a breaker, gets one WARN: its first
/// rejection. The other rejections of the period are DEBUG records (with
/// the running count in `rejected_in_period`), and the state change that
/// ends the period carries the total in `rejected`. A filter at INFO or
/// WARN keeps every transition and one rejection per OPEN (or HALF_OPEN)
/// period; a filter at DEBUG still sees every rejection. The Python
/// original logs every rejection at WARNING.
///
/// The counts are kept per breaker name, for the breakers currently
/// between two changes with a rejection; an entry goes at the breaker's
/// next state change. A listener value shared by many breakers (a
/// registry's) counts each name apart. Each count is exact however many
/// threads reject at once, and a thread counts the rejections of a period
/// it has counted in before with one atomic add, without a lock, so an
/// outage's rejections on many threads do not queue on the listener.
///
/// ```
/// use interlock::{CircuitBreaker, LoggingEventListener};
///
/// let breaker = CircuitBreaker::builder("payments").listener(LoggingEventListener::new()).build()?;
/// breaker.force_open(); // WARN interlock: state changed breaker="payments" from="closed" to="forced_open"
/// let _ = breaker.acquire(); // WARN interlock: call rejected breaker="payments" state="forced_open" rejected_in_period=1
/// let _ = breaker.acquire(); // DEBUG interlock: call rejected ... rejected_in_period=2
/// breaker.reset(); // WARN interlock: state changed ... from="forced_open" to="closed" rejected=2
/// # Ok::<(), interlock::ConfigError>(())
/// ```
///
/// `LoggingEventListener` is also a constant of this type, a fresh
/// listener wherever it is written, so `.listener(LoggingEventListener)`
/// keeps working.
pub struct LoggingEventListener {
    /// The periods with a rejection, per breaker name.
    periods: PerBreaker<Period>,
}

/// One breaker's period with at least one rejection: the rejections
/// counted so far, or [`ENDED`] ored in once the state change that ends
/// the period took the total. Alone on its cache line: every rejecting
/// thread adds to it.
#[derive(Default)]
#[repr(align(64))]
struct Period(AtomicU64);

/// A [`Period`]'s count is final: a rejection that finds it counts on the
/// next period instead.
const ENDED: u64 = 1 << 63;

/// A fresh [`LoggingEventListener`](struct@LoggingEventListener) (the type's constant: each use is a new
/// listener with its own counts).
#[allow(
    non_upper_case_globals,
    reason = "keeps `.listener(LoggingEventListener)` working"
)]
#[allow(
    clippy::declare_interior_mutable_const,
    reason = "each use is meant to be a new listener with its own counts"
)]
pub const LoggingEventListener: LoggingEventListener = LoggingEventListener::new();

impl LoggingEventListener {
    /// A listener with no period counted yet.
    #[must_use]
    pub const fn new() -> Self {
        LoggingEventListener {
            periods: PerBreaker::new(),
        }
    }

    /// Counts a rejection of `breaker`; the count in its period so far.
    fn rejected(&self, breaker: &str) -> u64 {
        loop {
            // Acquire: a period seen ended was removed first, so the next
            // `with` starts the next one.
            let before = self.periods.with(breaker, Period::default, |p| {
                p.0.fetch_add(1, Ordering::Acquire)
            });
            if before & ENDED == 0 {
                return before + 1;
            }
        }
    }

    /// Ends `breaker`'s period: the rejections it counted. A rejection
    /// counted on a thread's cached period after this sees [`ENDED`] and
    /// counts on the next period.
    fn period_ended(&self, breaker: &str) -> u64 {
        self.periods
            .remove(breaker, |p| p.0.swap(ENDED, Ordering::AcqRel))
            .unwrap_or(0)
    }
}

impl Default for LoggingEventListener {
    fn default() -> Self {
        LoggingEventListener::new()
    }
}

/// A clone starts with no period counted.
impl Clone for LoggingEventListener {
    fn clone(&self) -> Self {
        LoggingEventListener::new()
    }
}

impl fmt::Debug for LoggingEventListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggingEventListener")
            .field("open_periods", &self.periods.len())
            .finish()
    }
}

impl EventListener for LoggingEventListener {
    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::StateChanged { breaker, from, to } => match self.period_ended(breaker) {
                0 => tracing::warn!(
                    target: "interlock", breaker, from = from.as_str(), to = to.as_str(),
                    "state changed"
                ),
                rejected => tracing::warn!(
                    target: "interlock", breaker, from = from.as_str(), to = to.as_str(),
                    rejected, "state changed"
                ),
            },
            Event::CallRecorded {
                breaker,
                outcome,
                duration,
            } => tracing::debug!(
                target: "interlock", breaker, outcome = outcome.as_str(),
                duration_s = duration.as_secs_f64(), "call recorded"
            ),
            Event::CallRejected { breaker, state } => match self.rejected(breaker) {
                1 => tracing::warn!(
                    target: "interlock", breaker, state = state.as_str(), rejected_in_period = 1u64,
                    "call rejected"
                ),
                count => tracing::debug!(
                    target: "interlock", breaker, state = state.as_str(), rejected_in_period = count,
                    "call rejected"
                ),
            },
            Event::Reset { breaker } => tracing::info!(target: "interlock", breaker, "reset"),
            Event::StorageDegraded { breaker, error } => tracing::warn!(
                target: "interlock", breaker, error, cause = %crate::event::Chain(error),
                "storage degraded"
            ),
            Event::StorageRecovered { breaker } => {
                tracing::info!(target: "interlock", breaker, "storage recovered")
            }
            Event::StorageWriteDropped { breaker } => {
                tracing::warn!(target: "interlock", breaker, "storage write dropped")
            }
            Event::StorageNoticesUnavailable { breaker, reason } => tracing::warn!(
                target: "interlock", breaker, reason, "storage notices unavailable"
            ),
            Event::BreakerRemoved { breaker } => {
                tracing::info!(target: "interlock", breaker, "breaker removed")
            }
            Event::RetryScheduled {
                name,
                attempt,
                delay,
            } => tracing::info!(
                target: "interlock", name, attempt, delay_s = delay.as_secs_f64(), "retry scheduled"
            ),
            Event::BulkheadRejected { name } => {
                tracing::warn!(target: "interlock", name, "bulkhead rejected")
            }
            Event::FallbackUsed { name, error } => tracing::warn!(
                target: "interlock", name, error, "fallback used"
            ),
            Event::HedgeStarted {
                name,
                attempt,
                delay,
            } => tracing::info!(
                target: "interlock", name, attempt, delay_s = delay.as_secs_f64(), "hedge started"
            ),
            Event::RateLimitRejected {
                name,
                key: Some(key),
                retry_after,
            } => tracing::warn!(
                target: "interlock", name, key, retry_after_s = retry_after.as_secs_f64(),
                "rate limit rejected"
            ),
            Event::RateLimitRejected {
                name,
                key: None,
                retry_after,
            } => tracing::warn!(
                target: "interlock", name, retry_after_s = retry_after.as_secs_f64(),
                "rate limit rejected"
            ),
            Event::FaultInjected { name } => {
                tracing::info!(target: "interlock", name, "fault injected")
            }
            Event::LatencyInjected { name, latency } => tracing::info!(
                target: "interlock", name, latency_s = latency.as_secs_f64(), "latency injected"
            ),
            Event::OutcomeInjected { name } => {
                tracing::info!(target: "interlock", name, "outcome injected")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Storage and pipeline events, which only the core can build; the
    //! breaker's own events are covered end to end in `tests/logging.rs`.

    use std::collections::BTreeMap;
    use std::error::Error;
    use std::fmt;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tracing::Level;
    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

    use super::*;

    type Record = (Level, String, BTreeMap<String, String>);

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<Record>>>);

    struct Fields(BTreeMap<String, String>);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().into(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), value.into());
        }
        fn record_error(&mut self, field: &Field, value: &(dyn Error + 'static)) {
            self.0
                .insert(field.name().into(), format!("error: {value}"));
        }
    }

    impl<S: tracing::Subscriber> Layer<S> for Capture {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            assert_eq!(event.metadata().target(), "interlock");
            let mut fields = Fields(BTreeMap::new());
            event.record(&mut fields);
            let message = fields.0.remove("message").unwrap_or_default();
            let record = (*event.metadata().level(), message, fields.0);
            self.0.lock().unwrap().push(record);
        }
    }

    fn log(events: &[Event<'_>]) -> Vec<Record> {
        let capture = Capture::default();
        let subscriber = tracing_subscriber::registry().with(capture.clone());
        let listener = LoggingEventListener::new();
        tracing::subscriber::with_default(subscriber, || {
            for event in events {
                listener.on_event(event);
            }
        });
        capture.0.lock().expect("capture lock").clone()
    }

    fn record(level: Level, message: &str, fields: &[(&str, &str)]) -> Record {
        let fields = fields
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (level, message.to_owned(), fields)
    }

    /// A storage error that names the operation and keeps the cause as
    /// its source, as `interlock-redis`'s does.
    #[derive(Debug)]
    struct ReadFailed(std::io::Error);

    impl fmt::Display for ReadFailed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("read failed")
        }
    }

    impl Error for ReadFailed {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn storage_events() {
        let error = ReadFailed(std::io::Error::other("connection refused"));
        let records = log(&[
            Event::StorageDegraded {
                breaker: "orders",
                error: &error,
            },
            Event::StorageWriteDropped { breaker: "orders" },
            Event::StorageRecovered { breaker: "orders" },
            Event::StorageNoticesUnavailable {
                breaker: "orders",
                reason: "NOPERM",
            },
        ]);
        assert_eq!(
            records,
            [
                record(
                    Level::WARN,
                    "storage degraded",
                    &[
                        ("breaker", "orders"),
                        ("error", "error: read failed"),
                        ("cause", "read failed: connection refused"),
                    ]
                ),
                record(
                    Level::WARN,
                    "storage write dropped",
                    &[("breaker", "orders")]
                ),
                record(Level::INFO, "storage recovered", &[("breaker", "orders")]),
                record(
                    Level::WARN,
                    "storage notices unavailable",
                    &[("breaker", "orders"), ("reason", "NOPERM")]
                ),
            ]
        );
        let text = Event::StorageDegraded {
            breaker: "orders",
            error: &error,
        }
        .to_string();
        assert_eq!(
            text,
            "orders: storage degraded: read failed: connection refused"
        );
    }

    #[test]
    fn pipeline_events() {
        let error = std::io::Error::other("timed out");
        let records = log(&[
            Event::RetryScheduled {
                name: "recs",
                attempt: 2,
                delay: Duration::from_millis(250),
            },
            Event::BulkheadRejected { name: "recs" },
            Event::FallbackUsed {
                name: "recs",
                error: &error,
            },
        ]);
        assert_eq!(
            records,
            [
                record(
                    Level::INFO,
                    "retry scheduled",
                    &[("attempt", "2"), ("delay_s", "0.25"), ("name", "recs")]
                ),
                record(Level::WARN, "bulkhead rejected", &[("name", "recs")]),
                record(
                    Level::WARN,
                    "fallback used",
                    &[("error", "error: timed out"), ("name", "recs")]
                ),
            ]
        );
    }

    #[test]
    fn hedging_rate_limit_and_chaos_events() {
        let records = log(&[
            Event::hedge_started("search", 2, Duration::from_millis(50)),
            Event::rate_limit_rejected("hosts", Some("api.example"), Duration::from_millis(500)),
            Event::rate_limit_rejected("global", None, Duration::from_secs(1)),
            Event::fault_injected("chaos"),
            Event::latency_injected("chaos", Duration::from_millis(1500)),
            Event::outcome_injected("chaos"),
        ]);
        assert_eq!(
            records,
            [
                record(
                    Level::INFO,
                    "hedge started",
                    &[("attempt", "2"), ("delay_s", "0.05"), ("name", "search")]
                ),
                record(
                    Level::WARN,
                    "rate limit rejected",
                    &[
                        ("key", "api.example"),
                        ("name", "hosts"),
                        ("retry_after_s", "0.5")
                    ]
                ),
                record(
                    Level::WARN,
                    "rate limit rejected",
                    &[("name", "global"), ("retry_after_s", "1.0")]
                ),
                record(Level::INFO, "fault injected", &[("name", "chaos")]),
                record(
                    Level::INFO,
                    "latency injected",
                    &[("latency_s", "1.5"), ("name", "chaos")]
                ),
                record(Level::INFO, "outcome injected", &[("name", "chaos")]),
            ]
        );
    }
}
