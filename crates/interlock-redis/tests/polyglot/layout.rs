//! The interlock-cb layout against the original's own scripts, operation
//! by operation: the same sequence run through interlock-cb's
//! `RedisStorage` (in Python) and through `Layout::InterlockCb` (here), each
//! on its own key, must give the same answers, leave the same fields and
//! refresh the key's lifetime at the same steps. Then both write one key.

use std::collections::BTreeMap;
use std::time::Duration;

use interlock::storage::{ProbeLease, SharedState, Storage};
use interlock::{Outcome, State};
use interlock_redis::{Layout, RedisStorage};
use serde_json::{Value, json};

use crate::python::{Options, Python};
use crate::setup;
use crate::support::Server;

const TTL: Duration = Duration::from_secs(60);

/// One storage operation, as both sides take it.
#[derive(Clone, Copy, Debug)]
enum Op {
    Read,
    Trip(Option<u64>),
    Begin { wait_secs: f64, permitted: u32 },
    Lease,
    Record(Outcome),
    Close(Option<u64>),
}

/// An answer reduced to what both sides must agree on: the state, whether
/// `opened_at` is set, the version and the probe counters (and for a lease
/// whether it was granted; `None` for an absent read).
type Seen = Option<(String, bool, u64, [u64; 5], Option<bool>)>;

fn from_python(v: &Value, lease: bool) -> Seen {
    if v.get("absent").is_some() {
        return None;
    }
    let probes: Vec<u64> = v["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    Some((
        v["state"].as_str().unwrap().to_owned(),
        v["opened_at_us"].as_u64().unwrap() != 0,
        v["version"].as_u64().unwrap(),
        probes.try_into().unwrap(),
        lease.then(|| v["granted"].as_bool().unwrap()),
    ))
}

fn from_rust(s: &SharedState, granted: Option<bool>) -> Seen {
    Some((
        s.state.as_str().to_owned(),
        s.opened_at.as_nanos() != 0,
        s.version,
        [
            s.probes_permitted,
            s.probes_remaining,
            s.probes_completed,
            s.probe_failures,
            s.probe_slows,
        ]
        .map(u64::from),
        granted,
    ))
}

fn python_op(p: &mut Python, name: &str, op: Op) -> Seen {
    let request = match op {
        Op::Read => json!({"cmd": "op", "op": "read", "name": name}),
        Op::Trip(e) => json!({"cmd": "op", "op": "trip_open", "name": name, "expected": e}),
        Op::Begin {
            wait_secs,
            permitted,
        } => {
            json!({"cmd": "op", "op": "begin", "name": name, "wait": wait_secs, "permitted": permitted})
        }
        Op::Lease => json!({"cmd": "op", "op": "lease", "name": name}),
        Op::Record(o) => {
            let outcome = match o {
                Outcome::Success => "SUCCESS",
                Outcome::Failure => "FAILURE",
                Outcome::SlowSuccess => "SLOW_SUCCESS",
                _ => "SLOW_FAILURE",
            };
            json!({"cmd": "op", "op": "record", "name": name, "outcome": outcome})
        }
        Op::Close(e) => json!({"cmd": "op", "op": "close", "name": name, "expected": e}),
    };
    from_python(&p.ask(request), matches!(op, Op::Lease))
}

fn rust_op(s: &impl Storage, name: &str, op: Op) -> Seen {
    match op {
        Op::Read => s.read(name).unwrap().map(|v| from_rust(&v, None))?,
        Op::Trip(e) => from_rust(&s.trip_open(name, TTL, e).unwrap(), None),
        Op::Begin {
            wait_secs,
            permitted,
        } => from_rust(
            &s.begin_half_open_if_elapsed(name, Duration::from_secs_f64(wait_secs), permitted, TTL)
                .unwrap(),
            None,
        ),
        Op::Lease => {
            let ProbeLease { granted, state } = s.lease_probe(name, TTL).unwrap();
            from_rust(&state, Some(granted))
        }
        Op::Record(o) => from_rust(&s.record_probe(name, o, TTL).unwrap(), None),
        Op::Close(e) => from_rust(&s.close(name, TTL, e).unwrap(), None),
    }
}

/// The hash at `key` with `opened_at` reduced to set / unset, its
/// existence, and whether its lifetime was refreshed since `mark`ed.
fn after(server: &Server, key: &str) -> (BTreeMap<String, String>, i64) {
    let mut map: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(key)
        .query(&mut server.admin())
        .unwrap();
    if let Some(at) = map.get_mut("opened_at") {
        *at = if at == "0" { "0" } else { "set" }.to_owned();
    }
    let pttl: i64 = redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.admin())
        .unwrap();
    // -2: no key; 1: refreshed to the 60 s TTL; 2: left at the marker.
    let refreshed = match pttl {
        -2 => -2,
        p if p > 60_000 => 2,
        _ => 1,
    };
    (map, refreshed)
}

/// Gives an existing key a lifetime above any the operations write, so a
/// refresh shows.
fn mark(server: &Server, key: &str) {
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(key)
        .arg(500_000)
        .query(&mut server.admin())
        .unwrap();
}

/// The original's storage (in a Python process) and this layout's, on one
/// server.
fn both_sides(server: &Server, py: &std::path::Path) -> (Python, RedisStorage<redis::Connection>) {
    let python = Python::start(py, "python", &Options::new(server.url(), "unused"));
    let rust = RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .layout(Layout::InterlockCb)
        .build()
        .unwrap();
    (python, rust)
}

#[test]
fn every_operation_changes_the_hash_and_its_lifetime_as_the_originals_scripts_do() {
    let Some((server, py)) = setup() else { return };
    let (mut python, rust) = both_sides(&server, &py);
    let (py_name, rs_name) = ("diff {py}%", "diff {rs}%");
    let begin = |wait_secs, permitted| Op::Begin {
        wait_secs,
        permitted,
    };
    let steps = [
        Op::Read,
        begin(0.0, 3),
        Op::Lease,
        Op::Record(Outcome::Failure),
        Op::Trip(Some(1)),
        Op::Close(Some(3)),
        Op::Trip(None),
        Op::Trip(None),
        Op::Trip(Some(1)),
        begin(3600.0, 3),
        Op::Lease,
        Op::Record(Outcome::Success),
        Op::Close(Some(5)),
        Op::Trip(Some(0)),
        begin(0.0, 3),
        begin(0.0, 5),
        Op::Lease,
        Op::Lease,
        Op::Lease,
        Op::Lease,
        Op::Record(Outcome::SlowFailure),
        Op::Record(Outcome::Failure),
        Op::Record(Outcome::SlowSuccess),
        Op::Record(Outcome::Success),
        Op::Trip(Some(7)),
        Op::Trip(Some(9)),
        begin(0.0, 2),
        Op::Lease,
        Op::Record(Outcome::Success),
        Op::Close(Some(11)),
        Op::Close(Some(13)),
        Op::Close(None),
        Op::Record(Outcome::Failure),
        Op::Lease,
        begin(0.0, 1),
        Op::Read,
    ];
    let py_key = format!("interlock:cb:{py_name}");
    let rs_key = format!("interlock:cb:{rs_name}");
    for (i, op) in steps.into_iter().enumerate() {
        mark(&server, &py_key);
        mark(&server, &rs_key);
        let from_py = python_op(&mut python, py_name, op);
        let from_rs = rust_op(&rust, rs_name, op);
        assert_eq!(from_rs, from_py, "step {i}: {op:?} answered differently");
        let (py_hash, py_ttl) = after(&server, &py_key);
        let (rs_hash, rs_ttl) = after(&server, &rs_key);
        assert_eq!(rs_hash, py_hash, "step {i}: {op:?} left different fields");
        assert_eq!(
            rs_ttl, py_ttl,
            "step {i}: {op:?} treated the key's lifetime differently (-2 none, 1 refreshed, 2 kept)"
        );
    }
    let last = rust.read(rs_name).unwrap().unwrap();
    assert_eq!((last.state, last.version), (State::Closed, 15));
}

#[test]
fn python_and_rust_take_turns_on_one_key_with_a_name_the_interlock_layout_would_encode() {
    let Some((server, py)) = setup() else { return };
    let (mut python, rust) = both_sides(&server, &py);
    let name = "shared {x} 名前 100%";
    let turns: [(bool, Op); 9] = [
        (true, Op::Trip(None)),
        (
            false,
            Op::Begin {
                wait_secs: 0.0,
                permitted: 2,
            },
        ),
        (true, Op::Lease),
        (false, Op::Lease),
        (true, Op::Lease),
        (false, Op::Record(Outcome::Success)),
        (true, Op::Record(Outcome::SlowSuccess)),
        (false, Op::Close(Some(6))),
        (true, Op::Read),
    ];
    let mut last = None;
    for (i, (on_python, op)) in turns.into_iter().enumerate() {
        let seen = if on_python {
            python_op(&mut python, name, op)
        } else {
            rust_op(&rust, name, op)
        };
        // Each side reads what the other just wrote.
        let other = if on_python {
            rust_op(&rust, name, Op::Read)
        } else {
            python_op(&mut python, name, Op::Read)
        };
        let (state, opened, version, probes, _) = seen.clone().unwrap();
        assert_eq!(
            other,
            Some((state, opened, version, probes, None)),
            "turn {i}: {op:?}"
        );
        last = seen;
    }
    let (state, _, version, ..) = last.unwrap();
    assert_eq!((state.as_str(), version), ("closed", 7));
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.admin())
        .unwrap();
    assert_eq!(keys, [format!("interlock:cb:{name}")]);
}

#[test]
fn a_hash_without_state_is_closed_to_the_original_and_refused_by_the_layout() {
    let Some((server, py)) = setup() else { return };
    let (mut python, rust) = both_sides(&server, &py);
    let key = "interlock:cb:foreign";
    let _: i64 = redis::cmd("HSET")
        .arg(key)
        .arg("owner")
        .arg("another service")
        .query(&mut server.admin())
        .unwrap();
    // The original reads it as a CLOSED record; this layout refuses it.
    let seen = python_op(&mut python, "foreign", Op::Read);
    assert_eq!(seen, Some(("closed".into(), false, 0, [0; 5], None)));
    let err = rust.read("foreign").unwrap_err();
    let err = err.downcast_ref::<interlock_redis::Error>().unwrap();
    assert!(err.is_corrupt(), "{err}");
    // The original's next trip writes its fields over it, keeping the
    // foreign one; from then on both read the same OPEN.
    let tripped = python_op(&mut python, "foreign", Op::Trip(None));
    assert_eq!(
        tripped,
        Some(("open".into(), true, 1, [0; 5], None)),
        "the original overwrites it"
    );
    assert_eq!(rust_op(&rust, "foreign", Op::Read), tripped);
    let owner: String = redis::cmd("HGET")
        .arg(key)
        .arg("owner")
        .query(&mut server.admin())
        .unwrap();
    assert_eq!(owner, "another service");
}

/// The writes the original has no script for (issue 21: restarting a
/// stalled round, restoring a record, clamping an OPEN from the future)
/// leave records the original reads exactly as this layout does.
#[test]
fn the_originals_read_what_the_liveness_writes_leave() {
    let Some((server, py)) = setup() else { return };
    let (mut python, rust) = both_sides(&server, &py);
    let name = "liveness {x}";
    let key = format!("interlock:cb:{name}");
    let agree = |python: &mut Python, step: &str| {
        let ours = rust.read(name).unwrap().unwrap();
        assert_eq!(
            python_op(python, name, Op::Read),
            from_rust(&ours, None),
            "after {step}"
        );
        ours
    };

    // A stalled round: every slot leased, no outcome. Restarted.
    rust.trip_open(name, TTL, None).unwrap();
    rust.begin_half_open_if_elapsed(name, Duration::ZERO, 2, TTL)
        .unwrap();
    rust.lease_probe(name, TTL).unwrap();
    let spent = rust.lease_probe(name, TTL).unwrap().state;
    let restarted = rust
        .restart_stalled_round(name, spent.version, 2, TTL)
        .unwrap();
    assert_eq!(
        (
            restarted.state,
            restarted.version,
            restarted.probes_remaining
        ),
        (State::HalfOpen, spent.version + 1, 2)
    );
    agree(&mut python, "restart_stalled_round");
    // The original leases from the restarted round.
    let lease = python_op(&mut python, name, Op::Lease).unwrap();
    assert_eq!(lease.4, Some(true), "{lease:?}");

    // Restored over its version: CLOSED at a version above both.
    let now = rust.read(name).unwrap().unwrap();
    let restored = rust
        .restore(
            name,
            now.version,
            interlock::storage::SharedState {
                version: 40,
                ..interlock::storage::SharedState::closed()
            },
            TTL,
        )
        .unwrap();
    assert_eq!((restored.state, restored.version), (State::Closed, 41));
    agree(&mut python, "restore");

    // An OPEN from the server's future, as a foreign writer could leave:
    // the first begin clamps it to now, and both then wait from there.
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("state")
        .arg("open")
        .arg("opened_at")
        .arg("9000000000000000")
        .query(&mut server.admin())
        .unwrap();
    let clamped = rust
        .begin_half_open_if_elapsed(name, Duration::from_secs(3600), 2, TTL)
        .unwrap();
    assert_eq!((clamped.state, clamped.version), (State::Open, 42));
    assert!(clamped.opened_at.as_nanos() < 9_000_000_000_000_000_000);
    let read = agree(&mut python, "the clamping begin");
    assert_eq!(read, clamped);
}
