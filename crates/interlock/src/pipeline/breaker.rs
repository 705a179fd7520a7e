//! A [`CircuitBreaker`] as a pipeline layer.

use std::future::Future;

use super::{PipelineError, Strategy};
use crate::breaker::{CircuitBreaker, Permit};
use crate::failure::Failure;

/// Records a settled call: a value is a success; an error (the call's own
/// or an inner layer's, e.g. a timeout) goes through the breaker's
/// classifier, which sees the wrapped error itself. An error that carries
/// an inner breaker's rejection is ignored (nothing recorded): that breaker
/// refused the call, this one's dependency was never asked.
fn record<T, E: Failure<K>, K>(permit: Permit, result: &Result<T, PipelineError<E>>) {
    match result {
        Ok(_) => permit.success(),
        Err(e) => permit.finish_error(e.as_error::<K>(), e.type_name()),
    }
}

impl<T, E: Failure<K>, K> Strategy<T, E, K> for CircuitBreaker {
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
