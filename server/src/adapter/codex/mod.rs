//! OpenAI Codex, through its app-server: one `codex app-server --listen
//! stdio://` process per run, kept alive between turns, speaking JSON-RPC
//! lines (without the `"jsonrpc"` member) both ways.
//!
//! - this module: [`CodexOptions`], [`CodexAdapter`], finding the binary,
//!   and how our permission modes map onto Codex's approval policy and
//!   sandbox ([`approval_for`]);
//! - [`process`]: the process side: the handshake, turns, interrupts,
//!   approval answers and the settings it applies itself;
//! - [`decode`]: what Codex writes, as log events;
//! - `flags`: [`CodexFlags`], the adapter's flags of `serve`.
//!
//! docs/agents.md has the permission-mode table and what Codex lacks.

pub mod decode;
mod flags;
pub mod process;

use std::path::{Path, PathBuf};

use agent_harness_protocol::vocab::agent;
pub use flags::CodexFlags;
use serde_json::{Value, json};

use crate::adapter::claude::PermissionMode;
use crate::adapter::claude::discover::{is_executable, on_path};
use crate::adapter::{
    AdapterError, BoxFuture, Decoder, DecoderSetup, ProcessAdapter, ProcessHandle, SpawnConfig,
};
use crate::supervise::{DEFAULT_MAX_LINE_BYTES, DEFAULT_STRIP_ENV, ProcessSpec};

/// The environment variable that names the codex binary for discovery.
pub const CODEX_BIN_ENV: &str = "CODEX_BIN";

/// The app-server's arguments: JSON-RPC lines on stdin and stdout.
pub const APP_SERVER_ARGS: [&str; 3] = ["app-server", "--listen", "stdio://"];

/// Options of the Codex adapter.
#[derive(Debug, Clone)]
pub struct CodexOptions {
    /// The codex binary (found or configured; see [`find_codex`]).
    pub codex_bin: PathBuf,
    /// `CODEX_HOME` of every process: Codex's configuration (model
    /// providers), login and rollouts. `None` leaves the variable to the
    /// environment.
    pub codex_home: Option<PathBuf>,
    /// Environment for every child (a run's `env` wins over it).
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub strip_env_keys: Vec<String>,
    /// How tool permissions are decided when a run names no permission
    /// mode (`--permissions`: relay asks, skip runs everything unasked,
    /// settings leaves it to Codex's own configuration).
    pub permissions: PermissionMode,
    /// Longest stdout line accepted whole.
    pub max_line_bytes: usize,
}

impl CodexOptions {
    /// Options running `codex_bin`, with the defaults otherwise.
    pub fn new(codex_bin: impl Into<PathBuf>) -> Self {
        Self {
            codex_bin: codex_bin.into(),
            codex_home: None,
            env: Vec::new(),
            strip_env_keys: DEFAULT_STRIP_ENV.iter().map(|s| s.to_string()).collect(),
            permissions: PermissionMode::Relay,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Codex's approval policy and sandbox for one of our permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval {
    /// `approvalPolicy`: "untrusted" (ask before anything not known to be
    /// safe), "never".
    pub policy: &'static str,
    /// The sandbox, as `thread/start` names it: "read-only",
    /// "workspace-write", "danger-full-access".
    pub sandbox: &'static str,
}

impl Approval {
    /// The sandbox as `turn/start`'s `sandboxPolicy` override names it.
    pub fn sandbox_policy(&self) -> Value {
        match self.sandbox {
            "read-only" => json!({"type": "readOnly", "networkAccess": false}),
            "danger-full-access" => json!({"type": "dangerFullAccess"}),
            _ => json!({
                "type": "workspaceWrite",
                "writableRoots": [],
                "networkAccess": false,
                "excludeTmpdirEnvVar": true,
                "excludeSlashTmp": true,
            }),
        }
    }

    /// Configuration overrides `thread/start` and `thread/resume` carry with
    /// the sandbox. Codex's workspace-write sandbox makes `/tmp` and
    /// `$TMPDIR` writable as well as the working directory, and creates
    /// `.git`, `.codex` and `.agents` in every writable root to protect
    /// them: in `/tmp` that makes a `/tmp/.git` every other program then
    /// takes for the repository of everything under `/tmp`. Writes stay in
    /// the working directory.
    pub fn thread_config(&self) -> Option<Value> {
        (self.sandbox == "workspace-write").then(|| {
            json!({
                "sandbox_workspace_write.exclude_slash_tmp": true,
                "sandbox_workspace_write.exclude_tmpdir_env_var": true,
            })
        })
    }
}

/// Asks before every command or edit that is not known to be safe, and
/// writes only inside the working directory.
const ASK: Approval = Approval {
    policy: "untrusted",
    sandbox: "workspace-write",
};

/// Codex's settings for permission mode `mode` ("" for none named), under
/// the operator's `--permissions`; `Ok(None)` leaves them to Codex's own
/// configuration. `Err` for a mode Codex has no equivalent of (the caller
/// answers FAILED_PRECONDITION).
///
/// | mode | approvalPolicy | sandbox |
/// |---|---|---|
/// | default | untrusted | workspace-write |
/// | plan | untrusted | read-only |
/// | dontAsk | never | read-only |
/// | bypassPermissions | never | danger-full-access |
/// | acceptEdits, auto | refused | |
/// | "" | as default (`--permissions relay`), as bypassPermissions (`skip`), Codex's configuration (`settings`) | |
pub fn approval_for(mode: &str, permissions: PermissionMode) -> Result<Option<Approval>, String> {
    Ok(Some(match mode {
        "" => match permissions {
            PermissionMode::Relay => ASK,
            PermissionMode::Skip => return approval_for("bypassPermissions", permissions),
            PermissionMode::Settings => return Ok(None),
        },
        "default" => ASK,
        "plan" => Approval {
            policy: "untrusted",
            sandbox: "read-only",
        },
        "dontAsk" => Approval {
            policy: "never",
            sandbox: "read-only",
        },
        "bypassPermissions" => Approval {
            policy: "never",
            sandbox: "danger-full-access",
        },
        other => {
            return Err(format!(
                "Codex has no permission mode like {other:?} (it has default, plan, dontAsk and \
                 bypassPermissions)"
            ));
        }
    }))
}

/// Runs `codex app-server` for the runs whose agent is codex.
#[derive(Debug, Clone)]
pub struct CodexAdapter {
    options: CodexOptions,
}

impl CodexAdapter {
    /// An adapter with these options.
    pub fn new(options: CodexOptions) -> Self {
        Self { options }
    }

    /// What Codex cannot do of `config`: `Err` for the caller, before
    /// anything is recorded.
    fn refusal(&self, config: &SpawnConfig) -> Result<Option<Approval>, AdapterError> {
        let c = &config.config;
        let unable = |what: String| Err(AdapterError::Unable(what));
        if c.fork.is_some() {
            return unable("forking a Codex session is not supported yet".into());
        }
        if c.max_thinking_tokens.is_some() {
            return unable("Codex has no thinking-token budget (max_thinking_tokens)".into());
        }
        if !c.content_blocks.is_empty() {
            return unable("Codex takes text input only (content_blocks)".into());
        }
        approval_for(&c.permission_mode, self.options.permissions).or_else(unable)
    }

    /// The process spec of a run: the binary, the app-server's args, the
    /// cleaned env with `CODEX_HOME` last (nothing overrides it), the cwd.
    fn spec(&self, config: &SpawnConfig) -> ProcessSpec {
        let mut spec = ProcessSpec::new(&self.options.codex_bin);
        spec.args = APP_SERVER_ARGS.iter().map(Into::into).collect();
        spec.tasks = config.tasks.clone();
        spec.strip_env_keys = self.options.strip_env_keys.clone();
        spec.max_line_bytes = self.options.max_line_bytes;
        spec.env = self.options.env.clone();
        let mut run_env: Vec<_> = config.config.env.clone().into_iter().collect();
        run_env.sort();
        spec.env.extend(run_env);
        if let Some(home) = &self.options.codex_home {
            spec.env
                .push(("CODEX_HOME".into(), home.display().to_string()));
        }
        if !config.config.cwd.is_empty() {
            spec.cwd = Some(PathBuf::from(&config.config.cwd));
        }
        if !config.run_id.is_empty() {
            spec.run_marker = Some(config.run_id.clone());
        }
        spec.stdin = true;
        spec
    }

    /// The options it runs with.
    pub fn options(&self) -> &CodexOptions {
        &self.options
    }
}

impl ProcessAdapter for CodexAdapter {
    fn name(&self) -> &str {
        agent::CODEX
    }

    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        self.refusal(config).map(drop)
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let approval = self.refusal(&config)?;
            let spec = self.spec(&config);
            process::start(&spec, &config, approval, self.options.permissions).await
        })
    }

    fn decoder(&self, _config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        Box::new(decode::CodexDecoder::new(&setup))
    }
}

/// What to do when no binary is found; part of every message saying so.
pub const HOW_TO_ENABLE: &str = "install it with `npm install -g @openai/codex`, or point the \
server at it with `--codex-bin /path/to/codex` (env AGENT_HARNESS_CODEX_BIN)";

/// The codex binary: `explicit` (`--codex-bin`, which must be executable),
/// else `CODEX_BIN`, the usual install locations and `PATH`; `Ok(None)`
/// when none has it (Codex is then not enabled).
pub fn find_codex(explicit: Option<&Path>) -> Result<Option<PathBuf>, String> {
    if let Some(p) = explicit {
        return if is_executable(p) {
            Ok(Some(p.to_path_buf()))
        } else {
            Err(format!(
                "--codex-bin {}: not an executable file",
                p.display()
            ))
        };
    }
    if let Some(p) = std::env::var_os(CODEX_BIN_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if is_executable(&p) {
            Ok(Some(p))
        } else {
            Err(format!(
                "{CODEX_BIN_ENV}={}: not an executable file",
                p.display()
            ))
        };
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut places: Vec<PathBuf> = Vec::new();
    if let Some(home) = &home {
        places.push(home.join(".local/bin/codex"));
    }
    places.push("/usr/local/bin/codex".into());
    places.push("/opt/homebrew/bin/codex".into());
    if let Some(prefix) = std::env::var_os("NPM_CONFIG_PREFIX") {
        places.push(PathBuf::from(prefix).join("bin/codex"));
    }
    if let Some(home) = &home {
        places.push(home.join(".npm-global/bin/codex"));
    }
    if let Some(found) = places.into_iter().find(|p| is_executable(p)) {
        return Ok(Some(found));
    }
    Ok(on_path(std::env::var_os("PATH").as_deref(), "codex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_modes_map_onto_approval_and_sandbox() {
        let relay = PermissionMode::Relay;
        assert_eq!(approval_for("", relay), Ok(Some(ASK)));
        assert_eq!(approval_for("default", relay), Ok(Some(ASK)));
        assert_eq!(
            approval_for("plan", relay).unwrap().unwrap().sandbox,
            "read-only"
        );
        let skip = approval_for("", PermissionMode::Skip).unwrap().unwrap();
        assert_eq!((skip.policy, skip.sandbox), ("never", "danger-full-access"));
        assert_eq!(approval_for("", PermissionMode::Settings), Ok(None));
        assert!(approval_for("acceptEdits", relay).is_err());
        assert!(approval_for("auto", relay).is_err());
        assert_eq!(skip.sandbox_policy(), json!({"type": "dangerFullAccess"}));
        assert_eq!(skip.thread_config(), None);
        // Workspace-write keeps /tmp and $TMPDIR out of the writable roots.
        let ask = approval_for("default", relay).unwrap().unwrap();
        assert_eq!(ask.sandbox_policy()["excludeSlashTmp"], json!(true));
        assert_eq!(ask.sandbox_policy()["excludeTmpdirEnvVar"], json!(true));
        assert_eq!(
            ask.thread_config().unwrap()["sandbox_workspace_write.exclude_slash_tmp"],
            json!(true)
        );
    }
}
