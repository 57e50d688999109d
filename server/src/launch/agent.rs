//! The launch policy's rules that depend on the agent a run names:
//! which names are agents, and what Codex and ACP runs never take from a
//! client (arguments, the variables that move their configuration).

use agent_harness_protocol::pb;

use crate::error::{Error, Result};

/// Checks `config.agent` and that agent's own rules.
pub(super) fn check(config: &pb::StartConfig) -> Result<()> {
    match check_agent(&config.agent)? {
        AgentKind::Claude => Ok(()),
        AgentKind::Codex => check_codex(config),
        AgentKind::Acp => check_acp(config),
    }
}

/// Which kind of agent a run names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AgentKind {
    Claude,
    Codex,
    /// An ACP agent's name: whether the operator configured it is the
    /// router's to say (it lists the agents it runs).
    Acp,
}

/// Checks `config.agent`: "" or "claude", "codex", or a name an ACP agent
/// can have (whether it is enabled is the adapter's to say).
fn check_agent(name: &str) -> Result<AgentKind> {
    use agent_harness_protocol::vocab::agent;
    match name {
        "" | agent::CLAUDE => Ok(AgentKind::Claude),
        agent::CODEX => Ok(AgentKind::Codex),
        acp if crate::adapter::acp::name_ok(acp) => Ok(AgentKind::Acp),
        other => Err(Error::invalid(
            "config.agent",
            crate::adapter::agents::unknown_agent(other),
        )),
    }
}

/// The launch policy's rules for an ACP run, on top of the common ones
/// (the env allow list, the cwd, the permission modes apply the same): the
/// agent's command is the operator's, so it takes no client arguments; and
/// the variables that move an agent's home, configuration or credentials
/// ([`NEVER_ENV_ACP`], [`NEVER_ENV_ACP_PREFIXES`]) are never a client's.
fn check_acp(config: &pb::StartConfig) -> Result<()> {
    if !config.args.is_empty() {
        return Err(Error::invalid(
            "config.args",
            "an ACP session takes no CLI arguments (the operator's --acp-agent command \
             is run as configured; its settings are model and permission_mode)",
        ));
    }
    let mut keys: Vec<&String> = config.env.keys().collect();
    keys.sort();
    if let Some(key) = keys.into_iter().find(|k| {
        let up = k.to_ascii_uppercase();
        NEVER_ENV_ACP.contains(&up.as_str())
            || NEVER_ENV_ACP_PREFIXES.iter().any(|p| up.starts_with(p))
    }) {
        return Err(Error::invalid(
            "config.env",
            format!(
                "{key} is never accepted from a client for an ACP agent (it moves the \
                 agent's home, configuration or credentials)"
            ),
        ));
    }
    Ok(())
}

/// Env names never accepted from a client for an ACP run: where the agent
/// keeps its configuration and sessions.
pub const NEVER_ENV_ACP: &[&str] = &["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"];

/// Prefixes of env names never accepted from a client for an ACP run
/// (compared case-insensitively): the settings, endpoints and keys of the
/// agents known to speak ACP (Gemini CLI's, Google's APIs', and those of
/// the Codex and Claude bridges).
pub const NEVER_ENV_ACP_PREFIXES: &[&str] = &[
    "GEMINI_",
    "GOOGLE_",
    "CODEX_",
    "OPENAI_",
    "ANTHROPIC_",
    "CLAUDE_",
];

/// The launch policy's rules for a Codex run, on top of the common ones
/// (the env allow list, the cwd, the permission modes apply the same):
/// the app-server takes no client arguments, and its own configuration and
/// credentials ([`NEVER_ENV_CODEX_PREFIXES`]) are never a client's.
fn check_codex(config: &pb::StartConfig) -> Result<()> {
    if !config.args.is_empty() {
        return Err(Error::invalid(
            "config.args",
            "a Codex session takes no CLI arguments (its settings are model and \
             permission_mode)",
        ));
    }
    let mut keys: Vec<&String> = config.env.keys().collect();
    keys.sort();
    if let Some(key) = keys.into_iter().find(|k| {
        let up = k.to_ascii_uppercase();
        NEVER_ENV_CODEX_PREFIXES.iter().any(|p| up.starts_with(p))
    }) {
        return Err(Error::invalid(
            "config.env",
            format!(
                "{key} is never accepted from a client for Codex (it redirects its API, \
                 credentials or configuration)"
            ),
        ));
    }
    Ok(())
}

/// Prefixes of env names never accepted from a client for a Codex run
/// (compared case-insensitively): Codex's configuration directory and
/// settings, the OpenAI API's endpoint and key.
pub const NEVER_ENV_CODEX_PREFIXES: &[&str] = &["CODEX_", "OPENAI_"];
