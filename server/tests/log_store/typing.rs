//! Live typing at the log: the board a run publishes to and the deltas a
//! Subscribe stream with `include_deltas` makes of it: the snapshot after
//! `caught_up`, coalescing for a slow reader, and never a delta ahead of an
//! event it follows.

use crate::support::log;

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::partial::{BlockKind, Change};
use agent_harness_server::store::RedbStore;
use futures::{Stream, StreamExt};
use log::new_event;

fn open(dir: &tempfile::TempDir) -> EventLogs {
    open_paced(dir, LogOptions::default().delta_interval)
}

fn open_paced(dir: &tempfile::TempDir, delta_interval: Duration) -> EventLogs {
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    let opts = LogOptions {
        delta_interval,
        ..LogOptions::default()
    };
    EventLogs::open(Arc::new(store), opts).unwrap()
}

fn started(m: &str, index: u32) -> Change {
    Change::Started {
        message_id: m.into(),
        parent_tool_use_id: "".into(),
        index,
        kind: BlockKind::Text,
    }
}

fn frag(m: &str, index: u32, f: &str) -> Change {
    Change::Fragment {
        message_id: m.into(),
        index,
        fragment: f.into(),
    }
}

async fn next_kind(s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin)) -> Kind {
    tokio::time::timeout(Duration::from_secs(60), s.next())
        .await
        .expect("stream stalled")
        .expect("stream ended")
        .kind
        .expect("empty response")
}

/// Reads up to and including `caught_up`; returns the events.
async fn catch_up(s: &mut (impl Stream<Item = pb::SubscribeResponse> + Unpin)) -> Vec<u64> {
    let mut seqs = Vec::new();
    loop {
        match next_kind(s).await {
            Kind::Replay(_) => {}
            Kind::Event(e) => seqs.push(e.seq),
            Kind::CaughtUp(_) => return seqs,
            other => panic!("before caught_up: {other:?}"),
        }
    }
}

fn delta(k: Kind) -> pb::Delta {
    match k {
        Kind::Delta(d) => d,
        other => panic!("expected a delta, got {other:?}"),
    }
}

/// A stream that does not read while a thousand fragments are written
/// holds nothing for them and then gets them as one delta; a stream that
/// reads all along is never held up by it.
#[tokio::test]
async fn a_slow_reader_gets_the_fragments_coalesced_and_holds_up_nobody() {
    let dir = tempfile::tempdir().unwrap();
    // Unpaced, so the fast reader gets every fragment as it comes.
    let logs = open_paced(&dir, Duration::ZERO);
    logs.commit("s", Commit::events(vec![new_event(0)]))
        .await
        .unwrap();
    let typing = logs.typing("s").await.unwrap();
    let mut fast = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    let mut slow = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    assert_eq!(catch_up(&mut fast).await, [1]);
    assert_eq!(catch_up(&mut slow).await, [1]);

    typing.publish("r", &[started("m", 0), frag("m", 0, "start ")]);
    // Each stream's first look at the board (right after caught_up) is a snapshot.
    for s in [&mut fast, &mut slow] {
        let d = delta(next_kind(s).await);
        assert_eq!((d.fragment.as_str(), d.snapshot), ("start ", true));
    }
    let mut want = String::new();
    let mut got = String::new();
    for i in 0..1000 {
        let f = format!("f{i} ");
        want.push_str(&f);
        typing.publish("r", &[frag("m", 0, &f)]);
        // The fast reader keeps up fragment by fragment.
        let d = delta(next_kind(&mut fast).await);
        assert_eq!((d.after_seq, d.snapshot), (1, false));
        got.push_str(&d.fragment);
    }
    assert_eq!(got, want);

    // The slow one: everything since its last read, in one delta.
    let d = delta(next_kind(&mut slow).await);
    assert_eq!(d.fragment, want, "one coalesced delta");
    assert!(!d.snapshot);
    assert_eq!(d.message_id, "m");
    // And nothing more is pending for it.
    logs.commit("s", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    match next_kind(&mut slow).await {
        Kind::Event(e) => assert_eq!(e.seq, 2),
        other => panic!("expected the next event, got {other:?}"),
    }
}

/// One batch of CLI lines: block 0's last fragment, its `assistant` line
/// (its `content` event), the start of block 1. The run publishes the
/// fragment at once, closes block 0 before the commit and publishes block 1
/// after it. A subscriber gets block 0's last fragment, then the `content`
/// event, then block 1, and never block 0's text after its content.
#[tokio::test]
async fn a_blocks_last_fragment_goes_before_its_content_and_the_next_block_after() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir);
    logs.commit("s", Commit::events(vec![new_event(0)]))
        .await
        .unwrap();
    let typing = logs.typing("s").await.unwrap();
    let mut sub = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    catch_up(&mut sub).await;
    typing.publish("r", &[started("m", 0), frag("m", 0, "abc")]);
    assert_eq!(delta(next_kind(&mut sub).await).fragment, "abc");

    let now = [frag("m", 0, "d")];
    let later = [
        Change::Done {
            message_id: "m".into(),
            index: Some(0),
        },
        started("m", 1),
        frag("m", 1, "xyz"),
    ];
    typing.publish("r", &now);
    let before = typing.close(&later);
    // A subscriber joining now still sees block 0 (its content is on the way).
    let mut joiner = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    catch_up(&mut joiner).await;
    logs.commit("s", Commit::events(vec![new_event(1)]))
        .await
        .unwrap(); // block 0's content
    typing.publish_after("r", &later, before);

    for (s, block0) in [(&mut sub, "d"), (&mut joiner, "abcd")] {
        let d = delta(next_kind(s).await);
        assert_eq!((d.index, d.fragment.as_str(), d.after_seq), (0, block0, 1));
        match next_kind(s).await {
            Kind::Event(e) => assert_eq!(e.seq, 2, "then the content event"),
            other => panic!("expected the content event, got {other:?}"),
        }
        let d = delta(next_kind(s).await);
        assert_eq!((d.index, d.fragment.as_str(), d.after_seq), (1, "xyz", 2));
    }
    // One that joins after the commit never sees block 0.
    let mut after = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    catch_up(&mut after).await;
    let d = delta(next_kind(&mut after).await);
    assert_eq!((d.index, d.fragment.as_str(), d.snapshot), (1, "xyz", true));
}

/// A stream that joins while a block is being written gets its text so far
/// as a snapshot right after `caught_up`; a stream without
/// `include_deltas` gets nothing of it.
#[tokio::test(start_paused = true)]
async fn a_late_subscriber_gets_a_snapshot_and_a_plain_one_gets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir);
    logs.commit("s", Commit::events(vec![new_event(0), new_event(1)]))
        .await
        .unwrap();
    let typing = logs.typing("s").await.unwrap();
    typing.publish("r", &[started("m", 0), frag("m", 0, "Hello, ")]);
    typing.publish("r", &[frag("m", 0, "wor")]);

    let mut late = Box::pin(logs.subscribe_with("s", 1, true).await.unwrap());
    let mut plain = Box::pin(logs.subscribe("s", 1).await.unwrap());
    assert_eq!(catch_up(&mut late).await, [2]);
    assert_eq!(catch_up(&mut plain).await, [2]);
    let d = delta(next_kind(&mut late).await);
    assert!(d.snapshot);
    assert_eq!(
        (d.fragment.as_str(), d.after_seq, d.run_id.as_str()),
        ("Hello, wor", 2, "r")
    );
    assert_eq!(d.block_type(), pb::DeltaBlockType::Text);

    typing.publish("r", &[frag("m", 0, "ld")]);
    let d = delta(next_kind(&mut late).await);
    assert_eq!((d.fragment.as_str(), d.snapshot), ("ld", false));
    // The plain stream only ever sees heartbeats meanwhile.
    match next_kind(&mut plain).await {
        Kind::Heartbeat(_) => {}
        other => panic!("a plain stream got {other:?}"),
    }
}

/// Pacing (`delta_interval`, 50 ms by default): a stream that keeps up
/// gets what was typed in each interval as one delta, not a delta (and a
/// wake) per fragment; and the text typed just before an event still goes
/// out before it, whatever the interval.
#[tokio::test(start_paused = true)]
async fn deltas_are_paced_but_never_held_past_an_event() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open(&dir);
    logs.commit("s", Commit::events(vec![new_event(0)]))
        .await
        .unwrap();
    let typing = logs.typing("s").await.unwrap();
    let mut sub = Box::pin(logs.subscribe_with("s", 0, true).await.unwrap());
    catch_up(&mut sub).await;
    let reader = tokio::spawn(async move {
        let mut deltas = Vec::new();
        loop {
            match next_kind(&mut sub).await {
                Kind::Delta(d) => deltas.push(d),
                Kind::Event(e) => return (deltas, e.seq),
                _ => {}
            }
        }
    });
    typing.publish("r", &[started("m", 0)]);
    let mut want = String::new();
    for i in 0..200 {
        let f = format!("f{i} ");
        want.push_str(&f);
        typing.publish("r", &[frag("m", 0, &f)]);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The last fragment and the block's content in one batch.
    want.push_str("end");
    typing.publish("r", &[frag("m", 0, "end")]);
    let later = [Change::Done {
        message_id: "m".into(),
        index: Some(0),
    }];
    let before = typing.close(&later);
    logs.commit("s", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    typing.publish_after("r", &later, before);

    let (deltas, seq) = reader.await.unwrap();
    assert_eq!(seq, 2, "the content event");
    let joined: String = deltas.iter().map(|d| d.fragment.as_str()).collect();
    assert_eq!(
        joined, want,
        "every fragment, the last one before the content"
    );
    // About 200 ms of typing at one delta per 50 ms, plus the first and the
    // flush before the event; unpaced it would be about 200.
    assert!(
        (3..=8).contains(&deltas.len()),
        "{} deltas for 201 fragments",
        deltas.len()
    );
}
