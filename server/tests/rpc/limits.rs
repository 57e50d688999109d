//! Limits on what the CLI writes: `--max-line-bytes` (ManagerOptions
//! `max_line_bytes`) turns an oversized stdout line into
//! `run_error{kind: "line_too_large"}` and the run goes on. A real tonic
//! server, the generated client, the scripted CLI with an injected line.
//! And memory: calls on unknown ids (and refused Starts) leave no state.

use crate::support::server;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::manager::ManagerOptions;
use server::*;

const LIMIT: usize = 4096;

/// An assistant line far over [`LIMIT`], shaped like the CLI's.
fn huge_assistant_line() -> String {
    serde_json::json!({
        "type": "assistant",
        "message": {"id": "msg_huge", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "x".repeat(100_000)}]},
        "parent_tool_use_id": null, "session_id": "s"
    })
    .to_string()
}

#[tokio::test]
async fn oversized_stdout_line_is_a_run_error_and_the_run_goes_on() {
    // Before the answer of a turn whose text says BIGLINE, the "CLI" writes
    // one huge line.
    let inject = |line: &StdoutLine| {
        let text = line_text(line);
        if text.contains("\"type\":\"assistant\"") && text.contains("BIGLINE") {
            vec![StdoutLine::Line(huge_assistant_line())]
        } else {
            vec![]
        }
    };
    let server = TestServer::injecting(
        inject,
        ManagerOptions {
            max_line_bytes: LIMIT,
            ..fast_opts()
        },
    )
    .await;
    let mut c = server.client().await;
    let (mut sub, started) = first_turn(&mut c, "big", "BIGLINE please").await;
    assert_eq!(
        kinds(&sub.events),
        [
            "run_start",
            "input_sent",
            "run_ready",
            "run_error",
            "content",
            "turn_end"
        ]
    );
    let err = &sub.events[3];
    let Some(Payload::RunError(r)) = &err.payload else {
        unreachable!()
    };
    assert_eq!(r.kind, "line_too_large");
    let len = huge_assistant_line().len();
    assert!(
        r.message.contains(&format!("{len} bytes")) && r.message.contains("4096 byte limit"),
        "{}",
        r.message
    );
    assert_eq!(err.run_id, started.run_id);
    assert!(
        err.cli_line.len() < LIMIT,
        "the event keeps only the line's head, not {} bytes",
        err.cli_line.len()
    );
    // The turn's real answer arrived after the oversized line.
    let Some(Payload::Content(content)) = &sub.events[4].payload else {
        unreachable!()
    };
    assert_eq!(content.blocks[0].text, "echo: BIGLINE please");

    // The same process takes the next turn.
    let s = assert_derived_matches_log(&mut c, "big").await;
    assert_eq!(
        (s.status, s.process_alive),
        (pb::SessionStatus::Idle as i32, true)
    );
    assert_eq!(
        send(&mut c, "big", "and then").await.unwrap(),
        started.run_id
    );
    sub.until("second turn_end", is_turn_end).await;
    assert_eq!(server.adapter.record().spawns.len(), 1);
    assert_eq!(
        sub.events.iter().filter(|e| kind(e) == "run_error").count(),
        1
    );
    server.shutdown().await.unwrap();
}

/// Calls on ids that do not exist, and Starts the launch policy refuses,
/// leave nothing in memory: each gets its error and allocates no session
/// state that outlives the call.
#[tokio::test]
async fn unknown_ids_and_refused_starts_allocate_nothing() {
    use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
    use agent_harness_server::log::{EventLogs, LogOptions};
    use agent_harness_server::manager::SessionManager;
    use std::sync::Arc;

    let logs =
        EventLogs::open(crate::support::server::test_store(), LogOptions::default()).unwrap();
    let adapter = Arc::new(ScriptedAdapter::new(ScriptedBehavior::default()));
    let m = SessionManager::new(adapter, logs, fast_opts());
    for i in 0..1_000 {
        let id = format!("nobody-{i}");
        let unknown = |e: agent_harness_server::error::Error| {
            assert!(e.to_string().contains("not found"), "{e}");
        };
        unknown(
            m.send(server::send_request(&id, "hi", ""))
                .await
                .unwrap_err(),
        );
        unknown(m.stop(server::stop_request(&id, "")).await.unwrap_err());
        unknown(
            m.respond_permission(pb::RespondPermissionRequest {
                session_id: id.clone(),
                request_id: "r".into(),
                ..Default::default()
            })
            .await
            .unwrap_err(),
        );
        unknown(m.get(&id).await.unwrap_err());
        let refused = m
            .start(server::start_request(
                &id,
                pb::StartConfig {
                    prompt: "hi".into(),
                    args: vec!["--dangerously-skip-permissions".into()],
                    ..Default::default()
                },
            ))
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("config.args[0]"), "{refused}");
    }
    assert_eq!(m.sessions_in_memory(), 0);
    assert!(
        m.logs()
            .sessions(None, usize::MAX)
            .await
            .unwrap()
            .is_empty()
    );
    // A real session does get its state.
    m.start(server::start_request("real", server::prompt("hi")))
        .await
        .unwrap();
    assert_eq!(m.sessions_in_memory(), 1);
    m.shutdown().await;
}

/// A CLI line withdrawing a permission request that was never asked (or
/// was already answered) records nothing: the run task keeps a withdrawal
/// only for a request the log shows pending. A real one still lands.
#[tokio::test]
async fn withdrawals_of_requests_that_are_not_pending_are_dropped() {
    let inject = |line: &StdoutLine| {
        let text = line_text(line);
        if !text.contains("\"type\":\"assistant\"") {
            return vec![];
        }
        let cancel = |id: &str| {
            StdoutLine::Line(
                serde_json::json!({"type": "control_cancel_request", "request_id": id}).to_string(),
            )
        };
        vec![cancel("never-asked"), cancel(""), cancel("never-asked")]
    };
    let server = TestServer::injecting(inject, fast_opts()).await;
    let mut c = server.client().await;
    let (sub, _) = first_turn(&mut c, "w", "hello").await;
    assert!(
        !kinds(&sub.events).contains(&"permission_resolved"),
        "{:?}",
        kinds(&sub.events)
    );
    // A request that is pending, then withdrawn by the CLI (the scripted
    // CLI withdraws it on interrupt), is resolved exactly once.
    let mut sub = Sub::open(&mut c, "w", 0).await;
    send(&mut c, "w", "PERMISSION please").await.unwrap();
    sub.until_kind("permission_requested").await;
    assert!(stop(&mut c, "w").await.unwrap());
    sub.until("turn_end", is_turn_end).await;
    let resolved: Vec<_> = sub
        .events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::PermissionResolved(r)) => Some(r.by.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(resolved, ["cancelled"]);
    server.shutdown().await.unwrap();
}
