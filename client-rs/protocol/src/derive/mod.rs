//! Derived state: pure functions over a session's event log.
//!
//! Everything a UI shows about a session (status, process alive, usage,
//! activity, background tasks, pending permissions, scheduled wakeup, plan
//! outcomes, queued messages) is a function of the log alone. This module is
//! the only implementation: the server calls it for GetSession/ListSessions
//! and the session client publishes [`Derived`] snapshots. Ports to other
//! languages prove themselves against the conformance vectors in
//! `tests/vectors` (see its README).
//!
//! Every function is O(n) over the slice. Each is a fold: the `*Fold` types
//! apply one event at a time, so a live client or the server's hot path
//! updates in O(1) per event ([`StatusFold`] for status, [`Fold`] for
//! everything).
//!
//! ```
//! use agent_harness_protocol::derive::{self, Status};
//! assert_eq!(derive::status(&[]), Status::Idle);
//! assert!(!derive::process_alive(&[]));
//! ```

mod activity;
pub mod classify;
mod permissions;
mod plan;
mod settings;
mod status;
mod tasks;
mod title;
mod usage;
mod wakeup;

#[cfg(test)]
mod tests;

pub use activity::{Activity, ActivityKind, activity};
pub use permissions::{PendingPermission, pending_permissions};
pub use plan::{PlanDecision, PlanOutcome, plan_outcomes};
pub use settings::{Settings, settings};
pub use status::{Status, StatusFold, process_alive, run_liveness, status};
pub use tasks::{BackgroundTask, TaskStatus, background_tasks, has_running_background_tasks};
pub use title::{DERIVED_TITLE_CHARS, TitleFold, title, title_of_prompt};
pub use usage::{Usage, usage};
pub use wakeup::{ScheduledWakeup, WakeupKind, scheduled_wakeup};

use crate::pb::{self, Event, event::Payload};
use classify::{PendingFold, PendingMessage};

/// The `run_error` kind recorded when the CLI could not resume the
/// conversation it was spawned with (its transcript is gone).
pub use crate::vocab::run_error_kind::RESUME_FAILED;

/// The CLI session the next run resumes: the latest `run_ready`'s non-empty
/// `resume_id`, unless a `run_error{kind: "resume_failed"}` came after it
/// (the CLI could not load that conversation; the next run starts a new
/// one): then `None` until a later `run_ready` names the new conversation.
pub fn resume_id(events: &[Event]) -> Option<String> {
    events
        .iter()
        .rev()
        .find_map(|e| resume_decision(e.payload.as_ref()?))?
        .map(str::to_owned)
}

/// What one event says about the conversation the next run resumes:
/// `Some(Some(id))` for a `run_ready` naming one, `Some(None)` for a
/// `run_error{kind: "resume_failed"}` (that conversation is gone), `None`
/// for any other event. The newest event that answers decides
/// [`resume_id()`], so a reader going back from a log's head (the server's
/// start-up recovery) can stop at it.
pub fn resume_decision(payload: &Payload) -> Option<Option<&str>> {
    match payload {
        Payload::RunReady(r) if !r.resume_id.is_empty() => Some(Some(&r.resume_id)),
        Payload::RunError(r) if r.kind == RESUME_FAILED => Some(None),
        _ => None,
    }
}

/// Where the session's earlier context was lost: the CLI could not resume
/// its conversation (`run_error{kind: "resume_failed"}`), so what was said
/// before is not part of the conversation any more.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContextLost {
    /// The CLI session id that could not be resumed (`RunError.resume_id`).
    pub resume_id: String,
    /// The seq of that run_error: everything before it is gone from the
    /// model's view.
    pub seq: u64,
}

/// The latest `run_error{kind: "resume_failed"}`, if any: the point before
/// which the conversation's context is gone. It stays the latest loss for
/// good (the new conversation that follows does not bring it back).
pub fn context_lost(events: &[Event]) -> Option<ContextLost> {
    events.iter().rev().find_map(|e| match &e.payload {
        Some(Payload::RunError(r)) if r.kind == RESUME_FAILED => Some(ContextLost {
            resume_id: r.resume_id.clone(),
            seq: e.seq,
        }),
        _ => None,
    })
}

/// A snapshot of everything derived from a log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Derived {
    /// Seq of the newest event (0 for an empty log).
    pub head_seq: u64,
    /// See [`status()`].
    pub status: Status,
    /// See [`process_alive()`].
    pub process_alive: bool,
    /// True while a turn (or start-up with input) is in progress.
    pub turn_in_progress: bool,
    /// The current or last run id.
    pub run_id: Option<String>,
    /// See [`resume_id()`].
    pub resume_id: Option<String>,
    /// See [`context_lost()`].
    pub context_lost: Option<ContextLost>,
    /// See [`usage()`].
    pub usage: Usage,
    /// See [`activity()`].
    pub activity: Activity,
    /// See [`background_tasks()`].
    pub background_tasks: Vec<BackgroundTask>,
    /// See [`has_running_background_tasks()`].
    pub has_running_background_tasks: bool,
    /// See [`pending_permissions()`].
    pub pending_permissions: Vec<PendingPermission>,
    /// See [`scheduled_wakeup()`].
    pub scheduled_wakeup: Option<ScheduledWakeup>,
    /// See [`plan_outcomes()`].
    pub plan_outcomes: Vec<PlanOutcome>,
    /// See [`classify::pending_messages()`].
    pub pending_messages: Vec<PendingMessage>,
    /// See [`settings()`].
    pub settings: Settings,
    /// See [`title()`].
    pub title: String,
    /// The working directory of the latest run_start ("" before any): see
    /// [`TitleFold::cwd`].
    pub cwd: String,
    /// When the first event was appended (`None` for an empty log).
    pub created_at: Option<pbjson_types::Timestamp>,
    /// When the newest event was appended: the last activity.
    pub updated_at: Option<pbjson_types::Timestamp>,
}

/// Every derivation at once, incrementally: apply events in log order and
/// take a [`Derived`] snapshot whenever needed. O(1) amortized per event.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    status: StatusFold,
    usage: Usage,
    activity: activity::ActivityFold,
    tasks: tasks::TasksFold,
    permissions: permissions::PermissionsFold,
    wakeup: wakeup::WakeupFold,
    plans: plan::PlanFold,
    pending: PendingFold,
    settings: Settings,
    resume_id: Option<String>,
    context_lost: Option<ContextLost>,
    /// The agent of the latest run_start.
    agent: Option<String>,
    title: TitleFold,
}

impl Fold {
    /// The state of an empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies the next event of the log.
    pub fn apply(&mut self, e: &Event) {
        let before = self.status.turn_in_progress();
        self.status.apply(e);
        let began = !before && self.status.turn_in_progress();
        self.usage.apply(e);
        self.activity.apply(e, began);
        self.tasks.apply(e);
        self.permissions.apply(e);
        self.wakeup.apply(e);
        self.plans.apply(e);
        self.pending.apply(e, before);
        self.settings.apply(e);
        self.title.apply(e);
        if let Some(Payload::RunStart(rs)) = &e.payload {
            self.agent = Some(crate::vocab::agent::of_run(&rs.agent).to_owned());
        }
        if let Some(decided) = e.payload.as_ref().and_then(resume_decision) {
            self.resume_id = decided.map(str::to_owned);
        }
        if let Some(Payload::RunError(r)) = &e.payload
            && r.kind == RESUME_FAILED
        {
            self.context_lost = Some(ContextLost {
                resume_id: r.resume_id.clone(),
                seq: e.seq,
            });
        }
    }

    /// See [`resume_id()`].
    pub fn resume_id(&self) -> Option<&str> {
        self.resume_id.as_deref()
    }

    /// The agent that runs the session (its latest run_start's), `None`
    /// before any run.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    /// See [`title()`], the cwd and the first and newest event times.
    pub fn title(&self) -> &TitleFold {
        &self.title
    }

    /// See [`settings()`].
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// See [`context_lost()`].
    pub fn context_lost(&self) -> Option<&ContextLost> {
        self.context_lost.as_ref()
    }

    /// The status fold inside.
    pub fn status_fold(&self) -> &StatusFold {
        &self.status
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status.status()
    }

    /// The current activity.
    pub fn activity(&self) -> Activity {
        self.activity
            .activity(self.status.status(), &self.permissions)
    }

    /// Number of pending permission requests.
    pub fn pending_permission_count(&self) -> usize {
        self.permissions.count()
    }

    /// The pending permission request `request_id`, if it is pending.
    pub fn pending_permission(&self, request_id: &str) -> Option<&PendingPermission> {
        self.permissions.get(request_id)
    }

    /// The pending permission requests, oldest first (as
    /// [`pending_permissions()`], without copying).
    pub fn pending_permissions(&self) -> impl Iterator<Item = &PendingPermission> {
        self.permissions.iter()
    }

    /// A full snapshot.
    pub fn snapshot(&self) -> Derived {
        Derived {
            head_seq: self.status.head_seq(),
            status: self.status.status(),
            process_alive: self.status.process_alive(),
            turn_in_progress: self.status.turn_in_progress(),
            run_id: self.status.current_run_id().map(str::to_owned),
            resume_id: self.resume_id.clone(),
            context_lost: self.context_lost.clone(),
            usage: self.usage.clone(),
            activity: self.activity(),
            background_tasks: self.tasks.tasks().to_vec(),
            has_running_background_tasks: self.tasks.has_running(),
            pending_permissions: self.permissions.pending(),
            scheduled_wakeup: self.wakeup.current().cloned(),
            plan_outcomes: self.plans.plans().to_vec(),
            pending_messages: self.pending.list().to_vec(),
            settings: self.settings.clone(),
            title: self.title.title().to_owned(),
            cwd: self.title.cwd().to_owned(),
            created_at: self.title.created_at(),
            updated_at: self.title.updated_at(),
        }
    }

    /// What GetSession/ListSessions return for this log.
    pub fn session(&self, session_id: &str) -> pb::Session {
        pb::Session {
            session_id: session_id.to_owned(),
            head_seq: self.status.head_seq(),
            status: pb::SessionStatus::from(self.status.status()) as i32,
            process_alive: self.status.process_alive(),
            resume_id: self.resume_id.clone().unwrap_or_default(),
            usage: Some(pb::SessionUsage::from(&self.usage)),
            activity: self.activity().label,
            pending_permissions: u32::try_from(self.permissions.count()).unwrap_or(u32::MAX),
            run_id: self.status.current_run_id().unwrap_or_default().to_owned(),
            lost_resume_id: self
                .context_lost
                .as_ref()
                .map(|c| c.resume_id.clone())
                .unwrap_or_default(),
            model: self.settings.model.clone().unwrap_or_default(),
            permission_mode: self.settings.permission_mode.clone().unwrap_or_default(),
            max_thinking_tokens: self.settings.max_thinking_tokens,
            agent: self.agent.clone().unwrap_or_default(),
            title: self.title.title().to_owned(),
            cwd: self.title.cwd().to_owned(),
            created_at: self.title.created_at(),
            updated_at: self.title.updated_at(),
        }
    }
}

/// Every derivation in one pass over the log.
pub fn derive_all(events: &[Event]) -> Derived {
    fold(events).snapshot()
}

/// A session's derived state as the API returns it (GetSession,
/// ListSessions): head seq, status, process alive, resume id ("" when none),
/// usage, the activity label, the pending permission count, the current
/// or last run id and the lost resume id ([`context_lost()`], "" when none).
pub fn session(session_id: &str, events: &[Event]) -> pb::Session {
    fold(events).session(session_id)
}

fn fold(events: &[Event]) -> Fold {
    let mut f = Fold::new();
    for e in events {
        f.apply(e);
    }
    f
}
