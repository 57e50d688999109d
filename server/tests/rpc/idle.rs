//! The idle timeout never ends a keep-alive process whose log shows
//! background tasks running (derive's `has_running_background_tasks`): the
//! idle clock restarts instead, and the process ends idle once the tasks
//! are done. The scripted CLI, with background task frames injected as the
//! real CLI writes them (`system/task_started`, `system/task_notification`).

use crate::support::server;

use std::time::Duration;

use agent_harness_client::pb;
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::manager::ManagerOptions;
use serde_json::json;
use server::*;

const IDLE: Duration = Duration::from_millis(300);

/// Frames of CLI 2.1.197 (as in cassettes/bg_bash), keyed by the turn's text.
fn task_frames(line: &StdoutLine) -> Vec<StdoutLine> {
    let text = line_text(line);
    if !text.contains("\"type\":\"assistant\"") {
        return vec![];
    }
    let frame = if text.contains("BGSTART") {
        json!({"type":"system","subtype":"task_started","task_id":"bscripted1",
            "tool_use_id":"toolu_bg1","description":"Background command",
            "task_type":"local_bash","uuid":"u-1","session_id":"s"})
    } else if text.contains("BGDONE") {
        json!({"type":"system","subtype":"task_notification","task_id":"bscripted1",
            "tool_use_id":"toolu_bg1","status":"completed","output_file":"/tmp/bscripted1.output",
            "summary":"Background command completed (exit code 0)","session_id":"s","uuid":"u-2"})
    } else {
        return vec![];
    };
    vec![StdoutLine::Line(frame.to_string())]
}

#[tokio::test]
async fn idle_timeout_waits_for_running_background_tasks() {
    let server = TestServer::injecting(
        task_frames,
        ManagerOptions {
            idle_timeout: IDLE,
            ..fast_opts()
        },
    )
    .await;
    let mut c = server.client().await;
    let (mut sub, started) = first_turn(&mut c, "bg", "BGSTART a job").await;
    assert!(kinds(&sub.events).contains(&"task_started"));
    let events = history_all(&mut c, "bg").await;
    assert!(agent_harness_client::derive::has_running_background_tasks(
        &events
    ));

    // Several idle periods pass with the task running: the process stays.
    tokio::time::sleep(IDLE * 4).await;
    let s = assert_derived_matches_log(&mut c, "bg").await;
    assert!(s.process_alive, "ended while a background task ran: {s:?}");
    assert_eq!(s.status, pb::SessionStatus::Idle as i32);
    assert!(
        !server
            .adapter
            .record()
            .calls
            .contains(&"close_stdin".to_owned()),
        "the idle path never began"
    );

    // The task finishes; now the idle timeout ends the process.
    assert_eq!(
        send(&mut c, "bg", "BGDONE check").await.unwrap(),
        started.run_id
    );
    sub.until_kind("task_notification").await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::IdleTimeout as i32);
    let idle_stop = sub
        .events
        .iter()
        .find(|e| kind(e) == "stop_requested")
        .expect("stop_requested{idle}");
    let last_turn_end = sub.events.iter().rev().find(|e| is_turn_end(e)).unwrap();
    assert!(
        idle_stop.seq > last_turn_end.seq,
        "the idle stop came after the task's turn, not during the wait"
    );
    assert_eq!(
        kinds(&sub.events)
            .iter()
            .filter(|k| **k == "stop_requested")
            .count(),
        1
    );
    server.shutdown().await.unwrap();
}
