//! OPT-IN ONLY: the whole server against a logged-in claude CLI and the
//! real Anthropic service. Costs real tokens.
//!
//! It is `#[ignore]`d, so a normal run reports it as ignored, never as
//! passed; run with `--ignored` and without `AGENT_HARNESS_LIVE_TESTS=1` it
//! fails, saying how to run it. The zero-token end-to-end suite is
//! `tests/real_cli/grpc.rs` (real CLI, fake Messages API).
//!
//! Run it on purpose:
//!
//! ```sh
//! AGENT_HARNESS_LIVE_TESTS=1 cargo test -p agent-harness-server \
//!     --test real_cli live_service_optin -- --ignored --nocapture
//! ```
//!
//! It uses the developer's own HOME (login, settings) and the CLI from
//! `CLAUDE_BIN` or tests/tools; `AGENT_HARNESS_LIVE_MODEL` picks the model
//! (default: a small one).

use crate::support::cli_grpc;

use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::{Harness, Setup, count, texts};

/// First turn, a follow-up on the same process, and a Stop mid-turn that
/// keeps the process, against the real service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "opt-in, costs real tokens: AGENT_HARNESS_LIVE_TESTS=1 ... -- --ignored"]
async fn live_service_optin_first_turn_follow_up_and_stop() {
    assert_eq!(
        std::env::var("AGENT_HARNESS_LIVE_TESTS").as_deref(),
        Ok("1"),
        "live_service_optin runs against a logged-in CLI and the real service and \
         costs tokens: set AGENT_HARNESS_LIVE_TESTS=1 to confirm"
    );
    let model =
        std::env::var("AGENT_HARNESS_LIVE_MODEL").unwrap_or_else(|_| "claude-haiku-4-5".to_owned());
    let h = Harness::with(Setup {
        live: true,
        ..Setup::default()
    })
    .await;
    let session = "live-1";
    let ev = h.subscribe(session).await;

    // First turn.
    let mut config = h.config("Reply with exactly the word: pong");
    config.model = model;
    let started = h
        .try_start(session, config)
        .await
        .expect("Start against the real service");
    let (_, ready) = ev.run_ready_after(0).await;
    let (first_end_ev, first_end) = ev.turn_end_after(0).await;
    assert!(!first_end.is_error, "{first_end:?}");
    assert!(
        texts(&ev.snapshot()).to_lowercase().contains("pong"),
        "{}",
        texts(&ev.snapshot())
    );
    let s = h.get(session).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle);
    assert!(s.process_alive);

    // Follow-up on the same process.
    let run = h
        .send(session, "Now reply with exactly the word: second")
        .await;
    assert_eq!(run, started.run_id);
    let (second_end_ev, second_end) = ev.turn_end_after(first_end_ev.seq).await;
    assert!(!second_end.is_error, "{second_end:?}");
    let after = ev.since(first_end_ev.seq);
    assert!(texts(&after).to_lowercase().contains("second"));
    assert_eq!(count(&after, |p| matches!(p, Payload::RunStart(_))), 0);
    for e in &after {
        if let Some(Payload::RunReady(r)) = &e.payload {
            assert_eq!(r.pid, ready.pid);
        }
    }

    // Stop mid-turn keeps the process.
    h.send(
        session,
        "Write the numbers from 1 to 2000, one per line, with no other text.",
    )
    .await;
    // The CLI writes an `assistant` line only when a block is complete, so
    // there is no content to wait for mid-block: wait until the turn is
    // streaming and give the model a moment, then Stop.
    h.wait_session(session, "streaming", |s| {
        s.status() == pb::SessionStatus::Streaming
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        h.get(session).await.status(),
        pb::SessionStatus::Streaming,
        "the long turn must still be running when Stop is sent"
    );
    assert!(h.stop(session).await);
    let (_, stopped) = ev.turn_end_after(second_end_ev.seq).await;
    assert!(
        stopped.is_error,
        "the interrupted turn ends as an error: {stopped:?}"
    );
    let s = h
        .wait_session(session, "idle", |s| s.status() == pb::SessionStatus::Idle)
        .await;
    assert!(s.process_alive, "an interrupt keeps the process");
    h.finish(session, &ev).await;
}
