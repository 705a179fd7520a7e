//! What the hedging, chaos and rate-limit strategies cost on their fast
//! paths, next to the same pipeline without them.
//!
//! Groups:
//! - `strategies/pipeline_empty`: a blocking call through an empty pipeline.
//! - `strategies/pipeline_noop_layer`: through one layer that does nothing (`Identity`): the
//!   cost of a layer itself, the baseline of the blocking cases below.
//! - `strategies/chaos_switched_off`: through a `chaos::Fault` whose switch is off.
//! - `strategies/chaos_rate_zero`: through a `chaos::Fault` switched on at rate 0 (one draw).
//! - `strategies/rate_limit_admitted`: through a `RateLimit` that always has budget.
//! - `strategies/keyed_rate_limit_admitted`: one `check()` of a key of a `KeyedRateLimit`.
//! - `strategies/hedge_async_fast`: an async call through a `Hedge` that answers at once
//!   (no hedge started), polled with a no-op waker; `strategies/async_noop_layer` is its
//!   baseline.
//!
//! Run: `cargo bench -p interlock-benches --bench strategies -- --warm-up-time 1 --measurement-time 3`

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use interlock::pipeline::{Hedge, Identity, Pipeline, RateLimit, chaos};

type Io = std::io::Error;

/// Polls a future that completes without waiting.
fn now<F: Future>(f: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn strategies(c: &mut Criterion) {
    let mut group = c.benchmark_group("strategies");

    let empty = Pipeline::builder().build();
    group.bench_function("pipeline_empty", |b| {
        b.iter(|| empty.call(|| Ok::<_, Io>(black_box(1))))
    });

    let noop = Pipeline::builder().add(Identity).build();
    group.bench_function("pipeline_noop_layer", |b| {
        b.iter(|| noop.call(|| Ok::<_, Io>(black_box(1))))
    });

    let off = chaos::Fault::builder(|| Io::other("chaos"))
        .injection_rate(1.0)
        .enabled(false)
        .build()
        .expect("config");
    let off = Pipeline::builder().chaos(off).build();
    group.bench_function("chaos_switched_off", |b| {
        b.iter(|| off.call(|| Ok::<_, Io>(black_box(1))))
    });

    let zero = chaos::Fault::builder(|| Io::other("chaos"))
        .injection_rate(0.0)
        .seed(1)
        .build()
        .expect("config");
    let zero = Pipeline::builder().chaos(zero).build();
    group.bench_function("chaos_rate_zero", |b| {
        b.iter(|| zero.call(|| Ok::<_, Io>(black_box(1))))
    });

    let limit = RateLimit::builder(u32::MAX, Duration::from_secs(3600))
        .build()
        .expect("config");
    let limited = Pipeline::builder().rate_limit(limit).build();
    group.bench_function("rate_limit_admitted", |b| {
        b.iter(|| limited.call(|| Ok::<_, Io>(black_box(1))))
    });

    let keyed = RateLimit::builder(u32::MAX, Duration::from_secs(3600))
        .build_keyed()
        .expect("config")
        .key("api.example.com");
    group.bench_function("keyed_rate_limit_admitted", |b| {
        b.iter(|| black_box(keyed.check()))
    });

    group.bench_function("async_noop_layer", |b| {
        b.iter(|| now(noop.call_async(|| async { Ok::<_, Io>(black_box(1)) })))
    });
    let hedge = Hedge::builder(Duration::from_secs(1))
        .build()
        .expect("config");
    let hedged = Pipeline::builder().hedge(hedge).build();
    group.bench_function("hedge_async_fast", |b| {
        b.iter(|| now(hedged.call_async(|| async { Ok::<_, Io>(black_box(1)) })))
    });
    group.finish();
}

criterion_group!(benches, strategies);
criterion_main!(benches);
