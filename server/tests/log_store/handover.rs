//! Replay-to-live handover under concurrent appends: no gap, no duplicate.
//!
//! A proptest draws random interleavings of appends (of random sizes),
//! subscribes (at random cursors, including past the head), partial reads
//! and disconnects, with a small window and max_replay so resets and
//! storage fall-through happen too. Each subscriber is checked against the
//! rules: the header first; events strictly consecutive from from_seq + 1;
//! caught_up once, equal to the replay header's head; everything up to the
//! final head delivered when it is drained.

use crate::support::log;

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::store::RedbStore;
use futures::{Stream, StreamExt};
use log::new_event;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Append n events (n in 1..=40), in the background, not awaited yet.
    Append(u64),
    /// Subscribe at head - back (back may exceed head: cursor past the head
    /// when `past`).
    Subscribe { back: u64, past: bool },
    /// Read up to n messages from subscriber i (mod live count).
    Read { sub: usize, n: usize },
    /// Drop subscriber i.
    Disconnect(usize),
    /// Wait for the pending appends.
    Settle,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..=40).prop_map(Op::Append),
        2 => (0u64..120, any::<bool>()).prop_map(|(back, past)| Op::Subscribe { back, past }),
        4 => (0usize..8, 1usize..60).prop_map(|(sub, n)| Op::Read { sub, n }),
        1 => (0usize..8).prop_map(Op::Disconnect),
        1 => Just(Op::Settle),
    ]
}

type Sub = std::pin::Pin<Box<dyn Stream<Item = pb::SubscribeResponse> + Send>>;

/// One subscriber and what it has seen so far.
struct Checker {
    stream: Sub,
    /// Replay header's head, once seen.
    replay_head: Option<u64>,
    last: u64,
    caught_up: bool,
}

impl Checker {
    async fn read_one(&mut self, timeout: Duration) -> Option<()> {
        let msg = tokio::time::timeout(timeout, self.stream.next())
            .await
            .ok()?;
        let kind = msg
            .expect("stream ended early")
            .kind
            .expect("empty message");
        match kind {
            Kind::Replay(h) => {
                assert!(self.replay_head.is_none(), "second replay header");
                assert!(h.from_seq <= h.head_seq);
                self.replay_head = Some(h.head_seq);
                self.last = h.from_seq;
            }
            Kind::Event(e) => {
                assert!(self.replay_head.is_some(), "event before the header");
                assert_eq!(e.seq, self.last + 1, "gap or duplicate");
                self.last = e.seq;
            }
            Kind::CaughtUp(c) => {
                let head = self.replay_head.expect("caught_up before the header");
                assert!(!self.caught_up, "caught_up twice");
                assert_eq!(c.head_seq, head, "caught_up must carry the replay head");
                assert_eq!(self.last, head, "caught_up before the replay was done");
                self.caught_up = true;
            }
            Kind::Heartbeat(_) => {}
            Kind::Delta(d) => panic!("a delta nobody asked for: {d:?}"),
        }
        Some(())
    }
}

async fn scenario(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    let logs = EventLogs::open(
        Arc::new(store),
        LogOptions {
            window: 16,
            max_replay: 64,
            heartbeat: Duration::from_secs(3600),
            max_batch: 32,
            ..LogOptions::default()
        },
    )
    .unwrap();
    let mut pending = Vec::new();
    let mut subs: Vec<Checker> = Vec::new();
    let mut total = 0u64;
    for op in ops {
        match op {
            Op::Append(n) => {
                let logs = logs.clone();
                total += n;
                pending.push(tokio::spawn(async move {
                    logs.commit("s", Commit::events((0..n).map(new_event).collect()))
                        .await
                        .unwrap()
                }));
                tokio::task::yield_now().await;
            }
            Op::Subscribe { back, past } => {
                let head = logs.head_seq("s").await.unwrap();
                let after = if past {
                    head + 1 + back % 5
                } else {
                    head.saturating_sub(back)
                };
                subs.push(Checker {
                    stream: Box::pin(logs.subscribe("s", after).await.unwrap()),
                    replay_head: None,
                    last: 0,
                    caught_up: false,
                });
            }
            Op::Read { sub, n } if !subs.is_empty() => {
                let i = sub % subs.len();
                for _ in 0..n {
                    if subs[i].read_one(Duration::from_millis(20)).await.is_none() {
                        break;
                    }
                }
            }
            Op::Disconnect(i) if !subs.is_empty() => {
                let i = i % subs.len();
                drop(subs.swap_remove(i));
            }
            Op::Settle => {
                for p in pending.drain(..) {
                    p.await.unwrap();
                }
            }
            _ => {}
        }
    }
    for p in pending.drain(..) {
        p.await.unwrap();
    }
    assert_eq!(logs.head_seq("s").await.unwrap(), total);
    // Drain every survivor to the final head: all must get there, gaplessly.
    for c in &mut subs {
        while !(c.caught_up && c.last == total) {
            c.read_one(Duration::from_secs(3))
                .await
                .expect("subscriber stalled before the head");
        }
    }
    logs.shutdown().await;
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn replay_to_live_handover_has_no_gap_and_no_duplicate(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(scenario(ops));
    }
}
