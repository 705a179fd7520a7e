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
//! - `mixed/<window>/<mix>/<peer>` and `mixed2/<window>/<mix>/<peer>`: production-like
//!   traffic, 0%, 1% or 10% failures through a count window of 100 (`count100`) or a 60 s time
//!   window (`time60s`), on one thread and on two (wall time per call of each thread).
//! - `registry/interlock/<n>`: one `Registry::get` hit among `n` names (peers have none).
//! - `reference/<what>`: an empty closure, one `AtomicU64::fetch_add`, an uncontended `Mutex`
//!   lock + unlock, an `Arc` clone + drop, one read of each clock source (`Instant::now()`,
//!   `MonotonicClock`, `CoarseClock`).
//!
//! The plain `interlock` id is a breaker built without a clock, which reads `CoarseClock` with
//! the default config; `closed`, `rejected` and `contended2` also time interlock on an explicit
//! `MonotonicClock` (`<group>/interlock-monotonic`).

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
use interlock::{Clock, CoarseClock, MonotonicClock};
use interlock_benches::peers::{circuitbreaker_rs, failsafe, recloser, seatbelt, tower_resilience};
use interlock_benches::{AsyncBreaker, MIXES, OpError, PAYLOAD, SyncBreaker, ours};
use tokio::runtime::Runtime;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

const ADMITS: Admits = Admits(true);
const REJECTS: Admits = Admits(false);

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

/// Two threads at once, each running one worker made by `make_worker` (made before the threads
/// start); wall time from the moment both are released until both are done.
fn run_contended<W: FnOnce() + Send>(make_worker: impl Fn() -> W) -> Duration {
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

/// After each timed batch (untimed): the breaker still answers as the scenario says, i.e. the
/// batch did not move it to another state.
fn check(name: &str, admitted: bool, expect: Admits) {
    assert_eq!(
        admitted, expect.0,
        "{name}: the breaker left its scenario's state during the benchmark"
    );
}

/// Whether calls in a scenario are let through.
#[derive(Clone, Copy)]
struct Admits(bool);

fn sync_case<B: SyncBreaker>(g: &mut Group<'_>, expect: Admits, name: &str, make: impl Fn() -> B) {
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b = breaker.get_or_insert_with(&make);
        bencher.iter_custom(|iters| run_sync(b, iters));
        check(name, b.call(), expect);
    });
}

fn async_case<B, F>(
    g: &mut Group<'_>,
    rt: &Runtime,
    expect: Admits,
    name: &str,
    make: impl Fn() -> F,
) where
    B: AsyncBreaker,
    F: Future<Output = B>,
{
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b = breaker.get_or_insert_with(|| rt.block_on(make()));
        bencher.iter_custom(|iters| run_async(rt, b, iters));
        check(name, rt.block_on(b.call()), expect);
    });
}

fn contended_sync_case<B: SyncBreaker>(g: &mut Group<'_>, name: &str, make: impl Fn() -> B) {
    let mut breaker = None;
    g.bench_function(name, |bencher| {
        let b: &B = breaker.get_or_insert_with(&make);
        bencher.iter_custom(|iters| {
            run_contended(|| {
                move || {
                    for _ in 0..iters {
                        black_box(black_box(b).call());
                    }
                }
            })
        });
        check(name, b.call(), ADMITS);
    });
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
            run_contended(|| {
                let mut mine = b.clone();
                move || {
                    rt.block_on(async {
                        for _ in 0..iters {
                            black_box(black_box(&mut mine).call().await);
                        }
                    });
                }
            })
        });
        check(name, rt.block_on(b.clone().call()), ADMITS);
    });
}

/// Calls timed on top of a time-window prefill of `n` before the window is rebuilt: while
/// timed, a window holds between `n` and `n + n / 10` calls.
fn slack(n: usize) -> u64 {
    (n as u64 / 10).max(1)
}

/// Times `iters` calls on prefilled windows from `make`, rebuilding (untimed) every
/// [`slack`] calls; `run` times a chunk of calls on one window.
fn time_window_iters<B>(
    iters: u64,
    n: usize,
    state: &mut Option<(B, u64)>,
    mut make: impl FnMut() -> B,
    mut run: impl FnMut(&mut B, u64) -> Duration,
) -> Duration {
    let slack = slack(n);
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        if state.as_ref().is_none_or(|(_, used)| *used >= slack) {
            // Drop the old window before building the new one (both untimed).
            *state = None;
            *state = Some((make(), 0));
        }
        let Some((b, used)) = state.as_mut() else {
            unreachable!("just built")
        };
        let chunk = left.min(slack - *used);
        total += run(b, chunk);
        *used += chunk;
        left -= chunk;
    }
    total
}

fn time_window_sync_case<B: SyncBreaker>(
    g: &mut Group<'_>,
    name: &str,
    n: usize,
    make: impl Fn(usize) -> B,
) {
    let mut state = None;
    g.bench_with_input(BenchmarkId::new(name, n), &n, |bencher, &n| {
        // The first window is built outside `iter_custom`: criterion's warm-up estimate is the
        // routine's wall time, and one slow prefill would make it think a call takes seconds.
        if state.is_none() {
            state = Some((make(n), 0));
        }
        bencher.iter_custom(|iters| {
            time_window_iters(iters, n, &mut state, || make(n), |b, k| run_sync(b, k))
        });
        if let Some((b, _)) = &state {
            check(name, b.call(), ADMITS);
        }
    });
}

fn time_window_async_case<B, F>(
    g: &mut Group<'_>,
    rt: &Runtime,
    name: &str,
    n: usize,
    make: impl Fn(usize) -> F,
) where
    B: AsyncBreaker,
    F: Future<Output = B>,
{
    let mut state = None;
    g.bench_with_input(BenchmarkId::new(name, n), &n, |bencher, &n| {
        // Built outside `iter_custom`, as in `time_window_sync_case`.
        if state.is_none() {
            state = Some((rt.block_on(make(n)), 0));
        }
        bencher.iter_custom(|iters| {
            time_window_iters(
                iters,
                n,
                &mut state,
                || rt.block_on(make(n)),
                |b, k| run_async(rt, b, k),
            )
        });
        if let Some((b, _)) = &mut state {
            check(name, rt.block_on(b.call()), ADMITS);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Groups. interlock first, then the peers in a fixed order.

fn closed(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("closed");
    sync_case(&mut g, ADMITS, ours::NAME, ours::closed);
    sync_case(&mut g, ADMITS, ours::NAME_MONOTONIC, ours::closed_monotonic);
    sync_case(&mut g, ADMITS, failsafe::NAME, failsafe::closed);
    sync_case(&mut g, ADMITS, recloser::NAME, recloser::closed);
    async_case(
        &mut g,
        rt,
        ADMITS,
        tower_resilience::NAME,
        tower_resilience::closed,
    );
    async_case(&mut g, rt, ADMITS, seatbelt::NAME, seatbelt::closed);
    sync_case(
        &mut g,
        ADMITS,
        circuitbreaker_rs::NAME,
        circuitbreaker_rs::closed,
    );
    g.finish();
}

fn rejected(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("rejected");
    sync_case(&mut g, REJECTS, ours::NAME, ours::rejected);
    sync_case(
        &mut g,
        REJECTS,
        ours::NAME_MONOTONIC,
        ours::rejected_monotonic,
    );
    sync_case(&mut g, REJECTS, failsafe::NAME, failsafe::rejected);
    sync_case(&mut g, REJECTS, recloser::NAME, recloser::rejected);
    async_case(
        &mut g,
        rt,
        REJECTS,
        tower_resilience::NAME,
        tower_resilience::rejected,
    );
    async_case(&mut g, rt, REJECTS, seatbelt::NAME, seatbelt::rejected);
    sync_case(
        &mut g,
        REJECTS,
        circuitbreaker_rs::NAME,
        circuitbreaker_rs::rejected,
    );
    g.finish();
}

/// What one iteration is differs by what each library lets a caller do; see each module:
/// interlock, tower-resilience, seatbelt: admit a probe and drop it (the slot comes back);
/// failsafe: `is_call_permitted()` in half-open (it has no probe budget);
/// recloser, circuitbreaker-rs: a full successful call admitted in half-open (their admission
/// is private), with settings that keep them half-open.
fn half_open(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("half_open");
    sync_case(&mut g, ADMITS, ours::NAME, ours::half_open);
    sync_case(&mut g, ADMITS, failsafe::NAME, failsafe::half_open);
    sync_case(&mut g, ADMITS, recloser::NAME, recloser::half_open);
    async_case(
        &mut g,
        rt,
        ADMITS,
        tower_resilience::NAME,
        tower_resilience::half_open,
    );
    async_case(&mut g, rt, ADMITS, seatbelt::NAME, seatbelt::half_open);
    sync_case(
        &mut g,
        ADMITS,
        circuitbreaker_rs::NAME,
        circuitbreaker_rs::half_open,
    );
    g.finish();
}

fn contended2(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("contended2");
    contended_sync_case(&mut g, ours::NAME, ours::closed);
    contended_sync_case(&mut g, ours::NAME_MONOTONIC, ours::closed_monotonic);
    contended_sync_case(&mut g, failsafe::NAME, failsafe::closed);
    contended_sync_case(&mut g, recloser::NAME, recloser::closed);
    contended_async_case(&mut g, rt, tower_resilience::NAME, tower_resilience::closed);
    contended_async_case(&mut g, rt, seatbelt::NAME, seatbelt::closed);
    contended_sync_case(&mut g, circuitbreaker_rs::NAME, circuitbreaker_rs::closed);
    g.finish();
}

/// Window sizes, in calls held by the window when a call is timed.
const WINDOW_CALLS: [usize; 3] = [1_000, 10_000, 100_000];

/// Only libraries with a time-based window: recloser (count ring only) and
/// circuitbreaker-rs (its `TimeBasedPolicy` window is not fed by `call`) are absent.
fn time_window(c: &mut Criterion, rt: &Runtime) {
    let mut g = c.benchmark_group("time_window");
    for n in WINDOW_CALLS {
        time_window_sync_case(&mut g, ours::NAME, n, ours::time_window);
        time_window_sync_case(&mut g, failsafe::NAME, n, failsafe::time_window);
        time_window_async_case(
            &mut g,
            rt,
            tower_resilience::NAME,
            n,
            tower_resilience::time_window,
        );
        time_window_async_case(&mut g, rt, seatbelt::NAME, n, seatbelt::time_window);
    }
    g.finish();
}

/// The mixed workloads (see `benches/README.md`): one call in 100 or in 10 failing (on each
/// thread), through a count window of 100 and a 60 s time window, for every sync library
/// with such a window: recloser has only the count ring, failsafe only the time window.
fn mixed(c: &mut Criterion) {
    let mut g = c.benchmark_group("mixed");
    for (mix, period) in MIXES {
        let id = |window: &str, lib: &str| format!("{window}/{mix}/{lib}");
        sync_case(&mut g, ADMITS, &id("count100", ours::NAME), || {
            ours::mixed_count(period)
        });
        sync_case(&mut g, ADMITS, &id("count100", recloser::NAME), || {
            recloser::mixed_count(period)
        });
        sync_case(&mut g, ADMITS, &id("time60s", ours::NAME), || {
            ours::mixed_time(period)
        });
        sync_case(&mut g, ADMITS, &id("time60s", failsafe::NAME), || {
            failsafe::mixed_time(period)
        });
    }
    g.finish();
    let mut g = c.benchmark_group("mixed2");
    for (mix, period) in MIXES {
        let id = |window: &str, lib: &str| format!("{window}/{mix}/{lib}");
        contended_sync_case(&mut g, &id("count100", ours::NAME), || {
            ours::mixed_count(period)
        });
        contended_sync_case(&mut g, &id("count100", recloser::NAME), || {
            recloser::mixed_count(period)
        });
        contended_sync_case(&mut g, &id("time60s", ours::NAME), || {
            ours::mixed_time(period)
        });
        contended_sync_case(&mut g, &id("time60s", failsafe::NAME), || {
            failsafe::mixed_time(period)
        });
    }
    g.finish();
}

/// Registry sizes, in names held when one existing name is looked up.
const REGISTRY_NAMES: [usize; 2] = [1, 1_000];

/// interlock only: no peer has a registry.
fn registry(c: &mut Criterion) {
    let mut g = c.benchmark_group("registry");
    for n in REGISTRY_NAMES {
        let mut hit = None;
        g.bench_with_input(BenchmarkId::new(ours::NAME, n), &n, |bencher, &n| {
            let h = hit.get_or_insert_with(|| ours::registry(n));
            bencher.iter_custom(|iters| run_sync(h, iters));
            check(ours::NAME, h.call(), ADMITS);
        });
    }
    g.finish();
}

fn reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    let op = || Ok::<u64, OpError>(PAYLOAD);
    g.bench_function("empty_closure", |bencher| {
        bencher.iter_custom(|iters| time_loop(iters, || black_box(&op)()));
    });
    let counter = AtomicU64::new(0);
    g.bench_function("atomic_fetch_add", |bencher| {
        bencher.iter_custom(|iters| {
            time_loop(iters, || {
                black_box(&counter).fetch_add(1, Ordering::Relaxed)
            })
        });
    });
    g.bench_function("instant_now", |bencher| {
        bencher.iter_custom(|iters| time_loop(iters, Instant::now));
    });
    // What a recorded call pays for its lock: an uncontended `Mutex` lock + unlock.
    let mutex = std::sync::Mutex::new(0_u64);
    g.bench_function("mutex_lock_unlock", |bencher| {
        bencher.iter_custom(|iters| {
            time_loop(iters, || {
                let mut n = black_box(&mutex)
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *n += 1;
                *n
            })
        });
    });
    // What a rejection or a registry hit pays to hand out a name or a breaker: an `Arc`
    // clone and its drop (two atomic read-modify-writes).
    let shared = std::sync::Arc::new(0_u64);
    g.bench_function("arc_clone_drop", |bencher| {
        bencher.iter_custom(|iters| time_loop(iters, || std::sync::Arc::clone(black_box(&shared))));
    });
    // interlock's default clock: `Instant::now()` minus a process-wide origin.
    g.bench_function("monotonic_clock", |bencher| {
        bencher.iter_custom(|iters| time_loop(iters, || black_box(&MonotonicClock).now()));
    });
    // interlock's opt-in clock: one atomic load, refreshed every millisecond by a thread.
    g.bench_function("coarse_clock", |bencher| {
        bencher.iter_custom(|iters| time_loop(iters, || black_box(&CoarseClock).now()));
    });
    g.finish();
}

fn side_by_side(c: &mut Criterion) {
    // The one runtime every async peer runs in (its timer is needed by seatbelt's
    // `tick::Clock::new_tokio` and tower-resilience's open-state readiness).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    reference(c);
    closed(c, &rt);
    rejected(c, &rt);
    half_open(c, &rt);
    contended2(c, &rt);
    time_window(c, &rt);
    mixed(c);
    registry(c);
}

criterion_group!(benches, side_by_side);
criterion_main!(benches);
