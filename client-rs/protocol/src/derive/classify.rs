//! Helpers for rendering a log: tool kinds, turns, subagent threads and
//! queued messages.

use std::collections::HashMap;

use super::status::StatusFold;
use crate::pb::{Event, InputSource, ToolResult, event::Payload};

/// A tool's family, for picking an icon or a renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Bash, BashOutput, KillShell.
    Shell,
    /// Read, Glob, Grep, LS.
    Read,
    /// Edit, Write, MultiEdit, NotebookEdit.
    Edit,
    /// WebFetch, WebSearch.
    Web,
    /// Agent (and its older name Task).
    Agent,
    /// TodoWrite and the Task* list tools (TaskCreate, TaskUpdate, ...).
    Todo,
    /// ExitPlanMode.
    Plan,
    /// ScheduleWakeup, CronCreate, CronDelete, CronList.
    Schedule,
    /// MCP tools (`mcp__server__tool`).
    Mcp,
    /// Anything else.
    Other,
}

impl ToolKind {
    /// Lowercase name: "shell", "read", "edit", "web", "agent", "todo",
    /// "plan", "schedule", "mcp", "other".
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Shell => "shell",
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Web => "web",
            ToolKind::Agent => "agent",
            ToolKind::Todo => "todo",
            ToolKind::Plan => "plan",
            ToolKind::Schedule => "schedule",
            ToolKind::Mcp => "mcp",
            ToolKind::Other => "other",
        }
    }
}

/// Maps a tool name to its kind.
///
/// `input` matters for one name only: `Task` is the Agent tool's older name
/// (input with `prompt` or `subagent_type`, or no input) → agent; a `Task`
/// without those is a task-list tool → todo. Every other `Task*` name is
/// todo; `mcp__*` is mcp; unknown names are other.
pub fn classify_tool(name: &str, input: Option<&pbjson_types::Struct>) -> ToolKind {
    match name {
        "Bash" | "BashOutput" | "KillShell" => ToolKind::Shell,
        "Read" | "Glob" | "Grep" | "LS" => ToolKind::Read,
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => ToolKind::Edit,
        "WebFetch" | "WebSearch" => ToolKind::Web,
        "Agent" => ToolKind::Agent,
        "Task" => match input {
            Some(i)
                if !i.fields.contains_key("prompt") && !i.fields.contains_key("subagent_type") =>
            {
                ToolKind::Todo
            }
            _ => ToolKind::Agent,
        },
        "TodoWrite" => ToolKind::Todo,
        "ExitPlanMode" => ToolKind::Plan,
        "ScheduleWakeup" | "CronCreate" | "CronDelete" | "CronList" => ToolKind::Schedule,
        n if n.starts_with("Task") => ToolKind::Todo,
        n if n.starts_with("mcp__") => ToolKind::Mcp,
        _ => ToolKind::Other,
    }
}

/// A tool_use paired with its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall<'a> {
    /// The tool_use id.
    pub tool_use_id: &'a str,
    /// The tool name.
    pub tool_name: &'a str,
    /// Its kind.
    pub kind: ToolKind,
    /// The tool's input.
    pub input: Option<&'a pbjson_types::Struct>,
    /// The subagent it ran in (the Agent tool_use id), or "" for the main thread.
    pub parent_tool_use_id: &'a str,
    /// The content event carrying the tool_use.
    pub use_event: &'a Event,
    /// The tool_result, once it arrived.
    pub result: Option<&'a ToolResult>,
    /// The result event carrying it.
    pub result_event: Option<&'a Event>,
}

/// A turn, or a stretch of events outside any turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn<'a> {
    /// The event that began the turn (input_sent, turn_start, or a run_start
    /// with a prompt); `None` for a stretch outside any turn (run_start with
    /// no prompt, run_ready, idle-time task frames, run_end while idle).
    pub start: Option<&'a Event>,
    /// The event that ended it (non-compact turn_end, or run_end); `None`
    /// while it is in progress, and always for a stretch outside turns.
    pub end: Option<&'a Event>,
    /// Every event of the turn in log order, `start` and `end` included.
    pub events: Vec<&'a Event>,
    /// Tool calls made in the turn, in order, each with its result wherever
    /// in the log it arrived.
    pub tool_calls: Vec<ToolCall<'a>>,
}

impl Turn<'_> {
    /// True for a real turn, false for a stretch outside turns.
    pub fn is_turn(&self) -> bool {
        self.start.is_some()
    }
}

/// Splits the log into turns.
///
/// A turn runs from the event that begins it (what makes
/// [`StatusFold::turn_in_progress`] become true: input_sent, turn_start, a
/// run_start with a prompt) to the event that ends it (what makes it false:
/// a non-compact turn_end, or run_end). Input sent mid-turn and compaction
/// markers stay inside. Events between turns form stretches with
/// `start: None`. Each tool_use is paired with its tool_result by
/// tool_use_id, even if the result lands in a later turn. O(n).
pub fn group_events(events: &[Event]) -> Vec<Turn<'_>> {
    let mut out: Vec<Turn<'_>> = Vec::new();
    let mut cur: Option<Turn<'_>> = None;
    // tool_use_id → (turn index, call index).
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut sf = StatusFold::new();
    for e in events {
        let before = sf.turn_in_progress();
        sf.apply(e);
        let after = sf.turn_in_progress();
        if !before && after {
            if let Some(t) = cur.take() {
                out.push(t);
            }
            cur = Some(Turn {
                start: Some(e),
                end: None,
                events: Vec::new(),
                tool_calls: Vec::new(),
            });
        }
        let t = cur.get_or_insert_with(|| Turn {
            start: None,
            end: None,
            events: Vec::new(),
            tool_calls: Vec::new(),
        });
        t.events.push(e);
        match &e.payload {
            Some(Payload::Content(c)) => {
                for b in &c.blocks {
                    if b.r#type == "tool_use" || b.r#type == "server_tool_use" {
                        calls.insert(&b.tool_use_id, (out.len(), t.tool_calls.len()));
                        t.tool_calls.push(ToolCall {
                            tool_use_id: &b.tool_use_id,
                            tool_name: &b.tool_name,
                            kind: classify_tool(&b.tool_name, b.input.as_ref()),
                            input: b.input.as_ref(),
                            parent_tool_use_id: &c.parent_tool_use_id,
                            use_event: e,
                            result: None,
                            result_event: None,
                        });
                    }
                }
            }
            Some(Payload::Result(r)) => {
                for tr in &r.tool_results {
                    if let Some(&(ti, ci)) = calls.get(tr.tool_use_id.as_str()) {
                        let turn = if ti == out.len() {
                            &mut *t
                        } else {
                            &mut out[ti]
                        };
                        let call = &mut turn.tool_calls[ci];
                        call.result = Some(tr);
                        call.result_event = Some(e);
                    }
                }
            }
            _ => {}
        }
        if before && !after {
            t.end = Some(e);
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

/// Content and result events that belong to subagents, keyed by
/// `parent_tool_use_id` (the Agent tool_use id), in log order.
pub fn subagent_children(events: &[Event]) -> HashMap<String, Vec<&Event>> {
    let mut out: HashMap<String, Vec<&Event>> = HashMap::new();
    for e in events {
        let parent = match &e.payload {
            Some(Payload::Content(c)) => &c.parent_tool_use_id,
            Some(Payload::Result(r)) => &r.parent_tool_use_id,
            _ => continue,
        };
        if !parent.is_empty() {
            out.entry(parent.clone()).or_default().push(e);
        }
    }
    out
}

/// A user message sent mid-turn that the CLI has not taken up yet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PendingMessage {
    /// Seq of its input_sent.
    pub seq: u64,
    /// The message text.
    pub text: String,
}

/// Incremental pending-message state.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingFold {
    list: Vec<PendingMessage>,
}

impl PendingFold {
    /// `turn_before`: a turn was in progress before this event.
    pub(crate) fn apply(&mut self, e: &Event, turn_before: bool) {
        match &e.payload {
            Some(Payload::InputSent(i)) if turn_before && i.source == InputSource::User as i32 => {
                self.list.push(PendingMessage {
                    seq: e.seq,
                    text: i.text.clone(),
                });
            }
            Some(Payload::Content(c)) if c.parent_tool_use_id.is_empty() => self.list.clear(),
            Some(Payload::TurnEnd(t)) if !t.compact => self.list.clear(),
            Some(Payload::RunEnd(_)) => self.list.clear(),
            _ => {}
        }
    }

    pub(crate) fn list(&self) -> &[PendingMessage] {
        &self.list
    }
}

/// User messages queued into a running turn and not taken up yet.
///
/// Rules: an `input_sent` with source USER that arrives while a turn is in
/// progress (starting, streaming or stopping) is pending until the next
/// main-thread `content` event (the CLI steered it into the turn at the next
/// model request), or until the turn ends (non-compact `turn_end`, or
/// `run_end`). Subagent content does not take it up.
pub fn pending_messages(events: &[Event]) -> Vec<PendingMessage> {
    let mut sf = StatusFold::new();
    let mut pf = PendingFold::default();
    for e in events {
        let before = sf.turn_in_progress();
        sf.apply(e);
        pf.apply(e, before);
    }
    pf.list
}
