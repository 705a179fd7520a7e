//! Errors and retries as Rust services have them (issue 24): any error type
//! through every entry point, rejections found wherever they travel, no
//! retry into an open circuit, waits that spread, `Timeout::builder`, and
//! the last failure a rejection carries (R11.3).
#![cfg(all(
    feature = "tokio",
    feature = "tower",
    feature = "backon",
    feature = "http"
))]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::pipeline::{ManualSleeper, Pipeline, PipelineError, Retry, Timeout};
use interlock::{
    CallError, CircuitBreaker, CircuitOpenError, Config, Event, ManualClock, SlidingWindow, State,
    Verdict, find_rejection,
};

type BoxError = Box<dyn Error + Send + Sync>;

/// Trips on one failure; 10 s wait; one probe.
fn breaker(name: &str, clock: &ManualClock) -> CircuitBreaker {
    CircuitBreaker::builder(name)
        .config(
            Config::builder()
                .minimum_number_of_calls(1)
                .sliding_window(SlidingWindow::count(1))
                .wait_duration_in_open(Duration::from_secs(10))
                .permitted_calls_in_half_open(1)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Forgives `NotFound` io errors wherever they hide (a classifier over `dyn Error`).
fn forgiving(name: &str) -> CircuitBreaker {
    CircuitBreaker::builder(name)
        .classifier(
            |e: &(dyn Error + 'static)| match e.downcast_ref::<std::io::Error>() {
                Some(io) if io.kind() == std::io::ErrorKind::NotFound => Verdict::Success,
                _ => Verdict::Failure,
            },
        )
        .build()
        .unwrap()
}

fn not_found() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::NotFound)
}

fn counter() -> Arc<AtomicU32> {
    Arc::new(AtomicU32::new(0))
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(f)
}

// ---- 1. any error type -------------------------------------------------------

fn anyhow_fetch(breaker: &CircuitBreaker, fail: bool) -> anyhow::Result<u32> {
    // The first line most services write: `?` on `call` in an anyhow function.
    let n = breaker.call(|| -> anyhow::Result<u32> {
        if fail {
            Err(anyhow::anyhow!("warehouse unreachable"))
        } else {
            Ok(7)
        }
    })?;
    Ok(n)
}

#[test]
fn call_with_anyhow_returns_anyhow_counts_failures_and_keeps_the_message() {
    let clock = ManualClock::new();
    let b = breaker("anyhow", &clock);
    assert_eq!(anyhow_fetch(&b, false).unwrap(), 7);
    let err = anyhow_fetch(&b, true).unwrap_err();
    assert_eq!(err.to_string(), "warehouse unreachable");
    assert_eq!(b.state(), State::Open);
    let last = b.last_failure().unwrap();
    assert_eq!(last.message(), "warehouse unreachable");
    assert_eq!(last.type_name(), "anyhow::Error");
    // The rejection, as an anyhow::Error: downcast and chain both find it.
    let err = anyhow_fetch(&b, false).unwrap_err();
    assert_eq!(
        err.downcast_ref::<CircuitOpenError>()
            .unwrap()
            .breaker_name(),
        "anyhow"
    );
    assert!(find_rejection(err.as_ref()).is_some());
}

#[test]
fn the_classifier_sees_the_error_inside_every_handle() {
    let b = forgiving("handles");
    let _ = b.call(|| Err::<(), anyhow::Error>(not_found().into()));
    let _ = b.call(|| Err::<(), eyre::Report>(not_found().into()));
    let _ = b.call(|| Err::<(), BoxError>(not_found().into()));
    let _ = b.call(|| Err::<(), Box<dyn Error>>(not_found().into()));
    let _ = b.call(|| Err::<(), std::io::Error>(not_found()));
    let s = b.snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (5, 0));
    let _ = b.call(|| Err::<(), anyhow::Error>(anyhow::anyhow!("boom")));
    let _ = b.call(|| Err::<(), eyre::Report>(eyre::eyre!("boom")));
    let _ = b.call(|| Err::<(), BoxError>("boom".into()));
    let _ = b.call(|| Err::<(), Box<dyn Error>>("boom".into()));
    assert_eq!(b.snapshot().failed_calls, 4);
}

#[test]
fn eyre_and_boxed_errors_come_back_as_themselves_with_the_rejection_inside() {
    fn eyre_call(b: &CircuitBreaker) -> eyre::Result<()> {
        b.call(|| Err::<(), _>(eyre::eyre!("eyre boom")))?;
        Ok(())
    }
    fn boxed_call(b: &CircuitBreaker) -> Result<(), BoxError> {
        b.call(|| Err::<(), BoxError>("boxed boom".into()))?;
        Ok(())
    }
    fn local_call(b: &CircuitBreaker) -> Result<(), Box<dyn Error>> {
        b.call(|| Err::<(), Box<dyn Error>>("local boom".into()))?;
        Ok(())
    }
    let clock = ManualClock::new();
    let (e, x, l) = (
        breaker("e", &clock),
        breaker("x", &clock),
        breaker("l", &clock),
    );
    assert_eq!(eyre_call(&e).unwrap_err().to_string(), "eyre boom");
    assert_eq!(boxed_call(&x).unwrap_err().to_string(), "boxed boom");
    assert_eq!(local_call(&l).unwrap_err().to_string(), "local boom");
    assert_eq!(x.last_failure().unwrap().message(), "boxed boom");
    // Each is open now: the rejection comes back inside the handle.
    assert!(
        eyre_call(&e)
            .unwrap_err()
            .downcast_ref::<CircuitOpenError>()
            .is_some()
    );
    assert!(boxed_call(&x).unwrap_err().is::<CircuitOpenError>());
    assert!(local_call(&l).unwrap_err().is::<CircuitOpenError>());
}

#[test]
fn call_async_and_permit_finish_take_the_same_error_types() {
    let b = forgiving("async");
    block_on(async {
        let r = b
            .call_async(|| async { Err::<(), anyhow::Error>(not_found().into()) })
            .await;
        assert!(r.unwrap_err().downcast_ref::<std::io::Error>().is_some());
        let r: Result<(), eyre::Report> = b.call_async(|| async { Err(eyre::eyre!("down")) }).await;
        assert_eq!(r.unwrap_err().to_string(), "down");
        let r = b
            .call_async(|| async { Err::<(), BoxError>("down".into()) })
            .await;
        assert!(r.is_err());
    });
    b.acquire()
        .unwrap()
        .finish(&Err::<(), anyhow::Error>(anyhow::anyhow!("finished")));
    b.acquire()
        .unwrap()
        .finish(&Err::<(), BoxError>(not_found().into()));
    let s = b.snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (5, 3));
    assert_eq!(b.last_failure().unwrap().message(), "finished");
}

#[test]
fn the_classified_variants_take_any_error_and_convert_for_question_mark() {
    fn status(b: &CircuitBreaker) -> anyhow::Result<u16> {
        let status = b
            .call_classified(
                || Ok::<u16, anyhow::Error>(503),
                |r| match r {
                    Ok(&s) if s >= 500 => Verdict::Failure,
                    _ => Verdict::Success,
                },
            )
            .map_err(CallError::into_error)?;
        Ok(status)
    }
    let clock = ManualClock::new();
    let b = breaker("classified", &clock);
    assert_eq!(status(&b).unwrap(), 503);
    assert_eq!(b.state(), State::Open);
    assert!(status(&b).unwrap_err().is::<CircuitOpenError>());
    let r = block_on(b.call_async_classified(
        || async { Err::<(), eyre::Report>(eyre::eyre!("x")) },
        |_| Verdict::Failure,
    ));
    assert!(r.unwrap_err().is_rejected());
}

#[test]
fn a_pipeline_takes_anyhow_and_gives_anyhow_back() {
    let clock = ManualClock::new();
    let b = breaker("pipe", &clock);
    let pipeline = Pipeline::builder()
        .retry(
            Retry::builder(3)
                .sleeper(ManualSleeper::new(clock.clone()))
                .build()
                .unwrap(),
        )
        .circuit_breaker(b.clone())
        .timeout(Timeout::new(Duration::from_secs(5)).sleeper(ManualSleeper::new(clock.clone())))
        .build();
    let calls = counter();
    let seen = calls.clone();
    let run = || -> anyhow::Result<u32> {
        let n = pipeline.call(move || -> anyhow::Result<u32> {
            seen.fetch_add(1, Ordering::SeqCst);
            Err(anyhow::anyhow!("pipeline boom"))
        })?;
        Ok(n)
    };
    // Attempt 1 fails and trips; attempt 2 is rejected: not retried further.
    let err = run().unwrap_err();
    assert!(err.downcast_ref::<CircuitOpenError>().is_some(), "{err:#}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(b.last_failure().unwrap().message(), "pipeline boom");
    // The async path, with a boxed error and a timeout converted into it.
    let timeout = Pipeline::builder()
        .timeout(Timeout::new(Duration::from_secs(5)).sleeper(ManualSleeper::new(clock)))
        .build();
    let r: Result<(), BoxError> = block_on(
        timeout.call_async(|| async { std::future::pending::<Result<(), BoxError>>().await }),
    );
    assert!(r.unwrap_err().is::<interlock::CallTimeoutError>());
}

#[test]
fn the_tower_layer_takes_boxed_anyhow_and_eyre_service_errors() {
    use tower::{Layer, Service, ServiceExt, service_fn};
    let b = forgiving("tower");
    let mut svc = interlock::tower::CircuitBreakerLayer::new(b.clone()).layer(service_fn(
        |kind: u8| async move {
            match kind {
                0 => Err::<(), BoxError>(not_found().into()),
                _ => Err(anyhow::anyhow!("tower boom").into()),
            }
        },
    ));
    let mut anyhow_svc =
        interlock::tower::CircuitBreakerLayer::new(b.clone()).layer(service_fn(|()| async {
            Err::<(), anyhow::Error>(anyhow::anyhow!("anyhow down"))
        }));
    let mut eyre_svc =
        interlock::tower::CircuitBreakerLayer::new(b.clone()).layer(service_fn(|()| async {
            Err::<(), eyre::Report>(eyre::eyre!("eyre down"))
        }));
    block_on(async {
        let err = svc.ready().await.unwrap().call(0).await.unwrap_err();
        assert!(err.downcast_ref::<std::io::Error>().is_some());
        let _ = svc.ready().await.unwrap().call(1).await;
        let err = anyhow_svc
            .ready()
            .await
            .unwrap()
            .call(())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "anyhow down");
        let _ = eyre_svc.ready().await.unwrap().call(()).await;
    });
    let s = b.snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (4, 3));
    assert_eq!(b.last_failure().unwrap().message(), "eyre down");
}

#[test]
fn the_keyed_http_layer_takes_boxed_and_anyhow_errors() {
    use interlock::http::{HttpStatusClassifier, KeyedCircuitBreakerLayer};
    use tower::{Layer, Service, ServiceExt, service_fn};
    #[derive(Debug)]
    struct BadInput;
    impl fmt::Display for BadInput {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("bad input")
        }
    }
    impl Error for BadInput {}
    let layer = KeyedCircuitBreakerLayer::builder()
        .classifier(HttpStatusClassifier::new().exclude::<BadInput>())
        .build()
        .unwrap();
    let mut client = layer.layer(service_fn(|request: http::Request<()>| async move {
        match request.uri().path() {
            "/bug" => Err::<http::Response<()>, BoxError>(Box::new(BadInput)),
            _ => Err(anyhow::anyhow!("connection reset").into()),
        }
    }));
    block_on(async {
        for path in ["/bug", "/down"] {
            let request = http::Request::get(format!("http://api.internal{path}"))
                .body(())
                .unwrap();
            let _ = client.ready().await.unwrap().call(request).await;
        }
    });
    let s = layer.registry().get("api.internal:80").snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (2, 1));
}

// ---- 2. a rejection is findable wherever it travels --------------------------

#[derive(Debug)]
struct Wrapper(Box<dyn Error + Send + Sync>);
impl fmt::Display for Wrapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("loading the report")
    }
}
impl Error for Wrapper {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

#[test]
fn call_error_and_pipeline_error_expose_the_rejection_as_their_source() {
    let b = CircuitBreaker::new("orders");
    b.force_open();
    let err = b.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
    assert_eq!(err.to_string(), "call not permitted");
    let source = err.source().unwrap();
    assert_eq!(
        source
            .downcast_ref::<CircuitOpenError>()
            .unwrap()
            .breaker_name(),
        "orders"
    );
    // After `?` into anyhow: chain() and the helper find it.
    let any: anyhow::Error = err.into();
    assert!(any.chain().any(|e| e.is::<CircuitOpenError>()));
    assert_eq!(
        format!("{any:#}"),
        "call not permitted: circuit 'orders' is open"
    );
    assert!(find_rejection(any.as_ref()).is_some());

    let pipeline = Pipeline::builder().circuit_breaker(b.clone()).build();
    let err = pipeline.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
    assert_eq!(err.to_string(), "call not permitted");
    assert!(err.source().unwrap().is::<CircuitOpenError>());
    let boxed: BoxError = err.into();
    assert_eq!(find_rejection(&*boxed).unwrap().breaker_name(), "orders");
    // The call's own error stays transparent.
    let b = CircuitBreaker::new("transparent");
    let err = b
        .call(|| Err::<(), _>(Wrapper("inner".into())))
        .unwrap_err();
    assert_eq!(err.to_string(), "loading the report");
    assert_eq!(err.source().unwrap().to_string(), "inner");
}

#[test]
fn find_rejection_looks_through_wrappers_io_errors_and_anyhow_context() {
    let b = CircuitBreaker::new("reports");
    b.force_open();
    let open = || b.acquire().unwrap_err();
    let wrapped = Wrapper(Box::new(std::io::Error::other(Wrapper(Box::new(open())))));
    assert_eq!(find_rejection(&wrapped).unwrap().breaker_name(), "reports");
    let context = anyhow::Error::new(open()).context("fetching reports");
    assert!(find_rejection(context.as_ref()).is_some());
    let report = eyre::Report::new(b.call(|| Ok::<_, std::io::Error>(())).unwrap_err());
    assert!(find_rejection(report.as_ref()).is_some());
    assert!(find_rejection(&Wrapper("nothing".into())).is_none());
    assert!(find_rejection(&std::io::Error::other("plain")).is_none());
}

// ---- 3. never retry an open circuit, wherever the rejection comes from -------

/// A retry of 5 attempts around `attempt`, counting attempts.
fn attempts_of<E, K>(attempt: impl Fn() -> Result<(), E> + Send + Sync + 'static) -> u32
where
    E: interlock::Failure<K> + Send + 'static,
    Retry: interlock::pipeline::Strategy<(), E, K>,
{
    let clock = ManualClock::new();
    let pipeline = Pipeline::builder()
        .retry(
            Retry::builder(5)
                .sleeper(ManualSleeper::new(clock))
                .build()
                .unwrap(),
        )
        .build();
    let calls = counter();
    let seen = calls.clone();
    let _ = pipeline.call(move || {
        seen.fetch_add(1, Ordering::SeqCst);
        attempt()
    });
    calls.load(Ordering::SeqCst)
}

#[test]
fn unless_open_never_retries_a_rejection_carried_by_the_calls_own_error() {
    let open = CircuitBreaker::new("inner");
    open.force_open();
    let b = open.clone();
    // A breaker called inside the closure.
    assert_eq!(
        attempts_of(move || b.call(|| Ok::<_, std::io::Error>(()))),
        1
    );
    let b = open.clone();
    // Its rejection after `?` into anyhow, into a boxed error, inside a wrapper.
    assert_eq!(
        attempts_of(move || -> anyhow::Result<()> { Ok(b.call(|| Ok::<_, std::io::Error>(()))?) }),
        1
    );
    let b = open.clone();
    assert_eq!(
        attempts_of(move || -> Result<(), BoxError> {
            Ok(b.call(|| Ok::<_, std::io::Error>(()))?)
        }),
        1
    );
    let b = open.clone();
    assert_eq!(
        attempts_of(move || {
            b.call(|| Ok::<_, std::io::Error>(()))
                .map_err(|e| Wrapper(Box::new(e)))
        }),
        1
    );
    // Other errors are still retried.
    assert_eq!(
        attempts_of(|| Err::<(), _>(std::io::Error::other("flaky"))),
        5
    );
    assert_eq!(attempts_of(|| Err::<(), _>(anyhow::anyhow!("flaky"))), 5);
}

#[test]
fn the_backon_helpers_look_through_the_chain_of_any_error_type() {
    use interlock::pipeline::backon::{is_open, unless_open, wait_probe_with};
    let clock = ManualClock::new();
    let b = breaker("backon", &clock);
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("down")));
    let open = b.acquire().unwrap_err();
    let any = anyhow::Error::new(open.clone()).context("sync job");
    let boxed: BoxError = Box::new(Wrapper(Box::new(open.clone())));
    let nested: CallError<CallError<std::io::Error>> = CallError::Inner(CallError::Rejected(open));
    assert!(!unless_open(&any) && is_open(&any));
    assert!(!unless_open(&boxed) && is_open(&boxed));
    assert!(!unless_open(&nested) && is_open(&nested));
    assert!(unless_open(&anyhow::anyhow!("flaky")));
    // wait_probe finds the estimate inside the anyhow error too.
    let wait = wait_probe_with(Duration::ZERO, 1)(&any, Some(Duration::from_millis(1)));
    assert_eq!(wait, Some(Duration::from_secs(10)));
}

#[test]
fn an_outer_breaker_ignores_an_inner_breakers_rejection() {
    let clock = ManualClock::new();
    let outer = breaker("outer", &clock);
    let inner = breaker("inner", &clock);
    let pipeline = Pipeline::builder()
        .circuit_breaker(outer.clone())
        .circuit_breaker(inner.clone())
        .build();
    inner.force_open();
    for _ in 0..3 {
        let err = pipeline.call(|| Ok::<_, std::io::Error>(())).unwrap_err();
        assert_eq!(err.rejected().unwrap().breaker_name(), "inner");
    }
    assert_eq!(outer.snapshot().total_calls, 0, "ignored, not a failure");
    assert_eq!(outer.state(), State::Closed);
    // The same for a breaker called inside another's closure, and its probe slot goes back.
    outer.force_open();
    outer.reset();
    let _ = outer.call(|| Err::<(), _>(std::io::Error::other("trip")));
    clock.advance(Duration::from_secs(10));
    let r = outer.call(|| inner.call(|| Ok::<_, std::io::Error>(())));
    assert!(matches!(r, Err(CallError::Inner(CallError::Rejected(_)))));
    assert_eq!(outer.state(), State::HalfOpen);
    assert_eq!(outer.probes().in_flight, 0, "the probe slot went back");
    // A real failure still counts.
    inner.reset();
    let _ = pipeline.call(|| Err::<(), _>(std::io::Error::other("down")));
    assert_eq!(outer.state(), State::Open);
}

// ---- 4. waits that spread -----------------------------------------------------

fn waits_for_probe(seed: u64, jitter: Duration) -> Vec<Duration> {
    let clock = ManualClock::new();
    let b = breaker("export", &clock);
    let sleeper = ManualSleeper::new(clock.clone());
    let patient = Pipeline::builder()
        .retry(
            Retry::builder(2)
                .wait_for_probe()
                .probe_jitter(jitter)
                .seed(seed)
                .sleeper(sleeper.clone())
                .build()
                .unwrap(),
        )
        .circuit_breaker(b.clone())
        .build();
    for _ in 0..5 {
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("down"))); // trips (again)
        let _ = patient.call(|| Ok::<_, std::io::Error>(()));
        b.reset();
    }
    sleeper.sleeps()
}

#[test]
fn wait_for_probe_adds_bounded_jitter_deterministic_under_a_seed() {
    let waits = waits_for_probe(42, Duration::from_millis(100));
    assert_eq!(waits.len(), 5);
    let (lo, hi) = (Duration::from_secs(10), Duration::from_millis(10_100));
    assert!(waits.iter().all(|w| (lo..=hi).contains(w)), "{waits:?}");
    assert!(
        waits.windows(2).any(|w| w[0] != w[1]),
        "the waits spread: {waits:?}"
    );
    assert_eq!(waits, waits_for_probe(42, Duration::from_millis(100)));
    assert_ne!(waits, waits_for_probe(43, Duration::from_millis(100)));
    assert_eq!(waits_for_probe(42, Duration::ZERO), [lo; 5]);
}

#[test]
fn retry_scheduled_reports_the_attempt_that_failed() {
    let clock = ManualClock::new();
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = attempts.clone();
    let retry = Retry::builder(3)
        .sleeper(ManualSleeper::new(clock))
        .listener(move |e: &Event<'_>| {
            if let Event::RetryScheduled { attempt, .. } = e {
                sink.lock().unwrap().push(*attempt);
            }
        })
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().retry(retry).build();
    let _ = pipeline.call(|| Err::<(), _>(std::io::Error::other("flaky")));
    assert_eq!(*attempts.lock().unwrap(), [1, 2]); // as tenacity's on_retry
    let event = Event::retry_scheduled("r", 1, Duration::from_millis(100));
    assert_eq!(event.to_string(), "r: attempt 1 failed, retrying in 0.100s");
}

// ---- 5. Timeout::builder, the captured last failure ---------------------------

#[test]
fn timeout_builder_refuses_zero_like_the_other_builders() {
    let err = Timeout::builder(Duration::ZERO).build().unwrap_err();
    assert_eq!(err.field(), "timeout");
    assert_eq!(
        err.to_string(),
        "invalid timeout: must be greater than zero, got 0s"
    );
    let clock = ManualClock::new();
    let timeout = Timeout::builder(Duration::from_secs(2))
        .sleeper(ManualSleeper::new(clock))
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().timeout(timeout).build();
    let r = block_on(pipeline.call_async(std::future::pending::<Result<(), std::io::Error>>));
    assert!(matches!(r, Err(PipelineError::Timeout(t)) if t.duration() == Duration::from_secs(2)));
}

#[test]
fn r11_3_a_rejection_carries_the_failure_known_when_it_was_made() {
    let clock = ManualClock::new();
    let b = breaker("db", &clock);
    let in_flight = b.acquire().unwrap();
    let _ = b.call(|| Err::<(), _>(std::io::Error::other("timeout"))); // trips
    let Err(CallError::Rejected(first)) = b.call(|| Ok::<_, std::io::Error>(())) else {
        panic!("not rejected")
    };
    // A stale call settles later with another error: the breaker's failure changes...
    in_flight.finish(&Err::<(), _>(std::io::Error::other("reset by peer")));
    assert_eq!(b.last_failure().unwrap().message(), "reset by peer");
    let Err(CallError::Rejected(second)) = b.call(|| Ok::<_, std::io::Error>(())) else {
        panic!("not rejected")
    };
    // ...but each rejection keeps the one it was made with, even across a reset.
    b.reset();
    assert_eq!(first.last_failure().unwrap().message(), "timeout");
    assert_eq!(second.last_failure().unwrap().message(), "reset by peer");
    assert_eq!(first.clone().last_failure().unwrap().message(), "timeout");
    assert!(b.last_failure().is_none());
    b.force_open();
    assert!(
        b.acquire().unwrap_err().last_failure().is_none(),
        "none when rejected"
    );
}
