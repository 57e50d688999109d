//! Shared helpers for the RPC tests: a real tonic server on 127.0.0.1:0
//! driven by the generated client, with the scripted adapter.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agent_harness_client::pb;
use agent_harness_client::pb::event::Payload;
use agent_harness_client::pb::session_service_client::SessionServiceClient;
use agent_harness_client::pb::subscribe_response::Kind;
use agent_harness_server::adapter::scripted::{ScriptedAdapter, ScriptedBehavior};
use agent_harness_server::adapter::{
    AdapterError, BoxFuture, ProcessAdapter, ProcessHandle, SpawnConfig, StdoutLine,
};
use agent_harness_server::error::Error;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use agent_harness_server::store::{MemoryStore, Store};
use agent_harness_server::{ServeOptions, serve_on};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Streaming;
use tonic::transport::Channel;

/// Upper bound for anything a test waits on.
pub const WAIT: Duration = Duration::from_secs(10);

/// Manager options with short timers, so ladders finish in test time.
/// `stop_grace` stays generous: a loaded 2-core machine must not turn a
/// working interrupt into a signal.
pub fn fast_opts() -> ManagerOptions {
    ManagerOptions {
        idle_timeout: Duration::ZERO,
        permission_timeout: Duration::from_secs(60),
        stop_grace: Duration::from_secs(2),
        kill_grace: Duration::from_millis(200),
        ..ManagerOptions::default()
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
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl TestServer {
    /// Default behaviour, fast timers, in-memory store.
    pub async fn start() -> Self {
        Self::with(
            ScriptedBehavior::default(),
            fast_opts(),
            ServeOptions::default(),
        )
        .await
    }

    /// A server with these knobs over a fresh in-memory store.
    pub async fn with(
        behavior: ScriptedBehavior,
        mopts: ManagerOptions,
        sopts: ServeOptions,
    ) -> Self {
        Self::on_store(Arc::new(MemoryStore::new()), behavior, mopts, sopts).await
    }

    /// A server over `store`.
    pub async fn on_store(
        store: Arc<dyn Store>,
        behavior: ScriptedBehavior,
        mopts: ManagerOptions,
        sopts: ServeOptions,
    ) -> Self {
        let adapter = ScriptedAdapter::new(behavior);
        Self::with_adapter(store, Arc::new(adapter.clone()), adapter, mopts, sopts).await
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
        let logs = EventLogs::open(
            store.clone(),
            LogOptions {
                heartbeat: Duration::from_millis(500),
                ..LogOptions::default()
            },
        )
        .expect("open logs");
        let manager = SessionManager::new(spawner, logs, mopts);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_on(listener, manager, sopts, async {
            let _ = rx.await;
        }));
        Self {
            addr,
            adapter,
            store,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// A connected generated client.
    pub async fn client(&self) -> SessionServiceClient<Channel> {
        SessionServiceClient::new(self.channel().await)
    }

    /// A raw channel (for reflection and health clients).
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect")
    }

    /// Graceful shutdown; returns serve_on's result.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = self.task.take().expect("running");
        tokio::time::timeout(WAIT, task)
            .await
            .expect("server stops in time")
            .expect("serve task")
    }

    /// Every stored event of a session, read through a fresh log over the
    /// same store (after shutdown).
    pub fn stored_events(&self, session_id: &str) -> Vec<pb::Event> {
        self.store
            .read_range(session_id, 0, usize::MAX)
            .expect("read store")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// A start config with just a prompt.
pub fn prompt(text: &str) -> pb::StartConfig {
    pb::StartConfig {
        prompt: text.into(),
        ..Default::default()
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

    /// Reads until an event matches `pred`; returns it.
    pub async fn until(&mut self, what: &str, pred: impl Fn(&pb::Event) -> bool) -> pb::Event {
        loop {
            match self.next().await {
                Some(pb::SubscribeResponse {
                    kind: Some(Kind::Event(e)),
                }) if pred(&e) => return e,
                Some(_) => {}
                None => panic!("stream ended before {what}; got {:#?}", kinds(&self.events)),
            }
        }
    }
}

/// Short names of the payloads, for assertions and messages.
pub fn kinds(events: &[pb::Event]) -> Vec<&'static str> {
    events.iter().map(kind).collect()
}

/// Short name of one payload.
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
        Some(Payload::TurnStart(_)) => "turn_start",
        None => "none",
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
        .list_sessions(pb::ListSessionsRequest {})
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
    let want = agent_harness_client::derive::session(session, &events);
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
