//! The pure `Machine`, driven directly (no breaker, no clock): its refusals,
//! stale and out-of-state inputs, accessors and the `State` vocabulary.
//! Rules: R1.1, R3.1, R6, R8.8–R8.10, R10, R11.1, R12.2.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::time::Duration;

use interlock::{
    Admission, Config, HalfOpenPolicy, Machine, Outcome, ParseStateError, ProbeCounters, Refusal,
    SlidingWindow, State, Timestamp, Transition, TripPolicy,
};

const T0: Timestamp = Timestamp::ZERO;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn at(s: u64) -> Timestamp {
    T0 + secs(s)
}

/// Trips after one failure; 10 s wait, doubled per failed round up to 30 s;
/// rounds of 2 probes, both at once.
fn config() -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(2))
        .wait_duration_in_open(secs(10))
        .wait_duration_backoff_multiplier(2.0)
        .wait_duration_in_open_max(Some(secs(30)))
        .permitted_calls_in_half_open(2)
        .max_concurrent_probes(2)
        .build()
        .unwrap()
}

fn tripped(config: Config) -> Machine {
    let mut m = Machine::new(config, State::Closed).unwrap();
    let (a, _) = m.try_acquire(T0).unwrap();
    assert_eq!(
        m.record(T0, a, Outcome::Failure, false),
        Some(Transition {
            from: State::Closed,
            to: State::Open
        })
    );
    m
}

#[test]
fn r1_1_states_round_trip_through_their_identifiers() {
    for state in State::ALL {
        assert_eq!(state.as_str().parse::<State>(), Ok(state));
        assert_eq!(state.to_string(), state.as_str());
    }
    let err: ParseStateError = "half-open".parse::<State>().unwrap_err();
    assert_eq!(err.to_string(), r#"unknown breaker state "half-open""#);
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert!(boxed.source().is_none());
    assert!("".parse::<State>().is_err());
    assert!(
        "CLOSED".parse::<State>().is_err(),
        "identifiers are lowercase"
    );
}

#[test]
fn r1_1_state_classification() {
    let admits: Vec<State> = State::ALL.into_iter().filter(|s| s.admits_all()).collect();
    assert_eq!(
        admits,
        [State::Closed, State::Disabled, State::MetricsOnly],
        "only these admit every call"
    );
    let overrides: Vec<State> = State::ALL.into_iter().filter(|s| s.is_override()).collect();
    assert_eq!(
        overrides,
        [State::ForcedOpen, State::Disabled, State::MetricsOnly]
    );
    let initial: Vec<State> = State::ALL
        .into_iter()
        .filter(|s| s.is_valid_initial())
        .collect();
    assert_eq!(
        initial,
        [
            State::Closed,
            State::ForcedOpen,
            State::Disabled,
            State::MetricsOnly
        ]
    );
}

#[test]
fn r1_2_outcomes_from_flags_and_identifiers() {
    let all = [
        (false, false, Outcome::Success, "success"),
        (true, false, Outcome::Failure, "failure"),
        (false, true, Outcome::SlowSuccess, "slow_success"),
        (true, true, Outcome::SlowFailure, "slow_failure"),
    ];
    for (failed, slow, outcome, id) in all {
        assert_eq!(Outcome::from_flags(failed, slow), outcome);
        assert_eq!(outcome.is_failure(), failed);
        assert_eq!(outcome.is_slow(), slow);
        assert_eq!(outcome.to_string(), id);
    }
}

#[test]
fn r3_1_open_and_half_open_are_not_initial_states() {
    for state in [State::Open, State::HalfOpen] {
        let err = Machine::new(config(), state).unwrap_err();
        assert_eq!(err.field(), "initial_state");
        assert!(err.reason().contains(state.as_str()), "{}", err.reason());
    }
    let m = Machine::new(config(), State::Disabled).unwrap();
    assert_eq!(m.state(), State::Disabled);
    assert_eq!(m.generation(), 0, "construction is not a transition");
    assert_eq!(m.config(), &config());
}

#[test]
fn r6_open_refuses_with_the_time_left_then_admits_the_first_probe() {
    let mut m = tripped(config());
    assert_eq!(m.opened_at(), T0);
    assert_eq!(m.open_wait(), secs(10));
    assert_eq!(m.open_until(), at(10));
    assert_eq!(
        m.try_acquire(at(4)).unwrap_err(),
        Refusal {
            state: State::Open,
            retry_after: Some(secs(6)),
        }
    );
    assert_eq!(m.retry_after(at(4)), Some(secs(6)));
    assert_eq!(m.retry_after(at(11)), Some(Duration::ZERO), "R6.2");
    let generation = m.generation();
    let (probe, change) = m.try_acquire(at(10)).unwrap();
    assert_eq!(
        change,
        Some(Transition {
            from: State::Open,
            to: State::HalfOpen
        })
    );
    assert_eq!(
        probe,
        Admission {
            generation: generation + 1,
            probe: true
        }
    );
    assert_eq!(m.retry_after(at(10)), None, "only OPEN has a retry time");
    assert_eq!(
        m.probes(),
        ProbeCounters {
            admitted: 1,
            in_flight: 1,
            ..ProbeCounters::default()
        }
    );
}

#[test]
fn r6_forced_open_refuses_forever_without_estimate() {
    let mut m = Machine::new(config(), State::ForcedOpen).unwrap();
    for t in [0, 1_000, 1_000_000] {
        assert_eq!(
            m.try_acquire(at(t)).unwrap_err(),
            Refusal {
                state: State::ForcedOpen,
                retry_after: None
            }
        );
    }
    assert_eq!(m.retry_after(at(5)), None);
}

#[test]
fn r8_6_half_open_refuses_beyond_either_cap_without_estimate() {
    let mut m = tripped(config());
    let (first, _) = m.try_acquire(at(10)).unwrap();
    let (second, none) = m.try_acquire(at(10)).unwrap();
    assert_eq!(none, None);
    let refused = m.try_acquire(at(10)).unwrap_err();
    assert_eq!(refused.state, State::HalfOpen);
    assert_eq!(refused.retry_after, None);
    // A released probe gives back its slot and its budget (R8.9).
    m.release(second);
    assert_eq!(m.probes().admitted, 1);
    assert_eq!(m.probes().in_flight, 1);
    let (third, _) = m.try_acquire(at(10)).unwrap();
    assert_eq!(m.record(at(10), first, Outcome::Success, false), None);
    assert_eq!(
        m.record(at(10), third, Outcome::Success, false),
        Some(Transition {
            from: State::HalfOpen,
            to: State::Closed
        })
    );
    assert_eq!(m.failed_rounds(), 0);
}

#[test]
fn r8_8_stale_admissions_change_nothing() {
    let mut m = Machine::new(config(), State::Closed).unwrap();
    let (old, _) = m.try_acquire(T0).unwrap();
    assert_eq!(m.reset(), None, "CLOSED to CLOSED: no state change");
    assert_eq!(m.generation(), 1, "but a new generation");
    assert_eq!(m.record(T0, old, Outcome::Failure, false), None);
    assert_eq!(
        m.snapshot(T0).total_calls,
        0,
        "the stale failure is ignored"
    );
    // A stale probe's release hands back nothing.
    let mut m = tripped(config());
    let (probe, _) = m.try_acquire(at(10)).unwrap();
    let _ = m.override_to(State::ForcedOpen);
    let _ = m.reset();
    m.release(probe);
    assert_eq!(m.probes(), ProbeCounters::default());
    // A release outside HALF_OPEN hands back nothing either.
    let (call, _) = m.try_acquire(at(10)).unwrap();
    m.release(call);
    assert_eq!(m.probes(), ProbeCounters::default());
    assert_eq!(m.state(), State::Closed);
}

#[test]
fn r8_10_records_in_open_forced_open_and_disabled_are_no_ops() {
    for to in [State::ForcedOpen, State::Disabled] {
        let mut m = Machine::new(config(), State::Closed).unwrap();
        let _ = m.override_to(to);
        let admission = Admission {
            generation: m.generation(),
            probe: false,
        };
        assert_eq!(m.record(T0, admission, Outcome::Failure, false), None);
        assert_eq!(m.state(), to);
        assert_eq!(m.snapshot(T0).total_calls, 0);
    }
    let mut m = tripped(config());
    let admission = Admission {
        generation: m.generation(),
        probe: false,
    };
    assert_eq!(m.record(at(1), admission, Outcome::Failure, false), None);
    assert_eq!(m.state(), State::Open);
    assert_eq!(m.snapshot(at(1)).total_calls, 1, "only the tripping call");
}

#[test]
fn r11_1_only_overrides_are_accepted_by_override_to() {
    let mut m = Machine::new(config(), State::Closed).unwrap();
    for not_an_override in [State::Closed, State::Open, State::HalfOpen] {
        assert_eq!(m.override_to(not_an_override), None);
        assert_eq!(m.generation(), 0, "ignored entirely");
    }
    assert_eq!(
        m.override_to(State::MetricsOnly),
        Some(Transition {
            from: State::Closed,
            to: State::MetricsOnly
        })
    );
    assert_eq!(m.override_to(State::MetricsOnly), None, "repeated");
    assert_eq!(m.generation(), 2, "a repeat still moves the generation");
    let (a, _) = m.try_acquire(T0).unwrap();
    assert_eq!(
        m.record(T0, a, Outcome::Failure, false),
        None,
        "never trips"
    );
    assert_eq!(m.snapshot(T0).failed_calls, 1, "but counts");
    assert_eq!(
        m.reset(),
        Some(Transition {
            from: State::MetricsOnly,
            to: State::Closed
        })
    );
    assert_eq!(m.snapshot(T0).total_calls, 0, "reset empties the window");
}

#[test]
fn r10_failed_rounds_back_off_and_a_passing_round_resets() {
    let mut m = tripped(config());
    let mut t = 0;
    for (round, wait) in [(1, 20), (2, 30), (3, 30)] {
        t += m.open_wait().as_secs();
        let (a, _) = m.try_acquire(at(t)).unwrap();
        let (b, _) = m.try_acquire(at(t)).unwrap();
        let _ = m.record(at(t), a, Outcome::Failure, false);
        let _ = m.record(at(t), b, Outcome::Success, false);
        assert_eq!(m.state(), State::Open);
        assert_eq!(m.failed_rounds(), round);
        assert_eq!(m.open_wait(), secs(wait));
        assert_eq!(m.opened_at(), at(t), "the wait restarts at the decision");
    }
    let _ = m.reset();
    assert_eq!(m.failed_rounds(), 0);
}

#[test]
fn r12_2_the_timer_moves_only_its_own_elapsed_open_period() {
    let mut m = tripped(config());
    let generation = m.generation();
    assert_eq!(m.on_timer(at(9), generation), None, "not yet elapsed");
    assert_eq!(m.on_timer(at(10), generation + 1), None, "another period");
    assert_eq!(
        m.on_timer(at(10), generation),
        Some(Transition {
            from: State::Open,
            to: State::HalfOpen
        })
    );
    assert_eq!(m.probes().admitted, 0, "no probe admitted by the timer");
    assert_eq!(
        m.on_timer(at(10), m.generation()),
        None,
        "not OPEN any more"
    );
}

#[test]
fn r9_5_inconclusive_probes_reopen_as_a_failed_round() {
    // Revised after checking 2.8.2 (D3): a re-open caused only by
    // inconclusive probes counts for the backoff, 10 s doubled to 20 s.
    let mut m = tripped(config());
    for _ in 0..2 {
        let (p, _) = m.try_acquire(at(10)).unwrap();
        let _ = m.record(at(10), p, Outcome::Failure, true);
    }
    assert_eq!(m.state(), State::Open);
    assert_eq!(m.failed_rounds(), 1);
    assert_eq!(
        m.probes().inconclusive,
        2,
        "stale figures stay in OPEN (R8.11)"
    );
    assert_eq!(m.open_wait(), secs(20));
}

#[test]
fn r9_4_inconclusive_probes_do_not_reopen_while_a_probe_is_in_flight() {
    // The 2.8.2 trace, on the machine: the second inconclusive probe
    // reaches the budget of 2 while `c` is in flight, so the round goes on
    // (re-opening would throw c's verdict away); c and one more success
    // close it.
    let mut m = tripped(config());
    let (a, _) = m.try_acquire(at(10)).unwrap();
    let (b, _) = m.try_acquire(at(10)).unwrap();
    assert_eq!(m.record(at(10), a, Outcome::Failure, true), None);
    let (c, _) = m.try_acquire(at(10)).unwrap();
    assert_eq!(m.record(at(10), b, Outcome::Failure, true), None);
    assert_eq!(m.state(), State::HalfOpen, "c is still in flight");
    assert_eq!(m.probes().inconclusive, 2);
    assert_eq!(m.record(at(10), c, Outcome::Success, false), None);
    let (d, _) = m.try_acquire(at(10)).unwrap();
    assert_eq!(
        m.record(at(10), d, Outcome::Success, false),
        Some(Transition {
            from: State::HalfOpen,
            to: State::Closed
        })
    );
}

#[test]
fn failures_within_counts_only_the_period_on_the_machine() {
    let config = Config::builder()
        .trip_policy(TripPolicy::failures_within(2, secs(5)))
        .build()
        .unwrap();
    let mut m = Machine::new(config, State::Closed).unwrap();
    for t in [0, 6, 12] {
        let (a, _) = m.try_acquire(at(t)).unwrap();
        assert_eq!(m.record(at(t), a, Outcome::Failure, false), None, "at {t}");
    }
    let (a, _) = m.try_acquire(at(17)).unwrap();
    assert!(m.record(at(17), a, Outcome::Failure, false).is_some());
}

#[test]
fn d7_a_held_up_round_is_abandoned_in_a_new_generation_under_every_policy() {
    for policy in [
        HalfOpenPolicy::ProbeRound,
        HalfOpenPolicy::consecutive_successes(2),
    ] {
        let config = Config::builder()
            .minimum_number_of_calls(1)
            .wait_duration_in_open(secs(10))
            .permitted_calls_in_half_open(3)
            .max_concurrent_probes(2)
            .half_open_policy(policy)
            .build()
            .unwrap();
        let mut m = tripped(config);
        let (lost, _) = m.try_acquire(at(10)).unwrap();
        let (_, _) = m.try_acquire(at(10)).unwrap();
        assert!(m.try_acquire(at(19)).is_err(), "{policy:?}");
        let generation = m.generation();
        let (fresh, change) = m.try_acquire(at(20)).unwrap();
        assert_eq!(change, None, "the state does not change");
        assert_eq!(fresh.generation, generation + 1);
        let p = m.probes();
        assert_eq!((p.admitted, p.in_flight, p.inconclusive), (1, 1, 2));
        assert_eq!(m.record(at(20), lost, Outcome::Failure, false), None);
        assert_eq!(m.state(), State::HalfOpen, "the lost probe is stale");
        assert_eq!(m.failed_rounds(), 0, "no round has failed");
    }
}

#[test]
fn d7_abandoned_probes_that_spend_the_budget_reopen_and_the_call_is_refused() {
    let mut m = tripped(config()); // 2 permitted, both at once, backoff 2x
    let (lost, _) = m.try_acquire(at(10)).unwrap();
    let (_, _) = m.try_acquire(at(10)).unwrap();
    let refused = m.try_acquire(at(20)).unwrap_err();
    assert_eq!(
        refused,
        Refusal {
            state: State::Open,
            retry_after: Some(secs(20)),
        },
        "R9.4 and R9.5: a failed round, refused by the new OPEN period"
    );
    assert_eq!(m.state(), State::Open);
    assert_eq!((m.failed_rounds(), m.opened_at()), (1, at(20)));
    assert_eq!(m.record(at(21), lost, Outcome::Success, false), None);
    assert_eq!(m.state(), State::Open, "the lost probe is stale");
}

#[test]
fn policy_limits_are_inclusive() {
    // The largest allowed counts build; one more is rejected by name.
    let most = interlock::MAX_FAILURES_WITHIN;
    let config = Config::builder()
        .trip_policy(TripPolicy::failures_within(most, secs(1)))
        .build()
        .unwrap();
    assert_eq!(
        config.trip_policy(),
        TripPolicy::failures_within(most, secs(1))
    );
    let err = Config::builder()
        .trip_policy(TripPolicy::failures_within(most + 1, secs(1)))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "trip_policy");
    assert!(
        err.reason().contains(&(most + 1).to_string()),
        "{}",
        err.reason()
    );
    let config = Config::builder()
        .permitted_calls_in_half_open(3)
        .half_open_policy(HalfOpenPolicy::consecutive_successes(3))
        .build()
        .unwrap();
    assert_eq!(
        config.half_open_policy(),
        HalfOpenPolicy::consecutive_successes(3)
    );
    let config = Config::builder()
        .trip_policy(TripPolicy::consecutive_failures(1))
        .trip_policy(TripPolicy::failures_within(1, Duration::from_nanos(1)))
        .build()
        .unwrap();
    assert_eq!(
        config.trip_policy(),
        TripPolicy::failures_within(1, Duration::from_nanos(1))
    );
}
