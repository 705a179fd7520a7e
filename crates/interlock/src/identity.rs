//! What a breaker and its rejections share: the breaker's name, copied into
//! each rejection without touching a shared counter, and its last failure,
//! which a rejection captures as a version number (one load, no shared
//! write) and finds again when it is asked for it.
//!
//! A rejection is the hot path of an OPEN breaker, so it must not clone an
//! `Arc` (an atomic read-modify-write on a line every rejecting thread
//! writes, and another one when the error is dropped). A name of up to
//! [`INLINE_NAME`] bytes is copied inline; a longer one shares an `Arc<str>`.
//! The last failure is versioned: each change bumps a counter, and the
//! breaker keeps its last [`KEPT_FAILURES`] versions, so a rejection reads
//! the failure that was current when it was made (R11.3), not a later one.
//! Its breaker is found through a table of live breakers split into
//! [`SHARDS`] locks by id, so two breakers almost never share a lock; the
//! table is written only when a breaker is created or dropped.

use std::collections::{BTreeMap, VecDeque};
use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The most recent error a breaker judged a failure (R11.3), kept as its
/// type name and message so it can travel in a `Send + Sync + Clone`
/// rejection whatever the caller's error type.
///
/// ```
/// use interlock::{CallError, CircuitBreaker, Config, SlidingWindow};
///
/// let breaker = CircuitBreaker::builder("db")
///     .config(Config::builder().minimum_number_of_calls(1).sliding_window(SlidingWindow::count(1)).build()?)
///     .build()?;
/// let _ = breaker.call(|| Err::<(), _>(std::io::Error::other("connection refused")));
/// let Err(CallError::Rejected(open)) = breaker.call(|| Ok::<_, std::io::Error>(())) else { panic!() };
/// let last = open.last_failure().unwrap();
/// assert_eq!(last.message(), "connection refused");
/// assert_eq!(last.type_name(), "std::io::error::Error");
/// # Ok::<(), interlock::ConfigError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LastFailure(Arc<LastFailureInner>);

#[derive(PartialEq, Eq)]
struct LastFailureInner {
    type_name: &'static str,
    message: Box<str>,
}

impl LastFailure {
    pub(crate) fn new(type_name: &'static str, message: String) -> Self {
        LastFailure(Arc::new(LastFailureInner {
            type_name,
            message: message.into_boxed_str(),
        }))
    }

    #[inline]
    pub(crate) fn same_as(&self, type_name: &'static str, message: &str) -> bool {
        // One type's name is one string: compared by address first.
        (std::ptr::eq(self.0.type_name, type_name) || self.0.type_name == type_name)
            && &*self.0.message == message
    }

    /// The error's `Display` text.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The Rust type name of the error ([`std::any::type_name`]).
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        self.0.type_name
    }
}

impl fmt::Debug for LastFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LastFailure")
            .field("type_name", &self.0.type_name)
            .field("message", &self.0.message)
            .finish()
    }
}

impl fmt::Display for LastFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl Error for LastFailure {}

/// The longest name a rejection carries inline (bytes): host and service
/// names fit; a longer name costs an `Arc` clone per rejection.
pub(crate) const INLINE_NAME: usize = 31;

/// A short name's bytes, aligned so that a copy is two 16-byte moves.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct InlineName {
    len: u8,
    bytes: [u8; INLINE_NAME],
}

/// A breaker's name as a rejection carries it: inline when short, else
/// shared. A plain struct rather than an enum: a copy is a few aligned
/// moves, and dropping it only looks at `long`.
pub(crate) struct BreakerName {
    inline: InlineName,
    long: Option<Arc<str>>,
}

// Written out rather than derived: with the derived impl, LLVM stopped
// inlining `CircuitBreaker::call` into a caller as small as the
// instruction-count benchmark's (measured 50 → 65 instructions for a closed
// call), though the two do the same.
impl Clone for BreakerName {
    #[inline]
    fn clone(&self) -> Self {
        BreakerName {
            inline: self.inline,
            long: self.long.clone(),
        }
    }
}

/// A long name is released out of line, the `Arc` passed in registers. With
/// `Arc`'s own drop inlined, the error's address escapes into
/// `Arc::drop_slow`, and the compiler then keeps a copy of the whole error on
/// the stack even where the caller only asks `is_ok()`; measured, that copy
/// was a third of a rejection's instructions (74 → 52).
impl Drop for BreakerName {
    #[inline]
    fn drop(&mut self) {
        if let Some(long) = self.long.take() {
            drop_long(long);
        }
    }
}

#[cold]
#[inline(never)]
fn drop_long(long: Arc<str>) {
    drop(long);
}

impl BreakerName {
    pub(crate) fn new(name: &Arc<str>) -> Self {
        let mut inline = InlineName {
            len: 0,
            bytes: [0; INLINE_NAME],
        };
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= INLINE_NAME => {
                inline.len = len;
                inline.bytes[..name.len()].copy_from_slice(name.as_bytes());
                BreakerName { inline, long: None }
            }
            _ => BreakerName {
                inline,
                long: Some(Arc::clone(name)),
            },
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match &self.long {
            Some(name) => name,
            None => {
                let len = usize::from(self.inline.len);
                let bytes = self.inline.bytes.get(..len).unwrap_or_default();
                // Always whole: `new` copies a complete `str` or nothing.
                std::str::from_utf8(bytes).unwrap_or_default()
            }
        }
    }

    #[cfg(test)]
    fn is_inline(&self) -> bool {
        self.long.is_none()
    }
}

impl fmt::Debug for BreakerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// How many versions of its last failure a breaker keeps for the rejections
/// that carry them: a rejection read after this many newer failures (or
/// resets) finds none.
pub(crate) const KEPT_FAILURES: usize = 8;

/// How many locks the table of live breakers is split into (by id).
const SHARDS: usize = 64;

/// One breaker's identity: its name, id and last failure (R11.3).
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) id: u64,
    name: Arc<str>,
    /// The name as rejections copy it.
    pub(crate) rejection_name: BreakerName,
    failures: Arc<Failures>,
}

/// A breaker's last failure and its recent versions.
#[derive(Debug, Default)]
struct Failures {
    /// The current version, written under `log` after the log has it.
    version: AtomicU64,
    /// The last [`KEPT_FAILURES`] versions, oldest first; the last is the
    /// current one. Version 0 is "no failure".
    log: Mutex<VecDeque<(u64, Option<LastFailure>)>>,
}

impl Failures {
    fn log(&self) -> MutexGuard<'_, VecDeque<(u64, Option<LastFailure>)>> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn at(&self, version: u64) -> Option<LastFailure> {
        let log = self.log();
        let index = log.binary_search_by_key(&version, |(v, _)| *v).ok()?;
        log.get(index).and_then(|(_, f)| f.clone())
    }
}

type Shard = Mutex<BTreeMap<u64, Arc<Failures>>>;

/// Live breakers' failures by id, so a rejection can read its failure
/// without holding the breaker.
static LIVE: [Shard; SHARDS] = [const { Mutex::new(BTreeMap::new()) }; SHARDS];

fn shard(id: u64) -> MutexGuard<'static, BTreeMap<u64, Arc<Failures>>> {
    // The id is below `SHARDS` after the remainder.
    let index = usize::try_from(id % SHARDS as u64).unwrap_or_default();
    LIVE.get(index)
        .unwrap_or(&LIVE[0])
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

impl Identity {
    /// A new identity, registered in the table of live breakers until it is
    /// dropped.
    pub(crate) fn register(name: &str) -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = name.into();
        let failures = Arc::new(Failures::default());
        failures.log().push_back((0, None));
        let identity = Arc::new(Identity {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            rejection_name: BreakerName::new(&name),
            name,
            failures,
        });
        shard(identity.id).insert(identity.id, Arc::clone(&identity.failures));
        identity
    }

    /// The version of the last failure now: what a rejection carries.
    #[inline]
    pub(crate) fn failure_version(&self) -> u64 {
        self.failures.version.load(Ordering::Acquire)
    }

    /// The live breaker `id`'s failure at `version`; `None` once the breaker
    /// is gone or the version is no longer kept.
    pub(crate) fn failure_at(id: u64, version: u64) -> Option<LastFailure> {
        let failures = Arc::clone(shard(id).get(&id)?);
        failures.at(version)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn last_failure(&self) -> Option<LastFailure> {
        self.failures.log().back().and_then(|(_, f)| f.clone())
    }

    /// Makes `next` the last failure, as a new version (the breaker's lock
    /// holder has checked that it differs from the current one).
    pub(crate) fn publish_failure(&self, next: Option<LastFailure>) {
        let mut log = self.failures.log();
        let version = log.back().map_or(0, |(v, _)| *v);
        if log.len() >= KEPT_FAILURES {
            log.pop_front();
        }
        log.push_back((version + 1, next));
        self.failures.version.store(version + 1, Ordering::Release);
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        shard(self.id).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_inline_long_ones_shared_and_both_read_back() {
        for name in [
            "",
            "db",
            "backend-0042.svc.internal",
            &"x".repeat(INLINE_NAME),
        ] {
            let n = BreakerName::new(&name.into());
            assert!(n.is_inline(), "{name}");
            assert_eq!(n.as_str(), name);
            assert_eq!(n.clone().as_str(), name);
        }
        for name in ["y".repeat(INLINE_NAME + 1), "é".repeat(200)] {
            let shared: Arc<str> = name.as_str().into();
            let n = BreakerName::new(&shared);
            assert!(!n.is_inline(), "{name}");
            assert_eq!(n.as_str(), name);
            // Clones share the name; the out-of-line drop releases it.
            assert_eq!(Arc::strong_count(&shared), 2);
            let copy = n.clone();
            assert_eq!(copy.as_str(), name);
            assert_eq!(Arc::strong_count(&shared), 3);
            drop(copy);
            drop(n);
            assert_eq!(Arc::strong_count(&shared), 1);
        }
        // Multi-byte characters up to the limit stay whole.
        let accents = "é".repeat(INLINE_NAME / 2);
        assert_eq!(BreakerName::new(&accents.as_str().into()).as_str(), accents);
        assert_eq!(std::mem::size_of::<BreakerName>(), 48);
        assert_eq!(
            format!("{:?}", BreakerName::new(&"a\"b".into())),
            "\"a\\\"b\""
        );
    }

    #[test]
    fn a_rejection_finds_the_failure_of_its_version_while_the_breaker_lives() {
        let identity = Identity::register("svc");
        let id = identity.id;
        let none = identity.failure_version();
        assert!(Identity::failure_at(id, none).is_none());
        identity.publish_failure(Some(LastFailure::new("E", "boom".into())));
        let boom = identity.failure_version();
        identity.publish_failure(Some(LastFailure::new("E", "bang".into())));
        assert_eq!(Identity::failure_at(id, boom).unwrap().message(), "boom");
        assert_eq!(identity.last_failure().unwrap().message(), "bang");
        identity.publish_failure(None);
        assert!(identity.last_failure().is_none());
        assert_eq!(Identity::failure_at(id, boom).unwrap().message(), "boom");
        // Only the last KEPT_FAILURES versions are kept.
        for i in 0..KEPT_FAILURES {
            identity.publish_failure(Some(LastFailure::new("E", i.to_string())));
        }
        assert!(Identity::failure_at(id, boom).is_none());
        let last = identity.failure_version();
        drop(identity);
        assert!(Identity::failure_at(id, last).is_none());
        assert!(
            !shard(id).contains_key(&id),
            "a dropped identity leaves the table"
        );
    }
}
