//! What a breaker and its rejections share: the breaker's name, copied into
//! each rejection without touching a shared counter, and its last failure,
//! found again through the breaker's id when a rejection is asked for it.
//!
//! A rejection is the hot path of an OPEN breaker, so it must not clone an
//! `Arc` (an atomic read-modify-write on a line every rejecting thread
//! writes, and another one when the error is dropped). A name of up to
//! [`INLINE_NAME`] bytes is copied inline; a longer one shares an `Arc<str>`.
//! The last failure is looked up in a process-wide table of live breakers,
//! which is written only when a breaker is created or dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::error::LastFailure;

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

/// One breaker's identity: its name, id and last failure (R11.3).
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) id: u64,
    name: Arc<str>,
    /// The name as rejections copy it.
    pub(crate) rejection_name: BreakerName,
    last_failure: Mutex<Option<LastFailure>>,
}

/// Live identities by id, so a rejection can read its breaker's last failure
/// without holding the breaker.
static LIVE: Mutex<BTreeMap<u64, Weak<Identity>>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<u64, Weak<Identity>>> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Identity {
    /// A new identity, registered in the table of live breakers until it is
    /// dropped.
    pub(crate) fn register(name: &str) -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let name: Arc<str> = name.into();
        let identity = Arc::new(Identity {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            rejection_name: BreakerName::new(&name),
            name,
            last_failure: Mutex::new(None),
        });
        live().insert(identity.id, Arc::downgrade(&identity));
        identity
    }

    /// The live breaker `id`'s last failure; `None` once it is gone.
    pub(crate) fn last_failure_of(id: u64) -> Option<LastFailure> {
        let identity = live().get(&id)?.upgrade()?;
        identity.last_failure()
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn last_failure(&self) -> Option<LastFailure> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_last_failure(&self, failure: Option<LastFailure>) {
        *self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = failure;
    }

    /// Runs `f` on the last failure under its lock.
    pub(crate) fn with_last_failure<R>(&self, f: impl FnOnce(&mut Option<LastFailure>) -> R) -> R {
        f(&mut self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        live().remove(&self.id);
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
    fn a_rejection_finds_the_last_failure_while_the_breaker_lives() {
        let identity = Identity::register("svc");
        let id = identity.id;
        assert!(Identity::last_failure_of(id).is_none());
        identity.set_last_failure(Some(LastFailure::new("E", "boom".into())));
        assert_eq!(Identity::last_failure_of(id).unwrap().message(), "boom");
        drop(identity);
        assert!(Identity::last_failure_of(id).is_none());
        assert!(
            !live().contains_key(&id),
            "a dropped identity leaves the table"
        );
    }
}
