//! Chaos: fault, latency and outcome injection, their rate, switch, seed
//! and events, inside real pipelines.

use std::sync::atomic::Ordering;
use std::time::Duration;

use interlock::pipeline::chaos::{self, Switch};
use interlock::pipeline::{ManualSleeper, Pipeline, PipelineError, Retry, Timeout, TokioSleeper};
use interlock::{CircuitBreaker, Clock, Config, ManualClock, SlidingWindow, State};

use super::{Boom, block_on, counter, lines, ms, recorder};

fn fault(rate: f64, seed: u64) -> chaos::Fault<fn() -> Boom> {
    chaos::Fault::builder((|| Boom("injected")) as fn() -> Boom)
        .injection_rate(rate)
        .seed(seed)
        .build()
        .unwrap()
}

/// Which of `n` calls through `pipeline` were injected into (by call index).
fn injected(
    pipeline: &Pipeline<impl interlock::pipeline::Strategy<(), Boom>>,
    n: usize,
) -> Vec<usize> {
    (0..n)
        .filter(|_| pipeline.call(|| Ok::<_, Boom>(())).is_err())
        .collect()
}

#[test]
fn a_fault_replaces_the_call_and_is_reported() {
    let (log, listener) = recorder();
    let ran = counter();
    let seen = ran.clone();
    let pipeline = Pipeline::builder()
        .chaos(
            chaos::Fault::builder(|| Boom("injected"))
                .name("chaos")
                .injection_rate(1.0)
                .listener(listener)
                .build()
                .unwrap(),
        )
        .build();
    let err = pipeline
        .call(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Boom>(())
        })
        .unwrap_err();
    assert!(matches!(err, PipelineError::Inner(Boom("injected"))));
    assert_eq!(ran.load(Ordering::SeqCst), 0, "the call did not run");
    let err = block_on(pipeline.call_async(|| async { Ok::<_, Boom>(()) })).unwrap_err();
    assert!(matches!(err, PipelineError::Inner(Boom("injected"))));
    assert_eq!(
        lines(&log),
        ["chaos: fault injected", "chaos: fault injected"]
    );
}

#[test]
fn rate_zero_never_injects_and_rate_one_always_does() {
    let never = Pipeline::builder().chaos(fault(0.0, 1)).build();
    assert!(injected(&never, 1_000).is_empty());
    let always = Pipeline::builder().chaos(fault(1.0, 1)).build();
    assert_eq!(injected(&always, 1_000).len(), 1_000);
}

#[test]
fn the_same_seed_injects_into_the_same_calls() {
    let a = injected(&Pipeline::builder().chaos(fault(0.3, 42)).build(), 2_000);
    let b = injected(&Pipeline::builder().chaos(fault(0.3, 42)).build(), 2_000);
    let c = injected(&Pipeline::builder().chaos(fault(0.3, 43)).build(), 2_000);
    assert_eq!(a, b, "same seed, same calls");
    assert_ne!(a, c, "another seed, other calls");
    // About 30 % of the calls, both ways.
    assert!((500..700).contains(&a.len()), "{}", a.len());
    assert!((500..700).contains(&c.len()), "{}", c.len());
}

#[test]
fn the_switch_turns_injection_off_and_on_at_run_time_for_every_strategy_sharing_it() {
    let switch = Switch::new(true);
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let fault = chaos::Fault::builder(|| Boom("injected"))
        .injection_rate(1.0)
        .switch(switch.clone())
        .build()
        .unwrap();
    let latency = chaos::Latency::builder(Duration::from_secs(1))
        .injection_rate(1.0)
        .switch(switch.clone())
        .sleeper(sleeper.clone())
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .chaos(latency)
        .chaos(fault.clone())
        .build();
    assert!(pipeline.call(|| Ok::<_, Boom>(())).is_err());
    assert_eq!(sleeper.sleeps(), [Duration::from_secs(1)]);

    // Flipped from another thread, as an admin endpoint would.
    let remote = fault.switch();
    std::thread::spawn(move || remote.disable()).join().unwrap();
    assert!(!switch.is_enabled());
    assert_eq!(pipeline.call(|| Ok::<_, Boom>(7)).unwrap(), 7);
    assert_eq!(sleeper.sleeps().len(), 1, "no latency either");

    switch.enable();
    assert!(pipeline.call(|| Ok::<_, Boom>(7)).is_err());
}

#[test]
fn a_strategy_built_disabled_injects_nothing_until_switched_on() {
    let fault = chaos::Fault::builder(|| Boom("injected"))
        .injection_rate(1.0)
        .enabled(false)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().chaos(fault.clone()).build();
    assert!(pipeline.call(|| Ok::<_, Boom>(())).is_ok());
    fault.switch().set(true);
    assert!(pipeline.call(|| Ok::<_, Boom>(())).is_err());
    assert_eq!(fault.injection_rate(), 1.0);
    assert_eq!(fault.name(), "chaos-fault");
    assert!(Switch::default().is_enabled());
}

#[test]
fn latency_waits_on_the_sleeper_before_the_call_on_both_paths() {
    let (log, listener) = recorder();
    let clock = ManualClock::new();
    let sleeper = ManualSleeper::new(clock.clone());
    let latency = chaos::Latency::builder(ms(1500))
        .name("slow-db")
        .injection_rate(1.0)
        .sleeper(sleeper.clone())
        .listener(listener)
        .build()
        .unwrap();
    assert_eq!(latency.latency(), ms(1500));
    let pipeline = Pipeline::builder().chaos(latency).build();
    let at = clock.clone();
    // The call runs after the delay: it sees the clock moved.
    let started = pipeline.call(move || Ok::<_, Boom>(at.now())).unwrap();
    assert_eq!(started.as_nanos(), 1_500_000_000);
    let at = clock.clone();
    let started = block_on(pipeline.call_async(|| {
        let at = at.clone();
        async move { Ok::<_, Boom>(at.now()) }
    }))
    .unwrap();
    assert_eq!(started.as_nanos(), 3_000_000_000);
    assert_eq!(sleeper.sleeps(), [ms(1500), ms(1500)]);
    assert_eq!(
        lines(&log),
        [
            "slow-db: latency of 1.500s injected",
            "slow-db: latency of 1.500s injected"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn injected_latency_trips_a_slow_call_breaker_through_a_timeout() {
    // 2 s of injected latency against a 1 s timeout: every call times out,
    // the breaker counts the timeouts and opens.
    let breaker = CircuitBreaker::builder("inventory")
        .config(
            Config::builder()
                .sliding_window(SlidingWindow::count(4))
                .minimum_number_of_calls(4)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let pipeline = Pipeline::builder()
        .circuit_breaker(breaker.clone())
        .timeout(Timeout::new(Duration::from_secs(1)).sleeper(TokioSleeper))
        .chaos(
            chaos::Latency::builder(Duration::from_secs(2))
                .injection_rate(1.0)
                .sleeper(TokioSleeper)
                .build()
                .unwrap(),
        )
        .build();
    let start = tokio::time::Instant::now();
    for _ in 0..4 {
        let err = pipeline
            .call_async(|| async { Ok::<_, Boom>(()) })
            .await
            .unwrap_err();
        assert!(err.is_timeout());
    }
    assert_eq!(start.elapsed(), Duration::from_secs(4));
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn duration_max_latency_is_a_hang_that_only_a_timeout_ends() {
    let pipeline = Pipeline::builder()
        .timeout(Timeout::new(Duration::from_secs(30)).sleeper(TokioSleeper))
        .chaos(
            chaos::Latency::builder(Duration::MAX)
                .injection_rate(1.0)
                .sleeper(TokioSleeper)
                .build()
                .unwrap(),
        )
        .build();
    let start = tokio::time::Instant::now();
    let err = pipeline
        .call_async(|| async { Ok::<_, Boom>(()) })
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    assert_eq!(start.elapsed(), Duration::from_secs(30));
}

#[test]
fn an_outcome_answers_instead_of_the_call_with_a_value_or_an_error() {
    let (log, listener) = recorder();
    let stale = chaos::Outcome::builder(|| Ok::<_, Boom>("stale"))
        .name("cache")
        .injection_rate(1.0)
        .listener(listener)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().chaos(stale).build();
    assert_eq!(pipeline.call(|| Ok::<_, Boom>("fresh")).unwrap(), "stale");
    assert_eq!(
        block_on(pipeline.call_async(|| async { Ok::<_, Boom>("fresh") })).unwrap(),
        "stale"
    );
    assert_eq!(
        lines(&log),
        ["cache: outcome injected", "cache: outcome injected"]
    );

    let error = chaos::Outcome::builder(|| Err::<&str, _>(Boom("503")))
        .injection_rate(1.0)
        .build()
        .unwrap();
    let pipeline = Pipeline::builder().chaos(error).build();
    let err = pipeline.call(|| Ok::<_, Boom>("fresh")).unwrap_err();
    assert!(matches!(err, PipelineError::Inner(Boom("503"))));
}

#[test]
fn a_retry_outside_sees_injected_faults_as_real_ones() {
    // Fault at 50 % with a fixed seed: the retry recovers every call within
    // its budget, and the number of attempts is the same on every run.
    let clock = ManualClock::new();
    let attempts = counter();
    let pipeline = Pipeline::builder()
        .retry(
            Retry::builder(10)
                .sleeper(ManualSleeper::new(clock))
                .build()
                .unwrap(),
        )
        .chaos(fault(0.5, 9))
        .build();
    let run = || {
        let seen = attempts.clone();
        pipeline.call(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Boom>(())
        })
    };
    for _ in 0..20 {
        run().unwrap();
    }
    let first = attempts.swap(0, Ordering::SeqCst);
    assert_eq!(first, 20, "one real call per operation");
    // The same seed again: the same count of injected faults (retries).
    let (log, listener) = recorder();
    let counted = Pipeline::builder()
        .retry(
            Retry::builder(10)
                .listener(listener)
                .sleeper(ManualSleeper::new(ManualClock::new()))
                .build()
                .unwrap(),
        )
        .chaos(fault(0.5, 9))
        .build();
    let again = || counted.call(|| Ok::<_, Boom>(()));
    for _ in 0..20 {
        again().unwrap();
    }
    let retries = lines(&log).len();
    assert!(
        retries > 5,
        "about one injected fault per real call: {retries}"
    );
    let (log2, listener2) = recorder();
    let twin = Pipeline::builder()
        .retry(
            Retry::builder(10)
                .listener(listener2)
                .sleeper(ManualSleeper::new(ManualClock::new()))
                .build()
                .unwrap(),
        )
        .chaos(fault(0.5, 9))
        .build();
    for _ in 0..20 {
        twin.call(|| Ok::<_, Boom>(())).unwrap();
    }
    assert_eq!(lines(&log2), lines(&log), "deterministic");
}

#[test]
fn an_injection_rate_outside_zero_to_one_is_refused() {
    for rate in [-0.01, 1.01, f64::NAN, f64::INFINITY] {
        let err = chaos::Fault::builder(|| Boom("x"))
            .injection_rate(rate)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "injection_rate", "{rate}");
        let err = chaos::Latency::builder(ms(1))
            .injection_rate(rate)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "injection_rate");
        let err = chaos::Outcome::builder(|| Ok::<_, Boom>(()))
            .injection_rate(rate)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "injection_rate");
    }
    let err = chaos::Fault::builder(|| Boom("x"))
        .injection_rate(2.0)
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid injection_rate: must be between 0 and 1, got 2"
    );
    let text = format!("{:?}", fault(0.25, 1));
    assert!(
        text.contains("injection_rate: 0.25") && text.contains("enabled: true"),
        "{text}"
    );
}
