//! The claude adapters' flags of `serve`: where the binary is, how tool
//! permissions are decided, and the CLI configuration the server owns. The
//! doc comments are their `--help` text; [`ClaudeFlags::options`] prepares
//! what they name and builds the adapters' [`ClaudeOptions`].

use std::path::{Path, PathBuf};

use super::{ClaudeOptions, PermissionMode, USER_SETTINGS_ONLY, WITH_PROJECT_SETTINGS, config_dir};

/// The operator's choices for every claude CLI the server runs.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct ClaudeFlags {
    /// Path of the claude binary. Default: $CLAUDE_BIN, then the usual
    /// install locations, then PATH.
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_BIN")]
    pub claude_bin: Option<PathBuf>,

    /// Tool permission prompts: `relay` them to clients, leave them to the
    /// CLI's `settings`, or `skip` them (--dangerously-skip-permissions).
    #[arg(
        long,
        env = "AGENT_HARNESS_PERMISSIONS",
        value_enum,
        default_value = "relay"
    )]
    pub permissions: PermissionMode,

    /// The CLI's configuration directory (`CLAUDE_CONFIG_DIR` of every CLI
    /// the server runs): its settings, login and transcripts. Default:
    /// `<data-dir>/claude`, created 0700 and seeded with the operator's
    /// login (~/.claude/.credentials.json and the account keys of
    /// ~/.claude.json), never their settings, hooks or MCP servers.
    #[arg(long, env = "AGENT_HARNESS_CLAUDE_CONFIG_DIR")]
    pub claude_config_dir: Option<PathBuf>,

    /// Let the CLI read a session folder's project settings
    /// (`.claude/settings.json`, `.claude/settings.local.json`: hooks,
    /// permissions): `--setting-sources user,project,local`. Default: user
    /// settings only (those in the configuration directory).
    #[arg(long, env = "AGENT_HARNESS_ALLOW_PROJECT_SETTINGS")]
    pub allow_project_settings: bool,

    /// An MCP server configuration file (JSON, as `claude --mcp-config`
    /// takes it) for every CLI (repeatable; env: comma-separated). The CLI
    /// always runs with `--strict-mcp-config`: MCP servers come only from
    /// these files, never from a session folder's `.mcp.json`.
    #[arg(
        long = "mcp-config",
        env = "AGENT_HARNESS_MCP_CONFIG",
        value_delimiter = ','
    )]
    pub mcp_config: Vec<PathBuf>,
}

impl ClaudeFlags {
    /// The adapters' options, with the configuration the server owns:
    /// `CLAUDE_CONFIG_DIR` (`--claude-config-dir`, default
    /// `<data_dir>/claude`; created 0700 and seeded with the operator's
    /// login, see [`config_dir`]), the settings sources and the operator's
    /// `--mcp-config` files (each must be a readable file). An error names
    /// the flag.
    pub fn options(
        &self,
        data_dir: &Path,
        max_line_bytes: usize,
        partial_messages: bool,
    ) -> Result<ClaudeOptions, String> {
        let dir = self
            .claude_config_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("claude"));
        let dir = std::path::absolute(&dir)
            .map_err(|e| format!("--claude-config-dir {}: {e}", dir.display()))?;
        config_dir::prepare(&dir, config_dir::OperatorLogin::from_env().as_ref())
            .map_err(|e| format!("--claude-config-dir: {e}"))?;
        let mut mcp_config = Vec::new();
        for file in &self.mcp_config {
            let abs = std::path::absolute(file)
                .ok()
                .filter(|p| p.is_file())
                .ok_or_else(|| format!("--mcp-config {}: not a readable file", file.display()))?;
            mcp_config.push(abs);
        }
        Ok(ClaudeOptions {
            claude_bin: self.claude_bin.clone(),
            permissions: self.permissions,
            // The reader stops buffering at the same limit the normalizer enforces.
            max_line_bytes,
            partial_messages,
            config_dir: Some(dir),
            setting_sources: if self.allow_project_settings {
                WITH_PROJECT_SETTINGS
            } else {
                USER_SETTINGS_ONLY
            }
            .into(),
            mcp_config,
            ..ClaudeOptions::default()
        })
    }
}
