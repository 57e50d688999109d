//! Turns: `turn/started` (a `turn_start` only for a turn nobody sent),
//! `turn/completed` (what the turn left open closed, then its `turn_end`)
//! and the token usage of the turn's model calls.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::{CodexDecoder, items};
use crate::decoder::json::{as_u64, str_at, u64_at};

/// The turn under way.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// Codex's turn id.
    pub(super) id: String,
    /// Tokens of the turn's model calls so far.
    usage: pb::Usage,
    /// How many calls Codex reported tokens for.
    calls: u32,
    /// The model's context window, as Codex last reported it.
    context_window: u64,
    /// The last agent message's text (the turn's `result`).
    pub(super) last_text: String,
    /// The message of an `error` notification Codex will not retry.
    pub(super) error: String,
}

impl CodexDecoder {
    pub(super) fn turn_started(&mut self, params: &Value) -> Vec<Payload> {
        let id = params
            .get("turn")
            .map(|t| str_at(t, "id"))
            .unwrap_or_default();
        let self_started = self.inputs_waiting == 0 && self.turn.is_none();
        self.inputs_waiting = self.inputs_waiting.saturating_sub(1);
        self.turn = Some(Turn {
            id,
            ..Turn::default()
        });
        if self_started {
            // Codex says nothing of why it began a turn.
            vec![Payload::TurnStart(pb::TurnStart::default())]
        } else {
            Vec::new()
        }
    }

    pub(super) fn turn_completed(&mut self, params: &Value) -> Vec<Payload> {
        let turn_json = params.get("turn").cloned().unwrap_or(Value::Null);
        let status = str_at(&turn_json, "status");
        let turn = self.turn.take().unwrap_or_default();
        let mut out = Vec::new();
        // Codex completes none of the items an interrupt cut off: the
        // message being written keeps its text so far, each open tool gets
        // a result, so the log holds no tool_use waiting for ever.
        if let Some(message) = self.open_message.take()
            && !message.text.is_empty()
        {
            out.push(Payload::Content(
                self.text_content(&message.id, message.text),
            ));
        }
        self.open_reasoning = None;
        self.partial.clear();
        if !self.open_tools.is_empty() {
            let ids: Vec<String> = self.open_tools.drain(..).map(|t| t.id).collect();
            let why = if status == "interrupted" {
                "interrupted"
            } else {
                "the turn ended before the tool completed"
            };
            out.push(Payload::Result(items::unfinished(&ids, why)));
        }
        let error = turn_json
            .get("error")
            .map(|e| str_at(e, "message"))
            .filter(|m| !m.is_empty())
            .unwrap_or(turn.error);
        let (subtype, is_error) = match status.as_str() {
            "completed" => ("success", false),
            "interrupted" => ("interrupted", true),
            _ => ("error", true),
        };
        let model = self
            .ready
            .as_ref()
            .map(|r| r.model.clone())
            .unwrap_or_default();
        // A turn that made no model call (cut off before its first answer,
        // or failed) reports no usage rather than zeros.
        let model_usage = (turn.calls > 0)
            .then(|| pb::ModelUsage {
                model,
                input_tokens: turn.usage.input_tokens,
                output_tokens: turn.usage.output_tokens,
                cache_read_input_tokens: turn.usage.cache_read_input_tokens,
                cache_creation_input_tokens: turn.usage.cache_creation_input_tokens,
                context_window: turn.context_window,
                ..Default::default()
            })
            .into_iter()
            .collect();
        out.push(Payload::TurnEnd(pb::TurnEnd {
            usage: (turn.calls > 0).then_some(turn.usage),
            duration_ms: u64_at(&turn_json, "durationMs"),
            is_error,
            terminal_reason: status.clone(),
            subtype: subtype.into(),
            result: if is_error {
                String::new()
            } else {
                turn.last_text
            },
            model_usage,
            errors: if error.is_empty() {
                Vec::new()
            } else {
                vec![error]
            },
            ..Default::default()
        }));
        out
    }

    /// Adds one model call's tokens to the turn. `last` is that call;
    /// `total` is the thread's, which a resumed thread carries over from
    /// earlier processes, so the turn's share is the sum of its calls.
    pub(super) fn token_usage(&mut self, params: &Value) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let turn_id = str_at(params, "turnId");
        if !turn_id.is_empty() && !turn.id.is_empty() && turn_id != turn.id {
            return;
        }
        let usage = params.get("tokenUsage").cloned().unwrap_or(Value::Null);
        let last = usage.get("last").cloned().unwrap_or(Value::Null);
        // Codex counts cached input inside its input tokens; ours are apart.
        let cached = u64_at(&last, "cachedInputTokens");
        let written = u64_at(&last, "cacheWriteInputTokens");
        turn.calls += 1;
        let u = &mut turn.usage;
        u.input_tokens += u64_at(&last, "inputTokens").saturating_sub(cached + written);
        u.cache_read_input_tokens += cached;
        u.cache_creation_input_tokens += written;
        u.output_tokens += u64_at(&last, "outputTokens");
        if let Some(window) = usage
            .get("modelContextWindow")
            .map(as_u64)
            .filter(|w| *w > 0)
        {
            turn.context_window = window;
        }
    }
}
