//! Process adapters: the one interface through which the harness runs an
//! agent process. The manager never spawns anything itself.
//!
//! An adapter turns a [`SpawnConfig`] into a [`ProcessHandle`]: a stream of
//! stdout lines (one stream-json message each), a [`ProcessControl`] to write
//! user messages, interrupt, answer permission requests and signal the
//! process group, and a future that resolves once with the [`ExitInfo`].

pub mod acp;
pub mod agents;
pub mod cassette;
pub mod claude;
pub mod codex;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent_harness_protocol::pb;
use pbjson_types::Struct;
use tokio::sync::{mpsc, oneshot};

pub use crate::decoder::{ControlReply, Decoder, DecoderSetup};
pub use crate::process::{AdapterError, ExitInfo, Signal, StdoutLine};
use crate::tasks::Tasks;

/// A boxed future, so adapters stay object safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What to spawn.
#[derive(Debug, Clone, Default)]
pub struct SpawnConfig {
    /// The harness session id (never the CLI's own id).
    pub session_id: String,
    /// The run this process will be.
    pub run_id: String,
    /// Prompt, cwd, resume id, env, args, content blocks and model.
    pub config: pb::StartConfig,
    /// The uuid of the prompt's user message (interactive adapter), as its
    /// `input_sent` records it.
    pub prompt_uuid: String,
    /// Where the adapter spawns the process's tasks (reaper, readers,
    /// replay): the server's set, which shutdown waits for.
    pub tasks: Tasks,
    /// When a process last opened the conversation this run resumes (the
    /// time of the session's latest run_ready), for an agent that must not
    /// reopen it within the same minute; `None` for a new conversation or
    /// a session with no run_ready yet.
    pub opened_at: Option<std::time::SystemTime>,
}

/// One user message for the process.
#[derive(Debug, Clone, Default)]
pub struct UserInput {
    /// The text.
    pub text: String,
    /// Anthropic content blocks placed before the text.
    pub content_blocks: Vec<Struct>,
    /// The message's uuid, given to the CLI ("" lets the CLI choose): the
    /// `input_sent` records it, and `rewind_files` names it.
    pub uuid: String,
}

/// An answer to a `can_use_tool` request.
#[derive(Debug, Clone)]
pub enum PermissionDecision {
    /// Let the tool run with this input.
    Allow {
        /// The input the tool runs with (the CLI requires it).
        updated_input: Struct,
    },
    /// Refuse, with a message for the model.
    Deny {
        /// Shown to the model as the tool's error.
        message: String,
    },
}

/// Controls a live process. Every method is cheap and never blocks on the
/// process; writes are queued to a writer task.
pub trait ProcessControl: Send + Sync {
    /// Deliver a user message (interactive: one stream-json line on stdin).
    fn write(&self, input: &UserInput) -> Result<(), AdapterError>;
    /// Cancel the current turn without ending the process. Returns
    /// `Ok(false)` when the adapter has no such thing (the manager then goes
    /// straight to signals).
    fn interrupt(&self) -> Result<bool, AdapterError>;
    /// Answer a `can_use_tool` request.
    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError>;
    /// Send a `control_request` (`request` is its `request` object, with
    /// its `subtype`) with id `request_id`; the CLI answers with a
    /// `control_response` line carrying the same id. Returns `Ok(false)`
    /// when the adapter has no control channel (one-shot, replays).
    fn control(&self, request_id: &str, request: &serde_json::Value) -> Result<bool, AdapterError> {
        let _ = (request_id, request);
        Ok(false)
    }
    /// Answers a control request itself, without the process: for an
    /// agent that has no such request, the adapter applies what it can (a
    /// setting it sends with the next turn) or refuses. `None` (the
    /// default): [`ProcessControl::control`] sends it to the process.
    fn answer_control(
        &self,
        request: &serde_json::Value,
    ) -> Option<Result<serde_json::Value, String>> {
        let _ = request;
        None
    }
    /// Signal the whole process group.
    fn signal(&self, signal: Signal) -> Result<(), AdapterError>;
    /// Close stdin: the CLI finishes its turn and exits.
    fn close_stdin(&self);
    /// True until the process has exited.
    fn alive(&self) -> bool;
    /// True when the process stays alive between turns (keep-alive).
    fn keep_alive(&self) -> bool;
}

/// A spawned process.
pub struct ProcessHandle {
    /// Stdout, one line at a time; ends when stdout closes.
    pub stdout: mpsc::Receiver<StdoutLine>,
    /// Resolves once, after the process has exited and been reaped.
    pub exited: oneshot::Receiver<ExitInfo>,
    /// Write, interrupt, answer, signal.
    pub control: Arc<dyn ProcessControl>,
    /// OS process id (also the process group id), when there is one.
    pub pid: Option<u32>,
    /// The process's start time (clock ticks since boot, from
    /// /proc/PID/stat), so recovery never kills a reused pid.
    pub start_time: Option<u64>,
    /// Adapter-specific process id ("pid:1234", "cassette:plain-turn").
    pub process_id: Option<String>,
}

/// Spawns agent processes.
pub trait ProcessAdapter: Send + Sync + 'static {
    /// A short name for logs and run_start ("interactive", "cli", "cassette").
    fn name(&self) -> &str;
    /// The name run_start records for a run of `config` (a router names
    /// the adapter it picks).
    fn name_of(&self, config: &SpawnConfig) -> &str {
        let _ = config;
        self.name()
    }
    /// Whether this adapter can run `config`, checked before anything is
    /// appended for the run (so a refusal leaves no trace in the log).
    /// [`ProcessAdapter::spawn`] may still fail for reasons only spawning
    /// finds out (a missing binary, the OS).
    fn check(&self, _config: &SpawnConfig) -> Result<(), AdapterError> {
        Ok(())
    }
    /// Spawn a process for this run.
    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>>;
    /// Where the agent keeps its conversations on this node (the claude
    /// CLI's configuration directory), when it keeps them in files the
    /// server can write back before a resume (see
    /// [`claude::transcript`]); `None` for an agent that does not.
    fn conversations_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
    /// The agents this adapter runs, as ListAgents lists them. An adapter
    /// that is not the router ([`agents::Agents`]) stands for the default
    /// agent, claude.
    fn agents(&self) -> Vec<pb::AgentInfo> {
        vec![agents::info(agent_harness_protocol::vocab::agent::CLAUDE)]
    }
    /// The decoder for the stdout of a process this adapter spawned for
    /// `config`: the claude CLI's stream-json unless the adapter says
    /// otherwise.
    fn decoder(&self, config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        let _ = config;
        Box::new(crate::normalize::Normalizer::with_setup(&setup))
    }
}
