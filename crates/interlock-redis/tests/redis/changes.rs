//! The change index (issue 29, R16.15, R17.12) on a real server: an idle
//! poll reads no breaker hash, a poll after changes reads only those, an
//! expiry counts as a change, a lost or unknown history is read in full,
//! and the layouts and prefixes that cannot keep the index do not.

use std::time::Duration;

use interlock::State;
use interlock::mode::{Async, Blocking};
use interlock::storage::{Coordinator, Epoch, PollRequest, Storage};
use interlock::{CircuitBreaker, Timestamp};
use interlock_redis::{AsyncRedisStorage, Layout, RedisStorage};

use crate::support::{Server, eventually};
use crate::{TTL, await_subscription, config, hosts, storage, storage_builder};

/// `n` breakers `host-<i>` on one manual coordinator over a storage of
/// its own (notices off: only polls move views).
fn fleet(server: &Server, n: usize) -> (Coordinator<Blocking>, Vec<CircuitBreaker<Blocking>>) {
    let s = storage_builder(server)
        .notifications(false)
        .build()
        .unwrap();
    let lane = Coordinator::manual(s);
    let breakers = hosts(&lane, n);
    (lane, breakers)
}

/// The breaker hashes a poll read: `HMGET` runs once per hash read.
fn hashes_read_by(server: &Server, poll: impl FnOnce()) -> u64 {
    server.reset_stats();
    poll();
    server.calls_of("hmget")
}

#[test]
fn r17_12_an_idle_poll_reads_no_hash_and_a_poll_after_changes_reads_only_those() {
    let server = Server::start();
    let (lane, breakers) = fleet(&server, 1000);
    assert_eq!(hashes_read_by(&server, || lane.poll()), 1000, "first: full");
    for _ in 0..3 {
        assert_eq!(hashes_read_by(&server, || lane.poll()), 0, "idle");
        assert_eq!(server.calls_of("evalsha"), 1, "one script per poll");
    }
    // Another instance trips three breakers.
    let other = storage(&server);
    for i in [5, 500, 999] {
        other.trip_open(&format!("host-{i}"), TTL, None).unwrap();
    }
    assert_eq!(hashes_read_by(&server, || lane.poll()), 3);
    for (i, b) in breakers.iter().enumerate() {
        let open = b.shared_view().is_some_and(|v| v.state == State::Open);
        assert_eq!(open, [5, 500, 999].contains(&i), "host-{i}");
    }
    // The three OPEN views' wait is far off: no begin (R17.13), and
    // nothing changed, so nothing read.
    assert_eq!(hashes_read_by(&server, || lane.poll()), 0);
}

#[test]
fn r17_12_views_from_notices_are_vouched_for_not_read() {
    let server = Server::start();
    let s = storage_builder(&server).build().unwrap();
    let lane = Coordinator::manual(s);
    let breakers = hosts(&lane, 1000);
    await_subscription(&server);
    assert_eq!(hashes_read_by(&server, || lane.poll()), 1000, "first: full");
    assert_eq!(hashes_read_by(&server, || lane.poll()), 0, "idle");
    // Another instance trips three breakers and closes one of them; the
    // notices bring every write.
    let other = storage(&server);
    let mut last = Vec::new();
    for i in [5, 500, 999] {
        last.push(other.trip_open(&format!("host-{i}"), TTL, None).unwrap());
    }
    last[2] = other.close("host-999", TTL, None).unwrap();
    let arrived = eventually(Duration::from_secs(10), || {
        [5, 500, 999]
            .iter()
            .zip(&last)
            .all(|(&i, v)| breakers[i].shared_view().map(|s| s.version) == Some(v.version))
    });
    assert!(arrived, "the notices arrive");
    // The poll asks the script to vouch for the three versions: each is its
    // record's last write since the epoch, so no hash is read.
    assert_eq!(hashes_read_by(&server, || lane.poll()), 0, "vouched for");
    assert_eq!(server.calls_of("evalsha"), 1, "one script per poll");
    // From a poll's vouching on, they are skipped like any unchanged one.
    assert_eq!(hashes_read_by(&server, || lane.poll()), 0, "idle again");
    // Two more writes: whether their notices arrive before the poll (then
    // vouched for) or not (then read), host-7 is current after it.
    other.trip_open("host-7", TTL, None).unwrap();
    other.close("host-7", TTL, None).unwrap();
    let read = hashes_read_by(&server, || lane.poll());
    assert!(read <= 1, "at most host-7 is read: {read}");
    assert_eq!(
        breakers[7].shared_view().map(|s| s.version),
        Some(2),
        "host-7 current after the poll"
    );
}

#[test]
fn r16_15_a_log_member_of_another_format_makes_the_answer_full() {
    let server = Server::start();
    let s = storage(&server);
    let names: Vec<String> = (0..5).map(|i| format!("svc-{i}")).collect();
    let mut versions = Vec::new();
    for name in &names {
        versions.push(s.close(name, TTL, None).unwrap().version);
    }
    let first = s
        .poll_changes(None, &[PollRequest::Read { name: &names[0] }])
        .unwrap();
    let epoch = first.epoch.unwrap();
    let v = s.trip_open(&names[1], TTL, None).unwrap().version;
    // A writer of another release logs `epoch:time:key`, without the
    // version: the script cannot vouch for anything, nor tell which key.
    let _: () = redis::cmd("ZADD")
        .arg("interlock:{cb}:%changes")
        .arg(epoch.counter + 2)
        .arg(format!("{}:1:interlock:{{cb}}:svc-2", epoch.counter + 2))
        .query(&mut server.admin())
        .unwrap();
    let requests = [
        PollRequest::ReadUnlessAt {
            name: &names[1],
            version: v,
        },
        PollRequest::ReadIfChanged { name: &names[2] },
        PollRequest::ReadIfChanged { name: &names[3] },
    ];
    let poll = s.poll_changes(Some(epoch), &requests).unwrap();
    assert_eq!(poll.unanswered(), 0, "a full answer: every request read");
    let got: Vec<u64> = poll
        .answers
        .into_iter()
        .map(|a| a.unwrap().unwrap().version)
        .collect();
    assert_eq!(got, [v, versions[2], versions[3]]);
}

#[test]
fn r16_15_a_change_poll_from_an_epoch_answers_what_changed_and_says_so() {
    let server = Server::start();
    let s = storage(&server);
    let names: Vec<String> = (0..20).map(|i| format!("svc-{i}")).collect();
    for name in &names {
        s.close(name, TTL, None).unwrap();
    }
    let ifs: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::ReadIfChanged { name })
        .collect();
    let first = s.poll_changes(None, &ifs).unwrap();
    assert_eq!(first.unanswered(), 0);
    let epoch = first.epoch.expect("the default storage keeps the index");
    assert_eq!(epoch.counter, 20, "one epoch per applied write");
    let idle = s.poll_changes(Some(epoch), &ifs).unwrap();
    assert_eq!(idle.unanswered(), 20);
    assert_eq!(
        idle.epoch,
        Some(Epoch {
            at: idle.epoch.unwrap().at,
            ..epoch
        })
    );

    s.trip_open("svc-3", TTL, None).unwrap();
    s.trip_open("svc-3", TTL, None).unwrap(); // already OPEN: no change
    let after = s.poll_changes(Some(epoch), &ifs).unwrap();
    assert_eq!(after.unanswered(), 19);
    let three = after.answers[3].as_ref().unwrap().as_ref().unwrap();
    assert_eq!((three.state, three.version), (State::Open, 2));
    assert_eq!(after.epoch.unwrap().counter, 21);

    // A cursor of another history (same counter, another mark), from the
    // future, or too old for the expiry index: a full answer.
    let next = after.epoch.unwrap();
    for stranger in [
        Epoch {
            mark: next.mark + 1,
            ..next
        },
        Epoch {
            counter: next.counter + 5,
            ..next
        },
        Epoch {
            at: Timestamp::from_secs(1),
            ..next
        },
    ] {
        let full = s.poll_changes(Some(stranger), &ifs).unwrap();
        assert_eq!(full.unanswered(), 0, "{stranger:?}");
    }
    // The log lost (deleted, expired, a server restarted empty): its epoch
    // starts again below the cursor, and the answer is full.
    let _: () = redis::cmd("DEL")
        .arg("interlock:{cb}:%changes")
        .query(&mut server.admin())
        .unwrap();
    let full = s.poll_changes(Some(next), &ifs).unwrap();
    assert_eq!(full.unanswered(), 0);
    assert_eq!(full.epoch.unwrap().counter, 1, "a new history begins");
}

#[test]
fn r16_15_more_changes_than_one_script_reads_is_a_full_answer() {
    let server = Server::start();
    let s = storage(&server);
    let names: Vec<String> = (0..1200).map(|i| format!("svc-{i}")).collect();
    let ifs: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::ReadIfChanged { name })
        .collect();
    let epoch = s.poll_changes(None, &ifs).unwrap().epoch;
    for name in &names[..1001] {
        s.close(name, TTL, None).unwrap();
    }
    server.reset_stats();
    let poll = s.poll_changes(epoch, &ifs).unwrap();
    assert_eq!(poll.unanswered(), 0);
    assert_eq!(server.calls_of("evalsha"), 3, "the index, then 1000 + 200");
    for (name, answer) in names.iter().zip(&poll.answers) {
        let want = s
            .read(name)
            .unwrap()
            .unwrap_or_else(interlock::storage::SharedState::closed);
        assert_eq!(*answer.as_ref().unwrap().as_ref().unwrap(), want, "{name}");
    }
}

#[test]
fn r17_12_with_r15_11_an_expired_hash_is_read_and_repaired_without_a_full_poll() {
    let server = Server::start();
    let s = storage_builder(&server)
        .notifications(false)
        .state_ttl(Duration::from_millis(1500))
        .build()
        .unwrap();
    let lane = Coordinator::manual(s);
    let b = CircuitBreaker::builder("payments")
        .config(config().build().unwrap())
        .coordinator(&lane)
        .build()
        .unwrap();
    let _others: Vec<_> = (0..50)
        .map(|i| {
            CircuitBreaker::builder(format!("idle-{i}"))
                .coordinator(&lane)
                .build()
                .unwrap()
        })
        .collect();
    storage(&server)
        .close("payments", Duration::from_millis(1500), None)
        .unwrap();
    lane.poll();
    assert_eq!(b.shared_view().map(|v| v.version), Some(1));
    assert_eq!(hashes_read_by(&server, || lane.poll()), 0);
    // Wait (with a deadline) until the server expired the hash.
    let mut admin = server.admin();
    assert!(crate::support::eventually(Duration::from_secs(10), || {
        !redis::cmd("EXISTS")
            .arg("interlock:{cb}:payments")
            .query::<bool>(&mut admin)
            .unwrap()
    }));
    assert_eq!(
        hashes_read_by(&server, || lane.poll()),
        1,
        "the expired one"
    );
    lane.run_writes(); // the repair R15.11 queued
    let repaired = storage(&server).read("payments").unwrap().unwrap();
    assert_eq!((repaired.state, repaired.version), (State::Closed, 2));
}

#[test]
fn the_original_layout_untagged_prefixes_and_change_index_off_keep_no_index() {
    let server = Server::start();
    let storages = [
        storage_builder(&server)
            .layout(Layout::InterlockCb)
            .build()
            .unwrap(),
        storage_builder(&server)
            .key_prefix("untagged:")
            .build()
            .unwrap(),
        storage_builder(&server)
            .change_index(false)
            .build()
            .unwrap(),
    ];
    for s in &storages {
        s.close("db", TTL, None).unwrap();
        let reqs = [
            PollRequest::ReadIfChanged { name: "db" },
            PollRequest::Read { name: "cache" },
        ];
        let poll = s.poll_changes(None, &reqs).unwrap();
        assert_eq!(poll.epoch, None, "{:?}", s.layout());
        let again = s.poll_changes(None, &reqs).unwrap();
        assert_eq!(again.unanswered(), 0);
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*%*")
        .query(&mut server.admin())
        .unwrap();
    assert_eq!(keys, Vec::<String>::new(), "no index key anywhere");
}

#[tokio::test]
async fn r17_12_an_async_coordinator_polls_changes_too() {
    let server = Server::start();
    let con = server
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let s = AsyncRedisStorage::builder(con)
        .notifications(false)
        .build()
        .unwrap();
    let lane: Coordinator<Async> = Coordinator::manual_async(s);
    let breakers: Vec<_> = (0..200)
        .map(|i| {
            CircuitBreaker::builder(format!("host-{i}"))
                .config(config().build().unwrap())
                .coordinator(&lane)
                .build()
                .unwrap()
        })
        .collect();
    lane.poll().await;
    server.reset_stats();
    lane.poll().await;
    assert_eq!(server.calls_of("hmget"), 0, "idle");
    storage(&server).trip_open("host-7", TTL, None).unwrap();
    server.reset_stats();
    lane.poll().await;
    assert_eq!(server.calls_of("hmget"), 1);
    assert_eq!(
        breakers[7].shared_view().map(|v| v.state),
        Some(State::Open)
    );
}

/// `RedisStorage` over one fixed connection goes through the index too.
#[test]
fn a_storage_over_one_fixed_connection_polls_changes() {
    let server = Server::start();
    let s = RedisStorage::builder(server.admin()).build().unwrap();
    s.close("db", TTL, None).unwrap();
    let reqs = [PollRequest::ReadIfChanged { name: "db" }];
    let epoch = s.poll_changes(None, &reqs).unwrap().epoch;
    assert!(epoch.is_some());
    assert_eq!(s.poll_changes(epoch, &reqs).unwrap().unanswered(), 1);
}
