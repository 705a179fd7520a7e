//! Python and Rust instances of one service as one fleet: trips cross the
//! language boundary (a, b), the probe budget is global over many rounds
//! (c), a passing round closes every instance (d), and foreign data under
//! the key leaves both on local state without an error reaching a call (e).

use std::time::Duration;

use interlock::State;
use interlock::{Clock, MonotonicClock};
use serde_json::json;

use crate::python::{Options, Python};
use crate::support::{Server, eventually};
use crate::{Node, expect_within, python_leases, rounds, setup};

/// Long enough for any propagation on a loaded machine; the figures printed
/// are the real latencies.
const LIMIT: Duration = Duration::from_secs(20);

fn cmd(server: &Server, args: &[&str]) {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    let _: redis::Value = c.query(&mut server.admin()).unwrap();
}

/// Polls `cond` until it holds (failing after [`LIMIT`]); returns how long
/// it took.
fn latency(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = MonotonicClock.now();
    expect_within(LIMIT, what, &mut cond);
    MonotonicClock.now().saturating_duration_since(start)
}

#[test]
fn a_python_trip_is_seen_by_rust_and_a_rust_trip_by_python() {
    let Some((server, py)) = setup() else { return };
    // (a) Python trips, Rust rejects. A name that the interlock layout
    // would encode: the keys must be the original's, verbatim.
    let o = Options::new(server.url(), "orders {eu}%");
    let mut python = Python::start(&py, "python", &o);
    let rust = Node::start(&server, "rust", &o, false);
    assert_eq!(rust.call(true), "ok");
    assert_eq!(python.call(false), "failed");
    assert_eq!(python.call(false), "failed");
    assert_eq!(python.state(), "open", "two failures of two trip it");
    let seen = latency("the Rust instance rejects after the Python trip", || {
        rust.call(true) == "rejected"
    });
    assert_eq!(rust.state(), State::Open);
    let state: String = redis::cmd("HGET")
        .arg("interlock:cb:orders {eu}%")
        .arg("state")
        .query(&mut server.admin())
        .unwrap();
    assert_eq!(state, "open", "the original's key, the name verbatim");
    println!("(a) a Python trip reached the Rust instance in {seen:?} (poll interval 50 ms)");

    // (b) Rust trips, Python rejects; one async Rust instance too.
    let o = Options::new(server.url(), "billing");
    let mut python = Python::start(&py, "python", &o);
    let rust = Node::start(&server, "rust", &o, false);
    let rust_async = Node::start(&server, "rust-async", &o, true);
    assert_eq!(python.call(true), "ok");
    assert_eq!(rust.call(false), "failed");
    assert_eq!(rust.call(false), "failed");
    assert_eq!(rust.state(), State::Open);
    let seen = latency("the Python instance rejects after the Rust trip", || {
        python.call(true) == "rejected"
    });
    assert_eq!(python.state(), "open");
    expect_within(LIMIT, "the async Rust instance rejects", || {
        rust_async.call(true) == "rejected"
    });
    println!("(b) a Rust trip reached the Python instance in {seen:?} (poll interval 50 ms)");

    // Then the fleet recovers through one shared round, whoever probes.
    expect_within(LIMIT, "a passing round closes all three", || {
        let _ = (python.call(true), rust.call(true), rust_async.call(true));
        python.state() == "closed"
            && rust.state() == State::Closed
            && rust_async.state() == State::Closed
    });
    assert!(python.events().iter().all(|e| !e.starts_with("degraded")));
}

#[test]
fn two_python_and_two_rust_instances_share_one_probe_budget_for_50_rounds() {
    let Some((server, py)) = setup() else { return };
    let o = Options::new(server.url(), "inventory {c}");
    let mut pythons = [
        Python::start(&py, "python-1", &o),
        Python::start(&py, "python-2", &o),
    ];
    let mut rusts = [
        Node::start(&server, "rust-blocking", &o, false),
        Node::start(&server, "rust-async", &o, true),
    ];
    // (c) The dependency is down: every round fails and re-opens, and the
    // four instances race for the probes of each round.
    for p in &mut pythons {
        p.ask(json!({"cmd": "health", "up": false}));
        p.ask(json!({"cmd": "traffic", "on": true}));
    }
    for r in &mut rusts {
        r.set_up(false);
        r.start_traffic();
    }
    let all_leases = |pythons: &mut [Python; 2], rusts: &[Node; 2]| {
        let mut all = Vec::new();
        for p in pythons.iter_mut() {
            let (leases, calls, unexpected) = python_leases(p);
            assert!(unexpected.is_empty(), "{}: {unexpected:?}", p.label());
            all.push((p.label().to_owned(), leases, calls));
        }
        for r in rusts {
            let (leases, calls) = r.leases();
            all.push((r.label.clone(), leases, calls));
        }
        all
    };
    let start = MonotonicClock.now();
    let enough = eventually(Duration::from_secs(300), || {
        let all = all_leases(&mut pythons, &rusts);
        let by_round = rounds(
            &all.iter()
                .map(|(w, l, _)| (w.clone(), l.clone()))
                .collect::<Vec<_>>(),
        );
        by_round.len() >= 55
    });
    let failing_for = MonotonicClock.now().saturating_duration_since(start);
    assert!(enough, "fewer than 55 half-open rounds within 300 s");

    // (d) The dependency is back: one passing round closes all four.
    for p in &mut pythons {
        p.ask(json!({"cmd": "health", "up": true}));
    }
    for r in &rusts {
        r.set_up(true);
    }
    let closed_in = latency("all four instances close", || {
        pythons.iter_mut().all(|p| p.state() == "closed")
            && rusts.iter().all(|r| r.state() == State::Closed)
    });
    for p in &mut pythons {
        p.ask(json!({"cmd": "traffic", "on": false}));
    }
    for r in &mut rusts {
        r.stop_traffic();
    }
    for p in &mut pythons {
        assert_eq!(p.call(true), "ok", "{} admits again", p.label());
    }
    for r in &rusts {
        assert_eq!(r.call(true), "ok", "{} admits again", r.label);
    }

    // Never more than `permitted` probes per round, from the whole fleet;
    // every lease was spent by exactly one call.
    let all = all_leases(&mut pythons, &rusts);
    for (who, leases, calls) in &all {
        let (mut l, mut c) = (leases.clone(), calls.clone());
        l.sort_unstable();
        c.sort_unstable();
        assert_eq!(l, c, "{who}: every granted lease runs one probe call");
    }
    let by_round = rounds(
        &all.iter()
            .map(|(w, l, _)| (w.clone(), l.clone()))
            .collect::<Vec<_>>(),
    );
    assert!(by_round.len() >= 55, "{} rounds", by_round.len());
    // A stalled round restarted by a Rust instance (R16.13) is a new round
    // of the same OPEN period, with a budget of its own.
    let restarts: Vec<u64> = rusts.iter().flat_map(Node::restarts).collect();
    let mut per_instance = std::collections::BTreeMap::<String, usize>::new();
    for (round, leases) in &by_round {
        let rounds_here = 1 + restarts.iter().filter(|at| *at == round).count();
        let mut began: Vec<u64> = leases.iter().map(|(_, m)| m.round.1).collect();
        began.sort_unstable();
        began.dedup();
        assert!(
            began.len() <= rounds_here,
            "{} rounds in the OPEN period {round} µs, {rounds_here} begun or restarted: \
             {leases:?}",
            began.len()
        );
        for start in &began {
            let in_round = leases.iter().filter(|(_, m)| m.round.1 == *start).count();
            assert!(
                in_round <= o.permitted as usize,
                "the round opened at {round} µs, begun at version {start}, had {in_round} \
                 probes: {leases:?}"
            );
        }
        let mut versions: Vec<u64> = leases.iter().map(|(_, m)| m.version).collect();
        versions.sort_unstable();
        versions.dedup();
        assert_eq!(
            versions.len(),
            leases.len(),
            "one version per lease: {leases:?}"
        );
        for (who, _) in leases {
            *per_instance.entry(who.clone()).or_default() += 1;
        }
    }
    let python_probes: usize = per_instance
        .iter()
        .filter(|(w, _)| w.starts_with("python"))
        .map(|(_, n)| n)
        .sum();
    let rust_probes: usize = per_instance
        .iter()
        .filter(|(w, _)| w.starts_with("rust"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        python_probes > 0 && rust_probes > 0,
        "both sides probed: {per_instance:?}"
    );
    let full = by_round
        .values()
        .filter(|l| l.len() == o.permitted as usize)
        .count();
    println!(
        "(c) {} half-open rounds in {failing_for:?} ({} stalled ones restarted), {full} with \
         all {} probes used, none above; probes per instance {per_instance:?}",
        by_round.len(),
        restarts.len(),
        o.permitted
    );
    println!("(d) all four closed {closed_in:?} after the dependency came back");
    for p in &mut pythons {
        let events = p.events();
        assert!(
            events.iter().all(|e| !e.starts_with("degraded")),
            "{}: {events:?}",
            p.label()
        );
    }
    for r in &rusts {
        assert_eq!(r.events.count("storage degraded"), 0, "{}", r.label);
    }
}

#[test]
fn a_corrupt_or_foreign_key_leaves_both_sides_on_local_state() {
    let Some((server, py)) = setup() else { return };
    let o = Options::new(server.url(), "search");
    let mut python = Python::start(&py, "python", &o);
    let rust = Node::start(&server, "rust", &o, false);
    assert_eq!((python.call(true).as_str(), rust.call(true)), ("ok", "ok"));
    let key = "interlock:cb:search";

    // A value of another type (WRONGTYPE for both).
    cmd(&server, &["SET", key, "not a breaker"]);
    expect_within(LIMIT, "both degrade", || {
        python.events().iter().any(|e| e.starts_with("degraded")) && rust.is_degraded()
    });
    // Calls run on local state, and a local trip still protects.
    assert_eq!((python.call(true).as_str(), rust.call(true)), ("ok", "ok"));
    for _ in 0..2 {
        assert_eq!(
            (python.call(false).as_str(), rust.call(false)),
            ("failed", "failed")
        );
    }
    let answer = python.ask(json!({"cmd": "call", "ok": true}));
    assert_eq!(answer["result"], "rejected");
    assert!(
        answer["retry_after"].as_f64().is_some(),
        "a local OPEN knows its wait: {answer}"
    );
    assert_eq!(rust.call(true), "rejected");
    assert!(rust.is_degraded());

    // A corrupt hash: both keep refusing it (the original fails to parse
    // `version`), still without an error reaching a call.
    cmd(&server, &["DEL", key]);
    cmd(
        &server,
        &[
            "HSET",
            key,
            "state",
            "open",
            "version",
            "x",
            "opened_at",
            "1",
        ],
    );
    for _ in 0..20 {
        let (p, r) = (python.call(true), rust.call(true));
        assert!(matches!(p.as_str(), "ok" | "rejected" | "failed"), "{p}");
        assert!(matches!(r, "ok" | "rejected" | "failed"), "{r}");
    }
    assert!(rust.is_degraded());
    assert_eq!(
        cmd_get(&server, key, "version"),
        "x",
        "nobody wrote over the data it cannot read"
    );

    // A hash of someone else's fields: the original reads it as CLOSED (its
    // local state decides), interlock refuses it (degraded: local state
    // decides). Both keep serving.
    cmd(&server, &["DEL", key]);
    cmd(&server, &["HSET", key, "owner", "another service"]);
    for _ in 0..5 {
        assert_ne!(python.call(true), "unexpected");
        assert_ne!(rust.call(true), "unexpected");
    }

    // Once the key is gone both recover and share state again.
    cmd(&server, &["DEL", key]);
    expect_within(LIMIT, "both recover", || {
        python.events().iter().any(|e| e == "recovered")
            && rust.events.count("storage recovered") >= 1
            && !rust.is_degraded()
    });
    let degraded = python
        .events()
        .iter()
        .filter(|e| e.starts_with("degraded"))
        .count();
    assert_eq!(degraded, 1, "one degraded event per outage (R17.8)");
    assert_eq!(
        rust.events.count("storage degraded"),
        1,
        "{:?}",
        rust.events.all()
    );
}

fn cmd_get(server: &Server, key: &str, field: &str) -> String {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut server.admin())
        .unwrap()
}

/// A child process killed (if still running) when the test ends, however.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The example of docs/polyglot.md: `interlock_cb_fleet.py` on the
/// original and the `interlock_cb_fleet` example binary, on one breaker.
#[test]
fn the_guides_example_runs_a_python_and_a_rust_instance_on_one_breaker() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};

    let Some((server, py)) = setup() else { return };
    // target/<profile>/deps/polyglot-<hash> -> target/<profile>/examples/
    let exe = std::env::current_exe().unwrap();
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(format!(
            "interlock_cb_fleet{}",
            std::env::consts::EXE_SUFFIX
        ));
    assert!(
        binary.is_file(),
        "{} is not built: `cargo test` builds the examples (or `cargo build -p interlock-redis \
         --examples`)",
        binary.display()
    );
    let examples = crate::python::manifest_dir().join("examples");
    let mut python = Reaped(
        Command::new(&py)
            .arg("-u")
            .arg(examples.join("interlock_cb_fleet.py"))
            .env("REDIS_URL", server.url())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let told = Arc::new(Mutex::new(String::new()));
    let sink = told.clone();
    let stdout = python.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let mut all = sink.lock().unwrap();
            all.push_str(&line);
            all.push('\n');
        }
    });
    let python_says = |needle: &str| told.lock().unwrap().contains(needle);
    assert!(
        eventually(LIMIT, || python_says("python: call ok, breaker closed")),
        "the Python instance did not start: {}",
        told.lock().unwrap()
    );

    let rust = Command::new(&binary)
        .env("REDIS_URL", server.url())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    let rust_says = String::from_utf8_lossy(&rust.stdout).into_owned();
    assert!(
        rust.status.success(),
        "{rust_says}\n{}",
        String::from_utf8_lossy(&rust.stderr)
    );
    assert!(
        eventually(Duration::from_secs(60), || {
            python.0.try_wait().ok().flatten().is_some()
        }),
        "the Python instance did not finish: {}",
        told.lock().unwrap()
    );
    let status = python.0.wait().unwrap();
    reader.join().unwrap();
    let python_told = told.lock().unwrap().clone();
    assert!(status.success(), "{python_told}");
    for line in [
        "rust: key interlock:cb:payments",
        "rust: 2 failures of 2: payments is open for the whole fleet",
        "rust: the fleet recovered",
    ] {
        assert!(
            rust_says.contains(line),
            "{line:?} missing from:\n{rust_says}"
        );
    }
    for line in [
        "python: key interlock:cb:payments",
        "python: call rejected, breaker open",
        "python: the fleet recovered",
    ] {
        assert!(
            python_told.contains(line),
            "{line:?} missing from:\n{python_told}"
        );
    }
    println!("the guide's example:\n{python_told}{rust_says}");
}
