//! Where the tests find the real `claude` CLI that talks to the fake: the
//! one `tests/setup.sh` installs under `tests/tools` (and the newest release
//! under `tests/tools/newest`), or the binary a variable names.
//!
//! A missing CLI ends the test binary with one line naming the setup
//! command: every test of such a binary needs it, so a page of identical
//! panics would only hide the fix. It is a failure (exit status 1), never a
//! skip.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The command that installs every tool the suites need.
pub const SETUP: &str = "./tests/setup.sh";

/// The CLI the recordings were made with: `CLAUDE_BIN`, else
/// `tests/tools/node_modules/.bin/claude`.
pub fn claude_bin() -> PathBuf {
    installed("CLAUDE_BIN", "tests/tools")
}

/// The newest CLI release the suites also check: `CLAUDE_BIN_NEWEST`, else
/// `tests/tools/newest/node_modules/.bin/claude`.
pub fn claude_bin_newest() -> PathBuf {
    installed("CLAUDE_BIN_NEWEST", "tests/tools/newest")
}

fn installed(var: &str, dir: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            missing(&format!(
                "{var}={} is not a file: point it at a claude CLI binary, or unset it and run {SETUP}",
                p.display()
            ));
        }
        return p;
    }
    let rel = format!("{dir}/node_modules/.bin/claude");
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(&rel);
    if !p.exists() {
        missing(&format!(
            "the claude CLI is missing at {rel}: run {SETUP} (or set {var})"
        ));
    }
    p
}

/// Writes `line` and ends the process with status 1. Straight to the
/// stderr handle: the test harness captures `eprintln!` and would drop it at
/// exit. The lock keeps the tests running in parallel to one line.
fn missing(line: &str) -> ! {
    static ONCE: Mutex<()> = Mutex::new(());
    let _held = ONCE.lock();
    let _ = writeln!(std::io::stderr(), "{line}");
    std::process::exit(1)
}
