//! `CoarseClock`'s background thread, watched from outside through Linux's
//! per-thread context-switch counts: it starts on the first read, ticks while
//! the clock is read, parks after a second without readers, and a read after
//! that is precise and starts it again.
//!
//! Its own test binary, whose tests take turns: nothing else in the process
//! may read the coarse clock, or the thread would never go idle.

#![cfg(target_os = "linux")]
#![allow(
    clippy::disallowed_methods,
    reason = "the behaviour under test is what a real thread does on real time; every wait has a deadline"
)]

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use interlock::{CircuitBreaker, Clock, CoarseClock, Config, MonotonicClock, Timestamp};

/// The tests share the one clock thread: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Set by every test before it first reads the coarse clock: a clock read
/// by an earlier test (which may have parked its thread, or never needed
/// one: a precise re-reading also moves the clock on) is no longer "never
/// read", whatever `/proc` shows.
static READ_BEFORE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How long any one phase may take before the test gives up.
const PHASE_DEADLINE: Duration = Duration::from_secs(30);

/// The voluntary context switches of the clock's thread (`interlock-coarse-clock`,
/// which the kernel shortens to 15 bytes), if it exists. A ticking thread
/// sleeps a millisecond per tick and so switches about a thousand times a
/// second; a parked one does not switch at all.
fn clock_thread_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != "interlock-coars" {
            continue;
        }
        let status = std::fs::read_to_string(path.join("status")).ok()?;
        return status
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse().ok());
    }
    None
}

/// A coarse reading between two precise ones: a reading the thread did not
/// supply from its last tick.
fn precise_coarse_reading() -> (Timestamp, Timestamp, Timestamp) {
    let before = MonotonicClock.now();
    let coarse = CoarseClock.now();
    let after = MonotonicClock.now();
    (before, coarse, after)
}

/// Reads the clock until its thread has switched `n` more times.
fn read_until_the_thread_ticked(n: u64, phase: &str) {
    let deadline = MonotonicClock.now() + PHASE_DEADLINE;
    let start = loop {
        let _ = CoarseClock.now();
        if let Some(switches) = clock_thread_switches() {
            break switches;
        }
        assert!(MonotonicClock.now() < deadline, "{phase}: no clock thread");
    };
    loop {
        let _ = CoarseClock.now();
        if clock_thread_switches().is_some_and(|s| s >= start + n) {
            return;
        }
        assert!(
            MonotonicClock.now() < deadline,
            "{phase}: the clock thread does not tick while the clock is read"
        );
        std::thread::yield_now();
    }
}

#[test]
fn the_clock_thread_ticks_while_read_parks_when_idle_and_a_read_wakes_it_precisely() {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    // If nothing has read the coarse clock yet, the first reading is precise.
    let first_test = !READ_BEFORE.swap(true, std::sync::atomic::Ordering::SeqCst);
    if first_test && clock_thread_switches().is_none() {
        let (before, first, after) = precise_coarse_reading();
        assert!(
            before <= first && first <= after,
            "the first reading {first} is not between {before} and {after}"
        );
    }

    read_until_the_thread_ticked(20, "first start");

    // Nobody reads now: after a second of unread ticks the thread parks.
    // Parked is three windows of 200 ms in a row without a switch (a ticking
    // thread switches about 200 times in each).
    let deadline = MonotonicClock.now() + PHASE_DEADLINE;
    let mut quiet_windows = 0;
    let mut last = clock_thread_switches().expect("the clock thread is gone");
    while quiet_windows < 3 {
        assert!(
            MonotonicClock.now() < deadline,
            "the clock thread kept ticking without readers"
        );
        std::thread::sleep(Duration::from_millis(200));
        let now = clock_thread_switches().expect("the clock thread is gone");
        quiet_windows = if now == last { quiet_windows + 1 } else { 0 };
        last = now;
    }

    // The parked thread's last reading is over half a second old; a read
    // must not return it, but a precise one.
    let (before, woken, after) = precise_coarse_reading();
    assert!(
        woken + Duration::from_millis(100) >= before && woken <= after,
        "a read after parking returned a stale reading: {woken}, precise {before}"
    );

    read_until_the_thread_ticked(20, "after parking");
}

/// R4.3 on the default clock when nothing else reads it: the clock thread
/// parks about a second into a long call, so the call's end must not be
/// read from the parked thread's last tick (which would measure this call
/// at about a second, below the half threshold that earns a precise
/// re-reading, and not slow).
#[test]
fn a_long_call_is_measured_whole_while_the_clock_thread_parks_during_it() {
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    READ_BEFORE.store(true, std::sync::atomic::Ordering::SeqCst);
    let threshold = Duration::from_secs(3);
    let breaker = CircuitBreaker::builder("long")
        .config(
            Config::builder()
                .slow_call_duration_threshold(threshold)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    breaker
        .call(|| {
            // A blocking call of the threshold's length; nothing reads the
            // coarse clock meanwhile.
            let end = MonotonicClock.now() + threshold;
            while MonotonicClock.now() < end {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok::<_, std::io::Error>(())
        })
        .unwrap();
    assert_eq!(
        breaker.snapshot().slow_calls,
        1,
        "a call of the slow threshold was measured short"
    );
}
