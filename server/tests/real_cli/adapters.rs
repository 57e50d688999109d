//! The claude adapters against the real CLI 2.1.197 and the fake Messages
//! API: real framing, real tools, real interrupts, zero tokens.

use crate::support::cli;
use crate::support::cli_grpc::eventually;
use crate::support::common;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::ClaudeCliAdapter;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, PermissionMode};
use agent_harness_server::adapter::{
    AdapterError, PermissionDecision, ProcessAdapter, Signal, UserInput,
};
use cli::{Driver, Fixture, texts};
use common::cli_version_under_test;

fn input(text: &str) -> UserInput {
    UserInput {
        text: text.into(),
        ..UserInput::default()
    }
}

/// The interactive adapter with relayed permissions, spawned on `prompt`.
async fn spawn_relay(fx: &Fixture, prompt: &str) -> Driver {
    let adapter = ClaudeInteractiveAdapter::new(fx.options(PermissionMode::Relay));
    Driver::new(adapter.spawn(fx.config(prompt)).await.unwrap())
}

/// Reads up to the next permission request.
async fn permission_request(d: &mut Driver) -> pb::PermissionRequested {
    let seen = d
        .until("permission_requested", |p| {
            matches!(p, Payload::PermissionRequested(_))
        })
        .await;
    let Some(Payload::PermissionRequested(req)) = seen.last().cloned() else {
        unreachable!()
    };
    req
}

/// The Bash command a permission request is about.
fn command(req: &pb::PermissionRequested) -> String {
    match &req.input.as_ref().unwrap().fields["command"].kind {
        Some(pbjson_types::value::Kind::StringValue(s)) => s.clone(),
        other => panic!("{other:?}"),
    }
}

/// The first tool result among `seen`.
fn tool_result(seen: &[Payload]) -> &pb::Result {
    seen.iter()
        .find_map(|p| match p {
            Payload::Result(r) if !r.tool_results.is_empty() => Some(r),
            _ => None,
        })
        .expect("a tool result")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_turn_then_follow_up_on_the_same_process() {
    let fx = Fixture::new().await;
    let mut d = spawn_relay(&fx, "TEXT first answer").await;
    let pid = d.handle.pid.unwrap();
    assert!(d.handle.start_time.is_some());
    assert!(d.handle.control.keep_alive());

    let (end, seen) = d.turn_end().await;
    assert!(!end.is_error, "{end:?}");
    let Payload::RunReady(ready) = &seen[0] else {
        panic!("first event must be run_ready: {seen:#?}")
    };
    assert_eq!(ready.cli_version, cli_version_under_test());
    assert_eq!(ready.pid, pid);
    assert!(!ready.resume_id.is_empty());
    assert!(texts(&seen).contains("first answer"));

    d.send("TEXT second answer");
    let (end, seen) = d.turn_end().await;
    assert!(!end.is_error);
    assert!(texts(&seen).contains("second answer"), "{seen:#?}");
    // Same process, no second run_ready, no turn_start (we sent the input).
    assert!(d.handle.control.alive());
    assert_eq!(d.handle.pid, Some(pid));
    assert!(
        !seen
            .iter()
            .any(|p| matches!(p, Payload::RunReady(_) | Payload::TurnStart(_)))
    );

    d.handle.control.close_stdin();
    let (exit, _) = d.exit().await;
    assert_eq!(exit.code, Some(0), "{exit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_use_returns_the_tools_real_output() {
    let fx = Fixture::new().await;
    let mut d = spawn_relay(&fx, "BASH echo hello-from-real-bash").await;
    let (end, seen) = d.turn_end().await;
    assert!(!end.is_error, "{end:?}");
    let result = tool_result(&seen);
    assert_eq!(result.tool_results[0].text, "hello-from-real-bash");
    assert!(!result.is_error);
    assert!(result.tool_use_result.is_some());
    d.handle.control.close_stdin();
    assert_eq!(d.exit().await.0.code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_mid_turn_keeps_the_process_for_the_next_message() {
    let fx = Fixture::new().await;
    let mut d = spawn_relay(&fx, "SLOW 40 250").await;
    d.until("run_ready", |p| matches!(p, Payload::RunReady(_)))
        .await;
    // A few ticks in: the reply's first deltas have gone out.
    eventually("a few SSE events of the reply", || {
        fx.api.sse_events_sent() >= 6
    })
    .await;
    assert!(d.handle.control.interrupt().unwrap());
    let (end, _) = d.turn_end().await;
    assert!(end.is_error, "{end:?}");
    assert_eq!(end.terminal_reason, "aborted_streaming");
    assert!(d.handle.control.alive());

    d.send("TEXT still here");
    let (end, seen) = d.turn_end().await;
    assert!(!end.is_error, "{end:?}");
    assert!(texts(&seen).contains("still here"));
    d.handle.control.close_stdin();
    d.exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_group_ends_the_process_with_the_signal() {
    let fx = Fixture::new().await;
    let mut d = spawn_relay(&fx, "SLOW 40 250").await;
    let pid = d.handle.pid.unwrap();
    d.until("run_ready", |p| matches!(p, Payload::RunReady(_)))
        .await;
    d.handle.control.signal(Signal::Kill).unwrap();
    let control = d.handle.control.clone();
    let (exit, _) = d.exit().await;
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"), "{exit:?}");
    assert_eq!(exit.code, None);
    assert!(!control.alive());
    assert!(matches!(
        control.signal(Signal::Kill),
        Err(AdapterError::NotRunning)
    ));
    assert!(control.write(&input("x")).is_err());
    // Reaped: no zombie left under that pid.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_allow_and_deny_round_trip() {
    let fx = Fixture::new().await;
    let mut d = spawn_relay(&fx, "WRITEBASH").await;
    let req = permission_request(&mut d).await;
    assert_eq!(req.tool_name, "Bash");
    let cmd = command(&req);
    d.handle
        .control
        .respond_permission(
            &req.request_id,
            &PermissionDecision::Allow {
                updated_input: req.input.clone().unwrap(),
            },
        )
        .unwrap();
    let (end, seen) = d.turn_end().await;
    assert!(!end.is_error, "{end:?}");
    let r = tool_result(&seen);
    assert!(!r.is_error, "{r:?}");
    let file = cmd.strip_prefix("touch ").unwrap();
    assert!(fx.work.path().join(file).exists(), "allowed touch ran");

    // Deny on the same process.
    d.send("WRITEBASH");
    let req = permission_request(&mut d).await;
    let cmd = command(&req);
    d.handle
        .control
        .respond_permission(
            &req.request_id,
            &PermissionDecision::Deny {
                message: "not today".into(),
            },
        )
        .unwrap();
    let (_end, seen) = d.turn_end().await;
    let r = tool_result(&seen);
    assert!(r.is_error);
    assert!(r.tool_results[0].text.contains("not today"), "{r:?}");
    assert!(
        !fx.work
            .path()
            .join(cmd.strip_prefix("touch ").unwrap())
            .exists()
    );
    d.handle.control.close_stdin();
    d.exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_turn_then_resume_after_exit() {
    let fx = Fixture::new().await;
    let adapter = ClaudeCliAdapter::new(fx.options(PermissionMode::Settings));
    let handle = adapter.spawn(fx.config("TEXT one shot")).await.unwrap();
    assert!(!handle.control.keep_alive());
    assert!(!handle.control.interrupt().unwrap());
    assert!(handle.control.write(&input("x")).is_err());
    let (exit, events) = Driver::new(handle).exit().await;
    assert_eq!(exit.code, Some(0), "{exit:?}");
    let resume_id = events
        .iter()
        .find_map(|p| match p {
            Payload::RunReady(r) => Some(r.resume_id.clone()),
            _ => None,
        })
        .expect("run_ready");
    assert!(texts(&events).contains("one shot"));
    assert!(
        events
            .iter()
            .any(|p| matches!(p, Payload::TurnEnd(t) if !t.is_error))
    );

    let mut config = fx.config("TEXT resumed fine");
    config.config.resume = resume_id.clone();
    let before = fx.api.message_requests().len();
    let (exit, events) = Driver::new(adapter.spawn(config).await.unwrap())
        .exit()
        .await;
    assert_eq!(exit.code, Some(0), "{exit:?}");
    assert!(texts(&events).contains("resumed fine"));
    // The resumed call carried the earlier conversation.
    let req = fx.api.message_requests()[before..]
        .iter()
        .rev()
        .find(|r| {
            r.body
                .as_ref()
                .is_some_and(|b| b.to_string().contains("resumed fine"))
        })
        .cloned()
        .expect("the resumed request");
    assert!(req.body.unwrap().to_string().contains("TEXT one shot"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_binary_is_a_clear_spawn_error() {
    let fx = Fixture::new().await;
    let mut o = fx.options(PermissionMode::Relay);
    o.claude_bin = Some("/nonexistent/claude".into());
    let err = ClaudeInteractiveAdapter::new(o)
        .spawn(fx.config("TEXT x"))
        .await
        .err()
        .unwrap();
    let AdapterError::BinaryNotFound(msg) = err else {
        panic!("{err:?}")
    };
    assert!(
        msg.contains("--claude-bin") && msg.contains("npm install -g @anthropic-ai/claude-code")
    );
}
