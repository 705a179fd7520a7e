//! `interlock-redis` against real servers: every test starts its own
//! `redis-server` (a 3-node cluster for the cluster smoke test, and
//! `valkey-server` when one is installed) on free loopback ports and kills
//! it when done.
#![cfg(feature = "tokio")]
// the async storage is under test too
// Test helpers outside #[test] functions, shared between the modules.
#![allow(
    clippy::unwrap_used,
    clippy::missing_panics_doc,
    clippy::missing_errors_doc
)]
#![allow(missing_docs, unreachable_pub, missing_debug_implementations)]

mod support;

mod batch;
mod changes;
mod cluster;
mod confirm;
mod contract;
mod faults;
mod fleet;
mod hostile;
mod interlock_cb;
mod liveness;
mod notices;
mod push;
mod refused;
mod wiped;

use std::time::Duration;

use interlock::mode::Blocking;
use interlock::storage::Coordinator;
use interlock::{CallError, CircuitBreaker, Config, ConfigBuilder, SlidingWindow};
use interlock_redis::{RedisStorage, RedisStorageBuilder};

use support::{Events, Server};

/// A connecting blocking storage with 500 ms connect and response timeouts.
pub fn storage_builder(server: &Server) -> RedisStorageBuilder<redis::Connection> {
    RedisStorage::from_client(server.client(), Duration::from_millis(500))
}

pub fn storage(server: &Server) -> RedisStorage<redis::Connection> {
    storage_builder(server).build().unwrap()
}

/// A storage with 10 s timeouts, for the correctness suites (no fault is
/// injected there): on a loaded 2-core machine a script can wait more than
/// 500 ms for the CPU, and a timeout would read as a contract violation.
pub fn patient_storage(server: &Server) -> RedisStorage<redis::Connection> {
    RedisStorage::from_client(server.client(), PATIENT)
        .build()
        .unwrap()
}

/// The response timeout of [`patient_storage`].
pub const PATIENT: Duration = Duration::from_secs(10);

pub const TTL: Duration = Duration::from_secs(60);

/// `n` breakers `host-<i>` with [`config`] on `lane`.
pub fn hosts(lane: &Coordinator<Blocking>, n: usize) -> Vec<CircuitBreaker<Blocking>> {
    (0..n)
        .map(|i| {
            CircuitBreaker::builder(format!("host-{i}"))
                .config(config().build().unwrap())
                .coordinator(lane)
                .build()
                .unwrap()
        })
        .collect()
}

/// Waits until exactly one client of `server` is subscribed to notices.
pub fn await_subscription(server: &Server) {
    assert!(
        support::eventually(Duration::from_secs(10), || server.pubsub_clients() == 1),
        "subscribed"
    );
}

/// Trips after two calls, of which both failed.
pub fn config() -> ConfigBuilder {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(Duration::from_secs(30))
        .permitted_calls_in_half_open(2)
}

/// One simulated process: its own storage (so its own connections),
/// coordinator and breaker, with its events logged.
pub struct Instance {
    pub lane: Coordinator<Blocking>,
    pub breaker: CircuitBreaker<Blocking>,
    pub events: Events,
}

impl Instance {
    pub fn new(lane: Coordinator<Blocking>, config: ConfigBuilder) -> Instance {
        let events = Events::default();
        let breaker = CircuitBreaker::builder("payments")
            .config(config.build().unwrap())
            .coordinator(&lane)
            .listener(events.listener())
            .build()
            .unwrap();
        Instance {
            lane,
            breaker,
            events,
        }
    }

    /// Fails calls until the local machine trips.
    pub fn trip_locally(&self) {
        let mut spent = 0;
        while self.breaker.state() == interlock::State::Closed {
            support::spend_trip_budget(&mut spent);
            let _ = fail(&self.breaker);
        }
    }
}

/// Whether the server holds an OPEN record of `payments` and every
/// instance of `fleet` sees it, healthy (not degraded). A read that fails
/// (the server still paused, say) is "not yet".
pub fn the_fleet_shares_an_open(
    shared: &RedisStorage<redis::Connection>,
    fleet: &[Instance],
) -> bool {
    use interlock::storage::Storage as _;
    shared
        .read("payments")
        .ok()
        .flatten()
        .is_some_and(|s| s.state == interlock::State::Open)
        && fleet.iter().all(|i| {
            !i.breaker.is_degraded()
                && i.breaker
                    .shared_view()
                    .is_some_and(|v| v.state == interlock::State::Open)
        })
}

pub fn ok(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Ok(()))
}

pub fn fail(b: &CircuitBreaker<Blocking>) -> Result<(), CallError<std::io::Error>> {
    b.call(|| Err(std::io::Error::other("503")))
}

/// The example runs against a server of its own and tells its story.
#[test]
fn the_fleet_example_runs_against_a_real_server() {
    let server = Server::start();
    // target/<profile>/deps/redis-<hash> -> target/<profile>/examples/redis_fleet
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(format!("redis_fleet{}", std::env::consts::EXE_SUFFIX));
    let out = std::process::Command::new(&binary)
        .env("REDIS_URL", server.url())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("rejected 2 of 2 calls at once (shielded: true)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("key: interlock-example:{cb}:inventory"),
        "{stdout}"
    );
}
