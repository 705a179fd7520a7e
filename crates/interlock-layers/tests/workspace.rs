//! The check itself (issue 23): no crate of the workspace has an import
//! cycle between its top-level modules. A failure prints each cycle with
//! the file and line of every reference that closes it.

use interlock_layers::{Graph, workspace_crates, workspace_root};

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let crates = workspace_crates(&workspace_root()).expect("the workspace's crates");
    assert!(crates.len() >= 10, "found only {crates:?}");
    let mut report = String::new();
    for dir in &crates {
        let graph = Graph::of_crate(dir).expect("readable sources");
        for cycle in graph.cycles() {
            report.push_str(&format!(
                "{}: {}\n{}",
                dir.display(),
                cycle.join(" <-> "),
                graph.explain(&cycle)
            ));
        }
    }
    assert!(
        report.is_empty(),
        "import cycles between top-level modules:\n{report}"
    );
}
