//! Timeout + circuit breaker + fallback around a dependency that dies
//! quietly.
//!
//! The inventory service never fails: it *hangs*. On its own a hang trips
//! nothing and ties up every caller. The pipeline turns it into a
//! non-event: the timeout gives up on the hung call, the breaker counts
//! that as a failure and opens, and the fallback serves a cached snapshot;
//! while the circuit is open a request costs nothing instead of a whole
//! timeout.
//!
//! Time is tokio's paused clock (the breaker reads it too), so the output
//! is always the same.
//!
//!     cargo run --example pipeline --features tokio
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use interlock::pipeline::{Fallback, Pipeline, PipelineError, Timeout, TokioSleeper};
use interlock::{CircuitBreaker, Clock, Config, Event, SlidingWindow, Timestamp};
use tokio::time::Instant;

/// The breaker's clock: tokio's (paused) time since the demo started.
#[derive(Debug)]
struct TokioTime(Instant);

impl Clock for TokioTime {
    fn now(&self) -> Timestamp {
        Timestamp::from_nanos(self.0.elapsed().as_nanos() as u64)
    }
}

#[derive(Debug)]
struct InventoryError;

impl std::fmt::Display for InventoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inventory unavailable")
    }
}

impl std::error::Error for InventoryError {}

/// Narrates transitions, rejections and substitutions (per-call records are
/// left out; the lifecycle example shows them).
fn narrate(event: &Event<'_>) {
    match event {
        Event::StateChanged { .. } | Event::CallRejected { .. } => {
            println!("  [listener] {event}")
        }
        Event::FallbackUsed { name, error, .. } => {
            println!("  [listener] {name}: cached snapshot served instead of: {error}")
        }
        _ => {}
    }
}

fn cached_snapshot() -> Vec<&'static str> {
    vec!["widget (cached)", "gadget (cached)"]
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), interlock::ConfigError> {
    let hanging = Arc::new(AtomicBool::new(false));
    let breaker = CircuitBreaker::builder("inventory")
        .config(
            Config::builder()
                .failure_rate_threshold(0.5) // trip at >= 50% failures ...
                .minimum_number_of_calls(4) // ... once the window holds 4 calls
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(1)) // stay OPEN 1 s
                .permitted_calls_in_half_open(2) // 2 good probes close it
                .build()?,
        )
        .clock(TokioTime(Instant::now()))
        .listener(narrate)
        .build()?;

    let pipeline = Pipeline::builder()
        .fallback(
            Fallback::new(
                |e: &PipelineError<InventoryError>| e.is_rejected() || e.is_timeout(),
                |_| cached_snapshot(),
            )
            .name("inventory")
            .listener(narrate),
        )
        .circuit_breaker(breaker.clone())
        // a hung attempt becomes `timeout::Elapsed` after 0.2 s
        .timeout(Timeout::new(Duration::from_millis(200)).sleeper(TokioSleeper))
        .build();

    // The protected call: when the service is down it hangs, never errs.
    let fetch_inventory = || {
        let hanging = hanging.load(Ordering::SeqCst);
        async move {
            if hanging {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            Ok::<_, InventoryError>(vec!["widget", "gadget"])
        }
    };

    let request = |number: u32| {
        let pipeline = pipeline.clone();
        async move {
            let start = Instant::now();
            match pipeline.call_async(fetch_inventory).await {
                Ok(items) => println!(
                    "request {number}: {items:?} in ~{:.1}s",
                    start.elapsed().as_secs_f64()
                ),
                Err(err) => println!("request {number}: failed: {err}"),
            }
        }
    };

    println!("phase 1 - healthy and fast, breaker closed");
    request(1).await;
    request(2).await;

    println!();
    println!("phase 2 - the service starts hanging; timeouts become failures");
    hanging.store(true, Ordering::SeqCst);
    request(3).await; // waits the whole 0.2 s timeout, then serves the cache
    request(4).await; // 2 timeouts of 4 calls = 50%: the breaker trips

    println!();
    println!("phase 3 - circuit open: no timeout is paid, the cache is instant");
    request(5).await;

    println!();
    println!("phase 4 - the service recovers; probes close the circuit");
    hanging.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await; // wait_duration_in_open
    request(6).await; // probe 1 (OPEN -> HALF_OPEN on admission)
    request(7).await; // probe 2: both passed, HALF_OPEN -> CLOSED

    println!();
    println!("final state: {}", breaker.state());
    Ok(())
}
