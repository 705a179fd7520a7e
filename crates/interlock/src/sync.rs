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

/// How many times [`lock`] tries a taken mutex before it waits for it.
#[cfg(not(all(test, interlock_loom)))]
const LOCK_TRIES: u32 = 64;

/// Spin-loop hints between two of [`lock`]'s tries.
#[cfg(not(all(test, interlock_loom)))]
const LOCK_PAUSES: u32 = 4;

/// Locks `mutex`, taking a poisoned one as it stands.
///
/// The breaker's machine lock is usually held for well under a
/// microsecond, so a thread that finds it taken tries again a few times (a
/// few microseconds in all) before it waits in `Mutex::lock`. `std`'s mutex
/// spins only while the lock stays taken and then parks the thread in the
/// kernel, marking the lock contended, so that both threads then make a
/// futex call: with two threads failing one call in ten on one count
/// window, about one failure in twelve did (670,000 futex calls in
/// 80,000,000 calls; 1,375–1,634 with the tries). Under loom the tries are
/// left out (a spinning thread would multiply the interleavings explored).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(not(all(test, interlock_loom)))]
    for _ in 0..LOCK_TRIES {
        match mutex.try_lock() {
            Ok(guard) => return guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                for _ in 0..LOCK_PAUSES {
                    std::hint::spin_loop();
                }
            }
        }
    }
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
