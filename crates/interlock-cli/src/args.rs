//! The command line, parsed with clap's derive API.

use std::time::Duration;

use clap::{Args as ClapArgs, Parser, Subcommand};
use interlock_redis::Layout;

use crate::duration;

/// Look at and steer the circuit breakers an interlock fleet shares in
/// Redis.
///
/// Reads go through the same scripts the services use; `trip` and `close`
/// are fenced writes: they apply only if the breaker is still at the
/// version you were shown.
#[derive(Debug, Parser)]
#[command(name = "interlock", version, max_term_width = 100)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  redis unreachable, or an operation failed
  2  bad arguments (URL, prefix, name, options)
  3  the breaker has no shared state (show, close)
  4  the state changed since you looked: nothing written (trip, close)
  5  not confirmed: nothing written (trip, close)";

/// Where the breakers live.
#[derive(Debug, ClapArgs)]
pub(crate) struct Global {
    /// Redis URL: `redis://[user:password@]host[:port][/db]` or
    /// `redis+unix:///path`.
    #[arg(
        long,
        global = true,
        env = "INTERLOCK_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/",
        hide_env_values = true
    )]
    pub(crate) url: String,

    /// Key prefix of the storage, as configured in the services [default:
    /// `interlock:{cb}:`, or `interlock:cb:` with `--layout interlock-cb`].
    #[arg(long, global = true)]
    pub(crate) prefix: Option<String>,

    /// Redis layout of the services: `interlock` (this library's), or
    /// `interlock-cb` for breakers shared with services running the Python
    /// original, interlock-cb 2.8 (names verbatim in the keys, no change
    /// notices).
    #[arg(
        long,
        global = true,
        env = "INTERLOCK_LAYOUT",
        default_value = "interlock",
        value_parser = parse_layout
    )]
    pub(crate) layout: Layout,

    /// Connect and response timeout for each Redis command.
    #[arg(long, global = true, default_value = "2s", value_parser = duration::parse)]
    pub(crate) timeout: Duration,
}

fn parse_layout(s: &str) -> Result<Layout, String> {
    s.parse()
        .map_err(|e: interlock_redis::UnknownLayout| e.to_string())
}

impl Global {
    /// `--prefix`, or the layout's default.
    pub(crate) fn prefix(&self) -> &str {
        self.prefix
            .as_deref()
            .unwrap_or_else(|| self.layout.default_prefix())
    }
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List every breaker with shared state under the prefix.
    List {
        /// Print one JSON document instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one breaker in detail.
    Show {
        /// The breaker's name, as the services know it.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print every change of every breaker under the prefix until Ctrl-C.
    Watch(WatchArgs),
    /// Open a breaker for the whole fleet (a fenced write).
    Trip(WriteArgs),
    /// Close a breaker for the whole fleet (a fenced write).
    Close(WriteArgs),
}

/// Options of `watch`.
#[derive(Debug, ClapArgs)]
pub(crate) struct WatchArgs {
    /// How often to poll Redis.
    #[arg(long, default_value = "1s", value_parser = duration::parse)]
    pub(crate) interval: Duration,
    /// Stop after this many changes.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) count: Option<u64>,
    /// Stop after this long.
    #[arg(long = "for", value_name = "DURATION", value_parser = duration::parse)]
    pub(crate) duration: Option<Duration>,
    /// Print one JSON object per line instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Options of `trip` and `close`.
#[derive(Debug, ClapArgs)]
pub(crate) struct WriteArgs {
    /// The breaker's name, as the services know it.
    pub(crate) name: String,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Lifetime of the written key [default: the storage's state TTL, 5m].
    #[arg(long, value_parser = duration::parse)]
    pub(crate) ttl: Option<Duration>,
    /// Write only if the breaker is at this version (as `show` printed it);
    /// by default, the version read just before asking.
    #[arg(long, value_name = "VERSION")]
    pub(crate) expect_version: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Args::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_command() {
        let a = Args::try_parse_from(["interlock", "list", "--prefix", "p:", "--json"]).unwrap();
        assert_eq!(a.global.prefix(), "p:");
        assert_eq!(a.global.layout, Layout::Interlock);
        assert!(matches!(a.command, Command::List { json: true }));
        let a = Args::try_parse_from(["interlock", "--timeout", "500ms", "show", "x"]).unwrap();
        assert_eq!(a.global.timeout, Duration::from_millis(500));
    }

    #[test]
    fn the_layout_chooses_the_default_prefix() {
        let a = Args::try_parse_from(["interlock", "list"]).unwrap();
        assert_eq!(a.global.prefix(), "interlock:{cb}:");
        let a = Args::try_parse_from(["interlock", "--layout", "interlock-cb", "list"]).unwrap();
        assert_eq!(
            (a.global.layout, a.global.prefix()),
            (Layout::InterlockCb, "interlock:cb:")
        );
        let a = Args::try_parse_from(["interlock", "list", "--layout=interlock-cb", "--prefix=x:"])
            .unwrap();
        assert_eq!(a.global.prefix(), "x:");
    }

    #[test]
    fn bad_options_are_usage_errors() {
        for bad in [
            &["interlock", "watch", "--interval", "0s"][..],
            &["interlock", "watch", "--count", "0"],
            &["interlock", "trip"],
            &["interlock", "trip", "x", "--ttl", "5"],
            &["interlock", "frobnicate"],
            &["interlock", "--layout", "pybreaker", "list"],
        ] {
            let err = Args::try_parse_from(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}");
        }
    }
}
