//! Shared by the conformance-vector tests (`vectors`, `partial_vectors`):
//! run a check over every `*.json` file of a folder.

use std::path::{Path, PathBuf};

/// Runs `check` on every `*.json` file in `dir` (sorted), each adding its
/// mismatches to the list; fails when there are fewer than `min` files or
/// any mismatch. Returns how many files passed.
pub fn check_every_file(dir: &Path, min: usize, check: impl Fn(&Path, &mut Vec<String>)) -> usize {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= min,
        "found {} vector files in {}, want at least {min}",
        files.len(),
        dir.display()
    );
    let mut failures = Vec::new();
    for f in &files {
        check(f, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} mismatches in {} vectors:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    files.len()
}
