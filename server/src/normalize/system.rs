//! `system` lines: `init` (see `init`), `compact_boundary` as a compact
//! `turn_end`, and the background tasks' `task_*` lines.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::{Map, Value};

use super::Normalizer;
use crate::decoder::json::{str_at, str_of, u64_at};

impl Normalizer {
    pub(super) fn system(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
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
}
