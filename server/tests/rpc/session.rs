//! Session lifecycle over real gRPC: Start, Send, Stop, permissions, errors.
//! A real tonic server on 127.0.0.1:0, the generated client, and the
//! scripted adapter speaking the CLI's stream-json shapes.

use crate::support::server;

use std::time::Duration;

use crate::support::scripted::ScriptedBehavior;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::ServeOptions;
use server::*;
use tonic::Code;

#[tokio::test]
async fn start_streams_events_and_stays_alive_then_follow_up_uses_same_process() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    // Subscribing before the session exists is valid and goes live.
    let mut sub = Sub::open(&mut c, "s1", 0).await;
    match sub.next().await.and_then(|m| m.kind) {
        Some(Kind::Replay(r)) => assert_eq!((r.reset, r.head_seq), (false, 0)),
        other => panic!("expected replay header, got {other:?}"),
    }
    assert!(matches!(
        sub.next().await.and_then(|m| m.kind),
        Some(Kind::CaughtUp(_))
    ));

    let started = start(&mut c, "s1", "hello").await.unwrap();
    assert!(started.process_id.starts_with("scripted:"));
    sub.until("turn_end", is_turn_end).await;
    assert_eq!(
        kinds(&sub.events),
        [
            "run_start",
            "input_sent",
            "run_ready",
            "content",
            "turn_end"
        ]
    );
    assert!(sub.events.iter().all(|e| e.run_id == started.run_id));
    match &sub.events[0].payload {
        Some(Payload::RunStart(rs)) => {
            assert_eq!(rs.trigger, "start");
            assert_eq!(rs.adapter, "scripted");
        }
        _ => unreachable!(),
    }
    let s = get(&mut c, "s1").await;
    assert_eq!(s.status, pb::SessionStatus::Idle as i32);
    assert!(s.process_alive, "keep-alive process stays up between turns");
    assert!(!s.resume_id.is_empty());

    // Follow-up: written to the same process, same run.
    let run = send(&mut c, "s1", "again").await.unwrap();
    assert_eq!(run, started.run_id);
    sub.until("second turn_end", is_turn_end).await;
    assert_eq!(server.adapter.record().spawns.len(), 1);
    assert!(
        server
            .adapter
            .record()
            .calls
            .contains(&"write:again".to_string())
    );
    let input = sub
        .events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::InputSent(i)) => Some(i.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert_eq!(input.len(), 2);
    assert_eq!(input[1].source, pb::InputSource::User as i32);
    assert_eq!(input[1].text, "again");

    // Start while live: FAILED_PRECONDITION.
    let err = start(&mut c, "s1", "x").await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");

    // ListSessions shows it with the same derived state.
    let list = c
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .sessions;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].session_id, "s1");
    assert_eq!(list[0].head_seq, sub.events.last().unwrap().seq);
}

#[tokio::test]
async fn send_without_live_process_resumes_with_the_logged_resume_id() {
    let opts = agent_harness_server::manager::ManagerOptions {
        idle_timeout: Duration::from_millis(300),
        ..fast_opts()
    };
    let server = TestServer::with(ScriptedBehavior::default(), opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let first = start(&mut c, "r1", "hello").await.unwrap();
    let resume = wait_session(&mut c, "r1", |s| {
        !s.resume_id.is_empty() && s.status == pb::SessionStatus::Idle as i32
    })
    .await
    .resume_id;
    // The idle keep-alive process times out and exits.
    wait_session(&mut c, "r1", |s| !s.process_alive).await;
    let run = send(&mut c, "r1", "continue").await.unwrap();
    assert_ne!(run, first.run_id, "a new run");
    let spawns = server.adapter.record().spawns;
    assert_eq!(spawns.len(), 2);
    assert_eq!(
        spawns[1].config.resume, resume,
        "respawn resumes the CLI session"
    );
    assert_eq!(spawns[1].config.prompt, "continue");
    let mut sub = Sub::open(&mut c, "r1", 0).await;
    sub.until("second turn_end", |e| is_turn_end(e) && e.run_id == run)
        .await;
    let run_start = sub
        .events
        .iter()
        .rev()
        .find_map(|e| match &e.payload {
            Some(Payload::RunStart(rs)) => Some(rs.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(run_start.trigger, "send");
    let ended = sub.events.iter().find(|e| is_run_end(e)).unwrap();
    assert_eq!(run_end(ended).reason, pb::RunEndReason::IdleTimeout as i32);
}

#[tokio::test]
async fn stop_is_idempotent_in_every_state() {
    let server = TestServer::start().await;
    let mut c = server.client().await;

    // Unknown session.
    assert_eq!(
        stop(&mut c, "nope").await.unwrap_err().code(),
        Code::NotFound
    );

    // Streaming: interrupt ends the turn, the process survives.
    let mut sub = start_subscribed(&mut c, "st", "HANG please").await;
    sub.until_kind("content").await;
    assert!(stop(&mut c, "st").await.unwrap());
    // A second Stop: true while the interrupt is under way, false once the
    // turn already ended; never a second stop_requested either way.
    let _ = stop(&mut c, "st").await.unwrap();
    sub.until("turn_end", is_turn_end).await;
    let s = wait_idle(&mut c, "st").await;
    assert!(s.process_alive, "interrupt keeps the process");

    // Idle but alive: nothing to stop; the process stays, no event.
    let head = s.head_seq;
    assert!(!stop(&mut c, "st").await.unwrap());
    assert!(!stop(&mut c, "st").await.unwrap());
    let s = get(&mut c, "st").await;
    assert!(s.process_alive);
    assert_eq!(s.head_seq, head);
    let stops = sub
        .events
        .iter()
        .filter(|e| kind(e) == "stop_requested")
        .count();
    assert_eq!(
        stops,
        1,
        "one stop_requested per turn: {:?}",
        kinds(&sub.events)
    );
    assert!(!sub.events.iter().any(is_run_end));

    // After the run ended: nothing to stop, no event.
    send(&mut c, "st", "CRASH").await.unwrap();
    sub.until("run_end", is_run_end).await;
    let head = get(&mut c, "st").await.head_seq;
    assert!(!stop(&mut c, "st").await.unwrap());
    assert!(!stop(&mut c, "st").await.unwrap());
    assert_eq!(get(&mut c, "st").await.head_seq, head);
}

#[tokio::test]
async fn stop_during_startup_before_run_ready() {
    let behavior = ScriptedBehavior {
        line_delay: Duration::from_millis(300),
        ..ScriptedBehavior::default()
    };
    // The scripted CLI is slow to boot (two 300 ms lines): give the
    // interrupt time to be answered before the ladder would signal.
    let opts = agent_harness_server::manager::ManagerOptions {
        stop_grace: Duration::from_secs(5),
        ..fast_opts()
    };
    let server = TestServer::with(behavior, opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    start(&mut c, "boot", "HANG").await.unwrap();
    assert_eq!(
        get(&mut c, "boot").await.status,
        pb::SessionStatus::Starting as i32
    );
    assert!(stop(&mut c, "boot").await.unwrap());
    assert_eq!(
        get(&mut c, "boot").await.status,
        pb::SessionStatus::Stopping as i32
    );
    let mut sub = Sub::open(&mut c, "boot", 0).await;
    sub.until("turn_end after the interrupt", is_turn_end).await;
    let s = wait_idle(&mut c, "boot").await;
    assert!(s.process_alive);
    assert!(
        server
            .adapter
            .record()
            .calls
            .contains(&"interrupt".to_string())
    );
}

#[tokio::test]
async fn stop_ladder_escalates_when_the_process_ignores_everything() {
    let behavior = ScriptedBehavior {
        honor_interrupt: false,
        ignore_sigint: true,
        ignore_sigterm: true,
        ..ScriptedBehavior::default()
    };
    let opts = agent_harness_server::manager::ManagerOptions {
        stop_grace: Duration::from_millis(300),
        ..fast_opts()
    };
    let server = TestServer::with(behavior, opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "deaf", "HANG").await;
    sub.until_kind("content").await;
    let t0 = std::time::Instant::now();
    assert!(stop(&mut c, "deaf").await.unwrap());
    let end = sub.until("run_end", is_run_end).await;
    let took = t0.elapsed();
    let end = run_end(&end);
    assert_eq!(end.reason, pb::RunEndReason::Stopped as i32);
    assert_eq!(end.signal, "SIGKILL");
    // stop_grace 300ms + kill_grace 200ms * 2 before SIGKILL.
    assert!(
        took >= Duration::from_millis(650),
        "escalated too fast: {took:?}"
    );
    let calls = server.adapter.record().calls;
    let ladder: Vec<_> = calls
        .iter()
        .filter(|c| *c == "interrupt" || c.starts_with("signal:"))
        .cloned()
        .collect();
    assert_eq!(
        ladder,
        ["interrupt", "signal:Int", "signal:Term", "signal:Kill"]
    );
    let ends = sub.events.iter().filter(|e| is_run_end(e)).count();
    assert_eq!(ends, 1);
}

#[tokio::test]
async fn one_shot_runs_complete_and_stop_goes_straight_to_signals() {
    let behavior = ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    };
    let server = TestServer::with(behavior, fast_opts(), ServeOptions::default()).await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "one", "hello").await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Completed as i32);
    assert_eq!(run_end(&end).exit_code, Some(0));

    let mut sub = start_subscribed(&mut c, "one2", "HANG").await;
    sub.until_kind("content").await;
    // A Send to a one-shot run still working is refused, not queued.
    assert_eq!(
        send(&mut c, "one2", "more").await.unwrap_err().code(),
        Code::FailedPrecondition
    );
    assert!(stop(&mut c, "one2").await.unwrap());
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Stopped as i32);
    let calls = server.adapter.record().calls;
    assert!(calls.contains(&"signal:Int".to_string()), "{calls:?}");
}

#[tokio::test]
async fn crashes_and_errors_get_the_right_run_end() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "crash", "CRASH now").await;
    let end = sub.until("run_end", is_run_end).await;
    let end = run_end(&end);
    assert_eq!(end.reason, pb::RunEndReason::ProcessExit as i32);
    assert_eq!(end.exit_code, Some(3));
    assert!(end.stderr_tail.contains("scripted crash"));

    let mut sub = start_subscribed(&mut c, "apierr", "APIERROR").await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).exit_code, Some(1));
}

#[tokio::test]
async fn spawn_failure_is_failed_precondition_and_the_run_still_ends() {
    let behavior = ScriptedBehavior {
        binary_missing: true,
        ..ScriptedBehavior::default()
    };
    let server = TestServer::with(behavior, fast_opts(), ServeOptions::default()).await;
    let mut c = server.client().await;
    let err = start(&mut c, "nobin", "hello").await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("--claude-bin"), "{}", err.message());
    let mut sub = Sub::open(&mut c, "nobin", 0).await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(
        kinds(&sub.events),
        ["run_start", "input_sent", "run_error", "run_end"]
    );
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).source, "spawn");
    let s = get(&mut c, "nobin").await;
    assert_eq!(s.status, pb::SessionStatus::Idle as i32);
    assert!(!s.process_alive);
}

#[tokio::test]
async fn idle_keep_alive_process_times_out() {
    let opts = agent_harness_server::manager::ManagerOptions {
        idle_timeout: Duration::from_millis(300),
        ..fast_opts()
    };
    let server = TestServer::with(ScriptedBehavior::default(), opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "idle", "hello").await;
    sub.until("turn_end", is_turn_end).await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::IdleTimeout as i32);
    let stop_sources: Vec<_> = sub
        .events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::StopRequested(s)) => Some(s.source.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(stop_sources, ["idle"]);
    assert_eq!(server.adapter.live_processes(), 0);
}

#[tokio::test]
async fn permissions_are_relayed_answered_and_timed_out() {
    let opts = agent_harness_server::manager::ManagerOptions {
        permission_timeout: Duration::from_millis(400),
        ..fast_opts()
    };
    let server = TestServer::with(ScriptedBehavior::default(), opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "perm", "PERMISSION please").await;
    let req = sub.until_kind("permission_requested").await;
    let Some(Payload::PermissionRequested(req)) = req.payload else {
        unreachable!()
    };
    assert_eq!(req.tool_name, "Bash");
    assert_eq!(get(&mut c, "perm").await.pending_permissions, 1);

    let answer = |id: &str, allow: bool| pb::RespondPermissionRequest {
        idempotency_key: String::new(),
        session_id: "perm".into(),
        request_id: id.into(),
        allow,
        updated_input: None,
        message: String::new(),
    };
    let err = c
        .respond_permission(answer("not-a-request", true))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    c.respond_permission(answer(&req.request_id, true))
        .await
        .unwrap();
    let resolved = sub.until_kind("permission_resolved").await;
    let Some(Payload::PermissionResolved(r)) = resolved.payload else {
        unreachable!()
    };
    assert_eq!((r.allow, r.by.as_str()), (true, "user"));
    sub.until("turn_end", is_turn_end).await;
    // Answering twice: no longer pending.
    let err = c
        .respond_permission(answer(&req.request_id, true))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // Unanswered: denied by the timeout.
    send(&mut c, "perm", "PERMISSION again").await.unwrap();
    let req2 = sub
        .until("second permission_requested", |e| {
            kind(e) == "permission_requested"
        })
        .await;
    let resolved = sub
        .until("timeout resolution", |e| kind(e) == "permission_resolved")
        .await;
    let Some(Payload::PermissionResolved(r)) = resolved.payload else {
        unreachable!()
    };
    assert_eq!((r.allow, r.by.as_str()), (false, "timeout"));
    assert!(req2.seq < resolved.seq);
    sub.until("turn_end after deny", is_turn_end).await;
    assert!(
        server
            .adapter
            .record()
            .calls
            .iter()
            .any(|c| c.ends_with(":deny"))
    );
}

#[tokio::test]
async fn pending_permission_is_resolved_by_run_end() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "pr", "PERMISSION").await;
    sub.until_kind("permission_requested").await;
    // Stop: the interrupt makes the CLI withdraw its request (cancelled),
    // and ending the idle process afterwards leaves nothing pending.
    assert!(stop(&mut c, "pr").await.unwrap());
    let resolved = sub.until_kind("permission_resolved").await;
    let Some(Payload::PermissionResolved(r)) = resolved.payload else {
        unreachable!()
    };
    assert!(!r.allow);
    assert!(r.by == "cancelled" || r.by == "run_end", "{}", r.by);
    assert_eq!(wait_idle(&mut c, "pr").await.pending_permissions, 0);
}

#[tokio::test]
async fn validation_errors_name_the_field_and_unknown_sessions_are_not_found() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let err = start(&mut c, "bad id", "x").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("session_id"), "{}", err.message());
    let err = start(&mut c, &"x".repeat(129), "x").await.unwrap_err();
    assert!(err.message().contains("session_id"));
    let err = c
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: "ok".into(),
            config: Some(pb::StartConfig {
                cwd: "/definitely/not/here".into(),
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("config.cwd"), "{}", err.message());
    let err = send(&mut c, "ok", "").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("input"));
    let err = c
        .respond_permission(pb::RespondPermissionRequest {
            session_id: "ok".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.message().contains("request_id"), "{}", err.message());
    let err = c
        .subscribe(pb::SubscribeRequest {
            session_id: "a/b".into(),
            after_seq: 0,
            include_deltas: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Unknown sessions.
    let nf = |s: tonic::Status| assert_eq!(s.code(), Code::NotFound, "{s:?}");
    nf(c.get_session(pb::GetSessionRequest {
        session_id: "ghost".into(),
    })
    .await
    .unwrap_err());
    nf(send(&mut c, "ghost", "hi").await.unwrap_err());
    nf(c.history(pb::HistoryRequest {
        session_id: "ghost".into(),
        before_seq: 0,
        limit: 0,
    })
    .await
    .unwrap_err());
    nf(c.respond_permission(pb::RespondPermissionRequest {
        session_id: "ghost".into(),
        request_id: "r".into(),
        ..Default::default()
    })
    .await
    .unwrap_err());
}

#[tokio::test]
async fn history_pages_the_log() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "h", "hello").await;
    sub.until("turn_end", is_turn_end).await;
    let page = c
        .history(pb::HistoryRequest {
            session_id: "h".into(),
            before_seq: 0,
            limit: 2,
        })
        .await
        .unwrap()
        .into_inner();
    let head = sub.events.last().unwrap().seq;
    let seqs: Vec<_> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [head - 1, head]);
    assert!(page.has_more);
}

#[tokio::test]
async fn sessions_run_in_parallel() {
    let server = TestServer::start().await;
    let c = server.client().await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let mut c = c.clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("par-{i}");
            start(&mut c, &id, "hello").await.unwrap();
            send(&mut c, &id, "more").await.unwrap();
            wait_session(&mut c, &id, |s| {
                s.status == pb::SessionStatus::Idle as i32
                    && s.usage.as_ref().is_some_and(|u| u.turns == 2)
            })
            .await
        }));
    }
    for t in tasks {
        let s = t.await.unwrap();
        assert!(s.process_alive);
    }
    assert_eq!(server.adapter.record().spawns.len(), 8);
}

#[tokio::test]
async fn a_one_shot_start_it_cannot_run_is_refused_before_anything_is_appended() {
    use agent_harness_server::adapter::claude::ClaudeCliAdapter;
    use agent_harness_server::adapter::claude::ClaudeOptions;
    // Refused before any spawn: the binary is never looked for.
    let adapter = std::sync::Arc::new(ClaudeCliAdapter::new(ClaudeOptions {
        claude_bin: Some("/nonexistent/claude".into()),
        ..ClaudeOptions::default()
    }));
    let server = TestServer::spawning(adapter, fast_opts()).await;
    let mut c = server.client().await;
    // No prompt: a one-shot run has nothing to run.
    let err = start(&mut c, "empty", "").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("config.prompt"), "{}", err.message());
    // Content blocks: a one-shot prompt is argv text.
    let err = c
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: "blocks".into(),
            config: Some(pb::StartConfig {
                prompt: "look".into(),
                content_blocks: vec![pbjson_types::Struct::default()],
                ..Default::default()
            }),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    for session in ["empty", "blocks"] {
        let err = c
            .get_session(pb::GetSessionRequest {
                session_id: session.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{session}: nothing appended");
    }
    server.shutdown().await.unwrap();
}

/// A run task that panics (here: the process control panics on interrupt)
/// still ends its run exactly once, with the panic recorded, the process
/// killed, and the session usable afterwards.
#[tokio::test]
async fn a_panicking_run_task_still_ends_its_run_once() {
    let server = TestServer::with(
        ScriptedBehavior {
            panic_on_interrupt: true,
            ..ScriptedBehavior::default()
        },
        fast_opts(),
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let mut sub = Sub::open(&mut c, "boom", 0).await;
    let started = start(&mut c, "boom", "HANG until stopped").await.unwrap();
    sub.until_kind("content").await;
    // The Stop's interrupt panics inside the run task: the caller sees the
    // run task vanish, and the run is closed for it.
    let _ = stop(&mut c, "boom").await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(end.run_id, started.run_id);
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).source, "panic");
    let error = sub
        .events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::RunError(r)) => Some(r.clone()),
            _ => None,
        })
        .expect("run_error{panic}");
    assert_eq!(error.kind, "panic");
    assert!(error.message.contains("interrupt() panics"), "{error:?}");
    assert!(
        server
            .adapter
            .record()
            .calls
            .contains(&"signal:Kill".to_owned())
    );
    // Exactly one run_end, and the session goes on.
    let events = history_all(&mut c, "boom").await;
    assert_eq!(events.iter().filter(|e| is_run_end(e)).count(), 1);
    let s = assert_derived_matches_log(&mut c, "boom").await;
    assert!(!s.process_alive);
    let next = send(&mut c, "boom", "hello again").await.unwrap();
    assert_ne!(next, started.run_id);
    sub.until("turn_end", is_turn_end).await;
    server.shutdown().await.unwrap();
}

/// A one-shot (`cli`) recording served as the adapter plays through: its
/// stdin close was the adapter's own, so nothing waits for the harness, and
/// every Start runs to its `run_end`, Send respawns it (the bench serves
/// it to run thousands of sessions).
#[tokio::test]
async fn a_one_shot_cassette_served_as_the_adapter_runs_each_turn_to_its_end() {
    use crate::support::scripted::ScriptedAdapter;
    use agent_harness_server::adapter::cassette::CassetteAdapter;
    use std::sync::Arc;
    let cassette = crate::support::common::cassettes_dir().join("one_shot.cassette.jsonl");
    let spawner = Arc::new(CassetteAdapter::from_file(cassette, 0.0).unwrap());
    let server = TestServer::with_adapter(
        crate::support::server::test_store(),
        spawner,
        ScriptedAdapter::new(ScriptedBehavior::default()),
        fast_opts(),
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "one", "hi").await;
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Completed as i32);
    let again = send(&mut c, "one", "again").await.unwrap();
    let end = sub
        .until("the second run_end", |e| is_run_end(e) && e.run_id == again)
        .await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Completed as i32);
    server.shutdown().await.unwrap();
}

/// The server over a cassette as `--adapter cassette:FILE` builds it: the
/// recording stands for every agent, and refuses the one it was not
/// recorded from.
async fn cassette_server(name: &str) -> TestServer {
    use crate::support::scripted::ScriptedAdapter;
    use agent_harness_server::config::{AdapterKind, ServeConfig};
    let config = ServeConfig {
        adapter: AdapterKind::Cassette(
            crate::support::common::cassettes_dir().join(format!("{name}.cassette.jsonl")),
        ),
        cassette_timescale: 0.0,
        ..Default::default()
    };
    TestServer::with_adapter(
        crate::support::server::test_store(),
        agent_harness_server::server::build_adapter(&config).unwrap(),
        ScriptedAdapter::new(ScriptedBehavior::default()),
        fast_opts(),
        ServeOptions::default(),
    )
    .await
}

/// Starts a Codex session with `prompt` (a cassette ignores it) and
/// subscribes from its first event.
async fn start_codex(
    c: &mut agent_harness_protocol::pb::session_service_client::SessionServiceClient<
        tonic::transport::Channel,
    >,
    session: &str,
) -> Sub {
    c.start(pb::StartRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt: "replayed".into(),
            agent: "codex".into(),
            ..Default::default()
        }),
    })
    .await
    .expect("a codex start");
    Sub::open(c, session, 0).await
}

/// A Codex recording served as the adapter: the session runs Codex (its
/// run_ready and GetSession say so), the follow-up goes to the same
/// process, and a claude Start is refused naming the recording's agent.
#[tokio::test]
async fn a_codex_cassette_served_as_the_adapter_replays_a_codex_session() {
    let server = cassette_server("codex_follow_up").await;
    let mut c = server.client().await;
    let mut sub = start_codex(&mut c, "cx").await;
    let ready = sub.until_kind("run_ready").await;
    let Some(Payload::RunReady(ready)) = ready.payload else {
        unreachable!()
    };
    assert_eq!(ready.agent, "codex");
    let first = sub.until("the first turn_end", is_turn_end).await;
    send(&mut c, "cx", "again").await.unwrap();
    sub.until("the second turn_end", |e| {
        is_turn_end(e) && e.seq > first.seq
    })
    .await;
    let texts: Vec<String> = sub
        .events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(c)) => Some(c.blocks[0].text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["first", "second"]);
    let s = wait_idle(&mut c, "cx").await;
    assert_eq!(s.agent, "codex");
    assert!(s.process_alive, "Codex stays up between turns");

    let refused = start(&mut c, "claude", "hi").await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(
        refused.message().contains("recorded from codex"),
        "{refused:?}"
    );
    server.shutdown().await.unwrap();
}

/// A Codex approval replayed through the server: the request is pending
/// until RespondPermission answers it, then the command's output and the
/// model's answer follow.
#[tokio::test]
async fn a_codex_cassette_replays_an_approved_command() {
    let server = cassette_server("codex_approval").await;
    let mut c = server.client().await;
    let mut sub = start_codex(&mut c, "ap").await;
    let asked = sub.until_kind("permission_requested").await;
    let Some(Payload::PermissionRequested(asked)) = asked.payload else {
        unreachable!()
    };
    assert_eq!(asked.tool_name, "Bash");
    let s = wait_session(&mut c, "ap", |s| s.pending_permissions == 1).await;
    assert_eq!(s.agent, "codex");
    c.respond_permission(pb::RespondPermissionRequest {
        idempotency_key: String::new(),
        session_id: "ap".into(),
        request_id: asked.request_id.clone(),
        allow: true,
        updated_input: None,
        message: String::new(),
    })
    .await
    .unwrap();
    sub.until("turn_end", is_turn_end).await;
    let output = sub
        .events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Result(r)) if !r.tool_results.is_empty() => Some(r.clone()),
            _ => None,
        })
        .expect("the command's result");
    assert!(!output.is_error, "{output:?}");
    let s = wait_idle(&mut c, "ap").await;
    assert_eq!(s.pending_permissions, 0);
    server.shutdown().await.unwrap();
}

/// A Codex interrupt replayed through the server: Stop's first rung ends
/// the turn interrupted and keeps the process, and the next Send is a turn
/// on it; a setting chosen in between is accepted as Codex's adapter
/// accepts it (nothing goes to the process until the next turn).
#[tokio::test]
async fn a_codex_cassette_replays_stop_keeping_the_process() {
    let server = cassette_server("codex_interrupt").await;
    let mut c = server.client().await;
    let mut sub = start_codex(&mut c, "st").await;
    sub.until_kind("run_ready").await;
    assert!(stop(&mut c, "st").await.unwrap());
    let first = sub.until("the interrupted turn_end", is_turn_end).await;
    let Some(Payload::TurnEnd(end)) = &first.payload else {
        unreachable!()
    };
    assert!(end.is_error, "{end:?}");
    c.set_model(pb::SetModelRequest {
        idempotency_key: String::new(),
        session_id: "st".into(),
        model: "another".into(),
    })
    .await
    .expect("a Codex setting for the next turn");
    let s = wait_idle(&mut c, "st").await;
    assert!(s.process_alive, "Stop's first rung keeps Codex");
    send(&mut c, "st", "again").await.unwrap();
    let second = sub
        .until("the second turn_end", |e| {
            is_turn_end(e) && e.seq > first.seq
        })
        .await;
    let Some(Payload::TurnEnd(end)) = &second.payload else {
        unreachable!()
    };
    assert!(!end.is_error, "{end:?}");
    server.shutdown().await.unwrap();
}
