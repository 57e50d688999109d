//! Two nodes on one PostgreSQL database (in-process servers, short
//! leases): one owner per session, a write on the other node answered
//! UNAVAILABLE naming the owner, a lapsed owner fenced (its late commit
//! refused, its process stopped), the session taken over with exactly one
//! run_end per run, and a dead node's live run closed by the reaper
//! without any call.

use std::sync::Arc;
use std::time::Duration;

use crate::support::postgres::cluster;
use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::{
    Sub, TestServer, WAIT, fast_opts, first_turn, is_run_end, run_end, send_request,
};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::ServeOptions;
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::node::Node;
use agent_harness_server::rpc::OWNER_HEADER;
use agent_harness_server::store::{PostgresStore, Store};

const LEASE: Duration = Duration::from_millis(600);

/// A node named `id` on the database at `url`. Its CLI ignores interrupt,
/// SIGINT and SIGTERM: stopping it takes the whole ladder, longer than the
/// lease, so a fenced node's run_end comes after its lease has run out.
async fn node(url: &str, id: &str) -> (TestServer, Arc<Node>) {
    node_leased(url, id, LEASE).await
}

/// [`node`] with a lease of `lease`.
async fn node_leased(url: &str, id: &str, lease: Duration) -> (TestServer, Arc<Node>) {
    let store: Arc<dyn Store> = Arc::new(tokio::task::block_in_place(|| {
        PostgresStore::open(url).unwrap()
    }));
    let node = Node::join(store.clone(), id, &format!("{id}.test:1"), lease)
        .await
        .unwrap()
        .expect("a shared store");
    let adapter = ScriptedAdapter::new(ScriptedBehavior {
        honor_interrupt: false,
        ignore_sigint: true,
        ignore_sigterm: true,
        ..ScriptedBehavior::default()
    });
    let mopts = ManagerOptions {
        stop_grace: Duration::from_millis(900),
        kill_grace: Duration::from_millis(300),
        node: Some(node.clone()),
        ..fast_opts()
    };
    let spawner = Arc::new(adapter.clone());
    let server =
        TestServer::with_adapter(store, spawner, adapter, mopts, ServeOptions::default()).await;
    (server, node)
}

fn database() -> String {
    tokio::task::block_in_place(|| cluster().fresh_database())
}

/// Polls `f` until it holds (bounded by [`WAIT`]).
async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The owner a refused write names.
fn owner_named(status: &tonic::Status) -> String {
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    status
        .metadata()
        .get(OWNER_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The seqs of `events` run 1..=n, no run has more than one run_end, and
/// run `ended` has one.
fn one_end_per_run_and_no_gap(events: &[pb::Event], ended: &str) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let mut runs: Vec<&str> = events
        .iter()
        .filter(|e| matches!(e.payload, Some(Payload::RunStart(_))))
        .map(|e| e.run_id.as_str())
        .collect();
    runs.dedup();
    for run in runs {
        let ends = events
            .iter()
            .filter(|e| e.run_id == run && is_run_end(e))
            .count();
        let want = if run == ended { 1 } else { ends.min(1) };
        assert_eq!(ends, want, "run {run}: {ends} run_end");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_a_node_that_does_not_own_the_session_names_the_owner() {
    let url = database();
    let (a, _na) = node(&url, "node-a").await;
    let (b, _nb) = node(&url, "node-b").await;
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    first_turn(&mut ca, "s", "hello").await;
    let refused = cb
        .send(send_request("s", "from b", ""))
        .await
        .expect_err("B does not own s");
    assert_eq!(owner_named(&refused), "node-a");
    assert!(refused.message().contains("node-a.test:1"), "{refused:?}");
    // Naming the session is a write too.
    let refused = cb
        .set_title(pb::SetTitleRequest {
            session_id: "s".into(),
            title: "from b".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect_err("B does not own s");
    assert_eq!(owner_named(&refused), "node-a");
    // Reads work anywhere.
    let got = cb
        .get_session(pb::GetSessionRequest {
            session_id: "s".into(),
        })
        .await
        .expect("GetSession on B");
    assert!(got.into_inner().session.is_some());
    // And the owner still takes writes.
    ca.send(send_request("s", "from a", ""))
        .await
        .expect("A owns s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_owner_is_fenced_and_the_other_node_takes_the_session_over() {
    let url = database();
    let (a, na) = node(&url, "node-a").await;
    let (b, _nb) = node(&url, "node-b").await;
    let (mut ca, mut cb) = (a.client().await, b.client().await);
    let (_sub, started) = first_turn(&mut ca, "s", "hello").await;
    // A stops renewing, as a node paused past its lease: it fences itself
    // (stops its process, whose run_end comes after the lease ran out).
    na.suspend_renewing(true);
    let mut watch = na.watch_serving();
    watch.wait_for(|serving| !serving).await.unwrap();
    // B's Send is refused while A's lease is live, then B claims, closes
    // A's run (one inferred SERVER_RESTART) and starts its own.
    let mut sent = None;
    until("B takes the session over", async || {
        match cb.send(send_request("s", "on b", "k1")).await {
            Ok(r) => {
                sent = Some(r.into_inner());
                true
            }
            Err(s) => {
                assert_eq!(owner_named(&s), "node-a");
                false
            }
        }
    })
    .await;
    let mut sub = Sub::open(&mut cb, "s", 0).await;
    let end = sub
        .until("A's run_end", |e| {
            is_run_end(e) && e.run_id == started.run_id
        })
        .await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::ServerRestart as i32);
    assert!(run_end(&end).inferred, "{end:?}");
    sub.until("B's turn", |e| {
        matches!(e.payload, Some(Payload::TurnEnd(_))) && e.run_id != started.run_id
    })
    .await;
    // A's process is stopped and its late run_end refused: nothing more of
    // its run lands.
    until("A's run is gone", async || a.manager.live_runs() == 0).await;
    let events = b.stored_events("s");
    one_end_per_run_and_no_gap(&events, &started.run_id);
    // A returns under a new epoch and does not take the session back.
    na.suspend_renewing(false);
    watch.wait_for(|serving| *serving).await.unwrap();
    let refused = ca
        .send(send_request("s", "back on a", ""))
        .await
        .expect_err("B owns s now");
    assert_eq!(owner_named(&refused), "node-b");
    // Nor may A delete it: refused naming B, nothing deleted.
    let before = b.stored_events("s");
    let delete = ca
        .delete_session(pb::DeleteSessionRequest {
            session_id: "s".into(),
            ..Default::default()
        })
        .await
        .expect_err("B owns s now");
    assert_eq!(owner_named(&delete), "node-b");
    assert_eq!(b.stored_events("s"), before);
    assert!(sent.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reaper_closes_a_dead_nodes_live_run_without_any_call() {
    let url = database();
    let (a, na) = node(&url, "node-a").await;
    let (b, _nb) = node(&url, "node-b").await;
    let mut ca = a.client().await;
    let (_sub, started) = first_turn(&mut ca, "s", "hello").await;
    na.suspend_renewing(true);
    // Nobody calls: B's reaper finds A's session past the grace.
    let mut cb = b.client().await;
    let mut sub = Sub::open(&mut cb, "s", 0).await;
    let end = sub
        .until("the run_end", |e| {
            is_run_end(e) && e.run_id == started.run_id
        })
        .await;
    assert_eq!(run_end(&end).reason, pb::RunEndReason::ServerRestart as i32);
    until("A's run is gone", async || a.manager.live_runs() == 0).await;
    one_end_per_run_and_no_gap(&b.stored_events("s"), &started.run_id);
}

/// A PostgreSQL of its own: killing the shared one would fail the tests
/// running beside this one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_cannot_reach_the_database_past_its_lease_stops_its_processes() {
    use crate::support::postgres::Cluster;
    let db = tokio::task::block_in_place(Cluster::start);
    tokio::task::block_in_place(|| db.sql("postgres", "CREATE DATABASE fencing"));
    let store: Arc<dyn Store> = Arc::new(tokio::task::block_in_place(|| {
        PostgresStore::open(&db.url("fencing")).unwrap()
    }));
    let node = Node::join(store.clone(), "node-a", "", LEASE)
        .await
        .unwrap()
        .unwrap();
    let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
    let mopts = ManagerOptions {
        node: Some(node.clone()),
        ..fast_opts()
    };
    let spawner = Arc::new(adapter.clone());
    let server = TestServer::with_adapter(
        store,
        spawner,
        adapter.clone(),
        mopts,
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let (_sub, started) = first_turn(&mut c, "s", "hello").await;
    let mut serving = node.watch_serving();

    tokio::task::block_in_place(|| db.kill_server());
    // Past its deadline the node fences itself: its process is told to
    // stop, and writes are refused.
    serving.wait_for(|s| !s).await.unwrap();
    adapter
        .wait_for(|_, call| call == "interrupt" || call.starts_with("signal:"))
        .await;
    let refused = c
        .send(send_request("s", "while fenced", ""))
        .await
        .expect_err("a fenced node takes no writes");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");

    // The database returns: the node rejoins under a new epoch, and the run
    // ends exactly once (by the node itself if its lease still held, else
    // by its reaper taking over its own earlier epoch's session).
    tokio::task::block_in_place(|| db.start_server());
    serving.wait_for(|s| *s).await.unwrap();
    until("the run ended", async || {
        server
            .stored_events("s")
            .iter()
            .any(|e| e.run_id == started.run_id && is_run_end(e))
    })
    .await;
    until("the run task is gone", async || {
        server.manager.live_runs() == 0
    })
    .await;
    one_end_per_run_and_no_gap(&server.stored_events("s"), &started.run_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_shut_down_cleanly_lets_another_claim_its_sessions_at_once() {
    let url = database();
    // A lease far longer than the test: only leaving ends it in time.
    let (a, _na) = node_leased(&url, "node-a", Duration::from_secs(60)).await;
    let (b, _nb) = node(&url, "node-b").await;
    let mut ca = a.client().await;
    let (_sub, started) = first_turn(&mut ca, "s", "hello").await;
    a.shutdown().await.unwrap();
    let mut cb = b.client().await;
    let run = cb
        .send(send_request("s", "on b", ""))
        .await
        .expect("B claims at once")
        .into_inner()
        .run_id;
    assert_ne!(run, started.run_id);
    one_end_per_run_and_no_gap(&b.stored_events("s"), &started.run_id);
}
