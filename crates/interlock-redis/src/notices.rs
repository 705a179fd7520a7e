//! Change notices: the subscription that turns the scripts' `PUBLISH`es
//! into [`Notice`]s for a coordinator.
//!
//! Every script that applies a change publishes `<version> <key>` on the
//! channel `<key_prefix>notices`, atomically with the change (then, with
//! the change index, `epoch <log entry>`, which goes to the storage's
//! trail, not to the coordinator). A
//! subscription listens on its own connection (a thread for the blocking
//! storage, a tokio task for the async one), delivers [`Notice::Resync`]
//! each time it is (re)established, [`Notice::Changed`] for each notice,
//! and on a dropped connection waits the storage's retry delay and
//! subscribes again. It ends once the sink reports its coordinator gone,
//! which it checks at least every [`TICK`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use interlock::storage::{Notice, NoticeSink, SharedState, StorageSettings};
use interlock::{Clock, MonotonicClock, State, Timestamp};

use crate::key::decode_name;
use crate::scripts::{MAX_EXACT, MAX_VERSION};
use crate::trail::{EPOCH_NOTICE, Trail};

/// How long a listener waits for a message before it checks that its
/// coordinator still listens.
const TICK: Duration = Duration::from_millis(250);

/// The least wait before subscribing again after the server refused the
/// user (ACLs change rarely; a refused user is not retried on the
/// storage's failure cadence).
const REFUSED_RETRY: Duration = Duration::from_secs(60);

/// Silence after which a listener pings the server, so a connection that
/// died without a word (a network partition) is noticed and replaced.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// Where a storage opens its subscriptions.
#[derive(Clone, Debug)]
pub(crate) struct Subscriber {
    pub(crate) client: redis::Client,
    /// Connect timeout, and the response timeout of `SUBSCRIBE` and `PING`.
    pub(crate) timeout: Duration,
}

/// What one subscription needs: where to connect, what to listen to, how
/// to decode it and how long to wait between attempts.
#[derive(Clone, Debug)]
pub(crate) struct Listener {
    pub(crate) subscriber: Subscriber,
    pub(crate) channel: String,
    pub(crate) prefix: String,
    pub(crate) settings: StorageSettings,
    pub(crate) sink: NoticeSink,
    /// Where the epoch messages go (issue 29).
    pub(crate) trail: Arc<Mutex<Trail>>,
}

/// How a subscription ended.
enum Ended {
    /// The coordinator is gone: stop for good.
    SinkGone,
    /// The connection failed or dropped: wait, then subscribe again.
    /// `established` tells whether it had been subscribed (which resets
    /// the backoff).
    Dropped { established: bool },
    /// The server refused the subscription to this user (`NOPERM`: no
    /// rights on the channel or the command). Said once, then retried like
    /// a failure, in case the ACLs change.
    Refused(String),
}

/// Whether `error` is the server refusing the user (ACLs), which retrying
/// will not fix.
fn is_refusal(error: &redis::RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
}

/// The reason of a refused subscription, for the notice.
fn refusal(error: &redis::RedisError) -> Ended {
    Ended::Refused(format!(
        "the server refused SUBSCRIBE to the change notices: {error}"
    ))
}

/// A notice's payload, `<version> <key>` and optionally a newline and the
/// record, as the breaker's name, version and record (if it came and
/// parses); `None` for anything else (a key outside `prefix`, a stranger's
/// message on our channel), which is ignored.
pub(crate) fn parse_payload(
    prefix: &str,
    payload: &[u8],
) -> Option<(String, u64, Option<SharedState>)> {
    let (head, record) = match payload.iter().position(|&b| b == b'\n') {
        Some(at) => (&payload[..at], Some(&payload[at + 1..])),
        None => (payload, None),
    };
    let space = head.iter().position(|&b| b == b' ')?;
    let (digits, key) = (&head[..space], &head[space + 1..]);
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let version: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let name = key.strip_prefix(prefix.as_bytes())?;
    let state = record.and_then(|r| parse_record(r, version));
    Some((decode_name(name)?, version, state))
}

/// The record after a notice's newline: `state opened_at permitted
/// remaining completed failures slows`, in the ranges the scripts accept.
fn parse_record(record: &[u8], version: u64) -> Option<SharedState> {
    let text = std::str::from_utf8(record).ok()?;
    let mut fields = text.split(' ');
    let state = match fields.next()? {
        "closed" => State::Closed,
        "open" => State::Open,
        "half_open" => State::HalfOpen,
        _ => return None,
    };
    let mut number = |max: u64| -> Option<u64> {
        let field = fields.next()?;
        if field.is_empty() || field.len() > 16 || !field.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        field.parse().ok().filter(|n| *n <= max)
    };
    let opened_at_us = number(MAX_EXACT)?;
    let mut counter = || number(u64::from(u32::MAX)).and_then(|n| u32::try_from(n).ok());
    let parsed = SharedState {
        state,
        opened_at: Timestamp::from_nanos(opened_at_us.saturating_mul(1_000)),
        version,
        probes_permitted: counter()?,
        probes_remaining: counter()?,
        probes_completed: counter()?,
        probe_failures: counter()?,
        probe_slows: counter()?,
    };
    (fields.next().is_none() && version <= MAX_VERSION).then_some(parsed)
}

impl Listener {
    /// Delivers one message's notice; `false` once the coordinator is gone.
    fn deliver(&self, channel: &[u8], payload: &[u8]) -> bool {
        if channel != self.channel.as_bytes() {
            return self.sink.is_alive();
        }
        if let Some(entry) = payload.strip_prefix(EPOCH_NOTICE) {
            Trail::push(&self.trail, entry);
            return self.sink.is_alive();
        }
        match parse_payload(&self.prefix, payload) {
            Some((name, _, Some(state))) => {
                self.sink.deliver(Notice::Written { name: &name, state })
            }
            Some((name, version, None)) => self.sink.deliver(Notice::Changed {
                name: &name,
                version,
            }),
            None => self.sink.is_alive(),
        }
    }

    /// The wait before the next attempt after `failures` consecutive
    /// failed ones: the storage's retry delay, with its deterministic
    /// jitter keyed by the channel.
    fn backoff(&self, failures: u32) -> Duration {
        self.settings.retry_delay_with_jitter(
            failures,
            &self.channel,
            MonotonicClock.now().as_nanos(),
        )
    }

    /// Says once that the subscription was refused; `false` once the
    /// coordinator is gone.
    fn refused(&self, told: &mut bool, reason: &str) -> bool {
        if std::mem::replace(told, true) {
            return self.sink.is_alive();
        }
        self.sink.deliver(Notice::Unavailable { reason })
    }

    /// Runs the blocking subscription until the coordinator is gone.
    pub(crate) fn run_blocking(self) {
        let mut failures = 0u32;
        let mut told = false;
        loop {
            match self.session_blocking() {
                Ended::SinkGone => return,
                Ended::Dropped { established } => {
                    if established {
                        failures = 0;
                    }
                }
                Ended::Refused(reason) => {
                    if !self.refused(&mut told, &reason) {
                        return;
                    }
                    if !self.wait_blocking(self.backoff(failures).max(REFUSED_RETRY)) {
                        return;
                    }
                    failures = failures.saturating_add(1);
                    continue;
                }
            }
            let delay = self.backoff(failures);
            failures = failures.saturating_add(1);
            if !self.wait_blocking(delay) {
                return;
            }
        }
    }

    /// Waits `delay` in slices of [`TICK`]; `false` if the coordinator
    /// went away meanwhile.
    fn wait_blocking(&self, delay: Duration) -> bool {
        let deadline = MonotonicClock.now().saturating_add(delay);
        loop {
            if !self.sink.is_alive() {
                return false;
            }
            let now = MonotonicClock.now();
            if now >= deadline {
                return true;
            }
            std::thread::park_timeout(deadline.saturating_duration_since(now).min(TICK));
        }
    }

    fn session_blocking(&self) -> Ended {
        const FAILED: Ended = Ended::Dropped { established: false };
        let timeout = self.subscriber.timeout;
        let Ok(mut con) = self.subscriber.client.get_connection_with_timeout(timeout) else {
            return FAILED;
        };
        if con.set_write_timeout(Some(timeout)).is_err()
            || con.set_read_timeout(Some(timeout)).is_err()
        {
            return FAILED;
        }
        let mut pubsub = con.as_pubsub();
        match pubsub.subscribe(&self.channel) {
            Err(e) if is_refusal(&e) => return refusal(&e),
            Err(_) => return FAILED,
            Ok(()) => {}
        }
        if pubsub.set_read_timeout(Some(TICK)).is_err() {
            return FAILED;
        }
        let _live = Trail::session(&self.trail);
        if !self.sink.deliver(Notice::Resync) {
            return Ended::SinkGone;
        }
        const DROPPED: Ended = Ended::Dropped { established: true };
        let mut quiet_since = MonotonicClock.now();
        loop {
            match pubsub.get_message() {
                Ok(msg) => {
                    quiet_since = MonotonicClock.now();
                    if !self.deliver(msg.get_channel_name().as_bytes(), msg.get_payload_bytes()) {
                        return Ended::SinkGone;
                    }
                }
                Err(e) if e.is_timeout() => {
                    if !self.sink.is_alive() {
                        return Ended::SinkGone;
                    }
                    let now = MonotonicClock.now();
                    if now.saturating_duration_since(quiet_since) >= KEEPALIVE {
                        quiet_since = now;
                        let alive = pubsub.set_read_timeout(Some(timeout)).is_ok()
                            && pubsub.ping::<redis::Value>().is_ok()
                            && pubsub.set_read_timeout(Some(TICK)).is_ok();
                        if !alive {
                            return DROPPED;
                        }
                    }
                }
                Err(_) => return DROPPED,
            }
        }
    }
}

#[cfg(feature = "tokio")]
mod task {
    use futures_util::StreamExt;
    use interlock::storage::Notice;
    use interlock::{Clock, MonotonicClock};
    use std::time::Duration;

    use super::{Ended, KEEPALIVE, Listener, REFUSED_RETRY, TICK, Trail, is_refusal, refusal};

    impl Listener {
        /// Runs the async subscription until the coordinator is gone.
        pub(crate) async fn run_async(self) {
            let mut failures = 0u32;
            let mut told = false;
            loop {
                let mut least = Duration::ZERO;
                match self.session_async().await {
                    Ended::SinkGone => return,
                    Ended::Dropped { established } => {
                        if established {
                            failures = 0;
                        }
                    }
                    Ended::Refused(reason) => {
                        if !self.refused(&mut told, &reason) {
                            return;
                        }
                        least = REFUSED_RETRY;
                    }
                }
                let mut left = self.backoff(failures).max(least);
                failures = failures.saturating_add(1);
                while !left.is_zero() {
                    if !self.sink.is_alive() {
                        return;
                    }
                    let step = left.min(TICK);
                    tokio::time::sleep(step).await;
                    left = left.saturating_sub(step);
                }
            }
        }

        async fn session_async(&self) -> Ended {
            const FAILED: Ended = Ended::Dropped { established: false };
            let timeout = self.subscriber.timeout;
            let connect = self.subscriber.client.get_async_pubsub();
            let Ok(Ok(mut pubsub)) = tokio::time::timeout(timeout, connect).await else {
                return FAILED;
            };
            let subscribe = pubsub.subscribe(&self.channel);
            match tokio::time::timeout(timeout, subscribe).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) if is_refusal(&e) => return refusal(&e),
                _ => return FAILED,
            }
            let _live = Trail::session(&self.trail);
            if !self.sink.deliver(Notice::Resync) {
                return Ended::SinkGone;
            }
            const DROPPED: Ended = Ended::Dropped { established: true };
            let (mut control, mut messages) = pubsub.split();
            let mut quiet_since = MonotonicClock.now();
            loop {
                match tokio::time::timeout(TICK, messages.next()).await {
                    Ok(Some(msg)) => {
                        quiet_since = MonotonicClock.now();
                        let channel = msg.get_channel_name().as_bytes();
                        if !self.deliver(channel, msg.get_payload_bytes()) {
                            return Ended::SinkGone;
                        }
                    }
                    Ok(None) => return DROPPED,
                    Err(_) => {
                        if !self.sink.is_alive() {
                            return Ended::SinkGone;
                        }
                        let now = MonotonicClock.now();
                        if now.saturating_duration_since(quiet_since) >= KEEPALIVE {
                            quiet_since = now;
                            let ping = control.ping::<redis::Value>();
                            if !matches!(tokio::time::timeout(timeout, ping).await, Ok(Ok(_))) {
                                return DROPPED;
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_decode_to_name_and_version() {
        let p = "interlock:{cb}:";
        assert_eq!(
            parse_payload(p, b"7 interlock:{cb}:payments"),
            Some(("payments".to_owned(), 7, None))
        );
        assert_eq!(
            parse_payload(p, b"1 interlock:{cb}:a%7Bb%7D c"),
            Some(("a{b} c".to_owned(), 1, None))
        );
        assert_eq!(
            parse_payload(p, b"3 interlock:{cb}:"),
            Some((String::new(), 3, None))
        );
    }

    #[test]
    fn a_payload_with_the_record_carries_it() {
        let p = "interlock:{cb}:";
        let (name, version, state) = parse_payload(
            p,
            b"9 interlock:{cb}:a b\nhalf_open 1700000000000000 3 1 2 1 0",
        )
        .unwrap();
        assert_eq!((name.as_str(), version), ("a b", 9));
        let state = state.unwrap();
        assert_eq!(
            (state.state, state.version, state.opened_at.as_secs()),
            (State::HalfOpen, 9, 1_700_000_000)
        );
        assert_eq!(
            (
                state.probes_permitted,
                state.probes_remaining,
                state.probes_completed
            ),
            (3, 1, 2)
        );
        assert_eq!((state.probe_failures, state.probe_slows), (1, 0));
        // A record that does not parse leaves the notice a plain change.
        for bad in [
            &b"9 interlock:{cb}:x\najar 0 0 0 0 0 0"[..],
            b"9 interlock:{cb}:x\nopen 0 0 0 0 0",
            b"9 interlock:{cb}:x\nopen 0 0 0 0 0 0 0",
            b"9 interlock:{cb}:x\nopen -1 0 0 0 0 0",
            b"9 interlock:{cb}:x\nopen 0 4294967296 0 0 0 0",
            b"9 interlock:{cb}:x\n",
        ] {
            assert_eq!(
                parse_payload(p, bad).map(|(_, v, s)| (v, s)),
                Some((9, None)),
                "{bad:?}"
            );
        }
        // A version a record may not hold: no record.
        assert_eq!(
            parse_payload(p, b"1125899906842625 interlock:{cb}:x\nopen 0 0 0 0 0 0")
                .and_then(|(_, _, s)| s),
            None
        );
    }

    #[test]
    fn anything_else_on_the_channel_is_ignored() {
        let p = "interlock:{cb}:";
        for bad in [
            &b""[..],
            b"7",
            b"7interlock:{cb}:x",
            b" interlock:{cb}:x",
            b"-1 interlock:{cb}:x",
            b"1.5 interlock:{cb}:x",
            b"99999999999999999 interlock:{cb}:x",
            b"7 other:{cb}:x",
            b"7 interlock:{cb}:%zz",
            b"7 interlock:{cb}:\xff",
            b"\xff\xfe",
            // The epoch message every write sends after its notice (issue
            // 29): a parser of this or an older release ignores it.
            b"epoch 12:1700000000000000:3:interlock:{cb}:x",
        ] {
            assert_eq!(parse_payload(p, bad), None, "{bad:?}");
        }
    }
}
