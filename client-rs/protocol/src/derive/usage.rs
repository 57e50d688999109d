//! Token totals, cost and context-window fill.

use crate::pb::{self, Event, event::Payload};

/// Token totals and cost of a session, plus how full the context is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Uncached input tokens over all turns.
    pub input_tokens: u64,
    /// Output tokens over all turns.
    pub output_tokens: u64,
    /// Cache-write input tokens over all turns.
    pub cache_creation_input_tokens: u64,
    /// Cache-read input tokens over all turns.
    pub cache_read_input_tokens: u64,
    /// Cost in US dollars over all turns.
    pub cost_usd: f64,
    /// Tokens in the context of the latest main-thread API call.
    pub context_tokens: u64,
    /// Context window size of the latest turn's model (0 when unknown).
    pub context_window: u64,
    /// Completed (non-compact) turns.
    pub turns: u32,
}

impl From<&Usage> for pb::SessionUsage {
    fn from(u: &Usage) -> Self {
        pb::SessionUsage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            cost_usd: u.cost_usd,
            context_tokens: u.context_tokens,
            context_window: u.context_window,
            turns: u.turns,
        }
    }
}

impl Usage {
    /// Folds one event in (see [`usage`] for the rules).
    pub(crate) fn apply(&mut self, e: &Event) {
        match &e.payload {
            Some(Payload::TurnEnd(te)) if !te.compact => {
                if let Some(u) = &te.usage {
                    self.input_tokens += u.input_tokens;
                    self.output_tokens += u.output_tokens;
                    self.cache_creation_input_tokens += u.cache_creation_input_tokens;
                    self.cache_read_input_tokens += u.cache_read_input_tokens;
                }
                self.cost_usd += te.cost_usd;
                self.turns += 1;
                if let Some(w) = te.model_usage.iter().map(|m| m.context_window).max() {
                    if w > 0 {
                        self.context_window = w;
                    }
                }
            }
            Some(Payload::Content(c)) if c.parent_tool_use_id.is_empty() => {
                if let Some(u) = &c.usage {
                    let fill = u.input_tokens
                        + u.cache_creation_input_tokens
                        + u.cache_read_input_tokens
                        + u.output_tokens;
                    if fill > 0 {
                        self.context_tokens = fill;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Token totals and cost over the whole log.
///
/// Rules:
/// - `input_tokens`, `output_tokens`, `cache_creation_input_tokens`,
///   `cache_read_input_tokens` and `cost_usd` are the sums of every
///   non-compact `turn_end`'s `usage` and `cost_usd` (compaction markers are
///   not turns; `cost_usd` is the turn's own cost).
/// - `turns` counts non-compact `turn_end`s.
/// - `context_tokens` = input + cache_creation + cache_read + output of the
///   latest main-thread `content` event (empty `parent_tool_use_id`) whose
///   usage is set and not all zero: the real fill of the latest API call.
///   Subagent calls have their own context; CLI-made (`<synthetic>`) error
///   lines carry zero usage and made no call, so neither moves it.
/// - `context_window` = the largest `context_window` in the latest
///   non-compact `turn_end` whose `model_usage` reports one (> 0).
pub fn usage(events: &[Event]) -> Usage {
    let mut u = Usage::default();
    for e in events {
        u.apply(e);
    }
    u
}
