//! The ACP decoder: an Agent Client Protocol agent's stdout lines (JSON-RPC
//! 2.0, one message a line) in, log events out.
//!
//! One [`AcpDecoder`] per run. Like the other decoders it is a pure state
//! machine over the lines it sees (plus [`Decoder::input_sent`] calls from
//! the manager): every line the agent writes reaches it unchanged, the
//! answers to the harness's own requests included, and it never writes to
//! the process.
//!
//! What it needs from the process side:
//! - fixed request ids for the handshake: 1 = `initialize`, 2 =
//!   `session/new` (or `session/load` when the run resumes, i.e.
//!   [`DecoderSetup::resume_id`] is set), 3 and up for everything after;
//! - a copy of each `session/prompt` it writes, passed into the line
//!   stream in order with the agent's lines (before anything the agent
//!   writes after receiving it). An agent never sends `session/prompt`, so
//!   the copy is unmistakably the harness's. A resumed run needs it: the
//!   process side holds the first prompt until the replayed history has
//!   gone quiet, and nothing the agent writes tells where the replay ends
//!   and the new turn begins; the copy does. It also names the prompt's
//!   id, so an error answer to it ends its turn exactly. The copy makes no
//!   event, so it is never a `cli_line`;
//! - a copy of each `session/cancel` it writes (a Stop), the same way: a
//!   turn the agent ends `cancelled` with no cancel sent was ended by the
//!   agent itself, after the user refused a tool (codex-acp), and is no
//!   interruption;
//! - the process side's own note `_agent-harness/refused` in place of the
//!   first prompt when the agent lists no mode or model for what the run
//!   asked.
//!
//! Without copies: a turn begins at its first update after an input was
//! sent (the process side sends an input at once, or right at the last
//! answer when it was queued, so updates after an answer while no input
//! waits are the finished turn's); an error answer while a prompt runs is
//! taken for the prompt's; and a resumed run's replay ends only at its
//! first prompt's answer or permission request, so what that turn wrote
//! before is lost.
//!
//! Mapping (line → event payload):
//!
//! | line | event |
//! |---|---|
//! | answer to id 1 (`initialize`) | nothing: `agentInfo.version` is kept for run_ready |
//! | answer to id 2 (`session/new`, `session/load`) | `run_ready` (`resume_id` = the ACP `sessionId`, `model` = `models.currentModelId`, `agent` = the configured name, `cli_version` = the agent's version) |
//! | error answer to id 2 when resuming | `run_error{kind: "resume_failed", resume_id}` |
//! | our copy of a `session/prompt` | nothing: the prompt's turn begins |
//! | our copy of a `session/cancel` | nothing: the running turn was stopped |
//! | our note `_agent-harness/refused` | `run_error{kind: "cli_error"}` with its message (the mode or model asked and what the agent lists); no prompt was sent and the run ends |
//! | `session/update` `agent_message_chunk` / `agent_thought_chunk` | live typing of a text / thinking block ([`Decoder::take_partial`]); the block becomes `content` text / thinking with all its chunks when an update of another kind arrives or the turn ends |
//! | `session/update` `tool_call` | `content` with a tool_use (named after the ACP `kind`, see `tools`); `result` too when it comes completed or failed |
//! | `session/update` `tool_call_update` completed / failed | `result` (the content's text; the update kept as `tool_use_result`, locations included) |
//! | `session/update` `plan` | `content` with a `TodoWrite` tool_use holding the entries as `todos`, and its `result` at once: every client shows it as the plan |
//! | `session/update` `usage_update` | nothing: the turn's context size, window and cost for its `turn_end` |
//! | `session/request_permission` | `permission_requested` (`request_id` = the request's JSON id as compact JSON text, `suggestions` = the options), after the tool_use when no `tool_call` announced the tool |
//! | answer with a `stopReason` | `turn_end` (`end_turn` → success; `cancelled` → an error turn, subtype `interrupted`, after `permission_resolved{by: "cancelled"}` for every request still pending; `cancelled` with no `session/cancel` copied in the turn and a permission asked in it → success: the agent ended the turn because the user refused a tool; other reasons → error turns with that subtype), after closing what the turn left open: the block being written becomes `content`, a tool without result gets an error result ("not run", or "interrupted") |
//! | error answer to a resumed run's first prompt | `run_error{kind: "resume_failed", resume_id}` (the agent loaded a conversation it had lost), then the error `turn_end` |
//! | error answer to the running prompt | `turn_end` as an error turn with the agent's message |
//! | any other error answer | `run_error{kind: "cli_error"}` with the agent's message |
//! | updates before a resumed run's first prompt (the replayed history, before and after the load's answer) | nothing |
//! | updates after a prompt's answer, before the next prompt | the same events, each chunk at once as `content`: they belong to the finished turn, which stays ended |
//! | other notifications, requests and answers | nothing (logged at debug) |
//! | an object with neither `method` nor `id` | `run_error{kind: "bad_line"}` |
//! | not JSON, not an object, too long | as for claude (`crate::decoder::line`) |

// `session`: the handshake's answers and run_ready; `turn`: prompts, their
// answers and usage; `updates`: session/update as content; `tools`: tool
// calls as tool_use and result; `permission`: the agent's permission
// requests; here: the dispatch.
mod permission;
mod session;
mod tools;
mod turn;
mod updates;

use std::collections::HashSet;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::{Map, Value};

use super::client::REFUSED;
use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::decoder::json::str_at;
use crate::decoder::line::{self, Read};
use crate::partial::{Change, Tracker};

use self::turn::Turn;
use self::updates::{OpenBlock, OpenTool};

/// The request id of `initialize`.
const INITIALIZE_ID: u64 = 1;
/// The request id of `session/new` or `session/load`.
const SESSION_ID: u64 = 2;
/// The first request id after the handshake (prompts and settings).
const FIRST_LATER_ID: u64 = 3;

/// Per-run decoder state for one ACP agent process.
#[derive(Debug)]
pub struct AcpDecoder {
    /// Lines longer than this become `line_too_large` errors.
    max_line_bytes: usize,
    /// The OS pid, copied into run_ready.
    pid: Option<u32>,
    /// The agent's configured name (run_ready's `agent`).
    agent: String,
    /// The session this run was spawned to load ("" for a new one).
    resume_id: String,
    /// The agent's version, from the initialize answer.
    version: String,
    /// The ACP session, once announced.
    session_id: String,
    /// The model the session runs, as the agent named it.
    model: String,
    /// A resumed run before its first prompt: updates are the replayed
    /// history.
    replaying: bool,
    /// A resumed run whose first prompt has not been answered: an agent
    /// may accept the load of a conversation it has lost and fail only
    /// there (codex-acp).
    first_after_load: bool,
    /// The process side copies its prompts into the line stream (seen
    /// one).
    copies: bool,
    /// Inputs the harness sent whose turn has not begun.
    inputs_waiting: usize,
    turn: Option<Turn>,
    /// The id of a prompt copied while the one before still ran.
    next_prompt_id: Option<u64>,
    /// The text or thinking being written.
    block: Option<OpenBlock>,
    /// Blocks and plans made so far (their ids).
    made: u64,
    /// Tools with a tool_use and no result, oldest first.
    open_tools: Vec<OpenTool>,
    /// Tools with a result: an agent's later word on them changes nothing.
    closed_tools: HashSet<String>,
    /// Permission requests asked and not yet settled, oldest first.
    pending: Vec<String>,
    partial: Tracker,
}

impl AcpDecoder {
    /// A decoder for one run of the agent configured as `agent` (the name
    /// run_ready records), spawned with `setup`.
    pub fn new(setup: &DecoderSetup, agent: &str) -> Self {
        Self {
            max_line_bytes: setup.max_line_bytes,
            pid: setup.pid,
            agent: agent.to_owned(),
            resume_id: setup.resume_id.clone(),
            version: String::new(),
            session_id: String::new(),
            model: String::new(),
            replaying: !setup.resume_id.is_empty(),
            first_after_load: !setup.resume_id.is_empty(),
            copies: false,
            inputs_waiting: 0,
            turn: None,
            next_prompt_id: None,
            block: None,
            made: 0,
            open_tools: Vec::new(),
            closed_tools: HashSet::new(),
            pending: Vec::new(),
            partial: Tracker::new(setup.max_partial_bytes),
        }
    }

    /// A request: our own prompt's copy, or the agent's.
    fn request(&mut self, method: &str, id: &Value, params: &Value) -> Vec<Payload> {
        match method {
            "session/prompt" => {
                self.prompt_sent(id);
                Vec::new()
            }
            "session/request_permission" => self.permission(id, params),
            other => {
                tracing::debug!(method = other, "ACP request for the process side");
                Vec::new()
            }
        }
    }

    fn notification(&mut self, method: &str, params: &Value) -> Vec<Payload> {
        match method {
            "session/update" => self.update(params.get("update").unwrap_or(&Value::Null)),
            "session/cancel" => {
                self.cancel_sent();
                Vec::new()
            }
            REFUSED => vec![line::run_error(
                run_error_kind::CLI_ERROR,
                str_at(params, "message"),
            )],
            other => {
                tracing::debug!(method = other, "ignoring ACP notification");
                Vec::new()
            }
        }
    }

    fn content(&self, blocks: Vec<pb::ContentBlock>, message_id: &str) -> pb::Content {
        pb::Content {
            message_id: message_id.to_owned(),
            model: self.model.clone(),
            blocks,
            ..Default::default()
        }
    }

    /// A fresh id for a block or plan this decoder makes up.
    fn next_id(&mut self, what: &str) -> String {
        self.made += 1;
        format!("acp-{what}-{}", self.made)
    }
}

impl Decoder for AcpDecoder {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        let (text, obj) = match line::object(line, self.max_line_bytes) {
            Read::Unreadable(unreadable) => return vec![*unreadable],
            Read::Blank => return Vec::new(),
            Read::Object(text, obj) => (text, obj),
        };
        let payloads = match (obj.get("method").and_then(Value::as_str), obj.get("id")) {
            (Some(method), Some(id)) => self.request(method, id, params(&obj)),
            (Some(method), None) => self.notification(method, params(&obj)),
            (None, Some(id)) => self.answer(id, &obj),
            (None, None) => {
                return vec![line::bad_line(
                    "an object without a \"method\" or an \"id\"",
                    text,
                )];
            }
        };
        payloads.into_iter().map(|p| (p, text.to_owned())).collect()
    }

    fn input_sent(&mut self) {
        self.inputs_waiting += 1;
    }

    fn take_partial(&mut self) -> Vec<Change> {
        self.partial.take()
    }

    fn partial_dropped(&self) -> u64 {
        self.partial.dropped()
    }
}

/// A message's `params` (`null` when absent).
fn params(obj: &Map<String, Value>) -> &Value {
    obj.get("params").unwrap_or(&Value::Null)
}

/// A JSON-RPC id as the `request_id` the harness answers with: its compact
/// JSON text (`0`, `"abc"` with the quotes), which the process side parses
/// back into the id it writes.
fn request_id(id: &Value) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

#[cfg(test)]
mod tests;
