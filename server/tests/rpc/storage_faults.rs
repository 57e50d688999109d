//! A store that starts failing: the run whose output can no longer be
//! recorded is ended (its process stopped, `run_error{storage}` and
//! `run_end{ERROR, source: "storage"}` once storage works again), health
//! (and `GET /healthz`) says NOT_SERVING while commits fail and SERVING after the next one
//! succeeds, and the session goes on.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::ServeOptions;
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::Store;
use pb::session_service_client::SessionServiceClient;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

use crate::routing::healthz;
use crate::support::probe::Probe;
use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::*;

async fn health(server: &TestServer) -> i32 {
    HealthClient::new(server.channel().await)
        .check(tonic_health::pb::HealthCheckRequest {
            service: "agentharness.v1.SessionService".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// Waits until the gRPC health service says `want` and `GET /healthz`
/// (what a balancer checks) says the same: 200 serving, 503 not.
async fn health_becomes(server: &TestServer, want: ServingStatus) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let http = match want {
        ServingStatus::Serving => (200, "serving\n".to_owned()),
        _ => (503, "not serving\n".to_owned()),
    };
    while health(server).await != want as i32 || healthz(server.addr).await != http {
        assert!(
            tokio::time::Instant::now() < deadline,
            "health never became {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A server on `store` whose process ignores SIGINT, so it lives on
/// (SIGTERM comes `kill_grace` later) while the test heals the store; and
/// `sid`'s first turn on it, health SERVING.
async fn a_first_turn_on(store: Arc<dyn Store>, sid: &str) -> (TestServer, Turn) {
    let adapter = ScriptedAdapter::new(ScriptedBehavior {
        ignore_sigint: true,
        ..ScriptedBehavior::default()
    });
    let server = TestServer::with_adapter(
        store,
        Arc::new(adapter.clone()),
        adapter,
        ManagerOptions {
            kill_grace: Duration::from_secs(2),
            ..fast_opts()
        },
        ServeOptions::default(),
    )
    .await;
    let mut client = server.client().await;
    let (sub, started) = first_turn(&mut client, sid, "hello").await;
    assert_eq!(health(&server).await, ServingStatus::Serving as i32);
    let turn = Turn {
        client,
        sub,
        run_id: started.run_id,
    };
    (server, turn)
}

/// The client of a test, its Subscribe stream and the first run.
struct Turn {
    client: SessionServiceClient<Channel>,
    sub: Sub,
    run_id: String,
}

/// With the store failing: the input reaches the process, but its
/// input_sent cannot be recorded, so health goes NOT_SERVING and the run
/// is being ended (its process told to interrupt).
async fn send_while_failing(server: &TestServer, turn: &mut Turn, sid: &str) {
    send(&mut turn.client, sid, "more").await.unwrap();
    health_becomes(server, ServingStatus::NotServing).await;
    server.adapter.wait_for(|_, c| c == "signal:Int").await;
}

/// With the store healed: the run ends `run_end{ERROR, storage}` after a
/// `run_error{storage}`, which it returns; health is SERVING again.
async fn ended_by_storage(server: &TestServer, turn: &mut Turn) -> pb::RunError {
    let end = turn.sub.until("run_end", is_run_end).await;
    assert_eq!(end.run_id, turn.run_id);
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).source, "storage");
    let error = turn
        .sub
        .events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::RunError(r)) if r.kind == "storage" => Some(r.clone()),
            _ => None,
        })
        .expect("run_error{storage}");
    health_becomes(server, ServingStatus::Serving).await;
    error
}

/// The log is whole and the session goes on with a new process.
async fn goes_on(server: TestServer, mut turn: Turn, sid: &str) {
    let s = assert_derived_matches_log(&mut turn.client, sid).await;
    assert!(!s.process_alive);
    let next = send(&mut turn.client, sid, "after the store was healed")
        .await
        .unwrap();
    assert_ne!(next, turn.run_id);
    turn.sub
        .until("turn_end of the new run", |e| {
            is_turn_end(e) && e.run_id == next
        })
        .await;
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failing_store_ends_the_run_and_health_follows_storage() {
    let store = Arc::new(Probe::default());
    let (server, mut turn) = a_first_turn_on(store.clone(), "disk").await;
    store.fail.store(true, Ordering::SeqCst);
    send_while_failing(&server, &mut turn, "disk").await;
    store.fail.store(false, Ordering::SeqCst);
    let error = ended_by_storage(&server, &mut turn).await;
    assert!(error.message.contains("the disk is full"), "{error:?}");
    goes_on(server, turn, "disk").await;
}

/// The same on PostgreSQL with the database really killed (as a crash
/// would: `pg_ctl stop -m immediate`) mid-turn and started again on the
/// same port: the run is ended, health follows, and the server recovers by
/// itself (the pool makes new connections); nothing a client saw is lost
/// or changed. The database is this test's own: killing the binary's
/// shared one would fail the tests running beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_killed_mid_turn_ends_the_run_and_the_server_recovers_by_itself() {
    use crate::support::postgres::Cluster;
    use agent_harness_server::store::PostgresStore;
    let db = tokio::task::block_in_place(Cluster::start);
    tokio::task::block_in_place(|| db.sql("postgres", "CREATE DATABASE faults"));
    let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&db.url("faults")).unwrap());
    let (server, mut turn) = a_first_turn_on(store, "pg").await;
    tokio::task::block_in_place(|| db.kill_server());
    send_while_failing(&server, &mut turn, "pg").await;
    tokio::task::block_in_place(|| db.start_server());
    ended_by_storage(&server, &mut turn).await;

    // Every event the client saw is stored as it saw it, gapless.
    let stored = history_all(&mut turn.client, "pg").await;
    for seen in &turn.sub.events {
        let kept = stored.iter().find(|e| e.seq == seen.seq);
        assert_eq!(kept, Some(seen), "seq {}", seen.seq);
    }
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    goes_on(server, turn, "pg").await;
}
