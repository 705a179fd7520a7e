//! The read and write API operator tools are built on (issue 27): when a
//! breaker's state began and when it was created, a registry's
//! coordinator, and the fenced fleet-wide trip and close through it, whose
//! answers this instance adopts at once (R15.6) and other instances at
//! their next poll.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use interlock::storage::{Coordinator, MemoryStorage};
use interlock::{CircuitBreaker, Clock, Config, ManualClock, Registry, SlidingWindow, State};

const WAIT: Duration = Duration::from_secs(10);

fn config() -> Config {
    Config::builder()
        .minimum_number_of_calls(2)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(WAIT)
        .permitted_calls_in_half_open(1)
        .build()
        .unwrap()
}

fn fail(breaker: &CircuitBreaker<impl interlock::mode::SyncApi>) {
    let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("503")));
}

fn succeed(breaker: &CircuitBreaker<impl interlock::mode::SyncApi>) {
    let _ = breaker.call(|| Ok::<_, std::io::Error>(()));
}

/// How long the breaker has been in its state.
fn age(breaker: &CircuitBreaker<impl interlock::mode::Mode>) -> Duration {
    breaker.now() - breaker.state_since()
}

#[test]
fn state_since_follows_every_transition_and_nothing_else() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(100));
    let breaker = CircuitBreaker::builder("payments")
        .config(config())
        .clock(clock.clone())
        .build()
        .unwrap();
    let created = breaker.created_at();
    assert_eq!(created, clock.now());
    assert_eq!(
        breaker.state_since(),
        created,
        "never changed: its creation"
    );

    // Calls that change nothing leave it where it is.
    clock.advance(Duration::from_secs(5));
    succeed(&breaker);
    succeed(&breaker);
    assert_eq!(breaker.state_since(), created);
    assert_eq!(age(&breaker), Duration::from_secs(5));

    // CLOSED -> OPEN (R5) at +7 s.
    clock.advance(Duration::from_secs(2));
    fail(&breaker);
    fail(&breaker);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.state_since() - created, Duration::from_secs(7));

    // OPEN -> HALF_OPEN on the first call after the wait (R6.3), which
    // passes and closes (R8): two transitions, the last one counts.
    clock.advance(WAIT + Duration::from_secs(1));
    let opened = breaker.state_since();
    assert_eq!(age(&breaker), WAIT + Duration::from_secs(1), "still OPEN");
    succeed(&breaker);
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(
        breaker.state_since() - opened,
        WAIT + Duration::from_secs(1)
    );

    // An override is a state: FORCED_OPEN at +30 s; the same override
    // again, and a reset of a CLOSED breaker, do not move it.
    clock.advance(Duration::from_secs(12));
    breaker.force_open();
    let forced = breaker.state_since();
    clock.advance(Duration::from_secs(3));
    breaker.force_open();
    assert_eq!(breaker.state_since(), forced);
    breaker.reset();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.state_since() - forced, Duration::from_secs(3));
    let closed = breaker.state_since();
    clock.advance(Duration::from_secs(1));
    breaker.reset();
    assert_eq!(breaker.state_since(), closed, "reset of CLOSED: no change");
    assert_eq!(breaker.created_at(), created, "created_at never moves");
}

#[test]
fn registry_breakers_have_their_own_creation_times() {
    let clock = ManualClock::new();
    let registry = Registry::builder().clock(clock.clone()).build().unwrap();
    let first = registry.get("first");
    clock.advance(Duration::from_secs(42));
    let second = registry.get("second");
    assert_eq!(
        second.created_at() - first.created_at(),
        Duration::from_secs(42)
    );
    assert_eq!(first.now(), second.now());
    assert!(registry.coordinator().is_none(), "not coordinated");
}

/// Two instances of a service (one coordinator each) on one storage.
struct TwoInstances {
    clock: ManualClock,
    here: Registry<interlock::mode::Blocking>,
    here_lane: Coordinator<interlock::mode::Blocking>,
    there: Registry<interlock::mode::Blocking>,
    there_lane: Coordinator<interlock::mode::Blocking>,
}

fn two_instances(storage: MemoryStorage) -> TwoInstances {
    let clock = ManualClock::new();
    let here_lane = Coordinator::manual(storage.clone());
    let there_lane = Coordinator::manual(storage);
    let build = |lane: &Coordinator<interlock::mode::Blocking>| {
        Registry::builder()
            .config(config())
            .clock(clock.clone())
            .coordinator(lane)
            .build()
            .unwrap()
    };
    TwoInstances {
        here: build(&here_lane),
        there: build(&there_lane),
        clock: clock.clone(),
        here_lane,
        there_lane,
    }
}

#[test]
fn a_fenced_fleet_trip_and_close_reach_every_instance() {
    let storage = MemoryStorage::new();
    let fleet = two_instances(storage.clone());
    let here = fleet.here.get("payments");
    let there = fleet.there.get("payments");
    fleet.here_lane.run_writes();
    fleet.there_lane.run_writes();

    // The registry hands back the coordinator it was built with.
    let coordinator = fleet.here.coordinator().unwrap();
    assert_eq!(coordinator.breakers(), 1);

    let shown = coordinator.read_shared("payments").unwrap();
    assert_eq!((shown.state, shown.version), (State::Closed, 0));
    fleet.clock.advance(Duration::from_secs(3));
    let tripped = coordinator.trip_shared("payments", shown.version).unwrap();
    assert_eq!((tripped.state, tripped.version), (State::Open, 1));
    assert_eq!(storage.peek("payments").unwrap().version, 1);
    // This instance adopted the answer at once, with the moment it did.
    assert_eq!(here.state(), State::Open);
    assert_eq!(here.shared_view(), Some(tripped));
    assert_eq!(age(&here), Duration::ZERO);
    // The other one at its next poll.
    assert_eq!(there.state(), State::Closed);
    fleet.there_lane.poll();
    assert_eq!(there.state(), State::Open);

    // Fenced: an operator still looking at v0 changes nothing, and is told
    // what the state is now.
    let stale = coordinator.close_shared("payments", 0).unwrap();
    assert_eq!((stale.state, stale.version), (State::Open, 1));
    let again = coordinator.trip_shared("payments", 1).unwrap();
    assert_eq!(again, tripped, "already OPEN: nothing but the TTL changes");

    // The close at the version shown closes the fleet; a later shared
    // CLOSED resets both local machines (R15.6).
    let closed = coordinator.close_shared("payments", 1).unwrap();
    assert_eq!((closed.state, closed.version), (State::Closed, 2));
    assert_eq!(here.state(), State::Closed);
    fleet.there_lane.poll();
    assert_eq!(there.state(), State::Closed);
    succeed(&there);
    assert_eq!(there.snapshot().total_calls, 1);
}

#[test]
fn fleet_writes_for_a_name_this_instance_lacks_create_nothing_here() {
    let storage = MemoryStorage::new();
    let fleet = two_instances(storage.clone());
    let coordinator = fleet.here.coordinator().unwrap();
    let tripped = coordinator.trip_shared("search", 0).unwrap();
    assert_eq!(tripped.state, State::Open);
    assert!(fleet.here.is_empty(), "no breaker created");
    // An instance that has it adopts it.
    let there = fleet.there.get("search");
    fleet.there_lane.run_writes();
    assert_eq!(there.state(), State::Open);
}

#[tokio::test(flavor = "current_thread")]
async fn the_async_forms_are_fenced_and_adopted_the_same_way() {
    let storage = MemoryStorage::new();
    let lane = Coordinator::manual_async(storage.clone());
    let registry = Registry::builder()
        .config(config())
        .coordinator(&lane)
        .build()
        .unwrap();
    let breaker = registry.get("inventory");
    lane.run_writes().await;
    let coordinator = registry.coordinator().unwrap();
    let shown = coordinator.read_shared("inventory").await.unwrap();
    assert_eq!(shown.version, 0);
    let tripped = coordinator.trip_shared("inventory", 0).await.unwrap();
    assert_eq!((tripped.state, tripped.version), (State::Open, 1));
    assert_eq!(breaker.state(), State::Open);
    let stale = coordinator.close_shared("inventory", 0).await.unwrap();
    assert_eq!(stale, tripped, "fenced out");
    let closed = coordinator.close_shared("inventory", 1).await.unwrap();
    assert_eq!((closed.state, closed.version), (State::Closed, 2));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(storage.peek("inventory").unwrap().version, 2);
}

#[cfg(feature = "testing")]
mod faults {
    use super::*;
    use interlock::storage::testing::{FlakyStorage, is_injected};

    /// A storage fault reaches the operator, not the breakers: none of them
    /// degrades for it, and nothing is written.
    #[test]
    fn a_storage_fault_is_the_operators_error_and_degrades_nobody() {
        let flaky = FlakyStorage::new(MemoryStorage::new());
        let lane = Coordinator::manual(flaky.clone());
        let registry = Registry::builder()
            .config(config())
            .coordinator(&lane)
            .build()
            .unwrap();
        let breaker = registry.get("payments");
        lane.run_writes();
        flaky.set_down(true);
        for result in [
            lane.read_shared("payments"),
            lane.trip_shared("payments", 0),
            lane.close_shared("payments", 0),
        ] {
            assert!(is_injected(&result.unwrap_err()));
        }
        assert!(!breaker.is_degraded());
        assert_eq!(breaker.state(), State::Closed);
        flaky.set_down(false);
        assert_eq!(flaky.inner().peek("payments"), None, "nothing written");
        assert_eq!(lane.trip_shared("payments", 0).unwrap().version, 1);
        assert_eq!(breaker.state(), State::Open);
    }
}
