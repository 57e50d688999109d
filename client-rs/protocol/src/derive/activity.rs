//! What the agent is doing right now, for a human.

use std::collections::HashSet;

use super::permissions::PermissionsFold;
use super::status::{Status, StatusFold};
use crate::pb::{Event, event::Payload};

/// The kind of activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ActivityKind {
    /// Nothing in progress.
    #[default]
    Idle,
    /// The run is starting (status starting).
    Starting,
    /// The model is thinking, or working on what it just got.
    Thinking,
    /// The model is writing text.
    Writing,
    /// A tool is running.
    RunningTool,
    /// A permission prompt waits for an answer.
    WaitingForPermission,
    /// A stop is under way (status stopping).
    Stopping,
}

impl ActivityKind {
    /// snake_case name, as the vectors spell it: "idle", "starting",
    /// "thinking", "writing", "running_tool", "waiting_for_permission",
    /// "stopping".
    pub fn as_str(self) -> &'static str {
        match self {
            ActivityKind::Idle => "idle",
            ActivityKind::Starting => "starting",
            ActivityKind::Thinking => "thinking",
            ActivityKind::Writing => "writing",
            ActivityKind::RunningTool => "running_tool",
            ActivityKind::WaitingForPermission => "waiting_for_permission",
            ActivityKind::Stopping => "stopping",
        }
    }
}

/// What the agent is doing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Activity {
    /// The kind.
    pub kind: ActivityKind,
    /// The tool, for RunningTool and WaitingForPermission.
    pub tool_name: Option<String>,
    /// A label for a human: "Idle", "Starting", "Thinking", "Writing",
    /// "Running Bash", "Waiting for permission to run Bash", "Stopping".
    pub label: String,
}

impl Activity {
    /// The activity of `kind` (with `tool_name` for RunningTool and
    /// WaitingForPermission), labelled.
    pub fn of(kind: ActivityKind, tool_name: Option<String>) -> Self {
        let label = match (kind, tool_name.as_deref()) {
            (ActivityKind::Idle, _) => "Idle".to_owned(),
            (ActivityKind::Starting, _) => "Starting".to_owned(),
            (ActivityKind::Thinking, _) => "Thinking".to_owned(),
            (ActivityKind::Writing, _) => "Writing".to_owned(),
            (ActivityKind::Stopping, _) => "Stopping".to_owned(),
            (ActivityKind::RunningTool, Some(t)) => format!("Running {t}"),
            (ActivityKind::RunningTool, None) => "Running a tool".to_owned(),
            (ActivityKind::WaitingForPermission, Some(t)) => {
                format!("Waiting for permission to run {t}")
            }
            (ActivityKind::WaitingForPermission, None) => "Waiting for permission".to_owned(),
        };
        Activity {
            kind,
            tool_name,
            label,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Tail {
    #[default]
    None,
    Thinking,
    Text,
    Tool,
}

/// Incremental activity state of the current turn (main thread only).
#[derive(Debug, Clone, Default)]
pub(crate) struct ActivityFold {
    tail: Tail,
    /// tool_uses of the current turn in order; resolved ones are popped
    /// from the top lazily.
    open: Vec<(String, String)>,
    resolved: HashSet<String>,
}

impl ActivityFold {
    /// `began_turn`: this event began a new turn (the status fold went from
    /// no turn to a turn).
    pub(crate) fn apply(&mut self, e: &Event, began_turn: bool) {
        if began_turn {
            self.tail = Tail::None;
            self.open.clear();
            self.resolved.clear();
        }
        match &e.payload {
            Some(Payload::Content(c)) if c.parent_tool_use_id.is_empty() => {
                for b in &c.blocks {
                    match b.r#type.as_str() {
                        "thinking" | "redacted_thinking" => self.tail = Tail::Thinking,
                        "text" => self.tail = Tail::Text,
                        "tool_use" | "server_tool_use" => {
                            self.tail = Tail::Tool;
                            self.open.push((b.tool_use_id.clone(), b.tool_name.clone()));
                        }
                        _ => {}
                    }
                }
            }
            Some(Payload::Result(r))
                if r.parent_tool_use_id.is_empty() && !r.tool_results.is_empty() =>
            {
                self.tail = Tail::Tool;
                for tr in &r.tool_results {
                    self.resolved.insert(tr.tool_use_id.clone());
                }
                while self
                    .open
                    .last()
                    .is_some_and(|(id, _)| self.resolved.contains(id))
                {
                    self.open.pop();
                }
            }
            _ => {}
        }
    }

    pub(crate) fn activity(&self, status: Status, perms: &PermissionsFold) -> Activity {
        match status {
            Status::Idle => Activity::of(ActivityKind::Idle, None),
            Status::Starting => Activity::of(ActivityKind::Starting, None),
            Status::Stopping => Activity::of(ActivityKind::Stopping, None),
            Status::Streaming => {
                if let Some(p) = perms.latest() {
                    return Activity::of(
                        ActivityKind::WaitingForPermission,
                        Some(p.tool_name.clone()),
                    );
                }
                match self.tail {
                    Tail::None | Tail::Thinking => Activity::of(ActivityKind::Thinking, None),
                    Tail::Text => Activity::of(ActivityKind::Writing, None),
                    Tail::Tool => match self.open.last() {
                        Some((_, name)) => {
                            Activity::of(ActivityKind::RunningTool, Some(name.clone()))
                        }
                        None => Activity::of(ActivityKind::Thinking, None),
                    },
                }
            }
        }
    }
}

/// What the agent is doing now.
///
/// Rules, first match wins:
/// - status idle → Idle; starting → Starting; stopping → Stopping.
/// - streaming with a pending permission → WaitingForPermission (tool of the
///   most recent pending request).
/// - otherwise the tail of the current turn's main thread (content and
///   results with an empty `parent_tool_use_id`, since the turn began):
///   no block yet or a thinking block → Thinking; a text block → Writing;
///   a tool_use block or tool results → RunningTool (the latest tool_use of
///   the turn with no tool_result yet), or Thinking when every tool_use has
///   its result (the model is reading them).
pub fn activity(events: &[Event]) -> Activity {
    let mut sf = StatusFold::new();
    let mut pf = PermissionsFold::default();
    let mut af = ActivityFold::default();
    for e in events {
        let before = sf.turn_in_progress();
        sf.apply(e);
        pf.apply(e);
        af.apply(e, !before && sf.turn_in_progress());
    }
    af.activity(sf.status(), &pf)
}
