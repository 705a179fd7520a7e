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

/// Issue 23: no non-test source file over 800 lines. The public storage
/// contract suite is exempt: it is one list of rules every storage must
/// pass, read top to bottom.
#[test]
fn no_source_file_is_over_800_lines_of_code() {
    const LIMIT: usize = 800;
    const EXEMPT: &[&str] = &["src/store/contract.rs"];
    let crates = workspace_crates(&workspace_root()).expect("the workspace's crates");
    let mut long = Vec::new();
    for dir in &crates {
        for (file, lines) in interlock_layers::long_files(dir, LIMIT).expect("readable sources") {
            let exempt = dir.ends_with("crates/interlock")
                && EXEMPT.iter().any(|e| file == std::path::Path::new(e));
            if !exempt {
                long.push(format!("{}: {lines} lines", dir.join(&file).display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {LIMIT} lines outside tests:\n{}",
        long.join("\n")
    );
}
