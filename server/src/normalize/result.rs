//! `result` lines: the `turn_end` of a turn, with the turn's own share of
//! the cost and usage the CLI reports cumulatively for the process.

use std::collections::HashMap;

use agent_harness_protocol::pb;

use super::content::usage;
use super::read::{Denial, Line};
use super::{Normalizer, to_struct};
use crate::decoder::json::value_text;

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
    pub(super) fn result(&mut self, l: &Line) -> pb::TurnEnd {
        self.turn_active = false;
        self.input_since_result = false;
        self.notification_since_result = false;
        let model_usage = l
            .model_usage
            .0
            .iter()
            .map(|(model, u)| pb::ModelUsage {
                model: model.clone(),
                input_tokens: u.input_tokens.0,
                output_tokens: u.output_tokens.0,
                cache_read_input_tokens: u.cache_read_input_tokens.0,
                cache_creation_input_tokens: u.cache_creation_input_tokens.0,
                cost_usd: u.cost_usd.0,
                context_window: u.context_window.0,
                max_output_tokens: u.max_output_tokens.0,
            })
            .collect();
        let (cost_usd, model_usage) = self
            .reported_totals
            .take_delta(l.total_cost_usd.0, model_usage);
        pb::TurnEnd {
            usage: l.usage.as_ref().map(usage),
            cost_usd,
            duration_ms: l.duration_ms.0,
            duration_api_ms: l.duration_api_ms.0,
            is_error: l.is_error.0,
            compact: false,
            terminal_reason: l.terminal_reason.owned(),
            subtype: l.subtype.owned(),
            num_turns: l.num_turns.0 as u32,
            result: l.result.owned(),
            origin: l.origin.0.owned(),
            model_usage,
            compact_trigger: String::new(),
            compact_pre_tokens: 0,
            api_error_status: l.api_error_status.0 as u32,
            errors: l.errors.0.iter().map(|e| value_text(&e.0)).collect(),
            permission_denials: l
                .permission_denials
                .0
                .iter()
                .map(permission_denial)
                .collect(),
        }
    }
}

/// One entry of a result line's `permission_denials`.
fn permission_denial(d: &Denial) -> pb::PermissionDenial {
    pb::PermissionDenial {
        tool_name: d.tool_name.clone(),
        tool_use_id: d.tool_use_id.clone(),
        tool_input: d.tool_input.as_ref().and_then(|i| to_struct(&i.0)),
    }
}
