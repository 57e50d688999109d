//! Replay: a cassette played back as a process, with no binary.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use agent_harness_protocol::vocab::agent;

use crate::adapter::codex::decode::CodexDecoder;
use crate::adapter::{
    AdapterError, BoxFuture, Decoder, DecoderSetup, ExitInfo, PermissionDecision, ProcessAdapter,
    ProcessControl, ProcessHandle, Signal, SpawnConfig, StdoutLine, UserInput,
};
use crate::normalize::Normalizer;

use super::format::*;

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
    /// A host control request, with the id the harness gave it now: the
    /// recorded answer is replayed under this id.
    Control(String),
    Close,
    Signal(Signal),
}

impl ProcessAdapter for CassetteAdapter {
    fn name(&self) -> &str {
        "cassette"
    }

    /// A cassette replays one agent's session: a run of the other agent
    /// would read lines it cannot decode.
    fn check(&self, config: &SpawnConfig) -> Result<(), AdapterError> {
        let recorded = self.cassette.header.agent();
        let asked = agent::of_run(&config.config.agent);
        if asked == recorded {
            return Ok(());
        }
        Err(AdapterError::Unable(format!(
            "this server replays a cassette recorded from {recorded}; a {asked} session cannot \
             run on it (start it with agent {recorded:?})"
        )))
    }

    /// The recorded agent's lines, decoded as that agent's adapter decodes
    /// them.
    fn decoder(&self, _config: &SpawnConfig, setup: DecoderSetup) -> Box<dyn Decoder> {
        match self.cassette.header.agent() {
            agent::CODEX => Box::new(CodexDecoder::new(&setup)),
            _ => Box::new(Normalizer::with_setup(&setup)),
        }
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
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
                settings_without_stdin: self.cassette.header.agent() == agent::CODEX,
            });
            // Runs to completion: the tape ends, or the run's kill or its
            // dropped handle ends the play as a process's would end.
            config.tasks.spawn(
                "cassette replay",
                play(
                    self.cassette.clone(),
                    self.timescale,
                    out_tx,
                    act_rx,
                    exit_tx,
                    alive,
                ),
            );
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
    // Recorded control request id -> the live one.
    let mut control_ids: HashMap<String, String> = HashMap::new();
    let one_shot = cassette.header.adapter == "cli";
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
            // A one-shot process's stdin is closed by its adapter right
            // after the prompt (`--print`), not by the harness: nothing to
            // wait for.
            CassetteRecord::In { kind, .. } if kind == "close" && one_shot => {}
            CassetteRecord::In { kind, line, .. } => {
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
                    Some(Action::Control(live)) => {
                        if let Some(recorded) = serde_json::from_str::<serde_json::Value>(line)
                            .ok()
                            .and_then(|v| v["request_id"].as_str().map(str::to_owned))
                        {
                            control_ids.insert(recorded, live);
                        }
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
                let line = match line {
                    StdoutLine::Line(l) if !control_ids.is_empty() => {
                        StdoutLine::Line(answer_as(l, &control_ids))
                    }
                    other => other.clone(),
                };
                if out.send(line).await.is_err() {
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

/// A recorded `control_response` to a request the harness now sent under
/// another id, with that id; any other line as it is.
fn answer_as(line: &str, ids: &HashMap<String, String>) -> String {
    if !line.contains("control_response") {
        return line.to_owned();
    }
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) else {
        return line.to_owned();
    };
    let recorded = v["response"]["request_id"].as_str().unwrap_or_default();
    match ids.get(recorded) {
        Some(live) if v["type"] == "control_response" => {
            v["response"]["request_id"] = serde_json::Value::String(live.clone());
            v.to_string()
        }
        _ => line.to_owned(),
    }
}

struct ReplayControl {
    actions: mpsc::UnboundedSender<Action>,
    alive: Arc<AtomicBool>,
    stdin_open: AtomicBool,
    keep_alive: bool,
    /// The recorded agent applies settings (a model, a permission mode) with
    /// its next turn rather than through stdin, so its recording has no
    /// record for them to wait at (Codex).
    settings_without_stdin: bool,
}

impl ReplayControl {
    fn act(&self, a: Action) -> Result<(), AdapterError> {
        if !self.alive.load(Ordering::SeqCst) {
            return Err(AdapterError::NotRunning);
        }
        self.actions.send(a).map_err(|_| AdapterError::NotRunning)
    }

    /// A line written to stdin: refused once stdin is closed, like a real pipe.
    fn input(&self, a: Action) -> Result<(), AdapterError> {
        if !self.stdin_open.load(Ordering::SeqCst) {
            return Err(AdapterError::Write("stdin is closed".into()));
        }
        self.act(a)
    }
}

impl ProcessControl for ReplayControl {
    fn write(&self, _input: &UserInput) -> Result<(), AdapterError> {
        self.input(Action::Input)
    }

    fn interrupt(&self) -> Result<bool, AdapterError> {
        self.input(Action::Input).map(|()| true)
    }

    fn respond_permission(
        &self,
        _request_id: &str,
        _decision: &PermissionDecision,
    ) -> Result<(), AdapterError> {
        self.input(Action::Input)
    }

    fn control(
        &self,
        request_id: &str,
        _request: &serde_json::Value,
    ) -> Result<bool, AdapterError> {
        self.input(Action::Control(request_id.to_owned()))
            .map(|()| true)
    }

    /// A Codex cassette accepts the settings its adapter would apply with
    /// the next turn: what they did is already in the recorded lines.
    fn answer_control(
        &self,
        request: &serde_json::Value,
    ) -> Option<Result<serde_json::Value, String>> {
        let _ = request;
        self.settings_without_stdin
            .then(|| Ok(serde_json::json!({})))
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

#[cfg(test)]
mod tests {
    use agent_harness_protocol::pb;
    use agent_harness_protocol::pb::event::Payload;

    use super::*;

    const CLAUDE: &str =
        r#"{"type":"header","cli_version":"1","argv":[],"date":"","adapter":"interactive"}"#;
    const CODEX: &str = r#"{"type":"header","cli_version":"0.169.0","argv":["app-server"],"date":"","adapter":"codex","agent":"codex"}"#;

    fn setup() -> DecoderSetup {
        DecoderSetup {
            max_line_bytes: crate::supervise::DEFAULT_MAX_LINE_BYTES,
            ..DecoderSetup::default()
        }
    }

    fn run_of(agent: &str) -> SpawnConfig {
        SpawnConfig {
            config: pb::StartConfig {
                agent: agent.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_header_without_an_agent_is_claude_and_stays_without_one() {
        let c = CassetteAdapter::from_str(CLAUDE, 0.0).unwrap();
        assert_eq!(c.cassette().header.agent, "");
        assert_eq!(c.cassette().header.agent(), agent::CLAUDE);
        assert!(!c.cassette().to_jsonl().contains("\"agent\""));
        let x = CassetteAdapter::from_str(CODEX, 0.0).unwrap();
        assert_eq!(x.cassette().header.agent(), agent::CODEX);
        assert_eq!(
            Cassette::parse(&x.cassette().to_jsonl()).unwrap(),
            *x.cassette()
        );
    }

    #[test]
    fn a_start_of_the_other_agent_is_refused_at_check() {
        let claude = CassetteAdapter::from_str(CLAUDE, 0.0).unwrap();
        assert!(claude.check(&run_of("")).is_ok());
        assert!(claude.check(&run_of("claude")).is_ok());
        let codex = CassetteAdapter::from_str(CODEX, 0.0).unwrap();
        assert!(codex.check(&run_of("codex")).is_ok());
        let Err(AdapterError::Unable(why)) = codex.check(&run_of("")) else {
            panic!("a claude start on a codex cassette")
        };
        assert!(why.contains("recorded from codex"), "{why}");
        assert!(matches!(
            claude.check(&run_of("codex")),
            Err(AdapterError::Unable(_))
        ));
    }

    #[test]
    fn replay_decodes_with_the_recorded_agents_decoder() {
        let line = StdoutLine::Line(
            r#"{"id":2,"result":{"thread":{"id":"t-1","cliVersion":"0.169.0"},"model":"m"}}"#
                .into(),
        );
        let codex = CassetteAdapter::from_str(CODEX, 0.0).unwrap();
        let mut d = codex.decoder(&run_of("codex"), setup());
        let ready = d.line(&line);
        assert!(
            matches!(&ready[..], [(Payload::RunReady(r), _)] if r.agent == agent::CODEX),
            "{ready:?}"
        );
        // Claude's normalizer does not take Codex's lines for its own.
        let claude = CassetteAdapter::from_str(CLAUDE, 0.0).unwrap();
        let mut d = claude.decoder(&run_of(""), setup());
        assert!(
            !d.line(&line)
                .iter()
                .any(|(p, _)| matches!(p, Payload::RunReady(_)))
        );
    }
}
