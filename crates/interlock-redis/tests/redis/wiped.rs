//! A server that loses its data while the fleet shares an OPEN: `FLUSHALL`
//! (an operator, or a restart without persistence) takes the record, the
//! change log and its index at once. No call may see an error, the fleet
//! must admit calls again once the dependency is healthy (liveness), and
//! the next trip must be shared as before.

use std::time::Duration;

use interlock::State;
use interlock::storage::Coordinator;

use crate::support::{Server, eventually};
use crate::{Instance, TTL, config, fail, ok, storage, the_fleet_shares_an_open};

const WAIT: Duration = Duration::from_millis(1500);
const POLL: Duration = Duration::from_millis(250);

fn fleet(server: &Server) -> Vec<Instance> {
    (0..3)
        .map(|_| {
            let storage = interlock_redis::RedisStorage::from_client(
                server.client(),
                Duration::from_millis(500),
            )
            .poll_interval(POLL)
            .retry_backoff(POLL)
            .state_ttl(TTL)
            .build()
            .unwrap();
            Instance::new(
                Coordinator::blocking(storage),
                config()
                    .wait_duration_in_open(WAIT)
                    .permitted_calls_in_half_open(1),
            )
        })
        .collect()
}

/// Trips `tripper` and waits until every instance shares the OPEN.
fn trip_and_share(server: &Server, fleet: &[Instance], tripper: usize, what: &str) {
    while fleet[tripper].breaker.state() == State::Closed {
        match fail(&fleet[tripper].breaker) {
            Err(interlock::CallError::Inner(e)) => assert_eq!(e.to_string(), "503", "{what}"),
            Err(interlock::CallError::Rejected(_)) => break,
            Ok(()) => panic!("{what}: a failing call succeeded"),
        }
    }
    let shared = storage(server);
    assert!(
        eventually(Duration::from_secs(20), || the_fleet_shares_an_open(
            &shared, fleet
        )),
        "{what}: the trip was never shared"
    );
}

/// Calls every instance, the dependency healthy, until all are CLOSED;
/// no call may see anything but admission or a rejection.
fn the_fleet_closes_again(fleet: &[Instance], what: &str) {
    let closed = eventually(WAIT + Duration::from_secs(20), || {
        for i in fleet {
            match ok(&i.breaker) {
                Ok(()) | Err(interlock::CallError::Rejected(_)) => {}
                Err(other) => panic!("{what}: a healthy call returned {other:?}"),
            }
        }
        fleet.iter().all(|i| i.breaker.state() == State::Closed)
    });
    assert!(closed, "{what}: the fleet never closed again");
}

#[test]
fn a_flushall_during_a_shared_open_leaves_a_fleet_that_closes_and_shares_the_next_trip() {
    let server = Server::start();
    let fleet = fleet(&server);
    assert!(eventually(Duration::from_secs(10), || fleet.iter().all(
        |i| i.lane.is_subscribed() && i.breaker.shared_view().is_some()
    )));
    trip_and_share(&server, &fleet, 0, "first trip");

    let () = redis::cmd("FLUSHALL").query(&mut server.admin()).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.admin())
        .unwrap();
    assert!(keys.is_empty(), "flushed: {keys:?}");

    the_fleet_closes_again(&fleet, "after FLUSHALL");
    assert!(
        fleet.iter().all(|i| !i.breaker.is_degraded()),
        "losing the data is not a storage fault"
    );
    // The log and its index start again: the next trip is shared too.
    trip_and_share(&server, &fleet, 1, "the trip after FLUSHALL");
    the_fleet_closes_again(&fleet, "after the second trip");
    for i in &fleet {
        i.breaker.close();
    }
}

/// The data lost while the fleet is HALF_OPEN with its one probe leased
/// and running: the probe's outcome then lands on no record, and the fleet
/// must still close (the lease is not leaked into a fleet that waits for a
/// round that can no longer end).
#[test]
fn a_flushall_while_a_leased_probe_runs_leaves_a_fleet_that_closes() {
    let server = Server::start();
    let fleet = fleet(&server);
    assert!(eventually(Duration::from_secs(10), || fleet.iter().all(
        |i| i.lane.is_subscribed() && i.breaker.shared_view().is_some()
    )));
    trip_and_share(&server, &fleet, 0, "the trip");
    let half_open = eventually(WAIT + Duration::from_secs(10), || {
        fleet.iter().all(|i| {
            i.breaker
                .shared_view()
                .is_some_and(|v| v.state == State::HalfOpen)
        })
    });
    assert!(half_open, "the fleet never shared HALF_OPEN");
    let probe = fleet[1]
        .breaker
        .acquire()
        .expect("the round's one probe is leased");
    assert!(
        fleet[2].breaker.acquire().is_err(),
        "the budget of one is spent"
    );

    let () = redis::cmd("FLUSHALL").query(&mut server.admin()).unwrap();
    probe.success();

    the_fleet_closes_again(&fleet, "after FLUSHALL under a leased probe");
    trip_and_share(&server, &fleet, 2, "the trip after FLUSHALL");
    the_fleet_closes_again(&fleet, "after the second trip");
    for i in &fleet {
        i.breaker.close();
    }
}
