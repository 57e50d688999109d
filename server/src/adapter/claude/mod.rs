//! The claude CLI adapters and what they share: the options, the one
//! permission-mode enum, finding the binary, and the stream-json lines the
//! harness writes to the CLI.
//!
//! - [`interactive`]: the default adapter, one long-lived process per run;
//! - [`oneshot`]: `claude --print`, the prompt on stdin, one turn per
//!   process;
//! - [`stream_json`]: user messages, interrupts and permission answers as
//!   the CLI reads them on stdin (the cassette recorder and replayer use
//!   them too);
//! - [`discover`]: where the `claude` binary is;
//! - [`config_dir`]: the CLI's configuration directory the server owns;
//! - [`transcript`]: a stored conversation written back into it before a
//!   resume;
//! - `flags`: [`ClaudeFlags`], the adapters' flags of `serve`;
//! - [`context_usage`]: the `get_context_usage` control request and its
//!   answer as the RPC's response.

pub mod config_dir;
pub mod context_usage;
pub mod discover;
mod flags;
pub mod interactive;
pub mod oneshot;
pub mod stream_json;
pub mod transcript;

use std::ffi::OsString;
use std::path::PathBuf;

pub use flags::ClaudeFlags;
pub use interactive::ClaudeInteractiveAdapter;
pub use oneshot::ClaudeCliAdapter;

use self::discover::find_claude;
use crate::adapter::{AdapterError, SpawnConfig};
use crate::supervise::{DEFAULT_MAX_LINE_BYTES, DEFAULT_STRIP_ENV, ProcessSpec};

/// How tool permission prompts are handled (`--permissions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum PermissionMode {
    /// Relay each prompt to clients (`--permission-prompt-tool stdio`):
    /// a `permission_requested` event, answered with RespondPermission.
    /// Interactive adapter only.
    #[default]
    Relay,
    /// Leave it to the CLI's own settings files (no relay).
    Settings,
    /// `--dangerously-skip-permissions`: every tool runs unasked (plus
    /// `IS_SANDBOX=1` as root, which the CLI requires there).
    Skip,
}

/// Options shared by the claude adapters.
#[derive(Debug, Clone)]
pub struct ClaudeOptions {
    /// `--claude-bin`; `None` searches (see [`discover`]).
    pub claude_bin: Option<PathBuf>,
    /// Arguments added after the adapter's own, before the run's `args`.
    pub extra_args: Vec<String>,
    /// Environment for every child (a run's `env` wins over it).
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub strip_env_keys: Vec<String>,
    /// How tool permissions are decided.
    pub permissions: PermissionMode,
    /// Longest stdout line accepted whole.
    pub max_line_bytes: usize,
    /// Pass `--include-partial-messages` (live typing; `--deltas`).
    pub partial_messages: bool,
    /// The CLI's configuration directory (`CLAUDE_CONFIG_DIR`, set last so
    /// nothing overrides it; see [`config_dir`]). `None` leaves the
    /// variable to the environment (embedders, tests that want it).
    pub config_dir: Option<PathBuf>,
    /// `--setting-sources`: which settings files the CLI reads. `user` (the
    /// configuration directory's only) unless the operator lets a session
    /// folder's project settings in (`--allow-project-settings`).
    pub setting_sources: String,
    /// `--mcp-config` files: with `--strict-mcp-config` (always passed) the
    /// only MCP servers the CLI starts.
    pub mcp_config: Vec<PathBuf>,
    /// Pass `--session-mirror` (on; `serve` has no flag for it): the
    /// conversation is kept beside the log and moves with the session.
    /// Off, nothing is stored, as for sessions run before it existed.
    pub session_mirror: bool,
}

/// `--setting-sources` by default: the configuration directory's settings
/// only, never those of the session's folder.
pub const USER_SETTINGS_ONLY: &str = "user";
/// `--setting-sources` with `--allow-project-settings`.
pub const WITH_PROJECT_SETTINGS: &str = "user,project,local";

impl Default for ClaudeOptions {
    fn default() -> Self {
        Self {
            claude_bin: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            strip_env_keys: DEFAULT_STRIP_ENV.iter().map(|s| s.to_string()).collect(),
            permissions: PermissionMode::Relay,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            partial_messages: true,
            config_dir: None,
            setting_sources: USER_SETTINGS_ONLY.into(),
            mcp_config: Vec::new(),
            session_mirror: true,
        }
    }
}

impl ClaudeOptions {
    /// The process spec common to both adapters: binary, cleaned env, cwd.
    pub(crate) fn base_spec(&self, config: &SpawnConfig) -> Result<ProcessSpec, AdapterError> {
        let bin = find_claude(self.claude_bin.as_deref())?;
        let mut spec = ProcessSpec::new(bin);
        spec.tasks = config.tasks.clone();
        spec.strip_env_keys = self.strip_env_keys.clone();
        spec.max_line_bytes = self.max_line_bytes;
        spec.env = self.env.clone();
        if self.permissions == PermissionMode::Skip && running_as_root() {
            spec.env.push(("IS_SANDBOX".into(), "1".into()));
        }
        let mut run_env: Vec<_> = config.config.env.clone().into_iter().collect();
        run_env.sort();
        spec.env.extend(run_env);
        if let Some(dir) = &self.config_dir {
            spec.env
                .push(("CLAUDE_CONFIG_DIR".into(), dir.display().to_string()));
        }
        if !config.config.cwd.is_empty() {
            spec.cwd = Some(PathBuf::from(&config.config.cwd));
        }
        if !config.run_id.is_empty() {
            spec.run_marker = Some(config.run_id.clone());
        }
        Ok(spec)
    }

    /// The CLI's configuration directory on this node, where it keeps its
    /// conversations: [`ClaudeOptions::config_dir`], else the one the
    /// children's environment or the server's names (`CLAUDE_CONFIG_DIR`,
    /// else `$HOME/.claude`).
    pub fn conversations_dir(&self) -> Option<PathBuf> {
        if let Some(dir) = &self.config_dir {
            return Some(dir.clone());
        }
        let var = |name: &str| {
            self.env
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into())
                .or_else(|| std::env::var_os(name))
                .filter(|v: &std::ffi::OsString| !v.is_empty())
        };
        if let Some(dir) = var("CLAUDE_CONFIG_DIR") {
            return Some(dir.into());
        }
        var("HOME").map(|home| PathBuf::from(home).join(".claude"))
    }

    /// The configuration the server decides for every CLI, whatever the
    /// run: which settings files it reads (`--setting-sources`) and that
    /// MCP servers come only from the operator's `--mcp-config` files
    /// (`--strict-mcp-config`), and that it repeats every line it adds to
    /// its conversation files on stdout (`--session-mirror`: the server
    /// keeps them beside the log, so another node can resume the
    /// conversation, see [`transcript`]). A client can pass none of these
    /// flags (the launch policy never accepts them).
    pub(crate) fn config_args(&self) -> Vec<OsString> {
        // Joined like every value (see `tail_args`): one argument each.
        let mut args: Vec<OsString> = vec![
            format!("--setting-sources={}", self.setting_sources).into(),
            "--strict-mcp-config".into(),
        ];
        if self.session_mirror {
            args.push("--session-mirror".into());
        }
        for file in &self.mcp_config {
            let mut arg = OsString::from("--mcp-config=");
            arg.push(file);
            args.push(arg);
        }
        args
    }

    /// `--resume` (with `--fork-session` and `--resume-session-at` for a
    /// fork), the extra args and the run's args, then the settings
    /// (`--model`, `--permission-mode`, `--max-thinking-tokens`) last, so
    /// that a setting changed since the args were given wins over them.
    /// Each value is joined to its flag (`--model=VALUE`): a value the
    /// server passes is never an argument of its own, which the CLI could
    /// read as a subcommand or as the `mcp` that makes CLI 2.1.197 stop
    /// reading its input (the launch policy joins a client's args the same
    /// way).
    pub(crate) fn tail_args(&self, config: &SpawnConfig) -> Vec<OsString> {
        let c = &config.config;
        let joined = |flag: &str, value: &str| OsString::from(format!("{flag}={value}"));
        let mut args: Vec<OsString> = Vec::new();
        if !c.resume.is_empty() {
            args.push(joined("--resume", &c.resume));
            if let Some(fork) = &c.fork {
                args.push("--fork-session".into());
                if !fork.message_uuid.is_empty() {
                    args.push(joined("--resume-session-at", &fork.message_uuid));
                }
            }
        }
        args.extend(self.extra_args.iter().map(OsString::from));
        args.extend(c.args.iter().map(OsString::from));
        if !c.model.is_empty() {
            args.push(joined("--model", &c.model));
        }
        if !c.permission_mode.is_empty() {
            args.push(joined("--permission-mode", &c.permission_mode));
        }
        if let Some(n) = c.max_thinking_tokens {
            args.push(joined("--max-thinking-tokens", &n.to_string()));
        }
        args
    }
}

/// The owner of /proc/self is the effective uid; this avoids a libc call.
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}
