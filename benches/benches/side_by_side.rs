//! interlock next to other Rust circuit breakers, in one run and one harness.
//!
//! Every case is timed with criterion's `iter_custom`: the routine gets `iters` and returns
//! the wall time of `iters` calls, and nothing else (setup happens once per case, before
//! timing, in `interlock_benches::{ours, peers}`). Async peers are driven inside ONE
//! current-thread Tokio runtime created once, with the whole `iters` loop inside a single
//! `block_on`.
//!
//! Groups (see `benches/README.md`):
//! - `closed/<peer>`: one successful call through a closed breaker.
//! - `rejected/<peer>`: one call refused by an open breaker (long open wait).
//! - `half_open/<peer>`: one half-open admission.
//! - `contended2/<peer>`: two threads calling one closed breaker at once; time is wall time
//!   for both threads to make `iters` calls each, per `iters`.
//! - `time_window/<peer>/<n>`: one call through a time-based window holding `n` calls.
//! - `reference/<what>`: an empty closure, one `AtomicU64::fetch_add`, one `Instant::now()`.

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]

use std::future::Future;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use interlock_benches::peers::{circuitbreaker_rs, failsafe, recloser, seatbelt, tower_resilience};
use interlock_benches::{AsyncBreaker, OpError, PAYLOAD, SyncBreaker, ours};
use tokio::runtime::Runtime;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

// ---------------------------------------------------------------------------------------------
// Timing loops: the only code that runs between the two clock reads.

/// Wall time of `iters` calls of `f`.
#[inline]
fn time_loop<R>(iters: u64, mut f: impl FnMut() -> R) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        black_box(f());
    }
    start.elapsed()
}

/// Wall time of `iters` calls of `b`.
fn run_sync<B: SyncBreaker>(b: &B, iters: u64) -> Duration {
    time_loop(iters, || black_box(b).call())
}

/// Wall time of `iters` calls of `b`, all inside one `block_on`.
fn run_async<B: AsyncBreaker>(rt: &Runtime, b: &mut B, iters: u64) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            black_box(black_box(&mut *b).call().await);
        }
        start.elapsed()
    })
}

/// Two threads, each making `iters` calls through `call`; wall time from the moment both are
/// released until both are done.
fn run_contended(iters: u64, make_worker: impl Fn() -> Box<dyn FnOnce() + Send>) -> Duration {
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let work = make_worker();
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    work();
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for w in workers {
            w.join().expect("benchmark worker panicked");
        }
        start.elapsed()
    })
}

// ---------------------------------------------------------------------------------------------
// Cases. Breakers are built lazily, on the first call of the benchmark routine, so a filtered
// run (`cargo bench -- closed/`) builds only what it times; the routine is called many times
// per case, the breaker is built once.

fn sync_case<B: SyncBreaker>(g: &mut Group<'_>, name: &str, make: impl Fn() -> B) {
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b = breaker.get_or_insert_with(&make);
        bencher.iter_custom(|iters| run_sync(b, iters));
    });
}

fn async_case<B, F>(g: &mut Group<'_>, rt: &Runtime, name: &str, make: impl Fn() -> F)
where
    B: AsyncBreaker,
    F: Future<Output = B>,
{
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b = breaker.get_or_insert_with(|| rt.block_on(make()));
        bencher.iter_custom(|iters| run_async(rt, b, iters));
    });
}

fn contended_sync_case<B: SyncBreaker + 'static>(
    g: &mut Group<'_>,
    name: &str,
    make: impl Fn() -> B,
) {
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b: &B = breaker.get_or_insert_with(&make);
        bencher.iter_custom(|iters| {
            std::thread::scope(|_| ());
            run_contended_ref(iters, b)
        });
    });
}

/// [`run_contended`] for a breaker shared by reference.
fn run_contended_ref<B: SyncBreaker>(iters: u64, b: &B) -> Duration {
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    for _ in 0..iters {
                        black_box(black_box(b).call());
                    }
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        for w in workers {
            w.join().expect("benchmark worker panicked");
        }
        start.elapsed()
    })
}

fn contended_async_case<B, F>(g: &mut Group<'_>, rt: &Runtime, name: &str, make: impl Fn() -> F)
where
    B: AsyncBreaker + Sync,
    F: Future<Output = B>,
{
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b: &B = breaker.get_or_insert_with(|| rt.block_on(make()));
        bencher.iter_custom(|iters| {
            // Each thread drives its own clone (clones share the breaker) with `block_on` on
            // the one current-thread runtime: one thread owns the runtime's drivers, the
            // other polls its future itself, so both run at once.
            let rt_ref = rt;
            run_contended(iters, || {
                let mut mine = b.clone();
                let rt = unsafe_free_runtime_ref(rt_ref);
                Box::new(move || {
                    rt.block_on(async {
                        for _ in 0..iters {
                            black_box(black_box(&mut mine).call().await);
                        }
                    });
                })
            })
        });
    });
}
