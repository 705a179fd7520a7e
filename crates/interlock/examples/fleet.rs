//! Three instances of a service share one breaker state through a storage.
//!
//! Each "instance" has its own coordinator, as separate processes would,
//! and they all use one `MemoryStorage`. The dependency fails for instance
//! 1 only; its trip still shields instances 2 and 3, and when the wait is
//! over the whole fleet sends exactly `permitted_calls_in_half_open` probes,
//! not that many per instance. Time is a `ManualClock` and polls are driven
//! by hand, so the output is always the same.
//!
//!     cargo run --example fleet
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::{Coordinator, MemoryStorage};
use interlock::{CircuitBreaker, Config, ConfigError, Event, ManualClock, SlidingWindow};

struct Instance {
    name: &'static str,
    lane: Coordinator<Blocking>,
    breaker: CircuitBreaker<Blocking>,
    events: Arc<Mutex<Vec<String>>>,
}

impl Instance {
    fn report(&self) {
        for event in self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            println!("  [{}] {event}", self.name);
        }
    }
}

/// Every instance makes `calls` calls at once, on its own thread; returns
/// how many reached the dependency and how many were rejected.
fn traffic(fleet: &[Instance], calls: u32, healthy: bool) -> (u32, u32) {
    let (reached, rejected) = (AtomicU32::new(0), AtomicU32::new(0));
    std::thread::scope(|scope| {
        for instance in fleet {
            let (reached, rejected) = (&reached, &rejected);
            scope.spawn(move || {
                for _ in 0..calls {
                    let result = instance.breaker.call(|| {
                        reached.fetch_add(1, Ordering::SeqCst);
                        if healthy {
                            Ok(())
                        } else {
                            Err(std::io::Error::other("503"))
                        }
                    });
                    if result.is_err_and(|e| e.is_rejected()) {
                        rejected.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (reached.into_inner(), rejected.into_inner())
}

fn main() -> Result<(), ConfigError> {
    let clock = ManualClock::new();
    let storage = MemoryStorage::builder().clock(clock.clone()).build();
    let config = Config::builder()
        .minimum_number_of_calls(4)
        .sliding_window(SlidingWindow::count(4))
        .wait_duration_in_open(Duration::from_secs(30))
        .permitted_calls_in_half_open(2)
        .max_concurrent_probes(2)
        .build()?;
    let mut fleet = Vec::new();
    for name in ["api-1", "api-2", "api-3"] {
        let lane = Coordinator::manual(storage.clone());
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let breaker = CircuitBreaker::builder("inventory")
            .config(config.clone())
            .clock(clock.clone())
            .coordinator(&lane)
            .listener(move |e: &Event<'_>| {
                if let Event::StateChanged { .. } = e {
                    sink.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(e.to_string());
                }
            })
            .build()?;
        fleet.push(Instance {
            name,
            lane,
            breaker,
            events,
        });
    }
    let poll_all = |fleet: &[Instance]| {
        for i in fleet {
            i.lane.run_writes();
            i.lane.poll();
        }
    };

    println!("step 1 - the dependency fails for api-1, which trips on its own window");
    let (reached, _) = traffic(&fleet[..1], 4, false);
    fleet[0].lane.run_writes();
    println!(
        "  api-1 sent {reached} calls; shared state now {}",
        storage
            .peek("inventory")
            .map_or("absent".into(), |s| s.to_string())
    );
    fleet[0].report();

    println!();
    println!("step 2 - one poll later, the whole fleet is shielded");
    poll_all(&fleet);
    for i in &fleet {
        i.report();
    }
    let (reached, rejected) = traffic(&fleet, 5, false);
    println!("  15 calls: {reached} reached the dependency, {rejected} rejected at once");

    println!();
    println!("step 3 - after 30 s the storage opens one probe round for everyone");
    clock.advance(Duration::from_secs(30));
    poll_all(&fleet);
    for i in &fleet {
        i.report();
    }
    let (reached, rejected) = traffic(&fleet, 3, true);
    println!("  9 calls: {reached} probes admitted fleet-wide (permitted: 2), {rejected} rejected");

    println!();
    println!("step 4 - both probes passed: the round closes the shared breaker");
    poll_all(&fleet);
    poll_all(&fleet);
    for i in &fleet {
        i.report();
    }
    println!(
        "  shared state now {}",
        storage
            .peek("inventory")
            .map_or("absent".into(), |s| s.to_string())
    );
    for i in &fleet {
        println!("  {}: {}", i.name, i.breaker.state());
        i.breaker.close();
    }
    Ok(())
}
