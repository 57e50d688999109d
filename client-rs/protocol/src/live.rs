//! What the agent is doing this instant, from live typing: the derived
//! [`Activity`] (a function of the log) refined by the [`Partial`] message.
//!
//! The log only learns what a block was once its `content` event lands, so
//! the derived activity says "Thinking" while an answer is being typed. The
//! partial blocks say what is being written now:
//! - Only while the derived activity is thinking, writing or running_tool (a
//!   turn streams and no permission prompt waits): idle, starting, stopping
//!   and waiting_for_permission are facts of the log and win.
//! - The newest main-thread block decides (subagents' blocks do not): text →
//!   writing ("Writing"); thinking → thinking ("Thinking"); a tool call's
//!   input streaming or a running tool's output → running_tool with its tool
//!   ("Running Bash"; an output block that does not name its tool keeps the
//!   derived one's).
//! - No main-thread block: the derived activity.
//!
//! The TypeScript client's `liveActivity` (gen/ts/src/live.ts) follows the
//! same rules.

use crate::derive::{Activity, ActivityKind};
use crate::partial::Partial;
use crate::pb::DeltaBlockType;

/// The activity given the derived one and the live typing (see the module
/// docs).
pub fn live_activity(derived: &Activity, partial: &Partial) -> Activity {
    if !matches!(
        derived.kind,
        ActivityKind::Thinking | ActivityKind::Writing | ActivityKind::RunningTool
    ) {
        return derived.clone();
    }
    let Some(newest) = partial
        .main_thread()
        .filter(|b| b.block_type != DeltaBlockType::Unspecified)
        .last()
    else {
        return derived.clone();
    };
    let (kind, tool_name) = match newest.block_type {
        DeltaBlockType::Text => (ActivityKind::Writing, None),
        DeltaBlockType::Thinking => (ActivityKind::Thinking, None),
        _ if !newest.tool_name.is_empty() => {
            (ActivityKind::RunningTool, Some(newest.tool_name.clone()))
        }
        _ if derived.kind == ActivityKind::RunningTool => {
            (ActivityKind::RunningTool, derived.tool_name.clone())
        }
        _ => (ActivityKind::RunningTool, None),
    };
    if derived.kind == kind && derived.tool_name == tool_name {
        return derived.clone();
    }
    Activity::of(kind, tool_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn delta(message_id: &str, block_type: DeltaBlockType, tool: &str, parent: &str) -> pb::Delta {
        pb::Delta {
            message_id: message_id.into(),
            block_type: block_type as i32,
            tool_name: tool.into(),
            parent_tool_use_id: parent.into(),
            fragment: "x".into(),
            ..Default::default()
        }
    }

    fn partial(deltas: &[pb::Delta]) -> Partial {
        let mut p = Partial::new();
        for d in deltas {
            p.apply_delta(d);
        }
        p
    }

    fn of(kind: ActivityKind, tool: Option<&str>) -> Activity {
        Activity::of(kind, tool.map(str::to_owned))
    }

    #[test]
    fn writing_thinking_and_running_a_tool_from_what_streams() {
        let thinking = of(ActivityKind::Thinking, None);
        assert_eq!(live_activity(&thinking, &Partial::new()), thinking);
        let text = partial(&[delta("m1", DeltaBlockType::Text, "", "")]);
        assert_eq!(live_activity(&thinking, &text).label, "Writing");
        let think = partial(&[delta("m1", DeltaBlockType::Thinking, "", "")]);
        assert_eq!(
            live_activity(&of(ActivityKind::Writing, None), &think).label,
            "Thinking"
        );
        let input = partial(&[delta("m1", DeltaBlockType::ToolInput, "Bash", "")]);
        let running = live_activity(&thinking, &input);
        assert_eq!(running.kind, ActivityKind::RunningTool);
        assert_eq!(running.label, "Running Bash");
        // An output block may not name its tool: the log's tool_use does.
        let bash = of(ActivityKind::RunningTool, Some("Bash"));
        let output = partial(&[delta("toolu_1", DeltaBlockType::ToolOutput, "", "")]);
        assert_eq!(live_activity(&bash, &output), bash);
    }

    #[test]
    fn the_newest_main_thread_block_decides() {
        let thinking = of(ActivityKind::Thinking, None);
        let p = partial(&[
            delta("m1", DeltaBlockType::Text, "", ""),
            delta("m2", DeltaBlockType::Thinking, "", "toolu_agent"),
        ]);
        assert_eq!(live_activity(&thinking, &p).label, "Writing");
        let q = partial(&[
            delta("m1", DeltaBlockType::Thinking, "", ""),
            delta("m2", DeltaBlockType::Text, "", ""),
        ]);
        assert_eq!(live_activity(&thinking, &q).label, "Writing");
    }

    #[test]
    fn the_logs_facts_win() {
        let p = partial(&[delta("m1", DeltaBlockType::Text, "", "")]);
        for a in [
            of(ActivityKind::Idle, None),
            of(ActivityKind::Starting, None),
            of(ActivityKind::Stopping, None),
            of(ActivityKind::WaitingForPermission, Some("Write")),
        ] {
            assert_eq!(live_activity(&a, &p), a);
        }
    }
}
