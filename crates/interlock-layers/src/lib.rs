//! The layering check of the interlock workspace (issue 23).
//!
//! A crate's *top-level modules* are the files and folders directly under
//! its `src/` (the crate root, `lib.rs` or `main.rs`, is not one of them).
//! This crate reads a crate's sources, finds which top-level module names
//! which other through `crate::…` (and `super::…` that climbs to the root,
//! and the root's `pub use` re-exports), and reports every import cycle
//! between them. Test-only code (`#[cfg(test)]` items and the files of
//! `#[cfg(test)] mod x;`) is left out: a test may look at anything.
//!
//! The check is lexical, on purpose: it needs no compiler, no nightly and
//! no network, so it runs in `cargo test` on every machine. Comments, doc
//! comments (intra-doc links are no dependency), string and character
//! literals are blanked before references are looked for.
//!
//! ```
//! use std::fs;
//! let dir = std::env::temp_dir().join(format!("layers-doc-{}", std::process::id()));
//! fs::create_dir_all(dir.join("src")).unwrap();
//! fs::write(dir.join("src/lib.rs"), "mod a;\nmod b;\n").unwrap();
//! fs::write(dir.join("src/a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
//! fs::write(dir.join("src/b.rs"), "pub struct B(crate::a::A);\n").unwrap();
//! let graph = interlock_layers::Graph::of_crate(&dir).unwrap();
//! assert_eq!(graph.cycles(), vec![vec!["a".to_string(), "b".to_string()]]);
//! fs::remove_dir_all(&dir).unwrap();
//! ```

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

mod lexer;

/// Where one module names another: a file and a 1-based line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Site {
    /// The file, relative to the crate's directory.
    pub file: PathBuf,
    /// The line of the reference.
    pub line: usize,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// The dependency graph between one crate's top-level modules.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    modules: BTreeSet<String>,
    edges: BTreeMap<String, BTreeMap<String, Vec<Site>>>,
}

impl Graph {
    /// Reads the crate in `dir` (the folder holding `Cargo.toml` and
    /// `src/`).
    ///
    /// # Errors
    ///
    /// An I/O error reading a source file, or a crate with neither
    /// `src/lib.rs` nor `src/main.rs`.
    pub fn of_crate(dir: &Path) -> io::Result<Self> {
        let src = dir.join("src");
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|r| src.join(r))
            .filter(|p| p.is_file())
            .collect();
        if roots.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} has neither src/lib.rs nor src/main.rs", dir.display()),
            ));
        }

        let mut modules = BTreeSet::new();
        for entry in fs::read_dir(&src)? {
            let path = entry?.path();
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if path.is_dir()
                || (path.extension().is_some_and(|e| e == "rs") && name != "lib" && name != "main")
            {
                modules.insert(name.to_owned());
            }
        }

        // The root's re-exports: `pub use breaker::CircuitBreaker;` makes
        // `crate::CircuitBreaker` a reference to `breaker`.
        let mut exports = BTreeMap::new();
        let mut test_only = BTreeSet::new();
        for root in &roots {
            let mut tests = Vec::new();
            let text = lexer::strip(&fs::read_to_string(root)?, &mut tests);
            for (name, module) in lexer::reexports(&text) {
                if modules.contains(&module) {
                    exports.insert(name, module);
                }
            }
            test_only.extend(tests);
        }
        // A module declared only under `#[cfg(test)]` in the root is test code.
        for name in &test_only {
            modules.remove(name);
        }

        let mut graph = Graph {
            modules: modules.clone(),
            edges: BTreeMap::new(),
        };
        for module in &modules {
            let mut files = Vec::new();
            let file = src.join(format!("{module}.rs"));
            if file.is_file() {
                files.push((file, vec![module.clone()]));
            }
            let folder = src.join(module);
            if folder.is_dir() {
                collect(&folder, vec![module.clone()], &mut files)?;
            }
            let mut skipped: BTreeSet<PathBuf> = BTreeSet::new();
            // Files are visited parents first (collect sorts), so a
            // `#[cfg(test)] mod x;` is seen before x's file.
            for (path, depth_path) in files {
                if skipped.iter().any(|s| path.starts_with(s)) {
                    continue;
                }
                let mut tests = Vec::new();
                let text = lexer::strip(&fs::read_to_string(&path)?, &mut tests);
                let dir_of_children = children_dir(&path);
                for t in tests {
                    skipped.insert(dir_of_children.join(format!("{t}.rs")));
                    skipped.insert(dir_of_children.join(&t));
                }
                let relative = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                for (first, line) in lexer::references(&text, depth_path.len()) {
                    let target = if modules.contains(&first) {
                        Some(first)
                    } else {
                        exports.get(&first).cloned()
                    };
                    if let Some(target) = target.filter(|t| t != module) {
                        graph
                            .edges
                            .entry(module.clone())
                            .or_default()
                            .entry(target)
                            .or_default()
                            .push(Site {
                                file: relative.clone(),
                                line,
                            });
                    }
                }
            }
        }
        Ok(graph)
    }

    /// The crate's top-level modules.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.modules.iter().map(String::as_str)
    }

    /// The modules `module` names, each with the places it does so.
    pub fn dependencies(&self, module: &str) -> impl Iterator<Item = (&str, &[Site])> {
        self.edges
            .get(module)
            .into_iter()
            .flat_map(|m| m.iter().map(|(k, v)| (k.as_str(), v.as_slice())))
    }

    /// Every import cycle: the strongly connected components with more
    /// than one module, each sorted, in sorted order.
    pub fn cycles(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = tarjan(self)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        out.sort();
        out
    }

    /// The modules in layers, bottom first: a module's layer is one above
    /// the highest layer it depends on. `None` when there is a cycle.
    pub fn layers(&self) -> Option<Vec<Vec<String>>> {
        if !self.cycles().is_empty() {
            return None;
        }
        let mut level: BTreeMap<&str, usize> = BTreeMap::new();
        fn depth<'a>(g: &'a Graph, m: &'a str, level: &mut BTreeMap<&'a str, usize>) -> usize {
            if let Some(&d) = level.get(m) {
                return d;
            }
            let d = g
                .dependencies(m)
                .map(|(dep, _)| depth(g, dep, level) + 1)
                .max()
                .unwrap_or(0);
            level.insert(m, d);
            d
        }
        for m in &self.modules {
            depth(self, m, &mut level);
        }
        let top = level.values().copied().max().unwrap_or(0);
        let mut layers = vec![Vec::new(); top + 1];
        for (m, d) in level {
            layers[d].push(m.to_owned());
        }
        Some(layers)
    }

    /// A human-readable account of one cycle: a closed walk through it,
    /// each step with the first place the reference is made.
    pub fn explain(&self, cycle: &[String]) -> String {
        let members: BTreeSet<&str> = cycle.iter().map(String::as_str).collect();
        let mut out = String::new();
        for from in cycle {
            for (to, sites) in self.dependencies(from) {
                if members.contains(to) {
                    out.push_str(&format!("  {from} -> {to} ({})\n", sites[0]));
                }
            }
        }
        out
    }
}

/// The folder holding the children of the module in `path`
/// (`src/a.rs` → `src/a/`, `src/a/mod.rs` → `src/a/`).
fn children_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new(""));
    match path.file_stem().and_then(|s| s.to_str()) {
        Some("mod") => parent.to_path_buf(),
        Some(stem) => parent.join(stem),
        None => parent.to_path_buf(),
    }
}

fn collect(
    dir: &Path,
    module_path: Vec<String>,
    out: &mut Vec<(PathBuf, Vec<String>)>,
) -> io::Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    // `mod.rs` (or the crate root) first: it declares its siblings, so a `#[cfg(test)] mod x;`
    // in it is seen before `x.rs`.
    entries.sort_by_key(|p| {
        !matches!(
            p.file_name().and_then(|n| n.to_str()),
            Some("mod.rs" | "lib.rs" | "main.rs")
        )
    });
    let mut subdirs = Vec::new();
    for path in entries {
        if path.is_dir() {
            subdirs.push(path);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned();
            let mut mp = module_path.clone();
            if stem != "mod" {
                mp.push(stem);
            }
            out.push((path, mp));
        }
    }
    for sub in subdirs {
        let mut mp = module_path.clone();
        mp.push(
            sub.file_name()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_owned(),
        );
        collect(&sub, mp, out)?;
    }
    Ok(())
}

fn tarjan(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a Graph,
        index: usize,
        indices: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.indices.insert(v, s.index);
        s.low.insert(v, s.index);
        s.index += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for (w, _) in graph.dependencies(v) {
            if !s.indices.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.indices[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.indices[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        graph,
        index: 0,
        indices: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for m in &graph.modules {
        if !s.indices.contains_key(m.as_str()) {
            visit(&mut s, m);
        }
    }
    s.out
}

/// The crate's source files longer than `limit` lines outside
/// `#[cfg(test)]` items, with their length; test-only files (`tests.rs`,
/// `*_tests.rs`, files of `#[cfg(test)] mod x;`) are not counted.
///
/// # Errors
///
/// An I/O error reading a source file.
pub fn long_files(dir: &Path, limit: usize) -> io::Result<Vec<(PathBuf, usize)>> {
    let src = dir.join("src");
    let mut files = Vec::new();
    collect(&src, Vec::new(), &mut files)?;
    let mut test_files: BTreeSet<PathBuf> = BTreeSet::new();
    let mut out = Vec::new();
    for (path, _) in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if stem == "tests"
            || stem.ends_with("_tests")
            || test_files.iter().any(|t| path.starts_with(t))
        {
            continue;
        }
        let text = fs::read_to_string(&path)?;
        let mut tests = Vec::new();
        lexer::strip(&text, &mut tests);
        let root = path.parent() == Some(src.as_path()) && matches!(stem, "lib" | "main");
        let children = if root {
            src.clone()
        } else {
            children_dir(&path)
        };
        for t in tests {
            test_files.insert(children.join(format!("{t}.rs")));
            test_files.insert(children.join(&t));
        }
        let lines = lexer::non_test_lines(&text);
        if lines > limit {
            out.push((path.strip_prefix(dir).unwrap_or(&path).to_path_buf(), lines));
        }
    }
    Ok(out)
}

/// The workspace's root folder (two levels above this crate): from the
/// `CARGO_MANIFEST_DIR` cargo sets when it runs a test or binary, else the
/// one this crate was compiled in (a build shared between two checkouts
/// must check the one it runs for).
pub fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest
        .ancestors()
        .nth(2)
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Every crate folder of the workspace at `root`: each folder under
/// `crates/` and `benches/` that has a `Cargo.toml` and a `src/`, sorted.
///
/// # Errors
///
/// An I/O error listing `root/crates`.
pub fn workspace_crates(root: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(root.join("crates"))? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() && path.join("src").is_dir() {
            dirs.push(path);
        }
    }
    let benches = root.join("benches");
    if benches.join("Cargo.toml").is_file() && benches.join("src").is_dir() {
        dirs.push(benches);
    }
    dirs.sort();
    Ok(dirs)
}
