//! The agent's answers to the harness's requests: the handshake's
//! (`initialize`, then `session/new` or `session/load`: the run_ready, or
//! the session that cannot be loaded), a prompt's (its turn's end) and
//! everything else's (an error is never dropped).

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::{Map, Value};

use super::{AcpDecoder, INITIALIZE_ID, SESSION_ID};
use crate::decoder::json::str_at;
use crate::decoder::line;

impl AcpDecoder {
    /// An answer to the request `id`.
    pub(super) fn answer(&mut self, id: &Value, obj: &Map<String, Value>) -> Vec<Payload> {
        let number = id.as_u64();
        if let Some(error) = obj.get("error") {
            let message = error_text(error);
            return match number {
                Some(SESSION_ID) if !self.resume_id.is_empty() => {
                    // The session cannot be loaded (an unknown id, or the
                    // agent lost its files): no turn ran, the manager's
                    // lost-conversation path takes over.
                    self.replaying = false;
                    vec![Payload::RunError(pb::RunError {
                        message: format!("the agent could not load the session: {message}"),
                        kind: run_error_kind::RESUME_FAILED.into(),
                        resume_id: self.resume_id.clone(),
                    })]
                }
                Some(n) if self.is_prompt(n) && self.first_after_load => {
                    // The load was accepted but the conversation is gone
                    // (codex-acp with its rollout files deleted): as if
                    // the load had failed, so the next run starts anew.
                    self.first_after_load = false;
                    let mut out = vec![Payload::RunError(pb::RunError {
                        message: format!("the agent lost the loaded session: {message}"),
                        kind: run_error_kind::RESUME_FAILED.into(),
                        resume_id: self.resume_id.clone(),
                    })];
                    out.extend(self.prompt_failed(message));
                    out
                }
                Some(n) if self.is_prompt(n) => self.prompt_failed(message),
                _ => vec![line::run_error(
                    run_error_kind::CLI_ERROR,
                    format!("the agent answered with an error: {message}"),
                )],
            };
        }
        let result = obj.get("result").unwrap_or(&Value::Null);
        match number {
            Some(INITIALIZE_ID) => {
                self.version = result
                    .get("agentInfo")
                    .map(|a| str_at(a, "version"))
                    .unwrap_or_default();
                Vec::new()
            }
            Some(SESSION_ID) => self.ready(result),
            _ if result.get("stopReason").is_some() => self.prompt_answered(number, result),
            _ => Vec::new(),
        }
    }

    /// The session/new or session/load answer: the session is ready.
    fn ready(&mut self, result: &Value) -> Vec<Payload> {
        // session/load answers without the id: it is the one loaded.
        let announced = str_at(result, "sessionId");
        self.session_id = if announced.is_empty() {
            self.resume_id.clone()
        } else {
            announced
        };
        self.model = result
            .get("models")
            .map(|m| str_at(m, "currentModelId"))
            .unwrap_or_default();
        vec![Payload::RunReady(pb::RunReady {
            agent: self.agent.clone(),
            resume_id: self.session_id.clone(),
            model: self.model.clone(),
            cli_version: self.version.clone(),
            pid: self.pid.unwrap_or(0),
            // The agent's modes are not our permission modes: the launch
            // policy check reads this field as one.
            ..Default::default()
        })]
    }
}

/// An error object's text: its message, with the details an agent puts in
/// `data` (Gemini's "Internal error" says what went wrong only there).
fn error_text(error: &Value) -> String {
    let message = str_at(error, "message");
    let details = match error.get("data") {
        Some(Value::String(s)) => s.clone(),
        Some(data) => {
            let d = str_at(data, "details");
            if d.is_empty() {
                str_at(data, "message")
            } else {
                d
            }
        }
        None => String::new(),
    };
    match (message.is_empty(), details.is_empty()) {
        (true, true) => crate::nesting::json_text(error),
        (false, true) => message,
        (true, false) => details,
        (false, false) => format!("{message}: {details}"),
    }
}
