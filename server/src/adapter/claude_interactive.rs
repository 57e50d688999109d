//! The default adapter: one long-lived `claude` process per run, speaking
//! stream-json both ways, so follow-up messages, interrupts and permission
//! answers reach the same process.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use super::discover::find_claude;
use super::{
    AdapterError, BoxFuture, PermissionDecision, ProcessAdapter, ProcessControl, ProcessHandle,
    Signal, SpawnConfig, UserInput,
};
use crate::supervise::{self, DEFAULT_MAX_LINE_BYTES, DEFAULT_STRIP_ENV, ProcessSpec, StdinWriter};

/// How tool permissions are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionsMode {
    /// Relay every `can_use_tool` request to the harness's clients
    /// (`--permission-prompt-tool stdio`). Interactive adapter only.
    #[default]
    Relay,
    /// Let the CLI's own settings decide (no permission flag).
    Settings,
    /// `--dangerously-skip-permissions` (plus `IS_SANDBOX=1` as root, which
    /// the CLI requires there).
    Skip,
}

/// Options shared by the claude adapters.
#[derive(Debug, Clone)]
pub struct ClaudeOptions {
    /// `--claude-bin`; `None` searches (see [`super::discover`]).
    pub claude_bin: Option<PathBuf>,
    /// Arguments added after the adapter's own, before the run's `args`.
    pub extra_args: Vec<String>,
    /// Environment for every child (a run's `env` wins over it).
    pub env: Vec<(String, String)>,
    /// Inherited variables removed from the child's environment.
    pub strip_env_keys: Vec<String>,
    /// How tool permissions are decided.
    pub permissions: PermissionsMode,
    /// Longest stdout line accepted whole.
    pub max_line_bytes: usize,
}

impl Default for ClaudeOptions {
    fn default() -> Self {
        Self {
            claude_bin: None,
            extra_args: Vec::new(),
            env: Vec::new(),
            strip_env_keys: DEFAULT_STRIP_ENV.iter().map(|s| s.to_string()).collect(),
            permissions: PermissionsMode::Relay,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

impl ClaudeOptions {
    /// The process spec common to both adapters: binary, cleaned env, cwd.
    pub(crate) fn base_spec(&self, config: &SpawnConfig) -> Result<ProcessSpec, AdapterError> {
        let bin = find_claude(self.claude_bin.as_deref())?;
        let mut spec = ProcessSpec::new(bin);
        spec.strip_env_keys = self.strip_env_keys.clone();
        spec.max_line_bytes = self.max_line_bytes;
        spec.env = self.env.clone();
        if self.permissions == PermissionsMode::Skip && running_as_root() {
            spec.env.push(("IS_SANDBOX".into(), "1".into()));
        }
        let mut run_env: Vec<_> = config.config.env.clone().into_iter().collect();
        run_env.sort();
        spec.env.extend(run_env);
        if !config.config.cwd.is_empty() {
            spec.cwd = Some(PathBuf::from(&config.config.cwd));
        }
        Ok(spec)
    }

    /// `--resume`, `--model`, then extra args and the run's args.
    pub(crate) fn tail_args(&self, config: &SpawnConfig) -> Vec<OsString> {
        let c = &config.config;
        let mut args: Vec<OsString> = Vec::new();
        if !c.resume.is_empty() {
            args.push("--resume".into());
            args.push(c.resume.clone().into());
        }
        if !c.model.is_empty() {
            args.push("--model".into());
            args.push(c.model.clone().into());
        }
        args.extend(self.extra_args.iter().map(OsString::from));
        args.extend(c.args.iter().map(OsString::from));
        args
    }
}

/// The owner of /proc/self is the effective uid; this avoids a libc call.
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Runs `claude --print --output-format stream-json --input-format
/// stream-json --verbose`: the process stays alive between turns.
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
        // `--print` is what the SDKs pass; 2.1.197 also accepts stream-json
        // without it when stdin is not a TTY, but being explicit keeps the CLI
        // out of its TUI whatever it detects.
        let mut args: Vec<OsString> = [
            "--print",
            "--output-format",
            "stream-json",
            "--input-format",
            "stream-json",
            "--verbose",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        match self.options.permissions {
            PermissionsMode::Relay => {
                args.push("--permission-prompt-tool".into());
                args.push("stdio".into());
            }
            PermissionsMode::Skip => args.push("--dangerously-skip-permissions".into()),
            PermissionsMode::Settings => {}
        }
        args.extend(self.options.tail_args(config));
        args
    }
}

impl ProcessAdapter for ClaudeInteractiveAdapter {
    fn name(&self) -> &str {
        "interactive"
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let mut spec = self.options.base_spec(&config)?;
            spec.args = self.args(&config);
            spec.stdin = true;
            let child = supervise::spawn(&spec)?;
            let control = Arc::new(InteractiveControl {
                stdin: child.stdin.expect("interactive spec pipes stdin"),
                group: child.group,
            });
            let first = UserInput {
                text: config.config.prompt.clone(),
                content_blocks: config.config.content_blocks.clone(),
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

/// The stream-json user line for `input`: content blocks first, then the
/// text (a plain string when there are no blocks, as the SDKs send it).
pub fn user_message_line(input: &UserInput) -> String {
    let content = if input.content_blocks.is_empty() {
        Value::String(input.text.clone())
    } else {
        let mut blocks: Vec<Value> = input
            .content_blocks
            .iter()
            .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
            .collect();
        if !input.text.is_empty() {
            blocks.push(json!({"type": "text", "text": input.text}));
        }
        Value::Array(blocks)
    };
    json!({
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": null,
        "session_id": "",
    })
    .to_string()
}

/// The `control_request{interrupt}` line, with a fresh request id.
pub fn interrupt_line() -> String {
    json!({
        "type": "control_request",
        "request_id": format!("ah-{}", uuid::Uuid::new_v4()),
        "request": {"subtype": "interrupt"},
    })
    .to_string()
}

/// The `control_response` line answering a `can_use_tool` request.
pub fn permission_response_line(request_id: &str, decision: &PermissionDecision) -> String {
    let response = match decision {
        PermissionDecision::Allow { updated_input } => json!({
            "behavior": "allow",
            "updatedInput": serde_json::to_value(updated_input).unwrap_or_else(|_| json!({})),
        }),
        PermissionDecision::Deny { message } => json!({"behavior": "deny", "message": message}),
    };
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
    .to_string()
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
