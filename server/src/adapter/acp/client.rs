//! The client side of the Agent Client Protocol as a state machine, with
//! no I/O: each call takes what the agent wrote (or what the harness
//! wants) and pushes the JSON-RPC messages to write onto `out`.
//! [`super::process`] owns the process and writes them.
//!
//! Request ids are the client's own, integers: the handshake's are fixed
//! ([`INITIALIZE_ID`], [`SESSION_ID`]) so the decoder knows which of the
//! agent's answers is which without seeing what was written; every later
//! request (prompts, settings) counts up from [`FIRST_LATER_ID`]. The
//! agent's own requests number theirs in a separate space.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::mode_candidates;
use crate::adapter::{AdapterError, PermissionDecision};

/// The id of `initialize`.
pub const INITIALIZE_ID: u64 = 1;
/// The id of `session/new`, or `session/load` when the run resumes.
pub const SESSION_ID: u64 = 2;
/// The first id of everything after the handshake.
pub const FIRST_LATER_ID: u64 = 3;
/// The protocol version we speak.
pub const PROTOCOL_VERSION: u64 = 1;

/// After `session/load` is answered, the replayed history may still be
/// arriving: the first prompt waits until no update came for this long...
pub const REPLAY_QUIET: Duration = Duration::from_millis(300);
/// ...or this long after the answer, whichever comes first, so replay and
/// the new turn never interleave.
pub const REPLAY_CAP: Duration = Duration::from_secs(5);

/// The agent's request for a permission.
const REQUEST_PERMISSION: &str = "session/request_permission";

/// A note of ours for the decoder alone, never written to the agent: the
/// run cannot go on as asked (`params.message` says why). The leading
/// underscore is ACP's mark of a method outside the protocol.
pub const REFUSED: &str = "_agent-harness/refused";

/// A permission request of the agent's, not answered yet.
#[derive(Debug, Clone)]
struct Pending {
    /// Its JSON-RPC id, as the agent wrote it.
    id: Value,
    /// Its options: (optionId, kind).
    options: Vec<(String, String)>,
}

/// The replay of a loaded session, still arriving.
#[derive(Debug, Clone, Copy)]
struct Replay {
    answered: Instant,
    last_update: Instant,
}

/// One run's protocol state.
#[derive(Debug)]
pub struct Client {
    /// The agent's name, for messages.
    agent: String,
    cwd: String,
    /// The session to load ("" for a new one).
    resume: String,
    /// The load is not sent before this (see [`Client::load_not_before`]);
    /// `Some` while it waits.
    load_at: Option<Instant>,
    /// The agent answered `initialize`: nothing else may go out before.
    initialized: bool,
    next_id: u64,
    /// The session, once the agent created or loaded it.
    session_id: Option<String>,
    /// The session could not be created or loaded: inputs go nowhere.
    failed: bool,
    /// Why the run was refused (see [`REFUSED`]), for the inputs that
    /// still come before it ends.
    refusal: Option<String>,
    replay: Option<Replay>,
    /// User messages waiting for the session, the replay, or the running
    /// prompt's end.
    queued: VecDeque<String>,
    /// The running `session/prompt`'s id.
    prompt: Option<u64>,
    /// The mode ids the agent listed (`None`: it listed none).
    modes: Option<Vec<String>>,
    /// The model ids the agent listed.
    models: Option<Vec<String>>,
    /// Our permission mode to set once the session exists.
    mode_wanted: Option<String>,
    /// The run named that mode itself: an agent that cannot honour it
    /// ends the run (a mode only the operator's default implies is a
    /// warning: the agent's own default asks).
    mode_required: bool,
    /// The model to set once the session exists.
    model_wanted: Option<String>,
    /// The agent's permission requests not answered yet, by their id as
    /// compact JSON text (`permission_requested.request_id`).
    permissions: HashMap<String, Pending>,
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The answer to a permission request: the option chosen, or cancelled.
fn permission_outcome(id: &Value, option: Option<&str>) -> Value {
    let outcome = match option {
        Some(o) => json!({"outcome": "selected", "optionId": o}),
        None => json!({"outcome": "cancelled"}),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": {"outcome": outcome}})
}

/// The ids listed under `result[list][..][key]`.
fn listed(result: &Value, list: &str, key: &str) -> Option<Vec<String>> {
    let items = result.pointer(list)?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|m| m.get(key).and_then(Value::as_str).map(str::to_owned))
            .collect(),
    )
}

impl Client {
    /// A run of `agent` in `cwd`, loading `resume` when not empty, starting
    /// in permission mode `mode` and with `model` when given.
    pub fn new(agent: &str, cwd: &str, resume: &str, mode: Option<String>, model: &str) -> Self {
        Self::with_mode(agent, cwd, resume, mode, false, model)
    }

    /// [`Client::new`], where `required` says the run named `mode` itself.
    pub fn with_mode(
        agent: &str,
        cwd: &str,
        resume: &str,
        mode: Option<String>,
        required: bool,
        model: &str,
    ) -> Self {
        Self {
            agent: agent.to_owned(),
            cwd: cwd.to_owned(),
            resume: resume.to_owned(),
            load_at: None,
            initialized: false,
            next_id: FIRST_LATER_ID,
            session_id: None,
            failed: false,
            refusal: None,
            replay: None,
            queued: VecDeque::new(),
            prompt: None,
            modes: None,
            models: None,
            mode_wanted: mode,
            mode_required: required,
            model_wanted: (!model.is_empty()).then(|| model.to_owned()),
            permissions: HashMap::new(),
        }
    }

    /// Holds the `session/load` back until `at`: an agent may name its
    /// record of a session by the minute it was created or loaded, so a
    /// load within the same minute as the last one would write over the
    /// very record it is about to read (Gemini CLI loses the conversation).
    pub fn load_not_before(&mut self, at: Instant) {
        self.load_at = Some(at);
    }

    /// The first message: `initialize`, offering no file system and no
    /// terminal (the agent then runs its own tools).
    pub fn initialize(&self) -> Value {
        request(
            INITIALIZE_ID,
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": false, "writeTextFile": false},
                    "terminal": false,
                },
                "clientInfo": {"name": "agent-harness", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
    }

    fn later(&mut self, method: &str, params: Value, out: &mut Vec<Value>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        out.push(request(id, method, params));
        id
    }

    /// Reads one message the agent wrote. What it leads to that must wait
    /// (the load held back, the end of a loaded session's replay) is for
    /// the caller to send at [`Client::wait_deadline`] ([`Client::wait_over`]).
    pub fn observe(&mut self, msg: &Map<String, Value>, now: Instant, out: &mut Vec<Value>) {
        let method = msg.get("method").and_then(Value::as_str);
        match (method, msg.get("id")) {
            (Some(method), Some(id)) => self.agent_request(method, id, msg.get("params"), out),
            (Some("session/update"), None) => {
                if let Some(r) = &mut self.replay {
                    r.last_update = now;
                }
            }
            (None, Some(id)) => {
                if let Some(id) = id.as_u64() {
                    self.answer(id, msg, now, out);
                }
            }
            _ => {}
        }
    }

    /// A request of the agent's: a permission waits for RespondPermission;
    /// anything else (the file system and terminal we do not offer) is
    /// refused at once, so the agent never waits for it.
    fn agent_request(
        &mut self,
        method: &str,
        id: &Value,
        params: Option<&Value>,
        out: &mut Vec<Value>,
    ) {
        if method == REQUEST_PERMISSION {
            let options = params
                .and_then(|p| p.get("options"))
                .and_then(Value::as_array)
                .map(|os| {
                    os.iter()
                        .filter_map(|o| {
                            Some((
                                o.get("optionId")?.as_str()?.to_owned(),
                                o.get("kind")?.as_str()?.to_owned(),
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            self.permissions.insert(
                id.to_string(),
                Pending {
                    id: id.clone(),
                    options,
                },
            );
            return;
        }
        out.push(json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32601,
            "message": format!("agent-harness does not offer {method}"),
        }}));
    }

    /// An answer to one of our requests.
    fn answer(&mut self, id: u64, msg: &Map<String, Value>, now: Instant, out: &mut Vec<Value>) {
        let result = msg.get("result").filter(|_| !msg.contains_key("error"));
        match (id, result) {
            // The decoder reports why the handshake failed.
            (INITIALIZE_ID | SESSION_ID, None) => self.fail(),
            (INITIALIZE_ID, Some(_)) => {
                self.initialized = true;
                match self.load_at {
                    Some(at) if now < at => {}
                    _ => self.open_session(out),
                }
            }
            (SESSION_ID, Some(result)) => {
                let id = match result.get("sessionId").and_then(Value::as_str) {
                    Some(id) => id.to_owned(),
                    None => self.resume.clone(),
                };
                self.session_id = Some(id);
                self.modes = listed(result, "/modes/availableModes", "id");
                self.models = listed(result, "/models/availableModels", "modelId");
                if let Err(why) = self.start_settings(out) {
                    // The run asked for what the agent cannot do: no
                    // prompt goes out in a mode or model nobody chose.
                    out.clear();
                    self.fail();
                    out.push(notification(REFUSED, json!({"message": why})));
                    self.refusal = Some(why);
                    return;
                }
                if self.resume.is_empty() {
                    self.next_prompt(out);
                } else {
                    self.replay = Some(Replay {
                        answered: now,
                        last_update: now,
                    });
                }
            }
            (id, _) if Some(id) == self.prompt => {
                self.prompt = None;
                // The prompt is over: whatever it still asked is moot.
                self.permissions.clear();
                self.next_prompt(out);
            }
            _ => {}
        }
    }

    /// The run's own mode and model, set once the session exists. `Err`
    /// when the agent cannot honour one the run named.
    fn start_settings(&mut self, out: &mut Vec<Value>) -> Result<(), String> {
        if let Some(mode) = self.mode_wanted.take()
            && let Err(why) = self.set_mode(&mode, out)
        {
            if self.mode_required {
                return Err(why);
            }
            tracing::warn!(agent = %self.agent, "{why}");
        }
        if let Some(model) = self.model_wanted.take() {
            self.set_model(&model, out)?;
        }
        Ok(())
    }

    /// `session/new`, or `session/load` of the session the run resumes.
    fn open_session(&mut self, out: &mut Vec<Value>) {
        self.load_at = None;
        let (method, params) = if self.resume.is_empty() {
            ("session/new", json!({"cwd": self.cwd, "mcpServers": []}))
        } else {
            (
                "session/load",
                json!({"sessionId": self.resume, "cwd": self.cwd, "mcpServers": []}),
            )
        };
        out.push(request(SESSION_ID, method, params));
    }

    fn fail(&mut self) {
        self.failed = true;
        self.queued.clear();
    }

    /// When the current wait may be over: the held-back load's time, or
    /// the replay's quiet deadline; `None` when nothing waits. A load held
    /// back waits for `initialize`'s answer too: until then that answer is
    /// what sends it, however late (an agent refuses any request before).
    pub fn wait_deadline(&self) -> Option<Instant> {
        if self.session_id.is_none() {
            return self.load_at.filter(|_| self.initialized);
        }
        self.replay
            .map(|r| (r.last_update + REPLAY_QUIET).min(r.answered + REPLAY_CAP))
    }

    /// Called at [`Client::wait_deadline`]: sends the held-back load, or
    /// ends a replay that has gone quiet and sends the first prompt.
    /// Returns false while the wait goes on (an update came since).
    pub fn wait_over(&mut self, now: Instant, out: &mut Vec<Value>) -> bool {
        match self.wait_deadline() {
            Some(deadline) if now < deadline => false,
            None => true,
            Some(_) if self.session_id.is_none() => {
                if !self.failed {
                    self.open_session(out);
                }
                true
            }
            Some(_) => {
                self.replay = None;
                self.next_prompt(out);
                true
            }
        }
    }

    /// Sends the next queued message once the session exists, its replay is
    /// over and no prompt runs: one prompt at a time, a message sent
    /// mid-turn becomes the next turn, as the claude CLI treats one.
    fn next_prompt(&mut self, out: &mut Vec<Value>) {
        if self.prompt.is_some() || self.replay.is_some() {
            return;
        }
        let Some(session) = self.session_id.clone() else {
            return;
        };
        if let Some(text) = self.queued.pop_front() {
            let id = self.later(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
                out,
            );
            self.prompt = Some(id);
        }
    }

    /// A user message.
    pub fn write(&mut self, text: &str, out: &mut Vec<Value>) -> Result<(), AdapterError> {
        if let Some(why) = &self.refusal {
            return Err(AdapterError::Unable(why.clone()));
        }
        if self.failed {
            return Err(AdapterError::Write(format!(
                "{} could not create or load the session",
                self.agent
            )));
        }
        self.queued.push_back(text.to_owned());
        self.next_prompt(out);
        Ok(())
    }

    /// Stop's first rung: `session/cancel`, and every permission request
    /// still pending answered `cancelled` (an agent may wait for that
    /// before it answers the prompt). False when no prompt runs: the
    /// caller goes on to signals. Messages not sent yet are dropped.
    pub fn interrupt(&mut self, out: &mut Vec<Value>) -> bool {
        self.queued.clear();
        let (Some(_), Some(session)) = (self.prompt, self.session_id.clone()) else {
            return false;
        };
        out.push(notification(
            "session/cancel",
            json!({"sessionId": session}),
        ));
        for (_, p) in self.permissions.drain() {
            out.push(permission_outcome(&p.id, None));
        }
        true
    }

    /// Answers permission request `request_id` (compact JSON text of its id)
    /// with the option of the kind `decision` needs: allow → `allow_once`;
    /// deny → `reject_once`, else `reject_always`. An option is never
    /// guessed by its id: none of the kind is an error, nothing written.
    pub fn respond(
        &mut self,
        request_id: &str,
        decision: &PermissionDecision,
        out: &mut Vec<Value>,
    ) -> Result<(), AdapterError> {
        let Some(pending) = self.permissions.get(request_id) else {
            return Err(AdapterError::Write(format!(
                "{} has no pending permission request {request_id}",
                self.agent
            )));
        };
        let kinds: &[&str] = match decision {
            PermissionDecision::Allow { .. } => &["allow_once"],
            PermissionDecision::Deny { .. } => &["reject_once", "reject_always"],
        };
        let Some(option) = kinds
            .iter()
            .find_map(|k| pending.options.iter().find(|(_, kind)| kind == k))
        else {
            return Err(AdapterError::Unable(format!(
                "{}'s request {request_id} offers no option of kind {}",
                self.agent,
                kinds.join(" or ")
            )));
        };
        out.push(permission_outcome(&pending.id, Some(&option.0)));
        self.permissions.remove(request_id);
        Ok(())
    }

    /// SetPermissionMode: `session/set_mode` with the first of the agent's
    /// listed modes that stands for `mode`. Before the session exists the
    /// mode is kept for it.
    pub fn set_mode(&mut self, mode: &str, out: &mut Vec<Value>) -> Result<Value, String> {
        let candidates = mode_candidates(mode)?;
        let Some(session) = self.session_id.clone() else {
            self.mode_wanted = Some(mode.to_owned());
            return Ok(json!({}));
        };
        let Some(modes) = &self.modes else {
            return Err(format!(
                "{} lists no permission modes (asked for {mode:?})",
                self.agent
            ));
        };
        let Some(id) = candidates.iter().find(|c| modes.iter().any(|m| m == *c)) else {
            return Err(format!(
                "{} has no mode for {mode:?} (it lists {})",
                self.agent,
                modes.join(", ")
            ));
        };
        self.later(
            "session/set_mode",
            json!({"sessionId": session, "modeId": id}),
            out,
        );
        Ok(json!({}))
    }

    /// SetModel: `session/set_model` with one of the models the agent
    /// listed.
    pub fn set_model(&mut self, model: &str, out: &mut Vec<Value>) -> Result<Value, String> {
        if model.is_empty() {
            return Err(format!(
                "{} cannot go back to its default model within a session; name a model",
                self.agent
            ));
        }
        let Some(session) = self.session_id.clone() else {
            self.model_wanted = Some(model.to_owned());
            return Ok(json!({}));
        };
        let Some(models) = &self.models else {
            return Err(format!(
                "{} does not let a client choose its model (asked for {model:?})",
                self.agent
            ));
        };
        if !models.iter().any(|m| m == model) {
            return Err(format!(
                "{} has no model {model:?} (it lists {})",
                self.agent,
                models.join(", ")
            ));
        }
        self.later(
            "session/set_model",
            json!({"sessionId": session, "modelId": model}),
            out,
        );
        Ok(json!({}))
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
