//! Codex thread items as our content blocks and tool results.
//!
//! A tool item is named and shaped the way the claude CLI names the tool
//! that does the same thing, so every client's `classify_tool`, activity
//! label and renderer treat it alike without knowing the agent:
//!
//! | Codex item | tool_use name | input |
//! |---|---|---|
//! | `commandExecution` | `Bash` | `{command, cwd}` |
//! | `fileChange` | `Edit` | `{changes: [{path, kind, diff}]}`, plus `file_path` when it changes one file |
//! | `mcpToolCall` | `mcp__<server>__<tool>` | its `arguments` (an object; anything else as `{arguments}`) |
//! | `webSearch` | `WebSearch` | `{query}` |
//!
//! The completed item becomes the tool's `result`: the command's aggregated
//! output, the file diffs, or the MCP result's text blocks; `is_error` when
//! it failed or was declined. The whole completed item is kept as
//! `tool_use_result` (exit code, duration, structured content).

use agent_harness_protocol::pb;
use serde_json::{Map, Value, json};

use crate::decoder::json::{str_at, value_text};
use crate::nesting::{to_struct, to_value};

/// The tool name Codex's approval requests for extra permissions get (no
/// claude tool does this).
pub(super) const PERMISSIONS_TOOL: &str = "RequestPermissions";

/// A tool call: the item's name and input as a tool_use block shows them.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ToolCall {
    pub name: String,
    pub input: Value,
}

/// The tool call an item stands for; `None` for items that are not tools.
pub(super) fn tool_call(item: &Value) -> Option<ToolCall> {
    let (name, input) = match str_at(item, "type").as_str() {
        "commandExecution" => (
            "Bash".to_owned(),
            json!({"command": str_at(item, "command"), "cwd": str_at(item, "cwd")}),
        ),
        "fileChange" => {
            let changes = item.get("changes").cloned().unwrap_or(json!([]));
            let mut input = Map::new();
            if let Some([one]) = changes.as_array().map(Vec::as_slice) {
                input.insert("file_path".into(), json!(str_at(one, "path")));
            }
            input.insert("changes".into(), changes);
            ("Edit".to_owned(), Value::Object(input))
        }
        "mcpToolCall" => {
            let name = format!("mcp__{}__{}", str_at(item, "server"), str_at(item, "tool"));
            let input = match item.get("arguments") {
                Some(Value::Object(args)) => Value::Object(args.clone()),
                Some(Value::Null) | None => json!({}),
                Some(other) => json!({"arguments": other}),
            };
            (name, input)
        }
        "webSearch" => (
            "WebSearch".to_owned(),
            json!({"query": str_at(item, "query")}),
        ),
        _ => return None,
    };
    Some(ToolCall { name, input })
}

/// The tool_use block of a tool item.
pub(super) fn tool_use_block(id: &str, call: &ToolCall) -> pb::ContentBlock {
    pb::ContentBlock {
        r#type: "tool_use".into(),
        tool_use_id: id.to_owned(),
        tool_name: call.name.clone(),
        input: to_struct(&call.input),
        ..Default::default()
    }
}

/// The result of a completed tool item.
pub(super) fn tool_result(item: &Value) -> pb::Result {
    let status = str_at(item, "status");
    let failed = matches!(status.as_str(), "failed" | "declined");
    let (text, is_error) = match str_at(item, "type").as_str() {
        "commandExecution" => {
            let output = str_at(item, "aggregatedOutput");
            let exit = item.get("exitCode").and_then(Value::as_i64);
            let text = match (status.as_str(), exit) {
                ("declined", _) => "The command was declined.".to_owned(),
                (_, Some(code)) if code != 0 => format!("Exit code {code}\n{output}"),
                _ => output,
            };
            (text, failed || exit.is_some_and(|c| c != 0))
        }
        "fileChange" => {
            let text = if status == "declined" {
                "The file change was declined.".to_owned()
            } else {
                item.get("changes")
                    .and_then(Value::as_array)
                    .map(|changes| {
                        changes
                            .iter()
                            .map(|c| format!("{}\n{}", str_at(c, "path"), str_at(c, "diff")))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            };
            (text, failed)
        }
        "mcpToolCall" => {
            let error = item.get("error").map(|e| str_at(e, "message"));
            let text = match error.filter(|m| !m.is_empty()) {
                Some(message) => message,
                None => item
                    .get("result")
                    .and_then(|r| r.get("content"))
                    .and_then(Value::as_array)
                    .map(|blocks| {
                        blocks
                            .iter()
                            .map(|b| match b.get("text") {
                                Some(t) => value_text(t),
                                None => value_text(b),
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default(),
            };
            (
                text,
                failed || item.get("error").is_some_and(|e| !e.is_null()),
            )
        }
        _ => (String::new(), failed),
    };
    pb::Result {
        tool_results: vec![pb::ToolResult {
            tool_use_id: str_at(item, "id"),
            text,
            is_error,
        }],
        is_error,
        tool_use_result: to_value(item),
        ..Default::default()
    }
}

/// The result that closes a tool the turn ended without completing (Codex
/// never completes the items an interrupt cut off).
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

/// The text of a reasoning item: its summary, or its raw content when the
/// model gave no summary ("" when neither: nothing to show).
pub(super) fn reasoning_text(item: &Value) -> String {
    let parts = |key: &str| -> Vec<String> {
        item.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(value_text).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    };
    let summary = parts("summary");
    if summary.is_empty() {
        parts("content").join("\n\n")
    } else {
        summary.join("\n\n")
    }
}
