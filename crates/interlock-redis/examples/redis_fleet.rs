//! Three instances of a service share one breaker through Redis: when the
//! first one trips, the other two reject calls within one poll interval,
//! without having seen a single failure themselves.
//!
//! Needs a Redis or Valkey server:
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p interlock-redis --example redis_fleet
//! ```
#![allow(clippy::print_stdout)] // a demo prints its story

use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::{Coordinator, Storage};
use interlock::{CircuitBreaker, Clock, Config, Event, MonotonicClock, SlidingWindow, State};
use interlock_redis::RedisStorage;

const POLL: Duration = Duration::from_millis(200);
/// Failures the trip may take before the demo gives up: a breaker that
/// never trips ends it with an error, not a hang.
const MAX_FAILURES: u32 = 10_000;

fn instance(
    url: &str,
    name: &'static str,
) -> Result<CircuitBreaker<Blocking>, Box<dyn std::error::Error + Send + Sync>> {
    // Each instance has its own storage, so its own connections and lane.
    let storage = RedisStorage::from_client(redis::Client::open(url)?, Duration::from_millis(250))
        .key_prefix("interlock-example:{cb}:")
        .poll_interval(POLL)
        .build()?;
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(4))
        .minimum_number_of_calls(4)
        .wait_duration_in_open(Duration::from_secs(30))
        .build()?;
    Ok(CircuitBreaker::builder("inventory")
        .config(config)
        .coordinator(&Coordinator::blocking(storage))
        .listener(move |e: &Event<'_>| match e {
            Event::StateChanged { .. } | Event::StorageDegraded { .. } => {
                println!("  [{name}] {e}");
            }
            _ => {}
        })
        .build()?)
}

/// Waits until `cond` holds, polling, for at most `limit`.
fn wait_for(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = MonotonicClock.now().saturating_add(limit);
    while !cond() {
        let now = MonotonicClock.now();
        if now >= deadline {
            return false;
        }
        std::thread::park_timeout(
            Duration::from_millis(10).min(deadline.saturating_duration_since(now)),
        );
    }
    true
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    // Start from a shared CLOSED, whatever an earlier run left behind.
    let admin =
        RedisStorage::from_client(redis::Client::open(url.as_str())?, Duration::from_secs(1))
            .key_prefix("interlock-example:{cb}:")
            .build()?;
    admin.close("inventory", Duration::from_secs(60), None)?;
    println!("key: {}", admin.key("inventory"));

    let fleet = [
        instance(&url, "api-1")?,
        instance(&url, "api-2")?,
        instance(&url, "api-3")?,
    ];

    println!("step 1 - the dependency fails for api-1, which trips on its own window");
    let mut failures = 0;
    while fleet[0].state() == State::Closed {
        if failures == MAX_FAILURES {
            return Err(format!("{MAX_FAILURES} failures did not trip api-1").into());
        }
        failures += 1;
        let _ = fleet[0].call(|| Err::<(), _>(std::io::Error::other("inventory timed out")));
    }

    println!("step 2 - within one poll interval the whole fleet is shielded");
    let shielded = wait_for(POLL * 10, || fleet.iter().all(|b| b.state() == State::Open));
    let rejected = fleet[1..]
        .iter()
        .filter(|b| {
            b.call(|| Ok::<_, std::io::Error>(()))
                .is_err_and(|e| e.is_rejected())
        })
        .count();
    println!("  api-2 and api-3 rejected {rejected} of 2 calls at once (shielded: {shielded})");
    if let Some(shared) = admin.read("inventory")? {
        println!("  shared state: {shared}");
    }

    println!("step 3 - shutdown: each instance stops its lane and drops the shared view");
    for breaker in &fleet {
        breaker.close(); // drain queued writes, stop the lane
    }
    if !shielded {
        return Err("the trip did not reach every instance".into());
    }
    Ok(())
}
