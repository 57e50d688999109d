//! Any agent that speaks the Agent Client Protocol (ACP: JSON-RPC 2.0
//! lines on stdio), configured by the operator as `--acp-agent
//! NAME=COMMAND` and chosen by `StartConfig.agent = NAME`: one process per
//! run, kept alive between turns.
//!
//! - this module: [`AcpOptions`], [`AcpAdapter`], and how our permission
//!   modes map onto the mode ids agents list ([`mode_candidates`]);
//! - [`client`]: the client side of the protocol as a state machine
//!   without I/O: the handshake, prompts, cancel, permission answers by
//!   option kind, the settings, the wait for a loaded session's replay;
//! - [`process`]: the process it drives;
//! - [`reopen`]: a load held back to the minute after the session's last
//!   opening (an agent may name its records by minute);
//! - [`decode`]: what the agent writes, as log events;
//! - `flags`: [`AcpFlags`], the adapter's flag of `serve`.
//!
//! The messages are few and written with serde_json: no ACP crate, so the
//! protocol version and every field we send stay visible here.
//! docs/agents.md has the mode table and what Gemini CLI lacks.

pub mod client;
pub mod decode;
mod flags;
pub mod process;
pub mod reopen;

use std::path::PathBuf;

pub use flags::{AcpAgentSpec, AcpFlags, name_ok};

use crate::adapter::claude::PermissionMode;
use crate::adapter::{
    AdapterError, BoxFuture, Decoder, DecoderSetup, ProcessAdapter, ProcessHandle, SpawnConfig,
};
use crate::supervise::{DEFAULT_MAX_LINE_BYTES, DEFAULT_STRIP_ENV, ProcessSpec};

/// Options of one configured ACP agent.
#[derive(Debug, Clone)]
pub struct AcpOptions {
    /// The name `StartConfig.agent` chooses it by; run_start, run_ready
    /// and the session name it too.
    pub name: String,
    /// The program (found at startup).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment for every child (a run's `env` wins over it).
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub strip_env_keys: Vec<String>,
    /// How tool permissions are decided when a run names no permission
    /// mode (`--permissions`: relay leaves the agent's own default, which
    /// asks; skip chooses its bypassPermissions-like mode; settings leaves
    /// it to the agent's configuration).
    pub permissions: PermissionMode,
    /// Longest stdout line accepted whole.
    pub max_line_bytes: usize,
}

impl AcpOptions {
    /// Options running `spec`, with the defaults otherwise.
    pub fn new(spec: AcpAgentSpec) -> Self {
        Self {
            name: spec.name,
            program: spec.program,
            args: spec.args,
            env: Vec::new(),
            strip_env_keys: DEFAULT_STRIP_ENV.iter().map(|s| s.to_string()).collect(),
            permissions: PermissionMode::Relay,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// The agent mode ids that stand for our permission mode `mode`, in order
/// of preference: ACP leaves mode ids to each agent, so the known ones are
/// listed (Gemini CLI: default, autoEdit, yolo, plan; codex-acp: read-only,
/// workspace-write, agent, agent-full-access). An id is listed only when
/// the agent's mode lets through no more than ours does: codex-acp's
/// `workspace-write` changes the workspace without asking and asks for
/// anything beyond it (acceptEdits); its `agent` hands the questions to an
/// automatic reviewer instead of the user and its `read-only` refuses edits
/// rather than asking, so neither stands for default. `Err` for a mode no
/// ACP agent is known to have. docs/agents.md has the table.
///
/// | ours | agent mode ids |
/// |---|---|
/// | default | default |
/// | acceptEdits | acceptEdits, autoEdit, auto, workspace-write |
/// | plan | plan |
/// | bypassPermissions | bypassPermissions, yolo, full-access, agent-full-access |
/// | dontAsk, auto | refused |
pub fn mode_candidates(mode: &str) -> Result<&'static [&'static str], String> {
    Ok(match mode {
        "default" => &["default"],
        "acceptEdits" => &["acceptEdits", "autoEdit", "auto", "workspace-write"],
        "plan" => &["plan"],
        "bypassPermissions" => &[
            "bypassPermissions",
            "yolo",
            "full-access",
            "agent-full-access",
        ],
        other => {
            return Err(format!(
                "an ACP agent has no permission mode like {other:?} (default, acceptEdits, \
                 plan and bypassPermissions map onto the modes an agent lists)"
            ));
        }
    })
}

/// The permission mode a run starts in: the one it names, else what the
/// operator's `--permissions` implies (`None`: the agent's own default).
pub fn initial_mode(mode: &str, permissions: PermissionMode) -> Option<String> {
    match (mode, permissions) {
        ("", PermissionMode::Skip) => Some("bypassPermissions".into()),
        ("", _) => None,
        (m, _) => Some(m.to_owned()),
    }
}

/// Runs one configured ACP agent.
#[derive(Debug, Clone)]
pub struct AcpAdapter {
    options: AcpOptions,
}

impl AcpAdapter {
    /// An adapter with these options.
    pub fn new(options: AcpOptions) -> Self {
        Self { options }
    }

    /// The options it runs with.
    pub fn options(&self) -> &AcpOptions {
        &self.options
    }

    /// What an ACP agent cannot do of `config`: `Err` for the caller,
    /// before anything is recorded.
    fn refusal(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        let c = &config.config;
        let name = &self.options.name;
        let unable = |what: String| Err(AdapterError::Unable(what));
        if c.fork.is_some() {
            return unable(format!("forking a session of {name} is not supported"));
        }
        if c.max_thinking_tokens.is_some() {
            return unable(format!(
                "{name} (ACP) has no thinking-token budget (max_thinking_tokens)"
            ));
        }
        if !c.content_blocks.is_empty() {
            return unable(format!(
                "{name} (ACP) takes text input only (content_blocks)"
            ));
        }
        if !c.permission_mode.is_empty() {
            mode_candidates(&c.permission_mode)
                .map(drop)
                .or_else(unable)?;
        }
        Ok(())
    }

    /// The process spec of a run: the program and its arguments, the
    /// cleaned env (the operator's, then the run's), the cwd.
    fn spec(&self, config: &SpawnConfig) -> ProcessSpec {
        let mut spec = ProcessSpec::new(&self.options.program);
        spec.args = self.options.args.iter().map(Into::into).collect();
        spec.tasks = config.tasks.clone();
        spec.strip_env_keys = self.options.strip_env_keys.clone();
        spec.max_line_bytes = self.options.max_line_bytes;
        spec.env = self.options.env.clone();
        let mut run_env: Vec<_> = config.config.env.clone().into_iter().collect();
        run_env.sort();
        spec.env.extend(run_env);
        if !config.config.cwd.is_empty() {
            spec.cwd = Some(PathBuf::from(&config.config.cwd));
        }
        if !config.run_id.is_empty() {
            spec.run_marker = Some(config.run_id.clone());
        }
        spec.stdin = true;
        spec
    }
}

impl ProcessAdapter for AcpAdapter {
    fn name(&self) -> &str {
        &self.options.name
    }

    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        self.refusal(config)
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            self.refusal(&config)?;
            let spec = self.spec(&config);
            let launch = process::Launch {
                agent: self.options.name.clone(),
                mode: initial_mode(&config.config.permission_mode, self.options.permissions),
                mode_required: !config.config.permission_mode.is_empty(),
            };
            process::start(&spec, &config, launch).await
        })
    }

    fn decoder(&self, _config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        Box::new(decode::AcpDecoder::new(&setup, &self.options.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_modes_map_onto_known_agent_mode_ids() {
        assert_eq!(mode_candidates("default").unwrap(), ["default"]);
        assert!(
            mode_candidates("acceptEdits")
                .unwrap()
                .contains(&"autoEdit")
        );
        assert!(
            mode_candidates("bypassPermissions")
                .unwrap()
                .contains(&"yolo")
        );
        assert!(
            mode_candidates("acceptEdits")
                .unwrap()
                .contains(&"workspace-write")
        );
        assert!(
            mode_candidates("bypassPermissions")
                .unwrap()
                .contains(&"agent-full-access")
        );
        // codex-acp's reviewer mode and read-only sandbox stand for none.
        for ours in ["default", "acceptEdits", "plan", "bypassPermissions"] {
            let ids = mode_candidates(ours).unwrap();
            assert!(!ids.contains(&"agent") && !ids.contains(&"read-only"));
        }
        assert!(mode_candidates("dontAsk").is_err());
        assert!(mode_candidates("auto").is_err());
        assert_eq!(initial_mode("", PermissionMode::Relay), None);
        assert_eq!(initial_mode("", PermissionMode::Settings), None);
        assert_eq!(
            initial_mode("", PermissionMode::Skip).as_deref(),
            Some("bypassPermissions")
        );
        assert_eq!(
            initial_mode("plan", PermissionMode::Skip).as_deref(),
            Some("plan")
        );
    }
}
