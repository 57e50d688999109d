//! The one-shot adapter: `claude --print --output-format stream-json
//! --verbose ...` with the prompt written to stdin, which is then closed;
//! one turn per process. Follow-ups respawn with `--resume`.
//!
//! The prompt is never an argument: after `--` it would still be a word
//! the CLI can take for a subcommand (`mcp`, `update`, ... once any
//! argument starts with `cc://`) or the `mcp` that makes CLI 2.1.197 skip
//! its input. With no prompt argument, `--print` reads the prompt as text
//! from stdin to its end.

use std::ffi::OsString;
use std::sync::Arc;

use super::{ClaudeOptions, PermissionMode};
use crate::adapter::{
    AdapterError, BoxFuture, PermissionDecision, ProcessAdapter, ProcessControl, ProcessHandle,
    Signal, SpawnConfig, UserInput,
};
use crate::supervise::{self, ProcessGroup};

/// Runs one turn per process.
#[derive(Debug, Clone, Default)]
pub struct ClaudeCliAdapter {
    options: ClaudeOptions,
}

impl ClaudeCliAdapter {
    /// An adapter with these options. `PermissionMode::Relay` cannot work
    /// without stdin, so it behaves like `Settings` here.
    pub fn new(options: ClaudeOptions) -> Self {
        Self { options }
    }

    /// The full argv (without the binary) for a run; the prompt is not in
    /// it (it goes to stdin).
    pub fn args(&self, config: &SpawnConfig) -> Vec<OsString> {
        let mut args: Vec<OsString> = ["--print", "--output-format", "stream-json", "--verbose"]
            .iter()
            .map(OsString::from)
            .collect();
        if self.options.permissions == PermissionMode::Skip {
            args.push("--dangerously-skip-permissions".into());
        }
        if self.options.partial_messages {
            args.push("--include-partial-messages".into());
        }
        args.extend(self.options.config_args());
        args.extend(self.options.tail_args(config));
        args
    }
}

impl ProcessAdapter for ClaudeCliAdapter {
    fn conversations_dir(&self) -> Option<std::path::PathBuf> {
        self.options.conversations_dir()
    }

    fn name(&self) -> &str {
        "cli"
    }

    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        if !config.config.content_blocks.is_empty() {
            return Err(AdapterError::Unsupported(
                "content blocks need the interactive adapter (a one-shot prompt is plain text)",
            ));
        }
        if config.config.prompt.is_empty() {
            return Err(AdapterError::InvalidConfig {
                field: "config.prompt",
                reason: "the one-shot adapter needs a non-empty prompt".into(),
            });
        }
        Ok(())
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            self.check(&config)?;
            let mut spec = self.options.base_spec(&config)?;
            spec.args = self.args(&config);
            spec.stdin = true;
            let child = supervise::spawn(&spec).await?;
            let stdin = child.stdin.expect("the one-shot spec pipes stdin");
            stdin.send_text(&config.config.prompt)?;
            // The CLI reads the prompt up to the end of its input.
            stdin.close();
            Ok(ProcessHandle {
                stdout: child.stdout,
                exited: child.exited,
                control: Arc::new(OneShotControl { group: child.group }),
                pid: Some(child.pid),
                start_time: child.start_time,
                process_id: Some(format!("pid:{}", child.pid)),
            })
        })
    }
}

struct OneShotControl {
    group: ProcessGroup,
}

impl ProcessControl for OneShotControl {
    fn write(&self, _input: &UserInput) -> Result<(), AdapterError> {
        Err(AdapterError::Unsupported(
            "the one-shot adapter takes no input after spawn; send again to respawn with --resume",
        ))
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        Ok(false)
    }

    fn respond_permission(
        &self,
        _request_id: &str,
        _decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        Err(AdapterError::Unsupported(
            "the one-shot adapter cannot relay permissions",
        ))
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.group.signal(signal)
    }

    fn close_stdin(&self) {}

    fn alive(&self) -> bool {
        self.group.alive()
    }

    fn keep_alive(&self) -> bool {
        false
    }
}
