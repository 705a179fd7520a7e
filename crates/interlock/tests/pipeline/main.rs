//! The resilience pipeline: every strategy alone and composed, on the
//! blocking and the async path, on `ManualClock` or tokio's paused clock.
#![cfg(feature = "tokio")] // async tests sleep on tokio's paused clock
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::pipeline::backoff::{Constant, Exponential};
use interlock::pipeline::{
    Bulkhead, Fallback, ManualSleeper, Pipeline, PipelineError, Retry, Strategy, Timeout, bulkhead,
    timeout,
};
use interlock::{
    CircuitBreaker, CircuitOpenError, Config, Event, ManualClock, SlidingWindow, State, Verdict,
};

#[derive(Debug, Clone, PartialEq)]
struct Boom(&'static str);

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Error for Boom {}

type Log = Arc<Mutex<Vec<String>>>;

/// A listener that writes every event as text.
fn recorder() -> (Log, impl Fn(&Event<'_>) + Send + Sync + 'static) {
    let log: Log = Arc::default();
    let sink = log.clone();
    (log, move |e: &Event<'_>| {
        sink.lock().unwrap().push(e.to_string())
    })
}

fn breaker(clock: &ManualClock, window: u32) -> CircuitBreaker {
    CircuitBreaker::builder("dep")
        .config(
            Config::builder()
                .minimum_number_of_calls(window)
                .sliding_window(SlidingWindow::count(window))
                .wait_duration_in_open(Duration::from_secs(10))
                .permitted_calls_in_half_open(1)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn counter() -> Arc<AtomicU32> {
    Arc::new(AtomicU32::new(0))
}

/// Sets its flag when dropped: proves a future was cancelled.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------- timeout

#[test]
fn blocking_timeout_gives_up_on_time_and_lets_fast_calls_through() {
    let pipeline = Pipeline::builder()
        .timeout(Duration::from_millis(20))
        .build();
    let (release, hang) = std::sync::mpsc::channel::<()>();
    let hang = Mutex::new(hang);
    let err = pipeline
        .call(move || {
            let _ = hang.lock().unwrap().recv();
            Ok::<_, Boom>(1)
        })
        .unwrap_err();
    let PipelineError::Timeout(elapsed) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(elapsed.duration(), Duration::from_millis(20));
    drop(release);

    let fast = Pipeline::builder().timeout(Duration::from_secs(30)).build();
    assert_eq!(fast.call(|| Ok::<_, Boom>(7)).unwrap(), 7);
    assert!(matches!(
        fast.call(|| Err::<u8, _>(Boom("no"))),
        Err(PipelineError::Inner(Boom("no")))
    ));
}

#[test]
fn blocking_timeout_propagates_a_panic_of_the_call() {
    let pipeline = Pipeline::builder().timeout(Duration::from_secs(30)).build();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = pipeline.call(|| -> Result<(), Boom> { panic!("inside") });
    }));
    assert!(caught.is_err());
}

#[tokio::test(start_paused = true)]
async fn async_timeout_cancels_the_call_at_the_deadline() {
    let timeout =
        Timeout::new(Duration::from_millis(200)).sleeper(interlock::pipeline::TokioSleeper);
    let pipeline = Pipeline::builder().timeout(timeout).build();
    let dropped = Arc::new(AtomicBool::new(false));
    let start = tokio::time::Instant::now();
    let err = pipeline
        .call_async(|| {
            let flag = DropFlag(dropped.clone());
            async move {
                let _flag = flag;
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, Boom>(())
            }
        })
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert!(dropped.load(Ordering::SeqCst), "the hung call was dropped");
}

#[test]
fn async_timeout_on_a_manual_clock_and_its_error_is_a_breaker_failure() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 2);
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .timeout(Timeout::new(Duration::from_secs(2)).sleeper(ManualSleeper::new(clock.clone())))
        .build();
    for _ in 0..2 {
        let err =
            block_on(pipeline.call_async(std::future::pending::<Result<(), Boom>>)).unwrap_err();
        assert!(err.is_timeout());
    }
    assert_eq!(breaker.state(), State::Open);
    let last = breaker.last_failure().unwrap();
    assert_eq!(last.message(), "call timed out after 2.000s");
    assert_eq!(last.type_name(), std::any::type_name::<timeout::Elapsed>());
    // the timed-out calls lasted the whole deadline on the breaker's clock
    assert_eq!(clock.now_secs(), 4);
}

trait NowSecs {
    fn now_secs(&self) -> u64;
}

impl NowSecs for ManualClock {
    fn now_secs(&self) -> u64 {
        use interlock::Clock;
        self.now().as_secs()
    }
}

// --------------------------------------------------------------- bulkhead

#[test]
fn bulkhead_rejects_when_full_and_frees_the_slot_after_the_call() {
    let (log, listener) = recorder();
    let bulkhead = Bulkhead::builder(1)
        .name("pool")
        .listener(listener)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().bulkhead(bulkhead.clone()).build();

    let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let (entered_tx, wait) = (Mutex::new(entered_tx), Mutex::new(wait));
    let holder = {
        let pipeline = pipeline.clone();
        std::thread::spawn(move || {
            pipeline.call(move || {
                entered_tx.lock().unwrap().send(()).unwrap();
                let _ = wait.lock().unwrap().recv();
                Ok::<_, Boom>("held")
            })
        })
    };
    entered.recv().unwrap();
    assert_eq!(bulkhead.blocking_in_flight(), 1);
    let err = pipeline.call(|| Ok::<_, Boom>("second")).unwrap_err();
    let PipelineError::BulkheadFull(full) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(full.name(), "pool");
    assert_eq!(
        err.to_string(),
        "bulkhead 'pool' is full (1 calls in flight)"
    );
    assert!(!err.is_rejected(), "a full bulkhead is not an open circuit");

    // the async pool is independent of the blocking one
    assert_eq!(
        block_on(pipeline.call_async(|| async { Ok::<_, Boom>("task") })).unwrap(),
        "task"
    );

    release.send(()).unwrap();
    assert_eq!(holder.join().unwrap().unwrap(), "held");
    assert_eq!(bulkhead.blocking_in_flight(), 0);
    assert_eq!(pipeline.call(|| Ok::<_, Boom>("third")).unwrap(), "third");
    assert_eq!(*log.lock().unwrap(), ["pool: bulkhead full"]);
}

#[tokio::test(start_paused = true)]
async fn async_bulkhead_waits_up_to_max_wait() {
    let bulkhead = Bulkhead::builder(1)
        .max_wait(Duration::from_millis(500))
        .sleeper(interlock::pipeline::TokioSleeper)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().bulkhead(bulkhead.clone()).build();

    // A holds the slot for 300 ms: B waits and gets it.
    let a = tokio::spawn({
        let p = pipeline.clone();
        async move {
            p.call_async(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, Boom>("a")
            })
            .await
        }
    });
    tokio::task::yield_now().await;
    assert_eq!(bulkhead.async_in_flight(), 1);
    let start = tokio::time::Instant::now();
    let b = pipeline.call_async(|| async { Ok::<_, Boom>("b") }).await;
    assert_eq!(b.unwrap(), "b");
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(a.await.unwrap().unwrap(), "a");

    // C holds it for 2 s: D gives up after max_wait.
    let c = tokio::spawn({
        let p = pipeline.clone();
        async move {
            p.call_async(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok::<_, Boom>("c")
            })
            .await
        }
    });
    tokio::task::yield_now().await;
    let start = tokio::time::Instant::now();
    let d = pipeline.call_async(|| async { Ok::<_, Boom>("d") }).await;
    assert!(d.unwrap_err().is_bulkhead_full());
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    assert_eq!(c.await.unwrap().unwrap(), "c");
    assert_eq!(bulkhead.async_in_flight(), 0);
}

#[test]
fn bulkhead_rejects_zero_slots() {
    let err = Bulkhead::builder(0).build().unwrap_err();
    assert_eq!(err.field(), "max_concurrent");
}

#[test]
fn a_full_bulkhead_can_be_an_inconclusive_probe() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder("dep")
        .config(
            Config::builder()
                .minimum_number_of_calls(1)
                .sliding_window(SlidingWindow::count(1))
                .wait_duration_in_open(Duration::from_secs(1))
                .permitted_calls_in_half_open(2)
                .max_concurrent_probes(2)
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .classifier(|e: &(dyn Error + 'static)| {
            if e.is::<bulkhead::Full>() {
                Verdict::Inconclusive
            } else {
                Verdict::Failure
            }
        })
        .build()
        .unwrap();
    let bulkhead = Bulkhead::builder(1).build().unwrap();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .bulkhead(bulkhead.clone())
        .build();
    let _ = pipeline.call(|| Err::<(), _>(Boom("down")));
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(1));

    // Occupy the async pool, then probe through it: no slot.
    let holder = pipeline.call_async(std::future::pending::<Result<(), Boom>>);
    let mut holder = Box::pin(holder);
    assert!(poll_once(holder.as_mut()).is_none()); // probe 1 holds the slot
    let err = block_on(pipeline.call_async(|| async { Ok::<_, Boom>(()) })).unwrap_err();
    assert!(err.is_bulkhead_full(), "{err:?}");
    let probes = breaker.probes();
    assert_eq!(probes.inconclusive, 1);
    assert_eq!(probes.failures, 0);
    assert_eq!(breaker.state(), State::HalfOpen);
    drop(holder);
    assert_eq!(breaker.probes().in_flight, 0);
}

// --------------------------------------------------------------- fallback

#[test]
fn fallback_handles_only_what_it_is_told_and_sees_the_error() {
    let (log, listener) = recorder();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let pipeline = Pipeline::builder()
        .fallback(
            Fallback::new(
                |e: &PipelineError<Boom>| e.inner().is_some_and(|b| b.0 == "soft"),
                move |e: PipelineError<Boom>| {
                    *seen2.lock().unwrap() = e.into_inner();
                    "substitute"
                },
            )
            .name("fb")
            .listener(listener),
        )
        .build();
    assert_eq!(pipeline.call(|| Ok::<_, Boom>("real")).unwrap(), "real");
    assert_eq!(pipeline.call(|| Err(Boom("soft"))).unwrap(), "substitute");
    assert_eq!(*seen.lock().unwrap(), Some(Boom("soft")));
    assert!(matches!(
        pipeline.call(|| Err::<&str, _>(Boom("hard"))),
        Err(PipelineError::Inner(Boom("hard")))
    ));
    assert_eq!(
        block_on(pipeline.call_async(|| async { Err(Boom("soft")) })).unwrap(),
        "substitute"
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["fb: fallback used for: soft", "fb: fallback used for: soft"]
    );
}

// ------------------------------------------------------------------ retry

fn failing(
    calls: &Arc<AtomicU32>,
    fail_first: u32,
) -> impl Fn() -> Result<u32, Boom> + Send + Sync + 'static {
    let calls = calls.clone();
    move || {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= fail_first {
            Err(Boom("flaky"))
        } else {
            Ok(n)
        }
    }
}

#[test]
fn retry_caps_attempts_follows_the_backoff_and_returns_the_original_error() {
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let (log, listener) = recorder();
    let retry = Retry::builder(4)
        .backoff(Exponential::new(Duration::from_millis(100)))
        .sleeper(sleeper.clone())
        .name("r")
        .listener(listener)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().retry(retry).build();

    let calls = counter();
    let err = pipeline.call(failing(&calls, 100)).unwrap_err();
    assert_eq!(err.into_inner(), Some(Boom("flaky")));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(sleeper.sleeps(), [100, 200, 400].map(Duration::from_millis));
    assert_eq!(
        *log.lock().unwrap(),
        [
            "r: attempt 1 failed, retrying in 0.100s",
            "r: attempt 2 failed, retrying in 0.200s",
            "r: attempt 3 failed, retrying in 0.400s"
        ]
    );

    let calls = counter();
    assert_eq!(pipeline.call(failing(&calls, 2)).unwrap(), 3);
    // the backoff restarts for every operation
    assert_eq!(sleeper.sleeps()[3..], [100, 200].map(Duration::from_millis));
}

#[test]
fn retry_stops_when_the_backoff_runs_out_and_respects_its_predicate() {
    let clock = ManualClock::new();
    let retry = Retry::builder(10)
        .backoff(vec![Duration::from_secs(1)])
        .sleeper(ManualSleeper::new(clock.clone()))
        .build()
        .unwrap();
    let calls = counter();
    let _ = Pipeline::new(retry).call(failing(&calls, 100));
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let only_timeouts = Retry::builder(5)
        .when(|e: &PipelineError<Boom>| e.is_timeout())
        .sleeper(ManualSleeper::new(clock))
        .build()
        .unwrap();
    let calls = counter();
    let _ = Pipeline::new(only_timeouts).call(failing(&calls, 100));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        Retry::builder(0).build().unwrap_err().field(),
        "max_attempts"
    );
}

#[test]
fn retry_unless_open_never_retries_a_rejection() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 2);
    let sleeper = ManualSleeper::new(clock.clone());
    let pipeline = Pipeline::builder()
        .retry(Retry::builder(5).sleeper(sleeper.clone()).build().unwrap())
        .circuit_breaker(breaker.clone())
        .build();
    let calls = counter();
    let err = pipeline.call(failing(&calls, 100)).unwrap_err();
    // two failures trip the breaker; the third attempt is rejected and ends the loop
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(err.is_rejected());
    assert_eq!(sleeper.sleeps().len(), 2);
}

#[test]
fn retry_wait_for_probe_waits_exactly_retry_after_without_jitter() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let sleeper = ManualSleeper::new(clock.clone());
    let pipeline = Pipeline::builder()
        .retry(
            Retry::builder(3)
                .backoff(Constant::new(Duration::from_millis(50)))
                .wait_for_probe()
                .probe_jitter(Duration::ZERO)
                .sleeper(sleeper.clone())
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .build();
    let _ = breaker.call(|| Err::<(), _>(Boom("down"))); // trips
    clock.advance(Duration::from_secs(4));
    let calls = counter();
    assert_eq!(pipeline.call(failing(&calls, 0)).unwrap(), 1);
    assert_eq!(sleeper.sleeps(), [Duration::from_secs(6)]);
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn async_retry_sleeps_on_the_tokio_clock() {
    let retry = Retry::builder(3)
        .backoff(Constant::new(Duration::from_secs(1)))
        .sleeper(interlock::pipeline::TokioSleeper)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().retry(retry).build();
    let calls = counter();
    let start = tokio::time::Instant::now();
    let result = pipeline
        .call_async(|| {
            let f = failing(&calls, 2);
            async move { f() }
        })
        .await;
    assert_eq!(result.unwrap(), 3);
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

// ------------------------------------------------------------ composition

#[test]
fn retry_outside_the_breaker_counts_every_attempt_inside_counts_the_operation() {
    let clock = ManualClock::new();
    let retry = || {
        Retry::builder(3)
            .sleeper(ManualSleeper::new(clock.clone()))
            .build()
            .unwrap()
    };

    let per_attempt = breaker(&clock, 100);
    let pipeline = Pipeline::builder()
        .retry(retry())
        .circuit_breaker(per_attempt.clone())
        .build();
    let calls = counter();
    assert_eq!(pipeline.call(failing(&calls, 2)).unwrap(), 3);
    let s = per_attempt.snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (3, 2));

    let per_operation = breaker(&clock, 100);
    let pipeline = Pipeline::builder()
        .circuit_breaker(per_operation.clone())
        .retry(retry())
        .build();
    let calls = counter();
    assert_eq!(pipeline.call(failing(&calls, 2)).unwrap(), 3);
    let s = per_operation.snapshot();
    assert_eq!((s.total_calls, s.failed_calls), (1, 0));
}

#[test]
fn the_full_stack_reports_its_events_in_order() {
    let clock = ManualClock::new();
    let (log, listener) = recorder();
    let listener = Arc::new(listener);
    let breaker = CircuitBreaker::builder("dep")
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()
                .unwrap(),
        )
        .clock(clock.clone())
        .listener(listener.clone())
        .build()
        .unwrap();
    let sleeper = ManualSleeper::new(clock.clone());
    let pipeline = Pipeline::builder()
        .fallback(
            Fallback::new(|e: &PipelineError<Boom>| e.is_rejected(), |_| 0)
                .name("fb")
                .listener(listener.clone()),
        )
        .retry(
            Retry::builder(5)
                .backoff(Constant::new(Duration::from_secs(1)))
                .sleeper(sleeper.clone())
                .name("retry")
                .listener(listener.clone())
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker)
        .bulkhead(
            Bulkhead::builder(4)
                .name("bh")
                .listener(listener.clone())
                .build()
                .unwrap(),
        )
        .timeout(Timeout::new(Duration::from_secs(5)).sleeper(sleeper))
        .build();
    let value = block_on(pipeline.call_async(|| async { Err::<u32, _>(Boom("down")) })).unwrap();
    assert_eq!(value, 0);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "dep: recorded failure (0.000s)",
            "retry: attempt 1 failed, retrying in 1.000s",
            "dep: recorded failure (0.000s)",
            "dep: state closed -> open",
            "retry: attempt 2 failed, retrying in 1.000s",
            "dep: call rejected (open)",
            "fb: fallback used for: circuit 'dep' is open; retry in ~59.000s",
        ]
    );
}

#[test]
fn cancellation_crosses_every_layer() {
    let clock = ManualClock::new();
    let breaker = breaker(&clock, 1);
    let _ = breaker.call(|| Err::<(), _>(Boom("down")));
    clock.advance(Duration::from_secs(10)); // the next call is a probe
    let bulkhead = Bulkhead::builder(1).build().unwrap();
    let pipeline = Pipeline::builder()
        .fallback(Fallback::new(|_: &PipelineError<Boom>| true, |_| ()))
        .retry(
            Retry::builder(3)
                .sleeper(ManualSleeper::new(clock.clone()))
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .bulkhead(bulkhead.clone())
        .timeout(Timeout::new(Duration::from_secs(3600)))
        .build();
    let dropped = Arc::new(AtomicBool::new(false));
    let mut call = Box::pin(pipeline.call_async(|| {
        let flag = DropFlag(dropped.clone());
        async move {
            let _flag = flag;
            std::future::pending::<Result<(), Boom>>().await
        }
    }));
    let recorded = breaker.snapshot().total_calls;
    assert!(poll_once(call.as_mut()).is_none());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.probes().in_flight, 1);
    assert_eq!(bulkhead.async_in_flight(), 1);
    drop(call);
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(breaker.probes().in_flight, 0, "the probe slot went back");
    assert_eq!(breaker.probes().admitted, 0);
    assert_eq!(bulkhead.async_in_flight(), 0, "the bulkhead slot went back");
    assert_eq!(
        breaker.snapshot().total_calls,
        recorded,
        "nothing was recorded"
    );
    assert_eq!(breaker.probes().completed, 0);
}

#[test]
fn a_custom_strategy_and_its_errors() {
    #[derive(Debug)]
    struct Deny;
    impl<T, E> Strategy<T, E> for Deny {
        fn execute<F>(&self, _next: F) -> Result<T, PipelineError<E>>
        where
            F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
            T: Send + 'static,
            E: Send + 'static,
        {
            Err(PipelineError::Other("denied".into()))
        }
        async fn execute_async<F, Fut>(&self, _next: F) -> Result<T, PipelineError<E>>
        where
            F: Fn() -> Fut + Send + Sync,
            Fut: std::future::Future<Output = Result<T, PipelineError<E>>> + Send,
            T: Send,
            E: Send,
        {
            Err(PipelineError::Other("denied".into()))
        }
    }
    let pipeline = Pipeline::builder().add(Deny).build();
    let err = pipeline.call(|| Ok::<_, Boom>(())).unwrap_err();
    assert_eq!(err.to_string(), "denied");
    let boxed = err.into_boxed();
    assert_eq!(boxed.to_string(), "denied");
}

#[test]
fn errors_unwrap_to_their_own_types() {
    let err: PipelineError<Boom> = PipelineError::Inner(Boom("x"));
    assert!(err.into_boxed().downcast_ref::<Boom>().is_some());
    let err: PipelineError<Boom> = timeout::Elapsed::new(Duration::from_secs(1)).into();
    assert!(err.as_error().is::<interlock::CallTimeoutError>());
    assert!(
        err.into_boxed()
            .downcast_ref::<timeout::Elapsed>()
            .is_some()
    );
    let breaker = CircuitBreaker::new("b");
    breaker.force_open();
    let err: PipelineError<Boom> = breaker.call(|| Ok::<_, Boom>(())).unwrap_err().into();
    assert!(
        err.into_boxed()
            .downcast_ref::<CircuitOpenError>()
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_futures_are_send() {
    let pipeline = Pipeline::builder()
        .fallback(Fallback::new(
            |e: &PipelineError<Boom>| e.is_timeout(),
            |_| 0u32,
        ))
        .retry(Retry::builder(2).build().unwrap())
        .circuit_breaker(CircuitBreaker::new("send"))
        .bulkhead(Bulkhead::builder(2).build().unwrap())
        .timeout(Duration::from_secs(5))
        .build();
    let handle =
        tokio::spawn(async move { pipeline.call_async(|| async { Ok::<_, Boom>(5u32) }).await });
    assert_eq!(handle.await.unwrap().unwrap(), 5);
}

#[test]
fn std_sleeper_times_out_a_hung_future_on_real_time() {
    let pipeline = Pipeline::builder()
        .timeout(Duration::from_millis(10))
        .build();
    let err = block_on_parking(pipeline.call_async(std::future::pending::<Result<(), Boom>>));
    assert!(err.unwrap_err().is_timeout());
}

#[cfg(feature = "backon")]
mod with_backon {
    use super::*;
    use backon::{BlockingRetryable, ConstantBuilder, Retryable};
    use interlock::pipeline::backon::{is_open, unless_open, wait_probe, wait_probe_with};

    #[test]
    fn unless_open_stops_at_the_first_rejection() {
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 2);
        let calls = counter();
        let result = (|| breaker.call(failing(&calls, 100)))
            .retry(
                ConstantBuilder::default()
                    .with_delay(Duration::ZERO)
                    .with_max_times(10),
            )
            .when(unless_open)
            .call();
        assert!(result.unwrap_err().is_rejected());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn wait_probe_waits_retry_after_within_the_budget() {
        let clock = ManualClock::new();
        let breaker = breaker(&clock, 1);
        let _ = breaker.call(|| Err::<(), _>(Boom("down")));
        let start = tokio::time::Instant::now();
        let attempts = counter();
        let result = (|| {
            // keep the breaker's clock in step with tokio's paused clock
            clock.advance(
                start
                    .elapsed()
                    .saturating_sub(Duration::from_secs(clock.now_secs())),
            );
            attempts.fetch_add(1, Ordering::SeqCst);
            let r = breaker.call(|| Ok::<_, Boom>("ok"));
            async move { r }
        })
        .retry(
            ConstantBuilder::default()
                .with_delay(Duration::from_millis(1))
                .with_max_times(2),
        )
        .when(is_open)
        .adjust(wait_probe_with(Duration::ZERO, 1))
        .await;
        assert_eq!(result.unwrap(), "ok");
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(attempts.load(Ordering::SeqCst), 2);

        // the budget still caps it: no retries left means no wait
        breaker.force_open();
        assert_eq!(
            wait_probe(&breaker.call(|| Ok::<_, Boom>(())).unwrap_err(), None),
            None
        );
    }
}

// ---------------------------------------------------------------- helpers

/// Polls a future once with a no-op waker.
fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match f.poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

/// Runs a future that never waits on anything (manual clocks).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    for _ in 0..1000 {
        if let Some(v) = poll_once(f.as_mut()) {
            return v;
        }
    }
    panic!("the future did not complete: it waits on something")
}

/// Runs a future that is woken from another thread.
fn block_on_parking<F: std::future::Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
