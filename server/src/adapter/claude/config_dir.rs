//! The CLI's configuration directory the server owns (`CLAUDE_CONFIG_DIR`).
//!
//! Every CLI the server runs reads its settings, hooks, MCP servers and
//! login from one directory, and writes its transcripts there. Were it the
//! operator's `~/.claude`, anything a run managed to write into its
//! settings would hold for every later run (and for the operator's own
//! use of the CLI), and the operator's personal hooks and MCP servers would
//! run for every client. So the server gives the CLI a directory of its own
//! (`<data-dir>/claude` unless `--claude-config-dir` names one), created
//! 0700, and on first use copies into it only what keeps the operator's
//! login working:
//! - the credentials file (`.credentials.json`: the OAuth tokens of
//!   `claude login`), copied whole, mode 0600, so the CLI can refresh them;
//! - from the global config file (`.claude.json`) only the account keys
//!   ([`LOGIN_KEYS`]: the account, the API key a `/login` saved and which
//!   keys were approved); never its MCP servers, projects or settings.
//!
//! Nothing is copied over a file the directory already has: after the first
//! use the server's copy lives on its own (delete it to copy the login
//! again). With an API key in the environment nothing is needed at all.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The keys of the global config file that carry the login: the OAuth
/// account, the API key `/login` saved, and which API keys the operator
/// approved.
pub const LOGIN_KEYS: &[&str] = &[
    "oauthAccount",
    "primaryApiKey",
    "customApiKeyResponses",
    "userID",
    "hasCompletedOnboarding",
];

/// Where the operator's own login is: the CLI's configuration directory
/// of the server's environment (`$CLAUDE_CONFIG_DIR`, else `~/.claude`)
/// and its global config file (`$CLAUDE_CONFIG_DIR/.claude.json`, else
/// `~/.claude.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorLogin {
    /// The credentials file.
    pub credentials: PathBuf,
    /// The global config file.
    pub global_config: PathBuf,
}

impl OperatorLogin {
    /// From the server's environment (`CLAUDE_CONFIG_DIR`, `HOME`); `None`
    /// when neither is set.
    pub fn from_env() -> Option<Self> {
        if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            return Some(Self {
                credentials: dir.join(".credentials.json"),
                global_config: dir.join(".claude.json"),
            });
        }
        let home = PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?);
        Some(Self {
            credentials: home.join(".claude").join(".credentials.json"),
            global_config: home.join(".claude.json"),
        })
    }
}

/// Creates `dir` (mode 0700) when missing and copies the operator's login
/// into it where it has none yet (see the module docs). An error names the
/// path; a login file that is missing or unreadable is skipped (the
/// operator may log in with an API key in the environment).
pub fn prepare(dir: &Path, login: Option<&OperatorLogin>) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let Some(login) = login else {
        return Ok(());
    };
    let credentials = dir.join(".credentials.json");
    if !credentials.exists()
        && let Ok(bytes) = std::fs::read(&login.credentials)
    {
        write_private(&credentials, &bytes)?;
        tracing::info!(from = %login.credentials.display(), to = %credentials.display(), "copied the operator's CLI login");
    }
    let global = dir.join(".claude.json");
    if !global.exists()
        && let Some(account) = login_keys(&login.global_config)
    {
        write_private(&global, account.to_string().as_bytes())?;
        tracing::info!(from = %login.global_config.display(), to = %global.display(), "copied the operator's CLI account");
    }
    Ok(())
}

/// The [`LOGIN_KEYS`] of a global config file, when it has any.
fn login_keys(path: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let serde_json::Value::Object(all) = serde_json::from_str(&text).ok()? else {
        return None;
    };
    let kept: serde_json::Map<_, _> = all
        .into_iter()
        .filter(|(k, _)| LOGIN_KEYS.contains(&k.as_str()))
        .collect();
    (!kept.is_empty()).then_some(serde_json::Value::Object(kept))
}

/// Writes a new file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn copies_the_login_and_nothing_else_once() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::create_dir_all(h.join(".claude")).unwrap();
        std::fs::write(
            h.join(".claude/.credentials.json"),
            r#"{"claudeAiOauth":{"accessToken":"a","refreshToken":"r"}}"#,
        )
        .unwrap();
        std::fs::write(
            h.join(".claude/settings.json"),
            r#"{"hooks":{"SessionStart":[]}}"#,
        )
        .unwrap();
        std::fs::write(
            h.join(".claude.json"),
            r#"{"oauthAccount":{"emailAddress":"o@x"},"userID":"u","mcpServers":{"m":{}},
                "projects":{"/w":{"allowedTools":["Bash"]}}}"#,
        )
        .unwrap();
        let login = OperatorLogin {
            credentials: h.join(".claude/.credentials.json"),
            global_config: h.join(".claude.json"),
        };
        let dir = h.join("data/claude");
        prepare(&dir, Some(&login)).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(".credentials.json")), 0o600);
        assert_eq!(
            std::fs::read_to_string(dir.join(".credentials.json")).unwrap(),
            std::fs::read_to_string(&login.credentials).unwrap(),
            "the refresh token too: the server's CLI refreshes its own copy"
        );
        let global: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(".claude.json")).unwrap())
                .unwrap();
        assert_eq!(
            global,
            serde_json::json!({"oauthAccount":{"emailAddress":"o@x"},"userID":"u"})
        );
        assert!(!dir.join("settings.json").exists());
        // Later starts keep the server's own copy.
        std::fs::write(dir.join(".credentials.json"), "refreshed").unwrap();
        prepare(&dir, Some(&login)).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(".credentials.json")).unwrap(),
            "refreshed"
        );
    }

    #[test]
    fn no_login_to_copy_is_fine() {
        let tmp = tempfile::tempdir().unwrap();
        let login = OperatorLogin {
            credentials: tmp.path().join("none/.credentials.json"),
            global_config: tmp.path().join("none/.claude.json"),
        };
        let dir = tmp.path().join("claude");
        prepare(&dir, Some(&login)).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        prepare(&tmp.path().join("other"), None).unwrap();
    }
}
