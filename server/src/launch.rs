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
//! - **model**, **resume**: plain names (they must not look like a flag).
//!
//! The manager checks every config that reaches a process ([`LaunchPolicy::admit`]):
//! a Start's, and the recorded one a Send respawns with (under the policy
//! of now, which may be narrower than when it was recorded). Env values
//! never enter the event log: `run_start` records each as [`REDACTED`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use agent_harness_client::pb;

use crate::config::ServeConfig;
use crate::error::{Error, Result};

/// What `run_start` records in place of each env value.
pub const REDACTED: &str = "[redacted]";

/// Longest `config.model` / `config.resume` accepted.
pub const MAX_NAME_LEN: usize = 256;

/// How many values a flag takes (as the CLI's `--help` shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// A switch: `--flag`.
    Switch,
    /// One value: `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// One or more values: `--flag A B C` (or `--flag=A`).
    Variadic,
}

/// The flags a client may pass without any `--allow-arg`: they choose the
/// model, bound the run and shape the prompt, and can only narrow what the
/// tools may do (`--disallowedTools`).
pub const DEFAULT_ARGS: &[&str] = &[
    "--model",
    "--fallback-model",
    "--max-turns",
    "--append-system-prompt",
    "--system-prompt",
    "--effort",
    "--max-budget-usd",
    "--json-schema",
    "--disallowedTools",
    "--disallowed-tools",
];

/// The arity of the flags this server knows (from `claude --help` of CLI
/// 2.1.197; `--max-turns` is hidden there but takes a value). An allowed
/// flag not listed here may only be passed bare or as `--flag=value`: a
/// value in the next token would be ambiguous (the CLI might read it as
/// a prompt or a subcommand).
pub const KNOWN_ARITY: &[(&str, Arity)] = &[
    ("--model", Arity::Value),
    ("--fallback-model", Arity::Value),
    ("--max-turns", Arity::Value),
    ("--append-system-prompt", Arity::Value),
    ("--system-prompt", Arity::Value),
    ("--effort", Arity::Value),
    ("--max-budget-usd", Arity::Value),
    ("--json-schema", Arity::Value),
    ("--disallowedTools", Arity::Variadic),
    ("--disallowed-tools", Arity::Variadic),
    // Not in the default set; their arity for when an operator allows them.
    ("--name", Arity::Value),
    ("--betas", Arity::Variadic),
    ("--brief", Arity::Switch),
    ("--disable-slash-commands", Arity::Switch),
    ("--exclude-dynamic-system-prompt-sections", Arity::Switch),
    ("--ax-screen-reader", Arity::Switch),
    ("--no-chrome", Arity::Switch),
];

/// Flags never accepted from a client, and a start-up error in
/// `--allow-arg` (so is any prefix of one, and any spelling that differs
/// only in case, `-` or `_`, e.g. `--allowedtools`, `--dangerously`).
pub const NEVER_ARGS: &[&str] = &[
    // Turn permission checks off or widen what tools may do, or decide who
    // answers permission requests (the server relays them to its clients).
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
    "--permission-mode",
    "--permission-prompt-tool",
    // CLI 2.1.332: "host" or "none" decides who answers prompts.
    "--permission-prompts",
    "--allowedTools",
    "--allowed-tools",
    "--add-dir",
    // Load settings, hooks, MCP servers, plugins, agents or tool sets: each
    // can run commands or widen permissions.
    "--settings",
    "--setting-sources",
    "--mcp-config",
    "--strict-mcp-config",
    "--plugin-dir",
    "--plugin-url",
    "--agents",
    "--agent",
    "--tools",
    // Write or fetch files, or reach outside the process: debug logs to a
    // chosen path, downloads, worktrees, tmux, the IDE, Chrome, remote
    // control, background agents, PRs.
    "--debug",
    "--debug-file",
    "--file",
    "--worktree",
    "--tmux",
    "--ide",
    "--chrome",
    "--remote-control",
    "--remote-control-session-name-prefix",
    "--bg",
    "--background",
    "--from-pr",
    // CLI 2.1.332: cloud sessions, self-hosted environments, the desktop
    // app, teleport sessions.
    "--cloud",
    "--environment",
    "--desktop",
    "--teleport",
    // Owned by the server: which conversation a run continues (its log
    // decides), the transport and its stream format, what the CLI prints,
    // where it persists, and how it starts.
    "--continue",
    "--resume",
    "--resume-session-at",
    "--fork-session",
    "--session-id",
    "--sdk-url",
    "--input-format",
    "--output-format",
    "--print",
    "--verbose",
    "--include-partial-messages",
    "--include-hook-events",
    // CLI 2.1.332: changes how subagent output is framed.
    "--forward-subagent-text",
    "--replay-user-messages",
    "--no-session-persistence",
    "--bare",
    "--safe-mode",
    "--help",
    "--version",
];

/// Environment variables never accepted from a client, and a start-up error
/// in `--allow-env` (compared case-insensitively): they turn the sandbox
/// check off, move the home, search path, shell or temp dir, or make a
/// shell run code.
pub const NEVER_ENV: &[&str] = &[
    "IS_SANDBOX",
    "HOME",
    "PATH",
    "SHELL",
    "ENV",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Prefixes of environment variables never accepted from a client (compared
/// case-insensitively): the CLI's own configuration and credentials
/// (`ANTHROPIC_*`: the API endpoint and key; `CLAUDE_*`: `CLAUDE_CODE_*`,
/// `CLAUDE_CONFIG_DIR`), runtimes that load code from the environment
/// (Node, Bun, the dynamic linker, bash functions, git, Python, Perl, Ruby,
/// Java, npm), telemetry endpoints, cloud credentials and the providers
/// the CLI can be pointed at, config dirs, TLS trust, ssh agents.
pub const NEVER_ENV_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "CLAUDE_",
    "NODE_",
    "BUN_",
    "NPM_CONFIG_",
    "LD_",
    "DYLD_",
    "BASH_",
    "GIT_",
    "PYTHON",
    "PERL5",
    "RUBY",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "OTEL_",
    "AWS_",
    "GOOGLE_",
    "CLOUD_ML_",
    "VERTEX_",
    "XDG_",
    "SSL_",
    "SSH_",
];

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
}

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
        }
    }
}

fn arity_of(flag: &str) -> Option<Arity> {
    KNOWN_ARITY
        .iter()
        .find(|(f, _)| *f == flag)
        .map(|(_, a)| *a)
}

/// A flag name compared loosely: `-` and `_` removed, lowercased.
fn loose(flag: &str) -> String {
    flag.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The never-accepted flag `flag` names or abbreviates (loosely compared).
fn never_arg(flag: &str) -> Option<&'static str> {
    let l = loose(flag);
    if l.is_empty() {
        return None;
    }
    NEVER_ARGS
        .iter()
        .copied()
        .find(|n| loose(n).starts_with(&l))
}

/// Whether `key` is never accepted (case-insensitive).
fn never_env(key: &str) -> bool {
    let up = key.to_ascii_uppercase();
    NEVER_ENV.contains(&up.as_str()) || NEVER_ENV_PREFIXES.iter().any(|p| up.starts_with(p))
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

    /// [`LaunchPolicy::from_operator`] over `serve`'s configuration.
    pub fn from_config(config: &ServeConfig) -> Result<Self> {
        Self::from_operator(&config.allow_args, &config.allow_env, &config.allowed_cwds)
    }

    /// Trusts every client: every arg and env var passes and cwd is
    /// unrestricted (`model`/`resume` syntax and env-name syntax are still
    /// checked, and env values are still kept out of the log). Never used
    /// by `serve`; for embedders whose clients are the operator, and for
    /// the tests that prove each security layer on its own.
    pub fn trust_clients() -> Self {
        Self::default()
            .trusting_client_args()
            .trusting_client_env()
            .trusting_client_cwd()
    }

    /// This policy, but every client arg passes (never used by `serve`).
    pub fn trusting_client_args(mut self) -> Self {
        self.trust_args = true;
        self
    }

    /// This policy, but every client env var passes (never used by `serve`).
    pub fn trusting_client_env(mut self) -> Self {
        self.trust_env = true;
        self
    }

    /// This policy, but any cwd passes (never used by `serve`).
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
        check_model(&config.model)?;
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

    /// Checks a client's `config.args` (see the module docs).
    /// [`Error::InvalidField`] naming `config.args[N]`, the offending token.
    pub fn check_args(&self, args: &[String]) -> Result<()> {
        /// What the next token may be.
        #[derive(Clone, Copy)]
        enum Next {
            /// A flag.
            Flag,
            /// The value of the flag at this index (which takes one).
            Value { flag: usize, variadic: bool },
            /// More values of a variadic flag, or a flag.
            MoreValues,
        }
        let field = |i: usize| format!("config.args[{i}]");
        let needs_value = |i: usize| {
            Error::invalid(
                field(i),
                format!(
                    "{} needs a value: give it in the next argument, or as {}=VALUE (needed \
                     when the value starts with '-')",
                    args[i], args[i]
                ),
            )
        };
        let mut next = Next::Flag;
        for (i, tok) in args.iter().enumerate() {
            if tok.contains('\0') {
                return Err(Error::invalid(field(i), "contains a NUL byte"));
            }
            if !tok.starts_with('-') {
                next = match next {
                    Next::Value { variadic: true, .. } | Next::MoreValues => Next::MoreValues,
                    Next::Value {
                        variadic: false, ..
                    } => Next::Flag,
                    Next::Flag if self.trust_args => Next::Flag,
                    Next::Flag => {
                        return Err(Error::invalid(
                            field(i),
                            format!(
                                "{tok:?} is not the value of a flag that takes one; the CLI \
                                 would read it as a subcommand or a prompt (send prompts with \
                                 config.prompt; give a value as --flag=VALUE)"
                            ),
                        ));
                    }
                };
                continue;
            }
            if let Next::Value { flag, .. } = next {
                return Err(needs_value(flag));
            }
            next = Next::Flag;
            if self.trust_args {
                continue;
            }
            if tok == "--" {
                return Err(Error::invalid(
                    field(i),
                    "\"--\" is never accepted from a client: what follows it would reach the \
                     CLI as a prompt",
                ));
            }
            if !tok.starts_with("--") {
                return Err(Error::invalid(
                    field(i),
                    format!(
                        "{tok:?}: short flags are never accepted from a client; use the long \
                         spelling of an allowed flag"
                    ),
                ));
            }
            let (name, value) = match tok.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (tok.as_str(), None),
            };
            let Some(arity) = self.args.get(name) else {
                let reason = match never_arg(name) {
                    Some(never) => format!(
                        "{name} is never accepted from a client{}: it turns permissions off \
                         or widens them, loads code or settings, or is owned by the server",
                        if never == name {
                            String::new()
                        } else {
                            format!(" (it spells or abbreviates {never})")
                        }
                    ),
                    None => format!(
                        "{name} is not an allowed flag (flags are matched exactly; \
                         abbreviations are not accepted); the operator can allow it with \
                         --allow-arg={name}"
                    ),
                };
                return Err(Error::invalid(field(i), reason));
            };
            match (arity, value) {
                (Some(Arity::Switch), Some(_)) => {
                    return Err(Error::invalid(field(i), format!("{name} takes no value")));
                }
                (Some(Arity::Value), None) => {
                    next = Next::Value {
                        flag: i,
                        variadic: false,
                    }
                }
                (Some(Arity::Variadic), None) => {
                    next = Next::Value {
                        flag: i,
                        variadic: true,
                    }
                }
                _ => {}
            }
        }
        match next {
            Next::Value { flag, .. } => Err(needs_value(flag)),
            _ => Ok(()),
        }
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
/// [`MAX_NAME_LEN`] bytes (it becomes `--model VALUE`).
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
    Ok(())
}

/// `config.resume`: empty, or `[A-Za-z0-9][A-Za-z0-9._-]*` of at most
/// [`MAX_NAME_LEN`] bytes (it becomes `--resume VALUE`).
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
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn startup_err(args: &[&str], env: &[&str], cwds: &[PathBuf]) -> String {
        match LaunchPolicy::from_operator(&s(args), &s(env), cwds) {
            Err(e @ Error::Config(_)) => e.to_string(),
            other => panic!("expected a start-up error, got {other:?}"),
        }
    }

    fn field_of(e: Error) -> String {
        match e {
            Error::InvalidField { field, .. } => field.into_owned(),
            other => panic!("expected InvalidField, got {other:?}"),
        }
    }

    #[test]
    fn default_set_collides_with_nothing_never_accepted() {
        for f in DEFAULT_ARGS {
            assert!(never_arg(f).is_none(), "{f}");
            assert!(arity_of(f).is_some(), "{f} needs a known arity");
        }
        for (f, _) in KNOWN_ARITY {
            assert!(never_arg(f).is_none(), "{f}");
        }
        let p = LaunchPolicy::from_operator(&s(DEFAULT_ARGS), &[], &[]).unwrap();
        assert_eq!(p, LaunchPolicy::default());
    }

    #[test]
    fn startup_refuses_never_accepted_flags_and_their_variants() {
        for bad in [
            "--dangerously-skip-permissions",
            "--dangerously",
            "--allowedtools",
            "--allowed_tools",
            "--ALLOWED-TOOLS",
            "--permission-mode=",
            "--agent",
            "--sett",
        ] {
            let e = startup_err(&[bad], &[], &[]);
            assert!(
                e.contains("--allow-arg") && e.contains("never"),
                "{bad}: {e}"
            );
        }
        for bad in ["-p", "--", "---x", "--=", "print", "--a b", ""] {
            let e = startup_err(&[bad], &[], &[]);
            assert!(e.contains("--allow-arg"), "{bad}: {e}");
        }
        let p = LaunchPolicy::from_operator(&s(&["--name=", "--betas"]), &[], &[]).unwrap();
        assert!(p.allowed_args().any(|f| f == "--name"));
        assert!(p.allowed_args().any(|f| f == "--betas"));
    }

    #[test]
    fn startup_refuses_never_accepted_env_and_bad_names() {
        for bad in [
            "NODE_OPTIONS",
            "anthropic_base_url",
            "IS_SANDBOX",
            "Claude_Config_Dir",
            "LD_PRELOAD",
            "BASH_FUNC_x%%",
            "https_proxy",
            "PYTHONSTARTUP",
            "GIT_SSH_COMMAND",
            "PATH",
        ] {
            let e = startup_err(&[], &[bad], &[]);
            assert!(e.contains("--allow-env"), "{bad}: {e}");
        }
        for bad in ["1X", "A-B", "A=B", ""] {
            let e = startup_err(&[], &[bad], &[]);
            assert!(e.contains("not a variable name"), "{bad}: {e}");
        }
        let p = LaunchPolicy::from_operator(&[], &s(&["MY_FLAG"]), &[]).unwrap();
        assert_eq!(p.allowed_env().collect::<Vec<_>>(), ["MY_FLAG"]);
    }

    #[test]
    fn startup_refuses_a_missing_cwd_dir() {
        let dir = std::env::temp_dir().join(format!("ah-launch-missing-{}", std::process::id()));
        let e = startup_err(&[], &[], &[dir]);
        assert!(e.contains("--allowed-cwd"), "{e}");
        let file = std::env::current_exe().unwrap();
        let e = startup_err(&[], &[], &[file]);
        assert!(
            e.contains("--allowed-cwd") && e.contains("not a directory"),
            "{e}"
        );
    }

    #[test]
    fn client_args() {
        let p = LaunchPolicy::default();
        for ok in [
            &[][..],
            &["--model", "opus"][..],
            &["--model=opus"],
            &["--max-turns", "3", "--effort=high"],
            &["--disallowedTools", "Bash", "Edit", "--model", "x"],
            &["--disallowed-tools=Bash"],
            &["--append-system-prompt", ""],
            &["--append-system-prompt=-be brief"],
        ] {
            assert!(p.check_args(&s(ok)).is_ok(), "{ok:?}");
        }
        for (bad, at) in [
            (&["--dangerously-skip-permissions"][..], 0),
            (&["--model", "x", "--permission-mode=bypassPermissions"], 2),
            (&["--allowedTools", "Bash"], 0),
            (&["--mod", "x"], 0),
            (&["--Model", "x"], 0),
            (&["-p"], 0),
            (&["--"], 0),
            (&["mcp"], 0),
            (&["--model", "x", "y"], 2),
            (&["--model=x", "y"], 1),
            (&["--disallowedTools=Bash", "Edit"], 1),
            (&["--max-turns"], 0),
            (&["--effort", "high", "--max-turns"], 2),
            (&["--append-system-prompt", "-x"], 0),
            (&["--disallowedTools"], 0),
            (&["--model", "a\0b"], 1),
        ] {
            let e = p.check_args(&s(bad)).unwrap_err();
            assert_eq!(field_of(e), format!("config.args[{at}]"), "{bad:?}");
        }
        let e = p
            .check_args(&s(&["--dangerously-skip-permissions"]))
            .unwrap_err();
        assert!(e.to_string().contains("never accepted"), "{e}");
        let e = p.check_args(&s(&["--betas", "x"])).unwrap_err();
        assert!(e.to_string().contains("--allow-arg"), "{e}");
    }

    #[test]
    fn operator_flags_of_unknown_arity_take_no_separate_value() {
        let p = LaunchPolicy::from_operator(
            &s(&["--prompt-suggestions", "--brief", "--name"]),
            &[],
            &[],
        )
        .unwrap();
        assert!(p.check_args(&s(&["--prompt-suggestions"])).is_ok());
        assert!(p.check_args(&s(&["--prompt-suggestions=false"])).is_ok());
        assert!(
            p.check_args(&s(&["--prompt-suggestions", "false"]))
                .is_err()
        );
        assert!(p.check_args(&s(&["--brief"])).is_ok());
        assert!(p.check_args(&s(&["--brief=1"])).is_err());
        assert!(p.check_args(&s(&["--name", "n"])).is_ok());
    }

    #[test]
    fn client_env() {
        let env = |kv: &[(&str, &str)]| -> HashMap<String, String> {
            kv.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
        };
        let p = LaunchPolicy::from_operator(&[], &s(&["MY_FLAG"]), &[]).unwrap();
        assert!(p.check_env(&env(&[("MY_FLAG", "1")])).is_ok());
        let e = p.check_env(&env(&[("my_flag", "1")])).unwrap_err();
        assert_eq!(field_of(e), "config.env.my_flag");
        let e = p
            .check_env(&env(&[
                ("IS_SANDBOX", "1"),
                ("ANTHROPIC_BASE_URL", "http://x"),
            ]))
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("IS_SANDBOX"), "{msg}");
        assert_eq!(field_of(e), "config.env.ANTHROPIC_BASE_URL");
        let e = p.check_env(&env(&[("A-B", "1")])).unwrap_err();
        assert_eq!(field_of(e), "config.env");
        let t = LaunchPolicy::trust_clients();
        assert!(t.check_env(&env(&[("IS_SANDBOX", "1")])).is_ok());
        assert!(t.check_env(&env(&[("A=B", "1")])).is_err());
    }

    #[test]
    fn model_and_resume() {
        for ok in [
            "",
            "opus",
            "claude-sonnet-4-5",
            "us.anthropic.claude:0",
            "a/b@c[1m]",
        ] {
            assert!(check_model(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-p",
            "--dangerously-skip-permissions",
            "a b",
            "a\0",
            &"x".repeat(257),
        ] {
            assert_eq!(field_of(check_model(bad).unwrap_err()), "config.model");
        }
        assert!(check_resume("0b6c0f5e-1f2a-4c1e-9a4d-3b2a1c0d9e8f").is_ok());
        for bad in ["-x", "a/b", "a:b", "a\0"] {
            assert_eq!(field_of(check_resume(bad).unwrap_err()), "config.resume");
        }
    }

    #[test]
    fn cwd_under_allowed_dirs() {
        let base = std::env::temp_dir().join(format!("ah-launch-cwd-{}", std::process::id()));
        let inside = base.join("in");
        let outside = base.join("out");
        std::fs::create_dir_all(inside.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let link = inside.join("escape");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let p = LaunchPolicy::from_operator(&[], &[], std::slice::from_ref(&inside)).unwrap();
        let sub = inside.join("sub");
        assert_eq!(
            p.check_cwd(sub.to_str().unwrap()).unwrap(),
            Some(sub.canonicalize().unwrap())
        );
        for bad in [&outside, &link, &base.join("in/../out")] {
            match p.check_cwd(bad.to_str().unwrap()) {
                Err(Error::PolicyDenied(_)) => {}
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        // A sibling whose name merely starts with the allowed one.
        let sibling = base.join("in2");
        std::fs::create_dir_all(&sibling).unwrap();
        assert!(p.check_cwd(sibling.to_str().unwrap()).is_err());
        assert!(LaunchPolicy::default().check_cwd("/").unwrap().is_none());
        let mut config = pb::StartConfig {
            cwd: format!("{}/sub/.", inside.display()),
            ..Default::default()
        };
        p.admit(&mut config).unwrap();
        assert_eq!(config.cwd, sub.canonicalize().unwrap().to_str().unwrap());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn redaction_keeps_names_only() {
        let config = pb::StartConfig {
            env: [("K".to_owned(), "secret".to_owned())].into(),
            ..Default::default()
        };
        assert_eq!(redacted(&config).env["K"], REDACTED);
    }
}
