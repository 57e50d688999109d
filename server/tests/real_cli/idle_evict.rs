//! The cap on idle keep-alive processes (`--max-idle-runs`) with the real
//! CLI: past it the least recently active idle process is ended (run_end
//! IDLE_EVICTED), and a Send to its session resumes the conversation.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli idle_evict::`.

use crate::support::cli_grpc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::manager::ManagerOptions;
use cli_grpc::{Events, Harness, Setup, eventually, test_manager_options};

use super::grpc::{conversation_text, send_resumes};

/// Whether `pid` is a process that has not exited (not gone, not a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The state follows the command's closing parenthesis.
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// With `--max-idle-runs 2`, five sessions that each finished a turn leave
/// two CLI processes: the three least recently active got run_end
/// IDLE_EVICTED (after stop_requested{idle}), and a Send to one of them
/// answers with its earlier turn in the model's request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_idle_runs_the_oldest_idle_processes_end_and_resume_on_send() {
    let h = Harness::with(Setup {
        manager: ManagerOptions {
            max_idle_runs: 2,
            ..test_manager_options()
        },
        ..Setup::default()
    })
    .await;
    let names = ["e1", "e2", "e3", "e4", "e5"];
    let mut sessions: Vec<(Events, pb::RunReady, pb::Event)> = Vec::new();
    // One after the other, each turn ended before the next Start: the
    // order the processes went idle is the order they go.
    for name in names {
        let ev = h.subscribe(name).await;
        h.start_session(name, &format!("TEXT one {name}")).await;
        let (_, ready) = ev.run_ready_after(0).await;
        let (turn_end, _) = ev.turn_end_after(0).await;
        sessions.push((ev, ready, turn_end));
    }

    let mut ends = Vec::new();
    for (ev, _, turn_end) in &sessions[..3] {
        let (end_ev, end) = ev.run_end_after(turn_end.seq).await;
        assert_eq!(end.reason(), pb::RunEndReason::IdleEvicted, "{end:?}");
        assert_eq!(end.source, "process");
        assert!(
            ev.since(turn_end.seq).iter().any(|e| matches!(&e.payload,
                Some(Payload::StopRequested(s)) if s.source == "idle")),
            "stop_requested{{idle}} precedes the run_end"
        );
        ends.push(end_ev);
    }
    let pids: Vec<u32> = sessions.iter().map(|(_, ready, _)| ready.pid).collect();
    eventually("the evicted CLI processes to be gone", || {
        pids.iter().filter(|p| running(**p)).count() == 2
    })
    .await;
    assert!(
        running(pids[3]) && running(pids[4]),
        "the two most recent stay"
    );
    for name in &names[3..] {
        h.assert_idle(name, true).await;
    }
    for name in &names[..3] {
        h.assert_idle(name, false).await;
    }

    // The evicted e1 answers with its context: its respawn resumes the
    // conversation, and the model's request holds the first turn.
    let (ev1, ready1, _) = &sessions[0];
    h.api().clear_requests();
    send_resumes(&h, ev1, &ends[0], "TEXT two e1", &ready1.resume_id).await;
    let calls = h.api().message_requests();
    assert_eq!(calls.len(), 1, "one model call for the resumed turn");
    let convo = conversation_text(calls[0].body.as_ref().expect("a JSON body"));
    let first = convo
        .iter()
        .position(|(role, t)| role == "user" && t.contains("TEXT one e1"));
    let answer = convo
        .iter()
        .position(|(role, t)| role == "assistant" && t.trim() == "one e1");
    let second = convo
        .iter()
        .position(|(role, t)| role == "user" && t.contains("TEXT two e1"));
    assert!(
        matches!((first, answer, second), (Some(a), Some(b), Some(c)) if a < b && b < c),
        "the earlier turn precedes the new prompt: {convo:#?}"
    );

    // e1 is now the most recently active: e4, idle longest, made room.
    let (ev4, _, turn_end4) = &sessions[3];
    let (_, end4) = ev4.run_end_after(turn_end4.seq).await;
    assert_eq!(end4.reason(), pb::RunEndReason::IdleEvicted, "{end4:?}");
    h.assert_idle("e5", true).await;
    h.finish("e1", ev1).await;
}
