//! A smoke test on a 3-node Redis Cluster started by the test.

use std::time::Duration;

use interlock::State;
use interlock::storage::contract::{RealTime, asynchronous, blocking, check_storage};
use interlock::storage::{AsyncStorage, PollRequest, SharedState, Storage};
use interlock_redis::{AsyncRedisStorage, RedisStorage};

use crate::TTL;
use crate::support::{Cluster, Inbox, eventually};

fn slot(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(con)
        .unwrap()
}

#[test]
fn both_storages_work_on_a_three_node_cluster() {
    let cluster = Cluster::start();
    let client = redis::cluster::ClusterClient::builder(cluster.urls())
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let time = RealTime::new(Duration::from_millis(100));

    // Default prefix: one hash tag, so every breaker lands in one slot,
    // whatever its name.
    let storage = RedisStorage::builder(client.get_connection().unwrap())
        .build()
        .unwrap();
    check_storage(&storage, &time);
    let mut admin = cluster.nodes[0].admin();
    let tag_slot = slot(&mut admin, "cb");
    for name in ["payments", "a}b", "{other}", "%7B", "x\r\n{y}"] {
        storage.close(name, TTL, None).unwrap();
        assert_eq!(slot(&mut admin, &storage.key(name)), tag_slot, "{name:?}");
    }

    // A prefix without a tag spreads breakers over the nodes; each script
    // still touches one key, so everything works.
    let spread = RedisStorage::builder(client.get_connection().unwrap())
        .key_prefix("spread:")
        .build()
        .unwrap();
    let slots: std::collections::HashSet<i64> = (0..20)
        .map(|i| slot(&mut admin, &spread.key(&format!("svc-{i}"))))
        .collect();
    assert!(slots.len() > 1);
    blocking::version_sequence(&spread, &time);
    blocking::concurrent_leases_respect_budget(&spread, &time);
    for i in 0..20 {
        let name = format!("svc-{i}");
        assert_eq!(spread.trip_open(&name, TTL, None).unwrap().version, 1);
        assert_eq!(spread.read(&name).unwrap().unwrap().state, State::Open);
    }

    // Batched polls: one script over the tagged keys; over the spread
    // ones the cluster refuses it (CROSSSLOT) and the storage answers per
    // key, the same views either way.
    let names: Vec<String> = (0..20).map(|i| format!("svc-{i}")).collect();
    let reqs: Vec<PollRequest<'_>> = names
        .iter()
        .map(|name| PollRequest::Read { name })
        .collect();
    for name in names.iter().step_by(2) {
        storage.trip_open(name, TTL, None).unwrap();
    }
    for s in [&storage, &spread] {
        for _ in 0..2 {
            let answers = s.poll_many(&reqs).unwrap();
            for (name, answer) in names.iter().zip(answers) {
                let expect = s.read(name).unwrap().unwrap_or_else(SharedState::closed);
                assert_eq!(answer.unwrap(), expect, "{name}");
            }
        }
    }

    // The interlock-cb layout: the original's untagged prefix and verbatim
    // names spread the keys over the nodes (a name's own `{tag}` chooses
    // its slot); every script touches one key, and a batched poll falls
    // back to one call per key.
    let original = RedisStorage::builder(client.get_connection().unwrap())
        .layout(interlock_redis::Layout::InterlockCb)
        .build()
        .unwrap();
    blocking::version_sequence(&original, &time);
    blocking::concurrent_leases_respect_budget(&original, &time);
    assert_eq!(
        slot(&mut admin, &original.key("a {cb} b")),
        tag_slot,
        "the name's own hash tag"
    );
    for name in names.iter().step_by(3) {
        original.trip_open(name, TTL, None).unwrap();
    }
    for _ in 0..2 {
        let answers = original.poll_many(&reqs).unwrap();
        for (name, answer) in names.iter().zip(answers) {
            let expect = original
                .read(name)
                .unwrap()
                .unwrap_or_else(SharedState::closed);
            assert_eq!(answer.unwrap(), expect, "{name}");
        }
    }

    // Notices: published on the node that owns the key, delivered to a
    // subscriber on any node.
    let inbox = Inbox::new();
    let listener = RedisStorage::builder(client.get_connection().unwrap())
        .subscriber(cluster.nodes[0].client(), Duration::from_secs(1))
        .build()
        .unwrap();
    let spread_listener = RedisStorage::builder(client.get_connection().unwrap())
        .key_prefix("spread:")
        .subscriber(cluster.nodes[0].client(), Duration::from_secs(1))
        .build()
        .unwrap();
    assert!(listener.subscribe(inbox.sink()));
    assert!(spread_listener.subscribe(inbox.sink()));
    assert!(eventually(Duration::from_secs(5), || inbox.resyncs() == 2));
    storage.close("pushed", TTL, None).unwrap();
    for i in 0..20 {
        spread.close(&format!("svc-{i}"), TTL, None).unwrap();
    }
    // The cluster bus may still carry notices published before the
    // subscriptions (the trips above): only the expected ones are checked.
    let mut expect: Vec<(String, u64)> = (0..20).map(|i| (format!("svc-{i}"), 2)).collect();
    expect.push(("pushed".to_owned(), 1));
    assert!(
        eventually(Duration::from_secs(10), || {
            let got = inbox.changes();
            expect.iter().all(|e| got.contains(e))
        }),
        "{:?}",
        inbox.all()
    );

    // The async cluster connection.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let con = client.get_async_connection().await.unwrap();
        let storage = AsyncRedisStorage::builder(con.clone()).build().unwrap();
        asynchronous::version_sequence(&storage, &time).await;
        asynchronous::concurrent_leases_respect_budget(&storage, &time).await;
        let v = AsyncStorage::trip_open(&storage, "payments-async", TTL, None)
            .await
            .unwrap();
        assert_eq!((v.state, v.version), (State::Open, 1));
        let spread = AsyncRedisStorage::builder(con)
            .key_prefix("spread:")
            .build()
            .unwrap();
        for s in [&storage, &spread] {
            let answers = AsyncStorage::poll_many(s, &reqs).await.unwrap();
            for (name, answer) in names.iter().zip(answers) {
                let expect = AsyncStorage::read(s, name)
                    .await
                    .unwrap()
                    .unwrap_or_else(SharedState::closed);
                assert_eq!(answer.unwrap(), expect, "{name}");
            }
        }
    });
}

#[test]
fn partitions_of_one_service_land_in_different_slots_and_poll_changes_there() {
    let cluster = Cluster::start();
    let client = redis::cluster::ClusterClient::builder(cluster.urls())
        .connection_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let mut admin = cluster.nodes[0].admin();
    let parts = 6;
    let storages: Vec<RedisStorage<redis::cluster::ClusterConnection>> = (0..parts)
        .map(|p| {
            RedisStorage::builder(client.get_connection().unwrap())
                .key_prefix(format!("interlock:{{checkout-{p}}}:"))
                .notifications(false)
                .build()
                .unwrap()
        })
        .collect();
    let slots: std::collections::HashSet<i64> = storages
        .iter()
        .map(|s| slot(&mut admin, &s.key("x")))
        .collect();
    assert_eq!(slots.len(), parts, "one slot per partition");
    let lanes: Vec<_> = storages
        .into_iter()
        .map(interlock::storage::Coordinator::manual)
        .collect();
    let names: Vec<String> = (0..60).map(|i| format!("host-{i}.example")).collect();
    let breakers: Vec<_> = names
        .iter()
        .map(|n| {
            interlock::CircuitBreaker::builder(n.as_str())
                .coordinator(&lanes[interlock_redis::partition(n, parts)])
                .build()
                .unwrap()
        })
        .collect();
    let used: std::collections::HashSet<usize> = names
        .iter()
        .map(|n| interlock_redis::partition(n, parts))
        .collect();
    assert!(used.len() > 1, "the names spread over the partitions");
    for lane in &lanes {
        lane.poll();
        lane.poll();
    }
    // A trip written by another instance into its partition's storage is
    // seen by that partition's change poll.
    let target = &names[17];
    let p = interlock_redis::partition(target, parts);
    let writer = RedisStorage::builder(client.get_connection().unwrap())
        .key_prefix(format!("interlock:{{checkout-{p}}}:"))
        .build()
        .unwrap();
    writer.trip_open(target, TTL, None).unwrap();
    for lane in &lanes {
        lane.poll();
    }
    for (name, b) in names.iter().zip(&breakers) {
        let open = b.shared_view().is_some_and(|v| v.state == State::Open);
        assert_eq!(open, name == target, "{name}");
    }
}
