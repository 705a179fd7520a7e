//! The interlock-cb layout (issue 26) on a real server: the public
//! contract suite, the original's keys and fields exactly, its expiry rules
//! (rounded-down TTLs, refreshes on no-op begins and denied leases), no
//! notices, and refusal of data it cannot read. The same layout against the
//! Python original itself is in `tests/polyglot`.

use std::collections::BTreeMap;
use std::time::Duration;

use interlock::State;
use interlock::storage::contract::{RealTime, check_async_storage, check_storage};
use interlock::storage::{Coordinator, PollRequest, Storage, StorageError};
use interlock::{Outcome, mode::Blocking};
use interlock_redis::{AsyncRedisStorage, Layout, RedisStorage, RedisStorageBuilder};

use crate::support::{Server, eventually};
use crate::{Instance, TTL, config, ok};

fn builder(server: &Server) -> RedisStorageBuilder<redis::Connection> {
    RedisStorage::from_client(server.client(), Duration::from_millis(500))
        .layout(Layout::InterlockCb)
}

fn storage(server: &Server) -> RedisStorage<redis::Connection> {
    builder(server).build().unwrap()
}

fn cmd(server: &Server, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut server.admin()).unwrap()
}

/// The hash at `key`, with `opened_at` replaced by `now` / `0` / `old`
/// so that runs compare.
fn fields(server: &Server, key: &str) -> BTreeMap<String, String> {
    let map: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(key)
        .query(&mut server.admin())
        .unwrap();
    map
}

fn pttl(server: &Server, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query(&mut server.admin())
        .unwrap()
}

fn time() -> RealTime {
    RealTime::new(Duration::from_millis(100))
}

#[test]
fn the_interlock_cb_layout_passes_the_contract_suite() {
    let server = Server::start();
    let patient =
        || RedisStorage::from_client(server.client(), crate::PATIENT).layout(Layout::InterlockCb);
    check_storage(&patient().build().unwrap(), &time());
    let unbatched = patient().batched_polling(false).build().unwrap();
    interlock::storage::contract::blocking::poll_many_answers_like_single_requests(
        &unbatched,
        &time(),
    );
}

#[tokio::test]
async fn the_async_interlock_cb_layout_passes_the_contract_suite() {
    let server = Server::start();
    let con = server.client().get_connection_manager().await.unwrap();
    let storage = AsyncRedisStorage::builder(con)
        .layout(Layout::InterlockCb)
        .build()
        .unwrap();
    assert_eq!(storage.layout(), Layout::InterlockCb);
    assert_eq!(storage.key("a{b}"), "interlock:cb:a{b}");
    check_async_storage(&storage, &time()).await;
}

#[test]
fn keys_are_the_originals_prefix_and_the_name_verbatim() {
    let server = Server::start();
    let s = storage(&server);
    assert_eq!(s.key_prefix(), "interlock:cb:");
    assert_eq!(s.layout(), Layout::InterlockCb);
    let names = [
        "payments",
        "db {primary}",
        "100%",
        "%7B",
        "名前",
        "a:b/c",
        "api.example.com",
    ];
    for name in names {
        assert_eq!(s.close(name, TTL, None).unwrap().version, 1, "{name}");
    }
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.admin())
        .unwrap();
    keys.sort();
    let mut expected: Vec<String> = names.iter().map(|n| format!("interlock:cb:{n}")).collect();
    expected.sort();
    assert_eq!(keys, expected);
    let listed = interlock_redis::inspect::breaker_names_in(
        &mut server.admin(),
        "interlock:cb:",
        Layout::InterlockCb,
    )
    .unwrap();
    let mut sorted: Vec<&str> = names.to_vec();
    sorted.sort_unstable();
    assert_eq!(listed, sorted);

    // Any prefix the original accepts, an open brace included.
    let odd = builder(&server).key_prefix("svc{").build().unwrap();
    odd.trip_open("x", TTL, None).unwrap();
    assert_eq!(fields(&server, "svc{x")["state"], "open");
}

#[test]
fn each_operation_writes_exactly_the_originals_fields() {
    let server = Server::start();
    let s = storage(&server);
    let key = s.key("svc");
    let open = s.trip_open("svc", TTL, None).unwrap();
    let opened_us = (open.opened_at.as_nanos() / 1_000).to_string();
    let expect = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(f, v)| ((*f).to_owned(), (*v).to_owned()))
            .collect()
    };
    let all = |state: &str, opened: &str, version: &str, probes: [&str; 5]| {
        expect(&[
            ("state", state),
            ("opened_at", opened),
            ("version", version),
            ("probes_permitted", probes[0]),
            ("probes_remaining", probes[1]),
            ("probes_completed", probes[2]),
            ("probe_failures", probes[3]),
            ("probe_slows", probes[4]),
            ("v", "1"),
        ])
    };
    assert_eq!(
        fields(&server, &key),
        all("open", &opened_us, "1", ["0"; 5])
    );
    // A begin writes state, version and the probe counters only: an
    // extra field and a missing marker stay as they are.
    cmd(&server, &["HDEL", &key, "v"]);
    cmd(&server, &["HSET", &key, "owner", "ops"]);
    s.begin_half_open_if_elapsed("svc", Duration::ZERO, 3, TTL)
        .unwrap();
    let mut want = all("half_open", &opened_us, "2", ["3", "3", "0", "0", "0"]);
    want.remove("v");
    want.insert("owner".into(), "ops".into());
    assert_eq!(fields(&server, &key), want);
    assert!(s.lease_probe("svc", TTL).unwrap().granted);
    s.record_probe("svc", Outcome::SlowFailure, TTL).unwrap();
    want.extend(expect(&[
        ("version", "4"),
        ("probes_remaining", "2"),
        ("probes_completed", "1"),
        ("probe_failures", "1"),
        ("probe_slows", "1"),
    ]));
    assert_eq!(fields(&server, &key), want);
    // close (and trip) write every field and the marker again.
    s.close("svc", TTL, Some(4)).unwrap();
    let mut closed = all("closed", "0", "5", ["0"; 5]);
    closed.insert("owner".into(), "ops".into());
    assert_eq!(fields(&server, &key), closed);
}

#[test]
fn ttls_round_down_and_refresh_as_the_originals_do() {
    let server = Server::start();
    // 5000.9 ms: the original writes int(5.0009 * 1000) = 5000.
    let s = builder(&server)
        .state_ttl(Duration::from_micros(5_000_900))
        .build()
        .unwrap();
    let ttl = s.settings().state_ttl();
    let key = s.key("svc");
    s.trip_open("svc", ttl, None).unwrap();
    let left = pttl(&server, &key);
    assert!((1..=5000).contains(&left), "PTTL {left}");

    // A begin whose wait has not elapsed, and a denied lease, refresh the
    // key's lifetime (the original's Q3); a dropped record does not.
    let short = Duration::from_millis(1_000);
    s.trip_open("q3", short, None).unwrap();
    let q3 = s.key("q3");
    cmd(&server, &["PEXPIRE", &q3, "300"]);
    s.begin_half_open_if_elapsed("q3", Duration::from_secs(3600), 1, short)
        .unwrap();
    assert!(pttl(&server, &q3) > 300, "a no-op begin refreshes");
    cmd(&server, &["PEXPIRE", &q3, "300"]);
    assert!(!s.lease_probe("q3", short).unwrap().granted);
    assert!(pttl(&server, &q3) > 300, "a denied lease refreshes");
    cmd(&server, &["PEXPIRE", &q3, "300"]);
    s.record_probe("q3", Outcome::Success, short).unwrap();
    assert!(pttl(&server, &q3) <= 300, "a dropped record does not");
    // Fenced-out writes do not either.
    s.trip_open("q3", short, Some(7)).unwrap();
    s.close("q3", short, Some(7)).unwrap();
    assert!(pttl(&server, &q3) <= 300, "fenced-out writes do not");
    // interlock's own layout leaves the lifetime alone on both no-ops.
    let ours = crate::storage(&server);
    ours.trip_open("q3", short, None).unwrap();
    let ours_key = ours.key("q3");
    cmd(&server, &["PEXPIRE", &ours_key, "300"]);
    ours.begin_half_open_if_elapsed("q3", Duration::from_secs(3600), 1, short)
        .unwrap();
    assert!(!ours.lease_probe("q3", short).unwrap().granted);
    assert!(pttl(&server, &ours_key) <= 300, "interlock's layout");
    // A begin or lease on an absent key creates nothing.
    s.begin_half_open_if_elapsed("none", Duration::ZERO, 1, short)
        .unwrap();
    s.lease_probe("none", short).unwrap();
    assert_eq!(pttl(&server, &s.key("none")), -2);
}

#[test]
fn nothing_is_published_and_notifications_cannot_be_turned_on() {
    let server = Server::start();
    let err = builder(&server).notifications(true).build().unwrap_err();
    assert_eq!(err.field(), "notifications");
    assert!(builder(&server).notifications(false).build().is_ok());

    let s = storage(&server);
    assert!(!s.settings().notifications());
    assert!(format!("{s:?}").contains("subscribes: false"), "{s:?}");
    server.reset_stats();
    s.trip_open("svc", TTL, None).unwrap();
    s.begin_half_open_if_elapsed("svc", Duration::ZERO, 1, TTL)
        .unwrap();
    s.lease_probe("svc", TTL).unwrap();
    s.record_probe("svc", Outcome::Success, TTL).unwrap();
    s.close("svc", TTL, None).unwrap();
    assert_eq!(server.calls_of("publish"), 0);
    let coordinator = Coordinator::blocking(storage(&server));
    let _b = interlock::CircuitBreaker::builder("svc")
        .coordinator(&coordinator)
        .build()
        .unwrap();
    assert!(!coordinator.is_subscribed());
    assert_eq!(server.pubsub_clients(), 0);
}

#[test]
fn data_the_original_could_not_use_is_refused_and_left_alone() {
    let server = Server::start();
    let s = storage(&server);
    let key = s.key("svc");
    let valid: [(&str, &str); 9] = [
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
    let with = |field: &str, value: &'static str| -> Vec<(&'static str, &'static str)> {
        valid
            .iter()
            .map(|&(f, v)| (f, if f == field { value } else { v }))
            .collect()
    };
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("unknown state", with("state", "ajar")),
        ("not a number", with("version", "x")),
        ("float", with("opened_at", "1.7e15")),
        ("unknown marker", with("v", "2")),
        ("no state field", vec![("owner", "someone else")]),
        ("missing counter", valid[..6].to_vec()),
    ];
    for (what, hash) in cases {
        cmd(&server, &["DEL", &key]);
        let mut c = redis::cmd("HSET");
        c.arg(&key);
        for (f, v) in &hash {
            c.arg(*f).arg(*v);
        }
        let _: i64 = c.query(&mut server.admin()).unwrap();
        let before = fields(&server, &key);
        let errors: Vec<StorageError> = vec![
            s.read("svc").unwrap_err(),
            s.trip_open("svc", TTL, None).unwrap_err(),
            s.begin_half_open_if_elapsed("svc", Duration::ZERO, 1, TTL)
                .unwrap_err(),
            s.lease_probe("svc", TTL).unwrap_err(),
            s.record_probe("svc", Outcome::Failure, TTL).unwrap_err(),
            s.close("svc", TTL, None).unwrap_err(),
        ];
        for e in errors {
            let e = e.downcast_ref::<interlock_redis::Error>().unwrap();
            assert!(e.is_corrupt(), "{what}: {e}");
            assert!(e.to_string().contains("interlock-cb hash"), "{what}: {e}");
        }
        assert_eq!(fields(&server, &key), before, "{what}: changed");
        assert_eq!(pttl(&server, &key), -1, "{what}: expiry touched");
        // One bad key fails only its own answer of a batched poll.
        let answers = s
            .poll_many(&[
                PollRequest::Read { name: "svc" },
                PollRequest::Read { name: "other" },
            ])
            .unwrap();
        assert!(answers[0].is_err() && answers[1].is_ok(), "{what}");
    }
    cmd(&server, &["DEL", &key]);
    cmd(&server, &["SET", &key, "garbage"]);
    let e = s.read("svc").unwrap_err();
    let e = e.downcast_ref::<interlock_redis::Error>().unwrap();
    assert!(e.redis_error().is_some(), "WRONGTYPE: {e}");
}

#[test]
fn a_breaker_on_the_interlock_cb_layout_degrades_on_foreign_data_and_recovers() {
    let server = Server::start();
    let key = storage(&server).key("payments");
    cmd(&server, &["SET", &key, "not a hash"]);
    let a: Instance = Instance::new(Coordinator::<Blocking>::manual(storage(&server)), config());
    a.lane.poll();
    assert!(a.breaker.is_degraded());
    ok(&a.breaker).unwrap();
    a.trip_locally();
    assert_eq!(a.breaker.state(), State::Open);
    cmd(&server, &["DEL", &key]);
    // The retry delay (5 s by default) passes on real time: wait for it.
    assert!(eventually(Duration::from_secs(20), || {
        a.lane.poll();
        !a.breaker.is_degraded()
    }));
    assert_eq!(
        a.events.count("storage recovered"),
        1,
        "{:?}",
        a.events.all()
    );
}
