//! Shared fixture for tests that run the real claude CLI against the fake
//! Messages API: a temp HOME and work dir, the binary, and a driver that
//! normalizes stdout as it arrives.
#![allow(dead_code)]

use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::{ClaudeOptions, PermissionMode};
use agent_harness_server::adapter::codex::CodexOptions;
use agent_harness_server::adapter::{ExitInfo, ProcessHandle, SpawnConfig, UserInput};
use agent_harness_server::normalize::Normalizer;
use agent_harness_server::supervise::DEFAULT_MAX_LINE_BYTES;

use super::common::{cli_options, point_at_fake_api};

/// How long one turn against the fake API may take.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(60);

/// A fake API plus a private HOME and work dir for one test.
pub struct Fixture {
    /// The scripted Messages API.
    pub api: FakeApi,
    /// HOME for the CLI (its sessions live here, so --resume works).
    pub home: tempfile::TempDir,
    /// The CLI's cwd.
    pub work: tempfile::TempDir,
}

impl Fixture {
    pub async fn new() -> Self {
        Self {
            api: FakeApi::start().await,
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    /// Options for the real CLI talking to this fixture's fake API.
    pub fn options(&self, permissions: PermissionMode) -> ClaudeOptions {
        let mut o = cli_options(permissions);
        point_at_fake_api(&mut o, &self.api, self.home.path());
        o
    }

    /// Options for the real Codex talking to this fixture's fake API, with
    /// the fixture's HOME as its `CODEX_HOME` too.
    pub fn codex_options(&self, permissions: PermissionMode) -> CodexOptions {
        let home = self.home.path();
        self.api.codex_home(home).expect("config.toml");
        let mut o = CodexOptions::new(agent_harness_fake_api::cli::codex_bin());
        o.permissions = permissions;
        o.codex_home = Some(home.to_path_buf());
        o.env = self
            .api
            .codex_env(home)
            .into_iter()
            .filter(|(k, _)| *k != "CODEX_HOME")
            .map(|(k, v)| (k.to_owned(), v))
            .chain([
                ("HOME".to_owned(), home.display().to_string()),
                ("RUST_LOG".to_owned(), "error".to_owned()),
            ])
            .collect();
        o
    }

    /// A Codex run of `prompt` in the work dir (Codex's configured model).
    pub fn codex_config(&self, prompt: &str) -> SpawnConfig {
        let mut c = self.config(prompt);
        c.config.agent = "codex".into();
        c.config.model.clear();
        c
    }

    pub fn config(&self, prompt: &str) -> SpawnConfig {
        SpawnConfig {
            session_id: "s-test".into(),
            // Unique: a run's end kills every process carrying its id.
            run_id: format!("r-test-{}", uuid::Uuid::new_v4()),
            config: pb::StartConfig {
                prompt: prompt.into(),
                cwd: self.work.path().display().to_string(),
                model: "claude-sonnet-4-5".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// A spawned process and the normalizer fed from its stdout.
pub struct Driver {
    pub handle: ProcessHandle,
    pub norm: Normalizer,
    /// Every event so far.
    pub events: Vec<Payload>,
}

impl Driver {
    pub fn new(handle: ProcessHandle) -> Self {
        let mut norm = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
        norm.set_pid(handle.pid);
        // The spawn delivered the prompt.
        norm.input_sent();
        Self {
            handle,
            norm,
            events: Vec::new(),
        }
    }

    /// Writes a user message and tells the normalizer, as the manager does.
    pub fn send(&mut self, text: &str) {
        let input = UserInput {
            text: text.into(),
            ..UserInput::default()
        };
        self.handle.control.write(&input).unwrap();
        self.norm.input_sent();
    }

    /// Read until an event matches `pred`; returns the events read on the way
    /// (including the match). Panics on timeout or stdout EOF.
    pub async fn until(&mut self, what: &str, pred: impl Fn(&Payload) -> bool) -> Vec<Payload> {
        let mut seen = Vec::new();
        let fut = async {
            while let Some(line) = self.handle.stdout.recv().await {
                for (p, _) in self.norm.line(&line) {
                    self.events.push(p.clone());
                    seen.push(p.clone());
                    if pred(&p) {
                        return true;
                    }
                }
            }
            false
        };
        match tokio::time::timeout(TURN_TIMEOUT, fut).await {
            Ok(true) => seen,
            Ok(false) => panic!("stdout closed before {what}; saw {seen:#?}"),
            Err(_) => panic!("timed out waiting for {what}; saw {seen:#?}"),
        }
    }

    pub async fn turn_end(&mut self) -> (pb::TurnEnd, Vec<Payload>) {
        let seen = self
            .until(
                "turn_end",
                |p| matches!(p, Payload::TurnEnd(t) if !t.compact),
            )
            .await;
        let Some(Payload::TurnEnd(t)) = seen.last().cloned() else {
            unreachable!()
        };
        (t, seen)
    }

    /// Drain stdout and wait for the exit.
    pub async fn exit(mut self) -> (ExitInfo, Vec<Payload>) {
        let fut = async {
            while let Some(line) = self.handle.stdout.recv().await {
                for (p, _) in self.norm.line(&line) {
                    self.events.push(p);
                }
            }
            (&mut self.handle.exited).await.unwrap()
        };
        let info = tokio::time::timeout(TURN_TIMEOUT, fut)
            .await
            .expect("process did not exit");
        (info, self.events)
    }
}

/// All text of content events.
pub fn texts(events: &[Payload]) -> String {
    events
        .iter()
        .filter_map(|p| match p {
            Payload::Content(c) => Some(
                c.blocks
                    .iter()
                    .map(|b| b.text.clone())
                    .collect::<Vec<_>>()
                    .join(""),
            ),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("|")
}
