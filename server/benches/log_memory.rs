//! Memory per idle subscriber.
//!
//! `cargo bench -p agent-harness-server --bench log_memory`
//!
//! Opens N live Subscribe streams on a session with 2,000 events in its
//! window, each driven to `caught_up` by its own task (as the gRPC layer
//! drives a response stream), then idle. Reports the RSS growth per
//! subscriber. The figure includes the tokio task and the stream state; the
//! subscribers replay from the shared window and keep no copy of it.

mod common;

use std::time::Duration;

use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, LogOptions};
use common::{new_event, redb_logs, rss_bytes, runtime};
use futures::StreamExt;
use tokio::sync::mpsc;

fn main() {
    let rt = runtime();
    rt.block_on(async {
        let (_dir, logs) = redb_logs(LogOptions::default());
        for chunk in 0..4u64 {
            logs.commit("s", Commit::events((0..500).map(|i| new_event(chunk * 500 + i)).collect()))
                .await
                .expect("append");
        }
        println!("log_memory: idle live subscribers on a session with 2,000 events (replayed from the window)");
        let mut held = Vec::new();
        for n in [1_000usize, 10_000] {
            let base = rss_bytes();
            let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
            for _ in 0..n {
                let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
                let ready = ready_tx.clone();
                held.push(tokio::spawn(async move {
                    while let Some(msg) = s.next().await {
                        if let Some(Kind::CaughtUp(_)) = msg.kind {
                            let _ = ready.send(());
                        }
                    }
                }));
            }
            for _ in 0..n {
                ready_rx.recv().await.expect("caught up");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let grown = rss_bytes().saturating_sub(base);
            let st = logs.stats();
            println!(
                "  +{n:>6} subscribers: RSS +{:.1} MiB = {:.2} KiB per idle subscriber (live subscribers {}, buffered events {})",
                grown as f64 / (1 << 20) as f64,
                grown as f64 / n as f64 / 1024.0,
                st.subscribers,
                st.subscriber_buffered
            );
        }
        logs.shutdown().await;
        for h in held {
            h.await.expect("subscriber task");
        }
    });
}
