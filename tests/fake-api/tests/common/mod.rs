//! What the direct tests of agents that speak JSON lines on stdio share: the transcript
//! recorder that writes `cassettes/<agent>/`, one child process read line by line, and the
//! macro that runs each scenario against the pinned and the newest release, with the
//! fixture each scenario starts from.

#![allow(dead_code)] // each test binary uses its own subset

pub mod acp;

use agent_harness_fake_api::{FakeApi, RecordedRequest};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// Where one process's transcript goes, if recording.
pub type Recorder = Option<Arc<Mutex<std::fs::File>>>;

/// The recorder of the `n`th process (from 1) of `scenario`: with the directory `var` names
/// set and the pinned release, `DIR/<scenario>.jsonl` (the first process) or
/// `DIR/<scenario>.<n>.jsonl`; one file per process, as a decoder sees one process.
pub fn recorder(var: &str, scenario: &str, pinned: bool, n: usize) -> Recorder {
    let dir = std::env::var_os(var)?;
    if !pinned {
        return None;
    }
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("create the recording directory");
    let name = match n {
        1 => format!("{scenario}.jsonl"),
        n => format!("{scenario}.{n}.jsonl"),
    };
    let file = std::fs::File::create(dir.join(name)).expect("recording");
    Some(Arc::new(Mutex::new(file)))
}

/// Appends `{"dir": dir, "line": line}` to the transcript.
fn record(rec: &Recorder, dir: &str, line: &str) {
    if let Some(f) = rec {
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(f, "{}", json!({"dir": dir, "line": line})).expect("write the recording");
    }
}

/// One agent process speaking JSON, one message per line, on stdio: every line written
/// and read goes to its recorder in the order it was written and read.
pub struct LinesChild {
    /// The agent's name in failure messages.
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    rec: Recorder,
    /// How long one expected line may take.
    line_timeout: Duration,
    /// Every line read so far, for failure messages.
    pub seen: Vec<Value>,
}

impl LinesChild {
    /// Spawns `cmd` with piped stdin and stdout (stderr dropped; killed when dropped).
    pub fn spawn(
        name: &'static str,
        mut cmd: Command,
        rec: Recorder,
        line_timeout: Duration,
    ) -> LinesChild {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        let out_rec = rec.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = r.next_line().await {
                record(&out_rec, "out", &line);
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LinesChild {
            name,
            stdin: child.stdin.take(),
            child,
            lines,
            rec,
            line_timeout,
            seen: Vec::new(),
        }
    }

    /// Writes one line.
    pub async fn send(&mut self, v: Value) {
        let line = v.to_string();
        record(&self.rec, "in", &line);
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next line the agent writes, or `None` when none comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        let line = match tokio::time::timeout(wait, self.lines.recv()).await {
            Ok(Some(l)) => l,
            Ok(None) => panic!("{} closed stdout; seen: {:#?}", self.name, self.seen),
            Err(_) => return None,
        };
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("{} wrote a line that is not JSON ({e}): {line}", self.name)
        });
        self.seen.push(v.clone());
        Some(v)
    }

    /// The next line the agent writes; a failure when none comes in the line timeout.
    pub async fn next(&mut self) -> Value {
        match self.next_within(self.line_timeout).await {
            Some(v) => v,
            None => panic!(
                "no line from {} in {:?}; seen: {:#?}",
                self.name, self.line_timeout, self.seen
            ),
        }
    }

    /// Reads until a line matches, returning it and the lines before it.
    pub async fn until(&mut self, what: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let v = self.next().await;
            if what(&v) {
                return (v, before);
            }
            before.push(v);
        }
    }

    /// Everything the agent writes until it has been quiet for `quiet`.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut lines = Vec::new();
        while let Some(v) = self.next_within(quiet).await {
            lines.push(v);
        }
        lines
    }

    /// Closes stdin and waits for the process to exit, as a client that goes away does.
    pub async fn exit(mut self) {
        drop(self.stdin.take());
        match tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await {
            Ok(status) => {
                status.unwrap_or_else(|e| panic!("wait for {}: {e}", self.name));
            }
            Err(_) => panic!("{} did not exit within 20 s of stdin EOF", self.name),
        }
    }
}

/// Where the pinned and the newest release's binaries are.
pub type Releases = (fn() -> PathBuf, fn() -> PathBuf);

/// One scenario's fixture: the fake, a `HOME` (the test binary points the agent at the
/// fake there), a working directory and the binary under test, with the count of the
/// processes spawned so far, as each process gets a transcript of its own.
pub struct Fixture {
    pub api: FakeApi,
    pub home: tempfile::TempDir,
    pub cwd: tempfile::TempDir,
    bin: PathBuf,
    scenario: &'static str,
    pinned: bool,
    /// The variable naming the directory transcripts are recorded to.
    record_var: &'static str,
    spawned: usize,
}

impl Fixture {
    pub fn new(
        scenario: &'static str,
        pinned: bool,
        bins: Releases,
        record_var: &'static str,
    ) -> Fixture {
        let bin = if pinned { bins.0() } else { bins.1() };
        Fixture {
            api: FakeApi::start_blocking(),
            home: tempfile::tempdir().expect("temp HOME"),
            cwd: tempfile::tempdir().expect("temp cwd"),
            bin,
            scenario,
            pinned,
            record_var,
            spawned: 0,
        }
    }

    /// The next process's command, run in the working directory with `HOME` and an
    /// environment cleared of everything from a developer's own setup but `PATH`, and its
    /// recorder.
    pub fn command(&mut self) -> (Command, Recorder) {
        self.spawned += 1;
        let rec = recorder(self.record_var, self.scenario, self.pinned, self.spawned);
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("SHELL", "/bin/bash")
            .current_dir(self.cwd.path());
        (cmd, rec)
    }

    /// The working directory as the agent is told it.
    pub fn cwd_str(&self) -> String {
        self.cwd.path().display().to_string()
    }
}

/// After the approved `touch approved.txt && echo made-it`: the file is made, the model's
/// answer carries the command's output, and the second model call is the tool result of
/// `scenario`.
pub fn approved_command_ran(cwd: &Path, answer: &str, calls: &[RecordedRequest], scenario: &str) {
    assert!(cwd.join("approved.txt").exists());
    assert!(
        answer.starts_with("Tool step finished.") && answer.contains("made-it"),
        "{answer}"
    );
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].scenario, format!("{scenario}+tool_result"));
}

/// The last Responses API call of a resumed session (`TEXT remember me`, then `TEXT again`)
/// carries both prompts and the earlier answer.
pub fn responses_carry_history(calls: &[RecordedRequest]) {
    let last = calls.last().unwrap();
    assert_eq!(last.user_prompts(), ["TEXT remember me", "TEXT again"]);
    let input = last.body.as_ref().unwrap()["input"].to_string();
    assert!(
        input.contains("remember me"),
        "the earlier answer is sent too"
    );
}

/// Waits until the fake has no reply stream open (a cancelled turn dropped its stream).
pub async fn streams_closed(api: &FakeApi) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while api.active_streams() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model stream stays open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Declares the test binary's `Setup`, a [`Fixture`] read through as one; the binary's own
/// `impl Setup` gives its `new` (the fake configured in `HOME`) and `spawn` (the agent's
/// command).
macro_rules! setup {
    () => {
        struct Setup(common::Fixture);

        impl std::ops::Deref for Setup {
            type Target = common::Fixture;
            fn deref(&self) -> &common::Fixture {
                &self.0
            }
        }
    };
}
pub(crate) use setup;

/// Runs each scenario against the pinned and the newest release: `Setup::new(scenario,
/// pinned)` of the test binary builds the fixture.
macro_rules! both_releases {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pinned() {
                super::$scenario(super::Setup::new(stringify!($scenario), true)).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn newest() {
                super::$scenario(super::Setup::new(stringify!($scenario), false)).await
            }
        }
    )*};
}
pub(crate) use both_releases;
