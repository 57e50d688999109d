//! What is measured, in which order and with which counts, full or
//! `--quick`: our server first (its figures set the peers' payload size
//! and batch shape), then its throughput, fan-out and replay rows again on
//! PostgreSQL beside the raw PostgreSQL peer, then each other peer with the
//! same shape.

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
    /// Which fan-out rows the goals read (subscribers, lines per second).
    pub goal_rows: GoalRows,
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
                web: (5, 50.0, 25),
                deltas: typing_pairs(20, &[(0.0, 20)], 5),
                replay_events: 5_000,
                idle: vec![100],
                goal_rows: GoalRows {
                    lone: (1, 50.0),
                    crowds: vec![(20, 50.0)],
                    stress: (20, 200.0),
                },
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
                goal_rows: GoalRows {
                    lone: (1, 100.0),
                    crowds: vec![(100, 100.0), (1_000, 100.0)],
                    stress: (1_000, 500.0),
                },
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
    /// Fan-out latency.
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
    fn new(measure: String, on_postgres: f64, on_redb: Option<f64>, raw: Option<f64>) -> Self {
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
    // Our sessions' ids repeat from run to run: in a used database the rows
    // would count events of an earlier run. Refused before anything runs.
    if let Some(url) = args.store_url.as_ref().filter(|_| args.runs_postgres()) {
        let n = peers::postgres::tables(url).await;
        if n > 0 {
            eprintln!(
                "agent-harness-load: --store-url: the database holds {n} tables already; give it an empty one"
            );
            std::process::exit(2);
        }
    }
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

    let tp = throughput_rows(args, &sizes, &server, "").await;

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

    let fo = fanout_rows(args, &sizes, &server, "").await;

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
        Some(run_replay(server, &opts, sizes.replay_events, "", || {}).await)
    } else {
        server.stop();
        None
    };

    let postgres = if args.runs_postgres() {
        Some(
            run_postgres(
                args,
                &sizes,
                &opts,
                data.path(),
                (&tp, &fo, replay.as_ref()),
            )
            .await,
        )
    } else {
        None
    };

    let spawn = if args.runs("spawn") {
        progress("spawn: ours against the raw CLI, interleaved");
        Some(run_spawn(args).await)
    } else {
        None
    };

    let codex = if args.runs("codex") {
        progress(
            "codex: ours against codex app-server driven directly, interleaved; live sessions",
        );
        Some(run_codex(args).await)
    } else {
        None
    };

    let peers = if args.no_peers {
        None
    } else {
        Some(run_peers(args, &sizes, &tp, replay.as_ref(), data.path()).await)
    };

    let mut results = Results {
        quick: args.quick,
        sizes,
        loadavg: (load_start, loadavg()),
        throughput: tp,
        fanout: fo,
        deltas: typing,
        replay,
        idle: idle_rows,
        spawn,
        codex,
        peers,
        postgres,
        postgres_skipped: args.no_postgres,
        secs: t0.elapsed().as_secs_f64(),
        goals: Vec::new(),
    };
    results.goals = crate::goals::judge(&results);
    results
}

/// The spawn comparison: the real CLI against the scripted Messages API,
/// through our server and spawned directly.
async fn run_spawn(args: &Args) -> crate::ours::spawn::SpawnReport {
    use crate::ours::spawn::{SpawnOptions, measure};
    let opts = SpawnOptions {
        harness_bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        claude_bin: claude_bin(args),
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

/// The claude CLI the server is given (and the spawn comparison runs).
fn claude_bin(args: &Args) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    args.claude_bin
        .clone()
        .or_else(|| std::env::var_os("CLAUDE_BIN").map(Into::into))
        .unwrap_or_else(|| root.join("tests/tools/node_modules/.bin/claude"))
}

/// The Codex comparison: the real codex app-server against the scripted
/// Responses API, through our server and driven directly; then memory per
/// live Codex session.
async fn run_codex(args: &Args) -> crate::ours::spawn::codex::CodexReport {
    use crate::ours::spawn::codex::{CodexOptions, measure};
    let opts = CodexOptions {
        harness_bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        codex_bin: args
            .codex_bin
            .clone()
            .or_else(|| std::env::var_os("CODEX_BIN").map(Into::into))
            .unwrap_or_else(|| {
                panic!(
                    "the Codex comparison needs --codex-bin or CODEX_BIN (tests/setup.sh writes it)"
                )
            }),
        claude_bin: claude_bin(args),
        fake_api_bin: sibling("fake-messages-api"),
        sessions: args
            .codex_sessions
            .unwrap_or(if args.quick { 2 } else { 10 }),
        pause_before_send: std::time::Duration::from_millis(200),
    };
    for bin in [&opts.harness_bin, &opts.codex_bin, &opts.fake_api_bin] {
        assert!(
            bin.exists(),
            "{} is missing (build or install it)",
            bin.display()
        );
    }
    let rounds = args.codex_rounds.unwrap_or(if args.quick { 2 } else { 20 });
    measure(&opts, rounds).await
}

/// Our throughput rows; `on` names the store in the progress lines.
async fn throughput_rows(
    args: &Args,
    sizes: &Sizes,
    server: &Server,
    on: &str,
) -> Vec<throughput::Row> {
    let mut tp = Vec::new();
    for &s in sizes.sessions.iter().filter(|_| args.runs("throughput")) {
        progress(&format!("throughput{on}: {s} sessions"));
        tp.push(throughput::run(server, s, sizes.throughput_lines).await);
    }
    tp
}

/// Our fan-out rows, gRPC then grpc-web.
async fn fanout_rows(args: &Args, sizes: &Sizes, server: &Server, on: &str) -> Vec<fanout::Row> {
    fanout::prepare(server, "fanout").await;
    let mut fo = Vec::new();
    let web = std::iter::once((fanout::Transport::GrpcWeb, sizes.web));
    let rows = sizes.fanout.iter().map(|&r| (fanout::Transport::Grpc, r));
    for (transport, (n, rate, lines)) in rows.chain(web).filter(|_| args.runs("fanout")) {
        progress(&format!(
            "fan-out{on}: {n} {transport:?} subscribers at {rate}/s"
        ));
        fo.push(fanout::run(server, "fanout", transport, n, rate, lines).await);
    }
    fo
}

/// Writes a long log, restarts the server (calling `stopped` while it is
/// down), reads it back twice.
async fn run_replay(
    server: Server,
    opts: &ServerOptions,
    events: u64,
    on: &str,
    stopped: impl FnOnce(),
) -> Replay {
    progress(&format!("replay{on}: writing {events} events"));
    let (_, build) = replay::build(&server, "replay", events).await;
    server.stop();
    stopped();
    let dropped = crate::os::drop_page_cache();
    let server = Server::start(opts).await;
    // The stop ended the run (run_end): the head is read after the restart.
    let head = crate::ours::head(&mut server.connect().await, "replay").await;
    progress(&format!("replay{on}: cold"));
    let cold = replay::measure(&server, "replay", head).await;
    progress(&format!("replay{on}: warm"));
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

/// Our mean stored event, so every peer moves as many bytes per event.
/// Without a throughput row (`--only`), the mean the full runs measured.
fn payload(tp: &[throughput::Row]) -> usize {
    let measured = tp.iter().map(|r| r.event_bytes).fold(0.0, f64::max).round() as usize;
    if measured > 0 { measured } else { 795 }
}

/// The throughput, fan-out and replay rows on PostgreSQL (a throwaway
/// server unless `--store-url`), then the raw PostgreSQL peer on the same
/// server in the batch shapes our server committed there; `redb` holds the
/// same rows on redb, for the ratios.
async fn run_postgres(
    args: &Args,
    sizes: &Sizes,
    opts: &ServerOptions,
    dir: &std::path::Path,
    redb: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
) -> OnPostgres {
    use agent_harness_pg_temp::Cluster;
    let cluster = args.store_url.is_none().then(|| {
        progress("PostgreSQL: starting a throwaway server");
        tokio::task::block_in_place(Cluster::start)
    });
    let (url, database) = match (&args.store_url, &cluster) {
        (Some(url), _) => (
            url.clone(),
            agent_harness_server::store::redact_store_url(url),
        ),
        (None, Some(c)) => (
            c.fresh_database(),
            format!("a throwaway PostgreSQL {}, fsync on", version()),
        ),
        (None, None) => unreachable!("a cluster was started"),
    };
    // In the environment rather than argv, where `ps` would show a password.
    let mut env = opts.env.clone();
    env.push(("AGENT_HARNESS_STORE_URL".into(), url.clone().into()));
    let pg_opts = ServerOptions {
        data_dir: dir.join("data-postgres"),
        env,
        ..opts.clone()
    };
    // A cold read must find the database's own cache empty too, as a
    // restarted server finds redb's: a checkpoint (so the restart has no
    // log to replay), then a stop and a start.
    let restart = || {
        if let Some(c) = &cluster {
            tokio::task::block_in_place(|| {
                c.sql("postgres", "CHECKPOINT");
                c.kill_server();
                c.start_server();
            });
        }
    };
    let on = " on PostgreSQL";
    let server = Server::start(&pg_opts).await;
    let throughput = throughput_rows(args, sizes, &server, on).await;
    let fanout = fanout_rows(args, sizes, &server, on).await;
    let replay = if args.runs("replay") {
        Some(run_replay(server, &pg_opts, sizes.replay_events, on, restart).await)
    } else {
        server.stop();
        None
    };

    let mut raw_append = Vec::new();
    let mut raw_replay = None;
    if !args.no_peers {
        let payload = payload(if redb.0.is_empty() {
            &throughput
        } else {
            redb.0
        });
        // A database of its own on the throwaway server; the same one
        // (its own table) on a given one.
        let raw_url = cluster.as_ref().map_or(url.clone(), |c| {
            tokio::task::block_in_place(|| c.fresh_database())
        });
        for row in &throughput {
            let batch = row.batch.round().max(1.0) as usize;
            progress(&format!(
                "raw PostgreSQL: {} sessions, batches of {batch}",
                row.sessions
            ));
            let rate =
                peers::postgres::append(&raw_url, row.sessions, batch, row.rate.events, payload)
                    .await;
            raw_append.push((row.sessions, batch, rate));
        }
        if args.runs("replay") {
            progress("raw PostgreSQL: replay");
            let events = replay.as_ref().map_or(sizes.replay_events, |r| r.events);
            raw_replay =
                Some(peers::postgres::replay(&raw_url, events, payload, true, restart).await);
        }
    }
    if let Some(c) = &cluster {
        // Not left running (idle, but still a process) under the rows that follow.
        tokio::task::block_in_place(|| c.kill_server());
    }
    let ratios = ratios(
        redb,
        (&throughput, &fanout, replay.as_ref()),
        &raw_append,
        raw_replay.as_ref(),
    );
    OnPostgres {
        database,
        throughput,
        fanout,
        replay,
        raw_append,
        raw_replay,
        ratios,
    }
}

/// The installed PostgreSQL's major version (the directory name).
fn version() -> String {
    std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .max()
        .map_or_else(|| "?".into(), |v| v.to_string())
}

/// Each figure on PostgreSQL beside redb and raw PostgreSQL.
fn ratios(
    redb: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
    pg: (&[throughput::Row], &[fanout::Row], Option<&Replay>),
    raw_append: &[(usize, usize, Rate)],
    raw_replay: Option<&peers::Replay>,
) -> Vec<Ratio> {
    let mut out = Vec::new();
    for t in pg.0 {
        let on_redb = redb.0.iter().find(|r| r.sessions == t.sessions);
        let raw = raw_append.iter().find(|(s, _, _)| *s == t.sessions);
        out.push(Ratio::new(
            format!(
                "durable events/s, {} session(s){}",
                t.sessions,
                raw.map_or(String::new(), |(_, b, _)| format!(", batches of {b}"))
            ),
            t.rate.per_sec(),
            on_redb.map(|r| r.rate.per_sec()),
            raw.map(|(_, _, r)| r.per_sec()),
        ));
    }
    for f in pg.1 {
        let same = redb.1.iter().find(|r| {
            r.transport == f.transport && r.subscribers == f.subscribers && r.rate == f.rate
        });
        for (q, ours, theirs) in [
            ("p50", f.from_write.p50, same.map(|r| r.from_write.p50)),
            ("p99", f.from_write.p99, same.map(|r| r.from_write.p99)),
        ] {
            out.push(Ratio::new(
                format!(
                    "fan-out {q} ms, {}, {} subscribers × {}/s",
                    f.transport.name(),
                    f.subscribers,
                    f.rate
                ),
                ours,
                theirs,
                None,
            ));
        }
    }
    if let Some(rp) = pg.2 {
        out.push(Ratio::new(
            format!("replay written at events/s, {} events", rp.events),
            rp.build.per_sec(),
            redb.2.map(|r| r.build.per_sec()),
            None,
        ));
        out.push(Ratio::new(
            format!("replay events/s, cold, {} events", rp.events),
            rp.cold.rate.per_sec(),
            redb.2.map(|r| r.cold.rate.per_sec()),
            raw_replay.map(|r| r.cold.per_sec()),
        ));
        out.push(Ratio::new(
            format!("replay events/s, warm, {} events", rp.events),
            rp.warm.rate.per_sec(),
            redb.2.map(|r| r.warm.rate.per_sec()),
            raw_replay.map(|r| r.warm.per_sec()),
        ));
    }
    out
}

/// The peers, in the shapes of the rows of ours that ran: each peer row
/// runs only when its row of ours is asked for (`--only`).
async fn run_peers(
    args: &Args,
    sizes: &Sizes,
    tp: &[throughput::Row],
    replay: Option<&Replay>,
    dir: &std::path::Path,
) -> Peers {
    let payload = payload(tp);
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
    let fanout_rows = if args.runs("fanout") {
        sizes.fanout.clone()
    } else {
        Vec::new()
    };
    let (js_lines, js_default_lines) = (sizes.jetstream_lines, sizes.throughput_lines);
    let dir = dir.to_path_buf();
    let (jetstream_publish, jetstream_publish_default_sync, jetstream_fanout, jetstream_replay) =
        tokio::task::spawn_blocking(move || {
            use peers::nats::{Nats, SyncPolicy};
            let mut publish = Vec::new();
            let mut fanout = Vec::new();
            if !sessions.is_empty() || !fanout_rows.is_empty() {
                let durable = Nats::start_in(&dir, SyncPolicy::Always);
                for &s in &sessions {
                    progress(&format!("JetStream (fsync always): {s} publishers"));
                    let per = (js_lines / s as u64).max(1);
                    publish.push((s, durable.publish(s, per, payload)));
                }
                for &(n, rate, lines) in &fanout_rows {
                    progress(&format!("JetStream: {n} subscribers at {rate}/s"));
                    let f = durable.fanout_detail(
                        peers::nats::ConsumerKind::Push,
                        n,
                        rate,
                        lines,
                        payload,
                    );
                    fanout.push(JetStreamFanout {
                        subscribers: n,
                        rate,
                        run: f,
                    });
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
            (publish, default_sync, fanout, replay)
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
