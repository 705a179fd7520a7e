//! Faults: the server killed and restarted under traffic, a paused server.

use std::time::Duration;

use interlock::State;
use interlock::storage::{Coordinator, Storage};

use crate::support::{Server, eventually, now};
use crate::{Instance, TTL, config, ok, storage, storage_builder};

#[test]
fn a_killed_server_degrades_once_and_a_restart_recovers_adopting_a_shared_open() {
    let mut server = Server::start();
    let connect = |server: &Server| {
        storage_builder(server)
            .poll_interval(Duration::from_millis(50))
            .retry_backoff(Duration::from_secs(1))
            .build()
            .unwrap()
    };
    let a = Instance::new(Coordinator::blocking(connect(&server)), config());
    // Traffic on a thread for the whole test: no call may see an error
    // other than a rejection.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let traffic = scope.spawn(|| {
            let mut calls = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                match ok(&a.breaker) {
                    Ok(()) => {}
                    Err(e) => assert!(e.is_rejected(), "an error reached a call: {e}"),
                }
                calls += 1;
                std::thread::yield_now();
            }
            calls
        });
        assert!(eventually(Duration::from_secs(10), || a
            .breaker
            .shared_view()
            .is_some()));

        server.kill();
        assert!(
            eventually(Duration::from_secs(5), || a.breaker.is_degraded()),
            "never degraded after the kill"
        );
        // Local protection goes on while degraded.
        a.trip_locally();
        assert_eq!(a.breaker.state(), State::Open);
        assert!(ok(&a.breaker).unwrap_err().is_rejected());
        a.breaker.reset();

        // Back on the same port, empty; another instance opens the shared
        // breaker before A's next retry (a second after it degraded).
        server.restart();
        let peer = storage(&server).trip_open("payments", TTL, None).unwrap();
        assert!(
            a.breaker.is_degraded(),
            "the peer's trip must land while A is still cut off"
        );
        assert!(
            eventually(Duration::from_secs(5), || !a.breaker.is_degraded()),
            "never recovered after the restart"
        );
        assert!(eventually(Duration::from_secs(10), || a.breaker.state() == State::Open));
        assert_eq!(
            a.breaker.shared_view(),
            Some(peer),
            "adopted the shared OPEN"
        );
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(traffic.join().unwrap() > 0);
    });
    assert_eq!(
        a.events.count("storage degraded"),
        1,
        "{:?}",
        a.events.all()
    );
    // The event's text names the cause, not only the operation.
    let degraded = a
        .events
        .all()
        .into_iter()
        .find(|e| e.contains("storage degraded"))
        .unwrap();
    let cause = [
        "(connection refused)",
        "(connection lost)",
        "(I/O error)",
        "(timed out)",
    ];
    // `... read failed (connection lost): unexpected end of file`, say.
    let (_, source) = degraded.rsplit_once("): ").unwrap_or_default();
    assert!(
        cause.iter().any(|c| degraded.contains(c)) && !source.is_empty(),
        "{degraded}"
    );
    assert_eq!(
        a.events.count("storage recovered"),
        1,
        "{:?}",
        a.events.all()
    );
    a.breaker.close();
}

#[test]
fn a_paused_server_never_blocks_a_call_beyond_the_response_timeout() {
    const TIMEOUT: Duration = Duration::from_millis(300);
    let server = Server::start();
    let make = || {
        interlock_redis::RedisStorage::from_client(server.client(), TIMEOUT)
            .build()
            .unwrap()
    };
    let a = Instance::new(Coordinator::manual(make()), config());
    let admin = storage(&server);
    admin.trip_open("payments", TTL, None).unwrap();
    admin
        .begin_half_open_if_elapsed("payments", Duration::ZERO, 100, TTL)
        .unwrap();
    a.lane.poll();
    assert_eq!(a.breaker.state(), State::HalfOpen);
    // Warm the pool: several connections in use at once.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| a.breaker.acquire().unwrap().success());
        }
    });
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(3000)
        .arg("WRITE")
        .query(&mut server.admin())
        .unwrap();
    let started = now();
    let latencies: Vec<Duration> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let t = now();
                    // Admitted by the local rules once the lease fails.
                    ok(&a.breaker).unwrap();
                    now().saturating_duration_since(t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let slowest = latencies.iter().max().copied().unwrap();
    // A call that waited for the server would wait out its 3 s pause; the
    // bound leaves a loaded machine a second of scheduling past the timeout.
    assert!(
        slowest < TIMEOUT + Duration::from_secs(1),
        "a call blocked for {slowest:?} with a {TIMEOUT:?} response timeout"
    );
    // All four together, still short of the 3 s pause.
    assert!(now().saturating_duration_since(started) < Duration::from_millis(2500));
    assert!(a.breaker.is_degraded());
    assert_eq!(
        a.events.count("storage degraded"),
        1,
        "{:?}",
        a.events.all()
    );
    // Degraded: later calls do not even try Redis. One that did would wait
    // out the response timeout on the paused server, so the bound is half
    // that timeout: a call that did not try stays far below it even on a
    // loaded machine, where a bound of 50 ms could fail it.
    let t = now();
    ok(&a.breaker).unwrap();
    assert!(now().saturating_duration_since(t) < TIMEOUT / 2);
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut server.admin())
        .unwrap();
}
