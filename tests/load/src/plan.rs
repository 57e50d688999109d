//! What is measured, in which order and with which counts, full or
//! `--quick`: our server first (its figures set the peers' payload size
//! and batch shape), then each peer with the same shape.

use std::time::Instant;

use serde::Serialize;

use crate::Args;
use crate::ours::deltas::Spec;
use crate::ours::{deltas, fanout, idle, replay, throughput};
use crate::peers;
use crate::server::{Server, ServerOptions, sibling};
use crate::stats::Rate;

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
    pub web: (usize, f64, u64),
    /// Live-typing rows, in the order run.
    pub deltas: Vec<Spec>,
    /// Events in the replayed log.
    pub replay_events: u64,
    /// Idle subscriber counts for the memory figure.
    pub idle: Vec<usize>,
}

impl Sizes {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                throughput_lines: 2_000,
                jetstream_lines: 200,
                sessions: vec![1, 10],
                fanout: vec![(1, 50.0, 25), (20, 50.0, 25)],
                web: (5, 50.0, 25),
                deltas: typing_pairs(20, &[(0.0, 20)], 5),
                replay_events: 5_000,
                idle: vec![100],
            }
        } else {
            Self {
                throughput_lines: 100_000,
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
                web: (100, 100.0, 1_000),
                // The row: 1,000 subscribers, the stand-in at full
                // speed (the server falls behind: the delays are queueing);
                // then at a fast model's typing speed, 5 messages/s of 20
                // fragments (100 text deltas/s), 20 s.
                deltas: typing_pairs(1_000, &[(0.0, 1_000), (5.0, 100)], 20),
                replay_events: 1_000_000,
                idle: vec![1_000, 10_000],
            }
        }
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
    /// Fan-out latency.
    pub fanout: Vec<fanout::Row>,
    /// Live typing: fragment latency, and the log events' with and without deltas.
    pub deltas: Vec<deltas::Row>,
    /// Replay over gRPC.
    pub replay: Option<Replay>,
    /// Memory per idle subscriber.
    pub idle: Vec<idle::Row>,
    /// Start → run_ready and Send → first content, ours against the raw CLI.
    pub spawn: Option<crate::ours::spawn::SpawnReport>,
    /// The peers, when run.
    pub peers: Option<Peers>,
    /// Wall time of the whole run, seconds.
    pub secs: f64,
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
    /// SQLite replay of the same number of events.
    pub sqlite_replay: peers::sqlite::Replay,
    /// Raw write + fdatasync, per batch size: a growing file, and a
    /// prewritten one overwritten in place (as redb and SQLite's WAL mostly do).
    pub fsync: Vec<(usize, Rate, Rate)>,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn progress(what: &str) {
    eprintln!("[{}] {what}", chrono_like_now());
}

fn chrono_like_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

/// Runs everything `args` asks for.
pub async fn run(args: &Args) -> Results {
    let t0 = Instant::now();
    let sizes = Sizes::new(args.quick);
    let load_start = loadavg();
    let data = tempfile::tempdir().expect("tempdir");
    let opts = ServerOptions {
        bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        data_dir: data.path().join("data"),
        claude_bin: args.cli_bin.clone().unwrap_or_else(|| sibling("load-cli")),
        env: Vec::new(),
        // Replay of the whole long log in one Subscribe, and the process
        // of every fan-out session kept alive between its turns.
        args: ["--max-replay", "2000000", "--idle-timeout", "1h"]
            .iter()
            .map(Into::into)
            .collect(),
    };
    for p in [&opts.bin, &opts.claude_bin] {
        assert!(p.exists(), "{} is missing (build it first)", p.display());
    }
    let server = Server::start(&opts).await;

    let mut tp = Vec::new();
    for &s in sizes.sessions.iter().filter(|_| args.runs("throughput")) {
        progress(&format!("throughput: {s} sessions"));
        tp.push(throughput::run(&server, s, sizes.throughput_lines).await);
    }

    // Idle memory on fresh servers: RSS deltas on a server that already
    // moved data measure the allocator's reuse of freed memory, not the cost.
    let mut idle_rows = Vec::new();
    for &n in sizes.idle.iter().filter(|_| args.runs("idle")) {
        progress(&format!("memory: {n} idle subscribers (fresh server)"));
        let dir = tempfile::tempdir_in(data.path()).expect("tempdir");
        let fresh = Server::start(&ServerOptions {
            data_dir: dir.path().join("data"),
            ..opts.clone()
        })
        .await;
        fanout::prepare(&fresh, "idle").await;
        idle_rows.push(idle::run(&fresh, "idle", n).await);
        fresh.stop();
    }

    fanout::prepare(&server, "fanout").await;
    let mut fo = Vec::new();
    let web = std::iter::once((fanout::Transport::GrpcWeb, sizes.web));
    let rows = sizes.fanout.iter().map(|&r| (fanout::Transport::Grpc, r));
    for (transport, (n, rate, lines)) in rows.chain(web).filter(|_| args.runs("fanout")) {
        progress(&format!(
            "fan-out: {n} {transport:?} subscribers at {rate}/s"
        ));
        fo.push(fanout::run(&server, "fanout", transport, n, rate, lines).await);
    }

    // Each row on a fresh server: its RSS peak is its own.
    let mut typing = Vec::new();
    for &spec in sizes.deltas.iter().filter(|_| args.runs("deltas")) {
        progress(&format!(
            "live typing: {} subscribers, deltas {}, {} messages × {} fragments at {}/s (fresh server)",
            spec.subscribers,
            if spec.deltas { "on" } else { "off" },
            spec.messages,
            spec.frags,
            spec.rate
        ));
        let dir = tempfile::tempdir_in(data.path()).expect("tempdir");
        let fresh = Server::start(&ServerOptions {
            data_dir: dir.path().join("data"),
            ..opts.clone()
        })
        .await;
        fanout::prepare(&fresh, "typing").await;
        typing.push(deltas::run(&fresh, "typing", spec).await);
        fresh.stop();
    }

    let replay = if args.runs("replay") {
        Some(run_replay(server, &opts, sizes.replay_events).await)
    } else {
        server.stop();
        None
    };

    let spawn = if args.runs("spawn") {
        progress("spawn: ours against the raw CLI, interleaved");
        Some(run_spawn(args).await)
    } else {
        None
    };

    let peers = if args.no_peers {
        None
    } else {
        Some(run_peers(&sizes, &tp, replay.as_ref(), data.path()).await)
    };

    Results {
        quick: args.quick,
        sizes,
        loadavg: (load_start, loadavg()),
        throughput: tp,
        fanout: fo,
        deltas: typing,
        replay,
        idle: idle_rows,
        spawn,
        peers,
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// The spawn comparison: the real CLI against the scripted Messages API,
/// through our server and spawned directly.
async fn run_spawn(args: &Args) -> crate::ours::spawn::SpawnReport {
    use crate::ours::spawn::{SpawnOptions, measure};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let opts = SpawnOptions {
        harness_bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        claude_bin: args
            .claude_bin
            .clone()
            .or_else(|| std::env::var_os("CLAUDE_BIN").map(Into::into))
            .unwrap_or_else(|| root.join("tests/tools/node_modules/.bin/claude")),
        fake_api_bin: sibling("fake-messages-api"),
        server_args: Vec::new(),
        tmp_dir: None,
        data_dir_in: args.spawn_data_dir.clone(),
        pause_before_send: std::time::Duration::from_millis(200),
    };
    for bin in [&opts.harness_bin, &opts.claude_bin, &opts.fake_api_bin] {
        assert!(
            bin.exists(),
            "{} is missing (build or install it)",
            bin.display()
        );
    }
    let rounds = args.spawn_rounds.unwrap_or(if args.quick { 2 } else { 20 });
    measure(&opts, rounds).await
}

/// Writes a long log, restarts the server, reads it back twice.
async fn run_replay(server: Server, opts: &ServerOptions, events: u64) -> Replay {
    progress(&format!("replay: writing {events} events"));
    let (_, build) = replay::build(&server, "replay", events).await;
    server.stop();
    let dropped = crate::os::drop_page_cache();
    let server = Server::start(opts).await;
    // The stop ended the run (run_end): the head is read after the restart.
    let head = crate::ours::head(&mut server.connect().await, "replay").await;
    progress("replay: cold");
    let cold = replay::measure(&server, "replay", head).await;
    progress("replay: warm");
    let warm = replay::measure(&server, "replay", head).await;
    server.stop();
    Replay {
        events: head,
        build,
        cold,
        cold_dropped_os_cache: dropped,
        warm,
    }
}

async fn run_peers(
    sizes: &Sizes,
    tp: &[throughput::Row],
    replay: Option<&Replay>,
    dir: &std::path::Path,
) -> Peers {
    // Our mean stored event, so every peer moves as many bytes per event.
    // Without a throughput row (`--only`), the mean the full runs measured.
    let measured = tp.iter().map(|r| r.event_bytes).fold(0.0, f64::max).round() as usize;
    let payload = if measured > 0 { measured } else { 795 };
    let mut sqlite_append = Vec::new();
    let mut fsync = Vec::new();
    for row in tp {
        let batch = row.batch.round().max(1.0) as usize;
        progress(&format!(
            "SQLite: {} sessions, batches of {batch}",
            row.sessions
        ));
        let d = tempfile::tempdir_in(dir).expect("tempdir");
        sqlite_append.push((
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
        fsync.push((batch, grow, prewritten));
    }
    progress("SQLite: replay");
    let d = tempfile::tempdir_in(dir).expect("tempdir");
    let events = replay.map(|r| r.events).unwrap_or(sizes.replay_events);
    let sqlite_replay = peers::sqlite::replay(d.path(), events, payload);

    let sessions = if tp.is_empty() {
        sizes.sessions.clone()
    } else {
        tp.iter().map(|r| r.sessions).collect()
    };
    let (js_lines, js_default_lines, fanout_rows) = (
        sizes.jetstream_lines,
        sizes.throughput_lines,
        sizes.fanout.clone(),
    );
    let dir = dir.to_path_buf();
    let (jetstream_publish, jetstream_publish_default_sync, jetstream_fanout) =
        tokio::task::spawn_blocking(move || {
            use peers::nats::{Nats, SyncPolicy};
            let durable = Nats::start_in(&dir, SyncPolicy::Always);
            let mut publish = Vec::new();
            for &s in &sessions {
                progress(&format!("JetStream (fsync always): {s} publishers"));
                let per = (js_lines / s as u64).max(1);
                publish.push((s, durable.publish(s, per, payload)));
            }
            let mut fanout = Vec::new();
            for &(n, rate, lines) in &fanout_rows {
                progress(&format!("JetStream: {n} subscribers at {rate}/s"));
                let f =
                    durable.fanout_detail(peers::nats::ConsumerKind::Push, n, rate, lines, payload);
                fanout.push(JetStreamFanout {
                    subscribers: n,
                    rate,
                    run: f,
                });
            }
            drop(durable);
            let fast = Nats::start_in(&dir, SyncPolicy::Default);
            let mut default_sync = Vec::new();
            for &s in &sessions {
                progress(&format!(
                    "JetStream (default sync, not durable): {s} publishers"
                ));
                let per = (js_default_lines / s as u64).max(1);
                default_sync.push((s, fast.publish(s, per, payload)));
            }
            (publish, default_sync, fanout)
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
        fsync,
    }
}
