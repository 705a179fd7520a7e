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
//!   widens its CPU mask to every CPU the system allows first thing (through
//!   `rustix`, the one dependency of the core crate there).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, TryLockError, Weak};
use std::thread::JoinHandle;

/// The process a background thread was started in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner(u32);

/// The last process [`Owner::current`] or [`forked`] ran in.
static LAST_PID: AtomicU32 = AtomicU32::new(0);

/// An owner of a background thread that a `fork()` leaves behind.
pub(crate) trait Revive: Send + Sync {
    /// Starts the thread again if it belongs to another process. Must not
    /// block: called from whichever thread noticed the fork, possibly deep
    /// in a call.
    fn revive(&self);
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
    crate::clock::revive();
    crate::breaker::timer::Scheduler::revive_all();
    let owners: Vec<Arc<dyn Revive>> = match REVIVERS.try_lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(TryLockError::Poisoned(p)) => p.into_inner().iter().filter_map(Weak::upgrade).collect(),
        // Held when the parent forked: never released here. Each owner
        // still revives itself at its next write or attach.
        Err(TryLockError::WouldBlock) => Vec::new(),
    };
    for owner in owners {
        crate::event::isolate(|| owner.revive());
    }
}

impl Owner {
    /// The current process (a system call: keep it off hot paths).
    pub(crate) fn current() -> Owner {
        let pid = std::process::id();
        LAST_PID.store(pid, Ordering::Release);
        Owner(pid)
    }

    /// Whether a thread started by this owner can still be running: false
    /// in a `fork()`ed child.
    pub(crate) fn is_here(self) -> bool {
        self == Owner::current()
    }
}

/// Spawns a named background thread that first makes itself runnable on
/// every CPU (see the module docs), then runs `f`.
///
/// # Errors
///
/// The operating system refused a new thread.
pub(crate) fn spawn<T, F>(name: &str, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            run_anywhere();
            f()
        })
}

/// Widens the calling thread's CPU mask to every CPU (the kernel keeps it
/// within the process's cpuset), so a thread started from a pinned thread
/// is not confined to that thread's CPU. The scheduling policy is left as
/// inherited: a thread started by a real-time thread keeps its real-time
/// priority, which only makes it more punctual (each of ours sleeps between
/// short bursts of work).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn run_anywhere() {
    use rustix::thread::{CpuSet, sched_setaffinity};
    let mut all = CpuSet::new();
    for cpu in 0..CpuSet::MAX_CPU {
        all.set(cpu);
    }
    // Refused (a seccomp filter, say): the thread keeps its creator's mask,
    // and the coarse clock's readers still re-check it (see `clock.rs`).
    let _ = sched_setaffinity(None, &all);
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn run_anywhere() {}

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
            spawn("interlock-test", allowed_cpus)
                .expect("spawn")
                .join()
                .expect("join")
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
