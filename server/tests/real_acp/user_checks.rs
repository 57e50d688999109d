//! The user-level checks a claude session passes, for a session over ACP
//! too (Gemini here; `codex_acp` runs them on codex-acp): a client that
//! refreshes mid-answer, and a Send mid-turn that waits for its own turn.

use agent_harness_protocol::pb::event::Payload;

use super::{Harness, both_releases};
use crate::support::cli_grpc::{Events, eventually, joined, of_message, texts};

/// The text `SLOW n` streams.
fn ticks(n: usize) -> String {
    (0..n).map(|i| format!("tick {i} ")).collect()
}

both_releases!(
    a_refresh_mid_answer_gets_the_text_so_far_then_the_rest,
    a_send_mid_turn_waits_for_its_own_turn,
);

/// A refresh mid-answer, on Gemini.
async fn a_refresh_mid_answer_gets_the_text_so_far_then_the_rest(pinned: bool) {
    refresh_mid_answer(Harness::new(pinned).await).await
}

/// A Send mid-turn, on Gemini.
async fn a_send_mid_turn_waits_for_its_own_turn(pinned: bool) {
    send_mid_turn(Harness::new(pinned).await).await
}

/// A client that refreshes while the agent writes its answer (a new
/// Subscribe from seq 0 asking for live typing) gets, right after
/// `caught_up`, one snapshot of the text so far, then the rest as
/// fragments: snapshot plus fragments equal the stored answer, and the
/// answer is stored once.
pub(super) async fn refresh_mid_answer(mut h: Harness) {
    let first = Events::open_with(h.client().await, "u1", true).await;
    h.start("u1", "SLOW 30 100").await;
    first
        .wait_deltas("eight ticks on the first stream", |d| {
            let text = joined(d.iter().map(|(_, d)| d));
            (text.matches("tick").count() >= 8).then_some(())
        })
        .await;

    let late = Events::open_with(h.client().await, "u1", true).await;
    let (_, end) = late.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    let events = late.snapshot();
    assert_eq!(texts(&events), ticks(30), "the answer, stored once");
    let message_id = events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Content(c)) if c.blocks.iter().any(|b| b.r#type == "text") => {
                Some(c.message_id.clone())
            }
            _ => None,
        })
        .expect("the answer's content");
    let deltas = of_message(&late.deltas(), &message_id);
    let (before, snap) = deltas.first().expect("a snapshot").clone();
    assert!(snap.snapshot, "the first delta is a snapshot: {snap:?}");
    assert!(
        before >= late.caught_up_at(),
        "the snapshot follows caught_up"
    );
    assert!(
        snap.fragment.matches("tick").count() >= 8 && snap.fragment.len() < ticks(30).len(),
        "the snapshot is the text so far, mid-answer: {:?}",
        snap.fragment
    );
    assert!(
        deltas[1..].iter().all(|(_, d)| !d.snapshot),
        "one snapshot, then fragments: {deltas:?}"
    );
    assert_eq!(joined(deltas.iter().map(|(_, d)| d)), ticks(30));
    first.assert_contract();
    late.assert_contract();
    h.shutdown().await;
    h.assert_stored_runs_end_once("u1");
}

/// A Send while a prompt runs waits for its own `session/prompt`: the
/// first answer is whole, the second follows on the same process, the
/// model's second request carries both prompts.
pub(super) async fn send_mid_turn(mut h: Harness) {
    let ev = h.subscribe("u2").await;
    let started = h.start("u2", "SLOW 6 150").await;
    eventually("the model request", || !h.turn_requests().is_empty()).await;
    let run = h.send("u2", "TEXT the second turn").await;
    assert_eq!(run, started.run_id, "the same process");
    let (first_ev, first) = ev.turn_end_after(0).await;
    assert!(!first.is_error, "{first:?}");
    let first_turn: Vec<_> = ev
        .snapshot()
        .into_iter()
        .filter(|e| e.seq <= first_ev.seq)
        .collect();
    assert_eq!(texts(&first_turn), ticks(6), "the first answer is whole");
    let (_, second) = ev.turn_end_after(first_ev.seq).await;
    assert!(!second.is_error, "{second:?}");
    assert_eq!(texts(&ev.since(first_ev.seq)), "the second turn");
    assert_eq!(h.last_prompts(), ["SLOW 6 150", "TEXT the second turn"]);
    h.shutdown().await;
    h.assert_stored_runs_end_once("u2");
}
