//! A dead resume id, against the REAL claude CLI: the CLI's transcript of
//! the session's conversation is deleted between runs (what a kill right
//! after a `result`, a wiped HOME or another machine leaves behind). The
//! resumed run fails before it boots (`run_error{kind: "resume_failed"}`),
//! and the next Send starts a new conversation instead of failing the same
//! way forever (t3code #2336, vibe-kanban #1357). The server runs without
//! `--session-mirror` here: with nothing of the conversation in the store
//! (a session stored before the server kept it), the deleted file cannot be
//! written back (`moved_conversation` has the case where it is).
//!
//! Run: `cargo test -p agent-harness-server --test real_cli resume_lost::`.

use crate::support::cli_grpc;

use agent_harness_protocol::derive;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::{Harness, Setup, eventually, run_starts, texts, transcript_has};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// The transcript files of `resume_id` under the CLI's configuration
/// directory (`projects/<cwd-slug>/<resume_id>.jsonl`).
fn transcripts(home: &std::path::Path, resume_id: &str) -> Vec<std::path::PathBuf> {
    let projects = super::support::common::cli_config_dir(home).join("projects");
    std::fs::read_dir(&projects)
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join(format!("{resume_id}.jsonl")))
        .filter(|p| p.exists())
        .collect()
}

/// Every text of a Messages API request's `messages`, with its role.
pub(crate) fn conversation(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default().to_owned();
        match &m["content"] {
            Value::String(s) => out.push((role.clone(), s.clone())),
            Value::Array(blocks) => out.extend(
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .map(|t| (role.clone(), t.to_owned())),
            ),
            _ => {}
        }
    }
    out
}

/// Turn one, the process ends, its transcript is deleted. Send: the CLI
/// answers "No conversation found" and exits 1, recorded as
/// `run_error{resume_failed}` naming the dead id; GetSession stops handing
/// that id out. Send again: a new run without `--resume` whose run_start
/// names the lost id, whose model request carries only the new message,
/// and whose turn succeeds; derive's `context_lost` points at the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_transcript_fails_once_then_send_starts_a_new_conversation() {
    let sid = "lost";
    let nothing_stored = Setup {
        session_mirror: false,
        ..Setup::default()
    };
    let (h, ev, started) = Harness::started(nothing_stored, sid, "TEXT one").await;
    let (_, ready) = ev.run_ready_after(0).await;
    let dead = ready.resume_id.clone();
    let (first_end, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");

    // The CLI writes its transcript a moment after the result; delete it
    // only once it is complete, then end the process from outside.
    eventually("the CLI's transcript to hold turn one", || {
        transcript_has(h.home.path(), &dead, "one")
    })
    .await;
    kill(Pid::from_raw(ready.pid as i32), Signal::SIGTERM).expect("SIGTERM the CLI");
    let (ended, _) = ev.run_end_after(first_end.seq).await;
    assert_eq!(ended.run_id, started.run_id);
    let files = transcripts(h.home.path(), &dead);
    assert_eq!(files.len(), 1, "one transcript of {dead}: {files:?}");
    std::fs::remove_file(&files[0]).expect("delete the transcript");
    assert_eq!(h.get(sid).await.resume_id, dead, "not known to be dead yet");

    // The resumed run fails before it boots.
    let failed_run = h.send(sid, "TEXT two").await;
    let (err_ev, err) = ev
        .payload_after("run_error resume_failed", ended.seq, |p| match p {
            Payload::RunError(e) => Some(e.clone()),
            _ => None,
        })
        .await;
    assert_eq!(err_ev.run_id, failed_run);
    assert_eq!(err.kind, "resume_failed", "{err:?}");
    assert_eq!(err.resume_id, dead);
    assert_eq!(
        err.message,
        format!("No conversation found with session ID: {dead}")
    );
    let (failed_end_ev, failed_end) = ev.run_end_after(err_ev.seq).await;
    assert_eq!(failed_end_ev.run_id, failed_run);
    assert_eq!(
        failed_end.reason(),
        pb::RunEndReason::Error,
        "{failed_end:?}"
    );
    assert_eq!(failed_end.exit_code, Some(1));
    let failed = run_starts(&ev.since(ended.seq));
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].1.config.as_ref().map(|c| c.resume.as_str()),
        Some(dead.as_str()),
        "the failed run did try to resume"
    );
    let s = h.get(sid).await;
    assert_eq!(s.resume_id, "", "GetSession must not hand out the dead id");
    assert_eq!(s.lost_resume_id, dead);

    // The next Send starts a new conversation.
    h.api().clear_requests();
    let fresh_run = h.send(sid, "TEXT three").await;
    let (_, end) = ev.turn_end_after(failed_end_ev.seq).await;
    assert!(!end.is_error, "{end:?}");
    let after = ev.since(failed_end_ev.seq);
    let starts = run_starts(&after);
    assert_eq!(starts.len(), 1);
    let (start_ev, start) = &starts[0];
    assert_eq!(start_ev.run_id, fresh_run);
    assert_eq!(start.trigger, "send");
    assert_eq!(start.config.as_ref().map(|c| c.resume.as_str()), Some(""));
    assert_eq!(
        start.lost_resume_id, dead,
        "the run says earlier context is gone"
    );
    assert_eq!(texts(&after), "three");
    let (_, new_ready) = ev.run_ready_after(failed_end_ev.seq).await;
    assert_ne!(new_ready.resume_id, dead, "a new CLI conversation");

    let calls = h.api().message_requests();
    assert_eq!(calls.len(), 1, "one model call for the new turn");
    let convo = conversation(calls[0].body.as_ref().expect("a JSON body"));
    let said: Vec<&(String, String)> = convo
        .iter()
        .filter(|(_, t)| t.contains("TEXT") || t.trim() == "one")
        .collect();
    assert_eq!(
        said,
        [&("user".to_owned(), "TEXT three".to_owned())],
        "the request carries only the new message: {convo:#?}"
    );

    // Derived state: a new resume id, and where context was lost.
    let all = ev.snapshot();
    assert_eq!(
        derive::context_lost(&all),
        Some(derive::ContextLost {
            resume_id: dead.clone(),
            seq: err_ev.seq
        })
    );
    assert_eq!(derive::resume_id(&all), Some(new_ready.resume_id.clone()));
    let s = h
        .wait_session(sid, "caught up with the new run", |s| {
            s.resume_id == new_ready.resume_id
        })
        .await;
    assert_eq!(s.lost_resume_id, dead);
    h.finish(sid, &ev).await;
}
