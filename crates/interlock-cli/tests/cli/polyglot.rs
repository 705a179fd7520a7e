//! The operator's `trip` and `close` with `--layout interlock-cb` act on a
//! Python instance of the original library, interlock-cb 2.8.2 (from PyPI,
//! in a virtual environment in the target directory; the test skips, saying
//! so, only without `python3`).

use std::time::Duration;

use crate::cli;
use crate::python::{self, Options, Python};
use crate::support::{Server, eventually, run};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn an_operator_trip_and_close_reach_python_instances_of_the_original() {
    let Some(py) = python::interpreter() else {
        return;
    };
    let server = Server::start();
    let name = "payments {eu}";
    let mut instance = Python::start(&py, "python", &Options::new(server.url(), name));
    assert_eq!(instance.call(true), "ok");
    let cb = |args: &[&str]| {
        let mut cmd = cli(&server, &["--layout", "interlock-cb"]);
        cmd.args(args);
        cmd
    };

    let out = run(cb(&["trip", name, "--yes"])).expect_code(0);
    assert!(out.stdout.contains("now OPEN v1"), "{out:#?}");
    assert!(
        eventually(LIMIT, || instance.call(true) == "rejected"),
        "the Python instance rejects after the operator's trip"
    );
    assert_eq!(instance.state(), "open");

    let out = run(cb(&["show", name])).expect_code(0);
    assert!(out.stdout.contains("state:       OPEN\n"), "{}", out.stdout);
    let out = run(cb(&["close", name, "--yes"])).expect_code(0);
    assert!(
        out.stdout.contains("now CLOSED v2 (was OPEN v1"),
        "{out:#?}"
    );
    assert!(
        eventually(LIMIT, || instance.call(true) == "ok"),
        "the Python instance admits again after the operator's close"
    );
    assert_eq!(instance.state(), "closed");

    // What the Python instance writes, the command line reads.
    assert_eq!(instance.call(false), "failed");
    assert_eq!(instance.call(false), "failed");
    assert!(eventually(LIMIT, || {
        run(cb(&["show", name, "--json"]))
            .stdout
            .contains("\"state\": \"open\"")
    }));
}
