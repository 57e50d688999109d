//! Finding the `claude` binary: `--claude-bin`, then `CLAUDE_BIN`, then the
//! usual install locations, then `PATH`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::adapter::AdapterError;

/// The environment variable that names the claude binary.
pub const CLAUDE_BIN_ENV: &str = "CLAUDE_BIN";

/// What to do when no binary is found; part of every BinaryNotFound message.
const HOW_TO_FIX: &str = "install it with `npm install -g @anthropic-ai/claude-code` \
(or `curl -fsSL https://claude.ai/install.sh | bash`), or point the server at it with \
`--claude-bin /path/to/claude` or the CLAUDE_BIN environment variable";

/// Find the claude binary from the real environment (`CLAUDE_BIN`, `HOME`,
/// `PATH`, `NPM_CONFIG_PREFIX`). `explicit` is the `--claude-bin` flag.
pub fn find_claude(explicit: Option<&Path>) -> Result<PathBuf, AdapterError> {
    find_claude_in(&SearchEnv {
        explicit: explicit.map(Path::to_path_buf),
        claude_bin: std::env::var_os(CLAUDE_BIN_ENV),
        home: std::env::var_os("HOME").map(PathBuf::from),
        path: std::env::var_os("PATH"),
        npm_prefix: std::env::var_os("NPM_CONFIG_PREFIX").map(PathBuf::from),
    })
}

/// The inputs of a search, so tests need not touch the process environment.
#[derive(Debug, Clone, Default)]
pub struct SearchEnv {
    /// `--claude-bin`.
    pub explicit: Option<PathBuf>,
    /// `CLAUDE_BIN`.
    pub claude_bin: Option<OsString>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// `PATH`.
    pub path: Option<OsString>,
    /// `NPM_CONFIG_PREFIX` (npm's global prefix when set).
    pub npm_prefix: Option<PathBuf>,
}

/// Search in order; an explicit path or `CLAUDE_BIN` that does not point to
/// an executable is an error rather than a silent fallback, because the
/// operator asked for that binary.
pub fn find_claude_in(env: &SearchEnv) -> Result<PathBuf, AdapterError> {
    if let Some(p) = &env.explicit {
        return check(p, "--claude-bin");
    }
    if let Some(p) = env.claude_bin.as_ref().filter(|p| !p.is_empty()) {
        return check(Path::new(p), CLAUDE_BIN_ENV);
    }
    for candidate in install_locations(env) {
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    if let Some(found) = on_path(env.path.as_deref(), "claude") {
        return Ok(found);
    }
    Err(AdapterError::BinaryNotFound(format!(
        "the claude CLI was not found (looked at --claude-bin, {CLAUDE_BIN_ENV}, \
~/.claude/local/claude, ~/.local/bin/claude, /usr/local/bin/claude, \
/opt/homebrew/bin/claude, the npm global bin and PATH): {HOW_TO_FIX}"
    )))
}

/// The usual places installers put the binary, in preference order.
fn install_locations(env: &SearchEnv) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = &env.home {
        out.push(home.join(".claude/local/claude"));
        out.push(home.join(".local/bin/claude"));
    }
    out.push(PathBuf::from("/usr/local/bin/claude"));
    out.push(PathBuf::from("/opt/homebrew/bin/claude"));
    if let Some(prefix) = &env.npm_prefix {
        out.push(prefix.join("bin/claude"));
    }
    if let Some(home) = &env.home {
        out.push(home.join(".npm-global/bin/claude"));
    }
    out
}

fn check(p: &Path, source: &str) -> Result<PathBuf, AdapterError> {
    if is_executable(p) {
        Ok(p.to_path_buf())
    } else {
        Err(AdapterError::BinaryNotFound(format!(
            "{source} points to {}, which is not an executable file: fix the path, or {HOW_TO_FIX}",
            p.display()
        )))
    }
}

/// The first executable `name` in the directories of `path` (a `PATH`
/// value).
pub(crate) fn on_path(path: Option<&std::ffi::OsStr>, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `p` is a file someone may execute.
pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
