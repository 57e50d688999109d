//! What one run measured: our rows, the peers' rows in the same shapes,
//! and our rows again on PostgreSQL.

use serde::Serialize;

use crate::ours::{deltas, fanout, idle, replay, throughput};
use crate::peers;
use crate::stats::Rate;

use super::Sizes;

/// One JetStream fan-out row: ours had the same subscribers and rate.
#[derive(Debug, Clone, Serialize)]
pub struct JetStreamFanout {
    /// Subscribers (push consumers, 100 per connection).
    pub subscribers: usize,
    /// Messages per second published.
    pub rate: f64,
    /// What the driver reported.
    pub run: peers::nats::Fanout,
}

/// Replay figures.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    /// Events in the log.
    pub events: u64,
    /// Writing it: one session, one turn, as fast as the CLI writes.
    pub build: Rate,
    /// From a freshly started server.
    pub cold: replay::Measured,
    /// Whether the OS page cache was dropped before the cold read.
    pub cold_dropped_os_cache: bool,
    /// Again on the same server.
    pub warm: replay::Measured,
    /// The same messages again, from a gRPC server that holds them in
    /// memory and does nothing else ([`crate::ours::ceiling`]): what gRPC
    /// reaches on this machine. Measured on redb's run only.
    pub ceiling: Option<replay::Measured>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Results {
    /// `--quick`.
    pub quick: bool,
    /// The counts used.
    pub sizes: Sizes,
    /// `/proc/loadavg` at the start and at the end.
    pub loadavg: (String, String),
    /// Durable events/s end to end.
    pub throughput: Vec<throughput::Row>,
    /// Fan-out latency, on a server started for these rows.
    pub fanout: Vec<fanout::Row>,
    /// The lone fan-out row again, on the server that took the throughput
    /// rows (not judged: JetStream's rows have no such history).
    pub lone_after_throughput: Option<fanout::Row>,
    /// Live typing: fragment latency, and the log events' with and without deltas.
    pub deltas: Vec<deltas::Row>,
    /// Replay over gRPC.
    pub replay: Option<Replay>,
    /// Memory per idle subscriber.
    pub idle: Vec<idle::Row>,
    /// Start → run_ready and Send → first content, ours against the raw CLI.
    pub spawn: Option<crate::ours::spawn::SpawnReport>,
    /// Start and Send → first answer, ours against codex app-server driven
    /// directly, and memory per live Codex session.
    pub codex: Option<crate::ours::spawn::codex::CodexReport>,
    /// The peers, when run.
    pub peers: Option<Peers>,
    /// Our server on PostgreSQL, when run.
    pub postgres: Option<OnPostgres>,
    /// `--no-postgres`.
    pub postgres_skipped: bool,
    /// Wall time of the whole run, seconds.
    pub secs: f64,
    /// Each goal of the performance work, judged on this run's figures.
    pub goals: Vec<crate::goals::Goal>,
}

/// The peers' figures, in the same shapes as ours.
#[derive(Debug, Clone, Serialize)]
pub struct Peers {
    /// Payload bytes per message/row/record (our mean event size).
    pub payload: usize,
    /// JetStream publish with acks, per session count (durable: fsync always).
    pub jetstream_publish: Vec<(usize, Rate)>,
    /// JetStream publish with its default sync (every 2 min: not durable).
    pub jetstream_publish_default_sync: Vec<(usize, Rate)>,
    /// JetStream fan-out, per row of ours.
    pub jetstream_fanout: Vec<JetStreamFanout>,
    /// SQLite WAL synchronous=FULL appends, per session count, in our batch shape.
    pub sqlite_append: Vec<(usize, usize, Rate)>,
    /// SQLite replay of the same number of events (when replay runs).
    pub sqlite_replay: Option<peers::sqlite::Replay>,
    /// JetStream's ordered-consumer replay of the same number of events
    /// (when replay runs).
    pub jetstream_replay: Option<peers::Replay>,
    /// Raw write + fdatasync, per batch size: a growing file, and a
    /// prewritten one overwritten in place (as redb and SQLite's WAL mostly do).
    pub fsync: Vec<(usize, Rate, Rate)>,
}

/// Our server on PostgreSQL: the throughput, fan-out and replay rows of
/// redb again, and raw PostgreSQL appends of the same batches.
#[derive(Debug, Clone, Serialize)]
pub struct OnPostgres {
    /// Which database: a throwaway one, or `--store-url` (password hidden).
    pub database: String,
    /// Durable events/s end to end.
    pub throughput: Vec<throughput::Row>,
    /// Fan-out latency, on a server started for these rows.
    pub fanout: Vec<fanout::Row>,
    /// Replay over gRPC.
    pub replay: Option<Replay>,
    /// Raw COPY appends (sessions, events per transaction, rate), one per
    /// throughput row, in that row's batch shape; empty with `--no-peers`.
    pub raw_append: Vec<(usize, usize, Rate)>,
    /// Raw replay of as many rows as our replayed log.
    pub raw_replay: Option<peers::Replay>,
    /// Every figure beside its redb and raw PostgreSQL counterparts.
    pub ratios: Vec<Ratio>,
}

/// One figure of ours on PostgreSQL beside ours on redb and raw PostgreSQL.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// What, in the report's words.
    pub measure: String,
    /// Ours on PostgreSQL.
    pub on_postgres: f64,
    /// Ours on redb, same run.
    pub on_redb: Option<f64>,
    /// Raw PostgreSQL, same run.
    pub raw_postgres: Option<f64>,
    /// on_postgres / raw_postgres.
    pub postgres_over_raw: Option<f64>,
    /// on_postgres / on_redb.
    pub postgres_over_redb: Option<f64>,
}

impl Ratio {
    pub(super) fn new(
        measure: String,
        on_postgres: f64,
        on_redb: Option<f64>,
        raw: Option<f64>,
    ) -> Self {
        let over = |d: Option<f64>| d.filter(|d| *d > 0.0).map(|d| on_postgres / d);
        Self {
            measure,
            on_postgres,
            on_redb,
            raw_postgres: raw,
            postgres_over_raw: over(raw),
            postgres_over_redb: over(on_redb),
        }
    }
}
