//! How many of each measurement a run makes, full or `--quick`.

use serde::Serialize;

use crate::ours::deltas::Spec;

/// Counts for one run.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    /// CLI lines per throughput row.
    pub throughput_lines: u64,
    /// Messages per durable JetStream publish row (it takes ~2 ms per
    /// fsync here, so fewer than ours keep the row near 10 s).
    pub jetstream_lines: u64,
    /// Session counts of the throughput table.
    pub sessions: Vec<usize>,
    /// gRPC fan-out rows: subscribers, lines per second, lines.
    pub fanout: Vec<(usize, f64, u64)>,
    /// The grpc-web row: subscribers, lines per second, lines.
    pub web: Option<(usize, f64, u64)>,
    /// Live-typing rows, in the order run.
    pub deltas: Vec<Spec>,
    /// Events in the replayed log.
    pub replay_events: u64,
    /// Idle subscriber counts for the memory figure.
    pub idle: Vec<usize>,
    /// Which fan-out rows the goals read (subscribers, lines per second).
    pub goal_rows: GoalRows,
    /// The rows judged against JetStream's (the lone and the crowds) run in
    /// this many turns of their lines, each followed by JetStream's round
    /// of the same size, each side's samples pooled.
    pub rounds: usize,
}

/// The fan-out rows the goals are judged on, each one of `Sizes::fanout`.
#[derive(Debug, Clone, Serialize)]
pub struct GoalRows {
    /// The lone subscriber (its p50 against JetStream's).
    pub lone: (usize, f64),
    /// The crowds (their p99 against JetStream's).
    pub crowds: Vec<(usize, f64)>,
    /// The stress row (its p99 against a fixed bound).
    pub stress: (usize, f64),
}

impl Sizes {
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Self {
                throughput_lines: 2_000,
                jetstream_lines: 200,
                sessions: vec![1, 10],
                // The last is the smoke's stand-in for the stress row.
                fanout: vec![(1, 50.0, 25), (20, 50.0, 25), (20, 200.0, 50)],
                web: Some((5, 50.0, 25)),
                deltas: typing_pairs(20, &[(0.0, 20)], 5),
                replay_events: 5_000,
                idle: vec![100],
                goal_rows: GoalRows {
                    lone: (1, 50.0),
                    crowds: vec![(20, 50.0)],
                    stress: (20, 200.0),
                },
                rounds: 2,
            }
        } else {
            Self {
                // About 4 s a row at every session count. Rows of 100,000
                // lines took under half a second: starting 100 sessions was
                // a third of that row (SQLite's loop starts nothing), and
                // the ratio against SQLite moved ±8% from run to run.
                throughput_lines: 1_000_000,
                jetstream_lines: 5_000,
                sessions: vec![1, 10, 100],
                // 10 s each. At 10,000 subscribers, 10 lines/s (100,000
                // deliveries/s: what 2 cores shared by server and client
                // can decode); 1,000 × 500/s is the stress row.
                fanout: vec![
                    (1, 100.0, 1_000),
                    (100, 100.0, 1_000),
                    (1_000, 100.0, 1_000),
                    (10_000, 10.0, 100),
                    (1_000, 500.0, 5_000),
                ],
                web: Some((100, 100.0, 1_000)),
                // The row: 1,000 subscribers, the stand-in at full
                // speed (the server falls behind: the delays are queueing);
                // then at a fast model's typing speed, 5 messages/s of 20
                // fragments (100 text deltas/s), 20 s.
                deltas: typing_pairs(1_000, &[(0.0, 1_000), (5.0, 100)], 20),
                replay_events: 1_000_000,
                idle: vec![1_000, 10_000],
                goal_rows: GoalRows {
                    lone: (1, 100.0),
                    crowds: vec![(100, 100.0), (1_000, 100.0)],
                    stress: (1_000, 500.0),
                },
                // 250 lines a turn: each turn and round is 2.5 s.
                rounds: 4,
            }
        }
    }

    /// Keeps only the fan-out rows (grpc-web's too) of these subscriber counts.
    pub(crate) fn keep_fanout(&mut self, subscribers: &[usize]) {
        self.fanout.retain(|r| subscribers.contains(&r.0));
        self.web = self.web.filter(|r| subscribers.contains(&r.0));
    }
}

impl GoalRows {
    /// Whether the row of `subscribers` at `rate` is judged against
    /// JetStream's (the lone row and the crowds).
    pub(crate) fn against_jetstream(&self, subscribers: usize, rate: f64) -> bool {
        std::iter::once(&self.lone)
            .chain(&self.crowds)
            .any(|&(n, r)| (n, r) == (subscribers, rate))
    }
}

/// Live-typing rows for `subscribers` at each (rate, messages), each rate
/// twice: without deltas (the baseline) then with.
fn typing_pairs(subscribers: usize, loads: &[(f64, u64)], frags: usize) -> Vec<Spec> {
    loads
        .iter()
        .flat_map(|&(rate, messages)| {
            [false, true].map(|deltas| Spec {
                subscribers,
                deltas,
                rate,
                messages,
                frags,
            })
        })
        .collect()
}
