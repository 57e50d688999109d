//! The thread the run drives: its `run_ready`, and Codex's answers to the
//! harness's requests (the thread it started or resumed, or an error).

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::{Map, Value};

use super::CodexDecoder;
use crate::decoder::json::str_at;
use crate::decoder::line;

/// What Codex answers `thread/resume` with when it has no rollout file for
/// the thread (0.169.0: code -32600, "no rollout found for thread id <id>").
const NO_ROLLOUT: &str = "no rollout found for thread id ";

/// What makes two thread announcements "the same" for run_ready purposes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fingerprint {
    pub(super) thread_id: String,
    pub(super) model: String,
    pub(super) cwd: String,
}

impl CodexDecoder {
    /// An answer to one of the harness's requests.
    pub(super) fn answer(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
        if let Some(error) = obj.get("error") {
            let message = str_at(error, "message");
            if let Some(thread) = message.strip_prefix(NO_ROLLOUT) {
                let resume_id = if self.resume_id.is_empty() {
                    thread.trim().to_owned()
                } else {
                    self.resume_id.clone()
                };
                return vec![Payload::RunError(pb::RunError {
                    message,
                    kind: run_error_kind::RESUME_FAILED.into(),
                    resume_id,
                })];
            }
            let message = if message.is_empty() {
                format!(
                    "Codex answered with an error: {}",
                    crate::nesting::json_text(error)
                )
            } else {
                format!("Codex answered with an error: {message}")
            };
            return vec![line::run_error(run_error_kind::CLI_ERROR, message)];
        }
        let Some(result) = obj.get("result") else {
            return Vec::new();
        };
        // thread/start and thread/resume answer with the thread and the
        // settings it runs with; other answers are the process side's.
        match result.get("thread") {
            Some(thread) if thread.get("id").is_some() => self.ready(thread, Some(result)),
            _ => Vec::new(),
        }
    }

    /// A run_ready for `thread` unless nothing a client sees changed.
    /// `answer`: the thread/start or thread/resume answer (its model and
    /// cwd are the effective ones).
    pub(super) fn ready(&mut self, thread: &Value, answer: Option<&Value>) -> Vec<Payload> {
        let from_answer = |key: &str| {
            answer
                .map(|a| str_at(a, key))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| str_at(thread, key))
        };
        let fingerprint = Fingerprint {
            thread_id: str_at(thread, "id"),
            model: from_answer("model"),
            cwd: from_answer("cwd"),
        };
        if fingerprint.thread_id.is_empty() || self.ready.as_ref() == Some(&fingerprint) {
            return Vec::new();
        }
        // thread/started follows the answer and may say less (no model):
        // only a new thread makes it announce again.
        if answer.is_none()
            && self
                .ready
                .as_ref()
                .is_some_and(|r| r.thread_id == fingerprint.thread_id)
        {
            return Vec::new();
        }
        let ready = pb::RunReady {
            agent: agent_harness_protocol::vocab::agent::CODEX.into(),
            resume_id: fingerprint.thread_id.clone(),
            model: fingerprint.model.clone(),
            cwd: fingerprint.cwd.clone(),
            cli_version: str_at(thread, "cliVersion"),
            pid: self.pid.unwrap_or(0),
            // Codex's approval policy and sandbox are not our permission
            // modes: the launch policy check reads this field as one.
            ..Default::default()
        };
        self.ready = Some(fingerprint);
        vec![Payload::RunReady(ready)]
    }

    /// The thread the run drives, once announced.
    pub(super) fn thread_id(&self) -> Option<&str> {
        self.ready.as_ref().map(|r| r.thread_id.as_str())
    }

    /// Whether a notification about `params.threadId` is about another
    /// thread (a sub-agent's), which this log does not follow.
    pub(super) fn other_thread(&self, params: &Value) -> bool {
        let thread = str_at(params, "threadId");
        !thread.is_empty() && self.thread_id().is_some_and(|t| t != thread)
    }
}
