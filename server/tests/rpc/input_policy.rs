//! A client's message is data: one the CLI would run as a slash command is
//! refused (INVALID_ARGUMENT naming the field, nothing appended, nothing
//! written to the process) unless the operator allows the command; and a
//! run whose CLI reports a permission mode beyond the launch policy (its
//! own settings chose it) is ended with `run_error{policy}`. Through the
//! real gRPC API and manager, with the scripted stand-in CLI recording
//! every write.

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::*;

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::adapter::claude::PermissionMode;
use agent_harness_server::launch::LaunchPolicy;
use agent_harness_server::manager::ManagerOptions;
use pbjson_types::Struct;
use tonic::Code;
use tonic::transport::Channel;

type Client = SessionServiceClient<Channel>;

const CONFIG_CMD: &str = "/config permissionMode=acceptEdits";

fn text_block(text: &str) -> Struct {
    serde_json::from_value(serde_json::json!({"type": "text", "text": text})).expect("block")
}

fn with_policy(policy: LaunchPolicy) -> ManagerOptions {
    ManagerOptions {
        launch: Arc::new(policy),
        ..fast_opts()
    }
}

async fn server(policy: LaunchPolicy, behavior: ScriptedBehavior) -> TestServer {
    let adapter = ScriptedAdapter::new(behavior);
    let spawner = Arc::new(adapter.clone());
    let store = crate::support::server::test_store();
    let sopts = Default::default();
    TestServer::with_adapter(store, spawner, adapter, with_policy(policy), sopts).await
}

async fn send_msg(
    client: &mut Client,
    session: &str,
    input: &str,
    blocks: Vec<Struct>,
) -> Result<String, tonic::Status> {
    client
        .send(pb::SendRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
            input: input.into(),
            content_blocks: blocks,
        })
        .await
        .map(|r| r.into_inner().run_id)
}

async fn start_msg(
    client: &mut Client,
    session: &str,
    prompt: &str,
    blocks: Vec<Struct>,
) -> Result<pb::StartResponse, tonic::Status> {
    client
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
            config: Some(pb::StartConfig {
                prompt: prompt.into(),
                content_blocks: blocks,
                ..Default::default()
            }),
        })
        .await
        .map(|r| r.into_inner())
}

fn assert_invalid<T: std::fmt::Debug>(got: Result<T, tonic::Status>, field: &str) {
    let err = got.expect_err("must be refused");
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains(field) && err.message().contains("slash command"),
        "{field} not named in {:?}",
        err.message()
    );
}

/// What reached the stand-in's stdin (its `write:` calls).
fn writes(adapter: &ScriptedAdapter) -> Vec<String> {
    adapter
        .record()
        .calls
        .into_iter()
        .filter(|c| c.starts_with("write:"))
        .collect()
}

#[tokio::test]
async fn a_typed_slash_command_is_refused_before_anything_is_appended_or_written() {
    let s = server(LaunchPolicy::default(), ScriptedBehavior::default()).await;
    let mut c = s.client().await;

    // Start: the prompt, or the last content block, is the command.
    assert_invalid(
        start_msg(&mut c, "s", CONFIG_CMD, vec![]).await,
        "config.prompt",
    );
    assert_invalid(
        start_msg(
            &mut c,
            "s",
            "",
            vec![text_block("hi"), text_block(CONFIG_CMD)],
        )
        .await,
        "config.content_blocks[1]",
    );
    let err = c
        .get_session(pb::GetSessionRequest {
            session_id: "s".into(),
        })
        .await
        .expect_err("the session must not exist");
    assert_eq!(err.code(), Code::NotFound);
    assert!(s.stored_events("s").is_empty());
    assert!(s.adapter.record().spawns.is_empty(), "nothing spawned");

    // Send to a live process.
    let mut sub = start_subscribed(&mut c, "s", "hello").await;
    sub.until("turn_end", is_turn_end).await;
    let head = get(&mut c, "s").await.head_seq;
    let before = writes(&s.adapter);
    assert_invalid(send_msg(&mut c, "s", CONFIG_CMD, vec![]).await, "input");
    assert_invalid(
        send_msg(&mut c, "s", "", vec![text_block(CONFIG_CMD)]).await,
        "content_blocks[0]",
    );
    assert_invalid(send_msg(&mut c, "s", "/heapdump", vec![]).await, "input");
    assert_eq!(get(&mut c, "s").await.head_seq, head, "nothing appended");
    assert_eq!(writes(&s.adapter), before, "nothing written to the process");

    // Text that is not a command passes: the escape (a leading space), a
    // path, a command word that is not last, an allowed command.
    for ok in [" /config x", "/tmp/a.txt is a file", "see /config"] {
        send_msg(&mut c, "s", ok, vec![]).await.expect(ok);
        sub.until("turn_end", is_turn_end).await;
    }
    send_msg(&mut c, "s", "hi", vec![text_block(CONFIG_CMD)])
        .await
        .expect("the text is the message's last block");
    sub.until("turn_end", is_turn_end).await;
    send_msg(&mut c, "s", "/context", vec![])
        .await
        .expect("an allowed command");
    let written = writes(&s.adapter);
    assert!(written.iter().any(|w| w == "write:/context"), "{written:?}");
    s.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn the_operator_allows_a_command_by_name() {
    let policy = LaunchPolicy::default()
        .with_slash_commands(&["/config".into()])
        .expect("policy");
    let s = server(policy, ScriptedBehavior::default()).await;
    let mut c = s.client().await;
    let mut sub = start_subscribed(&mut c, "s", "hello").await;
    sub.until("turn_end", is_turn_end).await;
    send_msg(&mut c, "s", CONFIG_CMD, vec![])
        .await
        .expect("allowed");
    assert_invalid(send_msg(&mut c, "s", "/heapdump", vec![]).await, "input");
    s.shutdown().await.expect("shutdown");
}

/// The events of `session`'s first run, up to its run_end.
async fn first_run(s: &TestServer, session: &str) -> Vec<pb::Event> {
    let mut c = s.client().await;
    let mut sub = start_subscribed(&mut c, session, "hello").await;
    // Bounded as a whole: heartbeats keep a stream from ever going quiet.
    tokio::time::timeout(WAIT, sub.until("run_end", is_run_end))
        .await
        .unwrap_or_else(|_| panic!("the run did not end: {:#?}", kinds(&sub.events)));
    sub.events
}

#[tokio::test]
async fn a_cli_reporting_a_mode_beyond_the_policy_is_stopped_with_a_policy_error() {
    let beyond = ScriptedBehavior {
        permission_mode: "acceptEdits",
        ..ScriptedBehavior::default()
    };
    let s = server(LaunchPolicy::default(), beyond.clone()).await;
    let events = first_run(&s, "s").await;
    let err = assert_stopped_by_policy_after_mode(&events, "acceptEdits");
    assert!(err.message.contains("acceptEdits"), "{err:?}");
    s.shutdown().await.expect("shutdown");

    // The same CLI under a policy that allows the mode runs on.
    let policy = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Relay, &["acceptEdits".into()])
        .expect("policy");
    let s = server(policy, beyond).await;
    let mut c = s.client().await;
    let mut sub = start_subscribed(&mut c, "s", "hello").await;
    sub.until("turn_end", is_turn_end).await;
    assert!(
        !sub.events.iter().any(|e| matches!(
            e.payload,
            Some(Payload::RunError(_)) | Some(Payload::RunEnd(_))
        )),
        "{:#?}",
        kinds(&sub.events)
    );
    s.shutdown().await.expect("shutdown");
}
