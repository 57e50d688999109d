//! `agent-harness record`: run the real agent (the claude CLI, or Codex's
//! app-server) once through a list of prompts and write what it did as a
//! cassette (see [`crate::adapter::cassette`]).

use std::path::Path;
use std::time::Duration;

use agent_harness_protocol::vocab::agent;

use crate::adapter::cassette::{ScriptStep, record_cassette};
use crate::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions, PermissionMode};
use crate::adapter::codex::{APP_SERVER_ARGS, CodexAdapter, HOW_TO_ENABLE};
use crate::adapter::{ProcessAdapter, SpawnConfig};
use crate::config::RecordConfig;
use crate::error::{Error, Result};
use crate::supervise::DEFAULT_MAX_LINE_BYTES;

/// `agent-harness record`: runs the agent once through the prompts and
/// writes the cassette.
pub async fn run(config: RecordConfig) -> Result<()> {
    let mut prompts = config.prompts.into_iter();
    let first = prompts.next().unwrap_or_default();
    let codex = match config.agent.as_str() {
        "" | agent::CLAUDE => false,
        agent::CODEX => true,
        other => {
            return Err(Error::Config(format!(
                "--agent {other:?}: use claude or codex"
            )));
        }
    };
    if codex && !config.args.is_empty() {
        return Err(Error::Config(
            "extra CLI arguments are the claude CLI's; Codex takes none".into(),
        ));
    }
    let spawn = SpawnConfig {
        session_id: "record".into(),
        run_id: uuid::Uuid::new_v4().to_string(),
        config: agent_harness_protocol::pb::StartConfig {
            prompt: first,
            cwd: config
                .cwd
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            args: config.args,
            agent: if codex {
                agent::CODEX.into()
            } else {
                String::new()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let mut steps = vec![ScriptStep::WaitTurnEnd];
    for p in prompts {
        steps.push(ScriptStep::Send(p));
        steps.push(ScriptStep::WaitTurnEnd);
    }
    if codex {
        let options = config
            .codex
            .options(PermissionMode::Relay, DEFAULT_MAX_LINE_BYTES)
            .map_err(Error::Config)?
            .ok_or_else(|| Error::Config(format!("no codex binary found: {HOW_TO_ENABLE}")))?;
        let argv = APP_SERVER_ARGS.iter().map(|a| a.to_string()).collect();
        record(CodexAdapter::new(options), argv, spawn, &steps, &config.out).await
    } else {
        let adapter = ClaudeInteractiveAdapter::new(ClaudeOptions {
            claude_bin: config.claude_bin.clone(),
            ..ClaudeOptions::default()
        });
        let argv = adapter
            .args(&spawn)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        record(adapter, argv, spawn, &steps, &config.out).await
    }
}

/// Records one process of `adapter` through `steps` into `out`.
async fn record<A: ProcessAdapter>(
    adapter: A,
    argv: Vec<String>,
    spawn: SpawnConfig,
    steps: &[ScriptStep],
    out: &Path,
) -> Result<()> {
    let exit = record_cassette(adapter, argv, spawn, steps, out, Duration::from_secs(600))
        .await
        .map_err(|e| Error::Internal(format!("recording failed: {e}")))?;
    tracing::info!(out = %out.display(), code = ?exit.code, signal = ?exit.signal, "cassette written");
    Ok(())
}
