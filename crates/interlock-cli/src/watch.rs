//! `watch`: polls every breaker under the prefix and prints each change.
//!
//! Each poll is a full [`Snapshot`] compared with
//! the previous one, so a breaker that changed several times between two
//! polls shows as one step (its version tells how many writes it skipped).
//! Polls run every `--interval`, and at once whenever the storage pushes a
//! change notice ([`Storage::subscribe`]; the Redis storage publishes one
//! with every applied write), so changes show within a round trip where
//! notices reach us, and within one interval where they do not.
//! A poll that fails (Redis restarting) is reported once on stderr and
//! retried at the next tick; the comparison resumes from the last good
//! poll.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use interlock::storage::{Notice, NoticeHandler, NoticeSink, SharedState, Storage};
use interlock::{Clock, MonotonicClock, Timestamp};
use serde::Serialize;

use crate::args::WatchArgs;
use crate::duration;
use crate::error::CliError;
use crate::render;
use crate::target::{Row, Snapshot, Target};

/// What happened to one breaker between two polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Change {
    /// Its state at the first poll (not counted as a change).
    Present,
    /// A key appeared.
    Appeared,
    /// The state changed.
    Changed,
    /// The key expired or was deleted: the breaker reads as CLOSED again.
    Gone,
}

/// One line of `watch --json`.
#[derive(Debug, Serialize)]
struct EventJson<'a> {
    /// The server's clock at the poll that saw it, RFC 3339 UTC.
    at: String,
    change: Change,
    name: &'a str,
    /// The state before (`changed`, `gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<StateJson>,
    /// The breaker now (absent for `gone`).
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<render::BreakerJson<'a>>,
}

/// A state and version, for `from`.
#[derive(Debug, Serialize)]
struct StateJson {
    state: &'static str,
    version: u64,
}

/// The shortest time between two polls woken by change notices.
const NOTICE_GAP: Duration = Duration::from_millis(100);

/// What the last good poll saw of one breaker.
type Seen = Result<SharedState, String>;

fn seen_text(seen: &Seen) -> String {
    match seen {
        Ok(s) => render::brief(s),
        Err(reason) => format!("UNREADABLE ({reason})"),
    }
}

/// Prints events as text or JSON lines, and counts changes.
struct Printer<'a> {
    out: &'a mut dyn Write,
    json: bool,
    changes: u64,
}

impl Printer<'_> {
    fn print(
        &mut self,
        at: Timestamp,
        change: Change,
        name: &str,
        before: Option<&Seen>,
        row: Option<&Row>,
    ) -> io::Result<()> {
        if change != Change::Present {
            self.changes += 1;
        }
        if self.json {
            let event = EventJson {
                at: duration::rfc3339(at),
                change,
                name,
                from: before.and_then(|b| b.as_ref().ok()).map(|s| StateJson {
                    state: s.state.as_str(),
                    version: s.version,
                }),
                to: row.map(|r| render::json(r, at)),
            };
            let line = serde_json::to_string(&event).map_err(io::Error::other)?;
            return writeln!(self.out, "{line}");
        }
        let now = row.map_or_else(|| "CLOSED v0".to_owned(), |r| seen_text(&r.state));
        let what = match (change, before) {
            (Change::Present, _) => now,
            (Change::Appeared, _) => format!("appeared: {now}"),
            (Change::Changed, Some(before)) => format!("{} -> {now}", seen_text(before)),
            (Change::Changed, None) => now,
            (Change::Gone, before) => format!(
                "{}gone (expired or deleted): reads as CLOSED",
                before.map_or_else(String::new, |b| format!("{} -> ", seen_text(b)))
            ),
        };
        writeln!(
            self.out,
            "{}  {}: {what}",
            duration::time_of_day(at),
            render::name(name)
        )
    }
}

/// Runs `watch` until `--count` changes were printed, `--for` passed, or
/// the process is interrupted.
///
/// # Errors
///
/// When the first poll fails (a failure later is retried), or when the
/// output cannot be written.
pub(crate) fn run(
    target: &mut Target,
    args: &WatchArgs,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), CliError> {
    let clock = MonotonicClock;
    let start = clock.now();
    let end = args.duration.map(|d| start.saturating_add(d));
    // Subscribe before the first poll, so no change falls between them.
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let handler: Arc<NoticeHandler> = Arc::new(move |_: Notice<'_>| {
        let _ = wake_tx.send(());
    });
    let pushed = target.storage().subscribe(NoticeSink::new(&handler));
    let first = target.snapshot()?;
    let mut printer = Printer {
        out,
        json: args.json,
        changes: 0,
    };
    writeln!(
        notes,
        "watching {} breaker(s) under `{}` on {}, polling every {}{}; Ctrl-C to stop",
        first.rows.len(),
        target.prefix(),
        target.url(),
        duration::human(args.interval),
        if pushed {
            " and on every change notice"
        } else {
            ""
        }
    )?;
    let mut known: BTreeMap<String, Seen> = BTreeMap::new();
    for row in &first.rows {
        printer.print(
            first.server_time,
            Change::Present,
            &row.name,
            None,
            Some(row),
        )?;
        known.insert(row.name.clone(), row.state.clone());
    }
    printer.out.flush()?;

    let mut next = start.saturating_add(args.interval);
    let mut last_poll = clock.now();
    let mut down = false;
    loop {
        if args.count.is_some_and(|n| printer.changes >= n) {
            return Ok(());
        }
        let wake = end.map_or(next, |end| end.min(next));
        let noticed = wait(&clock, wake, &wake_rx);
        if end.is_some_and(|end| clock.now() >= end) {
            return Ok(());
        }
        if noticed {
            // A busy fleet publishes a notice with every probe lease:
            // answer them with at most one poll per `NOTICE_GAP`.
            park_until(&clock, last_poll.saturating_add(NOTICE_GAP));
            while wake_rx.try_recv().is_ok() {}
        } else {
            next = next.saturating_add(args.interval).max(clock.now());
        }
        last_poll = clock.now();
        // A connection pooled before Redis restarted fails once; the
        // storage drops it, so one immediate retry tells a restart from an
        // outage.
        match target.snapshot().or_else(|_| target.snapshot()) {
            Ok(snapshot) => {
                if down {
                    writeln!(notes, "redis answers again")?;
                    down = false;
                }
                let remaining = args.count.map(|n| n - printer.changes);
                diff(&mut printer, &mut known, &snapshot, remaining)?;
                printer.out.flush()?;
            }
            Err(e) => {
                if !down {
                    let every = duration::human(args.interval);
                    writeln!(notes, "poll failed: {e}; retrying every {every}")?;
                    down = true;
                }
            }
        }
    }
}

/// Prints what changed from `known` to `snapshot` (at most `limit` changes)
/// and remembers the new states.
fn diff(
    printer: &mut Printer<'_>,
    known: &mut BTreeMap<String, Seen>,
    snapshot: &Snapshot,
    limit: Option<u64>,
) -> io::Result<()> {
    let at = snapshot.server_time;
    let mut budget = limit.unwrap_or(u64::MAX);
    let mut current: BTreeMap<&str, &Row> = BTreeMap::new();
    for row in &snapshot.rows {
        current.insert(&row.name, row);
    }
    for (name, row) in &current {
        if budget == 0 {
            return Ok(());
        }
        match known.get(*name) {
            Some(before) if *before == row.state => continue,
            Some(before) => printer.print(at, Change::Changed, name, Some(before), Some(row))?,
            None => printer.print(at, Change::Appeared, name, None, Some(row))?,
        }
        budget -= 1;
        known.insert((*name).to_owned(), row.state.clone());
    }
    let gone: Vec<String> = known
        .keys()
        .filter(|name| !current.contains_key(name.as_str()))
        .cloned()
        .collect();
    for name in gone {
        if budget == 0 {
            return Ok(());
        }
        let before = known.remove(&name);
        printer.print(at, Change::Gone, &name, before.as_ref(), None)?;
        budget -= 1;
    }
    Ok(())
}

/// Waits until `deadline` on `clock` or until a change notice arrives,
/// whichever is first; returns whether a notice woke it (the queued notices
/// are all taken: one poll answers them all).
fn wait(clock: &MonotonicClock, deadline: Timestamp, notices: &Receiver<()>) -> bool {
    let timeout = deadline.saturating_duration_since(clock.now());
    match notices.recv_timeout(timeout) {
        Ok(()) => {
            while notices.try_recv().is_ok() {}
            true
        }
        // Disconnected cannot happen while `run` holds the handler; should
        // it, waiting out the deadline is the polling fallback.
        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
            park_until(clock, deadline);
            false
        }
    }
}

/// Parks the thread until `deadline` on `clock` (no `thread::sleep`: the
/// clock is the one time source).
fn park_until(clock: &MonotonicClock, deadline: Timestamp) {
    loop {
        let now = clock.now();
        if now >= deadline {
            return;
        }
        std::thread::park_timeout(deadline.saturating_duration_since(now));
    }
}
