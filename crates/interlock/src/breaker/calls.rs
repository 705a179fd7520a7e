//! The calling API: `call`, `call_classified`, `acquire` and `close` on the
//! blocking side, their `_async` twins on the async side.

use super::*;

impl<M: SyncApi> CircuitBreaker<M> {
    /// Runs `f` if the breaker admits it, and records how it went.
    ///
    /// An `Err` is a failure unless the breaker's
    /// [`classifier`](CircuitBreakerBuilder::classifier) says otherwise; an
    /// `Ok` is a success. A call lasting at least
    /// `slow_call_duration_threshold` is also slow. If `f` panics, the panic
    /// propagates and the call counts as cancelled: nothing is recorded.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] if the breaker rejected the call (`f` did not
    /// run), [`CallError::Inner`] with `f`'s own error otherwise.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("inventory");
    /// let stock = breaker.call(|| Ok::<_, std::io::Error>(42)).unwrap();
    /// assert_eq!(stock, 42);
    /// ```
    #[inline]
    pub fn call<T, E, F, K, R>(&self, f: F) -> Result<T, R>
    where
        F: FnOnce() -> Result<T, E>,
        E: Failure<K, CallError = R>,
        R: CallErrorOf<E>,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: match self.inner.door() {
                Door::Admit(admission) => self.inner.ticket(admission, false),
                // Built straight into the returned error, not copied from an
                // intermediate `Result`.
                Door::Reject(state, nanos) => {
                    return Err(E::call_error(CallError::Rejected(
                        self.inner.reject_nanos(state, nanos),
                    )));
                }
                Door::Decide => match self.inner.admit_slow_blocking() {
                    Ok(ticket) => ticket,
                    Err(open) => return Err(E::call_error(CallError::Rejected(open))),
                },
            },
        };
        let result = f();
        guard.settle_result(&result);
        result.map_err(|e| E::call_error(CallError::Inner(e)))
    }

    /// Like [`call`](Self::call), with this call's own classification over
    /// the result, e.g. to count an HTTP 503 response as a failure.
    ///
    /// An error classified as a failure (or inconclusive) becomes the
    /// breaker's last failure.
    ///
    /// # Errors
    ///
    /// As for [`call`](Self::call).
    ///
    /// ```
    /// use interlock::{CircuitBreaker, Verdict};
    ///
    /// let breaker = CircuitBreaker::new("api");
    /// let status = breaker
    ///     .call_classified(
    ///         || Ok::<u16, String>(503),
    ///         |r| match r {
    ///             Ok(&status) if status >= 500 => Verdict::Failure,
    ///             Ok(_) => Verdict::Success,
    ///             Err(_) => Verdict::Failure,
    ///         },
    ///     )
    ///     .unwrap();
    /// assert_eq!(status, 503);
    /// assert_eq!(breaker.snapshot().failed_calls, 1);
    /// ```
    pub fn call_classified<T, E, F, C>(&self, f: F, classify: C) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Result<T, E>,
        C: FnOnce(Result<&T, &E>) -> Verdict,
        E: fmt::Display,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: match self.inner.door() {
                Door::Admit(admission) => self.inner.ticket(admission, false),
                // Built straight into the returned error, not copied from an
                // intermediate `Result`.
                Door::Reject(state, nanos) => {
                    return Err(CallError::Rejected(self.inner.reject_nanos(state, nanos)));
                }
                Door::Decide => self.inner.admit_slow_blocking()?,
            },
        };
        let result = f();
        let verdict = classify(result.as_ref());
        guard.settle(verdict, error_text(&result));
        result.map_err(CallError::Inner)
    }

    /// Asks for admission without running anything: for code that is not a
    /// closure. Record the outcome on the [`Permit`]; dropping it unrecorded
    /// cancels the call.
    ///
    /// # Errors
    ///
    /// [`CircuitOpenError`] if the breaker rejects the call.
    ///
    /// ```
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("queue");
    /// let permit = breaker.acquire()?;
    /// // ... talk to the dependency ...
    /// permit.success();
    /// assert_eq!(breaker.snapshot().total_calls, 1);
    /// # Ok::<(), interlock::CircuitOpenError>(())
    /// ```
    pub fn acquire(&self) -> Result<Permit, CircuitOpenError> {
        let ticket = self.inner.admit()?;
        Ok(Permit::new(Arc::clone(&self.inner), ticket))
    }

    /// Stops background work: cancels the `auto_transition` timer for good,
    /// and for a coordinated breaker runs its queued writes, leaves the
    /// coordinator and drops the cached shared view (R15.10, R17.9). Not a
    /// state change (use [`reset`](Self::reset) to close the circuit); the
    /// breaker keeps working on local state. Idempotent.
    pub fn close(&self) {
        if !self.begin_shutdown() {
            return;
        }
        if let Some(lane) = &self.inner.lane {
            lane.detach_blocking(Arc::downgrade(&self.inner));
            self.inner.drop_shared_view();
        }
    }
}

impl<M: AsyncApi> CircuitBreaker<M> {
    /// Awaits the future made by `f` if the breaker admits it, and records
    /// how it went, on any executor.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future before it completes cancels the call:
    /// its probe slot (if any) is handed back and nothing is recorded (R4.5).
    ///
    /// # Errors
    ///
    /// As for [`call`](CircuitBreaker::call).
    ///
    /// ```
    /// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     let waker = std::task::Waker::noop();
    /// #     let mut cx = std::task::Context::from_waker(&waker);
    /// #     let mut f = std::pin::pin!(f);
    /// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
    /// # }
    /// use interlock::CircuitBreaker;
    ///
    /// let breaker = CircuitBreaker::new("recommendations");
    /// let picks = block_on(breaker.call_async(|| async { Ok::<_, std::io::Error>(vec!["a", "b"]) }));
    /// assert_eq!(picks.unwrap(), ["a", "b"]);
    /// ```
    pub async fn call_async<T, E, F, Fut, K, R>(&self, f: F) -> Result<T, R>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: Failure<K, CallError = R>,
        R: CallErrorOf<E>,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: match self.inner.admit_async().await {
                Ok(ticket) => ticket,
                Err(open) => return Err(E::call_error(CallError::Rejected(open))),
            },
        };
        let result = f().await;
        guard.settle_result(&result);
        result.map_err(|e| E::call_error(CallError::Inner(e)))
    }

    /// [`call_async`](Self::call_async) with this call's own classification.
    ///
    /// # Cancel safety
    ///
    /// As for [`call_async`](Self::call_async).
    ///
    /// # Errors
    ///
    /// As for [`call`](CircuitBreaker::call).
    pub async fn call_async_classified<T, E, F, Fut, C>(
        &self,
        f: F,
        classify: C,
    ) -> Result<T, CallError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: FnOnce(Result<&T, &E>) -> Verdict,
        E: fmt::Display,
    {
        let guard = Guard {
            inner: &self.inner,
            ticket: self.inner.admit_async().await?,
        };
        let result = f().await;
        let verdict = classify(result.as_ref());
        guard.settle(verdict, error_text(&result));
        result.map_err(CallError::Inner)
    }

    /// The async form of [`acquire`](CircuitBreaker::acquire): in a shared
    /// HALF_OPEN the probe lease is awaited.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it resolves admits nothing (a lease
    /// already granted by the storage is not handed back, R15.4).
    ///
    /// # Errors
    ///
    /// [`CircuitOpenError`] if the breaker rejects the call.
    pub async fn acquire_async(&self) -> Result<Permit, CircuitOpenError> {
        let ticket = self.inner.admit_async().await?;
        Ok(Permit::new(Arc::clone(&self.inner), ticket))
    }

    /// The async form of [`close`](CircuitBreaker::close), for breakers
    /// coordinated through an async storage (and local ones).
    ///
    /// # Cancel safety
    ///
    /// The breaker is marked shut down at once; dropping the future may
    /// leave its queued writes to the lane and its shared view cached.
    pub async fn close_async(&self) {
        if !self.begin_shutdown() {
            return;
        }
        if let Some(lane) = &self.inner.lane {
            lane.detach_async(Arc::downgrade(&self.inner)).await;
            self.inner.drop_shared_view();
        }
    }
}
