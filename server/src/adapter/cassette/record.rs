//! Recording: a wrapper around any adapter that writes each process it
//! spawns into a cassette when the process exits.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::adapter::claude::stream_json;
use crate::adapter::codex::process as codex;
use crate::adapter::{
    AdapterError, BoxFuture, Decoder, DecoderSetup, PermissionDecision, ProcessAdapter,
    ProcessControl, ProcessHandle, Signal, SpawnConfig, StdoutLine, UserInput,
};

use super::format::*;

/// Wraps any adapter and records each spawned process into one cassette
/// file, written when the process exits.
pub struct CassetteRecorder<A> {
    inner: A,
    path: PathBuf,
    argv: Vec<String>,
}

impl<A: ProcessAdapter> CassetteRecorder<A> {
    /// Record processes of `inner` into `path` (overwritten on each exit);
    /// `argv` goes into the header (the adapters expose theirs via `args`).
    pub fn new(inner: A, path: impl Into<PathBuf>, argv: Vec<String>) -> Self {
        Self {
            inner,
            path: path.into(),
            argv,
        }
    }
}

/// The recording of one process, shared by its stdout, control and exit taps.
struct Tape {
    start: Instant,
    cassette: Mutex<Cassette>,
    /// How the recorded agent's stdin spells what the harness did.
    stdin: Stdin,
}

/// How an "in" record spells what the harness did, in the recorded
/// agent's own stdin protocol. Replay only waits at these records; the
/// lines are for a reader (and a control request's id, which replay maps
/// onto the live one).
#[derive(Debug, Clone, Copy)]
enum Stdin {
    /// The claude CLI's stream-json.
    Claude,
    /// Codex's app-server requests and answers.
    Codex,
}

impl Stdin {
    fn of(agent: &str) -> Self {
        if agent.is_empty() {
            Self::Claude
        } else {
            Self::Codex
        }
    }

    fn user(self, input: &UserInput) -> String {
        match self {
            Self::Claude => stream_json::user_message_line(input),
            Self::Codex => codex::turn_start_line(input),
        }
    }

    fn interrupt(self) -> String {
        match self {
            Self::Claude => stream_json::interrupt_line(),
            Self::Codex => codex::interrupt_line(),
        }
    }

    fn permission(self, request_id: &str, decision: &PermissionDecision) -> String {
        match self {
            Self::Claude => stream_json::permission_response_line(request_id, decision),
            Self::Codex => codex::approval_answer_line(request_id, decision),
        }
    }
}

/// The agent's version if `line` states it: the claude CLI's init
/// (`claude_code_version`), Codex's answer to `thread/start` or
/// `thread/resume` (`thread.cliVersion`).
fn version_in(line: &str) -> Option<String> {
    let v = serde_json::from_str::<Value>(line).ok()?;
    v["claude_code_version"]
        .as_str()
        .or_else(|| v.pointer("/result/thread/cliVersion")?.as_str())
        .map(str::to_owned)
}

impl Tape {
    fn push(&self, make: impl FnOnce(u64) -> CassetteRecord) {
        let t = self.start.elapsed().as_millis() as u64;
        let record = make(t);
        let mut c = self.cassette.lock().unwrap_or_else(|e| e.into_inner());
        if let CassetteRecord::Out {
            line: StdoutLine::Line(l),
            ..
        } = &record
            && c.header.cli_version.is_empty()
            && let Some(version) = version_in(l)
        {
            c.header.cli_version = version;
        }
        c.records.push(record);
    }
}

impl<A: ProcessAdapter> ProcessAdapter for CassetteRecorder<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The recorded process is the inner adapter's: so is its output.
    fn decoder(&self, config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        self.inner.decoder(config, setup)
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let initial = UserInput {
                uuid: String::new(),
                text: config.config.prompt.clone(),
                content_blocks: config.config.content_blocks.clone(),
            };
            let agent = agent_of_adapter(self.inner.name());
            let tape = Arc::new(Tape {
                start: Instant::now(),
                cassette: Mutex::new(Cassette {
                    header: CassetteHeader {
                        cli_version: String::new(),
                        argv: self.argv.clone(),
                        date: utc_now_rfc3339(),
                        adapter: self.inner.name().to_string(),
                        agent: agent.to_string(),
                    },
                    records: Vec::new(),
                }),
                stdin: Stdin::of(agent),
            });
            if !initial.text.is_empty() || !initial.content_blocks.is_empty() {
                tape.push(|t| CassetteRecord::In {
                    t,
                    kind: "initial".into(),
                    line: tape.stdin.user(&initial),
                });
            }
            let tasks = config.tasks.clone();
            let mut handle = self.inner.spawn(config).await?;

            let (tx, rx) = mpsc::channel(256);
            let mut inner_rx = std::mem::replace(&mut handle.stdout, rx);
            let out_tape = tape.clone();
            // Runs to completion: ends with the process's stdout.
            let stdout_done = tasks.spawn("cassette record stdout", async move {
                while let Some(line) = inner_rx.recv().await {
                    out_tape.push(|t| CassetteRecord::Out {
                        t,
                        line: line.clone(),
                    });
                    if tx.send(line).await.is_err() {
                        // Keep recording even when nobody reads any more.
                        while let Some(line) = inner_rx.recv().await {
                            out_tape.push(|t| CassetteRecord::Out { t, line });
                        }
                        break;
                    }
                }
            });

            let (exit_tx, exit_rx) = oneshot::channel();
            let inner_exit = std::mem::replace(&mut handle.exited, exit_rx);
            let exit_tape = tape.clone();
            let path = self.path.clone();
            // Runs to completion: the cassette is written once the
            // process has exited, so shutdown waits for the file.
            tasks.spawn("cassette record exit", async move {
                let info = inner_exit.await.unwrap_or_default();
                // Stdout closes with the process; wait for its last lines so
                // "exit" is the final record.
                let _ = tokio::time::timeout(Duration::from_secs(2), stdout_done).await;
                exit_tape.push(|t| CassetteRecord::Exit {
                    t,
                    info: info.clone(),
                });
                let text = exit_tape
                    .cassette
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .to_jsonl();
                if let Err(e) = std::fs::write(&path, text) {
                    tracing::warn!(path = %path.display(), error = %e, "writing cassette failed");
                }
                let _ = exit_tx.send(info);
            });

            handle.control = Arc::new(RecordingControl {
                inner: handle.control.clone(),
                tape,
            });
            Ok(handle)
        })
    }
}

struct RecordingControl {
    inner: Arc<dyn ProcessControl>,
    tape: Arc<Tape>,
}

impl RecordingControl {
    fn note(&self, kind: &str, line: String) {
        self.tape.push(|t| CassetteRecord::In {
            t,
            kind: kind.into(),
            line,
        });
    }
}

impl ProcessControl for RecordingControl {
    fn write(&self, input: &UserInput) -> Result<(), AdapterError> {
        self.inner.write(input)?;
        self.note("user", self.tape.stdin.user(input));
        Ok(())
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        let sent = self.inner.interrupt()?;
        if sent {
            self.note("interrupt", self.tape.stdin.interrupt());
        }
        Ok(sent)
    }

    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        self.inner.respond_permission(request_id, decision)?;
        self.note(
            "permission",
            self.tape.stdin.permission(request_id, decision),
        );
        Ok(())
    }

    fn control(&self, request_id: &str, request: &serde_json::Value) -> Result<bool, AdapterError> {
        let sent = self.inner.control(request_id, request)?;
        if sent {
            self.note(
                "control",
                stream_json::control_request_line(request_id, request),
            );
        }
        Ok(sent)
    }

    /// Answered by the adapter without the process: nothing is written,
    /// nothing to record.
    fn answer_control(
        &self,
        request: &serde_json::Value,
    ) -> Option<Result<serde_json::Value, String>> {
        self.inner.answer_control(request)
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.inner.signal(signal)?;
        self.note("signal", signal_label(signal).into());
        Ok(())
    }

    fn close_stdin(&self) {
        self.inner.close_stdin();
        self.note("close", String::new());
    }

    fn alive(&self) -> bool {
        self.inner.alive()
    }

    fn keep_alive(&self) -> bool {
        self.inner.keep_alive()
    }
}

/// Seconds since the epoch as an RFC 3339 UTC date, without a date crate.
fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
