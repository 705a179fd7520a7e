//! What a lane talks to: a blocking or an async storage behind one type,
//! every call to it guarded so that a panicking storage reads as a failing
//! one.

use super::*;

pub(super) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

/// Awaits `round`, catching a panic while polling it (the async mirror of
/// [`crate::event::isolate`]): the lane's task outlives a panicking round.
#[cfg(feature = "tokio")]
pub(super) async fn isolated(round: impl Future<Output = ()>) {
    let mut round = std::pin::pin!(round);
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| round.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(payload) => {
                crate::background::drop_payload(payload);
                std::task::Poll::Ready(())
            }
        }
    })
    .await;
}

/// The object-safe face of an [`AsyncStorage`].
pub(crate) trait DynAsyncStorage: Send + Sync + 'static {
    fn trip_open<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
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
    fn restart_stalled_round<'a>(
        &'a self,
        name: &'a str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn restore<'a>(
        &'a self,
        name: &'a str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn poll_one<'a>(
        &'a self,
        request: &'a PollRequest<'a>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>>;
    fn poll_changes<'a>(
        &'a self,
        since: Option<Epoch>,
        requests: &'a [PollRequest<'a>],
    ) -> BoxFuture<'a, Result<ChangePoll, StorageError>>;
    fn subscribe(&self, sink: NoticeSink) -> bool;
}

impl<S: AsyncStorage> DynAsyncStorage for S {
    fn trip_open<'a>(
        &'a self,
        name: &'a str,
        ttl: Duration,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::trip_open(self, name, ttl, expected))
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
    fn restart_stalled_round<'a>(
        &'a self,
        name: &'a str,
        expected: u64,
        permitted: u32,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::restart_stalled_round(
            self, name, expected, permitted, ttl,
        ))
    }
    fn restore<'a>(
        &'a self,
        name: &'a str,
        expected: u64,
        state: SharedState,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::restore(self, name, expected, state, ttl))
    }
    fn poll_one<'a>(
        &'a self,
        request: &'a PollRequest<'a>,
    ) -> BoxFuture<'a, Result<SharedState, StorageError>> {
        Box::pin(AsyncStorage::poll_one(self, request))
    }
    fn poll_changes<'a>(
        &'a self,
        since: Option<Epoch>,
        requests: &'a [PollRequest<'a>],
    ) -> BoxFuture<'a, Result<ChangePoll, StorageError>> {
        Box::pin(AsyncStorage::poll_changes(self, since, requests))
    }
    fn subscribe(&self, sink: NoticeSink) -> bool {
        AsyncStorage::subscribe(self, sink)
    }
}

/// The storage behind a lane.
#[derive(Clone)]
pub(crate) enum Backend {
    Blocking(Arc<dyn Storage>),
    Async(Arc<dyn DynAsyncStorage>),
}
