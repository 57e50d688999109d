//! The user-level checks a claude session passes, for a Codex session too:
//! a client that refreshes mid-answer, and a Send retried with its
//! idempotency key.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use super::Harness;
use crate::support::cli_grpc::{Events, joined, of_message, texts};

/// The text `SLOW n` streams.
fn ticks(n: usize) -> String {
    (0..n).map(|i| format!("tick {i} ")).collect()
}

/// A client that refreshes while Codex writes its answer (a new Subscribe
/// from seq 0 asking for live typing) gets, right after `caught_up`, one
/// snapshot of the text so far, then the rest as fragments: snapshot plus
/// fragments equal the stored answer, and the answer is stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_mid_answer_gets_the_text_so_far_then_the_rest() {
    let mut h = Harness::new().await;
    let first = Events::open_with(h.client().await, "c9", true).await;
    h.start("c9", "SLOW 30 100").await;
    first
        .wait_deltas("eight ticks on the first stream", |d| {
            let text = joined(d.iter().map(|(_, d)| d));
            (text.matches("tick").count() >= 8).then_some(())
        })
        .await;

    let late = Events::open_with(h.client().await, "c9", true).await;
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
    assert_eq!(
        joined(
            of_message(&first.deltas(), &message_id)
                .iter()
                .map(|(_, d)| d)
        ),
        ticks(30),
        "the stream that was there from the start typed the same text"
    );
    first.assert_contract();
    late.assert_contract();
    h.shutdown().await;
    h.assert_stored_runs_end_once("c9");
}

/// A Send retried with the same idempotency key (the answer was lost on
/// the way back) is answered with the first one's run and writes nothing
/// twice: one input, one turn, one model request for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_retried_with_its_key_is_one_turn() {
    let mut h = Harness::new().await;
    let ev = h.subscribe("c10").await;
    h.start("c10", "TEXT first").await;
    let (first_end, _) = ev.turn_end_after(0).await;
    let send = |key: &str| pb::SendRequest {
        idempotency_key: key.into(),
        session_id: "c10".into(),
        input: "TEXT once".into(),
        content_blocks: vec![],
    };
    let mut client = h.client().await;
    let a = client
        .send(send("retry-1"))
        .await
        .expect("Send")
        .into_inner();
    let b = client
        .send(send("retry-1"))
        .await
        .expect("the retry")
        .into_inner();
    assert_eq!(a.run_id, b.run_id);
    let (second_end, end) = ev.turn_end_after(first_end.seq).await;
    assert!(!end.is_error, "{end:?}");
    let inputs = ev
        .snapshot()
        .into_iter()
        .filter(|e| matches!(&e.payload, Some(Payload::InputSent(i)) if i.text == "TEXT once"))
        .count();
    assert_eq!(inputs, 1, "one input for two Sends with one key");
    // Nothing else comes: a second turn would need a second input.
    h.shutdown().await;
    let stored = h.assert_stored_runs_end_once("c10");
    let turns_after = stored
        .iter()
        .filter(|e| e.seq > second_end.seq && matches!(&e.payload, Some(Payload::TurnEnd(_))))
        .count();
    assert_eq!(turns_after, 0, "one turn for the retried Send");
    let asked = h
        .api
        .responses_requests()
        .iter()
        .filter(|r| r.user_prompts().last().map(String::as_str) == Some("TEXT once"))
        .count();
    assert_eq!(asked, 1, "one model request for it");
}
