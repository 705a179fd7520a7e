//! The public surface around the breaker that the rule-by-rule tests do not
//! reach: event constructors and their text, error types, builders' and
//! handles' `Debug`, the async API of a local breaker, and the registry's
//! accessors. Each test checks what a user sees, not how it is produced.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::error::Error;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{
    CallError, CircuitBreaker, CircuitOpenError, Config, ConfigError, Event, EventListener, FanOut,
    ManualClock, Outcome, Registry, SlidingWindow, State, Verdict,
};

type Log = Arc<Mutex<Vec<String>>>;

fn one_failure_trips() -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(Duration::from_millis(2_500))
        .build()
        .unwrap()
}

fn logged(name: &str, config: Config) -> (CircuitBreaker, ManualClock, Log) {
    let clock = ManualClock::new();
    let log: Log = Arc::default();
    let sink = log.clone();
    let breaker = CircuitBreaker::builder(name)
        .config(config)
        .clock(clock.clone())
        .listener(move |e: &Event<'_>| sink.lock().unwrap().push(e.to_string()))
        .build()
        .unwrap();
    (breaker, clock, log)
}

#[test]
fn r13_1_every_event_names_its_source_and_kind() {
    let err = std::io::Error::other("boom");
    let events = [
        (
            Event::state_changed("a", State::Closed, State::Open),
            "state_changed",
            "a: state closed -> open",
        ),
        (
            Event::call_recorded("a", Outcome::SlowFailure, Duration::from_millis(1500)),
            "call_recorded",
            "a: recorded slow_failure (1.500s)",
        ),
        (
            Event::call_rejected("a", State::ForcedOpen),
            "call_rejected",
            "a: call rejected (forced_open)",
        ),
        (Event::reset("a"), "reset", "a: reset"),
        (
            Event::storage_degraded("a", &err),
            "storage_degraded",
            "a: storage degraded: boom",
        ),
        (
            Event::storage_recovered("a"),
            "storage_recovered",
            "a: storage recovered",
        ),
        (
            Event::storage_write_dropped("a"),
            "storage_write_dropped",
            "a: storage write dropped, queue full",
        ),
        (
            Event::retry_scheduled("r", 2, Duration::from_millis(250)),
            "retry_scheduled",
            "r: attempt 2 failed, retrying in 0.250s",
        ),
        (
            Event::bulkhead_rejected("r"),
            "bulkhead_rejected",
            "r: bulkhead full",
        ),
        (
            Event::fallback_used("r", &err),
            "fallback_used",
            "r: fallback used for: boom",
        ),
    ];
    for (event, kind, text) in events {
        assert_eq!(event.kind(), kind);
        assert_eq!(event.to_string(), text);
        assert_eq!(event.name(), &text[..1]);
    }
}

#[test]
fn d5_a_fan_out_delivers_to_every_listener_despite_panics() {
    let seen: Log = Arc::default();
    let (a, b) = (seen.clone(), seen.clone());
    let mut fan = FanOut::new();
    assert!(fan.is_empty());
    fan.push(|_: &Event<'_>| panic!("a buggy exporter"));
    let fan = fan
        .with(move |e: &Event<'_>| a.lock().unwrap().push(format!("1 {}", e.kind())))
        .with(Arc::new(move |e: &Event<'_>| {
            b.lock().unwrap().push(format!("2 {}", e.kind()));
        }) as Arc<dyn EventListener>);
    assert_eq!(fan.len(), 3);
    assert!(!fan.is_empty());
    assert_eq!(format!("{fan:?}"), "FanOut { listeners: 3 }");
    fan.on_event(&Event::reset("x"));
    assert_eq!(*seen.lock().unwrap(), ["1 reset", "2 reset"]);
}

#[test]
fn config_errors_name_the_field_and_explain() {
    let err = Config::builder()
        .failure_rate_threshold(1.5)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "failure_rate_threshold");
    assert!(!err.reason().is_empty());
    assert!(err.to_string().contains("failure_rate_threshold"), "{err}");
    let own = ConfigError::new("my_field", "must be odd");
    assert_eq!((own.field(), own.reason()), ("my_field", "must be odd"));
}

#[derive(Debug)]
struct Wrapped(std::io::Error);

impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wrapped")
    }
}

impl Error for Wrapped {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
    }
}

#[test]
fn r6_4_rejections_and_call_errors_read_as_documented() {
    let (b, clock, _) = logged("db", one_failure_trips());
    let failed: CallError<Wrapped> = b
        .call(|| Err::<(), _>(Wrapped(std::io::Error::other("refused"))))
        .unwrap_err();
    assert!(!failed.is_rejected());
    assert!(failed.rejected().is_none());
    assert_eq!(failed.to_string(), "wrapped");
    assert_eq!(failed.source().unwrap().to_string(), "refused");
    let mapped = failed.map_inner(|w| w.0.kind());
    assert_eq!(mapped, CallError::Inner(std::io::ErrorKind::Other));
    assert_eq!(mapped.into_inner(), Some(std::io::ErrorKind::Other));

    clock.advance(Duration::from_millis(1_000));
    let rejected = b.call(|| Ok::<_, Wrapped>(())).unwrap_err();
    assert!(rejected.is_rejected());
    // Issue 24: the layer describes itself; the rejection is its source.
    assert_eq!(rejected.to_string(), "call not permitted");
    assert_eq!(
        rejected.source().unwrap().to_string(),
        "circuit 'db' is open; retry in ~1.500s"
    );
    let open: CircuitOpenError = rejected.rejected().unwrap().clone();
    assert_eq!(open.retry_after_secs(), Some(2));
    let last = open.last_failure().unwrap();
    assert_eq!(last.message(), "wrapped");
    assert!(
        last.type_name().ends_with("Wrapped"),
        "{}",
        last.type_name()
    );
    assert!(format!("{last:?}").contains("message: \"wrapped\""));
    let debug = format!("{open:?}");
    assert!(
        debug.contains("breaker_name: \"db\"") && debug.contains("Open"),
        "{debug}"
    );
    let again: CallError<Wrapped> = CallError::from(open.clone());
    assert_eq!(again.rejected(), Some(&open));
    assert!(again.map_inner(|w| w.0).into_inner().is_none());

    b.force_open();
    let forced = b.acquire().unwrap_err();
    assert_eq!(forced.to_string(), "circuit 'db' is open");
    assert_ne!(forced, open, "state and estimate differ");
}

#[test]
fn handles_and_builders_describe_themselves() {
    let builder = CircuitBreaker::builder("svc").initial_state(State::Disabled);
    let copy = builder.clone();
    let text = format!("{copy:?}");
    assert!(
        text.contains("\"svc\"") && text.contains("Disabled"),
        "{text}"
    );
    assert!(text.contains("coordinated: false"), "{text}");
    let breaker = builder.build().unwrap();
    let text = format!("{breaker:?}");
    assert!(
        text.contains("\"svc\"") && text.contains("Disabled"),
        "{text}"
    );
    assert!(!breaker.is_coordinated());
    assert!(!breaker.is_shut_down());
    assert!(breaker.ptr_eq(&breaker.clone()));
    assert!(!breaker.ptr_eq(&CircuitBreaker::new("svc")));
    let other = CircuitBreaker::new("gen");
    other.force_open();
    other.force_open();
    let text = format!("{other:?}");
    assert!(text.contains("generation: 2"), "{text}");
    let permit = breaker.acquire().unwrap();
    assert_eq!(permit.breaker_name(), "svc");
    let text = format!("{permit:?}");
    assert!(
        text.contains("generation: 0") && text.contains("probe: false"),
        "{text}"
    );
    permit.success();

    let plain = CircuitBreaker::new("plain");
    assert_eq!(plain.state(), State::Closed);
    assert_eq!(plain.config(), &Config::default());
    assert_eq!(
        plain.config().trip_policy(),
        interlock::TripPolicy::FailureRate
    );
}

#[test]
fn r4_4_a_permit_classifies_an_error_like_call_does() {
    let (b, _, _) = logged("db", one_failure_trips());
    let forgiving = CircuitBreaker::builder("lenient")
        .config(one_failure_trips())
        .classifier(|e: &(dyn Error + 'static)| {
            if e.to_string() == "not found" {
                Verdict::Success
            } else {
                Verdict::Failure
            }
        })
        .build()
        .unwrap();
    let text = format!(
        "{:?}",
        CircuitBreaker::builder("c").classifier(|_: &(dyn Error + 'static)| Verdict::Failure)
    );
    assert!(text.contains("CircuitBreakerBuilder"), "{text}");
    forgiving
        .acquire()
        .unwrap()
        .finish(&Err::<(), _>(std::io::Error::other("not found")));
    assert_eq!(forgiving.state(), State::Closed, "forgiven");
    assert!(forgiving.last_failure().is_none());
    b.acquire().unwrap().finish(&Ok::<_, std::io::Error>(()));
    assert_eq!(b.state(), State::Closed);
    b.acquire()
        .unwrap()
        .finish(&Err::<(), _>(std::io::Error::other("down")));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().unwrap().message(), "down");
}

/// An error whose `Display` itself fails a call on another breaker: the
/// breaker must still remember both messages.
#[derive(Debug)]
struct Reentrant(CircuitBreaker);

impl Error for Reentrant {}

impl fmt::Display for Reentrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = self.0.call(|| Err::<(), _>(std::io::Error::other("inner")));
        f.write_str("outer")
    }
}

#[test]
fn r11_3_last_failure_survives_an_error_display_that_reenters_a_breaker() {
    let inner = CircuitBreaker::new("inner");
    let outer = CircuitBreaker::new("outer");
    let _ = outer.call(|| Err::<(), _>(Reentrant(inner.clone())));
    assert_eq!(outer.last_failure().unwrap().message(), "outer");
    assert_eq!(inner.last_failure().unwrap().message(), "inner");
    assert_eq!(
        inner.snapshot().total_calls,
        1,
        "the error's text is produced once"
    );
}

#[test]
fn r6_3_without_auto_transition_nothing_moves_open_on_its_own() {
    // The wait has elapsed on the injected clock and real time passes, but
    // without `auto_transition` only a call moves OPEN to HALF_OPEN.
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(Duration::from_millis(5))
        .build()
        .unwrap();
    let (b, clock, _) = logged("lazy", config);
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    clock.advance(Duration::from_secs(1));
    #[allow(clippy::disallowed_methods)] // real time must pass for a timer to fire
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_after(), Some(Duration::ZERO));
}

#[tokio::test]
async fn the_async_api_of_a_local_breaker() {
    let (b, _, log) = logged("svc", one_failure_trips());
    let ok = b
        .call_async_classified(
            || async { Ok::<_, std::io::Error>(404) },
            |r: Result<&i32, &std::io::Error>| match r {
                Ok(404) => Verdict::Failure,
                _ => Verdict::Success,
            },
        )
        .await;
    assert_eq!(ok.unwrap(), 404, "the call keeps its result");
    assert_eq!(b.state(), State::Open, "classified a failure");
    assert!(b.acquire_async().await.is_err());
    b.reset();
    let permit = b.acquire_async().await.unwrap();
    permit.inconclusive(); // counts as a failure when CLOSED (R9.2)
    assert_eq!(b.state(), State::Open);
    b.close_async().await;
    b.close_async().await; // idempotent
    assert!(b.is_shut_down());
    assert_eq!(
        log.lock().unwrap().first().map(String::as_str),
        Some("svc: recorded failure (0.000s)")
    );
}

#[test]
fn r12_3_close_cancels_an_armed_timer() {
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(Duration::from_secs(3_600))
        .auto_transition(true)
        .build()
        .unwrap();
    let (b, _, log) = logged("timed", config);
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    assert_eq!(b.state(), State::Open);
    b.close();
    assert!(b.is_shut_down());
    b.reset();
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    assert_eq!(b.state(), State::Open, "still works, on local state");
    assert!(log.lock().unwrap().iter().any(|e| e == "timed: reset"));
}

#[tokio::test]
async fn r14_registry_accessors_and_async_close() {
    let registry = Registry::builder()
        .config(one_failure_trips())
        .initial_state(State::MetricsOnly)
        .build()
        .unwrap();
    let builder_text = format!(
        "{:?}",
        Registry::builder().initial_state(State::Disabled).clone()
    );
    assert!(builder_text.contains("Disabled"), "{builder_text}");
    assert!(registry.is_empty());
    assert!(!registry.is_coordinated());
    assert_eq!(registry.config(), &one_failure_trips());
    let a = registry.get("a");
    assert_eq!(a.state(), State::MetricsOnly);
    assert!(!registry.is_empty());
    assert_eq!(
        format!("{registry:?}"),
        "Registry { names: [\"a\"], coordinated: false, .. }"
    );
    registry.close_all_async().await;
    assert!(a.is_shut_down());
    assert!(Registry::default().is_empty());
}
