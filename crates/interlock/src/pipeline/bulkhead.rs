//! [`Bulkhead`]: caps how many calls run through a layer at once.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Sleeper, Strategy, emit, with_deadline};
use crate::error::ConfigError;
use crate::event::{Event, EventListener, into_arc as listener_arc};

/// Caps concurrent calls; with no free slot a call waits up to `max_wait`
/// (zero by default: it fails at once) and then fails with [`Full`].
///
/// A full bulkhead means *this process* is saturated, not that the
/// dependency is unhealthy, so [`Full`] is never a circuit-open rejection.
/// A breaker outside the bulkhead counts it as a failure unless its
/// classifier says otherwise; returning [`Verdict::Inconclusive`] makes a
/// HALF_OPEN probe that found no slot hand its probe slot back (R9):
///
/// ```
/// use interlock::pipeline::{bulkhead, Bulkhead, Pipeline};
/// use interlock::{CircuitBreaker, Verdict};
///
/// let breaker = CircuitBreaker::builder("search")
///     .classifier(|e: &(dyn std::error::Error + 'static)| {
///         if e.is::<bulkhead::Full>() { Verdict::Inconclusive } else { Verdict::Failure }
///     })
///     .build()?;
/// let pipeline = Pipeline::builder()
///     .circuit_breaker(breaker)
///     .bulkhead(Bulkhead::builder(8).name("search").build()?)
///     .build();
/// assert_eq!(pipeline.call(|| Ok::<_, std::io::Error>(1))?, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Blocking and async calls have **independent pools** of `max_concurrent`
/// slots each: a thread waiting for a slot never blocks an executor, and a
/// task never waits on a thread. Blocking waits use real time; async waits
/// use the bulkhead's [`Sleeper`]. Cloning is cheap and shares the slots.
///
/// [`Verdict::Inconclusive`]: crate::Verdict::Inconclusive
#[derive(Clone, Debug)]
pub struct Bulkhead {
    shared: Arc<Shared>,
}

struct Shared {
    name: Arc<str>,
    max_concurrent: usize,
    max_wait: Duration,
    sleeper: Arc<dyn Sleeper>,
    listeners: Box<[Arc<dyn EventListener>]>,
    blocking: BlockingPool,
    tasks: AsyncPool,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bulkhead")
            .field("name", &self.name)
            .field("max_concurrent", &self.max_concurrent)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Bulkhead`].
#[must_use = "a builder does nothing until `build()`"]
pub struct BulkheadBuilder {
    name: String,
    max_concurrent: usize,
    max_wait: Duration,
    sleeper: Arc<dyn Sleeper>,
    listeners: Vec<Arc<dyn EventListener>>,
}

impl fmt::Debug for BulkheadBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkheadBuilder")
            .field("name", &self.name)
            .field("max_concurrent", &self.max_concurrent)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl BulkheadBuilder {
    /// The name its events carry (default `"bulkhead"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How long a call may wait for a slot (default zero: fail at once).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// Adds a listener for [`Event::BulkheadRejected`].
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        self.listeners.push(listener_arc(listener));
        self
    }

    /// What async waits for a slot sleep on (default [`StdSleeper`]).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = into_arc(sleeper);
        self
    }

    /// The bulkhead.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_concurrent` if it is zero.
    pub fn build(self) -> Result<Bulkhead, ConfigError> {
        if self.max_concurrent == 0 {
            return Err(ConfigError::new(
                "max_concurrent",
                "must be at least 1, got 0",
            ));
        }
        Ok(Bulkhead {
            shared: Arc::new(Shared {
                name: self.name.into(),
                max_concurrent: self.max_concurrent,
                max_wait: self.max_wait,
                sleeper: self.sleeper,
                listeners: self.listeners.into_boxed_slice(),
                blocking: BlockingPool::default(),
                tasks: AsyncPool::default(),
            }),
        })
    }
}

impl Bulkhead {
    /// A builder for a bulkhead of `max_concurrent` slots per pool.
    pub fn builder(max_concurrent: usize) -> BulkheadBuilder {
        BulkheadBuilder {
            name: "bulkhead".into(),
            max_concurrent,
            max_wait: Duration::ZERO,
            sleeper: into_arc(StdSleeper),
            listeners: Vec::new(),
        }
    }

    /// The bulkhead's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Slots per pool.
    #[must_use]
    pub fn max_concurrent(&self) -> usize {
        self.shared.max_concurrent
    }

    /// Blocking calls running through it now.
    #[must_use]
    pub fn blocking_in_flight(&self) -> usize {
        *self.shared.blocking.used()
    }

    /// Async calls running through it now.
    #[must_use]
    pub fn async_in_flight(&self) -> usize {
        self.shared.tasks.state().used
    }

    fn reject<E>(&self) -> PipelineError<E> {
        let shared = &self.shared;
        emit(
            &shared.listeners,
            &Event::BulkheadRejected { name: &shared.name },
        );
        PipelineError::BulkheadFull(Full::new(Arc::clone(&shared.name), shared.max_concurrent))
    }
}

impl<T, E, K> Strategy<T, E, K> for Bulkhead {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let shared = &self.shared;
        if !shared
            .blocking
            .acquire(shared.max_concurrent, shared.max_wait)
        {
            return Err(self.reject());
        }
        let _slot = BlockingSlot(&shared.blocking);
        next()
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        let shared = &self.shared;
        let pool = &shared.tasks;
        let acquired = pool.try_acquire(shared.max_concurrent)
            || (!shared.max_wait.is_zero()
                && with_deadline(
                    Acquire {
                        pool,
                        max: shared.max_concurrent,
                        id: None,
                    },
                    shared.sleeper.sleep(shared.max_wait),
                )
                .await
                .is_some());
        if !acquired {
            return Err(self.reject());
        }
        let _slot = AsyncSlot(pool);
        next().await
    }
}

#[derive(Default)]
struct BlockingPool {
    used: Mutex<usize>,
    freed: Condvar,
}

impl BlockingPool {
    fn used(&self) -> MutexGuard<'_, usize> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn acquire(&self, max: usize, wait: Duration) -> bool {
        let mut used = self.used();
        if *used >= max && !wait.is_zero() {
            used = self
                .freed
                .wait_timeout_while(used, wait, |used| *used >= max)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if *used < max {
            *used += 1;
            true
        } else {
            false
        }
    }

    fn release(&self) {
        *self.used() -= 1;
        self.freed.notify_one();
    }
}

struct BlockingSlot<'a>(&'a BlockingPool);

impl Drop for BlockingSlot<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

#[derive(Default)]
struct AsyncPool {
    state: Mutex<AsyncState>,
}

#[derive(Default)]
struct AsyncState {
    used: usize,
    next_id: u64,
    waiters: Vec<(u64, Waker)>,
}

impl AsyncPool {
    fn state(&self) -> MutexGuard<'_, AsyncState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_acquire(&self, max: usize) -> bool {
        let mut state = self.state();
        if state.used < max {
            state.used += 1;
            true
        } else {
            false
        }
    }

    fn release(&self) {
        // Every waiter is woken and competes again: a waiter that gave up
        // in the meantime can never swallow the wake-up.
        let waiters = {
            let mut state = self.state();
            state.used -= 1;
            std::mem::take(&mut state.waiters)
        };
        for (_, waker) in waiters {
            waker.wake();
        }
    }
}

/// Waits for an async slot.
struct Acquire<'a> {
    pool: &'a AsyncPool,
    max: usize,
    id: Option<u64>,
}

impl Future for Acquire<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let pool = self.pool;
        let mut state = pool.state();
        if state.used < self.max {
            state.used += 1;
            if let Some(id) = self.id.take() {
                state.waiters.retain(|(w, _)| *w != id);
            }
            return Poll::Ready(());
        }
        let id = match self.id {
            Some(id) => id,
            None => {
                state.next_id += 1;
                state.next_id
            }
        };
        self.id = Some(id);
        let waker = cx.waker().clone();
        match state.waiters.iter_mut().find(|(w, _)| *w == id) {
            Some(slot) => slot.1 = waker,
            None => state.waiters.push((id, waker)),
        }
        Poll::Pending
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.pool.state().waiters.retain(|(w, _)| *w != id);
        }
    }
}

struct AsyncSlot<'a>(&'a AsyncPool);

impl Drop for AsyncSlot<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

pub use crate::error::Full;
