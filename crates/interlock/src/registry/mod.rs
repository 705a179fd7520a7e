//! [`Registry`]: one breaker per name, created on first use (R14), and
//! forgotten on demand ([`Registry::remove`], [`Registry::retain`]), when
//! idle ([`RegistryBuilder::expire_after_idle`]) or beyond a maximum
//! ([`RegistryBuilder::max_breakers`]).
//!
//! Lookups of existing names take no lock: each thread keeps the latest
//! published name table and checks one atomic epoch to know it is current.
//! Creation and removal take the registry's lock, so the same name always
//! yields the same breaker, even when many threads ask for it first at once.
//!
//! The tables hold their breakers weakly and each thread's cache knows its
//! registries only by id, so neither keeps a removed breaker, or a dropped
//! registry's breakers, alive; the registry's own list owns them. A
//! removal republishes the table at once, so no thread is handed a removed
//! breaker after `remove` (or the eviction) returned.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use std::marker::PhantomData;

use crate::breaker::coordinator::Coordinator;
use crate::breaker::coordinator::Lane;
use crate::breaker::{CircuitBreaker, CircuitBreakerBuilder, Inner};
use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{Clock, ClockHandle, Timestamp, duration_to_nanos};
use crate::config::Config;
use crate::error::ConfigError;
use crate::event::{Event, EventListener, into_arc};
use crate::mode::{AsyncApi, Local, Mode, SyncApi};
use crate::state::State;

mod bounds;
mod builder;
mod table;

use bounds::{Bounds, notify_removed};
pub use builder::RegistryBuilder;

use table::{NameHash, Table};

/// Creates and caches named breakers that share a config, clock,
/// classifier, listeners and initial state.
///
/// ```
/// use interlock::{Config, Registry, State};
///
/// let registry = Registry::builder()
///     .config(Config::builder().minimum_number_of_calls(20).build()?)
///     .initial_state(State::MetricsOnly)
///     .build()?;
/// let payments = registry.get("payments");
/// assert!(payments.ptr_eq(&registry.get("payments")));
/// assert_eq!(payments.state(), State::MetricsOnly);
///
/// let search = registry.get_with_config("search", Config::builder().minimum_number_of_calls(5).build()?)?;
/// assert_eq!(search.config().minimum_number_of_calls(), 5);
/// assert_eq!(registry.names(), ["payments", "search"]);
/// # Ok::<(), interlock::ConfigError>(())
/// ```
///
/// # Forgetting breakers
///
/// A registry keeps every name until told otherwise: [`remove`](Self::remove)
/// and [`retain`](Self::retain) forget names on demand, and a registry
/// built with [`expire_after_idle`](RegistryBuilder::expire_after_idle) or
/// [`max_breakers`](RegistryBuilder::max_breakers) forgets idle or least
/// recently used ones by itself. A forgotten breaker's listeners receive
/// [`Event::BreakerRemoved`]; handles to it keep working, but the registry
/// no longer lists or hands it out, and the next [`get`](Self::get) of its
/// name creates a new breaker (in the initial state, with a fresh window).
///
/// Dropping the last handle to a registry frees its breakers (those nobody
/// else holds a handle to), whichever threads looked names up in it.
pub struct Registry<M = Local> {
    inner: Arc<RegistryInner>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for Registry<M> {
    fn clone(&self) -> Self {
        Registry {
            inner: Arc::clone(&self.inner),
            mode: PhantomData,
        }
    }
}

struct RegistryInner {
    id: u64,
    /// Bumped every time a new table is published.
    epoch: AtomicU64,
    /// The table readers copy: every name up to the last publication.
    published: Mutex<(u64, Arc<Table>)>,
    hash: NameHash,
    all: Mutex<All>,
    template: Template,
    bounds: Bounds,
    /// When the next idle sweep is due, in nanoseconds on the registry's
    /// clock (`u64::MAX`: never): no breaker can have been idle long enough
    /// before then.
    next_sweep: AtomicU64,
}

struct All {
    /// Creation order; a removed entry leaves a hole until compaction.
    entries: Vec<Option<Entry>>,
    index: HashMap<Arc<str>, usize>,
    /// Entries that are not holes.
    live: usize,
    /// Names created or removed since the last publication.
    changes: usize,
    published_len: usize,
}

struct Entry {
    name: Arc<str>,
    breaker: CircuitBreaker,
}

#[derive(Clone)]
struct Template {
    config: Config,
    clock: ClockHandle,
    listeners: Vec<Arc<dyn EventListener>>,
    classifier: Option<ErrorClassifier>,
    initial_state: State,
    lane: Option<Arc<Lane>>,
    idle: Option<Duration>,
    max: Option<usize>,
}

struct CacheEntry {
    registry: u64,
    epoch: u64,
    table: Arc<Table>,
    /// Whether the registry still exists: a dropped one's entry is purged
    /// at this thread's next copy of any table.
    alive: Weak<RegistryInner>,
}

/// How many registries each thread remembers.
const THREAD_CACHE_SLOTS: usize = 8;

thread_local! {
    static CACHE: RefCell<Vec<CacheEntry>> = const { RefCell::new(Vec::new()) };
}

fn next_registry_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Registry {
    /// A registry with the default config and no listener.
    #[must_use]
    pub fn new() -> Self {
        Registry::from_template(Template::default())
    }

    /// A builder for a registry.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder {
            template: Template::default(),
            mode: PhantomData,
        }
    }
}

impl Default for Template {
    fn default() -> Self {
        Template {
            config: Config::default(),
            clock: ClockHandle::default(),
            listeners: Vec::new(),
            classifier: None,
            initial_state: State::Closed,
            lane: None,
            idle: None,
            max: None,
        }
    }
}

/// A breaker in a current table (it exists: the registry owns it).
#[inline]
fn live(weak: &Weak<Inner>) -> Option<CircuitBreaker> {
    weak.upgrade().map(CircuitBreaker::from_inner)
}

impl<M: Mode> Registry<M> {
    fn from_template(template: Template) -> Self {
        let hash = NameHash::new();
        let bounds = Bounds::new(template.idle, template.max, &template.clock);
        Registry {
            inner: Arc::new(RegistryInner {
                id: next_registry_id(),
                epoch: AtomicU64::new(0),
                published: Mutex::new((0, Arc::new(Table::empty(hash)))),
                hash,
                all: Mutex::new(All {
                    entries: Vec::new(),
                    index: HashMap::new(),
                    live: 0,
                    changes: 0,
                    published_len: 0,
                }),
                template,
                bounds,
                next_sweep: AtomicU64::new(u64::MAX),
            }),
            mode: PhantomData,
        }
    }

    /// The breaker named `name`, created with the registry's config if it
    /// does not exist yet.
    ///
    /// ```
    /// let registry = interlock::Registry::new();
    /// let a = registry.get("inventory");
    /// let b = registry.get("inventory");
    /// assert!(a.ptr_eq(&b));
    /// ```
    #[must_use]
    pub fn get(&self, name: &str) -> CircuitBreaker<M> {
        let breaker = match self.lookup(name) {
            Some(b) => b,
            None => self.create(name, None),
        };
        if self.inner.bounds.tracks {
            self.handed_out(&breaker);
        }
        breaker.cast()
    }

    /// The breaker named `name`, created with `config` if it does not exist
    /// yet; an existing breaker keeps its own config (R14.1).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] if the breaker must be created and `config` cannot
    /// be coordinated (R2.4: a backoff multiplier with a storage).
    pub fn get_with_config(
        &self,
        name: &str,
        config: Config,
    ) -> Result<CircuitBreaker<M>, ConfigError> {
        let breaker = match self.lookup(name) {
            Some(b) => b,
            None => {
                if self.inner.template.lane.is_some() {
                    config.validate_for_storage()?;
                }
                self.create(name, Some(config))
            }
        };
        if self.inner.bounds.tracks {
            self.handed_out(&breaker);
        }
        Ok(breaker.cast())
    }

    /// The breaker named `name` if it exists; never creates one (R14.3).
    /// Handing it out counts as a use for
    /// [`expire_after_idle`](RegistryBuilder::expire_after_idle).
    #[must_use]
    pub fn get_existing(&self, name: &str) -> Option<CircuitBreaker<M>> {
        let breaker = self.lookup(name).or_else(|| {
            let all = self.all();
            all.index
                .get(name)
                .and_then(|&i| all.entries[i].as_ref())
                .map(|e| e.breaker.clone())
        })?;
        if self.inner.bounds.tracks {
            self.handed_out(&breaker);
        }
        Some(breaker.cast())
    }

    /// The names of the breakers it holds, in creation order (a
    /// point-in-time copy).
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.all()
            .entries
            .iter()
            .flatten()
            .map(|e| e.name.to_string())
            .collect()
    }

    /// The breakers it holds, in creation order (a point-in-time copy).
    /// Listing them is not a use: it never keeps a breaker from expiring.
    ///
    /// The handles have the default [`Local`] type whatever the registry's
    /// mode, so one function can list any registry (the admin dashboard
    /// does). Use them to read state and for operator controls; a
    /// coordinated breaker's calls belong on the handles [`get`](Self::get)
    /// returns, whose type allows only the API its storage serves.
    ///
    /// ```
    /// use interlock::Registry;
    ///
    /// let registry = Registry::new();
    /// let _ = registry.get("search").call(|| Ok::<_, std::io::Error>(()));
    /// for (name, breaker) in registry.items() {
    ///     breaker.metrics_only(); // e.g. a bulk operator action
    ///     assert_eq!((name.as_str(), breaker.snapshot().total_calls), ("search", 1));
    /// }
    /// ```
    #[must_use]
    pub fn items(&self) -> Vec<(String, CircuitBreaker)> {
        self.all()
            .entries
            .iter()
            .flatten()
            .map(|e| (e.name.to_string(), e.breaker.clone()))
            .collect()
    }

    /// How many breakers it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.all().live
    }

    /// Whether it holds no breaker.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The config new breakers get by default.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.inner.template.config
    }

    /// Whether the breakers are coordinated through a storage.
    #[must_use]
    pub fn is_coordinated(&self) -> bool {
        self.inner.template.lane.is_some()
    }

    /// The coordinator this registry's breakers share, if it was built with
    /// one: for fleet-wide operator writes such as
    /// [`Coordinator::trip_shared`](crate::storage::Coordinator::trip_shared).
    ///
    /// ```
    /// use interlock::Registry;
    /// use interlock::storage::{Coordinator, MemoryStorage};
    ///
    /// let coordinator = Coordinator::manual(MemoryStorage::new());
    /// let registry = Registry::builder().coordinator(&coordinator).build()?;
    /// assert!(registry.coordinator().is_some());
    /// assert!(Registry::new().coordinator().is_none());
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    #[must_use]
    pub fn coordinator(&self) -> Option<Coordinator<M>> {
        self.inner
            .template
            .lane
            .as_ref()
            .map(|lane| Coordinator::from_lane(Arc::clone(lane)))
    }

    fn all(&self) -> MutexGuard<'_, All> {
        self.inner
            .all
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The lock-free path: this thread's copy of the published table, if
    /// it is current. `None` sends the caller to the lock: the name is not
    /// published yet.
    #[inline]
    fn lookup(&self, name: &str) -> Option<CircuitBreaker> {
        let inner = &*self.inner;
        let epoch = inner.epoch.load(Ordering::Acquire);
        CACHE
            .try_with(|cache| {
                {
                    let entries = cache.try_borrow().ok()?;
                    if let Some(entry) = entries.iter().find(|e| e.registry == inner.id) {
                        if entry.epoch == epoch {
                            return entry.table.get(name).and_then(live);
                        }
                    }
                }
                self.lookup_stale(cache, name)
            })
            .ok()
            .flatten()
    }

    /// This thread's copy is stale or absent: take the current table (a
    /// short lock, once per publication per thread), then look `name` up in
    /// it. Out of line, so the hit path inlines its one table lookup.
    #[cold]
    #[inline(never)]
    fn lookup_stale(&self, cache: &RefCell<Vec<CacheEntry>>, name: &str) -> Option<CircuitBreaker> {
        let inner = &self.inner;
        let mut cache = cache.try_borrow_mut().ok()?;
        // Tables of dropped registries go now, not when the slots run out.
        cache.retain(|e| e.alive.strong_count() > 0);
        let (epoch, table) = {
            let published = inner
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (published.0, Arc::clone(&published.1))
        };
        let found = table.get(name).and_then(live);
        match cache.iter_mut().find(|e| e.registry == inner.id) {
            Some(entry) => {
                entry.epoch = epoch;
                entry.table = table;
            }
            None => {
                if cache.len() == THREAD_CACHE_SLOTS {
                    cache.remove(0);
                }
                cache.push(CacheEntry {
                    registry: inner.id,
                    epoch,
                    table,
                    alive: Arc::downgrade(inner),
                });
            }
        }
        found
    }

    #[cold]
    fn create(&self, name: &str, config: Option<Config>) -> CircuitBreaker {
        let mut all = self.all();
        if let Some(&i) = all.index.get(name) {
            let Some(entry) = all.entries[i].as_ref() else {
                unreachable!("the index points at live entries only")
            };
            let breaker = entry.breaker.clone();
            // A name still waiting for publication is served under the lock;
            // publish now so its readers get the lock-free path.
            self.publish(&mut all);
            return breaker;
        }
        let bounds = &self.inner.bounds;
        let now = if bounds.tracks {
            bounds.clock.now()
        } else {
            Timestamp::ZERO
        };
        let removed = match bounds.max {
            Some(max) if all.live >= max => self.make_room(&mut all, max, now),
            _ => Vec::new(),
        };
        let t = &self.inner.template;
        let builder = CircuitBreakerBuilder::shared(
            name,
            config.unwrap_or_else(|| t.config.clone()),
            t.clock.clone(),
            t.listeners.clone(),
            t.classifier.clone(),
            t.initial_state,
            t.lane.clone(),
        );
        let breaker = match builder.build() {
            Ok(b) => b,
            // The initial state was validated by `RegistryBuilder::build`.
            Err(_) => unreachable!("registry templates are validated at build"),
        };
        if bounds.tracks {
            breaker.inner.usage.track(breaker.inner.clock(), now);
            if let Some(idle) = bounds.idle_nanos {
                self.inner
                    .next_sweep
                    .fetch_min(now.as_nanos().saturating_add(idle), Ordering::Relaxed);
            }
        }
        let name: Arc<str> = name.into();
        let index = all.entries.len();
        all.entries.push(Some(Entry {
            name: Arc::clone(&name),
            breaker: breaker.clone(),
        }));
        all.index.insert(name, index);
        all.live += 1;
        all.changes += 1;
        if !removed.is_empty() {
            self.settle_removals(&mut all);
        }
        self.maybe_publish(&mut all);
        drop(all);
        notify_removed(&removed);
        breaker
    }

    /// Republishing copies the table: do it at once while the table is
    /// small, and once the changes reach a quarter of it otherwise, so
    /// creating or removing n names costs O(n) copies in total.
    fn maybe_publish(&self, all: &mut All) {
        if all.published_len < 64 || all.changes * 4 >= all.published_len {
            self.publish(all);
        }
    }

    fn publish(&self, all: &mut All) {
        if all.changes == 0 {
            return;
        }
        let table = Table::build(
            self.inner.hash,
            all.live,
            all.entries.iter().flatten().map(|e| (&e.name, &e.breaker)),
        );
        all.published_len = all.live;
        all.changes = 0;
        let mut published = self
            .inner
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        published.0 += 1;
        published.1 = Arc::new(table);
        self.inner.epoch.store(published.0, Ordering::Release);
    }
}

impl<M: SyncApi> Registry<M> {
    /// Closes every breaker it holds (see [`CircuitBreaker::close`]);
    /// they stay cached, so `get` keeps returning the same instances (R14.4).
    pub fn close_all(&self) {
        for (_, breaker) in self.items() {
            breaker.close();
        }
    }
}

impl<M: AsyncApi> Registry<M> {
    /// The async form of [`close_all`](Registry::close_all).
    ///
    /// # Cancel safety
    ///
    /// Breakers not yet closed when the future is dropped stay open.
    pub async fn close_all_async(&self) {
        for (_, breaker) in self.items() {
            breaker.close_async().await;
        }
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl<M: Mode> fmt::Debug for Registry<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names())
            .field("coordinated", &self.is_coordinated())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ManualClock, SlidingWindow};
    use std::sync::Barrier;
    use std::time::Duration;

    #[test]
    fn r14_1_same_name_same_breaker_even_under_concurrent_first_access() {
        for _ in 0..20 {
            let registry = Registry::new();
            let barrier = Arc::new(Barrier::new(8));
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let (r, barrier) = (registry.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        r.get("payments")
                    })
                })
                .collect();
            let got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(got.iter().all(|b| b.ptr_eq(&got[0])));
            assert_eq!(registry.len(), 1);
        }
    }

    #[test]
    fn r14_1_override_applies_only_at_creation() {
        let registry = Registry::new();
        let five = Config::builder()
            .minimum_number_of_calls(5)
            .build()
            .unwrap();
        let seven = Config::builder()
            .minimum_number_of_calls(7)
            .build()
            .unwrap();
        let a = registry.get_with_config("a", five).unwrap();
        let again = registry.get_with_config("a", seven).unwrap();
        assert!(a.ptr_eq(&again));
        assert_eq!(again.config().minimum_number_of_calls(), 5);
        assert_eq!(registry.get("b").config().minimum_number_of_calls(), 10);
    }

    #[test]
    fn r14_shares_clock_listener_initial_state_and_classifier() {
        let clock = ManualClock::new();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let registry = Registry::builder()
            .config(
                Config::builder()
                    .minimum_number_of_calls(1)
                    .sliding_window(SlidingWindow::count(1))
                    .build()
                    .unwrap(),
            )
            .clock(clock.clone())
            .listener(move |e: &crate::Event<'_>| sink.lock().unwrap().push(e.to_string()))
            .classifier(|_| Verdict::Success)
            .initial_state(State::MetricsOnly)
            .build()
            .unwrap();
        let b = registry.get("x");
        // R14.2: no synthetic transition event.
        assert_eq!(b.state(), State::MetricsOnly);
        assert!(seen.lock().unwrap().is_empty());
        b.reset();
        let _ = b.call(|| Err::<(), _>(std::io::Error::other("forgiven")));
        assert_eq!(
            b.state(),
            State::Closed,
            "the shared classifier forgave the error"
        );
        let _ = b.call(|| {
            clock.advance(Duration::from_secs(2));
            Ok::<_, std::io::Error>(())
        });
        assert!(
            seen.lock()
                .unwrap()
                .contains(&"x: recorded success (2.000s)".to_owned())
        );
    }

    #[test]
    fn r14_3_get_existing_names_items_are_point_in_time_and_ordered() {
        let registry = Registry::new();
        assert!(registry.get_existing("a").is_none());
        assert!(registry.is_empty());
        for name in ["c", "a", "b"] {
            let _ = registry.get(name);
        }
        let names = registry.names();
        let items = registry.items();
        let _ = registry.get("d");
        assert_eq!(names, ["c", "a", "b"]);
        assert_eq!(items.len(), 3);
        assert!(items[1].1.ptr_eq(&registry.get_existing("a").unwrap()));
        assert_eq!(registry.names(), ["c", "a", "b", "d"]);
    }

    #[test]
    fn r14_4_close_all_keeps_breakers_cached() {
        let registry = Registry::new();
        let a = registry.get("a");
        registry.close_all();
        assert!(a.is_shut_down());
        assert!(registry.get("a").ptr_eq(&a));
    }

    #[test]
    fn r14_5_registry_validates_initial_state() {
        let err = Registry::builder()
            .initial_state(State::HalfOpen)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "initial_state");
    }

    fn host(i: usize) -> String {
        format!("host-{i}")
    }

    /// `n` breakers `host-0`, `host-1`, … created in `registry`, then each
    /// looked up again from this thread, which must find the same breaker
    /// (a `get` of a name still unpublished also publishes).
    fn created_and_found_again(registry: &Registry, n: usize) -> Vec<CircuitBreaker> {
        let created: Vec<_> = (0..n).map(|i| registry.get(&host(i))).collect();
        for (i, b) in created.iter().enumerate() {
            assert!(registry.get(&host(i)).ptr_eq(b));
        }
        created
    }

    #[test]
    fn many_names_stay_reachable_across_publications() {
        let registry = Registry::new();
        // From this thread (cached table) and a fresh one (no cache yet).
        let created = created_and_found_again(&registry, 2_000);
        let r2 = registry.clone();
        let first = created[1999].clone();
        std::thread::spawn(move || assert!(r2.get("host-1999").ptr_eq(&first)))
            .join()
            .unwrap();
        assert_eq!(registry.len(), 2_000);
    }

    /// R14 with the hot-path promise: once published, a hit takes neither
    /// of the registry's locks, so it is served while another thread holds
    /// the creation lock (a hit that fell back to `create` would wait).
    #[test]
    fn published_hits_are_served_while_the_creation_lock_is_held() {
        let registry = Registry::new();
        let created = created_and_found_again(&registry, 1_000);
        assert_eq!(registry.all().changes, 0);

        let (warm_tx, warm_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let r2 = registry.clone();
        let expected = created.clone();
        let worker = std::thread::spawn(move || {
            // This thread's first lookup copies the published table.
            assert!(r2.get(&host(0)).ptr_eq(&expected[0]));
            warm_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            let all_hit = expected
                .iter()
                .enumerate()
                .all(|(i, b)| r2.get(&host(i)).ptr_eq(b));
            done_tx.send(all_hit).unwrap();
        });
        warm_rx.recv().unwrap();
        let creation = registry.all();
        go_tx.send(()).unwrap();
        let all_hit = done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a published hit waited for the creation lock");
        drop(creation);
        assert!(all_hit, "a hit returned another breaker");
        worker.join().unwrap();
    }

    #[test]
    fn thread_cache_holds_several_registries() {
        let registries: Vec<_> = (0..THREAD_CACHE_SLOTS + 3)
            .map(|_| Registry::new())
            .collect();
        let first: Vec<_> = registries.iter().map(|r| r.get("x")).collect();
        for _ in 0..2 {
            for (r, b) in registries.iter().zip(&first) {
                assert!(r.get("x").ptr_eq(b));
            }
        }
    }

    // ---- issue 20, item 5: bounded registries ------------------------------

    /// Every `BreakerRemoved` a registry's listener saw, in order.
    fn removals() -> (Arc<Mutex<Vec<String>>>, impl EventListener) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let listener = move |e: &crate::Event<'_>| {
            if let crate::Event::BreakerRemoved { breaker, .. } = e {
                sink.lock().unwrap().push((*breaker).to_owned());
            }
        };
        (seen, listener)
    }

    fn ok() -> Result<(), std::io::Error> {
        Ok(())
    }

    #[test]
    fn remove_forgets_the_name_tells_its_listeners_and_a_later_get_creates_anew() {
        let (seen, listener) = removals();
        let registry = Registry::builder().listener(listener).build().unwrap();
        let a = registry.get("a");
        let _ = registry.get("b");
        let removed = registry.remove("a").unwrap();
        assert!(removed.ptr_eq(&a));
        assert_eq!(*seen.lock().unwrap(), ["a"]);
        assert_eq!(registry.names(), ["b"]);
        assert_eq!(registry.len(), 1);
        assert!(registry.get_existing("a").is_none());
        assert!(registry.remove("a").is_none());
        assert!(registry.remove("never").is_none());
        // The removed handle still works; the name now means a new breaker.
        a.call(ok).unwrap();
        let again = registry.get("a");
        assert!(!again.ptr_eq(&a));
        assert_eq!(registry.names(), ["b", "a"]);
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    /// A table published before a removal (still this thread's copy, and
    /// another thread's) never hands the removed breaker out again.
    #[test]
    fn a_removed_breaker_is_never_served_from_an_older_table() {
        let registry = Registry::new();
        let created = created_and_found_again(&registry, 1_000);
        let epoch = registry.inner.epoch.load(Ordering::Acquire);
        let (warm_tx, warm_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let r2 = registry.clone();
        let old = created[500].clone();
        let worker = std::thread::spawn(move || {
            assert!(r2.get(&host(500)).ptr_eq(&old));
            warm_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            let now = r2.get(&host(500));
            (
                !now.ptr_eq(&old),
                r2.get(&host(1)).ptr_eq(&r2.get(&host(1))),
            )
        });
        warm_rx.recv().unwrap();
        assert!(registry.remove(&host(500)).unwrap().ptr_eq(&created[500]));
        assert_ne!(
            registry.inner.epoch.load(Ordering::Acquire),
            epoch,
            "a removal is republished at once"
        );
        assert!(!registry.get(&host(500)).ptr_eq(&created[500]));
        go_tx.send(()).unwrap();
        assert_eq!(worker.join().unwrap(), (true, true));
        assert_eq!(registry.len(), 1_000);
    }

    #[test]
    fn retain_keeps_what_the_closure_keeps_and_what_was_created_meanwhile() {
        let (seen, listener) = removals();
        let registry = Registry::builder().listener(listener).build().unwrap();
        for name in ["a:443", "b:80", "c:443", "d:80"] {
            let _ = registry.get(name);
        }
        let r2 = registry.clone();
        let mut asked = Vec::new();
        registry.retain(|name, breaker| {
            asked.push(name.to_owned());
            assert_eq!(breaker.name(), name);
            // The closure may use the registry: no lock is held.
            let _ = r2.get("e:80");
            name.ends_with(":443")
        });
        assert_eq!(asked, ["a:443", "b:80", "c:443", "d:80"]);
        assert_eq!(registry.names(), ["a:443", "c:443", "e:80"]);
        assert_eq!(*seen.lock().unwrap(), ["b:80", "d:80"]);
        registry.retain(|_, _| true);
        assert_eq!(registry.len(), 3);
    }

    fn idle_registry(clock: &ManualClock, idle: u64) -> (Registry, Arc<Mutex<Vec<String>>>) {
        let (seen, listener) = removals();
        let registry = Registry::builder()
            .clock(clock.clone())
            .listener(listener)
            .expire_after_idle(Duration::from_secs(idle))
            .build()
            .unwrap();
        (registry, seen)
    }

    #[test]
    fn an_idle_breaker_is_gone_after_the_next_get_of_any_name() {
        let clock = ManualClock::new();
        let (registry, seen) = idle_registry(&clock, 60);
        let _ = registry.get("idle");
        clock.advance(Duration::from_secs(59));
        let _ = registry.get("other");
        assert_eq!(
            registry.names(),
            ["idle", "other"],
            "59 s is not idle enough"
        );
        clock.advance(Duration::from_secs(1));
        // Listing is not a use, and not a sweep.
        assert_eq!(registry.items().len(), 2);
        let _ = registry.get("other");
        assert_eq!(registry.names(), ["other"]);
        assert_eq!(*seen.lock().unwrap(), ["idle"]);
        assert!(registry.get_existing("idle").is_none());
    }

    #[test]
    fn handing_out_and_calling_both_count_as_use() {
        let clock = ManualClock::new();
        let (registry, seen) = idle_registry(&clock, 60);
        let config = Config::builder()
            .minimum_number_of_calls(1)
            .sliding_window(SlidingWindow::count(1))
            .wait_duration_in_open(Duration::from_secs(3600))
            .build()
            .unwrap();
        let handed = registry.get("handed");
        let called = registry.get("called");
        let rejecting = registry.get_with_config("rejecting", config).unwrap();
        let _ = rejecting.call(|| Err::<(), _>(std::io::Error::other("down")));
        assert_eq!(rejecting.state(), State::Open);
        let existing = registry.get("existing");
        for _ in 0..3 {
            clock.advance(Duration::from_secs(40));
            let _ = registry.get("handed");
            let _ = registry.get_existing("existing");
            called.call(ok).unwrap();
            assert!(rejecting.call(ok).unwrap_err().is_rejected());
        }
        assert_eq!(
            registry.names(),
            ["handed", "called", "rejecting", "existing"]
        );
        assert!(seen.lock().unwrap().is_empty());
        clock.advance(Duration::from_secs(60));
        let _ = registry.get("new");
        assert_eq!(registry.names(), ["new"]);
        assert_eq!(seen.lock().unwrap().len(), 4);
        // The handles outlive their registry entry.
        assert!(!handed.ptr_eq(&registry.get("handed")));
        drop(existing);
    }

    #[test]
    fn a_sweep_is_not_repeated_before_the_next_breaker_can_expire() {
        let clock = ManualClock::new();
        let (registry, _) = idle_registry(&clock, 100);
        let _ = registry.get("a");
        clock.advance(Duration::from_secs(30));
        let _ = registry.get("b");
        assert_eq!(
            registry.inner.next_sweep.load(Ordering::Relaxed),
            100_000_000_000,
            "a's expiry is the first due"
        );
        clock.advance(Duration::from_secs(70));
        let _ = registry.get("b");
        assert_eq!(registry.names(), ["b"]);
        // b was handed out at 100 s: not due before 200 s.
        assert_eq!(
            registry.inner.next_sweep.load(Ordering::Relaxed),
            200_000_000_000
        );
    }

    #[test]
    fn max_breakers_evicts_the_least_recently_used_and_tells_them() {
        let clock = ManualClock::new();
        let (seen, listener) = removals();
        let registry = Registry::builder()
            .clock(clock.clone())
            .listener(listener)
            .max_breakers(3)
            .build()
            .unwrap();
        for name in ["a", "b", "c"] {
            let _ = registry.get(name);
            clock.advance(Duration::from_secs(1));
        }
        let _ = registry.get("a");
        let b = registry.get_existing("b").unwrap();
        clock.advance(Duration::from_secs(1));
        b.call(ok).unwrap(); // a call is a use too
        clock.advance(Duration::from_secs(1));
        let _ = registry.get("d"); // c is the least recently used
        assert_eq!(registry.names(), ["a", "b", "d"]);
        let _ = registry.get("e"); // then a (used at 3 s; b was called at 4 s)
        assert_eq!(registry.names(), ["b", "d", "e"]);
        assert_eq!(*seen.lock().unwrap(), ["c", "a"]);
    }

    #[test]
    fn max_breakers_is_never_exceeded_and_evicts_in_batches() {
        let clock = ManualClock::new();
        let registry = Registry::builder()
            .clock(clock.clone())
            .max_breakers(320)
            .build()
            .unwrap();
        let mut most = 0;
        for i in 0..5_000 {
            clock.advance(Duration::from_millis(1));
            let b = registry.get(&host(i));
            assert!(registry.get(&host(i)).ptr_eq(&b));
            most = most.max(registry.len());
        }
        assert_eq!(most, 320);
        // A batch of 320 / 32 went at once: the newest names survived.
        let names = registry.names();
        assert!(names.len() > 320 - 10, "{}", names.len());
        assert_eq!(names.last().unwrap(), &host(4_999));
        assert!(registry.get_existing(&host(4_000)).is_none());
    }

    #[test]
    fn zero_bounds_are_config_errors_naming_the_field() {
        let err = Registry::builder()
            .expire_after_idle(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "expire_after_idle");
        let err = Registry::builder().max_breakers(0).build().unwrap_err();
        assert_eq!(err.field(), "max_breakers");
    }

    /// A listener whose last copy's drop is counted: it goes when every
    /// breaker (and the registry's template) holding it has gone.
    struct DropCounted(Arc<std::sync::atomic::AtomicUsize>);

    impl EventListener for DropCounted {
        fn on_event(&self, _: &crate::Event<'_>) {}
    }

    impl Drop for DropCounted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// "Dropping a registry frees its breakers", even when other threads,
    /// still running, looked names up in it (their caches keep the table).
    #[test]
    fn dropping_a_registry_frees_its_breakers_whatever_threads_cached_it() {
        let drops = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let registry = Registry::builder()
            .listener(DropCounted(drops.clone()))
            .build()
            .unwrap();
        let weak: Vec<_> = (0..100)
            .map(|i| Arc::downgrade(&registry.get(&host(i)).inner))
            .collect();
        let (looked_tx, looked_rx) = std::sync::mpsc::channel();
        let mut stop = Vec::new();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let r = registry.clone();
                let looked = looked_tx.clone();
                let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
                stop.push(stop_tx);
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let _ = r.get(&host(i));
                    }
                    drop(r);
                    looked.send(()).unwrap();
                    // Alive, its lookup cache untouched, until told to end.
                    stop_rx.recv().unwrap();
                })
            })
            .collect();
        for _ in 0..3 {
            looked_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        }
        let registry_weak = Arc::downgrade(&registry.inner);
        drop(registry);
        assert_eq!(registry_weak.strong_count(), 0);
        assert!(
            weak.iter().all(|w| w.strong_count() == 0),
            "breakers still alive"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1, "the listener was dropped");
        for tx in stop {
            tx.send(()).unwrap();
        }
        for w in workers {
            w.join().unwrap();
        }
    }

    #[test]
    fn a_dropped_registrys_cache_entry_is_purged_at_the_next_copy() {
        let dropped = Registry::new();
        let _ = dropped.get("x");
        let id = dropped.inner.id;
        drop(dropped);
        let other = Registry::new();
        let _ = other.get("y");
        let ids: Vec<u64> = CACHE.with(|c| c.borrow().iter().map(|e| e.registry).collect());
        assert!(!ids.contains(&id), "{ids:?}");
        assert!(ids.contains(&other.inner.id));
    }
}
