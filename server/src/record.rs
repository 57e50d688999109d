//! `agent-harness record`: run the real CLI once through a list of prompts
//! and write what it did as a cassette (see [`crate::adapter::cassette`]).

use std::time::Duration;

use crate::adapter::SpawnConfig;
use crate::adapter::cassette::{ScriptStep, record_cassette};
use crate::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};
use crate::config::RecordConfig;
use crate::error::{Error, Result};

/// `agent-harness record`: runs the real CLI (interactive adapter) once
/// through the prompts and writes the cassette.
pub async fn run(config: RecordConfig) -> Result<()> {
    let adapter = ClaudeInteractiveAdapter::new(ClaudeOptions {
        claude_bin: config.claude_bin.clone(),
        ..ClaudeOptions::default()
    });
    let mut prompts = config.prompts.into_iter();
    let first = prompts.next().unwrap_or_default();
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
            ..Default::default()
        },
        ..Default::default()
    };
    let argv = adapter
        .args(&spawn)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut steps = vec![ScriptStep::WaitTurnEnd];
    for p in prompts {
        steps.push(ScriptStep::Send(p));
        steps.push(ScriptStep::WaitTurnEnd);
    }
    let exit = record_cassette(
        adapter,
        argv,
        spawn,
        &steps,
        &config.out,
        Duration::from_secs(600),
    )
    .await
    .map_err(|e| Error::Internal(format!("recording failed: {e}")))?;
    tracing::info!(out = %config.out.display(), code = ?exit.code, signal = ?exit.signal, "cassette written");
    Ok(())
}
