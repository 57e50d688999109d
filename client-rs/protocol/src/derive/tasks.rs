//! Background tasks (backgrounded Bash, subagents, ...).

use std::collections::HashMap;

use crate::pb::{Event, event::Payload};

/// Where a background task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TaskStatus {
    /// Started and not finished (the CLI's pending, running and paused).
    #[default]
    Running,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Killed or stopped (the CLI's `killed` maps here), or its process ended.
    Stopped,
}

impl TaskStatus {
    /// Lowercase name: "running" | "completed" | "failed" | "stopped".
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Stopped => "stopped",
        }
    }

    /// True for completed, failed and stopped.
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Running
    }

    /// Maps a CLI status string; `None` for non-terminal or unknown ones.
    fn terminal(s: &str) -> Option<Self> {
        match s {
            "completed" => Some(TaskStatus::Completed),
            "failed" => Some(TaskStatus::Failed),
            "killed" | "stopped" => Some(TaskStatus::Stopped),
            _ => None,
        }
    }
}

/// One background task as the log tells it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackgroundTask {
    /// The CLI's task id ("b…" for Bash, "a…" for agents).
    pub task_id: String,
    /// "local_bash", "local_agent", ... (empty when no task_started was seen).
    pub task_type: String,
    /// Human description (the latest one reported).
    pub description: String,
    /// Current status.
    pub status: TaskStatus,
    /// The tool_use that started it.
    pub tool_use_id: String,
    /// Latest progress or final summary.
    pub summary: String,
    /// Where the task's output was written (from task_notification).
    pub output_file: String,
    /// Subagent type, for agents.
    pub subagent_type: String,
    /// Error text, when the task failed.
    pub error: String,
    /// Last tool the task used, when reported.
    pub last_tool_name: String,
    /// Tokens used so far, when reported.
    pub total_tokens: u64,
    /// Tool uses so far, when reported.
    pub tool_uses: u32,
    /// Seq of the first event about this task.
    pub started_seq: u64,
    /// Seq of the event that made it terminal.
    pub ended_seq: Option<u64>,
}

/// Incremental task state, in order of first appearance.
#[derive(Debug, Clone, Default)]
pub(crate) struct TasksFold {
    tasks: Vec<BackgroundTask>,
    index: HashMap<String, usize>,
    running: usize,
}

impl TasksFold {
    fn entry(&mut self, task_id: &str, seq: u64) -> &mut BackgroundTask {
        let i = match self.index.get(task_id) {
            Some(&i) => i,
            None => {
                self.index.insert(task_id.to_owned(), self.tasks.len());
                self.tasks.push(BackgroundTask {
                    task_id: task_id.to_owned(),
                    started_seq: seq,
                    ..Default::default()
                });
                self.running += 1;
                self.tasks.len() - 1
            }
        };
        &mut self.tasks[i]
    }

    fn finish(&mut self, task_id: &str, status: TaskStatus, seq: u64) {
        let t = self.entry(task_id, seq);
        if !t.status.is_terminal() {
            t.status = status;
            t.ended_seq = Some(seq);
            self.running -= 1;
        }
    }

    pub(crate) fn apply(&mut self, e: &Event) {
        let seq = e.seq;
        match &e.payload {
            Some(Payload::TaskStarted(s)) => {
                let t = self.entry(&s.task_id, seq);
                set(&mut t.task_type, &s.task_type);
                set(&mut t.description, &s.description);
                set(&mut t.tool_use_id, &s.tool_use_id);
                set(&mut t.subagent_type, &s.subagent_type);
            }
            Some(Payload::TaskUpdated(u)) => {
                let t = self.entry(&u.task_id, seq);
                set(&mut t.description, &u.description);
                set(&mut t.error, &u.error);
                set(&mut t.summary, &u.summary);
                set(&mut t.last_tool_name, &u.last_tool_name);
                if u.total_tokens > 0 {
                    t.total_tokens = u.total_tokens;
                }
                if u.tool_uses > 0 {
                    t.tool_uses = u.tool_uses;
                }
                if let Some(s) = TaskStatus::terminal(&u.status) {
                    self.finish(&u.task_id, s, seq);
                }
            }
            Some(Payload::TaskNotification(n)) => {
                let t = self.entry(&n.task_id, seq);
                set(&mut t.tool_use_id, &n.tool_use_id);
                set(&mut t.output_file, &n.output_file);
                set(&mut t.summary, &n.summary);
                // A notification always means the task is over; an unknown
                // status still ends it (as completed) rather than leaving
                // it running forever.
                let s = TaskStatus::terminal(&n.status).unwrap_or(TaskStatus::Completed);
                self.finish(&n.task_id, s, seq);
            }
            Some(Payload::RunEnd(_)) => {
                // The CLI's tasks live in its process (group): they end with it.
                for t in &mut self.tasks {
                    if !t.status.is_terminal() {
                        t.status = TaskStatus::Stopped;
                        t.ended_seq = Some(seq);
                    }
                }
                self.running = 0;
            }
            _ => {}
        }
    }

    pub(crate) fn has_running(&self) -> bool {
        self.running > 0
    }

    pub(crate) fn tasks(&self) -> &[BackgroundTask] {
        &self.tasks
    }
}

fn set(field: &mut String, v: &str) {
    if !v.is_empty() {
        v.clone_into(field);
    }
}

/// Background tasks in order of first appearance, with their current status.
///
/// Rules:
/// - `task_started` creates the task, *running*. A `task_updated` or
///   `task_notification` for a task never started creates it too (a log
///   paged from the middle).
/// - The task stays running until a terminal status arrives, in either a
///   `task_updated` (`status` completed | failed | killed | stopped) or a
///   `task_notification` (always terminal; an unknown status counts as
///   completed). `killed` maps to *stopped*. The first terminal status wins;
///   later frames only fill in summary, output file, etc.
/// - A foreground Bash the CLI registered as a task (task_started, then
///   task_notification completed before its tool_result) thus ends completed.
/// - `run_end` stops every task still running: they die with the process.
/// - Non-empty fields of later frames overwrite earlier ones (description,
///   summary, error, last tool, token and tool-use counts).
pub fn background_tasks(events: &[Event]) -> Vec<BackgroundTask> {
    fold(events).tasks
}

/// True when any background task is not terminal (see [`background_tasks`]).
pub fn has_running_background_tasks(events: &[Event]) -> bool {
    fold(events).has_running()
}

fn fold(events: &[Event]) -> TasksFold {
    let mut f = TasksFold::default();
    for e in events {
        f.apply(e);
    }
    f
}
