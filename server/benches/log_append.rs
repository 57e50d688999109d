//! Durable append throughput with group commit, across 1/10/100 sessions.
//!
//! `cargo bench -p agent-harness-server --bench log_append`
//!
//! 100 concurrent appenders each append ONE event per call (how the manager
//! appends CLI lines) to a real redb file; every call resolves only after its
//! `Durability::Immediate` commit. Also prints the sequential single-appender
//! rate, which is bounded by one fsync per call.

mod common;

use std::time::Instant;

use agent_harness_server::log::LogOptions;
use common::{new_event, redb_logs, runtime};

const EVENTS: u64 = 100_000;

fn main() {
    let rt = runtime();
    println!("log_append: {EVENTS} events, 1 event per append call, redb Durability::Immediate");
    for (appenders, sessions) in [
        (100u64, 1u64),
        (100, 10),
        (100, 100),
        (1_000, 1),
        (1_000, 10),
        (1_000, 100),
    ] {
        rt.block_on(async {
            let (_dir, logs) = redb_logs(LogOptions::default());
            let per_task = EVENTS / appenders;
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for t in 0..appenders {
                let logs = logs.clone();
                let sid = format!("session-{}", t % sessions);
                tasks.push(tokio::spawn(async move {
                    for i in 0..per_task {
                        logs.append(&sid, vec![new_event(i)]).await.expect("append");
                    }
                }));
            }
            for t in tasks {
                t.await.expect("task");
            }
            let dt = t0.elapsed();
            let total: u64 = (0..sessions).map(|s| logs.head_seq(&format!("session-{s}"))).sum();
            assert_eq!(total, EVENTS);
            println!(
                "  appenders={appenders:>5} sessions={sessions:>3}: {:>9.0} events/s  ({EVENTS} events in {:.2?})",
                EVENTS as f64 / dt.as_secs_f64(),
                dt
            );
            logs.shutdown().await;
        });
    }
    rt.block_on(async {
        let (_dir, logs) = redb_logs(LogOptions::default());
        let n = 500u64;
        let t0 = Instant::now();
        for i in 0..n {
            logs.append("seq", vec![new_event(i)]).await.expect("append");
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
