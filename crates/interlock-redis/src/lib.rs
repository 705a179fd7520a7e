//! Redis and Valkey shared state for [`interlock`] circuit breakers: when
//! one instance of a service trips, every instance backs off, and recovery
//! probes are budgeted across the fleet.
//!
//! [`RedisStorage`] (blocking) and [`AsyncRedisStorage`] implement
//! interlock's [`Storage`](interlock::storage::Storage) and
//! [`AsyncStorage`](interlock::storage::AsyncStorage). Hand one to a
//! [`Coordinator`](interlock::storage::Coordinator) and build breakers with
//! it: CLOSED and OPEN calls read a cached view (no Redis command), a
//! background lane polls every `poll_interval` (one script call for all its
//! breakers) and writes trips and probe outcomes, every applied write is
//! pushed to the other instances at once through Redis pub/sub, and a
//! HALF_OPEN admission is the only inline command (an atomic lease on the
//! shared probe budget).
//!
//! ```no_run
//! use interlock::storage::Coordinator;
//! use interlock::{CallError, CircuitBreaker};
//! use interlock_redis::RedisStorage;
//! use std::time::Duration;
//!
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let storage = RedisStorage::from_client(client, Duration::from_millis(250))
//!     .poll_interval(Duration::from_millis(500))
//!     .build()?;
//! let coordinator = Coordinator::blocking(storage);
//! let breaker = CircuitBreaker::builder("payments").coordinator(&coordinator).build()?;
//!
//! match breaker.call(|| Ok::<_, std::io::Error>("charged")) {
//!     Ok(receipt) => println!("{receipt}"),
//!     Err(CallError::Rejected(open)) => println!("payments are down fleet-wide: {open}"),
//!     Err(e) => println!("the call failed: {e}"),
//! }
//! breaker.close(); // drains queued writes and stops the lane
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Key layout
//!
//! One hash per breaker at `key_prefix + encoded name`, by default
//! `interlock:{cb}:payments`. Its fields, all written as decimal strings:
//!
//! | field | meaning |
//! |---|---|
//! | `state` | `closed`, `open` or `half_open` |
//! | `opened_at` | start of the shared OPEN, integer microseconds since the Unix epoch on the server's `TIME` |
//! | `version` | bumped by every applied change; fences stale writes |
//! | `probes_permitted`, `probes_remaining`, `probes_completed`, `probe_failures`, `probe_slows` | the HALF_OPEN round's budget and tally |
//! | `v` | schema marker, `1` |
//!
//! Every applied write rewrites the fields and refreshes the key's expiry
//! with `PEXPIRE` (`state_ttl` rounded up to whole milliseconds); an
//! idempotent `trip_open` while OPEN refreshes the expiry too. Fenced-out
//! writes, denied leases, dropped probe records and a
//! `begin_half_open_if_elapsed` whose wait has not elapsed write nothing.
//! An expired key reads as CLOSED at version 0.
//!
//! **Names.** A breaker's name goes into its key percent-encoded: `%`,
//! `{`, `}` and control characters (ASCII and Unicode) become `%XX` per
//! UTF-8 byte; everything else, other non-ASCII text included, is kept. The
//! encoding is reversible, so two names never share a key, and a name can
//! neither leave its prefix nor open or close a hash tag, so it cannot move
//! its key to another cluster slot. Ordinary names (letters, digits, `.`,
//! `-`, `_`, `:`, `/`, spaces) appear verbatim. Two storages whose prefixes
//! nest (`a:` and `a:b:`) can still see each other's keys: keep prefixes
//! distinct.
//!
//! **Hash tag.** The default prefix carries the hash tag `{cb}`, so all
//! breakers of a storage live in one Redis Cluster slot (and so on one
//! node), and one script can poll them all. Only the part in braces picks
//! the slot: `checkout:{cb}:` and `search:{cb}:` share the slot of `{cb}`.
//! Give each service its own tag, such as `interlock:{checkout}:` and
//! `interlock:{search}:`, so their breakers spread over the cluster one
//! slot per service, or a prefix without braces to spread every breaker:
//! every other script touches only its one key, and a batched poll that
//! Redis Cluster refuses for spanning slots (`CROSSSLOT`) is answered per
//! breaker instead, so both work. `key_prefix` is rejected when its `{`
//! does not open a closed, non-empty tag.
//!
//! **Scripts.** Each operation is one Lua script run with `EVALSHA` (the
//! client loads it on a `NOSCRIPT` reply, on every primary of a cluster).
//! Elapsed checks use the server's `TIME`, never the caller's clock. Each
//! script replies with the same ten values in the same order: an
//! operation code (applied, granted, or key present), then `state`,
//! `opened_at`, `version`, the five probe counters, and why the change
//! notice could not be published (empty when it was). A ninth script
//! answers a whole poll: a read or a `begin_half_open_if_elapsed` per key,
//! each answered as the single operation would, with a key the scripts
//! refuse failing only its own answer.
//!
//! **Notices.** Every script that applies a change also publishes
//! `<version> <key>` (for example `7 interlock:{cb}:payments`) on the
//! channel `key_prefix + "notices"`, then a newline and the record the write
//! left (`open 1700000000000000 0 0 0 0 0`: state, `opened_at` and the five
//! probe counters), inside the same script, so a notice is sent exactly
//! when a change is applied and a subscribed coordinator adopts the record
//! without reading it back. Fenced-out writes, denied leases, idempotent
//! trips and reads publish nothing. The publish is best-effort: a refused
//! `PUBLISH` (an ACL user without rights on the channel) never fails the
//! write it belongs to; the storage says once that notices are unavailable
//! ([`Event::StorageNoticesUnavailable`](interlock::Event::StorageNoticesUnavailable)
//! and a log line) and the fleet goes on by polling. A refused `SUBSCRIBE`
//! is said the same way, and retried a minute later at the earliest.
//!
//! **Data written by someone else.** The scripts refuse a hash with a
//! missing field, a value that is not a decimal integer or is out of range
//! (`version` up to 2^50, `opened_at` up to 2^53 − 1, probe counters up to
//! `u32::MAX`), an unknown `state` or an unknown schema marker `v`; Redis
//! refuses a key of another type (`WRONGTYPE`). Either way the operation
//! returns an [`Error`] (see [`Error::is_corrupt`] and
//! [`Error::server_code`]), writes nothing, and the breaker degrades to its
//! local state; nothing panics. Unknown extra fields are ignored. An
//! `opened_at` ahead of the server's clock is clamped to it by the next
//! `begin_half_open_if_elapsed`, so such an OPEN ends a wait later.
//!
//! # Compatibility
//!
//! The scripts use only `HMGET`, `HSET`, `EXISTS`, `PEXPIRE`, `TIME` and
//! `PUBLISH` through `EVAL`/`EVALSHA`, and the subscriptions `SUBSCRIBE`
//! and `PING` (RESP2 subscriber connections), so any RESP server that runs
//! Lua works. Under ACLs the storage needs its keys (`~<key_prefix>*`) and
//! `EVAL`, `EVALSHA`, `SCRIPT` and the commands above; without rights on
//! the channel `<key_prefix>notices` (`&<key_prefix>notices`) writes still
//! apply and the fleet propagates by polling, or turn notifications off:
//!
//! - **Redis 5.0 or newer.** The scripts call `TIME` before writing, which
//!   needs script effects replication, the default since 5.0.
//! - **Valkey**, any release.
//! - **Redis Cluster** (and Valkey cluster): each script touches one key,
//!   or, for a batched poll, the keys of one hash tag, routed by the client
//!   to their slot. Use `redis::cluster::ClusterConnection` with
//!   [`RedisStorage`] or `redis::cluster_async::ClusterConnection` with
//!   [`AsyncRedisStorage`], and a `redis::Client` for any one node as the
//!   subscriber: notices are classic pub/sub, which reaches every node.
//!
//! # Sharing breakers with the Python original
//!
//! [`Layout::InterlockCb`] (`.layout(Layout::InterlockCb)` on either
//! builder) reads and writes the layout of interlock-cb 2.8 instead:
//! prefix `interlock:cb:`, names verbatim in the keys, the same fields,
//! the original's changes per operation, its fencing and its expiry
//! (`state_ttl` rounded down to milliseconds; refreshed also by a begin
//! whose wait has not elapsed and by a denied lease), and no change
//! notices. Rust and Python instances of one service on it behave as one
//! fleet; the tests run them against the original itself. See [`Layout`]
//! for the differences in one table.
//!
//! ```no_run
//! use interlock_redis::{Layout, RedisStorage};
//! use std::time::Duration;
//!
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let storage = RedisStorage::from_client(client, Duration::from_millis(250))
//!     .layout(Layout::InterlockCb)
//!     .build()?;
//! assert_eq!(storage.key("payments"), "interlock:cb:payments");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Push and batched polling
//!
//! Both are on by default, and both storages behave the same:
//!
//! - **Push.** A coordinator subscribes once to the channel of its storage
//!   ([`Storage::subscribe`](interlock::storage::Storage::subscribe)): a
//!   thread with its own connection for [`RedisStorage`], a tokio task for
//!   [`AsyncRedisStorage`]. On a notice it re-reads that breaker at once, so
//!   a trip reaches the fleet in about a round trip rather than at the next
//!   poll. Pub/sub is at-most-once: polling stays on and reconciles any
//!   notice lost; a dropped subscription is retried after the storage's
//!   `retry_backoff` (growing as configured), and every (re)subscription
//!   makes the coordinator poll all its breakers. [`RedisStorage::from_client`]
//!   subscribes through its client; the other constructors and
//!   [`AsyncRedisStorage`] need a
//!   [`subscriber`](RedisStorageBuilder::subscriber) client, or they only
//!   publish. `notifications(false)` turns both publishing and subscribing
//!   off.
//! - **Batched polling.** One poll of a coordinator is one script call
//!   (per thousand breakers) instead of one per breaker;
//!   `batched_polling(false)` goes back to one call per breaker.
//! - **Change index** (issue 29). Every write script also bumps the
//!   storage's epoch and logs its key and the version it wrote, so a poll
//!   reads only the breakers written or expired since the coordinator's
//!   previous poll, and not even those whose change a notice already
//!   brought (the script vouches for the version instead): an idle poll
//!   reads no hash at all, whatever the number of breakers, and a full read
//!   happens only on a first poll, on a cursor the index cannot answer (a
//!   lost or restored history, over 1,000 changes) and every
//!   [`full_poll_interval`](RedisStorageBuilder::full_poll_interval).
//!   See [`change_index`](RedisStorageBuilder::change_index). Its two keys
//!   (`<key_prefix>%changes`, `<key_prefix>%expiry`) are sorted sets: an
//!   ACL allow-list of commands needs the sorted-set commands the scripts
//!   run (`ZADD`, `ZRANGE`, `ZRANGEBYSCORE`, `ZREMRANGEBYRANK`,
//!   `ZREMRANGEBYSCORE`) and `PTTL`.
//! - **Spreading over a cluster.** All breakers under one prefix share its
//!   hash tag, so one node serves them (and one script polls them). Give
//!   each service its own tag, or split one service's breakers over
//!   several storages with [`partition`] (see its example): each partition
//!   is one more script per poll, on whichever node owns its slot.
//!
//! ```no_run
//! use interlock_redis::AsyncRedisStorage;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let storage = AsyncRedisStorage::builder(client.get_connection_manager().await?)
//!     .subscriber(client, Duration::from_millis(500)) // push for the async storage
//!     .build()?;
//! # let _ = storage;
//! # Ok(())
//! # }
//! # let _ = run;
//! ```
//!
//! # Degradation
//!
//! A storage error never reaches a call: the breaker switches to its local
//! state and reports
//! [`Event::StorageDegraded`](interlock::Event::StorageDegraded), the
//! coordinator leaves Redis alone for `retry_backoff`, and the first
//! successful operation after that reports
//! [`Event::StorageRecovered`](interlock::Event::StorageRecovered) and
//! adopts the shared state, including an OPEN written meanwhile.
//!
//! # Features
//!
//! | feature | default | enables |
//! |---|---|---|
//! | `tokio` | yes | [`AsyncRedisStorage`] (through `redis/tokio-comp`), and interlock's `tokio` feature for its async coordinator |
//!
//! # Minimum supported Rust version
//!
//! 1.88, the `redis` crate's; raised only in a minor release.
// Without `tokio` the crate docs still mention `AsyncRedisStorage`.
#![cfg_attr(not(feature = "tokio"), allow(rustdoc::broken_intra_doc_links))]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]

mod blocking;
mod changes;
mod error;
pub mod inspect;
mod interlock_cb;
mod key;
mod layout;
mod lua;
#[cfg(feature = "tokio")]
mod nonblocking;
mod notices;
mod options;
mod scripts;
mod trail;

pub use blocking::{RedisStorage, RedisStorageBuilder};
pub use error::Error;
pub use layout::{Layout, UnknownLayout};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use nonblocking::{AsyncRedisStorage, AsyncRedisStorageBuilder};

/// Which of `partitions` storages a breaker belongs to, when one
/// service's breakers are split over several prefixes (each with its own
/// hash tag, so on Redis Cluster each partition may live on another node):
/// a stable hash of the name (FNV-1a, the same in every process and
/// release), modulo `partitions` (0 when it is 0).
///
/// Every instance must use the same partition count and the same prefixes,
/// or two instances would look for a breaker in different storages. Each
/// partition is one coordinator and one poll script per `poll_interval`
/// per instance: with the change index an idle one costs a few sorted-set
/// lookups, so a handful of partitions spread a large fleet's load for
/// little; one storage stays the cheapest in commands.
///
/// ```
/// use interlock::storage::Coordinator;
/// use interlock::CircuitBreaker;
/// use interlock_redis::{partition, RedisStorage};
/// use std::time::Duration;
///
/// let client = redis::Client::open("redis://127.0.0.1/")?;
/// let lanes: Vec<_> = (0..4)
///     .map(|p| {
///         let storage = RedisStorage::from_client(client.clone(), Duration::from_millis(250))
///             .key_prefix(format!("interlock:{{checkout-{p}}}:"))
///             .build()?;
///         Ok(Coordinator::blocking(storage))
///     })
///     .collect::<Result<_, interlock::ConfigError>>()?;
/// let host = "api.example.com";
/// let lane = &lanes[partition(host, lanes.len())];
/// let breaker = CircuitBreaker::builder(host).coordinator(lane).build()?;
/// assert_eq!(partition(host, 4), partition(host, 4)); // stable
/// assert!(partition(host, 4) < 4);
/// # let _ = breaker;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub fn partition(name: &str, partitions: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    match u64::try_from(partitions) {
        Ok(0) | Err(_) => 0,
        Ok(n) => usize::try_from(hash % n).unwrap_or(0),
    }
}

/// The SHA1 digests of the eleven scripts (read, trip_open,
/// begin_half_open_if_elapsed, lease_probe, record_probe, close,
/// restart_stalled_round, restore, the batched poll, and the change poll
/// of issue 29 and its short form, `confirm`), as sent with
/// `EVALSHA`: for `SCRIPT EXISTS` checks, or for ACL and proxy allow-lists
/// in a locked-down deployment.
///
/// ```
/// let digests = interlock_redis::script_digests();
/// assert!(digests.iter().all(|d| d.len() == 40));
/// ```
#[must_use]
pub fn script_digests() -> [&'static str; 11] {
    scripts::digests()
}
