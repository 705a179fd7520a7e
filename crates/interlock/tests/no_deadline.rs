//! `Duration::MAX` means "no deadline" (issue 20, item 4) for every
//! timeout, wait and backoff, blocking and async: a delay too large to add
//! to an instant never elapses, instead of elapsing at once (an async
//! `Timeout` firing after microseconds, an async bulkhead rejecting at
//! once, a retry not waiting) or panicking a background thread (the
//! coordinator lane's poll timer).
//!
//! The async cases are driven by hand with a no-op waker: "still pending
//! after the poll that would have fired the deadline" needs no wall clock.
//! Where a real thread must act, the test polls with a deadline.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions
#![allow(
    clippy::disallowed_methods,
    reason = "the coordinator's lane and the sleeper run on real time; every wait has a deadline"
)]

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use interlock::pipeline::backoff::Constant;
use interlock::pipeline::{Bulkhead, Pipeline, Retry, Sleeper, StdSleeper, Timeout};
use interlock::storage::{Coordinator, MemoryStorage, StorageSettings};
use interlock::{CircuitBreaker, Config, SlidingWindow, State};

#[derive(Debug, Clone, PartialEq)]
struct Boom;

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("boom")
    }
}

impl Error for Boom {}

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Option<F::Output> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match f.poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// A future that is pending until `open` is set (polled by hand).
async fn until(open: Arc<AtomicBool>) {
    std::future::poll_fn(|_| {
        if open.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// A future that completes on its second poll.
async fn second_poll() {
    let mut first = true;
    std::future::poll_fn(|_| {
        if std::mem::take(&mut first) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
}

#[test]
fn the_default_sleeper_never_ends_a_sleep_of_duration_max() {
    let mut sleep = StdSleeper.sleep(Duration::MAX);
    for _ in 0..10 {
        assert!(
            poll_once(sleep.as_mut()).is_none(),
            "a sleep of Duration::MAX ended"
        );
    }
    // A sleep just short of the limit of `Instant` also never ends early.
    let mut long = StdSleeper.sleep(Duration::from_secs(u64::MAX / 2));
    assert!(poll_once(long.as_mut()).is_none());
    // And an ordinary sleep still ends.
    let started = Instant::now();
    let short = StdSleeper.sleep(Duration::from_millis(1));
    block_on_parking(short);
    assert!(started.elapsed() >= Duration::from_millis(1));
}

#[test]
fn an_async_timeout_of_duration_max_never_fires() {
    let pipeline = Pipeline::builder().timeout(Duration::MAX).build();
    let call = pipeline.call_async(|| async {
        second_poll().await;
        Ok::<_, Boom>("done")
    });
    let mut call = std::pin::pin!(call);
    // The first poll leaves the call pending; the deadline must not fire.
    assert!(
        poll_once(call.as_mut()).is_none(),
        "Timeout(Duration::MAX) fired on the first poll"
    );
    assert_eq!(poll_once(call.as_mut()).unwrap().unwrap(), "done");
}

#[test]
fn a_blocking_timeout_of_duration_max_lets_the_call_finish() {
    let pipeline = Pipeline::builder()
        .timeout(Timeout::new(Duration::MAX))
        .build();
    assert_eq!(pipeline.call(|| Ok::<_, Boom>(7)).unwrap(), 7);
}

#[test]
fn an_async_bulkhead_with_max_wait_duration_max_waits_for_the_slot() {
    let bulkhead = Bulkhead::builder(1)
        .max_wait(Duration::MAX)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().bulkhead(bulkhead.clone()).build();
    let release = Arc::new(AtomicBool::new(false));

    let holder = pipeline.call_async({
        let release = release.clone();
        move || {
            let release = release.clone();
            async move {
                until(release).await;
                Ok::<_, Boom>("held")
            }
        }
    });
    let mut holder = std::pin::pin!(holder);
    assert!(poll_once(holder.as_mut()).is_none());
    assert_eq!(bulkhead.async_in_flight(), 1);

    let waiter = pipeline.call_async(|| async { Ok::<_, Boom>("waited") });
    let mut waiter = std::pin::pin!(waiter);
    match poll_once(waiter.as_mut()) {
        None => {}
        Some(result) => panic!("the waiter did not wait for the slot: {result:?}"),
    }

    release.store(true, Ordering::SeqCst);
    assert_eq!(poll_once(holder.as_mut()).unwrap().unwrap(), "held");
    assert_eq!(poll_once(waiter.as_mut()).unwrap().unwrap(), "waited");
}

#[test]
fn a_blocking_bulkhead_with_max_wait_duration_max_waits_for_the_slot() {
    let bulkhead = Bulkhead::builder(1)
        .max_wait(Duration::MAX)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().bulkhead(bulkhead.clone()).build();
    let release = Arc::new(AtomicBool::new(false));
    let holder = {
        let (pipeline, release) = (pipeline.clone(), release.clone());
        std::thread::spawn(move || {
            pipeline.call(move || {
                while !release.load(Ordering::SeqCst) {
                    std::thread::park_timeout(Duration::from_millis(5));
                }
                Ok::<_, Boom>("held")
            })
        })
    };
    wait_until("the holder takes the slot", || {
        bulkhead.blocking_in_flight() == 1
    });
    let waiter = {
        let pipeline = pipeline.clone();
        std::thread::spawn(move || pipeline.call(|| Ok::<_, Boom>("waited")))
    };
    release.store(true, Ordering::SeqCst);
    assert_eq!(holder.join().unwrap().unwrap(), "held");
    assert_eq!(waiter.join().unwrap().unwrap(), "waited");
}

#[test]
fn an_async_retry_with_a_backoff_of_duration_max_waits_before_retrying() {
    let retry = Retry::builder(3)
        .backoff(Constant::new(Duration::MAX))
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().retry(retry).build();
    let attempts = Arc::new(AtomicU32::new(0));
    let call = pipeline.call_async({
        let attempts = attempts.clone();
        move || {
            let attempts = attempts.clone();
            async move {
                attempts.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(Boom)
            }
        }
    });
    let mut call = std::pin::pin!(call);
    for _ in 0..10 {
        assert!(poll_once(call.as_mut()).is_none(), "the retry gave up");
    }
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        1,
        "a backoff of Duration::MAX retried without waiting"
    );
}

#[test]
fn a_jittered_backoff_of_duration_max_stays_huge_and_never_panics() {
    for seed in 0..2_000 {
        let delay = Constant::new(Duration::MAX).jitter(seed).next().unwrap();
        assert!(delay >= Duration::MAX / 2, "seed {seed}: {delay:?}");
    }
}

#[test]
fn a_coordinator_with_a_poll_interval_of_duration_max_still_runs_writes() {
    let settings = StorageSettings::builder()
        .poll_interval(Duration::MAX)
        .build()
        .unwrap();
    let storage = MemoryStorage::builder().settings(settings).build();
    let coordinator = Coordinator::blocking(storage.clone());
    let breaker = CircuitBreaker::builder("no-poll")
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()
                .unwrap(),
        )
        .coordinator(&coordinator)
        .build()
        .unwrap();
    // The lane has started (and, before the fix, panicked adding
    // `Duration::MAX` to the time of its first poll).
    wait_until("the first poll", || {
        breaker.shared_view().is_some() || storage.operations().total() > 0
    });
    for _ in 0..2 {
        let _ = breaker.call(|| Err::<(), _>(Boom));
    }
    assert_eq!(breaker.state(), State::Open);
    // The trip is a write the lane runs: it reaches the storage.
    wait_until("the shared trip", || {
        storage
            .peek("no-poll")
            .is_some_and(|s| s.state == State::Open)
    });
    breaker.close();
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_coordinator_with_a_poll_interval_of_duration_max_still_runs_writes() {
    let settings = StorageSettings::builder()
        .poll_interval(Duration::MAX)
        .build()
        .unwrap();
    let storage = MemoryStorage::builder().settings(settings).build();
    let coordinator = Coordinator::asynchronous(storage.clone());
    let breaker = CircuitBreaker::builder("no-poll-async")
        .config(
            Config::builder()
                .minimum_number_of_calls(2)
                .sliding_window(SlidingWindow::count(2))
                .build()
                .unwrap(),
        )
        .coordinator(&coordinator)
        .build()
        .unwrap();
    for _ in 0..2 {
        let _ = breaker.call_async(|| async { Err::<(), _>(Boom) }).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while storage
        .peek("no-poll-async")
        .is_none_or(|s| s.state != State::Open)
    {
        assert!(Instant::now() < deadline, "the shared trip never ran");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    breaker.close_async().await;
}

// ---------------------------------------------------------------- helpers

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs a future that is woken from another thread.
fn block_on_parking<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(Instant::now() < deadline, "the future never completed");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}
