//! The Responses API wire format: server-sent events for `stream: true` (`event: <type>` and
//! `data: <json>`, as [`crate::sse`] frames them), the whole response object otherwise.
//!
//! A streamed reply is `response.created`, then per output item `response.output_item.added`,
//! its deltas (`response.output_text.delta`, `response.reasoning_summary_text.delta` or
//! `response.function_call_arguments.delta`) and `response.output_item.done` with the whole
//! item, then `response.completed` with every item and the usage. Script blocks become items:
//! text an assistant `message`, thinking a `reasoning` item with a summary, a tool call a
//! `function_call` (the script's `Bash {command}` as Codex's shell tool
//! [`SHELL_TOOL`]` {cmd}`, asking for escalation when the script leaves the sandbox; other
//! tools keep their name and input).

use super::SHELL_TOOL;
use crate::ids;
use crate::script::{Block, ScriptedMessage};
use crate::sse::{EventTx, event, pause};
use crate::usage::Usage;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One output item of a reply: its finished JSON and the deltas that stream it.
struct Item {
    done: Value,
    deltas: Vec<Value>,
}

/// The output items of `msg`, ids assigned.
fn items(msg: &ScriptedMessage) -> Vec<Item> {
    msg.blocks
        .iter()
        .map(|b| match b {
            Block::Text { chunks } => {
                let id = ids::prefixed("msg_");
                Item {
                    done: json!({"id": id, "type": "message", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": chunks.concat(), "annotations": []}]}),
                    deltas: chunks
                        .iter()
                        .map(|c| json!({"type": "response.output_text.delta", "item_id": id, "content_index": 0, "delta": c}))
                        .collect(),
                }
            }
            Block::Thinking { thinking, .. } => {
                let id = ids::prefixed("rs_");
                Item {
                    done: json!({"id": id, "type": "reasoning",
                                 "summary": [{"type": "summary_text", "text": thinking}]}),
                    deltas: vec![json!({"type": "response.reasoning_summary_text.delta",
                                        "item_id": id, "summary_index": 0, "delta": thinking})],
                }
            }
            Block::ToolUse { name, input } => {
                let (name, arguments) = function_call(name, input);
                let id = ids::prefixed("fc_");
                let mut mid = arguments.len() / 2;
                while !arguments.is_char_boundary(mid) {
                    mid -= 1;
                }
                Item {
                    deltas: [&arguments[..mid], &arguments[mid..]]
                        .iter()
                        .map(|d| json!({"type": "response.function_call_arguments.delta", "item_id": id, "delta": d}))
                        .collect(),
                    done: json!({"id": id, "type": "function_call", "status": "completed", "name": name,
                                 "call_id": ids::prefixed("call_"), "arguments": arguments}),
                }
            }
        })
        .collect()
}

/// A script tool call as a function call: name and JSON-encoded arguments.
fn function_call(name: &str, input: &Value) -> (String, String) {
    if name == "Bash" {
        let cmd = input.get("command").cloned().unwrap_or(Value::Null);
        let mut args = json!({ "cmd": cmd });
        // The model asking to leave the sandbox: Codex's own words for it, which make Codex
        // ask the user under an `on-request` approval policy.
        if input["dangerouslyDisableSandbox"] == true {
            args["sandbox_permissions"] = json!("require_escalated");
            args["justification"] = input.get("description").cloned().unwrap_or(Value::Null);
        }
        return (SHELL_TOOL.to_owned(), args.to_string());
    }
    (name.to_owned(), input.to_string())
}

/// The item as `response.output_item.added` announces it: no content yet.
fn started(done: &Value) -> Value {
    let mut item = done.clone();
    match item.get("type").and_then(Value::as_str) {
        Some("message") => item["content"] = json!([]),
        Some("reasoning") => item["summary"] = json!([]),
        Some("function_call") => item["arguments"] = json!(""),
        _ => {}
    }
    if item.get("status").is_some() {
        item["status"] = json!("in_progress");
    }
    item
}

/// The response object: `status`, the finished `output` items and the usage.
fn response(
    id: &str,
    model: &str,
    status: &str,
    output: Vec<Value>,
    usage: Option<Usage>,
) -> Value {
    json!({
        "id": id,
        "object": "response",
        "created_at": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage.map(Usage::responses_json),
    })
}

fn finish_usage(msg: &ScriptedMessage, mut usage: Usage) -> Usage {
    usage.output_tokens = (msg.output_chars() as u64 / 4).max(1);
    usage
}

/// The whole reply as one response object, for `stream: false`.
pub fn response_json(msg: &ScriptedMessage, model: &str, usage: Usage) -> Value {
    let output = items(msg).into_iter().map(|i| i.done).collect();
    response(
        &ids::prefixed("resp_"),
        model,
        "completed",
        output,
        Some(finish_usage(msg, usage)),
    )
}

/// Numbers the events of one stream, as the real API does (`sequence_number`).
struct Sender<'a> {
    tx: &'a EventTx,
    seq: u64,
}

impl Sender<'_> {
    async fn send(&mut self, mut v: Value) -> bool {
        v["sequence_number"] = json!(self.seq);
        self.seq += 1;
        self.tx.send(Ok(event(&v))).await.is_ok()
    }
}

/// Streams `msg` event by event, pausing between text chunks (`SLOW`). Returns `false` when
/// the client disconnected (or the server shut down) before `response.completed`.
pub async fn stream_response(
    tx: EventTx,
    msg: ScriptedMessage,
    model: String,
    usage: Usage,
    shutdown: CancellationToken,
) -> bool {
    let id = ids::prefixed("resp_");
    let mut out = Sender { tx: &tx, seq: 0 };
    let created = response(&id, &model, "in_progress", Vec::new(), None);
    if !out
        .send(json!({"type": "response.created", "response": created}))
        .await
    {
        return false;
    }
    let items = items(&msg);
    for (index, item) in items.iter().enumerate() {
        let added = json!({"type": "response.output_item.added", "output_index": index, "item": started(&item.done)});
        if !out.send(added).await {
            return false;
        }
        let paced = item.done["type"] == "message" && !msg.chunk_delay.is_zero();
        for (i, delta) in item.deltas.iter().enumerate() {
            if paced && i > 0 && !pause(msg.chunk_delay, &tx, &shutdown).await {
                return false;
            }
            let mut delta = delta.clone();
            delta["output_index"] = json!(index);
            if !out.send(delta).await {
                return false;
            }
        }
        let done =
            json!({"type": "response.output_item.done", "output_index": index, "item": item.done});
        if !out.send(done).await {
            return false;
        }
    }
    let output = items.into_iter().map(|i| i.done).collect();
    let completed = response(
        &id,
        &model,
        "completed",
        output,
        Some(finish_usage(&msg, usage)),
    );
    out.send(json!({"type": "response.completed", "response": completed}))
        .await
}

/// Sends `response.created` and then nothing until the client disconnects or the server
/// stops (`HANG`).
pub async fn hang(tx: EventTx, model: String, shutdown: CancellationToken) {
    let created = response(
        &ids::prefixed("resp_"),
        &model,
        "in_progress",
        Vec::new(),
        None,
    );
    let mut out = Sender { tx: &tx, seq: 0 };
    if !out
        .send(json!({"type": "response.created", "response": created}))
        .await
    {
        return;
    }
    crate::sse::hold_open(&tx, &shutdown).await;
}

/// The API's error body for an HTTP status.
pub fn error_json(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        400 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        429 => ("requests", json!("rate_limit_exceeded")),
        _ => ("server_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_is_the_codex_shell_tool() {
        let (name, args) =
            function_call("Bash", &json!({"command": "echo hi", "description": "d"}));
        assert_eq!(
            (name.as_str(), args.as_str()),
            ("exec_command", r#"{"cmd":"echo hi"}"#)
        );
    }

    #[test]
    fn bash_outside_the_sandbox_asks_for_escalation() {
        let (_, args) = function_call(
            "Bash",
            &json!({"command": "echo hi", "description": "d", "dangerouslyDisableSandbox": true}),
        );
        let args: Value = serde_json::from_str(&args).unwrap();
        assert_eq!(
            args,
            json!({"cmd": "echo hi", "sandbox_permissions": "require_escalated", "justification": "d"})
        );
    }
}
