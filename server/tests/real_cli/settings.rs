//! SetModel, SetPermissionMode and SetMaxThinkingTokens against
//! the REAL claude CLI and the scripted Messages API, which records what
//! each API request carried: a change reaches the live process at once,
//! is recorded in the log (`setting_changed`, so derive knows what is in
//! force), and outlives the process: a respawn after an idle timeout and a
//! server restart apply it.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli settings::`.

use std::time::Duration;

use crate::support::cli_grpc;

use agent_harness_fake_api::{FakeApi, RecordedRequest};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::{AdapterChoice, Events, Harness, Setup};
use tonic::Code;

/// The latest Messages API call whose body mentions `needle` (a prompt).
fn request_with(api: &FakeApi, needle: &str) -> RecordedRequest {
    api.message_requests()
        .into_iter()
        .rev()
        .find(|r| {
            r.is_messages()
                && r.body
                    .as_ref()
                    .is_some_and(|b| b.to_string().contains(needle))
        })
        .unwrap_or_else(|| panic!("no Messages API call mentions {needle:?}"))
}

/// The first setting_changed after `after`.
async fn setting_after(ev: &Events, after: u64) -> (pb::Event, pb::SettingChanged) {
    ev.payload_after("setting_changed", after, |p| match p {
        Payload::SettingChanged(s) => Some(s.clone()),
        _ => None,
    })
    .await
}

fn set_model(session: &str, model: &str, key: &str) -> pb::SetModelRequest {
    pb::SetModelRequest {
        session_id: session.into(),
        model: model.into(),
        idempotency_key: key.into(),
    }
}

/// SetModel on the live process: the next API request names the new model,
/// and so does every request after the idle timeout's respawn. Set with
/// no live process, the change is recorded for the next spawn and
/// survives a server restart. A keyed repeat changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_model_reaches_the_live_process_a_respawn_and_a_restart() {
    let mut setup = Setup::default();
    setup.manager.idle_timeout = Duration::from_secs(2);
    let (mut h, ev, started) = Harness::started(setup, "model", "TEXT one").await;
    ev.turn_end_after(0).await;
    assert_ne!(
        request_with(h.api(), "TEXT one").model(),
        Some("claude-haiku-4-5"),
        "the CLI's default model first"
    );

    let mut c = h.client();
    let r = c
        .set_model(set_model("model", "claude-haiku-4-5", "k-haiku"))
        .await
        .expect("SetModel")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::Live, "{r:?}");
    let (e, s) = setting_after(&ev, 0).await;
    assert_eq!(e.seq, r.seq);
    assert_eq!(
        (s.setting(), s.value.as_str(), s.applied()),
        (
            pb::Setting::Model,
            "claude-haiku-4-5",
            pb::SettingApplied::Live
        )
    );
    let again = c
        .set_model(set_model("model", "claude-haiku-4-5", "k-haiku"))
        .await
        .expect("SetModel repeated")
        .into_inner();
    assert_eq!(again, r, "a keyed repeat answers the same");
    assert_eq!(h.get("model").await.model, "claude-haiku-4-5");

    assert_eq!(h.send("model", "TEXT two").await, started.run_id);
    let (done, _) = ev.turn_end_after(r.seq).await;
    assert_eq!(
        request_with(h.api(), "TEXT two").model(),
        Some("claude-haiku-4-5")
    );
    let settings_events = ev
        .snapshot()
        .iter()
        .filter(|e| matches!(e.payload, Some(Payload::SettingChanged(_))))
        .count();
    assert_eq!(settings_events, 1, "the repeat recorded nothing");

    // The idle timeout ends the process; the respawn applies the model.
    let (end, run_end) = ev.run_end_after(done.seq).await;
    assert_eq!(run_end.reason(), pb::RunEndReason::IdleTimeout);
    let respawned = h.send("model", "TEXT three").await;
    assert_ne!(respawned, started.run_id);
    let (start, run_start) = ev
        .payload_after("run_start", end.seq, |p| match p {
            Payload::RunStart(rs) => Some(rs.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        run_start.config.unwrap_or_default().model,
        "claude-haiku-4-5"
    );
    ev.turn_end_after(start.seq).await;
    assert_eq!(
        request_with(h.api(), "TEXT three").model(),
        Some("claude-haiku-4-5")
    );

    // No live process: recorded for the next spawn.
    let (end, _) = ev.run_end_after(start.seq).await;
    let r = c
        .set_model(set_model("model", "claude-sonnet-4-5", ""))
        .await
        .expect("SetModel with no process")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::NextSpawn, "{r:?}");
    assert!(r.seq > end.seq);
    assert_eq!(h.get("model").await.model, "claude-sonnet-4-5");

    // A restarted server knows it from the log alone.
    drop(ev);
    h.restart().await;
    let ev = h.subscribe("model").await;
    h.send("model", "TEXT four").await;
    ev.turn_end_after(r.seq).await;
    assert_eq!(
        request_with(h.api(), "TEXT four").model(),
        Some("claude-sonnet-4-5")
    );
    let s = h.get("model").await;
    assert_eq!(s.model, "claude-sonnet-4-5", "the CLI's init agrees: {s:?}");
    h.finish("model", &ev).await;
}

/// SetPermissionMode plan shows in the CLI's next init and in derive; the
/// operator's policy is the ceiling (relay mode: default, plan and dontAsk
/// only), for SetPermissionMode and for a Start's config alike, and a
/// refusal records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_permission_mode_plan_shows_in_the_init_and_the_policy_is_the_ceiling() {
    let (h, ev, _) = Harness::started(Setup::default(), "mode", "TEXT one").await;
    let (first, _) = ev.turn_end_after(0).await;
    let mut c = h.client();
    let set = |mode: &str| pb::SetPermissionModeRequest {
        session_id: "mode".into(),
        mode: mode.into(),
        idempotency_key: String::new(),
    };
    for (mode, code) in [
        ("bypassPermissions", Code::PermissionDenied),
        ("acceptEdits", Code::PermissionDenied),
        ("auto", Code::PermissionDenied),
        ("yolo", Code::InvalidArgument),
        ("", Code::InvalidArgument),
    ] {
        let err = c.set_permission_mode(set(mode)).await.unwrap_err();
        assert_eq!(err.code(), code, "{mode}: {err:?}");
    }
    let r = c
        .set_permission_mode(set("plan"))
        .await
        .expect("SetPermissionMode plan")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::Live);
    assert_eq!(r.seq, first.seq + 1, "the refusals recorded nothing");
    assert_eq!(h.get("mode").await.permission_mode, "plan");
    h.send("mode", "TEXT two").await;
    let (_, ready) = ev.run_ready_after(r.seq).await;
    assert_eq!(ready.permission_mode, "plan", "the CLI's init: {ready:?}");
    ev.turn_end_after(r.seq).await;
    assert_eq!(h.get("mode").await.permission_mode, "plan");

    let mut config = h.config("TEXT hi");
    config.permission_mode = "bypassPermissions".into();
    let err = h.try_start("other", config).await.unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("--allow-permission-mode"), "{err:?}");
    let err = h
        .client()
        .get_session(pb::GetSessionRequest {
            session_id: "other".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "a refused Start leaves nothing");
    h.finish("mode", &ev).await;
}

/// A Start that chooses plan mode and a thinking budget: the CLI's init
/// says plan, and the API request carries the budget; SetMaxThinkingTokens
/// changes it on the live process, 0 turns thinking off, and the respawn
/// after an idle timeout keeps the last budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_budget_from_start_set_live_and_kept_by_a_respawn() {
    let mut setup = Setup::default();
    setup.manager.idle_timeout = Duration::from_secs(2);
    let h = Harness::with(setup).await;
    let ev = h.subscribe("think").await;
    let mut config = h.config("TEXT one");
    // A model that takes a budget (newer ones think adaptively).
    config.model = "claude-sonnet-4-5".into();
    config.permission_mode = "plan".into();
    config.max_thinking_tokens = Some(1024);
    h.try_start("think", config).await.expect("Start");
    let (_, ready) = ev.run_ready_after(0).await;
    assert_eq!(ready.permission_mode, "plan");
    let (done, _) = ev.turn_end_after(0).await;
    let thinking = |needle: &str| {
        request_with(h.api(), needle)
            .body
            .and_then(|b| b.get("thinking").cloned())
            .unwrap_or_default()
    };
    assert_eq!(thinking("TEXT one")["budget_tokens"], 1024);
    let s = h.get("think").await;
    assert_eq!(
        (
            s.model.as_str(),
            s.permission_mode.as_str(),
            s.max_thinking_tokens
        ),
        ("claude-sonnet-4-5", "plan", Some(1024))
    );

    let mut c = h.client();
    let set = |n: Option<u32>| pb::SetMaxThinkingTokensRequest {
        session_id: "think".into(),
        max_thinking_tokens: n,
        idempotency_key: String::new(),
    };
    let err = c
        .set_max_thinking_tokens(set(Some(5_000_000)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let r = c
        .set_max_thinking_tokens(set(Some(2048)))
        .await
        .expect("SetMaxThinkingTokens")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::Live);
    h.send("think", "TEXT two").await;
    let (done2, _) = ev.turn_end_after(r.seq.max(done.seq)).await;
    assert_eq!(thinking("TEXT two")["budget_tokens"], 2048);
    let r = c
        .set_max_thinking_tokens(set(Some(0)))
        .await
        .expect("SetMaxThinkingTokens 0")
        .into_inner();
    h.send("think", "TEXT three").await;
    let (done3, _) = ev.turn_end_after(r.seq.max(done2.seq)).await;
    assert_eq!(thinking("TEXT three")["type"], "disabled");
    assert_eq!(h.get("think").await.max_thinking_tokens, Some(0));

    let (end, _) = ev.run_end_after(done3.seq).await;
    let r = c
        .set_max_thinking_tokens(set(Some(3000)))
        .await
        .expect("SetMaxThinkingTokens with no process")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::NextSpawn);
    h.send("think", "TEXT four").await;
    let (_, ready) = ev.run_ready_after(end.seq).await;
    assert_eq!(ready.permission_mode, "plan", "the respawn keeps plan mode");
    ev.turn_end_after(r.seq).await;
    assert_eq!(thinking("TEXT four")["budget_tokens"], 3000);
    h.finish("think", &ev).await;
}

/// The one-shot adapter has no channel to its running CLI: a SetModel
/// while its run works is recorded for the next spawn (its next turn) by
/// the run task, and that turn's process runs with `--model`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_runs_take_a_setting_at_their_next_turn() {
    let setup = Setup {
        adapter: AdapterChoice::OneShot,
        ..Setup::default()
    };
    let (h, ev, started) = Harness::started(setup, "one", "SLOW 20 100").await;
    ev.run_ready_after(0).await;
    let r = h
        .client()
        .set_model(set_model("one", "claude-haiku-4-5", ""))
        .await
        .expect("SetModel while the one-shot run works")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::NextSpawn, "{r:?}");
    let (e, _) = setting_after(&ev, 0).await;
    assert_eq!(e.run_id, started.run_id, "recorded by the working run");
    let (end, _) = ev.run_end_after(e.seq).await;
    h.send("one", "TEXT next turn").await;
    ev.turn_end_after(end.seq).await;
    assert_eq!(
        request_with(h.api(), "TEXT next turn").model(),
        Some("claude-haiku-4-5")
    );
    h.finish("one", &ev).await;
}
