//! Where the tests find the real `claude`, `codex` and `gemini` CLIs (and the codex-acp
//! bridge) that talk to the fake: the ones `tests/setup.sh` installs under `tests/tools`
//! (and the newest releases under `tests/tools/newest`), or the binary a variable names.
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
    installed("CLAUDE_BIN", "tests/tools", "claude", &[".bin/claude"])
}

/// The newest CLI release the suites also check: `CLAUDE_BIN_NEWEST`, else
/// `tests/tools/newest/node_modules/.bin/claude`.
pub fn claude_bin_newest() -> PathBuf {
    installed(
        "CLAUDE_BIN_NEWEST",
        "tests/tools/newest",
        "claude",
        &[".bin/claude"],
    )
}

/// The pinned Codex CLI: `CODEX_BIN`, else the native binary of the platform
/// package under `tests/tools/node_modules`, else its npm bin.
pub fn codex_bin() -> PathBuf {
    installed("CODEX_BIN", "tests/tools", "codex", &codex_candidates())
}

/// The newest Codex release checked: `CODEX_BIN_NEWEST`, else as [`codex_bin`]
/// under `tests/tools/newest`.
pub fn codex_bin_newest() -> PathBuf {
    installed(
        "CODEX_BIN_NEWEST",
        "tests/tools/newest",
        "codex",
        &codex_candidates(),
    )
}

/// The pinned Gemini CLI: `GEMINI_BIN`, else
/// `tests/tools/node_modules/.bin/gemini` (a node script; it needs Node >= 20).
pub fn gemini_bin() -> PathBuf {
    installed("GEMINI_BIN", "tests/tools", "gemini", &[".bin/gemini"])
}

/// The newest Gemini CLI release checked: `GEMINI_BIN_NEWEST`, else
/// `tests/tools/newest/node_modules/.bin/gemini`.
pub fn gemini_bin_newest() -> PathBuf {
    installed(
        "GEMINI_BIN_NEWEST",
        "tests/tools/newest",
        "gemini",
        &[".bin/gemini"],
    )
}

/// The pinned codex-acp bridge (an ACP agent that runs its own `codex app-server`):
/// `CODEX_ACP_BIN`, else `tests/tools/node_modules/.bin/codex-acp` (a node script).
pub fn codex_acp_bin() -> PathBuf {
    installed(
        "CODEX_ACP_BIN",
        "tests/tools",
        "codex-acp",
        &[".bin/codex-acp"],
    )
}

/// The newest codex-acp release checked: `CODEX_ACP_BIN_NEWEST`, else
/// `tests/tools/newest/node_modules/.bin/codex-acp`.
pub fn codex_acp_bin_newest() -> PathBuf {
    installed(
        "CODEX_ACP_BIN_NEWEST",
        "tests/tools/newest",
        "codex-acp",
        &[".bin/codex-acp"],
    )
}

/// Where npm puts Codex, native binary first: run directly it gets signals
/// itself (the npm bin is a node launcher that execs it).
fn codex_candidates() -> [&'static str; 2] {
    let native = if cfg!(target_arch = "aarch64") {
        "@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"
    } else {
        "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
    };
    [native, ".bin/codex"]
}

/// `var`'s file, else the first of `candidates` (paths under
/// `<dir>/node_modules`) that exists.
fn installed(var: &str, dir: &str, name: &str, candidates: &[&str]) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            missing(&format!(
                "{var}={} is not a file: point it at a {name} CLI binary, or unset it and run {SETUP}",
                p.display()
            ));
        }
        return p;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let rels: Vec<String> = candidates
        .iter()
        .map(|c| format!("{dir}/node_modules/{c}"))
        .collect();
    match rels.iter().map(|r| root.join(r)).find(|p| p.exists()) {
        Some(p) => p,
        None => missing(&format!(
            "the {name} CLI is missing at {}: run {SETUP} (or set {var})",
            rels.last().map_or("", String::as_str)
        )),
    }
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
