//! The Codex adapter's flags of `serve`: where the binary is and which
//! configuration it reads. The doc comments are their `--help` text;
//! [`CodexFlags::options`] finds the binary and builds [`CodexOptions`].

use std::path::PathBuf;

use super::{CodexOptions, find_codex};
use crate::adapter::claude::PermissionMode;

/// The operator's choices for every Codex process the server runs.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct CodexFlags {
    /// Path of the codex binary; enables Codex sessions. Default: $CODEX_BIN,
    /// then the usual install locations, then PATH; Codex sessions are
    /// refused (FAILED_PRECONDITION) when none has it.
    #[arg(long, env = "AGENT_HARNESS_CODEX_BIN")]
    pub codex_bin: Option<PathBuf>,

    /// Codex's configuration directory (`CODEX_HOME` of every Codex
    /// process: its config.toml with the model providers, its login and
    /// rollouts). Default: the server's CODEX_HOME, else ~/.codex.
    #[arg(long, env = "AGENT_HARNESS_CODEX_HOME")]
    pub codex_home: Option<PathBuf>,
}

impl CodexFlags {
    /// The adapter's options, `None` when Codex is not enabled (no binary
    /// configured or found). An error names the flag (a `--codex-bin` that
    /// is not executable).
    pub fn options(
        &self,
        permissions: PermissionMode,
        max_line_bytes: usize,
    ) -> Result<Option<CodexOptions>, String> {
        let Some(bin) = find_codex(self.codex_bin.as_deref())? else {
            return Ok(None);
        };
        let home = self
            .codex_home
            .clone()
            .or_else(|| std::env::var_os("CODEX_HOME").map(PathBuf::from))
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")));
        let home = match home {
            Some(h) => Some(
                std::path::absolute(&h)
                    .map_err(|e| format!("--codex-home {}: {e}", h.display()))?,
            ),
            None => None,
        };
        Ok(Some(CodexOptions {
            codex_home: home,
            permissions,
            max_line_bytes,
            ..CodexOptions::new(bin)
        }))
    }
}
