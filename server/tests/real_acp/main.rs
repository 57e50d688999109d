//! The whole server against the REAL Gemini CLI over the Agent Client
//! Protocol (`gemini --acp`, configured as the ACP agent `gemini`; the
//! pinned release from tests/setup.sh, `GEMINI_BIN`, and the newest,
//! `GEMINI_BIN_NEWEST`), which talks to the scripted Gemini API of
//! tests/fake-api on loopback: the generated client calls the server
//! in-process, the agent router runs the sessions through the ACP adapter,
//! and every check is made on what a client sees (the Subscribe stream,
//! GetSession) and on the durable log.
//!
//! The fake model's reply is chosen by a directive in the prompt (`TEXT`,
//! `SLOW`, `BASH`; see tests/fake-api/README.md). Every scenario runs
//! against both releases.
//!
//! [`resume`] resumes sessions in new processes; [`user_checks`] are the
//! checks every agent's session passes (refresh mid-answer, a Send
//! mid-turn); [`refusals`]: a mode or model an agent does not list ends the
//! run before any prompt.
//!
//! `codex_acp` runs the same kind of checks against a second ACP agent, the
//! codex-acp bridge over the scripted Responses API.
//!
//! Run: `cargo test -p agent-harness-server --test real_acp`.

#[path = "../support/mod.rs"]
mod support;

mod codex_acp;
mod refusals;
mod resume;
mod user_checks;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_harness_fake_api::cli::{gemini_bin, gemini_bin_newest};
use agent_harness_fake_api::{FakeApi, RecordedRequest};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::acp::{AcpAdapter, AcpAgentSpec, AcpOptions};
use agent_harness_server::adapter::agents::Agents;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::{RedbStore, Store};
use support::cli_grpc::{
    Events, WAIT, assert_runs_end_once, eventually, run_starts, test_manager_options, texts,
};
use support::common::InProcessServer;
use tonic::transport::Channel;

type Client = SessionServiceClient<Channel>;

/// The agent's name on this server.
const AGENT: &str = "gemini";

/// The server in-process with the ACP agent `gemini`, the fake in front of
/// Gemini CLI.
struct Harness {
    server: Option<InProcessServer>,
    api: FakeApi,
    /// Gemini's HOME: its settings point at the fake; its sessions land
    /// under `.gemini/tmp/<project>/chats/`.
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    _data: tempfile::TempDir,
    store: Arc<RedbStore>,
    adapter: Arc<dyn ProcessAdapter>,
    manager: ManagerOptions,
    /// The ACP agent's name on this server (`StartConfig.agent`).
    agent: &'static str,
    /// The fake's requests made for the session's turns (not an agent's
    /// side calls), in order.
    turn_requests: fn(&FakeApi) -> Vec<RecordedRequest>,
}

impl Harness {
    async fn new(pinned: bool) -> Self {
        let api = FakeApi::start().await;
        let home = tempfile::tempdir().expect("HOME");
        api.gemini_home(home.path()).expect("settings.json");
        let bin = if pinned {
            gemini_bin()
        } else {
            gemini_bin_newest()
        };
        let mut options = AcpOptions::new(AcpAgentSpec {
            name: AGENT.into(),
            program: bin,
            args: vec!["--acp".into()],
        });
        options.env = api
            .gemini_env(home.path())
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .chain([("SHELL".to_owned(), "/bin/bash".to_owned())])
            .collect();
        Self::serving(api, home, AGENT, options, FakeApi::gemini_requests).await
    }

    /// The server with the ACP agent `agent` run by `options` (the fake
    /// and the agent's HOME already set up), serving.
    async fn serving(
        api: FakeApi,
        home: tempfile::TempDir,
        agent: &'static str,
        options: AcpOptions,
        turn_requests: fn(&FakeApi) -> Vec<RecordedRequest>,
    ) -> Self {
        let work = tempfile::tempdir().expect("work dir");
        let data = tempfile::tempdir().expect("data dir");
        let claude = ClaudeInteractiveAdapter::new(ClaudeOptions::default());
        let adapter: Arc<dyn ProcessAdapter> = Arc::new(
            Agents::new(Arc::new(claude)).with_acp(agent, Arc::new(AcpAdapter::new(options))),
        );
        let store =
            Arc::new(RedbStore::open(&data.path().join("events.redb")).expect("redb store"));
        let mut h = Self {
            server: None,
            api,
            home,
            work,
            _data: data,
            store,
            adapter,
            manager: test_manager_options(),
            agent,
            turn_requests,
        };
        h.serve().await;
        h
    }

    async fn serve(&mut self) {
        let store: Arc<dyn Store> = self.store.clone();
        self.server = Some(
            InProcessServer::start(
                store,
                self.adapter.clone(),
                self.manager.clone(),
                Duration::from_secs(1),
                ServeOptions::default(),
            )
            .await,
        );
    }

    /// Shuts the server down (its live runs end SERVER_RESTART).
    async fn shutdown(&mut self) {
        if let Some(mut server) = self.server.take() {
            server.shutdown(WAIT).await.expect("serve_on returned Ok");
        }
    }

    async fn client(&self) -> Client {
        let server = self.server.as_ref().expect("serving");
        SessionServiceClient::new(server.channel().await)
    }

    async fn subscribe(&self, session: &str) -> Events {
        Events::open(self.client().await, session).await
    }

    async fn start(&self, session: &str, prompt: &str) -> pb::StartResponse {
        self.start_with(session, prompt, pb::StartConfig::default())
            .await
    }

    /// Start with `config`'s settings (its prompt, cwd and agent are
    /// this harness's).
    async fn start_with(
        &self,
        session: &str,
        prompt: &str,
        config: pb::StartConfig,
    ) -> pb::StartResponse {
        let config = pb::StartConfig {
            prompt: prompt.into(),
            cwd: self.work.path().display().to_string(),
            agent: self.agent.into(),
            ..config
        };
        self.client()
            .await
            .start(pb::StartRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
                config: Some(config),
            })
            .await
            .expect("Start")
            .into_inner()
    }

    async fn send(&self, session: &str, text: &str) -> String {
        self.client()
            .await
            .send(pb::SendRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
                input: text.into(),
                content_blocks: vec![],
            })
            .await
            .expect("Send")
            .into_inner()
            .run_id
    }

    async fn stop(&self, session: &str) -> bool {
        self.client()
            .await
            .stop(pb::StopRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
            })
            .await
            .expect("Stop")
            .into_inner()
            .stopping
    }

    async fn get(&self, session: &str) -> pb::Session {
        self.client()
            .await
            .get_session(pb::GetSessionRequest {
                session_id: session.into(),
            })
            .await
            .expect("GetSession")
            .into_inner()
            .session
            .expect("session")
    }

    async fn respond(&self, session: &str, request_id: &str, allow: bool) {
        self.client()
            .await
            .respond_permission(pb::RespondPermissionRequest {
                idempotency_key: String::new(),
                session_id: session.into(),
                request_id: request_id.into(),
                allow,
                updated_input: None,
                message: if allow {
                    String::new()
                } else {
                    "not this one".into()
                },
            })
            .await
            .expect("RespondPermission");
    }

    /// Every run of the durable log ended once (after a shutdown).
    fn assert_stored_runs_end_once(&self, session: &str) -> Vec<pb::Event> {
        let stored = self
            .store
            .read_range(session, 0, usize::MAX)
            .expect("read the log");
        assert_runs_end_once(&stored, None);
        stored
    }

    /// Gemini's session files (`.gemini/tmp/<project>/chats/session-*`).
    fn session_files(&self) -> Vec<PathBuf> {
        let tmp = self.home.path().join(".gemini/tmp");
        let mut out = Vec::new();
        for project in std::fs::read_dir(tmp).into_iter().flatten().flatten() {
            let chats = project.path().join("chats");
            for f in std::fs::read_dir(chats).into_iter().flatten().flatten() {
                if f.file_name().to_string_lossy().starts_with("session-") {
                    out.push(f.path());
                }
            }
        }
        out
    }

    /// The model's requests for the session's turns.
    fn turn_requests(&self) -> Vec<RecordedRequest> {
        (self.turn_requests)(&self.api)
    }

    /// The prompts of the model's last request for a turn.
    fn last_prompts(&self) -> Vec<String> {
        self.turn_requests()
            .last()
            .expect("a model request")
            .user_prompts()
    }
}

/// The run_ready of run `run_id` in `events`.
fn ready_of(events: &[pb::Event], run_id: &str) -> pb::RunReady {
    events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::RunReady(r)) if e.run_id == run_id => Some(r.clone()),
            _ => None,
        })
        .expect("run_ready")
}

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie is gone but for its reaping.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Runs each scenario against the pinned and the newest release.
macro_rules! both_releases {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn pinned() {
                super::$scenario(true).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn newest() {
                super::$scenario(false).await
            }
        }
    )*};
}
pub(crate) use both_releases;

both_releases!(
    first_turn_and_a_follow_up_on_the_same_process,
    a_shell_command_approved_and_rejected,
    stop_mid_answer_keeps_the_process,
    stop_with_a_permission_pending_cancels_it_and_keeps_the_process,
    settings_map_onto_the_agents_modes,
);

/// First turn through the gRPC API, then a follow-up on the same process:
/// run_start and run_ready name the agent, the ACP session id is the resume
/// id, the answers are the model's, and the process stays between turns.
async fn first_turn_and_a_follow_up_on_the_same_process(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("g1").await;
    let started = h.start("g1", "TEXT hello from gemini").await;
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    assert_eq!(texts(&events), "hello from gemini");
    let starts = run_starts(&events);
    assert_eq!(starts[0].1.agent, AGENT);
    assert_eq!(starts[0].1.adapter, AGENT);
    let ready = ready_of(&events, &started.run_id);
    assert_eq!(ready.agent, AGENT);
    assert!(!ready.resume_id.is_empty());
    assert!(
        !ready.cli_version.is_empty(),
        "agentInfo.version: {ready:?}"
    );
    let session = h.get("g1").await;
    assert_eq!(session.agent, AGENT);
    assert_eq!(session.resume_id, ready.resume_id, "the ACP session id");
    assert!(session.process_alive);

    let run = h.send("g1", "TEXT and again").await;
    assert_eq!(run, started.run_id, "the same process takes the follow-up");
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "and again");
    assert_eq!(run_starts(&ev.snapshot()).len(), 1);
    assert_eq!(
        h.last_prompts(),
        ["TEXT hello from gemini", "TEXT and again"]
    );

    h.shutdown().await;
    h.assert_stored_runs_end_once("g1");
    assert!(process_gone(ready.pid), "shutdown ends the agent");
}

/// A command that writes asks first (Gemini's default mode): allowed (the
/// allow_once option), it runs; rejected (reject_once), it does not, and
/// the turn still ends normally.
async fn a_shell_command_approved_and_rejected(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("g2").await;
    h.start("g2", "BASH touch approved.txt && echo made-it")
        .await;
    let (_, asked) = ev.permission_requested_after(0).await;
    h.respond("g2", &asked.request_id, true).await;
    let (first_end, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    assert!(h.work.path().join("approved.txt").exists(), "it ran");

    h.send("g2", "BASH touch rejected.txt").await;
    let (_, asked) = ev.permission_requested_after(first_end.seq).await;
    h.respond("g2", &asked.request_id, false).await;
    ev.turn_end_after(first_end.seq).await;
    assert!(
        !h.work.path().join("rejected.txt").exists(),
        "a rejected command does not run"
    );
    let after = ev.since(first_end.seq);
    assert!(
        after.iter().any(|e| matches!(&e.payload,
            Some(Payload::PermissionResolved(r)) if r.request_id == asked.request_id && !r.allow)),
        "the rejection is in the log"
    );
    assert_eq!(h.get("g2").await.pending_permissions, 0);
    h.shutdown().await;
    h.assert_stored_runs_end_once("g2");
}

/// Stop mid-answer cancels the prompt (`session/cancel`): an error turn,
/// the process stays and takes the next message.
async fn stop_mid_answer_keeps_the_process(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("g3").await;
    let started = h.start("g3", "SLOW 100 100").await;
    // The model is answering (its request arrived): Stop lands mid-answer.
    eventually("the model request", || !h.api.gemini_requests().is_empty()).await;
    assert!(h.stop("g3").await);
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(end.is_error, "a cancelled turn: {end:?}");
    let session = h.get("g3").await;
    assert!(session.process_alive, "the process stays");
    let run = h.send("g3", "TEXT after the stop").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "after the stop");
    h.shutdown().await;
    h.assert_stored_runs_end_once("g3");
}

/// Stop while Gemini waits for a permission: the request is answered
/// `cancelled` (Gemini waits for that before it ends the prompt), it is
/// resolved in the log, nothing runs, and the process takes the next
/// message.
async fn stop_with_a_permission_pending_cancels_it_and_keeps_the_process(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("g4").await;
    let started = h.start("g4", "BASH touch never-made").await;
    let (_, asked) = ev.permission_requested_after(0).await;
    assert!(h.stop("g4").await);
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(end.is_error, "cancelled: {end:?}");
    ev.wait_for("the request resolved", |evs| {
        evs.iter()
            .any(|e| {
                matches!(&e.payload,
                    Some(Payload::PermissionResolved(r)) if r.request_id == asked.request_id)
            })
            .then_some(())
    })
    .await;
    let session = h.get("g4").await;
    assert_eq!(session.pending_permissions, 0);
    assert!(session.process_alive);
    assert!(!h.work.path().join("never-made").exists());
    let run = h.send("g4", "TEXT still here").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "still here");
    h.shutdown().await;
    h.assert_stored_runs_end_once("g4");
}

/// SetPermissionMode maps onto the modes Gemini lists (plan is one); a
/// mode no agent mode stands for is FAILED_PRECONDITION, never ignored.
/// SetModel picks one of the models Gemini lists, for the next turn.
async fn settings_map_onto_the_agents_modes(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("g5").await;
    h.start("g5", "TEXT one").await;
    let (end_ev, _) = ev.turn_end_after(0).await;
    let mut client = h.client().await;
    client
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "g5".into(),
            mode: "plan".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetPermissionMode plan");
    let refused = client
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "g5".into(),
            mode: "dontAsk".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect_err("no ACP mode stands for dontAsk");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    let set = client
        .set_model(pb::SetModelRequest {
            session_id: "g5".into(),
            model: "gemini-2.5-pro".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetModel")
        .into_inner();
    assert_eq!(set.applied(), pb::SettingApplied::Live);
    h.send("g5", "TEXT two").await;
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    let last = h.api.gemini_requests().last().cloned().expect("a request");
    assert!(
        last.path.contains("gemini-2.5-pro"),
        "the next turn's model: {}",
        last.path
    );
    assert!(
        !ev.snapshot()
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::RunError(_)))),
        "the agent took the mode"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("g5");
}
