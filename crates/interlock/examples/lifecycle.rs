//! One breaker through its whole life: CLOSED -> OPEN -> HALF_OPEN -> CLOSED.
//!
//! A fake payment gateway is healthy, goes down, and recovers. The breaker
//! is tight enough for the story to fit in seven calls: it trips at 50%
//! failures over a 4-call window, stays open 1 second, and closes after 2
//! good probes. Time is a `ManualClock`, so the output is always the same.
//!
//!     cargo run --example lifecycle
#![allow(clippy::print_stdout)]

use std::time::Duration;

use interlock::{CallError, CircuitBreaker, Config, Event, ManualClock, SlidingWindow};

/// The dependency: healthy, or answering 503.
struct FlakyGateway {
    healthy: bool,
}

#[derive(Debug)]
struct GatewayError(&'static str);

impl std::fmt::Display for GatewayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for GatewayError {}

impl FlakyGateway {
    fn charge(&self, amount: u32) -> Result<String, GatewayError> {
        if self.healthy {
            Ok(format!("charged ${amount}"))
        } else {
            Err(GatewayError("503 from gateway"))
        }
    }
}

fn attempt(breaker: &CircuitBreaker, gateway: &FlakyGateway, number: u32, amount: u32) {
    match breaker.call(|| gateway.charge(amount)) {
        Ok(receipt) => println!("call {number}: {receipt}"),
        Err(CallError::Inner(err)) => println!("call {number}: dependency failed - {err}"),
        Err(CallError::Rejected(open)) => println!(
            "call {number}: REJECTED at once, the gateway was never called (retry_after={:.1}s)",
            open.retry_after().unwrap_or_default().as_secs_f64()
        ),
    }
}

fn main() -> Result<(), interlock::ConfigError> {
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder("payments-api")
        .config(
            Config::builder()
                .failure_rate_threshold(0.5) // trip at >= 50% failures ...
                .minimum_number_of_calls(4) // ... once the window holds 4 calls
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(1)) // stay OPEN 1 s
                .permitted_calls_in_half_open(2) // 2 good probes close it
                .build()?,
        )
        .clock(clock.clone())
        // Every line tagged [listener] comes from the breaker itself.
        .listener(|event: &Event<'_>| println!("  [listener] {event}"))
        .build()?;
    let mut gateway = FlakyGateway { healthy: true };

    println!("phase 1 - healthy dependency, breaker {}", breaker.state());
    attempt(&breaker, &gateway, 1, 10);
    attempt(&breaker, &gateway, 2, 20);

    println!();
    println!("phase 2 - the gateway goes down; failures fill the window");
    gateway.healthy = false;
    attempt(&breaker, &gateway, 3, 30);
    attempt(&breaker, &gateway, 4, 40); // 2 failures of 4 = 50%: trips

    println!();
    println!(
        "phase 3 - circuit {}: calls fail fast, the gateway gets a break",
        breaker.state()
    );
    attempt(&breaker, &gateway, 5, 50);

    println!();
    println!("phase 4 - after wait_duration_in_open the breaker probes");
    gateway.healthy = true; // fixed meanwhile
    clock.advance(Duration::from_millis(1100));
    attempt(&breaker, &gateway, 6, 60); // probe 1 (OPEN -> HALF_OPEN on admission)
    attempt(&breaker, &gateway, 7, 70); // probe 2: both passed -> CLOSED

    println!();
    println!(
        "final state: {}, window reset: {}",
        breaker.state(),
        breaker.snapshot()
    );
    Ok(())
}
