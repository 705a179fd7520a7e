//! A Rust instance and a Python instance of one service share one breaker:
//! this program on `Layout::InterlockCb`, and `interlock_cb_fleet.py` next
//! to it on the Python original, interlock-cb 2.8. The Rust instance trips
//! the breaker, the Python instance rejects its calls without having seen a
//! failure, and one shared probe round closes both.
//!
//! Start the Python instance first (it waits up to a minute for the story),
//! then this one, on the same server (docs/polyglot.md has the commands):
//!
//! ```text
//! scripts/interlock-cb-venv /tmp/interlock-cb
//! /tmp/interlock-cb/bin/python crates/interlock-redis/examples/interlock_cb_fleet.py &
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p interlock-redis --example interlock_cb_fleet
//! ```
#![allow(clippy::print_stdout)] // a demo prints its story

use std::time::Duration;

use interlock::storage::Coordinator;
use interlock::{CallError, CircuitBreaker, Clock, Config, MonotonicClock, SlidingWindow, State};
use interlock_redis::{Layout, RedisStorage};

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let name = std::env::var("BREAKER").unwrap_or_else(|_| "payments".into());
    // The original's layout: its keys (`interlock:cb:<name>`), fields,
    // fencing and expiry. The Python side uses the same numbers.
    let storage = RedisStorage::from_client(redis::Client::open(url)?, Duration::from_millis(500))
        .layout(Layout::InterlockCb)
        .poll_interval(Duration::from_millis(100))
        .build()?;
    println!("rust: key {}", storage.key(&name));
    let config = Config::builder()
        .sliding_window(SlidingWindow::count(2))
        .minimum_number_of_calls(2)
        .wait_duration_in_open(Duration::from_secs(2))
        .permitted_calls_in_half_open(2)
        .build()?;
    let breaker = CircuitBreaker::builder(name.as_str())
        .config(config)
        .coordinator(&Coordinator::blocking(storage))
        .build()?;

    for _ in 0..2 {
        let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("503 from the dependency")));
    }
    println!(
        "rust: 2 failures of 2: {} is {} for the whole fleet, Python instances included",
        name,
        breaker.state()
    );

    // The dependency is healthy again: call it every 100 ms and tell what
    // happens, until a shared probe round has closed the breaker.
    let deadline = MonotonicClock.now().saturating_add(Duration::from_secs(30));
    let mut last = String::new();
    let mut seen_open = false;
    while MonotonicClock.now() < deadline {
        let outcome = match breaker.call(|| Ok::<_, std::io::Error>(())) {
            Ok(()) => "ok",
            Err(CallError::Rejected(_)) => "rejected",
            Err(CallError::Inner(_)) => "failed",
        };
        let state = breaker.state();
        seen_open |= state != State::Closed;
        let line = format!("rust: call {outcome}, breaker {state}");
        if line != last {
            println!("{line}");
            last = line;
        }
        if seen_open && state == State::Closed {
            println!("rust: the fleet recovered");
            breaker.close();
            return Ok(());
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
    breaker.close();
    Err("the breaker did not close within 30 s".into())
}
