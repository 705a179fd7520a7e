//! No per-call path allocates: a closed call (on each clock), a rejection in OPEN and
//! FORCED_OPEN, a HALF_OPEN admission with its permit dropped, a registry hit, and a failing
//! call that repeats the previous error (the last-failure record is reused).
//!
//! Allocations are counted by `allocation-counter`'s `#[global_allocator]`, per thread (the
//! workspace forbids `unsafe`, so the tests cannot define a `GlobalAlloc` themselves). Every
//! path here runs entirely on the calling thread, and counting per thread keeps the tests
//! exact while libtest runs them in parallel. Each case warms up first: the first call may
//! allocate once (thread-locals such as the registry's table cache or the failure message
//! buffer, the coarse clock's thread), the next [`CALLS`] calls must not allocate at all.
#![allow(clippy::unwrap_used)]

use std::fmt;
use std::hint::black_box;
use std::time::Duration;

use allocation_counter::{AllocationInfo, measure};
use interlock::{
    CallError, CircuitBreaker, Clock, CoarseClock, Config, ManualClock, MonotonicClock, Registry,
    SlidingWindow, State,
};

/// Calls measured per case, after warm-up.
const CALLS: usize = 10_000;
/// Calls made before measuring.
const WARM_UP: usize = 100;

/// An error whose construction does not allocate (unlike `io::Error::other`), so only the
/// breaker's own allocations are counted.
#[derive(Debug, Clone, Copy)]
struct Boom;

impl fmt::Display for Boom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("upstream returned 503")
    }
}

impl std::error::Error for Boom {}

fn ok() -> Result<u64, Boom> {
    Ok(black_box(1))
}

fn boom() -> Result<u64, Boom> {
    Err(Boom)
}

/// Runs `f` [`WARM_UP`] times, then measures [`CALLS`] more runs.
fn steady_state(mut f: impl FnMut()) -> AllocationInfo {
    for _ in 0..WARM_UP {
        f();
    }
    measure(|| {
        for _ in 0..CALLS {
            f();
        }
    })
}

#[track_caller]
fn assert_no_alloc(path: &str, info: AllocationInfo) {
    assert_eq!(
        info.count_total, 0,
        "{path}: {} allocations ({} bytes) in {CALLS} calls",
        info.count_total, info.bytes_total
    );
}

fn breaker(config: Config, clock: impl Clock) -> CircuitBreaker {
    CircuitBreaker::builder("no-alloc")
        .config(config)
        .clock(clock)
        .build()
        .unwrap()
}

/// Trips on the first failure, then stays OPEN for an hour.
fn trips_at_once() -> Config {
    Config::builder()
        .minimum_number_of_calls(1)
        .wait_duration_in_open(Duration::from_secs(3600))
        .build()
        .unwrap()
}

#[test]
fn closed_call_allocates_nothing_on_every_clock() {
    let clocks: [(&str, CircuitBreaker); 3] = [
        ("monotonic", breaker(Config::default(), MonotonicClock)),
        ("coarse", breaker(Config::default(), CoarseClock)),
        ("manual", breaker(Config::default(), ManualClock::new())),
    ];
    for (clock, b) in clocks {
        let info = steady_state(|| assert!(b.call(ok).is_ok()));
        assert_no_alloc(&format!("closed call ({clock} clock)"), info);
        assert_eq!(b.state(), State::Closed);
        // The permit form of the same path.
        let info = steady_state(|| b.acquire().unwrap().success());
        assert_no_alloc(&format!("closed acquire + success ({clock} clock)"), info);
    }
}

#[test]
fn mixed_traffic_allocates_nothing_in_either_window() {
    // Issue 22: 1% and 10% failures (one call in 100 or in 10, never tripping at 0.5) through
    // a count window of 100 and a 60 s time window: successes on the lock-free lanes, each
    // failure folding them in under the lock, the failure's error repeating (R11.3).
    for (window, sliding) in [
        ("count(100)", SlidingWindow::count(100)),
        ("time(60 s)", SlidingWindow::time(Duration::from_secs(60))),
    ] {
        for period in [100u32, 10] {
            let config = Config::builder().sliding_window(sliding).build().unwrap();
            for (clock, b) in [
                ("coarse", breaker(config.clone(), CoarseClock)),
                ("monotonic", breaker(config.clone(), MonotonicClock)),
            ] {
                let mut n = 0u32;
                let info = steady_state(|| {
                    n += 1;
                    if n % period == 0 {
                        assert!(matches!(b.call(boom), Err(CallError::Inner(Boom))));
                    } else {
                        assert!(b.call(ok).is_ok());
                    }
                });
                assert_no_alloc(
                    &format!("{window}, one failure in {period} ({clock} clock)"),
                    info,
                );
                assert_eq!(b.state(), State::Closed);
                let snapshot = b.snapshot();
                assert!(snapshot.failed_calls > 0, "{window}: {snapshot}");
                assert_no_alloc(
                    &format!("{window}: snapshot folding the lanes"),
                    measure(|| {
                        black_box(b.snapshot());
                    }),
                );
            }
        }
    }
}

#[test]
fn rejection_allocates_nothing() {
    let open = breaker(trips_at_once(), MonotonicClock);
    let _ = open.call(boom);
    assert_eq!(open.state(), State::Open);
    let info = steady_state(|| {
        let Err(CallError::Rejected(e)) = open.call(ok) else {
            panic!("admitted while OPEN")
        };
        assert!(e.retry_after().is_some());
    });
    assert_no_alloc("OPEN rejection (call)", info);
    let info = steady_state(|| assert!(open.acquire().is_err()));
    assert_no_alloc("OPEN rejection (acquire)", info);

    let forced = breaker(Config::default(), MonotonicClock);
    forced.force_open();
    let info = steady_state(|| assert!(forced.call(ok).is_err()));
    assert_no_alloc("FORCED_OPEN rejection", info);
}

#[test]
fn half_open_admission_and_dropped_permit_allocate_nothing() {
    let clock = ManualClock::new();
    let b = breaker(trips_at_once(), clock.clone());
    let _ = b.call(boom);
    clock.advance(Duration::from_secs(3601));
    let info = steady_state(|| {
        let permit = b.acquire().unwrap();
        assert!(permit.is_probe());
        drop(permit);
    });
    assert_no_alloc("HALF_OPEN acquire + drop", info);
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn registry_hit_allocates_nothing() {
    for names in [1, 1_000] {
        let registry = Registry::new();
        let all: Vec<_> = (0..names)
            .map(|i| registry.get(&format!("backend-{i:04}.svc.internal")))
            .collect();
        let name = format!("backend-{:04}.svc.internal", names / 2);
        let info = steady_state(|| assert!(registry.get(&name).ptr_eq(&all[names / 2])));
        assert_no_alloc(&format!("registry hit among {names} names"), info);
        let info = steady_state(|| assert!(registry.get_existing(&name).is_some()));
        assert_no_alloc(&format!("registry get_existing among {names} names"), info);
    }
}

#[test]
fn repeated_failure_reuses_the_last_failure_record() {
    // Never trips: one success for every failure keeps the rate at 0.5 < 1.0.
    let config = Config::builder()
        .failure_rate_threshold(1.0)
        .build()
        .unwrap();
    let b = breaker(config, MonotonicClock);
    let info = steady_state(|| {
        assert!(b.call(ok).is_ok());
        assert!(matches!(b.call(boom), Err(CallError::Inner(Boom))));
    });
    assert_no_alloc("failing call repeating the same error", info);
    assert_eq!(b.state(), State::Closed);
    let last = b.last_failure().unwrap();
    assert_eq!(last.message(), "upstream returned 503");

    // A different message is a new record (one allocation at most for the record and its
    // text), then repeating it allocates nothing again.
    #[derive(Debug)]
    struct Other;
    impl fmt::Display for Other {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connection reset")
        }
    }
    impl std::error::Error for Other {}
    let changed = measure(|| {
        let _ = b.call(|| Err::<u64, _>(Other));
    });
    assert!(changed.count_total > 0, "a new message must be stored");
    let info = steady_state(|| {
        let _ = b.call(ok);
        let _ = b.call(|| Err::<u64, _>(Other));
    });
    assert_no_alloc("failing call repeating a second error", info);
    assert_eq!(b.last_failure().unwrap().message(), "connection reset");
}

/// A message of `pieces` × 2,048 bytes plus one, written piece by piece, so the per-thread
/// buffer it is formatted into grows by doubling: to exactly 4,096 bytes for one piece,
/// 8,192 for two.
#[derive(Debug)]
struct Long {
    pieces: usize,
}

static PIECE: [u8; 2048] = [b'x'; 2048];

impl fmt::Display for Long {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let piece = std::str::from_utf8(&PIECE).unwrap();
        for _ in 0..self.pieces {
            f.write_str(piece)?;
        }
        f.write_str("!")
    }
}

impl std::error::Error for Long {}

#[test]
fn the_failure_message_buffer_is_kept_up_to_4_kib_and_given_back_above() {
    let config = Config::builder()
        .failure_rate_threshold(1.0)
        .build()
        .unwrap();
    let b = breaker(config, MonotonicClock);
    // 2,049 bytes: the buffer reaches exactly 4,096 bytes, and is kept.
    let info = steady_state(|| {
        assert!(b.call(ok).is_ok());
        let _ = b.call(|| Err::<u64, _>(Long { pieces: 1 }));
    });
    assert_no_alloc("failing call repeating a 2,049-byte error", info);
    assert_eq!(b.last_failure().unwrap().message().len(), 2049);
    // 4,097 bytes: the 8,192-byte buffer is given back after each failure, so each
    // repeat formats into a new one (the stored record is still reused).
    let info = steady_state(|| {
        assert!(b.call(ok).is_ok());
        let _ = b.call(|| Err::<u64, _>(Long { pieces: 2 }));
    });
    assert!(
        info.count_total >= CALLS as u64,
        "a buffer above 4 KiB must not be kept: {} allocations in {CALLS} calls",
        info.count_total
    );
    assert_eq!(b.last_failure().unwrap().message().len(), 4097);
}
