//! [`PerBreaker`]: an event listener's state per breaker name, found
//! without a lock on the hot path.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
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
/// last (64, across every `PerBreaker`) and finds one with no atomic
/// read-modify-write at all; only a thread's first event of a breaker (or
/// one whose entry it has evicted since) takes the map's lock. A thread
/// that calls more breakers in turn than it keeps pays about what the
/// lock alone would cost.
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
    /// Made at the first insertion (`HashMap`'s random keys cannot be
    /// made in a `const fn`).
    entries: RwLock<Option<Entries<T>>>,
}

/// The entries by name.
type Entries<T> = HashMap<Box<str>, Arc<Entry<T>>>;

/// One breaker's state.
struct Entry<T> {
    breaker: Box<str>,
    /// Set by [`PerBreaker::remove`]: a thread's cached copy is then a miss.
    removed: AtomicBool,
    value: T,
}

/// Map numbers; 0 is "none yet".
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's cache: `SETS` sets of `WAYS` entries, across every
/// `PerBreaker` (64 entries: a thread that reports on dozens of breakers,
/// a per-host client's, still finds each without the lock).
const SETS: usize = 16;
const WAYS: usize = 4;

/// Where a thread looks for a name: the map's number and the name's
/// address and length. Events carry the breaker's own name, so its
/// address is the same at every event while the breaker lives; the entry's
/// name is still compared, so an address reused for another name is only a
/// miss, and the same name at another address only another slot.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    map: u64,
    at: usize,
    len: usize,
}

impl Key {
    fn of(map: u64, breaker: &str) -> Key {
        Key {
            map,
            at: breaker.as_ptr() as usize,
            len: breaker.len(),
        }
    }

    /// The key's bits mixed, never 0.
    fn hash(self) -> u64 {
        (self.at as u64 ^ self.len as u64 ^ self.map.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .wrapping_mul(0xff51_afd7_ed55_8ccd)
            | 1
    }

    /// The set this key lives in.
    fn set(self) -> usize {
        set_of(self.hash())
    }
}

/// The set of a key whose [`Key::hash`] is `hash`: its top bits, the best
/// mixed.
fn set_of(hash: u64) -> usize {
    #[allow(clippy::cast_possible_truncation, reason = "below SETS")]
    let set = (hash >> (u64::BITS - SETS.trailing_zeros())) as usize;
    set
}

/// One cached entry, type-erased: one cache serves every `T`.
struct Slot {
    key: Key,
    entry: Arc<dyn Any + Send + Sync>,
}

/// A thread's last used entries, per set the way the next one replaces,
/// and per set the last key that missed.
///
/// A key takes a full set's way only at its second miss in a row there:
/// a thread that calls more breakers in turn than it caches (a per-host
/// client's) would otherwise replace an entry at every event, and pay for
/// it, without ever finding one again.
struct Cache {
    sets: [[Option<Slot>; WAYS]; SETS],
    next: [u8; SETS],
    missed: [u64; SETS],
}

impl Cache {
    /// An empty cache.
    fn new() -> Cache {
        Cache {
            sets: [const { [const { None }; WAYS] }; SETS],
            next: [0; SETS],
            missed: [0; SETS],
        }
    }

    /// The live entry of `key` for `breaker`, if this thread has it.
    #[inline]
    fn find<T: 'static>(&self, key: Key, breaker: &str) -> Option<&Entry<T>> {
        self.sets[key.set()].iter().flatten().find_map(|slot| {
            if slot.key != key {
                return None;
            }
            let entry = slot.entry.downcast_ref::<Entry<T>>()?;
            // Acquire: whatever the remover did before marking it is seen.
            (&*entry.breaker == breaker && !entry.removed.load(Ordering::Acquire)).then_some(entry)
        })
    }

    /// Where `key`, which just missed, is to be kept: a free way, the way
    /// it held, or (at its second miss in a row in its set) the set's
    /// oldest way; `None`: not kept this time.
    fn way_for(&mut self, key: Key) -> Option<usize> {
        let hash = key.hash();
        let set = set_of(hash);
        if let Some(way) = self.sets[set]
            .iter()
            .position(|slot| slot.as_ref().is_none_or(|slot| slot.key == key))
        {
            return Some(way);
        }
        if self.missed[set] != hash {
            self.missed[set] = hash;
            return None;
        }
        self.missed[set] = 0;
        let way = usize::from(self.next[set]);
        #[allow(clippy::cast_possible_truncation, reason = "below WAYS")]
        let next = ((way + 1) % WAYS) as u8;
        self.next[set] = next;
        Some(way)
    }

    /// Keeps `entry` under `key` in `way` of its set.
    fn keep<T: Send + Sync + 'static>(&mut self, key: Key, way: usize, entry: Arc<Entry<T>>) {
        self.sets[key.set()][way] = Some(Slot { key, entry });
    }
}

thread_local! {
    // Boxed on a thread's first event: threads that never report pay a
    // pointer, not the table.
    static CACHE: RefCell<Option<Box<Cache>>> = const { RefCell::new(None) };
}

impl<T: Send + Sync + 'static> PerBreaker<T> {
    /// An empty map.
    #[must_use]
    pub const fn new() -> Self {
        PerBreaker {
            id: AtomicU64::new(0),
            entries: RwLock::new(None),
        }
    }

    /// Runs `f` on `breaker`'s entry, made by `init` if there is none.
    ///
    /// Without a lock when this thread used the entry lately; `f` may call
    /// `with` again (on this map or another).
    #[inline]
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
                let entry = cache.as_ref()?.find::<T>(Key::of(id, breaker), breaker)?;
                Some(f(&entry.value))
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
        let key = Key::of(self.id.load(Ordering::Relaxed), breaker);
        let _ = CACHE.try_with(|cache| {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                let cache = cache.get_or_insert_with(|| Box::new(Cache::new()));
                if let Some(way) = cache.way_for(key) {
                    cache.keep(key, way, Arc::clone(&entry));
                }
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
            .as_ref()
            .and_then(|entries| entries.get(breaker))
        {
            return Arc::clone(entry);
        }
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        if self.id.load(Ordering::Relaxed) == 0 {
            self.id
                .store(NEXT_ID.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        }
        let entry = entries
            .get_or_insert_with(HashMap::new)
            .entry(breaker.into())
            .or_insert_with(|| {
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
        let entry = entries.as_mut()?.remove(breaker)?;
        entry.removed.store(true, Ordering::Release);
        Some(f(&entry.value))
    }

    /// How many breakers have an entry.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, HashMap::len)
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
            .field("breakers", &entries.as_ref().map_or(0, HashMap::len))
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
        let names: Vec<String> = (0..SETS * WAYS * 2).map(|i| format!("host-{i}")).collect();
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

    /// The point of the map: a thread finds the entries it used lately
    /// without the lock, so it is not held up while another thread holds it.
    #[test]
    fn a_cached_entry_is_found_while_another_thread_holds_the_maps_lock() {
        let map = PerBreaker::<AtomicU64>::new();
        let (used, locked) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                map.with("payments", AtomicU64::default, |n| {
                    n.fetch_add(1, Ordering::Relaxed)
                });
                used.wait();
                locked.wait();
                let seen = map.with("payments", AtomicU64::default, |n| {
                    n.fetch_add(1, Ordering::Relaxed) + 1
                });
                done_tx.send(seen).unwrap();
            });
            used.wait();
            let lock = map.entries.write().unwrap();
            locked.wait();
            let seen = done_rx.recv_timeout(std::time::Duration::from_secs(30));
            drop(lock);
            assert_eq!(seen, Ok(2), "the cached entry, found with the lock held");
        });
        assert!(!map.is_empty());
    }

    #[test]
    fn a_thread_finds_what_it_kept_for_its_map_and_name_only() {
        let mut cache = Cache::new();
        let name = String::from("payments");
        let key = Key::of(7, &name);
        let entry = Arc::new(Entry {
            breaker: "payments".into(),
            removed: AtomicBool::new(false),
            value: 5u8,
        });
        let way = cache.way_for(key).expect("a free way");
        cache.keep(key, way, Arc::clone(&entry));
        assert_eq!(cache.find::<u8>(key, &name).map(|e| e.value), Some(5));
        assert!(
            cache.find::<u8>(Key::of(8, &name), &name).is_none(),
            "another map"
        );
        assert!(cache.find::<u16>(key, &name).is_none(), "another type");
        let other = String::from("orders");
        assert!(
            cache.find::<u8>(Key::of(7, &other), &other).is_none(),
            "another name"
        );
        entry.removed.store(true, Ordering::Release);
        assert!(cache.find::<u8>(key, &name).is_none(), "removed");
    }

    #[test]
    fn a_full_set_takes_a_key_only_at_its_second_miss_in_a_row() {
        let mut cache = Cache::new();
        // Keys of one set, as many as its ways and two more.
        let names: Vec<String> = (0..10_000).map(|i| format!("b{i}")).collect();
        let mut keys = names.iter().map(|n| Key::of(1, n));
        let first = keys.next().expect("a key");
        let same_set: Vec<Key> = std::iter::once(first)
            .chain(keys.filter(|k| k.set() == first.set()))
            .take(WAYS + 2)
            .collect();
        assert_eq!(same_set.len(), WAYS + 2);
        let entry = || {
            Arc::new(Entry {
                breaker: "b".into(),
                removed: AtomicBool::new(false),
                value: 0u8,
            })
        };
        for (way, &key) in same_set[..WAYS].iter().enumerate() {
            assert_eq!(cache.way_for(key), Some(way), "a free way");
            cache.keep(key, way, entry());
        }
        assert_eq!(cache.way_for(same_set[0]), Some(0), "the way it holds");
        let (a, b) = (same_set[WAYS], same_set[WAYS + 1]);
        assert_eq!(cache.way_for(a), None, "a's first miss");
        assert_eq!(cache.way_for(b), None, "b's first miss: a's does not count");
        assert_eq!(cache.way_for(b), Some(0), "b's second miss in a row");
        cache.keep(b, 0, entry());
        assert_eq!(cache.way_for(a), None, "a missed once again");
        assert_eq!(cache.way_for(a), Some(1), "the next oldest way");
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
