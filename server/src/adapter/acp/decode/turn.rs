//! Turns: one per `session/prompt`, from our copy of the prompt to its
//! answer (`stopReason`), which closes what the turn left open and becomes
//! its `turn_end` with the usage the agent reported.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::resolved_by;
use serde_json::Value;

use super::{AcpDecoder, FIRST_LATER_ID, tools};
use crate::decoder::json::{f64_at, str_at, u64_at};

/// The prompt under way.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// The `session/prompt` request's id, when the process side's copy
    /// named it.
    pub(super) prompt_id: Option<u64>,
    /// The last text block's text (the turn's `result`).
    pub(super) last_text: String,
    /// A Stop cancelled it (our `session/cancel` was copied).
    pub(super) cancel_sent: bool,
    /// The agent asked for a permission in it.
    pub(super) asked: bool,
    /// The context window and cost of the last `usage_update`.
    pub(super) context_window: u64,
    pub(super) cost_usd: Option<f64>,
}

impl AcpDecoder {
    /// Our copy of a `session/prompt` request: its turn begins (or has
    /// begun, at an update after the input was sent) and the replay of a
    /// loaded session is over.
    pub(super) fn prompt_sent(&mut self, id: &Value) {
        self.copies = true;
        self.replaying = false;
        match self.turn.as_mut() {
            Some(turn) if turn.prompt_id.is_none() => turn.prompt_id = id.as_u64(),
            // Sent as the running prompt's answer came in, the copy ahead
            // of that answer: it is the next turn's.
            Some(_) => self.next_prompt_id = id.as_u64(),
            None => self.begin(id.as_u64()),
        }
    }

    fn begin(&mut self, prompt_id: Option<u64>) {
        let prompt_id = prompt_id.or(self.next_prompt_id.take());
        self.inputs_waiting = self.inputs_waiting.saturating_sub(1);
        self.turn = Some(Turn {
            prompt_id,
            ..Turn::default()
        });
    }

    /// Whether updates now are part of a turn: one is open, or an input
    /// was sent since the last ended (its prompt went out at once, or
    /// right at the last answer when it was queued), so this update is
    /// its first.
    pub(super) fn in_turn(&mut self) -> bool {
        if self.turn.is_none() && !self.replaying && self.inputs_waiting > 0 {
            self.begin(None);
        }
        self.turn.is_some()
    }

    /// Whether an error answer to request `id` is the running prompt's.
    /// Exact when the process side copies its prompts; without copies, an
    /// error while a prompt is running or about to is taken for its own
    /// (a refused setting then ends the turn early).
    pub(super) fn is_prompt(&self, id: u64) -> bool {
        if id < FIRST_LATER_ID {
            return false;
        }
        match &self.turn {
            Some(turn) if turn.prompt_id.is_some() => turn.prompt_id == Some(id),
            Some(_) => !self.copies,
            None => !self.copies && self.inputs_waiting > 0,
        }
    }

    /// Our copy of a `session/cancel`: the running turn was stopped.
    pub(super) fn cancel_sent(&mut self) {
        if let Some(turn) = self.turn.as_mut() {
            turn.cancel_sent = true;
        }
    }

    /// A `usage_update`: the context the session fills and what it cost.
    pub(super) fn usage_update(&mut self, update: &Value) {
        if !self.in_turn() {
            return;
        }
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let size = u64_at(update, "size");
        if size > 0 {
            turn.context_window = size;
        }
        if let Some(cost) = update.get("cost")
            && str_at(cost, "currency").eq_ignore_ascii_case("USD")
        {
            turn.cost_usd = Some(f64_at(cost, "amount"));
        }
    }

    /// The prompt's answer: the turn ends with its stop reason.
    pub(super) fn prompt_answered(&mut self, id: Option<u64>, result: &Value) -> Vec<Payload> {
        tracing::debug!(?id, "prompt answered");
        // Without copies, the answer is the first sure sign that a prompt
        // ran after a load's replay.
        self.replaying = false;
        if self.turn.is_none() {
            self.begin(None);
        }
        self.first_after_load = false;
        let reason = str_at(result, "stopReason");
        // A turn the agent cancelled by itself, nobody having stopped it,
        // after asking for a permission: the user refused a tool and the
        // agent gave up the turn (codex-acp's only reject option is
        // Codex's "cancel"). Nothing was interrupted. Without copies a
        // Stop cannot be told from it: interrupted, as before.
        let refused = reason == "cancelled"
            && self.copies
            && self
                .turn
                .as_ref()
                .is_some_and(|t| t.asked && !t.cancel_sent);
        let mut out = self.close_turn(reason == "cancelled" && !refused);
        let turn = self.turn.take().unwrap_or_default();
        let (subtype, is_error) = match reason.as_str() {
            "end_turn" => ("success".to_owned(), false),
            "cancelled" if refused => ("success".to_owned(), false),
            "cancelled" => ("interrupted".to_owned(), true),
            "" => ("error".to_owned(), true),
            other => (other.to_owned(), true),
        };
        let (usage, model_usage) = self.usage(result, &turn);
        out.push(Payload::TurnEnd(pb::TurnEnd {
            usage,
            cost_usd: turn.cost_usd.unwrap_or(0.0),
            is_error,
            terminal_reason: reason,
            subtype,
            result: if is_error {
                String::new()
            } else {
                turn.last_text
            },
            model_usage,
            ..Default::default()
        }));
        out
    }

    /// The prompt failed (an error answer): an error turn with the
    /// agent's message.
    pub(super) fn prompt_failed(&mut self, message: String) -> Vec<Payload> {
        self.replaying = false;
        self.first_after_load = false;
        if self.turn.is_none() {
            self.begin(None);
        }
        let mut out = self.close_turn(false);
        let turn = self.turn.take().unwrap_or_default();
        out.push(Payload::TurnEnd(pb::TurnEnd {
            cost_usd: turn.cost_usd.unwrap_or(0.0),
            is_error: true,
            terminal_reason: "error".into(),
            subtype: "error".into(),
            errors: vec![message],
            ..Default::default()
        }));
        out
    }

    /// Closes what the turn leaves open: the block being written becomes
    /// content; the permission requests still pending were withdrawn by a
    /// cancel (else the harness answered them); each tool without a result
    /// gets an error one: an agent may say nothing more of a tool it never
    /// ran (Gemini, for a rejected one).
    fn close_turn(&mut self, cancelled: bool) -> Vec<Payload> {
        let mut out = self.flush();
        self.partial.clear();
        let pending = std::mem::take(&mut self.pending);
        if cancelled {
            out.extend(pending.into_iter().map(|request_id| {
                Payload::PermissionResolved(pb::PermissionResolved {
                    request_id,
                    allow: false,
                    by: resolved_by::CANCELLED.into(),
                    ..Default::default()
                })
            }));
        }
        if !self.open_tools.is_empty() {
            let ids: Vec<String> = self.open_tools.drain(..).map(|t| t.id).collect();
            self.closed_tools.extend(ids.iter().cloned());
            let why = if cancelled { "interrupted" } else { "not run" };
            out.push(Payload::Result(tools::unfinished(&ids, why)));
        }
        out
    }

    /// The turn's usage: the answer's `usage` (ACP), else the token count
    /// an agent reports in `_meta.quota` (Gemini), with its per-model
    /// split; the context window from the last `usage_update`.
    fn usage(&self, result: &Value, turn: &Turn) -> (Option<pb::Usage>, Vec<pb::ModelUsage>) {
        let quota = result.get("_meta").and_then(|m| m.get("quota"));
        let usage = if let Some(u) = result.get("usage").filter(|u| u.is_object()) {
            Some(pb::Usage {
                input_tokens: u64_at(u, "inputTokens"),
                output_tokens: u64_at(u, "outputTokens"),
                cache_read_input_tokens: u64_at(u, "cachedReadTokens"),
                cache_creation_input_tokens: u64_at(u, "cachedWriteTokens"),
            })
        } else {
            quota.and_then(|q| q.get("token_count")).map(|t| pb::Usage {
                input_tokens: u64_at(t, "input_tokens"),
                output_tokens: u64_at(t, "output_tokens"),
                ..Default::default()
            })
        };
        let mut per_model: Vec<pb::ModelUsage> = quota
            .and_then(|q| q.get("model_usage"))
            .and_then(Value::as_array)
            .map(|models| {
                models
                    .iter()
                    .map(|m| {
                        let t = m.get("token_count").unwrap_or(&Value::Null);
                        pb::ModelUsage {
                            model: str_at(m, "model"),
                            input_tokens: u64_at(t, "input_tokens"),
                            output_tokens: u64_at(t, "output_tokens"),
                            context_window: turn.context_window,
                            ..Default::default()
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        if per_model.is_empty()
            && let Some(u) = &usage
        {
            per_model.push(pb::ModelUsage {
                model: self.model.clone(),
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cache_read_input_tokens: u.cache_read_input_tokens,
                cache_creation_input_tokens: u.cache_creation_input_tokens,
                context_window: turn.context_window,
                ..Default::default()
            });
        }
        (usage, per_model)
    }
}
