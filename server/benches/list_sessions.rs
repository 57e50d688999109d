//! ListSessions over 10,000 stored sessions, answered from the session
//! index, on redb and on PostgreSQL.
//!
//! `cargo bench -p agent-harness-server --bench list_sessions`
//!
//! For each store: writes the sessions straight into it (one finished run
//! each, 3 agents, 20 cwds, a prompt that titles them, distinct times),
//! times the start-up rebuild of their index rows, then times a page of 100
//! (the manager's ListSessions, as the RPC handler calls it: the index
//! query, then each listed session folded from its log) for each order,
//! a text query, and a text query with an agent filter; and a page deep
//! in the recent-activity order (the 50th, through its token). PostgreSQL
//! is a throwaway server (`agent-harness-pg-temp`); skipped when it cannot
//! start. `AGENT_HARNESS_BENCH_SESSIONS` changes the count.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::cassette::CassetteAdapter;
use agent_harness_server::listing::Listing;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use agent_harness_server::store::{PostgresStore, RedbStore, SessionMeta, Store};
use common::runtime;

const ROUNDS: usize = 30;

fn sessions() -> usize {
    std::env::var("AGENT_HARNESS_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// `n` sessions of one finished run each, written straight into `store`.
fn seed(store: &dyn Store, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut events = Vec::new();
        let mut metas = Vec::new();
        for &i in chunk {
            let sid = format!("s{i:06}");
            let ev = |seq: u64, payload| pb::Event {
                seq,
                session_id: sid.clone(),
                run_id: "r".into(),
                time: Some(agent_harness_protocol::pbjson_types::Timestamp {
                    seconds: 1_700_000_000 + ((i * 7919) % n) as i64,
                    nanos: seq as i32,
                }),
                payload: Some(payload),
                ..Default::default()
            };
            let word = ["alpha", "beta", "gamma", "delta"][i % 4];
            events.push(ev(
                1,
                Payload::RunStart(pb::RunStart {
                    agent: ["claude", "codex", "gemini"][i % 3].into(),
                    config: Some(pb::StartConfig {
                        cwd: format!("/home/dev/project-{:02}", i % 20),
                        prompt: format!("Task {i}: {word} refactor of the module"),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            ));
            events.push(ev(
                2,
                Payload::RunEnd(pb::RunEnd {
                    reason: pb::RunEndReason::Completed as i32,
                    ..Default::default()
                }),
            ));
            metas.push(SessionMeta::new(&sid, 1));
        }
        store.append_batch(&events, &metas).expect("seed");
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn page(m: &SessionManager, req: &pb::ListSessionsRequest) -> pb::ListSessionsResponse {
    let listing = Listing::parse(req).expect("a valid request");
    m.list_sessions(&listing).await.expect("list")
}

async fn bench(name: &str, store: Arc<dyn Store>, n: usize) {
    let t = Instant::now();
    seed(store.as_ref(), n);
    println!("{name}: {n} sessions written in {}", ms(t.elapsed()));
    let logs = EventLogs::open(store, LogOptions::default()).expect("log");
    let t = Instant::now();
    let rebuilt = logs.rebuild_index().await.expect("rebuild");
    println!(
        "{name}: start-up index rebuild of {rebuilt} rows: {}",
        ms(t.elapsed())
    );
    let cassette =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cassettes/one_shot.cassette.jsonl");
    let adapter = CassetteAdapter::from_file(cassette, 0.0).expect("cassette");
    let m = SessionManager::new(Arc::new(adapter), logs, ManagerOptions::default());
    let order = |o: pb::SessionOrder| pb::ListSessionsRequest {
        page_size: 100,
        order: o as i32,
        ..Default::default()
    };
    let cases = [
        (
            "order SESSION_ID (no filter)",
            order(pb::SessionOrder::SessionId),
        ),
        (
            "order RECENT_ACTIVITY",
            order(pb::SessionOrder::RecentActivity),
        ),
        ("order CWD", order(pb::SessionOrder::Cwd)),
        (
            "query \"alpha\", RECENT_ACTIVITY",
            pb::ListSessionsRequest {
                query: "alpha".into(),
                ..order(pb::SessionOrder::RecentActivity)
            },
        ),
        (
            "query \"project-07\" + agent codex, CWD",
            pb::ListSessionsRequest {
                query: "project-07".into(),
                agent: "codex".into(),
                ..order(pb::SessionOrder::Cwd)
            },
        ),
    ];
    for (what, req) in &cases {
        let first = page(&m, req).await;
        let mut took = Vec::with_capacity(ROUNDS);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            page(&m, req).await;
            took.push(t.elapsed());
        }
        took.sort();
        println!(
            "{name}: {what}: {} listed of {}: p50 {}, p90 {}, max {}",
            first.sessions.len(),
            first.total_size,
            ms(took[ROUNDS / 2]),
            ms(took[ROUNDS * 9 / 10]),
            ms(took[ROUNDS - 1])
        );
    }
    // The 50th page of the recent-activity order, through the tokens.
    let mut req = order(pb::SessionOrder::RecentActivity);
    for _ in 1..50 {
        req.page_token = page(&m, &req).await.next_page_token;
    }
    let t = Instant::now();
    let deep = page(&m, &req).await;
    println!(
        "{name}: 50th page of RECENT_ACTIVITY ({} listed): {}",
        deep.sessions.len(),
        ms(t.elapsed())
    );
    m.shutdown().await;
}

fn main() {
    let n = sessions();
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let redb = RedbStore::open(&dir.path().join("agent-harness.redb")).expect("redb");
    rt.block_on(bench("redb", Arc::new(redb), n));
    let started = std::panic::catch_unwind(agent_harness_pg_temp::Cluster::start);
    match started {
        Ok(cluster) => {
            let url = cluster.fresh_database();
            let pg = PostgresStore::open(&url).expect("postgres");
            rt.block_on(bench("postgres", Arc::new(pg), n));
        }
        Err(_) => println!("postgres: skipped (no PostgreSQL server could start)"),
    }
}
