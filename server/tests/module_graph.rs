//! The server library's modules depend on each other one way: store ← log ←
//! manager ← rpc ← server, with the adapters, the normalizer, the
//! supervisor and live typing below the manager, and the metrics recorders
//! below the log. This test reads every `crate::` path of the production
//! code in `server/src` (comments and `#[cfg(test)]` modules left out),
//! folds them into a graph of top-level modules, and fails naming the
//! first import circle it finds. It also keeps each file's production
//! part within [`MAX_PRODUCTION_LINES`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn the_module_graph_is_acyclic() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.len() > 10, "read too few modules: {graph:?}");
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "import circle in server/src: {} (a module must not import a module that imports it, \
             however indirectly; move the shared item down or pass it in)",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn options_and_metrics_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    // The command line is read by the commands only; every subsystem gets
    // its own options from `server`.
    let readers: Vec<_> = graph
        .iter()
        .filter(|(_, deps)| deps.contains("config"))
        .map(|(m, _)| m.as_str())
        .collect();
    assert_eq!(
        readers,
        ["doctor", "record", "server"],
        "modules importing config"
    );
    // The log and the others feed the metrics recorders; the scrape reads
    // them. The recorders themselves import nothing of the server.
    assert_eq!(
        graph.get("metrics"),
        Some(&BTreeSet::new()),
        "metrics imports"
    );
}

/// Most lines of a file's production part (the lines before its test
/// module). A file past it holds more than one concept: split it along a
/// seam (the way `manager/send` left `manager/mod.rs`), not by line count.
const MAX_PRODUCTION_LINES: usize = 650;

#[test]
fn no_production_part_outgrows_one_concept() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    let mut test_only = BTreeSet::new();
    let mut sizes = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        strip(&text, &mut String::new(), &mut test_only);
        sizes.push((file, production_lines(&text)));
    }
    let over: Vec<String> = sizes
        .into_iter()
        .filter(|(file, _)| {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            !test_only.contains(stem)
        })
        .filter(|(_, n)| *n > MAX_PRODUCTION_LINES)
        .map(|(file, n)| {
            format!(
                "{} ({n} lines)",
                file.strip_prefix(&src).unwrap_or(file).display()
            )
        })
        .collect();
    assert!(
        over.is_empty(),
        "production part over {MAX_PRODUCTION_LINES} lines: {over:?} (split it along a concept)"
    );
    assert_eq!(production_lines("a\nb\n#[cfg(test)]\nmod tests {\n}\n"), 2);
    assert_eq!(production_lines("a\n#[cfg(test)]\nfn f() {}\nb\n"), 4);
}

/// The lines of `text` before its test module (`#[cfg(test)]` then `mod`),
/// or all of them.
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len())
}

#[test]
fn a_circle_is_found_and_named() {
    let mut graph = Graph::new();
    for (from, to) in [("log", "store"), ("store", "config"), ("config", "log")] {
        graph.entry(from.into()).or_default().insert(to.into());
    }
    graph
        .entry("store".into())
        .or_default()
        .insert("nesting".into());
    let cycle = find_cycle(&graph).expect("a cycle");
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    let mut code = String::new();
    strip(
        "use crate::{a, b::{c, d}, e};\n// crate::comment\nfn f() { crate::g::h(); }\n\
         #[cfg(test)]\nmod tests { use crate::t; }\n",
        &mut code,
        &mut BTreeSet::new(),
    );
    let want = BTreeSet::from(["a", "b", "e", "g"].map(String::from));
    assert_eq!(crate_paths(&code), want);
}

/// The top-level module each file belongs to, and the top-level modules
/// its production code names through `crate::`.
fn module_graph(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut files = Vec::new();
    collect(src, &mut files);
    let mut code_of = BTreeMap::new();
    let mut test_only = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        let mut code = String::new();
        strip(&text, &mut code, &mut test_only);
        code_of.insert(file.clone(), code);
    }
    for (file, code) in &code_of {
        let rel = file.strip_prefix(src).expect("under src");
        let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if test_only.contains(stem) || matches!(stem, "lib" | "main") {
            continue;
        }
        let top = match rel.components().next() {
            Some(c) if rel.components().count() > 1 => c.as_os_str().to_string_lossy().into_owned(),
            _ => stem.to_owned(),
        };
        let deps = graph.entry(top.clone()).or_default();
        for dep in crate_paths(code) {
            if dep != top {
                deps.insert(dep);
            }
        }
    }
    graph
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Appends the production code of `text` to `code`: without comments,
/// without a `#[cfg(test)]` item (a test module runs to the end of its
/// file), and notes the names of test-only module files (`mod tests;`).
fn strip(text: &str, code: &mut String, test_only: &mut BTreeSet<String>) {
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.split("//").next().unwrap_or("").trim();
        if line == "#[cfg(test)]" {
            let next = lines.next().unwrap_or("").trim();
            if let Some(name) = next.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                test_only.insert(name.to_owned());
            } else if next.starts_with("mod ") || next.starts_with("pub mod ") {
                return;
            }
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
}

/// The top-level modules named by `crate::` paths in `code`, including each
/// top-level name of a `crate::{...}` group.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `my_crate::`, not this crate
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => items.push(std::mem::take(&mut item)),
                    _ if depth == 1 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            for item in items {
                if let Some(name) = ident(item.trim()) {
                    found.insert(name);
                }
            }
        } else if let Some(name) = ident(rest) {
            found.insert(name);
        }
    }
    found
}

fn ident(s: &str) -> Option<String> {
    let name: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self").then_some(name)
}

/// A cycle as the path `a -> b -> ... -> a`, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, State>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(State::Done) => return None,
            Some(State::Open) => {
                let from = path.iter().position(|n| n == node).expect("open on path");
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node.to_owned(), State::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(node.to_owned(), State::Done);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}
