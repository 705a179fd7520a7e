//! No memory growth: the live heap is the same before and after 1,000,000 trip/recover
//! cycles of one breaker, and before and after creating and dropping 100,000 breakers (plain,
//! and with `auto_transition(true)` tripped once, whose armed timer entry must be freed with
//! the breaker).
//!
//! Deterministic: live bytes come from `allocation-counter`'s counting `#[global_allocator]`
//! (the workspace forbids `unsafe`, so the test cannot define one), which counts the calling
//! thread; everything measured here allocates and frees on that thread (the `auto_transition`
//! timers are an hour away, so the timer thread never fires one). Resident memory is printed
//! for the record only (`--nocapture`), never asserted.
//!
//! Debug builds run a tenth of the iterations to stay within a few seconds; the release
//! figures in `docs/performance.md` were measured with
//! `cargo test --release -p interlock --test memory -- --nocapture`.
#![allow(clippy::unwrap_used)]

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use allocation_counter::{AllocationInfo, measure};
use interlock::{CircuitBreaker, Config, ManualClock, SlidingWindow, State};

/// Iterations: the full counts in release, a tenth in debug.
const fn scaled(n: usize) -> usize {
    if cfg!(debug_assertions) { n / 10 } else { n }
}

const CYCLES: usize = scaled(1_000_000);
const BREAKERS: usize = scaled(100_000);
const WARM_UP: usize = 1_000;

/// One scenario at a time, so the resident-memory figures belong to it alone.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Debug, Clone, Copy)]
struct Boom;

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("upstream returned 503")
    }
}

impl std::error::Error for Boom {}

/// Resident set size in KiB (Linux), for the record.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Warms `step` up, then runs it `n` times while counting: the net heap must not move.
fn assert_flat(what: &str, n: usize, mut step: impl FnMut()) -> AllocationInfo {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..WARM_UP {
        step();
    }
    let rss_before = rss_kib();
    let info = measure(|| {
        for _ in 0..n {
            step();
        }
    });
    let rss_after = rss_kib();
    eprintln!(
        "{what}: {n} iterations, {} allocations ({} bytes) made, net {} allocations / {} bytes \
         live, peak {} bytes; RSS {rss_before:?} KiB -> {rss_after:?} KiB",
        info.count_total, info.bytes_total, info.count_current, info.bytes_current, info.bytes_max
    );
    assert_eq!(
        (info.count_current, info.bytes_current),
        (0, 0),
        "{what}: the live heap grew over {n} iterations"
    );
    info
}

fn trip_recover_config(auto_transition: bool) -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .sliding_window(SlidingWindow::count(1))
        .permitted_calls_in_half_open(1)
        .wait_duration_in_open(Duration::from_secs(1))
        .auto_transition(auto_transition)
        .build()
        .unwrap()
}

fn trip_recover_cycles(auto_transition: bool) -> AllocationInfo {
    let clock = ManualClock::new();
    let b = CircuitBreaker::builder("cycles")
        .config(trip_recover_config(auto_transition))
        .clock(clock.clone())
        .build()
        .unwrap();
    let generation = b.generation();
    let cycle = || {
        assert!(b.call(|| Err::<(), _>(Boom)).is_err());
        debug_assert_eq!(b.state(), State::Open);
        clock.advance(Duration::from_secs(1));
        assert!(b.call(|| Ok::<_, Boom>(())).is_ok());
        debug_assert_eq!(b.state(), State::Closed);
    };
    let what = if auto_transition {
        "trip/recover cycles (auto_transition)"
    } else {
        "trip/recover cycles"
    };
    let info = assert_flat(what, CYCLES, cycle);
    // Each cycle is three transitions: CLOSED -> OPEN -> HALF_OPEN -> CLOSED.
    assert_eq!(b.generation() - generation, 3 * (WARM_UP + CYCLES) as u64);
    info
}

#[test]
fn trip_recover_cycles_leave_the_heap_flat() {
    let info = trip_recover_cycles(false);
    // Not only flat: a trip/recover cycle allocates nothing at all.
    assert_eq!(info.count_total, 0);
}

#[test]
fn trip_recover_cycles_with_auto_transition_leave_the_heap_flat() {
    // Every trip arms a timer and every recovery cancels it.
    trip_recover_cycles(true);
}

#[test]
fn creating_and_dropping_breakers_leaves_the_heap_flat() {
    assert_flat("create + drop breakers", BREAKERS, || {
        let b = CircuitBreaker::new("short-lived");
        assert!(b.call(|| Ok::<_, Boom>(())).is_ok());
    });
}

#[test]
fn dropping_a_tripped_auto_transition_breaker_frees_its_timer() {
    let config = Config::builder()
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(3600))
        .auto_transition(true)
        .build()
        .unwrap();
    assert_flat(
        "create + trip (timer armed) + drop auto_transition breakers",
        BREAKERS,
        || {
            let b = CircuitBreaker::builder("short-lived")
                .config(config.clone())
                .build()
                .unwrap();
            assert!(b.call(|| Err::<(), _>(Boom)).is_err());
            assert_eq!(b.state(), State::Open);
        },
    );
}
