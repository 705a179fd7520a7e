//! [`Coordinator`]: the public handle on a lane.

use super::*;

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
    /// The coordinator of an existing lane (a registry's).
    pub(crate) fn from_lane(lane: Arc<Lane>) -> Self {
        Coordinator {
            lane,
            mode: PhantomData,
        }
    }

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

    /// Whether the storage pushes change notices to this coordinator
    /// ([`Storage::subscribe`] accepted): other instances' changes then
    /// arrive at once rather than at the next poll.
    #[must_use]
    pub fn is_subscribed(&self) -> bool {
        self.lane.is_subscribed()
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

    /// Runs the queued writes now, in order, on this thread, then the
    /// refreshes change notices asked for.
    pub fn run_writes(&self) {
        self.lane.run_queue_blocking();
        self.lane.run_refreshes_blocking();
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
        self.lane.run_refreshes_async().await;
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
