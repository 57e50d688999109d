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

#[tokio::test]
async fn a_failing_store_ends_the_run_and_health_follows_storage() {
    let store = Arc::new(Probe::default());
    // The process ignores SIGINT, so it lives on (SIGTERM comes
    // `kill_grace` later) while the test heals the store.
    let adapter = ScriptedAdapter::new(ScriptedBehavior {
        ignore_sigint: true,
        ..ScriptedBehavior::default()
    });
    let server = TestServer::with_adapter(
        store.clone(),
        Arc::new(adapter.clone()),
        adapter,
        ManagerOptions {
            kill_grace: Duration::from_secs(2),
            ..fast_opts()
        },
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let (mut sub, started) = first_turn(&mut c, "disk", "hello").await;
    assert_eq!(health(&server).await, ServingStatus::Serving as i32);

    store.fail.store(true, Ordering::SeqCst);
    // The input reaches the process, but its input_sent cannot be
    // recorded: the run is being ended.
    send(&mut c, "disk", "more").await.unwrap();
    health_becomes(&server, ServingStatus::NotServing).await;
    server.adapter.wait_for(|_, c| c == "signal:Int").await;

    store.fail.store(false, Ordering::SeqCst);
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(end.run_id, started.run_id);
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).source, "storage");
    let error = sub
        .events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::RunError(r)) if r.kind == "storage" => Some(r.clone()),
            _ => None,
        })
        .expect("run_error{storage}");
    assert!(error.message.contains("the disk is full"), "{error:?}");
    health_becomes(&server, ServingStatus::Serving).await;

    // The log is whole and the session goes on with a new process.
    let s = assert_derived_matches_log(&mut c, "disk").await;
    assert!(!s.process_alive);
    let next = send(&mut c, "disk", "after the disk was fixed")
        .await
        .unwrap();
    assert_ne!(next, started.run_id);
    sub.until("turn_end of the new run", |e| {
        is_turn_end(e) && e.run_id == next
    })
    .await;
    server.shutdown().await.unwrap();
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
    use agent_harness_server::store::{PostgresStore, Store};
    let db = tokio::task::block_in_place(Cluster::start);
    tokio::task::block_in_place(|| db.sql("postgres", "CREATE DATABASE faults"));
    let store: Arc<dyn Store> = Arc::new(PostgresStore::open(&db.url("faults")).unwrap());
    let adapter = ScriptedAdapter::new(ScriptedBehavior {
        ignore_sigint: true,
        ..ScriptedBehavior::default()
    });
    let server = TestServer::with_adapter(
        store.clone(),
        Arc::new(adapter.clone()),
        adapter,
        ManagerOptions {
            kill_grace: Duration::from_secs(2),
            ..fast_opts()
        },
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let (mut sub, started) = first_turn(&mut c, "pg", "hello").await;
    assert_eq!(health(&server).await, ServingStatus::Serving as i32);

    tokio::task::block_in_place(|| db.kill_server());
    send(&mut c, "pg", "more").await.unwrap();
    health_becomes(&server, ServingStatus::NotServing).await;
    server.adapter.wait_for(|_, c| c == "signal:Int").await;

    tokio::task::block_in_place(|| db.start_server());
    let end = sub.until("run_end", is_run_end).await;
    assert_eq!(end.run_id, started.run_id);
    assert_eq!(run_end(&end).reason, pb::RunEndReason::Error as i32);
    assert_eq!(run_end(&end).source, "storage");
    assert!(
        sub.events.iter().any(|e| matches!(
            &e.payload,
            Some(Payload::RunError(r)) if r.kind == "storage"
        )),
        "run_error{{storage}}"
    );
    health_becomes(&server, ServingStatus::Serving).await;

    // Every event the client saw is stored as it saw it, gapless.
    let stored = history_all(&mut c, "pg").await;
    for seen in &sub.events {
        let kept = stored.iter().find(|e| e.seq == seen.seq);
        assert_eq!(kept, Some(seen), "seq {}", seen.seq);
    }
    let seqs: Vec<u64> = stored.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let s = assert_derived_matches_log(&mut c, "pg").await;
    assert!(!s.process_alive);
    let next = send(&mut c, "pg", "after the database came back")
        .await
        .unwrap();
    assert_ne!(next, started.run_id);
    sub.until("turn_end of the new run", |e| {
        is_turn_end(e) && e.run_id == next
    })
    .await;
    server.shutdown().await.unwrap();
}
