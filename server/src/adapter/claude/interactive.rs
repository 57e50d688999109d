//! The default adapter: one long-lived `claude` process per run, speaking
//! stream-json both ways, so follow-up messages, interrupts and permission
//! answers reach the same process.

use std::ffi::OsString;
use std::sync::Arc;

use super::stream_json::{
    control_request_line, interrupt_line, permission_response_line, user_message_line,
};
use super::{ClaudeOptions, PermissionMode};
use crate::adapter::{
    AdapterError, BoxFuture, PermissionDecision, ProcessAdapter, ProcessControl, ProcessHandle,
    Signal, SpawnConfig, UserInput,
};
use crate::supervise::{self, StdinWriter};

/// The stream-json protocol both ways, first in every argv of this
/// adapter. `--print` is what the SDKs pass; 2.1.197 also accepts
/// stream-json without it when stdin is not a TTY, but being explicit
/// keeps the CLI out of its TUI whatever it detects.
pub const STREAM_JSON_ARGS: [&str; 6] = [
    "--print",
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "--verbose",
];

/// The argv this adapter gives the CLI under the default options (what
/// `serve` runs with no flags: relayed permissions, live typing, user
/// settings only) for a run that names no resume id, model, mode or args.
/// Whatever runs the CLI as the server does without the server (the load
/// tool's raw spawns, the launch-policy tests) reads it here, so it
/// follows every change to the adapter.
pub fn default_args() -> Vec<String> {
    ClaudeInteractiveAdapter::new(ClaudeOptions::default())
        .args(&SpawnConfig::default())
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Runs `claude` with [`STREAM_JSON_ARGS`]: the process stays alive
/// between turns.
#[derive(Debug, Clone, Default)]
pub struct ClaudeInteractiveAdapter {
    options: ClaudeOptions,
}

impl ClaudeInteractiveAdapter {
    /// An adapter with these options.
    pub fn new(options: ClaudeOptions) -> Self {
        Self { options }
    }

    /// The full argv (without the binary) for a run.
    pub fn args(&self, config: &SpawnConfig) -> Vec<OsString> {
        let mut args: Vec<OsString> = STREAM_JSON_ARGS.iter().map(OsString::from).collect();
        match self.options.permissions {
            PermissionMode::Relay => {
                args.push("--permission-prompt-tool".into());
                args.push("stdio".into());
            }
            PermissionMode::Skip => args.push("--dangerously-skip-permissions".into()),
            PermissionMode::Settings => {}
        }
        if self.options.partial_messages {
            args.push("--include-partial-messages".into());
        }
        args.extend(self.options.config_args());
        args.extend(self.options.tail_args(config));
        args
    }
}

impl ProcessAdapter for ClaudeInteractiveAdapter {
    fn conversations_dir(&self) -> Option<std::path::PathBuf> {
        self.options.conversations_dir()
    }

    fn name(&self) -> &str {
        "interactive"
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let mut spec = self.options.base_spec(&config)?;
            // File checkpoints for RewindFiles (first, so the operator's
            // env can turn them off).
            spec.env.insert(
                0,
                (
                    "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING".into(),
                    "1".into(),
                ),
            );
            spec.args = self.args(&config);
            spec.stdin = true;
            let child = supervise::spawn(&spec).await?;
            let control = Arc::new(InteractiveControl {
                stdin: child.stdin.expect("interactive spec pipes stdin"),
                group: child.group,
            });
            let first = UserInput {
                text: config.config.prompt.clone(),
                content_blocks: config.config.content_blocks.clone(),
                uuid: config.prompt_uuid.clone(),
            };
            if !first.text.is_empty() || !first.content_blocks.is_empty() {
                control.write(&first)?;
            }
            Ok(ProcessHandle {
                stdout: child.stdout,
                exited: child.exited,
                control,
                pid: Some(child.pid),
                start_time: child.start_time,
                process_id: Some(format!("pid:{}", child.pid)),
            })
        })
    }
}

struct InteractiveControl {
    stdin: StdinWriter,
    group: supervise::ProcessGroup,
}

impl InteractiveControl {
    fn send(&self, line: &str) -> Result<(), AdapterError> {
        if !self.group.alive() {
            return Err(AdapterError::NotRunning);
        }
        self.stdin.send_line(line)
    }
}

impl ProcessControl for InteractiveControl {
    fn write(&self, input: &UserInput) -> Result<(), AdapterError> {
        self.send(&user_message_line(input))
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        self.send(&interrupt_line())?;
        Ok(true)
    }

    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        self.send(&permission_response_line(request_id, decision))
    }

    fn control(&self, request_id: &str, request: &serde_json::Value) -> Result<bool, AdapterError> {
        self.send(&control_request_line(request_id, request))?;
        Ok(true)
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.group.signal(signal)
    }

    fn close_stdin(&self) {
        self.stdin.close();
    }

    fn alive(&self) -> bool {
        self.group.alive()
    }

    fn keep_alive(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one place the default argv is spelled out: a change to it is a
    /// decision made here, and every reader of [`default_args`] follows.
    #[test]
    fn the_default_argv() {
        assert_eq!(
            default_args(),
            [
                "--print",
                "--output-format",
                "stream-json",
                "--input-format",
                "stream-json",
                "--verbose",
                "--permission-prompt-tool",
                "stdio",
                // Live typing, on by default (`--deltas`).
                "--include-partial-messages",
                // The configuration the server owns: user settings only,
                // MCP servers only from the operator's files.
                "--setting-sources=user",
                "--strict-mcp-config",
                // The conversation's lines on stdout, kept beside the log.
                "--session-mirror",
            ]
        );
    }
}
