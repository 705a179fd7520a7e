//! Setup code for the side-by-side benchmark in `benches/side_by_side.rs`.
//!
//! Every breaker under test, ours ([`ours`]) and each peer ([`peers`]), gets one module
//! with the same shape: small constructors that build a breaker already in the state a
//! scenario needs (closed, open, half-open, a time window holding `n` calls), each
//! returning a value that implements [`SyncBreaker`] or [`AsyncBreaker`]. The bench file
//! then times nothing but [`SyncBreaker::call`] / [`AsyncBreaker::call`] in a loop, so
//! every library goes through the same harness.
//!
//! Constructors check, once and untimed, that the breaker really is in the state the
//! scenario claims (they panic otherwise): a "rejected" benchmark that silently admits
//! calls would be worse than none.
//!
//! A scenario a library cannot express has no constructor; the module says why.

// A benchmark harness reads the wall clock and has to wait out real open periods for the
// peers that take no clock argument; the workspace-wide ban is about library code.
#![allow(
    clippy::disallowed_methods,
    reason = "bench setup: peers without an injectable clock need real sleeps"
)]

use std::cell::Cell;
use std::future::Future;

pub mod ours;
pub mod peers;

/// Pins the calling thread to core `worker` (when the machine has that many), so that the
/// two workers of a two-thread benchmark run in parallel on two cores.
pub fn pin_to_core(worker: usize) {
    if let Some(core) = core_affinity::get_core_ids().and_then(|ids| ids.get(worker).copied()) {
        core_affinity::set_for_current(core);
    }
}

/// The error type every protected closure is declared with (it never fails unless a
/// constructor trips a breaker on purpose).
pub type OpError = std::io::Error;

/// `rounds` rounds of `setup` (untimed), then one timed slice of `a` and one of `b`, in swapped
/// order every other round. Medians over rounds of a / b, and of each side's time per call
/// (`calls` calls per slice).
pub fn alternate<S>(
    rounds: usize,
    calls: u32,
    mut setup: impl FnMut() -> S,
    mut a: impl FnMut(&S) -> std::time::Duration,
    mut b: impl FnMut(&S) -> std::time::Duration,
) -> (f64, f64, f64) {
    let per_call = |d: std::time::Duration| d.as_secs_f64() * 1e9 / f64::from(calls);
    let mut ratios = Vec::with_capacity(rounds);
    let mut a_ns = Vec::with_capacity(rounds);
    let mut b_ns = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let state = setup();
        let (ta, tb) = if round % 2 == 0 {
            let ta = a(&state);
            (ta, b(&state))
        } else {
            let tb = b(&state);
            (a(&state), tb)
        };
        ratios.push(ta.as_secs_f64() / tb.as_secs_f64());
        a_ns.push(per_call(ta));
        b_ns.push(per_call(tb));
    }
    (median(&mut ratios), median(&mut a_ns), median(&mut b_ns))
}

/// The median of `v` (its upper middle for an even length), sorting it.
///
/// # Panics
/// If `v` is empty.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Wall time of two threads making `calls` calls of `b` each at once, pinned to cores 0
/// and 1: from the first thread's start to the last one's end, each read by the worker
/// itself once both are past a barrier (thread start-up, wake-up and join are not timed).
/// Every call is checked against `expect` (admitted or not) in debug builds.
///
/// # Panics
/// If a worker panics.
pub fn two_thread_slice<B: SyncBreaker>(b: &B, calls: u32, expect: bool) -> std::time::Duration {
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|worker| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin_to_core(worker);
                    barrier.wait();
                    let start = std::time::Instant::now();
                    for _ in 0..calls {
                        let admitted = std::hint::black_box(b).call();
                        debug_assert_eq!(admitted, expect);
                        std::hint::black_box(admitted);
                    }
                    (start, std::time::Instant::now())
                })
            })
            .collect();
        let spans: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().expect("benchmark worker panicked"))
            .collect();
        let start = spans.iter().map(|s| s.0).min().expect("two workers");
        let end = spans.iter().map(|s| s.1).max().expect("two workers");
        end.duration_since(start)
    })
}

/// Steps of [`alu_step_ns`]'s chains.
const ALU_STEPS: u32 = 200_000;

/// The host's ALU throughput on this thread, in nanoseconds per step of four independent
/// xorshift64 chains (twelve shifts and xors, registers only), over `ALU_STEPS` steps.
///
/// One-thread figures of compute-bound loops (interlock's quiet call and rejection, recloser's
/// count ring) depend on it: on a virtual machine the host slows them at times (most likely
/// another guest's work on the same physical core), and nothing in the breaker can change
/// that. On the project's 2-vCPU host
/// it reads about 1.7 ns in the fast mode and 2.0–2.5 ns in the slow one. Over 1,600
/// slices, each this probe and then 200,000 rejections of one OPEN breaker, the rejection was
/// slow (above 4 ns a call) in 1,006 of the 1,096 slices whose probe read above 1.85 ns, and
/// fast in 468 of the 504 whose probe read below (medians 2.41 and 1.72 ns).
/// `paired` prints it before and after each one-thread row against a peer.
#[must_use]
pub fn alu_step_ns() -> f64 {
    let (mut a, mut b, mut c, mut d) = (1_u64, 2_u64, 3_u64, 4_u64);
    let start = std::time::Instant::now();
    /// One xorshift64 step: three shifts and three xors.
    #[inline(always)]
    fn step(x: &mut u64) {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
    }
    for _ in 0..ALU_STEPS {
        step(&mut a);
        step(&mut b);
        step(&mut c);
        step(&mut d);
        // Keeps the loop from being folded away, at one store a step.
        std::hint::black_box(&mut a);
    }
    std::hint::black_box((a, b, c, d));
    start.elapsed().as_secs_f64() * 1e9 / f64::from(ALU_STEPS)
}

/// How long the host takes to move one cache line between the two workers' cores, in
/// nanoseconds: two threads pinned as in [`two_thread_slice`] pass a counter back and forth
/// through one atomic word, `HANDOFFS` times, and the figure is the wall time per handoff.
///
/// Every two-thread figure depends on it: a call that takes the breaker's lock after the
/// other core held it waits for a few such handoffs. On a virtual machine it is the
/// host's, not ours (most likely the two vCPUs are sometimes hyperthreads of one core and
/// sometimes on different cores), and the figure moves between about 14 or 35 ns and
/// 170–300 ns within seconds (measured on the project's 2-vCPU host). `paired mixed2`
/// prints it before and after each two-thread row, so a run says which placement it was
/// measured in.
///
/// # Panics
/// If a worker panics.
#[must_use]
pub fn line_handoff_ns() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The word, alone on its pair of lines.
    #[repr(align(128))]
    struct Line(AtomicU64);
    const HANDOFFS: u64 = 400_000;

    let line = Line(AtomicU64::new(0));
    let barrier = std::sync::Barrier::new(2);
    let start = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2_u64)
            .map(|worker| {
                let (line, barrier) = (&line, &barrier);
                s.spawn(move || {
                    pin_to_core(usize::from(worker == 1));
                    barrier.wait();
                    let start = std::time::Instant::now();
                    // Worker 0 moves even values to odd ones, worker 1 odd to even.
                    let mut mine = worker;
                    while mine < HANDOFFS {
                        if line.0.load(Ordering::Acquire) == mine {
                            line.0.store(mine + 1, Ordering::Release);
                            mine += 2;
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    start
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("handoff worker panicked"))
            .min()
            .expect("two workers")
    });
    #[allow(clippy::cast_precision_loss, reason = "a count far below 2^52")]
    let handoffs = HANDOFFS as f64;
    start.elapsed().as_secs_f64() * 1e9 / handoffs
}

/// The value every protected closure returns on success.
pub const PAYLOAD: u64 = 1;

/// A breaker driven synchronously.
pub trait SyncBreaker: Send + Sync {
    /// Runs one call through the breaker (or, where a scenario says so, one admission).
    ///
    /// Returns whether the breaker let the call through.
    fn call(&self) -> bool;
}

/// A breaker driven from async code (tower / `layered` services).
///
/// Clones share the breaker's state: the two-thread benchmark gives each thread a clone.
pub trait AsyncBreaker: Clone + Send + 'static {
    /// Runs one call through the breaker (or, where a scenario says so, one admission).
    ///
    /// Resolves to whether the breaker let the call through.
    fn call(&mut self) -> impl Future<Output = bool>;
}

/// The trivial successful operation every benchmark protects.
#[inline]
pub(crate) fn ok() -> Result<u64, OpError> {
    Ok(PAYLOAD)
}

/// The mixed workloads: a name for benchmark ids and the failure period (one call in
/// `period` fails, on each thread; 0: none).
pub const MIXES: [(&str, u32); 3] = [("0pct", 0), ("1pct", 100), ("10pct", 10)];

thread_local! {
    /// Calls of [`mixed`] since this thread's last failure.
    static SINCE_FAILURE: Cell<u32> = const { Cell::new(0) };
}

/// The protected operation of a mixed workload: every `period`-th call made on this thread
/// fails (never for `period` 0), with an error whose construction does not allocate, so
/// that only the breakers' own work is timed. Each thread keeps its own count, so two
/// threads calling one breaker each fail at the same rate and share nothing but the
/// breaker.
///
/// # Errors
/// `ConnectionRefused`, on every `period`-th call of this thread.
#[inline]
pub fn mixed(period: u32) -> Result<u64, OpError> {
    if period == 0 {
        return Ok(PAYLOAD);
    }
    SINCE_FAILURE.with(|since| {
        let n = since.get() + 1;
        if n >= period {
            since.set(0);
            Err(OpError::from(std::io::ErrorKind::ConnectionRefused))
        } else {
            since.set(n);
            Ok(PAYLOAD)
        }
    })
}

/// A failing operation, used only in setup to trip a breaker.
pub(crate) fn fail() -> Result<u64, OpError> {
    Err(OpError::other("tripping the breaker on purpose"))
}

/// Blocks the thread for `d` (setup only: waiting out a real open period).
pub(crate) fn sleep(d: std::time::Duration) {
    std::thread::sleep(d);
}
