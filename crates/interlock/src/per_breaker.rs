//! [`PerBreaker`]: an event listener's state per breaker name, found
//! without a lock on the hot path.

use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

/// A listener's state per breaker name (metric handles, counts), kept so
/// that the threads reporting a breaker's events find it without a lock.
///
/// A listener hears every call of every breaker it is given to, so the
/// lookup of the breaker's state is on the call's path. Behind a plain
/// lock, threads reporting at once queue on it, and even a read lock's
/// count moves between the cores at every event: on two threads that cost
/// more than the call itself. Here each thread keeps the entries it used
/// last, per `PerBreaker`, and finds one with no atomic read-modify-write
/// at all; only a thread's first event of a breaker (or one whose entry it
/// has evicted since, after eight others) takes the map's lock.
///
/// An entry lives until [`remove`](Self::remove) (for a breaker that is
/// gone, on [`Event::BreakerRemoved`](crate::Event::BreakerRemoved)); an
/// event after that starts a fresh one, on every thread. An event racing
/// the removal may still reach the removed entry.
///
/// ```
/// use interlock::{CircuitBreaker, Event, EventListener, PerBreaker};
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
///
/// /// Counts each breaker's rejections.
/// #[derive(Default)]
/// struct Rejections(PerBreaker<AtomicU64>);
///
/// impl EventListener for Rejections {
///     fn on_event(&self, event: &Event<'_>) {
///         match *event {
///             Event::CallRejected { breaker, .. } => self.0.with(breaker, AtomicU64::default, |n| {
///                 n.fetch_add(1, Ordering::Relaxed);
///             }),
///             Event::BreakerRemoved { breaker, .. } => {
///                 self.0.remove(breaker, |_| ());
///             }
///             _ => {}
///         }
///     }
/// }
///
/// let counts = Arc::new(Rejections::default());
/// let breaker = CircuitBreaker::builder("payments").listener(counts.clone()).build()?;
/// breaker.force_open();
/// let _ = breaker.acquire();
/// let _ = breaker.acquire();
/// let seen = counts.0.with("payments", AtomicU64::default, |n| n.load(Ordering::Relaxed));
/// assert_eq!(seen, 2);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub struct PerBreaker<T> {
    /// This map's number in the threads' caches: 0 until its first
    /// insertion, then unique in the process (never reused, so a dropped
    /// map's cached entries are never hit again).
    id: AtomicU64,
    entries: RwLock<BTreeMap<Box<str>, Arc<Entry<T>>>>,
}

/// One breaker's state.
struct Entry<T> {
    breaker: Box<str>,
    /// Set by [`PerBreaker::remove`]: a thread's cached copy is then a miss.
    removed: AtomicBool,
    value: T,
}

/// Map numbers; 0 is "none yet".
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// How many entries a thread keeps, across every `PerBreaker`.
const CACHED: usize = 8;

/// A thread's last used entries, each with its map's number, and the slot
/// the next one replaces. Type-erased: one cache serves every `T`.
struct Cache {
    slots: [Option<(u64, Arc<dyn Any + Send + Sync>)>; CACHED],
    next: usize,
}

impl Cache {
    /// Map `id`'s live entry for `breaker`, if this thread has it.
    #[inline]
    fn find<T: 'static>(&self, id: u64, breaker: &str) -> Option<&Entry<T>> {
        self.slots.iter().flatten().find_map(|(map, entry)| {
            if *map != id {
                return None;
            }
            let entry = entry.downcast_ref::<Entry<T>>()?;
            // Acquire: whatever the remover did before marking it is seen.
            (&*entry.breaker == breaker && !entry.removed.load(Ordering::Acquire)).then_some(entry)
        })
    }

    /// Keeps map `id`'s `entry`, in place of an older entry of the same
    /// breaker and map if there is one, else of the oldest slot.
    fn keep<T: Send + Sync + 'static>(&mut self, id: u64, entry: Arc<Entry<T>>) {
        let same = |slot: &Option<(u64, Arc<dyn Any + Send + Sync>)>| {
            slot.as_ref().is_some_and(|(map, e)| {
                *map == id
                    && e.downcast_ref::<Entry<T>>()
                        .is_some_and(|e| e.breaker == entry.breaker)
            })
        };
        let slot = match self.slots.iter().position(same) {
            Some(slot) => slot,
            None => {
                let slot = self.next;
                self.next = (slot + 1) % CACHED;
                slot
            }
        };
        self.slots[slot] = Some((id, entry));
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { slots: [const { None }; CACHED], next: 0 })
    };
}

impl<T: Send + Sync + 'static> PerBreaker<T> {
    /// An empty map.
    #[must_use]
    pub const fn new() -> Self {
        PerBreaker {
            id: AtomicU64::new(0),
            entries: RwLock::new(BTreeMap::new()),
        }
    }

    /// Runs `f` on `breaker`'s entry, made by `init` if there is none.
    ///
    /// Without a lock when this thread used the entry lately; `f` may call
    /// `with` again (on this map or another).
    pub fn with<R>(
        &self,
        breaker: &str,
        init: impl FnOnce() -> T,
        mut f: impl FnMut(&T) -> R,
    ) -> R {
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            let hit = CACHE.try_with(|cache| {
                let cache = cache.try_borrow().ok()?;
                cache.find::<T>(id, breaker).map(|entry| f(&entry.value))
            });
            if let Ok(Some(result)) = hit {
                return result;
            }
        }
        self.with_uncached(breaker, init, f)
    }

    /// [`with`](Self::with) for an entry this thread has not cached: from
    /// the map (made if need be), then cached.
    #[cold]
    #[inline(never)]
    fn with_uncached<R>(
        &self,
        breaker: &str,
        init: impl FnOnce() -> T,
        mut f: impl FnMut(&T) -> R,
    ) -> R {
        let entry = self.entry(breaker, init);
        let id = self.id.load(Ordering::Relaxed);
        let _ = CACHE.try_with(|cache| {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache.keep(id, Arc::clone(&entry));
            }
        });
        f(&entry.value)
    }

    /// `breaker`'s entry from the map, made by `init` if there is none.
    fn entry(&self, breaker: &str, init: impl FnOnce() -> T) -> Arc<Entry<T>> {
        if let Some(entry) = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(breaker)
        {
            return Arc::clone(entry);
        }
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if self.id.load(Ordering::Relaxed) == 0 {
            self.id
                .store(NEXT_ID.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        }
        let entry = entries.entry(breaker.into()).or_insert_with(|| {
            Arc::new(Entry {
                breaker: breaker.into(),
                removed: AtomicBool::new(false),
                value: init(),
            })
        });
        Arc::clone(entry)
    }

    /// Removes `breaker`'s entry and runs `f` on it, under the map's lock
    /// (so no thread finds or makes one of this name meanwhile); `None` if
    /// there was none. Every thread's next `with` of `breaker` then starts
    /// a fresh entry.
    pub fn remove<R>(&self, breaker: &str, f: impl FnOnce(&T) -> R) -> Option<R> {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let entry = entries.remove(breaker)?;
        entry.removed.store(true, Ordering::Release);
        Some(f(&entry.value))
    }

    /// How many breakers have an entry.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no breaker has an entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Send + Sync + 'static> Default for PerBreaker<T> {
    fn default() -> Self {
        PerBreaker::new()
    }
}

impl<T> fmt::Debug for PerBreaker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("PerBreaker")
            .field("breakers", &entries.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_map_and_per_name_beyond_the_threads_cache() {
        let (a, b) = (
            PerBreaker::<AtomicU64>::new(),
            PerBreaker::<AtomicU64>::new(),
        );
        let names: Vec<String> = (0..CACHED + 3).map(|i| format!("host-{i}")).collect();
        for round in 1..=3u64 {
            for name in &names {
                let seen = a.with(name, AtomicU64::default, |n| {
                    n.fetch_add(1, Ordering::Relaxed) + 1
                });
                assert_eq!(seen, round, "{name}");
                b.with(name, AtomicU64::default, |n| {
                    n.fetch_add(10, Ordering::Relaxed)
                });
            }
        }
        assert_eq!(a.len(), names.len());
        for name in &names {
            assert_eq!(
                a.with(name, AtomicU64::default, |n| n.load(Ordering::Relaxed)),
                3
            );
            assert_eq!(
                b.with(name, AtomicU64::default, |n| n.load(Ordering::Relaxed)),
                30
            );
        }
    }

    #[test]
    fn a_removed_entry_is_never_found_again_on_any_thread() {
        let map = PerBreaker::<AtomicU64>::new();
        map.with("payments", AtomicU64::default, |n| {
            n.store(5, Ordering::Relaxed)
        });
        std::thread::scope(|s| {
            // Another thread caches the entry too.
            s.spawn(|| {
                map.with("payments", AtomicU64::default, |n| {
                    n.fetch_add(1, Ordering::Relaxed)
                })
            })
            .join()
            .unwrap();
        });
        assert_eq!(
            map.remove("payments", |n| n.load(Ordering::Relaxed)),
            Some(6)
        );
        assert_eq!(map.remove("payments", |_| ()), None, "removed once");
        assert!(map.is_empty());
        assert_eq!(
            map.with(
                "payments",
                || AtomicU64::new(100),
                |n| n.load(Ordering::Relaxed)
            ),
            100
        );
        std::thread::scope(|s| {
            let seen = s
                .spawn(|| {
                    map.with("payments", AtomicU64::default, |n| {
                        n.load(Ordering::Relaxed)
                    })
                })
                .join()
                .unwrap();
            assert_eq!(
                seen, 100,
                "the other thread's cached entry was the removed one"
            );
        });
    }

    #[test]
    fn with_may_reenter_and_a_dropped_maps_entries_are_not_inherited() {
        let outer = PerBreaker::<u32>::new();
        let inner = PerBreaker::<u32>::new();
        let sum = outer.with("a", || 1, |a| a + inner.with("a", || 2, |b| *b));
        assert_eq!(sum, 3);
        drop(outer);
        // A new map, perhaps at the same address: it has its own number.
        let fresh = PerBreaker::<u32>::new();
        assert_eq!(fresh.with("a", || 7, |v| *v), 7);
        assert_eq!(format!("{fresh:?}"), "PerBreaker { breakers: 1, .. }");
    }
}
