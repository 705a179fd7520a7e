//! [`LoggingEventListener`]: every event as a structured `tracing` record.

use crate::event::{Event, EventListener};

/// Reports every event through `tracing`, under the target `interlock`,
/// with the original's levels: state changes and rejections at WARN, resets
/// at INFO, calls at DEBUG; storage degraded WARN, recovered INFO, write
/// dropped WARN; retries INFO; bulkhead and fallback WARN. Fields are
/// structured (`breaker`, `from`, `to`, `outcome`, ...), not formatted into
/// the message.
///
/// ```
/// use interlock::{CircuitBreaker, LoggingEventListener};
///
/// let breaker = CircuitBreaker::builder("payments").listener(LoggingEventListener).build()?;
/// breaker.force_open(); // WARN interlock: state changed breaker="payments" from="closed" to="forced_open"
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct LoggingEventListener;

impl EventListener for LoggingEventListener {
    fn on_event(&self, event: &Event<'_>) {
        match *event {
            Event::StateChanged { breaker, from, to } => tracing::warn!(
                target: "interlock", breaker, from = from.as_str(), to = to.as_str(), "state changed"
            ),
            Event::CallRecorded {
                breaker,
                outcome,
                duration,
            } => tracing::debug!(
                target: "interlock", breaker, outcome = outcome.as_str(),
                duration_s = duration.as_secs_f64(), "call recorded"
            ),
            Event::CallRejected { breaker, state } => tracing::warn!(
                target: "interlock", breaker, state = state.as_str(), "call rejected"
            ),
            Event::Reset { breaker } => tracing::info!(target: "interlock", breaker, "reset"),
            Event::StorageDegraded { breaker, error } => tracing::warn!(
                target: "interlock", breaker, error = %error, "storage degraded"
            ),
            Event::StorageRecovered { breaker } => {
                tracing::info!(target: "interlock", breaker, "storage recovered")
            }
            Event::StorageWriteDropped { breaker } => {
                tracing::warn!(target: "interlock", breaker, "storage write dropped")
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
                target: "interlock", name, error = %error, "fallback used"
            ),
        }
    }
}
