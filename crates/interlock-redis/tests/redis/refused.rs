//! A server that answers but refuses to write: a replica after a failover
//! (`READONLY`) and a primary out of memory under `noeviction` (`OOM`).
//! Neither error may reach a protected call; a trip made while writes are
//! refused is shared once they are accepted again (R15.12), and the fleet
//! then admits calls again (liveness). A server that closes every client
//! connection (`CLIENT KILL`, as a proxy or an operator does): the next
//! write reconnects, and one that then refuses new connections
//! (`maxclients` reached) degrades until there is room. And one that holds
//! every write (`CLIENT PAUSE ... WRITE`): no call waits with it.

use std::time::Duration;

use interlock::State;
use interlock::storage::{Coordinator, Storage};

use crate::support::{Server, eventually, now, spend_trip_budget};
use crate::{Instance, TTL, config, fail, ok, storage, the_fleet_shares_an_open};

pub(crate) const WAIT: Duration = Duration::from_millis(1500);
const POLL: Duration = Duration::from_millis(250);
const TIMEOUT: Duration = Duration::from_millis(500);

/// Three instances polling every 250 ms, tripping at two failures, with a
/// 1.5 s open wait and probe rounds of one.
pub(crate) fn fleet(server: &Server) -> Vec<Instance> {
    (0..3)
        .map(|_| {
            let storage = interlock_redis::RedisStorage::from_client(server.client(), TIMEOUT)
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

/// Fails `tripper`'s calls until it trips; each returns the call's own
/// error, never a storage error.
fn trip_with_the_calls_own_errors(tripper: &Instance, what: &str) {
    for _ in 0..2 {
        match fail(&tripper.breaker) {
            Err(interlock::CallError::Inner(e)) => assert_eq!(e.to_string(), "503"),
            other => panic!("{what}: the failing call returned {other:?}"),
        }
    }
    assert_eq!(tripper.breaker.state(), State::Open, "{what}");
}

/// Calls every instance, the dependency healthy, until the fleet is
/// CLOSED again (the open wait, then a probe round); a call sees only
/// admission or a rejection, never a storage error.
pub(crate) fn the_fleet_admits_again(fleet: &[Instance], what: &str) {
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

/// [`the_fleet_admits_again`], then closes the lanes.
pub(crate) fn the_fleet_closes_again(fleet: &[Instance], what: &str) {
    the_fleet_admits_again(fleet, what);
    for i in fleet {
        i.breaker.close();
    }
}

fn admin(server: &Server, args: &[&str]) {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let () = cmd.query(&mut server.admin()).unwrap();
}

/// Trips instance 0 while `refuse` keeps the server from writing, checks
/// that no call saw a storage error, lets `accept` restore writes, and
/// waits for the shared OPEN and then for the fleet to admit again.
fn a_trip_while_writes_are_refused_is_shared_after(
    refuse: &[&[&str]],
    accept: &[&[&str]],
    what: &str,
) {
    let server = Server::start();
    let fleet = fleet(&server);
    assert!(eventually(Duration::from_secs(10), || fleet
        .iter()
        .all(|i| i.breaker.shared_view().is_some())));
    for command in refuse {
        admin(&server, command);
    }
    // Writes are refused now: a write from outside the fleet says so.
    let probe: redis::RedisResult<()> = redis::cmd("SET")
        .arg("interlock-test-probe")
        .arg("x")
        .query(&mut server.admin());
    let refused = probe.expect_err("the server refuses writes");
    eprintln!("{what}: a write is refused with {refused}");

    // The trip: every call returns the call's own result, never a storage error.
    let tripper = &fleet[0];
    trip_with_the_calls_own_errors(tripper, what);
    for i in &fleet[1..] {
        assert!(ok(&i.breaker).is_ok(), "{what}: a healthy instance admits");
    }
    // Its trip write was refused: it runs on its local state (degraded),
    // and the server holds no OPEN.
    assert!(
        eventually(Duration::from_secs(10), || tripper.breaker.is_degraded()),
        "{what}: a refused write degrades"
    );
    let shared = storage(&server);
    assert!(
        shared
            .read("payments")
            .unwrap()
            .is_none_or(|s| s.state != State::Open),
        "{what}: the trip was written after all"
    );
    for command in accept {
        admin(&server, command);
    }
    let back = now();
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&shared, &fleet)
    });
    assert!(
        shared_open,
        "{what}: the trip was never shared once writes were accepted"
    );
    eprintln!(
        "{what}: shared OPEN {:?} after writes were accepted",
        now().saturating_duration_since(back)
    );
    the_fleet_closes_again(&fleet, what);
}

#[test]
fn a_replica_after_failover_refuses_writes_and_a_trip_is_shared_once_promoted() {
    // A replica of a primary that is not there: it keeps its data, serves
    // reads and answers every write with READONLY until promoted.
    a_trip_while_writes_are_refused_is_shared_after(
        &[&["REPLICAOF", "127.0.0.1", "1"]],
        &[&["REPLICAOF", "NO", "ONE"]],
        "READONLY",
    );
}

#[test]
fn a_server_out_of_memory_refuses_writes_and_a_trip_is_shared_once_it_has_room() {
    a_trip_while_writes_are_refused_is_shared_after(
        &[
            &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
            &["CONFIG", "SET", "maxmemory", "1"],
        ],
        &[&["CONFIG", "SET", "maxmemory", "0"]],
        "OOM",
    );
}

/// Waits until every instance is subscribed and has read the record.
pub(crate) fn await_the_fleet(fleet: &[Instance]) {
    assert!(eventually(Duration::from_secs(10), || fleet.iter().all(
        |i| i.lane.is_subscribed() && i.breaker.shared_view().is_some()
    )));
}

/// Kills every connection of the fleet, commands and subscriptions alike
/// (`con`, which asks, is skipped).
fn kill_the_fleets_connections(con: &mut redis::Connection) {
    for kind in ["normal", "pubsub"] {
        let killed: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .query(con)
            .unwrap();
        assert!(killed >= 3, "{kind}: {killed} killed");
    }
}

#[test]
fn killed_client_connections_reconnect_and_the_next_trip_is_shared() {
    let server = Server::start();
    let fleet = fleet(&server);
    await_the_fleet(&fleet);
    kill_the_fleets_connections(&mut server.admin());
    trip_with_the_calls_own_errors(&fleet[0], "killed");
    let shared = storage(&server);
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&shared, &fleet) && fleet.iter().all(|i| i.lane.is_subscribed())
    });
    assert!(shared_open, "the trip was never shared after the kill");
    the_fleet_closes_again(&fleet, "killed");
}

/// The connections killed and no new one accepted (`maxclients` reached,
/// as when a fleet outgrows the server): every reconnection is refused
/// until room is made, and then the trip made meanwhile is shared.
#[test]
fn reconnections_refused_at_maxclients_degrade_and_recover_once_there_is_room() {
    let server = Server::start();
    let fleet = fleet(&server);
    await_the_fleet(&fleet);
    // One connection, kept: the only client the server will have.
    let mut admin = server.admin();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("1")
        .query(&mut admin)
        .unwrap();
    kill_the_fleets_connections(&mut admin);
    trip_with_the_calls_own_errors(&fleet[0], "maxclients");
    assert!(
        eventually(Duration::from_secs(10), || fleet[0].breaker.is_degraded()),
        "a refused reconnection degrades"
    );
    for i in &fleet[1..] {
        assert!(ok(&i.breaker).is_ok(), "a healthy instance admits");
    }
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxclients")
        .arg("10000")
        .query(&mut admin)
        .unwrap();
    drop(admin);
    let shared = storage(&server);
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&shared, &fleet) && fleet.iter().all(|i| i.lane.is_subscribed())
    });
    assert!(shared_open, "the trip was never shared once there was room");
    the_fleet_closes_again(&fleet, "maxclients");
}

/// Polls `cond` every few milliseconds (sleeping on tokio) until it holds or
/// `limit` passes; whether it held.
async fn until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = now().saturating_add(limit);
    while !cond() {
        if now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// The async storage on connection managers, as a tokio service runs it:
/// a replica's `READONLY` never reaches a call either, and the trip made
/// meanwhile is shared once the server is promoted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_storage_shares_a_trip_made_while_a_replica_refused_it() {
    use interlock::{CircuitBreaker, mode::Async};
    use interlock_redis::AsyncRedisStorage;

    let server = Server::start();
    let mut fleet: Vec<(Coordinator<Async>, CircuitBreaker<Async>)> = Vec::new();
    for _ in 0..2 {
        let con = server.client().get_connection_manager().await.unwrap();
        let storage = AsyncRedisStorage::builder(con)
            .poll_interval(POLL)
            .retry_backoff(POLL)
            .state_ttl(TTL)
            .build()
            .unwrap();
        let lane = Coordinator::asynchronous(storage);
        let breaker = CircuitBreaker::builder("payments")
            .config(
                config()
                    .wait_duration_in_open(WAIT)
                    .permitted_calls_in_half_open(1)
                    .build()
                    .unwrap(),
            )
            .coordinator(&lane)
            .build()
            .unwrap();
        fleet.push((lane, breaker));
    }
    assert!(
        until(Duration::from_secs(10), || fleet
            .iter()
            .all(|(_, b)| b.shared_view().is_some()))
        .await
    );
    admin(&server, &["REPLICAOF", "127.0.0.1", "1"]);
    let tripper = &fleet[0].1;
    let mut spent = 0;
    while tripper.state() == State::Closed {
        spend_trip_budget(&mut spent);
        let failed = tripper
            .call_async(|| async { Err::<(), _>(std::io::Error::other("503")) })
            .await;
        match failed {
            Err(interlock::CallError::Inner(e)) => assert_eq!(e.to_string(), "503"),
            other => panic!("the failing call returned {other:?}"),
        }
    }
    assert!(
        until(Duration::from_secs(10), || tripper.is_degraded()).await,
        "a refused write degrades"
    );
    let healthy = fleet[1]
        .1
        .call_async(|| async { Ok::<_, std::io::Error>(()) })
        .await;
    assert!(healthy.is_ok(), "the other instance admits");
    admin(&server, &["REPLICAOF", "NO", "ONE"]);
    let shared = storage(&server);
    let shared_open = until(Duration::from_secs(20), || {
        shared
            .read("payments")
            .unwrap()
            .is_some_and(|s| s.state == State::Open)
            && fleet.iter().all(|(_, b)| {
                !b.is_degraded() && b.shared_view().is_some_and(|v| v.state == State::Open)
            })
    })
    .await;
    assert!(shared_open, "the trip was never shared once promoted");
    let closed = {
        let deadline = now().saturating_add(WAIT + Duration::from_secs(20));
        loop {
            for (_, b) in &fleet {
                let _ = b.call_async(|| async { Ok::<_, std::io::Error>(()) }).await;
            }
            if fleet.iter().all(|(_, b)| b.state() == State::Closed) {
                break true;
            }
            if now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    assert!(closed, "the async fleet never closed again");
    for (_, b) in &fleet {
        b.close_async().await;
    }
}

/// `CLIENT PAUSE ... WRITE` (an operator's failover step, or a proxy
/// draining): every write, and every script, waits until the pause ends.
/// No call waits with them, and the trip made meanwhile lands after it.
#[test]
fn writes_held_by_client_pause_never_hold_a_call_and_the_trip_lands_after() {
    const HELD: Duration = Duration::from_secs(2);
    let server = Server::start();
    let fleet = fleet(&server);
    assert!(eventually(Duration::from_secs(10), || fleet
        .iter()
        .all(|i| i.breaker.shared_view().is_some())));
    admin(
        &server,
        &["CLIENT", "PAUSE", &HELD.as_millis().to_string(), "WRITE"],
    );
    let paused = now();
    let mut slowest = Duration::ZERO;
    for _ in 0..2 {
        let start = now();
        match fail(&fleet[0].breaker) {
            Err(interlock::CallError::Inner(e)) => assert_eq!(e.to_string(), "503"),
            other => panic!("the failing call returned {other:?}"),
        }
        slowest = slowest.max(now().saturating_duration_since(start));
    }
    assert_eq!(fleet[0].breaker.state(), State::Open);
    for i in &fleet[1..] {
        let start = now();
        assert!(ok(&i.breaker).is_ok(), "a healthy instance admits");
        slowest = slowest.max(now().saturating_duration_since(start));
    }
    // A call that waited for a write would wait out the response timeout
    // at least (the pause is longer).
    assert!(
        slowest < TIMEOUT / 2,
        "a call took {slowest:?} during the pause"
    );
    assert!(
        now().saturating_duration_since(paused) < HELD,
        "the trip and the calls were done within the pause"
    );
    let shared = storage(&server);
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&shared, &fleet)
    });
    assert!(shared_open, "the trip never landed after the pause");
    eprintln!(
        "CLIENT PAUSE: slowest call {slowest:?}; shared OPEN {:?} after the pause began",
        now().saturating_duration_since(paused)
    );
    the_fleet_closes_again(&fleet, "paused");
}
