//! [`AsyncRedisStorage`]: the async storage.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use interlock::storage::{
    AsyncStorage, ChangePoll, Epoch, NoticeSink, PollAnswers, PollRequest, ProbeLease, SharedState,
    StorageError, StorageSettings,
};
use interlock::{ConfigError, Outcome};
use redis::Value;
use redis::aio::ConnectionLike;

use crate::changes::{Pending, confirmed};
use crate::error::Error;
use crate::options::{Options, Resolved, knobs};
use crate::scripts::{ChangesReply, Index, confirm_invocation, parse_changes, parse_confirm};
use crate::scripts::{MAX_BATCH, Op, Reply, parse, parse_poll};

/// An [`AsyncStorage`] on Redis or Valkey, for breakers coordinated on a
/// tokio task ([`Coordinator::asynchronous`](interlock::storage::Coordinator::asynchronous)).
///
/// It holds one async connection handle and clones it for every operation,
/// so it takes the cheaply cloneable, multiplexed kinds, which run
/// concurrent operations side by side on one socket:
///
/// - `redis::aio::ConnectionManager`: reconnects by itself after Redis
///   restarts. The usual choice.
/// - `redis::aio::MultiplexedConnection`: stays broken once its socket is
///   gone, so the breakers stay degraded until the process makes a new
///   storage; fine for tests and short-lived tools.
/// - `redis::cluster_async::ClusterConnection`: Redis Cluster.
///
/// Give the connection a response timeout (for example
/// `redis::AsyncConnectionConfig::set_response_timeout`): the inline
/// HALF_OPEN lease is awaited by the call that asked for it.
///
/// Every operation is one Lua script (EVALSHA, loaded on a NOSCRIPT reply)
/// on one hash per breaker; see the [crate docs](crate) for the layout.
///
/// Change notices need a connection of their own in subscriber mode, which
/// a multiplexed handle cannot give: pass the `redis::Client` to
/// [`subscriber`](AsyncRedisStorageBuilder::subscriber) and the
/// coordinator's task subscribes through it. Without one the storage still
/// publishes its writes for other instances, but its own coordinator learns
/// of theirs only by polling.
///
/// ```no_run
/// use interlock::storage::Coordinator;
/// use interlock::CircuitBreaker;
/// use interlock_redis::AsyncRedisStorage;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let storage = AsyncRedisStorage::builder(client.get_connection_manager().await?)
///     .subscriber(client, Duration::from_millis(500))
///     .build()?;
/// let coordinator = Coordinator::asynchronous(storage);
/// let breaker = CircuitBreaker::builder("payments").coordinator(&coordinator).build()?;
/// let answer = breaker.call_async(|| async { Ok::<_, std::io::Error>(42) }).await;
/// # let _ = answer;
/// # Ok(())
/// # }
/// # let _ = run;
/// ```
pub struct AsyncRedisStorage<C> {
    connection: C,
    layout: Resolved,
    /// Set once a batched poll was refused with `CROSSSLOT`: poll per key.
    cross_slot: AtomicBool,
}

impl<C> fmt::Debug for AsyncRedisStorage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisStorage")
            .field("key_prefix", &self.layout.prefix)
            .field("subscribes", &self.layout.has_subscriber())
            .field("settings", &self.layout.settings)
            .finish_non_exhaustive()
    }
}

impl<C> AsyncRedisStorage<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A builder over `connection`, cloned for every operation.
    ///
    /// ```no_run
    /// use interlock_redis::AsyncRedisStorage;
    /// use std::time::Duration;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let config = redis::AsyncConnectionConfig::new()
    ///     .set_connection_timeout(Some(Duration::from_millis(250)))
    ///     .set_response_timeout(Some(Duration::from_millis(250)));
    /// let con = client.get_multiplexed_async_connection_with_config(&config).await?;
    /// let storage = AsyncRedisStorage::builder(con).key_prefix("interlock:{checkout}:").build()?;
    /// # let _ = storage;
    /// # Ok(())
    /// # }
    /// # let _ = run;
    /// ```
    pub fn builder(connection: C) -> AsyncRedisStorageBuilder<C> {
        AsyncRedisStorageBuilder {
            connection,
            options: Options::default(),
        }
    }

    /// The key of `name`'s hash: the prefix, then the name with `%`, `{`,
    /// `}` and control characters percent-encoded (in the
    /// [interlock-cb layout](crate::Layout::InterlockCb), the name
    /// verbatim).
    #[must_use]
    pub fn key(&self, name: &str) -> String {
        self.layout.key(name)
    }

    /// The prefix of every key.
    #[must_use]
    pub fn key_prefix(&self) -> &str {
        &self.layout.prefix
    }

    /// The Redis layout this storage reads and writes.
    #[must_use]
    pub fn layout(&self) -> crate::Layout {
        self.layout.layout
    }

    /// A clone of the connection handle.
    #[must_use]
    pub fn connection(&self) -> C {
        self.connection.clone()
    }

    async fn run(&self, name: &str, op: Op) -> Result<Reply, Error> {
        let mut con = self.connection.clone();
        let value: Value = self
            .layout
            .invocation(op, name)
            .invoke_async(&mut con)
            .await
            .map_err(|e| Error::redis(op.name(), e))?;
        let reply = parse(op.name(), &value)?;
        self.layout.publish_failed(reply.notice_error.as_deref());
        Ok(reply)
    }

    /// A batched poll of at most [`MAX_BATCH`] requests: one script call.
    async fn poll_batch(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, Error> {
        let invocation = self.layout.poll_invocation(requests);
        let mut con = self.connection.clone();
        let value: Value = invocation
            .invoke_async(&mut con)
            .await
            .map_err(|e| Error::redis("poll", e))?;
        let (answers, notice_error) = parse_poll(requests, &value)?;
        self.layout.publish_failed(notice_error.as_deref());
        Ok(answers
            .into_iter()
            .map(|answer| answer.map_err(StorageError::from))
            .collect())
    }

    /// One `changes` script call (issue 29).
    async fn changes_call(
        &self,
        index: &Index,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangesReply, Error> {
        let invocation = self.layout.changes_invocation(index, since, requests);
        let mut con = self.connection.clone();
        let value: Value = invocation
            .invoke_async(&mut con)
            .await
            .map_err(|e| Error::redis("poll", e))?;
        parse_changes(requests, &value)
    }

    /// A poll over the change index, as the blocking storage's.
    async fn poll_indexed(
        &self,
        index: &Index,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, Error> {
        if let Some(since) = since
            && let Some(plan) = self.layout.plan(Some(since), requests)
        {
            let mut con = self.connection.clone();
            let value: Value = confirm_invocation(index, since, &plan)
                .invoke_async(&mut con)
                .await
                .map_err(|e| Error::redis("poll", e))?;
            if let Some(at) = parse_confirm(&value)? {
                return Ok(confirmed(plan, at, requests.len()));
            }
        }
        let mut pending = Pending::new(since, requests);
        let first = pending.first();
        let reply = self.changes_call(index, since, &first).await?;
        let (epoch, rest) = pending.absorb(&self.layout, reply);
        for chunk in rest {
            let requests = pending.chunk(&chunk);
            let reply = self.changes_call(index, None, &requests).await?;
            pending.settle_chunk(&self.layout, &chunk, reply);
        }
        Ok(pending.finish(epoch))
    }

    /// The index a batched poll goes through, if any.
    fn poll_index(&self) -> Option<&Index> {
        self.layout
            .index
            .as_ref()
            .filter(|_| self.layout.settings.batched_polling())
            .filter(|_| !self.cross_slot.load(Ordering::Relaxed))
    }
}

/// Every method is one script call; a future dropped before it completes
/// may or may not have applied its operation on the server.
impl<C> AsyncStorage for AsyncRedisStorage<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(self.run(name, Op::Read).await?.into_read())
    }

    async fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Trip {
            ttl,
            expected: expected_version,
        };
        Ok(self.run(name, op).await?.state)
    }

    async fn begin_half_open_if_elapsed(
        &self,
        name: &str,
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Begin {
            wait,
            permitted,
            ttl,
        };
        Ok(self.run(name, op).await?.state)
    }

    async fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Ok(self.run(name, Op::Lease { ttl }).await?.into_lease())
    }

    async fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self.run(name, Op::Record { outcome, ttl }).await?.state)
    }

    async fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Close {
            ttl,
            expected: expected_version,
        };
        Ok(self.run(name, op).await?.state)
    }

    async fn restart_stalled_round(
        &self,
        name: &str,
        expected_version: u64,
        permitted: u32,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Restart {
            expected: expected_version,
            permitted,
            ttl,
        };
        Ok(self.run(name, op).await?.state)
    }

    async fn restore(
        &self,
        name: &str,
        expected_version: u64,
        state: SharedState,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Restore {
            expected: expected_version,
            state,
            ttl,
        };
        Ok(self.run(name, op).await?.state)
    }

    /// As [`RedisStorage::poll_many`](crate::RedisStorage#method.poll_many):
    /// one script call per 1000 requests when batched polling is on, a
    /// corrupt hash failing only its own answer.
    async fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        if requests.len() < 2
            || !self.layout.settings.batched_polling()
            || self.cross_slot.load(Ordering::Relaxed)
        {
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                answers.push(self.poll_one(request).await);
            }
            return Ok(answers);
        }
        if let Some(index) = self.poll_index() {
            let poll = self.poll_indexed(index, None, requests).await?;
            return Ok(poll
                .answers
                .into_iter()
                .map(|a| a.unwrap_or_else(|| Ok(SharedState::closed())))
                .collect());
        }
        let mut answers = Vec::with_capacity(requests.len());
        for chunk in requests.chunks(MAX_BATCH) {
            match self.poll_batch(chunk).await {
                Ok(batch) => answers.extend(batch),
                Err(e) if e.is_cross_slot() => {
                    self.cross_slot.store(true, Ordering::Relaxed);
                    for request in chunk {
                        answers.push(self.poll_one(request).await);
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(answers)
    }

    /// As [`RedisStorage::poll_changes`](crate::RedisStorage#method.poll_changes):
    /// one `changes` script call over the change index, reading only what
    /// changed since `since`.
    async fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        match self.poll_index() {
            Some(index) if !requests.is_empty() => {
                Ok(self.poll_indexed(index, since, requests).await?)
            }
            _ => Ok(ChangePoll::full(self.poll_many(requests).await?, None)),
        }
    }

    /// Spawns a tokio task on the current runtime that holds one
    /// subscription, on its own connection from the
    /// [`subscriber`](AsyncRedisStorageBuilder::subscriber) client, and
    /// returns `true`; `false` when notifications are off, when the
    /// storage has no subscriber client, or outside a tokio runtime.
    ///
    /// The task behaves as the blocking storage's thread does (see
    /// [`RedisStorage::subscribe`](crate::RedisStorage#method.subscribe)):
    /// a resync on every (re)subscription, a notice per applied write,
    /// the storage's retry delay between attempts, and an end within a
    /// quarter of a second once the coordinator is gone.
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.layout.keep_sink(&sink);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let Some(listener) = self.layout.listener(sink) else {
            return false;
        };
        drop(runtime.spawn(listener.run_async()));
        true
    }

    fn settings(&self) -> StorageSettings {
        self.layout.settings.clone()
    }
}

/// Builds an [`AsyncRedisStorage`]: the key prefix and the knobs (R16.12),
/// all checked in [`build`](Self::build).
#[must_use]
pub struct AsyncRedisStorageBuilder<C> {
    connection: C,
    options: Options,
}

impl<C> fmt::Debug for AsyncRedisStorageBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRedisStorageBuilder")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<C> AsyncRedisStorageBuilder<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    knobs!();

    /// The storage. Nothing is sent to Redis yet: the scripts are loaded on
    /// first use.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid knob (`key_prefix`,
    /// `state_ttl`, `poll_interval`, ...).
    pub fn build(self) -> Result<AsyncRedisStorage<C>, ConfigError> {
        Ok(AsyncRedisStorage {
            connection: self.connection,
            layout: self.options.build()?,
            cross_slot: AtomicBool::new(false),
        })
    }
}
