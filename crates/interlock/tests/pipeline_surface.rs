//! The pipeline's error type and small building blocks, as a user sees
//! them: every `PipelineError` variant's accessors, text, source and
//! boxing; backoff builders; the bulkhead's and timeout's accessors.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::error::Error;
use std::time::Duration;

use interlock::pipeline::backoff::{Constant, Exponential, Jitter};
use interlock::pipeline::bulkhead::Bulkhead;
use interlock::pipeline::timeout::{Elapsed, Timeout};
use interlock::pipeline::{AsRejection, BoxError, Pipeline, PipelineError, Stack};
use interlock::{BulkheadFullError, CallError, CircuitBreaker, CircuitOpenError};

type Io = std::io::Error;

fn rejection() -> CircuitOpenError {
    let b = CircuitBreaker::new("svc");
    b.force_open();
    b.acquire().unwrap_err()
}

/// A real "bulkhead full": a call nested in the only slot's call.
fn bulkhead_full() -> PipelineError<Io> {
    let bulkhead = Bulkhead::builder(1).name("pool").build().unwrap();
    assert_eq!(bulkhead.name(), "pool");
    assert_eq!(bulkhead.max_concurrent(), 1);
    let text = format!("{bulkhead:?}");
    assert!(
        text.contains("\"pool\"") && text.contains("max_concurrent: 1"),
        "{text}"
    );
    let text = format!("{:?}", Bulkhead::builder(2).name("b"));
    assert!(text.contains("BulkheadBuilder"), "{text}");
    let pipeline = Pipeline::builder().bulkhead(bulkhead).build();
    let inner = pipeline.clone();
    let outer = pipeline.call(move || {
        let nested = inner.call(|| Ok::<_, Io>(()));
        Ok::<_, Io>(nested.unwrap_err())
    });
    outer.unwrap()
}

#[test]
fn every_pipeline_error_variant_answers_for_itself() {
    let inner: PipelineError<Io> = PipelineError::Inner(Io::other("db down"));
    assert!(inner.is_inner() && !inner.is_rejected() && !inner.is_timeout());
    assert!(!inner.is_bulkhead_full());
    assert_eq!(inner.inner().unwrap().to_string(), "db down");
    assert_eq!(inner.as_error().to_string(), "db down");
    assert!(inner.source().is_none());
    assert!(inner.as_rejection().is_none());
    let mapped = inner.map_inner(|e| e.kind());
    assert_eq!(mapped.into_inner(), Some(std::io::ErrorKind::Other));

    let rejected: PipelineError<Io> = PipelineError::from(rejection());
    assert!(rejected.is_rejected() && rejected.inner().is_none());
    // Issue 24: the layer describes itself, the rejection is the source.
    assert_eq!(rejected.to_string(), "call not permitted");
    assert_eq!(rejected.as_rejection().unwrap().breaker_name(), "svc");
    assert_eq!(
        rejected.source().unwrap().to_string(),
        "circuit 'svc' is open"
    );
    assert_eq!(rejected.find_rejection().unwrap().breaker_name(), "svc");
    let boxed: BoxError = rejected.map_inner(|e| e).into_boxed();
    assert_eq!(boxed.as_rejection().unwrap().breaker_name(), "svc");

    let elapsed = Elapsed::new(Duration::from_millis(250));
    assert_eq!(elapsed.duration(), Duration::from_millis(250));
    let timeout: PipelineError<Io> = PipelineError::from(elapsed);
    assert!(timeout.is_timeout() && timeout.into_inner().is_none());
    let timeout: PipelineError<Io> = Elapsed::new(Duration::from_secs(1)).into();
    assert!(timeout.source().is_none());
    assert!(!timeout.as_error().to_string().is_empty());
    let boxed = timeout.map_inner(|e| e).into_boxed();
    assert!(boxed.downcast_ref::<Elapsed>().is_some());
    assert!(boxed.as_rejection().is_none());

    let full = bulkhead_full();
    assert!(full.is_bulkhead_full(), "{full:?}");
    assert_eq!(
        full.to_string(),
        "bulkhead 'pool' is full (1 calls in flight)"
    );
    assert!(full.source().is_none());
    assert!(full.as_error().is::<BulkheadFullError>());
    let PipelineError::BulkheadFull(f) = &full else {
        unreachable!()
    };
    assert_eq!(f.max_concurrent(), 1);
    let again: PipelineError<Io> = PipelineError::from(f.clone());
    assert!(again.is_bulkhead_full());
    let boxed = full.map_inner(|e| e).into_boxed();
    assert!(boxed.downcast_ref::<BulkheadFullError>().is_some());

    let other: PipelineError<Io> = PipelineError::Other("no thread".into());
    assert_eq!(other.to_string(), "no thread");
    assert!(other.source().is_none());
    assert_eq!(other.as_error().to_string(), "no thread");
    assert_eq!(other.map_inner(|e| e).into_boxed().to_string(), "no thread");

    let from_call: PipelineError<Io> = CallError::Inner(Io::other("x")).into();
    assert!(from_call.is_inner());
    let from_call: PipelineError<Io> = CallError::<Io>::Rejected(rejection()).into();
    assert!(from_call.is_rejected());
    let call_err: CallError<Io> = CallError::Rejected(rejection());
    assert!(call_err.as_rejection().is_some());
    assert!(rejection().as_rejection().is_some());
}

#[test]
fn backoffs_grow_cap_and_jitter_reproducibly() {
    let grown: Vec<u64> = Exponential::new(Duration::from_millis(100))
        .factor(3)
        .max(Duration::from_millis(1_000))
        .take(5)
        .map(|d| d.as_millis() as u64)
        .collect();
    assert_eq!(grown, [100, 300, 900, 1_000, 1_000]);
    let jittered = |seed| -> Vec<Duration> {
        Exponential::new(Duration::from_secs(1))
            .jitter(seed)
            .take(4)
            .collect()
    };
    assert_eq!(jittered(9), jittered(9), "seeded: reproducible");
    assert_ne!(jittered(9), jittered(10));
    for (n, d) in jittered(9).into_iter().enumerate() {
        let full = Duration::from_secs(1 << n);
        assert!(
            d >= full / 2 && d <= full,
            "{d:?} outside [{:?}, {full:?}]",
            full / 2
        );
    }
    let constant: Vec<Duration> = Jitter::new(Constant::new(Duration::from_secs(2)), 1)
        .take(3)
        .collect();
    assert!(constant.iter().all(|d| *d >= Duration::from_secs(1)));
    let constant: Vec<Duration> = Constant::new(Duration::from_secs(2))
        .jitter(1)
        .take(3)
        .collect();
    assert_eq!(constant.len(), 3);
}

#[test]
fn layers_are_reachable_from_the_pipeline() {
    let timeout = Timeout::new(Duration::from_secs(5));
    assert_eq!(timeout.duration(), Duration::from_secs(5));
    let pipeline = Pipeline::new(Stack::new(timeout, Timeout::from(Duration::from_secs(1))));
    let stack = pipeline.get_ref().clone();
    assert_eq!(stack.outer().duration(), Duration::from_secs(5));
    assert_eq!(stack.inner().duration(), Duration::from_secs(1));
    assert_eq!(pipeline.call(|| Ok::<_, Io>(3)).unwrap(), 3);
}
