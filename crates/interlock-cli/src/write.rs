//! `trip` and `close`: fenced writes through the storage contract.
//!
//! The command reads the breaker, shows it to the operator, asks, and then
//! writes with `expected_version` = the version it showed. If anything
//! wrote in between, the storage applies nothing and returns the newer
//! state, which is reported instead of overwritten.

use std::io::{BufRead, Write};

use interlock::State;
use interlock::storage::{SharedState, Storage};

use crate::args::WriteArgs;
use crate::duration;
use crate::error::CliError;
use crate::render;
use crate::target::Target;

/// The largest version the Redis storage writes (2^53 − 1, exact in Lua);
/// a write at this version leaves it unchanged.
const MAX_VERSION: u64 = (1 << 53) - 1;

/// Which write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// `Storage::trip_open`.
    Trip,
    /// `Storage::close`.
    Close,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Action::Trip => "trip",
            Action::Close => "close",
        }
    }

    fn target_state(self) -> State {
        match self {
            Action::Trip => State::Open,
            Action::Close => State::Closed,
        }
    }
}

/// Where the operator is: the answer comes from `input`, and questions and
/// notes go to `notes`; `interactive` says whether `input` is a terminal.
pub(crate) struct Operator<'a> {
    pub(crate) input: &'a mut dyn BufRead,
    pub(crate) interactive: bool,
    pub(crate) notes: &'a mut dyn Write,
}

/// The version an applied write leaves, starting from `version`.
fn bumped(version: u64) -> u64 {
    if version < MAX_VERSION {
        version + 1
    } else {
        version
    }
}

/// Runs `trip` or `close`.
///
/// # Errors
///
/// [`CliError::Changed`] when the state is not the one shown (or
/// `--expect-version`), [`CliError::Declined`] without confirmation,
/// [`CliError::Absent`] for `close` of a breaker with no shared state,
/// and Redis failures.
pub(crate) fn run(
    target: &mut Target,
    action: Action,
    args: &WriteArgs,
    operator: Operator<'_>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let name = args.name.as_str();
    let shown = render::name(name);
    let key = target.storage().key(name);
    let ttl = args
        .ttl
        .unwrap_or_else(|| target.storage().settings().state_ttl());

    let current = target.read(name)?;
    let seen = current.unwrap_or_else(SharedState::closed);
    match current {
        Some(s) => writeln!(
            operator.notes,
            "{shown} is {} (key {key})",
            render::brief(&s)
        )?,
        None => writeln!(
            operator.notes,
            "{shown} has no shared state: it reads as CLOSED v0 (key {key})"
        )?,
    }

    if let Some(expected) = args.expect_version.filter(|v| *v != seen.version) {
        return Err(CliError::Changed {
            message: format!(
                "state changed since you looked: {shown} is now {}, not v{expected}; \
                 nothing written",
                render::brief(&seen)
            ),
        });
    }

    match action {
        Action::Trip if seen.state == State::Open => {
            writeln!(
                out,
                "{shown} is already {}; nothing written",
                render::brief(&seen)
            )?;
            return Ok(());
        }
        Action::Close if current.is_none() => {
            return Err(CliError::Absent {
                name: shown.into_owned(),
                prefix: target.prefix().to_owned(),
            });
        }
        Action::Close if seen.state == State::Closed => {
            writeln!(
                out,
                "{shown} is already {}; nothing written",
                render::brief(&seen)
            )?;
            return Ok(());
        }
        _ => {}
    }

    if !args.yes {
        confirm(target, action, &shown, operator)?;
    }

    let written = match action {
        Action::Trip => target.storage().trip_open(name, ttl, Some(seen.version)),
        Action::Close => target.storage().close(name, ttl, Some(seen.version)),
    }
    .map_err(|e| {
        CliError::storage(
            format!(
                "cannot {} {shown} (the write may or may not have been applied: \
                 check with `interlock show`)",
                action.verb()
            ),
            e,
        )
    })?;

    let applied = written.state == action.target_state() && written.version == bumped(seen.version);
    if !applied {
        return Err(CliError::Changed {
            message: format!(
                "state changed since you looked: {shown} is now {} (you saw {}); nothing written",
                render::brief(&written),
                render::brief(&seen)
            ),
        });
    }
    let past = match action {
        Action::Trip => "tripped",
        Action::Close => "closed",
    };
    writeln!(
        out,
        "{past} {shown}: now {} (was {}; key expires in {})",
        render::brief(&written),
        render::brief(&seen),
        duration::human(ttl)
    )?;
    Ok(())
}

/// Asks the operator; anything but `y` or `yes` declines.
fn confirm(
    target: &Target,
    action: Action,
    shown: &str,
    operator: Operator<'_>,
) -> Result<(), CliError> {
    let verb = action.verb();
    if !operator.interactive {
        return Err(CliError::Declined(format!(
            "not confirmed: stdin is not a terminal, so nobody can be asked (pass --yes to \
             {verb} {shown} anyway); nothing written"
        )));
    }
    let consequence = match action {
        Action::Trip => "Every instance will reject its calls until the breaker recovers.",
        Action::Close => "Every instance will admit its calls again.",
    };
    write!(
        operator.notes,
        "{consequence}\n{} {shown} on {} (prefix `{}`)? [y/N] ",
        match action {
            Action::Trip => "Trip",
            Action::Close => "Close",
        },
        target.url(),
        target.prefix()
    )?;
    operator.notes.flush()?;
    let mut answer = String::new();
    let read = operator.input.read_line(&mut answer);
    let yes = read.is_ok_and(|n| n > 0)
        && matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if yes {
        Ok(())
    } else {
        Err(CliError::Declined(
            "not confirmed; nothing written".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_applied_write_bumps_the_version_except_at_the_ceiling() {
        assert_eq!(bumped(0), 1);
        assert_eq!(bumped(41), 42);
        assert_eq!(bumped(MAX_VERSION), MAX_VERSION);
    }
}
