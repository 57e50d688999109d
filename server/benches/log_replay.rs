//! Replay throughput from storage.
//!
//! `cargo bench -p agent-harness-server --bench log_replay`
//!
//! Writes 200,000 events to a redb file, reopens it (so the in-memory
//! windows are empty and every event comes from the file), then measures a
//! Subscribe replay from seq 0 to `caught_up`, and the raw
//! `Store::read_range` scan for comparison.

mod common;

use std::sync::Arc;
use std::time::Instant;

use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::store::{RedbStore, Store};
use common::{new_event, runtime};
use futures::StreamExt;

const EVENTS: u64 = 200_000;

fn main() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("agent-harness.redb");
    let opts = LogOptions {
        max_replay: u64::MAX,
        ..LogOptions::default()
    };
    rt.block_on(async {
        let logs = EventLogs::open(
            Arc::new(RedbStore::open(&path).expect("open")),
            opts.clone(),
        )
        .expect("log");
        for chunk in 0..EVENTS / 5_000 {
            logs.commit(
                "s",
                Commit::events((0..5_000).map(|i| new_event(chunk * 5_000 + i)).collect()),
            )
            .await
            .expect("append");
        }
        logs.shutdown().await;
    });
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "log_replay: {EVENTS} events in a redb file of {:.1} MiB, reopened (empty window)",
        size as f64 / (1 << 20) as f64
    );

    let store = Arc::new(RedbStore::open(&path).expect("reopen"));
    rt.block_on(async {
        let logs = EventLogs::open(store.clone(), opts.clone()).expect("log");
        let t0 = Instant::now();
        let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
        let mut n = 0u64;
        while let Some(msg) = s.next().await {
            match msg.kind {
                Some(Kind::Event(e)) => {
                    n += 1;
                    assert_eq!(e.seq, n);
                }
                Some(Kind::CaughtUp(_)) => break,
                _ => {}
            }
        }
        let dt = t0.elapsed();
        assert_eq!(n, EVENTS);
        println!(
            "  Subscribe replay from storage: {:>9.0} events/s  ({n} events in {dt:.2?})",
            n as f64 / dt.as_secs_f64()
        );
        drop(s);
        logs.shutdown().await;
    });

    let t0 = Instant::now();
    let mut after = 0;
    loop {
        let evs = store.read_range("s", after, 4_096).expect("read");
        let Some(last) = evs.last() else { break };
        after = last.seq;
    }
    let dt = t0.elapsed();
    println!(
        "  raw Store::read_range scan:    {:>9.0} events/s  ({after} events in {dt:.2?})",
        after as f64 / dt.as_secs_f64()
    );
}
