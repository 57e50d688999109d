//! One conversation, one session: a Start's `config.resume` must name a
//! conversation the session's own log names; another session's, or one
//! the server never saw (unless the operator allows importing), is
//! PERMISSION_DENIED naming `config.resume`, and nothing is appended or
//! spawned. (Forks, where the server picks the source's conversation, are
//! covered by the fork tests in `launch_policy.rs` and `real_cli`.)

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::manager::ManagerOptions;
use tonic::Code;
use tonic::transport::Channel;

use crate::support::scripted::ScriptedBehavior;
use crate::support::server::*;

/// One turn per process (the scripted CLI exits after it), so a session
/// has no live run once its turn is over.
fn one_turn(allow_resume_import: bool) -> (ScriptedBehavior, ManagerOptions) {
    let behavior = ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    };
    let opts = ManagerOptions {
        allow_resume_import,
        ..fast_opts()
    };
    (behavior, opts)
}

/// Starts `session` with `resume`, as a client naming a conversation.
async fn start_resuming(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    resume: &str,
) -> Result<pb::StartResponse, tonic::Status> {
    c.start(pb::StartRequest {
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt: "go on".into(),
            resume: resume.into(),
            ..Default::default()
        }),
        idempotency_key: String::new(),
    })
    .await
    .map(|r| r.into_inner())
}

/// Starts `session`, waits until its one-turn run has ended, and returns
/// the conversation its run_ready announced.
async fn conversation_of(c: &mut SessionServiceClient<Channel>, session: &str) -> String {
    start(c, session, "hello").await.expect("start");
    wait_session(c, session, |s| !s.resume_id.is_empty() && !s.process_alive)
        .await
        .resume_id
}

fn assert_denied_naming_resume(result: Result<pb::StartResponse, tonic::Status>) {
    let status = result.expect_err("refused");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("config.resume"), "{status:?}");
}

#[tokio::test]
async fn a_start_resumes_only_a_conversation_its_own_log_names() {
    let (behavior, opts) = one_turn(false);
    let server = TestServer::with(behavior, opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let theirs = conversation_of(&mut c, "owner").await;
    let spawned = server.adapter.record().spawns.len();

    // Another session naming it: refused, nothing stored, nothing spawned.
    assert_denied_naming_resume(start_resuming(&mut c, "intruder", &theirs).await);
    // A conversation this server never saw: the same without the operator's opt-in.
    let outside = "0b6f0a3e-8a43-4a3c-9d1f-6f1b2b7c9e10";
    assert_denied_naming_resume(start_resuming(&mut c, "intruder", outside).await);
    let missing = c
        .get_session(pb::GetSessionRequest {
            session_id: "intruder".into(),
        })
        .await
        .expect_err("never created");
    assert_eq!(missing.code(), Code::NotFound);
    assert!(server.stored_events("intruder").is_empty());
    // An existing session naming another's conversation appends nothing either.
    let mine = conversation_of(&mut c, "neighbour").await;
    let head = get(&mut c, "neighbour").await.head_seq;
    let spawned_before = server.adapter.record().spawns.len();
    assert_denied_naming_resume(start_resuming(&mut c, "neighbour", &theirs).await);
    assert_eq!(get(&mut c, "neighbour").await.head_seq, head);
    assert_eq!(server.adapter.record().spawns.len(), spawned_before);
    assert_eq!(spawned_before, spawned + 1, "only the neighbour's own run");

    // Its own conversation, named explicitly, is fine (and so is its latest
    // one left implicit).
    let run = start_resuming(&mut c, "owner", &theirs).await.expect("own");
    let spawns = server.adapter.record().spawns;
    assert_eq!(spawns.last().unwrap().run_id, run.run_id);
    assert_eq!(spawns.last().unwrap().config.resume, theirs);
    wait_session(&mut c, "neighbour", |s| !s.process_alive).await;
    start_resuming(&mut c, "neighbour", &mine)
        .await
        .expect("the neighbour's own");
}

#[tokio::test]
async fn with_import_allowed_an_outside_conversation_is_taken_once_and_anothers_never() {
    let (behavior, opts) = one_turn(true);
    let server = TestServer::with(behavior, opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    let theirs = conversation_of(&mut c, "owner").await;

    let outside = "7d1c2b3a-0000-4000-8000-00000000abcd";
    let run = start_resuming(&mut c, "importer", outside)
        .await
        .expect("an outside conversation is imported");
    let spawn = server.adapter.record().spawns.last().cloned().unwrap();
    assert_eq!(
        (spawn.run_id, spawn.config.resume),
        (run.run_id, outside.to_owned())
    );
    // Now it is the importer's: nobody else takes it, and another session's
    // conversation stays refused even with the opt-in.
    assert_denied_naming_resume(start_resuming(&mut c, "second", outside).await);
    assert_denied_naming_resume(start_resuming(&mut c, "second", &theirs).await);
    assert!(server.stored_events("second").is_empty());
    wait_session(&mut c, "importer", |s| !s.process_alive).await;
    start_resuming(&mut c, "importer", outside)
        .await
        .expect("the importer resumes what it imported");
}
