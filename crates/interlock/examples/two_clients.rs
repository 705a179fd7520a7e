//! Two guarded clients in one async app: one dependency dies, the other
//! keeps serving.
//!
//! A `Registry` hands out one breaker per dependency. `recommendations`
//! goes down during rounds 3-6: its breaker opens and the app falls back to
//! cached picks, while `payments`, with a breaker of its own, never notices.
//! Time is a `ManualClock`, so the output is always the same.
//!
//!     cargo run --example two_clients
#![allow(clippy::print_stdout)]

use std::cell::Cell;
use std::time::Duration;

use interlock::{CallError, Config, Event, ManualClock, Registry, SlidingWindow};

#[derive(Debug)]
struct RecsDown;

impl std::fmt::Display for RecsDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("recommendations service timed out")
    }
}

impl std::error::Error for RecsDown {}

struct App {
    registry: Registry,
    outage: Cell<bool>,
}

impl App {
    async fn fetch_recommendations(&self, user: &str) -> Result<Vec<String>, CallError<RecsDown>> {
        let outage = self.outage.get();
        self.registry
            .get("recommendations")
            .call_async(|| async move {
                if outage {
                    Err(RecsDown)
                } else {
                    Ok(vec![format!("{user}-pick-1"), format!("{user}-pick-2")])
                }
            })
            .await
    }

    async fn charge(&self, user: &str, amount: u32) -> Result<String, CallError<std::io::Error>> {
        self.registry
            .get("payments")
            .call_async(|| async move { Ok(format!("charged {user} ${amount}")) })
            .await
    }

    /// One request: both dependencies at once.
    async fn round_trip(&self, number: u32, user: &str) {
        println!("round {number}:");
        let (payment, recs) = tokio::join!(self.charge(user, 25), self.fetch_recommendations(user));
        match payment {
            Ok(receipt) => println!("  payments        -> {receipt}"),
            Err(err) => println!("  payments        -> {err}"),
        }
        match recs {
            Ok(picks) => println!("  recommendations -> {picks:?}"),
            Err(CallError::Rejected(_)) => {
                println!("  recommendations -> rejected at once -> fallback: cached picks")
            }
            Err(CallError::Inner(err)) => {
                println!("  recommendations -> failed ({err}) -> fallback: cached picks")
            }
        }
    }
}

fn main() -> Result<(), interlock::ConfigError> {
    let clock = ManualClock::new();
    let registry = Registry::builder()
        .config(
            Config::builder()
                .minimum_number_of_calls(4)
                .sliding_window(SlidingWindow::count(4))
                .wait_duration_in_open(Duration::from_secs(1))
                .permitted_calls_in_half_open(2)
                .build()?,
        )
        .clock(clock.clone())
        .listener(|event: &Event<'_>| match event {
            Event::CallRecorded { .. } => {} // per-call noise is off here
            other => println!("  [listener] {other}"),
        })
        .build()?;
    let app = App {
        registry,
        outage: Cell::new(false),
    };

    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| interlock::ConfigError::new("runtime", e.to_string()))?;
    runtime.block_on(async {
        println!("rounds 1-2 - both dependencies healthy");
        app.round_trip(1, "alice").await;
        app.round_trip(2, "bob").await;

        println!();
        println!("rounds 3-6 - recommendations goes down; payments must not care");
        app.outage.set(true);
        app.round_trip(3, "carol").await;
        app.round_trip(4, "dave").await; // 2 of 4 failed: recommendations opens
        app.round_trip(5, "erin").await; // rejected at once: no timeout burned
        app.round_trip(6, "frank").await;

        println!();
        println!("rounds 7-8 - the outage is over; the breaker probes and closes");
        app.outage.set(false);
        clock.advance(Duration::from_millis(1100));
        app.round_trip(7, "grace").await;
        app.round_trip(8, "heidi").await;
    });

    println!();
    for name in ["payments", "recommendations"] {
        println!("final state of {name}: {}", app.registry.get(name).state());
    }
    Ok(())
}
