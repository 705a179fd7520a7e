//! A real `fork()` (issue 20, item 2): a child process inherits the
//! parent's breakers but none of its background threads (the coarse
//! clock's ticker, the `auto_transition` timer, the coordinator lanes). The
//! child's breakers must keep time, timers and coordination: the threads
//! come back by themselves.
//!
//! Its own test binary with one test, so that the process forks from a
//! known state (two threads: the harness and this test). The child reports
//! through its exit status and a report file; every wait in it has a
//! deadline, so a broken child still exits.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // the child's steps are plain functions
#![allow(
    clippy::disallowed_methods,
    reason = "the behaviour under test is what real threads do on real time; every wait has a deadline"
)]

use std::error::Error;
use std::fmt;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use fork::{Fork, WEXITSTATUS, WIFEXITED, fork, waitpid};
use interlock::mode::Blocking;
use interlock::storage::{Coordinator, MemoryStorage, StorageSettings};
use interlock::{
    CallError, CircuitBreaker, Clock, CoarseClock, Config, ManualClock, SlidingWindow, State,
};

#[derive(Debug)]
struct Boom;

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("boom")
    }
}

impl Error for Boom {}

const DEADLINE: Duration = Duration::from_secs(30);

/// Trips at the first failure; OPEN for `wait`.
fn trips_at_once(wait: Duration, auto_transition: bool) -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .wait_duration_in_open(wait)
        .permitted_calls_in_half_open(1)
        .auto_transition(auto_transition)
        .build()
        .unwrap()
}

fn fail(breaker: &CircuitBreaker<impl interlock::mode::SyncApi>) {
    let _ = breaker.call(|| Err::<(), _>(Boom));
}

/// Polls `done` until it holds or the deadline passes.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// Threads of this process named like the coarse clock's
/// (`interlock-coarse-clock`, which the kernel shortens to 15 bytes).
fn clock_thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |tasks| {
        tasks
            .filter_map(Result::ok)
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|comm| comm.trim_end() == "interlock-coars")
            })
            .count()
    })
}

/// What the parent prepared, inherited by the child.
struct World {
    /// Tripped by the parent: OPEN for 300 ms on the default clock
    /// (`CoarseClock`), no `auto_transition`.
    opened: CircuitBreaker,
    /// Slow-call threshold 100 ms (so it reads `CoarseClock`).
    slow: CircuitBreaker,
    /// A one-second time window holding the parent's three failures.
    window: CircuitBreaker,
    /// Tripped by the parent with `auto_transition`: its timer is pending
    /// in the parent's timer thread when the process forks.
    timer_from_parent: CircuitBreaker,
    /// `auto_transition`, tripped by the child.
    timer_in_child: CircuitBreaker,
    /// `auto_transition` on a `ManualClock`: the child trips it first, so
    /// that the timer (not the coarse clock) is the first to notice the fork.
    first_to_notice: CircuitBreaker,
    /// One storage, two background coordinators ("two instances").
    storage: MemoryStorage,
    here: CircuitBreaker<Blocking>,
    there: CircuitBreaker<Blocking>,
    _lanes: (Coordinator<Blocking>, Coordinator<Blocking>),
}

fn prepare() -> World {
    let opened = CircuitBreaker::builder("opened")
        .config(trips_at_once(Duration::from_millis(300), false))
        .build()
        .unwrap();
    fail(&opened);
    assert_eq!(opened.state(), State::Open);

    let slow = CircuitBreaker::builder("slow")
        .config(
            Config::builder()
                .slow_call_duration_threshold(Duration::from_millis(100))
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();

    let window = CircuitBreaker::builder("window")
        .config(
            Config::builder()
                .sliding_window(SlidingWindow::time(Duration::from_secs(1)))
                .minimum_number_of_calls(100)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    for _ in 0..3 {
        fail(&window);
    }
    assert_eq!(window.snapshot().total_calls, 3);

    let timer_from_parent = CircuitBreaker::builder("timer-from-parent")
        .config(trips_at_once(Duration::from_millis(400), true))
        .build()
        .unwrap();
    let timer_in_child = CircuitBreaker::builder("timer-in-child")
        .config(trips_at_once(Duration::from_millis(50), true))
        .build()
        .unwrap();
    let first_to_notice = CircuitBreaker::builder("first-to-notice")
        .config(trips_at_once(Duration::from_secs(3600), true))
        .clock(ManualClock::new())
        .build()
        .unwrap();

    let settings = StorageSettings::builder()
        .poll_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let storage = MemoryStorage::builder().settings(settings).build();
    let lanes = (
        Coordinator::blocking(storage.clone()),
        Coordinator::blocking(storage.clone()),
    );
    let here = CircuitBreaker::builder("shared")
        .config(trips_at_once(Duration::from_secs(60), false))
        .coordinator(&lanes.0)
        .build()
        .unwrap();
    let there = CircuitBreaker::builder("shared")
        .config(trips_at_once(Duration::from_secs(60), false))
        .coordinator(&lanes.1)
        .build()
        .unwrap();
    // Both lanes run (they have polled) before the fork.
    assert!(eventually(|| storage.operations().total() >= 2));

    // The timer is armed last, and the clock's thread is ticking.
    fail(&timer_from_parent);
    assert_eq!(timer_from_parent.state(), State::Open);
    let start = CoarseClock.now();
    assert!(
        eventually(|| CoarseClock.now() > start),
        "the parent's clock ticks"
    );
    assert_eq!(clock_thread_count(), 1);

    World {
        opened,
        slow,
        window,
        timer_from_parent,
        timer_in_child,
        first_to_notice,
        storage,
        here,
        there,
        _lanes: lanes,
    }
}

/// The child's steps, each appending what it saw to `report`; `true` if
/// every step held.
fn child(world: &World, report: &mut String) -> bool {
    let mut ok = true;
    let mut step = |name: &str, held: bool, detail: String| {
        let _ = writeln!(
            report,
            "{} {name}: {detail}",
            if held { "ok  " } else { "FAIL" }
        );
        ok &= held;
    };

    // The first owner to notice the fork (here the timer, armed before any
    // coarse reading) brings the others back: the clock's thread starts
    // without waiting for a reader's check.
    let no_clock_thread_yet = clock_thread_count() == 0;
    fail(&world.first_to_notice);
    let clock_back = eventually(|| clock_thread_count() == 1);
    step(
        "the timer noticing the fork restarts the clock's thread",
        no_clock_thread_yet && clock_back,
        format!(
            "none before: {no_clock_thread_yet}, {} after",
            clock_thread_count()
        ),
    );

    // R6: the parent's OPEN period ends in the child. Before, the frozen
    // clock made every call a rejection with the same `retry_after`.
    let mut rejections = 0u32;
    let mut retry_afters = std::collections::BTreeSet::new();
    let admitted = eventually(|| match world.opened.call(|| Ok::<_, Boom>(())) {
        Ok(()) => true,
        Err(CallError::Rejected(open)) => {
            rejections += 1;
            retry_afters.insert(open.retry_after());
            false
        }
        Err(CallError::Inner(_)) => false,
    });
    step(
        "a breaker tripped before the fork leaves OPEN",
        admitted && world.opened.state() == State::Closed,
        format!(
            "admitted {admitted}, {rejections} rejections with {} distinct retry_after, state {:?}",
            retry_afters.len(),
            world.opened.state()
        ),
    );

    // R4.3: a slow call in the child is measured, not read off a frozen
    // clock as zero.
    let _ = world.slow.call(|| {
        let end = Instant::now() + Duration::from_millis(250);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok::<_, Boom>(())
    });
    let slow = world.slow.snapshot().slow_calls;
    step(
        "a slow call is detected",
        slow == 1,
        format!("{slow} slow calls"),
    );

    // R5.2: the parent's failures leave the time window by time alone.
    let drained = eventually(|| world.window.snapshot().total_calls == 0);
    step(
        "a time window drains",
        drained,
        format!("{} calls left", world.window.snapshot().total_calls),
    );

    // R12.2: the timer armed by the parent fires in the child.
    let fired = eventually(|| world.timer_from_parent.state() == State::HalfOpen);
    step(
        "a timer armed before the fork fires",
        fired,
        format!("state {:?}", world.timer_from_parent.state()),
    );

    // R12.1: a timer armed by the child fires.
    fail(&world.timer_in_child);
    let tripped = world.timer_in_child.state() == State::Open;
    let fired = eventually(|| world.timer_in_child.state() == State::HalfOpen);
    step(
        "a timer armed in the child fires",
        tripped && fired,
        format!(
            "tripped {tripped}, state {:?}",
            world.timer_in_child.state()
        ),
    );

    // R15.4, R17.1: coordination goes on: the local trip is written by
    // this lane, and the other lane (which has nothing to write) polls and
    // adopts the shared OPEN.
    fail(&world.here);
    let written = eventually(|| {
        world
            .storage
            .peek("shared")
            .is_some_and(|s| s.state == State::Open)
    });
    let adopted = eventually(|| world.there.state() == State::Open);
    step(
        "coordination: the trip is written and polled",
        written && adopted,
        format!(
            "written {written}, other instance {:?} (view {:?})",
            world.there.state(),
            world.there.shared_view().map(|v| v.state)
        ),
    );
    ok
}

#[test]
fn a_forked_childs_breakers_keep_time_timers_and_coordination() {
    let world = prepare();
    let report_path =
        std::env::temp_dir().join(format!("interlock-fork-test-{}.txt", std::process::id()));
    match fork().expect("fork") {
        Fork::Child => {
            let mut report = String::new();
            let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                child(&world, &mut report)
            }))
            .unwrap_or(false);
            let _ = std::fs::write(&report_path, &report);
            std::process::exit(if held { 0 } else { 1 });
        }
        Fork::Parent(pid) => {
            let status = waitpid(pid).expect("waitpid");
            let report = std::fs::read_to_string(&report_path).unwrap_or_default();
            let _ = std::fs::remove_file(&report_path);
            assert!(
                WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "the child (status {status:#x}) reported:\n{report}"
            );
            assert_eq!(report.lines().count(), 7, "{report}");
        }
    }
}
