//! Drives the real `claude` CLI in interactive stream-json mode against a [`FakeApi`].

#![allow(dead_code)] // each test binary uses its own subset

use agent_harness_fake_api::FakeApi;
use agent_harness_server::adapter::UserInput;
use agent_harness_server::adapter::claude::interactive::STREAM_JSON_ARGS;
use agent_harness_server::adapter::claude::stream_json::user_message_line;
use serde_json::{Value, json};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long any single expected frame may take. Normal runs need well under a second per
/// frame; the margin covers a loaded CI machine compiling other crates.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

pub use agent_harness_fake_api::cli::claude_bin;

/// One `claude` process speaking stream-json both ways, started with the interactive
/// adapter's own protocol arguments ([`STREAM_JSON_ARGS`]), with a fresh HOME and working
/// directory.
pub struct Cli {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Value>,
    /// Every stdout line read so far, for failure messages.
    pub seen: Vec<Value>,
    stderr: tokio::task::JoinHandle<String>,
    /// The CLI's HOME (settings, transcripts); removed on drop.
    pub home: tempfile::TempDir,
    /// The CLI's working directory; removed on drop.
    pub cwd: tempfile::TempDir,
}

impl Cli {
    /// Spawns the CLI against `api` with `extra` arguments and `env` additions.
    pub fn spawn(api: &FakeApi, extra: &[&str], env: &[(&str, &str)]) -> Cli {
        let home = tempfile::tempdir().expect("temp HOME");
        let cwd = tempfile::tempdir().expect("temp cwd");
        let mut cmd = Command::new(claude_bin());
        cmd.args(STREAM_JSON_ARGS)
            .args(extra)
            // A clean environment: nothing from a developer's own claude setup leaks in.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SHELL", "/bin/bash")
            .env("HOME", home.path())
            .envs(api.cli_env())
            .envs(env.iter().copied())
            .current_dir(cwd.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn the claude CLI");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let v = serde_json::from_str(&line).unwrap_or_else(|_| json!({"raw": line}));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = tokio::spawn(async move {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s).await;
            s
        });
        Cli {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            stderr,
            home,
            cwd,
        }
    }

    /// Writes one JSON line to stdin.
    pub async fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin already closed");
        let mut line = v.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Sends a user message with plain text content, as the interactive adapter writes it.
    pub async fn send_user(&mut self, text: &str) {
        let line = user_message_line(&UserInput {
            text: text.to_owned(),
            ..UserInput::default()
        });
        self.send(serde_json::from_str(&line).expect("the adapter writes JSON"))
            .await;
    }

    /// Sends `control_request {subtype: interrupt}` with `request_id`.
    pub async fn interrupt(&mut self, request_id: &str) {
        self.send(json!({
            "type": "control_request",
            "request_id": request_id,
            "request": {"subtype": "interrupt"},
        }))
        .await;
    }

    /// The next stdout line matching `pred`; lines before it are kept in `seen`. Panics with
    /// everything seen so far when it does not come in time or stdout ends.
    pub async fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + FRAME_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(v)) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Ok(None) => {
                    self.fail(&format!("stdout ended while waiting for {what}"))
                        .await
                }
                Err(_) => self.fail(&format!("timed out waiting for {what}")).await,
            }
        }
    }

    /// Every stdout line left, up to its end (after the process exited or
    /// was signalled); fails when stdout does not end in time.
    pub async fn rest(&mut self) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + FRAME_TIMEOUT;
        let mut rest = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some(v)) => {
                    self.seen.push(v.clone());
                    rest.push(v);
                }
                Ok(None) => return rest,
                Err(_) => self.fail("timed out waiting for stdout to end").await,
            }
        }
    }

    /// The next `result` line.
    pub async fn expect_result(&mut self) -> Value {
        self.expect("result", |v| v["type"] == "result").await
    }

    /// Closes stdin and waits for the exit, then checks stdout has nothing unexpected left.
    pub async fn close_and_wait(&mut self) -> ExitStatus {
        self.stdin.take();
        match tokio::time::timeout(FRAME_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) => {
                while let Ok(v) = self.lines.try_recv() {
                    self.seen.push(v);
                }
                status
            }
            Ok(Err(e)) => panic!("wait for claude: {e}"),
            Err(_) => self.fail("claude did not exit after stdin EOF").await,
        }
    }

    /// The process id, for signals.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("claude still running")
    }

    /// Waits for the exit without closing stdin (after a signal).
    pub async fn wait(&mut self) -> ExitStatus {
        match tokio::time::timeout(FRAME_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("wait for claude: {e}"),
            Err(_) => self.fail("claude did not exit").await,
        }
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        let stderr = (&mut self.stderr).await.unwrap_or_default();
        let seen: Vec<String> = self
            .seen
            .iter()
            .map(|v| {
                let s = v.to_string();
                s.chars().take(400).collect()
            })
            .collect();
        panic!(
            "{why}\n--- stdout so far ({} lines):\n{}\n--- stderr:\n{stderr}",
            seen.len(),
            seen.join("\n")
        );
    }
}

/// Polls `cond` every 20 ms for up to [`FRAME_TIMEOUT`].
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + FRAME_TIMEOUT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether a descendant of process `pid` runs exactly `command` (its argv joined by spaces),
/// read from /proc: lets a test wait until a tool's command really runs.
pub fn runs_descendant(pid: u32, command: &str) -> bool {
    let mut parents = std::collections::HashMap::new();
    let mut matches = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // The parent pid is the second field after the `)` that closes the command name.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            continue;
        };
        parents.insert(p, ppid);
        let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let argv: Vec<String> = argv
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if argv.join(" ") == command {
            matches.push(p);
        }
    }
    matches.into_iter().any(|mut p| {
        while let Some(&parent) = parents.get(&p) {
            if parent == pid {
                return true;
            }
            p = parent;
        }
        false
    })
}

/// A value unlikely to appear anywhere by chance, to prove a tool really ran.
pub fn nonce() -> String {
    format!("{:x}", agent_harness_fake_api::ids::unique_number())
}

/// The text blocks of an `assistant` line, concatenated.
pub fn assistant_text(v: &Value) -> String {
    v["message"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .concat()
        })
        .unwrap_or_default()
}

/// Whether `v` is a `user` line carrying a `tool_result`.
pub fn is_tool_result(v: &Value) -> bool {
    v["type"] == "user"
        && v["message"]["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
}

/// The first `tool_result` block of a `user` line.
pub fn tool_result(v: &Value) -> &Value {
    v["message"]["content"]
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "tool_result"))
        .expect("a tool_result block")
}

/// Whether `v` is an `assistant` line with a block of type `kind`.
pub fn has_block(v: &Value, kind: &str) -> bool {
    v["type"] == "assistant"
        && v["message"]["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == kind))
}
