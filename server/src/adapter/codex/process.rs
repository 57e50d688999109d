//! The process side of a Codex run: the handshake (`initialize`, then
//! `initialized` and `thread/start`, or `thread/resume` when the run
//! resumes a thread), a `turn/start` per user message (queued until the
//! thread's id is known and the turn before it is over), `turn/interrupt` for Stop's first rung, the
//! answers to Codex's approval requests, and the settings the adapter
//! applies itself (a model or permission mode chosen mid-session goes with
//! the next `turn/start`).
//!
//! Every line Codex writes goes to the run's decoder unchanged; a tap on
//! the way reads the ones the process side needs (the answers to its own
//! requests, which turn is running, what each approval request asks) and
//! refuses at once the requests of Codex's the harness has no answer for
//! (user input, MCP elicitations, dynamic tools, token refreshes), so
//! Codex never waits on them.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Approval, approval_for};
use crate::adapter::claude::PermissionMode;
use crate::adapter::{
    AdapterError, PermissionDecision, ProcessControl, ProcessHandle, Signal, SpawnConfig,
    StdoutLine, UserInput,
};
use crate::supervise::{self, ProcessGroup, ProcessSpec, StdinWriter};

/// Lines buffered between the tap and the run task.
const TAPPED_LINES: usize = 256;

/// What one of the adapter's own requests was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Initialize,
    Thread,
    Turn,
    Interrupt,
}

/// The process side's state, shared by the control and the tap.
#[derive(Debug, Default)]
struct State {
    /// The last request id used (the adapter's id space; Codex's own
    /// requests number theirs separately).
    last_id: u64,
    /// The adapter's requests not answered yet.
    asked: HashMap<u64, Asked>,
    /// The `thread/start` or `thread/resume` to send once `initialize` is
    /// answered.
    thread_request: Option<Value>,
    /// The thread, once Codex named it.
    thread_id: Option<String>,
    /// The thread could not be started or resumed: inputs go nowhere.
    thread_failed: bool,
    /// User messages waiting for the thread, or for the running turn to end.
    queued: VecDeque<String>,
    /// The running turn, once known.
    turn_id: Option<String>,
    /// A `turn/start` was sent and its turn is not over.
    turn_open: bool,
    /// Stop came before the turn's id was known: interrupt it then.
    interrupt_wanted: bool,
    /// A model chosen since the last `turn/start`.
    model: Option<String>,
    /// An approval policy and sandbox chosen since the last `turn/start`.
    approval: Option<Approval>,
    /// Codex's approval requests not answered yet, by their id as the
    /// decoder renders it (`permission_requested.request_id`): what each
    /// asked, which decides the answer's shape.
    approvals: HashMap<String, Asking>,
}

/// What one of Codex's approval requests asks.
#[derive(Debug, Clone)]
enum Asking {
    /// A command or a file change: `{decision}` answers it.
    Decision,
    /// More sandbox permissions (`item/permissions/requestApproval`): the
    /// permissions granted answer it (these, or none).
    Permissions(Value),
}

/// The approval requests the decoder relays as `permission_requested`.
const APPROVALS: [&str; 3] = [
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
];

/// A user message as a `turn/start`'s input.
fn turn_input(text: &str) -> Value {
    json!([{"type": "text", "text": text, "text_elements": []}])
}

/// The answer to approval request `id` (asking `asking`, when known).
fn approval_answer(id: Value, asking: Option<&Asking>, decision: &PermissionDecision) -> Value {
    let allow = matches!(decision, PermissionDecision::Allow { .. });
    let result = match asking {
        Some(Asking::Permissions(asked)) => match allow {
            true => json!({"permissions": asked, "scope": "turn"}),
            false => json!({"permissions": {}}),
        },
        // Codex's answer carries no message for the model.
        _ => json!({"decision": if allow { "accept" } else { "decline" }}),
    };
    json!({"id": id, "result": result})
}

/// What a cassette records for a user message: the `turn/start` it
/// becomes (its request id and thread are the process's, unknown to a
/// wrapper around the control).
pub fn turn_start_line(input: &UserInput) -> String {
    json!({"method": "turn/start", "params": {"input": turn_input(&input.text)}}).to_string()
}

/// What a cassette records for Stop's first rung: the `turn/interrupt`.
pub fn interrupt_line() -> String {
    json!({"method": "turn/interrupt"}).to_string()
}

/// What a cassette records for a permission answer: the answer to a
/// command or file-change approval (`request_id` as the decoder renders
/// Codex's request id).
pub fn approval_answer_line(request_id: &str, decision: &PermissionDecision) -> String {
    let id = serde_json::from_str(request_id).unwrap_or_else(|_| json!(request_id));
    approval_answer(id, None, decision).to_string()
}

/// Controls one Codex process.
pub struct CodexControl {
    stdin: StdinWriter,
    group: ProcessGroup,
    state: Arc<Mutex<State>>,
    /// The operator's `--permissions`, for a permission mode chosen
    /// mid-session.
    permissions: PermissionMode,
}

/// Spawns `spec` (codex app-server), starts the handshake for `config`
/// (`approval`: the settings of its permission mode) and sends its prompt
/// as the first turn.
pub async fn start(
    spec: &ProcessSpec,
    config: &SpawnConfig,
    approval: Option<Approval>,
    permissions: PermissionMode,
) -> Result<ProcessHandle, AdapterError> {
    let child = supervise::spawn(spec).await?;
    let c = &config.config;
    let mut params = serde_json::Map::new();
    let method = if c.resume.is_empty() {
        if !c.cwd.is_empty() {
            params.insert("cwd".into(), json!(c.cwd));
        }
        "thread/start"
    } else {
        params.insert("threadId".into(), json!(c.resume));
        "thread/resume"
    };
    if let Some(a) = approval {
        params.insert("approvalPolicy".into(), json!(a.policy));
        params.insert("sandbox".into(), json!(a.sandbox));
        if let Some(config) = a.thread_config() {
            params.insert("config".into(), config);
        }
    }
    if !c.model.is_empty() {
        params.insert("model".into(), json!(c.model));
    }
    let state = Arc::new(Mutex::new(State {
        thread_request: Some(json!({"method": method, "params": params})),
        ..State::default()
    }));
    let control = Arc::new(CodexControl {
        stdin: child.stdin.expect("the codex spec pipes stdin"),
        group: child.group,
        state: state.clone(),
        permissions,
    });
    let (tx, rx) = mpsc::channel(TAPPED_LINES);
    config
        .tasks
        .spawn("codex tap", tap(child.stdout, tx, control.clone()));
    control.request(
        &mut control.lock(),
        Asked::Initialize,
        "initialize",
        json!({
            "clientInfo": {"name": "agent-harness", "version": env!("CARGO_PKG_VERSION")},
        }),
    )?;
    if !c.prompt.is_empty() {
        control.write(&UserInput {
            text: c.prompt.clone(),
            ..UserInput::default()
        })?;
    }
    Ok(ProcessHandle {
        stdout: rx,
        exited: child.exited,
        control,
        pid: Some(child.pid),
        start_time: child.start_time,
        process_id: Some(format!("pid:{}", child.pid)),
    })
}

/// Hands every line on to the run task, after reading what the process
/// side needs from it.
async fn tap(
    mut lines: mpsc::Receiver<StdoutLine>,
    tx: mpsc::Sender<StdoutLine>,
    control: Arc<CodexControl>,
) {
    while let Some(line) = lines.recv().await {
        if let StdoutLine::Line(text) = &line
            && let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(text)
            && let Err(e) = control.observe(&msg)
        {
            tracing::debug!(error = %e, "codex: could not write to the process");
        }
        if tx.send(line).await.is_err() {
            // The run task is gone; keep draining so the process never
            // blocks on a full pipe.
            continue;
        }
    }
}

impl CodexControl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, msg: &Value) -> Result<(), AdapterError> {
        if !self.group.alive() {
            return Err(AdapterError::NotRunning);
        }
        self.stdin.send_line(&msg.to_string())
    }

    /// Sends one of the adapter's requests, remembering what it was.
    fn request(
        &self,
        state: &mut State,
        asked: Asked,
        method: &str,
        params: Value,
    ) -> Result<(), AdapterError> {
        state.last_id += 1;
        let id = state.last_id;
        state.asked.insert(id, asked);
        self.send(&json!({"id": id, "method": method, "params": params}))
    }

    /// Starts a turn with `text` on the known thread, with the settings
    /// chosen since the last one.
    fn turn(&self, state: &mut State, thread_id: &str, text: &str) -> Result<(), AdapterError> {
        let mut params = json!({"threadId": thread_id, "input": turn_input(text)});
        if let Some(model) = state.model.take() {
            params["model"] = json!(model);
        }
        if let Some(a) = state.approval.take() {
            params["approvalPolicy"] = json!(a.policy);
            params["sandboxPolicy"] = a.sandbox_policy();
        }
        state.turn_open = true;
        self.request(state, Asked::Turn, "turn/start", params)
    }

    /// Starts the next queued input's turn once the thread is known and no
    /// turn is open. One turn at a time: a `turn/start` sent while a turn
    /// runs is steered into it by Codex, which drops the message it was
    /// writing; queued, a message sent mid-turn becomes the next turn, as
    /// the claude CLI treats one.
    fn next_turn(&self, state: &mut State) -> Result<(), AdapterError> {
        let Some(thread) = state.thread_id.clone() else {
            return Ok(());
        };
        if state.turn_open {
            return Ok(());
        }
        match state.queued.pop_front() {
            Some(text) => self.turn(state, &thread, &text),
            None => Ok(()),
        }
    }

    fn interrupt_turn(&self, state: &mut State) -> Result<(), AdapterError> {
        let (Some(thread), Some(turn)) = (state.thread_id.clone(), state.turn_id.clone()) else {
            state.interrupt_wanted = true;
            return Ok(());
        };
        state.interrupt_wanted = false;
        self.request(
            state,
            Asked::Interrupt,
            "turn/interrupt",
            json!({"threadId": thread, "turnId": turn}),
        )
    }

    /// Reads one message Codex wrote: an answer to the adapter's requests,
    /// or the start and end of a turn.
    fn observe(&self, msg: &serde_json::Map<String, Value>) -> Result<(), AdapterError> {
        let mut state = self.lock();
        let state = &mut *state;
        if let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
        {
            // A request of Codex's own. Approvals wait for RespondPermission;
            // anything else the harness has no answer for is refused at
            // once, so Codex never waits for it.
            if APPROVALS.contains(&method) {
                let asking = match method {
                    "item/permissions/requestApproval" => Asking::Permissions(
                        msg.get("params")
                            .and_then(|p| p.get("permissions"))
                            .cloned()
                            .unwrap_or_else(|| json!({})),
                    ),
                    _ => Asking::Decision,
                };
                state.approvals.insert(id.to_string(), asking);
            } else {
                self.send(&json!({"id": id, "error": {
                    "code": -32601,
                    "message": format!("agent-harness does not answer {method}"),
                }}))?;
            }
            return Ok(());
        }
        if let Some(method) = msg.get("method").and_then(Value::as_str) {
            let params = msg.get("params");
            match method {
                "serverRequest/resolved" => {
                    if let Some(id) = params.and_then(|p| p.get("requestId")) {
                        state.approvals.remove(&id.to_string());
                    }
                }
                "turn/started" => {
                    state.turn_id = params
                        .and_then(|p| p.pointer("/turn/id"))
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    if state.interrupt_wanted {
                        self.interrupt_turn(state)?;
                    }
                }
                "turn/completed" => {
                    state.turn_id = None;
                    state.turn_open = false;
                    state.interrupt_wanted = false;
                    self.next_turn(state)?;
                }
                _ => {}
            }
            return Ok(());
        }
        let Some(asked) = msg
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| state.asked.remove(&id))
        else {
            return Ok(());
        };
        let result = msg.get("result");
        match asked {
            Asked::Initialize => {
                self.send(&json!({"method": "initialized"}))?;
                if let Some(mut request) = state.thread_request.take() {
                    let params = request["params"].take();
                    let method = request["method"].as_str().unwrap_or_default().to_owned();
                    self.request(state, Asked::Thread, &method, params)?;
                }
            }
            Asked::Thread => match result
                .and_then(|r| r.pointer("/thread/id"))
                .and_then(Value::as_str)
            {
                Some(id) => {
                    state.thread_id = Some(id.to_owned());
                    self.next_turn(state)?;
                }
                // The decoder reports why (a lost rollout is resume_failed).
                None => {
                    state.thread_failed = true;
                    state.queued.clear();
                }
            },
            Asked::Turn => {
                if let Some(id) = result
                    .and_then(|r| r.pointer("/turn/id"))
                    .and_then(Value::as_str)
                {
                    state.turn_id = Some(id.to_owned());
                    if state.interrupt_wanted {
                        self.interrupt_turn(state)?;
                    }
                } else if result.is_none() {
                    state.turn_open = false;
                    self.next_turn(state)?;
                }
            }
            Asked::Interrupt => {}
        }
        Ok(())
    }
}

impl ProcessControl for CodexControl {
    fn write(&self, input: &UserInput) -> Result<(), AdapterError> {
        if !input.content_blocks.is_empty() {
            return Err(AdapterError::Unable(
                "Codex takes text input only (content_blocks)".into(),
            ));
        }
        if !self.group.alive() {
            return Err(AdapterError::NotRunning);
        }
        let mut state = self.lock();
        let state = &mut *state;
        if state.thread_failed {
            return Err(AdapterError::Write(
                "Codex could not start or resume the thread".into(),
            ));
        }
        state.queued.push_back(input.text.clone());
        self.next_turn(state)
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        let mut state = self.lock();
        let state = &mut *state;
        if !state.turn_open && state.queued.is_empty() {
            // No turn to interrupt: the ladder goes on to signals.
            return Ok(false);
        }
        // Inputs not sent yet are dropped: Stop ends what was asked.
        state.queued.clear();
        self.interrupt_turn(state)?;
        Ok(true)
    }

    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        // The request's JSON id, as the decoder rendered it.
        let id: Value = serde_json::from_str(request_id).map_err(|e| {
            AdapterError::Write(format!("not a Codex request id {request_id:?}: {e}"))
        })?;
        let asking = self.lock().approvals.remove(&id.to_string());
        self.send(&approval_answer(id, asking.as_ref(), decision))
    }

    fn answer_control(&self, request: &Value) -> Option<Result<Value, String>> {
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        let mut state = self.lock();
        Some(match subtype {
            "set_model" => match request.get("model").and_then(Value::as_str) {
                Some(model) if !model.is_empty() => {
                    state.model = Some(model.to_owned());
                    Ok(json!({}))
                }
                _ => Err(
                    "Codex cannot go back to its default model within a session; \
                          name a model"
                        .into(),
                ),
            },
            "set_permission_mode" => {
                let mode = request.get("mode").and_then(Value::as_str).unwrap_or("");
                match approval_for(mode, self.permissions) {
                    Ok(Some(a)) => {
                        state.approval = Some(a);
                        Ok(json!({}))
                    }
                    Ok(None) => Err("Codex's own configuration decides its permissions on \
                                     this server (--permissions settings)"
                        .into()),
                    Err(why) => Err(why),
                }
            }
            other => Err(format!("Codex has no equivalent of {other}")),
        })
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.group.signal(signal)
    }

    fn close_stdin(&self) {
        self.stdin.close();
    }

    fn alive(&self) -> bool {
        self.group.alive()
    }

    fn keep_alive(&self) -> bool {
        true
    }
}
