//! A [`CircuitBreaker`] as a pipeline layer.

use std::error::Error;
use std::future::Future;

use super::{PipelineError, Strategy};
use crate::breaker::{CircuitBreaker, Permit};

/// Records a settled call: a value is a success; an error (the call's own
/// or an inner layer's, e.g. a timeout) goes through the breaker's
/// classifier, which sees the wrapped error itself.
fn record<T, E: Error + 'static>(permit: Permit, result: &Result<T, PipelineError<E>>) {
    match result {
        Ok(_) => permit.success(),
        Err(e) => permit.finish_error(e.as_error(), e.type_name()),
    }
}

impl<T, E: Error + 'static> Strategy<T, E> for CircuitBreaker {
    fn execute<F>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Result<T, PipelineError<E>> + Send + Sync + 'static,
        T: Send + 'static,
        E: Send + 'static,
    {
        let permit = self.acquire()?;
        let result = next();
        record(permit, &result);
        result
    }

    async fn execute_async<F, Fut>(&self, next: F) -> Result<T, PipelineError<E>>
    where
        F: Fn() -> Fut + Send + Sync,
        Fut: Future<Output = Result<T, PipelineError<E>>> + Send,
        T: Send,
        E: Send,
    {
        // Dropping this future drops the permit unrecorded: a cancelled call.
        let permit = self.acquire()?;
        let result = next().await;
        record(permit, &result);
        result
    }
}
