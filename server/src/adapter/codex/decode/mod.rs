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
//! | `item/started` of a tool (`commandExecution`, `fileChange`, `mcpToolCall`, `webSearch`) | `content` with its tool_use (names and inputs in `items`) |
//! | `item/completed` of a tool | `result` with the tool's output (its live output, if any, is done) |
//! | `item/completed` `agentMessage` / `reasoning` | `content` text / thinking |
//! | `item/completed` `contextCompaction` | `turn_end{compact: true}` |
//! | `thread/tokenUsage/updated` | nothing: its `last` call's tokens add up into the turn's usage |
//! | `turn/completed` | `turn_end` (`completed` → success; `interrupted` → an error turn, subtype `interrupted`; `failed` → an error turn with Codex's message), after closing what the turn left open: a message being written becomes `content` with its text so far, a tool without result gets an error result "interrupted" |
//! | `item/commandExecution/requestApproval`, `item/fileChange/requestApproval`, `item/permissions/requestApproval` | `permission_requested` (`request_id` = the request's JSON id as compact JSON text) |
//! | `serverRequest/resolved` of a request still pending here | `permission_resolved{by: "cancelled"}` (the run task drops it unless the log's fold still has it pending, as for claude's withdrawals) |
//! | an error answer `no rollout found …` | `run_error{kind: "resume_failed"}` |
//! | any other error answer | `run_error{kind: "cli_error"}` with Codex's message (the process side's own requests too: an error is never dropped) |
//! | `item/agentMessage/delta`, `item/reasoning/summaryTextDelta` | nothing: live typing of the message or thinking being written ([`Decoder::take_partial`], see [`crate::partial`]) |
//! | `item/commandExecution/outputDelta` | nothing: live typing of the running command's output, a tool-output block keyed by its item id (= its tool_use id), done when its `result` is committed; the log holds the output only in that `result` |
//! | other notifications, requests and answers | nothing (logged at debug) |
//! | an object with neither `method` nor `id` | `run_error{kind: "bad_line"}` |
//! | not JSON, not an object, too long | as for claude (`crate::decoder::line`) |

// `thread`: run_ready and the answers to the harness's requests; `turn`:
// turn start, end and usage; `items`: tool items as tool_use and result;
// `permission`: approvals; here: the dispatch and the items as they stream.
mod items;
mod permission;
mod thread;
mod turn;

use std::collections::HashSet;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::{Map, Value};

use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::decoder::json::{as_u64, str_at};
use crate::decoder::line::{self, Read};
use crate::partial::{BlockKind, Change, Tracker};

use self::items::ToolCall;
use self::thread::Fingerprint;
use self::turn::Turn;

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
    /// User messages the harness wrote whose turn has not started yet (the
    /// process side starts one turn per message, in order).
    inputs_waiting: usize,
    turn: Option<Turn>,
    /// Tool items with a tool_use and no result, in the order they began.
    open_tools: Vec<OpenTool>,
    open_message: Option<OpenMessage>,
    open_reasoning: Option<OpenReasoning>,
    /// Permission requests asked and not resolved, by request id.
    pending: HashSet<String>,
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
            inputs_waiting: 0,
            turn: None,
            open_tools: Vec::new(),
            open_message: None,
            open_reasoning: None,
            pending: HashSet::new(),
            partial: Tracker::new(setup.max_partial_bytes),
        }
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
            "item/commandExecution/outputDelta" => {
                self.output_delta(&str_at(params, "itemId"), &str_at(params, "delta"));
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
            "serverRequest/resolved" => self.resolved(params),
            other => {
                tracing::debug!(method = other, "ignoring Codex notification");
                Vec::new()
            }
        }
    }

    fn item_started(&mut self, item: &Value) -> Vec<Payload> {
        let id = str_at(item, "id");
        match str_at(item, "type").as_str() {
            "agentMessage" => {
                // A message still open here was abandoned: input sent
                // mid-turn is steered into the turn and Codex restarts its
                // answer, never completing the old one (0.169.0). It goes,
                // from live typing too, as it goes from Codex's thread.
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
                self.partial.end_output(&id);
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

    /// A command's output as it runs: live typing of the tool's output
    /// (its `result` carries the whole of it). Only for a tool whose
    /// tool_use is in the log, so a client has a tool to show it under.
    fn output_delta(&mut self, item_id: &str, delta: &str) {
        if let Some(tool) = self.open_tools.iter().find(|t| t.id == item_id) {
            self.partial.output(item_id, &tool.call.name, delta);
        }
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

#[cfg(test)]
mod tests;
