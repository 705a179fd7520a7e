//! The crate's background threads (the coarse clock's ticker, the
//! `auto_transition` timer, the pipeline's sleeper and the coordinator
//! lanes): how they are started, and how their owners notice that they are
//! gone.
//!
//! Two things can silently take such a thread away:
//!
//! - **`fork()`**: a child process inherits a copy of every thread's memory
//!   but only the forking thread. Each owner records the process its thread
//!   runs in ([`Owner`]) and starts a new one when it finds itself in
//!   another ([`Owner::is_here`]); the first owner to notice tells the
//!   others ([`forked`]), so that one busy breaker's clock check, timer or
//!   coordinator write brings every background thread of the child back.
//! - **Scheduling**: a thread inherits its creator's CPU mask (and policy),
//!   so a ticker started by a thread pinned to one CPU, next to a
//!   `SCHED_FIFO` spinner, would never run. On Linux every background thread
//!   is started with a mask of every CPU the system allows (through
//!   `rustix`, the one dependency of the core crate there), see [`spawn`].

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError, Weak};
use std::thread::JoinHandle;

/// The process a background thread was started in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner(u32);

/// The process whose threads the owners last knew to be running: the first
/// to start one ([`Owner::current`]), then each `fork()`ed child ([`forked`]).
static LAST_PID: AtomicU32 = AtomicU32::new(0);

/// An owner of a background thread that a `fork()` leaves behind.
pub(crate) trait Revive: Send + Sync {
    /// Starts the thread again if it belongs to another process. Must not
    /// block: called from whichever thread noticed the fork, possibly deep
    /// in a call.
    fn revive(&self);
}

/// The crate's statics that own a thread (the coarse clock, the timer and
/// sleep schedulers), each revived after a fork by the function it set
/// with [`on_fork`] when it first started its thread. Set-once cells, so
/// that [`forked`] reads them without a lock; and `background` stays below
/// the modules that own the threads, never naming them.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Hook {
    /// The coarse clock's ticker.
    Clock = 0,
    /// The `auto_transition` timer and the pipeline's sleeper.
    Timers = 1,
}

static HOOKS: [OnceLock<fn()>; 2] = [OnceLock::new(), OnceLock::new()];

/// Sets what a `fork()`ed child runs to revive `hook`'s thread (the first
/// call for a hook wins; later calls are one atomic load).
pub(crate) fn on_fork(hook: Hook, revive: fn()) {
    let _ = HOOKS[hook as usize].get_or_init(|| revive);
}

/// Owners beyond the crate's statics (the coordinator lanes), held weakly.
static REVIVERS: Mutex<Vec<Weak<dyn Revive>>> = Mutex::new(Vec::new());

/// Registers an owner to be revived after a fork.
pub(crate) fn register(owner: Weak<dyn Revive>) {
    let mut all = REVIVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.retain(|o| o.strong_count() > 0);
    all.push(owner);
}

/// Called by an owner that found its thread gone (this is a `fork()`ed
/// child): revives every owner, once per process. Never blocks.
pub(crate) fn forked() {
    let pid = std::process::id();
    if LAST_PID.swap(pid, Ordering::AcqRel) == pid {
        return;
    }
    for hook in &HOOKS {
        if let Some(revive) = hook.get() {
            isolate(revive);
        }
    }
    let owners: Vec<Arc<dyn Revive>> = match REVIVERS.try_lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(TryLockError::Poisoned(p)) => p.into_inner().iter().filter_map(Weak::upgrade).collect(),
        // Held when the parent forked: never released here. Each owner
        // still revives itself at its next write or attach.
        Err(TryLockError::WouldBlock) => Vec::new(),
    };
    for owner in owners {
        isolate(|| owner.revive());
    }
}

/// Runs `f`, catching a panic: `false` if it panicked. The panic's payload
/// is dropped under the same guard (a payload whose `Drop` panics again is
/// leaked instead), so nothing unwinds out of here: a background thread
/// running user code (listeners, clocks, wakers) survives it.
pub(crate) fn isolate(f: impl FnOnce()) -> bool {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => true,
        Err(payload) => {
            drop_payload(payload);
            false
        }
    }
}

/// Drops a caught panic's payload; one whose `Drop` panics is leaked.
pub(crate) fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

impl Owner {
    /// The current process (a system call: keep it off hot paths).
    pub(crate) fn current() -> Owner {
        let pid = std::process::id();
        // The first process to start a thread; a child's is recorded by
        // `forked`, so that it still finds the parent's here.
        let _ = LAST_PID.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire);
        Owner(pid)
    }

    /// Whether a thread started by this owner can still be running: false
    /// in a `fork()`ed child.
    pub(crate) fn is_here(self) -> bool {
        self == Owner::current()
    }

    /// An owner that is not this process (pid 0 is never a user process):
    /// for tests that stand for a `fork()`ed child.
    #[cfg(test)]
    pub(crate) fn elsewhere() -> Owner {
        Owner(0)
    }
}

/// Spawns a named background thread that may run on every CPU (see the
/// module docs).
///
/// # Errors
///
/// The operating system refused a new thread.
pub(crate) fn spawn<T, F>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let builder = std::thread::Builder::new().name(name.into());
    let _wide = Widened::new();
    builder.spawn(f)
}

/// While alive, the calling thread may run on every CPU (the kernel keeps
/// it within the process's cpuset), so a thread it spawns inherits that
/// mask; dropping it restores the caller's own mask.
///
/// The new thread cannot widen its mask itself: started on the one CPU of a
/// `SCHED_FIFO` thread spinning there, at the same priority, it would never
/// run to do it. The creator's scheduling policy is inherited as it is: a
/// thread started by a real-time thread keeps its real-time priority,
/// which only makes it more punctual (each of ours sleeps between short
/// bursts of work). Refused (a seccomp filter, say), nothing changes and
/// the coarse clock's readers still re-check it (see `clock.rs`).
#[cfg(any(target_os = "linux", target_os = "android"))]
struct Widened(Option<rustix::thread::CpuSet>);

#[cfg(any(target_os = "linux", target_os = "android"))]
impl Widened {
    fn new() -> Self {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let Ok(own) = sched_getaffinity(None) else {
            return Widened(None);
        };
        let mut all = CpuSet::new();
        for cpu in 0..CpuSet::MAX_CPU {
            all.set(cpu);
        }
        match sched_setaffinity(None, &all) {
            // Already wide (the common case): nothing to restore.
            Ok(()) if sched_getaffinity(None).is_ok_and(|now| now == own) => Widened(None),
            Ok(()) => Widened(Some(own)),
            Err(_) => Widened(None),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
impl Drop for Widened {
    fn drop(&mut self) {
        if let Some(own) = &self.0 {
            let _ = rustix::thread::sched_setaffinity(None, own);
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
struct Widened;

#[cfg(not(any(target_os = "linux", target_os = "android")))]
impl Widened {
    fn new() -> Self {
        Widened
    }
}

/// The CPUs the calling thread may run on (Linux), for tests.
#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
pub(crate) fn allowed_cpus() -> usize {
    rustix::thread::sched_getaffinity(None).map_or(0, |set| set.count() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_is_the_current_process() {
        let owner = Owner::current();
        assert!(owner.is_here());
        assert_eq!(owner, Owner(std::process::id()));
        assert!(!Owner(owner.0.wrapping_add(1)).is_here());
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_background_thread_started_from_a_pinned_thread_may_run_anywhere() {
        use rustix::thread::{CpuSet, sched_setaffinity};
        let available = allowed_cpus();
        let widened = std::thread::spawn(|| {
            let mut one = CpuSet::new();
            one.set(0);
            sched_setaffinity(None, &one).expect("pin to CPU 0");
            assert_eq!(allowed_cpus(), 1);
            let widened = spawn("interlock-test", allowed_cpus)
                .expect("spawn")
                .join()
                .expect("join");
            assert_eq!(allowed_cpus(), 1, "the creator's own mask is restored");
            widened
        })
        .join()
        .expect("join");
        // Every CPU the process may use (more if the process itself was
        // started on fewer than its cpuset allows), not the creator's one.
        assert!(
            widened >= available,
            "{widened} CPUs, the process has {available}"
        );
    }
}
