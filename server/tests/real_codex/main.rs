//! The whole server against the REAL Codex (`codex app-server`, the pinned
//! release from tests/setup.sh, or `CODEX_BIN`), which talks to the
//! scripted Responses API of tests/fake-api on loopback: the generated
//! client calls the server in-process, the agent router runs Codex
//! sessions through the Codex adapter, and every check is made on what a
//! client sees (the Subscribe stream, GetSession) and on the durable log.
//!
//! The fake model's reply is chosen by a directive in the prompt (`TEXT`,
//! `SLOW`, `BASH`; see tests/fake-api/README.md).
//!
//! [`kill9`] runs the server binary and kills it mid-turn; [`live_output`]
//! watches a command's output typed live.
//!
//! Run: `cargo test -p agent-harness-server --test real_codex`.

#[path = "../support/mod.rs"]
mod support;

mod idle_evict;
mod kill9;
mod live_output;
mod user_checks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_fake_api::cli::codex_bin;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::agents::Agents;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};
use agent_harness_server::adapter::codex::{CodexAdapter, CodexOptions};
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::{RedbStore, Store};
use support::cli_grpc::{
    Events, WAIT, assert_runs_end_once, eventually, run_starts, test_manager_options, texts,
    tool_results,
};
use support::common::InProcessServer;
use tonic::transport::Channel;

type Client = SessionServiceClient<Channel>;

/// The server in-process with Codex enabled, the fake in front of Codex.
struct Harness {
    server: Option<InProcessServer>,
    api: FakeApi,
    /// Codex's CODEX_HOME (its config.toml points at the fake; rollouts
    /// land under `sessions/`).
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    _data: tempfile::TempDir,
    store: Arc<RedbStore>,
    adapter: Arc<dyn ProcessAdapter>,
    manager: ManagerOptions,
}

impl Harness {
    async fn new() -> Self {
        let api = FakeApi::start().await;
        let home = tempfile::tempdir().expect("CODEX_HOME");
        api.codex_home(home.path()).expect("config.toml");
        let work = tempfile::tempdir().expect("work dir");
        let data = tempfile::tempdir().expect("data dir");
        let mut options = CodexOptions::new(codex_bin());
        options.codex_home = Some(home.path().to_path_buf());
        options.env = api
            .codex_env(home.path())
            .into_iter()
            .filter(|(k, _)| *k != "CODEX_HOME")
            .map(|(k, v)| (k.to_owned(), v))
            .chain([
                ("HOME".to_owned(), home.path().display().to_string()),
                ("RUST_LOG".to_owned(), "error".to_owned()),
            ])
            .collect();
        let claude = ClaudeInteractiveAdapter::new(ClaudeOptions::default());
        let adapter: Arc<dyn ProcessAdapter> = Arc::new(
            Agents::new(Arc::new(claude)).with_codex(Arc::new(CodexAdapter::new(options))),
        );
        let store =
            Arc::new(RedbStore::open(&data.path().join("events.redb")).expect("redb store"));
        let manager = test_manager_options();
        let mut h = Self {
            server: None,
            api,
            home,
            work,
            _data: data,
            store,
            adapter,
            manager,
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

    /// A restarted server over the same store.
    async fn restart(&mut self) {
        self.shutdown().await;
        self.serve().await;
    }

    async fn client(&self) -> Client {
        let server = self.server.as_ref().expect("serving");
        SessionServiceClient::new(server.channel().await)
    }

    async fn subscribe(&self, session: &str) -> Events {
        Events::open(self.client().await, session).await
    }

    async fn start(&self, session: &str, prompt: &str) -> pb::StartResponse {
        let config = pb::StartConfig {
            prompt: prompt.into(),
            cwd: self.work.path().display().to_string(),
            agent: "codex".into(),
            ..Default::default()
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

    /// The rollout files of Codex's threads.
    fn rollouts(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
                {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.home.path().join("sessions"), &mut out);
        out
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

/// First turn through the gRPC API, then a follow-up on the same process:
/// run_start and run_ready name codex, the thread id is the resume id, the
/// answers are the model's, and the process stays between turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_turn_and_a_follow_up_on_the_same_process() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c1").await;
    let started = h.start("c1", "TEXT hello from codex").await;
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    assert_eq!(texts(&events), "hello from codex");
    let starts = run_starts(&events);
    assert_eq!(starts[0].1.agent, "codex");
    assert_eq!(starts[0].1.adapter, "codex");
    let ready = ready_of(&events, &started.run_id);
    assert_eq!(ready.agent, "codex");
    assert!(!ready.resume_id.is_empty());
    let session = h.get("c1").await;
    assert_eq!(session.agent, "codex");
    assert_eq!(
        session.resume_id, ready.resume_id,
        "the thread is the resume id"
    );
    assert!(session.process_alive);

    let run = h.send("c1", "TEXT and again").await;
    assert_eq!(run, started.run_id, "the same process takes the follow-up");
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "and again");
    assert_eq!(run_starts(&ev.snapshot()).len(), 1);
    let prompts = h
        .api
        .responses_requests()
        .last()
        .expect("a request")
        .user_prompts();
    assert_eq!(prompts, ["TEXT hello from codex", "TEXT and again"]);

    h.shutdown().await;
    h.assert_stored_runs_end_once("c1");
    assert!(process_gone(ready.pid), "shutdown ends Codex");
}

/// A shell command asks first (the default mode: untrusted): allowed, it
/// runs and its output is the tool's result; denied, it does not run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_command_approved_and_denied() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c2").await;
    h.start("c2", "BASH echo approved-$((6*7))").await;
    let (_, asked) = ev.permission_requested_after(0).await;
    h.respond("c2", &asked.request_id, true).await;
    let (first_end, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let results = tool_results(&ev.snapshot());
    assert!(
        results
            .iter()
            .any(|r| r.text.contains("approved-42") && !r.is_error),
        "{results:?}"
    );

    h.send("c2", "BASH touch denied-file").await;
    let (_, asked) = ev.permission_requested_after(first_end.seq).await;
    h.respond("c2", &asked.request_id, false).await;
    ev.turn_end_after(first_end.seq).await;
    assert!(
        !h.work.path().join("denied-file").exists(),
        "a denied command does not run"
    );
    let after = ev.since(first_end.seq);
    assert!(
        after.iter().any(|e| matches!(&e.payload,
            Some(Payload::PermissionResolved(r)) if r.request_id == asked.request_id && !r.allow)),
        "the denial is in the log"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("c2");
}

/// Stop mid-answer interrupts the turn (turn/interrupt), the process stays
/// and takes the next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_mid_answer_keeps_the_process() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c3").await;
    let started = h.start("c3", "SLOW 40 250").await;
    ev.wait_for("the turn under way", |evs| {
        evs.iter()
            .any(|e| matches!(e.payload, Some(Payload::RunReady(_))))
            .then_some(())
    })
    .await;
    // The model is answering (its request arrived): Stop lands mid-answer.
    eventually("the model request", || {
        !h.api.responses_requests().is_empty()
    })
    .await;
    let stopping = h
        .client()
        .await
        .stop(pb::StopRequest {
            idempotency_key: String::new(),
            session_id: "c3".into(),
        })
        .await
        .expect("Stop")
        .into_inner()
        .stopping;
    assert!(stopping);
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(end.is_error, "an interrupted turn: {end:?}");
    let session = h.get("c3").await;
    assert!(session.process_alive, "the process stays");
    let run = h.send("c3", "TEXT after the stop").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "after the stop");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c3");
}

/// A Send while a turn runs waits for its own turn (one `turn/start` per
/// turn; Codex would steer a second one into the running turn and drop the
/// answer it was writing): the first answer is whole, the second follows
/// on the same process, the model's second request carries both prompts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_mid_turn_waits_for_its_own_turn() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c7").await;
    let started = h.start("c7", "SLOW 6 150").await;
    eventually("the model request", || {
        !h.api.responses_requests().is_empty()
    })
    .await;
    let run = h.send("c7", "TEXT the second turn").await;
    assert_eq!(run, started.run_id, "the same process");
    let (first_ev, first) = ev.turn_end_after(0).await;
    assert!(!first.is_error, "{first:?}");
    let first_turn: Vec<_> = ev
        .snapshot()
        .into_iter()
        .filter(|e| e.seq <= first_ev.seq)
        .collect();
    assert_eq!(
        texts(&first_turn),
        "tick 0 tick 1 tick 2 tick 3 tick 4 tick 5 ",
        "the first answer is whole"
    );
    let (_, second) = ev.turn_end_after(first_ev.seq).await;
    assert!(!second.is_error, "{second:?}");
    assert_eq!(texts(&ev.since(first_ev.seq)), "the second turn");
    let prompts = h
        .api
        .responses_requests()
        .last()
        .expect("a request")
        .user_prompts();
    assert_eq!(prompts, ["SLOW 6 150", "TEXT the second turn"]);
    h.shutdown().await;
    h.assert_stored_runs_end_once("c7");
}

/// After the server restarts, a Send resumes the thread in a new process
/// (`thread/resume`), and the model receives the earlier messages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_the_server_restarts() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c4").await;
    let first = h.start("c4", "TEXT remember me").await;
    ev.turn_end_after(0).await;
    let thread = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    drop(ev);
    h.restart().await;
    let ev = h.subscribe("c4").await;
    let run = h.send("c4", "TEXT second").await;
    assert_ne!(run, first.run_id);
    let (_, end) = ev
        .wait_for("the resumed run's turn_end", |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::TurnEnd(t)) if e.run_id == run => Some((e.clone(), t.clone())),
                _ => None,
            })
        })
        .await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    let (_, rs) = run_starts(&events)
        .into_iter()
        .find(|(e, _)| e.run_id == run)
        .expect("the resumed run_start");
    assert_eq!(
        rs.config.expect("config").resume,
        thread,
        "resumes the thread"
    );
    assert_eq!(ready_of(&events, &run).resume_id, thread, "the same thread");
    let prompts = h
        .api
        .responses_requests()
        .last()
        .expect("a request")
        .user_prompts();
    assert_eq!(prompts, ["TEXT remember me", "TEXT second"]);
    h.shutdown().await;
    h.assert_stored_runs_end_once("c4");
}

/// A lost rollout: the resumed run fails with run_error{resume_failed}
/// naming the thread, and the next Send starts a new thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_rollout_is_resume_failed_and_the_next_send_starts_anew() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c5").await;
    let first = h.start("c5", "TEXT before the loss").await;
    ev.turn_end_after(0).await;
    let thread = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    drop(ev);
    h.shutdown().await;
    let rollouts = h.rollouts();
    assert!(!rollouts.is_empty(), "Codex wrote its rollout");
    for r in rollouts {
        std::fs::remove_file(r).expect("delete the rollout");
    }
    h.serve().await;
    let ev = h.subscribe("c5").await;
    let failed_run = h.send("c5", "TEXT lost").await;
    let (_, err) = ev
        .wait_for("run_error resume_failed", |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::RunError(r)) if r.kind == "resume_failed" => {
                    Some((e.clone(), r.clone()))
                }
                _ => None,
            })
        })
        .await;
    assert_eq!(err.resume_id, thread);
    ev.wait_for("the failed run's end", |evs| {
        evs.iter()
            .any(|e| e.run_id == failed_run && matches!(e.payload, Some(Payload::RunEnd(_))))
            .then_some(())
    })
    .await;
    let session = h.get("c5").await;
    assert_eq!(session.lost_resume_id, thread);
    let run = h.send("c5", "TEXT anew").await;
    let (_, end) = ev
        .wait_for("the new run's turn_end", |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::TurnEnd(t)) if e.run_id == run => Some((e.clone(), t.clone())),
                _ => None,
            })
        })
        .await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    let (_, rs) = run_starts(&events)
        .into_iter()
        .find(|(e, _)| e.run_id == run)
        .expect("the new run_start");
    assert_eq!(rs.lost_resume_id, thread);
    assert!(rs.config.expect("config").resume.is_empty());
    assert_ne!(ready_of(&events, &run).resume_id, thread, "a new thread");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c5");
}

/// SetModel and SetPermissionMode on a live Codex session are applied by
/// the adapter with the next turn (Codex takes them as `turn/start`
/// overrides): the next model request names the model. A setting Codex
/// has no equivalent of, and content blocks, are FAILED_PRECONDITION,
/// never silently ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_apply_to_the_next_turn_and_what_codex_lacks_is_refused() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c6").await;
    h.start("c6", "TEXT one").await;
    let (end_ev, _) = ev.turn_end_after(0).await;
    let mut client = h.client().await;
    let set = client
        .set_model(pb::SetModelRequest {
            session_id: "c6".into(),
            model: "gpt-other".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetModel")
        .into_inner();
    assert_eq!(set.applied(), pb::SettingApplied::Live);
    client
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "c6".into(),
            mode: "plan".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetPermissionMode plan");
    let refused = client
        .set_max_thinking_tokens(pb::SetMaxThinkingTokensRequest {
            session_id: "c6".into(),
            max_thinking_tokens: Some(1024),
            idempotency_key: String::new(),
        })
        .await
        .expect_err("Codex has no thinking budget");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    let block: pbjson_types::Struct =
        serde_json::from_value(serde_json::json!({"type": "text", "text": "x"})).unwrap();
    let refused = client
        .send(pb::SendRequest {
            idempotency_key: String::new(),
            session_id: "c6".into(),
            input: "TEXT with a block".into(),
            content_blocks: vec![block],
        })
        .await
        .expect_err("Codex takes text only");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    h.send("c6", "TEXT two").await;
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    let last = h
        .api
        .responses_requests()
        .last()
        .cloned()
        .expect("a request");
    let body = last.body.expect("a body");
    assert_eq!(body["model"], "gpt-other", "the next turn's model");
    assert_eq!(h.get("c6").await.model, "gpt-other");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c6");
}

/// Stop while Codex waits for an approval: the turn is interrupted, the
/// pending request is resolved (Codex withdraws it after the turn ends),
/// nothing runs, and the process takes the next message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_with_an_approval_pending_withdraws_it_and_keeps_the_process() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c7").await;
    let started = h.start("c7", "BASH touch never-made").await;
    let (_, asked) = ev.permission_requested_after(0).await;
    let stopping = h
        .client()
        .await
        .stop(pb::StopRequest {
            idempotency_key: String::new(),
            session_id: "c7".into(),
        })
        .await
        .expect("Stop")
        .into_inner()
        .stopping;
    assert!(stopping);
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(end.is_error, "interrupted: {end:?}");
    ev.wait_for("the request resolved", |evs| {
        evs.iter()
            .any(|e| {
                matches!(&e.payload,
                    Some(Payload::PermissionResolved(r)) if r.request_id == asked.request_id)
            })
            .then_some(())
    })
    .await;
    let session = h.get("c7").await;
    assert_eq!(session.pending_permissions, 0);
    assert!(session.process_alive);
    assert!(!h.work.path().join("never-made").exists());
    let run = h.send("c7", "TEXT still here").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "still here");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c7");
}
