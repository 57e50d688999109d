//! `system/init` lines: the `run_ready` they announce, repeated only when
//! what a client sees of the process changed (its fingerprint), and the
//! `turn_start` of a turn the CLI started by itself.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::{Map, Value};

use super::Normalizer;
use crate::decoder::json::{str_at, str_of};

/// What makes two inits "the same" for run_ready purposes.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ReadyFingerprint {
    resume_id: String,
    model: String,
    tools: Vec<String>,
    cwd: String,
    permission_mode: String,
    mcp: Vec<(String, String)>,
}

impl Normalizer {
    pub(super) fn init(&mut self, obj: &Map<String, Value>) -> Vec<Payload> {
        let ready = pb::RunReady {
            agent: agent_harness_protocol::vocab::agent::CLAUDE.into(),
            resume_id: str_of(obj, "session_id"),
            model: str_of(obj, "model"),
            tools: obj
                .get("tools")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            cwd: str_of(obj, "cwd"),
            mcp_servers: obj
                .get("mcp_servers")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|s| pb::McpServer {
                            name: str_at(s, "name"),
                            status: str_at(s, "status"),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            permission_mode: str_of(obj, "permissionMode"),
            cli_version: str_of(obj, "claude_code_version"),
            pid: self.pid.unwrap_or(0),
        };
        let fingerprint = ReadyFingerprint {
            resume_id: ready.resume_id.clone(),
            model: ready.model.clone(),
            tools: ready.tools.clone(),
            cwd: ready.cwd.clone(),
            permission_mode: ready.permission_mode.clone(),
            mcp: ready
                .mcp_servers
                .iter()
                .map(|m| (m.name.clone(), m.status.clone()))
                .collect(),
        };
        let mut out = Vec::new();
        let first = self.last_ready.is_none();
        if self.last_ready.as_ref() != Some(&fingerprint) {
            self.last_ready = Some(fingerprint);
            out.push(Payload::RunReady(ready));
        }
        // The first init of a run always answers the spawn's own input (the
        // prompt or the first Send); a later one without input since the last
        // result is a turn the CLI started by itself.
        if !first && !self.input_since_result && !self.turn_active {
            let origin = if self.notification_since_result {
                "task-notification"
            } else {
                "cron"
            };
            out.push(Payload::TurnStart(pb::TurnStart {
                origin: origin.into(),
            }));
        }
        self.input_since_result = false;
        self.turn_active = true;
        out
    }
}
