//! `cargo run -p interlock-layers [CRATE_DIR...]`: prints each crate's
//! top-level modules in layers (bottom first) or its import cycles, and
//! exits with status 1 when there is a cycle. Without arguments it checks
//! every crate of the workspace.

#![forbid(unsafe_code)]
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let dirs = if args.is_empty() {
        match interlock_layers::workspace_crates(&interlock_layers::workspace_root()) {
            Ok(dirs) => dirs,
            Err(e) => {
                eprintln!("interlock-layers: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        args
    };
    let mut failed = false;
    for dir in dirs {
        let graph = match interlock_layers::Graph::of_crate(&dir) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("interlock-layers: {}: {e}", dir.display());
                return ExitCode::from(2);
            }
        };
        println!("{}", dir.display());
        match graph.layers() {
            Some(layers) => {
                for (level, modules) in layers.iter().enumerate().rev() {
                    println!("  {level}: {}", modules.join(", "));
                }
            }
            None => {
                failed = true;
                for cycle in graph.cycles() {
                    println!(
                        "  CYCLE {}:\n{}",
                        cycle.join(" <-> "),
                        graph.explain(&cycle)
                    );
                }
            }
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
