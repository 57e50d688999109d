//! Live typing: N subscribers on one session while its
//! stand-in CLI streams each assistant message as text fragments
//! (`stream_event` lines, as the real CLI does with
//! `--include-partial-messages`) before writing its complete `assistant`
//! line. Rows come in pairs on the same load: subscribers that set
//! `include_deltas`, and subscribers that did not (the baseline: the CLI
//! still streams, the server still follows the in-flight message).
//!
//! Each fragment carries its write time (a stamp, see `stamp.rs`), so a
//! delta subscriber records, for every fragment in every live delta,
//! **fragment write → receipt** (what a reader watching the text sees;
//! the server may coalesce many fragments into one delta), and per delta
//! the newest fragment's delay. Every subscriber also records the content
//! events' CLI write → receipt and commit → receipt, as in the fan-out
//! table, so the two rows of a pair show what deltas cost the log events.
//!
//! Checked, never timed: events gapless (as everywhere); no delta on a
//! stream that did not ask; a delta's `after_seq` is the last event the
//! stream sent; and for every block a subscriber saw fragments of, the
//! fragments (a snapshot replacing what came before) join to the text of
//! the block's content event, which follows them, or to a prefix of it.
//! The server promises the whole text only to a stream that keeps up: a
//! block is forgotten once the CLI's next batch arrives, so a stream that
//! was behind then gets the `content` event without the last fragments
//! (or without any, when it was behind for the whole block). Keeping up is
//! a matter of timing, so the table counts blocks typed in full, cut
//! short and not typed instead of failing; a delta row in which no block
//! was typed at all fails.
//!
//! Each row runs on a fresh server, so its RSS peak is its own.

use std::collections::HashMap;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::StreamExt;
use serde::Serialize;
use tonic::transport::Channel;

use super::fanout::STREAMS_PER_CONNECTION;
use super::{Seen, connections, head, load_prompt, micros, now_nanos, send};
use crate::server::Server;
use crate::stats::Latency;

/// What one row runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spec {
    /// Subscribers.
    pub subscribers: usize,
    /// Whether they set `include_deltas`.
    pub deltas: bool,
    /// Assistant messages per second the stand-in writes (0: full speed).
    pub rate: f64,
    /// Assistant messages (content events) in the turn.
    pub messages: u64,
    /// Text fragments per message.
    pub frags: usize,
}

/// One row of the live-typing table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What ran.
    pub spec: Spec,
    /// Fragment write → receipt, every fragment of every live delta.
    pub fragment: Latency,
    /// Per live delta: its newest fragment's write → receipt.
    pub delta: Latency,
    /// Live deltas received, all subscribers.
    pub deltas: u64,
    /// Fragments they carried (deltas / fragments: how much the server coalesced).
    pub fragments: u64,
    /// Snapshot deltas received.
    pub snapshots: u64,
    /// Blocks whose fragments joined to their content event's text.
    pub blocks_typed: u64,
    /// Blocks whose fragments joined to a strict prefix of it (the stream
    /// was behind when the server forgot the block).
    pub blocks_cut: u64,
    /// Blocks received as content events, all subscribers.
    pub blocks: u64,
    /// Content event: stand-in write → receipt.
    pub from_write: Latency,
    /// Content event: sequenced (just before the commit) → receipt.
    pub from_commit: Latency,
    /// Wall seconds from the Send to the last subscriber's turn end.
    pub secs: f64,
    /// Server CPU seconds (user + system) in that time.
    pub server_cpu: f64,
    /// This load tool's CPU seconds in that time.
    pub client_cpu: f64,
    /// Server RSS with the subscribers caught up, before the Send, bytes.
    pub rss_before: u64,
    /// Server RSS when the row ended, bytes.
    pub rss: u64,
    /// Server peak RSS (`VmHWM`, a fresh server per row), bytes.
    pub peak_rss: u64,
}

/// What one subscriber saw, deltas included, and the checks on it.
#[derive(Debug, Default)]
pub struct Typing {
    /// The log events, checked gapless.
    pub seen: Seen,
    /// Whether this stream asked for deltas.
    pub include_deltas: bool,
    /// Text so far of each block being typed: (message_id, index).
    blocks: HashMap<(String, u32), String>,
    /// Blocks whose fragments joined to their content event's text.
    pub typed: u64,
    /// Blocks whose fragments joined to a strict prefix of it.
    pub cut: u64,
    /// Fragment write → receipt, µs.
    pub fragment_us: Vec<u32>,
    /// Newest fragment of a delta → receipt, µs.
    pub delta_us: Vec<u32>,
    /// Live deltas.
    pub deltas: u64,
    /// Fragments in them.
    pub fragments: u64,
    /// Snapshot deltas.
    pub snapshots: u64,
}

impl Typing {
    /// A subscriber that has seen up to `after_seq`.
    pub fn new(after_seq: u64, include_deltas: bool) -> Self {
        Self {
            seen: Seen {
                head: after_seq,
                ..Default::default()
            },
            include_deltas,
            ..Default::default()
        }
    }

    /// One delta, received at `now` (ns since the epoch).
    pub fn delta(&mut self, id: &str, d: &pb::Delta, now: i128) {
        assert!(
            self.include_deltas,
            "{id}: a delta on a stream without include_deltas"
        );
        assert_eq!(
            d.after_seq, self.seen.head,
            "{id}: a delta's after_seq is not the last event sent"
        );
        assert_eq!(
            d.block_type,
            pb::DeltaBlockType::Text as i32,
            "{id}: the stand-in streams text blocks only"
        );
        assert!(!d.run_id.is_empty(), "{id}: a delta without its run_id");
        let key = (d.message_id.clone(), d.index);
        if d.snapshot {
            self.snapshots += 1;
            self.blocks.insert(key, d.fragment.clone());
            return;
        }
        self.blocks.entry(key).or_default().push_str(&d.fragment);
        self.deltas += 1;
        let mut newest = None;
        for us in agent_harness_load::stamp::stamps(&d.fragment) {
            let us = micros(us as i128 * 1000, now);
            self.fragment_us.push(us);
            self.fragments += 1;
            newest = Some(us);
        }
        self.delta_us.extend(newest);
    }

    /// One event; true when it is a `turn_end`.
    pub fn event(&mut self, id: &str, e: &pb::Event, live: bool) -> bool {
        let end = self.seen.record(id, e, live);
        if let Some(pb::event::Payload::Content(c)) = &e.payload {
            assert_eq!(c.blocks.len(), 1, "{id}: one block per assistant line");
            let key = (c.message_id.clone(), 0);
            if let Some(typed) = self.blocks.remove(&key) {
                let text = &c.blocks[0].text;
                assert!(
                    text.starts_with(&typed),
                    "{id}: block {key:?} typed {typed:?}, its content event has {text:?}"
                );
                if typed.len() == text.len() {
                    self.typed += 1;
                } else {
                    self.cut += 1;
                }
            }
        }
        if end {
            assert!(
                self.blocks.is_empty(),
                "{id}: fragments of blocks no content event completed: {:?}",
                self.blocks.keys().collect::<Vec<_>>()
            );
        }
        end
    }
}

/// Follows `id` from `after_seq` to the next `turn_end`, with or without
/// deltas; `ready` fires at `caught_up`. Panics on anything
/// [`Typing`] rejects, a reset or a stream error.
async fn follow(
    mut client: SessionServiceClient<Channel>,
    id: String,
    after_seq: u64,
    include_deltas: bool,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Typing {
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq,
            include_deltas,
        })
        .await
        .unwrap_or_else(|e| panic!("Subscribe {id}: {e}"))
        .into_inner();
    let mut typing = Typing::new(after_seq, include_deltas);
    let mut ready = Some(ready);
    loop {
        let msg = match stream.next().await {
            Some(Ok(m)) => m,
            Some(Err(e)) => panic!("Subscribe {id}: {e}"),
            None => panic!("Subscribe {id} ended after seq {}", typing.seen.head),
        };
        match msg.kind {
            Some(Kind::Event(e)) => {
                if typing.event(&id, &e, ready.is_none()) {
                    return typing;
                }
            }
            Some(Kind::Delta(d)) => {
                assert!(ready.is_none(), "{id}: a delta before caught_up");
                typing.delta(&id, &d, now_nanos());
            }
            Some(Kind::CaughtUp(_)) => {
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
            }
            Some(Kind::Replay(r)) => {
                assert!(!r.reset, "{id}: the server reset the cursor");
            }
            Some(Kind::Heartbeat(_)) | None => {}
        }
    }
}

/// Runs one row on `server`, whose session `id` is prepared (a live
/// process, its first turn over).
pub async fn run(server: &Server, id: &str, spec: Spec) -> Row {
    let mut control = server.connect().await;
    let after = head(&mut control, id).await;
    let conns = connections(server, spec.subscribers.div_ceil(STREAMS_PER_CONNECTION)).await;
    let mut followers = Vec::with_capacity(spec.subscribers);
    let mut ready = Vec::with_capacity(spec.subscribers);
    for i in 0..spec.subscribers {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let client = conns[i / STREAMS_PER_CONNECTION].rpc.clone();
        followers.push(tokio::spawn(follow(
            client,
            id.into(),
            after,
            spec.deltas,
            tx,
        )));
        ready.push(rx);
    }
    for r in ready {
        r.await.expect("a subscriber failed before caught_up");
    }
    let rss_before = server.rss_bytes();
    let (t0, cpu0, self0) = (
        std::time::Instant::now(),
        server.cpu_secs(),
        crate::server::proc_cpu_secs(std::process::id()),
    );
    let prompt = load_prompt(spec.messages, spec.rate, spec.frags);
    send(&mut control, id, prompt).await;
    let (mut fragment, mut delta, mut from_write, mut from_commit) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut deltas, mut fragments, mut snapshots) = (0, 0, 0);
    let (mut typed, mut cut, mut blocks) = (0, 0, 0);
    for f in followers {
        let t: Typing = f.await.expect("subscriber");
        assert_eq!(
            t.seen.contents, spec.messages,
            "a subscriber missed content events ({} of {})",
            t.seen.contents, spec.messages
        );
        fragment.extend(t.fragment_us);
        delta.extend(t.delta_us);
        from_write.extend(t.seen.from_write);
        from_commit.extend(t.seen.from_commit);
        deltas += t.deltas;
        fragments += t.fragments;
        snapshots += t.snapshots;
        typed += t.typed;
        cut += t.cut;
        blocks += t.seen.contents;
    }
    let secs = t0.elapsed().as_secs_f64();
    let server_cpu = server.cpu_secs() - cpu0;
    let client_cpu = crate::server::proc_cpu_secs(std::process::id()) - self0;
    if spec.deltas && spec.frags > 0 {
        assert!(
            typed + cut > 0,
            "no subscriber saw a block typed: does the server send deltas (and pass \
             --include-partial-messages to the CLI)?"
        );
    }
    Row {
        spec,
        fragment: Latency::from_micros(fragment),
        delta: Latency::from_micros(delta),
        deltas,
        fragments,
        snapshots,
        blocks_typed: typed,
        blocks_cut: cut,
        blocks,
        from_write: Latency::from_micros(from_write),
        from_commit: Latency::from_micros(from_commit),
        secs,
        server_cpu,
        client_cpu,
        rss_before,
        rss: server.rss_bytes(),
        peak_rss: server.peak_rss_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_harness_load::stamp::stamp;

    fn content(seq: u64, message_id: &str, text: &str) -> pb::Event {
        pb::Event {
            seq,
            payload: Some(pb::event::Payload::Content(pb::Content {
                message_id: message_id.into(),
                blocks: vec![pb::ContentBlock {
                    r#type: "text".into(),
                    text: text.into(),
                    ..Default::default()
                }],
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn delta(after_seq: u64, message_id: &str, fragment: &str, snapshot: bool) -> pb::Delta {
        pb::Delta {
            run_id: "r1".into(),
            after_seq,
            message_id: message_id.into(),
            index: 0,
            block_type: pb::DeltaBlockType::Text as i32,
            fragment: fragment.into(),
            snapshot,
            ..Default::default()
        }
    }

    /// Coalesced fragments, a snapshot that replaces what came before, a
    /// block never typed and one cut short: all accepted; every stamp is
    /// one sample.
    #[test]
    fn fragments_join_to_the_content_text() {
        let (a, b, c) = (stamp(1_000), stamp(2_000), stamp(3_000));
        let now = 4_000_000; // ns: 4,000 µs
        let mut t = Typing::new(10, true);
        t.delta("s", &delta(10, "m1", &a, false), now);
        t.delta("s", &delta(10, "m1", &format!("{b}{c}"), false), now);
        t.event("s", &content(11, "m1", &format!("{a}{b}{c}")), true);
        assert_eq!(t.fragment_us, [3_000, 2_000, 1_000]);
        assert_eq!(t.delta_us, [3_000, 1_000]);
        assert_eq!((t.deltas, t.fragments, t.typed), (2, 3, 1));

        t.delta("s", &delta(11, "m2", "stale", false), now);
        t.delta("s", &delta(11, "m2", &a, true), now);
        t.delta("s", &delta(11, "m2", &b, false), now);
        t.event("s", &content(12, "m2", &format!("{a}{b}")), true);
        t.event(
            "s",
            &content(13, "m3", "not typed: the stream was behind"),
            true,
        );
        t.delta("s", &delta(13, "m4", &a, false), now);
        t.event("s", &content(14, "m4", &format!("{a}{b}")), true);
        assert_eq!((t.snapshots, t.typed, t.cut, t.seen.contents), (1, 2, 1, 4));
    }

    #[test]
    #[should_panic(expected = "typed")]
    fn a_wrong_fragment_fails() {
        let mut t = Typing::new(0, true);
        t.delta("s", &delta(0, "m1", "a", false), 0);
        t.delta("s", &delta(0, "m1", "c", false), 0);
        t.event("s", &content(1, "m1", "abc"), true);
    }

    #[test]
    #[should_panic(expected = "after_seq")]
    fn a_delta_ahead_of_its_events_fails() {
        let mut t = Typing::new(5, true);
        t.delta("s", &delta(6, "m1", "a", false), 0);
    }

    #[test]
    #[should_panic(expected = "without include_deltas")]
    fn a_delta_nobody_asked_for_fails() {
        let mut t = Typing::new(0, false);
        t.delta("s", &delta(0, "m1", "a", false), 0);
    }

    #[test]
    #[should_panic(expected = "no content event completed")]
    fn a_block_left_open_at_turn_end_fails() {
        let mut t = Typing::new(0, true);
        t.delta("s", &delta(0, "m1", "a", false), 0);
        t.event(
            "s",
            &pb::Event {
                seq: 1,
                payload: Some(pb::event::Payload::TurnEnd(Default::default())),
                ..Default::default()
            },
            true,
        );
    }
}
