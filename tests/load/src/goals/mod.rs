//! The goals of the performance work (encode once, parse once, a cheaper
//! commit, replay at the speed of the store, a stress row that holds),
//! judged on the figures of one run: each as a ratio against a peer
//! measured in the same run, or as one of our figures against a fixed
//! bound. A goal whose row this invocation did not run (`--only`,
//! `--no-peers`, a size `--quick` does not have) is "not run", never met.
//!
//! Ratios are always ours / peer, whatever the direction of the goal:
//! events/s must be at least the bound (≥ 1.0× means as fast as the peer),
//! latencies at most the bound (≤ 1.0× means no slower).

mod table;

use serde::Serialize;

use crate::ours::fanout::{self, Transport};
use crate::plan::Results;
pub use table::print;

/// Server CPU seconds per million events before the work (throughput rows
/// of four runs): the figure to halve.
pub const CPU_BEFORE: (f64, f64) = (22.0, 31.0);

/// What a figure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Events per second.
    EventsPerSec,
    /// Milliseconds.
    Ms,
    /// Server CPU seconds per million events.
    CpuSecsPerM,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::EventsPerSec => format!("{v:.0}/s"),
            Unit::Ms => format!("{v:.2} ms"),
            Unit::CpuSecsPerM => format!("{v:.1} s"),
        }
    }
}

/// The bound a goal's value must keep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// value ≥ bound.
    AtLeast(f64),
    /// value ≤ bound.
    AtMost(f64),
    /// value < bound.
    Under(f64),
}

impl Target {
    fn met(self, v: f64) -> bool {
        match self {
            Target::AtLeast(b) => v >= b,
            Target::AtMost(b) => v <= b,
            Target::Under(b) => v < b,
        }
    }

    fn show(self, show: impl Fn(f64) -> String) -> String {
        match self {
            Target::AtLeast(b) => format!("≥ {}", show(b)),
            Target::AtMost(b) => format!("≤ {}", show(b)),
            Target::Under(b) => format!("< {}", show(b)),
        }
    }
}

/// Where a goal stands after this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The value keeps the bound.
    Met,
    /// It does not.
    NotMet,
    /// A row it needs did not run in this invocation.
    NotRun,
    /// Both rows ran but the peer's figure is zero: no ratio.
    NoRatio,
    /// Not met, and not met either by a server that holds the messages in
    /// memory and only sends them ([`crate::ours::ceiling`]): the bound is
    /// past what gRPC reaches on this machine in this run.
    PastCeiling,
}

impl Status {
    fn show(self) -> &'static str {
        match self {
            Status::Met => "**met**",
            Status::NotMet => "**not met**",
            Status::NotRun => "not run",
            Status::NoRatio => "no ratio (peer figure 0)",
            Status::PastCeiling => "**not met: past this machine's gRPC ceiling**",
        }
    }
}

/// One goal, judged.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// What is measured, in the report's words.
    pub measure: String,
    /// The unit of `ours` and `peer`.
    pub unit: Unit,
    /// Our figure, when its row ran.
    pub ours: Option<f64>,
    /// The peer compared with, for a ratio goal.
    pub peer_name: Option<String>,
    /// The peer's figure, when its row ran.
    pub peer: Option<f64>,
    /// What is judged: ours / peer for a ratio goal, else ours.
    pub value: Option<f64>,
    /// Whether `value` is a ratio.
    pub ratio: bool,
    /// The bound `value` must keep.
    pub target: Target,
    /// Met, not met, not run.
    pub status: Status,
    /// What else the reader should know (a peer that lost messages).
    pub note: Option<String>,
}

impl Goal {
    /// ours / peer against `target`.
    pub fn ratio(
        measure: String,
        unit: Unit,
        peer_name: &str,
        ours: Option<f64>,
        peer: Option<f64>,
        target: Target,
    ) -> Self {
        let (value, status) = match (ours, peer) {
            (Some(o), Some(p)) if p > 0.0 => {
                let v = o / p;
                (Some(v), Self::status(target, v))
            }
            (Some(_), Some(_)) => (None, Status::NoRatio),
            _ => (None, Status::NotRun),
        };
        Self {
            measure,
            unit,
            ours,
            peer_name: Some(peer_name.into()),
            peer,
            value,
            ratio: true,
            target,
            status,
            note: None,
        }
    }

    /// Our figure against `target`.
    pub fn absolute(measure: String, unit: Unit, ours: Option<f64>, target: Target) -> Self {
        Self {
            measure,
            unit,
            ours,
            peer_name: None,
            peer: None,
            value: ours,
            ratio: false,
            target,
            status: ours.map_or(Status::NotRun, |v| Self::status(target, v)),
            note: None,
        }
    }

    fn status(target: Target, v: f64) -> Status {
        if target.met(v) {
            Status::Met
        } else {
            Status::NotMet
        }
    }

    fn with_note(mut self, note: Option<String>) -> Self {
        self.note = note;
        self
    }

    /// A ratio goal of ours against the same peer measured with the
    /// `ceiling` (the same messages from a server that only sends them):
    /// noted, and a goal the ceiling misses too is past the ceiling.
    fn with_ceiling(mut self, ceiling: Option<f64>) -> Self {
        let (Some(c), Some(p), Some(o)) = (ceiling, self.peer, self.ours) else {
            return self;
        };
        if p <= 0.0 || c <= 0.0 {
            return self;
        }
        let of_peer = c / p;
        self.note = Some(format!(
            "gRPC ceiling {}, {of_peer:.2}× the peer; ours is {:.2}× the ceiling",
            self.unit.show(c),
            o / c
        ));
        if self.status == Status::NotMet && !self.target.met(of_peer) {
            self.status = Status::PastCeiling;
        }
        self
    }
}

/// Every goal, judged on `r`.
pub fn judge(r: &Results) -> Vec<Goal> {
    let peers = r.peers.as_ref();
    let tp = |s: usize| r.throughput.iter().find(|t| t.sessions == s);
    let mut out = Vec::new();

    for s in [1, 10, 100] {
        let sqlite = peers.and_then(|p| p.sqlite_append.iter().find(|(n, _, _)| *n == s));
        out.push(Goal::ratio(
            format!("durable events/s, {s} session(s), vs SQLite (same batches)"),
            Unit::EventsPerSec,
            &match sqlite {
                Some((_, b, _)) => format!("SQLite WAL FULL, batches of {b}"),
                None => "SQLite WAL FULL".into(),
            },
            tp(s).map(|t| t.rate.per_sec()),
            sqlite.map(|(_, _, rate)| rate.per_sec()),
            Target::AtLeast(1.0),
        ));
    }
    out.push(Goal::absolute(
        "durable events/s end to end, 100 sessions".into(),
        Unit::EventsPerSec,
        tp(100).map(|t| t.rate.per_sec()),
        Target::AtLeast(150_000.0),
    ));

    let rows = &r.sizes.goal_rows;
    let fan = |(n, rate): (usize, f64)| {
        let ours = r
            .fanout
            .iter()
            .find(|f| f.transport == Transport::Grpc && f.subscribers == n && f.rate == rate);
        let js = peers.and_then(|p| {
            p.jetstream_fanout
                .iter()
                .find(|j| j.subscribers == n && j.rate == rate)
        });
        let lossy = js.filter(|j| j.run.received < j.run.expected).map(|j| {
            format!(
                "JetStream received {} of {} messages",
                j.run.received, j.run.expected
            )
        });
        (ours, js, lossy)
    };
    let (ours, js, lossy) = fan(rows.lone);
    out.push(
        Goal::ratio(
            format!(
                "lone subscriber p50, {} × {}/s, vs JetStream",
                rows.lone.0, rows.lone.1
            ),
            Unit::Ms,
            "JetStream",
            ours.map(|f| f.from_write.p50),
            js.map(|j| j.run.latency.p50),
            Target::AtMost(1.1),
        )
        .with_note(lossy),
    );
    for &row in &rows.crowds {
        let (ours, js, lossy) = fan(row);
        out.push(
            Goal::ratio(
                format!(
                    "fan-out p99, {} subscribers × {}/s, vs JetStream",
                    row.0, row.1
                ),
                Unit::Ms,
                "JetStream",
                ours.map(|f| f.from_write.p99),
                js.map(|j| j.run.latency.p99),
                Target::AtMost(1.0),
            )
            .with_note(lossy),
        );
    }

    let replay = r.replay.as_ref();
    let ceiling = replay
        .and_then(|rp| rp.ceiling.as_ref())
        .map(|c| c.rate.per_sec());
    for (what, warm) in [("cold", false), ("warm", true)] {
        let ours = replay.map(|rp| if warm { &rp.warm } else { &rp.cold }.rate.per_sec());
        let peer = |p: Option<&crate::peers::Replay>| {
            p.map(|p| if warm { p.warm } else { p.cold }.per_sec())
        };
        let against = [
            (
                "JetStream ordered consumer",
                peers.and_then(|p| p.jetstream_replay.as_ref()),
                1.0,
            ),
            (
                "SQLite in process",
                peers.and_then(|p| p.sqlite_replay.as_ref()),
                0.5,
            ),
        ];
        for (name, theirs, bound) in against {
            out.push(
                Goal::ratio(
                    format!("replay over gRPC, {what}, vs {name}"),
                    Unit::EventsPerSec,
                    name,
                    ours,
                    peer(theirs),
                    Target::AtLeast(bound),
                )
                .with_ceiling(ceiling),
            );
        }
    }

    let (ours, js, _) = fan(rows.stress);
    out.push(
        Goal::absolute(
            format!(
                "stress: {} subscribers × {}/s, p99",
                rows.stress.0, rows.stress.1
            ),
            Unit::Ms,
            ours.map(|f| f.from_write.p99),
            Target::Under(100.0),
        )
        .with_note(js.map(|j| {
            format!(
                "JetStream p99 {:.2} ms, received {} of {}",
                j.run.latency.p99, j.run.received, j.run.expected
            )
        })),
    );

    for s in [1, 10, 100] {
        out.push(Goal::absolute(
            format!(
                "server CPU s per million events, {s} session(s) ({}–{} s before)",
                CPU_BEFORE.0, CPU_BEFORE.1
            ),
            Unit::CpuSecsPerM,
            tp(s).map(|t| t.cpu_s_per_m),
            Target::AtMost(CPU_BEFORE.0 / 2.0),
        ));
    }
    out
}

/// Server CPU seconds per million events delivered (subscribers × lines)
/// in a fan-out row.
pub fn fanout_cpu_per_m(f: &fanout::Row) -> f64 {
    let delivered = f.subscribers as f64 * f.events as f64;
    if delivered > 0.0 {
        f.server_cpu / delivered * 1e6
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests;
