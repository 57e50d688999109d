//! A scripted, in-process stand-in for the claude CLI, for tests.
//!
//! It speaks the CLI's real stream-json shapes (the lines are modelled on the
//! recordings in `cli-transcripts/`: `system/init`, `assistant`, `user`
//! tool results, `result`, `control_request{can_use_tool}`,
//! `control_cancel_request`, interrupt frames) and reacts to the
//! [`ProcessControl`] calls the way CLI 2.1.197 does: an interrupt ends the
//! turn and keeps the process, SIGINT makes it flush and exit 0, stdin EOF
//! lets the turn finish and then exits.
//!
//! What a turn does is chosen by the user text, so a test steers it through
//! the public API:
//! - contains `HANG`: the turn streams a partial answer and never finishes
//!   on its own (until interrupted or signalled);
//! - contains `PERMISSION`: the turn asks `can_use_tool` for Bash and waits
//!   for the answer;
//! - contains `CRASH`: the process exits with code 3 and a stderr tail;
//! - contains `APIERROR`: the turn ends with an API error result
//!   (`is_error: true`) and the process exits 1;
//! - anything else: one text answer (`echo: <text>`) and a `result`.
//!
//! Control requests (`control()`: set_model and the rest) are answered with
//! success at once, except a `set_model` whose model contains
//! [`REFUSE_MODEL`] (an error answer, like the CLI refusing) or
//! [`SLOW_MODEL`] (no answer until the next message reaches the process:
//! a CLI that answers after the host gave up waiting).
//!
//! Knobs on [`ScriptedBehavior`] make the process deaf to interrupts or
//! signals, so the stop ladder's escalation can be tested.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use agent_harness_server::adapter::{
    AdapterError, BoxFuture, ExitInfo, PermissionDecision, ProcessAdapter, ProcessControl,
    ProcessHandle, Signal, SpawnConfig, StdoutLine, UserInput,
};

/// A `set_model` to a model containing this is refused by the process.
pub const REFUSE_MODEL: &str = "scripted-refuse";
/// A `set_model` to a model containing this is answered (success) only
/// when the next control message reaches the process.
pub const SLOW_MODEL: &str = "scripted-slow";

/// How the scripted process behaves.
#[derive(Debug, Clone)]
pub struct ScriptedBehavior {
    /// True: stays alive between turns like the interactive CLI. False: one
    /// turn (the prompt), then exit 0, like `claude --print`.
    pub keep_alive: bool,
    /// False: `control_request{interrupt}` is acknowledged but the turn goes
    /// on (tests escalation to signals).
    pub honor_interrupt: bool,
    /// True: SIGINT is ignored.
    pub ignore_sigint: bool,
    /// True: SIGTERM is ignored (only SIGKILL ends it).
    pub ignore_sigterm: bool,
    /// Spawning fails as if the binary were missing.
    pub binary_missing: bool,
    /// Pause between two stdout lines of a turn.
    pub line_delay: Duration,
    /// `interrupt()` panics (in the caller: the run task), to test that a
    /// failing run task still ends its run.
    pub panic_on_interrupt: bool,
    /// The `permissionMode` its init line reports ("default"), as a CLI
    /// whose own settings chose the mode would.
    pub permission_mode: &'static str,
}

impl Default for ScriptedBehavior {
    fn default() -> Self {
        Self {
            keep_alive: true,
            honor_interrupt: true,
            ignore_sigint: false,
            ignore_sigterm: false,
            binary_missing: false,
            line_delay: Duration::from_millis(1),
            panic_on_interrupt: false,
            permission_mode: "default",
        }
    }
}

/// What the adapter saw, for assertions.
#[derive(Debug, Default, Clone)]
pub struct ScriptedRecord {
    /// Every spawn, in order.
    pub spawns: Vec<SpawnConfig>,
    /// Every control call, in order, as a short string ("write:hello",
    /// "interrupt", "signal:Int", "close_stdin", "permission:ID:allow").
    pub calls: Vec<String>,
    /// The same calls, and the stdout lines written ("out:result",
    /// "out:control_request:ID"), with the (tokio) time of each, for the
    /// timers' tests on a paused clock.
    pub timed_calls: Vec<(tokio::time::Instant, String)>,
}

/// The scripted adapter. Clone it to keep a handle for assertions.
#[derive(Clone)]
pub struct ScriptedAdapter {
    behavior: ScriptedBehavior,
    record: Arc<Mutex<ScriptedRecord>>,
    /// Notified on every new record entry.
    changed: Arc<Notify>,
    live: Arc<AtomicU64>,
    next_id: Arc<AtomicU64>,
}

impl ScriptedAdapter {
    /// An adapter whose processes behave as `behavior` says.
    pub fn new(behavior: ScriptedBehavior) -> Self {
        Self {
            behavior,
            record: Arc::default(),
            changed: Arc::default(),
            live: Arc::default(),
            next_id: Arc::new(AtomicU64::new(1)),
        }
    }

    /// A copy of everything recorded so far.
    pub fn record(&self) -> ScriptedRecord {
        self.record.lock().expect("record lock").clone()
    }

    /// Waits (on the record, not on a clock) for the first timed entry
    /// matching `pred`; returns when it was made.
    pub async fn wait_for(
        &self,
        pred: impl Fn(tokio::time::Instant, &str) -> bool,
    ) -> tokio::time::Instant {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some((t, _)) = self.record().timed_calls.iter().find(|(t, c)| pred(*t, c)) {
                return *t;
            }
            changed.await;
        }
    }

    /// How many scripted processes are alive right now.
    pub fn live_processes(&self) -> u64 {
        self.live.load(Ordering::SeqCst)
    }
}

impl ProcessAdapter for ScriptedAdapter {
    fn name(&self) -> &str {
        "scripted"
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            self.record
                .lock()
                .expect("record lock")
                .spawns
                .push(config.clone());
            if self.behavior.binary_missing {
                return Err(AdapterError::BinaryNotFound(
                    "claude binary not found: install it with `npm i -g @anthropic-ai/claude-code` \
                     or pass --claude-bin PATH"
                        .into(),
                ));
            }
            let n = self.next_id.fetch_add(1, Ordering::SeqCst);
            let (out_tx, out_rx) = mpsc::channel(256);
            let (exit_tx, exit_rx) = oneshot::channel();
            let (ctl_tx, ctl_rx) = mpsc::unbounded_channel();
            let alive = Arc::new(AtomicBool::new(true));
            self.live.fetch_add(1, Ordering::SeqCst);
            let resume_id = if config.config.resume.is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                config.config.resume.clone()
            };
            let mut first = VecDeque::new();
            if !config.config.prompt.is_empty() || !config.config.content_blocks.is_empty() {
                first.push_back(config.config.prompt.clone());
            }
            let process = Process {
                behavior: self.behavior.clone(),
                cli_session: resume_id,
                model: if config.config.model.is_empty() {
                    "claude-sonnet-4-5".into()
                } else {
                    config.config.model.clone()
                },
                cwd: if config.config.cwd.is_empty() {
                    "/srv/demo/work".into()
                } else {
                    config.config.cwd.clone()
                },
                out: out_tx,
                record: self.record.clone(),
                changed: self.changed.clone(),
                queue: first,
                turn: Turn::Idle,
                stdin_closed: false,
                msg: 0,
                held: Vec::new(),
            };
            let live = self.live.clone();
            let alive2 = alive.clone();
            tokio::spawn(async move {
                let exit = process.run(ctl_rx).await;
                alive2.store(false, Ordering::SeqCst);
                live.fetch_sub(1, Ordering::SeqCst);
                let _ = exit_tx.send(exit);
            });
            Ok(ProcessHandle {
                stdout: out_rx,
                exited: exit_rx,
                control: Arc::new(ScriptedControl {
                    tx: ctl_tx,
                    alive,
                    keep_alive: self.behavior.keep_alive,
                    panic_on_interrupt: self.behavior.panic_on_interrupt,
                    record: self.record.clone(),
                    changed: self.changed.clone(),
                }),
                pid: None,
                start_time: None,
                process_id: Some(format!("scripted:{n}")),
            })
        })
    }
}

/// A control message for the simulated process.
enum Ctl {
    Input(String),
    Interrupt,
    Permission(String, PermissionDecision),
    Signal(Signal),
    CloseStdin,
    Control(String, Value),
}

struct ScriptedControl {
    tx: mpsc::UnboundedSender<Ctl>,
    alive: Arc<AtomicBool>,
    keep_alive: bool,
    panic_on_interrupt: bool,
    record: Arc<Mutex<ScriptedRecord>>,
    changed: Arc<Notify>,
}

impl ScriptedControl {
    fn note(&self, call: String) {
        {
            let mut record = self.record.lock().expect("record lock");
            record
                .timed_calls
                .push((tokio::time::Instant::now(), call.clone()));
            record.calls.push(call);
        }
        self.changed.notify_waiters();
    }
    fn send(&self, ctl: Ctl) -> Result<(), AdapterError> {
        if !self.alive.load(Ordering::SeqCst) {
            return Err(AdapterError::NotRunning);
        }
        self.tx.send(ctl).map_err(|_| AdapterError::NotRunning)
    }
}

impl ProcessControl for ScriptedControl {
    fn write(&self, input: &UserInput) -> Result<(), AdapterError> {
        self.note(format!("write:{}", input.text));
        if !self.keep_alive {
            return Err(AdapterError::Unsupported("stdin input to a one-shot run"));
        }
        self.send(Ctl::Input(input.text.clone()))
    }
    fn interrupt(&self) -> Result<bool, AdapterError> {
        self.note("interrupt".into());
        assert!(!self.panic_on_interrupt, "scripted: interrupt() panics");
        if !self.keep_alive {
            return Ok(false);
        }
        self.send(Ctl::Interrupt).map(|()| true)
    }
    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        let verdict = match decision {
            PermissionDecision::Allow { .. } => "allow",
            PermissionDecision::Deny { .. } => "deny",
        };
        self.note(format!("permission:{request_id}:{verdict}"));
        self.send(Ctl::Permission(request_id.to_owned(), decision.clone()))
    }
    fn control(&self, request_id: &str, request: &Value) -> Result<bool, AdapterError> {
        if !self.keep_alive {
            // One-shot: no control channel, like `claude --print`.
            return Ok(false);
        }
        let subtype = request["subtype"].as_str().unwrap_or("");
        self.note(format!("control:{subtype}"));
        self.send(Ctl::Control(request_id.to_owned(), request.clone()))
            .map(|()| true)
    }
    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.note(format!("signal:{signal:?}"));
        self.send(Ctl::Signal(signal))
    }
    fn close_stdin(&self) {
        self.note("close_stdin".into());
        let _ = self.send(Ctl::CloseStdin);
    }
    fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
    fn keep_alive(&self) -> bool {
        self.keep_alive
    }
}

/// Where the simulated turn is.
enum Turn {
    Idle,
    /// Streaming forever until interrupted.
    Hanging,
    /// Waiting for the answer to this can_use_tool request.
    AwaitingPermission {
        request_id: String,
        tool_use_id: String,
    },
}

struct Process {
    behavior: ScriptedBehavior,
    cli_session: String,
    model: String,
    cwd: String,
    out: mpsc::Sender<StdoutLine>,
    record: Arc<Mutex<ScriptedRecord>>,
    changed: Arc<Notify>,
    queue: VecDeque<String>,
    turn: Turn,
    stdin_closed: bool,
    msg: u64,
    /// Control requests held back ([`SLOW_MODEL`]), answered on the next
    /// message.
    held: Vec<String>,
}

/// Why the simulation ends.
type Exit = ExitInfo;

fn exit_code(code: i32, stderr: &str) -> Exit {
    ExitInfo {
        code: Some(code),
        signal: None,
        stderr_tail: stderr.into(),
    }
}

fn exit_signal(name: &str) -> Exit {
    ExitInfo {
        code: None,
        signal: Some(name.into()),
        stderr_tail: String::new(),
    }
}

impl Process {
    async fn run(mut self, mut ctl: mpsc::UnboundedReceiver<Ctl>) -> Exit {
        loop {
            // Start queued turns while idle.
            while matches!(self.turn, Turn::Idle) {
                let Some(text) = self.queue.pop_front() else {
                    break;
                };
                if let Some(exit) = self.start_turn(&text).await {
                    return exit;
                }
                if matches!(self.turn, Turn::Idle) && !self.behavior.keep_alive {
                    return exit_code(0, "");
                }
            }
            if matches!(self.turn, Turn::Idle)
                && self.queue.is_empty()
                && (self.stdin_closed || !self.behavior.keep_alive)
            {
                return exit_code(0, "");
            }
            let Some(msg) = ctl.recv().await else {
                // Every control handle is gone: like stdin EOF.
                self.stdin_closed = true;
                if matches!(self.turn, Turn::Idle) {
                    return exit_code(0, "");
                }
                // A hanging turn with nobody left to stop it: end it.
                return exit_signal("SIGKILL");
            };
            for id in std::mem::take(&mut self.held) {
                self.control_success(&id).await;
            }
            match msg {
                Ctl::Control(id, request) => self.control(id, &request).await,
                Ctl::Input(text) => self.queue.push_back(text),
                Ctl::CloseStdin => self.stdin_closed = true,
                Ctl::Interrupt => {
                    self.emit(json!({"type":"control_response","response":{"subtype":"success","request_id":"interrupt"}})).await;
                    if self.behavior.honor_interrupt && !matches!(self.turn, Turn::Idle) {
                        self.abort_turn().await;
                    }
                }
                Ctl::Permission(id, decision) => self.answer(id, decision).await,
                Ctl::Signal(Signal::Int) => {
                    if !self.behavior.ignore_sigint {
                        if !matches!(self.turn, Turn::Idle) {
                            self.abort_turn().await;
                        }
                        return exit_code(0, "");
                    }
                }
                Ctl::Signal(Signal::Term) => {
                    if !self.behavior.ignore_sigterm {
                        return exit_signal("SIGTERM");
                    }
                }
                Ctl::Signal(Signal::Kill) => return exit_signal("SIGKILL"),
            }
        }
    }

    /// Answers a control request the way [`SLOW_MODEL`] and
    /// [`REFUSE_MODEL`] say.
    async fn control(&mut self, id: String, request: &Value) {
        let model = request["model"].as_str().unwrap_or("");
        if model.contains(SLOW_MODEL) {
            self.held.push(id);
        } else if model.contains(REFUSE_MODEL) {
            self.emit(json!({"type":"control_response","response":{
                "subtype":"error","request_id":id,"error":format!("scripted: no model {model}")}}))
                .await;
        } else {
            self.control_success(&id).await;
        }
    }

    async fn control_success(&mut self, id: &str) {
        self.emit(json!({"type":"control_response","response":{
            "subtype":"success","request_id":id,"response":{}}}))
            .await;
    }

    async fn emit(&mut self, line: Value) {
        if !self.behavior.line_delay.is_zero() {
            tokio::time::sleep(self.behavior.line_delay).await;
        }
        let mut what = format!("out:{}", line["type"].as_str().unwrap_or(""));
        if let Some(id) = line["request_id"].as_str() {
            what = format!("{what}:{id}");
        }
        // A dropped reader is a test that stopped listening; keep simulating.
        let _ = self.out.send(StdoutLine::Line(line.to_string())).await;
        self.record
            .lock()
            .expect("record lock")
            .timed_calls
            .push((tokio::time::Instant::now(), what));
        self.changed.notify_waiters();
    }

    fn next_msg_id(&mut self) -> String {
        self.msg += 1;
        format!("msg_scripted_{}", self.msg)
    }

    async fn init(&mut self) {
        let line = self.init_line();
        self.emit(line).await;
    }

    fn init_line(&self) -> Value {
        json!({
            "type":"system","subtype":"init","cwd":self.cwd,"session_id":self.cli_session,
            "tools":["Task","Bash","Edit","Read","Write"],"mcp_servers":[],
            "model":self.model,"permissionMode":self.behavior.permission_mode,"slash_commands":["compact"],
            "apiKeySource":"ANTHROPIC_API_KEY","claude_code_version":"2.1.197",
            "output_style":"default","agents":["general-purpose"],"skills":[],"plugins":[],
            "uuid":uuid::Uuid::new_v4().to_string(),"fast_mode_state":"off"
        })
    }

    async fn assistant(&mut self, content: Value) {
        let id = self.next_msg_id();
        let line = json!({
            "type":"assistant","message":{"id":id,"type":"message","role":"assistant",
            "model":self.model,"content":content,"stop_reason":null,"stop_sequence":null,
            "usage":{"input_tokens":12,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0},
            "context_management":null},
            "parent_tool_use_id":null,"session_id":self.cli_session,"uuid":uuid::Uuid::new_v4().to_string()
        });
        self.emit(line).await;
    }

    async fn result(&mut self, text: &str, is_error: bool, api_error_status: Option<u32>) {
        let line = json!({
            "type":"result","subtype":"success","is_error":is_error,"api_error_status":api_error_status,
            "duration_ms":65,"duration_api_ms":24,"num_turns":1,"result":text,
            "stop_reason":"end_turn","session_id":self.cli_session,"total_cost_usd":0.000141,
            "usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7},
            "modelUsage":{self.model.clone():{"inputTokens":12,"outputTokens":7,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"webSearchRequests":0,"costUSD":0.000141,"contextWindow":200000,"maxOutputTokens":64000}},
            "permission_denials":[],"terminal_reason":"completed","fast_mode_state":"off",
            "uuid":uuid::Uuid::new_v4().to_string()
        });
        self.emit(line).await;
    }

    /// Runs the start of a turn; returns an exit when the turn kills the process.
    async fn start_turn(&mut self, text: &str) -> Option<Exit> {
        self.init().await;
        if text.contains("CRASH") {
            return Some(exit_code(
                3,
                "Error: scripted crash\n    at main (cli.js:1:1)",
            ));
        }
        if text.contains("APIERROR") {
            self.assistant(json!([{"type":"text","text":"API Error: 400 invalid request"}]))
                .await;
            self.result("API Error: 400 invalid request", true, Some(400))
                .await;
            return Some(exit_code(1, "API Error: 400"));
        }
        if text.contains("HANG") {
            self.assistant(json!([{"type":"text","text":"tick 0 tick 1 "}]))
                .await;
            self.turn = Turn::Hanging;
            return None;
        }
        if let Some(rest) = text.strip_prefix("FLOOD ") {
            // A long answer written as fast as the reader takes it: `n`
            // assistant lines without a delay between them. "FLOOD n MODE m"
            // then reports permission mode `m` (a CLI whose mode changed in
            // the middle of a turn) instead of ending the turn.
            let (n, mode) = match rest.split_once(" MODE ") {
                Some((n, mode)) => (n, Some(mode.trim().to_owned())),
                None => (rest, None),
            };
            let n: usize = n.trim().parse().expect("FLOOD n");
            let delay = std::mem::take(&mut self.behavior.line_delay);
            for i in 0..n {
                self.assistant(json!([{"type":"text","text":format!("flood {i}")}]))
                    .await;
            }
            self.behavior.line_delay = delay;
            match mode {
                Some(mode) => {
                    let mut line = self.init_line();
                    line["permissionMode"] = json!(mode);
                    self.emit(line).await;
                }
                None => self.result("flooded", false, None).await,
            }
            return None;
        }
        if text.contains("PERMISSION") {
            let tool_use_id = format!("toolu_scripted_{}", self.msg + 1);
            let input = json!({"command":"touch made-by-bash","description":"Create file"});
            self.assistant(
                json!([{"type":"tool_use","id":tool_use_id,"name":"Bash","input":input}]),
            )
            .await;
            let request_id = uuid::Uuid::new_v4().to_string();
            self.emit(json!({
                "type":"control_request","request_id":request_id,
                "request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash",
                "input":input,"description":"Create file","permission_suggestions":[],
                "tool_use_id":tool_use_id}
            }))
            .await;
            self.turn = Turn::AwaitingPermission {
                request_id,
                tool_use_id,
            };
            return None;
        }
        self.assistant(json!([{"type":"text","text":format!("echo: {text}")}]))
            .await;
        self.result(&format!("echo: {text}"), false, None).await;
        None
    }

    /// The CLI's interrupt frames: cancel a pending permission, the partial
    /// message, the "[Request interrupted by user]" marker, an error result.
    async fn abort_turn(&mut self) {
        if let Turn::AwaitingPermission { request_id, .. } = &self.turn {
            let id = request_id.clone();
            self.emit(json!({"type":"control_cancel_request","request_id":id}))
                .await;
        }
        self.turn = Turn::Idle;
        let session = self.cli_session.clone();
        self.emit(json!({
            "type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},
            "parent_tool_use_id":null,"session_id":session,"uuid":uuid::Uuid::new_v4().to_string()
        }))
        .await;
        self.emit(json!({
            "type":"result","subtype":"error_during_execution","duration_ms":3562,"duration_api_ms":0,
            "is_error":true,"num_turns":2,"stop_reason":null,"session_id":session,"total_cost_usd":0,
            "usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},
            "modelUsage":{},"permission_denials":[],"terminal_reason":"aborted_streaming",
            "uuid":uuid::Uuid::new_v4().to_string(),"errors":[]
        }))
        .await;
    }

    async fn answer(&mut self, id: String, decision: PermissionDecision) {
        let Turn::AwaitingPermission {
            request_id,
            tool_use_id,
        } = &self.turn
        else {
            return;
        };
        if *request_id != id {
            return;
        }
        let tool_use_id = tool_use_id.clone();
        self.turn = Turn::Idle;
        let (text, is_error) = match decision {
            PermissionDecision::Allow { .. } => {
                ("(Bash completed with no output)".to_owned(), false)
            }
            PermissionDecision::Deny { message } => (message, true),
        };
        let session = self.cli_session.clone();
        self.emit(json!({
            "type":"user","message":{"role":"user","content":[{"tool_use_id":tool_use_id,"type":"tool_result","content":text,"is_error":is_error}]},
            "parent_tool_use_id":null,"session_id":session,"uuid":uuid::Uuid::new_v4().to_string()
        }))
        .await;
        self.assistant(json!([{"type":"text","text":"Tool step finished."}]))
            .await;
        self.result("Tool step finished.", false, None).await;
    }
}
