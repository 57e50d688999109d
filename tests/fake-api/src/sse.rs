//! The Messages API wire format: server-sent events for `stream: true`, one JSON message
//! otherwise. Framing follows the real API: `event: <type>` and `data: <json>` lines, a blank
//! line after each event, a `ping` after the first `content_block_start`.

use crate::ids;
use crate::script::{Block, ScriptedMessage};
use crate::usage::Usage;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One SSE event as it goes on the wire.
pub fn event(data: &Value) -> String {
    let kind = data
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    format!("event: {kind}\ndata: {data}\n\n")
}

/// Where streamed events go; a failed send means the client went away.
pub type EventTx = mpsc::Sender<Result<String, Infallible>>;

/// The `message_start` event.
pub fn message_start(id: &str, model: &str, usage: Usage) -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage.to_json(),
        }
    })
}

/// Streams `msg` event by event, pausing between text chunks. Returns `false` when the client
/// disconnected (or the server shut down) before `message_stop`.
pub async fn stream_message(
    tx: EventTx,
    msg: ScriptedMessage,
    model: String,
    mut usage: Usage,
    shutdown: CancellationToken,
) -> bool {
    let send = |v: Value| {
        let tx = tx.clone();
        async move { tx.send(Ok(event(&v))).await.is_ok() }
    };
    if !send(message_start(&ids::message_id(), &model, usage)).await {
        return false;
    }
    for (index, block) in msg.blocks.iter().enumerate() {
        let start = match block {
            Block::Text { .. } => json!({"type": "text", "text": ""}),
            Block::Thinking { .. } => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Block::ToolUse { name, .. } => {
                json!({"type": "tool_use", "id": ids::tool_use_id(), "name": name, "input": {}})
            }
        };
        if !send(json!({"type": "content_block_start", "index": index, "content_block": start}))
            .await
        {
            return false;
        }
        if index == 0 && !send(json!({"type": "ping"})).await {
            return false;
        }
        let deltas: Vec<Value> = match block {
            Block::Text { chunks } => chunks
                .iter()
                .map(|c| json!({"type": "text_delta", "text": c}))
                .collect(),
            Block::Thinking {
                thinking,
                signature,
            } => vec![
                json!({"type": "thinking_delta", "thinking": thinking}),
                json!({"type": "signature_delta", "signature": signature}),
            ],
            Block::ToolUse { input, .. } => {
                let s = input.to_string();
                let mut mid = s.len() / 2;
                while !s.is_char_boundary(mid) {
                    mid -= 1;
                }
                [&s[..0], &s[..mid], &s[mid..]]
                    .iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect()
            }
        };
        let paced = matches!(block, Block::Text { .. }) && !msg.chunk_delay.is_zero();
        for (i, delta) in deltas.into_iter().enumerate() {
            if paced && i > 0 && !pause(msg.chunk_delay, &tx, &shutdown).await {
                return false;
            }
            if !send(json!({"type": "content_block_delta", "index": index, "delta": delta})).await {
                return false;
            }
        }
        if !send(json!({"type": "content_block_stop", "index": index})).await {
            return false;
        }
    }
    usage.output_tokens = (msg.output_chars() as u64 / 4).max(1);
    send(json!({
        "type": "message_delta",
        "delta": {"stop_reason": msg.stop_reason(), "stop_sequence": null},
        "usage": usage.delta_json(),
    }))
    .await
        && send(json!({"type": "message_stop"})).await
}

/// Sends `message_start` and then nothing until the client disconnects or the server stops.
pub async fn hang(tx: EventTx, model: String, usage: Usage, shutdown: CancellationToken) {
    if tx
        .send(Ok(event(&message_start(&ids::message_id(), &model, usage))))
        .await
        .is_err()
    {
        return;
    }
    hold_open(&tx, &shutdown).await;
}

/// Returns once the client disconnects or the server stops: a `HANG` reply's silence after
/// whatever opening event its API sends (the Gemini API sends none).
pub async fn hold_open(tx: &EventTx, shutdown: &CancellationToken) {
    tokio::select! {
        _ = tx.closed() => {}
        _ = shutdown.cancelled() => {}
    }
}

/// Waits `d`, or returns `false` early when the client or the server goes away.
pub(crate) async fn pause(d: Duration, tx: &EventTx, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = tx.closed() => false,
        _ = shutdown.cancelled() => false,
    }
}

/// The whole message as one JSON object, for `stream: false`.
pub fn message_json(msg: &ScriptedMessage, model: &str, mut usage: Usage) -> Value {
    let content: Vec<Value> = msg
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text { chunks } => json!({"type": "text", "text": chunks.concat()}),
            Block::Thinking {
                thinking,
                signature,
            } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
            Block::ToolUse { name, input } => {
                json!({"type": "tool_use", "id": ids::tool_use_id(), "name": name, "input": input})
            }
        })
        .collect();
    usage.output_tokens = (msg.output_chars() as u64 / 4).max(1);
    json!({
        "id": ids::message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": msg.stop_reason(),
        "stop_sequence": null,
        "usage": usage.to_json(),
    })
}

/// The API's error body for an HTTP status.
pub fn error_json(status: u16, message: &str, request_id: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": request_id,
    })
}
