//! Counting a storage's calls: [`StorageOps`], read by tests to prove how
//! many storage operations a breaker made.

use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many calls a storage received, per operation.
///
/// [`MemoryStorage::operations`](crate::storage::MemoryStorage::operations) and
/// `FlakyStorage::calls` (feature `testing`) report it; subtracting two
/// readings gives the calls in between, which is how a test proves that a
/// coordinated breaker made no storage call at all in CLOSED or OPEN
/// (R15.2).
///
/// ```
/// use interlock::storage::{MemoryStorage, StorageOps};
/// use std::time::Duration;
///
/// let storage = MemoryStorage::new();
/// let before = storage.operations();
/// storage.trip_open("db", Duration::from_secs(60), None);
/// let _ = storage.read("db");
/// let delta = storage.operations() - before;
/// assert_eq!(delta, StorageOps { trips: 1, reads: 1, ..StorageOps::default() });
/// assert_eq!(delta.total(), 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StorageOps {
    /// Calls to `read`.
    pub reads: u64,
    /// Calls to `trip_open`.
    pub trips: u64,
    /// Calls to `begin_half_open_if_elapsed`.
    pub begins: u64,
    /// Calls to `lease_probe`.
    pub leases: u64,
    /// Calls to `record_probe`.
    pub records: u64,
    /// Calls to `close`.
    pub closes: u64,
    /// Calls to `restart_stalled_round`.
    pub restarts: u64,
    /// Calls to `restore`.
    pub restores: u64,
    /// Calls to `poll_many`: one per batched poll. The reads and begins a
    /// batch performs are counted in `reads` and `begins` too, and only
    /// there in [`total`](Self::total).
    pub batches: u64,
}

impl StorageOps {
    /// Calls of every kind together.
    ///
    /// ```
    /// use interlock::storage::StorageOps;
    ///
    /// let ops = StorageOps { reads: 3, leases: 2, ..StorageOps::default() };
    /// assert_eq!(ops.total(), 5);
    /// ```
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.reads
            .saturating_add(self.trips)
            .saturating_add(self.begins)
            .saturating_add(self.leases)
            .saturating_add(self.records)
            .saturating_add(self.closes)
            .saturating_add(self.restarts)
            .saturating_add(self.restores)
    }
}

impl Sub for StorageOps {
    type Output = StorageOps;

    /// The calls made between two readings (field by field, saturating).
    fn sub(self, earlier: StorageOps) -> StorageOps {
        StorageOps {
            reads: self.reads.saturating_sub(earlier.reads),
            trips: self.trips.saturating_sub(earlier.trips),
            begins: self.begins.saturating_sub(earlier.begins),
            leases: self.leases.saturating_sub(earlier.leases),
            records: self.records.saturating_sub(earlier.records),
            closes: self.closes.saturating_sub(earlier.closes),
            restarts: self.restarts.saturating_sub(earlier.restarts),
            restores: self.restores.saturating_sub(earlier.restores),
            batches: self.batches.saturating_sub(earlier.batches),
        }
    }
}

/// Lock-free per-operation counters behind [`StorageOps`].
#[derive(Debug, Default)]
pub(crate) struct OpCounters {
    reads: AtomicU64,
    trips: AtomicU64,
    begins: AtomicU64,
    leases: AtomicU64,
    records: AtomicU64,
    closes: AtomicU64,
    restarts: AtomicU64,
    restores: AtomicU64,
    batches: AtomicU64,
}

/// One of the six storage operations (or a batch of polls), for counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Read,
    Trip,
    Begin,
    Lease,
    Record,
    Close,
    Restart,
    Restore,
    Batch,
}

impl Op {
    /// The operation's name in the storage traits.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Trip => "trip_open",
            Op::Begin => "begin_half_open_if_elapsed",
            Op::Lease => "lease_probe",
            Op::Record => "record_probe",
            Op::Close => "close",
            Op::Restart => "restart_stalled_round",
            Op::Restore => "restore",
            Op::Batch => "poll_many",
        }
    }
}

impl OpCounters {
    pub(crate) fn count(&self, op: Op) {
        let counter = match op {
            Op::Read => &self.reads,
            Op::Trip => &self.trips,
            Op::Begin => &self.begins,
            Op::Lease => &self.leases,
            Op::Record => &self.records,
            Op::Close => &self.closes,
            Op::Restart => &self.restarts,
            Op::Restore => &self.restores,
            Op::Batch => &self.batches,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StorageOps {
        StorageOps {
            reads: self.reads.load(Ordering::Relaxed),
            trips: self.trips.load(Ordering::Relaxed),
            begins: self.begins.load(Ordering::Relaxed),
            leases: self.leases.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            closes: self.closes.load(Ordering::Relaxed),
            restarts: self.restarts.load(Ordering::Relaxed),
            restores: self.restores.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }
}
