//! The synchronisation the breaker's hot path is built on, swappable for
//! [`loom`](https://docs.rs/loom)'s model-checked versions.
//!
//! A normal build re-exports `std`. A test build under
//! `RUSTFLAGS="--cfg interlock_loom"` takes the same names from `loom` (a
//! dev-dependency), so the loom tests explore every interleaving of the
//! status word, the OPEN deadline and the machine lock. Only that hot-path
//! state goes through here; the timer thread, the registry's thread-local
//! cache and the process-wide statics stay on `std`. The cfg is our own
//! name, not `loom`: tokio changes its API under `--cfg loom`, which would
//! break dev-dependencies built with the same flags.

#[cfg(not(all(test, interlock_loom)))]
pub(crate) use std::sync::atomic::AtomicU64;
#[cfg(not(all(test, interlock_loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(all(test, interlock_loom))]
pub(crate) use loom::sync::atomic::AtomicU64;
#[cfg(all(test, interlock_loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
