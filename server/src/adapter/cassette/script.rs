//! The recording tool: drive a real process through a script of steps
//! while a [`CassetteRecorder`] records it (the `record` subcommand and the
//! cassette tests use it).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::adapter::{
    AdapterError, ExitInfo, PermissionDecision, ProcessAdapter, Signal, SpawnConfig, StdoutLine,
    UserInput,
};

use super::format::*;
use super::record::CassetteRecorder;

/// One step of a recording script.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Write a user message.
    Send(String),
    /// Wait for the end of a turn (claude's `result` line, Codex's
    /// `turn/completed`).
    WaitTurnEnd,
    /// Wait for a stdout line containing this text.
    WaitFor(String),
    /// Cancel the current turn (control_request interrupt).
    Interrupt,
    /// Allow the last permission request (claude's `can_use_tool`, echoing
    /// its input; Codex's approval request).
    Allow,
    /// Deny the last permission request with this message (Codex's answer
    /// carries none).
    Deny(String),
    /// Pause.
    Sleep(Duration),
    /// Signal the process group.
    Signal(Signal),
    /// Close stdin (the CLI finishes and exits).
    CloseStdin,
    /// Write a user message with this uuid (the CLI keys its file
    /// checkpoints by it: `rewind_files` names it).
    SendWithUuid(String, String),
    /// Send a host `control_request` (its `request` object) and wait for
    /// the CLI's `control_response`. A string value [`LAST_TASK`] in it is
    /// replaced by the last `task_started` task id seen.
    Control(Value),
}

/// In a [`ScriptStep::Control`] request: the last task id seen.
pub const LAST_TASK: &str = "$LAST_TASK";

/// Run `steps` against a process spawned by `adapter` with `config`,
/// recording it into `path` as a cassette. Stdin is closed after the last
/// step and the exit is awaited; `timeout` bounds the whole recording (the
/// group is killed when it is exceeded). `argv` goes into the header.
pub async fn record_cassette<A: ProcessAdapter>(
    adapter: A,
    argv: Vec<String>,
    config: SpawnConfig,
    steps: &[ScriptStep],
    path: &Path,
    timeout: Duration,
) -> Result<ExitInfo, CassetteError> {
    let recorder = CassetteRecorder::new(adapter, path, argv);
    let mut handle = recorder.spawn(config).await?;
    let control = handle.control.clone();
    let run = async {
        let mut seen = Seen::default();
        let mut controls = 0usize;
        for step in steps {
            match step {
                ScriptStep::Send(text) => control.write(&UserInput {
                    text: text.clone(),
                    ..UserInput::default()
                })?,
                ScriptStep::SendWithUuid(text, uuid) => control.write(&UserInput {
                    text: text.clone(),
                    uuid: uuid.clone(),
                    ..UserInput::default()
                })?,
                ScriptStep::Control(request) => {
                    controls += 1;
                    let id = format!("ah-ctl-rec-{controls}");
                    let mut request = request.clone();
                    if let Some(o) = request.as_object_mut() {
                        for v in o.values_mut() {
                            if v == LAST_TASK {
                                *v = Value::String(seen.task.clone().unwrap_or_default());
                            }
                        }
                    }
                    if !control.control(&id, &request)? {
                        return Err(AdapterError::Unsupported("control requests").into());
                    }
                    wait_line(&mut handle.stdout, &mut seen, |v| {
                        v["type"] == "control_response" && v["response"]["request_id"] == id
                    })
                    .await?
                }
                ScriptStep::WaitTurnEnd => {
                    wait_line(&mut handle.stdout, &mut seen, |v| {
                        v["type"] == "result" || v["method"] == "turn/completed"
                    })
                    .await?
                }
                ScriptStep::WaitFor(text) => {
                    let text = text.clone();
                    wait_raw(&mut handle.stdout, &mut seen, &text).await?
                }
                ScriptStep::Interrupt => {
                    control.interrupt()?;
                }
                ScriptStep::Allow | ScriptStep::Deny(_) => {
                    if seen.permission.is_none() {
                        wait_line(&mut handle.stdout, &mut seen, |v| {
                            v["request"]["subtype"] == "can_use_tool" || is_approval(v)
                        })
                        .await?;
                    }
                    let (id, input) = seen.permission.take().expect("waited for a request");
                    let decision = match step {
                        ScriptStep::Allow => PermissionDecision::Allow {
                            updated_input: serde_json::from_value(input).unwrap_or_default(),
                        },
                        ScriptStep::Deny(m) => PermissionDecision::Deny { message: m.clone() },
                        _ => unreachable!(),
                    };
                    control.respond_permission(&id, &decision)?;
                }
                ScriptStep::Sleep(d) => tokio::time::sleep(*d).await,
                ScriptStep::Signal(s) => control.signal(*s)?,
                ScriptStep::CloseStdin => control.close_stdin(),
            }
        }
        control.close_stdin();
        while handle.stdout.recv().await.is_some() {}
        Ok::<(), CassetteError>(())
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(r) => r?,
        Err(_) => {
            let _ = control.signal(Signal::Kill);
            let _ = (&mut handle.exited).await;
            return Err(CassetteError::Timeout(format!(
                "script did not finish within {timeout:?}"
            )));
        }
    }
    // The recorder writes the file before it forwards the exit: once this
    // resolves, the cassette is complete.
    Ok(handle.exited.await.unwrap_or_default())
}

/// What the script remembers of the lines it read.
#[derive(Default)]
struct Seen {
    /// The last `can_use_tool` request: its id and input.
    permission: Option<(String, Value)>,
    /// The last `task_started` task id.
    task: Option<String>,
}

/// Read stdout until `pred` matches a JSON line, remembering the last
/// `can_use_tool` request and task seen on the way.
async fn wait_line(
    rx: &mut mpsc::Receiver<StdoutLine>,
    seen: &mut Seen,
    pred: impl Fn(&Value) -> bool,
) -> Result<(), CassetteError> {
    while let Some(line) = rx.recv().await {
        if let StdoutLine::Line(l) = line
            && let Ok(v) = serde_json::from_str::<Value>(&l)
        {
            note(&v, seen);
            if pred(&v) {
                return Ok(());
            }
        }
    }
    Err(AdapterError::NotRunning.into())
}

async fn wait_raw(
    rx: &mut mpsc::Receiver<StdoutLine>,
    seen: &mut Seen,
    needle: &str,
) -> Result<(), CassetteError> {
    while let Some(line) = rx.recv().await {
        if let StdoutLine::Line(l) = line {
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                note(&v, seen);
            }
            if l.contains(needle) {
                return Ok(());
            }
        }
    }
    Err(AdapterError::NotRunning.into())
}

/// A Codex approval request (`item/…/requestApproval`, with Codex's
/// request id).
fn is_approval(v: &Value) -> bool {
    v["id"].is_number()
        && v["method"]
            .as_str()
            .is_some_and(|m| m.ends_with("/requestApproval"))
}

fn note(v: &Value, seen: &mut Seen) {
    if v["type"] == "system"
        && v["subtype"] == "task_started"
        && let Some(id) = v["task_id"].as_str()
    {
        seen.task = Some(id.to_owned());
    }
    if v["type"] == "control_request" && v["request"]["subtype"] == "can_use_tool" {
        seen.permission = Some((
            v["request_id"].as_str().unwrap_or_default().to_string(),
            v["request"]["input"].clone(),
        ));
    }
    if is_approval(v) {
        // Its id as the decoder renders it (`permission_requested`).
        seen.permission = Some((v["id"].to_string(), v["params"].clone()));
    }
}
