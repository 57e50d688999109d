//! ACP tool calls as our content blocks and tool results.
//!
//! A tool call is named after its ACP `kind` the way the claude CLI names
//! the tool that does the same thing, so every client's `classify_tool`,
//! activity label and renderer treat it alike without knowing the agent:
//!
//! | ACP kind | tool_use name |
//! |---|---|
//! | `execute` | `Bash` (input gets `command` = the title when the agent gave none) |
//! | `read` | `Read` |
//! | `edit`, `delete`, `move` | `Edit` |
//! | `search` | `Grep` |
//! | `fetch` | `WebFetch` |
//! | `think` | `Think` |
//! | `switch_mode` | `SwitchMode` |
//! | `other`, none | the title (`Tool` when there is none) |
//!
//! The input is the call's `rawInput` when it is an object, else
//! `{title, kind, locations}`; a `read` or `edit` of one location also gets
//! its `file_path`. A completed or failed call becomes a `result`: the text
//! of its content (text blocks, diffs as path and new text), else its
//! `rawOutput`; the update itself is kept as `tool_use_result` (status,
//! locations, raw output). A plan is a `TodoWrite` whose `todos` are the
//! plan's entries.

use agent_harness_protocol::pb;
use serde_json::{Map, Value, json};

use crate::decoder::json::{str_at, value_text};
use crate::nesting::{to_struct, to_value};

/// A tool call as a tool_use shows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ToolCall {
    pub(super) name: String,
    pub(super) input: Value,
}

/// The tool call an ACP `tool_call` (or a permission request's `toolCall`,
/// or a `tool_call_update` seen first) stands for.
pub(super) fn tool_call(call: &Value) -> ToolCall {
    let kind = str_at(call, "kind");
    let title = str_at(call, "title");
    let name = match kind.as_str() {
        "execute" => "Bash",
        "read" => "Read",
        "edit" | "delete" | "move" => "Edit",
        "search" => "Grep",
        "fetch" => "WebFetch",
        "think" => "Think",
        "switch_mode" => "SwitchMode",
        _ if !title.is_empty() => title.as_str(),
        _ => "Tool",
    }
    .to_owned();
    let locations = call.get("locations").cloned().unwrap_or(json!([]));
    let mut input = match call.get("rawInput") {
        Some(Value::Object(raw)) if !raw.is_empty() => raw.clone(),
        _ => {
            let mut m = Map::new();
            m.insert("title".into(), json!(title));
            m.insert("kind".into(), json!(kind));
            m.insert("locations".into(), locations.clone());
            m
        }
    };
    match kind.as_str() {
        "execute" if !input.contains_key("command") && !title.is_empty() => {
            input.insert("command".into(), json!(title));
        }
        "read" | "edit" | "delete" | "move" if !input.contains_key("file_path") => {
            if let Some([one]) = locations.as_array().map(Vec::as_slice) {
                input.insert("file_path".into(), json!(str_at(one, "path")));
            }
        }
        _ => {}
    }
    ToolCall {
        name,
        input: Value::Object(input),
    }
}

/// The tool_use block of a tool call.
pub(super) fn tool_use_block(id: &str, call: &ToolCall) -> pb::ContentBlock {
    pb::ContentBlock {
        r#type: "tool_use".into(),
        tool_use_id: id.to_owned(),
        tool_name: call.name.clone(),
        input: to_struct(&call.input),
        ..Default::default()
    }
}

/// Whether a tool call's status says it is over.
pub(super) fn finished(call: &Value) -> bool {
    matches!(str_at(call, "status").as_str(), "completed" | "failed")
}

/// The result of a completed or failed tool call.
pub(super) fn tool_result(update: &Value) -> pb::Result {
    let is_error = str_at(update, "status") == "failed";
    let mut text = update
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .map(content_text)
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    if text.is_empty() {
        text = update.get("rawOutput").map(value_text).unwrap_or_default();
    }
    pb::Result {
        tool_results: vec![pb::ToolResult {
            tool_use_id: str_at(update, "toolCallId"),
            text,
            is_error,
        }],
        is_error,
        tool_use_result: to_value(update),
        ..Default::default()
    }
}

/// The text of one item of a tool call's `content`.
fn content_text(item: &Value) -> String {
    match str_at(item, "type").as_str() {
        "content" => {
            let block = item.get("content").unwrap_or(&Value::Null);
            match str_at(block, "type").as_str() {
                "text" => str_at(block, "text"),
                "resource_link" => str_at(block, "uri"),
                _ => String::new(),
            }
        }
        "diff" => format!("{}\n{}", str_at(item, "path"), str_at(item, "newText")),
        "terminal" => format!("[terminal {}]", str_at(item, "terminalId")),
        _ => String::new(),
    }
}

/// The result that closes tools the turn ended without completing.
pub(super) fn unfinished(ids: &[String], why: &str) -> pb::Result {
    pb::Result {
        tool_results: ids
            .iter()
            .map(|id| pb::ToolResult {
                tool_use_id: id.clone(),
                text: why.to_owned(),
                is_error: true,
            })
            .collect(),
        is_error: true,
        ..Default::default()
    }
}

/// A plan's entries as the `TodoWrite` tool's input.
pub(super) fn plan(update: &Value) -> ToolCall {
    let todos: Vec<Value> = update
        .get("entries")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let content = str_at(e, "content");
                    json!({
                        "content": content,
                        "activeForm": content,
                        "status": str_at(e, "status"),
                        "priority": str_at(e, "priority"),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    ToolCall {
        name: "TodoWrite".into(),
        input: json!({ "todos": todos }),
    }
}

/// The result a plan's tool_use gets at once (a plan is shown, not run).
pub(super) fn plan_result(id: &str) -> pb::Result {
    pb::Result {
        tool_results: vec![pb::ToolResult {
            tool_use_id: id.to_owned(),
            text: "Plan updated".into(),
            is_error: false,
        }],
        ..Default::default()
    }
}
