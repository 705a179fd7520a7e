//! Push and batching end to end: coordinated breakers of several simulated
//! instances, each with its own storage, connections and subscription.

use std::time::Duration;

use interlock::storage::{Coordinator, Storage};
use interlock::{CircuitBreaker, State};
use interlock_redis::AsyncRedisStorage;

use crate::support::{Server, eventually, now, spend_trip_budget};
use crate::{Instance, config, ok, storage_builder};

/// Long enough that no poll after the first can happen during a test.
const NEVER: Duration = Duration::from_secs(3600);

#[test]
fn a_trip_reaches_the_other_instances_without_waiting_for_a_poll() {
    let server = Server::start();
    let fleet: Vec<Instance> = (0..3)
        .map(|_| {
            let storage = storage_builder(&server)
                .poll_interval(NEVER)
                .build()
                .unwrap();
            Instance::new(Coordinator::blocking(storage), config())
        })
        .collect();
    assert!(fleet.iter().all(|i| i.lane.is_subscribed()));
    assert!(
        eventually(Duration::from_secs(5), || server.pubsub_clients() == 3),
        "three subscriptions, one per instance"
    );
    fleet[0].trip_locally();
    let rejected = eventually(Duration::from_secs(5), || {
        fleet[1..]
            .iter()
            .all(|i| ok(&i.breaker).is_err_and(|e| e.is_rejected()))
    });
    assert!(
        rejected,
        "the trip never reached the others: no poll is due for an hour"
    );
    for i in &fleet {
        assert_eq!(i.breaker.state(), State::Open);
        assert_eq!(i.events.count("degraded"), 0, "{:?}", i.events.all());
    }
    // Recovery is pushed too: an operator closes the shared breaker.
    crate::storage(&server)
        .close("payments", crate::TTL, None)
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || fleet
        .iter()
        .all(|i| i.breaker.state() == State::Closed)));
    for i in &fleet {
        i.breaker.close();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_trip_reaches_the_other_async_instances_without_waiting_for_a_poll() {
    let server = Server::start();
    let mut fleet = Vec::new();
    for _ in 0..3 {
        let con = server.client().get_connection_manager().await.unwrap();
        let storage = AsyncRedisStorage::builder(con)
            .subscriber(server.client(), Duration::from_millis(500))
            .poll_interval(NEVER)
            .build()
            .unwrap();
        let lane = Coordinator::asynchronous(storage);
        let breaker = CircuitBreaker::builder("payments")
            .config(config().build().unwrap())
            .coordinator(&lane)
            .build()
            .unwrap();
        assert!(lane.is_subscribed());
        fleet.push((lane, breaker));
    }
    let deadline = now().saturating_add(Duration::from_secs(5));
    while server.pubsub_clients() < 3 && now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(server.pubsub_clients(), 3);
    let a = &fleet[0].1;
    let mut spent = 0;
    while a.state() == State::Closed {
        spend_trip_budget(&mut spent);
        let _ = a
            .call_async(|| async { Err::<(), _>(std::io::Error::other("503")) })
            .await;
    }
    let deadline = now().saturating_add(Duration::from_secs(5));
    while fleet[1..].iter().any(|(_, b)| b.state() != State::Open) && now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for (_, b) in &fleet[1..] {
        assert_eq!(b.state(), State::Open);
        let rejected = b.call_async(|| async { Ok::<_, std::io::Error>(()) }).await;
        assert!(rejected.unwrap_err().is_rejected());
    }
    for (_, breaker) in &fleet {
        breaker.close_async().await;
    }
}

#[test]
fn a_lost_notice_is_reconciled_by_the_next_poll_and_the_subscription_comes_back() {
    const POLL: Duration = Duration::from_millis(200);
    // Far longer than a poll: the subscription stays down while B polls.
    const RETRY: Duration = Duration::from_secs(5);
    let server = Server::start();
    let make = || {
        let storage = storage_builder(&server)
            .poll_interval(POLL)
            .retry_backoff(RETRY)
            .build()
            .unwrap();
        Instance::new(Coordinator::blocking(storage), config())
    };
    let (a, b) = (make(), make());
    assert!(eventually(Duration::from_secs(5), || server
        .pubsub_clients()
        == 2));
    assert_eq!(server.kill_pubsub_clients(), 2);
    assert_eq!(server.pubsub_clients(), 0);
    a.trip_locally(); // its notice reaches nobody
    assert!(
        eventually(Duration::from_secs(5), || b.breaker.state() == State::Open),
        "B never polled the OPEN"
    );
    assert!(ok(&b.breaker).unwrap_err().is_rejected());
    assert!(
        server.pubsub_clients() < 2,
        "B must have learnt it from a poll, not from a new subscription"
    );
    assert!(
        eventually(RETRY * 3, || server.pubsub_clients() == 2),
        "the subscriptions never came back"
    );
    assert_eq!(
        b.events.count("degraded"),
        0,
        "a lost subscription is no outage"
    );
    a.breaker.close();
    b.breaker.close();
}

#[test]
fn with_notifications_off_no_subscription_is_held_and_polling_still_propagates() {
    const POLL: Duration = Duration::from_millis(100);
    let server = Server::start();
    let make = || {
        let storage = storage_builder(&server)
            .poll_interval(POLL)
            .notifications(false)
            .build()
            .unwrap();
        Instance::new(Coordinator::blocking(storage), config())
    };
    let (a, b) = (make(), make());
    assert!(!a.lane.is_subscribed() && !b.lane.is_subscribed());
    server.reset_stats();
    a.trip_locally();
    assert!(eventually(Duration::from_secs(5), || b.breaker.state() == State::Open));
    assert_eq!(server.pubsub_clients(), 0, "no subscription");
    assert_eq!(server.calls_of("publish"), 0, "nothing published");
    assert_eq!(server.calls_of("subscribe"), 0);
    a.breaker.close();
    b.breaker.close();
}

/// A hundred breakers on one manual coordinator, polled once to open the
/// connection and load the scripts; returns the commands of the next poll.
fn commands_of_one_poll(server: &Server, batched: bool) -> Vec<(String, u64)> {
    let storage = storage_builder(server)
        .batched_polling(batched)
        .notifications(false)
        .build()
        .unwrap();
    let lane = Coordinator::manual(storage);
    let breakers: Vec<_> = (0..100)
        .map(|i| {
            CircuitBreaker::builder(format!("svc-{i}"))
                .coordinator(&lane)
                .build()
                .unwrap()
        })
        .collect();
    lane.poll();
    assert!(breakers.iter().all(|b| b.shared_view().is_some()));
    server.reset_stats();
    lane.poll();
    assert!(breakers.iter().all(|b| !b.is_degraded()));
    server.client_commands()
}

#[test]
fn a_coordinator_polls_a_hundred_breakers_in_one_evalsha() {
    let server = Server::start();
    assert_eq!(
        commands_of_one_poll(&server, true),
        [("evalsha".to_owned(), 1)]
    );
    assert_eq!(
        commands_of_one_poll(&server, false),
        [("evalsha".to_owned(), 100)]
    );
}
