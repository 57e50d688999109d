//! The crash loop: the real server binary (`agent-harness serve`, a child
//! process), the REAL claude CLI behind it and the scripted Messages API in
//! front of the CLI; the server is killed hard again and again, at varied
//! points, and restarted on the same data dir:
//! - mid-turn (a streaming answer, or a foreground Bash still running),
//! - mid-permission prompt (a Write waiting for its answer),
//! - between turns (the keep-alive CLI idle),
//! - with a background Bash (`sleep`) running, a grandchild of the server,
//! - inside a group commit: `AGENT_HARNESS_FAILPOINT=commit:after:N` aborts
//!   the writer right after redb committed and before anything was
//!   published, `commit:before:N` before the store is written.
//!
//! After every restart one client that was subscribed through the crash
//! checks the durable log:
//! - every event it saw is still there, unchanged (every field of the
//!   decoded `Event`, its `cli_line` byte for byte);
//! - seqs are 1..=head with no gap;
//! - every run has exactly one `run_end` (recovery closed the live one);
//! - no process of the killed server is left: the CLI, its Bash and the
//!   backgrounded `sleep` all carry the server's marker variable, and no
//!   process but the new server has it (zombies count as dead: PID 1 here
//!   does not reap);
//! - the conversation goes on: a Send gets a successful turn.
//!
//! Poisoned logs too: a run's log holding a row no decoder reads back (as
//! servers wrote before JSON nesting was bounded), or the real CLI writing a
//! tool input nested 200 levels deep, with the server killed hard while
//! that run is live: every start recovers and the conversation goes on.
//!
//! CI runs [`CI_ROUNDS`] rounds (every kind of crash at least once);
//! `AGENT_HARNESS_CRASH_ROUNDS=20` (or more) runs that many, e.g.
//! `AGENT_HARNESS_CRASH_ROUNDS=20 cargo test -p agent-harness-server --test real_cli crash_loop:: -- --nocapture`.
//!
//! With `AGENT_HARNESS_TEST_STORE=postgres` every server generation keeps
//! its log in PostgreSQL (`--store-url`, a fresh database on the test
//! binary's own server) instead of redb in the data dir.
//!
//! The server binary is `CARGO_BIN_EXE_agent-harness`, the one cargo built
//! for this very test run (never a stale `AGENT_HARNESS_BIN`).

use crate::support::cli_grpc;
use crate::support::common::claude_bin;
use crate::support::server_process::{self, ServerProcess as Server};

use std::time::{Duration, Instant};

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use cli_grpc::{Events, WAIT, assert_runs_end_once, describe_all};
use tonic::transport::Channel;

/// Rounds in CI: each [`Crash`] kind once.
const CI_ROUNDS: usize = ORDER.len();
const SESSION: &str = "crash";

/// Where the server is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crash {
    /// SIGKILL while the answer streams.
    MidTurn,
    /// SIGKILL while a foreground Bash runs (the CLI has a child).
    MidTool,
    /// SIGKILL while a permission request waits for its answer.
    MidPermission,
    /// SIGKILL between turns (the keep-alive CLI idle).
    BetweenTurns,
    /// SIGKILL while a backgrounded Bash `sleep` runs (a grandchild).
    BackgroundTask,
    /// The writer aborts inside a group commit, after the store committed.
    CommitAfter,
    /// The writer aborts inside a group commit, before the store is written.
    CommitBefore,
}

const ORDER: [Crash; 7] = [
    Crash::MidTurn,
    Crash::MidPermission,
    Crash::BetweenTurns,
    Crash::CommitAfter,
    Crash::BackgroundTask,
    Crash::MidTool,
    Crash::CommitBefore,
];

/// What every server generation shares: the fake API, HOME, the work dir
/// and the data dir.
struct World {
    api: FakeApi,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    data: tempfile::TempDir,
    /// The value of the marker variable every process of this world's
    /// servers carries ([`server_process::marked`]).
    marker: String,
    generation: usize,
    /// `--store-url` of every generation (a fresh PostgreSQL database when
    /// `AGENT_HARNESS_TEST_STORE=postgres`), else redb in `data`.
    store_url: Option<String>,
}

impl World {
    /// A world on the test store: a fresh PostgreSQL database when
    /// `AGENT_HARNESS_TEST_STORE=postgres`, else redb in the data dir.
    async fn new() -> Self {
        let url = crate::support::postgres::selected().then(|| {
            tokio::task::block_in_place(|| crate::support::postgres::cluster().fresh_database())
        });
        Self::with_store(url).await
    }

    /// A world whose log is redb whatever the test store: for tests that
    /// open the store's file themselves.
    async fn on_redb() -> Self {
        Self::with_store(None).await
    }

    async fn with_store(store_url: Option<String>) -> Self {
        Self {
            api: FakeApi::start().await,
            home: tempfile::tempdir().expect("home"),
            work: tempfile::tempdir().expect("work"),
            data: tempfile::tempdir().expect("data"),
            marker: uuid::Uuid::new_v4().to_string(),
            generation: 0,
            store_url,
        }
    }

    /// Starts a server on the shared data dir, with `failpoint` armed.
    fn spawn(&mut self, failpoint: Option<&str>) -> Server {
        self.generation += 1;
        let claude = claude_bin();
        server_process::spawn(&server_process::Spawn {
            claude_bin: &claude,
            api: &self.api,
            data: self.data.path(),
            home: self.home.path(),
            work: self.work.path(),
            log: self
                .data
                .path()
                .join(format!("server-{}.log", self.generation)),
            marker: &self.marker,
            store_url: self.store_url.as_deref(),
            // One node restarted, as an operator runs it: the same node id
            // every generation (the default names the listen port, which
            // changes here), so the restarted node knows the sessions of
            // its earlier epoch as its own and closes their runs at once.
            node_id: self.store_url.is_some().then_some("crash-loop"),
            node_lease: None,
            failpoint,
        })
    }

    /// Pids (other than `except`) that carry this world's marker and are
    /// not zombies: what a killed server left behind.
    fn marked(&self, except: Option<u32>) -> Vec<(u32, String)> {
        server_process::marked(&self.marker, except)
    }
}

async fn try_send(
    client: &mut SessionServiceClient<Channel>,
    text: &str,
) -> Result<String, tonic::Status> {
    tokio::time::timeout(
        WAIT,
        client.send(pb::SendRequest {
            session_id: SESSION.into(),
            input: text.into(),
            content_blocks: vec![],
            ..Default::default()
        }),
    )
    .await
    .expect("Send in time")
    .map(|r| r.into_inner().run_id)
}

async fn send(client: &mut SessionServiceClient<Channel>, text: &str) -> String {
    try_send(client, text)
        .await
        .unwrap_or_else(|s| panic!("Send({text:?}): {s:?}"))
}

/// The whole durable log, read through Subscribe from 0 up to caught_up.
async fn read_log(client: &mut SessionServiceClient<Channel>) -> Vec<pb::Event> {
    use pb::subscribe_response::Kind;
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: SESSION.into(),
            after_seq: 0,
            include_deltas: false,
        })
        .await
        .expect("Subscribe")
        .into_inner();
    let mut out = Vec::new();
    loop {
        let msg = tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("the replay in time")
            .expect("the replay")
            .expect("the stream stays open until caught_up");
        match msg.kind {
            Some(Kind::Event(e)) => out.push(e),
            Some(Kind::CaughtUp(_)) => return out,
            _ => {}
        }
    }
}

/// Tracks everything the client saw across generations and checks the log
/// after each restart.
///
/// Events are compared as decoded messages (every field, `cli_line`
/// included), not as re-encoded bytes: protobuf does not fix the order of
/// a map's entries (a `Struct`'s fields are a `HashMap`), so the same event
/// decoded twice may encode to different bytes.
#[derive(Default)]
struct Witness {
    /// Every event seen, by seq (index seq - 1).
    seen: Vec<pb::Event>,
}

impl Witness {
    /// Takes in what one generation's subscriber saw (from seq 1); what it
    /// saw again of earlier generations must be identical.
    fn absorb(&mut self, events: &[pb::Event]) {
        for e in events {
            let i = (e.seq - 1) as usize;
            if i < self.seen.len() {
                assert_eq!(
                    &self.seen[i], e,
                    "seq {} changed since a client saw it",
                    e.seq
                );
            } else {
                assert_eq!(i, self.seen.len(), "the subscriber skipped a seq");
                self.seen.push(e.clone());
            }
        }
    }

    /// The durable log after a restart: every seen event unchanged, seqs
    /// 1..=head, one run_end per run, nothing live.
    fn check(&mut self, log: &[pb::Event], round: usize) {
        for (i, e) in log.iter().enumerate() {
            assert_eq!(
                e.seq,
                i as u64 + 1,
                "round {round}: seqs are not contiguous:\n{}",
                describe_all(log)
            );
        }
        assert!(
            log.len() >= self.seen.len(),
            "round {round}: the log lost events a client saw ({} seen, {} stored):\n{}",
            self.seen.len(),
            log.len(),
            describe_all(log)
        );
        for (seen, stored) in self.seen.iter().zip(log) {
            assert_eq!(
                seen, stored,
                "round {round}: seq {} differs from what a client saw",
                seen.seq
            );
        }
        assert_runs_end_once(log, None);
        self.absorb(log);
    }
}

/// Whether `events` show a non-compact turn_end after seq `after`.
fn turn_ended(events: &Events, after: u64) -> bool {
    events
        .since(after)
        .iter()
        .any(|e| matches!(&e.payload, Some(Payload::TurnEnd(t)) if !t.compact))
}

/// Drives the server to its death at the point `crash` names.
async fn crash_round(
    world: &World,
    mut server: Server,
    client: &mut SessionServiceClient<Channel>,
    events: &Events,
    crash: Crash,
    round: usize,
) {
    let head = events.head();
    // The CLI must be found by its marker, or the leftover check after the
    // restart would prove nothing.
    let cli_found = |server: &Server| {
        let procs = world.marked(Some(server.pid()));
        assert!(
            procs.iter().any(|(_, cmd)| cmd.contains("claude")),
            "round {round}: the CLI does not carry the marker: {procs:?}"
        );
        procs
    };
    match crash {
        Crash::MidTurn => {
            send(client, "SLOW 30 100").await;
            // The turn is under way (its answer streams for 3 s; a respawned
            // CLI boots first); the kill lands at a different moment of it
            // each round, from before the CLI spoke to mid-stream.
            events
                .next_after("the prompt delivered", head, |e| {
                    matches!(e.payload, Some(Payload::InputSent(_)))
                })
                .await;
            let into = Duration::from_millis(100 + 131 * (round as u64 % 11));
            tokio::time::sleep(into).await;
            cli_found(&server);
            server.kill9();
        }
        Crash::MidTool => {
            send(client, "SLOWBASH 30").await;
            events
                .next_after("the Bash tool_use", head, |e| {
                    matches!(&e.payload, Some(Payload::Content(c))
                        if c.blocks.iter().any(|b| b.tool_name == "Bash"))
                })
                .await;
            cli_found(&server);
            server.kill9();
        }
        Crash::MidPermission => {
            send(client, &format!("WRITE perm-{round}.txt hello")).await;
            events.permission_requested_after(head).await;
            cli_found(&server);
            server.kill9();
        }
        Crash::BetweenTurns => {
            send(client, &format!("TEXT between {round}")).await;
            events.turn_end_after(head).await;
            cli_found(&server);
            server.kill9();
        }
        Crash::BackgroundTask => {
            let sleep = format!("sleep 300.{round}");
            send(client, &format!("BGBASH {sleep}")).await;
            events.turn_end_after(head).await;
            let procs = cli_found(&server);
            assert!(
                procs.iter().any(|(_, cmd)| *cmd == sleep),
                "round {round}: the background `{sleep}` runs before the crash: {procs:?}"
            );
            server.kill9();
        }
        Crash::CommitAfter | Crash::CommitBefore => {
            // This server has the failpoint armed: feed it turns until a
            // commit hits it (a Send may itself die with the server).
            for attempt in 0..6 {
                let h = events.head();
                let _ = try_send(client, &format!("BASH echo commit-{round}-{attempt}")).await;
                let deadline = Instant::now() + WAIT;
                loop {
                    if server.exited_within(Duration::from_millis(20)).await {
                        let log = server.log_text();
                        assert!(
                            log.contains("AGENT_HARNESS_FAILPOINT: aborting"),
                            "round {round}: the server died, but not at the failpoint:\n{log}"
                        );
                        return;
                    }
                    if turn_ended(events, h) {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "round {round}: neither a turn end nor the failpoint:\n{}",
                        describe_all(&events.snapshot())
                    );
                }
            }
            panic!(
                "round {round}: the failpoint never fired:\n{}",
                server.log_text()
            );
        }
    }
}

/// After a restart: nothing of the killed server's processes runs (only
/// the new server carries the marker). Polls: the kills recovery sent may
/// take a moment to land.
async fn assert_no_leftovers(world: &World, server: &Server, round: usize) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = world.marked(Some(server.pid()));
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "round {round}: processes of the killed server still run after recovery: {left:?}\n{}",
            server.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn rounds() -> usize {
    std::env::var("AGENT_HARNESS_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_ROUNDS)
}

/// The failpoint for a commit round: a commit a few after start-up, so it
/// lands inside the Send's turn (recovery takes the first two: the run_end
/// it appends and the pid it forgets).
fn failpoint_for(crash: Crash, round: usize) -> Option<String> {
    let at = 3 + round % 5;
    match crash {
        Crash::CommitAfter => Some(format!("commit:after:{at}")),
        Crash::CommitBefore => Some(format!("commit:before:{at}")),
        _ => None,
    }
}

/// Starts a server generation and checks what the previous one left:
/// no process, and a log holding everything seen, gapless, every run ended.
async fn restart(
    world: &mut World,
    witness: &mut Witness,
    failpoint: Option<&str>,
    round: usize,
) -> (Server, SessionServiceClient<Channel>) {
    let mut server = world.spawn(failpoint);
    let mut client = server.connect().await;
    assert_no_leftovers(world, &server, round).await;
    let log = read_log(&mut client).await;
    witness.check(&log, round);
    (server, client)
}

/// The first generation: a server and a session with one finished turn,
/// seen by the witness.
async fn first_turn(
    world: &mut World,
    witness: &mut Witness,
) -> (Server, SessionServiceClient<Channel>) {
    let mut server = world.spawn(None);
    let mut client = server.connect().await;
    let events = Events::open(client.clone(), SESSION).await;
    tokio::time::timeout(
        WAIT,
        client.start(pb::StartRequest {
            session_id: SESSION.into(),
            config: Some(pb::StartConfig {
                prompt: "TEXT first".into(),
                cwd: world.work.path().display().to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .expect("Start in time")
    .expect("Start");
    events.turn_end_after(0).await;
    witness.absorb(&events.snapshot());
    drop(events);
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_anywhere_loses_nothing_and_leaves_nothing() {
    let started = Instant::now();
    let rounds = rounds();
    assert!(rounds >= 5, "at least 5 rounds");
    let mut world = World::new().await;
    let mut witness = Witness::default();

    // Generation 1: a session with one finished turn.
    let (mut server, mut client) = first_turn(&mut world, &mut witness).await;

    let mut new_conversations = 0;
    for round in 0..rounds {
        let crash = ORDER[round % ORDER.len()];
        let t0 = Instant::now();
        if let Some(fp) = failpoint_for(crash, round) {
            // Into a server with the failpoint armed (this kill is one more
            // crash between turns).
            server.kill9();
            (server, client) = restart(&mut world, &mut witness, Some(&fp), round).await;
        }
        let events = Events::open(client.clone(), SESSION).await;
        let seen = witness.seen.len();
        events
            .wait_for("the replay", |evs| (evs.len() >= seen).then_some(()))
            .await;
        crash_round(&world, server, &mut client, &events, crash, round).await;
        // Everything the client saw before the server died.
        witness.absorb(&events.snapshot());
        drop(events);

        (server, client) = restart(&mut world, &mut witness, None, round).await;

        // The conversation goes on.
        let events = Events::open(client.clone(), SESSION).await;
        let head = witness.seen.len() as u64;
        new_conversations += continue_conversation(&mut client, &events, head, round).await;
        witness.absorb(&events.snapshot());
        eprintln!(
            "crash loop round {round}: {crash:?} ok in {:?} (log head {})",
            t0.elapsed(),
            events.head()
        );
    }
    // End the last generation's CLI the way the loop does: kill, restart,
    // check, and leave a server that started nothing.
    server.kill9();
    let (last, _) = restart(&mut world, &mut witness, None, rounds).await;
    drop(last);
    eprintln!(
        "crash loop: {rounds} rounds, {} events, in {:?}; {new_conversations} resumes found no transcript and began a new conversation",
        witness.seen.len(),
        started.elapsed()
    );
}

/// Sends a turn and waits for its success. A resume that finds no
/// transcript (the CLI had not written it when the server died) records
/// `resume_failed`, and the next Send starts a new conversation: returns 1
/// then, else 0.
async fn continue_conversation(
    client: &mut SessionServiceClient<Channel>,
    events: &Events,
    head: u64,
    round: usize,
) -> usize {
    let mut after = head;
    for attempt in 0..2 {
        send(client, &format!("TEXT goes on {round}")).await;
        let end = events
            .next_after("the turn or a failed resume", after, |e| {
                matches!(&e.payload, Some(Payload::TurnEnd(t)) if !t.compact)
                    || matches!(&e.payload, Some(Payload::RunError(r)) if r.kind == "resume_failed")
            })
            .await;
        if let Some(Payload::TurnEnd(t)) = &end.payload {
            assert!(
                !t.is_error,
                "round {round}: the turn after the restart failed: {t:?}\n{}",
                describe_all(&events.snapshot())
            );
            return attempt;
        }
        // The failed run ends by itself; then the next Send starts anew.
        let (e, _) = events.run_end_after(end.seq).await;
        after = e.seq;
    }
    panic!(
        "round {round}: the conversation did not go on:\n{}",
        describe_all(&events.snapshot())
    );
}

/// Starts a server generation with a session whose turn backgrounded
/// `sleep <secs>` through the CLI's Bash tool; returns the server, the
/// client and the sleep's pid.
async fn with_background_sleep(
    world: &mut World,
    secs: &str,
) -> (Server, SessionServiceClient<Channel>, Events, u32) {
    let mut server = world.spawn(None);
    let mut client = server.connect().await;
    let events = Events::open(client.clone(), SESSION).await;
    client
        .start(pb::StartRequest {
            session_id: SESSION.into(),
            config: Some(pb::StartConfig {
                prompt: format!("BGBASH sleep {secs}"),
                cwd: world.work.path().display().to_string(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("Start");
    events.turn_end_after(0).await;
    let want = format!("sleep {secs}");
    let procs = world.marked(Some(server.pid()));
    let sleep = procs
        .iter()
        .find(|(_, cmd)| *cmd == want)
        .unwrap_or_else(|| panic!("`{want}` runs in the background: {procs:?}"))
        .0;
    (server, client, events, sleep)
}

/// Whether `pid` runs (a zombie, dead and waiting for a reaper that PID 1
/// here never is, does not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with(['Z', 'X'])))
        .unwrap_or(false)
}

async fn until_dead(pid: u32, what: &str) {
    let deadline = Instant::now() + WAIT;
    while running(pid) {
        assert!(Instant::now() < deadline, "{what}: pid {pid} still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// No orphan survives a crash, with the real CLI: a `sleep` the CLI's Bash
/// tool put in the background (`run_in_background`) lives in a session of its
/// own, outside the CLI's process group. The server is SIGKILLed; the sleep
/// outlives it; the restarted server's recovery kills it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_kills_a_background_bash_sleep_that_left_the_group() {
    let mut world = World::new().await;
    let (server, _client, events, sleep) = with_background_sleep(&mut world, "300.77").await;
    let group = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rsplit_once(") ")
            .and_then(|(_, r)| r.split_whitespace().nth(2).map(str::to_owned))
    };
    let (_, ready) = events.run_ready_after(0).await;
    assert_ne!(
        group(sleep),
        group(ready.pid),
        "the Bash tool's command is outside the CLI's process group"
    );
    drop(events);
    server.kill9();
    assert!(running(sleep), "the sleep outlives the killed server");

    let mut server = world.spawn(None);
    server.connect().await;
    until_dead(sleep, "recovery kills the background sleep").await;
    assert_no_leftovers(&world, &server, 0).await;
}

/// The same sleep when the CLI dies under a live server (SIGKILL from
/// outside, as the end of a stop ladder would): the run's end kills it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_end_kills_a_background_bash_sleep_that_left_the_group() {
    let mut world = World::new().await;
    let (server, _client, events, sleep) = with_background_sleep(&mut world, "300.78").await;
    let (_, ready) = events.run_ready_after(0).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ready.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the CLI");
    events.run_end_after(0).await;
    until_dead(sleep, "the run's end kills the background sleep").await;
    assert_no_leftovers(&world, &server, 0).await;
}

/// The parent of `pid` (`PPid` in /proc/PID/status); `None` once it is gone.
fn parent_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

/// The server starts its CLI through its own binary (`agent-harness
/// __exec-child`, supervise::trampoline, spawned without forking the
/// server): the CLI is the server's own child at the pid `run_ready`
/// names, it runs the CLI's command line (the trampoline became the CLI in
/// place: nothing of it waits beside the CLI), and when the server is
/// SIGKILLed mid-turn the kernel kills the CLI at once, with no restart and
/// no recovery to do it. (Left alone, the CLI would stream the turn's
/// answer for a minute more: the deadline is a quarter of that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_is_the_servers_child_and_dies_with_it_without_a_restart() {
    let mut world = World::on_redb().await;
    let mut witness = Witness::default();
    let (server, mut client) = first_turn(&mut world, &mut witness).await;
    let events = Events::open(client.clone(), SESSION).await;
    let (_, ready) = events.run_ready_after(0).await;
    let cli = ready.pid;
    assert_eq!(
        parent_of(cli),
        Some(server.pid()),
        "the CLI is the server's child"
    );
    // The run's processes whose parent is the server: the CLI alone (what
    // the CLI itself starts, such as its start-up `ps` probe for IDEs, is
    // the CLI's child, not the server's).
    let procs = world.marked(Some(server.pid()));
    let started: Vec<&(u32, String)> = procs
        .iter()
        .filter(|(pid, _)| parent_of(*pid) == Some(server.pid()))
        .collect();
    assert_eq!(
        started.iter().map(|(pid, _)| *pid).collect::<Vec<_>>(),
        vec![cli],
        "the CLI is the one process the server started: {procs:?}"
    );
    assert!(
        started[0].1.contains("claude") && !started[0].1.contains("__exec-child"),
        "the CLI's own command line: {procs:?}"
    );
    let head = events.head();
    send(&mut client, "SLOW 600 100").await;
    events
        .next_after("the prompt delivered", head, |e| {
            matches!(e.payload, Some(Payload::InputSent(_)))
        })
        .await;
    drop(events);
    server.kill9();
    let deadline = Instant::now() + Duration::from_secs(15);
    while running(cli) {
        assert!(
            Instant::now() < deadline,
            "the CLI of a SIGKILLed server still runs 15 s later"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        world.marked(None).is_empty(),
        "nothing of the server's runs"
    );
}

/// The real CLI writes a tool call whose input nests 200 objects deep (the
/// fake model's `DEEPTOOL`), far past what a protobuf decoder reads back.
/// The run goes on; the event keeps the input's first levels as a Struct
/// and the rest as marked JSON text; History, GetSession, ListSessions and
/// ReadFullEvent work; and the server killed hard with that run live
/// restarts every time (recovery reads the log), the conversation going on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_level_tool_input_is_kept_as_marked_text_and_survives_kill_9() {
    use agent_harness_server::nesting::{DEEP_JSON_MARKER, MAX_JSON_DEPTH, struct_depth};
    const DEPTH: usize = 200;

    let mut world = World::new().await;
    let mut witness = Witness::default();
    let mut server = world.spawn(None);
    let mut client = server.connect().await;
    let events = Events::open(client.clone(), SESSION).await;
    tokio::time::timeout(
        WAIT,
        client.start(pb::StartRequest {
            session_id: SESSION.into(),
            config: Some(pb::StartConfig {
                prompt: format!("DEEPTOOL DeepProbe {DEPTH}"),
                cwd: world.work.path().display().to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .expect("Start in time")
    .expect("Start");
    // The run goes on: the CLI answers the (unknown) tool and the turn ends.
    let (end, _) = events.turn_end_after(0).await;
    let log = events.snapshot();
    let (call, input) = log
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Content(c)) => c
                .blocks
                .iter()
                .find(|b| b.tool_name == "DeepProbe")
                .map(|b| (e.clone(), b.input.clone().expect("an input"))),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no DeepProbe call:\n{}", describe_all(&log)));
    assert!(call.seq < end.seq);
    assert_eq!(struct_depth(&input), MAX_JSON_DEPTH);
    // Down the kept levels to the marked text, which holds the rest.
    let mut level = input;
    for want in 1..MAX_JSON_DEPTH {
        assert_eq!(
            level.fields["level"].kind,
            Some(pbjson_types::value::Kind::NumberValue(want as f64))
        );
        level = match level.fields["next"].kind.clone() {
            Some(pbjson_types::value::Kind::StructValue(s)) => s,
            other => panic!("level {want}: {other:?}"),
        };
    }
    let Some(pbjson_types::value::Kind::StringValue(marked)) = level.fields["next"].kind.clone()
    else {
        panic!("level {MAX_JSON_DEPTH}: {level:?}")
    };
    let rest = marked.strip_prefix(DEEP_JSON_MARKER).expect("the marker");
    // The text is the input's remaining levels, each in order, to the bottom.
    let levels: Vec<usize> = rest
        .match_indices("\"level\":")
        .map(|(i, m)| {
            let digits: String = rest[i + m.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().expect("a level number")
        })
        .collect();
    assert_eq!(levels, (MAX_JSON_DEPTH + 1..=DEPTH).collect::<Vec<_>>());
    assert!(rest.contains("\"bottom\":true"), "{rest}");
    witness.absorb(&log);
    drop(events);

    // Every RPC reads it, the CLI line included.
    let history = client
        .history(pb::HistoryRequest {
            session_id: SESSION.into(),
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("History")
        .into_inner()
        .events;
    assert!(history.iter().any(|e| e == &call));
    let mut full = client
        .read_full_event(pb::ReadFullEventRequest {
            session_id: SESSION.into(),
            seq: call.seq,
            part: pb::FullEventPart::CliLine as i32,
            chunk_size: 0,
        })
        .await
        .expect("ReadFullEvent")
        .into_inner();
    let mut line = Vec::new();
    while let Some(m) = full.message().await.expect("a chunk") {
        line.extend(m.chunk);
    }
    assert!(
        String::from_utf8_lossy(&line).contains("\"bottom\":true"),
        "the CLI's line, whole"
    );
    let listed = client
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .expect("ListSessions")
        .into_inner()
        .sessions;
    assert!(listed.iter().any(|s| s.session_id == SESSION));
    let s = client
        .get_session(pb::GetSessionRequest {
            session_id: SESSION.into(),
        })
        .await
        .expect("GetSession")
        .into_inner()
        .session
        .expect("a session");
    assert!(s.process_alive, "the keep-alive CLI is live");

    // Killed hard with the run live, twice: each start recovers it, the log
    // is what the client saw, and the conversation goes on.
    for round in 0..2 {
        server.kill9();
        (server, client) = restart(&mut world, &mut witness, None, round).await;
        let events = Events::open(client.clone(), SESSION).await;
        let head = witness.seen.len() as u64;
        continue_conversation(&mut client, &events, head, round).await;
        witness.absorb(&events.snapshot());
    }
    server.kill9();
    let (last, _) = restart(&mut world, &mut witness, None, 2).await;
    drop(last);
}

/// A row the server wrote before JSON nesting was bounded (a tool input
/// nested past the decoder's limit) in the log of a live run, and the
/// server killed hard: every start recovers (it used to exit 1 on every
/// start), the row reads as `unreadable` at its seq, and the conversation
/// goes on. Three rounds, a new poisoned row each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_row_in_a_live_run_never_stops_the_server_from_starting() {
    use crate::support::log::poison;
    use agent_harness_server::store::RedbStore;

    // On redb: the test poisons the store's file between generations.
    let mut world = World::on_redb().await;
    let mut witness = Witness::default();
    let (mut server, _) = first_turn(&mut world, &mut witness).await;

    for round in 0..3 {
        // The keep-alive CLI is live: kill the server, poison the run's log.
        server.kill9();
        let (seq, bytes) = {
            let store = RedbStore::open(&world.data.path().join("events.redb")).unwrap();
            poison(&store, SESSION)
        };
        let mut client;
        (server, client) = restart(&mut world, &mut witness, None, round).await;
        let row = &witness.seen[seq as usize - 1];
        match &row.payload {
            Some(Payload::Unreadable(u)) => assert_eq!(u.size, bytes.len() as u64),
            other => panic!("round {round}: seq {seq} is {other:?}"),
        }
        let events = Events::open(client.clone(), SESSION).await;
        let head = witness.seen.len() as u64;
        continue_conversation(&mut client, &events, head, round).await;
        witness.absorb(&events.snapshot());
    }
    server.kill9();
    let (last, _) = restart(&mut world, &mut witness, None, 3).await;
    drop(last);
}
