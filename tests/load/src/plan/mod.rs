//! What is measured, in which order and with which counts, full or
//! `--quick`: our server first (its figures set the peers' payload size
//! and batch shape), then its throughput, fan-out and replay rows again on
//! PostgreSQL beside the raw PostgreSQL peer, then each other peer with the
//! same shape.

mod agents;
mod on_postgres;
mod peer_rows;
mod results;
mod sizes;

use std::time::Instant;

use crate::Args;
use crate::ours::ceiling::{self, Ceiling};
use crate::ours::{deltas, fanout, idle, replay, throughput};
use crate::peers;
use crate::server::{Server, ServerOptions, sibling};

use self::agents::{run_codex, run_spawn};
use self::on_postgres::run_postgres;
use self::peer_rows::{Beside, run_peers};
pub use self::results::{JetStreamFanout, OnPostgres, Peers, Ratio, Replay, Results};
pub use self::sizes::Sizes;

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
    let mut sizes = Sizes::new(args.quick);
    if !args.sessions.is_empty() {
        sizes.sessions.clone_from(&args.sessions);
    }
    if !args.subscribers.is_empty() {
        sizes.keep_fanout(&args.subscribers);
    }
    if let Some(n) = args.throughput_lines {
        sizes.throughput_lines = n;
    }
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

    let mut beside = Beside::default();
    let peers_beside = (!args.no_peers).then_some((&mut beside, data.path()));
    let tp = throughput_rows(args, &sizes, &server, "", peers_beside).await;

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

    // The lone row once more on the server that took the throughput rows:
    // what a server with a history gives (reported, not judged).
    let lone_after_throughput = if args.runs("fanout") && !tp.is_empty() {
        lone_after(&sizes, &server).await
    } else {
        None
    };
    let fanout_beside = (!args.no_peers).then(|| (&mut beside, data.path(), payload(&tp)));
    let fo = fresh_fanout_rows(
        args,
        &sizes,
        (&opts, data.path().join("data-fanout")),
        "",
        fanout_beside,
    )
    .await;

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
        Some(run_replay(server, &opts, sizes.replay_events, true, "", || {}).await)
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
        Some(run_peers(args, &sizes, &tp, beside, replay.as_ref(), data.path()).await)
    };

    let mut results = Results {
        quick: args.quick,
        sizes,
        loadavg: (load_start, loadavg()),
        throughput: tp,
        fanout: fo,
        lone_after_throughput,
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

/// Our throughput rows; `on` names the store in the progress lines.
/// Our throughput rows; with `beside`, each followed at once by the peer
/// rows in its shape ([`Beside`]).
async fn throughput_rows(
    args: &Args,
    sizes: &Sizes,
    server: &Server,
    on: &str,
    mut beside: Option<(&mut Beside, &std::path::Path)>,
) -> Vec<throughput::Row> {
    let mut tp = Vec::new();
    for &s in sizes.sessions.iter().filter(|_| args.runs("throughput")) {
        progress(&format!("throughput{on}: {s} sessions"));
        // What the rows before left in the page cache is written out first.
        nix::unistd::sync();
        let row = throughput::run(server, s, sizes.throughput_lines).await;
        if let Some((peers, dir)) = beside.as_mut() {
            peers.run(&row, dir);
        }
        tp.push(row);
    }
    tp
}

/// Our fan-out rows on a server of their own, started for them with
/// `opts` in `data_dir` and stopped after them: as JetStream's rows run on a
/// server of theirs, which has no history. On the server that took the
/// throughput rows (gigabytes written, its heap and store grown) the lone
/// row's p50 was up to 0.22 ms higher in four runs of six, and up to 0.04
/// ms lower in two ([`lone_after`] measures that row there).
async fn fresh_fanout_rows(
    args: &Args,
    sizes: &Sizes,
    (opts, data_dir): (&ServerOptions, std::path::PathBuf),
    on: &str,
    beside: Option<(&mut Beside, &std::path::Path, usize)>,
) -> Vec<fanout::Row> {
    if !args.runs("fanout") {
        return Vec::new();
    }
    let server = Server::start(&ServerOptions {
        data_dir,
        ..opts.clone()
    })
    .await;
    let rows = fanout_rows(args, sizes, &server, on, beside).await;
    server.stop();
    rows
}

/// The lone fan-out row on `server`, the one that took the throughput
/// rows, when the sizes have a lone row.
async fn lone_after(sizes: &Sizes, server: &Server) -> Option<fanout::Row> {
    let (n, rate) = sizes.goal_rows.lone;
    let &(_, _, lines) = sizes
        .fanout
        .iter()
        .find(|&&(s, r, _)| (s, r) == (n, rate))?;
    progress(&format!(
        "fan-out: {n} subscriber at {rate}/s, on the server that took the throughput rows"
    ));
    fanout::prepare(server, "lone-after").await;
    nix::unistd::sync();
    Some(
        fanout::run(
            server,
            "lone-after",
            fanout::Transport::Grpc,
            n,
            rate,
            lines,
        )
        .await,
    )
}

/// Our fan-out rows, gRPC then grpc-web; with `beside` (its directory and
/// the payload), each gRPC row followed at once by JetStream's in its shape
/// ([`Beside`]).
async fn fanout_rows(
    args: &Args,
    sizes: &Sizes,
    server: &Server,
    on: &str,
    mut beside: Option<(&mut Beside, &std::path::Path, usize)>,
) -> Vec<fanout::Row> {
    fanout::prepare(server, "fanout").await;
    let mut fo = Vec::new();
    let web = sizes.web.map(|r| (fanout::Transport::GrpcWeb, r));
    let rows = sizes.fanout.iter().map(|&r| (fanout::Transport::Grpc, r));
    for (transport, (n, rate, lines)) in rows.chain(web).filter(|_| args.runs("fanout")) {
        progress(&format!(
            "fan-out{on}: {n} {transport:?} subscribers at {rate}/s"
        ));
        // A row judged against JetStream's runs in turns, each followed by
        // JetStream's round of the same size, and each side's samples are
        // pooled: the two sides share the machine's drift over the row.
        let against = transport == fanout::Transport::Grpc && beside.is_some();
        let rounds = if against && sizes.goal_rows.against_jetstream(n, rate) {
            sizes.rounds
        } else {
            1
        };
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            // As before JetStream's rounds: what the throughput rows left
            // unwritten in the page cache (gigabytes) is written out first,
            // or the row's syncs queue behind it.
            nix::unistd::sync();
            let turn = lines / rounds as u64;
            ours.push(fanout::run(server, "fanout", transport, n, rate, turn).await);
            if let (true, Some((peers, dir, payload))) = (against, beside.as_mut()) {
                theirs.push(peers.jetstream_fanout_round(
                    dir,
                    (n, rate, turn),
                    *payload,
                    rounds > 1,
                ));
            }
        }
        let mut row = fanout::Row::pool(ours);
        // Pooled: the samples are not kept for the rest of the run.
        row.samples = Default::default();
        fo.push(row);
        if let (false, Some((peers, _, _))) = (theirs.is_empty(), beside.as_mut()) {
            peers.jetstream_fanout(n, rate, theirs);
        }
    }
    if let Some((peers, _, _)) = beside {
        peers.fanout_done();
    }
    fo
}

/// Writes a long log, restarts the server (calling `stopped` while it is
/// down), reads it back twice, then (`with_ceiling`) once more from a
/// server that holds the messages in memory.
async fn run_replay(
    server: Server,
    opts: &ServerOptions,
    events: u64,
    with_ceiling: bool,
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
    let head = crate::ours::head(&mut server.connect().await.rpc, "replay").await;
    progress(&format!("replay{on}: cold"));
    let cold = replay::measure(&server, "replay", head).await;
    progress(&format!("replay{on}: warm"));
    let warm = replay::measure(&server, "replay", head).await;
    let ceiling = if with_ceiling {
        progress(&format!(
            "replay{on}: the ceiling (the same messages from a server that holds them in memory)"
        ));
        let ceiling = Ceiling::start(&server, "replay");
        progress(&format!(
            "replay{on}: the ceiling holds {} messages, {:.1} MB",
            ceiling.messages,
            ceiling.bytes as f64 / 1e6
        ));
        Some(ceiling::measure(&ceiling, "replay", head).await)
    } else {
        None
    };
    server.stop();
    Replay {
        events: head,
        build,
        cold,
        cold_dropped_os_cache: dropped,
        warm,
        ceiling,
    }
}

/// Our mean stored event, so every peer moves as many bytes per event.
/// Without a throughput row (`--only`), the mean the full runs measured.
fn payload(tp: &[throughput::Row]) -> usize {
    let measured = tp.iter().map(|r| r.event_bytes).fold(0.0, f64::max).round() as usize;
    if measured > 0 { measured } else { 795 }
}
