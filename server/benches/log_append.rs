//! Durable append throughput with group commit.
//!
//! `cargo bench -p agent-harness-server --bench log_append [-- FILTER]`
//!
//! Every `EventLogs::commit` resolves only after its `Durability::Immediate`
//! commit to a real redb file. Three shapes (FILTER picks shapes whose label
//! contains it, e.g. `-- batch`):
//! - `batch`: S sessions, ONE appender per session appending batches of k
//!   events and awaiting each call. This is how the manager appends: one run
//!   task per session appends all stdout lines that arrived together as one
//!   call and awaits it (it folds the returned events) before the next.
//!   The 50,000 events/s target is judged on this shape.
//! - `single`: N concurrent tasks, each appending ONE event per call, spread
//!   round-robin over S sessions (a stress shape: more appends in flight on
//!   one session than the manager ever issues).
//! - `store`: raw `RedbStore::append_batch` of E events over S sessions, no
//!   log around it: the floor the disk and redb set for one commit.
//!
//! Plus the sequential single appender (one fsync per call).

mod common;

use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_server::log::{Commit, LogOptions};
use agent_harness_server::store::{RedbStore, SessionMeta, Store};
use common::{new_event, redb_logs, runtime};

/// Events per case (rounded down to whole batches).
const EVENTS: u64 = 100_000;

fn main() {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let want = |label: &str| label.contains(filter.as_str());
    let rt = runtime();
    println!("log_append: ~{EVENTS} events per case, redb Durability::Immediate");
    for (sessions, k) in [
        (10u64, 10u64),
        (100, 1),
        (100, 10),
        (100, 50),
        (1_000, 1),
        (1_000, 10),
    ] {
        let label = format!("batch   sessions={sessions:>5} x 1 appender, {k:>2} events/append");
        if !want(&label) {
            continue;
        }
        let per_task = EVENTS / sessions / k;
        let total = per_task * sessions * k;
        let dt = rt.block_on(run(sessions, sessions, per_task, k));
        report(&label, total, dt);
    }
    for (appenders, sessions) in [
        (100u64, 1u64),
        (100, 10),
        (100, 100),
        (1_000, 1),
        (1_000, 10),
        (1_000, 100),
    ] {
        let label =
            format!("single  appenders={appenders:>4} sessions={sessions:>3},  1 event/append ");
        if !want(&label) {
            continue;
        }
        let per_task = EVENTS / appenders;
        let dt = rt.block_on(run(appenders, sessions, per_task, 1));
        report(&label, per_task * appenders, dt);
    }
    for (events, sessions) in [(100usize, 1usize), (100, 100), (1_000, 100), (1_000, 1_000)] {
        let label = format!("store   raw commit of {events:>4} events over {sessions:>4} sessions");
        if want(&label) {
            store_commit(&label, events, sessions);
        }
    }
    if want("sequential") {
        rt.block_on(async {
            let (_dir, logs) = redb_logs(LogOptions::default());
            let n = 500u64;
            let t0 = Instant::now();
            for i in 0..n {
                logs.commit("seq", Commit::events(vec![new_event(i)])).await.expect("append");
            }
            let dt = t0.elapsed();
            println!(
                "  sequential single appender (one commit per call): {:>7.0} appends/s, {:.2?} per durable commit",
                n as f64 / dt.as_secs_f64(),
                dt / n as u32
            );
            logs.shutdown().await;
        });
    }
}

fn report(label: &str, total: u64, (dt, commits): (Duration, u64)) {
    println!(
        "  {label}: {:>8.0} events/s  ({total} events in {dt:.2?}, {commits} commits of {:.0} events)",
        total as f64 / dt.as_secs_f64(),
        total as f64 / commits.max(1) as f64
    );
}

/// `tasks` appenders spread round-robin over `sessions`, each doing `per_task`
/// appends of `k` events; returns the wall time until every append resolved
/// and the number of group commits.
async fn run(tasks: u64, sessions: u64, per_task: u64, k: u64) -> (Duration, u64) {
    let (_dir, logs) = redb_logs(LogOptions::default());
    // Events are built before the clock starts, as the manager builds them
    // from stdout lines before it calls append.
    let mut inputs = Vec::with_capacity(tasks as usize);
    for t in 0..tasks {
        let batches: Vec<Vec<_>> = (0..per_task)
            .map(|i| (0..k).map(|j| new_event(i * k + j)).collect())
            .collect();
        inputs.push((format!("session-{}", t % sessions), batches));
    }
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(tasks as usize);
    for (sid, batches) in inputs {
        let logs = logs.clone();
        handles.push(tokio::spawn(async move {
            for b in batches {
                logs.commit(&sid, Commit::events(b)).await.expect("append");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let dt = t0.elapsed();
    let mut total = 0u64;
    for s in 0..sessions {
        total += logs.head_seq(&format!("session-{s}")).await.unwrap();
    }
    assert_eq!(total, tasks * per_task * k, "every append landed");
    let commits = logs.stats().commits;
    logs.shutdown().await;
    (dt, commits)
}

/// Mean time of one raw durable commit of `events` events spread over `sessions`.
fn store_commit(label: &str, events: usize, sessions: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RedbStore::open(&dir.path().join("s.redb")).expect("open");
    let ids: Vec<String> = (0..sessions).map(|s| format!("session-{s}")).collect();
    let mut heads = vec![0u64; sessions];
    let mut batch_of = |n: usize| -> (Vec<pb::Event>, Vec<SessionMeta>) {
        let evs = (0..n)
            .map(|i| {
                let s = i % sessions;
                heads[s] += 1;
                let ne = new_event(heads[s]);
                pb::Event {
                    seq: heads[s],
                    session_id: ids[s].clone(),
                    run_id: ne.run_id,
                    time: Some(pbjson_types::Timestamp {
                        seconds: 1_700_000_000,
                        nanos: 0,
                    }),
                    cli_line: ne.cli_line,
                    truncated: None,
                    payload: Some(ne.payload),
                }
            })
            .collect();
        (evs, Vec::new())
    };
    // Some history first, so every session's B-tree path exists.
    for _ in 0..20 {
        let (evs, _) = batch_of(sessions);
        let metas: Vec<_> = ids.iter().map(|id| SessionMeta::new(id, 1)).collect();
        store.append_batch(&evs, &metas).expect("commit");
    }
    let rounds = (100_000 / events).clamp(20, 200);
    let batches: Vec<_> = (0..rounds).map(|_| batch_of(events)).collect();
    let t0 = Instant::now();
    for (evs, metas) in &batches {
        store.append_batch(evs, metas).expect("commit");
    }
    let per = t0.elapsed() / rounds as u32;
    println!(
        "  {label}: {:>8.0} events/s  ({per:.2?} per commit)",
        events as f64 / per.as_secs_f64()
    );
}
