//! The Codex decoder: `codex app-server` stdout lines (JSON-RPC without the
//! `"jsonrpc"` member) in, log events out.
//!
//! One [`CodexDecoder`] per run. Like the claude normalizer it is a pure
//! state machine over the lines it sees (plus [`Decoder::input_sent`]
//! calls from the manager): every line the process writes reaches it
//! unchanged, the answers to the harness's own requests included, and it
//! never writes to the process.
//!
//! Mapping (line → event payload):
//!
//! | line | event |
//! |---|---|
//! | the `thread/start` or `thread/resume` answer (a result with a `thread`), `thread/started` | `run_ready` (`resume_id` = the thread id, model, cwd, Codex's version) once, again only when thread, model or cwd changed; a sub-agent's thread is not the run's |
//! | `turn/started` | nothing, or `turn_start` when no input was sent since the last turn ended (Codex began it by itself) |
//! | `item/started` of a tool (`commandExecution`, `fileChange`, `mcpToolCall`, `webSearch`) | `content` with its tool_use (names and inputs in [`items`]) |
//! | `item/completed` of a tool | `result` with the tool's output |
//! | `item/completed` `agentMessage` / `reasoning` | `content` text / thinking |
//! | `item/completed` `contextCompaction` | `turn_end{compact: true}` |
//! | `thread/tokenUsage/updated` | nothing: its `last` call's tokens add up into the turn's usage |
//! | `turn/completed` | `turn_end` (`completed` → success; `interrupted` → an error turn, subtype `interrupted`; `failed` → an error turn with Codex's message), after closing what the turn left open: a message being written becomes `content` with its text so far, a tool without result gets an error result "interrupted" |
//! | `item/commandExecution/requestApproval`, `item/fileChange/requestApproval`, `item/permissions/requestApproval` | `permission_requested` (`request_id` = the request's JSON id as compact JSON text) |
//! | `serverRequest/resolved` of a request still pending here | `permission_resolved{by: "cancelled"}` (the run task drops it unless the log's fold still has it pending, as for claude's withdrawals) |
//! | an error answer `no rollout found …` | `run_error{kind: "resume_failed"}` |
//! | any other error answer | `run_error{kind: "cli_error"}` with Codex's message |
//! | `item/agentMessage/delta`, `item/reasoning/summaryTextDelta` | nothing: live typing of the message or thinking being written ([`Decoder::take_partial`], see [`crate::partial`]); command output is not streamed (live typing has no block for a tool's output) |
//! | other notifications, requests and answers | nothing (logged at debug) |
//! | an object with neither `method` nor `id` | `run_error{kind: "bad_line"}` |
//! | not JSON, not an object, too long | as for claude ([`crate::normalize::line`]) |

mod items;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Map, Value};

use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::nesting::to_struct;
use crate::normalize::json::{as_u64, str_at, u64_at};
use crate::normalize::line::{self, Read};
use crate::partial::{BlockKind, Change, Tracker};

use self::items::ToolCall;

/// The run_error kind of an error Codex answered a request with (other than
/// a lost rollout).
const CLI_ERROR: &str = "cli_error";

/// What Codex answers `thread/resume` with when it has no rollout file for
/// the thread (0.169.0: code -32600, "no rollout found for thread id <id>").
const NO_ROLLOUT: &str = "no rollout found for thread id ";

/// What makes two thread announcements "the same" for run_ready purposes.
#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    thread_id: String,
    model: String,
    cwd: String,
}

/// A tool item with a tool_use in the log and no result yet.
#[derive(Debug, Clone)]
struct OpenTool {
    id: String,
    call: ToolCall,
}

/// An agent message being written (from its deltas).
#[derive(Debug, Default)]
struct OpenMessage {
    id: String,
    /// Its text so far, kept up to the line limit: an interrupt leaves it
    /// as the turn's last content.
    text: String,
}

/// A reasoning item being written (from its summary deltas).
#[derive(Debug)]
struct OpenReasoning {
    id: String,
    /// The summary part the last delta belonged to.
    part: Option<u64>,
    /// Whether any text was written yet.
    written: bool,
}

/// The turn under way.
#[derive(Debug, Default)]
struct Turn {
    /// Codex's turn id.
    id: String,
    /// Tokens of the turn's model calls so far.
    usage: pb::Usage,
    /// How many calls Codex reported tokens for.
    calls: u32,
    /// The model's context window, as Codex last reported it.
    context_window: u64,
    /// The last agent message's text (the turn's `result`).
    last_text: String,
    /// The message of an `error` notification Codex will not retry.
    error: String,
}

/// Per-run decoder state for one `codex app-server` process.
#[derive(Debug)]
pub struct CodexDecoder {
    /// Lines longer than this become `line_too_large` errors.
    max_line_bytes: usize,
    /// The OS pid, copied into run_ready.
    pid: Option<u32>,
    /// The thread this run was spawned to resume ("" when none), named by a
    /// `resume_failed` run_error.
    resume_id: String,
    /// The last run_ready's fingerprint, `None` before the first.
    ready: Option<Fingerprint>,
    /// The harness wrote a user message since the last turn ended.
    input_since_turn: bool,
    turn: Option<Turn>,
    /// Tool items with a tool_use and no result, in the order they began.
    open_tools: Vec<OpenTool>,
    open_message: Option<OpenMessage>,
    open_reasoning: Option<OpenReasoning>,
    /// Permission requests asked and not resolved, by request id.
    pending: HashMap<String, ()>,
    partial: Tracker,
}

impl CodexDecoder {
    /// A decoder for one run of a process spawned with `setup`.
    pub fn new(setup: &DecoderSetup) -> Self {
        Self {
            max_line_bytes: setup.max_line_bytes,
            pid: setup.pid,
            resume_id: setup.resume_id.clone(),
            ready: None,
            input_since_turn: false,
            turn: None,
            open_tools: Vec::new(),
            open_message: None,
            open_reasoning: None,
            pending: HashMap::new(),
            partial: Tracker::new(setup.max_partial_bytes),
        }
    }

    /// An answer to one of the harness's requests.
    fn answer(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
        if let Some(error) = obj.get("error") {
            let message = str_at(error, "message");
            if let Some(thread) = message.strip_prefix(NO_ROLLOUT) {
                let resume_id = if self.resume_id.is_empty() {
                    thread.trim().to_owned()
                } else {
                    self.resume_id.clone()
                };
                return vec![Payload::RunError(pb::RunError {
                    message,
                    kind: run_error_kind::RESUME_FAILED.into(),
                    resume_id,
                })];
            }
            let message = if message.is_empty() {
                format!(
                    "Codex answered with an error: {}",
                    crate::nesting::json_text(error)
                )
            } else {
                format!("Codex answered with an error: {message}")
            };
            return vec![line::run_error(CLI_ERROR, message)];
        }
        let Some(result) = obj.get("result") else {
            return Vec::new();
        };
        // thread/start and thread/resume answer with the thread and the
        // settings it runs with; other answers are the process side's.
        match result.get("thread") {
            Some(thread) if thread.get("id").is_some() => self.ready(thread, Some(result)),
            _ => Vec::new(),
        }
    }

    /// A run_ready for `thread` unless nothing a client sees changed.
    /// `answer`: the thread/start or thread/resume answer (its model and
    /// cwd are the effective ones).
    fn ready(&mut self, thread: &Value, answer: Option<&Value>) -> Vec<Payload> {
        let from_answer = |key: &str| {
            answer
                .map(|a| str_at(a, key))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| str_at(thread, key))
        };
        let fingerprint = Fingerprint {
            thread_id: str_at(thread, "id"),
            model: from_answer("model"),
            cwd: from_answer("cwd"),
        };
        if fingerprint.thread_id.is_empty() || self.ready.as_ref() == Some(&fingerprint) {
            return Vec::new();
        }
        // thread/started follows the answer and may say less (no model):
        // only a new thread makes it announce again.
        if answer.is_none()
            && self
                .ready
                .as_ref()
                .is_some_and(|r| r.thread_id == fingerprint.thread_id)
        {
            return Vec::new();
        }
        let ready = pb::RunReady {
            agent: agent_harness_protocol::vocab::agent::CODEX.into(),
            resume_id: fingerprint.thread_id.clone(),
            model: fingerprint.model.clone(),
            cwd: fingerprint.cwd.clone(),
            cli_version: str_at(thread, "cliVersion"),
            pid: self.pid.unwrap_or(0),
            // Codex's approval policy and sandbox are not our permission
            // modes: the launch policy check reads this field as one.
            ..Default::default()
        };
        self.ready = Some(fingerprint);
        vec![Payload::RunReady(ready)]
    }

    /// The thread the run drives, once announced.
    fn thread_id(&self) -> Option<&str> {
        self.ready.as_ref().map(|r| r.thread_id.as_str())
    }

    /// Whether a notification about `params.threadId` is about another
    /// thread (a sub-agent's), which this log does not follow.
    fn other_thread(&self, params: &Value) -> bool {
        let thread = str_at(params, "threadId");
        !thread.is_empty() && self.thread_id().is_some_and(|t| t != thread)
    }

    fn notification(&mut self, method: &str, params: &Value) -> Vec<Payload> {
        if self.other_thread(params) {
            tracing::debug!(method, "ignoring a notification about another thread");
            return Vec::new();
        }
        match method {
            "thread/started" => match params.get("thread") {
                Some(thread) if thread.get("parentThreadId").is_none_or(Value::is_null) => {
                    self.ready(thread, None)
                }
                _ => Vec::new(),
            },
            "turn/started" => self.turn_started(params),
            "turn/completed" => self.turn_completed(params),
            "item/started" => self.item_started(params.get("item").unwrap_or(&Value::Null)),
            "item/completed" => self.item_completed(params.get("item").unwrap_or(&Value::Null)),
            "item/agentMessage/delta" => {
                self.message_delta(&str_at(params, "itemId"), &str_at(params, "delta"));
                Vec::new()
            }
            "item/reasoning/summaryTextDelta" => {
                self.reasoning_delta(params);
                Vec::new()
            }
            "thread/tokenUsage/updated" => {
                self.token_usage(params);
                Vec::new()
            }
            "error" => {
                let retrying = params
                    .get("willRetry")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                if let Some(turn) = self.turn.as_mut().filter(|_| !retrying) {
                    turn.error = params
                        .get("error")
                        .map(|e| str_at(e, "message"))
                        .unwrap_or_default();
                }
                Vec::new()
            }
            "serverRequest/resolved" => {
                let id = request_id(params.get("requestId").unwrap_or(&Value::Null));
                if self.pending.remove(&id).is_none() {
                    return Vec::new();
                }
                vec![Payload::PermissionResolved(pb::PermissionResolved {
                    request_id: id,
                    allow: false,
                    by: resolved_by::CANCELLED.into(),
                    ..Default::default()
                })]
            }
            other => {
                tracing::debug!(method = other, "ignoring Codex notification");
                Vec::new()
            }
        }
    }

    fn turn_started(&mut self, params: &Value) -> Vec<Payload> {
        let id = params
            .get("turn")
            .map(|t| str_at(t, "id"))
            .unwrap_or_default();
        let self_started = !self.input_since_turn && self.turn.is_none();
        self.input_since_turn = false;
        self.turn = Some(Turn {
            id,
            ..Turn::default()
        });
        if self_started {
            // Codex says nothing of why it began a turn.
            vec![Payload::TurnStart(pb::TurnStart::default())]
        } else {
            Vec::new()
        }
    }

    fn turn_completed(&mut self, params: &Value) -> Vec<Payload> {
        let turn_json = params.get("turn").cloned().unwrap_or(Value::Null);
        let status = str_at(&turn_json, "status");
        let turn = self.turn.take().unwrap_or_default();
        self.input_since_turn = false;
        let mut out = Vec::new();
        // Codex completes none of the items an interrupt cut off: the
        // message being written keeps its text so far, each open tool gets
        // a result, so the log holds no tool_use waiting for ever.
        if let Some(message) = self.open_message.take()
            && !message.text.is_empty()
        {
            out.push(Payload::Content(
                self.text_content(&message.id, message.text),
            ));
        }
        self.open_reasoning = None;
        self.partial.clear();
        if !self.open_tools.is_empty() {
            let ids: Vec<String> = self.open_tools.drain(..).map(|t| t.id).collect();
            let why = if status == "interrupted" {
                "interrupted"
            } else {
                "the turn ended before the tool completed"
            };
            out.push(Payload::Result(items::unfinished(&ids, why)));
        }
        let error = turn_json
            .get("error")
            .map(|e| str_at(e, "message"))
            .filter(|m| !m.is_empty())
            .unwrap_or(turn.error);
        let (subtype, is_error) = match status.as_str() {
            "completed" => ("success", false),
            "interrupted" => ("interrupted", true),
            _ => ("error", true),
        };
        let model = self
            .ready
            .as_ref()
            .map(|r| r.model.clone())
            .unwrap_or_default();
        // A turn that made no model call (cut off before its first answer,
        // or failed) reports no usage rather than zeros.
        let model_usage = (turn.calls > 0)
            .then(|| pb::ModelUsage {
                model,
                input_tokens: turn.usage.input_tokens,
                output_tokens: turn.usage.output_tokens,
                cache_read_input_tokens: turn.usage.cache_read_input_tokens,
                cache_creation_input_tokens: turn.usage.cache_creation_input_tokens,
                context_window: turn.context_window,
                ..Default::default()
            })
            .into_iter()
            .collect();
        out.push(Payload::TurnEnd(pb::TurnEnd {
            usage: (turn.calls > 0).then_some(turn.usage),
            duration_ms: u64_at(&turn_json, "durationMs"),
            is_error,
            terminal_reason: status.clone(),
            subtype: subtype.into(),
            result: if is_error {
                String::new()
            } else {
                turn.last_text
            },
            model_usage,
            errors: if error.is_empty() {
                Vec::new()
            } else {
                vec![error]
            },
            ..Default::default()
        }));
        out
    }

    /// Adds one model call's tokens to the turn. `last` is that call;
    /// `total` is the thread's, which a resumed thread carries over from
    /// earlier processes, so the turn's share is the sum of its calls.
    fn token_usage(&mut self, params: &Value) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let turn_id = str_at(params, "turnId");
        if !turn_id.is_empty() && !turn.id.is_empty() && turn_id != turn.id {
            return;
        }
        let usage = params.get("tokenUsage").cloned().unwrap_or(Value::Null);
        let last = usage.get("last").cloned().unwrap_or(Value::Null);
        // Codex counts cached input inside its input tokens; ours are apart.
        let cached = u64_at(&last, "cachedInputTokens");
        let written = u64_at(&last, "cacheWriteInputTokens");
        turn.calls += 1;
        let u = &mut turn.usage;
        u.input_tokens += u64_at(&last, "inputTokens").saturating_sub(cached + written);
        u.cache_read_input_tokens += cached;
        u.cache_creation_input_tokens += written;
        u.output_tokens += u64_at(&last, "outputTokens");
        if let Some(window) = usage
            .get("modelContextWindow")
            .map(as_u64)
            .filter(|w| *w > 0)
        {
            turn.context_window = window;
        }
    }

    fn item_started(&mut self, item: &Value) -> Vec<Payload> {
        let id = str_at(item, "id");
        match str_at(item, "type").as_str() {
            "agentMessage" => {
                self.partial.begin_message("", &id);
                self.partial.begin_block("", 0, BlockKind::Text);
                self.open_message = Some(OpenMessage {
                    id,
                    text: String::new(),
                });
                return Vec::new();
            }
            "reasoning" => {
                self.partial.begin_message("", &id);
                self.partial.begin_block("", 0, BlockKind::Thinking);
                self.open_reasoning = Some(OpenReasoning {
                    id,
                    part: None,
                    written: false,
                });
                return Vec::new();
            }
            _ => {}
        }
        match items::tool_call(item) {
            Some(call) => self.tool_use(id, call),
            None => Vec::new(),
        }
    }

    /// The tool_use of a tool item, once per item.
    fn tool_use(&mut self, id: String, call: ToolCall) -> Vec<Payload> {
        if self.open_tools.iter().any(|t| t.id == id) {
            return Vec::new();
        }
        let block = items::tool_use_block(&id, &call);
        self.open_tools.push(OpenTool { id, call });
        vec![Payload::Content(self.content(vec![block], ""))]
    }

    fn item_completed(&mut self, item: &Value) -> Vec<Payload> {
        let id = str_at(item, "id");
        match str_at(item, "type").as_str() {
            "agentMessage" => {
                let text = str_at(item, "text");
                self.finish_partial(&id);
                if self.open_message.as_ref().is_some_and(|m| m.id == id) {
                    self.open_message = None;
                }
                if let Some(turn) = self.turn.as_mut() {
                    turn.last_text = text.clone();
                }
                vec![Payload::Content(self.text_content(&id, text))]
            }
            "reasoning" => {
                self.finish_partial(&id);
                if self.open_reasoning.as_ref().is_some_and(|r| r.id == id) {
                    self.open_reasoning = None;
                }
                let text = items::reasoning_text(item);
                if text.is_empty() {
                    return Vec::new();
                }
                let block = pb::ContentBlock {
                    r#type: "thinking".into(),
                    thinking: text,
                    ..Default::default()
                };
                vec![Payload::Content(self.content(vec![block], &id))]
            }
            "contextCompaction" => vec![Payload::TurnEnd(pb::TurnEnd {
                compact: true,
                compact_trigger: "auto".into(),
                ..Default::default()
            })],
            _ => {
                let Some(call) = items::tool_call(item) else {
                    return Vec::new();
                };
                // A tool completed without having started (never seen in
                // practice) still gets its tool_use first.
                let mut out = if self.open_tools.iter().any(|t| t.id == id) {
                    Vec::new()
                } else {
                    self.tool_use(id.clone(), call)
                };
                self.open_tools.retain(|t| t.id != id);
                out.push(Payload::Result(items::tool_result(item)));
                out
            }
        }
    }

    /// Item `id` is durable now: its live text leaves the board.
    fn finish_partial(&mut self, id: &str) {
        self.partial.complete_block(id, 0);
        if self.partial.streaming("") == Some(id) {
            self.partial.end_message("");
        }
    }

    /// A reasoning summary delta. The thinking block joins the summary's
    /// parts with a blank line ([`items::reasoning_text`]), so the live
    /// text does too, and its fragments join to exactly the block's text.
    /// (The raw reasoning text is not streamed: it is shown only when
    /// there is no summary, which is known only at the end.)
    fn reasoning_delta(&mut self, params: &Value) {
        let item_id = str_at(params, "itemId");
        let delta = str_at(params, "delta");
        let part = params.get("summaryIndex").map(as_u64);
        let Some(r) = self
            .open_reasoning
            .as_mut()
            .filter(|r| r.id == item_id && !delta.is_empty())
        else {
            return;
        };
        let new_part = r.written && r.part != part;
        r.part = part;
        r.written = true;
        if self.partial.streaming("") == Some(item_id.as_str()) {
            if new_part {
                self.partial.append("", 0, "\n\n");
            }
            self.partial.append("", 0, &delta);
        }
    }

    fn message_delta(&mut self, item_id: &str, delta: &str) {
        let Some(message) = self.open_message.as_mut().filter(|m| m.id == item_id) else {
            return;
        };
        if message.text.len() + delta.len() <= self.max_line_bytes {
            message.text.push_str(delta);
        }
        if self.partial.streaming("") == Some(item_id) {
            self.partial.append("", 0, delta);
        }
    }

    /// A request from Codex to the harness: the approvals are permission
    /// requests; the others are the process side's to answer.
    fn request(&mut self, method: &str, id: &Value, params: &Value) -> Vec<Payload> {
        let item_id = str_at(params, "itemId");
        let known = self
            .open_tools
            .iter()
            .find(|t| t.id == item_id)
            .map(|t| t.call.clone());
        let (tool_name, input) = match method {
            "item/commandExecution/requestApproval" => {
                let mut call = known.unwrap_or(ToolCall {
                    name: "Bash".into(),
                    input: Value::Object(Map::new()),
                });
                // The approval names what will run (it may be one part of
                // the item's command).
                for key in ["command", "cwd"] {
                    let v = str_at(params, key);
                    if !v.is_empty()
                        && let Some(obj) = call.input.as_object_mut()
                    {
                        obj.insert(key.into(), Value::String(v));
                    }
                }
                (call.name, call.input)
            }
            "item/fileChange/requestApproval" => {
                let call = known.unwrap_or(ToolCall {
                    name: "Edit".into(),
                    input: Value::Object(Map::new()),
                });
                (call.name, call.input)
            }
            "item/permissions/requestApproval" => (
                items::PERMISSIONS_TOOL.to_owned(),
                params.get("permissions").cloned().unwrap_or(Value::Null),
            ),
            other => {
                tracing::debug!(method = other, "Codex request for the process side");
                return Vec::new();
            }
        };
        let request_id = request_id(id);
        self.pending.insert(request_id.clone(), ());
        vec![Payload::PermissionRequested(pb::PermissionRequested {
            request_id,
            tool_name,
            input: to_struct(&input),
            tool_use_id: item_id,
            decision_reason: str_at(params, "reason"),
            blocked_path: str_at(params, "grantRoot"),
            ..Default::default()
        })]
    }

    fn text_content(&self, id: &str, text: String) -> pb::Content {
        let block = pb::ContentBlock {
            r#type: "text".into(),
            text,
            ..Default::default()
        };
        self.content(vec![block], id)
    }

    fn content(&self, blocks: Vec<pb::ContentBlock>, message_id: &str) -> pb::Content {
        pb::Content {
            message_id: message_id.to_owned(),
            model: self
                .ready
                .as_ref()
                .map(|r| r.model.clone())
                .unwrap_or_default(),
            blocks,
            ..Default::default()
        }
    }
}

impl Decoder for CodexDecoder {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        let (text, obj) = match line::object(line, self.max_line_bytes) {
            Read::Unreadable(unreadable) => return vec![*unreadable],
            Read::Blank => return Vec::new(),
            Read::Object(text, obj) => (text, obj),
        };
        let payloads = match (obj.get("method").and_then(Value::as_str), obj.get("id")) {
            (Some(method), Some(id)) => self.request(method, id, params(&obj)),
            (Some(method), None) => self.notification(method, params(&obj)),
            (None, Some(_)) => self.answer(&obj),
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
        self.input_since_turn = true;
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
