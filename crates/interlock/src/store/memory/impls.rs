//! The storage contract's two faces, [`Storage`] and [`AsyncStorage`], for
//! [`MemoryStorage`]: each operation is the inherent method of the same
//! name, so both APIs answer alike.

use std::time::Duration;

use super::MemoryStorage;
use crate::state::Outcome;
use crate::store::{
    AsyncStorage, ChangePoll, Epoch, NoticeSink, PollAnswers, PollRequest, ProbeLease, SharedState,
    Storage, StorageError, StorageSettings,
};

impl Storage for MemoryStorage {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(MemoryStorage::read(self, name))
    }

    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::trip_open(self, name, ttl, expected_version))
    }

    fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::begin_half_open_if_elapsed(
            self, name, wait, permitted, ttl,
        ))
    }

    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Ok(MemoryStorage::lease_probe(self, name, ttl))
    }

    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::record_probe(self, name, outcome, ttl))
    }

    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::close(self, name, ttl, expected_version))
    }

    fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::restart_stalled_round(
            self,
            name,
            expected_version,
            permitted,
            ttl,
        ))
    }

    fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::restore(
            self,
            name,
            expected_version,
            state,
            ttl,
        ))
    }

    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        Ok(MemoryStorage::poll_many(self, requests)
            .into_iter()
            .map(Ok)
            .collect())
    }

    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        Ok(MemoryStorage::poll_changes(self, since, requests))
    }

    fn subscribe(&self, sink: NoticeSink) -> bool {
        MemoryStorage::subscribe(self, sink)
    }

    fn settings(&self) -> StorageSettings {
        MemoryStorage::settings(self)
    }
}

impl AsyncStorage for MemoryStorage {
    async fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(MemoryStorage::read(self, name))
    }

    async fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::trip_open(self, name, ttl, expected_version))
    }

    async fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::begin_half_open_if_elapsed(
            self, name, wait, permitted, ttl,
        ))
    }

    async fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Ok(MemoryStorage::lease_probe(self, name, ttl))
    }

    async fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::record_probe(self, name, outcome, ttl))
    }

    async fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::close(self, name, ttl, expected_version))
    }

    async fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::restart_stalled_round(
            self,
            name,
            expected_version,
            permitted,
            ttl,
        ))
    }

    async fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(MemoryStorage::restore(
            self,
            name,
            expected_version,
            state,
            ttl,
        ))
    }

    async fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        Ok(MemoryStorage::poll_many(self, requests)
            .into_iter()
            .map(Ok)
            .collect())
    }

    async fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        Ok(MemoryStorage::poll_changes(self, since, requests))
    }

    fn subscribe(&self, sink: NoticeSink) -> bool {
        MemoryStorage::subscribe(self, sink)
    }

    fn settings(&self) -> StorageSettings {
        MemoryStorage::settings(self)
    }
}
