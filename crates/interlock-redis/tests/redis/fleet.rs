//! Coordinated breakers of several simulated instances, each with its own
//! storage and connections, sharing one `redis-server`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use interlock::storage::{Coordinator, Storage};
use interlock::{CircuitBreaker, State};
use interlock_redis::AsyncRedisStorage;

use crate::support::{Server, eventually, now, pause, spend_trip_budget};
use crate::{Instance, TTL, config, fail, ok, storage, storage_builder};

#[test]
fn a_trip_reaches_every_instance_within_about_one_poll_interval() {
    const POLL: Duration = Duration::from_millis(200);
    let server = Server::start();
    let fleet: Vec<Instance> = (0..3)
        .map(|_| {
            let storage = storage_builder(&server)
                .poll_interval(POLL)
                .build()
                .unwrap();
            Instance::new(Coordinator::blocking(storage), config())
        })
        .collect();
    // Let each lane poll once so all three run.
    pause(POLL);
    fleet[0].trip_locally();
    let tripped = now();
    let all_open = eventually(Duration::from_secs(5), || {
        fleet[1..]
            .iter()
            .all(|i| ok(&i.breaker).is_err_and(|e| e.is_rejected()))
    });
    let took = now().saturating_duration_since(tripped);
    assert!(all_open, "the trip never reached the other instances");
    assert!(
        took <= POLL * 2 + Duration::from_millis(200),
        "propagation took {took:?} with a {POLL:?} poll interval"
    );
    for i in &fleet {
        assert_eq!(i.breaker.state(), State::Open);
        assert_eq!(i.events.count("degraded"), 0);
        i.breaker.close();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_reaches_async_instances_on_connection_managers() {
    const POLL: Duration = Duration::from_millis(100);
    let server = Server::start();
    let mut fleet = Vec::new();
    for _ in 0..2 {
        let con = server.client().get_connection_manager().await.unwrap();
        let storage = AsyncRedisStorage::builder(con)
            .poll_interval(POLL)
            .build()
            .unwrap();
        let lane = Coordinator::asynchronous(storage);
        let breaker = CircuitBreaker::builder("payments")
            .config(config().build().unwrap())
            .coordinator(&lane)
            .build()
            .unwrap();
        fleet.push((lane, breaker));
    }
    let (a, b) = (&fleet[0].1, &fleet[1].1);
    let mut spent = 0;
    while a.state() == State::Closed {
        spend_trip_budget(&mut spent);
        let _ = a
            .call_async(|| async { Err::<(), _>(std::io::Error::other("503")) })
            .await;
    }
    let deadline = now().saturating_add(Duration::from_secs(5));
    while b.state() != State::Open && now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(b.state(), State::Open);
    let rejected = b.call_async(|| async { Ok::<_, std::io::Error>(()) }).await;
    assert!(rejected.unwrap_err().is_rejected());
    for (_, breaker) in &fleet {
        breaker.close_async().await;
    }
}

#[test]
fn twenty_concurrent_half_open_rounds_never_admit_more_probes_than_permitted() {
    const PERMITTED: u32 = 3;
    const WAIT: Duration = Duration::from_millis(20);
    const ROUNDS: u32 = 20;
    let server = Server::start();
    let cfg = || {
        config()
            .wait_duration_in_open(WAIT)
            .permitted_calls_in_half_open(PERMITTED)
    };
    let fleet: Vec<Instance> = (0..3)
        .map(|_| Instance::new(Coordinator::manual(storage(&server)), cfg()))
        .collect();
    let admin = storage(&server);
    admin.trip_open("payments", TTL, None).unwrap();
    for round in 0..ROUNDS {
        pause(WAIT + Duration::from_millis(2));
        let all_half_open = eventually(Duration::from_secs(5), || {
            fleet.iter().for_each(|i| i.lane.poll());
            fleet.iter().all(|i| i.breaker.state() == State::HalfOpen)
        });
        assert!(
            all_half_open,
            "round {round}: not every instance saw HALF_OPEN"
        );
        let round_opened_at = admin.read("payments").unwrap().unwrap().opened_at;
        let granted = AtomicU32::new(0);
        let permits = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for instance in &fleet {
                for _ in 0..3 {
                    scope.spawn(|| {
                        for _ in 0..3 {
                            if let Ok(permit) = instance.breaker.acquire() {
                                assert!(permit.is_leased());
                                granted.fetch_add(1, Ordering::SeqCst);
                                permits.lock().unwrap().push(permit);
                            }
                        }
                    });
                }
            }
        });
        let granted = granted.load(Ordering::SeqCst);
        assert!(
            granted <= PERMITTED,
            "round {round}: {granted} probes admitted fleet-wide, {PERMITTED} permitted"
        );
        assert_eq!(
            granted, PERMITTED,
            "round {round}: 27 attempts, budget unused"
        );
        let last = round == ROUNDS - 1;
        for permit in permits.into_inner().unwrap() {
            if last {
                permit.success();
            } else {
                permit.failure();
            }
        }
        fleet.iter().for_each(|i| i.lane.run_writes());
        let shared = admin.read("payments").unwrap().unwrap();
        if last {
            assert_eq!(shared.state, State::Closed, "round {round}: passed");
        } else {
            // Re-opened with a fresh wait. The 20 ms wait may already be
            // over, and a change notice makes a lane poll at once (R17.2:
            // begin HALF_OPEN from a cached OPEN), so the next round may
            // have begun already: the fresh `opened_at` is the proof.
            assert!(
                matches!(shared.state, State::Open | State::HalfOpen)
                    && shared.opened_at > round_opened_at
                    && shared.probes_completed == 0,
                "round {round}: the failed round must re-open, got {shared}"
            );
        }
        fleet.iter().for_each(|i| i.lane.poll());
    }
    for i in &fleet {
        assert_eq!(i.breaker.state(), State::Closed);
        assert_eq!(i.events.count("degraded"), 0);
    }
}

#[test]
fn no_command_per_call_in_closed_and_open_and_one_per_half_open_admission() {
    let server = Server::start();
    let admin = storage(&server);
    // Load the scripts once (the cache is server-wide), so no NOSCRIPT
    // round trip is counted below.
    admin.read("warm-up").unwrap();
    admin.trip_open("warm-up", TTL, None).unwrap();
    admin
        .begin_half_open_if_elapsed("warm-up", Duration::ZERO, 1, TTL)
        .unwrap();
    admin.lease_probe("warm-up", TTL).unwrap();
    let a = Instance::new(Coordinator::manual(storage(&server)), config());
    a.lane.poll(); // opens A's first connection
    // A's notice subscription is live, so its setup is not counted below.
    assert!(eventually(Duration::from_secs(5), || server
        .pubsub_clients()
        == 1));

    server.reset_stats();
    for _ in 0..200 {
        ok(&a.breaker).unwrap();
    }
    assert_eq!(server.client_commands(), [], "CLOSED: no command per call");

    admin.trip_open("payments", TTL, None).unwrap();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::Open);
    server.reset_stats();
    for _ in 0..200 {
        assert!(ok(&a.breaker).unwrap_err().is_rejected());
        assert!(fail(&a.breaker).unwrap_err().is_rejected());
    }
    assert_eq!(
        server.client_commands(),
        [],
        "shared OPEN: no command per call"
    );

    admin
        .begin_half_open_if_elapsed("payments", Duration::ZERO, 5, TTL)
        .unwrap();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    server.reset_stats();
    for admitted in 1..=5u64 {
        let permit = a.breaker.acquire().unwrap();
        assert!(permit.is_leased());
        permit.success(); // queued on the manual lane: not sent
        assert_eq!(
            server.client_commands(),
            [("evalsha".to_owned(), admitted)],
            "HALF_OPEN: one EVALSHA per admission"
        );
    }
    // The fifth lease's answer said no slot is left: from then on every
    // rejection is local (R15.2a), not one EVALSHA per call.
    for _ in 0..200 {
        assert!(a.breaker.acquire().is_err(), "budget spent: denied");
    }
    assert_eq!(server.client_commands(), [("evalsha".to_owned(), 5)]);
}
