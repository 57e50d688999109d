//! Codex through our server: one round (Start, then Send, each to its first
//! content on a Subscribe stream caught up before it), and the live sessions
//! held for the memory figures.

use super::super::ours::{Sub, end_pid, expect_sent_to};
use super::*;
use crate::os::tree_rss;

/// One round through the server.
pub(super) struct Sample {
    pub(super) start_answer: Duration,
    pub(super) start_ready: Duration,
    pub(super) send_answer: Duration,
}

fn start_request(session: &str, work: &Path, prompt: String) -> pb::StartRequest {
    pb::StartRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt,
            cwd: work.display().to_string(),
            agent: "codex".into(),
            ..Default::default()
        }),
    }
}

/// The pid of a Start's process (`process_id` is `pid:N`).
fn pid_of(session: &str, started: &pb::StartResponse) -> u32 {
    started
        .process_id
        .strip_prefix("pid:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{session}: Start answered process {:?}", started.process_id))
}

async fn started(
    session: &str,
    r: Result<
        Result<tonic::Response<pb::StartResponse>, tonic::Status>,
        tokio::time::error::Elapsed,
    >,
) -> pb::StartResponse {
    match r {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(status)) => panic!("{session}: Start (agent codex) failed: {status:?}"),
        Err(_) => panic!("{session}: no Start response within {WAIT:?}"),
    }
}

/// Subscribe (caught up), Start `TEXT first <tag>` with agent codex and
/// time its first content (and its run_ready); finish the turn, Send
/// `TEXT again <tag>` and time its first content; finish that turn, then
/// end the process (SIGTERM) and see its run_end.
pub(super) async fn round(
    client: &SessionServiceClient<Channel>,
    session: &str,
    work: &Path,
    tag: &str,
    pause: Duration,
) -> Sample {
    let mut sub = Sub::open(client.clone(), session).await;
    let mut rpc = client.clone();

    let request = start_request(session, work, format!("TEXT first {tag}"));
    let t0 = Instant::now();
    let (resp, (ready, ready_at, _)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.start(request)),
        sub.until("run_ready", |p| matches!(p, Payload::RunReady(_))),
    );
    let resp = started(session, resp).await;
    let run = resp.run_id.clone();
    assert!(
        matches!(&ready.payload, Some(Payload::RunReady(r)) if r.agent == "codex")
            && ready.run_id == run,
        "{session}: run_ready {ready:?}, want agent codex of run {run}"
    );
    let (content, content_at, _) = sub
        .until("content", |p| matches!(p, Payload::Content(_)))
        .await;
    assert_eq!(
        content.run_id, run,
        "{session}: the first answer is not the run's"
    );
    let turn1 = sub.turn_end(&run, ready.seq).await;
    sub.expect_text(ready.seq, turn1, &format!("first {tag}"));

    tokio::time::sleep(pause).await;
    let request = pb::SendRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        input: format!("TEXT again {tag}"),
        content_blocks: vec![],
    };
    let t1 = Instant::now();
    let (sent, (again, again_at, _)) = tokio::join!(
        tokio::time::timeout(WAIT, rpc.send(request)),
        sub.until("content", |p| matches!(p, Payload::Content(_))),
    );
    expect_sent_to(sent, &run, session);
    assert_eq!(
        again.run_id, run,
        "{session}: the answer after Send is not the live run's"
    );
    let turn2 = sub.turn_end(&run, turn1).await;
    sub.expect_text(turn1, turn2, &format!("again {tag}"));

    // Codex stays between turns: end it and see the run end.
    end_pid(pid_of(session, &resp));
    sub.until("run_end", |p| matches!(p, Payload::RunEnd(_)))
        .await;
    Sample {
        start_answer: content_at - t0,
        start_ready: ready_at - t0,
        send_answer: again_at - t1,
    }
}

/// Starts `n` Codex sessions, each to the end of one turn with its process
/// left alive, and measures: each codex process tree's RSS, and the
/// server's RSS before and with all of them live. Then ends them.
pub(super) async fn hold(
    client: &SessionServiceClient<Channel>,
    server: &Server,
    work: &Path,
    n: usize,
) -> CodexMemory {
    let server_rss_before = server.rss_bytes();
    let mut live = Vec::with_capacity(n);
    for i in 0..n {
        let session = format!("codex-live-{i}");
        let mut sub = Sub::open(client.clone(), &session).await;
        let request = start_request(&session, work, format!("TEXT live {i}"));
        let resp = started(
            &session,
            tokio::time::timeout(WAIT, client.clone().start(request)).await,
        )
        .await;
        sub.turn_end(&resp.run_id, 0).await;
        live.push((sub, pid_of(&session, &resp)));
    }
    // The last turn's bookkeeping (its commit, the stream) settles.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let server_rss_after = server.rss_bytes();
    let trees: Vec<u64> = live.iter().map(|(_, pid)| tree_rss(*pid)).collect();
    for (sub, pid) in &mut live {
        end_pid(*pid);
        sub.until("run_end", |p| matches!(p, Payload::RunEnd(_)))
            .await;
    }
    let sessions = n.max(1) as f64;
    CodexMemory {
        sessions: n,
        ours_tree_rss: trees.iter().sum::<u64>() as f64 / sessions,
        ours_tree_rss_max: trees.iter().copied().max().unwrap_or(0),
        raw_tree_rss: 0.0,
        server_rss_before,
        server_rss_after,
        server_per_session: server_rss_after.saturating_sub(server_rss_before) as f64 / sessions,
    }
}
