//! The normalizer: turns the CLI's stream-json stdout lines into log events.
//!
//! One [`Normalizer`] per run. It is a pure state machine over the lines it
//! sees (plus [`Normalizer::input_sent`] calls from the manager), so it can be
//! tested by replaying recordings and never touches the process.
//!
//! The frequent lines (`assistant`, `user`, `result`, `stream_event`) are
//! read typed, borrowing from the line ([`read`]); the others are parsed as
//! a `serde_json::Value`. Either way a line of a kind maps through the one
//! function of that kind.
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

mod content;
#[cfg(test)]
mod equivalence;
mod init;
mod read;
mod result;
mod system;
mod typing;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Map, Value};

pub use crate::decoder::ControlReply;
use crate::decoder::{Decoder, DecoderSetup};
use crate::partial::{Change, Tracker};
use crate::process::StdoutLine;

use self::init::ReadyFingerprint;
use self::read::Line;
use self::result::Totals;
use crate::decoder::json::{str_at, str_of, value_text};
use crate::decoder::line::{self, Unreadable};

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
        match self.decode(line) {
            Ok(payloads) => {
                let text = line::whole(line);
                payloads.into_iter().map(|p| (p, text.to_owned())).collect()
            }
            Err(unreadable) => vec![*unreadable],
        }
    }

    /// As [`Normalizer::line`], keeping the line itself (not a copy) as the
    /// `cli_line` of its last event.
    pub fn line_owned(&mut self, line: StdoutLine) -> Vec<(Payload, String)> {
        match self.decode(&line) {
            Ok(payloads) => {
                let text = match line {
                    StdoutLine::Line(text) => text,
                    StdoutLine::TooLong { head, .. } => head,
                };
                let last = payloads.len().saturating_sub(1);
                let mut text = Some(text);
                payloads
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let cli_line = if i == last {
                            text.take().unwrap_or_default()
                        } else {
                            text.clone().unwrap_or_default()
                        };
                        (p, cli_line)
                    })
                    .collect()
            }
            Err(unreadable) => vec![*unreadable],
        }
    }

    /// The payloads of one line (each keeps the whole line as its
    /// `cli_line`), or the error of a line that cannot be read. The kinds
    /// of [`read`] are read typed from the line; a line that read refuses,
    /// and every other kind, is parsed as a `Value`.
    fn decode(&mut self, line: &StdoutLine) -> Result<Vec<Payload>, Box<Unreadable>> {
        let Some(text) = line::text(line, self.max_line_bytes)? else {
            return Ok(Vec::new());
        };
        if read::worth_reading(text)
            && let Some(typed) = Line::read(text)
            && let Some(kind) = typed.kind.get().filter(|k| read::is_typed(k))
        {
            return Ok(self.typed_line(kind, &typed));
        }
        let obj = line::parse(text)?;
        let Some(kind) = obj.get("type").and_then(Value::as_str) else {
            return Err(Box::new(line::bad_line(
                "an object without a \"type\"",
                text,
            )));
        };
        if read::is_typed(kind) {
            // Refused by the typed read (nested past serde_json's depth):
            // read again from the parsed object, cut where it is too deep.
            let canonical = Line::object_text(&obj);
            let typed = Line::read(&canonical).unwrap_or_default();
            return Ok(self.typed_line(kind, &typed));
        }
        Ok(self.object_line(text, kind, &obj))
    }

    /// The events of a line of a kind [`read`] reads.
    fn typed_line(&mut self, kind: &str, l: &Line) -> Vec<Payload> {
        typing::track(&mut self.partial, kind, l);
        match kind {
            "assistant" => vec![Payload::Content(content::content(l))],
            "user" => vec![Payload::Result(content::user(l))],
            "result" => {
                let booted = self.last_ready.is_some();
                let end = self.result(l);
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
            // Live typing only (see `partial`); never an event.
            _ => Vec::new(),
        }
    }

    /// The events of a line of another kind, parsed as a `Value`.
    fn object_line(&mut self, text: &str, kind: &str, obj: &Map<String, Value>) -> Vec<Payload> {
        match kind {
            "system" => self.system(obj),
            "control_request" => self.control_request(obj),
            "control_response" => {
                self.control_response(obj);
                Vec::new()
            }
            "control_cancel_request" => {
                let id = str_of(obj, "request_id");
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
            "transcript_mirror" => {
                self.mirror(text, obj);
                Vec::new()
            }
            other => {
                tracing::debug!(kind = other, "ignoring CLI line");
                Vec::new()
            }
        }
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

pub(crate) use crate::nesting::{to_struct, to_value};
#[cfg(test)]
pub(crate) use typing::feed as feed_tracker;

/// The claude CLI's stream-json, as the manager reads every agent.
impl Decoder for Normalizer {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        Normalizer::line(self, line)
    }
    fn line_owned(&mut self, line: StdoutLine) -> Vec<(Payload, String)> {
        Normalizer::line_owned(self, line)
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
