//! `Hedge`: delays, the first success, cancelled losers, replacements,
//! percentiles, open circuits, the blocking path and configuration.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::pipeline::{Hedge, ManualSleeper, Pipeline, PipelineError, TokioSleeper};
use interlock::{CircuitBreaker, ManualClock};
use tokio::time::Instant;

use super::{Boom, DropFlag, TokioTime, block_on, counter, lines, ms, recorder};

/// Attempt `n` (1-based) of a scripted call: how long it takes and how it ends.
type Script = Arc<dyn Fn(u32) -> (Duration, Result<&'static str, Boom>) + Send + Sync>;

/// A call whose attempts follow `script`, counting them and flagging each
/// attempt's future when it is dropped.
struct Scripted {
    attempts: Arc<AtomicU32>,
    dropped: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
    script: Script,
}

impl Scripted {
    fn new(
        script: impl Fn(u32) -> (Duration, Result<&'static str, Boom>) + Send + Sync + 'static,
    ) -> Self {
        Scripted {
            attempts: counter(),
            dropped: Arc::default(),
            script: Arc::new(script),
        }
    }

    fn attempt(
        &self,
    ) -> impl std::future::Future<Output = Result<&'static str, Boom>> + Send + 'static {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        let flag = Arc::new(AtomicBool::new(false));
        self.dropped.lock().unwrap().push(flag.clone());
        let (takes, result) = (self.script)(n);
        async move {
            let _flag = DropFlag(flag);
            tokio::time::sleep(takes).await;
            result
        }
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }

    /// Which attempts' futures were dropped, by 1-based number.
    fn dropped(&self) -> Vec<u32> {
        let flags = self.dropped.lock().unwrap();
        (1..)
            .zip(flags.iter())
            .filter(|(_, f)| f.load(Ordering::SeqCst))
            .map(|(n, _)| n)
            .collect()
    }
}

fn hedge(delay: Duration) -> interlock::pipeline::HedgeBuilder<interlock::pipeline::UnlessOpen> {
    Hedge::builder(delay).name("search").sleeper(TokioSleeper)
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_after_the_delay_and_the_loser_is_cancelled() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).listener(listener).build().unwrap())
        .build();
    // The first attempt would take 10 s; the hedge answers in 50 ms.
    let call = Scripted::new(|n| match n {
        1 => (Duration::from_secs(10), Ok("primary")),
        _ => (ms(50), Ok("hedge")),
    });
    let start = Instant::now();
    let answer = pipeline.call_async(|| call.attempt()).await.unwrap();
    assert_eq!(answer, "hedge");
    assert_eq!(start.elapsed(), ms(150), "100 ms delay + 50 ms hedge");
    assert_eq!(call.attempts(), 2);
    assert_eq!(call.dropped(), [1, 2], "the loser was dropped at once");
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.100s"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_faster_than_the_delay_is_never_hedged() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).listener(listener).build().unwrap())
        .build();
    let call = Scripted::new(|_| (ms(99), Ok("fast")));
    assert_eq!(
        pipeline.call_async(|| call.attempt()).await.unwrap(),
        "fast"
    );
    assert_eq!(call.attempts(), 1);
    assert!(lines(&log).is_empty());
}

#[tokio::test(start_paused = true)]
async fn at_most_max_hedged_attempts_start_one_delay_apart() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(
            hedge(ms(100))
                .max_hedged_attempts(2)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .build();
    // Every attempt takes 1 s: the first one started is the first to end.
    let call = Scripted::new(|_| (Duration::from_secs(1), Ok("slow")));
    let start = Instant::now();
    assert_eq!(
        pipeline.call_async(|| call.attempt()).await.unwrap(),
        "slow"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(
        call.attempts(),
        3,
        "the first attempt and two hedges, no more"
    );
    assert_eq!(call.dropped(), [1, 2, 3]);
    assert_eq!(
        lines(&log),
        [
            "search: hedged attempt 2 started after 0.100s",
            "search: hedged attempt 3 started after 0.100s",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_replaced_at_once() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).listener(listener).build().unwrap())
        .build();
    let call = Scripted::new(|n| match n {
        1 => (ms(10), Err(Boom("reset by peer"))),
        _ => (ms(20), Ok("second")),
    });
    let start = Instant::now();
    assert_eq!(
        pipeline.call_async(|| call.attempt()).await.unwrap(),
        "second"
    );
    assert_eq!(start.elapsed(), ms(30), "no delay before the replacement");
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.000s"]
    );
}

#[tokio::test(start_paused = true)]
async fn when_every_attempt_fails_the_last_error_comes_back() {
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).max_hedged_attempts(2).build().unwrap())
        .build();
    let call = Scripted::new(|n| {
        let error = ["first", "second", "third"][n as usize - 1];
        (ms(10), Err(Boom(error)))
    });
    let err = pipeline.call_async(|| call.attempt()).await.unwrap_err();
    assert!(
        matches!(err, PipelineError::Inner(Boom("third"))),
        "{err:?}"
    );
    assert_eq!(call.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn an_error_the_predicate_does_not_select_is_the_answer_at_once() {
    // Hedge only on timeouts: a "bad request" is final, and cancels the hedge.
    let pipeline = Pipeline::builder()
        .hedge(
            hedge(ms(100))
                .when(|e: &PipelineError<Boom>| e.is_timeout())
                .build()
                .unwrap(),
        )
        .build();
    let call = Scripted::new(|n| match n {
        1 => (ms(150), Err(Boom("bad request"))),
        _ => (Duration::from_secs(5), Ok("never")),
    });
    let start = Instant::now();
    let err = pipeline.call_async(|| call.attempt()).await.unwrap_err();
    assert!(matches!(err, PipelineError::Inner(Boom("bad request"))));
    assert_eq!(start.elapsed(), ms(150));
    assert_eq!(call.attempts(), 2, "the hedge had started at 100 ms");
    assert_eq!(call.dropped(), [1, 2], "and was cancelled");
}

#[tokio::test(start_paused = true)]
async fn an_open_circuit_gets_no_hedge() {
    let (log, listener) = recorder();
    let breaker = CircuitBreaker::new("search");
    let pipeline = Pipeline::builder()
        .hedge(
            hedge(ms(100))
                .max_hedged_attempts(3)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .build();
    breaker.force_open();
    let call = Scripted::new(|_| (ms(10), Ok("never")));
    let start = Instant::now();
    let err = pipeline.call_async(|| call.attempt()).await.unwrap_err();
    assert!(err.is_rejected());
    assert_eq!(start.elapsed(), Duration::ZERO, "no delay was waited out");
    assert_eq!(call.attempts(), 0, "the dependency was never called");
    assert!(
        lines(&log).is_empty(),
        "no hedge started: {:?}",
        lines(&log)
    );
}

#[tokio::test(start_paused = true)]
async fn once_a_hedge_is_rejected_no_further_hedge_starts_and_the_first_attempt_still_counts() {
    let (log, listener) = recorder();
    let breaker = CircuitBreaker::new("search");
    let pipeline = Pipeline::builder()
        .hedge(
            hedge(ms(100))
                .max_hedged_attempts(3)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .build();
    let call = Scripted::new(|_| (Duration::from_secs(1), Ok("primary")));
    // The circuit opens (an operator, or other traffic) while attempt 1 runs.
    let opener = {
        let breaker = breaker.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ms(50)).await;
            breaker.force_open();
        })
    };
    let start = Instant::now();
    let answer = pipeline.call_async(|| call.attempt()).await.unwrap();
    opener.await.unwrap();
    // Hedge 2 was refused by the breaker without reaching the dependency;
    // hedges 3 and 4 never started; attempt 1 answered at 1 s.
    assert_eq!(answer, "primary");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(call.attempts(), 1);
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.100s"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_rejected_hedge_and_a_failed_first_attempt_give_the_last_error() {
    let breaker = CircuitBreaker::new("search");
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).max_hedged_attempts(3).build().unwrap())
        .circuit_breaker(breaker.clone())
        .build();
    let call = Scripted::new(|_| (ms(300), Err(Boom("upstream"))));
    let opener = {
        let breaker = breaker.clone();
        tokio::spawn(async move {
            tokio::time::sleep(ms(50)).await;
            breaker.force_open();
        })
    };
    let err = pipeline.call_async(|| call.attempt()).await.unwrap_err();
    opener.await.unwrap();
    // The first attempt failed after the rejection: no replacement into the
    // open circuit, and its own error is the answer.
    assert!(
        matches!(err, PipelineError::Inner(Boom("upstream"))),
        "{err:?}"
    );
    assert_eq!(call.attempts(), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_cancels_every_attempt() {
    let pipeline = Pipeline::builder()
        .hedge(hedge(ms(100)).build().unwrap())
        .build();
    let call = Scripted::new(|_| (Duration::from_secs(10), Ok("slow")));
    let outcome = tokio::time::timeout(ms(250), pipeline.call_async(|| call.attempt())).await;
    assert!(outcome.is_err(), "the outer timeout fired");
    assert_eq!(call.attempts(), 2);
    assert_eq!(call.dropped(), [1, 2]);
}

#[tokio::test(start_paused = true)]
async fn duration_max_never_hedges_on_time_but_still_replaces_a_failure() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(hedge(Duration::MAX).listener(listener).build().unwrap())
        .build();
    let slow = Scripted::new(|_| (Duration::from_secs(3600), Ok("an hour")));
    assert_eq!(
        pipeline.call_async(|| slow.attempt()).await.unwrap(),
        "an hour"
    );
    assert_eq!(slow.attempts(), 1);
    assert!(lines(&log).is_empty());

    let failing = Scripted::new(|n| match n {
        1 => (ms(5), Err(Boom("once"))),
        _ => (ms(5), Ok("replaced")),
    });
    assert_eq!(
        pipeline.call_async(|| failing.attempt()).await.unwrap(),
        "replaced"
    );
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.000s"]
    );
}

#[tokio::test(start_paused = true)]
async fn the_percentile_delay_follows_the_latencies_of_successful_attempts() {
    let (log, listener) = recorder();
    let hedge = hedge(Duration::from_secs(1))
        .percentile(0.5)
        .latency_window(4)
        .clock(TokioTime::new())
        .listener(listener)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().hedge(hedge.clone()).build();
    for latency in [40, 10, 30, 20] {
        assert_eq!(
            hedge.current_delay(),
            Duration::from_secs(1),
            "not full yet"
        );
        let call = Scripted::new(move |_| (ms(latency), Ok("ok")));
        pipeline.call_async(|| call.attempt()).await.unwrap();
    }
    // Sorted 10, 20, 30, 40: the median (nearest rank) is 20 ms.
    assert_eq!(hedge.current_delay(), ms(20));
    assert!(lines(&log).is_empty(), "nothing was hedged meanwhile");

    // A call of 35 ms is now hedged at 20 ms; the hedge answers at 25 ms.
    let call = Scripted::new(|n| match n {
        1 => (ms(35), Ok("primary")),
        _ => (ms(5), Ok("hedge")),
    });
    let start = Instant::now();
    assert_eq!(
        pipeline.call_async(|| call.attempt()).await.unwrap(),
        "hedge"
    );
    assert_eq!(start.elapsed(), ms(25));
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.020s"]
    );
    // The window slid: 10, 30, 20 and the hedge's 5 -> median 10 ms.
    assert_eq!(hedge.current_delay(), ms(10));
}

#[test]
fn failures_do_not_feed_the_percentile() {
    let clock = ManualClock::new();
    let hedge = Hedge::builder(Duration::from_secs(1))
        .percentile(1.0)
        .latency_window(2)
        .clock(clock.clone())
        .sleeper(ManualSleeper::new(clock.clone()))
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().hedge(hedge.clone()).build();
    for (latency, ok) in [(500, false), (500, false), (7, true), (9, true)] {
        let clock = clock.clone();
        let _ = pipeline.call(move || {
            clock.advance(ms(latency));
            if ok { Ok(()) } else { Err(Boom("no")) }
        });
    }
    assert_eq!(
        hedge.current_delay(),
        ms(9),
        "the maximum of the two successes"
    );
}

#[test]
fn blocking_calls_are_hedged_on_worker_threads() {
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .hedge(
            Hedge::builder(ms(20))
                .name("search")
                .listener(listener)
                .build()
                .unwrap(),
        )
        .build();
    // Attempt 1 blocks until released; attempt 2 answers at once.
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let hold = Arc::new(Mutex::new(hold));
    let attempts = counter();
    let seen = attempts.clone();
    let answer = pipeline
        .call(move || {
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                let _ = hold.lock().unwrap().recv();
                return Ok("primary");
            }
            Ok::<_, Boom>("hedge")
        })
        .unwrap();
    assert_eq!(answer, "hedge");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.020s"]
    );
    drop(release); // lets the abandoned worker finish
}

#[test]
fn blocking_failures_are_replaced_and_rejections_are_not() {
    let (log, listener) = recorder();
    let breaker = CircuitBreaker::new("dep");
    let pipeline = Pipeline::builder()
        .hedge(
            Hedge::builder(Duration::from_secs(3600))
                .name("search")
                .max_hedged_attempts(2)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .build();
    let attempts = counter();
    let seen = attempts.clone();
    let answer = pipeline.call(move || match seen.fetch_add(1, Ordering::SeqCst) {
        0 => Err(Boom("first")),
        _ => Ok("second"),
    });
    assert_eq!(answer.unwrap(), "second");
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.000s"]
    );

    breaker.force_open();
    let err = pipeline.call(|| Ok::<_, Boom>("never")).unwrap_err();
    assert!(err.is_rejected());
    assert_eq!(lines(&log).len(), 1, "no hedge into the open circuit");
}

#[test]
fn a_blocking_attempt_that_panics_panics_the_caller() {
    let pipeline = Pipeline::builder()
        .hedge(Hedge::builder(Duration::from_secs(3600)).build().unwrap())
        .build();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = pipeline.call(|| -> Result<(), Boom> { panic!("inside") });
    }));
    assert!(caught.is_err());
}

#[test]
fn the_manual_sleeper_drives_async_hedges_without_a_runtime() {
    let clock = ManualClock::new();
    let pipeline = Pipeline::builder()
        .hedge(
            Hedge::builder(ms(50))
                .sleeper(ManualSleeper::new(clock.clone()))
                .build()
                .unwrap(),
        )
        .build();
    let attempts = AtomicU32::new(0);
    let answer = block_on(pipeline.call_async(|| {
        let first = attempts.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                std::future::pending::<()>().await;
            }
            Ok::<_, Boom>("hedge")
        }
    }));
    assert_eq!(answer.unwrap(), "hedge");
    assert_eq!(interlock::Clock::now(&clock).as_nanos(), 50_000_000);
}

#[test]
fn bad_configuration_is_refused_naming_the_field() {
    let field = |b: interlock::pipeline::HedgeBuilder<_>| b.build().unwrap_err().field();
    let d = Duration::from_millis(10);
    assert_eq!(
        field(Hedge::builder(d).max_hedged_attempts(0)),
        "max_hedged_attempts"
    );
    for p in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        assert_eq!(field(Hedge::builder(d).percentile(p)), "percentile", "{p}");
    }
    for n in [0, interlock::pipeline::hedge::MAX_LATENCY_WINDOW + 1] {
        assert_eq!(
            field(Hedge::builder(d).percentile(0.9).latency_window(n)),
            "latency_window"
        );
    }
    let err = Hedge::builder(d)
        .max_hedged_attempts(0)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid max_hedged_attempts: must be at least 1 (a hedge that never hedges), got 0"
    );
    // The edges are accepted.
    assert!(Hedge::builder(d).percentile(0.0).build().is_ok());
    assert!(
        Hedge::builder(d)
            .percentile(1.0)
            .latency_window(1)
            .build()
            .is_ok()
    );
    let hedge = Hedge::builder(d)
        .max_hedged_attempts(4)
        .name("h")
        .build()
        .unwrap();
    assert_eq!((hedge.name(), hedge.max_hedged_attempts()), ("h", 4));
    let text = format!("{hedge:?}");
    assert!(text.contains("max_hedged_attempts: 4"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_stops_hedging_too() {
    let (log, listener) = recorder();
    let bulkhead = interlock::pipeline::Bulkhead::builder(1).build().unwrap();
    let pipeline = Pipeline::builder()
        .hedge(
            hedge(ms(100))
                .max_hedged_attempts(3)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .bulkhead(bulkhead)
        .build();
    let call = Scripted::new(|_| (Duration::from_secs(1), Ok("primary")));
    let start = Instant::now();
    assert_eq!(
        pipeline.call_async(|| call.attempt()).await.unwrap(),
        "primary"
    );
    // Hedge 2 found the only slot taken; 3 and 4 never started.
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(call.attempts(), 1);
    assert_eq!(
        lines(&log),
        ["search: hedged attempt 2 started after 0.100s"]
    );
}
