//! A clock thread started by a pinned real-time thread still runs (issue
//! 20, item 2). A thread inherits its creator's CPU mask and scheduling
//! policy; `CoarseClock`'s thread, started by the first read, used to stay
//! on the one CPU of a `SCHED_FIFO` thread spinning there, and never ran.
//!
//! Its own test binary: the clock's thread must be started by this test's
//! pinned thread, so nothing else in the process may read the coarse clock
//! first. `SCHED_FIFO` is set with `chrt` (we run as root); where that is
//! refused the test still pins the thread and says so on stderr.

#![cfg(target_os = "linux")]
#![allow(
    clippy::disallowed_methods,
    reason = "the behaviour under test is what real threads do on real time; every wait has a deadline"
)]

use std::time::Duration;

use interlock::{Clock, CoarseClock, MonotonicClock};
use rustix::thread::{CpuSet, gettid, sched_setaffinity};

/// The clock thread's voluntary context switches and the CPUs it may run
/// on (`interlock-coarse-clock`, which the kernel shortens to 15 bytes).
fn clock_thread() -> Option<(u64, String)> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != "interlock-coars" {
            continue;
        }
        let status = std::fs::read_to_string(path.join("status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|v| v.trim().to_owned())
        };
        let switches = field("voluntary_ctxt_switches:")?.parse().ok()?;
        return Some((switches, field("Cpus_allowed_list:")?));
    }
    None
}

#[test]
fn a_clock_thread_started_by_a_pinned_sched_fifo_thread_still_ticks() {
    let cpus = rustix::thread::sched_getaffinity(None).map_or(1, |s| s.count());
    let (fifo, ticks, allowed) = std::thread::spawn(|| {
        let mut one = CpuSet::new();
        one.set(0);
        sched_setaffinity(None, &one).expect("pin this thread to CPU 0");
        let tid = gettid().as_raw_nonzero().to_string();
        let fifo = std::process::Command::new("chrt")
            .args(["-f", "-p", "1", &tid])
            .status()
            .is_ok_and(|s| s.success());
        if !fifo {
            eprintln!("SCHED_FIFO refused here: the thread is only pinned");
        }
        // The first read of the process starts the clock's thread, from
        // here. Then spin on CPU 0 (at real-time priority) reading the
        // clock, until its thread has ticked 20 times or 10 s have passed.
        let _ = CoarseClock.now();
        let deadline = MonotonicClock.now() + Duration::from_secs(10);
        let start = loop {
            if let Some((switches, _)) = clock_thread() {
                break switches;
            }
            assert!(MonotonicClock.now() < deadline, "no clock thread");
        };
        let mut last = (start, String::new());
        while MonotonicClock.now() < deadline {
            let _ = CoarseClock.now();
            if let Some(now) = clock_thread() {
                last = now;
                if last.0 >= start + 20 {
                    break;
                }
            }
        }
        (fifo, last.0 - start, last.1)
    })
    .join()
    .expect("the pinned thread");
    assert!(
        ticks >= 20,
        "the clock's thread ticked {ticks} times in 10 s beside a pinned {} spinner (CPUs {allowed})",
        if fifo { "SCHED_FIFO" } else { "SCHED_OTHER" }
    );
    if cpus > 1 {
        assert_ne!(
            allowed, "0",
            "the clock's thread kept its creator's one CPU"
        );
    }
}
