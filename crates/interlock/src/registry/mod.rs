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

mod table;

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

/// What bounds a registry: idle expiry and a maximum count.
#[derive(Clone, Debug)]
struct Bounds {
    /// `expire_after_idle`, in nanoseconds.
    idle_nanos: Option<u64>,
    max: Option<usize>,
    /// Either of the two: breakers' use is stamped.
    tracks: bool,
    /// The registry's clock for stamps and sweeps: the template's, with
    /// the precise clock read as the coarse one (same origin; a registry
    /// hit must stay cheap, and idle times are minutes, not nanoseconds).
    clock: ClockHandle,
}

impl Bounds {
    fn new(idle: Option<Duration>, max: Option<usize>, clock: &ClockHandle) -> Self {
        let clock = match clock {
            ClockHandle::Auto | ClockHandle::Monotonic => ClockHandle::Coarse,
            chosen => chosen.clone(),
        };
        Bounds {
            idle_nanos: idle.map(duration_to_nanos),
            max,
            tracks: idle.is_some() || max.is_some(),
            clock,
        }
    }
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

/// At most this fraction of `expire_after_idle` between two idle sweeps,
/// so a stream of breakers expiring one by one costs one pass over the
/// registry per 1/1024 of the idle time, not one per breaker.
const SWEEP_SPACING_SHIFT: u32 = 10;

/// A registry at its maximum evicts this fraction of it at once (at least
/// one breaker), so that creating names past the bound costs an amortized
/// constant, not a pass over the registry per name.
const EVICTION_BATCH_DIVISOR: usize = 32;

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

    /// Forgets the breaker named `name` and returns it, or `None` if there
    /// is none. Its listeners receive [`Event::BreakerRemoved`]; handles to
    /// it keep working, and the next [`get`](Self::get) of the name creates
    /// a new breaker.
    ///
    /// ```
    /// use interlock::Registry;
    ///
    /// let registry = Registry::new();
    /// let old = registry.get("api.example.com:443");
    /// let removed = registry.remove("api.example.com:443").expect("it existed");
    /// assert!(removed.ptr_eq(&old));
    /// assert!(registry.get_existing("api.example.com:443").is_none());
    /// assert!(!registry.get("api.example.com:443").ptr_eq(&old)); // a new one
    /// assert!(registry.remove("never-seen").is_none());
    /// ```
    pub fn remove(&self, name: &str) -> Option<CircuitBreaker<M>> {
        let removed = {
            let mut all = self.all();
            let i = *all.index.get(name)?;
            let breaker = self.take(&mut all, i);
            self.settle_removals(&mut all);
            breaker
        };
        notify_removed(std::slice::from_ref(&removed));
        Some(removed.cast())
    }

    /// Keeps only the breakers for which `keep(name, breaker)` is true and
    /// forgets the others, as [`remove`](Self::remove) does. `keep` runs
    /// outside the registry's lock (it may use the registry), on a
    /// point-in-time list; a breaker created meanwhile is kept.
    ///
    /// ```
    /// use interlock::{Registry, State};
    ///
    /// let registry = Registry::new();
    /// for host in ["a.internal:443", "b.internal:443", "c.example.com:443"] {
    ///     let _ = registry.get(host);
    /// }
    /// registry.get("b.internal:443").force_open();
    /// // Forget the external hosts, and internal ones an operator forced open.
    /// registry.retain(|name, breaker| name.ends_with(".internal:443") && breaker.state() != State::ForcedOpen);
    /// assert_eq!(registry.names(), ["a.internal:443"]);
    /// ```
    pub fn retain(&self, mut keep: impl FnMut(&str, &CircuitBreaker<M>) -> bool) {
        let listed: Vec<(Arc<str>, CircuitBreaker<M>)> = self
            .all()
            .entries
            .iter()
            .flatten()
            .map(|e| (Arc::clone(&e.name), e.breaker.clone().cast()))
            .collect();
        let doomed: Vec<_> = listed
            .into_iter()
            .filter(|(name, breaker)| !keep(name, breaker))
            .collect();
        if doomed.is_empty() {
            return;
        }
        let removed = {
            let mut all = self.all();
            let mut removed = Vec::with_capacity(doomed.len());
            for (name, breaker) in &doomed {
                let Some(&i) = all.index.get(&**name) else {
                    continue;
                };
                // Only the breaker `keep` judged: a new one under the same
                // name (created since the listing) stays.
                if all.entries[i]
                    .as_ref()
                    .is_some_and(|e| Arc::ptr_eq(&e.breaker.inner, &breaker.inner))
                {
                    removed.push(self.take(&mut all, i));
                }
            }
            self.settle_removals(&mut all);
            removed
        };
        notify_removed(&removed);
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

    /// How long a breaker may go unused before the registry forgets it
    /// ([`RegistryBuilder::expire_after_idle`]), if it does.
    #[must_use]
    pub fn expire_after_idle(&self) -> Option<Duration> {
        self.inner.template.idle
    }

    /// How many breakers it holds at most ([`RegistryBuilder::max_breakers`]),
    /// if it is bounded.
    #[must_use]
    pub fn max_breakers(&self) -> Option<usize> {
        self.inner.template.max
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

    /// Stamps a breaker just handed out as used now, and sweeps idle ones
    /// if one may have expired.
    #[inline]
    fn handed_out(&self, breaker: &CircuitBreaker) {
        let now = self.inner.bounds.clock.now();
        breaker.inner.usage.touch(now);
        if now.as_nanos() >= self.inner.next_sweep.load(Ordering::Relaxed) {
            self.sweep(now);
        }
    }

    /// Forgets every breaker idle for `expire_after_idle` at `now`.
    #[cold]
    #[inline(never)]
    fn sweep(&self, now: Timestamp) {
        let removed = {
            let mut all = self.all();
            // Another thread may have swept since the caller looked.
            if now.as_nanos() < self.inner.next_sweep.load(Ordering::Relaxed) {
                return;
            }
            let removed = self.expire(&mut all, now);
            self.settle_removals(&mut all);
            removed
        };
        notify_removed(&removed);
    }

    /// Takes the expired breakers out (the lock held) and schedules the
    /// next sweep.
    fn expire(&self, all: &mut All, now: Timestamp) -> Vec<CircuitBreaker> {
        let Some(idle) = self.inner.bounds.idle_nanos else {
            return Vec::new();
        };
        let now = now.as_nanos();
        let mut next = u64::MAX;
        let mut doomed = Vec::new();
        for (i, entry) in all.entries.iter().enumerate() {
            let Some(entry) = entry else { continue };
            let last = entry.breaker.inner.usage.last();
            if now.saturating_sub(last) >= idle {
                doomed.push(i);
            } else {
                next = next.min(last.saturating_add(idle));
            }
        }
        let spacing = (idle >> SWEEP_SPACING_SHIFT).max(1);
        if next != u64::MAX {
            next = next.max(now.saturating_add(spacing));
        }
        self.inner.next_sweep.store(next, Ordering::Relaxed);
        doomed.into_iter().map(|i| self.take(all, i)).collect()
    }

    /// Makes room for one more breaker under `max_breakers`: the expired
    /// first, then the least recently used, a batch at a time.
    fn make_room(&self, all: &mut All, max: usize, now: Timestamp) -> Vec<CircuitBreaker> {
        let mut removed = self.expire(all, now);
        if all.live < max {
            return removed;
        }
        let batch = (max / EVICTION_BATCH_DIVISOR).max(1).min(all.live);
        // (last use, creation order): ties go to the older breaker.
        let mut by_use: Vec<(u64, usize)> = all
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((e.as_ref()?.breaker.inner.usage.last(), i)))
            .collect();
        if batch < by_use.len() {
            by_use.select_nth_unstable(batch - 1);
            by_use.truncate(batch);
        }
        removed.extend(by_use.into_iter().map(|(_, i)| self.take(all, i)));
        removed
    }

    /// Takes entry `i` out (the lock held).
    fn take(&self, all: &mut All, i: usize) -> CircuitBreaker {
        let Some(entry) = all.entries[i].take() else {
            unreachable!("the index points at live entries only")
        };
        all.index.remove(&entry.name);
        all.live -= 1;
        all.changes += 1;
        entry.breaker
    }

    /// After removals: compacts the list once it is mostly holes, and
    /// republishes at once: the published table must not list a removed
    /// breaker (a hit trusts a current table without another check). One
    /// copy of the table per call: evictions come in batches, and
    /// [`retain`](Self::retain) removes many names with one copy.
    fn settle_removals(&self, all: &mut All) {
        if all.entries.len() > 2 * all.live + 16 {
            all.entries.retain(Option::is_some);
            let All { entries, index, .. } = all;
            for (i, entry) in entries.iter().flatten().enumerate() {
                if let Some(at) = index.get_mut(&entry.name) {
                    *at = i;
                }
            }
        }
        self.publish(all);
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

/// Tells each removed breaker's listeners, outside the registry's lock.
fn notify_removed(removed: &[CircuitBreaker]) {
    for breaker in removed {
        breaker.inner.emit(&Event::breaker_removed(breaker.name()));
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

/// Builds a [`Registry`]; every check happens in [`build`](Self::build).
#[must_use]
pub struct RegistryBuilder<M = Local> {
    template: Template,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for RegistryBuilder<M> {
    fn clone(&self) -> Self {
        RegistryBuilder {
            template: self.template.clone(),
            mode: PhantomData,
        }
    }
}

impl<M> fmt::Debug for RegistryBuilder<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("config", &self.template.config)
            .field("initial_state", &self.template.initial_state)
            .finish_non_exhaustive()
    }
}

impl<M: Mode> RegistryBuilder<M> {
    /// Coordinates every breaker through `coordinator`'s storage, each under
    /// its own name (R14.1); the coordinator's mode becomes the registry's.
    pub fn coordinator<N: Mode>(self, coordinator: &Coordinator<N>) -> RegistryBuilder<N> {
        let mut template = self.template;
        template.lane = Some(Arc::clone(&coordinator.lane));
        RegistryBuilder {
            template,
            mode: PhantomData,
        }
    }

    /// The config of breakers created without one of their own.
    pub fn config(mut self, config: Config) -> Self {
        self.template.config = config;
        self
    }

    /// The clock every breaker uses. Without one, each breaker picks its
    /// own from its slow-call threshold, as
    /// [`CircuitBreakerBuilder::clock`](crate::CircuitBreakerBuilder::clock)
    /// says. It is also the registry's clock for
    /// [`expire_after_idle`](Self::expire_after_idle) (read as
    /// [`CoarseClock`](crate::CoarseClock) when none is given or it is
    /// [`MonotonicClock`](crate::MonotonicClock)).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.template.clock = ClockHandle::from_clock(clock);
        self
    }

    /// Adds a listener every breaker reports to.
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.template.listeners.push(into_arc(listener));
        self
    }

    /// The error policy of every breaker (see
    /// [`CircuitBreakerBuilder::classifier`]).
    pub fn classifier<C>(mut self, classifier: C) -> Self
    where
        C: Fn(&(dyn std::error::Error + 'static)) -> Verdict + Send + Sync + 'static,
    {
        self.template.classifier = Some(ErrorClassifier(Arc::new(classifier)));
        self
    }

    /// The state every breaker starts in (applied before it is published).
    pub fn initial_state(mut self, state: State) -> Self {
        self.template.initial_state = state;
        self
    }

    /// Forgets a breaker neither handed out (by [`Registry::get`],
    /// [`get_with_config`](Registry::get_with_config) or
    /// [`get_existing`](Registry::get_existing)) nor called (admitted or
    /// rejected) for `idle`, on the registry's clock: it is gone at the
    /// latest after the first `get` of any name once `idle` has passed.
    /// Listing ([`Registry::items`]) and reading a breaker's state are not
    /// uses. Its listeners receive [`Event::BreakerRemoved`].
    ///
    /// Expiry is checked on `get`, with no thread of its own: a registry
    /// nobody asks for names keeps its breakers until the next `get`. The
    /// check is one clock read and one comparison per `get`; when one may
    /// have expired, the `get` goes over the registry once (at most once per
    /// 1/1024 of `idle`, so a breaker may outlive `idle` by that much when
    /// others expire just before it). A call on a breaker created with
    /// [`MonotonicClock`](crate::MonotonicClock) is stamped to about a
    /// millisecond, never earlier than it happened.
    ///
    /// ```
    /// use interlock::{ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::builder()
    ///     .clock(clock.clone())
    ///     .expire_after_idle(Duration::from_secs(600))
    ///     .build()?;
    /// let _ = registry.get("a.example.com:443");
    /// let busy = registry.get("b.example.com:443");
    /// clock.advance(Duration::from_secs(400));
    /// busy.call(|| Ok::<_, std::io::Error>(())).unwrap(); // a call is a use
    /// clock.advance(Duration::from_secs(200));
    /// let _ = registry.get("c.example.com:443"); // any get sweeps
    /// assert_eq!(registry.names(), ["b.example.com:443", "c.example.com:443"]);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn expire_after_idle(mut self, idle: Duration) -> Self {
        self.template.idle = Some(idle);
        self
    }

    /// Holds at most `max` breakers: creating one more first forgets the
    /// expired ones (with [`expire_after_idle`](Self::expire_after_idle)),
    /// then the least recently used (handed out or called, as for
    /// `expire_after_idle`; ties go to the oldest). It forgets 1/32 of
    /// `max` (at least one) at a time, so that a stream of new names past
    /// the bound costs amortized constant work per name, not a pass over
    /// the registry each. Their listeners receive [`Event::BreakerRemoved`].
    ///
    /// An evicted breaker's state is lost: a host it had tripped for is
    /// called again at once if asked for. Choose `max` well above the
    /// number of names in use at a time.
    ///
    /// ```
    /// use interlock::{ManualClock, Registry};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let registry = Registry::builder().clock(clock.clone()).max_breakers(2).build()?;
    /// let _ = registry.get("a");
    /// clock.advance(Duration::from_secs(1));
    /// let _ = registry.get("b");
    /// clock.advance(Duration::from_secs(1));
    /// let _ = registry.get("a"); // now "b" is the least recently used
    /// let _ = registry.get("c");
    /// assert_eq!(registry.names(), ["a", "c"]);
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn max_breakers(mut self, max: usize) -> Self {
        self.template.max = Some(max);
        self
    }

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `initial_state` if it is OPEN or HALF_OPEN,
    /// `wait_duration_backoff_multiplier` if it is not 1.0 with a
    /// coordinator (R14.5, R2.4), `expire_after_idle` if it is zero, or
    /// `max_breakers` if it is zero.
    pub fn build(self) -> Result<Registry<M>, ConfigError> {
        crate::machine::Machine::new(self.template.config.clone(), self.template.initial_state)?;
        if self.template.lane.is_some() {
            self.template.config.validate_for_storage()?;
        }
        if self.template.idle == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                "expire_after_idle",
                "must be longer than zero (a breaker would expire as it is handed out)",
            ));
        }
        if self.template.max == Some(0) {
            return Err(ConfigError::new(
                "max_breakers",
                "must be at least 1 (a registry must hold the breaker it hands out)",
            ));
        }
        Ok(Registry::from_template(self.template))
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
