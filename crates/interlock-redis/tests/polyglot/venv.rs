//! The virtual environment with the Python original, interlock-cb 2.8.2,
//! made once by `scripts/interlock-cb-venv` in the cargo target directory.
//!
//! Included with `#[path]` by every test binary that runs the original:
//! the mixed-fleet tests of interlock-redis and interlock-cli (through
//! `python.rs`) and the core crate's differential test, so that all of them
//! find and make it the same way.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The interpreter of the virtual environment with interlock-cb 2.8.2,
/// made on first use; `None` (after saying so on stdout) when there is no
/// `python3` at all, the one case in which the tests skip. Any other
/// failure to make it (PyPI unreachable, say) panics: the tests must not
/// pass without the original.
#[allow(
    clippy::print_stdout,
    reason = "the skip is said where test output goes"
)]
pub(crate) fn interpreter() -> Option<PathBuf> {
    static READY: OnceLock<Option<PathBuf>> = OnceLock::new();
    READY
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("interlock-cb-2.8.2");
            // The crate cargo names when it runs the test (a build
            // directory shared by two checkouts must use the script of the
            // checkout it runs for), else the one it was compiled in.
            let workspace = std::env::var_os("CARGO_MANIFEST_DIR")
                .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
                .join("../..");
            let script = workspace.join("scripts/interlock-cb-venv");
            let out = Command::new(&script)
                .arg(&dir)
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
            let stderr = String::from_utf8_lossy(&out.stderr);
            match out.status.code() {
                Some(0) => {
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    let path = stdout.lines().last().unwrap_or_default().trim().to_owned();
                    Some(PathBuf::from(path))
                }
                Some(3) => {
                    println!(
                        "note: python3 is not installed, so the tests against the Python \
                         original interlock-cb are SKIPPED ({})",
                        stderr.trim()
                    );
                    None
                }
                _ => panic!(
                    "could not make the interlock-cb virtual environment in {} ({}):\n{stderr}",
                    dir.display(),
                    out.status
                ),
            }
        })
        .clone()
}
