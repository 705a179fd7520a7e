//! [`Registry`]: one breaker per name, created on first use (R14).
//!
//! Lookups of existing names take no lock: each thread keeps the latest
//! published name table and checks one atomic epoch to know it is current.
//! Creation takes the registry's lock, so the same name always yields the
//! same breaker, even when many threads ask for it first at once.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use std::marker::PhantomData;

use crate::breaker::coordinator::Coordinator;
use crate::breaker::coordinator::Lane;
use crate::breaker::{CircuitBreaker, CircuitBreakerBuilder};
use crate::classify::{ErrorClassifier, Verdict};
use crate::clock::{Clock, ClockHandle};
use crate::config::Config;
use crate::error::ConfigError;
use crate::event::{EventListener, into_arc};
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
}

struct All {
    order: Vec<(Box<str>, CircuitBreaker)>,
    index: HashMap<Box<str>, usize>,
    /// Names created since the last publication.
    unpublished: usize,
    published_len: usize,
}

#[derive(Clone)]
struct Template {
    config: Config,
    clock: ClockHandle,
    listeners: Vec<Arc<dyn EventListener>>,
    classifier: Option<ErrorClassifier>,
    initial_state: State,
    lane: Option<Arc<Lane>>,
}

struct CacheEntry {
    registry: u64,
    epoch: u64,
    table: Arc<Table>,
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
        }
    }
}

impl<M: Mode> Registry<M> {
    fn from_template(template: Template) -> Self {
        let hash = NameHash::new();
        Registry {
            inner: Arc::new(RegistryInner {
                id: next_registry_id(),
                epoch: AtomicU64::new(0),
                published: Mutex::new((0, Arc::new(Table::empty(hash)))),
                hash,
                all: Mutex::new(All {
                    order: Vec::new(),
                    index: HashMap::new(),
                    unpublished: 0,
                    published_len: 0,
                }),
                template,
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
        if let Some(b) = self.lookup(name) {
            return b.cast();
        }
        self.create(name, None).cast()
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
        if let Some(b) = self.lookup(name) {
            return Ok(b.cast());
        }
        if self.inner.template.lane.is_some() {
            config.validate_for_storage()?;
        }
        Ok(self.create(name, Some(config)).cast())
    }

    /// The breaker named `name` if it exists; never creates one (R14.3).
    #[must_use]
    pub fn get_existing(&self, name: &str) -> Option<CircuitBreaker<M>> {
        self.lookup(name)
            .or_else(|| {
                let all = self.all();
                all.index.get(name).map(|&i| all.order[i].1.clone())
            })
            .map(CircuitBreaker::cast)
    }

    /// The names created so far, in creation order (a point-in-time copy).
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.all()
            .order
            .iter()
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// The breakers created so far, in creation order (a point-in-time copy).
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
            .order
            .iter()
            .map(|(name, b)| (name.to_string(), b.clone()))
            .collect()
    }

    /// How many breakers exist.
    #[must_use]
    pub fn len(&self) -> usize {
        self.all().order.len()
    }

    /// Whether no breaker exists yet.
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
    /// it is current.
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
                            return Some(entry.table.get(name).cloned());
                        }
                    }
                }
                self.lookup_stale(cache, name)
            })
            .ok()
            .flatten()
            .flatten()
    }

    /// This thread's copy is stale or absent: take the current table (a
    /// short lock, once per publication per thread), then look `name` up in
    /// it. Out of line, so the hit path inlines its one table lookup.
    #[cold]
    #[inline(never)]
    fn lookup_stale(
        &self,
        cache: &RefCell<Vec<CacheEntry>>,
        name: &str,
    ) -> Option<Option<CircuitBreaker>> {
        let inner = &*self.inner;
        let mut cache = cache.try_borrow_mut().ok()?;
        let (epoch, table) = {
            let published = inner
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (published.0, Arc::clone(&published.1))
        };
        let found = table.get(name).cloned();
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
                });
            }
        }
        Some(found)
    }

    #[cold]
    fn create(&self, name: &str, config: Option<Config>) -> CircuitBreaker {
        let mut all = self.all();
        if let Some(&i) = all.index.get(name) {
            let breaker = all.order[i].1.clone();
            // A name still waiting for publication is served under the lock;
            // publish now so its readers get the lock-free path.
            self.publish(&mut all);
            return breaker;
        }
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
        let index = all.order.len();
        all.order.push((name.into(), breaker.clone()));
        all.index.insert(name.into(), index);
        all.unpublished += 1;
        // Republishing copies the table: do it at once while the table is
        // small, and once the new names reach a quarter of it otherwise, so
        // creating n names costs O(n) copies in total.
        if all.published_len < 64 || all.unpublished * 4 >= all.published_len {
            self.publish(&mut all);
        }
        breaker
    }

    fn publish(&self, all: &mut All) {
        if all.unpublished == 0 {
            return;
        }
        let table = Table::build(self.inner.hash, &all.order);
        all.published_len = all.order.len();
        all.unpublished = 0;
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
    /// Closes every breaker created so far (see [`CircuitBreaker::close`]);
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
    /// says.
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

    /// Builds the registry.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `initial_state` if it is OPEN or HALF_OPEN,
    /// or `wait_duration_backoff_multiplier` if it is not 1.0 with a
    /// coordinator (R14.5, R2.4).
    pub fn build(self) -> Result<Registry<M>, ConfigError> {
        crate::machine::Machine::new(self.template.config.clone(), self.template.initial_state)?;
        if self.template.lane.is_some() {
            self.template.config.validate_for_storage()?;
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
        assert_eq!(registry.all().unpublished, 0);

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
}
