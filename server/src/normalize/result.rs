//! `result` lines: the `turn_end` of a turn, with the turn's own share of
//! the cost and usage the CLI reports cumulatively for the process.

use std::collections::HashMap;

use agent_harness_protocol::pb;
use serde_json::{Map, Value};

use super::{Normalizer, to_struct, usage};
use crate::decoder::json::{f64_at, f64_at_obj, str_at, str_of, u64_at, u64_of, value_text};

/// Cumulative cost and per-model usage the CLI reported so far in this run.
#[derive(Debug, Default)]
pub(super) struct Totals {
    cost_usd: f64,
    models: HashMap<String, pb::ModelUsage>,
}

impl Totals {
    /// Turns the CLI's cumulative figures into this turn's share and
    /// remembers the new totals.
    fn take_delta(
        &mut self,
        cost_usd: f64,
        models: Vec<pb::ModelUsage>,
    ) -> (f64, Vec<pb::ModelUsage>) {
        let cost = (cost_usd - self.cost_usd).max(0.0);
        self.cost_usd = cost_usd.max(self.cost_usd);
        let deltas = models
            .into_iter()
            .map(|total| {
                let prev = self.models.get(&total.model).cloned().unwrap_or_default();
                let delta = pb::ModelUsage {
                    model: total.model.clone(),
                    input_tokens: total.input_tokens.saturating_sub(prev.input_tokens),
                    output_tokens: total.output_tokens.saturating_sub(prev.output_tokens),
                    cache_read_input_tokens: total
                        .cache_read_input_tokens
                        .saturating_sub(prev.cache_read_input_tokens),
                    cache_creation_input_tokens: total
                        .cache_creation_input_tokens
                        .saturating_sub(prev.cache_creation_input_tokens),
                    cost_usd: (total.cost_usd - prev.cost_usd).max(0.0),
                    context_window: total.context_window,
                    max_output_tokens: total.max_output_tokens,
                };
                self.models.insert(total.model.clone(), total);
                delta
            })
            .collect();
        (cost, deltas)
    }
}

impl Normalizer {
    pub(super) fn result(&mut self, obj: &Map<String, Value>) -> pb::TurnEnd {
        self.turn_active = false;
        self.input_since_result = false;
        self.notification_since_result = false;
        let model_usage = obj
            .get("modelUsage")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(model, u)| pb::ModelUsage {
                        model: model.clone(),
                        input_tokens: u64_at(u, "inputTokens"),
                        output_tokens: u64_at(u, "outputTokens"),
                        cache_read_input_tokens: u64_at(u, "cacheReadInputTokens"),
                        cache_creation_input_tokens: u64_at(u, "cacheCreationInputTokens"),
                        cost_usd: f64_at(u, "costUSD"),
                        context_window: u64_at(u, "contextWindow"),
                        max_output_tokens: u64_at(u, "maxOutputTokens"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (cost_usd, model_usage) = self
            .reported_totals
            .take_delta(f64_at_obj(obj, "total_cost_usd"), model_usage);
        pb::TurnEnd {
            usage: obj.get("usage").map(usage),
            cost_usd,
            duration_ms: u64_of(obj, "duration_ms"),
            duration_api_ms: u64_of(obj, "duration_api_ms"),
            is_error: obj
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            compact: false,
            terminal_reason: str_of(obj, "terminal_reason"),
            subtype: str_of(obj, "subtype"),
            num_turns: u64_of(obj, "num_turns") as u32,
            result: str_of(obj, "result"),
            origin: obj
                .get("origin")
                .map(|o| match o {
                    Value::String(s) => s.clone(),
                    other => str_at(other, "kind"),
                })
                .unwrap_or_default(),
            model_usage,
            compact_trigger: String::new(),
            compact_pre_tokens: 0,
            api_error_status: u64_of(obj, "api_error_status") as u32,
            errors: obj
                .get("errors")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(value_text).collect())
                .unwrap_or_default(),
            permission_denials: obj
                .get("permission_denials")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(permission_denial).collect())
                .unwrap_or_default(),
        }
    }
}

/// One entry of a result line's `permission_denials`.
fn permission_denial(v: &Value) -> pb::PermissionDenial {
    pb::PermissionDenial {
        tool_name: str_at(v, "tool_name"),
        tool_use_id: str_at(v, "tool_use_id"),
        tool_input: v.get("tool_input").and_then(to_struct),
    }
}
