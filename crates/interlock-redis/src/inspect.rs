//! Looking at a storage's keys from outside any breaker, for operator tools
//! (the `interlock` command line, dashboards): which breakers have shared
//! state under a prefix, what their keys decode to, when each key expires,
//! and the server's clock, on which `opened_at` is measured.
//!
//! Reading and writing a breaker's state stays with the
//! [`Storage`](interlock::storage::Storage) operations of
//! [`RedisStorage`](crate::RedisStorage), so every rule of the contract
//! (strict parsing, fencing, TTLs) holds for tools too. These functions
//! only send `SCAN`, `PTTL`, `TYPE` and `TIME`, and write nothing.
//!
//! ```no_run
//! use interlock::storage::Storage;
//! use interlock_redis::{inspect, RedisStorage};
//! use std::time::Duration;
//!
//! let client = redis::Client::open("redis://127.0.0.1/")?;
//! let storage = RedisStorage::from_client(client.clone(), Duration::from_secs(2)).build()?;
//! let mut con = client.get_connection()?;
//! for name in inspect::breaker_names(&mut con, storage.key_prefix())? {
//!     println!("{name}: {:?}", storage.read(&name)?);
//! }
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! Against Redis Cluster, `SCAN` sees one node only: pass a connection to
//! the node that owns the prefix's hash tag (with the default prefix, all
//! breakers of a storage live in one slot).

use std::time::Duration;

use interlock::Timestamp;
use redis::{ConnectionLike, Value};

use crate::Layout;
use crate::error::Error;
use crate::key::{self, DEFAULT_PREFIX};

/// The default key prefix of both storages, `interlock:{cb}:`.
pub const DEFAULT_KEY_PREFIX: &str = DEFAULT_PREFIX;

/// Keys asked for per `SCAN` step (a hint to the server, not a limit).
const SCAN_COUNT: usize = 1000;

/// The key of `name`'s hash under `prefix`: the same key the storages use
/// (`RedisStorage::key` for a built storage).
///
/// ```
/// use interlock_redis::inspect::{breaker_key, DEFAULT_KEY_PREFIX};
///
/// assert_eq!(breaker_key(DEFAULT_KEY_PREFIX, "a{b}"), "interlock:{cb}:a%7Bb%7D");
/// ```
#[must_use]
pub fn breaker_key(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len());
    out.push_str(prefix);
    key::encode_name_into(&mut out, name);
    out
}

pub use crate::key::decode_canonical_name as decode_name;

/// `prefix` as a `SCAN MATCH` pattern that matches it literally, followed
/// by `*`.
fn match_pattern(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

/// The names of all breakers with a key under `prefix`, sorted and without
/// duplicates, found with `SCAN` (which does not block the server; a key
/// written or expiring meanwhile may or may not be listed).
///
/// Keys under the prefix whose rest does not [decode](decode_name) are
/// skipped: the storages cannot have written them. A key that decodes but
/// holds foreign data is listed; reading it returns the storage's error.
/// This is [`breaker_names_in`] for interlock's own layout.
///
/// # Errors
///
/// An [`Error`] with operation `scan` when Redis cannot be reached or
/// refuses the command.
pub fn breaker_names<C: ConnectionLike>(con: &mut C, prefix: &str) -> Result<Vec<String>, Error> {
    breaker_names_in(con, prefix, Layout::Interlock)
}

/// The names of all breakers with a key under `prefix` in `layout`, as
/// [`breaker_names`] finds them: for [`Layout::InterlockCb`] every key
/// under the prefix whose rest is UTF-8 is a name, as the original forms
/// keys from names verbatim.
///
/// # Errors
///
/// An [`Error`] with operation `scan` when Redis cannot be reached or
/// refuses the command.
pub fn breaker_names_in<C: ConnectionLike>(
    con: &mut C,
    prefix: &str,
    layout: Layout,
) -> Result<Vec<String>, Error> {
    let pattern = match_pattern(prefix);
    let mut names = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query(con)
            .map_err(|e| Error::redis("scan", e))?;
        for key in keys {
            let name = key
                .strip_prefix(prefix.as_bytes())
                .and_then(|rest| layout.name_of(rest));
            names.extend(name);
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// When a key expires, as `PTTL` tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Expiry {
    /// The key does not exist (never written, expired or deleted).
    Missing,
    /// The key exists without an expiry (the storages always set one).
    Never,
    /// The key expires after this long.
    In(Duration),
}

/// The [`Expiry`] of each key, in order, in one round trip (a pipeline of
/// `PTTL`s).
///
/// # Errors
///
/// An [`Error`] with operation `pttl` when Redis cannot be reached or
/// replies with something other than integers.
pub fn expiries<C: ConnectionLike>(con: &mut C, keys: &[String]) -> Result<Vec<Expiry>, Error> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("PTTL").arg(key);
    }
    let replies: Vec<Value> = pipe.query(con).map_err(|e| Error::redis("pttl", e))?;
    if replies.len() != keys.len() {
        return Err(Error::reply("pttl", "one reply per key expected"));
    }
    replies
        .iter()
        .map(|reply| match reply {
            Value::Int(-2) => Ok(Expiry::Missing),
            Value::Int(-1) => Ok(Expiry::Never),
            Value::Int(ms) => u64::try_from(*ms)
                .map(|ms| Expiry::In(Duration::from_millis(ms)))
                .map_err(|_| Error::reply("pttl", "a negative time to live")),
            Value::ServerError(e) => Err(Error::server("pttl", e.clone())),
            _ => Err(Error::reply("pttl", "not an integer")),
        })
        .collect()
}

/// The type of the value at `key` (`TYPE`): `hash` for a breaker's state,
/// `none` for no key, anything else (`string`, `list`, ...) for a key some
/// other program wrote under the prefix.
///
/// # Errors
///
/// An [`Error`] with operation `type` when Redis cannot be reached or
/// replies in another shape.
pub fn key_type<C: ConnectionLike>(con: &mut C, key: &str) -> Result<String, Error> {
    redis::cmd("TYPE")
        .arg(key)
        .query(con)
        .map_err(|e| Error::redis("type", e))
}

/// The server's clock (`TIME`) as a [`Timestamp`] since the Unix epoch:
/// the clock the storages measure `opened_at` and OPEN waits on, so
/// `server_time(..) - state.opened_at` is how long a breaker has been open.
///
/// # Errors
///
/// An [`Error`] with operation `time` when Redis cannot be reached or
/// replies in another shape.
pub fn server_time<C: ConnectionLike>(con: &mut C) -> Result<Timestamp, Error> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query(con)
        .map_err(|e| Error::redis("time", e))?;
    let nanos = secs
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(micros.saturating_mul(1_000)))
        .ok_or_else(|| Error::reply("time", "out of range"))?;
    Ok(Timestamp::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_survives_encoding_and_decoding() {
        for name in [
            "payments",
            "with space",
            "名前-ü",
            "{cb}",
            "%7B",
            "%",
            "100%",
            "a\u{85}{}\t\u{1b}[2J",
            "",
        ] {
            let key = breaker_key("p:", name);
            let rest = key.strip_prefix("p:").unwrap();
            assert_eq!(decode_name(rest).as_deref(), Some(name), "{key}");
        }
    }

    #[test]
    fn keys_the_storages_cannot_have_written_do_not_decode() {
        for foreign in [
            "{x}", "a}", "%", "%4", "%zz", "%41", "%7b", "a\tb", "%FF", "%C3",
        ] {
            assert_eq!(decode_name(foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn the_match_pattern_takes_the_prefix_literally() {
        assert_eq!(match_pattern(DEFAULT_KEY_PREFIX), "interlock:{cb}:*");
        assert_eq!(match_pattern(r"a*b?[c]\"), r"a\*b\?\[c\]\\*");
    }
}
