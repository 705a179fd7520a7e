//! [`Target`]: the Redis server and key prefix a command works on, and the
//! reads every command shares.

use std::time::Duration;

use interlock::Timestamp;
use interlock::storage::{PollRequest, SharedState, Storage, StorageError};
use interlock_redis::RedisStorage;
use interlock_redis::inspect::{self, Expiry};

use crate::args::Global;
use crate::error::CliError;

/// `url` with any password or query parameters hidden, for messages.
///
/// ```text
/// redis://:secret@host:6379/0 -> redis://***@host:6379/0
/// ```
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    let path = match path.split_once('?') {
        Some((path, _)) => format!("{path}?***"),
        None => path.to_owned(),
    };
    match scheme {
        Some(scheme) => format!("{scheme}://{authority}{path}"),
        None => format!("{authority}{path}"),
    }
}

/// One breaker's shared state, as read for display.
#[derive(Debug)]
pub(crate) struct Row {
    /// The breaker's name.
    pub(crate) name: String,
    /// Its hash's key.
    pub(crate) key: String,
    /// Its state, or why it could not be read (foreign data under the key).
    pub(crate) state: Result<SharedState, String>,
    /// When the key expires.
    pub(crate) expiry: Expiry,
}

/// Every breaker under the prefix at one moment.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The server's clock when the reads were done.
    pub(crate) server_time: Timestamp,
    /// The breakers, sorted by name.
    pub(crate) rows: Vec<Row>,
}

/// A Redis server and key prefix: a storage for the contract's reads and
/// fenced writes, and a connection for inspection (`SCAN`, `PTTL`, `TIME`).
pub(crate) struct Target {
    url: String,
    client: redis::Client,
    timeout: Duration,
    connection: Option<redis::Connection>,
    storage: RedisStorage<redis::Connection>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// Checks the URL and prefix and connects once, so a wrong address is
    /// reported before anything else happens.
    ///
    /// # Errors
    ///
    /// [`CliError::Usage`] for a malformed URL or prefix,
    /// [`CliError::Unreachable`] when the server does not answer.
    pub(crate) fn connect(global: &Global) -> Result<Self, CliError> {
        let url = redact(&global.url);
        let client = redis::Client::open(global.url.as_str()).map_err(|e| {
            CliError::Usage(format!(
                "invalid redis URL `{url}`: {e} (expected redis://host[:port][/db])"
            ))
        })?;
        let storage = RedisStorage::from_client(client.clone(), global.timeout)
            .layout(global.layout)
            .key_prefix(global.prefix())
            .build()
            .map_err(|e| CliError::Usage(format!("invalid --prefix `{}`: {e}", global.prefix())))?;
        let mut target = Target {
            url,
            client,
            timeout: global.timeout,
            connection: None,
            storage,
        };
        target.connection()?;
        Ok(target)
    }

    /// The URL, redacted.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix.
    pub(crate) fn prefix(&self) -> &str {
        self.storage.key_prefix()
    }

    /// The storage, for the contract's operations.
    pub(crate) fn storage(&self) -> &RedisStorage<redis::Connection> {
        &self.storage
    }

    /// The inspection connection, made (again) if needed, within
    /// `--timeout` in all: the client's own connect runs its handshake with
    /// a timeout per step, so a server that accepts connections but never
    /// answers (stopped, paused) would otherwise take a multiple of it.
    fn connection(&mut self) -> Result<&mut redis::Connection, CliError> {
        let con = match self.connection.take() {
            Some(con) => con,
            None => {
                let (client, timeout) = (self.client.clone(), self.timeout);
                let connect = within(timeout, move || {
                    let con = client.get_connection_with_timeout(timeout)?;
                    con.set_read_timeout(Some(timeout))?;
                    con.set_write_timeout(Some(timeout))?;
                    Ok::<_, redis::RedisError>(con)
                });
                match connect {
                    Some(Ok(con)) => con,
                    Some(Err(e)) if !e.is_timeout() => {
                        return Err(CliError::Unreachable {
                            url: self.url.clone(),
                            source: e,
                        });
                    }
                    _ => return Err(self.no_answer()),
                }
            }
        };
        Ok(self.connection.insert(con))
    }

    /// The error for a server that did not answer in time.
    fn no_answer(&self) -> CliError {
        CliError::NoAnswer {
            url: self.url.clone(),
            timeout: self.timeout,
        }
    }

    /// A storage error with what was being done; a timeout says plainly
    /// that Redis did not answer.
    pub(crate) fn storage_error(&self, context: String, error: StorageError) -> CliError {
        if crate::error::is_timeout(error.as_ref()) {
            self.no_answer()
        } else {
            CliError::storage(context, error)
        }
    }

    /// The plain error for a key of another type than a breaker's hash
    /// (`WRONGTYPE`), or `None` if `error` is something else.
    fn wrong_type(&mut self, name: &str, error: &StorageError) -> Option<CliError> {
        let e = error.downcast_ref::<interlock_redis::Error>()?;
        if e.server_code() != Some("WRONGTYPE") {
            return None;
        }
        let key = self.storage.key(name);
        let kind = self
            .inspect(|con| inspect::key_type(con, &key))
            .unwrap_or_else(|_| "value of another type".to_owned());
        Some(CliError::WrongType {
            name: crate::escape::name(name).into_owned(),
            key,
            kind,
        })
    }

    /// Runs an inspection step; a failed step drops the connection, so the
    /// next one reconnects (after Redis restarted, say).
    fn inspect<T>(
        &mut self,
        step: impl FnOnce(&mut redis::Connection) -> Result<T, interlock_redis::Error>,
    ) -> Result<T, CliError> {
        let url = self.url.clone();
        let result = step(self.connection()?);
        result.map_err(|e| {
            self.connection = None;
            self.storage_error(format!("redis at {url}"), Box::new(e))
        })
    }

    /// The server's clock.
    ///
    /// # Errors
    ///
    /// When Redis does not answer.
    pub(crate) fn server_time(&mut self) -> Result<Timestamp, CliError> {
        self.inspect(inspect::server_time)
    }

    /// One breaker's state through the storage contract: `None` when it
    /// has no key.
    ///
    /// # Errors
    ///
    /// When Redis does not answer or refuses the data under the key.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<SharedState>, CliError> {
        match self.storage.read(name) {
            Ok(state) => Ok(state),
            Err(e) => Err(match self.wrong_type(name, &e) {
                Some(plain) => plain,
                None => self.storage_error(format!("cannot read {}", crate::escape::name(name)), e),
            }),
        }
    }

    /// One breaker with its key's expiry, or `None` when it has no key.
    ///
    /// # Errors
    ///
    /// When Redis does not answer or refuses the data under the key.
    pub(crate) fn row(&mut self, name: &str) -> Result<Option<Row>, CliError> {
        let Some(state) = self.read(name)? else {
            return Ok(None);
        };
        let key = self.storage.key(name);
        let expiry = self
            .inspect(|con| inspect::expiries(con, std::slice::from_ref(&key)))?
            .pop()
            .unwrap_or(Expiry::Missing);
        Ok(Some(Row {
            name: name.to_owned(),
            key,
            state: Ok(state),
            expiry,
        }))
    }

    /// Every breaker under the prefix: `SCAN`, then one batched poll of
    /// contract reads ([`Storage::poll_many`]: one round trip where the
    /// storage batches), then their expiries. A breaker whose key vanished
    /// between the scan and the read is left out; one whose data the
    /// storage refuses is kept, with the reason.
    ///
    /// # Errors
    ///
    /// When Redis does not answer.
    pub(crate) fn snapshot(&mut self) -> Result<Snapshot, CliError> {
        let prefix = self.prefix().to_owned();
        let layout = self.storage.layout();
        let names = self.inspect(|con| inspect::breaker_names_in(con, &prefix, layout))?;
        let requests: Vec<PollRequest<'_>> = names
            .iter()
            .map(|name| PollRequest::Read {
                name: name.as_str(),
            })
            .collect();
        let answers = self
            .storage
            .poll_many(&requests)
            .map_err(|e| self.storage_error(format!("redis at {}", self.url), e))?;
        let mut rows = Vec::with_capacity(names.len());
        for (name, answer) in names.iter().zip(answers) {
            let state = match answer {
                // Version 0 is what an absent key reads as: it expired or
                // was deleted since the scan.
                Ok(state) if state.version == 0 => continue,
                Ok(state) => Ok(state),
                // Foreign data under one key spoils only its row; a failure
                // to talk to Redis spoils the whole listing.
                Err(e) if !is_unreachable(&e) => Err(match self.wrong_type(name, &e) {
                    Some(CliError::WrongType { kind, .. }) => {
                        format!("the key holds a {kind}, not a breaker's state")
                    }
                    _ => crate::error::chain(e.as_ref()),
                }),
                Err(e) => return Err(self.storage_error(format!("redis at {}", self.url), e)),
            };
            rows.push(Row {
                name: name.clone(),
                key: self.storage.key(name),
                state,
                expiry: Expiry::Missing,
            });
        }
        let keys: Vec<String> = rows.iter().map(|r| r.key.clone()).collect();
        let expiries = self.inspect(|con| inspect::expiries(con, &keys))?;
        for (row, expiry) in rows.iter_mut().zip(expiries) {
            row.expiry = expiry;
        }
        let server_time = self.server_time()?;
        Ok(Snapshot { server_time, rows })
    }
}

/// Runs `work` on a thread of its own and waits at most `limit` for it:
/// `None` if it did not finish in time (it is left to end on its own
/// timeouts; the command does not wait for it).
fn within<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("interlock-connect".to_owned())
        .spawn(move || {
            let _ = tx.send(work());
        });
    match spawned {
        Ok(_) => rx.recv_timeout(limit).ok(),
        Err(_) => None,
    }
}

/// Whether a storage error means Redis could not be talked to (as opposed
/// to refusing the data under one key).
fn is_unreachable(error: &interlock::storage::StorageError) -> bool {
    match error.downcast_ref::<interlock_redis::Error>() {
        Some(e) if e.is_corrupt() => false,
        Some(e) => e.redis_error().is_none_or(|r| {
            r.is_io_error()
                || r.is_timeout()
                || r.is_connection_dropped()
                || r.is_connection_refusal()
        }),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_query_parameters_never_reach_messages() {
        let cases = [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            ("redis://:s3cret@host:1/0", "redis://***@host:1/0"),
            ("redis://user:p@ss@host", "redis://***@host"),
            (
                "redis+unix:///run/r.sock?pass=x",
                "redis+unix:///run/r.sock?***",
            ),
            ("not a url", "not a url"),
        ];
        for (url, want) in cases {
            assert_eq!(redact(url), want, "{url}");
        }
    }
}
