//! Shared helpers for the RPC tests: a real tonic server on 127.0.0.1:0
//! driven by the generated client, with the scripted adapter.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::{
    AdapterError, BoxFuture, ProcessAdapter, ProcessHandle, SpawnConfig, StdoutLine,
};
use agent_harness_server::error::Error;
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::{MemoryStore, RedbStore, Store};
use tonic::Streaming;
use tonic::transport::Channel;

use super::common::InProcessServer;
// Part of this fixture's API; not every test file uses all of it.
#[allow(unused_imports)]
pub use super::common::{kind, kinds};

/// Upper bound for anything a test waits on.
pub const WAIT: Duration = Duration::from_secs(10);

/// Longest wait for one awaited event on a Subscribe stream.
pub const UNTIL: Duration = Duration::from_secs(120);

/// Manager options with short timers, so ladders finish in test time.
/// `stop_grace` stays generous: a loaded 2-core machine must not turn a
/// working interrupt into a signal.
pub fn fast_opts() -> ManagerOptions {
    ManagerOptions {
        idle_timeout: Duration::ZERO,
        permission_timeout: Duration::from_secs(60),
        stop_grace: Duration::from_secs(2),
        kill_grace: Duration::from_millis(200),
        // Processes stay between turns as the tests expect; the cap on idle
        // ones has tests of its own.
        max_idle_runs: usize::MAX,
        ..ManagerOptions::default()
    }
}

/// A fresh store for a test server: in memory, or on PostgreSQL (a fresh
/// database) when `AGENT_HARNESS_TEST_STORE=postgres` (see
/// [`crate::support::postgres`]), so the same suite runs on either.
pub fn test_store() -> Arc<dyn Store> {
    if crate::support::postgres::selected() {
        crate::support::postgres::shared_store()
    } else {
        Arc::new(MemoryStore::new())
    }
}

/// A server running in this process.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The scripted adapter (its record shows spawns and control calls).
    pub adapter: ScriptedAdapter,
    /// The store behind the log (reopen it after shutdown to inspect).
    pub store: Arc<dyn Store>,
    /// The manager behind the service.
    pub manager: agent_harness_server::manager::SessionManager,
    server: InProcessServer,
}

impl TestServer {
    /// Default behaviour, fast timers, test store ([`test_store`]).
    pub async fn start() -> Self {
        Self::with(
            ScriptedBehavior::default(),
            fast_opts(),
            ServeOptions::default(),
        )
        .await
    }

    /// Default behaviour and fast timers, serving with `sopts` (a token,
    /// origins, `--no-ui`, ...).
    pub async fn serving(sopts: ServeOptions) -> Self {
        Self::with(ScriptedBehavior::default(), fast_opts(), sopts).await
    }

    /// A server with these knobs over a fresh test store ([`test_store`]).
    pub async fn with(
        behavior: ScriptedBehavior,
        mopts: ManagerOptions,
        sopts: ServeOptions,
    ) -> Self {
        let adapter = ScriptedAdapter::new(behavior);
        let spawner = Arc::new(adapter.clone());
        Self::with_adapter(test_store(), spawner, adapter, mopts, sopts).await
    }

    /// Default behaviour, fast timers, over `store`.
    pub async fn on_store(store: Arc<dyn Store>) -> Self {
        let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
        let spawner = Arc::new(adapter.clone());
        let sopts = ServeOptions::default();
        Self::with_adapter(store, spawner, adapter, fast_opts(), sopts).await
    }

    /// The default scripted CLI behind an [`InjectingAdapter`] adding the
    /// lines of `inject`, over a fresh test store ([`test_store`]).
    pub async fn injecting(
        inject: impl Fn(&StdoutLine) -> Vec<StdoutLine> + Send + Sync + 'static,
        mopts: ManagerOptions,
    ) -> Self {
        let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
        let spawner = Arc::new(InjectingAdapter::new(adapter.clone(), inject));
        let (store, sopts) = (test_store(), ServeOptions::default());
        Self::with_adapter(store, spawner, adapter, mopts, sopts).await
    }

    /// A server spawning through `spawner` (a wrapper around `adapter`,
    /// whose record the test reads).
    pub async fn with_adapter(
        store: Arc<dyn Store>,
        spawner: Arc<dyn ProcessAdapter>,
        adapter: ScriptedAdapter,
        mopts: ManagerOptions,
        sopts: ServeOptions,
    ) -> Self {
        let heartbeat = Duration::from_millis(500);
        let server = InProcessServer::start(store.clone(), spawner, mopts, heartbeat, sopts).await;
        Self {
            addr: server.addr,
            adapter,
            store,
            manager: server.manager.clone(),
            server,
        }
    }

    /// A connected generated client.
    pub async fn client(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::new(self.channel().await)
    }

    /// A raw channel (for reflection and health clients).
    pub async fn channel(&self) -> Channel {
        self.server.channel().await
    }

    /// Graceful shutdown; returns serve_on's result.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        self.server.shutdown(WAIT).await
    }

    /// Every stored event of a session, read through a fresh log over the
    /// same store (after shutdown).
    pub fn stored_events(&self, session_id: &str) -> Vec<pb::Event> {
        self.store
            .read_range(session_id, 0, usize::MAX)
            .expect("read store")
    }
}

/// A start config with just a prompt.
pub fn prompt(text: &str) -> pb::StartConfig {
    pb::StartConfig {
        prompt: text.into(),
        ..Default::default()
    }
}

/// A Start request without a key (for calling a `SessionManager` in process).
pub fn start_request(session: &str, config: pb::StartConfig) -> pb::StartRequest {
    pb::StartRequest {
        session_id: session.into(),
        config: Some(config),
        idempotency_key: String::new(),
    }
}

/// A Send request under `key` ("" for none), for a `SessionManager` in process.
pub fn send_request(session: &str, text: &str, key: &str) -> pb::SendRequest {
    pb::SendRequest {
        session_id: session.into(),
        input: text.into(),
        content_blocks: vec![],
        idempotency_key: key.into(),
    }
}

/// A Stop request under `key` ("" for none), for a `SessionManager` in process.
pub fn stop_request(session: &str, key: &str) -> pb::StopRequest {
    pb::StopRequest {
        session_id: session.into(),
        idempotency_key: key.into(),
    }
}

/// Starts a session.
pub async fn start(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
    text: &str,
) -> Result<pb::StartResponse, tonic::Status> {
    client
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
            config: Some(prompt(text)),
        })
        .await
        .map(|r| r.into_inner())
}

/// Sends input.
pub async fn send(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
    text: &str,
) -> Result<String, tonic::Status> {
    client
        .send(pb::SendRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
            input: text.into(),
            content_blocks: vec![],
        })
        .await
        .map(|r| r.into_inner().run_id)
}

/// Stops.
pub async fn stop(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
) -> Result<bool, tonic::Status> {
    client
        .stop(pb::StopRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
        })
        .await
        .map(|r| r.into_inner().stopping)
}

/// Derived state.
pub async fn get(client: &mut SessionServiceClient<Channel>, session: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: session.into(),
        })
        .await
        .expect("get session")
        .into_inner()
        .session
        .expect("session")
}

/// An open Subscribe stream that remembers the events it has seen.
pub struct Sub {
    stream: Streaming<pb::SubscribeResponse>,
    /// Every event received, in order.
    pub events: Vec<pb::Event>,
    /// Every message received, in order.
    pub messages: Vec<pb::SubscribeResponse>,
}

impl Sub {
    /// Subscribes from `after_seq`.
    pub async fn open(
        client: &mut SessionServiceClient<Channel>,
        session: &str,
        after_seq: u64,
    ) -> Self {
        let stream = client
            .subscribe(pb::SubscribeRequest {
                session_id: session.into(),
                after_seq,
                include_deltas: false,
            })
            .await
            .expect("subscribe")
            .into_inner();
        Self {
            stream,
            events: vec![],
            messages: vec![],
        }
    }

    /// The next message; panics after [`WAIT`].
    pub async fn next(&mut self) -> Option<pb::SubscribeResponse> {
        let msg = tokio::time::timeout(WAIT, self.stream.message())
            .await
            .expect("subscribe message in time")
            .expect("stream ok");
        if let Some(m) = &msg {
            if let Some(Kind::Event(e)) = &m.kind {
                if let Some(last) = self.events.last() {
                    assert_eq!(e.seq, last.seq + 1, "gapless, in order");
                }
                self.events.push(e.clone());
            }
            self.messages.push(m.clone());
        }
        msg
    }

    /// Reads until an event of kind `k` (as [`kind`] names it); returns it.
    pub async fn until_kind(&mut self, k: &str) -> pb::Event {
        self.until(k, |e| kind(e) == k).await
    }

    /// Reads until an event matches `pred`; returns it. Panics after
    /// [`UNTIL`] in all (heartbeats keep a stream alive, so [`WAIT`] per
    /// message alone would let a wait for an event that never comes hang).
    pub async fn until(&mut self, what: &str, pred: impl Fn(&pb::Event) -> bool) -> pb::Event {
        let deadline = tokio::time::Instant::now() + UNTIL;
        loop {
            let next = tokio::time::timeout_at(deadline, self.next()).await;
            let next = next.unwrap_or_else(|_| {
                panic!("no {what} within {UNTIL:?}; got {:#?}", kinds(&self.events))
            });
            match next {
                Some(pb::SubscribeResponse {
                    kind: Some(Kind::Event(e)),
                }) if pred(&e) => return e,
                Some(_) => {}
                None => panic!("stream ended before {what}; got {:#?}", kinds(&self.events)),
            }
        }
    }
}

/// True for a run_end.
pub fn is_run_end(e: &pb::Event) -> bool {
    matches!(e.payload, Some(Payload::RunEnd(_)))
}

/// True for a (non-compact) turn_end.
pub fn is_turn_end(e: &pb::Event) -> bool {
    matches!(&e.payload, Some(Payload::TurnEnd(t)) if !t.compact)
}

/// The run_end payload of an event.
pub fn run_end(e: &pb::Event) -> &pb::RunEnd {
    match &e.payload {
        Some(Payload::RunEnd(r)) => r,
        _ => panic!("not a run_end: {e:?}"),
    }
}

/// Asserts that the run was stopped by the launch policy once the CLI
/// reported permission mode `mode`: a `run_error{policy}` right after the
/// last run_ready naming it, the run ending with reason Error from
/// "policy", and one run_end in all. Returns the run_error.
pub fn assert_stopped_by_policy_after_mode<'a>(
    events: &'a [pb::Event],
    mode: &str,
) -> &'a pb::RunError {
    let ready = events
        .iter()
        .rposition(
            |e| matches!(&e.payload, Some(Payload::RunReady(r)) if r.permission_mode == mode),
        )
        .unwrap_or_else(|| panic!("no run_ready reports {mode}: {:#?}", kinds(events)));
    let Some(Payload::RunError(err)) = &events[ready + 1].payload else {
        panic!("run_error right after run_ready: {:#?}", kinds(events));
    };
    assert_eq!(err.kind, "policy");
    let end = run_end(events.last().expect("run_end"));
    assert_eq!(
        (end.reason(), end.source.as_str()),
        (pb::RunEndReason::Error, "policy"),
        "{end:?}"
    );
    assert_eq!(
        1,
        events.iter().filter(|e| is_run_end(e)).count(),
        "one run_end"
    );
    err
}

/// Polls GetSession until `pred` holds.
pub async fn wait_session(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
    pred: impl Fn(&pb::Session) -> bool,
) -> pb::Session {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = get(client, session).await;
        if pred(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "session never matched: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls GetSession until the session is idle.
pub async fn wait_idle(client: &mut SessionServiceClient<Channel>, session: &str) -> pb::Session {
    wait_session(client, session, |s| {
        s.status == pb::SessionStatus::Idle as i32
    })
    .await
}

/// Starts a session, then subscribes to it from seq 0 (the replay brings
/// whatever it logged in between).
pub async fn start_subscribed(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
    text: &str,
) -> Sub {
    start(client, session, text).await.expect("start");
    Sub::open(client, session, 0).await
}

/// Subscribes to a new session, starts it, and reads up to the end of its
/// first turn, so the subscriber holds every event from the run_start on.
pub async fn first_turn(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
    text: &str,
) -> (Sub, pb::StartResponse) {
    let mut sub = Sub::open(client, session, 0).await;
    let started = start(client, session, text).await.expect("start");
    sub.until("turn_end", is_turn_end).await;
    (sub, started)
}

/// Every event of a session, read through History pages (oldest first).
pub async fn history_all(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
) -> Vec<pb::Event> {
    let mut pages = Vec::new();
    let mut before = 0;
    loop {
        let page = client
            .history(pb::HistoryRequest {
                session_id: session.into(),
                before_seq: before,
                limit: 1000,
            })
            .await
            .expect("history")
            .into_inner();
        let Some(first) = page.events.first() else {
            break;
        };
        before = first.seq;
        let more = page.has_more;
        pages.push(page.events);
        if !more {
            break;
        }
    }
    pages.into_iter().rev().flatten().collect()
}

/// Every session as ListSessions reports it.
pub async fn list(client: &mut SessionServiceClient<Channel>) -> Vec<pb::Session> {
    client
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .expect("list sessions")
        .into_inner()
        .sessions
}

/// Asserts GetSession returns exactly `derive::session` over the whole log
/// (read through History), and returns it.
pub async fn assert_derived_matches_log(
    client: &mut SessionServiceClient<Channel>,
    session: &str,
) -> pb::Session {
    let got = get(client, session).await;
    let events = history_all(client, session).await;
    let want = agent_harness_protocol::derive::session(session, &events);
    assert_eq!(
        got, want,
        "GetSession({session}) differs from derive over its log"
    );
    got
}

/// Decides, for each stdout line of the inner process, which extra lines
/// go out right before it.
pub type Injector = dyn Fn(&StdoutLine) -> Vec<StdoutLine> + Send + Sync;

/// Wraps the scripted adapter and adds stdout lines the scripted CLI does
/// not produce itself (an oversized line, background task frames), so
/// tests steer the real manager and normalizer through them.
pub struct InjectingAdapter {
    inner: ScriptedAdapter,
    inject: Arc<Injector>,
}

impl InjectingAdapter {
    /// Lines from `inject` go out before the line they were asked about.
    pub fn new(
        inner: ScriptedAdapter,
        inject: impl Fn(&StdoutLine) -> Vec<StdoutLine> + Send + Sync + 'static,
    ) -> Self {
        Self {
            inner,
            inject: Arc::new(inject),
        }
    }
}

impl ProcessAdapter for InjectingAdapter {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn spawn(&self, config: SpawnConfig) -> BoxFuture<'_, Result<ProcessHandle, AdapterError>> {
        Box::pin(async move {
            let mut handle = self.inner.spawn(config).await?;
            let (tx, rx) = tokio::sync::mpsc::channel(256);
            let mut inner = std::mem::replace(&mut handle.stdout, rx);
            let inject = self.inject.clone();
            // Ends when the inner stdout ends (the scripted process exited).
            tokio::spawn(async move {
                while let Some(line) = inner.recv().await {
                    for extra in inject(&line) {
                        if tx.send(extra).await.is_err() {
                            return;
                        }
                    }
                    if tx.send(line).await.is_err() {
                        return;
                    }
                }
            });
            Ok(handle)
        })
    }
}

/// The text of a stdout line ("" for a too-long one).
pub fn line_text(line: &StdoutLine) -> &str {
    match line {
        StdoutLine::Line(t) => t,
        StdoutLine::TooLong { .. } => "",
    }
}

impl TestServer {
    /// A server spawning through `spawner` (a real adapter, e.g. the
    /// interactive one over a [`StandInCli`]) over a fresh [`test_store`];
    /// its `adapter` field is an unused scripted adapter.
    pub async fn spawning(spawner: Arc<dyn ProcessAdapter>, mopts: ManagerOptions) -> Self {
        let unused = ScriptedAdapter::new(ScriptedBehavior::default());
        let (store, sopts) = (test_store(), ServeOptions::default());
        Self::with_adapter(store, spawner, unused, mopts, sopts).await
    }
}

/// What one process of a [`StandInCli`] was started with.
#[derive(Debug, Clone, Default)]
pub struct StandInSpawn {
    /// argv without the binary.
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: std::collections::BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: String,
}

/// A stand-in for the claude CLI: a shell script that records its argv,
/// env and cwd (one file per process in `dir`), then announces itself with
/// a `system/init` line (so a test that saw `run_ready` knows the record is
/// written) and reads stdin until an interrupt arrives, then exits 0.
/// Use `bin` as the adapter's `claude_bin`.
pub struct StandInCli {
    /// Where the records go (`spawn.<pid>`), beside the script.
    pub dir: tempfile::TempDir,
    /// The script.
    pub bin: std::path::PathBuf,
}

impl StandInCli {
    /// Writes the script into a fresh temp dir.
    pub fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("claude");
        let records = dir.path().join("records");
        std::fs::create_dir(&records).expect("records dir");
        let script = format!(
            r#"#!/bin/sh
rec='{records}'/spawn.$$
{{
  for a in "$@"; do printf 'arg:%s\n' "$a"; done
  printf 'cwd:%s\n' "$(pwd -P)"
  env | sed 's/^/env:/'
}} > "$rec.tmp"
mv "$rec.tmp" "$rec"
printf '{{"type":"system","subtype":"init","session_id":"stand-in-%s","cwd":"%s","model":"stand-in","tools":[]}}\n' "$$" "$(pwd -P)"
while IFS= read -r line; do
  case "$line" in
    *'"subtype":"interrupt"'*) exit 0 ;;
  esac
done
"#,
            records = records.display()
        );
        std::fs::write(&bin, script).expect("write stand-in");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Self { dir, bin }
    }

    /// The interactive adapter running this script.
    pub fn adapter(&self) -> Arc<dyn ProcessAdapter> {
        use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};
        Arc::new(ClaudeInteractiveAdapter::new(ClaudeOptions {
            claude_bin: Some(self.bin.clone()),
            ..ClaudeOptions::default()
        }))
    }

    /// Every process started so far (in no particular order).
    pub fn spawns(&self) -> Vec<StandInSpawn> {
        let records = self.dir.path().join("records");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&records).expect("records dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "tmp") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("record");
            let mut spawn = StandInSpawn::default();
            let mut last_env: Option<String> = None;
            for line in text.lines() {
                if let Some(a) = line.strip_prefix("arg:") {
                    spawn.args.push(a.to_owned());
                    last_env = None;
                } else if let Some(c) = line.strip_prefix("cwd:") {
                    spawn.cwd = c.to_owned();
                } else if let Some((k, v)) =
                    line.strip_prefix("env:").and_then(|kv| kv.split_once('='))
                {
                    spawn.env.insert(k.to_owned(), v.to_owned());
                    last_env = Some(k.to_owned());
                } else if let Some(k) = &last_env {
                    // A multi-line env value.
                    let v = spawn.env.get_mut(k).expect("env key");
                    v.push('\n');
                    v.push_str(line);
                }
            }
            out.push(spawn);
        }
        out
    }

    /// True when no process was ever started.
    pub fn never_spawned(&self) -> bool {
        std::fs::read_dir(self.dir.path().join("records"))
            .expect("records dir")
            .next()
            .is_none()
    }
}

/// Opens a redb file again, retrying while a previous instance (a server
/// just shut down, or a crashed one's writer thread) still holds it.
pub fn reopen_redb(path: &std::path::Path) -> Arc<dyn Store> {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match RedbStore::open(path) {
            Ok(s) => return Arc::new(s),
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("reopen redb: {e}"),
        }
    }
}
