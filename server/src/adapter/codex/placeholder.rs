//! A minimal decoder of Codex's app-server output: the run's readiness
//! (the thread), the agent's messages, approval requests, the end of each
//! turn and a lost rollout. It stands in until the full decoder (items as
//! tool uses and results, reasoning, live typing, usage) replaces it.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{agent, run_error_kind};
use serde_json::Value;

use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::partial::Change;

/// The placeholder for one run.
pub(super) fn decoder(setup: &DecoderSetup) -> Box<dyn Decoder> {
    Box::new(Placeholder {
        setup: setup.clone(),
    })
}

struct Placeholder {
    setup: DecoderSetup,
}

fn error(kind: &str, message: String) -> Payload {
    Payload::RunError(pb::RunError {
        message,
        kind: kind.into(),
        ..Default::default()
    })
}

fn struct_of(v: &Value) -> Option<pbjson_types::Struct> {
    serde_json::from_value(v.clone()).ok()
}

impl Placeholder {
    fn message(&self, msg: &Value) -> Vec<Payload> {
        let text = |p: &str| msg.pointer(p).and_then(Value::as_str).unwrap_or("");
        match msg.get("method").and_then(Value::as_str) {
            Some("item/completed") if text("/params/item/type") == "agentMessage" => {
                vec![Payload::Content(pb::Content {
                    message_id: text("/params/item/id").into(),
                    blocks: vec![pb::ContentBlock {
                        r#type: "text".into(),
                        text: text("/params/item/text").into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                })]
            }
            Some("turn/completed") => {
                let status = text("/params/turn/status");
                vec![Payload::TurnEnd(pb::TurnEnd {
                    is_error: status == "failed",
                    subtype: status.into(),
                    ..Default::default()
                })]
            }
            Some(m) if m.ends_with("/requestApproval") => {
                let id = msg.get("id").map(Value::to_string).unwrap_or_default();
                vec![Payload::PermissionRequested(pb::PermissionRequested {
                    request_id: id,
                    tool_name: "Bash".into(),
                    input: msg.get("params").and_then(struct_of),
                    tool_use_id: text("/params/itemId").into(),
                    ..Default::default()
                })]
            }
            Some(_) => Vec::new(),
            None => {
                if let Some(thread) = msg.pointer("/result/thread/id").and_then(Value::as_str) {
                    return vec![Payload::RunReady(pb::RunReady {
                        agent: agent::CODEX.into(),
                        resume_id: thread.into(),
                        model: text("/result/model").into(),
                        cwd: text("/result/cwd").into(),
                        pid: self.setup.pid.unwrap_or_default(),
                        ..Default::default()
                    })];
                }
                let why = text("/error/message");
                if why.contains("no rollout found") {
                    return vec![Payload::RunError(pb::RunError {
                        message: why.into(),
                        kind: run_error_kind::RESUME_FAILED.into(),
                        resume_id: self.setup.resume_id.clone(),
                    })];
                }
                Vec::new()
            }
        }
    }
}

impl Decoder for Placeholder {
    fn line(&mut self, line: &StdoutLine) -> Vec<(Payload, String)> {
        let text = match line {
            StdoutLine::Line(t) => t,
            StdoutLine::TooLong { head, len } => {
                return vec![(
                    error(
                        run_error_kind::LINE_TOO_LARGE,
                        format!("a Codex line of {len} bytes is over the limit"),
                    ),
                    head.clone(),
                )];
            }
        };
        if text.trim().is_empty() {
            return Vec::new();
        }
        match serde_json::from_str::<Value>(text) {
            Ok(v) if v.is_object() => self
                .message(&v)
                .into_iter()
                .map(|p| (p, text.clone()))
                .collect(),
            _ => vec![(
                error(run_error_kind::BAD_LINE, "not a JSON object".into()),
                text.clone(),
            )],
        }
    }

    fn input_sent(&mut self) {}

    fn take_partial(&mut self) -> Vec<Change> {
        Vec::new()
    }

    fn partial_dropped(&self) -> u64 {
        0
    }
}
