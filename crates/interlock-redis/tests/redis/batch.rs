//! Batched polling: one script call answers a whole poll, exactly as the
//! per-breaker operations would, a bad key failing only its own answer.

use std::time::Duration;

use interlock::State;
use interlock::storage::{AsyncStorage, PollRequest, SharedState, Storage, StorageError};
use interlock_redis::{AsyncRedisStorage, RedisStorage};

use crate::support::{Inbox, Server, eventually};
use crate::{TTL, storage, storage_builder};

fn cmd(server: &Server, args: &[&str]) -> redis::Value {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut server.admin()).unwrap()
}

/// A hash as the scripts write it, with a fixed `opened_at` (µs).
fn hash(server: &Server, key: &str, state: &str, opened_at_us: u64, version: u64) {
    let opened = opened_at_us.to_string();
    let version = version.to_string();
    let (permitted, remaining) = if state == "half_open" {
        ("3", "1")
    } else {
        ("0", "0")
    };
    cmd(server, &["DEL", key]);
    cmd(
        server,
        &[
            "HSET",
            key,
            "state",
            state,
            "opened_at",
            &opened,
            "version",
            &version,
            "probes_permitted",
            permitted,
            "probes_remaining",
            remaining,
            "probes_completed",
            "1",
            "probe_failures",
            "1",
            "probe_slows",
            "0",
            "v",
            "1",
        ],
    );
}

/// Long ago: any wait has elapsed.
const LONG_AGO: u64 = 1_700_000_000_000_000;
/// The server's clock now (µs): an OPEN since then is waiting. (An OPEN
/// since a time ahead of the server's clock is clamped to it by the next
/// begin, R16.3a: see `hostile.rs`.)
/// The first call's reading is kept, so every scene of a test (and both
/// storages compared) holds the same `opened_at`.
fn just_now(server: &Server) -> u64 {
    static FIRST: std::sync::Mutex<Vec<(u16, u64)>> = std::sync::Mutex::new(Vec::new());
    let mut first = FIRST.lock().unwrap();
    if let Some(&(_, us)) = first.iter().find(|(port, _)| *port == server.port()) {
        return us;
    }
    let us = interlock_redis::inspect::server_time(&mut server.admin())
        .unwrap()
        .as_nanos()
        / 1_000;
    first.push((server.port(), us));
    us
}

const WAIT: Duration = Duration::from_secs(30);

/// The same breakers, in every kind of state, under `prefix`.
fn scene(server: &Server, s: &impl Storage, prefix_key: impl Fn(&str) -> String) {
    // "absent": never written.
    s.trip_open("expired", Duration::from_millis(1), None)
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || cmd(
        server,
        &["PTTL", &prefix_key("expired")]
    )
        == redis::Value::Int(-2)));
    s.close("closed", TTL, None).unwrap();
    hash(
        server,
        &prefix_key("open-waiting"),
        "open",
        just_now(server),
        4,
    );
    hash(server, &prefix_key("open-elapsed"), "open", LONG_AGO, 9);
    hash(server, &prefix_key("open-read"), "open", LONG_AGO, 2);
    hash(server, &prefix_key("half-open"), "half_open", LONG_AGO, 11);
    hash(server, &prefix_key("half-begin"), "half_open", LONG_AGO, 12);
    cmd(server, &["HSET", &prefix_key("corrupt"), "state", "ajar"]);
    cmd(server, &["SET", &prefix_key("wrong-type"), "x"]);
}

fn requests() -> Vec<PollRequest<'static>> {
    let read = |name| PollRequest::Read { name };
    let begin = |name| PollRequest::BeginHalfOpen {
        name,
        wait: WAIT,
        permitted: 2,
        ttl: TTL,
    };
    vec![
        read("absent"),
        begin("absent"),
        read("expired"),
        begin("expired"),
        read("closed"),
        begin("open-waiting"),
        begin("open-elapsed"),
        read("open-read"),
        read("half-open"),
        begin("half-begin"),
        read("corrupt"),
        begin("corrupt"),
        read("wrong-type"),
        read("closed"),
    ]
}

/// An answer as comparable text: the view, or what kind of error.
fn show(answer: &Result<SharedState, StorageError>) -> String {
    match answer {
        Ok(v) => format!(
            "{:?} at {} v{} {}/{}/{}/{}/{}",
            v.state,
            v.opened_at.as_nanos(),
            v.version,
            v.probes_permitted,
            v.probes_remaining,
            v.probes_completed,
            v.probe_failures,
            v.probe_slows
        ),
        Err(e) => {
            let e = e.downcast_ref::<interlock_redis::Error>().unwrap();
            format!(
                "error in {}: corrupt {}, redis {}",
                e.operation(),
                e.is_corrupt(),
                e.redis_error().is_some()
            )
        }
    }
}

#[test]
fn a_batched_poll_answers_as_the_per_breaker_operations_would() {
    let server = Server::start();
    let batched = storage_builder(&server)
        .key_prefix("batched:{cb}:")
        .build()
        .unwrap();
    let single = storage_builder(&server)
        .key_prefix("single:{cb}:")
        .build()
        .unwrap();
    scene(&server, &batched, |n| batched.key(n));
    scene(&server, &single, |n| single.key(n));
    let reqs = requests();

    let before = cmd(&server, &["HGETALL", &batched.key("corrupt")]);
    let many: Vec<String> = batched.poll_many(&reqs).unwrap().iter().map(show).collect();
    let one: Vec<String> = reqs.iter().map(|r| show(&single.poll_one(r))).collect();
    assert_eq!(many, one);
    // And batching off answers the same through poll_many too.
    let off = storage_builder(&server)
        .key_prefix("off:{cb}:")
        .batched_polling(false)
        .build()
        .unwrap();
    scene(&server, &off, |n| off.key(n));
    let answers: Vec<String> = off.poll_many(&reqs).unwrap().iter().map(show).collect();
    assert_eq!(answers, one);

    let closed = show(&Ok(SharedState::closed()));
    assert_eq!(
        many[..4],
        [closed.clone(), closed.clone(), closed.clone(), closed],
        "absent and expired keys read CLOSED v0"
    );
    assert_eq!(many[4], show(&batched.read("closed").map(Option::unwrap)));
    assert!(many[5].starts_with("Open at ") && many[5].ends_with(" v4 0/0/1/1/0"));
    assert_eq!(
        many[6],
        format!("HalfOpen at {} v10 2/2/0/0/0", LONG_AGO * 1000),
        "the elapsed OPEN began its round"
    );
    assert!(
        many[7].starts_with("Open") && many[7].contains(" v2 "),
        "a read never begins"
    );
    assert!(many[8].contains("v11 3/1/1/1/0"));
    assert!(
        many[9].contains("v12 3/1/1/1/0"),
        "HALF_OPEN is not re-seeded"
    );
    assert_eq!(many[10], "error in read: corrupt true, redis false");
    assert_eq!(
        many[11],
        "error in begin_half_open_if_elapsed: corrupt true, redis false"
    );
    assert_eq!(many[12], "error in read: corrupt false, redis true");
    assert_eq!(
        many[13], many[4],
        "the keys after the bad ones are answered"
    );
    // The bad keys were left as they were.
    assert_eq!(cmd(&server, &["HGETALL", &batched.key("corrupt")]), before);
    assert_eq!(
        cmd(&server, &["GET", &batched.key("wrong-type")]),
        redis::Value::BulkString(b"x".to_vec())
    );
    // An applied begin writes like the single operation: TTL and version.
    let v = batched.read("open-elapsed").unwrap().unwrap();
    assert_eq!((v.state, v.version), (State::HalfOpen, 10));
    assert!(matches!(
        cmd(&server, &["PTTL", &batched.key("open-elapsed")]),
        redis::Value::Int(ms) if ms > 0
    ));
}

#[test]
fn an_applied_begin_in_a_batch_publishes_its_notice() {
    let server = Server::start();
    let s = storage(&server);
    let inbox = Inbox::new();
    assert!(storage(&server).subscribe(inbox.sink()));
    assert!(eventually(Duration::from_secs(5), || inbox.resyncs() == 1));
    hash(&server, &s.key("elapsed"), "open", LONG_AGO, 5);
    hash(&server, &s.key("waiting"), "open", just_now(&server), 5);
    let begin = |name| PollRequest::BeginHalfOpen {
        name,
        wait: WAIT,
        permitted: 1,
        ttl: TTL,
    };
    let answers = s
        .poll_many(&[
            begin("waiting"),
            begin("elapsed"),
            PollRequest::Read { name: "elapsed" },
        ])
        .unwrap();
    assert_eq!(answers[1].as_ref().unwrap().version, 6);
    assert_eq!(answers[2].as_ref().unwrap().version, 6);
    s.close("end", TTL, None).unwrap();
    assert!(inbox.wait_for("end"));
    assert_eq!(
        inbox.changes(),
        [("elapsed".to_owned(), 6), ("end".to_owned(), 1)]
    );
}

/// Loads every script once, so no `NOSCRIPT` round trip is counted.
fn warm_up(s: &impl Storage) {
    let reqs = [
        PollRequest::Read { name: "warm-up" },
        PollRequest::Read { name: "warm-up" },
    ];
    s.poll_many(&reqs).unwrap();
    s.read("warm-up").unwrap();
}

#[test]
fn a_poll_of_a_hundred_breakers_is_one_evalsha_batched_and_a_hundred_without() {
    let server = Server::start();
    let names: Vec<String> = (0..100).map(|i| format!("svc-{i}")).collect();
    let reqs: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::Read { name })
        .collect();
    let batched = storage(&server);
    warm_up(&batched);
    for name in names.iter().step_by(3) {
        batched.trip_open(name, TTL, None).unwrap();
    }
    batched.poll_many(&reqs).unwrap(); // opens the connection
    server.reset_stats();
    let answers = batched.poll_many(&reqs).unwrap();
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 1)]);
    assert_eq!(answers.len(), 100);
    let open = answers
        .iter()
        .filter(|a| a.as_ref().unwrap().state == State::Open)
        .count();
    assert_eq!(open, 34);

    let single = storage_builder(&server)
        .batched_polling(false)
        .build()
        .unwrap();
    single.read("warm-up").unwrap();
    server.reset_stats();
    let same = single.poll_many(&reqs).unwrap();
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 100)]);
    let views = |a: &[Result<SharedState, StorageError>]| -> Vec<SharedState> {
        a.iter().map(|r| *r.as_ref().unwrap()).collect()
    };
    assert_eq!(views(&same), views(&answers));

    // Past a thousand breakers a poll takes one call per thousand.
    let many: Vec<String> = (0..2500).map(|i| format!("bulk-{i}")).collect();
    let reqs: Vec<PollRequest<'_>> = many.iter().map(|name| PollRequest::Read { name }).collect();
    server.reset_stats();
    let answers = batched.poll_many(&reqs).unwrap();
    assert_eq!(answers.len(), 2500);
    assert!(
        answers
            .iter()
            .all(|a| *a.as_ref().unwrap() == SharedState::closed())
    );
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 3)]);
}

#[test]
fn a_failed_batch_is_one_error_for_the_whole_poll() {
    let mut server = Server::start();
    let s = storage(&server);
    s.read("x").unwrap();
    server.kill();
    let reqs = [
        PollRequest::Read { name: "a" },
        PollRequest::Read { name: "b" },
    ];
    let e = s.poll_many(&reqs).unwrap_err();
    let e = e.downcast_ref::<interlock_redis::Error>().unwrap();
    assert!(e.redis_error().is_some(), "{e}");
    assert!(!e.is_corrupt());
    assert!(s.poll_many(&[]).unwrap().is_empty(), "nothing to ask");
}

#[test]
fn a_storage_over_one_fixed_connection_batches_too() {
    let server = Server::start();
    let s = RedisStorage::builder(server.admin()).build().unwrap();
    s.trip_open("a", TTL, None).unwrap();
    warm_up(&s);
    server.reset_stats();
    let reqs = [
        PollRequest::Read { name: "a" },
        PollRequest::Read { name: "b" },
    ];
    let answers = s.poll_many(&reqs).unwrap();
    assert_eq!(answers[0].as_ref().unwrap().state, State::Open);
    assert_eq!(*answers[1].as_ref().unwrap(), SharedState::closed());
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 1)]);
}

#[tokio::test]
async fn the_async_storage_batches_the_same_way() {
    let server = Server::start();
    let con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let batched = AsyncRedisStorage::builder(con.clone())
        .key_prefix("batched:{cb}:")
        .build()
        .unwrap();
    let single = storage_builder(&server)
        .key_prefix("single:{cb}:")
        .build()
        .unwrap();
    // The scene needs a blocking storage on the same prefix.
    let scene_writer = storage_builder(&server)
        .key_prefix("batched:{cb}:")
        .build()
        .unwrap();
    scene(&server, &scene_writer, |n| batched.key(n));
    scene(&server, &single, |n| single.key(n));
    let reqs = requests();
    let many: Vec<String> = AsyncStorage::poll_many(&batched, &reqs)
        .await
        .unwrap()
        .iter()
        .map(show)
        .collect();
    let one: Vec<String> = reqs.iter().map(|r| show(&single.poll_one(r))).collect();
    assert_eq!(many, one);

    let names: Vec<String> = (0..100).map(|i| format!("svc-{i}")).collect();
    let reqs: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::Read { name })
        .collect();
    AsyncStorage::poll_many(&batched, &reqs).await.unwrap();
    server.reset_stats();
    AsyncStorage::poll_many(&batched, &reqs).await.unwrap();
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 1)]);
    let off = AsyncRedisStorage::builder(con)
        .batched_polling(false)
        .build()
        .unwrap();
    server.reset_stats();
    AsyncStorage::poll_many(&off, &reqs).await.unwrap();
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 100)]);
}
