//! The same server against a second ACP agent, the codex-acp bridge
//! (`@agentclientprotocol/codex-acp`: ACP over its own `codex app-server`;
//! pinned `CODEX_ACP_BIN`, newest `CODEX_ACP_BIN_NEWEST`), against the
//! scripted Responses API: the adapter is not Gemini-shaped.
//!
//! The operator configures it as Gemini is, by `--acp-agent`:
//! `codex-acp=env INITIAL_AGENT_MODE=workspace-write <bin>`. Of its modes
//! (read-only, workspace-write, agent, agent-full-access) only
//! workspace-write (acceptEdits) and agent-full-access (bypassPermissions)
//! stand for one of ours, and a run names none by default, so the mode
//! that makes Codex ask the user (its default, `agent`, asks an automatic
//! reviewer) is chosen in the command, where the operator chooses it. Codex asks only for a command the model wants to run outside
//! the sandbox: the fake's `ESCBASH`. What codex-acp does differently from
//! Gemini is in cassettes/codex-acp/README.md.

use agent_harness_fake_api::cli::{codex_acp_bin, codex_acp_bin_newest};
use agent_harness_fake_api::{FakeApi, RecordedRequest};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::acp::{AcpFlags, AcpOptions};

use super::{Harness, both_releases, process_gone, ready_of};
use crate::support::cli_grpc::{eventually, run_starts, texts};

/// The agent's name on this server.
pub(super) const AGENT: &str = "codex-acp";

/// The prompt of the side call codex-acp makes to name a session.
const TITLE_PROMPT: &str = "Your task is to generate a very short title";

both_releases!(
    codex_acp_first_turn_and_a_follow_up_on_the_same_process,
    codex_acp_a_command_approved_and_rejected,
    codex_acp_stop_mid_answer_keeps_the_process,
    codex_acp_stop_with_a_permission_pending,
    codex_acp_resume_after_the_server_restarts,
    codex_acp_a_lost_session_is_resume_failed,
    codex_acp_a_lost_rollout_fails_at_the_first_prompt,
    codex_acp_kill_9_of_the_bridge_mid_turn,
    codex_acp_a_refresh_mid_answer,
    codex_acp_a_send_mid_turn,
);

/// The server with codex-acp configured by its `--acp-agent` flag, Codex's
/// home (`$HOME/codex`) pointing at the fake, starting in the mode that
/// asks the user.
async fn harness(pinned: bool) -> Harness {
    harness_in(pinned, "env INITIAL_AGENT_MODE=workspace-write").await
}

/// The same, the bridge run by `prefix <bin>` (`env` alone: its own
/// default mode, `agent`).
pub(super) async fn harness_in(pinned: bool, prefix: &str) -> Harness {
    let api = FakeApi::start().await;
    let home = tempfile::tempdir().expect("HOME");
    let codex_home = home.path().join("codex");
    api.codex_home(&codex_home).expect("config.toml");
    let bin = if pinned {
        codex_acp_bin()
    } else {
        codex_acp_bin_newest()
    };
    let flags = AcpFlags {
        acp_agent: vec![format!("{AGENT}={prefix} {}", bin.display())],
    };
    let spec = flags.agents().expect("the --acp-agent entry").remove(0);
    let mut options = AcpOptions::new(spec);
    options.env = api
        .codex_env(&codex_home)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .chain([
            ("HOME".to_owned(), home.path().display().to_string()),
            ("SHELL".to_owned(), "/bin/bash".to_owned()),
            ("RUST_LOG".to_owned(), "error".to_owned()),
        ])
        .collect();
    Harness::serving(api, home, AGENT, options, turn_requests).await
}

/// The model requests of the session's turns: after a session's first
/// turn codex-acp also asks the model for a title, in a thread of its own.
fn turn_requests(api: &FakeApi) -> Vec<RecordedRequest> {
    api.responses_requests()
        .into_iter()
        .filter(|r| {
            !r.user_prompts()
                .first()
                .is_some_and(|p| p.starts_with(TITLE_PROMPT))
        })
        .collect()
}

/// First turn, then a follow-up on the same process: run_start and
/// run_ready name the agent, the ACP session id is the resume id, the turn
/// has the answer's tokens; SetPermissionMode finds no mode of codex-acp's.
async fn codex_acp_first_turn_and_a_follow_up_on_the_same_process(pinned: bool) {
    let mut h = harness(pinned).await;
    let ev = h.subscribe("c1").await;
    let started = h.start("c1", "TEXT hello from codex").await;
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let usage = end.usage.expect("usage");
    assert!(
        usage.input_tokens + usage.cache_read_input_tokens > 0,
        "{usage:?}"
    );
    let events = ev.snapshot();
    assert_eq!(texts(&events), "hello from codex");
    assert_eq!(run_starts(&events)[0].1.agent, AGENT);
    let ready = ready_of(&events, &started.run_id);
    assert_eq!(ready.agent, AGENT);
    assert!(!ready.resume_id.is_empty());
    assert!(
        !ready.cli_version.is_empty(),
        "agentInfo.version: {ready:?}"
    );
    let session = h.get("c1").await;
    assert_eq!(session.agent, AGENT);
    assert_eq!(session.resume_id, ready.resume_id, "the ACP session id");

    let run = h.send("c1", "TEXT and again").await;
    assert_eq!(run, started.run_id, "the same process takes the follow-up");
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "and again");
    assert_eq!(
        h.last_prompts(),
        ["TEXT hello from codex", "TEXT and again"]
    );
    // None of codex-acp's mode ids stands for one of ours: refused, never
    // ignored.
    let refused = h
        .client()
        .await
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "c1".into(),
            mode: "default".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect_err("codex-acp lists no mode like default");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("c1");
    assert!(process_gone(ready.pid), "shutdown ends the agent");
}

/// A command outside the sandbox asks first: allowed (allow_once), it runs
/// and the turn ends normally; rejected (reject_once, Codex's "cancel"), it
/// does not run, the rejection is in the log, and Codex ends the whole turn
/// `cancelled`, which ends as an ordinary turn (no Stop was sent); the
/// process takes the next message.
async fn codex_acp_a_command_approved_and_rejected(pinned: bool) {
    let mut h = harness(pinned).await;
    let ev = h.subscribe("c2").await;
    let started = h
        .start("c2", "ESCBASH touch approved.txt && echo made-it")
        .await;
    let (_, asked) = ev.permission_requested_after(0).await;
    h.respond("c2", &asked.request_id, true).await;
    let (first_end, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    assert!(h.work.path().join("approved.txt").exists(), "it ran");
    assert!(
        texts(&ev.snapshot()).contains("made-it"),
        "the model saw the output"
    );

    h.send("c2", "ESCBASH touch rejected.txt").await;
    let (_, asked) = ev.permission_requested_after(first_end.seq).await;
    h.respond("c2", &asked.request_id, false).await;
    let (second_end, end) = ev.turn_end_after(first_end.seq).await;
    // Codex ends the whole turn `cancelled`, though only the tool was
    // refused and nobody stopped anything: an ordinary turn end.
    assert_eq!(end.terminal_reason, "cancelled");
    assert!(!end.is_error, "a refusal is no interruption: {end:?}");
    assert_eq!(end.subtype, "success");
    assert!(
        !h.work.path().join("rejected.txt").exists(),
        "a rejected command does not run"
    );
    assert!(
        ev.since(first_end.seq).iter().any(|e| matches!(&e.payload,
            Some(Payload::PermissionResolved(r)) if r.request_id == asked.request_id && !r.allow)),
        "the rejection is in the log"
    );
    assert_eq!(h.get("c2").await.pending_permissions, 0);
    let run = h.send("c2", "TEXT next").await;
    assert_eq!(run, started.run_id, "the same process");
    let (_, end) = ev.turn_end_after(second_end.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(second_end.seq)), "next");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c2");
}

/// Stop mid-answer (`session/cancel`): an error turn, the process stays
/// and takes the next message.
async fn codex_acp_stop_mid_answer_keeps_the_process(pinned: bool) {
    let mut h = harness(pinned).await;
    let ev = h.subscribe("c3").await;
    let started = h.start("c3", "SLOW 100 100").await;
    eventually("the model request", || !h.turn_requests().is_empty()).await;
    assert!(h.stop("c3").await);
    let (end_ev, end) = ev.turn_end_after(0).await;
    assert!(end.is_error, "a cancelled turn: {end:?}");
    assert!(h.get("c3").await.process_alive, "the process stays");
    let run = h.send("c3", "TEXT after the stop").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "after the stop");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c3");
}

/// Stop while Codex waits for a permission: codex-acp withdraws the
/// request itself (`$/cancel_request`) and the adapter's `cancelled` answer
/// is ignored; the request is resolved in the log, nothing runs, and the
/// process takes the next message.
async fn codex_acp_stop_with_a_permission_pending(pinned: bool) {
    let mut h = harness(pinned).await;
    let ev = h.subscribe("c4").await;
    let started = h.start("c4", "ESCBASH touch never-made").await;
    let (_, asked) = ev.permission_requested_after(0).await;
    assert!(h.stop("c4").await);
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
    let session = h.get("c4").await;
    assert_eq!(session.pending_permissions, 0);
    assert!(session.process_alive);
    assert!(!h.work.path().join("never-made").exists());
    let run = h.send("c4", "TEXT still here").await;
    assert_eq!(run, started.run_id);
    let (_, end) = ev.turn_end_after(end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    assert_eq!(texts(&ev.since(end_ev.seq)), "still here");
    h.shutdown().await;
    h.assert_stored_runs_end_once("c4");
}

/// After the server restarts, a Send resumes the session in a new process
/// (`session/load`): the model receives the earlier messages, and the
/// history codex-acp replays (before its answer to the load) is not
/// appended again.
async fn codex_acp_resume_after_the_server_restarts(pinned: bool) {
    let mut h = harness(pinned).await;
    let ev = h.subscribe("c5").await;
    let first = h.start("c5", "TEXT remember me").await;
    ev.turn_end_after(0).await;
    let session_id = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    drop(ev);
    h.shutdown().await;
    h.serve().await;
    let ev = h.subscribe("c5").await;
    let run = h.send("c5", "TEXT second").await;
    assert_ne!(run, first.run_id);
    let end = super::resume::turn_end_of(&ev, &run).await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    assert_eq!(
        ready_of(&events, &run).resume_id,
        session_id,
        "the same session"
    );
    assert_eq!(h.last_prompts(), ["TEXT remember me", "TEXT second"]);
    assert_eq!(
        texts(&events),
        "remember me|second",
        "each answer once: the replay is not appended"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("c5");
}

/// Codex no longer has the session (its home lost everything but its
/// configuration): the resumed run fails with run_error{resume_failed}
/// naming it (codex-acp answers the load `-32603`, "no rollout found"), and
/// the next Send starts a new session.
async fn codex_acp_a_lost_session_is_resume_failed(pinned: bool) {
    let lost = LostSession::after(pinned, "c6", |codex_home| {
        for entry in std::fs::read_dir(codex_home).expect("CODEX_HOME").flatten() {
            let path = entry.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path).expect("empty CODEX_HOME");
            } else if entry.file_name() != "config.toml" {
                std::fs::remove_file(&path).expect("empty CODEX_HOME");
            }
        }
    })
    .await;
    lost.then_a_new_session().await;
}

/// Codex's rollout files deleted, its databases kept: codex-acp accepts
/// the load and fails only the first prompt ("thread not found"); that is
/// the resume failing (run_error{resume_failed}), and the next Send starts
/// a new session that answers.
async fn codex_acp_a_lost_rollout_fails_at_the_first_prompt(pinned: bool) {
    let lost = LostSession::after(pinned, "c8", |codex_home| {
        std::fs::remove_dir_all(codex_home.join("sessions")).expect("delete the rollout files");
    })
    .await;
    assert!(
        lost.err.message.contains("thread not found"),
        "{:?}",
        lost.err
    );
    assert_eq!(
        ready_of(&lost.ev.snapshot(), &lost.failed_run).resume_id,
        lost.session_id,
        "the load itself was accepted"
    );
    let failed_run = lost.failed_run.clone();
    let run = lost.then_a_new_session().await;
    assert_ne!(run, failed_run);
}

/// A session whose conversation Codex lost between two servers: its first
/// turn, `lose` applied to CODEX_HOME while no server runs, then a Send
/// whose resume fails (run_error{resume_failed} naming the session, the run
/// ended, the session's lost_resume_id set).
struct LostSession {
    h: Harness,
    ev: super::Events,
    sid: &'static str,
    session_id: String,
    failed_run: String,
    err: pb::RunError,
}

impl LostSession {
    async fn after(pinned: bool, sid: &'static str, lose: impl FnOnce(&std::path::Path)) -> Self {
        let mut h = harness(pinned).await;
        let ev = h.subscribe(sid).await;
        let first = h.start(sid, "TEXT before the loss").await;
        ev.turn_end_after(0).await;
        let session_id = ready_of(&ev.snapshot(), &first.run_id).resume_id;
        drop(ev);
        h.shutdown().await;
        let codex_home = h.home.path().join("codex");
        assert!(
            codex_home.join("sessions").is_dir(),
            "Codex wrote its rollout"
        );
        lose(&codex_home);
        h.serve().await;
        let ev = h.subscribe(sid).await;
        let failed_run = h.send(sid, "TEXT lost").await;
        let err = ev
            .wait_for_within(
                "run_error resume_failed",
                super::resume::RESUME_WAIT,
                |evs| {
                    evs.iter().find_map(|e| match &e.payload {
                        Some(Payload::RunError(r)) if r.kind == "resume_failed" => Some(r.clone()),
                        _ => None,
                    })
                },
            )
            .await;
        assert_eq!(err.resume_id, session_id);
        ev.wait_for("the failed run's end", |evs| {
            evs.iter()
                .any(|e| e.run_id == failed_run && matches!(e.payload, Some(Payload::RunEnd(_))))
                .then_some(())
        })
        .await;
        assert_eq!(h.get(sid).await.lost_resume_id, session_id);
        Self {
            h,
            ev,
            sid,
            session_id,
            failed_run,
            err,
        }
    }

    /// The next Send starts a new conversation, which answers; returns its run.
    async fn then_a_new_session(mut self) -> String {
        let run = self.h.send(self.sid, "TEXT anew").await;
        let end = super::resume::turn_end_of(&self.ev, &run).await;
        assert!(!end.is_error, "{end:?}");
        assert_ne!(
            ready_of(&self.ev.snapshot(), &run).resume_id,
            self.session_id,
            "a new session"
        );
        assert_eq!(self.h.last_prompts(), ["TEXT anew"], "a new conversation");
        self.h.shutdown().await;
        self.h.assert_stored_runs_end_once(self.sid);
        run
    }
}

/// The pids of the processes whose environment holds `needle` (the test's
/// own CODEX_HOME: the bridge and the Codex it started).
fn pids_with_env(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if process_gone(pid) {
            continue;
        }
        if let Ok(env) = std::fs::read(entry.path().join("environ"))
            && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes())
        {
            out.push(pid);
        }
    }
    out
}

/// The bridge killed with SIGKILL mid-answer: the run ends once, the Codex
/// it started does not outlive it, and the next Send resumes the session in
/// a new process that remembers the first turn.
async fn codex_acp_kill_9_of_the_bridge_mid_turn(pinned: bool) {
    let mut h = harness(pinned).await;
    let codex_home = format!("CODEX_HOME={}", h.home.path().join("codex").display());
    let ev = h.subscribe("c7").await;
    let first = h.start("c7", "TEXT remember me").await;
    let (end_ev, _) = ev.turn_end_after(0).await;
    let ready = ready_of(&ev.snapshot(), &first.run_id);
    assert!(
        pids_with_env(&codex_home).len() >= 2,
        "the bridge and its Codex"
    );
    h.send("c7", "SLOW 100 100").await;
    eventually("the second model request", || h.turn_requests().len() >= 2).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ready.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the bridge");
    ev.run_end_after(end_ev.seq).await;
    eventually("the bridge and its Codex gone", || {
        pids_with_env(&codex_home).is_empty()
    })
    .await;
    let run = h.send("c7", "TEXT after the kill").await;
    assert_ne!(run, first.run_id, "a new process");
    let end = super::resume::turn_end_of(&ev, &run).await;
    assert!(!end.is_error, "{end:?}");
    let prompts = h.last_prompts();
    assert_eq!(
        prompts.first().map(String::as_str),
        Some("TEXT remember me")
    );
    assert_eq!(
        prompts.last().map(String::as_str),
        Some("TEXT after the kill")
    );
    h.shutdown().await;
    let stored = h.assert_stored_runs_end_once("c7");
    let ends = stored
        .iter()
        .filter(|e| e.run_id == first.run_id && matches!(e.payload, Some(Payload::RunEnd(_))))
        .count();
    assert_eq!(ends, 1, "the killed run ended once");
}

/// A refresh mid-answer gets the text so far, then the rest (the check a
/// claude session passes).
async fn codex_acp_a_refresh_mid_answer(pinned: bool) {
    super::user_checks::refresh_mid_answer(harness(pinned).await).await
}

/// A Send mid-turn waits for its own turn (the check a claude session
/// passes).
async fn codex_acp_a_send_mid_turn(pinned: bool) {
    super::user_checks::send_mid_turn(harness(pinned).await).await
}
