//! [`Timeout`]: a deadline for one call, so a hang becomes a countable
//! failure ([`Elapsed`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use super::sleep::{StdSleeper, into_arc};
use super::{PipelineError, Sleeper, Strategy, with_deadline};
use crate::error::ConfigError;

/// Gives up on a call after a fixed duration with [`Elapsed`], which a
/// breaker outside it counts as a failure.
///
/// On the async path the call's future is dropped when time is up, so the
/// work is cancelled in place; the wait goes through the timeout's
/// [`Sleeper`] ([`StdSleeper`] unless told otherwise).
///
/// On the blocking path the call runs on a new worker thread and the caller
/// waits for it with a deadline on real time. **A thread cannot be killed**:
/// after a timeout the caller is free at once, but the worker keeps running
/// until the call returns on its own, still holding whatever it was waiting
/// on, and its result is thrown away. Prefer the async path where you have
/// an executor.
///
/// ```
/// use interlock::pipeline::{Pipeline, PipelineError, Timeout};
/// use std::time::Duration;
///
/// let pipeline = Pipeline::builder().timeout(Timeout::new(Duration::from_millis(20))).build();
/// let (tx, rx) = std::sync::mpsc::channel::<()>();
/// let rx = std::sync::Mutex::new(rx);
/// let err = pipeline
///     .call(move || {
///         let _ = rx.lock().unwrap().recv(); // hangs until the sender goes
///         Ok::<_, std::io::Error>(())
///     })
///     .unwrap_err();
/// assert!(matches!(err, PipelineError::Timeout(_)));
/// assert_eq!(err.to_string(), "call timed out after 0.020s");
/// drop(tx); // lets the abandoned worker finish
/// ```
#[derive(Clone, Debug)]
pub struct Timeout {
    duration: Duration,
    sleeper: Arc<dyn Sleeper>,
}

impl Timeout {
    /// A timeout of `duration` on real time ([`StdSleeper`]).
    ///
    /// A zero `duration` gives up on every call; [`builder`](Self::builder)
    /// refuses it with a [`ConfigError`], which configuration read from a
    /// file or the environment should go through.
    #[must_use]
    pub fn new(duration: Duration) -> Self {
        Timeout {
            duration,
            sleeper: into_arc(StdSleeper),
        }
    }

    /// A builder for a timeout of `duration`, checked at
    /// [`build`](TimeoutBuilder::build) like the other strategies' builders.
    ///
    /// ```
    /// use interlock::pipeline::{ManualSleeper, Timeout};
    /// use interlock::ManualClock;
    /// use std::time::Duration;
    ///
    /// let timeout = Timeout::builder(Duration::from_secs(2))
    ///     .sleeper(ManualSleeper::new(ManualClock::new()))
    ///     .build()?;
    /// assert_eq!(timeout.duration(), Duration::from_secs(2));
    ///
    /// let err = Timeout::builder(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err.field(), "timeout");
    /// # Ok::<(), interlock::ConfigError>(())
    /// ```
    pub fn builder(duration: Duration) -> TimeoutBuilder {
        TimeoutBuilder {
            timeout: Timeout::new(duration),
        }
    }

    /// Waits on `sleeper` on the async path (the blocking path always waits
    /// on real time).
    #[must_use]
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.sleeper = into_arc(sleeper);
        self
    }

    /// The deadline.
    #[must_use]
    pub fn duration(&self) -> Duration {
        self.duration
    }

    fn elapsed(&self) -> Elapsed {
        Elapsed::new(self.duration)
    }
}

/// Builds a [`Timeout`]; the duration is checked in [`build`](Self::build).
#[derive(Debug)]
#[must_use = "a builder does nothing until `build()`"]
pub struct TimeoutBuilder {
    timeout: Timeout,
}

impl TimeoutBuilder {
    /// What the async path's deadline sleeps on (default [`StdSleeper`]; the
    /// blocking path always waits on real time).
    pub fn sleeper(mut self, sleeper: impl Sleeper) -> Self {
        self.timeout.sleeper = into_arc(sleeper);
        self
    }

    /// The timeout.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `timeout` if the duration is zero (every
    /// call would time out), as the original refuses `TimeoutStrategy(0)`.
    pub fn build(self) -> Result<Timeout, ConfigError> {
        if self.timeout.duration.is_zero() {
            return Err(ConfigError::new(
                "timeout",
                "must be greater than zero, got 0s",
            ));
        }
        Ok(self.timeout)
    }
}

impl From<Duration> for Timeout {
    fn from(duration: Duration) -> Self {
        Timeout::new(duration)
    }
}

impl<T, E, K> Strategy<T, E, K> for Timeout {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        let worker = std::thread::Builder::new()
            .name("interlock-timeout".into())
            .spawn(move || {
                // The receiver is gone after a timeout: nothing to report to.
                let _ = tx.send(next());
            });
        let worker = match worker {
            Ok(worker) => worker,
            Err(e) => return Err(PipelineError::Other(Box::new(e))),
        };
        match rx.recv_timeout(self.duration) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => Err(PipelineError::Timeout(self.elapsed())),
            Err(RecvTimeoutError::Disconnected) => match worker.join() {
                // The call panicked: the panic is the caller's, as without a timeout.
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => Err(PipelineError::Other(
                    "the timeout's worker thread ended without a result".into(),
                )),
            },
        }
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        let deadline = self.sleeper.sleep(self.duration);
        match with_deadline(next(), deadline).await {
            Some(result) => result,
            None => Err(PipelineError::Timeout(self.elapsed())),
        }
    }
}

pub use crate::error::Elapsed;
