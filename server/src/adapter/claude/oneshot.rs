//! The one-shot adapter: `claude --print --output-format stream-json
//! --verbose ... PROMPT`, stdin closed; one turn per process. Follow-ups
//! respawn with `--resume`.

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

    /// The full argv (without the binary) for a run; the prompt comes last,
    /// after `--` so a prompt starting with `-` is not read as a flag.
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
        args.push("--".into());
        args.push(config.config.prompt.clone().into());
        args
    }
}

impl ProcessAdapter for ClaudeCliAdapter {
    fn name(&self) -> &str {
        "cli"
    }

    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        if !config.config.content_blocks.is_empty() {
            return Err(AdapterError::Unsupported(
                "content blocks need the interactive adapter (a one-shot prompt is argv text)",
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
            spec.stdin = false;
            let child = supervise::spawn(&spec)?;
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
