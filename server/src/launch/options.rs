//! The operator's launch flags of `serve`: what a client may add to the
//! CLI's argv, env, cwd, permission modes and slash commands. The doc
//! comments are their `--help` text; [`LaunchOptions::policy`] builds the
//! [`LaunchPolicy`] they describe.

use std::path::PathBuf;

use super::LaunchPolicy;
use crate::adapter::claude::PermissionMode;
use crate::error::Result;

/// What the operator lets clients choose, besides the defaults.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct LaunchOptions {
    /// A CLI flag a client may pass in `StartConfig.args`, besides the
    /// default set (repeatable; env: comma-separated), e.g.
    /// `--allow-arg=--max-budget-usd`; its value passes through. Flags that
    /// widen permissions, redirect the API or that the server owns are a
    /// start-up error here.
    #[arg(
        long = "allow-arg",
        env = "AGENT_HARNESS_ALLOW_ARGS",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub allow_args: Vec<String>,

    /// An environment variable a client may set in `StartConfig.env`
    /// (repeatable; env: comma-separated). None by default. Variables that
    /// redirect the API or inject code are a start-up error here.
    #[arg(
        long = "allow-env",
        env = "AGENT_HARNESS_ALLOW_ENV",
        value_delimiter = ','
    )]
    pub allow_env: Vec<String>,

    /// A directory a session's `config.cwd` must lie under (symlinks
    /// resolved; repeatable; env: comma-separated). Default: any directory.
    #[arg(
        long = "allowed-cwd",
        env = "AGENT_HARNESS_ALLOWED_CWDS",
        value_delimiter = ','
    )]
    pub allowed_cwds: Vec<PathBuf>,

    /// A permission mode a client may choose (`StartConfig.permission_mode`,
    /// SetPermissionMode) besides default, plan and dontAsk: acceptEdits or
    /// auto (repeatable; env: comma-separated). bypassPermissions only with
    /// `--permissions skip`, which allows every mode.
    #[arg(
        long = "allow-permission-mode",
        env = "AGENT_HARNESS_ALLOW_PERMISSION_MODES",
        value_delimiter = ','
    )]
    pub allow_permission_modes: Vec<String>,

    /// A slash command a client's message may be, besides /compact and
    /// /context (repeatable; env: comma-separated), e.g.
    /// `--allow-slash-command usage`. Any other message the CLI would run as
    /// a command (`/config ...`) is refused with INVALID_ARGUMENT.
    #[arg(
        long = "allow-slash-command",
        env = "AGENT_HARNESS_ALLOW_SLASH_COMMANDS",
        value_delimiter = ','
    )]
    pub allow_slash_commands: Vec<String>,
}

impl LaunchOptions {
    /// The policy `serve` enforces, with `permissions` (the `--permissions`
    /// mode, which decides whether `bypassPermissions` may be allowed); an
    /// error names the flag.
    pub fn policy(&self, permissions: PermissionMode) -> Result<LaunchPolicy> {
        LaunchPolicy::from_operator(&self.allow_args, &self.allow_env, &self.allowed_cwds)?
            .with_permission_modes(permissions, &self.allow_permission_modes)?
            .with_slash_commands(&self.allow_slash_commands)
    }
}
