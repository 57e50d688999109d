//! Codex's approval requests as permission requests, and its word that a
//! request is settled.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::resolved_by;
use serde_json::{Map, Value};

use super::CodexDecoder;
use super::items::{self, ToolCall};
use crate::decoder::json::str_at;
use crate::nesting::to_struct;

impl CodexDecoder {
    /// A request from Codex to the harness: the approvals are permission
    /// requests; the others are the process side's to answer.
    pub(super) fn request(&mut self, method: &str, id: &Value, params: &Value) -> Vec<Payload> {
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
        self.pending.insert(request_id.clone());
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

    /// `serverRequest/resolved`: Codex settled a request (answered, or
    /// withdrawn by an interrupt). Of the permission requests still
    /// pending here it is a withdrawal; the run task keeps it only if the
    /// log's fold still has the request pending, as for claude's.
    pub(super) fn resolved(&mut self, params: &Value) -> Vec<Payload> {
        let id = request_id(params.get("requestId").unwrap_or(&Value::Null));
        if !self.pending.remove(&id) {
            return Vec::new();
        }
        vec![Payload::PermissionResolved(pb::PermissionResolved {
            request_id: id,
            allow: false,
            by: resolved_by::CANCELLED.into(),
            ..Default::default()
        })]
    }
}

/// A JSON-RPC id as the `request_id` the harness answers with: its compact
/// JSON text (`0`, `"abc"` with the quotes), which the process side parses
/// back into the id it writes.
fn request_id(id: &Value) -> String {
    serde_json::to_string(id).unwrap_or_default()
}
