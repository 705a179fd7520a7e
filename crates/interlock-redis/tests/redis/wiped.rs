//! A server that loses its data while the fleet shares an OPEN: `FLUSHALL`
//! (an operator, or a restart without persistence) takes the record, the
//! change log and its index at once. No call may see an error, the fleet
//! must admit calls again once the dependency is healthy (liveness), and
//! the next trip must be shared as before.

use std::time::Duration;

use interlock::State;

use crate::refused::{
    WAIT, await_the_fleet, fleet, the_fleet_admits_again, the_fleet_closes_again,
};
use crate::support::{Server, eventually, spend_trip_budget};
use crate::{Instance, fail, storage, the_fleet_shares_an_open};

/// Fails `tripper`'s calls until it trips (after the fleet closed again its
/// window may hold a success, so one failure can be enough) and waits until
/// every instance shares the OPEN.
fn trip_and_share(server: &Server, fleet: &[Instance], tripper: usize, what: &str) {
    let mut spent = 0;
    while fleet[tripper].breaker.state() == State::Closed {
        spend_trip_budget(&mut spent);
        match fail(&fleet[tripper].breaker) {
            Err(interlock::CallError::Inner(e)) => assert_eq!(e.to_string(), "503", "{what}"),
            Err(interlock::CallError::Rejected(_)) => break,
            Ok(()) => panic!("{what}: a failing call succeeded"),
        }
    }
    let shared = storage(server);
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&shared, fleet)
    });
    assert!(shared_open, "{what}: the trip was never shared");
}

/// Every key of the server gone at once.
fn flushall(server: &Server) {
    let () = redis::cmd("FLUSHALL").query(&mut server.admin()).unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.admin())
        .unwrap();
    assert!(keys.is_empty(), "flushed: {keys:?}");
}

#[test]
fn a_flushall_during_a_shared_open_leaves_a_fleet_that_closes_and_shares_the_next_trip() {
    let server = Server::start();
    let fleet = fleet(&server);
    await_the_fleet(&fleet);
    trip_and_share(&server, &fleet, 0, "first trip");

    flushall(&server);
    the_fleet_admits_again(&fleet, "after FLUSHALL");
    assert!(
        fleet.iter().all(|i| !i.breaker.is_degraded()),
        "losing the data is not a storage fault"
    );
    // The log and its index start again: the next trip is shared too.
    trip_and_share(&server, &fleet, 1, "the trip after FLUSHALL");
    the_fleet_closes_again(&fleet, "after the second trip");
}

/// The data lost while the fleet is HALF_OPEN with its one probe leased
/// and running: the probe's outcome then lands on no record, and the fleet
/// must still close (the lease is not leaked into a fleet that waits for a
/// round that can no longer end).
#[test]
fn a_flushall_while_a_leased_probe_runs_leaves_a_fleet_that_closes() {
    let server = Server::start();
    let fleet = fleet(&server);
    await_the_fleet(&fleet);
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

    flushall(&server);
    probe.success();
    the_fleet_admits_again(&fleet, "after FLUSHALL under a leased probe");
    trip_and_share(&server, &fleet, 2, "the trip after FLUSHALL");
    the_fleet_closes_again(&fleet, "after the second trip");
}
