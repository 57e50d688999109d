//! ExitPlanMode calls and what became of them.

use std::collections::HashMap;

use crate::pb::{Event, event::Payload};

/// What happened to a proposed plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PlanDecision {
    /// No answer yet.
    #[default]
    Pending,
    /// Allowed (permission allowed, or the tool_result was not an error).
    Approved,
    /// Denied (permission denied, or the tool_result was an error).
    Rejected,
}

impl PlanDecision {
    /// "pending" | "approved" | "rejected".
    pub fn as_str(self) -> &'static str {
        match self {
            PlanDecision::Pending => "pending",
            PlanDecision::Approved => "approved",
            PlanDecision::Rejected => "rejected",
        }
    }
}

/// One ExitPlanMode call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlanOutcome {
    /// The ExitPlanMode tool_use id.
    pub tool_use_id: String,
    /// The plan text (`input.plan`).
    pub plan: String,
    /// What became of it.
    pub decision: PlanDecision,
    /// Seq of the tool_use's content event.
    pub seq: u64,
    /// Seq of the event that decided it.
    pub decided_seq: Option<u64>,
}

/// Incremental plan state.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanFold {
    plans: Vec<PlanOutcome>,
    index: HashMap<String, usize>,
    /// permission request id → plan index.
    requests: HashMap<String, usize>,
}

impl PlanFold {
    pub(crate) fn apply(&mut self, e: &Event) {
        match &e.payload {
            Some(Payload::Content(c)) => {
                for b in &c.blocks {
                    if b.r#type == "tool_use" && b.tool_name == "ExitPlanMode" {
                        let plan = b
                            .input
                            .as_ref()
                            .and_then(|i| super::wakeup::string(i, "plan"))
                            .unwrap_or_default();
                        self.index.insert(b.tool_use_id.clone(), self.plans.len());
                        self.plans.push(PlanOutcome {
                            tool_use_id: b.tool_use_id.clone(),
                            plan,
                            seq: e.seq,
                            ..Default::default()
                        });
                    }
                }
            }
            Some(Payload::PermissionRequested(p)) => {
                if let Some(&i) = self.index.get(&p.tool_use_id) {
                    self.requests.insert(p.request_id.clone(), i);
                }
            }
            Some(Payload::PermissionResolved(r)) => {
                if let Some(i) = self.requests.remove(&r.request_id) {
                    self.decide(i, r.allow, e.seq);
                }
            }
            Some(Payload::Result(r)) => {
                for tr in &r.tool_results {
                    if let Some(&i) = self.index.get(&tr.tool_use_id) {
                        self.decide(i, !tr.is_error, e.seq);
                    }
                }
            }
            _ => {}
        }
    }

    fn decide(&mut self, i: usize, approved: bool, seq: u64) {
        let p = &mut self.plans[i];
        p.decision = if approved {
            PlanDecision::Approved
        } else {
            PlanDecision::Rejected
        };
        p.decided_seq = Some(seq);
    }

    pub(crate) fn plans(&self) -> &[PlanOutcome] {
        &self.plans
    }
}

/// Every ExitPlanMode tool_use, oldest first, with its decision.
///
/// Rules: a plan is *pending* until answered. A `permission_resolved` for a
/// `permission_requested` whose `tool_use_id` is the plan's decides it
/// (allow → approved, deny → rejected); the plan's tool_result decides it
/// too (not an error → approved, error → rejected). The latest of these
/// wins, since the tool_result is what the model finally saw.
pub fn plan_outcomes(events: &[Event]) -> Vec<PlanOutcome> {
    let mut f = PlanFold::default();
    for e in events {
        f.apply(e);
    }
    f.plans
}
