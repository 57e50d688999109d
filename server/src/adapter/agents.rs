//! The agent router: one [`ProcessAdapter`] in front of one adapter per
//! agent, picking by `StartConfig.agent` ("" or "claude": the claude
//! adapter `--adapter` names; "codex": the Codex adapter, when the operator
//! enabled it; any other name: the ACP agent the operator configured by
//! that name). Everything below the manager that depends on the agent is
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
    /// The ACP agents, by name, in the order configured.
    acp: Vec<(String, Arc<dyn ProcessAdapter>)>,
}

impl Agents {
    /// Claude only, through `claude`.
    pub fn new(claude: Arc<dyn ProcessAdapter>) -> Self {
        Self {
            claude,
            codex: None,
            acp: Vec::new(),
        }
    }

    /// With Codex enabled, through `codex`.
    pub fn with_codex(mut self, codex: Arc<dyn ProcessAdapter>) -> Self {
        self.codex = Some(codex);
        self
    }

    /// With the ACP agent `name` (a name [`super::acp::name_ok`] accepts),
    /// through `adapter`.
    pub fn with_acp(mut self, name: &str, adapter: Arc<dyn ProcessAdapter>) -> Self {
        self.acp.retain(|(n, _)| n != name);
        self.acp.push((name.to_owned(), adapter));
        self
    }

    /// The agents enabled: claude, codex, then the ACP agents as configured.
    pub fn enabled(&self) -> Vec<String> {
        let mut out = vec![agent::CLAUDE.to_owned()];
        if self.codex.is_some() {
            out.push(agent::CODEX.to_owned());
        }
        out.extend(self.acp.iter().map(|(n, _)| n.clone()));
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
            other => match self.acp.iter().find(|(n, _)| n == other) {
                Some((_, a)) => Ok(a.as_ref()),
                None => Err(AdapterError::InvalidConfig {
                    field: "config.agent",
                    reason: format!(
                        "unknown agent {:?}: this server runs {}",
                        other.chars().take(64).collect::<String>(),
                        self.enabled().join(", ")
                    ),
                }),
            },
        }
    }
}

/// Why `name` is refused as an agent.
pub fn unknown_agent(name: &str) -> String {
    format!(
        "unknown agent {:?}: use \"claude\" (or empty), \"codex\" or the name of an ACP \
         agent the server was started with (--acp-agent)",
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
