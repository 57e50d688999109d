//! A session that outlives its process: resumed with `session/load` after
//! the server restarts or the agent is killed (the model receives the
//! earlier messages; the replayed history is not appended again), and a
//! session Gemini no longer has (run_error resume_failed, then a new one).
//!
//! A load within the minute of the session's latest run_ready is held back
//! to the next minute by the adapter (Gemini CLI names its session file by
//! that minute; see docs/agents.md), so these waits are longer than the
//! usual test wait; nothing here renames Gemini's files to dodge it.

use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use super::{Harness, both_releases, process_gone, ready_of};
use crate::support::cli_grpc::{Events, eventually, run_starts, texts};

/// A resume may wait up to a minute before its load, then start Gemini.
pub(super) const RESUME_WAIT: Duration = Duration::from_secs(60 * 2 + 30);

both_releases!(
    a_shutdown_while_a_load_is_held_back_ends_at_once,
    resume_after_the_server_restarts,
    a_lost_session_is_resume_failed_and_the_next_send_starts_anew,
    kill_9_of_the_agent_mid_turn_ends_the_run_once_and_the_next_send_resumes,
);

/// The minute (UTC, since the epoch) of run `run`'s run_ready.
fn ready_minute(events: &[pb::Event], run: &str) -> i64 {
    events
        .iter()
        .find(|e| e.run_id == run && matches!(e.payload, Some(Payload::RunReady(_))))
        .and_then(|e| e.time.as_ref())
        .map(|t| t.seconds / 60)
        .expect("a run_ready with its time")
}

/// The load of `run` came in a later minute than the opening by `before`
/// (the adapter held it back when it had to).
fn loaded_in_a_later_minute(events: &[pb::Event], before: &str, run: &str) {
    assert!(
        ready_minute(events, run) > ready_minute(events, before),
        "the session was loaded in the minute it was last opened"
    );
}

/// The turn_end of run `run` (waiting through a held-back load).
pub(super) async fn turn_end_of(ev: &Events, run: &str) -> pb::TurnEnd {
    ev.wait_for_within("the run's turn_end", RESUME_WAIT, |evs| {
        evs.iter().find_map(|e| match &e.payload {
            Some(Payload::TurnEnd(t)) if e.run_id == run => Some(t.clone()),
            _ => None,
        })
    })
    .await
}

/// After the server restarts, a Send resumes the session in a new process
/// (`session/load`): the model receives the earlier messages, and the
/// history Gemini replays is not appended again.
async fn resume_after_the_server_restarts(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("r1").await;
    let first = h.start("r1", "TEXT remember me").await;
    ev.turn_end_after(0).await;
    let session_id = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    drop(ev);
    h.shutdown().await;
    h.serve().await;
    let ev = h.subscribe("r1").await;
    let run = h.send("r1", "TEXT second").await;
    assert_ne!(run, first.run_id);
    let end = turn_end_of(&ev, &run).await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    let (_, rs) = run_starts(&events)
        .into_iter()
        .find(|(e, _)| e.run_id == run)
        .expect("the resumed run_start");
    assert_eq!(rs.config.expect("config").resume, session_id);
    assert_eq!(
        ready_of(&events, &run).resume_id,
        session_id,
        "the same session"
    );
    assert_eq!(h.last_prompts(), ["TEXT remember me", "TEXT second"]);
    loaded_in_a_later_minute(&events, &first.run_id, &run);
    assert_eq!(
        texts(&events),
        "remember me|second",
        "each answer once: the replay is not appended"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("r1");
}

/// Gemini no longer has the session (its files are gone): the resumed run
/// fails with run_error{resume_failed} naming it, and the next Send starts
/// a new session.
async fn a_lost_session_is_resume_failed_and_the_next_send_starts_anew(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("r2").await;
    let first = h.start("r2", "TEXT before the loss").await;
    ev.turn_end_after(0).await;
    let session_id = ready_of(&ev.snapshot(), &first.run_id).resume_id;
    drop(ev);
    h.shutdown().await;
    let files = h.session_files();
    assert!(!files.is_empty(), "Gemini wrote its session");
    for f in files {
        std::fs::remove_file(f).expect("delete the session file");
    }
    h.serve().await;
    let ev = h.subscribe("r2").await;
    let failed_run = h.send("r2", "TEXT lost").await;
    let err = ev
        .wait_for_within("run_error resume_failed", RESUME_WAIT, |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::RunError(r)) if r.kind == "resume_failed" => Some(r.clone()),
                _ => None,
            })
        })
        .await;
    assert_eq!(err.resume_id, session_id);
    ev.wait_for("the failed run's end", |evs| {
        evs.iter()
            .any(|e| e.run_id == failed_run && matches!(e.payload, Some(Payload::RunEnd(_))))
            .then_some(())
    })
    .await;
    assert_eq!(h.get("r2").await.lost_resume_id, session_id);
    let run = h.send("r2", "TEXT anew").await;
    let end = turn_end_of(&ev, &run).await;
    assert!(!end.is_error, "{end:?}");
    let events = ev.snapshot();
    let (_, rs) = run_starts(&events)
        .into_iter()
        .find(|(e, _)| e.run_id == run)
        .expect("the new run_start");
    assert_eq!(rs.lost_resume_id, session_id);
    assert!(rs.config.expect("config").resume.is_empty());
    assert_ne!(
        ready_of(&events, &run).resume_id,
        session_id,
        "a new session"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("r2");
}

/// The agent killed with SIGKILL mid-answer: the run ends once, and the
/// next Send resumes the session in a new process that remembers the
/// first turn.
async fn kill_9_of_the_agent_mid_turn_ends_the_run_once_and_the_next_send_resumes(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("r3").await;
    let first = h.start("r3", "TEXT remember me").await;
    let (end_ev, _) = ev.turn_end_after(0).await;
    let ready = ready_of(&ev.snapshot(), &first.run_id);
    h.send("r3", "SLOW 100 100").await;
    eventually("the second model request", || {
        h.api.gemini_requests().len() >= 2
    })
    .await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ready.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the agent");
    ev.run_end_after(end_ev.seq).await;
    eventually("the agent reaped", || process_gone(ready.pid)).await;
    let run = h.send("r3", "TEXT after the kill").await;
    assert_ne!(run, first.run_id, "a new process");
    let end = turn_end_of(&ev, &run).await;
    assert!(!end.is_error, "{end:?}");
    loaded_in_a_later_minute(&ev.snapshot(), &first.run_id, &run);
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
    let stored = h.assert_stored_runs_end_once("r3");
    let ends = stored
        .iter()
        .filter(|e| e.run_id == first.run_id && matches!(e.payload, Some(Payload::RunEnd(_))))
        .count();
    assert_eq!(ends, 1, "the killed run ended once");
}

/// A shutdown while a respawned agent's load is held back (its session was
/// opened this minute) does not wait for that minute: the process ends on
/// its closed input, and every run ends once.
async fn a_shutdown_while_a_load_is_held_back_ends_at_once(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let ev = h.subscribe("r4").await;
    let first = h.start("r4", "TEXT one").await;
    let (end_ev, _) = ev.turn_end_after(0).await;
    let ready = ready_of(&ev.snapshot(), &first.run_id);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ready.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9 the agent");
    ev.run_end_after(end_ev.seq).await;
    let run = h.send("r4", "TEXT two").await;
    assert_ne!(run, first.run_id);
    let began = std::time::Instant::now();
    h.shutdown().await;
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "the shutdown took {:?}",
        began.elapsed()
    );
    h.assert_stored_runs_end_once("r4");
}
