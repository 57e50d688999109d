//! The launch policy: what a client may put into the CLI's argv, env and
//! working directory through `StartConfig` (`args`, `env`, `cwd`, and the
//! `model` and `resume` that become `--model`/`--resume`).
//!
//! A client is not the operator. Everything a client sends reaches the
//! `claude` process, so a web page that can call Start could otherwise pass
//! `--dangerously-skip-permissions` or `IS_SANDBOX=1` and
//! `ANTHROPIC_BASE_URL=...` and have the CLI run commands unasked. So:
//! - **args**: only long flags on an allow list ([`DEFAULT_ARGS`] plus the
//!   operator's `--allow-arg`), each with at most the values its arity
//!   allows; no short flags, no `--`, no stray positionals (the CLI would
//!   read them as a subcommand or a prompt). Flags in [`NEVER_ARGS`] are
//!   never accepted, not even through `--allow-arg`.
//! - **env**: no variable by default; the operator's `--allow-env` adds exact
//!   names. [`NEVER_ENV`] and [`NEVER_ENV_PREFIXES`] are never accepted.
//! - **cwd**: with `--allowed-cwd`, the resolved directory must lie under
//!   one of them (PERMISSION_DENIED otherwise).
//! - **model**, **resume**: plain names (they must not look like a flag);
//!   a model is not a URL (`cc://...` makes the CLI register its
//!   subcommands) nor a subcommand's name.
//! - **user messages** (a Start's prompt, a Send's input, their content
//!   blocks): never a slash command the CLI would run itself, unless the
//!   operator allows its name ([`slash`], [`LaunchPolicy::check_input`]).
//! - **permission mode**: what the CLI reports in `run_ready` must be one
//!   the policy allows ([`LaunchPolicy::permission_mode_allowed`]).
//!
//! Whatever passes reaches the argv as one token per value
//! ([`LaunchPolicy::joined_args`], applied by the manager to what it
//! spawns; the log keeps the args as given): a flag's value given in the
//! next argument is joined to it (`--model x` becomes `--model=x`,
//! `--disallowedTools A B` becomes `--disallowedTools=A
//! --disallowedTools=B`), so no client string is ever a word of its own
//! that the CLI could take for a subcommand, a prompt or the `mcp` that
//! makes CLI 2.1.197 stop reading its input.
//!
//! The manager checks every config that reaches a process ([`LaunchPolicy::admit`]):
//! a Start's, and the recorded one a Send respawns with (under the policy
//! of now, which may be narrower than when it was recorded). Env values
//! never enter the event log: `run_start` records each as [`REDACTED`].

mod agent;
mod args;
mod cli_vocabulary;
mod options;
pub mod slash;

pub use self::agent::{NEVER_ENV_ACP, NEVER_ENV_ACP_PREFIXES, NEVER_ENV_CODEX_PREFIXES};
pub use self::options::LaunchOptions;
pub use cli_vocabulary::{
    Arity, DEFAULT_ARGS, KNOWN_ARITY, NEVER_ARGS, NEVER_ENV, NEVER_ENV_PREFIXES, OPERATOR_ARGS,
    SUBCOMMANDS,
};
use cli_vocabulary::{arity_of, never_arg, never_env, subcommand};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use agent_harness_protocol::pb;

use crate::adapter::claude::PermissionMode;
use crate::error::{Error, Result};

/// What `run_start` records in place of each env value.
pub const REDACTED: &str = "[redacted]";

/// Longest `config.model` / `config.resume` accepted.
pub const MAX_NAME_LEN: usize = 256;

/// What a client may put into the CLI's argv, env and cwd. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchPolicy {
    /// Every arg passes.
    trust_args: bool,
    /// Every env var passes.
    trust_env: bool,
    /// Any cwd passes.
    trust_cwd: bool,
    /// Allowed flag -> its arity when known.
    args: BTreeMap<String, Option<Arity>>,
    /// Allowed env names (exact).
    env: BTreeSet<String>,
    /// Canonical directories `config.cwd` must lie under; empty: any.
    cwds: Vec<PathBuf>,
    /// The permission modes a client may choose (`config.permission_mode`,
    /// SetPermissionMode).
    permission_modes: BTreeSet<String>,
    /// The slash commands a client's message may be.
    slash: slash::SlashCommands,
}

/// Every permission mode the CLI knows (`--permission-mode`).
pub const PERMISSION_MODES: &[&str] = &[
    "default",
    "acceptEdits",
    "bypassPermissions",
    "plan",
    "dontAsk",
    "auto",
];

/// The modes a client may choose without `--allow-permission-mode`: they
/// only narrow what runs unasked (plan: read-only; dontAsk: deny what is
/// not pre-approved), so every prompt still reaches the operator's relay.
pub const DEFAULT_PERMISSION_MODES: &[&str] = &["default", "plan", "dontAsk"];

/// Most thinking tokens a client may ask for.
pub const MAX_THINKING_TOKENS: u32 = 1_000_000;

impl Default for LaunchPolicy {
    /// The default safe set ([`DEFAULT_ARGS`]), no env, any cwd: what
    /// `serve` enforces without `--allow-arg`/`--allow-env`/`--allowed-cwd`.
    fn default() -> Self {
        Self {
            trust_args: false,
            trust_env: false,
            trust_cwd: false,
            args: DEFAULT_ARGS
                .iter()
                .map(|f| ((*f).to_owned(), arity_of(f)))
                .collect(),
            env: BTreeSet::new(),
            cwds: Vec::new(),
            permission_modes: DEFAULT_PERMISSION_MODES
                .iter()
                .map(|m| (*m).to_owned())
                .collect(),
            slash: slash::SlashCommands::default(),
        }
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn env_key_ok(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `--` then `[A-Za-z0-9][A-Za-z0-9_-]*`.
fn long_flag_ok(flag: &str) -> bool {
    let Some(name) = flag.strip_prefix("--") else {
        return false;
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// A plain name: starts alphanumeric, then alphanumerics or `extra`.
fn name_ok(value: &str, extra: &str) -> bool {
    let mut chars = value.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

impl LaunchPolicy {
    /// The policy `serve` enforces: [`DEFAULT_ARGS`] plus `allow_args`,
    /// exactly the env names in `allow_env`, and cwd under one of
    /// `allowed_cwds` (any cwd when empty). [`Error::Config`] naming the
    /// flag (`--allow-arg`, `--allow-env`, `--allowed-cwd`) for an entry
    /// that is malformed, never allowed, or (a cwd) not an existing
    /// directory.
    pub fn from_operator(
        allow_args: &[String],
        allow_env: &[String],
        allowed_cwds: &[PathBuf],
    ) -> Result<Self> {
        let mut policy = Self::default();
        for raw in allow_args {
            let flag = raw.trim();
            let flag = flag.strip_suffix('=').unwrap_or(flag);
            if !long_flag_ok(flag) {
                return Err(Error::Config(format!(
                    "--allow-arg {raw:?}: not a long flag; write it as --name (or --name=); \
                     short flags are not accepted from clients"
                )));
            }
            if let Some(never) = never_arg(flag) {
                return Err(Error::Config(format!(
                    "--allow-arg {raw:?}: {never} is never accepted from a client (it turns \
                     permissions off or widens them, loads code or settings, or is owned by \
                     the server)"
                )));
            }
            policy.args.insert(flag.to_owned(), arity_of(flag));
        }
        for raw in allow_env {
            let key = raw.trim();
            if !env_key_ok(key) {
                return Err(Error::Config(format!(
                    "--allow-env {raw:?}: not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )));
            }
            if never_env(key) {
                return Err(Error::Config(format!(
                    "--allow-env {raw:?}: never accepted from a client (it redirects the API, \
                     changes credentials, or injects code)"
                )));
            }
            policy.env.insert(key.to_owned());
        }
        for dir in allowed_cwds {
            let canon = dir
                .canonicalize()
                .map_err(|e| Error::Config(format!("--allowed-cwd {}: {e}", dir.display())))?;
            if !canon.is_dir() {
                return Err(Error::Config(format!(
                    "--allowed-cwd {}: not a directory",
                    dir.display()
                )));
            }
            policy.cwds.push(canon);
        }
        Ok(policy)
    }

    /// The slash commands a client's message may be:
    /// [`slash::DEFAULT_SLASH_COMMANDS`] plus the operator's `allowed`
    /// (`--allow-slash-command`).
    pub fn with_slash_commands(mut self, allowed: &[String]) -> Result<Self> {
        self.slash = self.slash.with_allowed(allowed)?;
        Ok(self)
    }

    /// The slash commands a client may send, sorted (names without `/`).
    pub fn allowed_slash_commands(&self) -> impl Iterator<Item = &str> {
        self.slash.allowed()
    }

    /// Checks a user message before anything of it is recorded or written:
    /// [`Error::InvalidField`] naming the field when the CLI would run it as
    /// a slash command that is not allowed (see [`slash`]). Applies under
    /// every policy, [`LaunchPolicy::trust_clients`] too: a command changes
    /// the CLI's own settings, which outlive the session.
    pub fn check_input(
        &self,
        fields: slash::InputFields,
        text: &str,
        content_blocks: &[pbjson_types::Struct],
    ) -> Result<()> {
        self.slash.check(fields, text, content_blocks)
    }

    /// Whether a permission mode the CLI reports (`run_ready`) is within
    /// what this policy allows a client to choose ("" passes: no report).
    /// A run in any other mode got there around the policy (the CLI's
    /// settings), and is stopped.
    pub fn permission_mode_allowed(&self, mode: &str) -> bool {
        mode.is_empty() || self.permission_modes.contains(mode)
    }

    /// The permission modes a client may choose: [`DEFAULT_PERMISSION_MODES`]
    /// plus the operator's `allowed` (`--allow-permission-mode`). With
    /// `--permissions skip` every tool runs unasked already, so every mode
    /// is allowed; otherwise `bypassPermissions` is a start-up error here
    /// (it would leave the relay, or the operator's settings, behind).
    pub fn with_permission_modes(
        mut self,
        permissions: PermissionMode,
        allowed: &[String],
    ) -> Result<Self> {
        if permissions == PermissionMode::Skip {
            self.permission_modes = PERMISSION_MODES.iter().map(|m| (*m).to_owned()).collect();
        }
        for raw in allowed {
            let mode = raw.trim();
            if !known_permission_mode(mode) {
                return Err(Error::Config(format!(
                    "--allow-permission-mode {raw:?}: not a permission mode (one of {})",
                    PERMISSION_MODES.join(", ")
                )));
            }
            if mode == "bypassPermissions" && permissions != PermissionMode::Skip {
                return Err(Error::Config(
                    "--allow-permission-mode bypassPermissions: only with --permissions skip \
                     (it turns every permission check off)"
                        .into(),
                ));
            }
            self.permission_modes.insert(mode.to_owned());
        }
        Ok(self)
    }

    /// The permission modes a client may choose, sorted.
    pub fn allowed_permission_modes(&self) -> impl Iterator<Item = &str> {
        self.permission_modes.iter().map(String::as_str)
    }

    /// Checks a client's permission mode (`field` names it in errors):
    /// INVALID_ARGUMENT for an unknown mode, PERMISSION_DENIED for one the
    /// operator does not allow. Empty passes (the CLI's default).
    pub fn check_permission_mode(&self, field: &'static str, mode: &str) -> Result<()> {
        if mode.is_empty() {
            return Ok(());
        }
        if !known_permission_mode(mode) {
            return Err(Error::invalid(
                field,
                format!(
                    "{:?} is not a permission mode (one of {})",
                    mode.chars().take(64).collect::<String>(),
                    PERMISSION_MODES.join(", ")
                ),
            ));
        }
        if !self.permission_modes.contains(mode) {
            return Err(Error::PolicyDenied(format!(
                "{field}: permission mode {mode} is not allowed by this server (allowed: {}; \
                 the operator widens it with --allow-permission-mode)",
                self.allowed_permission_modes()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(())
    }

    /// Trusts every client: every arg and env var passes and cwd is
    /// unrestricted (`model`/`resume` syntax and env-name syntax are still
    /// checked, and env values are still kept out of the log). Behind the
    /// `test-util` feature, so `serve` cannot reach it: for the tests that
    /// prove each security layer on its own, and for embedders whose
    /// clients are the operator.
    #[cfg(any(test, feature = "test-util"))]
    pub fn trust_clients() -> Self {
        Self::default()
            .trusting_client_args()
            .trusting_client_env()
            .trusting_client_cwd()
    }

    /// This policy, but every client arg passes (feature `test-util`; `serve`
    /// cannot reach it).
    #[cfg(any(test, feature = "test-util"))]
    pub fn trusting_client_args(mut self) -> Self {
        self.trust_args = true;
        self
    }

    /// This policy, but every client env var passes (feature `test-util`; `serve`
    /// cannot reach it).
    #[cfg(any(test, feature = "test-util"))]
    pub fn trusting_client_env(mut self) -> Self {
        self.trust_env = true;
        self
    }

    /// This policy, but any cwd passes (feature `test-util`; `serve`
    /// cannot reach it).
    #[cfg(any(test, feature = "test-util"))]
    pub fn trusting_client_cwd(mut self) -> Self {
        self.trust_cwd = true;
        self
    }

    /// Whether this is [`LaunchPolicy::trust_clients`].
    pub fn trusts_clients(&self) -> bool {
        self.trust_args && self.trust_env && self.trust_cwd
    }

    /// The flags a client may pass, sorted.
    pub fn allowed_args(&self) -> impl Iterator<Item = &str> {
        self.args.keys().map(String::as_str)
    }

    /// The env names a client may set, sorted.
    pub fn allowed_env(&self) -> impl Iterator<Item = &str> {
        self.env.iter().map(String::as_str)
    }

    /// The directories `config.cwd` must lie under (canonical); empty: any.
    pub fn allowed_cwds(&self) -> &[PathBuf] {
        &self.cwds
    }

    /// Checks everything of `config` that reaches the process: `model`,
    /// `resume`, `args`, `env`, then `cwd`. With `--allowed-cwd`, a
    /// non-empty `config.cwd` is replaced by its resolved path, so the
    /// process starts in the directory that was checked.
    /// [`Error::InvalidField`] naming the field, or [`Error::PolicyDenied`]
    /// for a cwd outside the allowed directories.
    pub fn admit(&self, config: &mut pb::StartConfig) -> Result<()> {
        agent::check(config)?;
        check_model(&config.model)?;
        self.check_permission_mode("config.permission_mode", &config.permission_mode)?;
        check_thinking_tokens("config.max_thinking_tokens", config.max_thinking_tokens)?;
        check_resume(&config.resume)?;
        self.check_args(&config.args)?;
        self.check_env(&config.env)?;
        if let Some(resolved) = self.check_cwd(&config.cwd)?
            && !config.cwd.is_empty()
            && let Some(s) = resolved.to_str()
        {
            config.cwd = s.to_owned();
        }
        // After the policy, so that a refused path never tells whether it exists.
        if !config.cwd.is_empty() && !Path::new(&config.cwd).is_dir() {
            return Err(Error::invalid(
                "config.cwd",
                format!("{:?} is not an existing directory", config.cwd),
            ));
        }
        Ok(())
    }

    /// Checks a client's `config.env` names. [`Error::InvalidField`] naming
    /// `config.env.KEY` (the first refused name in sorted order; the reason
    /// lists any others).
    pub fn check_env(&self, env: &HashMap<String, String>) -> Result<()> {
        let mut keys: Vec<&String> = env.keys().collect();
        keys.sort();
        let mut refused: Vec<(&str, String)> = Vec::new();
        for key in keys {
            if let Some(reason) = self.env_refusal(key, &env[key]) {
                refused.push((key, reason));
            }
        }
        let Some(((first, reason), rest)) = refused.split_first() else {
            return Ok(());
        };
        let field = if env_key_ok(first) {
            format!("config.env.{first}")
        } else {
            "config.env".to_owned()
        };
        let mut reason = reason.clone();
        if !rest.is_empty() {
            let others: Vec<String> = rest.iter().map(|(k, _)| format!("{k:?}")).collect();
            reason.push_str(&format!(" (also refused: {})", others.join(", ")));
        }
        Err(Error::invalid(field, reason))
    }

    fn env_refusal(&self, key: &str, value: &str) -> Option<String> {
        if !env_key_ok(key) {
            return Some(format!(
                "{key:?} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ));
        }
        if value.contains('\0') {
            return Some(format!("the value of {key} contains a NUL byte"));
        }
        if self.trust_env || self.env.contains(key) {
            return None;
        }
        Some(if never_env(key) {
            format!(
                "{key} is never accepted from a client (it redirects the API, changes \
                 credentials, or injects code)"
            )
        } else {
            format!(
                "{key} is not an allowed variable; the operator can allow it with --allow-env={key}"
            )
        })
    }

    /// Checks a client's `config.cwd` ("" = the server's current
    /// directory). Without `--allowed-cwd`: `Ok(None)`, unchecked. With
    /// it: the resolved directory, or [`Error::PolicyDenied`] when it is not
    /// under any allowed one ([`Error::InvalidField`] when it cannot be
    /// resolved).
    pub fn check_cwd(&self, cwd: &str) -> Result<Option<PathBuf>> {
        if self.trust_cwd || self.cwds.is_empty() {
            return Ok(None);
        }
        let path = if cwd.is_empty() {
            std::env::current_dir().map_err(|e| {
                Error::Internal(format!("the server's current directory is unknown: {e}"))
            })?
        } else {
            PathBuf::from(cwd)
        };
        let denied = |shown: &Path| {
            Error::PolicyDenied(format!(
                "config.cwd {cwd:?} (resolved: {}) is outside the directories this server allows \
                 (--allowed-cwd)",
                display(shown)
            ))
        };
        let resolved = match path.canonicalize() {
            Ok(p) => p,
            // Whether a path outside the allowed dirs exists is none of the
            // client's business: refuse it the same way either way.
            Err(_) if !self.cwds.iter().any(|dir| path.starts_with(dir)) => {
                return Err(denied(&path));
            }
            Err(e) => {
                return Err(Error::invalid(
                    "config.cwd",
                    format!("{cwd:?} cannot be resolved: {e}"),
                ));
            }
        };
        if self.cwds.iter().any(|dir| resolved.starts_with(dir)) {
            return Ok(Some(resolved));
        }
        Err(denied(&resolved))
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `config.model`: empty, or `[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]*` of at most
/// [`MAX_NAME_LEN`] bytes, holding no `://` and not named like a CLI
/// subcommand ([`SUBCOMMANDS`]); it becomes `--model=VALUE`.
pub fn check_model(model: &str) -> Result<()> {
    if model.is_empty() {
        return Ok(());
    }
    if model.len() > MAX_NAME_LEN {
        return Err(Error::invalid(
            "config.model",
            format!("longer than {MAX_NAME_LEN} bytes"),
        ));
    }
    if !name_ok(model, "._:/@[]-") {
        return Err(Error::invalid(
            "config.model",
            format!("{model:?} is not a model name (A-Z a-z 0-9, then also . _ : / @ [ ] -)"),
        ));
    }
    // `cc://` in any argument makes the CLI parse its subcommands, and a
    // URL is never a model name.
    if model.contains("://") {
        return Err(Error::invalid(
            "config.model",
            format!("{model:?} is a URL, not a model name"),
        ));
    }
    if subcommand(model) {
        return Err(Error::invalid(
            "config.model",
            format!("{model:?} names a subcommand of the CLI, not a model"),
        ));
    }
    Ok(())
}

/// Whether the CLI knows this permission mode.
fn known_permission_mode(mode: &str) -> bool {
    PERMISSION_MODES
        .iter()
        .any(|m| m.as_bytes() == mode.as_bytes())
}

/// A thinking budget: at most [`MAX_THINKING_TOKENS`].
pub fn check_thinking_tokens(field: &'static str, tokens: Option<u32>) -> Result<()> {
    match tokens {
        Some(n) if n > MAX_THINKING_TOKENS => Err(Error::invalid(
            field,
            format!("{n} is more than {MAX_THINKING_TOKENS}"),
        )),
        _ => Ok(()),
    }
}

/// `config.resume`: empty, or `[A-Za-z0-9][A-Za-z0-9._-]*` of at most
/// [`MAX_NAME_LEN`] bytes (it becomes `--resume=VALUE`).
pub fn check_resume(resume: &str) -> Result<()> {
    if resume.is_empty() {
        return Ok(());
    }
    if resume.len() > MAX_NAME_LEN {
        return Err(Error::invalid(
            "config.resume",
            format!("longer than {MAX_NAME_LEN} bytes"),
        ));
    }
    if !name_ok(resume, "._-") {
        return Err(Error::invalid(
            "config.resume",
            format!("{resume:?} is not a session id (A-Z a-z 0-9, then also . _ -)"),
        ));
    }
    Ok(())
}

/// `config` as `run_start` records it: every env value replaced by
/// [`REDACTED`] (the names stay, so a reader sees what was set).
pub fn redacted(config: &pb::StartConfig) -> pb::StartConfig {
    let mut out = config.clone();
    for v in out.env.values_mut() {
        *v = REDACTED.to_owned();
    }
    out
}

#[cfg(test)]
mod tests;
