//! Issue 20, item 5 (bounded registries), through the keyed HTTP layer's own
//! keying: 100,000 requests to 100,000 distinct hosts keep at most
//! `DEFAULT_MAX_HOSTS` (10,000) breakers, and the heap stays bounded: its
//! peak is within 1.5 times what 10,000 breakers take, where an unbounded
//! registry would hold ten times that. Ten idle minutes later one request
//! sweeps every host but its own.
//!
//! Live bytes come from `allocation-counter`'s counting `#[global_allocator]`
//! (per thread: the layer runs on this thread, in a current-thread runtime).
//! The figures (`--nocapture`) are quoted in `docs/limits.md`, measured with
//! `cargo test --release -p interlock --features http --test many_hosts -- --nocapture`.
#![cfg(feature = "http")]
#![allow(clippy::unwrap_used, reason = "a failure fails the test")]

use std::convert::Infallible;
use std::time::Duration;

use allocation_counter::measure;
use interlock::ManualClock;
use interlock::http::{DEFAULT_EXPIRE_AFTER_IDLE, DEFAULT_MAX_HOSTS, KeyedCircuitBreakerLayer};
use tower::{Layer, ServiceExt};

const HOSTS: usize = 100_000;
/// Hosts measured before the bound is reached, for the bytes per breaker.
const FIRST: usize = 1_000;

#[test]
fn a_hundred_thousand_hosts_through_the_keyed_layer_keep_memory_bounded() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let clock = ManualClock::new();
    // The defaults: nothing about bounds is set here.
    let layer = KeyedCircuitBreakerLayer::builder()
        .clock(clock.clone())
        .build()
        .unwrap();
    let upstream = tower::service_fn(|_: http::Request<()>| async {
        Ok::<_, Infallible>(http::Response::new(()))
    });
    let service = layer.layer(upstream);
    let send = |i: usize| {
        clock.advance(Duration::from_millis(1));
        let request = http::Request::get(format!("http://h{i}.tenant.example.test/"))
            .body(())
            .unwrap();
        let response = runtime.block_on(service.clone().oneshot(request)).unwrap();
        assert_eq!(response.status(), 200);
    };
    // Warm up whatever is allocated once (the runtime, the thread's caches).
    send(HOSTS);
    let _ = layer
        .registry()
        .remove(&format!("h{HOSTS}.tenant.example.test:80"));

    let first = measure(|| (0..FIRST).for_each(send));
    let per_breaker = first.bytes_current / FIRST as i64;
    assert_eq!(layer.registry().len(), FIRST);

    let rest = measure(|| (FIRST..HOSTS).for_each(send));
    let peak = first.bytes_current + i64::try_from(rest.bytes_max).unwrap();
    let retained = first.bytes_current + rest.bytes_current;
    let kept = layer.registry().len();
    eprintln!(
        "{HOSTS} hosts: {per_breaker} bytes per breaker (first {FIRST}); {kept} kept; \
         peak {peak} bytes live, {retained} bytes retained at the end"
    );
    assert!(kept <= DEFAULT_MAX_HOSTS, "{kept} breakers kept");
    assert!(kept >= DEFAULT_MAX_HOSTS - DEFAULT_MAX_HOSTS / 32, "{kept}");
    // The most recent hosts are the ones kept.
    let last = format!("h{}.tenant.example.test:80", HOSTS - 1);
    assert!(layer.registry().get_existing(&last).is_some());
    let bound = DEFAULT_MAX_HOSTS as i64 * per_breaker * 3 / 2;
    assert!(
        peak <= bound,
        "peak {peak} bytes for {HOSTS} hosts, over 1.5 x {DEFAULT_MAX_HOSTS} breakers ({bound})"
    );
    assert!(retained <= bound, "{retained} bytes retained");

    // Ten quiet minutes, then one request: every other host is forgotten.
    // (The second request to it refreshes this thread's copy of the name
    // table, which until then still points at the forgotten breakers'
    // memory blocks: their contents were freed at once.)
    clock.advance(DEFAULT_EXPIRE_AFTER_IDLE);
    let after = measure(|| {
        send(0);
        send(0);
    });
    assert_eq!(layer.registry().len(), 1);
    let left = retained + after.bytes_current;
    eprintln!("after {DEFAULT_EXPIRE_AFTER_IDLE:?} idle: {left} bytes retained");
    assert!(
        left <= retained / 4,
        "{left} bytes still live for one breaker (from {retained})"
    );
}
