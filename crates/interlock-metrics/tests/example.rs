//! The `prometheus` example serves real HTTP on a loopback port, scrapes
//! itself and prints what Prometheus would see; this test runs it (cargo
//! builds examples next to the tests) and compares the output byte for byte.

use std::path::PathBuf;
use std::process::Command;

fn example_binary(name: &str) -> PathBuf {
    // target/<profile>/deps/example-<hash> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

#[test]
fn prometheus_example_serves_the_expected_scrape() {
    let binary = example_binary("prometheus");
    let output = Command::new(&binary)
        .arg("--once")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    assert!(
        output.status.success(),
        "prometheus failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = include_str!("../examples/prometheus.stdout");
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
}
