//! The eleven Lua scripts, their arguments and the parsing of their replies.
//!
//! Each of the eight operations works on one key (`KEYS[1]`, the breaker's
//! hash), reads the hash through the same strict loader, and replies with
//! the same ten values in the same order:
//!
//! | # | value | type |
//! |---|---|---|
//! | 1 | `code`: 1 if the operation applied a change (for `read`: the key exists; for `lease_probe`: granted), else 0 | integer |
//! | 2 | `state`: `closed`, `open` or `half_open` | string |
//! | 3 | `opened_at`, microseconds since the Unix epoch on the server's `TIME` | integer |
//! | 4 | `version` | integer |
//! | 5–9 | `probes_permitted`, `probes_remaining`, `probes_completed`, `probe_failures`, `probe_slows` | integers |
//! | 10 | why the change notice could not be published (`PUBLISH` refused, say by ACLs), or empty | string |
//!
//! An absent key reads as CLOSED at version 0 with `code` 0. A hash the
//! loader refuses (a field missing, not a decimal integer, out of range, an
//! unknown state or schema marker) makes the script fail with an error
//! whose text starts with `interlock:`; a key of another type fails with
//! Redis's own `WRONGTYPE`. Nothing is written in either case.
//!
//! Every write script takes the notice channel as `ARGV[1]` and, when it
//! applies a change, publishes `<version> <key>` on it after writing,
//! followed by a newline and the record (`state opened_at permitted
//! remaining completed failures slows`), so subscribers adopt it without a
//! read (an empty channel publishes nothing). With the change index it then
//! publishes `epoch ` and the change log entry it wrote, which a subscriber
//! keeps to confirm polls (`trail.rs`) and an older parser ignores. The publish is best-effort: it runs
//! under `redis.pcall`, so a refused `PUBLISH` never turns an applied write
//! into an error (value 10 says why it failed). The ninth script, `poll`,
//! answers a whole batched poll: a read or a begin per key, one reply per
//! key, with an error of one key (`{'err', message}`) kept to that key.
//!
//! Every write goes through the prelude's `save`, which also keeps the
//! storage's change index when the script is given its two keys (issue
//! 29): every single-key script takes them as `KEYS[2]` and `KEYS[3]`. The
//! tenth script, `changes`, answers a poll from the index: the records
//! written or expired since the caller's epoch, plus the requests that
//! must be answered in any case. The eleventh, `confirm`, has no prelude:
//! it answers whether the storage agrees with what a subscriber's change
//! notices brought since its epoch (see `trail.rs`).

use std::sync::LazyLock;
use std::time::Duration;

use interlock::storage::{Epoch, PollRequest, ProbeLease, SharedState};
use interlock::{Outcome, State, Timestamp};
use redis::{Script, ScriptInvocation, Value};

use crate::error::Error;
use crate::lua::{
    BEGIN, CHANGES, CLOSE, CONFIRM, LEASE, POLL, PRELUDE, READ, RECORD, RESTART, RESTORE, TRIP,
};
use crate::trail::Plan;

/// The largest integer Lua's doubles hold exactly (2^53 − 1): the bound of
/// `opened_at` in the hash.
pub(crate) const MAX_EXACT: u64 = (1 << 53) - 1;

/// The bound of `version` in the hash: [`SharedState::MAX_VERSION`]. A
/// larger one is refused as corrupt (a version near 2^53 would stop
/// fencing: Lua's doubles cannot add one to it).
pub(crate) const MAX_VERSION: u64 = SharedState::MAX_VERSION;

/// The longest TTL written (about 31 years), far below what `PEXPIRE`
/// accepts on top of the server's clock.
const MAX_TTL_MS: u64 = 1_000_000_000_000;

/// The Lua source of one layout's scripts: a prelude, then one body per
/// operation (interlock's own in `lua.rs`, the original's in
/// `interlock_cb.rs`). Every body takes the same arguments, in the same
/// order, and replies in the same shape.
pub(crate) struct Sources {
    pub(crate) prelude: &'static str,
    pub(crate) read: &'static str,
    pub(crate) trip: &'static str,
    pub(crate) begin: &'static str,
    pub(crate) lease: &'static str,
    pub(crate) record: &'static str,
    pub(crate) close: &'static str,
    pub(crate) restart: &'static str,
    pub(crate) restore: &'static str,
    pub(crate) poll: &'static str,
    /// The change poll, for a layout with a change index.
    pub(crate) changes: Option<&'static str>,
}

/// One layout's scripts, loaded (and their digests computed) once.
pub(crate) struct Scripts {
    read: Script,
    trip: Script,
    begin: Script,
    lease: Script,
    record: Script,
    close: Script,
    restart: Script,
    restore: Script,
    poll: Script,
    changes: Option<Script>,
}

impl Scripts {
    pub(crate) fn new(src: &Sources) -> Scripts {
        let script = |body: &str| Script::new(&format!("{}{body}", src.prelude));
        Scripts {
            read: script(src.read),
            trip: script(src.trip),
            begin: script(src.begin),
            lease: script(src.lease),
            record: script(src.record),
            close: script(src.close),
            restart: script(src.restart),
            restore: script(src.restore),
            poll: script(src.poll),
            changes: src.changes.map(script),
        }
    }

    /// The SHA1 digests of the scripts, in the order read, trip_open,
    /// begin_half_open_if_elapsed, lease_probe, record_probe, close,
    /// restart_stalled_round, restore, poll, and changes if the layout has
    /// it.
    pub(crate) fn digests(&self) -> Vec<&str> {
        let mut all = vec![
            self.read.get_hash(),
            self.trip.get_hash(),
            self.begin.get_hash(),
            self.lease.get_hash(),
            self.record.get_hash(),
            self.close.get_hash(),
            self.restart.get_hash(),
            self.restore.get_hash(),
            self.poll.get_hash(),
        ];
        all.extend(self.changes.as_ref().map(Script::get_hash));
        all
    }
}

/// What differs between the layouts in how a script is called: its
/// scripts, and how a TTL becomes the milliseconds of `PEXPIRE`.
#[derive(Clone, Copy)]
pub(crate) struct Dialect {
    pub(crate) scripts: &'static LazyLock<Scripts>,
    pub(crate) ttl_ms: fn(Duration) -> u64,
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| {
    Scripts::new(&Sources {
        prelude: PRELUDE,
        read: READ,
        trip: TRIP,
        begin: BEGIN,
        lease: LEASE,
        record: RECORD,
        close: CLOSE,
        restart: RESTART,
        restore: RESTORE,
        poll: POLL,
        changes: Some(CHANGES),
    })
});

/// interlock's own layout.
pub(crate) const INTERLOCK: Dialect = Dialect {
    scripts: &SCRIPTS,
    ttl_ms,
};

/// The change poll's short form (issue 29), on its own: it needs none of
/// the prelude.
static CONFIRM_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CONFIRM));

/// The SHA1 digests of interlock's own eleven scripts, in the order of
/// [`Scripts::digests`], then `confirm`.
pub(crate) fn digests() -> [&'static str; 11] {
    let mut all = SCRIPTS.digests();
    all.push(CONFIRM_SCRIPT.get_hash());
    std::array::from_fn(|i| all[i])
}

/// The `confirm` script call for `plan` from `since` (issue 29).
pub(crate) fn confirm_invocation(
    index: &Index,
    since: Epoch,
    plan: &Plan,
) -> ScriptInvocation<'static> {
    let mut inv = CONFIRM_SCRIPT.prepare_invoke();
    inv.key(&index.log)
        .key(&index.expiry)
        .arg(since.counter)
        .arg(since.mark)
        .arg(since.at.as_nanos() / 1_000_000)
        .arg(plan.top.as_deref().unwrap_or(""));
    inv
}

/// A `confirm` reply: the server's time if it agreed, `None` if not.
pub(crate) fn parse_confirm(value: &Value) -> Result<Option<Timestamp>, Error> {
    const OP: &str = "poll";
    match value {
        Value::Int(0) => Ok(None),
        Value::ServerError(e) => Err(Error::server(OP, e.clone())),
        v => {
            let us = int(OP, v, "the confirmed time", MAX_EXACT)?;
            Ok(Some(Timestamp::from_nanos(us.saturating_mul(1_000))))
        }
    }
}

/// A TTL as whole milliseconds for `PEXPIRE`: rounded up, at least 1 (a
/// zero would delete the key), at most [`MAX_TTL_MS`].
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    let ms = ttl.as_nanos().div_ceil(1_000_000);
    u64::try_from(ms).unwrap_or(u64::MAX).clamp(1, MAX_TTL_MS)
}

/// A wait as whole microseconds, rounded up (a wait never ends early), at
/// most [`MAX_EXACT`].
pub(crate) fn wait_us(wait: Duration) -> u64 {
    let us = wait.as_nanos().div_ceil(1_000);
    u64::try_from(us).unwrap_or(u64::MAX).min(MAX_EXACT)
}

/// A timestamp as whole microseconds since the epoch, at most
/// [`MAX_EXACT`] (the scripts clamp anything later to the server's now).
pub(crate) fn opened_at_us(at: Timestamp) -> u64 {
    (at.as_nanos() / 1_000).min(MAX_EXACT)
}

fn expected_arg(expected: Option<u64>) -> String {
    expected.map(|v| v.to_string()).unwrap_or_default()
}

/// One storage operation with its arguments.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Read,
    Trip {
        ttl: Duration,
        expected: Option<u64>,
    },
    Begin {
        wait: Duration,
        permitted: u32,
        ttl: Duration,
    },
    Lease {
        ttl: Duration,
    },
    Record {
        outcome: Outcome,
        ttl: Duration,
    },
    Close {
        ttl: Duration,
        expected: Option<u64>,
    },
    Restart {
        expected: u64,
        permitted: u32,
        ttl: Duration,
    },
    Restore {
        expected: u64,
        state: SharedState,
        ttl: Duration,
    },
}

impl Op {
    /// The operation's name in the storage traits.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Trip { .. } => "trip_open",
            Op::Begin { .. } => "begin_half_open_if_elapsed",
            Op::Lease { .. } => "lease_probe",
            Op::Record { .. } => "record_probe",
            Op::Close { .. } => "close",
            Op::Restart { .. } => "restart_stalled_round",
            Op::Restore { .. } => "restore",
        }
    }

    /// The script call for the hash at `key` in `dialect`, keeping the
    /// change index at `index` if given.
    pub(crate) fn invocation_in(
        self,
        dialect: Dialect,
        key: &str,
        channel: &str,
        index: Option<&Index>,
    ) -> ScriptInvocation<'static> {
        let mut inv = self.bare_invocation(dialect, key, channel);
        if let Some(index) = index {
            inv.key(&index.log).key(&index.expiry);
        }
        inv
    }

    fn bare_invocation(
        self,
        dialect: Dialect,
        key: &str,
        channel: &str,
    ) -> ScriptInvocation<'static> {
        let s: &'static Scripts = dialect.scripts;
        let ttl_ms = dialect.ttl_ms;
        match self {
            Op::Read => s.read.key(key),
            Op::Trip { ttl, expected } => {
                let mut inv = s.trip.key(key);
                inv.arg(channel)
                    .arg(ttl_ms(ttl))
                    .arg(expected_arg(expected));
                inv
            }
            Op::Begin {
                wait,
                permitted,
                ttl,
            } => {
                let mut inv = s.begin.key(key);
                inv.arg(channel)
                    .arg(wait_us(wait))
                    .arg(permitted)
                    .arg(ttl_ms(ttl));
                inv
            }
            Op::Lease { ttl } => {
                let mut inv = s.lease.key(key);
                inv.arg(channel).arg(ttl_ms(ttl));
                inv
            }
            Op::Record { outcome, ttl } => {
                let mut inv = s.record.key(key);
                inv.arg(channel)
                    .arg(u8::from(outcome.is_failure()))
                    .arg(u8::from(outcome.is_slow()))
                    .arg(ttl_ms(ttl));
                inv
            }
            Op::Close { ttl, expected } => {
                let mut inv = s.close.key(key);
                inv.arg(channel)
                    .arg(ttl_ms(ttl))
                    .arg(expected_arg(expected));
                inv
            }
            Op::Restart {
                expected,
                permitted,
                ttl,
            } => {
                let mut inv = s.restart.key(key);
                inv.arg(channel)
                    .arg(expected.min(MAX_VERSION))
                    .arg(permitted)
                    .arg(ttl_ms(ttl));
                inv
            }
            Op::Restore {
                expected,
                state,
                ttl,
            } => {
                let mut inv = s.restore.key(key);
                inv.arg(channel)
                    .arg(expected.min(MAX_VERSION))
                    .arg(ttl_ms(ttl))
                    .arg(state.state.as_str())
                    .arg(opened_at_us(state.opened_at))
                    .arg(state.version.min(MAX_VERSION))
                    .arg(state.probes_permitted)
                    .arg(state.probes_remaining)
                    .arg(state.probes_completed)
                    .arg(state.probe_failures)
                    .arg(state.probe_slows);
                inv
            }
        }
    }
}

/// The two keys of a storage's change index (issue 29), next to its
/// breakers' hashes under the same prefix (so in the same hash slot): the
/// epoch and change log, and the expiry of every key. The names end in
/// `%` and a letter that is not a hex digit, which no encoded breaker
/// name ever does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) log: String,
    pub(crate) expiry: String,
}

impl Index {
    pub(crate) fn under(prefix: &str) -> Index {
        Index {
            log: format!("{prefix}%changes"),
            expiry: format!("{prefix}%expiry"),
        }
    }
}

/// The most breakers one `poll` script call covers: a larger poll is
/// split into several calls, so no single script holds the server for
/// long (a thousand hashes take about a millisecond).
pub(crate) const MAX_BATCH: usize = 1000;

/// The `poll` script call for `requests` (at most [`MAX_BATCH`]), whose
/// keys `key` makes; applied begins publish on `channel`.
pub(crate) fn poll_invocation(
    requests: &[PollRequest<'_>],
    channel: &str,
    key: impl Fn(&str) -> String,
) -> ScriptInvocation<'static> {
    poll_invocation_in(INTERLOCK, requests, channel, key)
}

/// The `poll` script call of `dialect` for `requests`.
pub(crate) fn poll_invocation_in(
    dialect: Dialect,
    requests: &[PollRequest<'_>],
    channel: &str,
    key: impl Fn(&str) -> String,
) -> ScriptInvocation<'static> {
    let s: &'static Scripts = dialect.scripts;
    let ttl_ms = dialect.ttl_ms;
    let mut inv = s.poll.prepare_invoke();
    inv.arg(channel);
    for request in requests {
        inv.key(key(request.name()));
        match *request {
            PollRequest::BeginHalfOpen {
                wait,
                permitted,
                ttl,
                ..
            } => inv.arg(wait_us(wait)).arg(permitted).arg(ttl_ms(ttl)),
            // `PollRequest` is non-exhaustive: anything else is a read.
            _ => inv.arg("").arg(0).arg(0),
        };
    }
    inv
}

/// The `changes` script call (issue 29): the records changed since
/// `since` under `prefix` (at most `max` of them, else a full answer), and
/// an answer to each of `requests` (at most [`MAX_BATCH`]), whose keys
/// `key` makes; applied begins publish on `channel` and are noted in the
/// index.
pub(crate) fn changes_invocation(
    index: &Index,
    prefix: &str,
    since: Option<Epoch>,
    max: usize,
    requests: &[PollRequest<'_>],
    channel: &str,
    key: impl Fn(&str) -> String,
) -> ScriptInvocation<'static> {
    let changes = SCRIPTS
        .changes
        .as_ref()
        .unwrap_or(&SCRIPTS.poll)
        .prepare_invoke();
    let mut inv = changes;
    inv.key(&index.log).key(&index.expiry).arg(channel);
    match since {
        Some(e) => inv
            .arg(e.counter)
            .arg(e.mark)
            .arg(e.at.as_nanos() / 1_000_000),
        None => inv.arg("").arg("").arg(""),
    };
    inv.arg(max).arg(prefix);
    for request in requests {
        inv.key(key(request.name()));
        match *request {
            PollRequest::BeginHalfOpen {
                wait,
                permitted,
                ttl,
                ..
            } => inv.arg(wait_us(wait)).arg(permitted).arg(ttl_ms(ttl)),
            PollRequest::ReadUnlessAt { version, .. } => inv.arg("=").arg(version).arg(0),
            _ => inv.arg("").arg(0).arg(0),
        };
    }
    inv
}

/// A parsed `changes` reply.
#[derive(Debug)]
pub(crate) struct ChangesReply {
    /// Whether `changed` lists every change since the cursor (else the
    /// cursor was unknown, too old, or too far behind: read everything).
    pub(crate) delta: bool,
    /// The epoch as the script began.
    pub(crate) epoch: Epoch,
    /// Each changed key and its record (or the error of that key alone).
    pub(crate) changed: Vec<(Vec<u8>, Result<SharedState, Value>)>,
    /// One answer per request, as `poll`'s, or `None` where the script
    /// vouched for a [`PollRequest::ReadUnlessAt`]'s version.
    pub(crate) answers: Vec<Option<Result<SharedState, Error>>>,
    /// Why a begin's change notice could not be published, if it could not.
    pub(crate) notice_error: Option<String>,
}

fn text(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// Checks and splits a `changes` reply.
pub(crate) fn parse_changes(
    requests: &[PollRequest<'_>],
    value: &Value,
) -> Result<ChangesReply, Error> {
    const OP: &str = "poll";
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::ServerError(e) => return Err(Error::server(OP, e.clone())),
        _ => return Err(Error::reply(OP, "not an array")),
    };
    let [Value::Array(head), changed, answers] = items else {
        return Err(Error::reply(OP, "not a changes reply"));
    };
    let [mode, epoch, mark, now] = head.as_slice() else {
        return Err(Error::reply(OP, "a changes head of the wrong length"));
    };
    let delta = match text(mode) {
        Some(b"delta") => true,
        Some(b"full") => false,
        _ => return Err(Error::reply(OP, "unknown changes mode")),
    };
    let mark = text(mark)
        .and_then(|m| std::str::from_utf8(m).ok())
        .and_then(|m| m.parse::<u64>().ok())
        .ok_or_else(|| Error::reply(OP, "the epoch mark is not a decimal integer"))?;
    let now_us = int(OP, now, "now", MAX_EXACT)?;
    let epoch = Epoch {
        counter: int(OP, epoch, "epoch", MAX_EXACT)?,
        mark,
        at: Timestamp::from_nanos(now_us.saturating_mul(1_000)),
    };
    let Value::Array(changed) = changed else {
        return Err(Error::reply(OP, "the changed records are not an array"));
    };
    if changed.len() % 2 != 0 {
        return Err(Error::reply(
            OP,
            "the changed records are not key, record pairs",
        ));
    }
    let mut notice_error = None;
    let changed = changed
        .chunks(2)
        .map(|pair| {
            let key = text(&pair[0])
                .ok_or_else(|| Error::reply(OP, "a changed key is not a string"))?
                .to_vec();
            let record = &pair[1];
            if let Value::Array(err) = record
                && let [Value::BulkString(tag), message] = err.as_slice()
                && tag.as_slice() == b"err"
            {
                return Ok((key, Err(message.clone())));
            }
            let parsed = parse("read", record).map(|r| r.state);
            Ok((
                key,
                parsed.map_err(|e| Value::BulkString(e.to_string().into_bytes())),
            ))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let (answers, notice) = parse_answers(requests, answers, true)?;
    notice_error = notice_error.or(notice);
    Ok(ChangesReply {
        delta,
        epoch,
        changed,
        answers,
        notice_error,
    })
}

/// The storage operation a poll request stands for, for error messages.
pub(crate) fn poll_op_name(request: &PollRequest<'_>) -> &'static str {
    match request {
        PollRequest::BeginHalfOpen { .. } => "begin_half_open_if_elapsed",
        _ => "read",
    }
}

/// The answers of a `poll` reply, and why a begin's change notice could not
/// be published, if one could not.
pub(crate) type PollReply = (Vec<Result<SharedState, Error>>, Option<String>);

/// Splits a `poll` reply into one answer per request: a view, or the error
/// of that request alone. A reply of the wrong shape as a whole (not an
/// array, or not one item per request) is an error for the whole batch.
pub(crate) fn parse_poll(requests: &[PollRequest<'_>], value: &Value) -> Result<PollReply, Error> {
    let (answers, notice) = parse_answers(requests, value, false)?;
    let answers = answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(Error::reply("poll", "an answer left out"))))
        .collect();
    Ok((answers, notice))
}

/// The answers of a `poll` or `changes` reply, and the first notice error;
/// with `vouching`, an integer 0 answering a
/// [`PollRequest::ReadUnlessAt`] is `None` (its version vouched for).
#[allow(clippy::type_complexity)]
fn parse_answers(
    requests: &[PollRequest<'_>],
    value: &Value,
    vouching: bool,
) -> Result<(Vec<Option<Result<SharedState, Error>>>, Option<String>), Error> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::ServerError(e) => return Err(Error::server("poll", e.clone())),
        _ => return Err(Error::reply("poll", "not an array")),
    };
    if items.len() != requests.len() {
        return Err(Error::reply(
            "poll",
            format!("{} answers to {} requests", items.len(), requests.len()),
        ));
    }
    let mut notice = None;
    let answers = requests
        .iter()
        .zip(items)
        .map(|(request, item)| {
            let op = poll_op_name(request);
            if vouching
                && matches!(request, PollRequest::ReadUnlessAt { .. })
                && matches!(item, Value::Int(0))
            {
                return None;
            }
            Some(answer(op, item, &mut notice))
        })
        .collect();
    Ok((answers, notice))
}

/// One item of a `poll` or `changes` reply: a view, or the error of its
/// request alone; keeps the first notice error in `notice`.
fn answer(
    op: &'static str,
    item: &Value,
    notice: &mut Option<String>,
) -> Result<SharedState, Error> {
    if let Value::Array(pair) = item
        && let [Value::BulkString(tag), message] = pair.as_slice()
        && tag.as_slice() == b"err"
    {
        return Err(Error::script_item(op, message));
    }
    parse(op, item).map(|reply| {
        *notice = notice.take().or(reply.notice_error);
        reply.state
    })
}

/// A parsed script reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) code: bool,
    pub(crate) state: SharedState,
    /// Why the write's change notice could not be published, if it could
    /// not (the write itself was applied).
    pub(crate) notice_error: Option<String>,
}

impl Reply {
    pub(crate) fn into_read(self) -> Option<SharedState> {
        self.code.then_some(self.state)
    }

    pub(crate) fn into_lease(self) -> ProbeLease {
        ProbeLease {
            granted: self.code,
            state: self.state,
        }
    }
}

fn int(op: &'static str, v: &Value, field: &'static str, max: u64) -> Result<u64, Error> {
    match v {
        Value::Int(n) => u64::try_from(*n)
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| Error::reply(op, format!("{field} out of range"))),
        _ => Err(Error::reply(op, format!("{field} is not an integer"))),
    }
}

fn u32_field(op: &'static str, v: &Value, field: &'static str) -> Result<u32, Error> {
    int(op, v, field, u64::from(u32::MAX)).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn state(op: &'static str, v: &Value) -> Result<State, Error> {
    let bytes: &[u8] = match v {
        Value::BulkString(b) => b,
        Value::SimpleString(s) => s.as_bytes(),
        _ => return Err(Error::reply(op, "state is not a string")),
    };
    match bytes {
        b"closed" => Ok(State::Closed),
        b"open" => Ok(State::Open),
        b"half_open" => Ok(State::HalfOpen),
        _ => Err(Error::reply(op, "unknown state")),
    }
}

/// Checks and converts a script's reply: exactly nine values of the
/// documented types and ranges, or an error (never a panic).
pub(crate) fn parse(op: &'static str, value: &Value) -> Result<Reply, Error> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::ServerError(e) => return Err(Error::server(op, e.clone())),
        _ => return Err(Error::reply(op, "not an array")),
    };
    let [
        code,
        st,
        opened_at,
        version,
        permitted,
        remaining,
        completed,
        failures,
        slows,
        notice,
    ] = items
    else {
        return Err(Error::reply(
            op,
            format!("{} values instead of 10", items.len()),
        ));
    };
    let code = int(op, code, "code", 1)? == 1;
    let opened_at_us = int(op, opened_at, "opened_at", MAX_EXACT)?;
    Ok(Reply {
        code,
        state: SharedState {
            state: state(op, st)?,
            // At most 2^53 µs, so at most about 9.0e18 ns: fits in a u64.
            opened_at: Timestamp::from_nanos(opened_at_us.saturating_mul(1_000)),
            version: int(op, version, "version", MAX_VERSION)?,
            probes_permitted: u32_field(op, permitted, "probes_permitted")?,
            probes_remaining: u32_field(op, remaining, "probes_remaining")?,
            probes_completed: u32_field(op, completed, "probes_completed")?,
            probe_failures: u32_field(op, failures, "probe_failures")?,
            probe_slows: u32_field(op, slows, "probe_slows")?,
        },
        notice_error: notice_error(op, notice)?,
    })
}

/// The tenth value: empty when the notice was published (or none was due).
fn notice_error(op: &'static str, v: &Value) -> Result<Option<String>, Error> {
    let text = match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return Err(Error::reply(op, "the notice status is not a string")),
    };
    Ok((!text.is_empty()).then_some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(items: Vec<Value>) -> Value {
        Value::Array(items)
    }

    fn good() -> Vec<Value> {
        let mut v = vec![Value::Int(1), Value::BulkString(b"half_open".to_vec())];
        v.extend([1_700_000_000_000_000, 7, 3, 2, 1, 1, 0].map(Value::Int));
        v.push(Value::BulkString(Vec::new()));
        v
    }

    #[test]
    fn a_well_formed_reply_parses() {
        let r = parse("read", &reply(good())).unwrap();
        assert!(r.code);
        assert_eq!(r.state.state, State::HalfOpen);
        assert_eq!(r.state.opened_at.as_secs(), 1_700_000_000);
        assert_eq!(
            (
                r.state.version,
                r.state.probes_permitted,
                r.state.probes_remaining
            ),
            (7, 3, 2)
        );
        assert_eq!(r.notice_error, None);
        let mut refused = good();
        refused[9] = Value::BulkString(b"NOPERM no channel".to_vec());
        let r = parse("trip_open", &reply(refused)).unwrap();
        assert_eq!(r.notice_error.as_deref(), Some("NOPERM no channel"));
    }

    #[test]
    fn malformed_replies_are_errors_not_panics() {
        let mut cases: Vec<Value> = vec![
            Value::Nil,
            Value::Int(3),
            Value::Okay,
            reply(vec![]),
            reply(good()[..9].to_vec()),
        ];
        let mut push = |i: usize, v: Value| {
            let mut items = good();
            items[i] = v;
            cases.push(reply(items));
        };
        push(0, Value::Int(2));
        push(1, Value::BulkString(b"ajar".to_vec()));
        push(1, Value::Int(0));
        push(2, Value::Int(-1));
        push(3, Value::Int(i64::MAX));
        push(3, Value::Int(1 << 53)); // above MAX_VERSION: would stop fencing
        push(9, Value::Int(0));
        push(4, Value::Int(1 << 40));
        push(5, Value::BulkString(b"1".to_vec()));
        push(8, Value::Nil);
        for case in cases {
            let err = parse("read", &case).unwrap_err();
            assert!(err.is_corrupt(), "{case:?}: {err}");
        }
    }

    #[test]
    fn a_poll_reply_is_split_per_request_and_bad_shapes_are_errors() {
        let reqs = [
            PollRequest::Read { name: "a" },
            PollRequest::BeginHalfOpen {
                name: "b",
                wait: Duration::ZERO,
                permitted: 1,
                ttl: Duration::from_secs(1),
            },
            PollRequest::Read { name: "c" },
        ];
        let err = |msg: &[u8]| {
            reply(vec![
                Value::BulkString(b"err".to_vec()),
                Value::BulkString(msg.to_vec()),
            ])
        };
        let value = reply(vec![
            reply(good()),
            err(b"interlock: field version is out of range (corrupt or foreign breaker hash)"),
            err(b"WRONGTYPE Operation against a key holding the wrong kind of value"),
        ]);
        let (answers, notice) = parse_poll(&reqs, &value).unwrap();
        assert_eq!(notice, None);
        assert_eq!(answers[0].as_ref().unwrap().version, 7);
        let corrupt = answers[1].as_ref().unwrap_err();
        assert!(corrupt.is_corrupt());
        assert_eq!(corrupt.operation(), "begin_half_open_if_elapsed");
        let wrong = answers[2].as_ref().unwrap_err();
        assert!(!wrong.is_corrupt() && wrong.redis_error().is_some());
        assert_eq!(wrong.operation(), "read");

        for bad in [
            Value::Nil,
            Value::Int(1),
            reply(vec![reply(good())]),
            reply(vec![reply(good()); 4]),
        ] {
            let e = parse_poll(&reqs, &bad).unwrap_err();
            assert_eq!(e.operation(), "poll");
        }
        // An item of the wrong shape fails its own answer only.
        let value = reply(vec![
            Value::Int(3),
            reply(vec![Value::BulkString(b"err".to_vec()), Value::Int(1)]),
            reply(good()),
        ]);
        let (answers, _) = parse_poll(&reqs, &value).unwrap();
        assert!(answers[0].as_ref().unwrap_err().is_corrupt());
        assert!(answers[1].as_ref().unwrap_err().is_corrupt());
        assert!(answers[2].is_ok());
    }

    #[test]
    fn a_changes_reply_leaves_out_only_vouched_read_unless_ats() {
        let reqs = [
            PollRequest::ReadUnlessAt {
                name: "a",
                version: 7,
            },
            PollRequest::Read { name: "b" },
            PollRequest::ReadUnlessAt {
                name: "c",
                version: 2,
            },
        ];
        let head = reply(vec![
            Value::BulkString(b"delta".to_vec()),
            Value::Int(5),
            Value::BulkString(b"1700000000000000".to_vec()),
            Value::Int(1_700_000_000_000_000),
        ]);
        let value = reply(vec![
            head,
            reply(vec![]),
            reply(vec![Value::Int(0), Value::Int(0), reply(good())]),
        ]);
        let parsed = parse_changes(&reqs, &value).unwrap();
        assert!(parsed.delta);
        assert!(parsed.answers[0].is_none(), "vouched for");
        // A 0 for a plain read is a malformed answer, not a promise.
        assert!(parsed.answers[1].as_ref().unwrap().is_err());
        assert_eq!(
            parsed.answers[2]
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap()
                .version,
            7
        );
        // `poll` replies never vouch.
        let (answers, _) = parse_poll(
            &reqs,
            &reply(vec![Value::Int(0), reply(good()), reply(good())]),
        )
        .unwrap();
        assert!(answers[0].is_err());
    }

    #[test]
    fn durations_round_up_and_are_clamped() {
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_micros(1)), 1);
        assert_eq!(ttl_ms(Duration::from_micros(1_001)), 2);
        assert_eq!(ttl_ms(Duration::from_secs(300)), 300_000);
        assert_eq!(ttl_ms(Duration::MAX), MAX_TTL_MS);
        assert_eq!(wait_us(Duration::from_nanos(1)), 1);
        assert_eq!(wait_us(Duration::from_secs(10)), 10_000_000);
        assert_eq!(wait_us(Duration::MAX), MAX_EXACT);
    }

    #[test]
    fn the_scripts_bounds_are_the_crates() {
        assert!(PRELUDE.contains(&format!("local MAX_VERSION = {MAX_VERSION}\n")));
        assert!(PRELUDE.contains(&format!("local MAX_EXACT = {MAX_EXACT}\n")));
        assert!(PRELUDE.contains(&format!("local MAX_U32 = {}\n", u32::MAX)));
    }

    #[test]
    fn every_script_has_its_own_digest() {
        let mut d = digests().to_vec();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 11);
    }

    #[test]
    fn confirm_keeps_the_retention_of_the_prelude() {
        assert!(PRELUDE.contains("local EXPIRY_RETAIN_MS = 3600000\n"));
        assert!(CONFIRM.contains("local EXPIRY_RETAIN_MS = 3600000\n"));
    }

    #[test]
    fn a_confirm_reply_is_a_time_or_a_no() {
        assert_eq!(parse_confirm(&Value::Int(0)).unwrap(), None);
        assert_eq!(
            parse_confirm(&Value::Int(1_700_000_000_000_000)).unwrap(),
            Some(Timestamp::from_nanos(1_700_000_000_000_000_000))
        );
        for bad in [
            Value::Nil,
            Value::Int(-1),
            Value::Okay,
            Value::Array(vec![]),
        ] {
            assert!(parse_confirm(&bad).unwrap_err().is_corrupt(), "{bad:?}");
        }
    }
}
