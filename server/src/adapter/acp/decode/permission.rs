//! The agent's `session/request_permission` as a permission request.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::{AcpDecoder, request_id, tools};
use crate::decoder::json::str_at;
use crate::nesting::{to_struct, to_value};

impl AcpDecoder {
    /// A permission request: `request_id` is the request's JSON id (the
    /// process side answers it with the option of the kind the harness's
    /// decision needs, from `suggestions`). An agent need not announce the
    /// tool first (Gemini does not): its tool_use comes first then, so the
    /// request has a tool call to belong to.
    pub(super) fn permission(&mut self, id: &Value, params: &Value) -> Vec<Payload> {
        // Only a running prompt asks: a replay is over.
        self.replaying = false;
        let mut out = self.flush();
        self.in_turn();
        if let Some(turn) = self.turn.as_mut() {
            turn.asked = true;
        }
        let call = params.get("toolCall").unwrap_or(&Value::Null);
        let tool_use_id = str_at(call, "toolCallId");
        out.extend(self.tool_use(&tool_use_id, call));
        let known = self
            .open_tools
            .iter()
            .find(|t| t.id == tool_use_id)
            .map(|t| t.call.clone())
            .unwrap_or_else(|| tools::tool_call(call));
        let request_id = request_id(id);
        self.pending.push(request_id.clone());
        let suggestions = params
            .get("options")
            .and_then(Value::as_array)
            .map(|options| options.iter().filter_map(to_value).collect())
            .unwrap_or_default();
        out.push(Payload::PermissionRequested(pb::PermissionRequested {
            request_id,
            tool_name: known.name,
            input: to_struct(&known.input),
            suggestions,
            tool_use_id,
            description: str_at(call, "title"),
            ..Default::default()
        }));
        out
    }
}
