//! Events and listeners: everything a breaker does, reported as it happens.
//!
//! A listener is any `Fn(&Event<'_>) + Send + Sync` closure or a type that
//! implements [`EventListener`]. Listeners run outside every lock of the
//! breaker; a listener that panics is caught, logged and ignored, so
//! observability can never break the protected call (ruling D5).

use std::error::Error;
use std::fmt;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use crate::background::isolate;
use crate::state::{Outcome, State};

/// Something a breaker (or a pipeline strategy) did.
///
/// Core and storage events carry the breaker's name as `breaker`; pipeline
/// events carry the strategy's name as `name`. New variants and fields may
/// be added in minor releases, so match with `..` and a wildcard arm.
///
/// ```
/// use interlock::{CircuitBreaker, Event, State};
/// use std::sync::{Arc, Mutex};
///
/// let opened = Arc::new(Mutex::new(Vec::new()));
/// let sink = opened.clone();
/// let breaker = CircuitBreaker::builder("db")
///     .listener(move |event: &Event<'_>| match event {
///         Event::StateChanged { breaker, to: State::ForcedOpen, .. } => {
///             sink.lock().unwrap().push(breaker.to_string())
///         }
///         _ => {}
///     })
///     .build()?;
/// breaker.force_open();
/// assert_eq!(*opened.lock().unwrap(), ["db"]);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The effective state changed (R13.5).
    #[non_exhaustive]
    StateChanged {
        /// The breaker's name.
        breaker: &'a str,
        /// The state before.
        from: State,
        /// The state after.
        to: State,
    },
    /// An admitted call settled, in any state, stale ones included (R8.8).
    /// Cancelled calls report nothing (R4.5).
    #[non_exhaustive]
    CallRecorded {
        /// The breaker's name.
        breaker: &'a str,
        /// How the call was counted.
        outcome: Outcome,
        /// How long it ran, on the breaker's clock.
        duration: Duration,
    },
    /// A call was rejected before it ran.
    #[non_exhaustive]
    CallRejected {
        /// The breaker's name.
        breaker: &'a str,
        /// The state that rejected it.
        state: State,
    },
    /// An operator called `reset()` (always emitted, after any state change).
    #[non_exhaustive]
    Reset {
        /// The breaker's name.
        breaker: &'a str,
    },
    /// The shared storage failed; the breaker falls back to local state.
    #[non_exhaustive]
    StorageDegraded {
        /// The breaker's name.
        breaker: &'a str,
        /// The storage error that started the outage.
        error: &'a (dyn Error + 'static),
    },
    /// The shared storage answered again after an outage.
    #[non_exhaustive]
    StorageRecovered {
        /// The breaker's name.
        breaker: &'a str,
    },
    /// A write to the shared storage was dropped because its queue was full.
    #[non_exhaustive]
    StorageWriteDropped {
        /// The breaker's name.
        breaker: &'a str,
    },
    /// The storage cannot send or receive change notices (its server
    /// refuses `PUBLISH` or `SUBSCRIBE` to this user, say): writes still
    /// apply, and the breaker learns of other instances' changes by polling
    /// alone. Emitted once per coordinator, to each of its breakers.
    #[non_exhaustive]
    StorageNoticesUnavailable {
        /// The breaker's name.
        breaker: &'a str,
        /// What the storage reported.
        reason: &'a str,
    },
    /// The breaker's [`Registry`](crate::Registry) forgot it:
    /// [`remove`](crate::Registry::remove)d, dropped by
    /// [`retain`](crate::Registry::retain), idle for
    /// [`expire_after_idle`](crate::RegistryBuilder::expire_after_idle), or
    /// evicted as least recently used under
    /// [`max_breakers`](crate::RegistryBuilder::max_breakers). Delivered
    /// to that breaker's listeners after the registry has let it go (it is
    /// no longer listed), so that metrics and dashboards drop its series
    /// and its row. Handles to it still work; a later `get` of the name
    /// creates a new breaker, whose events follow.
    #[non_exhaustive]
    BreakerRemoved {
        /// The breaker's name.
        breaker: &'a str,
    },
    /// A retry strategy will try again after `delay`.
    #[non_exhaustive]
    RetryScheduled {
        /// The strategy's name.
        name: &'a str,
        /// The attempt that just failed (the first call is attempt 1, so
        /// the first retry reports 1), as the original's `on_retry` does;
        /// the next attempt is `attempt + 1`.
        attempt: u32,
        /// How long it waits first.
        delay: Duration,
    },
    /// A bulkhead had no free slot.
    #[non_exhaustive]
    BulkheadRejected {
        /// The strategy's name.
        name: &'a str,
    },
    /// A fallback substituted a value for an error.
    #[non_exhaustive]
    FallbackUsed {
        /// The strategy's name.
        name: &'a str,
        /// The error it replaced.
        error: &'a (dyn Error + 'static),
    },
    /// A hedging strategy started another attempt while the earlier ones
    /// were still running (or right after one failed).
    #[non_exhaustive]
    HedgeStarted {
        /// The strategy's name.
        name: &'a str,
        /// The attempt it started (the first hedge is attempt 2).
        attempt: u32,
        /// How long it waited for the attempts before it (zero when one
        /// failed and the hedge replaced it at once).
        delay: Duration,
    },
    /// A rate limiter refused a call; it did not run.
    #[non_exhaustive]
    RateLimitRejected {
        /// The strategy's name.
        name: &'a str,
        /// The key of a keyed limiter (a host, a tenant), if any.
        key: Option<&'a str>,
        /// When the limiter would next admit a call.
        retry_after: Duration,
    },
    /// A chaos strategy failed a call with an injected error instead of
    /// running it.
    #[non_exhaustive]
    FaultInjected {
        /// The strategy's name.
        name: &'a str,
    },
    /// A chaos strategy delays a call before running it.
    #[non_exhaustive]
    LatencyInjected {
        /// The strategy's name.
        name: &'a str,
        /// The injected delay.
        latency: Duration,
    },
    /// A chaos strategy answered a call with an injected result instead of
    /// running it.
    #[non_exhaustive]
    OutcomeInjected {
        /// The strategy's name.
        name: &'a str,
    },
}

impl<'a> Event<'a> {
    /// The breaker's name (core and storage events) or the strategy's name
    /// (pipeline events).
    #[must_use]
    pub fn name(&self) -> &'a str {
        match *self {
            Event::StateChanged { breaker, .. }
            | Event::CallRecorded { breaker, .. }
            | Event::CallRejected { breaker, .. }
            | Event::Reset { breaker }
            | Event::StorageDegraded { breaker, .. }
            | Event::StorageRecovered { breaker }
            | Event::StorageWriteDropped { breaker }
            | Event::StorageNoticesUnavailable { breaker, .. }
            | Event::BreakerRemoved { breaker } => breaker,
            Event::RetryScheduled { name, .. }
            | Event::BulkheadRejected { name }
            | Event::FallbackUsed { name, .. }
            | Event::HedgeStarted { name, .. }
            | Event::RateLimitRejected { name, .. }
            | Event::FaultInjected { name }
            | Event::LatencyInjected { name, .. }
            | Event::OutcomeInjected { name } => name,
        }
    }

    /// A stable snake_case identifier of the kind of event
    /// (`"state_changed"`, `"call_recorded"`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Event::StateChanged { .. } => "state_changed",
            Event::CallRecorded { .. } => "call_recorded",
            Event::CallRejected { .. } => "call_rejected",
            Event::Reset { .. } => "reset",
            Event::StorageDegraded { .. } => "storage_degraded",
            Event::StorageRecovered { .. } => "storage_recovered",
            Event::StorageWriteDropped { .. } => "storage_write_dropped",
            Event::StorageNoticesUnavailable { .. } => "storage_notices_unavailable",
            Event::BreakerRemoved { .. } => "breaker_removed",
            Event::RetryScheduled { .. } => "retry_scheduled",
            Event::BulkheadRejected { .. } => "bulkhead_rejected",
            Event::FallbackUsed { .. } => "fallback_used",
            Event::HedgeStarted { .. } => "hedge_started",
            Event::RateLimitRejected { .. } => "rate_limit_rejected",
            Event::FaultInjected { .. } => "fault_injected",
            Event::LatencyInjected { .. } => "latency_injected",
            Event::OutcomeInjected { .. } => "outcome_injected",
        }
    }

    /// A [`StateChanged`](Event::StateChanged) event, for tests of listeners.
    #[must_use]
    pub fn state_changed(breaker: &'a str, from: State, to: State) -> Self {
        Event::StateChanged { breaker, from, to }
    }

    /// A [`CallRecorded`](Event::CallRecorded) event.
    #[must_use]
    pub fn call_recorded(breaker: &'a str, outcome: Outcome, duration: Duration) -> Self {
        Event::CallRecorded {
            breaker,
            outcome,
            duration,
        }
    }

    /// A [`CallRejected`](Event::CallRejected) event.
    #[must_use]
    pub fn call_rejected(breaker: &'a str, state: State) -> Self {
        Event::CallRejected { breaker, state }
    }

    /// A [`Reset`](Event::Reset) event.
    #[must_use]
    pub fn reset(breaker: &'a str) -> Self {
        Event::Reset { breaker }
    }

    /// A [`StorageDegraded`](Event::StorageDegraded) event.
    #[must_use]
    pub fn storage_degraded(breaker: &'a str, error: &'a (dyn Error + 'static)) -> Self {
        Event::StorageDegraded { breaker, error }
    }

    /// A [`StorageRecovered`](Event::StorageRecovered) event.
    #[must_use]
    pub fn storage_recovered(breaker: &'a str) -> Self {
        Event::StorageRecovered { breaker }
    }

    /// A [`StorageWriteDropped`](Event::StorageWriteDropped) event.
    #[must_use]
    pub fn storage_write_dropped(breaker: &'a str) -> Self {
        Event::StorageWriteDropped { breaker }
    }

    /// A [`BreakerRemoved`](Event::BreakerRemoved) event.
    #[must_use]
    pub fn breaker_removed(breaker: &'a str) -> Self {
        Event::BreakerRemoved { breaker }
    }

    /// A [`RetryScheduled`](Event::RetryScheduled) event.
    #[must_use]
    pub fn retry_scheduled(name: &'a str, attempt: u32, delay: Duration) -> Self {
        Event::RetryScheduled {
            name,
            attempt,
            delay,
        }
    }

    /// A [`BulkheadRejected`](Event::BulkheadRejected) event.
    #[must_use]
    pub fn bulkhead_rejected(name: &'a str) -> Self {
        Event::BulkheadRejected { name }
    }

    /// A [`FallbackUsed`](Event::FallbackUsed) event.
    #[must_use]
    pub fn fallback_used(name: &'a str, error: &'a (dyn Error + 'static)) -> Self {
        Event::FallbackUsed { name, error }
    }

    /// A [`HedgeStarted`](Event::HedgeStarted) event.
    #[must_use]
    pub fn hedge_started(name: &'a str, attempt: u32, delay: Duration) -> Self {
        Event::HedgeStarted {
            name,
            attempt,
            delay,
        }
    }

    /// A [`RateLimitRejected`](Event::RateLimitRejected) event.
    #[must_use]
    pub fn rate_limit_rejected(name: &'a str, key: Option<&'a str>, retry_after: Duration) -> Self {
        Event::RateLimitRejected {
            name,
            key,
            retry_after,
        }
    }

    /// A [`FaultInjected`](Event::FaultInjected) event.
    #[must_use]
    pub fn fault_injected(name: &'a str) -> Self {
        Event::FaultInjected { name }
    }

    /// A [`LatencyInjected`](Event::LatencyInjected) event.
    #[must_use]
    pub fn latency_injected(name: &'a str, latency: Duration) -> Self {
        Event::LatencyInjected { name, latency }
    }

    /// An [`OutcomeInjected`](Event::OutcomeInjected) event.
    #[must_use]
    pub fn outcome_injected(name: &'a str) -> Self {
        Event::OutcomeInjected { name }
    }
}

impl fmt::Display for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::StateChanged { breaker, from, to } => {
                write!(f, "{breaker}: state {from} -> {to}")
            }
            Event::CallRecorded {
                breaker,
                outcome,
                duration,
            } => {
                write!(
                    f,
                    "{breaker}: recorded {outcome} ({:.3}s)",
                    duration.as_secs_f64()
                )
            }
            Event::CallRejected { breaker, state } => {
                write!(f, "{breaker}: call rejected ({state})")
            }
            Event::Reset { breaker } => write!(f, "{breaker}: reset"),
            Event::StorageDegraded { breaker, error } => {
                write!(f, "{breaker}: storage degraded: {}", Chain(*error))
            }
            Event::StorageRecovered { breaker } => write!(f, "{breaker}: storage recovered"),
            Event::StorageWriteDropped { breaker } => {
                write!(f, "{breaker}: storage write dropped, queue full")
            }
            Event::StorageNoticesUnavailable { breaker, reason } => {
                write!(
                    f,
                    "{breaker}: storage change notices unavailable, polling only: {reason}"
                )
            }
            Event::BreakerRemoved { breaker } => {
                write!(f, "{breaker}: removed from its registry")
            }
            Event::RetryScheduled {
                name,
                attempt,
                delay,
            } => {
                write!(
                    f,
                    "{name}: attempt {attempt} failed, retrying in {:.3}s",
                    delay.as_secs_f64()
                )
            }
            Event::BulkheadRejected { name } => write!(f, "{name}: bulkhead full"),
            Event::FallbackUsed { name, error } => write!(f, "{name}: fallback used for: {error}"),
            Event::HedgeStarted {
                name,
                attempt,
                delay,
            } => write!(
                f,
                "{name}: hedged attempt {attempt} started after {:.3}s",
                delay.as_secs_f64()
            ),
            Event::RateLimitRejected {
                name,
                key,
                retry_after,
            } => {
                write!(f, "{name}: rate limit exceeded")?;
                if let Some(key) = key {
                    write!(f, " for '{key}'")?;
                }
                write!(f, ", next call in {:.3}s", retry_after.as_secs_f64())
            }
            Event::FaultInjected { name } => write!(f, "{name}: fault injected"),
            Event::LatencyInjected { name, latency } => {
                write!(
                    f,
                    "{name}: latency of {:.3}s injected",
                    latency.as_secs_f64()
                )
            }
            Event::OutcomeInjected { name } => write!(f, "{name}: outcome injected"),
        }
    }
}

/// An error and its sources, joined by `: ` (a source whose text the
/// previous part already ends with is not repeated), so an event's text
/// names the cause, not only the operation that failed.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut last = self.0.to_string();
        f.write_str(&last)?;
        let mut next = self.0.source();
        while let Some(source) = next {
            let part = source.to_string();
            if !part.is_empty() && !last.ends_with(&part) {
                write!(f, ": {part}")?;
            }
            last = part;
            next = source.source();
        }
        Ok(())
    }
}

/// Receives every [`Event`] of the breakers (or strategies) it is given to.
///
/// Implemented for every `Fn(&Event<'_>) + Send + Sync + 'static`, so a
/// closure is a listener.
///
/// ```
/// use interlock::{CircuitBreaker, Event, EventListener};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// #[derive(Default)]
/// struct Rejections(AtomicUsize);
///
/// impl EventListener for Rejections {
///     fn on_event(&self, event: &Event<'_>) {
///         if let Event::CallRejected { .. } = event {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// let counter = Arc::new(Rejections::default());
/// let breaker = CircuitBreaker::builder("svc").listener(counter.clone()).build()?;
/// breaker.force_open();
/// let _ = breaker.call(|| Ok::<_, std::io::Error>(()));
/// assert_eq!(counter.0.load(Ordering::Relaxed), 1);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub trait EventListener: Send + Sync + 'static {
    /// Called for every event, outside the breaker's locks, on the thread
    /// that caused it (the timer or storage thread for background events).
    fn on_event(&self, event: &Event<'_>);

    /// Called once when a breaker given this listener is built, with the
    /// state it starts in (`initial_state`, or the fleet's state for a
    /// coordinated breaker), before any event. A listener that keeps a
    /// state gauge seeds it here, so a breaker built in shadow mode
    /// (`initial_state(MetricsOnly)`) reads `metrics_only` from its first
    /// scrape. The default does nothing.
    fn on_breaker_created(&self, breaker: &str, state: crate::State) {
        let _ = (breaker, state);
    }
}

impl<F> EventListener for F
where
    F: Fn(&Event<'_>) + Send + Sync + 'static,
{
    fn on_event(&self, event: &Event<'_>) {
        self(event)
    }
}

impl<L: EventListener + ?Sized> EventListener for Arc<L> {
    fn on_event(&self, event: &Event<'_>) {
        (**self).on_event(event)
    }

    fn on_breaker_created(&self, breaker: &str, state: crate::State) {
        (**self).on_breaker_created(breaker, state)
    }
}

/// Sends every event to several listeners, each isolated from the others'
/// panics.
///
/// ```
/// use interlock::{Event, FanOut};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let seen2 = seen.clone();
/// let fan_out = FanOut::new()
///     .with(|_: &Event<'_>| panic!("a buggy exporter"))
///     .with(move |e: &Event<'_>| seen2.lock().unwrap().push(e.kind()));
/// let breaker = interlock::CircuitBreaker::builder("svc").listener(fan_out).build()?;
/// breaker.reset();
/// assert_eq!(*seen.lock().unwrap(), ["reset"]);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, Default)]
pub struct FanOut {
    listeners: Vec<Arc<dyn EventListener>>,
}

impl FanOut {
    /// A fan-out with no listeners.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a listener.
    #[must_use]
    pub fn with(mut self, listener: impl EventListener) -> Self {
        self.push(listener);
        self
    }

    /// Adds a listener.
    pub fn push(&mut self, listener: impl EventListener) {
        self.listeners.push(into_arc(listener));
    }

    /// How many listeners it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.listeners.len()
    }

    /// Whether it holds none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.listeners.is_empty()
    }
}

impl fmt::Debug for FanOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FanOut")
            .field("listeners", &self.listeners.len())
            .finish()
    }
}

impl EventListener for FanOut {
    fn on_event(&self, event: &Event<'_>) {
        emit(&self.listeners, event);
    }

    fn on_breaker_created(&self, breaker: &str, state: crate::State) {
        created(&self.listeners, breaker, state);
    }
}

/// Tells each listener a breaker was built, isolating their panics (D5).
pub(crate) fn created(listeners: &[Arc<dyn EventListener>], breaker: &str, state: crate::State) {
    for listener in listeners {
        // A panic here is dropped: no event exists yet to name in a report.
        let _ = isolate(|| listener.on_breaker_created(breaker, state));
    }
}

/// Boxes a listener once, reusing an existing `Arc<dyn EventListener>`.
pub(crate) fn into_arc(listener: impl EventListener) -> Arc<dyn EventListener> {
    let mut slot = Some(listener);
    let any: &mut dyn std::any::Any = &mut slot;
    if let Some(arc) = any.downcast_mut::<Option<Arc<dyn EventListener>>>() {
        if let Some(arc) = arc.take() {
            return arc;
        }
    }
    match slot {
        Some(listener) => Arc::new(listener),
        None => Arc::new(|_: &Event<'_>| {}),
    }
}

/// Delivers `event` to each listener, catching and logging panics (D5).
pub(crate) fn emit(listeners: &[Arc<dyn EventListener>], event: &Event<'_>) {
    for listener in listeners {
        if !isolate(|| listener.on_event(event)) {
            report_listener_panic(event);
        }
    }
}

#[cold]
fn report_listener_panic(event: &Event<'_>) {
    #[cfg(feature = "tracing")]
    tracing::error!(
        target: "interlock",
        name = event.name(),
        event = event.kind(),
        "an event listener panicked; the panic was caught and ignored"
    );
    // Not `eprintln!`, which panics when stderr cannot be written.
    #[cfg(not(feature = "tracing"))]
    {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "interlock: an event listener panicked on a {} event of {:?}; the panic was caught and ignored",
            event.kind(),
            event.name()
        );
    }
}
