//! Change notices, at the storage level: what the scripts publish, and
//! what a subscription delivers to its sink, on a real server.

use std::time::Duration;

use interlock::Outcome;
use interlock::storage::{AsyncStorage, Storage};
use interlock_redis::{AsyncRedisStorage, RedisStorage};

use crate::support::{Inbox, Seen, Server, eventually};
use crate::{PATIENT, TTL, patient_storage, storage, storage_builder};

/// Waits until `inbox` saw its first resync: the subscription is live.
fn subscribed(inbox: &Inbox) -> bool {
    eventually(Duration::from_secs(5), || inbox.resyncs() >= 1)
}

#[test]
fn every_applied_write_and_only_those_reach_another_storage_as_a_notice() {
    let server = Server::start();
    let writer = storage(&server);
    let listener = storage(&server);
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox), "never subscribed");
    assert_eq!(server.pubsub_clients(), 1);

    let n = "payments";
    writer.trip_open(n, TTL, None).unwrap(); // v1
    writer.trip_open(n, TTL, None).unwrap(); // already open: no notice
    writer.close(n, TTL, Some(7)).unwrap(); // fenced out: no notice
    writer
        .begin_half_open_if_elapsed(n, Duration::from_secs(3600), 2, TTL)
        .unwrap(); // not elapsed: no notice
    writer
        .record_probe("elsewhere", Outcome::Failure, TTL)
        .unwrap(); // dropped
    writer
        .begin_half_open_if_elapsed(n, Duration::ZERO, 2, TTL)
        .unwrap(); // v2
    writer.lease_probe(n, TTL).unwrap(); // v3
    writer.lease_probe(n, TTL).unwrap(); // v4
    writer.lease_probe(n, TTL).unwrap(); // denied: no notice
    writer.record_probe(n, Outcome::Success, TTL).unwrap(); // v5
    writer.record_probe(n, Outcome::SlowFailure, TTL).unwrap(); // v6
    writer.close(n, TTL, Some(6)).unwrap(); // v7
    writer.read(n).unwrap(); // a read writes nothing
    writer.close("end", TTL, None).unwrap(); // the marker
    assert!(inbox.wait_for("end"));
    let expect: Vec<(String, u64)> = (1..=7)
        .map(|v| (n.to_owned(), v))
        .chain([("end".to_owned(), 1)])
        .collect();
    assert_eq!(inbox.changes(), expect);
    assert_eq!(inbox.all()[0], Seen::Resync, "a resync comes first");
    assert_eq!(inbox.resyncs(), 1);
}

#[test]
fn notices_carry_the_decoded_name_of_any_breaker() {
    let server = Server::start();
    let writer = storage(&server);
    let listener = storage(&server);
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    let names = [
        "a{b}",
        "%7B",
        "100%",
        "名前",
        "with space",
        "a\r\nb",
        "",
        "7 x",
    ];
    for name in names {
        writer.trip_open(name, TTL, None).unwrap();
    }
    writer.close("end", TTL, None).unwrap();
    assert!(inbox.wait_for("end"));
    let got: Vec<String> = inbox.changes().into_iter().map(|(n, _)| n).collect();
    let mut expect: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    expect.push("end".to_owned());
    assert_eq!(got, expect);
}

#[test]
fn a_stranger_s_messages_on_the_channel_and_other_prefixes_are_ignored() {
    let server = Server::start();
    let listener = storage(&server);
    let other = storage_builder(&server)
        .key_prefix("other:{cb}:")
        .build()
        .unwrap();
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    other.trip_open("payments", TTL, None).unwrap(); // another channel
    let channel = "interlock:{cb}:notices";
    for junk in [
        "",
        "hello",
        "1 other:{cb}:x",
        "x interlock:{cb}:y",
        "1 interlock:{cb}:%zz",
    ] {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(channel)
            .arg(junk)
            .query(&mut server.admin())
            .unwrap();
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg(b"1 interlock:{cb}:\xff".as_slice())
        .query(&mut server.admin())
        .unwrap();
    storage(&server).close("end", TTL, None).unwrap();
    assert!(inbox.wait_for("end"));
    assert_eq!(inbox.changes(), [("end".to_owned(), 1)]);
}

#[test]
fn a_killed_subscription_comes_back_after_the_retry_delay_with_a_resync() {
    let server = Server::start();
    let listener = storage_builder(&server)
        .retry_backoff(Duration::from_millis(200))
        .build()
        .unwrap();
    let writer = storage(&server);
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    assert_eq!(server.kill_pubsub_clients(), 1);
    // Written while no subscription is held: this notice is lost.
    writer.trip_open("lost", TTL, None).unwrap();
    assert!(
        eventually(Duration::from_secs(5), || inbox.resyncs() == 2),
        "the subscription never came back: {:?}",
        inbox.all()
    );
    assert_eq!(server.pubsub_clients(), 1);
    writer.trip_open("after", TTL, None).unwrap();
    assert!(inbox.wait_for("after"));
    // Either the lost notice never arrived, or it was sent before the kill
    // took effect; the resync is what tells the coordinator to poll.
    let all = inbox.all();
    let resync_at = all.iter().rposition(|s| *s == Seen::Resync).unwrap();
    assert!(all[resync_at..].contains(&Seen::Changed("after".into(), 1)));
}

#[test]
fn while_redis_is_down_the_subscriber_retries_with_the_backoff_and_resyncs_after() {
    let mut server = Server::start();
    let listener = storage_builder(&server)
        .retry_backoff(Duration::from_millis(100))
        .retry_backoff_multiplier(2.0)
        .retry_backoff_max(Duration::from_millis(400))
        .build()
        .unwrap();
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    server.kill();
    // A few failed attempts against a dead port, then the server is back.
    crate::support::pause(Duration::from_millis(600));
    server.restart();
    assert!(
        eventually(Duration::from_secs(5), || inbox.resyncs() == 2),
        "{:?}",
        inbox.all()
    );
    storage(&server).trip_open("back", TTL, None).unwrap();
    assert!(inbox.wait_for("back"));
}

#[test]
fn the_subscription_ends_once_its_coordinator_is_gone() {
    let server = Server::start();
    let listener = storage(&server);
    let inbox = Inbox::new();
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    assert_eq!(server.pubsub_clients(), 1);
    drop(inbox);
    assert!(
        eventually(Duration::from_secs(5), || server.pubsub_clients() == 0),
        "the subscriber outlived its coordinator"
    );
}

#[test]
fn one_subscription_per_subscribe_call() {
    let server = Server::start();
    let listener = storage(&server);
    let (a, b) = (Inbox::new(), Inbox::new());
    assert!(listener.subscribe(a.sink()));
    assert!(listener.subscribe(b.sink()));
    assert!(subscribed(&a) && subscribed(&b));
    assert_eq!(server.pubsub_clients(), 2);
    storage(&server).trip_open("x", TTL, None).unwrap();
    assert!(a.wait_for("x") && b.wait_for("x"));
    drop(a);
    assert!(eventually(Duration::from_secs(5), || server
        .pubsub_clients()
        == 1));
}

#[test]
fn with_notifications_off_nothing_is_published_or_subscribed() {
    let server = Server::start();
    let quiet = storage_builder(&server)
        .notifications(false)
        .build()
        .unwrap();
    let inbox = Inbox::new();
    assert!(!quiet.subscribe(inbox.sink()));
    let listener = storage(&server);
    assert!(listener.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    server.reset_stats();
    quiet.trip_open("silent", TTL, None).unwrap();
    quiet
        .begin_half_open_if_elapsed("silent", Duration::ZERO, 1, TTL)
        .unwrap();
    quiet.lease_probe("silent", TTL).unwrap();
    quiet.record_probe("silent", Outcome::Success, TTL).unwrap();
    quiet.close("silent", TTL, None).unwrap();
    assert_eq!(server.calls_of("publish"), 0);
    storage(&server).close("end", TTL, None).unwrap();
    assert!(inbox.wait_for("end"));
    assert_eq!(inbox.changes(), [("end".to_owned(), 1)]);
    assert_eq!(server.pubsub_clients(), 1, "only the listener's");
}

#[test]
fn a_storage_without_a_subscriber_client_cannot_subscribe() {
    let server = Server::start();
    let inbox = Inbox::new();
    let fixed = RedisStorage::builder(server.admin()).build().unwrap();
    assert!(!fixed.subscribe(inbox.sink()));
    let connecting = RedisStorage::builder_with({
        let client = server.client();
        move || client.get_connection()
    })
    .build()
    .unwrap();
    assert!(!connecting.subscribe(inbox.sink()));
    // Given a subscriber client, the fixed-connection storage can.
    let fixed = RedisStorage::builder(server.admin())
        .subscriber(server.client(), Duration::from_millis(500))
        .build()
        .unwrap();
    assert!(fixed.subscribe(inbox.sink()));
    assert!(subscribed(&inbox));
    // Its writes publish whether or not it subscribes.
    fixed.trip_open("fixed", TTL, None).unwrap();
    assert!(inbox.wait_for("fixed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_storage_subscribes_on_a_task_and_behaves_the_same() {
    let server = Server::start();
    let con = server.client().get_connection_manager().await.unwrap();
    let listener = AsyncRedisStorage::builder(con.clone())
        .subscriber(server.client(), Duration::from_millis(500))
        .retry_backoff(Duration::from_millis(200))
        .build()
        .unwrap();
    let writer = AsyncRedisStorage::builder(con).build().unwrap();
    let inbox = Inbox::new();
    assert!(AsyncStorage::subscribe(&listener, inbox.sink()));
    let live = async |cond: &dyn Fn() -> bool| {
        let deadline = crate::support::now().saturating_add(Duration::from_secs(5));
        while !cond() && crate::support::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cond()
    };
    assert!(live(&|| inbox.resyncs() == 1).await, "never subscribed");
    writer.trip_open("a{b}", TTL, None).await.unwrap();
    writer
        .begin_half_open_if_elapsed("a{b}", Duration::ZERO, 1, TTL)
        .await
        .unwrap();
    writer.trip_open("a{b}", TTL, None).await.unwrap(); // re-open: v3
    writer.trip_open("a{b}", TTL, None).await.unwrap(); // idempotent
    assert!(live(&|| inbox.changes().len() == 3).await);
    assert_eq!(
        inbox.changes(),
        [("a{b}".into(), 1), ("a{b}".into(), 2), ("a{b}".into(), 3)]
    );

    // Killed: back after the retry delay, with a resync.
    assert_eq!(server.kill_pubsub_clients(), 1);
    assert!(live(&|| inbox.resyncs() == 2).await, "{:?}", inbox.all());
    writer.close("after", TTL, None).await.unwrap();
    assert!(live(&|| inbox.changes().iter().any(|(n, _)| n == "after")).await);

    // The coordinator gone: the task ends and unsubscribes.
    drop(inbox);
    assert!(live(&|| server.pubsub_clients() == 0).await);

    // Off, or without a subscriber client: no subscription.
    let con = server.client().get_connection_manager().await.unwrap();
    let inbox = Inbox::new();
    let off = AsyncRedisStorage::builder(con.clone())
        .subscriber(server.client(), Duration::from_millis(500))
        .notifications(false)
        .build()
        .unwrap();
    assert!(!AsyncStorage::subscribe(&off, inbox.sink()));
    let bare = AsyncRedisStorage::builder(con).build().unwrap();
    assert!(!AsyncStorage::subscribe(&bare, inbox.sink()));
    assert_eq!(server.pubsub_clients(), 0);
}

#[test]
fn the_async_storage_outside_a_runtime_cannot_subscribe() {
    let server = Server::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let con = rt
        .block_on(server.client().get_multiplexed_async_connection())
        .unwrap();
    let storage = AsyncRedisStorage::builder(con)
        .subscriber(server.client(), Duration::from_millis(500))
        .build()
        .unwrap();
    let inbox = Inbox::new();
    assert!(!AsyncStorage::subscribe(&storage, inbox.sink()));
    assert_eq!(server.pubsub_clients(), 0);
}

#[test]
fn a_silent_subscription_pings_the_server_and_keeps_delivering() {
    let server = Server::start();
    // Patient response timeouts: the test is about the ping keeping a silent
    // subscription, and under load a 500 ms answer to it can be late (seen
    // once): the listener then resubscribes, which is right but not this
    // test's point.
    let blocking = patient_storage(&server);
    let inbox = Inbox::new();
    assert!(blocking.subscribe(inbox.sink()));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let async_inbox = Inbox::new();
    let subscribed_async = rt.block_on(async {
        let con = server
            .client()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let s = AsyncRedisStorage::builder(con)
            .subscriber(server.client(), PATIENT)
            .build()
            .unwrap();
        AsyncStorage::subscribe(&s, async_inbox.sink())
    });
    assert!(subscribed_async);
    assert!(subscribed(&inbox) && subscribed(&async_inbox));
    server.reset_stats();
    // Nothing is published for 15 s: both listeners ping once.
    assert!(
        eventually(Duration::from_secs(25), || server.calls_of("ping") >= 2),
        "{:?}",
        server.command_calls()
    );
    assert_eq!(server.pubsub_clients(), 2);
    storage(&server).close("still-there", TTL, None).unwrap();
    assert!(inbox.wait_for("still-there") && async_inbox.wait_for("still-there"));
    assert_eq!((inbox.resyncs(), async_inbox.resyncs()), (1, 1));
}

/// Every notice carries the record the write left (issue 21), so a
/// coordinator adopts it without reading it back: each equals what a read
/// right after that write returns.
#[test]
fn notices_carry_the_record_each_write_left() {
    let server = Server::start();
    let writer = storage(&server);
    let listener = storage(&server);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let handler: std::sync::Arc<interlock::storage::NoticeHandler> =
        std::sync::Arc::new(move |n: interlock::storage::Notice<'_>| {
            if let interlock::storage::Notice::Written { name, state } = n {
                log.lock().unwrap().push((name.to_owned(), state));
            }
        });
    assert!(listener.subscribe(interlock::storage::NoticeSink::new(&handler)));
    assert!(eventually(Duration::from_secs(5), || server
        .pubsub_clients()
        == 1));
    let n = "payments";
    let mut expect = vec![writer.trip_open(n, TTL, None).unwrap()];
    expect.push(
        writer
            .begin_half_open_if_elapsed(n, Duration::ZERO, 2, TTL)
            .unwrap(),
    );
    expect.push(writer.lease_probe(n, TTL).unwrap().state);
    expect.push(writer.record_probe(n, Outcome::SlowFailure, TTL).unwrap());
    let spent = writer.lease_probe(n, TTL).unwrap().state;
    expect.push(spent);
    expect.push(
        writer
            .restart_stalled_round(n, spent.version, 3, TTL)
            .unwrap(),
    );
    expect.push(writer.close(n, TTL, None).unwrap());
    let restored = interlock::storage::SharedState {
        state: interlock::State::Open,
        opened_at: expect[0].opened_at,
        version: 40,
        ..interlock::storage::SharedState::closed()
    };
    expect.push(writer.restore(n, expect[6].version, restored, TTL).unwrap());
    assert!(eventually(Duration::from_secs(5), || seen
        .lock()
        .unwrap()
        .len()
        == expect.len()));
    let got: Vec<_> = seen.lock().unwrap().iter().map(|(_, s)| *s).collect();
    assert_eq!(got, expect);
    assert!(seen.lock().unwrap().iter().all(|(name, _)| name == n));
}
