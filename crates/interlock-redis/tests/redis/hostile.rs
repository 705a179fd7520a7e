//! Hostile input: hashes corrupted or written by someone else, and breaker
//! names that try to escape their key.

use std::collections::HashSet;
use std::time::Duration;

use interlock::storage::{Coordinator, Storage, StorageError};
use interlock::{Outcome, State};

use crate::support::Server;
use crate::{Instance, TTL, config, ok, storage};

fn cmd(server: &Server, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut server.admin()).unwrap()
}

/// A valid hash, as our scripts write it.
const VALID: [(&str, &str); 9] = [
    ("state", "open"),
    ("opened_at", "1700000000000000"),
    ("version", "3"),
    ("probes_permitted", "0"),
    ("probes_remaining", "0"),
    ("probes_completed", "0"),
    ("probe_failures", "0"),
    ("probe_slows", "0"),
    ("v", "1"),
];

fn write_hash(server: &Server, key: &str, fields: &[(&str, &str)]) {
    cmd(server, &["DEL", key]);
    let mut c = redis::cmd("HSET");
    c.arg(key);
    for (f, v) in fields {
        c.arg(*f).arg(*v);
    }
    let _: i64 = c.query(&mut server.admin()).unwrap();
}

fn with(field: &str, value: &str) -> Vec<(&'static str, String)> {
    VALID
        .iter()
        .map(|(f, v)| {
            (
                *f,
                if *f == field {
                    value.to_owned()
                } else {
                    (*v).to_owned()
                },
            )
        })
        .collect()
}

fn without(field: &str) -> Vec<(&'static str, String)> {
    VALID
        .iter()
        .filter(|(f, _)| *f != field)
        .map(|(f, v)| (*f, (*v).to_owned()))
        .collect()
}

/// Every operation on `name`: each must fail (and not panic).
fn every_operation(s: &impl Storage, name: &str) -> Vec<StorageError> {
    vec![
        s.read(name).unwrap_err(),
        s.trip_open(name, TTL, None).unwrap_err(),
        s.begin_half_open_if_elapsed(name, Duration::ZERO, 1, TTL)
            .unwrap_err(),
        s.lease_probe(name, TTL).unwrap_err(),
        s.record_probe(name, Outcome::Failure, TTL).unwrap_err(),
        s.close(name, TTL, None).unwrap_err(),
        s.close(name, TTL, Some(3)).unwrap_err(),
    ]
}

#[test]
fn a_corrupt_or_foreign_hash_is_a_storage_error_and_is_left_alone() {
    let server = Server::start();
    let s = storage(&server);
    let key = s.key("svc");
    let mut cases: Vec<(String, Vec<(&str, String)>)> = vec![
        ("unknown state".into(), with("state", "ajar")),
        ("upper-case state".into(), with("state", "OPEN")),
        (
            "huge version".into(),
            with("version", "99999999999999999999"),
        ),
        (
            "version above 2^53".into(),
            with("version", "9007199254740992"),
        ),
        (
            "version 2^53 - 1, where adding one no longer works".into(),
            with("version", "9007199254740991"),
        ),
        (
            "version above 2^50".into(),
            with("version", "1125899906842625"),
        ),
        ("negative opened_at".into(), with("opened_at", "-5")),
        ("float version".into(), with("version", "1.5")),
        ("exponent".into(), with("opened_at", "1e15")),
        ("empty number".into(), with("probes_remaining", "")),
        (
            "probe counter above u32".into(),
            with("probes_remaining", "4294967296"),
        ),
        ("unknown schema".into(), with("v", "2")),
        ("binary junk".into(), with("probe_slows", "\u{0}\u{1}x")),
        (
            "foreign fields only".into(),
            vec![("owner", "someone else".into())],
        ),
    ];
    for field in [
        "state",
        "opened_at",
        "version",
        "probes_remaining",
        "probe_slows",
    ] {
        cases.push((format!("missing {field}"), without(field)));
    }
    for (what, fields) in &cases {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(f, v)| (*f, v.as_str())).collect();
        write_hash(&server, &key, &fields);
        let before = cmd(&server, &["HGETALL", &key]);
        for e in every_operation(&s, "svc") {
            let e = e
                .downcast_ref::<interlock_redis::Error>()
                .unwrap_or_else(|| panic!("{what}: not our error type: {e}"));
            assert!(e.is_corrupt(), "{what}: {e} should be reported as corrupt");
        }
        assert_eq!(cmd(&server, &["HGETALL", &key]), before, "{what}: changed");
        assert_eq!(
            cmd(&server, &["PTTL", &key]),
            redis::Value::Int(-1),
            "{what}"
        );
    }

    // Another type at the key: Redis's WRONGTYPE, still an error.
    for setup in [
        &["SET", key.as_str(), "x"][..],
        &["RPUSH", key.as_str(), "x"][..],
    ] {
        cmd(&server, &["DEL", &key]);
        cmd(&server, setup);
        for e in every_operation(&s, "svc") {
            let e = e.downcast_ref::<interlock_redis::Error>().unwrap();
            assert!(e.redis_error().is_some(), "{e}");
        }
    }

    // Unknown extra fields next to valid ones are ignored.
    let mut extra: Vec<(&str, &str)> = VALID.to_vec();
    extra.push(("owner", "ops"));
    write_hash(&server, &key, &extra);
    let v = s.read("svc").unwrap().unwrap();
    assert_eq!((v.state, v.version), (State::Open, 3));
    assert_eq!(v.opened_at.as_secs(), 1_700_000_000);
    // A hash without the schema marker (an older writer) is accepted too.
    write_hash(&server, &key, &VALID[..8]);
    assert_eq!(s.close("svc", TTL, Some(3)).unwrap().version, 4);
    // The largest valid version is read, and no write moves past it.
    write_hash(
        &server,
        &key,
        &with_pairs(&with("version", "1125899906842624")),
    );
    assert_eq!(s.read("svc").unwrap().unwrap().version, 1 << 50);
    assert_eq!(s.close("svc", TTL, None).unwrap().version, 1 << 50);
}

fn with_pairs<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    fields.iter().map(|(f, v)| (*f, v.as_str())).collect()
}

/// R16.3a: an OPEN whose `opened_at` lies ahead of the server's clock (a
/// foreign writer, a clock stepped back) is clamped to the server's now by
/// the next begin, so the fleet admits again a wait later, not a year later.
#[test]
fn an_open_that_began_in_the_future_ends_a_wait_after_it_is_found() {
    const WAIT: Duration = Duration::from_millis(500);
    let server = Server::start();
    let s = storage(&server);
    let now_us = interlock_redis::inspect::server_time(&mut server.admin())
        .unwrap()
        .as_nanos()
        / 1_000;
    let year_ahead = (now_us + 365 * 86_400 * 1_000_000).to_string();
    write_hash(
        &server,
        &s.key("payments"),
        &with_pairs(&with("opened_at", &year_ahead)),
    );
    let clamped = s
        .begin_half_open_if_elapsed("payments", WAIT, 1, TTL)
        .unwrap();
    let after_us = interlock_redis::inspect::server_time(&mut server.admin())
        .unwrap()
        .as_nanos()
        / 1_000;
    assert_eq!((clamped.state, clamped.version), (State::Open, 4));
    let at_us = clamped.opened_at.as_nanos() / 1_000;
    assert!(
        (now_us..=after_us).contains(&at_us),
        "opened_at {at_us} not clamped to the server's now ({now_us}..={after_us})"
    );
    // A coordinated breaker polling it admits probes once the wait is over.
    let lane = Coordinator::blocking(
        crate::storage_builder(&server)
            .poll_interval(Duration::from_millis(50))
            .build()
            .unwrap(),
    );
    let a = Instance::new(lane, config().wait_duration_in_open(WAIT));
    let half_open = crate::support::eventually(Duration::from_secs(10), || {
        a.breaker.state() == State::HalfOpen
    });
    assert!(half_open, "still {:?}", a.breaker.shared_view());
    a.breaker.close();
}

#[test]
fn a_breaker_on_a_corrupt_hash_degrades_to_local_state() {
    let server = Server::start();
    let s = storage(&server);
    let a = Instance::new(Coordinator::manual(storage(&server)), config());
    write_hash(
        &server,
        &s.key("payments"),
        &[("state", "open"), ("version", "x")],
    );
    a.lane.poll();
    assert!(a.breaker.is_degraded());
    assert_eq!(
        a.events.count("storage degraded"),
        1,
        "{:?}",
        a.events.all()
    );
    assert_eq!(
        a.events.all()[0],
        "payments: storage degraded: redis storage: read refused: field opened_at is missing \
         or not a decimal integer (corrupt or foreign breaker hash)",
        "the event carries the reason"
    );
    // Local protection: calls run, failures trip locally.
    ok(&a.breaker).unwrap();
    a.trip_locally();
    assert_eq!(a.breaker.state(), State::Open);
}

#[test]
fn hostile_names_get_distinct_keys_inside_the_prefix_and_its_hash_tag() {
    let server = Server::start();
    let s = storage(&server);
    let long = "n".repeat(10_000);
    let names = [
        "",
        " ",
        "payments",
        "a}b",
        "{cb}",
        "{x}y",
        "}{",
        "{",
        "}",
        "%",
        "%7B",
        "%257B",
        "a\r\nFLUSHALL\r\n",
        "\0",
        "\u{85}",
        "\u{7f}",
        "名前",
        "interlock:{cb}:payments",
        ":",
        "*",
        "?",
        "[a-z]",
        long.as_str(),
    ];
    for name in names {
        let v = s.close(name, TTL, None).unwrap();
        assert_eq!(v.version, 1, "{name:?} shares a key with another name");
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.admin())
        .unwrap();
    // Plus the change index's two keys (issue 29), under the same prefix
    // and tag, named as no encoded name can be.
    let index = ["interlock:{cb}:%changes", "interlock:{cb}:%expiry"];
    for key in index {
        assert!(keys.iter().any(|k| k == key), "{key} in {keys:?}");
    }
    let keys: Vec<String> = keys
        .into_iter()
        .filter(|k| !index.contains(&k.as_str()))
        .collect();
    assert_eq!(keys.len(), names.len());
    let unique: HashSet<&String> = keys.iter().collect();
    assert_eq!(unique.len(), names.len());
    for key in &keys {
        let rest = key.strip_prefix("interlock:{cb}:").unwrap();
        assert!(!rest.contains(['{', '}']), "{key:?}");
        assert!(!rest.chars().any(char::is_control), "{key:?}");
    }
    // Tripping one leaves the others alone.
    s.trip_open("{x}y", TTL, None).unwrap();
    for name in names {
        let expect = if name == "{x}y" {
            State::Open
        } else {
            State::Closed
        };
        assert_eq!(s.read(name).unwrap().unwrap().state, expect, "{name:?}");
    }
}
