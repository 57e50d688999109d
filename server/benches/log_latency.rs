//! Append-to-receipt latency with 1,000 live subscribers on one session.
//!
//! `cargo bench -p agent-harness-server --bench log_latency`
//!
//! One appender appends an event every 2 ms (500 events/s, faster than any
//! CLI streams) to a real redb file; 1,000 subscribers follow the session
//! live. Latency is measured from just before `append` is called until a
//! subscriber task receives the event, over every (event, subscriber) pair.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_harness_client::pb::subscribe_response::Kind;
use agent_harness_server::log::LogOptions;
use common::{new_event, quantile, redb_logs, runtime};
use futures::StreamExt;

const SUBSCRIBERS: usize = 1_000;
const EVENTS: u64 = 1_000;
const INTERVAL: Duration = Duration::from_millis(2);

fn main() {
    let rt = runtime();
    rt.block_on(async {
        let (_dir, logs) = redb_logs(LogOptions::default());
        // Index = seq: when its append was called, in ns since `base`
        // (atomics, so 1,000 readers do not contend on a bench-side lock).
        let base = Instant::now();
        let sent: Arc<Vec<AtomicU64>> = Arc::new((0..=EVENTS).map(|_| AtomicU64::new(0)).collect());
        let mut subs = Vec::new();
        for _ in 0..SUBSCRIBERS {
            let mut s = Box::pin(logs.subscribe("s", 0));
            // Live before the clock starts: header + caught_up.
            s.next().await.expect("replay");
            s.next().await.expect("caught_up");
            let sent = sent.clone();
            subs.push(tokio::spawn(async move {
                let mut lat = Vec::with_capacity(EVENTS as usize);
                while let Some(msg) = s.next().await {
                    if let Some(Kind::Event(e)) = msg.kind {
                        let at = Instant::now();
                        let t0 = base + Duration::from_nanos(sent[e.seq as usize].load(Ordering::Acquire));
                        lat.push(at - t0);
                        if e.seq == EVENTS {
                            break;
                        }
                    }
                }
                lat
            }));
        }
        let mut tick = tokio::time::interval(INTERVAL);
        for seq in 1..=EVENTS {
            tick.tick().await;
            sent[seq as usize].store(base.elapsed().as_nanos() as u64, Ordering::Release);
            let evs = logs.append("s", vec![new_event(seq)]).await.expect("append");
            assert_eq!(evs[0].seq, seq);
        }
        let mut all = Vec::with_capacity(SUBSCRIBERS * EVENTS as usize);
        for s in subs {
            all.extend(s.await.expect("subscriber"));
        }
        all.sort_unstable();
        println!(
            "log_latency: {SUBSCRIBERS} live subscribers, {EVENTS} events at one per {INTERVAL:?}, redb file"
        );
        println!(
            "  append-to-receipt over {} deliveries: p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  max {:.2?}",
            all.len(),
            quantile(&all, 0.50),
            quantile(&all, 0.90),
            quantile(&all, 0.99),
            all.last().copied().unwrap_or_default()
        );
        logs.shutdown().await;
    });
}
