//! How breakers are printed: a table, a detail view, and JSON.
//!
//! Names come from whoever wrote to Redis, so a name that could confuse a
//! terminal (control characters, escape sequences, bidirectional
//! overrides, leading or trailing blanks, the empty name) is printed
//! quoted with Rust's escapes, never raw.

use std::io::{self, Write};

use interlock::storage::SharedState;
use interlock::{State, Timestamp};
use interlock_redis::inspect::Expiry;
use serde::Serialize;

use crate::duration;
use crate::target::{Row, Snapshot};

pub(crate) use crate::escape::name;

/// A state as operators read it: `CLOSED`, `OPEN`, `HALF_OPEN`.
pub(crate) fn state(state: State) -> String {
    state.as_str().to_ascii_uppercase()
}

/// `OPEN v4`, plus the probe tally when HALF_OPEN.
pub(crate) fn brief(s: &SharedState) -> String {
    let mut text = format!("{} v{}", state(s.state), s.version);
    if s.state == State::HalfOpen {
        text.push_str(&format!(" (probes {})", probes(s)));
    }
    text
}

/// `1/3 left, 2 done, 1 failed, 0 slow`.
fn probes(s: &SharedState) -> String {
    format!(
        "{}/{} left, {} done, {} failed, {} slow",
        s.probes_remaining, s.probes_permitted, s.probes_completed, s.probe_failures, s.probe_slows
    )
}

/// Whether `opened_at` means anything: CLOSED keeps it at zero.
fn opened_at(s: &SharedState) -> Option<Timestamp> {
    (s.state != State::Closed && s.opened_at > Timestamp::ZERO).then_some(s.opened_at)
}

fn expiry_text(e: Expiry) -> String {
    match e {
        Expiry::In(d) => duration::human(d),
        Expiry::Never => "never".to_owned(),
        _ => "-".to_owned(), // Missing, or a kind added later
    }
}

/// The `list` table.
///
/// # Errors
///
/// When the output cannot be written.
pub(crate) fn table(out: &mut dyn Write, snapshot: &Snapshot) -> io::Result<()> {
    let header = ["STATE", "VERSION", "OPENED", "EXPIRES", "PROBES", "NAME"];
    let mut lines: Vec<[String; 6]> = Vec::with_capacity(snapshot.rows.len());
    for row in &snapshot.rows {
        let shown = name(&row.name).into_owned();
        let line = match &row.state {
            Ok(s) => [
                state(s.state),
                format!("v{}", s.version),
                opened_at(s).map_or_else(
                    || "-".to_owned(),
                    |t| {
                        format!(
                            "{} ago",
                            duration::human(snapshot.server_time.saturating_duration_since(t))
                        )
                    },
                ),
                expiry_text(row.expiry),
                if s.state == State::HalfOpen {
                    probes(s)
                } else {
                    "-".to_owned()
                },
                shown,
            ],
            Err(reason) => [
                "UNREADABLE".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
                expiry_text(row.expiry),
                format!("({reason})"),
                shown,
            ],
        };
        lines.push(line);
    }
    let mut widths = header.map(str::len);
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut print = |cells: &[&str]| -> io::Result<()> {
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell); // the name, last, is never padded
            } else {
                let pad = widths[i] - cell.chars().count();
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', pad + 2));
            }
        }
        writeln!(out, "{text}")
    };
    print(&header)?;
    for line in &lines {
        let cells: Vec<&str> = line.iter().map(String::as_str).collect();
        print(&cells)?;
    }
    Ok(())
}

/// The `show` view.
///
/// # Errors
///
/// When the output cannot be written.
pub(crate) fn detail(out: &mut dyn Write, row: &Row, server_time: Timestamp) -> io::Result<()> {
    writeln!(out, "name:        {}", name(&row.name))?;
    writeln!(out, "key:         {}", name(&row.key))?;
    let s = match &row.state {
        Ok(s) => s,
        Err(reason) => return writeln!(out, "state:       UNREADABLE ({reason})"),
    };
    writeln!(out, "state:       {}", state(s.state))?;
    writeln!(out, "version:     {}", s.version)?;
    if let Some(t) = opened_at(s) {
        writeln!(
            out,
            "opened at:   {} ({} ago, server clock)",
            duration::rfc3339(t),
            duration::human(server_time.saturating_duration_since(t))
        )?;
    }
    if s.state == State::HalfOpen {
        writeln!(out, "probes:      {}", probes(s))?;
    }
    writeln!(
        out,
        "expires in:  {} (every write renews it; an expired key reads as CLOSED)",
        expiry_text(row.expiry)
    )
}

/// A breaker's probe round in JSON.
#[derive(Debug, Serialize)]
pub(crate) struct ProbesJson {
    permitted: u32,
    remaining: u32,
    completed: u32,
    failures: u32,
    slows: u32,
}

/// A breaker in JSON (`list`, `show`, `watch`).
#[derive(Debug, Serialize)]
pub(crate) struct BreakerJson<'a> {
    name: &'a str,
    key: &'a str,
    /// `closed`, `open`, `half_open`, or absent when unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    /// RFC 3339 UTC, server clock; null unless OPEN or HALF_OPEN.
    opened_at: Option<String>,
    /// Time since `opened_at` on the server's clock.
    open_for_ms: Option<u128>,
    /// Null when the key has no expiry or is gone.
    expires_in_ms: Option<u128>,
    /// Only while HALF_OPEN.
    probes: Option<ProbesJson>,
    /// Why the key could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// `row` as JSON, ages measured at `server_time`.
pub(crate) fn json(row: &Row, server_time: Timestamp) -> BreakerJson<'_> {
    let expires_in_ms = match row.expiry {
        Expiry::In(d) => Some(d.as_millis()),
        _ => None,
    };
    match &row.state {
        Ok(s) => BreakerJson {
            name: &row.name,
            key: &row.key,
            state: Some(s.state.as_str()),
            version: Some(s.version),
            opened_at: opened_at(s).map(duration::rfc3339),
            open_for_ms: opened_at(s).map(|t| server_time.saturating_duration_since(t).as_millis()),
            expires_in_ms,
            probes: (s.state == State::HalfOpen).then_some(ProbesJson {
                permitted: s.probes_permitted,
                remaining: s.probes_remaining,
                completed: s.probes_completed,
                failures: s.probe_failures,
                slows: s.probe_slows,
            }),
            error: None,
        },
        Err(reason) => BreakerJson {
            name: &row.name,
            key: &row.key,
            state: None,
            version: None,
            opened_at: None,
            open_for_ms: None,
            expires_in_ms,
            probes: None,
            error: Some(reason),
        },
    }
}

/// The `list --json` document.
#[derive(Debug, Serialize)]
pub(crate) struct ListJson<'a> {
    /// The key prefix listed.
    pub(crate) prefix: &'a str,
    /// The server's clock at the listing, RFC 3339 UTC.
    pub(crate) server_time: String,
    /// The breakers, sorted by name.
    pub(crate) breakers: Vec<BreakerJson<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn harmless_names_print_as_they_are_and_others_quoted() {
        for plain in ["payments", "with space", "名前-ü", "{cb}", "100%", "it's"] {
            assert_eq!(name(plain), plain);
        }
        let quoted = [
            ("", r#""""#),
            (" lead", r#"" lead""#),
            ("a\tb", r#""a\tb""#),
            ("x\u{1b}[2J", r#""x\u{1b}[2J""#),
            ("rtl\u{202e}txet", r#""rtl\u{202e}txet""#),
            ("\"q\"", r#""\"q\"""#),
        ];
        for (raw, want) in quoted {
            assert_eq!(name(raw), want, "{raw:?}");
        }
    }

    fn half_open() -> SharedState {
        SharedState {
            state: State::HalfOpen,
            opened_at: Timestamp::from_secs(1_000),
            version: 9,
            probes_permitted: 3,
            probes_remaining: 1,
            probes_completed: 2,
            probe_failures: 1,
            probe_slows: 0,
        }
    }

    #[test]
    fn the_table_aligns_every_column_but_the_last() {
        let row = |n: &str, state| Row {
            name: n.to_owned(),
            key: format!("p:{n}"),
            state,
            expiry: Expiry::In(Duration::from_secs(299)),
        };
        let snapshot = Snapshot {
            server_time: Timestamp::from_secs(1_012),
            rows: vec![
                row("a", Ok(SharedState::closed())),
                row("search", Ok(half_open())),
                row("bad", Err("refused".to_owned())),
            ],
        };
        let mut out = Vec::new();
        table(&mut out, &snapshot).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(
            lines[0].starts_with("STATE       VERSION  OPENED"),
            "{text}"
        );
        assert!(
            lines[2].contains("HALF_OPEN   v9       12.0s ago  4m59s"),
            "{text}"
        );
        assert!(
            lines[2].ends_with("1/3 left, 2 done, 1 failed, 0 slow  search"),
            "{text}"
        );
        assert!(lines[3].starts_with("UNREADABLE"), "{text}");
    }

    #[test]
    fn json_has_nulls_where_nothing_applies() {
        let row = Row {
            name: "db".to_owned(),
            key: "p:db".to_owned(),
            state: Ok(SharedState::closed()),
            expiry: Expiry::Missing,
        };
        let v = serde_json::to_value(json(&row, Timestamp::from_secs(5))).unwrap();
        assert_eq!(v["state"], "closed");
        assert!(v["opened_at"].is_null() && v["probes"].is_null() && v["expires_in_ms"].is_null());
        assert!(v.get("error").is_none());
    }
}
