//! Stored rows are checked to decode before they are sent as stored, once
//! per resident session: a replay checks what no earlier read found to
//! decode, and a row that does not decode is `unreadable` in every read.

use crate::support::log::{event, new_event};

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, Frame, LogOptions};
use agent_harness_server::store::{RedbStore, SessionMeta, Store};
use futures::StreamExt;
use prost::Message;
use redb::ReadableTable;

const EVENTS: u64 = 600;
const DAMAGED: u64 = 400;
const GARBAGE: &[u8] = &[0xff, 0xff, 0xff, 0x0f, 0x2a];

/// Every event of a Subscribe from 0 up to `caught_up`, as the wire sends
/// it (the bytes each event goes out as), decoded strictly, as a client
/// decodes: a row sent unchecked that does not decode fails here.
async fn replay(logs: &EventLogs, sid: &str) -> Vec<pb::Event> {
    let mut s = std::pin::pin!(logs.subscribe_frames(sid, 0, false).await.unwrap());
    let mut events = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(60), s.next())
            .await
            .expect("stream stalled")
            .expect("stream ended");
        match next {
            Frame::Event(e) => {
                events.push(pb::Event::decode(e.bytes).expect("a client decodes it"))
            }
            Frame::Message(kind) => match *kind {
                Kind::CaughtUp(_) => return events,
                Kind::Replay(_) => {}
                other => panic!("unexpected during replay: {other:?}"),
            },
        }
    }
}

fn checked(logs: &EventLogs) -> u64 {
    logs.stats().rows_checked
}

fn unreadable(e: &pb::Event) -> bool {
    matches!(&e.payload, Some(Payload::Unreadable(u)) if u.size == GARBAGE.len() as u64)
}

/// Replaces the stored bytes of `sid`'s event `seq` with garbage, in the
/// file, behind the store's back (a damaged disk, an older server).
fn damage(path: &std::path::Path, sid: &str, seq: u64) {
    const CHUNKS: redb::TableDefinition<(&str, u64), &[u8]> =
        redb::TableDefinition::new("event_chunks");
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut chunks = txn.open_table(CHUNKS).unwrap();
        let (first, row) = {
            let mut before = chunks.range((sid, 0)..=(sid, seq)).unwrap();
            let (k, v) = before.next_back().unwrap().unwrap();
            (k.value().1, v.value().to_vec())
        };
        let (mut rest, mut out, mut at) = (row.as_slice(), Vec::new(), first);
        while !rest.is_empty() {
            let len = prost::encoding::decode_varint(&mut rest).unwrap() as usize;
            let (bytes, tail) = rest.split_at(len);
            let bytes = if at == seq { GARBAGE } else { bytes };
            prost::encoding::encode_varint(bytes.len() as u64, &mut out);
            out.extend_from_slice(bytes);
            (rest, at) = (tail, at + 1);
        }
        assert!(at > seq, "the row from {first} holds {seq}");
        chunks.insert((sid, first), out.as_slice()).unwrap();
    }
    txn.commit().unwrap();
}

#[tokio::test]
async fn rows_found_to_decode_are_checked_once_and_a_damaged_row_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-harness.redb");
    {
        let store = RedbStore::open(&path).unwrap();
        for sid in ["clean", "damaged"] {
            // Rows of 100 events: the damaged one is inside a row.
            for from in (1..=EVENTS).step_by(100) {
                let batch: Vec<_> = (from..from + 100).map(|s| event(sid, s)).collect();
                let meta = SessionMeta {
                    head_seq: from + 99,
                    ..SessionMeta::new(sid, 1)
                };
                store.append_batch(&batch, &[meta]).unwrap();
            }
        }
    }
    damage(&path, "damaged", DAMAGED);
    let store = Arc::new(RedbStore::open(&path).unwrap());
    let logs = EventLogs::open(store, LogOptions::default()).unwrap();

    // A clean log: the first replay checks every row, the second none, and
    // both send the same.
    let first = replay(&logs, "clean").await;
    assert_eq!(first.len() as u64, EVENTS);
    assert_eq!(first[41], event("clean", 42));
    assert_eq!(checked(&logs), EVENTS);
    assert_eq!(replay(&logs, "clean").await, first);
    assert_eq!(checked(&logs), EVENTS, "the second replay checks nothing");
    let page = logs.history("clean", 101, 100).await.unwrap().0;
    assert_eq!(page.len(), 100);
    assert_eq!(checked(&logs), EVENTS, "nor does History");

    // The damaged row is unreadable in every replay; the rows before it are
    // checked once, it and those after it every time.
    for round in 1..=3 {
        let events = replay(&logs, "damaged").await;
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=EVENTS).collect::<Vec<_>>(), "round {round}");
        let bad: Vec<u64> = events
            .iter()
            .filter(|e| unreadable(e))
            .map(|e| e.seq)
            .collect();
        assert_eq!(bad, vec![DAMAGED], "round {round}");
        assert_eq!(events[DAMAGED as usize], event("damaged", DAMAGED + 1));
        let again = EVENTS + EVENTS + (round - 1) * (EVENTS - DAMAGED + 1);
        assert_eq!(checked(&logs), again, "round {round}");
    }
    let before = checked(&logs);
    let (page, _) = logs.history("damaged", DAMAGED + 1, 10).await.unwrap();
    assert!(unreadable(page.last().unwrap()), "{:?}", page.last());
    assert_eq!(checked(&logs), before + 1, "History checks the damaged row");

    // A new event goes on from the head.
    logs.commit("clean", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    assert_eq!(replay(&logs, "clean").await.len() as u64, EVENTS + 1);
    logs.shutdown().await;
}
