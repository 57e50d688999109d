//! The Gemini API wire format: server-sent events for `:streamGenerateContent?alt=sse`
//! (`data: <GenerateContentResponse>` per event, no `event:` line), the whole response
//! object for `:generateContent`.
//!
//! Each event holds one candidate whose `content` carries the parts of that moment: a text
//! chunk, a thought (`thought: true`, only when the request asked for thoughts) or a
//! `functionCall`. The last event adds `finishReason: STOP` and the full `usageMetadata`;
//! Gemini CLI treats a stream that ends without a finish reason as broken and retries it.
//! The script's `Bash {command}` goes out as the shell tool the request declares (see
//! [`ShellTool`]); other tools keep their name and input.

use crate::ids;
use crate::script::{Block, ScriptedMessage};
use crate::sse::{EventTx, pause};
use crate::usage::Usage;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// The bold subject a thought part opens with.
pub const THOUGHT_SUBJECT: &str = "Thinking it over";

/// Gemini CLI's shell tool as one request declares it: the name and which of the script's
/// arguments (`command`, `description`) its parameters take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellTool {
    /// The declared function name (`run_shell_command`).
    pub name: String,
    /// Whether the declaration takes a `description`.
    pub description: bool,
}

impl ShellTool {
    /// The shell tool of a request's `tools[].functionDeclarations`: the one named
    /// [`SHELL_TOOL`](super::SHELL_TOOL), else the first that takes a `command`; the default
    /// name when the request declares none.
    pub fn of_request(body: &Value) -> ShellTool {
        let decls: Vec<&Value> = body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
            .flatten()
            .collect();
        let props = |d: &Value| -> Option<Map<String, Value>> {
            d.get("parametersJsonSchema")
                .or_else(|| d.get("parameters"))
                .and_then(|p| p.get("properties"))
                .and_then(Value::as_object)
                .cloned()
        };
        let named = |d: &&&Value| d.get("name").and_then(Value::as_str) == Some(super::SHELL_TOOL);
        let found = decls.iter().find(named).or_else(|| {
            decls
                .iter()
                .find(|d| props(d).is_some_and(|p| p.contains_key("command")))
        });
        match found {
            Some(d) => ShellTool {
                name: d["name"].as_str().unwrap_or(super::SHELL_TOOL).to_owned(),
                description: props(d).is_some_and(|p| p.contains_key("description")),
            },
            None => ShellTool {
                name: super::SHELL_TOOL.to_owned(),
                description: true,
            },
        }
    }

    /// A script tool call as a Gemini `functionCall`: `Bash` becomes this shell tool.
    fn call(&self, name: &str, input: &Value) -> Value {
        if name != "Bash" {
            return json!({"name": name, "args": input});
        }
        let mut args = json!({"command": input.get("command").cloned().unwrap_or(Value::Null)});
        if self.description
            && let Some(d) = input.get("description")
        {
            args["description"] = d.clone();
        }
        json!({"name": self.name, "args": args})
    }
}

/// How one request wants its reply written.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The request's model (the path's `<model>`), echoed as `modelVersion`.
    pub model: String,
    /// Thought parts are sent only when the request asked for them.
    pub thoughts: bool,
    /// The request's shell tool.
    pub shell: ShellTool,
}

/// The parts of `msg`, one list per event: a text block's chunks each, a thought, each
/// function call.
fn events(msg: &ScriptedMessage, shape: &Shape) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for b in &msg.blocks {
        match b {
            Block::Text { chunks } => out.extend(chunks.iter().map(|c| vec![json!({"text": c})])),
            // Real thoughts open with a bold subject, which Gemini CLI shows apart.
            Block::Thinking { thinking, .. } if shape.thoughts => {
                let text = format!("**{THOUGHT_SUBJECT}**\n\n{thinking}");
                out.push(vec![json!({"text": text, "thought": true})]);
            }
            Block::Thinking { .. } => {}
            Block::ToolUse { name, input } => {
                out.push(vec![json!({"functionCall": shape.shell.call(name, input)})]);
            }
        }
    }
    out
}

fn usage_metadata(msg: &ScriptedMessage, usage: Usage, shape: &Shape) -> Value {
    let thoughts: usize = msg
        .blocks
        .iter()
        .map(|b| match b {
            Block::Thinking { thinking, .. } if shape.thoughts => thinking.len(),
            _ => 0,
        })
        .sum();
    let candidates = ((msg.output_chars() - thoughts) as u64 / 4).max(1);
    let thoughts = thoughts as u64 / 4;
    let prompt = usage.total_input();
    let mut v = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
        "cachedContentTokenCount": usage.cache_read_input_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    });
    if thoughts > 0 {
        v["thoughtsTokenCount"] = json!(thoughts);
    }
    v
}

/// One `GenerateContentResponse`.
fn response(
    parts: Vec<Value>,
    finish: bool,
    usage: Option<Value>,
    shape: &Shape,
    id: &str,
) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if finish {
        candidate["finishReason"] = json!("STOP");
    }
    let mut v = json!({"candidates": [candidate], "modelVersion": shape.model, "responseId": id});
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

/// The whole reply as one response object, for `:generateContent`.
pub fn response_json(msg: &ScriptedMessage, usage: Usage, shape: &Shape) -> Value {
    let parts = events(msg, shape).into_iter().flatten().collect();
    let meta = usage_metadata(msg, usage, shape);
    response(parts, true, Some(meta), shape, &ids::prefixed("resp_"))
}

/// One SSE event as the real API frames it.
fn event(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

/// Streams `msg` event by event, pausing between text chunks (`SLOW`). Returns `false` when
/// the client disconnected (or the server shut down) before the last event.
pub async fn stream_response(
    tx: EventTx,
    msg: ScriptedMessage,
    usage: Usage,
    shape: Shape,
    shutdown: CancellationToken,
) -> bool {
    let id = ids::prefixed("resp_");
    let mut events = events(&msg, &shape);
    if events.is_empty() {
        events.push(vec![json!({"text": ""})]);
    }
    let last = events.len() - 1;
    let mut previous_was_text = false;
    for (i, parts) in events.into_iter().enumerate() {
        let is_text = parts[0].get("text").is_some() && parts[0].get("thought").is_none();
        if is_text && previous_was_text && !pause(msg.chunk_delay, &tx, &shutdown).await {
            return false;
        }
        previous_was_text = is_text;
        let meta = (i == last).then(|| usage_metadata(&msg, usage, &shape));
        if tx
            .send(Ok(event(&response(parts, i == last, meta, &shape, &id))))
            .await
            .is_err()
        {
            return false;
        }
    }
    true
}

/// The API's error body for an HTTP status (`google.rpc.Status`).
pub fn error_json(status: u16, message: &str) -> Value {
    let code = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    };
    json!({"error": {"code": status, "message": message, "status": code}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(body: &Value) -> Shape {
        Shape {
            model: "gemini-fake".into(),
            thoughts: false,
            shell: ShellTool::of_request(body),
        }
    }

    #[test]
    fn bash_is_the_declared_shell_tool() {
        let body = json!({"tools": [{"functionDeclarations": [
            {"name": "read_file", "parametersJsonSchema": {"properties": {"path": {}}}},
            {"name": "run_shell_command", "parametersJsonSchema": {"properties": {"command": {}, "description": {}, "dir_path": {}}}},
        ]}]});
        let s = shape(&body);
        let call = s
            .shell
            .call("Bash", &json!({"command": "echo hi", "description": "d"}));
        assert_eq!(
            call,
            json!({"name": "run_shell_command", "args": {"command": "echo hi", "description": "d"}})
        );
        let other = json!({"tools": [{"functionDeclarations": [
            {"name": "shell", "parameters": {"properties": {"command": {}}}},
        ]}]});
        let call = ShellTool::of_request(&other)
            .call("Bash", &json!({"command": "x", "description": "d"}));
        assert_eq!(call, json!({"name": "shell", "args": {"command": "x"}}));
    }

    #[test]
    fn thoughts_only_when_asked_and_the_last_event_finishes() {
        let msg = ScriptedMessage {
            blocks: vec![
                Block::Thinking {
                    thinking: "hmm, let me see".into(),
                    signature: "s".into(),
                },
                Block::Text {
                    chunks: vec!["a".into(), "b".into()],
                },
            ],
            chunk_delay: std::time::Duration::ZERO,
        };
        let mut s = shape(&json!({}));
        assert_eq!(events(&msg, &s).len(), 2);
        s.thoughts = true;
        let all = events(&msg, &s);
        assert_eq!(
            all[0][0],
            json!({"text": "**Thinking it over**\n\nhmm, let me see", "thought": true})
        );
        let usage = Usage::estimate(&[], &[], |_| false);
        let whole = response_json(&msg, usage, &s);
        assert_eq!(whole["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            whole["candidates"][0]["content"]["parts"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        assert!(whole["usageMetadata"]["thoughtsTokenCount"].is_number());
    }
}
