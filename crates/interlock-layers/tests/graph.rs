//! The checker on small made-up crates: it must find the cycles that are
//! there and none that are not.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use interlock_layers::Graph;

/// A throwaway crate folder with the given `src/` files.
struct Crate(PathBuf);

impl Crate {
    fn new(files: &[(&str, &str)]) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "interlock-layers-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        for (path, text) in files {
            let path = dir.join("src").join(path);
            fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        Crate(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Crate {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_layered_crate_has_no_cycle_and_its_layers_point_down() {
    let krate = Crate::new(&[
        (
            "lib.rs",
            "mod state;\nmod machine;\nmod breaker;\npub use state::State;\n",
        ),
        ("state.rs", "pub enum State { Closed }\n"),
        (
            "machine.rs",
            "use crate::State;\npub struct Machine(State);\n",
        ),
        (
            "breaker/mod.rs",
            "mod admit;\nuse crate::machine::Machine;\n",
        ),
        (
            "breaker/admit.rs",
            "use super::super::state::State;\nuse super::Other;\n",
        ),
    ]);
    let graph = Graph::of_crate(krate.path()).expect("graph");
    assert!(graph.cycles().is_empty());
    assert_eq!(
        graph.layers().expect("acyclic"),
        vec![
            vec!["state".to_string()],
            vec!["machine".to_string()],
            vec!["breaker".to_string()]
        ]
    );
}

#[test]
fn a_cycle_through_a_reexport_and_a_nested_file_is_found() {
    let krate = Crate::new(&[
        (
            "lib.rs",
            "mod error;\nmod machine;\nmod window;\npub use machine::Outcome;\n",
        ),
        ("error.rs", "pub struct E(crate::window::W);\n"),
        ("window/mod.rs", "mod ring;\n"),
        ("window/ring.rs", "use crate::Outcome;\n"),
        (
            "machine.rs",
            "pub enum Outcome {}\nuse crate::{error::E, window};\n",
        ),
    ]);
    let graph = Graph::of_crate(krate.path()).expect("graph");
    assert_eq!(
        graph.cycles(),
        vec![vec![
            "error".to_string(),
            "machine".to_string(),
            "window".to_string()
        ]]
    );
    let explained = graph.explain(&graph.cycles()[0]);
    assert!(
        explained.contains("window -> machine (src/window/ring.rs:1)"),
        "{explained}"
    );
    assert!(graph.layers().is_none());
}

#[test]
fn test_code_and_comments_do_not_count() {
    let krate = Crate::new(&[
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod testkit;\n"),
        ("a.rs", "use crate::b::B;\n#[cfg(test)]\nmod tests;\n"),
        ("a/tests.rs", "use crate::testkit::T;\nuse crate::b::B;\n"),
        (
            "b.rs",
            "/// See [`crate::a::A`].\npub struct B;\n#[cfg(test)]\nmod t { use crate::a::A; }\n// crate::a\n",
        ),
        ("testkit.rs", "use crate::a::A;\n"),
    ]);
    let graph = Graph::of_crate(krate.path()).expect("graph");
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
    let modules: Vec<&str> = graph.modules().collect();
    assert_eq!(modules, vec!["a", "b"]);
}

#[test]
fn a_crate_without_a_root_is_an_error_not_a_panic() {
    let krate = Crate::new(&[("a.rs", "")]);
    let error = Graph::of_crate(krate.path()).expect_err("no lib.rs nor main.rs");
    assert!(
        error
            .to_string()
            .contains("neither src/lib.rs nor src/main.rs"),
        "{error}"
    );
}

#[test]
fn long_files_count_code_not_tests() {
    let body: String = (0..10).map(|i| format!("fn f{i}() {{}}\n")).collect();
    let tests: String = format!("#[cfg(test)]\nmod tests {{\n{body}}}\n");
    let krate = Crate::new(&[
        ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod kit;\n"),
        ("a.rs", &format!("{body}{tests}")),
        (
            "b/mod.rs",
            &format!("{body}{body}#[cfg(test)]\nmod tests;\n"),
        ),
        ("b/tests.rs", &body.repeat(5)),
        ("kit.rs", &body.repeat(5)),
    ]);
    let long = interlock_layers::long_files(krate.path(), 12).expect("readable");
    assert_eq!(long, vec![(PathBuf::from("src/b/mod.rs"), 20)]);
}
