//! `interlock`: look at and steer the circuit breakers an interlock fleet
//! shares in Redis (through `interlock-redis`).
//!
//! ```text
//! interlock list                       # every breaker under the prefix
//! interlock show payments              # one breaker in detail
//! interlock watch --interval 500ms     # every change, live, until Ctrl-C
//! interlock trip payments              # open it fleet-wide (asks first)
//! interlock close payments --yes       # close it fleet-wide
//! ```
//!
//! Reads and writes go through the storage contract
//! ([`interlock::storage::Storage`]): `trip` and `close` are fenced by the
//! version the operator was shown, so a write never overwrites a state the
//! operator has not seen. Listing uses `SCAN`, never `KEYS`. See the
//! crate's README for output and exit codes.
#![forbid(unsafe_code)]

mod args;
mod duration;
mod error;
mod escape;
mod render;
mod target;
mod watch;
mod write;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::args::{Args, Command};
use crate::error::CliError;
use crate::target::Target;
use crate::write::{Action, Operator};

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            // If stderr is gone too there is nobody left to tell.
            let _ = writeln!(io::stderr().lock(), "interlock: {e}");
            e.exit_code()
        }
    }
}

/// Rejects names no breaker can have been given by mistake: the empty one.
///
/// # Errors
///
/// [`CliError::Usage`] for an empty name.
pub(crate) fn check_name(name: &str) -> Result<(), CliError> {
    if name.is_empty() {
        return Err(CliError::Usage(
            "the breaker name is empty; give it as the services know it".to_owned(),
        ));
    }
    Ok(())
}

fn run(args: &Args) -> Result<(), CliError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let stderr = io::stderr();
    // Bad input is reported before anything is sent.
    match &args.command {
        Command::Show { name, .. } => check_name(name)?,
        Command::Trip(w) | Command::Close(w) => check_name(&w.name)?,
        Command::List { .. } | Command::Watch(_) => {}
    }
    let mut target = Target::connect(&args.global)?;
    match &args.command {
        Command::List { json } => list(&mut target, *json, &mut out),
        Command::Show { name, json } => show(&mut target, name, *json, &mut out),
        Command::Watch(watch) => watch::run(&mut target, watch, &mut out, &mut stderr.lock()),
        Command::Trip(w) | Command::Close(w) => {
            let action = if matches!(args.command, Command::Trip(_)) {
                Action::Trip
            } else {
                Action::Close
            };
            let stdin = io::stdin();
            let interactive = stdin.is_terminal();
            let mut input = stdin.lock();
            let mut notes = stderr.lock();
            let operator = Operator {
                input: &mut input,
                interactive,
                notes: &mut notes,
            };
            write::run(&mut target, action, w, operator, &mut out)
        }
    }?;
    out.flush()?;
    Ok(())
}

/// `list`.
fn list(target: &mut Target, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let snapshot = target.snapshot()?;
    if json {
        let doc = render::ListJson {
            prefix: target.prefix(),
            server_time: duration::rfc3339(snapshot.server_time),
            breakers: snapshot
                .rows
                .iter()
                .map(|row| render::json(row, snapshot.server_time))
                .collect(),
        };
        serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
        writeln!(out)?;
    } else if snapshot.rows.is_empty() {
        writeln!(
            io::stderr().lock(),
            "no breakers with shared state under `{}` on {} (a breaker without a key reads as \
             CLOSED)",
            target.prefix(),
            target.url()
        )?;
    } else {
        render::table(out, &snapshot)?;
    }
    Ok(())
}

/// `show NAME`.
fn show(target: &mut Target, name: &str, json: bool, out: &mut dyn Write) -> Result<(), CliError> {
    let Some(row) = target.row(name)? else {
        return Err(CliError::Absent {
            name: render::name(name).into_owned(),
            prefix: target.prefix().to_owned(),
        });
    };
    let server_time = target.server_time()?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &render::json(&row, server_time))
            .map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        render::detail(out, &row, server_time)?;
    }
    Ok(())
}
