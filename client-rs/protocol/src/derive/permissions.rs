//! Permission prompts waiting for an answer.

use std::collections::HashMap;

use crate::pb::{Event, event::Payload};

/// A `permission_requested` with no answer yet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PendingPermission {
    /// The id to answer with RespondPermission.
    pub request_id: String,
    /// The tool that wants to run.
    pub tool_name: String,
    /// The tool's input.
    pub input: Option<pbjson_types::Struct>,
    /// The tool_use the request is about.
    pub tool_use_id: String,
    /// The CLI's description of the action, when given.
    pub description: String,
    /// Why the CLI asks, when it says.
    pub decision_reason: String,
    /// The path outside the allowed directories, when that is why it asks.
    pub blocked_path: String,
    /// Permission updates the CLI suggests.
    pub suggestions: Vec<pbjson_types::Value>,
    /// Seq of the `permission_requested` event.
    pub seq: u64,
    /// The run that asked.
    pub run_id: String,
}

/// Incremental pending-permission state: requests in the order asked, with
/// answered ones removed lazily so each event is O(1) amortized.
#[derive(Debug, Clone, Default)]
pub(crate) struct PermissionsFold {
    list: Vec<Option<PendingPermission>>,
    index: HashMap<String, usize>,
    live: usize,
}

impl PermissionsFold {
    pub(crate) fn apply(&mut self, e: &Event) {
        match &e.payload {
            Some(Payload::PermissionRequested(p)) => {
                if let Some(&i) = self.index.get(&p.request_id) {
                    // A repeated request id replaces the old entry in place.
                    if self.list[i].is_none() {
                        self.live += 1;
                    }
                    self.list[i] = Some(pending(e, p));
                } else {
                    self.index.insert(p.request_id.clone(), self.list.len());
                    self.list.push(Some(pending(e, p)));
                    self.live += 1;
                }
            }
            Some(Payload::PermissionResolved(r)) => {
                if let Some(i) = self.index.remove(&r.request_id) {
                    if self.list[i].take().is_some() {
                        self.live -= 1;
                    }
                }
            }
            Some(Payload::RunEnd(_)) => {
                // The process that asked is gone; nobody can answer it now.
                self.list.clear();
                self.index.clear();
                self.live = 0;
            }
            _ => {}
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.live
    }

    /// The most recent pending request.
    pub(crate) fn latest(&self) -> Option<&PendingPermission> {
        self.list.iter().rev().flatten().next()
    }

    pub(crate) fn pending(&self) -> Vec<PendingPermission> {
        self.iter().cloned().collect()
    }

    /// The pending requests, oldest first, without copying them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &PendingPermission> {
        self.list.iter().flatten()
    }

    /// The request `request_id`, if it is pending.
    pub(crate) fn get(&self, request_id: &str) -> Option<&PendingPermission> {
        let i = *self.index.get(request_id)?;
        self.list[i].as_ref()
    }
}

fn pending(e: &Event, p: &crate::pb::PermissionRequested) -> PendingPermission {
    PendingPermission {
        request_id: p.request_id.clone(),
        tool_name: p.tool_name.clone(),
        input: p.input.clone(),
        tool_use_id: p.tool_use_id.clone(),
        description: p.description.clone(),
        decision_reason: p.decision_reason.clone(),
        blocked_path: p.blocked_path.clone(),
        suggestions: p.suggestions.clone(),
        seq: e.seq,
        run_id: e.run_id.clone(),
    }
}

/// Permission requests waiting for an answer, oldest first.
///
/// Rules: a `permission_requested` is pending until a
/// `permission_resolved` with the same `request_id` (answered by a user, a
/// timeout, withdrawn by the CLI, or closed by the server at run end), or
/// until the next `run_end` (the process that asked is gone).
pub fn pending_permissions(events: &[Event]) -> Vec<PendingPermission> {
    let mut f = PermissionsFold::default();
    for e in events {
        f.apply(e);
    }
    f.pending()
}
