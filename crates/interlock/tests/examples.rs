//! The runnable demos print exactly the story their `.stdout` files tell.
//!
//! `cargo test` builds every example next to the test binaries; this test
//! runs them and compares their output byte for byte.

use std::path::PathBuf;
use std::process::Command;

/// This crate's folder: the one cargo names when it runs the test, else the
/// one the test was compiled in (a build directory shared by two checkouts
/// must read the files of the checkout it runs for).
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

fn example_binary(name: &str) -> PathBuf {
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

fn check(name: &str) {
    let binary = example_binary(name);
    let output = Command::new(&binary)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    assert!(
        output.status.success(),
        "{name} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected_path = manifest_dir()
        .join("examples")
        .join(format!("{name}.stdout"));
    let expected = std::fs::read_to_string(&expected_path).expect("expected output");
    let actual = String::from_utf8(output.stdout).expect("utf-8 output");
    assert_eq!(
        actual,
        expected,
        "{name} printed something else than {}",
        expected_path.display()
    );
}

#[test]
fn lifecycle_tells_its_story() {
    check("lifecycle");
}

#[test]
fn two_clients_tells_its_story() {
    check("two_clients");
}

#[test]
#[cfg(feature = "tokio")] // the example runs on tokio's paused clock
fn pipeline_tells_its_story() {
    check("pipeline");
}

#[test]
fn fleet_tells_its_story() {
    check("fleet");
}
