//! The peers (SQLite, a raw fsync loop, JetStream), each in the shapes of
//! the rows of ours that ran.

use crate::Args;
use crate::ours::throughput;
use crate::peers;
use crate::stats::Rate;

use super::{JetStreamFanout, Peers, Replay, Sizes, payload, progress};

/// The peer rows run right after the row of ours each is compared with, in
/// its shape: SQLite's appends and the raw fsync loop after each
/// throughput row (sessions, events, the batches our commits took, our
/// mean event's bytes), JetStream's fan-out after each gRPC fan-out row
/// (subscribers, rate, messages), on a durable NATS server started for
/// them. A ratio is then of two figures taken seconds apart, not minutes,
/// on a shared machine whose speed drifts. What the row of ours left
/// unwritten in the page cache is written out first (`sync`), so the peer
/// does not pay for it.
#[derive(Default)]
pub(super) struct Beside {
    sqlite_append: Vec<(usize, usize, Rate)>,
    fsync: Vec<(usize, Rate, Rate)>,
    nats: Option<peers::nats::Nats>,
    jetstream_fanout: Vec<JetStreamFanout>,
}

impl Beside {
    /// Stops the NATS server the fan-out rows ran on (the rows after them
    /// do not share the machine with it).
    pub(super) fn fanout_done(&mut self) {
        self.nats = None;
    }

    /// One round of JetStream's fan-out in the shape of a gRPC fan-out
    /// row of ours (or of one of its turns): `subscribers` push consumers,
    /// `lines` messages of `payload` bytes at `rate` per second, with every
    /// sample when `samples` (for pooling the rounds).
    pub(super) fn jetstream_fanout_round(
        &mut self,
        dir: &std::path::Path,
        (subscribers, rate, lines): (usize, f64, u64),
        payload: usize,
        samples: bool,
    ) -> peers::nats::Fanout {
        tokio::task::block_in_place(|| {
            nix::unistd::sync();
            let nats = self.nats.get_or_insert_with(|| {
                peers::nats::Nats::start_in(dir, peers::nats::SyncPolicy::Always)
            });
            progress(&format!("JetStream: {subscribers} subscribers at {rate}/s"));
            nats.fanout_detail(
                peers::nats::ConsumerKind::Push,
                (subscribers, rate, lines),
                payload,
                samples,
            )
        })
    }

    /// JetStream's row beside the fan-out row of ours with `subscribers` at
    /// `rate`: its one round, or its rounds pooled.
    pub(super) fn jetstream_fanout(
        &mut self,
        subscribers: usize,
        rate: f64,
        mut rounds: Vec<peers::nats::Fanout>,
    ) {
        let run = if rounds.len() == 1 {
            rounds.remove(0)
        } else {
            peers::nats::Fanout::pool(rounds)
        };
        self.jetstream_fanout.push(JetStreamFanout {
            subscribers,
            rate,
            run,
        });
    }

    /// The peer rows in `row`'s shape.
    pub(super) fn run(&mut self, row: &throughput::Row, dir: &std::path::Path) {
        nix::unistd::sync();
        let payload = payload(std::slice::from_ref(row));
        let batch = row.batch.round().max(1.0) as usize;
        progress(&format!(
            "SQLite: {} sessions, batches of {batch}",
            row.sessions
        ));
        let d = tempfile::tempdir_in(dir).expect("tempdir");
        self.sqlite_append.push((
            row.sessions,
            batch,
            peers::sqlite::append(d.path(), row.sessions, batch, row.rate.events, payload),
        ));
        progress(&format!("fsync loop: batches of {batch}"));
        let d = tempfile::tempdir_in(dir).expect("tempdir");
        let grow = peers::fsync::append(d.path(), batch, row.rate.events, payload);
        let d = tempfile::tempdir_in(dir).expect("tempdir");
        let layout = peers::fsync::Layout::Prewritten;
        let prewritten =
            peers::fsync::append_with(d.path(), layout, batch, row.rate.events, payload);
        self.fsync.push((batch, grow, prewritten));
    }
}

/// The peers, in the shapes of the rows of ours that ran: each peer row
/// runs only when its row of ours is asked for (`--only`). SQLite's
/// appends and the fsync loop ran beside ours already (`beside`).
pub(super) async fn run_peers(
    args: &Args,
    sizes: &Sizes,
    tp: &[throughput::Row],
    beside: Beside,
    replay: Option<&Replay>,
    dir: &std::path::Path,
) -> Peers {
    let payload = payload(tp);
    let Beside {
        sqlite_append,
        fsync,
        nats: _,
        jetstream_fanout,
    } = beside;
    let replay_events = args
        .runs("replay")
        .then(|| replay.map(|r| r.events).unwrap_or(sizes.replay_events));
    let sqlite_replay = replay_events.map(|events| {
        progress("SQLite: replay");
        let d = tempfile::tempdir_in(dir).expect("tempdir");
        peers::sqlite::replay(d.path(), events, payload)
    });

    let sessions = if !args.runs("throughput") {
        Vec::new()
    } else if tp.is_empty() {
        sizes.sessions.clone()
    } else {
        tp.iter().map(|r| r.sessions).collect()
    };
    let (js_lines, js_default_lines) = (sizes.jetstream_lines, sizes.throughput_lines);
    let dir = dir.to_path_buf();
    let (jetstream_publish, jetstream_publish_default_sync, jetstream_replay) =
        tokio::task::spawn_blocking(move || {
            use peers::nats::{Nats, SyncPolicy};
            let mut publish = Vec::new();
            if !sessions.is_empty() {
                let durable = Nats::start_in(&dir, SyncPolicy::Always);
                for &s in &sessions {
                    progress(&format!("JetStream (fsync always): {s} publishers"));
                    let per = (js_lines / s as u64).max(1);
                    publish.push((s, durable.publish(s, per, payload)));
                }
            }
            let mut default_sync = Vec::new();
            if !sessions.is_empty() {
                let fast = Nats::start_in(&dir, SyncPolicy::Default);
                for &s in &sessions {
                    progress(&format!(
                        "JetStream (default sync, not durable): {s} publishers"
                    ));
                    let per = (js_default_lines / s as u64).max(1);
                    default_sync.push((s, fast.publish(s, per, payload)));
                }
            }
            // A server of its own, holding only the replayed stream; written
            // with the default sync (see `peers::nats::replay`).
            let replay = replay_events.map(|events| {
                progress(&format!(
                    "JetStream: replay of {events} events (ordered consumer)"
                ));
                Nats::start_in(&dir, SyncPolicy::Default).replay(events, payload, true)
            });
            (publish, default_sync, replay)
        })
        .await
        .expect("JetStream peer");

    Peers {
        payload,
        jetstream_publish,
        jetstream_publish_default_sync,
        jetstream_fanout,
        sqlite_append,
        sqlite_replay,
        jetstream_replay,
        fsync,
    }
}
