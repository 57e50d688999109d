//! Cassettes: record a real process's stdout, stdin and exit with time
//! offsets, and replay them as a [`ProcessAdapter`] without any process.
//!
//! Format (JSONL): a header line
//! `{"type":"header","cli_version","argv","date","adapter"}`, then one
//! record per line: `{"t":ms,"dir":"out","line":…}` (a too-long line adds
//! `"too_long":len` and keeps only its head), `{"t":ms,"dir":"in","kind":…,"line":…}`
//! (`kind` is `initial`, `user`, `interrupt`, `permission`, `close` or
//! `signal`), and `{"t":ms,"dir":"exit","code","signal","stderr_tail"}`.
//!
//! Replay plays "out" lines with the recorded gaps times `timescale`, stops
//! at each "in" record (except `initial`) until the harness does something
//! (write, interrupt, respond_permission, close_stdin or the recorded
//! signal), and resolves `exited` with the recorded exit.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::claude_interactive::{interrupt_line, permission_response_line, user_message_line};
use super::{
    AdapterError, BoxFuture, ExitInfo, PermissionDecision, ProcessAdapter, ProcessControl,
    ProcessHandle, Signal, SpawnConfig, StdoutLine, UserInput,
};

/// Errors reading or writing a cassette.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file could not be read or written.
    #[error("cassette {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a valid cassette record.
    #[error("cassette line {line}: {message}")]
    Format {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Spawning or driving the recorded process failed.
    #[error("adapter: {0}")]
    Adapter(#[from] AdapterError),
    /// The recording script did not finish in time.
    #[error("recording timed out: {0}")]
    Timeout(String),
}

/// The header of a cassette.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CassetteHeader {
    /// The CLI version (from its first system/init).
    pub cli_version: String,
    /// The argv the process ran with (without the binary).
    pub argv: Vec<String>,
    /// RFC 3339 date of the recording (UTC).
    pub date: String,
    /// The adapter that ran it ("interactive", "cli").
    pub adapter: String,
}

/// One recorded record after the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CassetteRecord {
    /// A stdout line.
    Out {
        /// Milliseconds since spawn.
        t: u64,
        /// The line.
        line: StdoutLine,
    },
    /// Something the harness sent.
    In {
        /// Milliseconds since spawn.
        t: u64,
        /// `initial`, `user`, `interrupt`, `permission`, `close`, `signal`.
        kind: String,
        /// The stdin line (or the signal name).
        line: String,
    },
    /// The process exited.
    Exit {
        /// Milliseconds since spawn.
        t: u64,
        /// How.
        info: ExitInfo,
    },
}

/// A parsed cassette.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cassette {
    /// The header.
    pub header: CassetteHeader,
    /// Records in order.
    pub records: Vec<CassetteRecord>,
}

impl Cassette {
    /// Parse a cassette's text.
    pub fn parse(text: &str) -> Result<Self, CassetteError> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or(CassetteError::Format {
            line: 1,
            message: "empty cassette".into(),
        })?;
        let h: Value = serde_json::from_str(first).map_err(|e| fmt_err(0, e.to_string()))?;
        if h["type"] != "header" {
            return Err(fmt_err(0, "the first line must be the header".into()));
        }
        let header = CassetteHeader {
            cli_version: h["cli_version"].as_str().unwrap_or_default().into(),
            argv: h["argv"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            date: h["date"].as_str().unwrap_or_default().into(),
            adapter: h["adapter"].as_str().unwrap_or_default().into(),
        };
        let mut records = Vec::new();
        for (i, l) in lines {
            let v: Value = serde_json::from_str(l).map_err(|e| fmt_err(i, e.to_string()))?;
            let t = v["t"]
                .as_u64()
                .ok_or_else(|| fmt_err(i, "missing t".into()))?;
            let line = v["line"].as_str().unwrap_or_default().to_string();
            records.push(match v["dir"].as_str() {
                Some("out") => CassetteRecord::Out {
                    t,
                    line: match v["too_long"].as_u64() {
                        Some(len) => StdoutLine::TooLong {
                            head: line,
                            len: len as usize,
                        },
                        None => StdoutLine::Line(line),
                    },
                },
                Some("in") => CassetteRecord::In {
                    t,
                    kind: v["kind"].as_str().unwrap_or("user").into(),
                    line,
                },
                Some("exit") => CassetteRecord::Exit {
                    t,
                    info: ExitInfo {
                        code: v["code"].as_i64().map(|c| c as i32),
                        signal: v["signal"].as_str().map(str::to_string),
                        stderr_tail: v["stderr_tail"].as_str().unwrap_or_default().into(),
                    },
                },
                other => return Err(fmt_err(i, format!("unknown dir {other:?}"))),
            });
        }
        Ok(Self { header, records })
    }

    /// The cassette as JSONL text.
    pub fn to_jsonl(&self) -> String {
        let mut out = json!({
            "type": "header",
            "cli_version": self.header.cli_version,
            "argv": self.header.argv,
            "date": self.header.date,
            "adapter": self.header.adapter,
        })
        .to_string();
        out.push('\n');
        for r in &self.records {
            let v = match r {
                CassetteRecord::Out {
                    t,
                    line: StdoutLine::Line(l),
                } => json!({"t": t, "dir": "out", "line": l}),
                CassetteRecord::Out {
                    t,
                    line: StdoutLine::TooLong { head, len },
                } => json!({"t": t, "dir": "out", "line": head, "too_long": len}),
                CassetteRecord::In { t, kind, line } => {
                    json!({"t": t, "dir": "in", "kind": kind, "line": line})
                }
                CassetteRecord::Exit { t, info } => json!({
                    "t": t, "dir": "exit", "code": info.code, "signal": info.signal,
                    "stderr_tail": info.stderr_tail,
                }),
            };
            out.push_str(&v.to_string());
            out.push('\n');
        }
        out
    }
}

fn fmt_err(i: usize, message: String) -> CassetteError {
    CassetteError::Format {
        line: i + 1,
        message,
    }
}

// ---------------------------------------------------------------- recorder

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
            && let Ok(v) = serde_json::from_str::<Value>(l)
            && let Some(version) = v["claude_code_version"].as_str()
        {
            c.header.cli_version = version.to_string();
        }
        c.records.push(record);
    }
}

impl<A: ProcessAdapter> ProcessAdapter for CassetteRecorder<A> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let initial = UserInput {
                text: config.config.prompt.clone(),
                content_blocks: config.config.content_blocks.clone(),
            };
            let tape = Arc::new(Tape {
                start: Instant::now(),
                cassette: Mutex::new(Cassette {
                    header: CassetteHeader {
                        cli_version: String::new(),
                        argv: self.argv.clone(),
                        date: utc_now_rfc3339(),
                        adapter: self.inner.name().to_string(),
                    },
                    records: Vec::new(),
                }),
            });
            if !initial.text.is_empty() || !initial.content_blocks.is_empty() {
                tape.push(|t| CassetteRecord::In {
                    t,
                    kind: "initial".into(),
                    line: user_message_line(&initial),
                });
            }
            let mut handle = self.inner.spawn(config).await?;

            let (tx, rx) = mpsc::channel(256);
            let mut inner_rx = std::mem::replace(&mut handle.stdout, rx);
            let out_tape = tape.clone();
            let stdout_done = tokio::spawn(async move {
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
            tokio::spawn(async move {
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
        self.note("user", user_message_line(input));
        Ok(())
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        let sent = self.inner.interrupt()?;
        if sent {
            self.note("interrupt", interrupt_line());
        }
        Ok(sent)
    }

    fn respond_permission(
        &self,
        request_id: &str,
        decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        self.inner.respond_permission(request_id, decision)?;
        self.note("permission", permission_response_line(request_id, decision));
        Ok(())
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

fn signal_label(signal: Signal) -> &'static str {
    match signal {
        Signal::Int => "SIGINT",
        Signal::Term => "SIGTERM",
        Signal::Kill => "SIGKILL",
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

// ---------------------------------------------------------------- replay

/// Replays a cassette as a process: no binary, real timing (scaled).
#[derive(Debug, Clone)]
pub struct CassetteAdapter {
    cassette: Arc<Cassette>,
    name: String,
    timescale: f64,
}

impl CassetteAdapter {
    /// Load a cassette file. `timescale` multiplies recorded gaps (1.0 real
    /// time, 0.0 as fast as possible).
    pub fn from_file(path: impl AsRef<Path>, timescale: f64) -> Result<Self, CassetteError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut a = Self::from_str(&text, timescale)?;
        a.name = path
            .file_stem()
            .map(|s| {
                s.to_string_lossy()
                    .trim_end_matches(".cassette")
                    .to_string()
            })
            .unwrap_or_default();
        Ok(a)
    }

    /// Parse cassette text.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str, timescale: f64) -> Result<Self, CassetteError> {
        Ok(Self {
            cassette: Arc::new(Cassette::parse(text)?),
            name: "cassette".into(),
            timescale: timescale.max(0.0),
        })
    }

    /// The parsed cassette.
    pub fn cassette(&self) -> &Cassette {
        &self.cassette
    }
}

/// What the harness did to a replayed process.
#[derive(Debug)]
enum Action {
    Input,
    Close,
    Signal(Signal),
}

impl ProcessAdapter for CassetteAdapter {
    fn name(&self) -> &str {
        "cassette"
    }

    fn spawn(&self, _config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let (out_tx, out_rx) = mpsc::channel(256);
            let (exit_tx, exit_rx) = oneshot::channel();
            let (act_tx, act_rx) = mpsc::unbounded_channel();
            let alive = Arc::new(AtomicBool::new(true));
            let control = Arc::new(ReplayControl {
                actions: act_tx,
                alive: alive.clone(),
                stdin_open: AtomicBool::new(true),
                keep_alive: self.cassette.header.adapter != "cli",
            });
            tokio::spawn(play(
                self.cassette.clone(),
                self.timescale,
                out_tx,
                act_rx,
                exit_tx,
                alive,
            ));
            Ok(ProcessHandle {
                stdout: out_rx,
                exited: exit_rx,
                control,
                pid: None,
                start_time: None,
                process_id: Some(format!("cassette:{}", self.name)),
            })
        })
    }
}

async fn play(
    cassette: Arc<Cassette>,
    timescale: f64,
    out: mpsc::Sender<StdoutLine>,
    mut actions: mpsc::UnboundedReceiver<Action>,
    exit: oneshot::Sender<ExitInfo>,
    alive: Arc<AtomicBool>,
) {
    let mut queued: VecDeque<Action> = VecDeque::new();
    let mut prev_t = 0u64;
    let mut result = ExitInfo {
        code: Some(0),
        ..Default::default()
    };
    let killed = |s: Signal| ExitInfo {
        code: None,
        signal: Some(signal_label(s).into()),
        stderr_tail: String::new(),
    };
    'records: for record in &cassette.records {
        let t = match record {
            CassetteRecord::Out { t, .. }
            | CassetteRecord::In { t, .. }
            | CassetteRecord::Exit { t, .. } => *t,
        };
        let gap = Duration::from_secs_f64(t.saturating_sub(prev_t) as f64 / 1000.0 * timescale);
        prev_t = t;
        match record {
            CassetteRecord::In { kind, .. } if kind == "initial" => {}
            CassetteRecord::In { kind, .. } => {
                // Stop here until the harness acts; an unexpected signal
                // ends the replay the way it would end the process.
                let action = match queued.pop_front() {
                    Some(a) => Some(a),
                    None => actions.recv().await,
                };
                match action {
                    Some(Action::Signal(s)) if kind != "signal" => {
                        result = killed(s);
                        break 'records;
                    }
                    Some(_) => {}
                    // Every control handle is gone: nobody can resume us.
                    None => {
                        result = killed(Signal::Kill);
                        break 'records;
                    }
                }
            }
            CassetteRecord::Out { line, .. } => {
                if !gap.is_zero() {
                    let sleep = tokio::time::sleep(gap);
                    tokio::pin!(sleep);
                    loop {
                        tokio::select! {
                            _ = &mut sleep => break,
                            a = actions.recv() => match a {
                                Some(Action::Signal(s)) => {
                                    result = killed(s);
                                    break 'records;
                                }
                                Some(other) => queued.push_back(other),
                                None => { sleep.as_mut().await; break; }
                            },
                        }
                    }
                } else {
                    while let Ok(a) = actions.try_recv() {
                        if let Action::Signal(s) = a {
                            result = killed(s);
                            break 'records;
                        }
                        queued.push_back(a);
                    }
                }
                if out.send(line.clone()).await.is_err() {
                    tracing::debug!("cassette stdout reader went away");
                }
            }
            CassetteRecord::Exit { info, .. } => {
                if !gap.is_zero() {
                    tokio::time::sleep(gap).await;
                }
                result = info.clone();
                break 'records;
            }
        }
    }
    drop(out);
    alive.store(false, Ordering::SeqCst);
    let _ = exit.send(result);
}

struct ReplayControl {
    actions: mpsc::UnboundedSender<Action>,
    alive: Arc<AtomicBool>,
    stdin_open: AtomicBool,
    keep_alive: bool,
}

impl ReplayControl {
    fn act(&self, a: Action) -> Result<(), AdapterError> {
        if !self.alive.load(Ordering::SeqCst) {
            return Err(AdapterError::NotRunning);
        }
        self.actions.send(a).map_err(|_| AdapterError::NotRunning)
    }

    fn input(&self) -> Result<(), AdapterError> {
        if !self.stdin_open.load(Ordering::SeqCst) {
            return Err(AdapterError::Write("stdin is closed".into()));
        }
        self.act(Action::Input)
    }
}

impl ProcessControl for ReplayControl {
    fn write(&self, _input: &UserInput) -> Result<(), AdapterError> {
        self.input()
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        self.input().map(|()| true)
    }

    fn respond_permission(
        &self,
        _request_id: &str,
        _decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        self.input()
    }

    fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        self.act(Action::Signal(signal))
    }

    fn close_stdin(&self) {
        if self.stdin_open.swap(false, Ordering::SeqCst) {
            let _ = self.act(Action::Close);
        }
    }

    fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    fn keep_alive(&self) -> bool {
        self.keep_alive
    }
}

// ---------------------------------------------------------------- recording tool

/// One step of a recording script.
#[derive(Debug, Clone)]
pub enum ScriptStep {
    /// Write a user message.
    Send(String),
    /// Wait for the next `result` line (the end of a turn).
    WaitTurnEnd,
    /// Wait for a stdout line containing this text.
    WaitFor(String),
    /// Cancel the current turn (control_request interrupt).
    Interrupt,
    /// Allow the last `can_use_tool` request, echoing its input.
    Allow,
    /// Deny the last `can_use_tool` request with this message.
    Deny(String),
    /// Pause.
    Sleep(Duration),
    /// Signal the process group.
    Signal(Signal),
    /// Close stdin (the CLI finishes and exits).
    CloseStdin,
}

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
        let mut last_permission: Option<(String, Value)> = None;
        for step in steps {
            match step {
                ScriptStep::Send(text) => control.write(&UserInput {
                    text: text.clone(),
                    content_blocks: Vec::new(),
                })?,
                ScriptStep::WaitTurnEnd => {
                    wait_line(&mut handle.stdout, &mut last_permission, |v| {
                        v["type"] == "result"
                    })
                    .await?
                }
                ScriptStep::WaitFor(text) => {
                    let text = text.clone();
                    wait_raw(&mut handle.stdout, &mut last_permission, &text).await?
                }
                ScriptStep::Interrupt => {
                    control.interrupt()?;
                }
                ScriptStep::Allow | ScriptStep::Deny(_) => {
                    if last_permission.is_none() {
                        wait_line(&mut handle.stdout, &mut last_permission, |v| {
                            v["request"]["subtype"] == "can_use_tool"
                        })
                        .await?;
                    }
                    let (id, input) = last_permission.take().expect("waited for a request");
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
    let info = handle.exited.await.unwrap_or_default();
    // The recorder writes the file right after it forwards the exit; give
    // it a moment so the file is complete when we return.
    for _ in 0..100 {
        if std::fs::read_to_string(path)
            .map(|t| t.contains("\"dir\":\"exit\""))
            .unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(info)
}

/// Read stdout until `pred` matches a JSON line, remembering the last
/// `can_use_tool` request seen on the way.
async fn wait_line(
    rx: &mut mpsc::Receiver<StdoutLine>,
    last_permission: &mut Option<(String, Value)>,
    pred: impl Fn(&Value) -> bool,
) -> Result<(), CassetteError> {
    while let Some(line) = rx.recv().await {
        if let StdoutLine::Line(l) = line
            && let Ok(v) = serde_json::from_str::<Value>(&l)
        {
            note_permission(&v, last_permission);
            if pred(&v) {
                return Ok(());
            }
        }
    }
    Err(AdapterError::NotRunning.into())
}

async fn wait_raw(
    rx: &mut mpsc::Receiver<StdoutLine>,
    last_permission: &mut Option<(String, Value)>,
    needle: &str,
) -> Result<(), CassetteError> {
    while let Some(line) = rx.recv().await {
        if let StdoutLine::Line(l) = line {
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                note_permission(&v, last_permission);
            }
            if l.contains(needle) {
                return Ok(());
            }
        }
    }
    Err(AdapterError::NotRunning.into())
}

fn note_permission(v: &Value, last: &mut Option<(String, Value)>) {
    if v["type"] == "control_request" && v["request"]["subtype"] == "can_use_tool" {
        *last = Some((
            v["request_id"].as_str().unwrap_or_default().to_string(),
            v["request"]["input"].clone(),
        ));
    }
}
