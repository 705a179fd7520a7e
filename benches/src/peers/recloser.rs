//! [`recloser`] `=1.4.0`: lock-free state (`crossbeam_epoch::Atomic<State>`) with ring buffers
//! guarded by a spin lock; sync `Recloser::call`.
//!
//! API used (checked against the crate's source for 1.4.0):
//! - `Recloser::custom()` builder: `closed_len(n)` (count window, default 100), `open_wait(d)`,
//!   `error_rate_half_open(r)`, `build()`.
//! - `Recloser::call(|| ..) -> Result<T, recloser::Error<E>>`, `Error::Rejected` when open.
//!
//! No slow-call detection and no time window: `time_window` is not measured for recloser.
//!
//! Half-open: the permission check (`call_permitted`) is `pub(crate)`, so the only way in is a
//! full call, which also records its outcome in the half-open ring. recloser admits every call
//! in half-open and decides once the ring (`half_open_len`) is full: a success rate at or
//! below `error_rate_half_open` closes it. To keep it half-open for the whole measurement,
//! `half_open` sets `error_rate_half_open(-0.5)` (no failure rate can be below it, so nothing
//! ever closes it; no failure is recorded, so nothing re-opens it). What is timed is therefore
//! "a successful call admitted in half-open": admission plus recording. There is no injectable
//! clock, so setup waits out a 1 ms `open_wait` for real.

use std::time::Duration;

use recloser::{Error, Recloser};

use crate::{SyncBreaker, fail, mixed, ok};

/// Name used in benchmark ids.
pub const NAME: &str = "recloser";

/// A recloser; `call` runs `ok` through it.
#[derive(Debug)]
pub struct Breaker(Recloser);

impl SyncBreaker for Breaker {
    #[inline]
    fn call(&self) -> bool {
        self.0.call(ok).is_ok()
    }
}

/// Trips `r` with failing calls until it rejects one.
fn trip(r: &Recloser) {
    for _ in 0..1000 {
        if matches!(r.call(fail), Err(Error::Rejected)) {
            return;
        }
    }
    panic!("recloser: breaker did not open");
}

/// Count window of 100 (the default), closed.
///
/// # Panics
/// If the breaker rejects a call.
#[must_use]
pub fn closed() -> Breaker {
    let b = Breaker(Recloser::custom().closed_len(100).build());
    assert!(b.call(), "recloser: a fresh breaker must admit calls");
    b
}

/// Tripped with a one-hour `open_wait`: every call is rejected.
///
/// # Panics
/// If the breaker does not open.
#[must_use]
pub fn rejected() -> Breaker {
    let r = Recloser::custom()
        .closed_len(100)
        .open_wait(Duration::from_secs(3600))
        .build();
    trip(&r);
    let b = Breaker(r);
    assert!(!b.call(), "recloser: open breaker admitted a call");
    b
}

fn half_open_recloser() -> Recloser {
    let r = Recloser::custom()
        .closed_len(100)
        .open_wait(Duration::from_millis(1))
        .error_rate_half_open(-0.5)
        .build();
    trip(&r);
    crate::sleep(Duration::from_millis(5));
    // First call after the wait moves Open -> HalfOpen and is admitted.
    assert!(r.call(ok).is_ok(), "recloser: breaker did not go half-open");
    r
}

/// Half-open for good (see the module docs); each `call` is a successful call admitted there.
///
/// # Panics
/// If the breaker is not half-open after setup.
#[must_use]
pub fn half_open() -> Breaker {
    // Check the recipe on a twin: in half-open one failure re-opens at once (in closed, one
    // failure in a window of 100 would not), and many successes do not close it.
    let twin = half_open_recloser();
    for _ in 0..1000 {
        assert!(
            twin.call(ok).is_ok(),
            "recloser: half-open twin rejected a success"
        );
    }
    let _ = twin.call(fail);
    assert!(
        matches!(twin.call(ok), Err(Error::Rejected)),
        "recloser: twin was not half-open (one failure did not re-open it)"
    );
    Breaker(half_open_recloser())
}

/// A mixed workload: each `call` runs [`mixed`]`(period)`; `call` says whether it was
/// admitted.
#[derive(Debug)]
pub struct Mixed(Recloser, u32);

impl SyncBreaker for Mixed {
    #[inline]
    fn call(&self) -> bool {
        !matches!(self.0.call(|| mixed(self.1)), Err(Error::Rejected))
    }
}

/// `error_rate(0.5).closed_len(100)`, one call in `period` failing (0: none).
///
/// # Panics
/// If a call is rejected.
#[must_use]
pub fn mixed_count(period: u32) -> Mixed {
    let m = Mixed(
        Recloser::custom().error_rate(0.5).closed_len(100).build(),
        period,
    );
    for _ in 0..1000 {
        assert!(m.call(), "recloser: a mixed call was rejected");
    }
    m
}
