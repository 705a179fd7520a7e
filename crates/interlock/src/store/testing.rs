//! Test helpers for coordinated breakers: [`FlakyStorage`], a storage that
//! fails on command, for degradation and recovery tests (R16.10, R17.6).

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::state::Outcome;

use super::memory::{Op, OpCounters};
use super::{
    AsyncStorage, ProbeLease, SharedState, Storage, StorageError, StorageOps, StorageSettings,
};

/// The error a [`FlakyStorage`] returns when told to fail: recognise it with
/// [`is_injected`] or [`InjectedFailure::from_error`].
///
/// ```
/// use interlock::storage::testing::{FlakyStorage, InjectedFailure};
/// use interlock::storage::{MemoryStorage, Storage};
///
/// let flaky = FlakyStorage::new(MemoryStorage::new());
/// flaky.set_down(true);
/// let err = Storage::read(&flaky, "db").unwrap_err();
/// let injected = err.downcast_ref::<InjectedFailure>().unwrap();
/// assert_eq!((injected.operation(), injected.name()), ("read", "db"));
/// assert_eq!(err.to_string(), "injected storage failure: read(\"db\")");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectedFailure {
    operation: &'static str,
    name: String,
}

impl InjectedFailure {
    /// The `InjectedFailure` that `error` is, if it is one.
    ///
    /// ```
    /// use interlock::storage::testing::InjectedFailure;
    /// use interlock::storage::StorageError;
    ///
    /// let other: StorageError = "connection reset".into();
    /// assert!(InjectedFailure::from_error(&other).is_none());
    /// ```
    #[must_use]
    pub fn from_error(error: &StorageError) -> Option<&InjectedFailure> {
        error.downcast_ref::<InjectedFailure>()
    }

    /// The operation that failed (`"read"`, `"trip_open"`, ...).
    ///
    /// ```
    /// use interlock::storage::testing::{FlakyStorage, InjectedFailure};
    /// use interlock::storage::{MemoryStorage, Storage};
    /// use std::time::Duration;
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.fail_next(1);
    /// let err = Storage::lease_probe(&flaky, "db", Duration::from_secs(1)).unwrap_err();
    /// assert_eq!(InjectedFailure::from_error(&err).unwrap().operation(), "lease_probe");
    /// ```
    #[must_use]
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The breaker name the operation was for.
    ///
    /// ```
    /// use interlock::storage::testing::{FlakyStorage, InjectedFailure};
    /// use interlock::storage::{MemoryStorage, Storage};
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.fail_next(1);
    /// let err = Storage::read(&flaky, "payments").unwrap_err();
    /// assert_eq!(InjectedFailure::from_error(&err).unwrap().name(), "payments");
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for InjectedFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "injected storage failure: {}({:?})",
            self.operation, self.name
        )
    }
}

impl Error for InjectedFailure {}

/// Whether `error` is an [`InjectedFailure`]: a [`FlakyStorage`] failing on
/// command, rather than a real backend error.
///
/// ```
/// use interlock::storage::testing::{FlakyStorage, is_injected};
/// use interlock::storage::{MemoryStorage, Storage, StorageError};
///
/// let flaky = FlakyStorage::new(MemoryStorage::new());
/// flaky.set_down(true);
/// assert!(is_injected(&Storage::read(&flaky, "db").unwrap_err()));
/// let other: StorageError = "connection reset".into();
/// assert!(!is_injected(&other));
/// ```
#[must_use]
pub fn is_injected(error: &StorageError) -> bool {
    InjectedFailure::from_error(error).is_some()
}

#[derive(Debug, Default)]
struct Switches {
    down: AtomicBool,
    fail_next: AtomicU64,
    failures: AtomicU64,
    calls: OpCounters,
}

/// Wraps any [`Storage`] or [`AsyncStorage`] and fails on command, counting
/// every call: for degradation, retry and recovery tests.
///
/// While [`set_down(true)`](Self::set_down), or for the next
/// [`fail_next(n)`](Self::fail_next) calls, every operation returns an
/// [`InjectedFailure`] without reaching the inner storage (so nothing is
/// written). Clones share the switches and counters; it implements each
/// storage trait its inner storage implements. It keeps no change index
/// (R16.15): `poll_many` and `poll_changes` are the traits' defaults, so a
/// poll is one gated call per breaker and reads everything.
///
/// ```
/// use interlock::storage::testing::FlakyStorage;
/// use interlock::storage::{MemoryStorage, Storage, StorageOps};
/// use std::time::Duration;
///
/// let flaky = FlakyStorage::new(MemoryStorage::new());
/// let ttl = Duration::from_secs(60);
/// flaky.fail_next(2);
/// assert!(Storage::trip_open(&flaky, "db", ttl, None).is_err());
/// assert!(Storage::read(&flaky, "db").is_err());
/// assert_eq!(Storage::read(&flaky, "db")?, None); // the failed trip wrote nothing
/// assert_eq!(flaky.calls(), StorageOps { trips: 1, reads: 2, ..StorageOps::default() });
/// assert_eq!(flaky.failures(), 2);
/// # Ok::<(), interlock::storage::StorageError>(())
/// ```
pub struct FlakyStorage<S> {
    inner: S,
    switches: Arc<Switches>,
}

impl<S: Clone> Clone for FlakyStorage<S> {
    fn clone(&self) -> Self {
        FlakyStorage {
            inner: self.inner.clone(),
            switches: Arc::clone(&self.switches),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for FlakyStorage<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FlakyStorage")
            .field("inner", &self.inner)
            .field("down", &self.is_down())
            .field("fail_next", &self.switches.fail_next.load(Ordering::SeqCst))
            .field("calls", &self.calls())
            .field("failures", &self.failures())
            .finish()
    }
}

impl<S> FlakyStorage<S> {
    /// Wraps `inner`, healthy.
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::MemoryStorage;
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// assert!(!flaky.is_down());
    /// ```
    pub fn new(inner: S) -> Self {
        FlakyStorage {
            inner,
            switches: Arc::default(),
        }
    }

    /// The wrapped storage, to inspect or change it behind the breaker's
    /// back.
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::MemoryStorage;
    /// use std::time::Duration;
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.set_down(true);
    /// flaky.inner().trip_open("db", Duration::from_secs(60), None); // bypasses the switch
    /// assert!(flaky.inner().peek("db").is_some());
    /// ```
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Takes the storage down (every call fails) or back up. Bringing it up
    /// does not cancel a pending [`fail_next`](Self::fail_next).
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::{MemoryStorage, Storage};
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.set_down(true);
    /// assert!(Storage::read(&flaky, "db").is_err());
    /// flaky.set_down(false);
    /// assert!(Storage::read(&flaky, "db").is_ok());
    /// ```
    pub fn set_down(&self, down: bool) {
        self.switches.down.store(down, Ordering::SeqCst);
    }

    /// Whether [`set_down(true)`](Self::set_down) is in force.
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::MemoryStorage;
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.set_down(true);
    /// assert!(flaky.is_down());
    /// ```
    #[must_use]
    pub fn is_down(&self) -> bool {
        self.switches.down.load(Ordering::SeqCst)
    }

    /// Makes the next `n` calls fail (replacing any count still pending;
    /// calls while [down](Self::set_down) count towards it).
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::{MemoryStorage, Storage};
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.fail_next(1);
    /// assert!(Storage::read(&flaky, "db").is_err());
    /// assert!(Storage::read(&flaky, "db").is_ok());
    /// ```
    pub fn fail_next(&self, n: u64) {
        self.switches.fail_next.store(n, Ordering::SeqCst);
    }

    /// Every call received so far, per operation, failed ones included.
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::{MemoryStorage, Storage};
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// let _ = Storage::read(&flaky, "db");
    /// assert_eq!(flaky.calls().reads, 1);
    /// ```
    #[must_use]
    pub fn calls(&self) -> StorageOps {
        self.switches.calls.snapshot()
    }

    /// How many calls failed on command.
    ///
    /// ```
    /// use interlock::storage::testing::FlakyStorage;
    /// use interlock::storage::{MemoryStorage, Storage};
    ///
    /// let flaky = FlakyStorage::new(MemoryStorage::new());
    /// flaky.set_down(true);
    /// let _ = Storage::read(&flaky, "db");
    /// assert_eq!(flaky.failures(), 1);
    /// ```
    #[must_use]
    pub fn failures(&self) -> u64 {
        self.switches.failures.load(Ordering::SeqCst)
    }

    /// Counts the call and decides whether it fails.
    fn gate(&self, op: Op, name: &str) -> Result<(), StorageError> {
        let sw = &self.switches;
        sw.calls.count(op);
        let forced = sw
            .fail_next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if forced || sw.down.load(Ordering::SeqCst) {
            sw.failures.fetch_add(1, Ordering::SeqCst);
            return Err(Box::new(InjectedFailure {
                operation: op.as_str(),
                name: name.to_owned(),
            }));
        }
        Ok(())
    }
}

impl<S: Storage> Storage for FlakyStorage<S> {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.gate(Op::Read, name)?;
        self.inner.read(name)
    }

    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Trip, name)?;
        self.inner.trip_open(name, ttl, expected_version)
    }

    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Begin, name)?;
        self.inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
    }

    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.gate(Op::Lease, name)?;
        self.inner.lease_probe(name, ttl)
    }

    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Record, name)?;
        self.inner.record_probe(name, outcome, ttl)
    }

    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Close, name)?;
        self.inner.close(name, ttl, expected_version)
    }

    fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Restart, name)?;
        self.inner
            .restart_stalled_round(name, expected_version, permitted, ttl)
    }

    fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Restore, name)?;
        self.inner.restore(name, expected_version, state, ttl)
    }

    fn settings(&self) -> StorageSettings {
        self.inner.settings()
    }
}

impl<S: AsyncStorage> AsyncStorage for FlakyStorage<S> {
    async fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        self.gate(Op::Read, name)?;
        self.inner.read(name).await
    }

    async fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Trip, name)?;
        self.inner.trip_open(name, ttl, expected_version).await
    }

    async fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Begin, name)?;
        self.inner
            .begin_half_open_if_elapsed(name, wait, permitted, ttl)
            .await
    }

    async fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        self.gate(Op::Lease, name)?;
        self.inner.lease_probe(name, ttl).await
    }

    async fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Record, name)?;
        self.inner.record_probe(name, outcome, ttl).await
    }

    async fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Close, name)?;
        self.inner.close(name, ttl, expected_version).await
    }

    async fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Restart, name)?;
        self.inner
            .restart_stalled_round(name, expected_version, permitted, ttl)
            .await
    }

    async fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        self.gate(Op::Restore, name)?;
        self.inner.restore(name, expected_version, state, ttl).await
    }

    fn settings(&self) -> StorageSettings {
        self.inner.settings()
    }
}
