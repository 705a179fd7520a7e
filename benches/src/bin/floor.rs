//! What issue 22's one-thread 10 % target leaves a failure to spend, measured in one phase.
//!
//! The target puts interlock's count window at 10 % failures at or below 0.5× recloser's
//! count ring (`error_rate(0.5).closed_len(100)`) on the same workload. With successes at
//! interlock's quiet cost `s` (the call on a window of successes only, which records nothing
//! and takes no lock) and recloser's call at `r`, nine successes and one failure in ten calls
//! meet it only if the failure costs at most `(0.5 r − 0.9 s) / 0.1`: the *budget*. Every
//! failure must at least write the error's `Display` (R11.3: the last failure keeps the text
//! of every failure) and take one lock (a failure takes the locked path): the *floor*.
//!
//! Each round times one 20,000-call slice of each of the four, in turn (the order rotates
//! every round), so that all four figures of a round come from the same phase of a shared
//! host; a round gives one budget and one floor. The medians over 400 rounds are printed,
//! with the number of rounds whose floor was above the budget. The host's phases move every
//! part (the quiet call has read 3.1 ns and 4.9 ns minutes apart), which is why the four are
//! timed in the same rounds.
//!
//! ```sh
//! cargo run --release -p interlock-benches --bin floor
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark harness reads the wall clock"
)]
#![allow(clippy::print_stdout, reason = "a benchmark prints its results")]

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Instant;

use interlock_benches::peers::recloser;
use interlock_benches::{SyncBreaker, median, ours};

/// Runs per slice.
const SLICE: u32 = 20_000;
/// Rounds (each times one slice of every part).
const ROUNDS: usize = 400;

/// Nanoseconds per run of `SLICE` runs of `op`.
fn per_run(mut op: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..SLICE {
        op();
    }
    start.elapsed().as_secs_f64() * 1e9 / f64::from(SLICE)
}

fn main() {
    let peer = recloser::mixed_count(10);
    let quiet = ours::mixed_count(0);
    let lock = Mutex::new(String::new());
    let mut text = String::new();
    let mut parts: [Box<dyn FnMut() -> f64 + '_>; 4] = [
        Box::new(|| {
            per_run(|| {
                black_box(black_box(&peer).call());
            })
        }),
        Box::new(|| {
            per_run(|| {
                black_box(black_box(&quiet).call());
            })
        }),
        Box::new(|| {
            per_run(|| {
                let error = black_box(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
                text.clear();
                // Writing to a `String` cannot fail.
                let _ = write!(text, "{error}");
                black_box(&text);
            })
        }),
        Box::new(|| {
            per_run(|| {
                black_box(
                    black_box(&lock)
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .len(),
                );
            })
        }),
    ];
    for _ in 0..20 {
        for part in &mut parts {
            part();
        }
    }
    let mut columns: [Vec<f64>; 6] = Default::default();
    let mut over = 0;
    for round in 0..ROUNDS {
        let mut ns = [0.0; 4];
        for k in 0..4 {
            let i = (round + k) % 4;
            ns[i] = parts[i]();
        }
        let [r, s, display, mutex] = ns;
        let budget = (0.5 * r - 0.9 * s) / 0.1;
        let floor = display + mutex;
        over += usize::from(floor > budget);
        for (column, v) in columns
            .iter_mut()
            .zip([r, s, display, mutex, budget, floor])
        {
            column.push(v);
        }
    }
    let [r, s, display, mutex, budget, floor] = columns.map(|mut c| median(&mut c));
    println!("{ROUNDS} rounds of {SLICE} runs of each part; medians per round, in ns");
    println!("recloser at 10 % failures (r)            {r:7.2}");
    println!(
        "interlock's quiet success (s)            {s:7.2}  ({:.3} r)",
        s / r
    );
    println!("the error's Display into a reused String {display:7.2}");
    println!("an uncontended mutex, locked and unlocked {mutex:6.2}");
    println!(
        "a failure's budget (0.5 r - 0.9 s) / 0.1 {budget:7.2}  its floor (Display + mutex) \
         {floor:.2}; floor above the budget in {over} of {ROUNDS} rounds"
    );
}
