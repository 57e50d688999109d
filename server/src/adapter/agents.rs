//! The agent router: one [`ProcessAdapter`] in front of one adapter per
//! agent, picking by `StartConfig.agent` ("" or "claude": the claude
//! adapter `--adapter` names; "codex": the Codex adapter, when the operator
//! enabled it). Everything below the manager that depends on the agent is
//! reached through here.

use std::sync::Arc;

use agent_harness_protocol::vocab::agent;

use super::codex::HOW_TO_ENABLE;
use super::{
    AdapterError, BoxFuture, Decoder, DecoderSetup, ProcessAdapter, ProcessHandle, SpawnConfig,
};

/// The agents this server runs.
#[derive(Clone)]
pub struct Agents {
    claude: Arc<dyn ProcessAdapter>,
    codex: Option<Arc<dyn ProcessAdapter>>,
}

impl Agents {
    /// Claude only, through `claude`.
    pub fn new(claude: Arc<dyn ProcessAdapter>) -> Self {
        Self {
            claude,
            codex: None,
        }
    }

    /// With Codex enabled, through `codex`.
    pub fn with_codex(mut self, codex: Arc<dyn ProcessAdapter>) -> Self {
        self.codex = Some(codex);
        self
    }

    /// The agents enabled, claude first.
    pub fn enabled(&self) -> Vec<&'static str> {
        let mut out = vec![agent::CLAUDE];
        if self.codex.is_some() {
            out.push(agent::CODEX);
        }
        out
    }

    /// The adapter of `config`'s agent. The name was checked by the launch
    /// policy; an unknown one is still refused here (INVALID_ARGUMENT), and
    /// one not enabled is FAILED_PRECONDITION naming the flag.
    fn pick(&self, config: &SpawnConfig) -> Result<&dyn ProcessAdapter, AdapterError> {
        match config.config.agent.as_str() {
            "" | agent::CLAUDE => Ok(self.claude.as_ref()),
            agent::CODEX => self.codex.as_deref().ok_or_else(|| {
                AdapterError::BinaryNotFound(format!(
                    "the codex agent is not enabled on this server: {HOW_TO_ENABLE}"
                ))
            }),
            other => Err(AdapterError::InvalidConfig {
                field: "config.agent",
                reason: unknown_agent(other),
            }),
        }
    }
}

/// Why `name` is refused as an agent.
pub fn unknown_agent(name: &str) -> String {
    format!(
        "unknown agent {:?}: use \"claude\" (or empty) or \"codex\"",
        name.chars().take(64).collect::<String>()
    )
}

impl ProcessAdapter for Agents {
    fn name(&self) -> &str {
        self.claude.name()
    }

    fn name_of(&self, config: &SpawnConfig) -> &str {
        match self.pick(config) {
            Ok(a) => a.name_of(config),
            Err(_) => self.claude.name(),
        }
    }

    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        self.pick(config)?.check(config)
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        match self.pick(&config) {
            Ok(a) => a.spawn(config),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn conversations_dir(&self) -> Option<std::path::PathBuf> {
        // Only claude's conversations are kept beside the log and written
        // back before a resume.
        self.claude.conversations_dir()
    }

    fn decoder(&self, config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        match self.pick(config) {
            Ok(a) => a.decoder(config, setup),
            Err(_) => self.claude.decoder(config, setup),
        }
    }
}
