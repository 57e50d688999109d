//! Control of the live session against the REAL claude CLI
//! 2.1.197 and the scripted Messages API: calls sent as `control_request`s
//! on the running process and answered from its `control_response`.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli control::`.

use crate::support::cli_grpc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::PermissionMode;
use cli_grpc::{AdapterChoice, Harness, Setup};
use tonic::Code;

/// GetContextUsage returns the CLI's own figures for the live process: a
/// window, categories whose "used" ones add up to the tokens in use, and the CLI's
/// whole answer (less its display grid) as `raw`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_context_usage_returns_the_clis_figures() {
    let (h, ev, _) = Harness::started(Setup::default(), "ctx", "TEXT hi").await;
    ev.turn_end_after(0).await;
    let usage = h
        .client()
        .get_context_usage(pb::GetContextUsageRequest {
            session_id: "ctx".into(),
        })
        .await
        .expect("GetContextUsage")
        .into_inner();
    assert!(usage.total_tokens > 0, "{usage:?}");
    assert!(usage.max_tokens > usage.total_tokens, "{usage:?}");
    assert!(usage.raw_max_tokens >= usage.max_tokens, "{usage:?}");
    let names: Vec<&str> = usage.categories.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&"Messages"), "{names:?}");
    let used: u64 = usage
        .categories
        .iter()
        .filter(|c| c.kind == "used")
        .map(|c| c.tokens)
        .sum();
    assert!(
        usage.categories.iter().any(|c| c.kind == "free"),
        "{usage:?}"
    );
    assert_eq!(used, usage.total_tokens, "the categories add up: {usage:?}");
    let raw = serde_json::to_value(usage.raw.as_ref().expect("raw")).unwrap();
    assert_eq!(raw["totalTokens"].as_f64(), Some(usage.total_tokens as f64));
    assert!(
        raw.get("gridRows").is_none(),
        "the display grid is left out"
    );
    h.finish("ctx", &ev).await;
}

/// StopTask ends one background Bash task while the process (and the
/// session) stays alive: the CLI reports the task killed, and the next
/// turn runs on the same process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_task_ends_a_background_bash_and_the_process_stays() {
    let setup = Setup {
        adapter: AdapterChoice::Interactive,
        permissions: PermissionMode::Skip,
        strip_env: vec!["IS_SANDBOX".into()],
        ..Setup::default()
    };
    let (h, ev, started) = Harness::started(setup, "bg", "BGBASH sleep 300").await;
    let task_id = ev
        .wait_for("task_started", |evs| {
            evs.iter().find_map(|e| match &e.payload {
                Some(Payload::TaskStarted(t)) => Some(t.task_id.clone()),
                _ => None,
            })
        })
        .await;
    ev.turn_end_after(0).await;
    let stop = |task_id: &str| pb::StopTaskRequest {
        session_id: "bg".into(),
        task_id: task_id.into(),
        idempotency_key: "stop-bg".into(),
    };
    h.client()
        .stop_task(stop(&task_id))
        .await
        .expect("StopTask");
    // A keyed repeat is answered from its receipt; the same key for
    // another task is a client bug.
    h.client()
        .stop_task(stop(&task_id))
        .await
        .expect("StopTask repeated");
    let err = h.client().stop_task(stop("other")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("idempotency_key"), "{err:?}");
    ev.wait_for("the task to end", |evs| {
        evs.iter()
            .any(|e| match &e.payload {
                Some(Payload::TaskUpdated(t)) => t.task_id == task_id && t.status == "killed",
                Some(Payload::TaskNotification(n)) => n.task_id == task_id && n.status == "stopped",
                _ => false,
            })
            .then_some(())
    })
    .await;
    let s = h.assert_idle("bg", true).await;
    assert_eq!(s.run_id, started.run_id, "the same process");
    let run = h.send("bg", "TEXT still here").await;
    assert_eq!(run, started.run_id);
    h.finish("bg", &ev).await;
}

/// A control call needs a live process: FAILED_PRECONDITION once the run
/// has ended (here at its idle timeout), NOT_FOUND for a session that does
/// not exist, and INVALID_ARGUMENT for an empty task id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_calls_without_a_live_process_fail_clearly() {
    let mut setup = Setup::default();
    setup.manager.idle_timeout = std::time::Duration::from_secs(1);
    let (h, ev, _) = Harness::started(setup, "gone", "TEXT hi").await;
    let (_, end) = ev.run_end_after(0).await;
    assert_eq!(end.reason(), pb::RunEndReason::IdleTimeout, "{end:?}");
    let mut c = h.client();
    let err = c
        .get_context_usage(pb::GetContextUsageRequest {
            session_id: "gone".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("no live process"), "{err:?}");
    let err = c
        .get_context_usage(pb::GetContextUsageRequest {
            session_id: "nobody".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = c
        .stop_task(pb::StopTaskRequest {
            session_id: "gone".into(),
            task_id: String::new(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("task_id"), "{err:?}");
    // A task id of any size a client can send is refused before the CLI.
    let err = c
        .stop_task(pb::StopTaskRequest {
            session_id: "gone".into(),
            task_id: "x".repeat(100_000),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("task_id"), "{err:?}");
    h.finish("gone", &ev).await;
}
