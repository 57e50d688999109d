//! The normalizer: turns the CLI's stream-json stdout lines into log events.
//!
//! One [`Normalizer`] per run. It is a pure state machine over the lines it
//! sees (plus [`Normalizer::input_sent`] calls from the manager), so it can be
//! tested by replaying recordings and never touches the process.
//!
//! Mapping (CLI line → event payload):
//!
//! | CLI line | event |
//! |---|---|
//! | first `system/init` of the run | `run_ready` |
//! | later `system/init` | `run_ready` again only when model, tools, permission mode, cwd, MCP servers or session id changed; plus `turn_start` when no input was sent since the last `result` |
//! | `assistant` | `content` (one per line) |
//! | `user` | `result` (tool results, or plain `text`) |
//! | `result` | `turn_end`; before the run's first init, a `result` whose `errors` say the CLI could not load the `--resume` conversation is preceded by `run_error{kind: "resume_failed"}` (see [`resume_failure`]) |
//! | `system/compact_boundary` | `turn_end{compact: true}` |
//! | `system/task_started` / `task_progress` / `task_updated` / `task_notification` | `task_started` / `task_updated` / `task_updated` / `task_notification` |
//! | `control_request{can_use_tool}` | `permission_requested` |
//! | `control_cancel_request` (with a `request_id`) | `permission_resolved{by: "cancelled"}` (the run task drops it unless that request is pending in the log's fold, the one record of what is pending) |
//! | `control_response` | nothing: the CLI's answer to a host control request ([`Normalizer::take_control_replies`]) |
//! | `stream_event` (`--include-partial-messages`) | nothing: never stored; it feeds live typing ([`Normalizer::take_partial`], see [`crate::partial`]) |
//! | `transcript_mirror` (`--session-mirror`) | nothing: its entries are kept beside the log ([`Normalizer::take_transcript`], see [`crate::store::transcript`]) |
//! | anything else that is a JSON object with a `type` | nothing (logged at debug) |
//! | not JSON, not an object, no `type` | `run_error{kind: "bad_line"}` |
//! | longer than the limit | `run_error{kind: "line_too_large"}` |

#[cfg(test)]
mod equivalence;
mod init;
mod result;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Map, Value};

pub use crate::decoder::ControlReply;
use crate::decoder::{Decoder, DecoderSetup};
use crate::partial::{Change, Tracker};
use crate::process::StdoutLine;

use self::init::ReadyFingerprint;
use self::result::Totals;
use crate::decoder::json::{str_at, str_of, u64_at, value_text};
use crate::decoder::line::{self, Read};

/// Whether `text` (an entry of a `result` line's `errors`, or the CLI's
/// stderr) says the CLI could not resume the conversation it was given.
///
/// What the real CLI does when `--resume <id>` names a transcript it does
/// not have (measured on 2.1.197 and 2.1.332): before any `system/init` it
/// writes one `result` line, `subtype: "error_during_execution"`,
/// `is_error: true`, `num_turns: 0`, `errors: ["No conversation found with
/// session ID: <id>"]`, prints the same sentence on stderr and exits 1,
/// whether or not a prompt was written. A value that is not a UUID gets
/// `"Error: --resume requires a valid session ID or session title when used
/// with --print. ..."` the same way.
pub fn resume_failure(text: &str) -> bool {
    text.contains("No conversation found with session ID")
        || text.contains("--resume requires a valid session ID")
}

/// Per-run normalizer state.
#[derive(Debug)]
pub struct Normalizer {
    /// Lines longer than this become `line_too_large` errors.
    max_line_bytes: usize,
    /// The fingerprint of the last run_ready, `None` before the first init.
    last_ready: Option<ReadyFingerprint>,
    /// True when the harness wrote a user message since the last `result`:
    /// the next init belongs to that message, not to a self-started turn.
    input_since_result: bool,
    /// True between an init and its `result`.
    turn_active: bool,
    /// A task_notification arrived since the last `result`: a following
    /// self-started turn was most likely caused by it.
    notification_since_result: bool,
    /// The OS pid, copied into run_ready.
    pid: Option<u32>,
    /// The `--resume` id this run was spawned with ("" when none), named by
    /// a `resume_failed` run_error.
    resume: String,
    /// The CLI's running totals (`total_cost_usd`, `modelUsage`) as of the
    /// last `result`: the CLI reports them cumulatively for the process,
    /// while TurnEnd carries the turn's own share, so each result records
    /// the difference.
    reported_totals: Totals,
    /// The message being written, from `stream_event` lines (live typing):
    /// changes only, taken by the run task; nothing of it is an event.
    partial: Tracker,
    /// The CLI's answers to the harness's control requests, taken by the
    /// run task (never events).
    control_replies: Vec<ControlReply>,
    /// Lines the CLI added to its conversation files (`transcript_mirror`
    /// frames), as (path relative to its configuration directory, line),
    /// taken by the run task (never events).
    transcript: Vec<(String, String)>,
}

impl Normalizer {
    /// A normalizer for one run; `max_line_bytes` caps a single line.
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes,
            last_ready: None,
            input_since_result: false,
            turn_active: false,
            notification_since_result: false,
            pid: None,
            resume: String::new(),
            reported_totals: Totals::default(),
            partial: Tracker::new(crate::partial::DEFAULT_MAX_PARTIAL_BYTES),
            control_replies: Vec::new(),
            transcript: Vec::new(),
        }
    }

    /// A normalizer for one run, as the manager builds it through
    /// [`crate::adapter::ProcessAdapter::decoder`].
    pub fn with_setup(setup: &DecoderSetup) -> Self {
        let mut n = Self::new(setup.max_line_bytes);
        n.set_pid(setup.pid);
        n.set_resume(&setup.resume_id);
        n.set_partial_budget(setup.max_partial_bytes);
        n
    }

    /// The conversation-file lines of the `transcript_mirror` frames since
    /// the last call: (path relative to the CLI's configuration directory,
    /// line; empty for one over [`crate::store::transcript::MAX_ENTRY_BYTES`]).
    pub fn take_transcript(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.transcript)
    }

    /// The CLI's answers to control requests since the last call.
    pub fn take_control_replies(&mut self) -> Vec<ControlReply> {
        std::mem::take(&mut self.control_replies)
    }

    /// Holds at most `bytes` of partial text (`--max-partial-bytes`).
    pub fn set_partial_budget(&mut self, bytes: usize) {
        self.partial = Tracker::new(bytes);
    }

    /// What changed in the message being written since the last call
    /// (from `stream_event`, `assistant` and `result` lines).
    pub fn take_partial(&mut self) -> Vec<Change> {
        self.partial.take()
    }

    /// Fragments dropped so far because the partial budget was reached.
    pub fn partial_dropped(&self) -> u64 {
        self.partial.dropped()
    }

    /// Set the OS pid reported in run_ready events.
    pub fn set_pid(&mut self, pid: Option<u32>) {
        self.pid = pid;
    }

    /// Set the `--resume` id the run was spawned with.
    pub fn set_resume(&mut self, resume_id: &str) {
        self.resume = resume_id.to_owned();
    }

    /// The harness wrote a user message: the next system/init belongs to it
    /// and is not a self-started turn.
    pub fn input_sent(&mut self) {
        self.input_since_result = true;
    }

    /// Normalize one stdout line into zero or more events, each with the
    /// CLI line it came from. Never panics; bad lines become run_error events.
    pub fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        match line::object(line, self.max_line_bytes) {
            Read::Unreadable(unreadable) => vec![*unreadable],
            Read::Blank => Vec::new(),
            Read::Object(text, obj) => self.object_line(text, obj),
        }
    }

    fn object_line(&mut self, text: &str, obj: Map<String, Value>) -> Vec<(Payload, String)> {
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            return vec![line::bad_line("an object without a \"type\"", text)];
        };
        self.partial.line(kind, &obj);
        let payloads = match kind {
            "system" => self.system(&obj),
            "assistant" => vec![Payload::Content(content(&obj))],
            "user" => vec![Payload::Result(user(&obj))],
            "result" => {
                let booted = self.last_ready.is_some();
                let end = self.result(&obj);
                let mut out = Vec::with_capacity(2);
                if !booted && let Some(why) = end.errors.iter().find(|e| resume_failure(e)) {
                    out.push(Payload::RunError(pb::RunError {
                        message: why.clone(),
                        kind: run_error_kind::RESUME_FAILED.into(),
                        resume_id: if self.resume.is_empty() {
                            why.strip_prefix("No conversation found with session ID: ")
                                .unwrap_or_default()
                                .trim()
                                .to_owned()
                        } else {
                            self.resume.clone()
                        },
                    }));
                }
                out.push(Payload::TurnEnd(end));
                out
            }
            "control_request" => self.control_request(&obj),
            "control_response" => {
                self.control_response(&obj);
                Vec::new()
            }
            "control_cancel_request" => {
                let id = str_of(&obj, "request_id");
                if !id.is_empty() {
                    vec![Payload::PermissionResolved(pb::PermissionResolved {
                        request_id: id,
                        allow: false,
                        by: resolved_by::CANCELLED.into(),
                        ..Default::default()
                    })]
                } else {
                    tracing::debug!("control_cancel_request without a request_id");
                    Vec::new()
                }
            }
            // Live typing only (see `partial`); never an event.
            "stream_event" => Vec::new(),
            "transcript_mirror" => {
                self.mirror(text, &obj);
                Vec::new()
            }
            other => {
                tracing::debug!(kind = other, "ignoring CLI line");
                Vec::new()
            }
        };
        payloads
            .into_iter()
            .map(|p| (p, text.to_string()))
            .collect()
    }

    /// Takes a `transcript_mirror` frame's entries aside, one line each,
    /// as the CLI wrote them: each entry's own text from the line, not a
    /// re-encoding of `obj` (whose containers past the parse depth are cut,
    /// see [`crate::nesting::parse_line`]). A frame too deep to read that
    /// way keeps a gap for each entry.
    fn mirror(&mut self, text: &str, obj: &Map<String, Value>) {
        use crate::store::transcript::{MAX_ENTRY_BYTES, relative_path};
        #[derive(serde::Deserialize)]
        struct Frame<'a> {
            #[serde(borrow)]
            entries: Vec<&'a serde_json::value::RawValue>,
        }
        let file = str_of(obj, "filePath");
        let Some(path) = relative_path(&file) else {
            tracing::warn!(
                file,
                "transcript_mirror frame for a file outside projects/; not kept"
            );
            return;
        };
        let lines: Vec<String> = match serde_json::from_str::<Frame<'_>>(text) {
            Ok(frame) => frame.entries.iter().map(|e| e.get().to_owned()).collect(),
            Err(e) => {
                let n = obj
                    .get("entries")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                tracing::warn!(path, error = %e, entries = n, "transcript_mirror frame unreadable; its entries kept as gaps");
                vec![String::new(); n]
            }
        };
        for mut line in lines {
            if line.len() > MAX_ENTRY_BYTES {
                tracing::warn!(
                    path,
                    size = line.len(),
                    "transcript entry over the limit; kept as a gap"
                );
                line.clear();
            }
            self.transcript.push((path.clone(), line));
        }
    }

    /// Records the CLI's answer to a host control request.
    fn control_response(&mut self, obj: &Map<String, Value>) {
        let Some(r) = obj.get("response") else {
            return;
        };
        let request_id = r
            .get("request_id")
            .or_else(|| r.get("requestId"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if request_id.is_empty() {
            return;
        }
        let outcome = match r.get("subtype").and_then(Value::as_str) {
            Some("success") => Ok(r
                .get("response")
                .cloned()
                .unwrap_or(Value::Object(Map::new()))),
            _ => Err(r
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("the CLI answered with an error and no message")
                .to_owned()),
        };
        self.control_replies.push(ControlReply {
            request_id: request_id.to_owned(),
            outcome,
        });
    }

    fn system(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
        let subtype = obj.get("subtype").and_then(Value::as_str).unwrap_or("");
        match subtype {
            "init" => self.init(obj),
            "compact_boundary" => {
                let meta = obj.get("compact_metadata");
                vec![Payload::TurnEnd(pb::TurnEnd {
                    compact: true,
                    compact_trigger: meta.map(|m| str_at(m, "trigger")).unwrap_or_default(),
                    compact_pre_tokens: meta.map(|m| u64_at(m, "pre_tokens")).unwrap_or(0),
                    ..Default::default()
                })]
            }
            "task_started" => vec![Payload::TaskStarted(pb::TaskStarted {
                task_id: str_of(obj, "task_id"),
                task_type: str_of(obj, "task_type"),
                description: str_of(obj, "description"),
                tool_use_id: str_of(obj, "tool_use_id"),
                subagent_type: str_of(obj, "subagent_type"),
                prompt: str_of(obj, "prompt"),
            })],
            "task_progress" => {
                let usage = obj.get("usage");
                vec![Payload::TaskUpdated(pb::TaskUpdated {
                    task_id: str_of(obj, "task_id"),
                    status: String::new(),
                    description: str_of(obj, "description"),
                    error: String::new(),
                    summary: str_of(obj, "summary"),
                    last_tool_name: str_of(obj, "last_tool_name"),
                    total_tokens: usage.map(|u| u64_at(u, "total_tokens")).unwrap_or(0),
                    tool_uses: usage.map(|u| u64_at(u, "tool_uses") as u32).unwrap_or(0),
                })]
            }
            "task_updated" => {
                let patch = obj.get("patch").cloned().unwrap_or(Value::Null);
                vec![Payload::TaskUpdated(pb::TaskUpdated {
                    task_id: str_of(obj, "task_id"),
                    status: str_at(&patch, "status"),
                    description: str_at(&patch, "description"),
                    error: str_at(&patch, "error"),
                    ..Default::default()
                })]
            }
            "task_notification" => {
                self.notification_since_result = true;
                vec![Payload::TaskNotification(pb::TaskNotification {
                    task_id: str_of(obj, "task_id"),
                    tool_use_id: str_of(obj, "tool_use_id"),
                    status: str_of(obj, "status"),
                    output_file: str_of(obj, "output_file"),
                    summary: str_of(obj, "summary"),
                })]
            }
            other => {
                tracing::debug!(subtype = other, "ignoring CLI system line");
                Vec::new()
            }
        }
    }

    fn control_request(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
        let request = obj.get("request").cloned().unwrap_or(Value::Null);
        let subtype = str_at(&request, "subtype");
        if subtype != "can_use_tool" {
            tracing::debug!(subtype = %subtype, "ignoring CLI control_request");
            return Vec::new();
        }
        let request_id = str_of(obj, "request_id");
        vec![Payload::PermissionRequested(pb::PermissionRequested {
            request_id,
            tool_name: str_at(&request, "tool_name"),
            input: request.get("input").and_then(to_struct),
            suggestions: request
                .get("permission_suggestions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(to_value).collect())
                .unwrap_or_default(),
            tool_use_id: str_at(&request, "tool_use_id"),
            description: str_at(&request, "description"),
            decision_reason: request
                .get("decision_reason")
                .map(value_text)
                .unwrap_or_default(),
            blocked_path: str_at(&request, "blocked_path"),
        })]
    }
}

fn content(obj: &Map<String, Value>) -> pb::Content {
    let message = obj.get("message").cloned().unwrap_or(Value::Null);
    let blocks = message
        .get("content")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(content_block).collect())
        .unwrap_or_default();
    pb::Content {
        message_id: str_at(&message, "id"),
        model: str_at(&message, "model"),
        blocks,
        usage: message.get("usage").map(usage),
        parent_tool_use_id: str_of(obj, "parent_tool_use_id"),
        stop_reason: str_at(&message, "stop_reason"),
        error: str_of(obj, "error"),
    }
}

fn content_block(block: &Value) -> pb::ContentBlock {
    let kind = str_at(block, "type");
    match kind.as_str() {
        "text" => pb::ContentBlock {
            text: str_at(block, "text"),
            r#type: kind,
            ..Default::default()
        },
        "thinking" => pb::ContentBlock {
            thinking: str_at(block, "thinking"),
            r#type: kind,
            ..Default::default()
        },
        "tool_use" | "server_tool_use" => pb::ContentBlock {
            tool_use_id: str_at(block, "id"),
            tool_name: str_at(block, "name"),
            input: block.get("input").and_then(to_struct),
            r#type: kind,
            ..Default::default()
        },
        // redacted_thinking, *_tool_result and whatever a newer CLI sends:
        // keep the whole block so nothing is lost.
        _ => pb::ContentBlock {
            raw: to_struct(block),
            r#type: kind,
            ..Default::default()
        },
    }
}

fn user(obj: &Map<String, Value>) -> pb::Result {
    let message = obj.get("message").cloned().unwrap_or(Value::Null);
    let mut tool_results = Vec::new();
    let mut texts = Vec::new();
    match message.get("content") {
        Some(Value::String(s)) => texts.push(s.clone()),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_result") => tool_results.push(pb::ToolResult {
                        tool_use_id: str_at(block, "tool_use_id"),
                        text: block_text(block.get("content")),
                        is_error: block
                            .get("is_error")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    }),
                    Some("text") => texts.push(str_at(block, "text")),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    pb::Result {
        is_error: tool_results.iter().any(|r| r.is_error),
        tool_results,
        parent_tool_use_id: str_of(obj, "parent_tool_use_id"),
        text: texts.join("\n"),
        tool_use_result: obj.get("tool_use_result").and_then(to_value),
    }
}

/// A tool_result's content: a string, or text blocks joined with newlines.
fn block_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn usage(v: &Value) -> pb::Usage {
    pb::Usage {
        input_tokens: u64_at(v, "input_tokens"),
        output_tokens: u64_at(v, "output_tokens"),
        cache_creation_input_tokens: u64_at(v, "cache_creation_input_tokens"),
        cache_read_input_tokens: u64_at(v, "cache_read_input_tokens"),
    }
}

pub(crate) use crate::nesting::{to_struct, to_value};

/// The claude CLI's stream-json, as the manager reads every agent.
impl Decoder for Normalizer {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        Normalizer::line(self, line)
    }
    fn input_sent(&mut self) {
        Normalizer::input_sent(self)
    }
    fn take_partial(&mut self) -> Vec<Change> {
        Normalizer::take_partial(self)
    }
    fn partial_dropped(&self) -> u64 {
        Normalizer::partial_dropped(self)
    }
    fn take_transcript(&mut self) -> Vec<(String, String)> {
        Normalizer::take_transcript(self)
    }
    fn take_control_replies(&mut self) -> Vec<ControlReply> {
        Normalizer::take_control_replies(self)
    }
}

#[cfg(test)]
mod null_tests {
    use super::*;

    /// Every nested null becomes `null_value`, at any depth: a Value with
    /// no kind is not a valid `google.protobuf.Value` for other clients.
    #[test]
    fn nested_nulls_are_null_values() {
        use pbjson_types::value::Kind;
        fn no_empty_kind(v: &pbjson_types::Value) -> bool {
            match &v.kind {
                None => false,
                Some(Kind::StructValue(s)) => s.fields.values().all(no_empty_kind),
                Some(Kind::ListValue(l)) => l.values.iter().all(no_empty_kind),
                Some(_) => true,
            }
        }
        let s = to_struct(&serde_json::json!({
            "a": null, "b": {"c": null}, "d": [1, null, {"e": null}]
        }))
        .unwrap();
        assert!(s.fields.values().all(no_empty_kind), "{s:?}");
        assert_eq!(s.fields["a"].kind, Some(Kind::NullValue(0)));
        // Still null as JSON.
        assert_eq!(serde_json::to_value(&s).unwrap()["b"]["c"], Value::Null);
        assert!(no_empty_kind(
            &to_value(&serde_json::json!([null])).unwrap()
        ));
    }
}

#[cfg(test)]
mod mirror_tests {
    use super::*;

    /// A `transcript_mirror` frame is never an event; its entries are kept
    /// with the text the CLI wrote (key order and spacing), under the path
    /// relative to the CLI's configuration directory.
    #[test]
    fn transcript_mirror_entries_are_taken_aside_as_written() {
        let mut n = Normalizer::new(1 << 20);
        let line = r#"{"type":"transcript_mirror","filePath":"/d/cfg/projects/-w/c.jsonl","entries":[{"z":1,"a":"x"},{"type":"user","message":{"content":"hi"}}]}"#;
        assert!(n.line(&StdoutLine::Line(line.into())).is_empty());
        let path = "projects/-w/c.jsonl".to_owned();
        assert_eq!(
            n.take_transcript(),
            vec![
                (path.clone(), r#"{"z":1,"a":"x"}"#.to_owned()),
                (
                    path,
                    r#"{"type":"user","message":{"content":"hi"}}"#.to_owned()
                ),
            ]
        );
        assert!(n.take_transcript().is_empty());
    }
}
