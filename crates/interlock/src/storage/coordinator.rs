//! [`Coordinator`]: one background lane per storage, serving all of its
//! breakers (R17).
//!
//! The lane polls the shared views every `poll_interval` and runs the
//! fire-and-forget writes breakers queue (a local trip, probe outcomes and
//! the fenced round decision). A blocking storage gets a thread, an async
//! one a tokio task (feature `tokio`); a *manual* coordinator gets neither
//! and is driven by [`Coordinator::poll`] and [`Coordinator::run_writes`],
//! for deterministic tests and simulations.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::breaker::Inner;
use crate::machine::Outcome;
use crate::mode::{Async, Blocking};

use super::{AsyncStorage, ProbeLease, SharedState, Storage, StorageError, StorageSettings};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The error a storage call that panicked is reported as: a panicking
/// storage is a failing storage, and degrades the breaker like any other
/// error instead of reaching the protected call or killing the lane.
#[derive(Debug)]
pub(crate) struct StoragePanicked;

impl fmt::Display for StoragePanicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the storage panicked")
    }
}

impl std::error::Error for StoragePanicked {}

/// Runs a blocking storage call, turning a panic into an error.
pub(crate) fn guarded<T>(
    call: impl FnOnce() -> Result<T, StorageError>,
) -> Result<T, StorageError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call))
        .unwrap_or_else(|_| Err(Box::new(StoragePanicked)))
}

/// Awaits an async storage call, turning a panic while polling it into an
/// error.
pub(crate) async fn guarded_async<T>(
    call: impl Future<Output = Result<T, StorageError>>,
) -> Result<T, StorageError> {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(_) => std::task::Poll::Ready(Err(Box::new(StoragePanicked) as StorageError)),
        }
    })
    .await
}

/// The object-safe face of an [`AsyncStorage`].
pub(crate) trait DynAsyncStorage: Send + Sync + 'static {
    fn read<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SharedState>, StorageError>>;
    fn trip_open<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn begin_half_open_if_elapsed<'a>(
        &'a self,
        name: &'a str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn lease_probe<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<ProbeLease, StorageError>>;
    fn record_probe<'a>(
        &'a self,
        name: &'a str,
        outcome: Outcome,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn close<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
}

impl<S: AsyncStorage> DynAsyncStorage for S {
    fn read<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<SharedState>, StorageError>> {
        Box::pin(AsyncStorage::read(self, name))
    }
    fn trip_open<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::trip_open(self, name, ttl, expected))
    }
    fn begin_half_open_if_elapsed<'a>(
        &'a self,
        name: &'a str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::begin_half_open_if_elapsed(
            self, name, wait, permitted, ttl,
        ))
    }
    fn lease_probe<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<ProbeLease, StorageError>> {
        Box::pin(AsyncStorage::lease_probe(self, name, ttl))
    }
    fn record_probe<'a>(
        &'a self,
        name: &'a str,
        outcome: Outcome,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::record_probe(self, name, outcome, ttl))
    }
    fn close<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::close(self, name, ttl, expected))
    }
}

/// The storage behind a lane.
#[derive(Clone)]
pub(crate) enum Backend {
    Blocking(Arc<dyn Storage>),
    Async(Arc<dyn DynAsyncStorage>),
}

/// A write queued by a breaker (R17.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// The local machine tripped: open the shared breaker (unfenced).
    Trip,
    /// A leased probe settled.
    Probe(Outcome),
}

pub(crate) enum Item {
    Write(Weak<Inner>, Write),
    /// Shutdown of one breaker: everything queued before it runs first.
    Detach(Weak<Inner>, Arc<Ack>),
}

/// A one-shot acknowledgement a closing breaker waits for.
#[derive(Default)]
pub(crate) struct Ack {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Ack {
    pub(crate) fn set(&self) {
        *self.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_all();
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            done = self.cv.wait(done).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[derive(Default)]
struct LaneState {
    queue: VecDeque<Item>,
    members: Vec<Weak<Inner>>,
    running: bool,
}

/// One lane per coordinator.
pub(crate) struct Lane {
    pub(crate) backend: Backend,
    pub(crate) settings: StorageSettings,
    state: Mutex<LaneState>,
    wake: Condvar,
    background: bool,
    /// Mirrors `LaneState::running` so the async admission path can check
    /// it without taking the lane's lock on every call.
    started: std::sync::atomic::AtomicBool,
    #[cfg(feature = "tokio")]
    notify: tokio::sync::Notify,
}

impl Lane {
    fn new(backend: Backend, settings: StorageSettings, background: bool) -> Arc<Self> {
        Arc::new(Lane {
            backend,
            settings,
            state: Mutex::new(LaneState::default()),
            wake: Condvar::new(),
            background,
            started: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "tokio")]
            notify: tokio::sync::Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_async(&self) -> bool {
        matches!(self.backend, Backend::Async(_))
    }

    /// Adds a breaker and starts the lane if it has not started yet.
    pub(crate) fn attach(self: &Arc<Self>, breaker: Weak<Inner>) {
        let mut st = self.state();
        st.members.push(breaker);
        drop(st);
        self.ensure_running();
    }

    /// Starts the background worker, if this lane has one and it is not
    /// running (an async lane outside a tokio runtime starts at the first
    /// async admission instead).
    pub(crate) fn ensure_running(self: &Arc<Self>) {
        if !self.background || self.started.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut st = self.state();
        if st.running {
            return;
        }
        match self.backend {
            Backend::Blocking(_) => {
                let weak = Arc::downgrade(self);
                let spawned = std::thread::Builder::new()
                    .name("interlock-coordinator".into())
                    .spawn(move || run_blocking(&weak));
                st.running = spawned.is_ok();
            }
            Backend::Async(_) =>
            {
                #[cfg(feature = "tokio")]
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    let weak = Arc::downgrade(self);
                    handle.spawn(run_async(weak));
                    st.running = true;
                }
            }
        }
        self.started
            .store(st.running, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn push(&self, item: Item) {
        self.state().queue.push_back(item);
        self.wake.notify_all();
        #[cfg(feature = "tokio")]
        self.notify.notify_one();
    }

    /// Queues a detach marker and waits until the lane has run it (or runs
    /// the queue here when there is no background worker).
    pub(crate) fn detach_blocking(self: &Arc<Self>, breaker: Weak<Inner>) {
        let ack = Arc::new(Ack::default());
        self.push(Item::Detach(breaker, ack.clone()));
        if self.background && self.state().running {
            ack.wait();
        } else {
            self.run_queue_blocking();
        }
    }

    /// The async mirror of [`detach_blocking`](Self::detach_blocking).
    pub(crate) async fn detach_async(self: &Arc<Self>, breaker: Weak<Inner>) {
        let ack = Arc::new(Ack::default());
        self.push(Item::Detach(breaker, ack.clone()));
        if self.background && self.state().running {
            AckFuture(ack).await;
        } else {
            self.run_queue_async().await;
        }
    }

    fn pop(&self) -> Option<Item> {
        self.state().queue.pop_front()
    }

    fn members(&self) -> Vec<Arc<Inner>> {
        let mut st = self.state();
        st.members.retain(|m| m.strong_count() > 0);
        st.members.iter().filter_map(Weak::upgrade).collect()
    }

    fn detach(&self, breaker: &Weak<Inner>) {
        self.state()
            .members
            .retain(|m| !Weak::ptr_eq(m, breaker) && m.strong_count() > 0);
    }

    pub(crate) fn run_queue_blocking(&self) {
        while let Some(item) = self.pop() {
            match item {
                Item::Write(breaker, write) => {
                    if let Some(b) = breaker.upgrade() {
                        b.run_write_blocking(self, write);
                    }
                }
                Item::Detach(breaker, ack) => {
                    self.detach(&breaker);
                    ack.set();
                }
            }
        }
    }

    pub(crate) async fn run_queue_async(&self) {
        while let Some(item) = self.pop() {
            match item {
                Item::Write(breaker, write) => {
                    if let Some(b) = breaker.upgrade() {
                        b.run_write_async(self, write).await;
                    }
                }
                Item::Detach(breaker, ack) => {
                    self.detach(&breaker);
                    ack.set();
                }
            }
        }
    }

    pub(crate) fn poll_blocking(&self) {
        for breaker in self.members() {
            breaker.poll_blocking(self);
        }
    }

    pub(crate) async fn poll_async(&self) {
        for breaker in self.members() {
            breaker.poll_async(self).await;
        }
    }
}

/// Resolves once an [`Ack`] is set (checked on every wake of the lane's
/// notifier; the lane sets acks only from its own task).
struct AckFuture(Arc<Ack>);

impl Future for AckFuture {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if *self.0.done.lock().unwrap_or_else(PoisonError::into_inner) {
            std::task::Poll::Ready(())
        } else {
            // Cheap re-poll: closing is rare and the lane acks promptly.
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

fn real_now() -> Instant {
    #[allow(clippy::disallowed_methods)] // the lane is scheduled on real time
    Instant::now()
}

/// The blocking lane: wait up to `poll_interval` for a write; run writes as
/// they come; poll when the interval is up (R17.1). Exits once nothing
/// holds the lane any more.
fn run_blocking(weak: &Weak<Lane>) {
    let mut next_poll = real_now();
    loop {
        let Some(lane) = weak.upgrade() else { return };
        let interval = lane.settings.poll_interval();
        {
            let mut st = lane.state();
            loop {
                if !st.queue.is_empty() {
                    break;
                }
                let now = real_now();
                if now >= next_poll {
                    break;
                }
                st = lane
                    .wake
                    .wait_timeout(st, next_poll - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        lane.run_queue_blocking();
        if real_now() >= next_poll {
            lane.poll_blocking();
            next_poll = real_now() + interval;
        }
        if Arc::strong_count(&lane) == 1 && lane.state().members.is_empty() {
            return;
        }
    }
}

#[cfg(feature = "tokio")]
async fn run_async(weak: Weak<Lane>) {
    let mut next_poll = tokio::time::Instant::now();
    loop {
        let Some(lane) = weak.upgrade() else { return };
        let interval = lane.settings.poll_interval();
        if lane.state().queue.is_empty() && tokio::time::Instant::now() < next_poll {
            let _ = tokio::time::timeout_at(next_poll, lane.notify.notified()).await;
        }
        lane.run_queue_async().await;
        if tokio::time::Instant::now() >= next_poll {
            lane.poll_async().await;
            next_poll = tokio::time::Instant::now() + interval;
        }
        if Arc::strong_count(&lane) == 1 && lane.state().members.is_empty() {
            return;
        }
    }
}

/// Coordinates breakers through one shared storage: hand it to
/// [`CircuitBreakerBuilder::coordinator`](crate::CircuitBreakerBuilder::coordinator)
/// or [`RegistryBuilder::coordinator`](crate::RegistryBuilder::coordinator).
///
/// One coordinator is one lane (a thread, or a tokio task) for all the
/// breakers built with it, whatever their number. Its mode decides the API
/// of those breakers: [`Blocking`] or [`Async`] (see [`crate::mode`]).
///
/// ```
/// use interlock::storage::{Coordinator, MemoryStorage};
/// use interlock::{CircuitBreaker, ManualClock, State};
///
/// let clock = ManualClock::new();
/// let storage = MemoryStorage::builder().clock(clock.clone()).build();
/// // Two instances of a service, each with its own coordinator (its own
/// // "process"), sharing one storage; driven by hand here.
/// let (a, b) = (Coordinator::manual(storage.clone()), Coordinator::manual(storage));
/// let on_a = CircuitBreaker::builder("payments").coordinator(&a).clock(clock.clone()).build()?;
/// let on_b = CircuitBreaker::builder("payments").coordinator(&b).clock(clock).build()?;
///
/// on_a.force_open(); // local to instance A...
/// on_a.reset();
/// b.poll();
/// assert_eq!(on_b.state(), State::Closed); // ...overrides are never shared
/// # Ok::<(), interlock::ConfigError>(())
/// ```
pub struct Coordinator<M> {
    pub(crate) lane: Arc<Lane>,
    mode: PhantomData<fn() -> M>,
}

impl<M> Clone for Coordinator<M> {
    fn clone(&self) -> Self {
        Coordinator {
            lane: Arc::clone(&self.lane),
            mode: PhantomData,
        }
    }
}

impl<M> fmt::Debug for Coordinator<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Coordinator")
            .field("async", &self.lane.is_async())
            .field("background", &self.lane.background)
            .field("settings", &self.lane.settings)
            .finish_non_exhaustive()
    }
}

impl<M> Coordinator<M> {
    /// The storage's knobs this coordinator runs with.
    #[must_use]
    pub fn settings(&self) -> &StorageSettings {
        &self.lane.settings
    }

    /// How many breakers it serves.
    #[must_use]
    pub fn breakers(&self) -> usize {
        self.lane.members().len()
    }
}

impl Coordinator<Blocking> {
    /// Coordinates through a blocking storage, on one background thread
    /// started when the first breaker joins.
    pub fn blocking<S: Storage>(storage: S) -> Self {
        let settings = storage.settings();
        Coordinator {
            lane: Lane::new(Backend::Blocking(Arc::new(storage)), settings, true),
            mode: PhantomData,
        }
    }

    /// Coordinates through a blocking storage with no background thread:
    /// nothing is polled or written until [`poll`](Self::poll) or
    /// [`run_writes`](Self::run_writes) runs it on the caller's thread.
    pub fn manual<S: Storage>(storage: S) -> Self {
        let settings = storage.settings();
        Coordinator {
            lane: Lane::new(Backend::Blocking(Arc::new(storage)), settings, false),
            mode: PhantomData,
        }
    }

    /// Runs the queued writes now, in order, on this thread.
    pub fn run_writes(&self) {
        self.lane.run_queue_blocking();
    }

    /// Polls every breaker's shared view now, on this thread (R17.2).
    pub fn poll(&self) {
        self.lane.poll_blocking();
    }
}

impl Coordinator<Async> {
    /// Coordinates through an async storage on one tokio task, spawned when
    /// the first breaker joins inside a runtime (or at its first async call).
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn asynchronous<S: AsyncStorage>(storage: S) -> Self {
        let settings = AsyncStorage::settings(&storage);
        Coordinator {
            lane: Lane::new(Backend::Async(Arc::new(storage)), settings, true),
            mode: PhantomData,
        }
    }

    /// Coordinates through an async storage with no background task: driven
    /// by [`poll`](Self::poll) and [`run_writes`](Self::run_writes).
    pub fn manual_async<S: AsyncStorage>(storage: S) -> Self {
        let settings = AsyncStorage::settings(&storage);
        Coordinator {
            lane: Lane::new(Backend::Async(Arc::new(storage)), settings, false),
            mode: PhantomData,
        }
    }

    /// Runs the queued writes now, in order.
    ///
    /// # Cancel safety
    ///
    /// A write in progress when the future is dropped may or may not have
    /// reached the storage; later ones stay queued.
    pub async fn run_writes(&self) {
        self.lane.run_queue_async().await;
    }

    /// Polls every breaker's shared view now (R17.2).
    ///
    /// # Cancel safety
    ///
    /// Breakers not yet polled when the future is dropped keep their views.
    pub async fn poll(&self) {
        self.lane.poll_async().await;
    }
}
