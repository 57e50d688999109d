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

use serde::Serialize;

use crate::ours::fanout::{self, Transport};
use crate::plan::Results;

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
}

impl Status {
    fn show(self) -> &'static str {
        match self {
            Status::Met => "**met**",
            Status::NotMet => "**not met**",
            Status::NotRun => "not run",
            Status::NoRatio => "no ratio (peer figure 0)",
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
    for (what, warm) in [("cold", false), ("warm", true)] {
        let ours = replay.map(|rp| if warm { &rp.warm } else { &rp.cold }.rate.per_sec());
        let peer = |p: Option<&crate::peers::Replay>| {
            p.map(|p| if warm { p.warm } else { p.cold }.per_sec())
        };
        out.push(Goal::ratio(
            format!("replay over gRPC, {what}, vs JetStream ordered consumer"),
            Unit::EventsPerSec,
            "JetStream ordered consumer",
            ours,
            peer(peers.and_then(|p| p.jetstream_replay.as_ref())),
            Target::AtLeast(1.0),
        ));
        out.push(Goal::ratio(
            format!("replay over gRPC, {what}, vs SQLite in process"),
            Unit::EventsPerSec,
            "SQLite in process",
            ours,
            peer(peers.and_then(|p| p.sqlite_replay.as_ref())),
            Target::AtLeast(0.5),
        ));
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

/// The goals as a markdown table.
pub fn print(goals: &[Goal]) {
    if goals.is_empty() {
        return;
    }
    println!("\n## Goals, judged on this run (ratios are ours / peer)\n");
    println!("| goal | ours | peer | figure | ours / peer | target | status |");
    println!("|---|---|---|---|---|---|---|");
    let fig = |u: Unit, v: Option<f64>| v.map_or("–".into(), |v| u.show(v));
    for g in goals {
        let (value, target) = if g.ratio {
            (
                g.value.map_or("–".into(), |v| format!("**{v:.2}×**")),
                g.target.show(|b| format!("{b:.1}×")),
            )
        } else {
            ("–".into(), g.target.show(|b| g.unit.show(b)))
        };
        let note = g.note.as_ref().map_or(String::new(), |n| format!(" ({n})"));
        println!(
            "| {}{note} | {} | {} | {} | {value} | {target} | {} |",
            g.measure,
            fig(g.unit, g.ours),
            g.peer_name.as_deref().unwrap_or("–"),
            fig(g.unit, g.peer),
            g.status.show()
        );
    }
    let count = |s: Status| goals.iter().filter(|g| g.status == s).count();
    println!(
        "\n{} met, {} not met, {} not run{}.",
        count(Status::Met),
        count(Status::NotMet),
        count(Status::NotRun),
        match count(Status::NoRatio) {
            0 => String::new(),
            n => format!(", {n} without a ratio"),
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ours::{replay, throughput};
    use crate::plan::{JetStreamFanout, Peers, Replay, Sizes};
    use crate::stats::{Latency, Rate};

    fn run(quick: bool) -> Results {
        Results {
            quick,
            sizes: Sizes::new(quick),
            loadavg: Default::default(),
            throughput: Vec::new(),
            fanout: Vec::new(),
            deltas: Vec::new(),
            replay: None,
            idle: Vec::new(),
            spawn: None,
            codex: None,
            peers: None,
            postgres: None,
            postgres_skipped: false,
            secs: 0.0,
            goals: Vec::new(),
        }
    }

    fn rate(per_sec: f64) -> Rate {
        Rate {
            events: (per_sec * 10.0) as u64,
            secs: 10.0,
        }
    }

    fn latency(p50: f64, p99: f64) -> Latency {
        Latency {
            n: 1000,
            p50,
            p99,
            p999: p99,
            max: p99,
        }
    }

    fn tp(sessions: usize, per_sec: f64, cpu_s_per_m: f64) -> throughput::Row {
        throughput::Row {
            sessions,
            rate: rate(per_sec),
            contents: 0,
            commits: 0.0,
            batch: 100.0,
            cpu_s_per_m,
            event_bytes: 795.0,
            rss: 0,
            peak_rss: 0,
        }
    }

    fn fan(subscribers: usize, rate: f64, p50: f64, p99: f64) -> fanout::Row {
        fanout::Row {
            transport: Transport::Grpc,
            subscribers,
            rate,
            events: 1000,
            from_write: latency(p50, p99),
            from_commit: latency(p50, p99),
            secs: 10.0,
            server_cpu: 5.0,
            client_cpu: 5.0,
            rss: 0,
            peak_rss: 0,
        }
    }

    fn js_fan(subscribers: usize, rate: f64, p50: f64, p99: f64, received: u64) -> JetStreamFanout {
        JetStreamFanout {
            subscribers,
            rate,
            run: crate::peers::nats::Fanout {
                latency: latency(p50, p99),
                received,
                expected: subscribers as u64 * 1000,
                connections: 1,
                setup_secs: 0.0,
                publish_secs: 10.0,
            },
        }
    }

    fn peer_replay(cold: f64, warm: f64) -> crate::peers::Replay {
        crate::peers::Replay {
            cold: rate(cold),
            warm: rate(warm),
            cold_dropped_os_cache: true,
        }
    }

    fn peers() -> Peers {
        Peers {
            payload: 795,
            jetstream_publish: Vec::new(),
            jetstream_publish_default_sync: Vec::new(),
            jetstream_fanout: Vec::new(),
            sqlite_append: Vec::new(),
            sqlite_replay: None,
            jetstream_replay: None,
            fsync: Vec::new(),
        }
    }

    fn find<'a>(goals: &'a [Goal], starts: &str) -> &'a Goal {
        goals
            .iter()
            .find(|g| g.measure.starts_with(starts))
            .unwrap_or_else(|| panic!("no goal {starts:?} in {goals:#?}"))
    }

    #[test]
    fn nothing_run_means_every_goal_not_run() {
        let goals = judge(&run(false));
        // 3 vs SQLite, 150,000/s, lone p50, 2 crowds, 4 replay, stress, 3 CPU.
        assert_eq!(goals.len(), 15, "{goals:#?}");
        for g in &goals {
            assert_eq!(g.status, Status::NotRun, "{g:?}");
            assert_eq!(g.value, None, "{g:?}");
        }
    }

    #[test]
    fn ours_without_the_peer_is_not_run() {
        let mut r = run(false);
        r.throughput = vec![tp(1, 200_000.0, 5.0)];
        r.fanout = vec![fan(1, 100.0, 0.5, 1.0)];
        let goals = judge(&r);
        let g = find(&goals, "durable events/s, 1 session(s)");
        assert_eq!(
            (g.ours, g.peer, g.status),
            (Some(200_000.0), None, Status::NotRun)
        );
        assert_eq!(find(&goals, "lone subscriber").status, Status::NotRun);
        // Our own figures are judged without a peer.
        assert_eq!(
            find(&goals, "server CPU s per million events, 1 ").status,
            Status::Met
        );
        assert_eq!(
            find(&goals, "server CPU s per million events, 10 ").status,
            Status::NotRun
        );
    }

    #[test]
    fn rates_must_be_at_least_the_bound_and_latencies_at_most() {
        let mut r = run(false);
        r.throughput = vec![tp(1, 80_000.0, 20.0), tp(10, 120_000.0, 20.0)];
        r.fanout = vec![
            fan(1, 100.0, 2.0, 3.0),
            fan(100, 100.0, 3.0, 4.0),
            fan(1_000, 100.0, 9.0, 20.0),
        ];
        let mut p = peers();
        p.sqlite_append = vec![(1, 250, rate(100_000.0)), (10, 1000, rate(100_000.0))];
        p.jetstream_fanout = vec![
            js_fan(1, 100.0, 1.0, 1.5, 1000),
            js_fan(100, 100.0, 2.0, 4.0, 100_000),
            js_fan(1_000, 100.0, 9.0, 30.0, 1_000_000),
        ];
        r.peers = Some(p);
        let goals = judge(&r);

        // events/s: ours / peer; 0.8× is slower than SQLite, 1.2× faster.
        let slow = find(&goals, "durable events/s, 1 session(s)");
        assert!((slow.value.unwrap() - 0.8).abs() < 1e-9, "{slow:?}");
        assert_eq!(slow.status, Status::NotMet);
        assert_eq!(
            slow.peer_name.as_deref(),
            Some("SQLite WAL FULL, batches of 250")
        );
        let fast = find(&goals, "durable events/s, 10 session(s)");
        assert!((fast.value.unwrap() - 1.2).abs() < 1e-9, "{fast:?}");
        assert_eq!(fast.status, Status::Met);

        // latency: ours / peer too; 2× JetStream's p50 is not met, where a
        // 2× rate would be.
        let lone = find(&goals, "lone subscriber p50");
        assert_eq!((lone.ours, lone.peer), (Some(2.0), Some(1.0)));
        assert!((lone.value.unwrap() - 2.0).abs() < 1e-9, "{lone:?}");
        assert_eq!(lone.status, Status::NotMet);
        // p99, not p50: 4.0 / 4.0 is exactly the bound, met.
        let hundred = find(&goals, "fan-out p99, 100 subscribers");
        assert_eq!((hundred.ours, hundred.peer), (Some(4.0), Some(4.0)));
        assert_eq!(hundred.status, Status::Met);
        let thousand = find(&goals, "fan-out p99, 1000 subscribers");
        assert!((thousand.value.unwrap() - 20.0 / 30.0).abs() < 1e-9);
        assert_eq!(thousand.status, Status::Met);

        // CPU per million events: at most half of 22 s.
        assert_eq!(
            find(&goals, "server CPU s per million events, 1 ").status,
            Status::NotMet
        );
    }

    #[test]
    fn fixed_bounds_and_their_edges() {
        let mut r = run(false);
        r.throughput = vec![tp(100, 150_000.0, 11.0)];
        r.fanout = vec![fan(1_000, 500.0, 50.0, 100.0)];
        let goals = judge(&r);
        assert_eq!(
            find(&goals, "durable events/s end to end, 100").status,
            Status::Met
        );
        assert_eq!(
            find(&goals, "server CPU s per million events, 100 ").status,
            Status::Met
        );
        // Under 100 ms: 100.0 is not under.
        let stress = find(&goals, "stress: 1000 subscribers × 500/s");
        assert_eq!((stress.value, stress.status), (Some(100.0), Status::NotMet));
        r.fanout = vec![fan(1_000, 500.0, 50.0, 99.9)];
        r.throughput = vec![tp(100, 149_999.0, 11.1)];
        let goals = judge(&r);
        assert_eq!(find(&goals, "stress").status, Status::Met);
        assert_eq!(
            find(&goals, "durable events/s end to end, 100").status,
            Status::NotMet
        );
        assert_eq!(
            find(&goals, "server CPU s per million events, 100 ").status,
            Status::NotMet
        );
    }

    #[test]
    fn replay_against_both_peers() {
        let mut r = run(false);
        let measured = |per_sec: f64| replay::Measured {
            rate: rate(per_sec),
            server_cpu: 1.0,
            client_cpu: 1.0,
        };
        r.replay = Some(Replay {
            events: 1_000_000,
            build: rate(10_000.0),
            cold: measured(500_000.0),
            cold_dropped_os_cache: true,
            warm: measured(600_000.0),
        });
        let mut p = peers();
        p.jetstream_replay = Some(peer_replay(400_000.0, 800_000.0));
        p.sqlite_replay = Some(peer_replay(1_500_000.0, 1_000_000.0));
        r.peers = Some(p);
        let goals = judge(&r);
        let g = |m: &str| {
            let g = find(&goals, m);
            (g.value.map(|v| (v * 100.0).round() / 100.0), g.status)
        };
        assert_eq!(
            g("replay over gRPC, cold, vs JetStream"),
            (Some(1.25), Status::Met)
        );
        assert_eq!(
            g("replay over gRPC, warm, vs JetStream"),
            (Some(0.75), Status::NotMet)
        );
        assert_eq!(
            g("replay over gRPC, cold, vs SQLite"),
            (Some(0.33), Status::NotMet)
        );
        assert_eq!(
            g("replay over gRPC, warm, vs SQLite"),
            (Some(0.6), Status::Met)
        );
    }

    #[test]
    fn a_peer_figure_of_zero_gives_no_ratio_and_a_lossy_peer_is_noted() {
        let mut r = run(false);
        r.fanout = vec![fan(1, 100.0, 1.0, 2.0), fan(1_000, 500.0, 50.0, 80.0)];
        let mut p = peers();
        p.jetstream_fanout = vec![
            js_fan(1, 100.0, 0.0, 0.0, 0),
            js_fan(1_000, 500.0, 900.0, 2000.0, 999_000),
        ];
        r.peers = Some(p);
        let goals = judge(&r);
        let lone = find(&goals, "lone subscriber");
        assert_eq!((lone.value, lone.status), (None, Status::NoRatio));
        assert_eq!(
            lone.note.as_deref(),
            Some("JetStream received 0 of 1000 messages")
        );
        let stress = find(&goals, "stress");
        assert_eq!(stress.status, Status::Met);
        assert!(
            stress
                .note
                .as_deref()
                .unwrap()
                .contains("received 999000 of 1000000"),
            "{stress:?}"
        );
    }

    #[test]
    fn quick_sizes_judge_their_own_rows() {
        let mut r = run(true);
        r.fanout = vec![
            fan(1, 50.0, 1.0, 2.0),
            fan(20, 50.0, 1.0, 2.0),
            fan(20, 200.0, 1.0, 2.0),
        ];
        let goals = judge(&r);
        assert_eq!(
            find(&goals, "lone subscriber p50, 1 × 50/s").status,
            Status::NotRun
        );
        assert_eq!(
            find(&goals, "stress: 20 subscribers × 200/s").status,
            Status::Met
        );
        // --quick has no 100-session row.
        assert_eq!(
            find(&goals, "durable events/s end to end, 100").status,
            Status::NotRun
        );
    }
}
