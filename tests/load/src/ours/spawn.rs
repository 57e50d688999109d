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

// Until main.rs runs it (the `#[ignore]` test below does meanwhile).
#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_harness_client::pb;
use agent_harness_client::pb::event::Payload;
use agent_harness_client::pb::session_service_client::SessionServiceClient;
use agent_harness_client::pb::subscribe_response::Kind;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tonic::transport::Channel;

use crate::server::{Server, ServerOptions, metric};
use crate::stats::Latency;

/// Longest wait for any one step (boot, a turn, an exit).
const WAIT: Duration = Duration::from_secs(60);

/// The argv the server's interactive adapter gives the CLI with its
/// default `--permissions relay` and a Start that names no resume id,
/// model or args (server/src/adapter/claude/interactive.rs, `tail_args`).
const CLI_ARGS: &[&str] = &[
    "--print",
    "--output-format",
    "stream-json",
    "--input-format",
    "stream-json",
    "--verbose",
    "--permission-prompt-tool",
    "stdio",
];

/// What the server removes from the environment its CLI inherits
/// (`supervise::DEFAULT_STRIP_ENV`).
const STRIP_ENV: &[&str] = &[
    "NODE_OPTIONS",
    "VSCODE_INSPECTOR_OPTIONS",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
];

/// The variable the server marks each run's processes with.
const RUN_MARKER_ENV: &str = "AGENT_HARNESS_RUN_ID";

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
        println!(
            "| measurement | ours p50 ms | ours p99 ms | raw p50 ms | raw p99 ms | overhead ms (p50) | paired median ms |"
        );
        println!("|---|--:|--:|--:|--:|--:|--:|");
        for (name, c) in [
            ("Start → run_ready", &self.start_to_ready),
            ("Send → first content", &self.send_to_content),
        ] {
            println!(
                "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:+.1} | {:+.1} |",
                c.ours.p50, c.ours.p99, c.raw.p50, c.raw.p99, c.overhead_ms, c.paired_median_ms
            );
        }
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
    let client = server.connect().await;

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

/// The stream-json user line the server writes for a text input
/// (`stream_json::user_message_line`), byte for byte.
fn user_line(text: &str) -> String {
    let mut line = json!({
        "type": "user",
        "message": {"role": "user", "content": text},
        "parent_tool_use_id": null,
        "session_id": "",
    })
    .to_string();
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
        let mut child = Command::new(bin)
            .args(["--port", "0", "--exit-on-stdin-eof"])
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

/// One round through the server.
struct OursSample {
    start_ready: Duration,
    send_content: Duration,
    start_to_run_start: f64,
    run_start_to_run_ready: f64,
    run_ready_to_client: f64,
    send_to_input_sent: f64,
    content_to_client: f64,
    boot: Sched,
    turn: Sched,
}

/// Subscribe (caught up), Start `TEXT ready <tag>` and time its run_ready;
/// finish the turn, Send `TEXT again <tag>` and time its first content;
/// finish that turn, then end the process (SIGTERM) and see its run_end.
async fn ours_round(
    client: &SessionServiceClient<Channel>,
    session: &str,
    work: &Path,
    tag: &str,
    pause: Duration,
) -> OursSample {
    let mut sub = Sub::open(client.clone(), session).await;
    let mut rpc = client.clone();

    // Start → run_ready.
    let request = pb::StartRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt: format!("TEXT ready {tag}"),
            cwd: work.display().to_string(),
            ..Default::default()
        }),
    };
    let (t0, w0) = (Instant::now(), wall_ms());
    let (started, (ready, ready_at, ready_wall)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.start(request)),
        sub.until("run_ready", |p| matches!(p, Payload::RunReady(_))),
    );
    let started = match started {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => panic!("{session}: Start failed: {status:?}"),
        Err(_) => panic!("{session}: no Start response within {WAIT:?}"),
    };
    let run = started.run_id.clone();
    let Some(Payload::RunReady(r)) = &ready.payload else {
        unreachable!()
    };
    assert!(
        ready.run_id == run && started.process_id == format!("pid:{}", r.pid),
        "{session}: run_ready of run {} pid {} but Start answered run {run} process {}",
        ready.run_id,
        r.pid,
        started.process_id
    );
    let pid = r.pid;
    let boot = Sched::of(pid);
    let run_start =
        sub.find(|e| e.run_id == run && matches!(e.payload, Some(Payload::RunStart(_))));
    let start_ready = ready_at - t0;

    let turn1 = sub.turn_end(&run, ready.seq).await;
    sub.expect_text(ready.seq, turn1, &format!("ready {tag}"));

    // Send → first content.
    tokio::time::sleep(pause).await;
    let before = Sched::of(pid);
    let request = pb::SendRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        input: format!("TEXT again {tag}"),
        content_blocks: vec![],
    };
    let (t1, w1) = (Instant::now(), wall_ms());
    let (sent, (content, content_at, content_wall)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.send(request)),
        sub.until("content", |p| matches!(p, Payload::Content(_))),
    );
    match sent {
        Ok(Ok(r)) if r.get_ref().run_id == run => {}
        Ok(Ok(r)) => panic!(
            "{session}: Send went to run {} instead of the live run {run}",
            r.get_ref().run_id
        ),
        Ok(Err(status)) => panic!("{session}: Send failed: {status:?}"),
        Err(_) => panic!("{session}: no Send response within {WAIT:?}"),
    }
    assert_eq!(
        content.run_id, run,
        "{session}: the content after Send is not the live run's"
    );
    let send_content = content_at - t1;
    let turn = Sched::of(pid).since(before);
    let input_sent = sub.find(|e| {
        e.seq > turn1
            && matches!(&e.payload, Some(Payload::InputSent(i)) if i.source() == pb::InputSource::User)
    });
    let turn2 = sub.turn_end(&run, turn1).await;
    sub.expect_text(turn1, turn2, &format!("again {tag}"));

    // End the keep-alive process (Stop leaves an idle one alive).
    end_pid(pid);
    sub.until("run_end", |p| matches!(p, Payload::RunEnd(_)))
        .await;

    OursSample {
        start_ready,
        send_content,
        start_to_run_start: event_ms(&run_start) - w0,
        run_start_to_run_ready: event_ms(&ready) - event_ms(&run_start),
        run_ready_to_client: ready_wall - event_ms(&ready),
        send_to_input_sent: event_ms(&input_sent) - w1,
        content_to_client: content_wall - event_ms(&content),
        boot,
        turn,
    }
}

fn end_pid(pid: u32) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM)
        .unwrap_or_else(|e| panic!("SIGTERM the CLI (pid {pid}): {e}"));
}

/// One Subscribe stream and what it delivered.
struct Sub {
    session: String,
    stream: tonic::Streaming<pb::SubscribeResponse>,
    events: Vec<pb::Event>,
}

impl Sub {
    /// Subscribes from seq 0 and reads up to `caught_up`.
    async fn open(mut client: SessionServiceClient<Channel>, session: &str) -> Self {
        let request = pb::SubscribeRequest {
            session_id: session.into(),
            after_seq: 0,
        };
        let stream = match tokio::time::timeout(WAIT, client.subscribe(request)).await {
            Ok(Ok(r)) => r.into_inner(),
            Ok(Err(status)) => panic!("{session}: Subscribe failed: {status:?}"),
            Err(_) => panic!("{session}: no Subscribe response within {WAIT:?}"),
        };
        let mut sub = Self {
            session: session.into(),
            stream,
            events: Vec::new(),
        };
        loop {
            match sub.message("caught_up").await {
                Kind::CaughtUp(_) => return sub,
                Kind::Event(e) => panic!("{session} should be new; its replay holds {e:?}"),
                Kind::Replay(_) | Kind::Heartbeat(_) => {}
            }
        }
    }

    async fn message(&mut self, what: &str) -> Kind {
        let session = &self.session;
        match tokio::time::timeout(WAIT, self.stream.message()).await {
            Ok(Ok(Some(m))) => m
                .kind
                .unwrap_or_else(|| panic!("{session}: a SubscribeResponse without a kind")),
            Ok(Ok(None)) => panic!(
                "{session}: the stream ended before {what}; events: {}",
                self.describe()
            ),
            Ok(Err(status)) => panic!("{session}: the stream failed before {what}: {status:?}"),
            Err(_) => panic!(
                "{session}: no {what} within {WAIT:?}; events: {}",
                self.describe()
            ),
        }
    }

    /// Reads to the first event matching `pred`: it, when it arrived, and
    /// the wall clock then (ms). Panics on a run_end or run_error first.
    async fn until(
        &mut self,
        what: &str,
        pred: impl Fn(&Payload) -> bool,
    ) -> (pb::Event, Instant, f64) {
        loop {
            let kind = self.message(what).await;
            let (at, wall) = (Instant::now(), wall_ms());
            let Kind::Event(e) = kind else { continue };
            assert_eq!(
                e.session_id, self.session,
                "an event of another session on {}'s stream",
                self.session
            );
            self.events.push(e.clone());
            let payload = e
                .payload
                .as_ref()
                .unwrap_or_else(|| panic!("event {} without a payload", e.seq));
            if pred(payload) {
                return (e, at, wall);
            }
            if matches!(payload, Payload::RunEnd(_) | Payload::RunError(_)) {
                panic!(
                    "{}: {} before {what}; events: {}",
                    self.session,
                    kind_name(payload),
                    self.describe()
                );
            }
        }
    }

    /// The seq of the run's next non-compact turn_end after `after`, which
    /// must not be an error.
    async fn turn_end(&mut self, run: &str, after: u64) -> u64 {
        loop {
            let (e, _, _) = self
                .until(
                    "turn_end",
                    |p| matches!(p, Payload::TurnEnd(t) if !t.compact),
                )
                .await;
            if e.seq <= after {
                continue;
            }
            let Some(Payload::TurnEnd(t)) = &e.payload else {
                unreachable!()
            };
            assert!(
                e.run_id == run && !t.is_error,
                "{}: turn_end of run {} (expected {run}), is_error {}; events: {}",
                self.session,
                e.run_id,
                t.is_error,
                self.describe()
            );
            return e.seq;
        }
    }

    /// The text of the content events in `(after, to)` is `expected`.
    fn expect_text(&self, after: u64, to: u64, expected: &str) {
        let text: String = self
            .events
            .iter()
            .filter(|e| e.seq > after && e.seq < to)
            .filter_map(|e| match &e.payload {
                Some(Payload::Content(c)) => Some(c),
                _ => None,
            })
            .flat_map(|c| c.blocks.iter())
            .filter(|b| b.r#type == "text")
            .map(|b| b.text.as_str())
            .collect();
        assert_eq!(
            text,
            expected,
            "{}: the fake model's reply in seq {after}..{to}; events: {}",
            self.session,
            self.describe()
        );
    }

    /// The first event seen matching `pred`.
    fn find(&self, pred: impl Fn(&pb::Event) -> bool) -> pb::Event {
        self.events
            .iter()
            .find(|e| pred(e))
            .cloned()
            .unwrap_or_else(|| {
                panic!(
                    "{}: an expected event is missing: {}",
                    self.session,
                    self.describe()
                )
            })
    }

    fn describe(&self) -> String {
        self.events
            .iter()
            .map(|e| {
                let kind = e.payload.as_ref().map(kind_name).unwrap_or("none");
                format!("{}:{kind}", e.seq)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn kind_name(p: &Payload) -> &'static str {
    match p {
        Payload::RunStart(_) => "run_start",
        Payload::RunReady(_) => "run_ready",
        Payload::RunEnd(_) => "run_end",
        Payload::RunError(_) => "run_error",
        Payload::StopRequested(_) => "stop_requested",
        Payload::Content(_) => "content",
        Payload::Result(_) => "result",
        Payload::TurnEnd(_) => "turn_end",
        Payload::InputSent(_) => "input_sent",
        _ => "other",
    }
}

/// One round of the CLI spawned directly.
struct RawSample {
    start_ready: Duration,
    send_content: Duration,
    boot: Sched,
    turn: Sched,
}

/// On-CPU and run-queue wait ms of a process's live threads so far
/// (`/proc/PID/task/*/schedstat`; zero where unreadable).
#[derive(Debug, Clone, Copy, Default)]
struct Sched {
    cpu: f64,
    wait: f64,
}

impl Sched {
    fn of(pid: u32) -> Self {
        let mut sum = Self::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return sum;
        };
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let mut fields = text
                .split_whitespace()
                .map(|v| v.parse::<f64>().unwrap_or(0.0));
            sum.cpu += fields.next().unwrap_or(0.0) / 1e6;
            sum.wait += fields.next().unwrap_or(0.0) / 1e6;
        }
        sum
    }

    fn since(self, before: Self) -> Self {
        Self {
            cpu: self.cpu - before.cpu,
            wait: self.wait - before.wait,
        }
    }
}

/// Spawn the CLI as the server does, write `TEXT ready <tag>` and time its
/// system/init; finish the turn, write `TEXT again <tag>` and time its
/// first assistant line; finish that turn, close stdin and see it exit.
async fn raw_round(
    claude_bin: &Path,
    env: &[(OsString, OsString)],
    work: &Path,
    tag: &str,
    pause: Duration,
) -> RawSample {
    let t0 = Instant::now();
    let mut cmd = Command::new(claude_bin);
    cmd.args(CLI_ARGS)
        .current_dir(work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for key in STRIP_ENV {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // As long as the server's (a UUID).
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    cmd.env(RUN_MARKER_ENV, format!("raw-{nanos:032x}"));
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", claude_bin.display()));
    let mut cli = RawCli::new(&mut child, tag);
    cli.write(&user_line(&format!("TEXT ready {tag}"))).await;
    let (init, init_at) = cli
        .until("system/init", |v| {
            v["type"] == "system" && v["subtype"] == "init"
        })
        .await;
    let start_ready = init_at - t0;
    let pid = child
        .id()
        .unwrap_or_else(|| panic!("raw {tag}: the CLI has no pid"));
    let boot = Sched::of(pid);
    let session = init["session_id"].as_str().unwrap_or_default().to_owned();
    assert!(
        !session.is_empty(),
        "raw {tag}: init without a session_id: {init}"
    );
    let mark = cli.seen.len();
    cli.result().await;
    cli.expect_text(mark, &session, &format!("ready {tag}"));

    let mark = cli.seen.len();
    tokio::time::sleep(pause).await;
    let before = Sched::of(pid);
    let t1 = Instant::now();
    cli.write(&user_line(&format!("TEXT again {tag}"))).await;
    let (_, content_at) = cli.until("assistant", |v| v["type"] == "assistant").await;
    let send_content = content_at - t1;
    let turn = Sched::of(pid).since(before);
    cli.result().await;
    cli.expect_text(mark, &session, &format!("again {tag}"));

    // Idle stdin EOF: the CLI exits 0 within tens of ms.
    drop(cli);
    match tokio::time::timeout(WAIT, child.wait()).await {
        Ok(Ok(s)) if s.success() => {}
        other => panic!("raw {tag}: the CLI did not exit 0 after stdin EOF: {other:?}"),
    }
    RawSample {
        start_ready,
        send_content,
        boot,
        turn,
    }
}

/// The raw CLI's pipes and the stdout lines read so far.
struct RawCli {
    tag: String,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<String>>,
    seen: Vec<Value>,
}

impl RawCli {
    fn new(child: &mut Child, tag: &str) -> Self {
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let tail = stderr.clone();
        // Drained as the server does; its tail goes into panic messages.
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > 4096 {
                    let cut = t.len() - 4096;
                    let cut = (cut..t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        });
        Self {
            tag: tag.into(),
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    async fn write(&mut self, line: &str) {
        let tag = &self.tag;
        self.stdin
            .write_all(line.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("raw {tag}: write stdin: {e}"));
        self.stdin
            .flush()
            .await
            .unwrap_or_else(|e| panic!("raw {tag}: flush stdin: {e}"));
    }

    /// Reads to the first JSON line matching `pred`; panics on a `result`
    /// (the turn ended) that does not match, on EOF and on timeout.
    async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> (Value, Instant) {
        loop {
            let line = match tokio::time::timeout(WAIT, self.lines.next_line()).await {
                Ok(Ok(Some(l))) => l,
                Ok(Ok(None)) => panic!(
                    "raw {}: stdout closed before {what}; {}",
                    self.tag,
                    self.describe()
                ),
                Ok(Err(e)) => panic!("raw {}: reading stdout before {what}: {e}", self.tag),
                Err(_) => panic!(
                    "raw {}: no {what} within {WAIT:?}; {}",
                    self.tag,
                    self.describe()
                ),
            };
            let at = Instant::now();
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                panic!("raw {}: a stdout line that is not JSON: {line:?}", self.tag)
            };
            self.seen.push(v.clone());
            if pred(&v) {
                return (v, at);
            }
            if v["type"] == "result" {
                panic!(
                    "raw {}: the turn ended before {what}: {line}; {}",
                    self.tag,
                    self.describe()
                );
            }
        }
    }

    /// Reads to the turn's `result`, which must not be an error.
    async fn result(&mut self) {
        let (r, _) = self.until("result", |v| v["type"] == "result").await;
        assert!(
            r["is_error"] == false,
            "raw {}: the turn failed: {r}; {}",
            self.tag,
            self.describe()
        );
    }

    /// The text of the assistant lines seen from `from` on is `expected`,
    /// and they belong to `session`.
    fn expect_text(&self, from: usize, session: &str, expected: &str) {
        let assistant: Vec<&Value> = self.seen[from..]
            .iter()
            .filter(|v| v["type"] == "assistant")
            .collect();
        assert!(
            assistant.iter().all(|v| v["session_id"] == session),
            "raw {}: an assistant line of another session than {session}; {}",
            self.tag,
            self.describe()
        );
        let text: String = assistant
            .iter()
            .filter_map(|v| v["message"]["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        assert_eq!(
            text,
            expected,
            "raw {}: the fake model's reply; {}",
            self.tag,
            self.describe()
        );
    }

    fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .seen
            .iter()
            .map(|v| {
                let t = v["type"].as_str().unwrap_or("?");
                match v["subtype"].as_str() {
                    Some(s) => format!("{t}/{s}"),
                    None => t.to_owned(),
                }
            })
            .collect();
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        format!("stdout: [{}]; stderr tail: {stderr:?}", kinds.join(" "))
    }
}
