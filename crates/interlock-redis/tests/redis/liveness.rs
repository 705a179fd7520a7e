//! Fleet liveness on a real server (issue 21): after every fault the fleet
//! admits calls again once the dependency and Redis are healthy.
//!
//! - the server paused (SIGSTOP, 1 s) while a probe runs, and while a lease
//!   is in flight: the round's slot is leaked, and the stall rule (R17.10)
//!   restarts the round;
//! - an ACL user without channel rights: writes apply, notices are said to
//!   be unavailable once, nothing degrades (R17.11);
//! - trips while the server is down: one shared OPEN after it is back
//!   (R15.12);
//! - a dump restored over newer state: no healthy call is rejected, the
//!   record is repaired (R15.11);
//! - HALF_OPEN with the budget spent: Redis commands per rejected call
//!   (R15.2a).
//!
//! Bounds come from the configuration: after the server answers again the
//! fleet admits within `max_wait_in_half_open` (the stall bound, which
//! follows `wait_duration_in_open` here) + 2 × `poll_interval` when
//! `retry_backoff` is one `poll_interval`, plus one response timeout for a
//! request caught in flight. Every wait polls with a generous deadline.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use interlock::State;
use interlock::mode::Blocking;
use interlock::storage::{Coordinator, SharedState, Storage};
use interlock_redis::RedisStorage;

use crate::support::{Server, eventually, now, pause};
use crate::{Instance, TTL, config, fail, ok, storage, the_fleet_shares_an_open};

/// The stall bound: `max_wait_in_half_open`, which follows
/// `wait_duration_in_open` unless set.
const WAIT: Duration = Duration::from_millis(1500);
const POLL: Duration = Duration::from_millis(250);
const TIMEOUT: Duration = Duration::from_millis(250);
/// How long the server is paused.
const PAUSE: Duration = Duration::from_secs(1);

/// A connecting storage with short timeouts that degrades and retries on
/// the poll cadence.
fn fault_storage(client: redis::Client) -> RedisStorage<redis::Connection> {
    RedisStorage::from_client(client, TIMEOUT)
        .poll_interval(POLL)
        .retry_backoff(POLL)
        .state_ttl(TTL)
        .build()
        .unwrap()
}

/// Three instances, each its own storage, connections, subscriber and
/// background lane, with one probe per round.
fn fleet(server: &Server) -> Vec<Instance> {
    (0..3)
        .map(|_| {
            Instance::new(
                Coordinator::blocking(fault_storage(server.client())),
                config()
                    .wait_duration_in_open(WAIT)
                    .permitted_calls_in_half_open(1),
            )
        })
        .collect()
}

/// Trips the fleet through instance 0 and waits until every instance sees
/// the shared round begin.
fn into_half_open(fleet: &[Instance]) {
    assert!(eventually(Duration::from_secs(10), || fleet.iter().all(
        |i| i.lane.is_subscribed() && i.breaker.shared_view().is_some()
    )));
    fleet[0].trip_locally();
    let all = eventually(Duration::from_secs(20), || {
        fleet
            .iter()
            .all(|i| i.breaker.state() == State::HalfOpen && !i.breaker.is_degraded())
    });
    assert!(all, "the fleet never reached HALF_OPEN");
}

/// Calls every instance until each has admitted a call while healthy (not
/// degraded), with a generous deadline; returns how long that took.
fn until_the_fleet_admits(fleet: &[Instance], limit: Duration) -> Option<Duration> {
    let start = now();
    let mut admitted = vec![false; fleet.len()];
    let done = eventually(limit, || {
        for (i, instance) in fleet.iter().enumerate() {
            if !admitted[i] && ok(&instance.breaker).is_ok() && !instance.breaker.is_degraded() {
                admitted[i] = true;
            }
        }
        admitted.iter().all(|a| *a)
    });
    done.then(|| now().saturating_duration_since(start))
}

fn bound() -> Duration {
    WAIT + POLL * 2 + TIMEOUT
}

#[test]
fn a_pause_while_a_probe_runs_leaks_no_round_the_fleet_admits_within_the_bound() {
    let server = Server::start();
    let fleet = fleet(&server);
    into_half_open(&fleet);
    let admin = storage(&server);

    // Instance 0 holds the round's only probe when the server stops: its
    // outcome write times out and is dropped while it is degraded.
    let probe = fleet[0].breaker.acquire().unwrap();
    assert!(probe.is_leased());
    server.stop();
    probe.success();
    assert!(
        eventually(Duration::from_secs(5), || fleet[0].breaker.is_degraded()),
        "the outcome write did not fail"
    );
    pause(PAUSE);
    server.resume();
    let resumed = now();

    let took = until_the_fleet_admits(&fleet, Duration::from_secs(60));
    let took = took.expect("the fleet never admitted again (the round leaked)");
    assert!(
        took <= bound(),
        "the fleet admitted again {took:?} after the server resumed; bound {:?}",
        bound()
    );
    let shared = admin.read("payments").unwrap().unwrap();
    assert_eq!(shared.state, State::Closed, "{shared}");
    eprintln!(
        "pause during a probe: fleet admits {:?} after resume (bound {:?})",
        now().saturating_duration_since(resumed),
        bound()
    );
    for i in &fleet {
        i.breaker.close();
    }
}

#[test]
fn a_lease_the_server_runs_after_its_caller_timed_out_leaks_no_round() {
    let server = Server::start();
    let fleet = fleet(&server);
    into_half_open(&fleet);
    let admin = storage(&server);
    let before = admin.read("payments").unwrap().unwrap();
    assert_eq!(before.probes_remaining, 1);
    // The lease script is in the server's cache (as in a fleet that has
    // leased before), so the EVALSHA sent to the stopped server runs as it
    // is once the server resumes, with no NOSCRIPT round trip.
    assert!(!admin.lease_probe("warm-up", TTL).unwrap().granted);

    // Instance 0's lease reaches a stopped server: the call gives up after
    // the response timeout (and is decided by the local rules), the server
    // runs the lease when it resumes. Under load the instance's own poll can
    // meet the stopped server first: the storage then degrades before the
    // lease is written, nothing leaks, and the attempt did not set up the
    // scenario; it is made again once the fleet is back where it started.
    let mut attempts = 0;
    let after = loop {
        attempts += 1;
        server.stop();
        let started = now();
        let _ = ok(&fleet[0].breaker);
        assert!(now().saturating_duration_since(started) < TIMEOUT * 4);
        assert!(fleet[0].breaker.is_degraded());
        pause(PAUSE);
        server.resume();
        let leaked = eventually(Duration::from_secs(5), || {
            admin
                .read("payments")
                .unwrap()
                .is_some_and(|s| s.version > before.version)
        });
        let after = admin.read("payments").unwrap().unwrap();
        if leaked || attempts == 5 {
            break after;
        }
        let back = eventually(Duration::from_secs(20), || {
            fleet
                .iter()
                .all(|i| i.breaker.state() == State::HalfOpen && !i.breaker.is_degraded())
        });
        assert!(
            back,
            "the fleet did not come back after an attempt that leaked nothing"
        );
    };
    assert!(
        after.version > before.version
            && after.probes_remaining == 0
            && after.state == State::HalfOpen,
        "the server did not run the timed-out lease in {attempts} attempts: {after}"
    );

    let took = until_the_fleet_admits(&fleet, Duration::from_secs(60));
    let took = took.expect("the fleet never admitted again (the round leaked)");
    assert!(
        took <= bound(),
        "the fleet admitted again {took:?} after the server resumed; bound {:?}",
        bound()
    );
    eprintln!(
        "pause during a lease: fleet admits {took:?} after resume (bound {:?})",
        bound()
    );
    for i in &fleet {
        i.breaker.close();
    }
}

#[test]
fn an_acl_user_without_channel_rights_writes_without_degrading_and_polls() {
    let server = Server::start();
    let client = server.client_as(
        "app",
        "app-secret",
        &["~interlock:*", "+@all", "resetchannels"],
    );
    let fleet: Vec<Instance> = (0..2)
        .map(|_| {
            Instance::new(
                Coordinator::blocking(fault_storage(client.clone())),
                config()
                    .wait_duration_in_open(WAIT)
                    .permitted_calls_in_half_open(1),
            )
        })
        .collect();
    fleet[0].trip_locally();
    // The trip applies (the refused PUBLISH does not fail it) and reaches
    // the other instance by polling.
    let open = eventually(Duration::from_secs(10), || {
        fleet[1].breaker.state() == State::Open
    });
    assert!(open, "the trip never reached the other instance by polling");
    let shared = storage(&server).read("payments").unwrap().unwrap();
    assert_eq!((shared.state, shared.version), (State::Open, 1));
    // A whole round: the fleet closes again.
    let closed = eventually(Duration::from_secs(20), || {
        let _ = ok(&fleet[1].breaker);
        fleet.iter().all(|i| {
            i.breaker.state() == State::Closed
                && i.breaker.shared_view().is_some_and(|v| v.version > 1)
        })
    });
    assert!(closed, "{:?}", fleet[1].breaker.shared_view());
    for i in &fleet {
        assert_eq!(
            i.events.count("storage degraded"),
            0,
            "{:?}",
            i.events.all()
        );
        assert_eq!(
            i.events.count("storage change notices unavailable"),
            1,
            "said once: {:?}",
            i.events.all()
        );
        assert!(!i.lane.is_subscribed() || i.events.count("refused") == 1);
    }
    for i in &fleet {
        i.breaker.close();
    }
}

#[test]
fn trips_while_the_server_is_down_become_one_shared_open_after_it_is_back() {
    let mut server = Server::start();
    let fleet = fleet(&server);
    assert!(eventually(Duration::from_secs(10), || fleet
        .iter()
        .all(|i| i.breaker.shared_view().is_some())));
    server.kill();
    for i in &fleet {
        assert!(eventually(Duration::from_secs(10), || i
            .breaker
            .is_degraded()));
        i.trip_locally(); // its shared trip is dropped while degraded
        assert_eq!(i.breaker.state(), State::Open);
    }
    server.restart(); // empty
    let back = now();
    let admin = storage(&server);
    let shared_open = eventually(Duration::from_secs(20), || {
        the_fleet_shares_an_open(&admin, &fleet)
    });
    assert!(shared_open, "the fleet's trips were never shared");
    let took = now().saturating_duration_since(back);
    let open = admin.read("payments").unwrap().unwrap();
    assert_eq!(open.version, 1, "one trip applied, the others fenced out");
    eprintln!("trips during an outage: shared OPEN {took:?} after the restart");
    // The round after it probes with the fleet's budget: one probe in all.
    let leased = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let held = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for i in &fleet {
            let (leased, stop, held) = (&leased, &stop, &held);
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(p) = i.breaker.acquire() {
                        if p.is_leased() {
                            leased.fetch_add(1, Ordering::SeqCst);
                        }
                        held.lock().unwrap().push(p); // not reported yet
                    }
                    pause(Duration::from_millis(2));
                }
            });
        }
        assert!(eventually(Duration::from_secs(20), || leased
            .load(Ordering::SeqCst)
            > 0));
        pause(POLL * 2);
        stop.store(true, Ordering::SeqCst);
    });
    assert_eq!(
        leased.load(Ordering::SeqCst),
        1,
        "permitted_calls_in_half_open for the fleet"
    );
    for i in &fleet {
        i.breaker.close();
    }
}

#[test]
fn a_dump_restored_over_newer_state_rejects_no_healthy_call() {
    let mut server = Server::start();
    let fleet = fleet(&server);
    let admin = storage(&server);
    into_half_open(&fleet); // OPEN v1, then HALF_OPEN v2
    let dump = server.dir().join("old-dump.rdb");
    admin.trip_open("payments", TTL, Some(2)).unwrap(); // OPEN v3 in the dump
    server.dump_to(&dump);
    // The fleet recovers: the round passes and closes.
    let closed = eventually(Duration::from_secs(30), || {
        let _ = ok(&fleet[1].breaker);
        fleet.iter().all(|i| i.breaker.state() == State::Closed)
    });
    assert!(closed, "{:?}", admin.read("payments"));
    let newest = admin.read("payments").unwrap().unwrap();
    assert!(newest.version > 3);
    for i in &fleet {
        assert!(eventually(Duration::from_secs(5), || i
            .breaker
            .shared_view()
            == Some(newest)));
    }

    // Healthy traffic on every instance while the server restarts from the
    // old dump (OPEN v3): not one call may be rejected.
    let stop = AtomicBool::new(false);
    let rejected = AtomicU64::new(0);
    let calls = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for i in &fleet {
            let (stop, rejected, calls) = (&stop, &rejected, &calls);
            scope.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if ok(&i.breaker).is_err() {
                        rejected.fetch_add(1, Ordering::SeqCst);
                    }
                    calls.fetch_add(1, Ordering::SeqCst);
                    pause(Duration::from_millis(1));
                }
            });
        }
        server.restart_from(&dump);
        let back = now();
        let restored = admin.read("payments");
        let repaired = eventually(Duration::from_secs(20), || {
            admin.read("payments").is_ok_and(|s| {
                s.is_some_and(|s| s.state == State::Closed && s.version > newest.version)
            }) && fleet.iter().all(|i| {
                !i.breaker.is_degraded()
                    && i.breaker
                        .shared_view()
                        .is_some_and(|v| v.version > newest.version)
            })
        });
        let took = now().saturating_duration_since(back);
        pause(POLL * 2);
        stop.store(true, Ordering::SeqCst);
        eprintln!("dump restored over newer state: repaired {took:?} after the restart");
        assert!(
            repaired,
            "restored {restored:?}, now {:?}",
            admin.read("payments")
        );
    });
    assert!(calls.load(Ordering::SeqCst) > 100);
    assert_eq!(
        rejected.load(Ordering::SeqCst),
        0,
        "healthy calls were rejected"
    );
    for i in &fleet {
        assert_eq!(i.breaker.state(), State::Closed);
        i.breaker.close();
    }
}

/// R15.2a on a real server: with the budget spent, rejected calls of every
/// instance cost Redis nothing once each has learnt it (counted with
/// `INFO commandstats`; manual lanes, so no background poll is counted).
#[test]
fn half_open_rejections_with_the_budget_spent_cost_no_redis_command() {
    const CALLS: u64 = 1000;
    let server = Server::start();
    let admin = storage(&server);
    let fleet: Vec<Instance> = (0..3)
        .map(|_| Instance::new(Coordinator::<Blocking>::manual(storage(&server)), config()))
        .collect();
    admin.trip_open("payments", TTL, None).unwrap();
    admin
        .begin_half_open_if_elapsed("payments", Duration::ZERO, 2, TTL)
        .unwrap();
    for i in &fleet {
        i.lane.poll();
        assert_eq!(i.breaker.state(), State::HalfOpen);
    }
    let _probes = [
        fleet[0].breaker.acquire().unwrap(),
        fleet[0].breaker.acquire().unwrap(),
    ];
    // The leases' notices carry the record: the other instances learn that
    // the budget is spent without asking (a lane that missed them would
    // learn it from one refused lease, or its next poll).
    let heard = eventually(Duration::from_secs(10), || {
        fleet
            .iter()
            .all(|i| i.breaker.shared_view().is_some_and(|v| v.no_slot_left()))
    });
    assert!(heard, "the leases' notices never arrived");
    server.reset_stats();
    let mut rejected = 0u64;
    for _ in 0..CALLS {
        for i in &fleet {
            for call in [ok(&i.breaker), fail(&i.breaker)] {
                if call.unwrap_err().is_rejected() {
                    rejected += 1;
                }
            }
        }
    }
    let commands: u64 = server.client_commands().iter().map(|(_, n)| n).sum();
    assert_eq!(rejected, CALLS * 6);
    assert_eq!(
        server.client_commands(),
        [],
        "rejections cost Redis nothing"
    );
    eprintln!("HALF_OPEN, budget spent: {commands} commands for {rejected} rejected calls");
    let spent: SharedState = admin.read("payments").unwrap().unwrap();
    assert!(spent.no_slot_left());
}
