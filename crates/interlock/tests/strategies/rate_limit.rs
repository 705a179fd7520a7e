//! `RateLimit` on governor: refusals, waits, keys, cancellation, breakers
//! and configuration, on `ManualClock` and tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use interlock::pipeline::rate_limit::Exceeded;
use interlock::pipeline::{ManualSleeper, Pipeline, PipelineError, RateLimit, TokioSleeper};
use interlock::{CircuitBreaker, Clock, ManualClock, State, Verdict};

use super::{Boom, TokioTime, block_on, counter, lines, ms, recorder};

fn exceeded<T: std::fmt::Debug>(result: Result<T, PipelineError<Boom>>) -> Exceeded {
    result
        .unwrap_err()
        .rate_limited()
        .cloned()
        .expect("a rate-limit refusal")
}

#[test]
fn calls_over_the_limit_are_refused_with_the_time_of_the_next_turn() {
    let (log, listener) = recorder();
    let clock = ManualClock::new();
    let limit = RateLimit::builder(2, Duration::from_secs(1))
        .name("geocoder")
        .clock(clock.clone())
        .listener(listener)
        .build()
        .unwrap();
    let ran = counter();
    let pipeline = Pipeline::builder().rate_limit(limit).build();
    let call = || {
        let seen = ran.clone();
        pipeline.call(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Boom>(())
        })
    };
    call().unwrap();
    call().unwrap();
    let refused = exceeded(call());
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2,
        "the refused call did not run"
    );
    assert_eq!(refused.name(), "geocoder");
    assert_eq!(refused.key(), None);
    assert_eq!(refused.retry_after(), ms(500));

    clock.advance(ms(499));
    assert_eq!(exceeded(call()).retry_after(), ms(1));
    clock.advance(ms(1));
    call().unwrap();
    assert!(call().is_err(), "one turn per 500 ms after the burst");
    assert_eq!(
        lines(&log),
        [
            "geocoder: rate limit exceeded, next call in 0.500s",
            "geocoder: rate limit exceeded, next call in 0.001s",
            "geocoder: rate limit exceeded, next call in 0.500s",
        ]
    );
}

#[test]
fn the_burst_is_configurable_and_refills_at_the_steady_rate() {
    let clock = ManualClock::new();
    let limit = RateLimit::builder(10, Duration::from_secs(1))
        .burst(3)
        .clock(clock.clone())
        .build()
        .unwrap();
    let admitted = |limit: &RateLimit| (0..100).take_while(|_| limit.check().is_ok()).count();
    assert_eq!(admitted(&limit), 3, "a burst of 3");
    clock.advance(ms(100));
    assert_eq!(admitted(&limit), 1, "one every 100 ms");
    clock.advance(Duration::from_secs(60));
    assert_eq!(admitted(&limit), 3, "never more than the burst");
}

#[test]
fn with_max_wait_a_call_waits_for_its_turn_and_runs() {
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let (log, listener) = recorder();
    let pipeline = Pipeline::builder()
        .rate_limit(
            RateLimit::builder(2, Duration::from_secs(1))
                .max_wait(Duration::from_secs(1))
                .clock(clock.clone())
                .sleeper(sleeper.clone())
                .listener(listener)
                .build()
                .unwrap(),
        )
        .build();
    let at = |clock: &ManualClock| {
        let clock = clock.clone();
        move || Ok::<_, Boom>(clock.now().as_nanos() / 1_000_000)
    };
    assert_eq!(pipeline.call(at(&clock)).unwrap(), 0);
    assert_eq!(pipeline.call(at(&clock)).unwrap(), 0);
    // The third waits 500 ms, the fourth (async) another 500 ms.
    assert_eq!(pipeline.call(at(&clock)).unwrap(), 500);
    let clock2 = clock.clone();
    let started = block_on(pipeline.call_async(|| {
        let clock = clock2.clone();
        async move { Ok::<_, Boom>(clock.now().as_nanos() / 1_000_000) }
    }));
    assert_eq!(started.unwrap(), 1000);
    assert_eq!(sleeper.sleeps(), [ms(500), ms(500)]);
    assert!(lines(&log).is_empty(), "waiting is not a refusal");
}

#[test]
fn a_call_whose_turn_is_beyond_max_wait_is_refused_without_waiting() {
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let limit = RateLimit::builder(1, Duration::from_secs(10))
        .max_wait(Duration::from_secs(1))
        .clock(clock.clone())
        .sleeper(sleeper.clone())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().rate_limit(limit).build();
    pipeline.call(|| Ok::<_, Boom>(())).unwrap();
    let refused = exceeded(pipeline.call(|| Ok::<_, Boom>(())));
    assert_eq!(refused.retry_after(), Duration::from_secs(10));
    assert!(sleeper.sleeps().is_empty(), "it did not sleep first");
}

#[test]
fn duration_max_waits_as_long_as_it_takes() {
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let limit = RateLimit::builder(1, Duration::from_secs(3600))
        .max_wait(Duration::MAX)
        .clock(clock.clone())
        .sleeper(sleeper.clone())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().rate_limit(limit).build();
    pipeline.call(|| Ok::<_, Boom>(())).unwrap();
    pipeline.call(|| Ok::<_, Boom>(())).unwrap();
    assert_eq!(sleeper.sleeps(), [Duration::from_secs(3600)]);
}

#[tokio::test(start_paused = true)]
async fn async_waits_follow_tokios_clock_and_a_cancelled_wait_costs_nothing() {
    let limit = RateLimit::builder(1, ms(100))
        .max_wait(Duration::from_secs(1))
        .clock(TokioTime::new())
        .sleeper(TokioSleeper)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().rate_limit(limit.clone()).build();
    let start = tokio::time::Instant::now();
    pipeline
        .call_async(|| async { Ok::<_, Boom>(()) })
        .await
        .unwrap();
    pipeline
        .call_async(|| async { Ok::<_, Boom>(()) })
        .await
        .unwrap();
    assert_eq!(start.elapsed(), ms(100));

    // A caller that gives up while waiting for the 200 ms turn...
    let gave_up =
        tokio::time::timeout(ms(50), pipeline.call_async(|| async { Ok::<_, Boom>(()) })).await;
    assert!(gave_up.is_err());
    // ...left that turn free: the next caller gets it on time.
    pipeline
        .call_async(|| async { Ok::<_, Boom>(()) })
        .await
        .unwrap();
    assert_eq!(start.elapsed(), ms(200));
}

#[test]
fn a_keyed_limit_gives_every_key_its_own_budget() {
    let (log, listener) = recorder();
    let clock = ManualClock::new();
    let hosts = RateLimit::builder(1, Duration::from_secs(1))
        .name("hosts")
        .clock(clock.clone())
        .listener(listener)
        .build_keyed()
        .unwrap();
    assert_eq!(hosts.name(), "hosts");
    assert!(hosts.is_empty());
    let a = Pipeline::builder()
        .rate_limit(hosts.key("a.example"))
        .build();
    let b = Pipeline::builder()
        .rate_limit(hosts.key("b.example"))
        .build();
    a.call(|| Ok::<_, Boom>(())).unwrap();
    b.call(|| Ok::<_, Boom>(())).unwrap();
    let refused = exceeded(a.call(|| Ok::<_, Boom>(())));
    assert_eq!(refused.key(), Some("a.example"));
    assert_eq!(
        refused.to_string(),
        "rate limit 'hosts' exceeded for 'a.example', next call allowed in 1.000s"
    );
    // Another handle on the same key shares its budget.
    assert!(hosts.key("a.example").check().is_err());
    assert_eq!(hosts.key("b.example").key(), Some("b.example"));
    assert_eq!(hosts.len(), 2);
    assert_eq!(
        lines(&log),
        [
            "hosts: rate limit exceeded for 'a.example', next call in 1.000s",
            "hosts: rate limit exceeded for 'a.example', next call in 1.000s",
        ]
    );

    // governor forgets a key one emission interval after its budget is
    // full again (here 1 s + 1 s), when its state is a new key's.
    clock.advance(ms(1999));
    hosts.retain_recent();
    assert_eq!(hosts.len(), 2, "keys seen recently are kept");
    clock.advance(ms(1));
    hosts.retain_recent();
    assert!(hosts.is_empty(), "idle keys are forgotten");
    a.call(|| Ok::<_, Boom>(())).unwrap();
}

#[test]
fn two_threads_share_one_budget_exactly() {
    let clock = ManualClock::new();
    let limit = RateLimit::builder(100, Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let admitted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (limit, admitted) = (limit.clone(), admitted.clone());
            std::thread::spawn(move || {
                for _ in 0..500 {
                    if limit.check().is_ok() {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(admitted.load(Ordering::SeqCst), 100, "the burst, no more");
}

#[test]
fn a_refusal_is_not_a_rejection_and_outside_the_breaker_it_is_never_counted() {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder("geocoder")
        .clock(clock.clone())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .rate_limit(
            RateLimit::per_second(1)
                .clock(clock.clone())
                .build()
                .unwrap(),
        )
        .circuit_breaker(breaker.clone())
        .build();
    pipeline.call(|| Ok::<_, Boom>(())).unwrap();
    for _ in 0..200 {
        let err = pipeline.call(|| Ok::<_, Boom>(())).unwrap_err();
        assert!(!err.is_rejected() && err.rate_limited().is_some());
        assert!(err.into_boxed().downcast_ref::<Exceeded>().is_some());
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().total_calls, 1, "only the admitted call");
    assert!(PipelineError::Inner(Boom("x")).rate_limited().is_none());
}

#[test]
fn a_breaker_outside_the_limiter_sees_the_refusal_itself() {
    // Inside a breaker, a refusal reaches its classifier as `Exceeded`
    // (here judged a success: the dependency was not at fault).
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder("geocoder")
        .classifier(|e: &(dyn std::error::Error + 'static)| {
            if e.is::<Exceeded>() {
                Verdict::Success
            } else {
                Verdict::Failure
            }
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .rate_limit(RateLimit::per_second(1).clock(clock).build().unwrap())
        .build();
    pipeline.call(|| Ok::<_, Boom>(())).unwrap();
    for _ in 0..10 {
        assert!(
            pipeline
                .call(|| Ok::<_, Boom>(()))
                .unwrap_err()
                .rate_limited()
                .is_some()
        );
    }
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.total_calls, snapshot.failed_calls), (11, 0));
}

#[test]
fn bad_configuration_is_refused_naming_the_field() {
    let field = |b: interlock::pipeline::RateLimitBuilder| b.build().unwrap_err().field();
    assert_eq!(
        field(RateLimit::builder(0, Duration::from_secs(1))),
        "calls"
    );
    assert_eq!(field(RateLimit::builder(5, Duration::ZERO)), "period");
    assert_eq!(
        field(RateLimit::builder(5, Duration::from_nanos(4))),
        "period"
    );
    assert_eq!(field(RateLimit::per_second(5).burst(0)), "burst");
    let keyed = RateLimit::builder(0, Duration::from_secs(1)).build_keyed();
    assert_eq!(keyed.unwrap_err().field(), "calls");
    let err = RateLimit::per_second(0).build().unwrap_err();
    assert_eq!(err.to_string(), "invalid calls: must be at least 1, got 0");
    // One call per nanosecond is the fastest accepted.
    assert!(
        RateLimit::builder(5, Duration::from_nanos(5))
            .build()
            .is_ok()
    );
    let limit = RateLimit::per_second(5).name("x").build().unwrap();
    assert_eq!((limit.name(), limit.key()), ("x", None));
    let text = format!("{limit:?}");
    assert!(
        text.contains("calls: 5") && text.contains("keyed: false"),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hedge_stops_at_a_spent_rate_limit() {
    use interlock::pipeline::Hedge;
    let (log, listener) = recorder();
    // One call per minute: the first attempt takes the budget, the first
    // hedge is refused, and no further hedge is tried.
    let pipeline = Pipeline::builder()
        .hedge(
            Hedge::builder(ms(100))
                .max_hedged_attempts(3)
                .sleeper(TokioSleeper)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .rate_limit(
            RateLimit::builder(1, Duration::from_secs(60))
                .clock(TokioTime::new())
                .build()
                .unwrap(),
        )
        .build();
    let ran = counter();
    let answer = pipeline
        .call_async(|| {
            ran.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<_, Boom>("primary")
            }
        })
        .await;
    assert_eq!(answer.unwrap(), "primary");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        lines(&log),
        ["hedge: hedged attempt 2 started after 0.100s"]
    );
}
