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
        lone_after_throughput: None,
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
        rounds: 1,
        samples: Default::default(),
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
            rounds: 1,
            samples: Vec::new(),
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

/// A replay of ours at `per_sec`.
fn measured(per_sec: f64) -> replay::Measured {
    replay::Measured {
        rate: rate(per_sec),
        server_cpu: 1.0,
        client_cpu: 1.0,
    }
}

#[test]
fn replay_against_both_peers() {
    let mut r = run(false);
    r.replay = Some(Replay {
        events: 1_000_000,
        build: rate(10_000.0),
        cold: measured(500_000.0),
        cold_dropped_os_cache: true,
        warm: measured(600_000.0),
        ceiling: None,
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
fn a_replay_goal_the_grpc_ceiling_misses_too_is_past_the_ceiling() {
    let mut r = run(false);
    let mut p = peers();
    p.jetstream_replay = Some(peer_replay(400_000.0, 400_000.0));
    p.sqlite_replay = Some(peer_replay(1_000_000.0, 2_500_000.0));
    r.peers = Some(p);
    let with_ceiling = |r: &mut crate::plan::Results, ceiling: f64| {
        r.replay = Some(Replay {
            events: 1_000_000,
            build: rate(10_000.0),
            cold: measured(700_000.0),
            cold_dropped_os_cache: true,
            warm: measured(800_000.0),
            ceiling: Some(measured(ceiling)),
        });
        judge(r)
    };

    // Warm: ours 0.32× SQLite; the ceiling 0.40×: past it.
    let goals = with_ceiling(&mut r, 1_000_000.0);
    let warm = find(&goals, "replay over gRPC, warm, vs SQLite");
    assert_eq!(warm.status, Status::PastCeiling);
    assert_eq!(
        warm.note.as_deref(),
        Some("gRPC ceiling 1000000/s, 0.40× the peer; ours is 0.80× the ceiling")
    );
    // A met goal stays met, with the note.
    let cold = find(&goals, "replay over gRPC, cold, vs SQLite");
    assert_eq!(cold.status, Status::Met);
    assert!(cold.note.as_deref().unwrap().starts_with("gRPC ceiling"));

    // A ceiling that meets the bound leaves the miss ours: not met.
    let goals = with_ceiling(&mut r, 1_300_000.0);
    let warm = find(&goals, "replay over gRPC, warm, vs SQLite");
    assert_eq!(warm.status, Status::NotMet);

    // Without a ceiling (PostgreSQL's run, an older JSON) nothing changes.
    r.replay.as_mut().unwrap().ceiling = None;
    let goals = judge(&r);
    let warm = find(&goals, "replay over gRPC, warm, vs SQLite");
    assert_eq!((warm.status, warm.note.as_deref()), (Status::NotMet, None));
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
