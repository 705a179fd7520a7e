//! A circuit breaker that trips on a failure rate over a sliding window.
//!
//! `interlock` guards calls to a dependency. While the dependency is
//! healthy every call goes through and its outcome is counted in a
//! count- or time-based sliding window; once the failure rate (or the rate
//! of slow calls) crosses its threshold, the breaker **opens** and rejects
//! calls at once, giving the dependency time to recover. After a wait, a
//! bounded round of **probe** calls decides whether to close again.
//!
//! ```
//! use interlock::{CallError, CircuitBreaker, Config, ManualClock, SlidingWindow, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let breaker = CircuitBreaker::builder("payments")
//!     .config(
//!         Config::builder()
//!             .minimum_number_of_calls(4)
//!             .sliding_window(SlidingWindow::count(4))
//!             .wait_duration_in_open(Duration::from_secs(1))
//!             .permitted_calls_in_half_open(2)
//!             .build()?,
//!     )
//!     .clock(clock.clone())
//!     .build()?;
//!
//! for healthy in [true, true, false, false] {
//!     let _ = breaker.call(|| if healthy { Ok(()) } else { Err(std::io::Error::other("503")) });
//! }
//! assert_eq!(breaker.state(), State::Open); // 2 failures of 4 = 50%
//! assert!(matches!(breaker.call(|| Ok::<_, std::io::Error>(())), Err(CallError::Rejected(_))));
//!
//! clock.advance(Duration::from_secs(1));
//! for _ in 0..2 {
//!     breaker.call(|| Ok::<_, std::io::Error>(())).unwrap(); // two passing probes
//! }
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), interlock::ConfigError>(())
//! ```
//!
//! # Features
//!
//! | feature   | what it adds                                              |
//! |-----------|-----------------------------------------------------------|
//! | `tracing` | [`LoggingEventListener`](struct@LoggingEventListener), reporting events via `tracing`  |
//! | `tokio`   | `pipeline::TokioSleeper`: pipeline waits on tokio's timer; `storage::Coordinator::asynchronous`, a coordinator lane on a tokio task |
//! | `tower`   | `tower::CircuitBreakerLayer`, a breaker as tower middleware; `tower::HedgeLayer` and `tower::ChaosLayer` |
//! | `backon`  | `pipeline::backon`: retry helpers for the `backon` crate  |
//! | `http`    | `http`: one breaker per host for HTTP clients (implies `tower`) |
//! | `governor` | `pipeline::rate_limit`: rate limiting (global or per key) on the `governor` crate's GCRA; with `tower`, `tower::RateLimitLayer` and `tower::KeyedRateLimitLayer` |
//! | `testing` | `storage::contract`, the public test suite for storage implementations, and `storage::testing::FlakyStorage` |
//! | `full`    | every feature above                                       |
//!
//! No feature is on by default. Hedging (`pipeline::Hedge`) and chaos
//! injection (`pipeline::chaos`) need none: they are always compiled. Rate
//! limiting is the one pipeline strategy behind a feature, because GCRA
//! done well (lock-free, keyed, with housekeeping) is what `governor`
//! already is.
//!
//! # Dependencies
//!
//! Without features the crate has one dependency, on Linux and Android
//! only: [`rustix`](https://docs.rs/rustix) (its `thread` API), the
//! Bytecode Alliance's safe bindings to the system calls, for
//! **`sched_setaffinity`**, which `std` does not offer and which would
//! otherwise need `unsafe` (this crate forbids it). The crate's background
//! threads (the coarse clock's ticker, the `auto_transition` timer, the
//! pipeline's sleeper, the coordinator lanes) are started with every CPU
//! in their mask, so a thread pinned beside a `SCHED_FIFO` spinner that
//! happens to start one does not confine it to a CPU where it never runs.
//! Only that system call is used: not rustix's vDSO clock, which cannot
//! run under valgrind.
//!
//! # Guides
//!
//! The long-form guides live in the repository's `docs/` folder: getting
//! started, configuration (every knob and its default), states and operator
//! controls with the safe-rollout procedure, failure classification,
//! timeout, retries and the pipeline, integrations, web frameworks,
//! observability, coordinated state, known limits, performance,
//! correctness, a comparison with other crates and migration guides (from
//! the Python original name by name, and from failsafe, recloser and
//! tower-resilience). Their examples run as the doctests of the
//! workspace's `interlock-guide` crate.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85. Raising it is a minor-version change.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod background;
mod breaker;
mod classify;
mod clock;
mod config;
mod error;
mod event;
pub mod failure;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod identity;
#[cfg(feature = "tracing")]
mod logging;
mod machine;
pub mod mode;
mod per_breaker;
pub mod pipeline;
mod policy;
mod registry;
pub mod rejection;
mod state;
pub mod storage;
mod store;
mod sync;
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower;
mod window;

pub use breaker::{CircuitBreaker, CircuitBreakerBuilder, Permit};
pub use classify::Verdict;
pub use clock::{
    COARSE_MIN_SLOW_THRESHOLD, Clock, CoarseClock, ManualClock, MonotonicClock, Timestamp,
};
pub use config::{
    Config, ConfigBuilder, MAX_BACKOFF_ROUNDS, MAX_COUNT_WINDOW, MAX_TIME_WINDOW_SECS,
    SlidingWindow,
};
pub use error::{CallError, CircuitOpenError, ConfigError};
pub use event::{Event, EventListener, FanOut};
pub use failure::{Failure, find_rejection, register_opener};
pub use identity::LastFailure;
#[cfg(feature = "tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "tracing")))]
pub use logging::LoggingEventListener;
pub use machine::{Admission, Machine, ProbeCounters, Refusal, Transition};
pub use per_breaker::PerBreaker;
pub use pipeline::bulkhead::Full as BulkheadFullError;
pub use pipeline::timeout::Elapsed as CallTimeoutError;
pub use pipeline::{Pipeline, PipelineError};
pub use policy::{
    HalfOpenPolicy, MAX_FAILURES_WITHIN, MAX_PROGRESSIVE_STAGES, ProgressiveStages, TripPolicy,
};
pub use registry::{Registry, RegistryBuilder};
pub use state::{Outcome, ParseStateError, State};
pub use window::Snapshot;
