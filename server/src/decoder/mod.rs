//! Decoders: what turns an agent process's stdout lines into log events.
//!
//! The [`Decoder`] trait is the boundary between an agent's output format
//! and the manager; each adapter builds one per run (the claude CLI's
//! [`crate::normalize::Normalizer`], the Codex decoder in
//! `adapter::codex::decode`). Below the adapters and the normalizer, so both
//! implement it without importing each other. What every decoder reads the
//! same way lives here too: `line` (a stdout line as a JSON object, and
//! the errors for one that is not), `json` (accessors that read a
//! missing or mistyped field as empty) and `lenient` (the same rules for a
//! typed read that borrows from the line).

pub(crate) mod json;
pub(crate) mod lenient;
pub(crate) mod line;
#[cfg(test)]
pub(crate) mod testing;

use agent_harness_protocol::pb::event::Payload;

use crate::partial::Change;
use crate::process::StdoutLine;

/// Turns one agent's stdout lines into log events; one per run, built by
/// the adapter that spawned the process (`ProcessAdapter::decoder` in
/// [`crate::adapter`]). The
/// manager knows no agent's output format: everything it appends from a
/// process comes through here. `Sync` because the run task that owns it is
/// borrowed across awaits.
pub trait Decoder: Send + Sync {
    /// Events for one stdout line, each with the raw line it came from
    /// (kept as the event's `cli_line`). Never panics; a line it cannot
    /// read becomes `run_error{bad_line}`.
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)>;
    /// As [`Decoder::line`], given the line: a decoder may keep it as an
    /// event's `cli_line` instead of a copy.
    fn line_owned(&mut self, line: StdoutLine) -> Vec<(Payload, String)> {
        self.line(&line)
    }
    /// The harness wrote a user message: the next turn is the harness's,
    /// not one the agent started by itself.
    fn input_sent(&mut self);
    /// Live-typing changes since the last call (see [`crate::partial`]).
    fn take_partial(&mut self) -> Vec<Change>;
    /// Fragments dropped so far because the partial budget was reached.
    fn partial_dropped(&self) -> u64;
    /// Conversation-file entries to keep beside the log, as (path relative
    /// to the agent's conversations directory, line) (claude: its
    /// `--session-mirror` frames).
    fn take_transcript(&mut self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// The agent's answers to control requests the harness sent
    /// (`ProcessControl::control` in [`crate::adapter`]) since the last call.
    fn take_control_replies(&mut self) -> Vec<ControlReply> {
        Vec::new()
    }
}

/// What a [`Decoder`] is built with.
#[derive(Debug, Clone, Default)]
pub struct DecoderSetup {
    /// Lines longer than this become `line_too_large` errors.
    pub max_line_bytes: usize,
    /// Most partial text held for live typing (`--max-partial-bytes`).
    pub max_partial_bytes: usize,
    /// The OS pid, copied into `run_ready`.
    pub pid: Option<u32>,
    /// The conversation id the process was spawned to resume ("" when
    /// none), named by a `resume_failed` run_error.
    pub resume_id: String,
}

/// The agent's answer to a control request the harness sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlReply {
    /// The request's id.
    pub request_id: String,
    /// Success: the answer's object (`{}` when it had none); refused: the
    /// agent's (or the adapter's) message.
    pub outcome: Result<serde_json::Value, String>,
}
