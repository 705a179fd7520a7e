//! [`RedisStorage`]: the blocking storage.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use interlock::storage::{
    ChangePoll, Epoch, NoticeSink, PollAnswers, PollRequest, ProbeLease, SharedState, Storage,
    StorageError, StorageSettings,
};
use interlock::{ConfigError, Outcome};
use redis::{ConnectionLike, RedisError, RedisResult, ScriptInvocation, Value};

use crate::changes::{Pending, confirmed};
use crate::error::Error;
use crate::options::{Options, Resolved, knobs};
use crate::scripts::{
    ChangesReply, Index, MAX_BATCH, Op, Reply, confirm_invocation, parse, parse_changes,
    parse_confirm, parse_poll,
};

/// How many idle connections a connecting storage keeps for reuse.
const MAX_IDLE: usize = 8;

type Connector<C> = Box<dyn Fn() -> RedisResult<C> + Send + Sync>;

/// Where a blocking storage gets its connections.
enum Source<C> {
    /// One connection, used by one operation at a time.
    Fixed(Mutex<C>),
    /// Connections made on demand and reused; a broken one is dropped and
    /// the next operation connects afresh.
    Connecting {
        connect: Connector<C>,
        idle: Mutex<Vec<C>>,
    },
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic cannot leave a connection half-used behind the lock: the
    // client finishes or fails each request before returning.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether a connection that returned `error` should be thrown away.
fn is_broken(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
}

/// A blocking [`Storage`] on Redis or Valkey, for breakers coordinated on a
/// background thread ([`Coordinator::blocking`](interlock::storage::Coordinator::blocking)).
///
/// Every operation is one Lua script (EVALSHA, loaded on a NOSCRIPT reply)
/// on one hash per breaker; see the [crate docs](crate) for the layout.
///
/// # Connections
///
/// [`Storage`] methods take `&self` and may run on several threads at once
/// (the coordinator's lane, and calls leasing HALF_OPEN probes), so the
/// storage owns its connections:
///
/// - [`RedisStorage::from_client`] and [`RedisStorage::builder_with`]
///   connect on demand and keep up to 8 idle connections for reuse.
///   Concurrent operations each use their own connection, so none waits
///   behind another one's timeout, and a connection that failed with an I/O
///   error or timeout is dropped: the next operation reconnects, which is
///   how the storage recovers after Redis restarts.
/// - [`RedisStorage::builder`] takes one connection of any
///   [`redis::ConnectionLike`] type (a `redis::Connection`, a
///   `redis::cluster::ClusterConnection`, a pooled connection, or even a
///   `redis::Client`, which connects once per command) behind a mutex:
///   operations take turns on it, and it is never replaced. A plain
///   `redis::Connection` given this way stays broken after Redis restarts;
///   prefer the connecting constructors for it.
///
/// Set connect and response timeouts on the connections: an operation
/// blocks for as long as the client lets it, and the inline HALF_OPEN lease
/// runs on the caller's thread.
///
/// Change notices take one more connection per coordinator, in subscriber
/// mode, on a thread of its own, from the
/// [`subscriber`](RedisStorageBuilder::subscriber) client:
/// [`from_client`](RedisStorage::from_client) sets it to its own client;
/// with [`builder`](RedisStorage::builder) and
/// [`builder_with`](RedisStorage::builder_with) set it yourself, or the
/// storage only publishes and its coordinator relies on polling.
///
/// ```no_run
/// use interlock::storage::Coordinator;
/// use interlock::CircuitBreaker;
/// use interlock_redis::RedisStorage;
/// use std::time::Duration;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let storage = RedisStorage::from_client(client, Duration::from_millis(250))
///     .poll_interval(Duration::from_millis(500))
///     .build()?;
/// let coordinator = Coordinator::blocking(storage);
/// let breaker = CircuitBreaker::builder("payments").coordinator(&coordinator).build()?;
/// let answer = breaker.call(|| Ok::<_, std::io::Error>(42));
/// # let _ = answer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisStorage<C> {
    source: Source<C>,
    layout: Resolved,
    /// Set once a batched poll was refused with `CROSSSLOT`: poll per key.
    cross_slot: AtomicBool,
}

impl<C> fmt::Debug for RedisStorage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let connections = match &self.source {
            Source::Fixed(_) => "one, shared",
            Source::Connecting { .. } => "connecting on demand",
        };
        f.debug_struct("RedisStorage")
            .field("key_prefix", &self.layout.prefix)
            .field("connections", &connections)
            .field("subscribes", &self.layout.has_subscriber())
            .field("settings", &self.layout.settings)
            .finish_non_exhaustive()
    }
}

impl RedisStorage<redis::Connection> {
    /// A builder that connects through `client` on demand, with `timeout`
    /// as the connect timeout and the read and write timeouts of every
    /// connection (so no operation blocks for much longer). Its notice
    /// subscriptions connect through `client` too (see
    /// [`subscriber`](RedisStorageBuilder::subscriber)).
    ///
    /// ```no_run
    /// use interlock_redis::RedisStorage;
    /// use std::time::Duration;
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let storage = RedisStorage::from_client(client, Duration::from_millis(250)).build()?;
    /// # let _ = storage;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_client(
        client: redis::Client,
        timeout: Duration,
    ) -> RedisStorageBuilder<redis::Connection> {
        let subscriber = client.clone();
        RedisStorage::builder_with(move || {
            let con = client.get_connection_with_timeout(timeout)?;
            con.set_read_timeout(Some(timeout))?;
            con.set_write_timeout(Some(timeout))?;
            Ok(con)
        })
        .subscriber(subscriber, timeout)
    }
}

impl<C: ConnectionLike + Send + 'static> RedisStorage<C> {
    /// A builder over one connection, shared by all operations in turn and
    /// never replaced (see [Connections](Self#connections)).
    ///
    /// ```no_run
    /// use interlock_redis::RedisStorage;
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let storage = RedisStorage::builder(client.get_connection()?)
    ///     .key_prefix("interlock:{checkout}:")
    ///     .build()?;
    /// # let _ = storage;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(connection: C) -> RedisStorageBuilder<C> {
        RedisStorageBuilder {
            source: Source::Fixed(Mutex::new(connection)),
            options: Options::default(),
        }
    }

    /// A builder that makes connections with `connect` when it needs one
    /// (lazily: building does not connect) and drops any that failed with
    /// an I/O error or timeout (see [Connections](Self#connections)).
    ///
    /// ```no_run
    /// use interlock_redis::RedisStorage;
    /// use std::time::Duration;
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let storage = RedisStorage::builder_with(move || {
    ///     let con = client.get_connection_with_timeout(Duration::from_millis(100))?;
    ///     con.set_read_timeout(Some(Duration::from_millis(200)))?;
    ///     Ok(con)
    /// })
    /// .build()?;
    /// # let _ = storage;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder_with<F>(connect: F) -> RedisStorageBuilder<C>
    where
        F: Fn() -> RedisResult<C> + Send + Sync + 'static,
    {
        RedisStorageBuilder {
            source: Source::Connecting {
                connect: Box::new(connect),
                idle: Mutex::new(Vec::new()),
            },
            options: Options::default(),
        }
    }

    /// The key of `name`'s hash: the prefix, then the name with `%`, `{`,
    /// `}` and control characters percent-encoded (in the
    /// [interlock-cb layout](crate::Layout::InterlockCb), the name
    /// verbatim).
    ///
    /// ```
    /// use interlock_redis::RedisStorage;
    ///
    /// // A `Client` connects per command, and nothing is sent here.
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let storage = RedisStorage::builder(client).build()?;
    /// assert_eq!(storage.key("payments"), "interlock:{cb}:payments");
    /// assert_eq!(storage.key("a{b}"), "interlock:{cb}:a%7Bb%7D");
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let python = RedisStorage::builder(client).layout(interlock_redis::Layout::InterlockCb).build()?;
    /// assert_eq!(python.key("a{b}"), "interlock:cb:a{b}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

    fn run(&self, name: &str, op: Op) -> Result<Reply, Error> {
        let invocation = self.layout.invocation(op, name);
        let value = self.invoke(op.name(), &invocation)?;
        let reply = parse(op.name(), &value)?;
        self.layout.publish_failed(reply.notice_error.as_deref());
        Ok(reply)
    }

    /// One script call on a connection of this storage.
    fn invoke(
        &self,
        operation: &'static str,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<Value, Error> {
        match &self.source {
            Source::Fixed(con) => invocation.invoke(&mut *lock(con)),
            Source::Connecting { connect, idle } => {
                let pooled = lock(idle).pop();
                let mut con = match pooled {
                    Some(con) => con,
                    None => connect().map_err(|e| Error::redis(operation, e))?,
                };
                let result = invocation.invoke(&mut con);
                let broken = result.as_ref().err().is_some_and(is_broken);
                if !broken && con.is_open() {
                    let mut idle = lock(idle);
                    if idle.len() < MAX_IDLE {
                        idle.push(con);
                    }
                }
                result
            }
        }
        .map_err(|e| Error::redis(operation, e))
    }

    /// A batched poll of at most [`MAX_BATCH`] requests: one script call.
    fn poll_batch(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, Error> {
        let invocation = self.layout.poll_invocation(requests);
        let value = self.invoke("poll", &invocation)?;
        let (answers, notice_error) = parse_poll(requests, &value)?;
        self.layout.publish_failed(notice_error.as_deref());
        Ok(answers
            .into_iter()
            .map(|answer| answer.map_err(StorageError::from))
            .collect())
    }

    /// One `changes` script call (issue 29).
    fn changes_call(
        &self,
        index: &Index,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangesReply, Error> {
        let invocation = self.layout.changes_invocation(index, since, requests);
        let value = self.invoke("poll", &invocation)?;
        parse_changes(requests, &value)
    }

    /// A poll over the change index: one `confirm` call when the change
    /// notices brought every write since `since` and the poll asks nothing
    /// else (see `trail.rs`); otherwise (or when the server does not
    /// confirm) one `changes` call, then one per thousand requests it left
    /// unanswered.
    fn poll_indexed(
        &self,
        index: &Index,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, Error> {
        if let Some(since) = since
            && let Some(plan) = self.layout.plan(Some(since), requests)
        {
            let value = self.invoke("poll", &confirm_invocation(index, since, &plan))?;
            if let Some(at) = parse_confirm(&value)? {
                return Ok(confirmed(plan, at, requests.len()));
            }
        }
        let mut pending = Pending::new(since, requests);
        let reply = self.changes_call(index, since, &pending.first())?;
        let (epoch, rest) = pending.absorb(&self.layout, reply);
        for chunk in rest {
            let reply = self.changes_call(index, None, &pending.chunk(&chunk))?;
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

impl<C: ConnectionLike + Send + 'static> Storage for RedisStorage<C> {
    fn read(&self, name: &str) -> Result<Option<SharedState>, StorageError> {
        Ok(self.run(name, Op::Read)?.into_read())
    }

    fn trip_open(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Trip {
            ttl,
            expected: expected_version,
        };
        Ok(self.run(name, op)?.state)
    }

    fn begin_half_open_if_elapsed(
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
        Ok(self.run(name, op)?.state)
    }

    fn lease_probe(&self, name: &str, ttl: Duration) -> Result<ProbeLease, StorageError> {
        Ok(self.run(name, Op::Lease { ttl })?.into_lease())
    }

    fn record_probe(
        &self,
        name: &str,
        outcome: Outcome,
        ttl: Duration,
    ) -> Result<SharedState, StorageError> {
        Ok(self.run(name, Op::Record { outcome, ttl })?.state)
    }

    fn close(
        &self,
        name: &str,
        ttl: Duration,
        expected_version: Option<u64>,
    ) -> Result<SharedState, StorageError> {
        let op = Op::Close {
            ttl,
            expected: expected_version,
        };
        Ok(self.run(name, op)?.state)
    }

    fn restart_stalled_round(
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
        Ok(self.run(name, op)?.state)
    }

    fn restore(
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
        Ok(self.run(name, op)?.state)
    }

    /// One script call per 1000 requests when batched
    /// polling is on, answering each breaker as [`read`](Storage::read) or
    /// [`begin_half_open_if_elapsed`](Storage::begin_half_open_if_elapsed)
    /// would (a corrupt or foreign hash fails its own answer only); one
    /// call per request when it is off, or after Redis Cluster refused a
    /// batch over an untagged prefix with `CROSSSLOT`.
    fn poll_many(&self, requests: &[PollRequest<'_>]) -> Result<PollAnswers, StorageError> {
        if requests.len() < 2
            || !self.layout.settings.batched_polling()
            || self.cross_slot.load(Ordering::Relaxed)
        {
            return Ok(requests.iter().map(|r| self.poll_one(r)).collect());
        }
        if let Some(index) = self.poll_index() {
            // Through the index script, so the begins it applies are noted.
            let poll = self.poll_indexed(index, None, requests)?;
            return Ok(poll
                .answers
                .into_iter()
                .map(|a| a.unwrap_or_else(|| Ok(SharedState::closed())))
                .collect());
        }
        let mut answers = Vec::with_capacity(requests.len());
        for chunk in requests.chunks(MAX_BATCH) {
            match self.poll_batch(chunk) {
                Ok(batch) => answers.extend(batch),
                Err(e) if e.is_cross_slot() => {
                    self.cross_slot.store(true, Ordering::Relaxed);
                    answers.extend(chunk.iter().map(|r| self.poll_one(r)));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(answers)
    }

    /// With the change index (the default, see
    /// [`change_index`](RedisStorageBuilder::change_index)) and batched
    /// polling: one `changes` script call that reads the index (a few
    /// sorted-set lookups when nothing changed), answers every read and
    /// begin, and reads only the records written or expired since `since`;
    /// a full read (one more call per thousand breakers) when `since` is
    /// absent or unknown to the index. Without the index: every request,
    /// as [`poll_many`](Storage::poll_many), and no epoch.
    fn poll_changes(
        &self,
        since: Option<Epoch>,
        requests: &[PollRequest<'_>],
    ) -> Result<ChangePoll, StorageError> {
        match self.poll_index() {
            Some(index) if !requests.is_empty() => Ok(self.poll_indexed(index, since, requests)?),
            _ => Ok(ChangePoll::full(self.poll_many(requests)?, None)),
        }
    }

    /// Starts a thread that holds one subscription, on its own connection
    /// from the [`subscriber`](RedisStorageBuilder::subscriber) client,
    /// and returns `true`; `false` when notifications are off, when the
    /// storage has no subscriber client (built with
    /// [`builder`](RedisStorage::builder) or
    /// [`builder_with`](RedisStorage::builder_with) without one), or when
    /// the thread cannot be started.
    ///
    /// The thread delivers [`Notice::Resync`](interlock::storage::Notice::Resync)
    /// each time it has subscribed, a
    /// [`Notice::Changed`](interlock::storage::Notice::Changed) for every
    /// applied write of any instance on the same prefix, and when the
    /// connection drops it waits the storage's retry delay
    /// (`retry_backoff`, growing per failed attempt) before subscribing
    /// again. It ends within a quarter of a second once the coordinator is
    /// gone.
    fn subscribe(&self, sink: NoticeSink) -> bool {
        self.layout.keep_sink(&sink);
        let Some(listener) = self.layout.listener(sink) else {
            return false;
        };
        std::thread::Builder::new()
            .name("interlock-redis-notices".to_owned())
            .spawn(move || listener.run_blocking())
            .is_ok()
    }

    fn settings(&self) -> StorageSettings {
        self.layout.settings.clone()
    }
}

/// Builds a [`RedisStorage`]: the key prefix and the knobs (R16.12), all
/// checked in [`build`](Self::build).
#[must_use]
pub struct RedisStorageBuilder<C> {
    source: Source<C>,
    options: Options,
}

impl<C> fmt::Debug for RedisStorageBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStorageBuilder")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<C: ConnectionLike + Send + 'static> RedisStorageBuilder<C> {
    knobs!();

    /// The storage. Nothing is sent to Redis yet: the scripts are loaded on
    /// first use.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid knob (`key_prefix`,
    /// `state_ttl`, `poll_interval`, ...).
    ///
    /// ```
    /// use interlock_redis::RedisStorage;
    /// use std::time::Duration;
    ///
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let err = RedisStorage::builder(client).poll_interval(Duration::ZERO).build().unwrap_err();
    /// assert_eq!(err.field(), "poll_interval");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<RedisStorage<C>, ConfigError> {
        Ok(RedisStorage {
            source: self.source,
            layout: self.options.build()?,
            cross_slot: AtomicBool::new(false),
        })
    }
}
