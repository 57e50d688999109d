//! The stream-json lines the harness writes to the CLI's stdin.

use serde_json::{Value, json};

use crate::adapter::{PermissionDecision, UserInput};

/// The stream-json user line for `input`: content blocks first, then the
/// text (a plain string when there are no blocks, as the SDKs send it).
pub fn user_message_line(input: &UserInput) -> String {
    let content = if input.content_blocks.is_empty() {
        Value::String(input.text.clone())
    } else {
        let mut blocks: Vec<Value> = input
            .content_blocks
            .iter()
            .map(|b| serde_json::to_value(b).unwrap_or(Value::Null))
            .collect();
        if !input.text.is_empty() {
            blocks.push(json!({"type": "text", "text": input.text}));
        }
        Value::Array(blocks)
    };
    let mut line = json!({
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": null,
        "session_id": "",
    });
    // The CLI keeps this uuid for the message: its file checkpoints
    // (`rewind_files`) are keyed by it.
    if !input.uuid.is_empty() {
        line["uuid"] = Value::String(input.uuid.clone());
    }
    line.to_string()
}

/// The text that ends the user message [`user_message_line`] writes for
/// a message of `text` and `content_blocks`, and where it is: the text
/// itself (`None`), which goes last, or
/// the last content block (`Some(index)`) when there is no text and that
/// block is a text block. `None` when the message ends with something else
/// (an image). This is the text the CLI reads a slash command from (see
/// [`crate::launch::slash`]).
pub fn last_text<'a>(
    text: &'a str,
    content_blocks: &'a [pbjson_types::Struct],
) -> Option<(Option<usize>, &'a str)> {
    if !text.is_empty() || content_blocks.is_empty() {
        return Some((None, text));
    }
    let index = content_blocks.len() - 1;
    let block = &content_blocks[index].fields;
    let is_text = matches!(
        block.get("type").and_then(|v| v.kind.as_ref()),
        Some(pbjson_types::value::Kind::StringValue(t)) if t == "text"
    );
    match block.get("text").and_then(|v| v.kind.as_ref()) {
        Some(pbjson_types::value::Kind::StringValue(t)) if is_text => Some((Some(index), t)),
        _ => None,
    }
}

/// The `control_request{interrupt}` line, with a fresh request id.
pub fn interrupt_line() -> String {
    json!({
        "type": "control_request",
        "request_id": format!("ah-{}", uuid::Uuid::new_v4()),
        "request": {"subtype": "interrupt"},
    })
    .to_string()
}

/// A host `control_request` line: `request` is the request object (with
/// its `subtype`).
pub fn control_request_line(request_id: &str, request: &Value) -> String {
    json!({
        "type": "control_request",
        "request_id": request_id,
        "request": request,
    })
    .to_string()
}

/// The `control_response` line answering a `can_use_tool` request.
pub fn permission_response_line(request_id: &str, decision: &PermissionDecision) -> String {
    let response = match decision {
        PermissionDecision::Allow { updated_input } => json!({
            "behavior": "allow",
            "updatedInput": serde_json::to_value(updated_input).unwrap_or_else(|_| json!({})),
        }),
        PermissionDecision::Deny { message } => json!({"behavior": "deny", "message": message}),
    };
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
    .to_string()
}
