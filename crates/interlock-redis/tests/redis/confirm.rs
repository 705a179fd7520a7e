//! The change poll's short form (issue 29, R16.15): a poll whose change
//! notices brought every write since its cursor asks the server only to
//! confirm (`confirm`, no `changes` script over the vouched keys); a write
//! without a notice, a lost notice or a re-established subscription falls
//! back to `changes`, so nothing is missed (R15.11) and a breaker still
//! leaves OPEN and HALF_OPEN when the change reaches it that way.

use std::time::Duration;

use interlock::CircuitBreaker;
use interlock::State;
use interlock::mode::Blocking;
use interlock::storage::{AsyncStorage, Coordinator, PollRequest, Storage};
use interlock_redis::AsyncRedisStorage;

use crate::support::{Inbox, Server, eventually};
use crate::{TTL, await_subscription, hosts, storage, storage_builder};

/// `n` breakers `host-<i>` on one manual coordinator whose storage
/// subscribes to the change notices.
fn subscribed(server: &Server, n: usize) -> (Coordinator<Blocking>, Vec<CircuitBreaker<Blocking>>) {
    let lane = Coordinator::manual(storage_builder(server).build().unwrap());
    let breakers = hosts(&lane, n);
    await_subscription(server);
    (lane, breakers)
}

/// The scripts one `poll` ran, by name (`confirm`, `changes`, `other`),
/// from the server's slow log with every command logged.
fn scripts_run(server: &Server, poll: impl FnOnce()) -> Vec<&'static str> {
    log_every_command(server);
    poll();
    scripts_logged(server)
}

/// Logs every command from now on, in a fresh slow log.
fn log_every_command(server: &Server) {
    let mut admin = server.admin();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
}

/// The scripts run since [`log_every_command`], by name.
fn scripts_logged(server: &Server) -> Vec<&'static str> {
    let mut admin = server.admin();
    let log: redis::Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1000)
        .query(&mut admin)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(-1)
        .query(&mut admin)
        .unwrap();
    let digests = interlock_redis::script_digests();
    let redis::Value::Array(entries) = log else {
        panic!("SLOWLOG GET: {log:?}")
    };
    let mut run = Vec::new();
    // Newest first.
    for entry in entries.iter().rev() {
        let redis::Value::Array(fields) = entry else {
            continue;
        };
        let Some(redis::Value::Array(args)) = fields.get(3) else {
            continue;
        };
        let text = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).to_lowercase(),
            _ => String::new(),
        };
        if args.first().map(text).as_deref() != Some("evalsha") {
            continue;
        }
        let sha = args.get(1).map(text).unwrap_or_default();
        run.push(if sha == digests[10] {
            "confirm"
        } else if sha == digests[9] {
            "changes"
        } else {
            "other"
        });
    }
    run
}

fn version_of(b: &CircuitBreaker<Blocking>) -> Option<u64> {
    b.shared_view().map(|s| s.version)
}

#[test]
fn r16_15_a_poll_whose_notices_brought_every_write_is_confirmed_not_polled() {
    let server = Server::start();
    let (lane, breakers) = subscribed(&server, 50);
    // The first poll reads everything; the second loads `confirm` (a
    // script's first EVALSHA answers NOSCRIPT).
    lane.poll();
    lane.poll();
    // Once the listener counts its subscription live, an idle poll is
    // confirmed alone.
    let idle = eventually(Duration::from_secs(10), || {
        let run = scripts_run(&server, || lane.poll());
        assert!(run == ["confirm"] || run == ["changes"], "{run:?}");
        run == ["confirm"]
    });
    assert!(idle, "idle");
    let other = storage(&server);
    // Whether a write's epoch message is in before the poll or not (then
    // the server does not confirm and `changes` answers), every view is
    // the storage's after it; at least one poll is confirmed alone.
    let mut confirmed = 0;
    let done = eventually(Duration::from_secs(20), || {
        let mut last = Vec::new();
        for i in [3, 30, 33] {
            last.push(other.trip_open(&format!("host-{i}"), TTL, None).unwrap());
            last.push(other.close(&format!("host-{i}"), TTL, None).unwrap());
        }
        let arrived = eventually(Duration::from_secs(10), || {
            [3, 30, 33]
                .iter()
                .zip(last.chunks(2))
                .all(|(&i, w)| version_of(&breakers[i]) == Some(w[1].version))
        });
        assert!(arrived, "the notices arrive");
        server.reset_stats();
        let run = scripts_run(&server, || lane.poll());
        assert_eq!(server.calls_of("hmget"), 0, "nothing read: {run:?}");
        for (&i, w) in [3, 30, 33].iter().zip(last.chunks(2)) {
            assert_eq!(version_of(&breakers[i]), Some(w[1].version), "host-{i}");
        }
        assert!(
            run == ["confirm"] || run == ["changes"] || run == ["confirm", "changes"],
            "{run:?}"
        );
        if run == ["confirm"] {
            confirmed += 1;
        }
        confirmed > 0
    });
    assert!(done, "a poll after noticed writes is confirmed alone");
}

#[test]
fn r15_11_a_write_without_a_notice_is_found_and_the_breaker_leaves_open_and_half_open() {
    let server = Server::start();
    let (lane, breakers) = subscribed(&server, 10);
    lane.poll();
    lane.poll();
    let noticed = storage(&server);
    // An instance with notices off: its writes take epochs, publish nothing.
    let silent = storage_builder(&server)
        .notifications(false)
        .build()
        .unwrap();
    let open = noticed.trip_open("host-1", TTL, None).unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        version_of(&breakers[1]) == Some(open.version)
    }));
    lane.poll();
    assert_eq!(breakers[1].state(), State::Open);
    // HALF_OPEN without a notice, then a noticed write after it: the
    // trail has a gap, so the poll goes to `changes` and finds both.
    let half = silent
        .begin_half_open_if_elapsed("host-1", Duration::ZERO, 2, TTL)
        .unwrap();
    assert_eq!(half.state, State::HalfOpen);
    let four = noticed.trip_open("host-4", TTL, None).unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        version_of(&breakers[4]) == Some(four.version)
    }));
    let run = scripts_run(&server, || lane.poll());
    assert!(run.contains(&"changes"), "{run:?}");
    assert_eq!(version_of(&breakers[1]), Some(half.version));
    assert_eq!(breakers[1].state(), State::HalfOpen, "leaves OPEN");
    // Closed without a notice, nothing else written: the poll's epoch is
    // behind the server's top, which the server does not confirm.
    let closed = silent.close("host-1", TTL, None).unwrap();
    let run = scripts_run(&server, || lane.poll());
    assert!(run.contains(&"changes"), "{run:?}");
    assert_eq!(version_of(&breakers[1]), Some(closed.version));
    assert_eq!(breakers[1].state(), State::Closed, "leaves HALF_OPEN");
    assert_eq!(
        scripts_run(&server, || lane.poll()),
        ["confirm"],
        "idle again"
    );
}

#[test]
fn r15_11_writes_while_the_subscription_was_down_are_found_by_the_next_polls() {
    let server = Server::start();
    let (lane, breakers) = subscribed(&server, 10);
    lane.poll();
    let other = storage(&server);
    assert!(server.kill_pubsub_clients() >= 1);
    // Written while (perhaps) no subscription listens: its notice may be
    // lost; the trail starts afresh with the new subscription.
    let open = other.trip_open("host-2", TTL, None).unwrap();
    assert!(
        eventually(Duration::from_secs(20), || {
            lane.poll();
            version_of(&breakers[2]) == Some(open.version)
        }),
        "found by a poll"
    );
    assert_eq!(breakers[2].state(), State::Open);
    assert!(eventually(Duration::from_secs(20), || server
        .pubsub_clients()
        == 1));
    let closed = other.close("host-2", TTL, None).unwrap();
    assert!(
        eventually(Duration::from_secs(20), || {
            lane.poll();
            version_of(&breakers[2]) == Some(closed.version)
        }),
        "leaves OPEN"
    );
    assert_eq!(breakers[2].state(), State::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r16_15_the_async_storage_confirms_a_poll_its_notices_covered() {
    let server = Server::start();
    let con = server.client().get_connection_manager().await.unwrap();
    let s = AsyncRedisStorage::builder(con)
        .subscriber(server.client(), Duration::from_millis(500))
        .build()
        .unwrap();
    let inbox = Inbox::new();
    assert!(AsyncStorage::subscribe(&s, inbox.sink()));
    let deadline = crate::support::now().saturating_add(Duration::from_secs(10));
    while inbox.resyncs() == 0 && crate::support::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(inbox.resyncs(), 1, "subscribed");
    let first = AsyncStorage::poll_changes(&s, None, &[PollRequest::Read { name: "a" }])
        .await
        .unwrap();
    let epoch = first.epoch.unwrap();
    let open = storage(&server).trip_open("a", TTL, None).unwrap();
    let asked = [PollRequest::ReadUnlessAt {
        name: "a",
        version: open.version,
    }];
    // Until the write's epoch message is in, `changes` vouches; then
    // `confirm` alone does. Either way the view is vouched for.
    let mut run = Vec::new();
    while crate::support::now() < deadline {
        log_every_command(&server);
        let poll = AsyncStorage::poll_changes(&s, Some(epoch), &asked)
            .await
            .unwrap();
        run = scripts_logged(&server);
        assert_eq!(poll.unanswered(), 1, "vouched for: {run:?}");
        assert_eq!(poll.epoch.unwrap().counter, epoch.counter + 1);
        if run == ["confirm"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(run, ["confirm"]);
    // A stale version is not confirmed: `changes` reads it.
    let stale = [PollRequest::ReadUnlessAt {
        name: "a",
        version: 0,
    }];
    log_every_command(&server);
    let poll = AsyncStorage::poll_changes(&s, Some(epoch), &stale)
        .await
        .unwrap();
    assert_eq!(scripts_logged(&server), ["changes"]);
    let read = poll.answers[0].as_ref().unwrap().as_ref().unwrap();
    assert_eq!(read.version, open.version);
}
