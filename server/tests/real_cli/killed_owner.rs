//! A session's owner killed hard mid-turn, against the REAL claude CLI: two
//! server processes (`agent-harness serve`, nodes "a" and "b") share one
//! PostgreSQL database, each with a HOME and a data dir (so a CLI config
//! dir) of its own, both CLIs in front of one scripted Messages API. Turn
//! one runs on a; turn two streams slowly on a (30 s, then a tool and
//! another model request), and a gets SIGKILL while its answer streams.
//! Then:
//! - a's CLI dies with a (the kernel kills it): it is gone by the time b
//!   owns the session, and the Messages API gets no further request of
//!   turn two;
//! - a Send on b is answered UNAVAILABLE while a's lease lives, and once
//!   it lapses b claims the session, writes the killed run's one
//!   `run_end{SERVER_RESTART, inferred}` and starts a run of its own;
//! - a client that had followed the session on a subscribes to b from the
//!   last seq it saw and gets every later event once, in order;
//! - b's CLI, which has never seen the conversation's file, resumes the
//!   conversation: its model request carries turn one's prompt and answer;
//! - nothing a started outlives it (found by the marker variable every
//!   process of a inherits);
//! - turn three ends successfully on b.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli killed_owner:: -- --nocapture`.

use std::path::Path;
use std::time::{Duration, Instant};

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::Channel;

use super::moved_conversation::conversation_file;
use super::resume_lost::conversation;
use crate::support::cli_grpc::{Events, WAIT, assert_runs_end_once, describe_all, eventually};
use crate::support::common::{claude_bin, claude_bin_newest};
use crate::support::server_process::{self, ServerProcess};
use agent_harness_server::supervise;

const SESSION: &str = "killed-owner";
/// Turn two's directive: a long streamed answer, then a Bash call, so a CLI
/// that outlived its server would ask the model again.
const TURN_TWO: &str = "SLOWTHENBASH";
/// Short, so the takeover comes soon after the kill; long enough that a
/// live node on a loaded machine renews in time.
const LEASE: &str = "2s";

/// One node: its own HOME, data dir and marker, the shared database.
struct Node {
    id: &'static str,
    home: tempfile::TempDir,
    data: tempfile::TempDir,
    marker: String,
}

impl Node {
    fn new(id: &'static str) -> Self {
        Self {
            id,
            home: tempfile::tempdir().expect("home"),
            data: tempfile::tempdir().expect("data"),
            marker: uuid::Uuid::new_v4().to_string(),
        }
    }

    fn spawn(&self, bin: &Path, api: &FakeApi, work: &Path, url: &str) -> ServerProcess {
        server_process::spawn(&server_process::Spawn {
            claude_bin: bin,
            api,
            data: self.data.path(),
            home: self.home.path(),
            work,
            log: self.data.path().join("server.log"),
            marker: &self.marker,
            store_url: Some(url),
            node_id: Some(self.id),
            node_lease: Some(LEASE),
            failpoint: None,
        })
    }

    /// The conversation file of `id` in this node's CLI config dir (the
    /// server's default: `claude` in its data dir).
    fn conversation_file(&self, id: &str) -> Option<std::path::PathBuf> {
        conversation_file(&self.data.path().join("claude"), id)
    }
}

/// The pinned CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_the_owner_mid_turn_moves_the_conversation_to_another_node() {
    killed_owner(&claude_bin()).await;
}

/// The same with the newest CLI release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_cli_moves_the_same_way_after_kill_9() {
    killed_owner(&claude_bin_newest()).await;
}

async fn killed_owner(bin: &Path) {
    let started = Instant::now();
    // Always PostgreSQL: ownership and takeover exist only on a shared store.
    let url = tokio::task::block_in_place(|| crate::support::postgres::cluster().fresh_database());
    let api = FakeApi::start().await;
    let work = tempfile::tempdir().expect("work");
    let (a, b) = (Node::new("a"), Node::new("b"));
    let mut server_a = a.spawn(bin, &api, work.path(), &url);
    let mut server_b = b.spawn(bin, &api, work.path(), &url);
    let mut client_a = server_a.connect().await;
    let mut client_b = server_b.connect().await;

    // Turn one on a.
    let ev_a = Events::open_with(client_a.clone(), SESSION, true).await;
    client_a
        .start(pb::StartRequest {
            session_id: SESSION.into(),
            config: Some(pb::StartConfig {
                prompt: "TEXT remember the word osprey".into(),
                cwd: work.path().display().to_string(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("Start on a");
    let (ready_ev, ready) = ev_a.run_ready_after(0).await;
    let killed_run = ready_ev.run_id.clone();
    let conversation_id = ready.resume_id.clone();
    let (first_end, end) = ev_a.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");

    // Turn two streams slowly on a (30 s in all, far longer than the
    // takeover takes), then calls a tool and the model again; a dies once
    // its answer has begun to stream.
    client_a
        .send(pb::SendRequest {
            session_id: SESSION.into(),
            input: format!("{TURN_TWO} 100 300"),
            ..Default::default()
        })
        .await
        .expect("Send on a");
    ev_a.wait_deltas("turn two's answer streaming", |d| {
        d.iter()
            .any(|(_, d)| d.after_seq >= first_end.seq && d.run_id == killed_run)
            .then_some(())
    })
    .await;
    let cli_a = server_process::marked(&a.marker, Some(server_a.pid()));
    assert!(
        cli_a.iter().any(|(_, cmd)| cmd.contains("claude")),
        "a's CLI carries a's marker: {cli_a:?}"
    );
    // Each of a's processes as it runs now: pid and start time, so a pid
    // the kernel reuses later is not taken for it.
    let cli_a: Vec<(u32, u64, String)> = cli_a
        .into_iter()
        .filter_map(|(pid, cmd)| Some((pid, supervise::process_start_time(pid)?, cmd)))
        .collect();
    let a_pid = server_a.pid();
    let requests_before_kill = api.message_requests().len();
    server_a.kill9();
    let killed_at = Instant::now();
    drop(client_a);
    // What the client had seen through a when a died.
    let seen_on_a = ev_a.snapshot();
    let seen = ev_a.head();
    assert!(seen > first_end.seq, "turn two had begun in the log");
    drop(ev_a);

    // The client follows the session on b from where it left off.
    let ev_b = Events::open_after(client_b.clone(), SESSION, seen).await;
    assert_eq!(
        b.conversation_file(&conversation_id),
        None,
        "b has never run the conversation"
    );

    // Turn three on b: UNAVAILABLE while a's lease lives, then b's own run.
    let third = "TEXT what was the word";
    let (run_b, refusals) = send_until_owned(&mut client_b, third).await;
    let answered_at = killed_at.elapsed();
    // Exactly one owner acts: b owns the session now, so a's CLI, which
    // without the kernel's help would stream turn two for half a minute
    // more, is gone already: before b's turn three runs, let alone ends.
    let still_running: Vec<_> = cli_a
        .iter()
        .filter(|(pid, start, _)| running_since(*pid, *start))
        .collect();
    assert!(
        still_running.is_empty(),
        "a's CLI still runs when b owns the session ({answered_at:?} after the kill): \
         {still_running:?}"
    );
    let (ready_b_ev, ready_b) = ev_b.run_ready_after(seen).await;
    assert_eq!(ready_b_ev.run_id, run_b);
    assert_eq!(ready_b.resume_id, conversation_id, "the same conversation");
    let (end_b_ev, end_b) = ev_b.turn_end_after(ready_b_ev.seq).await;
    assert!(
        !end_b.is_error,
        "turn three on b failed: {end_b:?}\n{}",
        describe_all(&ev_b.snapshot())
    );
    assert_eq!(end_b_ev.run_id, run_b);

    // The log, whole: seqs 1..=head, the killed run ended once, honestly,
    // before b's run began; b's run is the live one.
    let log = Events::open(client_b.clone(), SESSION).await;
    log.wait_for("the whole log", |evs| {
        (evs.last().map(|e| e.seq) >= Some(end_b_ev.seq)).then_some(())
    })
    .await;
    log.assert_contract();
    let log = log.snapshot();
    for (i, e) in log.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "a gap:\n{}", describe_all(&log));
    }
    assert_runs_end_once(&log, Some(&run_b));
    let ends: Vec<(u64, &pb::RunEnd)> = log
        .iter()
        .filter(|e| e.run_id == killed_run)
        .filter_map(|e| match &e.payload {
            Some(Payload::RunEnd(r)) => Some((e.seq, r)),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 1, "run_ends of the killed run: {ends:?}");
    let (end_seq, killed_end) = ends[0];
    assert_eq!(
        killed_end.reason(),
        pb::RunEndReason::ServerRestart,
        "{killed_end:?}"
    );
    assert!(killed_end.inferred, "{killed_end:?}");
    assert!(end_seq > seen && end_seq < ready_b_ev.seq);

    // What the client saw through a is the log's start, unchanged; what it
    // saw on b is the rest, each event once, in order.
    assert_eq!(seen_on_a.as_slice(), &log[..seen as usize]);
    ev_b.assert_contract();
    let on_b = ev_b.snapshot();
    assert_eq!(
        on_b.as_slice(),
        &log[seen as usize..on_b.len() + seen as usize]
    );

    // a's CLI made no request after the kill: nothing continues turn two
    // (its tool's result, or the stream again). It is dead, so none can
    // come later either.
    let calls = api.message_requests().split_off(requests_before_kill);
    let of_turn_two: Vec<&str> = calls
        .iter()
        .map(|c| c.scenario.as_str())
        .filter(|s| s.starts_with(TURN_TWO))
        .collect();
    assert!(
        of_turn_two.is_empty(),
        "model requests of turn two after a was killed: {of_turn_two:?}"
    );

    // b's CLI sent the model the earlier conversation.
    let said = calls
        .iter()
        .map(|c| conversation(c.body.as_ref().expect("a JSON body")))
        .find(|said| said.iter().any(|(r, t)| r == "user" && t.contains(third)))
        .unwrap_or_else(|| panic!("no model request for turn three: {calls:#?}"));
    let has = |role: &str, needle: &str| said.iter().any(|(r, t)| r == role && t.contains(needle));
    assert!(has("user", "TEXT remember the word osprey"), "{said:?}");
    assert!(has("assistant", "remember the word osprey"), "{said:?}");
    assert!(
        b.conversation_file(&conversation_id).is_some(),
        "written back on b"
    );

    // Nothing a started outlives it.
    let deadline = Instant::now() + WAIT;
    loop {
        let left = server_process::marked(&a.marker, Some(a_pid));
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the killed node still run: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let a_gone = killed_at.elapsed();

    drop((ev_b, client_b));
    drop(server_b);
    eventually("no reply stream left open", || api.active_streams() == 0).await;
    eprintln!(
        "killed_owner ({}): Send answered by b {answered_at:?} after the kill \
         ({refusals} UNAVAILABLE before), a's processes gone {a_gone:?} after it, \
         {} events, {:?} in all",
        bin.display(),
        log.len(),
        started.elapsed()
    );
}

/// Sends `input` to `client` with one idempotency key, again after a short
/// pause while the answer is UNAVAILABLE (the killed owner's lease still
/// lives), until it is accepted; returns the run and how many refusals came
/// first.
async fn send_until_owned(
    client: &mut SessionServiceClient<Channel>,
    input: &str,
) -> (String, usize) {
    let key = uuid::Uuid::new_v4().to_string();
    let deadline = Instant::now() + WAIT;
    let mut refusals = 0;
    loop {
        let answer = tokio::time::timeout(
            WAIT,
            client.send(pb::SendRequest {
                idempotency_key: key.clone(),
                session_id: SESSION.into(),
                input: input.into(),
                content_blocks: vec![],
            }),
        )
        .await
        .expect("Send answered in time");
        match answer {
            Ok(r) => return (r.into_inner().run_id, refusals),
            Err(s) if s.code() == tonic::Code::Unavailable => {
                let owner = s.metadata().get("x-agent-harness-owner");
                // A node whose own lease ran late on a loaded machine refuses
                // its writes as fenced (no owner to name) until it rejoins:
                // honest, and retried like the rest. Any other refusal must
                // name the dead owner.
                let own_lease_late = owner.is_none() && s.message().contains("may not write");
                assert!(
                    own_lease_late || owner.and_then(|v| v.to_str().ok()) == Some("a"),
                    "the refusal names the owner: {s:?}"
                );
                refusals += 1;
                assert!(
                    Instant::now() < deadline,
                    "b still refuses after {WAIT:?}: {s:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(s) => panic!("Send on b: {s:?}"),
        }
    }
}

/// Whether the process that had `pid` with start time `start` still runs
/// (a zombie waiting for its reaper has stopped running).
fn running_since(pid: u32, start: u64) -> bool {
    supervise::process_start_time(pid) == Some(start)
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with(['Z', 'X']))
        })
}
