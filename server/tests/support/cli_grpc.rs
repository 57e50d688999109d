//! Fixture for the end-to-end tests that drive the whole server through its
//! gRPC API while it runs the **real** claude CLI against the fake Messages
//! API (zero tokens, loopback only).
//!
//! - [`Harness`]: the server in-process on 127.0.0.1:0 over a real redb file
//!   in a tempdir, the adapter pointed at the real CLI with a private HOME,
//!   and a connected generated client.
//! - [`Events`]: a Subscribe stream collected in the background, with
//!   [`Events::wait_for`] (predicate over everything seen, bounded by a
//!   timeout) and checks of the stream's own contract (replay header first,
//!   seqs gapless).
//! - [`assert_runs_end_once`]: every run_start has exactly one run_end,
//!   unless it is the live run.
//!
//! Every wait is bounded; a timeout panics with the events seen so far.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::claude::ClaudeCliAdapter;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, PermissionMode};
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::{RedbStore, Store};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tonic::transport::Channel;

// Part of this fixture's API; not every test file uses all of it.
use super::common::{InProcessServer, cli_config_dir, cli_options, point_at_fake_api};
#[allow(unused_imports)]
pub use super::common::{cli_version_under_test, kind, kinds};

/// Upper bound for one wait (a turn, a run end, a status change). Generous:
/// the machine has two cores and tests run CLIs in parallel; a passing wait
/// takes well under a second to a few seconds.
pub const WAIT: Duration = Duration::from_secs(60);

/// Which adapter the server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterChoice {
    /// `ClaudeInteractiveAdapter`: one keep-alive process per run.
    Interactive,
    /// `ClaudeCliAdapter`: one `--print` process per turn.
    OneShot,
}

/// How to set up a [`Harness`].
#[derive(Debug, Clone)]
pub struct Setup {
    /// The adapter.
    pub adapter: AdapterChoice,
    /// Permission handling (relay by default, as the server's default).
    pub permissions: PermissionMode,
    /// The manager's timers.
    pub manager: ManagerOptions,
    /// Talk to the real service with the developer's own login: no fake
    /// API, HOME untouched (only the opt-in live test sets this).
    pub live: bool,
    /// Inherited variables also removed from the CLI's environment, on top
    /// of the adapter's defaults, so a test can prove that a value the
    /// child sees came from the server and not from the test's own
    /// environment (e.g. `IS_SANDBOX` for the skip mode as root).
    pub strip_env: Vec<String>,
    /// Run the CLI with `--include-partial-messages` (the server's default,
    /// `--deltas on`).
    pub partial_messages: bool,
    /// Let the CLI read the session folder's project settings
    /// (`--allow-project-settings`); off, as the server's default.
    pub project_settings: bool,
    /// Keep the CLI's conversation beside the log (`--session-mirror`), as
    /// the server does; off plays a session stored before it existed.
    pub session_mirror: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            adapter: AdapterChoice::Interactive,
            permissions: PermissionMode::Relay,
            manager: test_manager_options(),
            live: false,
            strip_env: Vec::new(),
            partial_messages: true,
            project_settings: false,
            session_mirror: true,
        }
    }
}

/// Manager timers for tests: no idle timeout unless a test asks for one,
/// and a stop ladder short enough to finish in test time but far longer
/// than the CLI's interrupt answer (~5 ms), so a working interrupt is never
/// overtaken by a signal.
pub fn test_manager_options() -> ManagerOptions {
    ManagerOptions {
        idle_timeout: Duration::ZERO,
        permission_timeout: Duration::from_secs(120),
        stop_grace: Duration::from_secs(3),
        kill_grace: Duration::from_secs(1),
        // Processes stay between turns as the tests expect; the cap on idle
        // ones has tests of its own.
        max_idle_runs: usize::MAX,
        ..ManagerOptions::default()
    }
}

/// The whole server in-process, the real CLI behind it, the fake API in
/// front of the CLI.
pub struct Harness {
    /// First, so a failed test stops serving before the dirs go away.
    server: InProcessServer,
    /// The scripted Messages API (`None` in live mode).
    api: Option<FakeApi>,
    /// The CLI's HOME (transcripts for --resume land here).
    pub home: tempfile::TempDir,
    /// The CLI's working directory (StartConfig.cwd).
    pub work: tempfile::TempDir,
    /// The server's data dir (holds `events.redb`).
    pub data: tempfile::TempDir,
    /// The store behind the log, kept to read the durable log after shutdown.
    store: Arc<RedbStore>,
    /// Where the server listens.
    pub addr: SocketAddr,
    client: SessionServiceClient<Channel>,
    /// What a restart serves with again.
    adapter: Arc<dyn ProcessAdapter>,
    manager: ManagerOptions,
}

impl Harness {
    /// The default setup: interactive adapter, relay permissions.
    pub async fn start() -> Self {
        Self::with(Setup::default()).await
    }

    /// A test's opening: a server with `setup`, a subscriber on `session`
    /// (before Start, so it sees everything), then Start with `prompt`.
    pub async fn started(
        setup: Setup,
        session: &str,
        prompt: &str,
    ) -> (Self, Events, pb::StartResponse) {
        let h = Self::with(setup).await;
        let events = h.subscribe(session).await;
        let started = h.start_session(session, prompt).await;
        (h, events, started)
    }

    /// A server with this setup.
    pub async fn with(mut setup: Setup) -> Self {
        if setup.permissions == PermissionMode::Skip {
            // As `serve --permissions skip` builds its policy: every mode,
            // so the run_ready of a CLI skipping permissions passes.
            let policy = (*setup.manager.launch)
                .clone()
                .with_permission_modes(PermissionMode::Skip, &[])
                .expect("every mode under --permissions skip");
            setup.manager.launch = Arc::new(policy);
        }
        let api = if setup.live {
            None
        } else {
            Some(FakeApi::start().await)
        };
        let home = tempfile::tempdir().expect("home tempdir");
        let work = tempfile::tempdir().expect("work tempdir");
        let data = tempfile::tempdir().expect("data tempdir");

        let mut options = cli_options(setup.permissions);
        if let Some(api) = &api {
            point_at_fake_api(&mut options, api, home.path());
        } else {
            // Live: the developer's login, copied as the server copies the
            // operator's into a configuration directory of its own.
            use agent_harness_server::adapter::claude::config_dir;
            let dir = data.path().join("claude");
            config_dir::prepare(&dir, config_dir::OperatorLogin::from_env().as_ref())
                .expect("the CLI's configuration directory");
            options.config_dir = Some(dir);
        }
        if setup.project_settings {
            options.setting_sources =
                agent_harness_server::adapter::claude::WITH_PROJECT_SETTINGS.into();
        }
        options
            .strip_env_keys
            .extend(setup.strip_env.iter().cloned());
        options.partial_messages = setup.partial_messages;
        options.session_mirror = setup.session_mirror;
        let adapter: Arc<dyn ProcessAdapter> = match setup.adapter {
            AdapterChoice::Interactive => Arc::new(ClaudeInteractiveAdapter::new(options)),
            AdapterChoice::OneShot => Arc::new(ClaudeCliAdapter::new(options)),
        };

        // The same store file `agent-harness serve` opens.
        let store = Arc::new(
            RedbStore::open(&data.path().join("events.redb")).expect("open the redb store"),
        );
        let server = serve(&store, &adapter, &setup.manager).await;
        let channel = server.channel().await;
        Self {
            addr: server.addr,
            server,
            api,
            home,
            work,
            data,
            store,
            client: SessionServiceClient::new(channel),
            adapter,
            manager: setup.manager,
        }
    }

    /// Shuts the server down (live runs end SERVER_RESTART) and serves the
    /// same store again, as a restarted `agent-harness serve` would: the
    /// new server knows only what the log says. Subscribers of the old one
    /// see their streams end; subscribe again.
    pub async fn restart(&mut self) {
        self.server
            .shutdown(WAIT)
            .await
            .expect("serve_on returned Ok");
        self.server = serve(&self.store, &self.adapter, &self.manager).await;
        self.addr = self.server.addr;
        self.client = SessionServiceClient::new(self.server.channel().await);
    }

    /// The CLI's configuration directory (`CLAUDE_CONFIG_DIR`): its
    /// settings, login state and transcripts.
    pub fn config_dir(&self) -> std::path::PathBuf {
        cli_config_dir(self.home.path())
    }

    /// The fake Messages API (panics in live mode).
    pub fn api(&self) -> &FakeApi {
        self.api.as_ref().expect("no fake API in live mode")
    }

    /// A clone of the connected client.
    pub fn client(&self) -> SessionServiceClient<Channel> {
        self.client.clone()
    }

    /// A start config: the prompt, run in the test's work dir.
    pub fn config(&self, prompt: &str) -> pb::StartConfig {
        pb::StartConfig {
            prompt: prompt.into(),
            cwd: self.work.path().display().to_string(),
            ..Default::default()
        }
    }

    /// Start; panics on an error status.
    pub async fn start_session(&self, session: &str, prompt: &str) -> pb::StartResponse {
        self.try_start(session, self.config(prompt))
            .await
            .unwrap_or_else(|s| panic!("Start({session}, {prompt:?}) failed: {s:?}"))
    }

    /// Start, returning the status.
    pub async fn try_start(
        &self,
        session: &str,
        config: pb::StartConfig,
    ) -> Result<pb::StartResponse, tonic::Status> {
        bounded(
            "Start",
            self.client().start(pb::StartRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
                config: Some(config),
            }),
        )
        .await
        .map(|r| r.into_inner())
    }

    /// Send; returns the run that got the input.
    pub async fn send(&self, session: &str, text: &str) -> String {
        bounded(
            "Send",
            self.client().send(pb::SendRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
                input: text.into(),
                content_blocks: vec![],
            }),
        )
        .await
        .unwrap_or_else(|s| panic!("Send({session}, {text:?}) failed: {s:?}"))
        .into_inner()
        .run_id
    }

    /// Stop; returns `stopping`.
    pub async fn stop(&self, session: &str) -> bool {
        bounded(
            "Stop",
            self.client().stop(pb::StopRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
            }),
        )
        .await
        .unwrap_or_else(|s| panic!("Stop({session}) failed: {s:?}"))
        .into_inner()
        .stopping
    }

    /// GetSession.
    pub async fn get(&self, session: &str) -> pb::Session {
        bounded(
            "GetSession",
            self.client().get_session(pb::GetSessionRequest {
                session_id: session.into(),
            }),
        )
        .await
        .unwrap_or_else(|s| panic!("GetSession({session}) failed: {s:?}"))
        .into_inner()
        .session
        .expect("GetSessionResponse.session is set")
    }

    /// GetSession, asserting the session is idle and whether its process
    /// is alive; returns the session.
    pub async fn assert_idle(&self, session: &str, alive: bool) -> pb::Session {
        let s = self.get(session).await;
        assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
        assert_eq!(s.process_alive, alive, "process_alive: {s:?}");
        s
    }

    /// RespondPermission.
    pub async fn respond(
        &self,
        session: &str,
        request_id: &str,
        allow: bool,
        message: &str,
    ) -> Result<(), tonic::Status> {
        bounded(
            "RespondPermission",
            self.client()
                .respond_permission(pb::RespondPermissionRequest {
                    idempotency_key: String::new(),
                    session_id: session.into(),
                    request_id: request_id.into(),
                    allow,
                    updated_input: None,
                    message: message.into(),
                }),
        )
        .await
        .map(|_| ())
    }

    /// Polls GetSession until `pred` holds; returns that session.
    pub async fn wait_session(
        &self,
        session: &str,
        what: &str,
        pred: impl Fn(&pb::Session) -> bool,
    ) -> pb::Session {
        let mut last = None;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let s = self.get(session).await;
            if pred(&s) {
                return s;
            }
            last = Some(s);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out after {WAIT:?} waiting for the session to be {what}; last: {last:#?}");
    }

    /// Subscribes from seq 0 and collects in the background. Subscribing
    /// before Start is valid: the stream goes live when the session starts.
    pub async fn subscribe(&self, session: &str) -> Events {
        Events::open(self.client(), session).await
    }

    /// End-of-test checks, then a graceful shutdown:
    /// 1. the Subscribe stream kept its contract, and caught up with GetSession's head;
    /// 2. every run_start has exactly one run_end, unless it is the live run;
    /// 3. shutdown ends the live run (run_end SERVER_RESTART, source "shutdown"),
    ///    unless it was a one-shot process that completed by itself meanwhile;
    /// 4. the durable redb log then shows every run ended exactly once, and
    ///    what the subscriber saw is a prefix of it, event for event;
    /// 5. no reply stream of the fake API is left open.
    pub async fn finish(mut self, session: &str, events: &Events) {
        let s = self.get(session).await;
        events
            .wait_for("the subscriber to reach GetSession's head_seq", |evs| {
                (evs.last().map(|e| e.seq).unwrap_or(0) >= s.head_seq).then_some(())
            })
            .await;
        events.assert_contract();
        // The log as GetSession saw it: a run may end between GetSession
        // and the snapshot (a one-shot process exits by itself).
        let seen: Vec<_> = events
            .snapshot()
            .into_iter()
            .filter(|e| e.seq <= s.head_seq)
            .collect();
        let live = s.process_alive.then_some(s.run_id.as_str());
        assert_runs_end_once(&seen, live);

        self.server
            .shutdown(WAIT)
            .await
            .expect("serve_on returned Ok");

        let stored = self
            .store
            .read_range(session, 0, usize::MAX)
            .expect("read the redb log");
        assert_runs_end_once(&stored, None);
        if let Some(live) = live {
            let end = stored
                .iter()
                .find(|e| e.run_id == live && matches!(e.payload, Some(Payload::RunEnd(_))))
                .expect("the live run got a run_end at shutdown");
            let Some(Payload::RunEnd(end)) = &end.payload else {
                unreachable!()
            };
            // A one-shot process (`--print`) exits by itself after its turn:
            // alive when GetSession answered, it may have completed before
            // the shutdown reached it (seen on a loaded machine).
            let completed_by_itself = end.source == "process"
                && end.reason() == pb::RunEndReason::Completed
                && end.exit_code == Some(0);
            if !completed_by_itself {
                assert_eq!(
                    end.reason(),
                    pb::RunEndReason::ServerRestart,
                    "shutdown ends the live run with SERVER_RESTART: {end:?}"
                );
                assert_eq!(end.source, "shutdown");
            }
        }
        assert!(
            seen.len() <= stored.len() && stored[..seen.len()] == seen[..],
            "the subscriber's events must be a prefix of the durable log\nseen:\n{}\nstored:\n{}",
            describe_all(&seen),
            describe_all(&stored)
        );
        if let Some(api) = &self.api {
            eventually("the fake API's reply streams to close", || {
                api.active_streams() == 0
            })
            .await;
        }
    }
}

/// A server over `store` on a free port.
async fn serve(
    store: &Arc<RedbStore>,
    adapter: &Arc<dyn ProcessAdapter>,
    manager: &ManagerOptions,
) -> InProcessServer {
    InProcessServer::start(
        store.clone(),
        adapter.clone(),
        manager.clone(),
        Duration::from_secs(1),
        ServeOptions::default(),
    )
    .await
}

/// Awaits an RPC, bounded by [`WAIT`].
async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not return within {WAIT:?}"))
}

/// Polls `cond` every 20 ms until it holds; panics after [`WAIT`].
pub async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the background reader saw.
#[derive(Default)]
struct Seen {
    events: Vec<pb::Event>,
    /// Contract violations of the stream (first message not a replay
    /// header, a seq gap, a second caught_up, ...).
    violations: Vec<String>,
    /// Whether the first message was the replay header.
    replay: bool,
    caught_up: bool,
    /// Why the stream ended, if it did.
    closed: Option<String>,
    /// The stream asked for deltas (a delta is a violation otherwise).
    deltas_wanted: bool,
    /// Deltas received, each with the number of events received before it.
    deltas: Vec<(usize, pb::Delta)>,
    /// Events received before `caught_up`.
    caught_up_at: usize,
    /// The stream's `after_seq`: its first event is the one after it.
    after: u64,
}

/// A Subscribe stream collected in the background.
pub struct Events {
    seen: Arc<Mutex<Seen>>,
    changed: Arc<watch::Sender<u64>>,
    reader: JoinHandle<()>,
}

impl Drop for Events {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// `name: Variant` pairs become `Events::name(after) -> (pb::Event,
/// pb::Variant)` over [`Events::payload_after`], one accessor per payload
/// the tests wait for.
macro_rules! first_after {
    ($($(#[$doc:meta])* $name:ident: $variant:ident,)*) => {$(
        $(#[$doc])*
        pub async fn $name(&self, after: u64) -> (pb::Event, pb::$variant) {
            self.payload_after(stringify!($variant), after, |p| match p {
                Payload::$variant(x) => Some(x.clone()),
                _ => None,
            })
            .await
        }
    )*};
}

impl Events {
    /// Subscribes to `session` from seq 0 and collects in the background.
    pub async fn open(client: SessionServiceClient<Channel>, session: &str) -> Self {
        Self::open_with(client, session, false).await
    }

    /// [`Events::open`], asking for live typing when `deltas`.
    pub async fn open_with(
        client: SessionServiceClient<Channel>,
        session: &str,
        deltas: bool,
    ) -> Self {
        Self::subscribe(client, session, 0, deltas).await
    }

    /// Subscribes to `session` from after seq `after` (a client resuming
    /// where it left off); the first event must be `after + 1`.
    pub async fn open_after(
        client: SessionServiceClient<Channel>,
        session: &str,
        after: u64,
    ) -> Self {
        Self::subscribe(client, session, after, false).await
    }

    async fn subscribe(
        mut client: SessionServiceClient<Channel>,
        session: &str,
        after: u64,
        deltas: bool,
    ) -> Self {
        let mut stream = bounded(
            "Subscribe",
            client.subscribe(pb::SubscribeRequest {
                session_id: session.into(),
                after_seq: after,
                include_deltas: deltas,
            }),
        )
        .await
        .expect("Subscribe")
        .into_inner();
        let seen = Arc::new(Mutex::new(Seen {
            deltas_wanted: deltas,
            after,
            ..Seen::default()
        }));
        let changed = Arc::new(watch::Sender::new(0u64));
        let reader = {
            let seen = seen.clone();
            let changed = changed.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                loop {
                    let msg = stream.message().await;
                    {
                        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                        match msg {
                            Ok(Some(m)) => record(&mut s, m),
                            Ok(None) => s.closed = Some("the stream ended".into()),
                            Err(status) => {
                                s.closed = Some(format!("the stream failed: {status:?}"))
                            }
                        }
                    }
                    n += 1;
                    changed.send_replace(n);
                    if seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .closed
                        .is_some()
                    {
                        return;
                    }
                }
            })
        };
        Self {
            seen,
            changed,
            reader,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every delta received so far, each with the number of events
    /// received before it.
    pub fn deltas(&self) -> Vec<(usize, pb::Delta)> {
        self.lock().deltas.clone()
    }

    /// How many events came before `caught_up` (0 until it came).
    pub fn caught_up_at(&self) -> usize {
        self.lock().caught_up_at
    }

    /// Waits until `f` over the deltas so far returns `Some`; panics after
    /// [`WAIT`] or when the stream ends first.
    pub async fn wait_deltas<T>(
        &self,
        what: &str,
        mut f: impl FnMut(&[(usize, pb::Delta)]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + WAIT;
        let mut rx = self.changed.subscribe();
        loop {
            {
                let s = self.lock();
                if let Some(t) = f(&s.deltas) {
                    return t;
                }
                if let Some(why) = &s.closed {
                    panic!("{why} before {what}; deltas: {:?}", s.deltas);
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "timed out after {WAIT:?} waiting for {what}; deltas: {:?}",
                    self.deltas()
                );
            }
        }
    }

    /// Every event received so far.
    pub fn snapshot(&self) -> Vec<pb::Event> {
        self.lock().events.clone()
    }

    /// The seq of the newest event received (0 when none).
    pub fn head(&self) -> u64 {
        self.lock().events.last().map(|e| e.seq).unwrap_or(0)
    }

    /// Events with seq > `after`.
    pub fn since(&self, after: u64) -> Vec<pb::Event> {
        self.lock()
            .events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect()
    }

    /// Waits until `f` (over every event received so far) returns `Some`;
    /// panics after [`WAIT`] or when the stream ends first, with a dump.
    pub async fn wait_for<T>(&self, what: &str, f: impl FnMut(&[pb::Event]) -> Option<T>) -> T {
        self.wait_for_within(what, WAIT, f).await
    }

    /// [`Events::wait_for`] with a deadline of `within` instead of [`WAIT`]
    /// (an agent that holds a step back on purpose).
    pub async fn wait_for_within<T>(
        &self,
        what: &str,
        within: Duration,
        mut f: impl FnMut(&[pb::Event]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        // Subscribed before the check, so a change between the check and
        // the wait is not missed.
        let mut rx = self.changed.subscribe();
        loop {
            {
                let s = self.lock();
                if let Some(t) = f(&s.events) {
                    return t;
                }
                if let Some(why) = &s.closed {
                    panic!("{why} before {what}; events:\n{}", describe_all(&s.events));
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                panic!(
                    "timed out after {within:?} waiting for {what}; events:\n{}",
                    describe_all(&self.snapshot())
                );
            }
        }
    }

    /// The first event with seq > `after` matching `pred`.
    pub async fn next_after(
        &self,
        what: &str,
        after: u64,
        pred: impl Fn(&pb::Event) -> bool,
    ) -> pb::Event {
        self.wait_for(what, |evs| {
            evs.iter().find(|e| e.seq > after && pred(e)).cloned()
        })
        .await
    }

    /// The first event with seq > `after` whose payload `pick` accepts,
    /// and what `pick` made of it.
    pub async fn payload_after<T>(
        &self,
        what: &str,
        after: u64,
        pick: impl Fn(&Payload) -> Option<T>,
    ) -> (pb::Event, T) {
        self.wait_for(what, |evs| {
            evs.iter()
                .filter(|e| e.seq > after)
                .find_map(|e| Some((e.clone(), pick(e.payload.as_ref()?)?)))
        })
        .await
    }

    /// The first non-compact turn_end with seq > `after`.
    pub async fn turn_end_after(&self, after: u64) -> (pb::Event, pb::TurnEnd) {
        self.payload_after("turn_end", after, |p| match p {
            Payload::TurnEnd(t) if !t.compact => Some(t.clone()),
            _ => None,
        })
        .await
    }

    first_after! {
        /// The first run_end with seq > `after`.
        run_end_after: RunEnd,
        /// The first run_ready with seq > `after`.
        run_ready_after: RunReady,
        /// The first stop_requested with seq > `after`.
        stop_requested_after: StopRequested,
        /// The first permission_requested with seq > `after`.
        permission_requested_after: PermissionRequested,
        /// The first permission_resolved with seq > `after`.
        permission_resolved_after: PermissionResolved,
    }

    /// What ended the turn in progress after `after`: the first non-compact
    /// turn_end (an interrupt answered) or run_end (the process ended).
    pub async fn turn_or_run_end_after(&self, after: u64) -> pb::Event {
        self.next_after("turn_end or run_end", after, |e| {
            matches!(&e.payload, Some(Payload::TurnEnd(t)) if !t.compact)
                || matches!(e.payload, Some(Payload::RunEnd(_)))
        })
        .await
    }

    /// The stream's own contract held: replay header first, at most one
    /// caught_up, seqs 1, 2, 3, ... (from after the stream's `after_seq`)
    /// with no gap, every event of the session.
    pub fn assert_contract(&self) {
        let s = self.lock();
        assert!(
            s.replay,
            "the first Subscribe message must be the replay header"
        );
        assert!(
            s.violations.is_empty(),
            "Subscribe contract violations: {:#?}",
            s.violations
        );
    }
}

/// Folds one Subscribe message into `s`, noting contract violations.
fn record(s: &mut Seen, m: pb::SubscribeResponse) {
    match m.kind {
        Some(Kind::Replay(r)) => {
            if s.replay {
                s.violations.push("a second replay header".into());
            }
            if r.reset {
                s.violations.push(format!("unexpected reset: {r:?}"));
            }
            s.replay = true;
        }
        Some(kind) if !s.replay => s
            .violations
            .push(format!("{kind:?} before the replay header")),
        Some(Kind::CaughtUp(_)) => {
            if s.caught_up {
                s.violations.push("a second caught_up".into());
            }
            s.caught_up = true;
            s.caught_up_at = s.events.len();
        }
        Some(Kind::Event(e)) => {
            let want = s.events.last().map(|l| l.seq).unwrap_or(s.after) + 1;
            if e.seq != want {
                s.violations
                    .push(format!("seq {} where {want} was next", e.seq));
            }
            s.events.push(e);
        }
        Some(Kind::Heartbeat(_)) => {}
        Some(Kind::Delta(d)) if s.deltas_wanted => {
            if !s.caught_up {
                s.violations
                    .push(format!("a delta before caught_up: {d:?}"));
            }
            let last = s.events.last().map(|e| e.seq).unwrap_or(s.after);
            if d.after_seq != last {
                s.violations.push(format!(
                    "a delta after seq {last} says it follows {}: {d:?}",
                    d.after_seq
                ));
            }
            let n = s.events.len();
            s.deltas.push((n, d));
        }
        Some(Kind::Delta(d)) => s.violations.push(format!(
            "a delta on a stream that did not ask for them: {d:?}"
        )),
        None => s.violations.push("a message with no kind".into()),
    }
}

/// Asserts the run lifecycle of a whole log: run ids are unique per
/// run_start; every run_start has exactly one run_end, except `live_run`
/// (the run GetSession reports alive), which has none; no run_end without
/// its run_start; nothing of a run after its run_end; runs do not overlap
/// (a run_start only after the previous run's run_end).
pub fn assert_runs_end_once(events: &[pb::Event], live_run: Option<&str>) {
    let dump = || describe_all(events);
    let mut started: Vec<&str> = Vec::new();
    let mut ended: Vec<&str> = Vec::new();
    for e in events {
        match &e.payload {
            Some(Payload::RunStart(_)) => {
                assert!(
                    !started.contains(&e.run_id.as_str()),
                    "run {} started twice:\n{}",
                    e.run_id,
                    dump()
                );
                if let Some(prev) = started.last() {
                    assert!(
                        ended.contains(prev),
                        "run {} started while run {prev} had no run_end:\n{}",
                        e.run_id,
                        dump()
                    );
                }
                started.push(&e.run_id);
            }
            Some(Payload::RunEnd(_)) => {
                assert!(
                    started.contains(&e.run_id.as_str()),
                    "run_end (seq {}) for run {} that never started:\n{}",
                    e.seq,
                    e.run_id,
                    dump()
                );
                assert!(
                    !ended.contains(&e.run_id.as_str()),
                    "run {} has a second run_end (seq {}):\n{}",
                    e.run_id,
                    e.seq,
                    dump()
                );
                ended.push(&e.run_id);
            }
            _ => {
                assert!(
                    !ended.contains(&e.run_id.as_str()),
                    "event seq {} of run {} after its run_end:\n{}",
                    e.seq,
                    e.run_id,
                    dump()
                );
            }
        }
    }
    for run in &started {
        if Some(*run) == live_run {
            assert!(
                !ended.contains(run),
                "GetSession says run {run} is alive, but the log has its run_end:\n{}",
                dump()
            );
        } else {
            assert!(
                ended.contains(run),
                "run {run} has no run_end and is not the live run ({live_run:?}):\n{}",
                dump()
            );
        }
    }
    if let Some(live) = live_run {
        assert!(
            started.contains(&live),
            "the live run {live} has no run_start in the log:\n{}",
            dump()
        );
    }
}

/// Asserts `events` were served by the live process `pid`: no run_start,
/// and any run_ready names that pid.
pub fn assert_same_process(events: &[pb::Event], pid: u32) {
    assert_eq!(
        count(events, |p| matches!(p, Payload::RunStart(_))),
        0,
        "{:?}",
        kinds(events)
    );
    for e in events {
        if let Some(Payload::RunReady(r)) = &e.payload {
            assert_eq!(r.pid, pid, "a second run_ready must name the same pid");
        }
    }
}

/// The payload of an event (every event has one).
pub fn payload(e: &pb::Event) -> &Payload {
    e.payload.as_ref().expect("every event has a payload")
}

/// What a client holds for one block after these deltas: a snapshot
/// replaces, a fragment appends.
pub fn joined<'a>(deltas: impl IntoIterator<Item = &'a pb::Delta>) -> String {
    let mut text = String::new();
    for d in deltas {
        if d.snapshot {
            text.clear();
        }
        text.push_str(&d.fragment);
    }
    text
}

/// Deltas of one message, with the number of events received before each.
pub fn of_message(deltas: &[(usize, pb::Delta)], message_id: &str) -> Vec<(usize, pb::Delta)> {
    deltas
        .iter()
        .filter(|(_, d)| d.message_id == message_id)
        .cloned()
        .collect()
}

/// All text blocks of the content events in `events`, joined by "|".
pub fn texts(events: &[pb::Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(c)) => Some(
                c.blocks
                    .iter()
                    .filter(|b| b.r#type == "text")
                    .map(|b| b.text.as_str())
                    .collect::<Vec<_>>()
                    .join(""),
            ),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("|")
}

/// The tool results in `events`.
pub fn tool_results(events: &[pb::Event]) -> Vec<pb::ToolResult> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Result(r)) => Some(r.tool_results.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The run_start events in `events`.
pub fn run_starts(events: &[pb::Event]) -> Vec<(pb::Event, pb::RunStart)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::RunStart(r)) => Some((e.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

/// How many events of `events` match `pred`.
pub fn count(events: &[pb::Event], pred: impl Fn(&Payload) -> bool) -> usize {
    events.iter().filter(|e| pred(payload(e))).count()
}

/// One line per event, for failure messages: seq, run, kind, the fields
/// that matter.
pub fn describe_all(events: &[pb::Event]) -> String {
    let t0 = events.first().map(millis).unwrap_or(0);
    events
        .iter()
        .map(|e| format!("{:>+7}ms {}", millis(e) - t0, describe(e)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The event's append time, Unix milliseconds.
fn millis(e: &pb::Event) -> i64 {
    e.time
        .as_ref()
        .map(|t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000)
        .unwrap_or(0)
}

fn describe(e: &pb::Event) -> String {
    let run: String = e.run_id.chars().take(8).collect();
    let detail = match &e.payload {
        Some(Payload::RunStart(r)) => format!(
            "trigger={} adapter={} resume={:?}",
            r.trigger,
            r.adapter,
            r.config.as_ref().map(|c| c.resume.as_str()).unwrap_or("")
        ),
        Some(Payload::RunReady(r)) => format!(
            "pid={} resume_id={} cli={}",
            r.pid, r.resume_id, r.cli_version
        ),
        Some(Payload::RunEnd(r)) => format!(
            "reason={:?} exit={:?} signal={:?} source={} stderr={:?}",
            r.reason(),
            r.exit_code,
            r.signal,
            r.source,
            r.stderr_tail.chars().take(300).collect::<String>()
        ),
        Some(Payload::RunError(r)) => format!("{}: {}", r.kind, r.message),
        Some(Payload::StopRequested(s)) => format!("source={}", s.source),
        Some(Payload::Content(c)) => c
            .blocks
            .iter()
            .map(|b| match b.r#type.as_str() {
                "tool_use" => format!("tool_use {}", b.tool_name),
                t => format!("{t} {:?}", b.text.chars().take(80).collect::<String>()),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Some(Payload::Result(r)) => format!(
            "tool_results={:?} text={:?}",
            r.tool_results
                .iter()
                .map(|t| (t.is_error, t.text.chars().take(80).collect::<String>()))
                .collect::<Vec<_>>(),
            r.text.chars().take(80).collect::<String>()
        ),
        Some(Payload::TurnEnd(t)) => format!(
            "is_error={} subtype={} terminal_reason={} compact={} result={:?}",
            t.is_error,
            t.subtype,
            t.terminal_reason,
            t.compact,
            t.result.chars().take(80).collect::<String>()
        ),
        Some(Payload::InputSent(i)) => format!("source={:?} text={:?}", i.source(), i.text),
        Some(Payload::PermissionRequested(p)) => {
            format!("request_id={} tool={}", p.request_id, p.tool_name)
        }
        Some(Payload::PermissionResolved(p)) => format!(
            "request_id={} allow={} by={} message={:?}",
            p.request_id, p.allow, p.by, p.message
        ),
        _ => String::new(),
    };
    format!("{:>4} {run:<8} {:<20} {detail}", e.seq, kind(e))
}

/// Whether the CLI's transcript of `resume_id` (under
/// `<CLAUDE_CONFIG_DIR>/projects/<cwd-slug>/<resume_id>.jsonl`) has an
/// `assistant` record containing `needle`. The CLI writes it asynchronously,
/// a moment after the turn's `result`; a test that kills the CLI must wait
/// for it, or `--resume` finds no conversation.
pub fn transcript_has(home: &std::path::Path, resume_id: &str, needle: &str) -> bool {
    let projects = cli_config_dir(home).join("projects");
    let Ok(dirs) = std::fs::read_dir(&projects) else {
        return false;
    };
    dirs.flatten().any(|d| {
        std::fs::read_to_string(d.path().join(format!("{resume_id}.jsonl")))
            .map(|t| {
                t.lines()
                    .any(|l| l.contains("\"type\":\"assistant\"") && l.contains(needle))
            })
            .unwrap_or(false)
    })
}
