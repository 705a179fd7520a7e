//! The liveness fixes of interlock's coordination (issue 21) in a mixed
//! fleet, on the original's layout: the Python instances do not make them,
//! the Rust instances make them for the whole fleet, with writes the
//! original reads as any other.

use std::time::Duration;

use interlock::State;
use serde_json::json;

use crate::python::{Options, Python};
use crate::support::Server;
use crate::{Node, expect_within, setup};

const LIMIT: Duration = Duration::from_secs(20);

fn field(server: &Server, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.admin())
        .unwrap()
}

/// A Python instance killed while its probe holds the round's only lease
/// leaves the round stalled for good in a fleet of the original (every
/// denied lease refreshes the key, so it never expires while calls come);
/// a Rust instance restarts the round once it has made no progress for the
/// stall bound, and the fleet closes.
#[test]
fn a_python_instance_killed_mid_probe_does_not_stall_the_mixed_fleet() {
    let Some((server, py)) = setup() else { return };
    let o = Options {
        permitted: 1,
        ..Options::new(server.url(), "ledger")
    };
    let key = "interlock:cb:ledger";
    let mut doomed = Python::start(&py, "python-doomed", &o);
    let mut observer = Python::start(&py, "python-observer", &o);
    let rust = Node::start(&server, "rust", &o, false);
    // A Python breaker starts its coordinator at its first call (R17.1).
    assert_eq!(
        (doomed.call(true).as_str(), observer.call(true).as_str()),
        ("ok", "ok")
    );
    assert_eq!(rust.call(false), "failed");
    assert_eq!(rust.call(false), "failed");
    // Once it sees the shared OPEN (so that its next admitted call is the
    // round's probe, not a local call on a stale view), the doomed instance
    // probes into a dependency that never answers.
    expect_within(LIMIT, "the doomed instance sees the trip", || {
        matches!(doomed.state().as_str(), "open" | "half_open")
    });
    doomed.ask(json!({"cmd": "health", "up": true, "hang": true}));
    doomed.ask(json!({"cmd": "traffic", "on": true}));
    expect_within(
        LIMIT,
        "the doomed instance takes the round's only lease",
        || {
            field(&server, key, "state").as_deref() == Some("half_open")
                && field(&server, key, "probes_remaining").as_deref() == Some("0")
        },
    );
    doomed.kill();
    let stalled_at: u64 = field(&server, key, "version").unwrap().parse().unwrap();

    // The Rust instance keeps calling: denied leases at first, then the
    // restarted round's probe, which passes and closes the fleet.
    expect_within(
        LIMIT,
        "the Rust instance restarts the round and closes",
        || {
            let _ = rust.call(true);
            rust.state() == State::Closed
        },
    );
    assert!(!rust.restarts().is_empty(), "a restart ended the stall");
    let closed_at: u64 = field(&server, key, "version").unwrap().parse().unwrap();
    assert!(closed_at > stalled_at + 1, "{stalled_at} -> {closed_at}");
    expect_within(LIMIT, "the surviving Python instance closes too", || {
        observer.call(true) == "ok" && observer.state() == "closed"
    });
}

/// A trip a Rust instance decided while Redis was unreadable (its write
/// dropped, R17.6) reaches the Python instances once Redis is back: the
/// Rust instance writes the OPEN it missed (R15.12).
#[test]
fn a_rust_trip_made_during_an_outage_reaches_python_afterwards() {
    let Some((server, py)) = setup() else { return };
    let o = Options::new(server.url(), "ledger");
    let key = "interlock:cb:ledger";
    let mut python = Python::start(&py, "python", &o);
    let rust = Node::start(&server, "rust", &o, false);
    assert_eq!((python.call(true).as_str(), rust.call(true)), ("ok", "ok"));
    // An unreadable key: both degrade.
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("not a breaker")
        .query(&mut server.admin())
        .unwrap();
    expect_within(LIMIT, "the Rust instance degrades", || rust.is_degraded());
    expect_within(LIMIT, "a local trip while degraded", || {
        assert_ne!(rust.call(false), "ok");
        rust.state() == State::Open
    });
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query(&mut server.admin())
        .unwrap();
    expect_within(
        LIMIT,
        "the Python instance rejects: the fleet learned of the trip",
        || python.call(true) == "rejected",
    );
    assert_eq!(python.state(), "open");
    assert_eq!(field(&server, key, "state").as_deref(), Some("open"));
}
