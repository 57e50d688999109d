//! The process side of an ACP run: spawns the agent, writes what
//! [`Client`] decides, and reads what it needs on the way.
//!
//! Every line the agent writes goes to the run's decoder unchanged; a tap
//! on the way hands each to the [`Client`] first (the answers to our
//! requests, the agent's permission requests, the replay of a loaded
//! session), and writes what that produces: the next handshake step, the
//! next prompt, refusals of requests we have no answer for.
//!
//! The decoder also gets a copy of every `session/prompt` and
//! `session/cancel` we write, in the line stream just before anything the
//! agent could write in reply: it tells the decoder exactly when a prompt
//! went out (a message may wait in the queue, a loaded session's replay
//! ends there) and whether a Stop cancelled it, which the agent's own lines
//! cannot. An agent never writes either, so a copy is never taken for the
//! agent's. A run the agent cannot serve as asked (a permission mode or
//! model it does not list) gets the [`REFUSED`] note instead of a prompt,
//! for the decoder only, and its input closed.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client::{Client, REFUSED};
use super::reopen;
use crate::adapter::{
    AdapterError, PermissionDecision, ProcessControl, ProcessHandle, Signal, SpawnConfig,
    StdoutLine, UserInput,
};
use crate::supervise::{self, ProcessGroup, ProcessSpec, StdinWriter};

/// Lines buffered between the tap and the run task.
const TAPPED_LINES: usize = 256;

/// Controls one ACP agent process.
pub struct AcpControl {
    stdin: StdinWriter,
    group: ProcessGroup,
    client: Mutex<Client>,
    /// Copies of the prompts written, for the tap to put in the line
    /// stream.
    copies: mpsc::UnboundedSender<String>,
}

/// How a run starts, besides its spawn config.
pub struct Launch {
    /// The agent's configured name, for messages.
    pub agent: String,
    /// The permission mode to set once the session exists.
    pub mode: Option<String>,
    /// The run named that mode itself (it is not the operator's default):
    /// an agent without it refuses the run.
    pub mode_required: bool,
}

/// Spawns `spec` (the agent), starts the handshake for `config` and queues
/// its prompt as the first turn.
pub async fn start(
    spec: &ProcessSpec,
    config: &SpawnConfig,
    launch: Launch,
) -> Result<ProcessHandle, AdapterError> {
    let Launch {
        agent,
        mode,
        mode_required,
    } = launch;
    let child = supervise::spawn(spec).await?;
    let c = &config.config;
    let cwd = match &spec.cwd {
        Some(cwd) => cwd.display().to_string(),
        // ACP wants an absolute cwd: the server's own, as the process's.
        None => std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| "/".into()),
    };
    let mut client = Client::with_mode(&agent, &cwd, &c.resume, mode, mode_required, &c.model);
    if let (false, Some(opened)) = (c.resume.is_empty(), config.opened_at) {
        let wait = reopen::wait_before_load(opened, SystemTime::now());
        if !wait.is_zero() {
            tracing::info!(session = %c.resume, ?wait, "acp: the load waits for the next minute");
            client.load_not_before(Instant::now() + wait);
        }
    }
    let (copies_tx, copies) = mpsc::unbounded_channel();
    let control = Arc::new(AcpControl {
        stdin: child.stdin.expect("the ACP spec pipes stdin"),
        group: child.group,
        client: Mutex::new(client),
        copies: copies_tx,
    });
    let (tx, rx) = mpsc::channel(TAPPED_LINES);
    let tap = Tap {
        tx,
        control: control.clone(),
    };
    config.tasks.spawn("acp tap", tap.run(child.stdout, copies));
    let first = control.lock().initialize();
    control.send_all(vec![first])?;
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

/// Between the agent's stdout and the run task.
struct Tap {
    tx: mpsc::Sender<StdoutLine>,
    control: Arc<AcpControl>,
}

impl Tap {
    /// Hands every line on to the run task, after the client has read it,
    /// and the copies of our prompts in their place; sends what waited for
    /// its time (a held-back load, the first prompt after a replay). Ends
    /// with the agent's stdout, so nothing of a dead process lingers.
    async fn run(
        self,
        mut lines: mpsc::Receiver<StdoutLine>,
        mut copies: mpsc::UnboundedReceiver<String>,
    ) {
        loop {
            let deadline = self.control.lock().wait_deadline();
            let line = tokio::select! {
                // A prompt written from outside the tap (a user message)
                // goes before any line read after it.
                biased;
                Some(copy) = copies.recv() => {
                    self.forward(StdoutLine::Line(copy)).await;
                    continue;
                }
                () = sleep_until_some(deadline) => {
                    let mut out = Vec::new();
                    self.control.lock().wait_over(Instant::now(), &mut out);
                    self.send(out);
                    continue;
                }
                line = lines.recv() => match line {
                    Some(line) => line,
                    None => return,
                },
            };
            self.observe(&line);
            self.forward(line).await;
            // A prompt the line led to comes after it: the agent's reply to
            // it can only be read on a later turn of this loop.
            while let Ok(copy) = copies.try_recv() {
                self.forward(StdoutLine::Line(copy)).await;
            }
        }
    }

    fn observe(&self, line: &StdoutLine) {
        let StdoutLine::Line(text) = line else {
            return;
        };
        let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let mut out = Vec::new();
        self.control.lock().observe(&msg, Instant::now(), &mut out);
        self.send(out);
    }

    fn send(&self, out: Vec<Value>) {
        if let Err(e) = self.control.send_all(out) {
            tracing::debug!(error = %e, "acp: could not write to the process");
        }
    }

    async fn forward(&self, line: StdoutLine) {
        // A run task that is gone takes nothing more; the tap keeps
        // draining so the process never blocks on a full pipe.
        let _ = self.tx.send(line).await;
    }
}

/// Sleeps until `deadline`; forever when there is none.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl AcpControl {
    fn lock(&self) -> MutexGuard<'_, Client> {
        self.client.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send_all(&self, out: Vec<Value>) -> Result<(), AdapterError> {
        if out.is_empty() {
            return Ok(());
        }
        if !self.group.alive() {
            return Err(AdapterError::NotRunning);
        }
        for msg in out {
            let text = msg.to_string();
            match msg.get("method").and_then(Value::as_str) {
                // The decoder's alone; the agent's input ends with it, so
                // the agent exits and the run with it.
                Some(REFUSED) => {
                    let _ = self.copies.send(text);
                    self.stdin.close();
                    return Ok(());
                }
                Some("session/prompt" | "session/cancel") => {
                    let _ = self.copies.send(text.clone());
                }
                _ => {}
            }
            self.stdin.send_line(&text)?;
        }
        Ok(())
    }
}

impl ProcessControl for AcpControl {
    fn write(&self, input: &UserInput) -> Result<(), AdapterError> {
        if !input.content_blocks.is_empty() {
            return Err(AdapterError::Unable(
                "an ACP agent takes text input only (content_blocks)".into(),
            ));
        }
        if !self.group.alive() {
            return Err(AdapterError::NotRunning);
        }
        let mut out = Vec::new();
        self.lock().write(&input.text, &mut out)?;
        self.send_all(out)
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        let mut out = Vec::new();
        let interrupted = self.lock().interrupt(&mut out);
        self.send_all(out)?;
        Ok(interrupted)
    }

    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        let mut out = Vec::new();
        self.lock().respond(request_id, decision, &mut out)?;
        self.send_all(out)
    }

    fn answer_control(&self, request: &Value) -> Option<Result<Value, String>> {
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        let mut out = Vec::new();
        let answer = {
            let mut client = self.lock();
            match subtype {
                "set_model" => client.set_model(
                    request.get("model").and_then(Value::as_str).unwrap_or(""),
                    &mut out,
                ),
                "set_permission_mode" => client.set_mode(
                    request.get("mode").and_then(Value::as_str).unwrap_or(""),
                    &mut out,
                ),
                other => Err(format!("an ACP agent has no equivalent of {other}")),
            }
        };
        Some(answer.and_then(|v| self.send_all(out).map(|()| v).map_err(|e| e.to_string())))
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.group.signal(signal)
    }

    fn close_stdin(&self) {
        // An ACP agent exits at the end of its input.
        self.stdin.close();
    }

    fn alive(&self) -> bool {
        self.group.alive()
    }

    fn keep_alive(&self) -> bool {
        true
    }
}
