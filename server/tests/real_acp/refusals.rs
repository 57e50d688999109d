//! A run asking what the agent does not list (a permission mode none of
//! whose ids it has, a model it does not offer) is refused: the run ends
//! with a run_error naming what was asked and what the agent lists, and no
//! prompt reaches the agent. Known modes map onto the agent's own.

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::PermissionMode;

use super::codex_acp::harness_in;
use super::{Harness, both_releases};
use crate::support::cli_grpc::texts;

both_releases!(
    gemini_a_model_it_does_not_list_ends_the_run,
    codex_acp_a_mode_it_does_not_list_ends_the_run,
    codex_acp_a_model_it_does_not_list_ends_the_run,
    codex_acp_accept_edits_and_bypass_permissions_are_its_own_modes,
);

/// Starts `session` with `config` and waits for the run's refusal: its
/// run_error, then its end, and no model call.
async fn refused(h: &mut Harness, session: &str, config: pb::StartConfig) -> pb::RunError {
    let ev = h.subscribe(session).await;
    let run = h.start_with(session, "TEXT never", config).await.run_id;
    let err = ev
        .wait_for("the refusal", |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::RunError(r)) if e.run_id == run => Some(r.clone()),
                _ => None,
            })
        })
        .await;
    assert_eq!(err.kind, "cli_error", "{err:?}");
    ev.wait_for("the run's end", |evs| {
        evs.iter()
            .any(|e| e.run_id == run && matches!(e.payload, Some(Payload::RunEnd(_))))
            .then_some(())
    })
    .await;
    let events = ev.snapshot();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::TurnEnd(_)))),
        "no turn ran"
    );
    assert!(h.turn_requests().is_empty(), "no prompt reached the agent");
    h.shutdown().await;
    h.assert_stored_runs_end_once(session);
    err
}

async fn gemini_a_model_it_does_not_list_ends_the_run(pinned: bool) {
    let mut h = Harness::new(pinned).await;
    let config = pb::StartConfig {
        model: "no-such-model".into(),
        ..Default::default()
    };
    let err = refused(&mut h, "r1", config).await;
    assert!(err.message.contains("no-such-model"), "{err:?}");
    assert!(
        err.message.contains("gemini-2.5-pro"),
        "the listed: {err:?}"
    );
}

async fn codex_acp_a_mode_it_does_not_list_ends_the_run(pinned: bool) {
    let mut h = harness_in(pinned, "env").await;
    let config = pb::StartConfig {
        permission_mode: "plan".into(),
        ..Default::default()
    };
    let err = refused(&mut h, "r2", config).await;
    assert!(err.message.contains("\"plan\""), "{err:?}");
    assert!(
        err.message
            .contains("read-only, workspace-write, agent, agent-full-access"),
        "the listed: {err:?}"
    );
}

async fn codex_acp_a_model_it_does_not_list_ends_the_run(pinned: bool) {
    let mut h = harness_in(pinned, "env").await;
    let config = pb::StartConfig {
        model: "no-such-model".into(),
        ..Default::default()
    };
    let err = refused(&mut h, "r3", config).await;
    assert!(err.message.contains("no-such-model"), "{err:?}");
    assert!(err.message.contains("lists"), "the listed: {err:?}");
}

/// codex-acp started in its own default (`agent`, whose questions go to an
/// automatic reviewer): acceptEdits is `workspace-write`, which asks the
/// user for a command outside the sandbox; bypassPermissions is
/// `agent-full-access`, which never asks (its approval policy is "never":
/// there is no sandbox to escape); plan has no equivalent and
/// SetPermissionMode refuses it.
async fn codex_acp_accept_edits_and_bypass_permissions_are_its_own_modes(pinned: bool) {
    let mut h = harness_in(pinned, "env").await;
    // Every mode allowed, as `serve --permissions skip` allows them.
    let policy = (*h.manager.launch)
        .clone()
        .with_permission_modes(PermissionMode::Skip, &[])
        .expect("every mode");
    h.manager.launch = Arc::new(policy);
    h.shutdown().await;
    h.serve().await;
    let ev = h.subscribe("r4").await;
    let config = pb::StartConfig {
        permission_mode: "acceptEdits".into(),
        ..Default::default()
    };
    h.start_with("r4", "ESCBASH touch asked.txt && echo asked", config)
        .await;
    let (_, asked) = ev.permission_requested_after(0).await;
    h.respond("r4", &asked.request_id, true).await;
    let (first_end, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    assert!(h.work.path().join("asked.txt").exists());

    let mut client = h.client().await;
    let refused = client
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "r4".into(),
            mode: "plan".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect_err("codex-acp has no plan mode");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(refused.message().contains("read-only"), "{refused:?}");
    client
        .set_permission_mode(pb::SetPermissionModeRequest {
            session_id: "r4".into(),
            mode: "bypassPermissions".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("bypassPermissions is agent-full-access");
    h.send("r4", "ESCBASH touch free.txt").await;
    let (_, end) = ev.turn_end_after(first_end.seq).await;
    assert!(!end.is_error, "{end:?}");
    let later = ev.since(first_end.seq);
    assert!(
        !later
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::PermissionRequested(_)))),
        "nothing asked"
    );
    // Only agent-full-access has the approval policy "never": Codex tells
    // the model an escalation cannot even be asked for.
    assert!(
        texts(&later).contains("approval policy is Never"),
        "{}",
        texts(&later)
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("r4");
}
