//! What several test files share, whichever fixture they use on top: the
//! real claude CLI and the environment that points it at the fake Messages
//! API, the committed recordings, short names for events, and the gRPC
//! server started in-process.
//!
//! A test file declares `mod common;` next to the fixture module it uses
//! (`support`, `cli`, `cli_grpc`,
//! `cassette`); those reach it as `super::common`.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::claude::{ClaudeOptions, PermissionMode};
use agent_harness_server::error::Error;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use agent_harness_server::store::Store;
use agent_harness_server::{ServeOptions, serve_on};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// The CLI version the recordings and the fake API's behaviour table were
/// made with.
pub const CLI_VERSION: &str = "2.1.197";

/// `claude --version` of the CLI under test: [`CLI_VERSION`], or the one
/// `CLAUDE_BIN` names (the suite also runs against the newest release).
pub fn cli_version_under_test() -> String {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION
        .get_or_init(|| {
            let out = std::process::Command::new(claude_bin())
                .arg("--version")
                .output()
                .expect("claude --version");
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .clone()
}

/// The Codex version the Codex recordings were made with (the pin of
/// tests/tools/package.json).
pub const CODEX_VERSION: &str = "0.169.0";

/// `codex --version` of the Codex under test: [`CODEX_VERSION`], or the one
/// `CODEX_BIN` names.
pub fn codex_version_under_test() -> String {
    let out = std::process::Command::new(agent_harness_fake_api::cli::codex_bin())
        .arg("--version")
        .output()
        .expect("codex --version");
    // "codex-cli 0.169.0"
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

// Where the real CLI is, and the one-line failure when it is not.
#[allow(unused_imports)] // not every test binary runs the newest CLI
pub use agent_harness_fake_api::cli::{claude_bin, claude_bin_newest};

/// Adapter options that run the real CLI ([`claude_bin`]).
pub fn cli_options(permissions: PermissionMode) -> ClaudeOptions {
    ClaudeOptions {
        claude_bin: Some(claude_bin()),
        permissions,
        ..ClaudeOptions::default()
    }
}

/// Variables of a developer's own login, config or proxy that must never
/// reach a CLI under test.
const STRIPPED_ENV: [&str; 9] = [
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CONFIG_DIR",
    "ANTHROPIC_MODEL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "https_proxy",
    "http_proxy",
    "ALL_PROXY",
];

/// The CLI's configuration directory in a test (`CLAUDE_CONFIG_DIR`, as
/// the server owns one under its data dir): settings, login state and the
/// transcripts `--resume` reads live here, not in `home/.claude`.
pub fn cli_config_dir(home: &Path) -> PathBuf {
    home.join("server-claude")
}

/// Points the CLI at the fake Messages API with `home` as its HOME and
/// [`cli_config_dir`] as its configuration directory (created 0700, as
/// the server creates its own), and strips [`STRIPPED_ENV`]: the fake must
/// be the only endpoint the child can talk to.
pub fn point_at_fake_api(options: &mut ClaudeOptions, api: &FakeApi, home: &Path) {
    let config_dir = cli_config_dir(home);
    agent_harness_server::adapter::claude::config_dir::prepare(&config_dir, None)
        .expect("create the CLI's configuration directory");
    options.config_dir = Some(config_dir);
    options.env = vec![("HOME".into(), home.display().to_string())];
    options
        .env
        .extend(api.cli_env().into_iter().map(|(k, v)| (k.to_owned(), v)));
    options
        .strip_env_keys
        .extend(STRIPPED_ENV.map(String::from));
}

/// The committed recordings of the real CLI (`cassettes/`, with the raw
/// transcripts under `cassettes/transcripts/`).
pub fn cassettes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cassettes")
}

/// The names in `dir` that end with `suffix`, without it, sorted.
pub fn file_stems(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(suffix).map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Short name of an event's payload, for assertions and messages.
pub fn kind(e: &pb::Event) -> &'static str {
    match &e.payload {
        Some(Payload::RunStart(_)) => "run_start",
        Some(Payload::RunReady(_)) => "run_ready",
        Some(Payload::RunEnd(_)) => "run_end",
        Some(Payload::RunError(_)) => "run_error",
        Some(Payload::StopRequested(_)) => "stop_requested",
        Some(Payload::Content(_)) => "content",
        Some(Payload::Result(_)) => "result",
        Some(Payload::TurnEnd(_)) => "turn_end",
        Some(Payload::InputSent(_)) => "input_sent",
        Some(Payload::TaskStarted(_)) => "task_started",
        Some(Payload::TaskUpdated(_)) => "task_updated",
        Some(Payload::TaskNotification(_)) => "task_notification",
        Some(Payload::PermissionRequested(_)) => "permission_requested",
        Some(Payload::PermissionResolved(_)) => "permission_resolved",
        Some(Payload::SettingChanged(_)) => "setting_changed",
        Some(Payload::FilesRewound(_)) => "files_rewound",
        Some(Payload::TurnStart(_)) => "turn_start",
        Some(Payload::Unreadable(_)) => "unreadable",
        Some(Payload::TitleSet(_)) => "title_set",
        None => "none",
    }
}

/// The short names of `events`, in order.
pub fn kinds(events: &[pb::Event]) -> Vec<&'static str> {
    events.iter().map(kind).collect()
}

/// A short, stable name for a payload with the detail a recorded scenario
/// is about (block types, tool or text result, turn_end subtype, ...), as
/// the pinned expectations of the cassettes and transcripts spell it.
pub fn detailed_kind(p: &Payload) -> String {
    match p {
        Payload::RunReady(_) => "run_ready".into(),
        Payload::Content(c) => {
            let blocks: Vec<&str> = c.blocks.iter().map(|b| b.r#type.as_str()).collect();
            format!("content[{}]", blocks.join(","))
        }
        Payload::Result(r) if !r.tool_results.is_empty() => {
            format!("result[tool{}]", if r.is_error { ",error" } else { "" })
        }
        Payload::Result(_) => "result[text]".into(),
        Payload::TurnEnd(t) if t.compact => "turn_end[compact]".into(),
        Payload::TurnEnd(t) => format!(
            "turn_end[{}{}]",
            t.subtype,
            if t.is_error { ",error" } else { "" }
        ),
        Payload::TurnStart(t) => format!("turn_start[{}]", t.origin),
        Payload::TaskStarted(t) => format!("task_started[{}]", t.task_type),
        Payload::TaskUpdated(t) => format!("task_updated[{}]", t.status),
        Payload::TaskNotification(t) => format!("task_notification[{}]", t.status),
        Payload::PermissionRequested(p) => format!("permission_requested[{}]", p.tool_name),
        Payload::PermissionResolved(p) => format!("permission_resolved[{}]", p.by),
        Payload::RunError(e) => format!("run_error[{}]", e.kind),
        other => format!("{other:?}"),
    }
}

/// The whole server running in this process on 127.0.0.1:0: event logs
/// over a store, a session manager spawning through an adapter, and
/// `serve_on` until [`InProcessServer::shutdown`]. Dropping it without a
/// shutdown (a failed test) aborts the serve task.
pub struct InProcessServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The manager it serves (for calls no RPC makes, e.g. a retention pass).
    pub manager: SessionManager,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl InProcessServer {
    /// Serves a manager over `store` that spawns through `adapter`; idle
    /// Subscribe streams get a heartbeat every `heartbeat`.
    pub async fn start(
        store: Arc<dyn Store>,
        adapter: Arc<dyn ProcessAdapter>,
        manager: ManagerOptions,
        heartbeat: Duration,
        serve: ServeOptions,
    ) -> Self {
        let logs = EventLogs::open(
            store,
            LogOptions {
                heartbeat,
                ..LogOptions::default()
            },
        )
        .expect("open the event logs");
        let manager = SessionManager::new(adapter, logs, manager);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_on(listener, manager.clone(), serve, async {
            let _ = rx.await;
        }));
        Self {
            addr,
            manager,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// A connected channel (for the generated, reflection and health clients).
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("connect to the in-process server")
    }

    /// Graceful shutdown; returns serve_on's result. Panics if the server
    /// is not down within `within`, or was shut down already.
    pub async fn shutdown(&mut self, within: Duration) -> Result<(), Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = self.task.take().expect("the server is running");
        tokio::time::timeout(within, task)
            .await
            .expect("the server shuts down in time")
            .expect("the serve task did not panic")
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        // Stop serving; the adapters' kill_on_drop reaps their processes.
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}
