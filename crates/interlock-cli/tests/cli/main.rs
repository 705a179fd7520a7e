//! The `interlock` binary against real `redis-server`s: every test starts
//! its own server on a free loopback port, sets breakers up through the
//! storage contract (or writes foreign data with plain commands), runs the
//! real binary, and checks its output, its exit code and what is in Redis
//! afterwards.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]
#![allow(missing_docs, unreachable_pub, missing_debug_implementations)]

mod support;

// The Python original in a process, shared with interlock-redis's
// mixed-fleet tests.
mod polyglot;
#[path = "../../../interlock-redis/tests/polyglot/python.rs"]
#[allow(dead_code)]
mod python;

use std::process::Command;
use std::time::Duration;

use interlock::State;
use interlock::storage::{SharedState, Storage};
use interlock::{Outcome, Timestamp};
use interlock_redis::RedisStorage;
use serde_json::Value;

use support::{Pty, Running, Server, interlock, run};

const TTL: Duration = Duration::from_secs(60);

/// A name that needs every part of the key encoding and of safe printing.
const ODD: &str = "db {primary} 名前 ü%";

fn storage(server: &Server) -> RedisStorage<redis::Connection> {
    RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .build()
        .unwrap()
}

fn cli(server: &Server, args: &[&str]) -> Command {
    let mut cmd = interlock();
    cmd.arg("--url").arg(server.url()).args(args);
    cmd
}

fn read(server: &Server, name: &str) -> Option<SharedState> {
    storage(server).read(name).unwrap()
}

/// payments OPEN v1, inventory CLOSED v1, search HALF_OPEN with a probe
/// round under way, and [`ODD`] OPEN v1.
fn fleet(server: &Server) {
    let s = storage(server);
    s.trip_open("payments", TTL, None).unwrap();
    s.close("inventory", TTL, None).unwrap();
    s.trip_open("search", TTL, None).unwrap();
    let half = s
        .begin_half_open_if_elapsed("search", Duration::ZERO, 3, TTL)
        .unwrap();
    assert_eq!(half.state, State::HalfOpen);
    assert!(s.lease_probe("search", TTL).unwrap().granted);
    assert!(s.lease_probe("search", TTL).unwrap().granted);
    s.record_probe("search", Outcome::Failure, TTL).unwrap();
    s.trip_open(ODD, TTL, None).unwrap();
}

#[test]
fn list_shows_every_breaker_with_state_version_age_expiry_and_probes() {
    let server = Server::start();
    fleet(&server);
    let out = run(cli(&server, &["list"])).expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(
        lines[0].starts_with("STATE") && lines[0].ends_with("NAME"),
        "{}",
        out.stdout
    );
    // Sorted by name (byte order): the odd name, inventory, payments, search.
    let names: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.rsplit("  ").next().unwrap())
        .collect();
    assert_eq!(
        names,
        [ODD, "inventory", "payments", "search"],
        "{}",
        out.stdout
    );
    let row = |name: &str| *lines.iter().find(|l| l.ends_with(name)).unwrap();
    assert!(row("payments").starts_with("OPEN "), "{}", out.stdout);
    assert!(row("payments").contains(" v1 "), "{}", out.stdout);
    assert!(row("payments").contains(" ago "), "{}", out.stdout);
    assert!(row("inventory").starts_with("CLOSED "), "{}", out.stdout);
    let search = row("search");
    assert!(search.starts_with("HALF_OPEN "), "{}", out.stdout);
    assert!(search.contains(" v5 "), "{search}");
    assert!(
        search.contains("1/3 left, 1 done, 1 failed, 0 slow"),
        "{search}"
    );
    // STATE VERSION OPENED ("N.Ns ago") EXPIRES: a 60 s TTL shows in seconds.
    let expires = search.split_whitespace().nth(4).unwrap();
    assert!(expires.starts_with("59.") || expires == "60.0s", "{search}");
}

#[test]
fn list_json_is_one_document_with_every_field() {
    let server = Server::start();
    fleet(&server);
    let out = run(cli(&server, &["list", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["prefix"], "interlock:{cb}:");
    assert!(doc["server_time"].as_str().unwrap().ends_with('Z'));
    let breakers = doc["breakers"].as_array().unwrap();
    assert_eq!(breakers.len(), 4);
    let odd = breakers.iter().find(|b| b["name"] == ODD).unwrap();
    assert_eq!(odd["key"], "interlock:{cb}:db %7Bprimary%7D 名前 ü%25");
    assert_eq!(odd["state"], "open");
    assert_eq!(odd["version"], 1);
    assert!(odd["opened_at"].as_str().unwrap().ends_with('Z'));
    assert!(odd["open_for_ms"].as_u64().unwrap() < 60_000);
    let ttl = odd["expires_in_ms"].as_u64().unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "{ttl}");
    assert!(odd["probes"].is_null());
    let search = breakers.iter().find(|b| b["name"] == "search").unwrap();
    assert_eq!(search["state"], "half_open");
    assert_eq!(search["probes"]["permitted"], 3);
    assert_eq!(search["probes"]["remaining"], 1);
    assert_eq!(search["probes"]["completed"], 1);
    assert_eq!(search["probes"]["failures"], 1);
    let inventory = breakers.iter().find(|b| b["name"] == "inventory").unwrap();
    assert!(inventory["opened_at"].is_null());
}

#[test]
fn an_empty_prefix_lists_nothing_and_says_so() {
    let server = Server::start();
    let out = run(cli(&server, &["list"])).expect_code(0);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("no breakers"), "{}", out.stderr);
    let out = run(cli(&server, &["list", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["breakers"].as_array().unwrap().len(), 0);
}

#[test]
fn the_prefix_option_selects_another_storage() {
    let server = Server::start();
    fleet(&server);
    let other = RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .key_prefix("checkout:{cb}:")
        .build()
        .unwrap();
    other.trip_open("gateway", TTL, None).unwrap();
    let out = run(cli(&server, &["list", "--prefix", "checkout:{cb}:"])).expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[1].ends_with("  gateway"), "{}", out.stdout);
    let out = run(cli(&server, &["list"])).expect_code(0);
    assert!(!out.stdout.contains("gateway"), "{}", out.stdout);
}

#[test]
fn show_prints_one_breaker_in_detail_even_with_an_odd_name() {
    let server = Server::start();
    fleet(&server);
    let out = run(cli(&server, &["show", ODD])).expect_code(0);
    assert!(
        out.stdout.contains(&format!("name:        {ODD}\n")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("key:         interlock:{cb}:db %7Bprimary%7D 名前 ü%25\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("state:       OPEN\n"), "{}", out.stdout);
    assert!(out.stdout.contains("version:     1\n"), "{}", out.stdout);
    assert!(out.stdout.contains("ago, server clock)"), "{}", out.stdout);
    assert!(out.stdout.contains("expires in:  "), "{}", out.stdout);

    let out = run(cli(&server, &["show", "search"])).expect_code(0);
    assert!(
        out.stdout.contains("state:       HALF_OPEN\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("probes:      1/3 left, 1 done, 1 failed, 0 slow\n"),
        "{}",
        out.stdout
    );

    let out = run(cli(&server, &["show", "inventory", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["state"], "closed");
    assert_eq!(doc["version"], 1);
}

#[test]
fn show_of_a_breaker_without_shared_state_exits_3() {
    let server = Server::start();
    fleet(&server);
    let out = run(cli(&server, &["show", "nope"])).expect_code(3);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .contains("no shared state for nope under prefix `interlock:{cb}:`"),
        "{}",
        out.stderr
    );
}

#[test]
fn trip_then_show_open_and_close_then_show_closed() {
    let server = Server::start();
    storage(&server).close("payments", TTL, None).unwrap(); // CLOSED v1

    let out = run(cli(&server, &["trip", "payments", "--yes"])).expect_code(0);
    assert!(
        out.stdout
            .contains("tripped payments: now OPEN v2 (was CLOSED v1; key expires in 5m00s)"),
        "{out:#?}"
    );
    let s = read(&server, "payments").unwrap();
    assert_eq!((s.state, s.version), (State::Open, 2));
    let out = run(cli(&server, &["show", "payments"])).expect_code(0);
    assert!(out.stdout.contains("state:       OPEN\n"), "{}", out.stdout);
    assert!(out.stdout.contains("version:     2\n"), "{}", out.stdout);

    let out = run(cli(
        &server,
        &["close", "payments", "--yes", "--ttl", "90s"],
    ))
    .expect_code(0);
    assert!(
        out.stdout
            .contains("closed payments: now CLOSED v3 (was OPEN v2; key expires in 1m30s)"),
        "{out:#?}"
    );
    let out = run(cli(&server, &["show", "payments", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        (doc["state"].as_str(), doc["version"].as_u64()),
        (Some("closed"), Some(3))
    );
    let ttl = doc["expires_in_ms"].as_u64().unwrap();
    assert!(
        ttl > 60_000 && ttl <= 90_000,
        "the --ttl was applied: {ttl}"
    );
}

#[test]
fn trip_of_an_odd_name_without_shared_state_creates_it() {
    let server = Server::start();
    let out = run(cli(&server, &["trip", ODD, "-y"])).expect_code(0);
    assert!(out.stderr.contains("has no shared state"), "{out:#?}");
    assert!(out.stdout.contains("now OPEN v1"), "{out:#?}");
    let s = read(&server, ODD).unwrap();
    assert_eq!((s.state, s.version), (State::Open, 1));
}

#[test]
fn writes_that_change_nothing_write_nothing() {
    let server = Server::start();
    storage(&server).trip_open("payments", TTL, None).unwrap(); // OPEN v1
    let out = run(cli(&server, &["trip", "payments", "--yes"])).expect_code(0);
    assert!(
        out.stdout
            .contains("payments is already OPEN v1; nothing written"),
        "{out:#?}"
    );
    assert_eq!(read(&server, "payments").unwrap().version, 1);

    let out = run(cli(&server, &["close", "ghost", "--yes"])).expect_code(3);
    assert!(out.stderr.contains("no shared state for ghost"), "{out:#?}");
    assert_eq!(read(&server, "ghost"), None, "close never creates a key");
}

#[test]
fn without_yes_and_without_a_terminal_nothing_is_written() {
    let server = Server::start();
    storage(&server).close("payments", TTL, None).unwrap(); // CLOSED v1
    let out = run(cli(&server, &["trip", "payments"])).expect_code(5);
    assert!(out.stderr.contains("stdin is not a terminal"), "{out:#?}");
    assert!(out.stderr.contains("--yes"), "{out:#?}");
    let s = read(&server, "payments").unwrap();
    assert_eq!((s.state, s.version), (State::Closed, 1));
}

#[test]
fn answering_no_at_the_prompt_writes_nothing() {
    let server = Server::start();
    storage(&server).trip_open("payments", TTL, None).unwrap(); // OPEN v1
    let mut pty = Pty::open();
    let running = pty.spawn(cli(&server, &["close", "payments"]));
    running.wait_for("[y/N]");
    assert!(
        running.stderr().contains("payments is OPEN v1"),
        "{}",
        running.stderr()
    );
    pty.type_line("n");
    let out = running.finish().expect_code(5);
    assert!(
        out.stderr.contains("not confirmed; nothing written"),
        "{out:#?}"
    );
    let s = read(&server, "payments").unwrap();
    assert_eq!((s.state, s.version), (State::Open, 1));
}

#[test]
fn answering_yes_at_the_prompt_writes() {
    let server = Server::start();
    let mut pty = Pty::open();
    let running = pty.spawn(cli(&server, &["trip", "payments"]));
    running.wait_for("[y/N]");
    assert!(
        running
            .stderr()
            .contains("Every instance will reject its calls"),
        "{}",
        running.stderr()
    );
    pty.type_line("yes");
    let out = running.finish().expect_code(0);
    assert!(
        out.stdout.contains("tripped payments: now OPEN v1"),
        "{out:#?}"
    );
    assert_eq!(read(&server, "payments").unwrap().state, State::Open);
}

/// The operator is shown CLOSED v1; while the prompt waits, the fleet
/// trips the breaker and starts probing (HALF_OPEN v3). Confirming then
/// must not overwrite that: the fenced write is refused by the storage.
#[test]
fn a_confirmed_write_that_lost_to_a_newer_state_reports_it_and_writes_nothing() {
    let server = Server::start();
    let s = storage(&server);
    s.close("payments", TTL, None).unwrap(); // CLOSED v1
    let mut pty = Pty::open();
    let running = pty.spawn(cli(&server, &["trip", "payments"]));
    running.wait_for("[y/N]");
    assert!(
        running.stderr().contains("payments is CLOSED v1"),
        "{}",
        running.stderr()
    );

    s.trip_open("payments", TTL, None).unwrap(); // OPEN v2
    s.begin_half_open_if_elapsed("payments", Duration::ZERO, 2, TTL)
        .unwrap(); // HALF_OPEN v3
    pty.type_line("y");

    let out = running.finish().expect_code(4);
    assert!(
        out.stderr.contains(
            "state changed since you looked: payments is now HALF_OPEN v3 \
             (probes 2/2 left, 0 done, 0 failed, 0 slow) (you saw CLOSED v1); nothing written"
        ),
        "{out:#?}"
    );
    let after = read(&server, "payments").unwrap();
    assert_eq!((after.state, after.version), (State::HalfOpen, 3));
}

#[test]
fn close_fenced_on_an_old_version_reports_the_newer_state() {
    let server = Server::start();
    let s = storage(&server);
    s.trip_open("payments", TTL, None).unwrap(); // OPEN v1
    s.begin_half_open_if_elapsed("payments", Duration::ZERO, 1, TTL)
        .unwrap(); // HALF_OPEN v2
    let out = run(cli(
        &server,
        &["close", "payments", "--yes", "--expect-version", "1"],
    ))
    .expect_code(4);
    assert!(
        out.stderr
            .contains("state changed since you looked: payments is now HALF_OPEN v2"),
        "{out:#?}"
    );
    assert!(out.stderr.contains("not v1; nothing written"), "{out:#?}");
    let after = read(&server, "payments").unwrap();
    assert_eq!((after.state, after.version), (State::HalfOpen, 2));

    // At the version shown, the same write goes through.
    run(cli(
        &server,
        &["close", "payments", "--yes", "--expect-version", "2"],
    ))
    .expect_code(0);
    assert_eq!(read(&server, "payments").unwrap().state, State::Closed);
}

fn spawn_watch(server: &Server, extra: &[&str]) -> Running {
    let mut cmd = cli(server, &["watch", "--interval", "50ms"]);
    cmd.args(extra).stdin(std::process::Stdio::null());
    let running = Running::spawn(cmd);
    // The header is printed after the first poll: changes from now on are
    // changes to it.
    running.wait_for("watching ");
    running
}

#[test]
fn watch_prints_each_change_made_while_it_runs() {
    let server = Server::start();
    let s = storage(&server);
    s.close("payments", TTL, None).unwrap(); // CLOSED v1
    let running = spawn_watch(&server, &["--count", "3"]);
    running.wait_for("payments: CLOSED v1\n");

    s.trip_open("payments", TTL, None).unwrap();
    running.wait_for("payments: CLOSED v1 -> OPEN v2\n");
    s.trip_open(ODD, TTL, None).unwrap();
    running.wait_for(&format!("{ODD}: appeared: OPEN v1\n"));
    let mut admin = server.admin();
    let _: () = redis::cmd("DEL")
        .arg("interlock:{cb}:payments")
        .query(&mut admin)
        .unwrap();

    let out = running.finish().expect_code(0);
    assert!(
        out.stdout
            .contains("payments: OPEN v2 -> gone (expired or deleted): reads as CLOSED\n"),
        "{out:#?}"
    );
    assert_eq!(
        out.stdout.lines().count(),
        4,
        "one initial line, three changes: {out:#?}"
    );
    assert!(out.stderr.contains("polling every 50ms"), "{}", out.stderr);
}

/// With an interval of an hour only the storage's change notices can wake
/// the watch: the Redis storage publishes one with every applied write.
#[test]
fn watch_sees_a_change_at_once_through_change_notices() {
    let server = Server::start();
    let s = storage(&server);
    s.close("payments", TTL, None).unwrap();
    let mut cmd = cli(&server, &["watch", "--interval", "1h", "--count", "1"]);
    cmd.stdin(std::process::Stdio::null());
    let running = Running::spawn(cmd);
    running.wait_for("and on every change notice");
    s.trip_open("payments", TTL, None).unwrap();
    let out = running.finish().expect_code(0);
    assert!(
        out.stdout.contains("payments: CLOSED v1 -> OPEN v2\n"),
        "{out:#?}"
    );
}

/// Redis dies under a running watch: it says so once, keeps polling, and
/// reports changes again once a server answers on the same address.
#[test]
fn watch_survives_redis_going_away_and_coming_back() {
    let mut server = Server::start();
    let running = spawn_watch(&server, &["--count", "1"]);
    server.kill();
    running.wait_for("poll failed: ");
    server.restart();
    running.wait_for("redis answers again");
    storage(&server).trip_open("payments", TTL, None).unwrap();
    let out = running.finish().expect_code(0);
    assert!(
        out.stdout.contains("payments: appeared: OPEN v1\n"),
        "{out:#?}"
    );
    assert_eq!(
        out.stderr.matches("poll failed").count(),
        1,
        "said once: {out:#?}"
    );
}

#[test]
fn watch_json_prints_one_object_per_line() {
    let server = Server::start();
    let s = storage(&server);
    let running = spawn_watch(&server, &["--json", "--count", "1"]);
    s.trip_open("search", TTL, None).unwrap();
    let out = running.finish().expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{out:#?}");
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["change"], "appeared");
    assert_eq!(event["name"], "search");
    assert_eq!(event["to"]["state"], "open");
    assert_eq!(event["to"]["version"], 1);
    assert!(event["at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn watch_for_a_duration_stops_by_itself() {
    let server = Server::start();
    fleet(&server);
    let running = spawn_watch(&server, &["--for", "300ms"]);
    let out = running.finish().expect_code(0);
    assert_eq!(
        out.stdout.lines().count(),
        4,
        "the initial states: {out:#?}"
    );
    assert!(
        out.stdout.contains("  search: HALF_OPEN v5"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_bad_url_is_a_usage_error_and_a_dead_server_a_clear_error() {
    let out = run({
        let mut c = interlock();
        c.args(["list", "--url", "http://example.invalid/"]);
        c
    })
    .expect_code(2);
    assert!(
        out.stderr
            .contains("invalid redis URL `http://example.invalid/`"),
        "{out:#?}"
    );

    let port = support::free_port();
    let out = run({
        let mut c = interlock();
        c.args(["show", "payments", "--timeout", "500ms"])
            .arg("--url")
            .arg(format!("redis://:hunter2@127.0.0.1:{port}/"));
        c
    })
    .expect_code(1);
    assert!(
        out.stderr.contains(&format!(
            "interlock: cannot connect to redis at redis://***@127.0.0.1:{port}/"
        )),
        "{out:#?}"
    );
    assert!(
        !out.stderr.contains("hunter2"),
        "the password never shows: {out:#?}"
    );
}

/// A server that accepts connections but never answers (stopped): the
/// command gives up after `--timeout`, not a multiple of it, and says why.
#[test]
fn a_stopped_server_is_reported_within_the_timeout_and_plainly() {
    let server = Server::start();
    fleet(&server);
    server.signal("STOP");
    let timed = |timeout: &str| {
        let clock = interlock::MonotonicClock;
        let started = interlock::Clock::now(&clock);
        let out = run(cli(&server, &["show", "payments", "--timeout", timeout])).expect_code(1);
        (
            interlock::Clock::now(&clock).saturating_duration_since(started),
            out,
        )
    };
    let (took, out) = timed("3s");
    server.signal("CONT");
    assert!(
        out.stderr.contains(&format!(
            "interlock: redis at {} did not answer within 3.0s (is it stopped, paused or \
             overloaded?",
            server.url()
        )),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("os error"), "{out:#?}");
    // The client's own handshake waits the timeout once per step (twice
    // here, 6 s): the command must not. The rest is a margin for starting
    // the process on a loaded machine, still short of the 6 s a second wait
    // would take.
    assert!(
        took < Duration::from_millis(5500),
        "a 3 s timeout took {took:?}"
    );
}

#[test]
fn a_password_protected_server_needs_the_password_and_never_shows_it() {
    let server = Server::start();
    fleet(&server);
    let _: () = redis::cmd("CONFIG")
        .arg(&["SET", "requirepass", "s3cret-pw"])
        .query(&mut server.admin())
        .unwrap();
    let port = server
        .url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let with = |password: &str| {
        let mut c = interlock();
        c.args(["show", "payments"])
            .arg("--url")
            .arg(format!("redis://:{password}@127.0.0.1:{port}/"));
        run(c)
    };
    let out = with("s3cret-pw").expect_code(0);
    assert!(out.stdout.contains("state:       OPEN"), "{out:#?}");
    let out = with("wrong-pw").expect_code(1);
    assert!(
        out.stderr.contains(&format!(
            "cannot connect to redis at redis://***@127.0.0.1:{port}/"
        )),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("wrong-pw"), "{out:#?}");
    let out = run(cli(&server, &["list"])).expect_code(1);
    assert!(
        out.stderr.contains("NOAUTH") || out.stderr.contains("uthentication"),
        "{out:#?}"
    );
}

#[test]
fn bad_arguments_are_usage_errors_before_anything_is_sent() {
    let server = Server::start();
    for (args, needle) in [
        (&["list", "--prefix", "x{"][..], "invalid --prefix `x{`"),
        (&["show", ""], "the breaker name is empty"),
        (&["trip", "", "--yes"], "the breaker name is empty"),
        (&["watch", "--interval", "soon"], "expected a duration"),
        (&["trip", "x", "--ttl", "0s"], "must be positive"),
    ] {
        let out = run(cli(&server, args)).expect_code(2);
        assert!(out.stderr.contains(needle), "{args:?}: {out:#?}");
    }
}

#[test]
fn the_url_comes_from_the_environment_too() {
    let server = Server::start();
    fleet(&server);
    let mut cmd = interlock();
    cmd.env("INTERLOCK_REDIS_URL", server.url())
        .args(["show", "payments"]);
    let out = run(cmd).expect_code(0);
    assert!(out.stdout.contains("state:       OPEN"), "{out:#?}");
}

#[test]
fn foreign_data_under_the_prefix_is_reported_not_a_crash() {
    let server = Server::start();
    fleet(&server);
    let mut admin = server.admin();
    let _: () = redis::cmd("HSET")
        .arg("interlock:{cb}:mangled")
        .arg(&["state", "open", "version", "many"])
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("interlock:{cb}:stringly")
        .arg("hello")
        .query(&mut admin)
        .unwrap();
    // Not an encoding the storages write: not a breaker, never listed.
    let _: () = redis::cmd("SET")
        .arg("interlock:{cb}:raw{brace}")
        .arg("x")
        .query(&mut admin)
        .unwrap();

    let out = run(cli(&server, &["list"])).expect_code(0);
    let mangled = out
        .stdout
        .lines()
        .find(|l| l.ends_with("  mangled"))
        .unwrap();
    assert!(mangled.starts_with("UNREADABLE"), "{}", out.stdout);
    assert!(mangled.contains("refused"), "{mangled}");
    let stringly = out
        .stdout
        .lines()
        .find(|l| l.ends_with("  stringly"))
        .unwrap();
    assert!(stringly.starts_with("UNREADABLE"), "{}", out.stdout);
    assert!(!out.stdout.contains("brace"), "{}", out.stdout);
    assert!(
        out.stdout.contains("  payments"),
        "the others still list: {}",
        out.stdout
    );

    let out = run(cli(&server, &["show", "stringly"])).expect_code(1);
    assert!(
        out.stderr.contains(
            "the key of stringly, `interlock:{cb}:stringly`, holds a string, not a breaker's \
             state"
        ),
        "{out:#?}"
    );
    assert!(
        !out.stderr.contains("script") && !out.stderr.contains("@user_script"),
        "no script digest or Lua line: {out:#?}"
    );
    let stringly_row = run(cli(&server, &["list"])).expect_code(0).stdout;
    assert!(
        stringly_row.contains("(the key holds a string, not a breaker's state)"),
        "{stringly_row}"
    );
    let out = run(cli(&server, &["show", "mangled"])).expect_code(1);
    assert!(out.stderr.contains("cannot read mangled"), "{out:#?}");
    assert!(out.stderr.contains("refused"), "{out:#?}");
    let out = run(cli(&server, &["trip", "mangled", "--yes"])).expect_code(1);
    assert!(out.stderr.contains("refused"), "{out:#?}");
}

#[test]
fn hostile_names_are_printed_escaped_never_raw() {
    let server = Server::start();
    let evil = "evil\u{1b}[2J\nname";
    storage(&server).trip_open(evil, TTL, None).unwrap();
    let out = run(cli(&server, &["list"])).expect_code(0);
    assert!(!out.stdout.contains('\u{1b}'), "{out:#?}");
    assert!(
        out.stdout.contains(r#""evil\u{1b}[2J\nname""#),
        "{}",
        out.stdout
    );
    let out = run(cli(&server, &["show", evil])).expect_code(0);
    assert!(!out.stdout.contains('\u{1b}'), "{out:#?}");
    // JSON keeps the exact name, escaped the JSON way.
    let out = run(cli(&server, &["list", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["breakers"][0]["name"], evil);
}

#[test]
fn ages_are_measured_on_the_server_clock() {
    let server = Server::start();
    let s = storage(&server);
    let open = s.trip_open("payments", TTL, None).unwrap();
    let out = run(cli(&server, &["show", "payments", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let opened_ms = open.opened_at.as_nanos() / 1_000_000;
    let shown = doc["opened_at"].as_str().unwrap();
    // The RFC 3339 text ends in the same milliseconds as the stored value.
    assert!(
        shown.ends_with(&format!(".{:03}Z", opened_ms % 1_000)),
        "{shown}"
    );
    assert!(doc["open_for_ms"].as_u64().unwrap() < 30_000);
    assert!(open.opened_at > Timestamp::from_secs(1_600_000_000));
}

#[test]
fn the_interlock_cb_layout_lists_trips_and_closes_the_originals_keys() {
    let server = Server::start();
    let python = RedisStorage::from_client(server.client(), Duration::from_secs(2))
        .layout(interlock_redis::Layout::InterlockCb)
        .build()
        .unwrap();
    python.trip_open(ODD, TTL, None).unwrap();
    python.close("payments", TTL, None).unwrap();
    // A breaker of interlock's own layout is not under the original's prefix.
    storage(&server).trip_open("ours", TTL, None).unwrap();

    let cb = |args: &[&str]| {
        let mut cmd = cli(&server, &["--layout", "interlock-cb"]);
        cmd.args(args);
        cmd
    };
    let out = run(cb(&["list", "--json"])).expect_code(0);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["prefix"], "interlock:cb:");
    let keys: Vec<&str> = doc["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["interlock:cb:db {primary} 名前 ü%", "interlock:cb:payments"]
    );

    let out = run(cb(&["trip", "payments", "--yes"])).expect_code(0);
    assert!(
        out.stdout.contains("now OPEN v2 (was CLOSED v1"),
        "{out:#?}"
    );
    assert_eq!(python.read("payments").unwrap().unwrap().state, State::Open);
    let out = run(cb(&["close", ODD, "--yes"])).expect_code(0);
    assert!(
        out.stdout.contains("now CLOSED v2 (was OPEN v1"),
        "{out:#?}"
    );
    let out = run(cb(&["show", ODD])).expect_code(0);
    assert!(
        out.stdout
            .contains("key:         interlock:cb:db {primary} 名前 ü%\n"),
        "{}",
        out.stdout
    );
    // `watch` polls: the original publishes no change notices.
    let out = run(cb(&["watch", "--interval", "50ms", "--for", "300ms"])).expect_code(0);
    assert!(
        out.stderr
            .contains("under `interlock:cb:` on redis://127.0.0.1")
            && out.stderr.contains("polling every 50ms; Ctrl-C to stop"),
        "{out:#?}"
    );
    assert!(out.stdout.contains("payments: OPEN v2"), "{out:#?}");
    // The environment chooses the layout too; a wrong one is a usage error.
    let mut cmd = cli(&server, &["show", "payments"]);
    cmd.env("INTERLOCK_LAYOUT", "interlock-cb");
    assert!(run(cmd).expect_code(0).stdout.contains("state:       OPEN"));
    run(cli(&server, &["--layout", "pybreaker", "list"])).expect_code(2);
}
