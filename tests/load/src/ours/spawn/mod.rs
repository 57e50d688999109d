//! What our server adds over spawning the real `claude` CLI directly, both
//! talking to the scripted Messages API (`fake-messages-api`) on loopback:
//!
//! - **Start → run_ready**. Ours: from sending `Start` to the `run_ready`
//!   event arriving on a Subscribe stream opened (and caught up) before it;
//!   `StartResponse` carries only the run and process ids, so the stream is
//!   where the CLI's boot shows. Raw: from spawning `claude` with the
//!   interactive adapter's argv and environment and writing the same first
//!   user line to its stdin, to its `system/init` line on stdout.
//! - **Send → first content**. On the live process (second turn). Ours:
//!   from sending `Send` to the first `content` event on the stream. Raw:
//!   from writing the user line to the live process's stdin to its first
//!   `assistant` line.
//!
//! One discarded warm-up of each, then the rounds interleave (ours, raw,
//! raw, ours, ...) so drift on a shared machine hits both alike and neither
//! always runs right after the other. Before the second input the live
//! process sits idle for [`SpawnOptions::pause_before_send`]. Ours and
//! raw share one HOME and one working directory, so the CLI's own state
//! (config, transcripts) grows alike for both. Every round checks what it
//! timed (the right session and run, the scripted reply, no error) and
//! panics with what it saw otherwise; nothing asserts on timings.
//!
//! For both, the CLI's own on-CPU and run-queue wait time over the boot and
//! over the second turn (`/proc/PID/task/*/schedstat`): the same work
//! should cost the same CPU either way.
//!
//! Ours also reports where its time goes, from the server's own event
//! timestamps (the log writer stamps a batch just before its durable
//! commit): Start → run_start stamped, run_start → run_ready stamped (the
//! run_start commit, the spawn, the CLI's boot), run_ready stamped → client
//! (its commit, publish, the stream), and likewise for a Send.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::adapter::UserInput;
use agent_harness_server::adapter::claude::interactive::default_args;
use agent_harness_server::adapter::claude::stream_json::user_message_line;
use agent_harness_server::supervise::{DEFAULT_STRIP_ENV, RUN_MARKER_ENV};
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tonic::transport::Channel;

use crate::server::{Server, ServerOptions, metric};
use crate::stats::Latency;

pub mod codex;
mod ours;
mod raw;

use ours::{OursSample, ours_round};
use raw::{Sched, raw_round};

/// Longest wait for any one step (boot, a turn, an exit).
const WAIT: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnOptions {
    /// The `agent-harness` binary (release for real figures).
    pub harness_bin: PathBuf,
    /// The real `claude` CLI.
    pub claude_bin: PathBuf,
    /// `fake-messages-api` (`cargo build -p agent-harness-fake-api`).
    pub fake_api_bin: PathBuf,
    /// Further `serve` arguments (e.g. `--log debug`).
    pub server_args: Vec<OsString>,
    /// Where the temporary HOME, working directory and data dir go;
    /// `None`: the system's.
    pub tmp_dir: Option<PathBuf>,
    /// Where the server's data dir goes instead, when set (its disk sets
    /// the commit cost, e.g. `/dev/shm` to take the fsync out).
    pub data_dir_in: Option<PathBuf>,
    /// How long the live process sits idle after its first turn before the
    /// second input, in both cases: a person's next message comes seconds
    /// after the reply, not the instant the turn ends. Right after its
    /// `result` line the CLI (and, for ours, the server recording the turn)
    /// is still busy; without a pause the two cases start the second turn
    /// from different states, as ours' input lands a few ms later.
    pub pause_before_send: Duration,
}

/// Ours against raw for one measurement.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Compared {
    /// Through the server.
    pub ours: Latency,
    /// The CLI spawned directly.
    pub raw: Latency,
    /// ours p50 − raw p50, ms.
    pub overhead_ms: f64,
    /// The median of each round's ours − raw, ms: less moved by drift
    /// between rounds than the difference of the medians.
    pub paired_median_ms: f64,
}

impl Compared {
    /// A markdown table, one row per (measurement, figures): ours and
    /// raw p50/p99, the overhead and the paired median.
    pub fn print_table(rows: &[(&str, &Compared)]) {
        println!(
            "| measurement | ours p50 ms | ours p99 ms | raw p50 ms | raw p99 ms | overhead ms (p50) | paired median ms |"
        );
        println!("|---|--:|--:|--:|--:|--:|--:|");
        for (name, c) in rows {
            println!(
                "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.1} | {:+.1} |",
                c.ours.p50, c.ours.p99, c.raw.p50, c.raw.p99, c.overhead_ms, c.paired_median_ms
            );
        }
    }

    fn from_ms(ours: impl Iterator<Item = f64>, raw: impl Iterator<Item = f64>) -> Self {
        let d = |ms: f64| Duration::from_secs_f64(ms.max(0.0) / 1e3);
        Self::new(ours.map(d).collect(), raw.map(d).collect())
    }

    fn new(ours: Vec<Duration>, raw: Vec<Duration>) -> Self {
        let mut paired: Vec<f64> = ours
            .iter()
            .zip(&raw)
            .map(|(o, r)| (o.as_secs_f64() - r.as_secs_f64()) * 1e3)
            .collect();
        paired.sort_by(f64::total_cmp);
        let paired_median_ms = match paired.len() {
            0 => 0.0,
            n if n % 2 == 1 => paired[n / 2],
            n => (paired[n / 2 - 1] + paired[n / 2]) / 2.0,
        };
        let (ours, raw) = (Latency::from_samples(ours), Latency::from_samples(raw));
        Self {
            ours,
            raw,
            overhead_ms: ours.p50 - raw.p50,
            paired_median_ms,
        }
    }
}

/// Where ours spends its time, from the events' server timestamps (the
/// log writer stamps a batch just before committing it durably).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Breakdown {
    /// Start sent → run_start stamped (the RPC, the checks, the queue to
    /// the log writer).
    pub start_to_run_start: Latency,
    /// run_start stamped → run_ready stamped: the run_start commit, the
    /// spawn, the CLI's boot, reading and normalizing its init line.
    pub run_start_to_run_ready: Latency,
    /// run_ready stamped → received: its commit, publish, the stream.
    pub run_ready_to_client: Latency,
    /// Send sent → input_sent stamped (the line is written to stdin just
    /// before).
    pub send_to_input_sent: Latency,
    /// content stamped → received.
    pub content_to_client: Latency,
    /// The server's mean durable commit (transaction and fsync) over the
    /// whole run, from `/metrics`: a Start waits for two (run_start before
    /// the spawn, run_ready before it is published), a Send for one.
    pub commit_mean_ms: f64,
    /// What the server's own stamps put on it per Start: Start sent →
    /// run_start stamped, plus `commit_mean_ms` for the run_start commit
    /// (which has no stamp of its own), plus run_ready stamped → received.
    /// Leaves out the hand-over from that commit to the spawn (the spawn
    /// itself is the same call raw makes).
    pub server_share_start: Latency,
    /// Likewise per Send: Send sent → input_sent stamped, plus content
    /// stamped → received.
    pub server_share_send: Latency,
}

/// What the CLI process did, from its threads' `/proc/PID/task/*/schedstat`
/// (threads that have exited are not counted): the same work should cost
/// the same CPU either way, and the run-queue wait shows how much of a
/// difference the shared machine's load makes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CliWork {
    /// On-CPU ms from its start to its init line being seen (ours: when
    /// run_ready reached the client, so a little more).
    pub boot_cpu: Compared,
    /// Ms runnable but waiting for a CPU over the same stretch.
    pub boot_wait: Compared,
    /// On-CPU ms from the second input to its first content being seen.
    pub turn_cpu: Compared,
    /// Ms runnable but waiting for a CPU over the same stretch.
    pub turn_wait: Compared,
}

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct SpawnReport {
    /// Rounds timed (each: one of ours, one raw), after one warm-up each.
    pub rounds: usize,
    /// [`SpawnOptions::pause_before_send`], ms.
    pub pause_before_send_ms: f64,
    /// Start → run_ready vs spawn → system/init.
    pub start_to_ready: Compared,
    /// Send → first content vs stdin write → first assistant line.
    pub send_to_content: Compared,
    /// Ours, step by step.
    pub breakdown: Breakdown,
    /// What the CLI process itself did, ours vs raw.
    pub cli: CliWork,
    /// `/proc/loadavg` (1, 5, 15 min) before and after.
    pub loadavg_before: [f64; 3],
    pub loadavg_after: [f64; 3],
}

impl SpawnReport {
    /// A small markdown table, then ours step by step.
    pub fn print(&self) {
        let l = |a: [f64; 3]| format!("{:.2} {:.2} {:.2}", a[0], a[1], a[2]);
        println!(
            "### Spawn overhead: ours (agent-harness) vs the real CLI spawned directly\n\n\
             {} interleaved rounds (ours, raw, raw, ours, ...), fake Messages API on loopback, \
             second input {:.0} ms after the first turn's end; load average {} before, {} after.\n",
            self.rounds,
            self.pause_before_send_ms,
            l(self.loadavg_before),
            l(self.loadavg_after)
        );
        Compared::print_table(&[
            ("Start → run_ready", &self.start_to_ready),
            ("Send → first content", &self.send_to_content),
        ]);
        let b = &self.breakdown;
        println!("\n| ours, step (server event timestamps) | p50 ms | p99 ms |");
        println!("|---|--:|--:|");
        for (name, l) in [
            ("Start sent → run_start stamped", &b.start_to_run_start),
            (
                "run_start stamped → run_ready stamped (commit, spawn, CLI boot)",
                &b.run_start_to_run_ready,
            ),
            ("run_ready stamped → client", &b.run_ready_to_client),
            ("Send sent → input_sent stamped", &b.send_to_input_sent),
            ("content stamped → client", &b.content_to_client),
        ] {
            println!("| {name} | {:.2} | {:.2} |", l.p50, l.p99);
        }
        println!(
            "| durable commit, mean over the run (/metrics) | {:.2} | |",
            b.commit_mean_ms
        );
        for (name, l) in [
            (
                "server's share of Start → run_ready (stamps + one mean commit)",
                &b.server_share_start,
            ),
            (
                "server's share of Send → first content",
                &b.server_share_send,
            ),
        ] {
            println!("| {name} | {:.2} | {:.2} |", l.p50, l.p99);
        }
        let c = &self.cli;
        println!(
            "\n| the CLI process (schedstat, its threads) | ours p50 ms | raw p50 ms | paired median ms |"
        );
        println!("|---|--:|--:|--:|");
        for (name, x) in [
            ("boot (to init): on CPU", &c.boot_cpu),
            ("boot: waiting for a CPU", &c.boot_wait),
            ("second turn (to first content): on CPU", &c.turn_cpu),
            ("second turn: waiting for a CPU", &c.turn_wait),
        ] {
            println!(
                "| {name} | {:.1} | {:.1} | {:+.1} |",
                x.ours.p50, x.raw.p50, x.paired_median_ms
            );
        }
    }
}

/// Runs one warm-up of each, then `rounds` interleaved rounds.
pub async fn measure(opts: &SpawnOptions, rounds: usize) -> SpawnReport {
    let loadavg_before = loadavg();
    let api = FakeApiProcess::start(&opts.fake_api_bin).await;
    let root = match &opts.tmp_dir {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .expect("a temp dir");
    let data_root = opts
        .data_dir_in
        .as_ref()
        .map(|dir| tempfile::tempdir_in(dir).expect("a temp dir for the data dir"));
    let [home, work, data] = ["home", "work", "data"].map(|d| {
        match (&data_root, d) {
            (Some(r), "data") => r.path(),
            _ => root.path(),
        }
        .join(d)
    });
    for d in [&home, &work, &data] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    }
    let env = cli_env(&api.url, &home);
    let server = Server::start(&ServerOptions {
        bin: opts.harness_bin.clone(),
        data_dir: data,
        claude_bin: opts.claude_bin.clone(),
        env: env.clone(),
        args: opts.server_args.clone(),
    })
    .await;
    let client = server.connect().await.rpc;

    let pause = opts.pause_before_send;
    ours_round(&client, "spawn-warmup", &work, "warmup", pause).await;
    raw_round(&opts.claude_bin, &env, &work, "warmup", pause).await;
    let mut ours = Vec::with_capacity(rounds);
    let mut raw = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let tag = i.to_string();
        let session = format!("spawn-{i}");
        // ours, raw, raw, ours, ...: neither always follows the other.
        if i % 2 == 0 {
            ours.push(ours_round(&client, &session, &work, &tag, pause).await);
            raw.push(raw_round(&opts.claude_bin, &env, &work, &tag, pause).await);
        } else {
            raw.push(raw_round(&opts.claude_bin, &env, &work, &tag, pause).await);
            ours.push(ours_round(&client, &session, &work, &tag, pause).await);
        }
    }
    let metrics = server.metrics().await;
    let commits = metric(&metrics, "agent_harness_commit_duration_seconds_count");
    let commit_secs = metric(&metrics, "agent_harness_commit_duration_seconds_sum");
    server.stop();
    drop(api);

    let ms = |f: &dyn Fn(&OursSample) -> f64| Latency::from_ms(ours.iter().map(f));
    let commit_mean_ms = if commits > 0.0 {
        commit_secs / commits * 1e3
    } else {
        0.0
    };
    SpawnReport {
        rounds,
        pause_before_send_ms: pause.as_secs_f64() * 1e3,
        start_to_ready: Compared::new(
            ours.iter().map(|o| o.start_ready).collect(),
            raw.iter().map(|r| r.start_ready).collect(),
        ),
        send_to_content: Compared::new(
            ours.iter().map(|o| o.send_content).collect(),
            raw.iter().map(|r| r.send_content).collect(),
        ),
        breakdown: Breakdown {
            start_to_run_start: ms(&|o| o.start_to_run_start),
            run_start_to_run_ready: ms(&|o| o.run_start_to_run_ready),
            run_ready_to_client: ms(&|o| o.run_ready_to_client),
            send_to_input_sent: ms(&|o| o.send_to_input_sent),
            content_to_client: ms(&|o| o.content_to_client),
            commit_mean_ms,
            server_share_start: ms(&|o| {
                o.start_to_run_start + commit_mean_ms + o.run_ready_to_client
            }),
            server_share_send: ms(&|o| o.send_to_input_sent + o.content_to_client),
        },
        cli: CliWork {
            boot_cpu: Compared::from_ms(
                ours.iter().map(|o| o.boot.cpu),
                raw.iter().map(|r| r.boot.cpu),
            ),
            boot_wait: Compared::from_ms(
                ours.iter().map(|o| o.boot.wait),
                raw.iter().map(|r| r.boot.wait),
            ),
            turn_cpu: Compared::from_ms(
                ours.iter().map(|o| o.turn.cpu),
                raw.iter().map(|r| r.turn.cpu),
            ),
            turn_wait: Compared::from_ms(
                ours.iter().map(|o| o.turn.wait),
                raw.iter().map(|r| r.turn.wait),
            ),
        },
        loadavg_before,
        loadavg_after: loadavg(),
    }
}

/// The CLI's environment against the fake API (tests/fake-api/README.md):
/// given to the server, whose CLI inherits it, and to the raw CLI.
fn cli_env(api_url: &str, home: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("HOME".into(), home.into()),
        ("ANTHROPIC_BASE_URL".into(), api_url.into()),
        ("ANTHROPIC_API_KEY".into(), "test".into()),
        (
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
            "1".into(),
        ),
    ]
}

/// The stream-json user line the server writes for a text input, with
/// its newline.
fn user_line(text: &str) -> String {
    let mut line = user_message_line(&UserInput {
        text: text.to_owned(),
        ..UserInput::default()
    });
    line.push('\n');
    line
}

fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1e3
}

fn event_ms(e: &pb::Event) -> f64 {
    e.time
        .as_ref()
        .map(|t| t.seconds as f64 * 1e3 + f64::from(t.nanos) / 1e6)
        .unwrap_or_else(|| panic!("event {} has no time", e.seq))
}

/// `/proc/loadavg`'s three averages (zeros where unreadable).
fn loadavg() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0));
    [(); 3].map(|_| it.next().unwrap_or(0.0))
}

/// `fake-messages-api --port 0 --exit-on-stdin-eof`: killed on drop, and
/// its stdin closes with us anyway.
struct FakeApiProcess {
    _child: Child,
    _stdin: ChildStdin,
    _stdout: BufReader<ChildStdout>,
    url: String,
}

impl FakeApiProcess {
    async fn start(bin: &Path) -> Self {
        Self::start_with(bin, &[]).await
    }

    /// With further arguments (`--codex-home DIR`).
    async fn start_with(bin: &Path, args: &[OsString]) -> Self {
        let mut child = Command::new(bin)
            .args(["--port", "0", "--exit-on-stdin-eof"])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut line = String::new();
        match tokio::time::timeout(WAIT, stdout.read_line(&mut line)).await {
            Ok(Ok(n)) if n > 0 => {}
            other => panic!("{}: no first line ({other:?})", bin.display()),
        }
        let url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{}: unexpected first line {line:?}", bin.display()))
            .to_owned();
        Self {
            _child: child,
            _stdin: stdin,
            _stdout: stdout,
            url,
        }
    }
}
