//! Fleet-wide operator writes through a coordinator's storage: the fenced
//! trip and close an operator issues for every instance at once (what the
//! `interlock` command line's `trip` and `close` do, and the admin
//! dashboard's fleet buttons).
//!
//! Each write is fenced by the version the operator was shown: if any
//! instance wrote in between, the storage applies nothing and answers with
//! the newer state. Every answer is adopted at once by this coordinator's
//! breakers of that name, as the answer to a poll would be; other instances
//! adopt it at their next poll (or at once, with change notices).

use super::{Backend, Coordinator, guarded, guarded_async};
use crate::mode::{Async, Blocking};
use crate::store::{PollRequest, SharedState, StorageError};

/// Which fenced write.
#[derive(Clone, Copy)]
enum Fenced {
    Trip,
    Close,
}

impl<M> Coordinator<M> {
    /// Hands a storage answer about `name` to this coordinator's breakers of
    /// that name.
    fn adopt_answer(&self, name: &str, view: SharedState) {
        for breaker in self.lane.members() {
            if breaker.name() == name {
                // No regression check (`None`): an operator's answer only moves a view
                // forward, like any other answer (R15.6a).
                breaker.settle_answer(Ok(view), breaker.now(), None);
            }
        }
    }
}

impl Coordinator<Blocking> {
    /// The shared state of `name` as the storage holds it now (CLOSED at
    /// version 0 if it has none), on the caller's thread. This
    /// coordinator's breakers of that name adopt it.
    ///
    /// # Errors
    ///
    /// When the storage cannot answer (or panics); no breaker degrades for
    /// it, their own polls decide that.
    pub fn read_shared(&self, name: &str) -> Result<SharedState, StorageError> {
        let Backend::Blocking(storage) = &self.lane.backend else {
            unreachable!("a blocking coordinator has a blocking storage");
        };
        let view = guarded(|| storage.poll_one(&PollRequest::Read { name }))?;
        self.adopt_answer(name, view);
        Ok(view)
    }

    /// Opens `name` for the whole fleet, if its shared state is still at
    /// `expected_version` (the version the operator was shown): a fenced
    /// [`Storage::trip_open`](super::Storage::trip_open) with the storage's
    /// state TTL, on the caller's thread.
    ///
    /// The answer is the state after the attempt: OPEN at a version above
    /// `expected_version` if the write applied; otherwise the newer state
    /// that fenced it out (or the OPEN it already was), unchanged. This
    /// coordinator's breakers of that name adopt it at once.
    ///
    /// ```
    /// use interlock::storage::{Coordinator, MemoryStorage};
    /// use interlock::{CircuitBreaker, State};
    ///
    /// let storage = MemoryStorage::new();
    /// let coordinator = Coordinator::manual(storage.clone());
    /// let breaker = CircuitBreaker::builder("payments").coordinator(&coordinator).build()?;
    ///
    /// let shown = coordinator.read_shared("payments")?; // CLOSED v0
    /// let written = coordinator.trip_shared("payments", shown.version)?;
    /// assert_eq!((written.state, written.version), (State::Open, 1));
    /// assert_eq!(breaker.state(), State::Open); // adopted at once
    ///
    /// // Fenced: a second operator who was also shown v0 writes nothing.
    /// let stale = coordinator.close_shared("payments", 0)?;
    /// assert_eq!((stale.state, stale.version), (State::Open, 1));
    /// # Ok::<(), interlock::storage::StorageError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// When the storage cannot answer (or panics): the write may or may not
    /// have been applied; read again to know.
    pub fn trip_shared(
        &self,
        name: &str,
        expected_version: u64,
    ) -> Result<SharedState, StorageError> {
        self.fenced_blocking(Fenced::Trip, name, expected_version)
    }

    /// Closes `name` for the whole fleet, if its shared state is still at
    /// `expected_version`: a fenced [`Storage::close`](super::Storage::close),
    /// answered and adopted like [`trip_shared`](Self::trip_shared) (an
    /// applied close is CLOSED at a version above `expected_version`).
    ///
    /// # Errors
    ///
    /// As for [`trip_shared`](Self::trip_shared).
    pub fn close_shared(
        &self,
        name: &str,
        expected_version: u64,
    ) -> Result<SharedState, StorageError> {
        self.fenced_blocking(Fenced::Close, name, expected_version)
    }

    fn fenced_blocking(
        &self,
        write: Fenced,
        name: &str,
        expected: u64,
    ) -> Result<SharedState, StorageError> {
        let Backend::Blocking(storage) = &self.lane.backend else {
            unreachable!("a blocking coordinator has a blocking storage");
        };
        let ttl = self.lane.settings.state_ttl();
        let view = guarded(|| match write {
            Fenced::Trip => storage.trip_open(name, ttl, Some(expected)),
            Fenced::Close => storage.close(name, ttl, Some(expected)),
        })?;
        self.adopt_answer(name, view);
        Ok(view)
    }
}

impl Coordinator<Async> {
    /// The async form of [`Coordinator::read_shared`].
    ///
    /// # Errors
    ///
    /// As for the blocking form.
    pub async fn read_shared(&self, name: &str) -> Result<SharedState, StorageError> {
        let Backend::Async(storage) = &self.lane.backend else {
            unreachable!("an async coordinator has an async storage");
        };
        let request = PollRequest::Read { name };
        let view = guarded_async(storage.poll_one(&request)).await?;
        self.adopt_answer(name, view);
        Ok(view)
    }

    /// The async form of [`Coordinator::trip_shared`].
    ///
    /// # Cancel safety
    ///
    /// A write in progress when the future is dropped may or may not have
    /// reached the storage.
    ///
    /// # Errors
    ///
    /// As for the blocking form.
    pub async fn trip_shared(
        &self,
        name: &str,
        expected_version: u64,
    ) -> Result<SharedState, StorageError> {
        self.fenced_async(Fenced::Trip, name, expected_version)
            .await
    }

    /// The async form of [`Coordinator::close_shared`].
    ///
    /// # Cancel safety
    ///
    /// As for [`trip_shared`](Self::trip_shared).
    ///
    /// # Errors
    ///
    /// As for the blocking form.
    pub async fn close_shared(
        &self,
        name: &str,
        expected_version: u64,
    ) -> Result<SharedState, StorageError> {
        self.fenced_async(Fenced::Close, name, expected_version)
            .await
    }

    async fn fenced_async(
        &self,
        write: Fenced,
        name: &str,
        expected: u64,
    ) -> Result<SharedState, StorageError> {
        let Backend::Async(storage) = &self.lane.backend else {
            unreachable!("an async coordinator has an async storage");
        };
        let ttl = self.lane.settings.state_ttl();
        let view = match write {
            Fenced::Trip => guarded_async(storage.trip_open(name, ttl, Some(expected))).await,
            Fenced::Close => guarded_async(storage.close(name, ttl, Some(expected))).await,
        }?;
        self.adopt_answer(name, view);
        Ok(view)
    }
}
