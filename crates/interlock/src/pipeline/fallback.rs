//! [`Fallback`]: an explicit substitute value for selected errors.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::{PipelineError, Predicate, Strategy, emit};
use crate::event::{Event, EventListener, into_arc};
use crate::failure::Failure;

/// Substitutes a value for the errors its predicate selects, and only for
/// those: every other error goes through untouched.
///
/// The handler receives the error it stands in for and returns a value of
/// the call's own type. It is not a listener: a panic in it propagates.
/// Each substitution is reported as [`Event::FallbackUsed`].
///
/// ```
/// use interlock::pipeline::{Fallback, Pipeline, PipelineError};
/// use interlock::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new("recommendations");
/// let pipeline = Pipeline::builder()
///     .fallback(
///         Fallback::new(
///             |e: &PipelineError<std::io::Error>| e.is_rejected() || e.is_timeout(),
///             |_| Vec::<String>::new(),
///         )
///         .name("recommendations"),
///     )
///     .circuit_breaker(breaker.clone())
///     .build();
///
/// breaker.force_open();
/// assert!(pipeline.call(|| Ok(vec!["a".to_string()]))?.is_empty()); // substituted
/// breaker.reset();
/// let err = pipeline.call(|| Err::<Vec<String>, _>(std::io::Error::other("bad request")));
/// assert!(err.unwrap_err().is_inner()); // not selected: propagates
/// # Ok::<(), PipelineError<std::io::Error>>(())
/// ```
#[derive(Clone)]
pub struct Fallback<P, H> {
    on: P,
    handler: H,
    name: Arc<str>,
    listeners: Arc<[Arc<dyn EventListener>]>,
}

impl<P, H> Fallback<P, H> {
    /// Substitutes `handler(error)` for the errors `on` selects.
    pub fn new(on: P, handler: H) -> Self {
        Fallback {
            on,
            handler,
            name: "fallback".into(),
            listeners: Arc::new([]),
        }
    }

    /// The name its events carry (default `"fallback"`).
    #[must_use]
    pub fn name(mut self, name: impl AsRef<str>) -> Self {
        self.name = name.as_ref().into();
        self
    }

    /// Adds a listener for [`Event::FallbackUsed`].
    #[must_use]
    pub fn listener(mut self, listener: impl EventListener) -> Self {
        let mut listeners = self.listeners.to_vec();
        listeners.push(into_arc(listener));
        self.listeners = listeners.into();
        self
    }

    fn substitute<T, E, K>(&self, error: PipelineError<E>) -> Result<T, PipelineError<E>>
    where
        P: Predicate<E, K>,
        H: Fn(PipelineError<E>) -> T,
        E: Failure<K>,
    {
        if !Predicate::<E, K>::test(&self.on, &error) {
            return Err(error);
        }
        emit(
            &self.listeners,
            &Event::FallbackUsed {
                name: &self.name,
                error: error.as_error::<K>(),
            },
        );
        Ok((self.handler)(error))
    }
}

impl<P, H> fmt::Debug for Fallback<P, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<T, E, K, P, H> Strategy<T, E, K> for Fallback<P, H>
where
    P: Predicate<E, K>,
    H: Fn(PipelineError<E>) -> T + Send + Sync + 'static,
    E: Failure<K>,
{
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        next().or_else(|e| self.substitute::<T, E, K>(e))
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        next().await.or_else(|e| self.substitute::<T, E, K>(e))
    }
}
