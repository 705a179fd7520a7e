//! Hedging, chaos injection and rate limiting: each strategy alone and in a
//! pipeline, on the blocking and the async path, on `ManualClock` or
//! tokio's paused clock.
#![cfg(feature = "tokio")] // async tests sleep on tokio's paused clock
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

mod chaos;
mod hedge;
#[cfg(feature = "governor")]
mod rate_limit;

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::{Clock, Event, Timestamp};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Boom(pub(crate) &'static str);

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Error for Boom {}

pub(crate) type Log = Arc<Mutex<Vec<String>>>;

/// A listener that writes every event as text.
pub(crate) fn recorder() -> (Log, impl Fn(&Event<'_>) + Send + Sync + 'static) {
    let log: Log = Arc::default();
    let sink = log.clone();
    (log, move |e: &Event<'_>| {
        sink.lock().unwrap().push(e.to_string())
    })
}

pub(crate) fn lines(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

pub(crate) fn counter() -> Arc<AtomicU32> {
    Arc::new(AtomicU32::new(0))
}

/// Sets its flag when dropped: proves a future was cancelled.
pub(crate) struct DropFlag(pub(crate) Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// tokio's (paused) clock as an interlock `Clock`, so latencies measured
/// by a strategy follow `tokio::time::advance` and tokio sleeps.
#[derive(Debug, Clone)]
pub(crate) struct TokioTime(tokio::time::Instant);

impl TokioTime {
    pub(crate) fn new() -> Self {
        TokioTime(tokio::time::Instant::now())
    }
}

impl Clock for TokioTime {
    fn now(&self) -> Timestamp {
        let elapsed = self.0.elapsed();
        Timestamp::from_nanos(u64::try_from(elapsed.as_nanos()).unwrap())
    }
}

/// Polls a future on this thread until it completes; for futures that only
/// wait on a `ManualSleeper` (which completes at once).
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut f = std::pin::pin!(f);
    for _ in 0..1000 {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("the future did not complete: it waits on something")
}

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Every strategy can be shared between threads (and so between tasks).
#[test]
fn strategies_are_send_and_sync() {
    fn send_sync<T: Send + Sync + 'static>() {}
    type Gen = fn() -> Boom;
    type Res = fn() -> Result<u8, Boom>;
    send_sync::<interlock::pipeline::Hedge>();
    send_sync::<interlock::pipeline::chaos::Fault<Gen>>();
    send_sync::<interlock::pipeline::chaos::Latency>();
    send_sync::<interlock::pipeline::chaos::Outcome<Res>>();
    send_sync::<interlock::pipeline::chaos::Switch>();
    #[cfg(feature = "governor")]
    {
        send_sync::<interlock::pipeline::RateLimit>();
        send_sync::<interlock::pipeline::KeyedRateLimit>();
        send_sync::<interlock::pipeline::rate_limit::Exceeded>();
    }
}

/// A listener that panics on every event does not change what the call
/// returns, for every strategy that reports (D5).
#[test]
fn a_panicking_listener_changes_nothing() {
    use interlock::ManualClock;
    use interlock::pipeline::{Hedge, ManualSleeper, Pipeline, chaos};

    let panics = |_: &Event<'_>| panic!("a buggy exporter");
    let clock = ManualClock::new();
    let pipeline = Pipeline::builder()
        .hedge(
            Hedge::builder(Duration::from_secs(3600))
                .listener(panics)
                .build()
                .unwrap(),
        )
        .chaos(
            chaos::Latency::builder(ms(5))
                .injection_rate(1.0)
                .sleeper(ManualSleeper::new(clock.clone()))
                .listener(panics)
                .build()
                .unwrap(),
        )
        .build();
    let attempts = counter();
    let seen = attempts.clone();
    let answer = pipeline.call(move || match seen.fetch_add(1, Ordering::SeqCst) {
        0 => Err(Boom("first")),
        _ => Ok("replaced"),
    });
    assert_eq!(
        answer.unwrap(),
        "replaced",
        "the hedge went on after its listener panicked"
    );

    #[cfg(feature = "governor")]
    {
        use interlock::pipeline::RateLimit;
        let limit = RateLimit::per_second(1)
            .clock(clock)
            .listener(panics)
            .build()
            .unwrap();
        let pipeline = Pipeline::builder().rate_limit(limit).build();
        pipeline.call(|| Ok::<_, Boom>(())).unwrap();
        let err = pipeline.call(|| Ok::<_, Boom>(())).unwrap_err();
        assert!(err.rate_limited().is_some());
    }
    let fault = chaos::Fault::builder(|| Boom("injected"))
        .injection_rate(1.0)
        .listener(panics)
        .build()
        .unwrap();
    let err = Pipeline::builder()
        .chaos(fault)
        .build()
        .call(|| Ok::<_, Boom>(()));
    assert!(matches!(
        err,
        Err(interlock::pipeline::PipelineError::Inner(Boom("injected")))
    ));
}
