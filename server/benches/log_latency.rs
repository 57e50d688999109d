//! Append-to-receipt latency with 1,000 live subscribers on one session.
//!
//! `cargo bench -p agent-harness-server --bench log_latency`
//!
//! 1,000 subscribers follow one session live, each stream driven by its own
//! tokio task (as the gRPC layer drives a response stream). One appender
//! appends at a fixed rate to a real redb file. Latency runs from just before
//! `append` is called until a subscriber task holds the event, over every
//! (event, subscriber) pair, so it includes the durable commit (fsync) and
//! the whole fan-out wave. Two rates:
//! - 1 event every 2 ms (500 events/s, faster than any CLI streams);
//! - a batch of 10 events every 5 ms (2,000 events/s, ten busy sessions'
//!   worth of lines, all fanned out to the same 1,000 subscribers).
//!
//! A third run repeats the 500 events/s case on the in-memory store: no
//! fsync, so what remains is the log's own fan-out cost.
//!
//! Bench overhead per delivery is one `Instant::now()`, one relaxed atomic
//! load and a push into a pre-sized vector (tens of ns against a wave of
//! hundreds of µs).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::store::MemoryStore;
use common::{new_event, quantile, redb_logs, runtime};
use futures::StreamExt;

const SUBSCRIBERS: usize = 1_000;

fn main() {
    let rt = runtime();
    println!("log_latency: {SUBSCRIBERS} live subscribers on one session");
    for (appends, per_append, interval, redb) in [
        (2_000u64, 1u64, Duration::from_millis(2), true),
        (1_000, 10, Duration::from_millis(5), true),
        (2_000, 1, Duration::from_millis(2), false),
    ] {
        rt.block_on(run(appends, per_append, interval, redb));
    }
}

async fn run(appends: u64, per_append: u64, interval: Duration, redb: bool) {
    let (_dir, logs) = if redb {
        let (dir, logs) = redb_logs(LogOptions::default());
        (Some(dir), logs)
    } else {
        let store = Arc::new(MemoryStore::new());
        (
            None,
            EventLogs::open(store, LogOptions::default()).expect("log"),
        )
    };
    let events = appends * per_append;
    // Index = seq: when its append was called, in ns since `base` (atomics,
    // so 1,000 readers do not contend on a bench-side lock).
    let base = Instant::now();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..=events).map(|_| AtomicU64::new(0)).collect());
    let mut subs = Vec::with_capacity(SUBSCRIBERS);
    for _ in 0..SUBSCRIBERS {
        let mut s = Box::pin(logs.subscribe("s", 0).await.unwrap());
        // Live before the clock starts: header + caught_up.
        s.next().await.expect("replay");
        s.next().await.expect("caught_up");
        let sent = sent.clone();
        subs.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(events as usize);
            while let Some(msg) = s.next().await {
                if let Some(Kind::Event(e)) = msg.kind {
                    let at = base.elapsed().as_nanos() as u64;
                    let t0 = sent[e.seq as usize].load(Ordering::Relaxed);
                    lat.push(Duration::from_nanos(at.saturating_sub(t0)));
                    if e.seq == events {
                        break;
                    }
                }
            }
            lat
        }));
    }
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let t_start = Instant::now();
    let mut seq = 0;
    // How long each append call took to resolve: the durable commit alone,
    // so the fan-out share of the delivery latency can be told apart from
    // the disk's (which other processes on this machine slow down).
    let mut commit = Vec::with_capacity(appends as usize);
    for _ in 0..appends {
        tick.tick().await;
        let now = base.elapsed().as_nanos() as u64;
        let batch = (0..per_append)
            .map(|_| {
                seq += 1;
                // Stored before the append: the commit's release makes it visible.
                sent[seq as usize].store(now, Ordering::Relaxed);
                new_event(seq)
            })
            .collect();
        let evs = logs
            .commit("s", Commit::events(batch))
            .await
            .expect("append");
        commit.push(Duration::from_nanos(base.elapsed().as_nanos() as u64 - now));
        assert_eq!(evs.last().map(|e| e.seq), Some(seq));
    }
    let elapsed = t_start.elapsed();
    let mut all = Vec::with_capacity(SUBSCRIBERS * events as usize);
    for s in subs {
        all.extend(s.await.expect("subscriber"));
    }
    all.sort_unstable();
    commit.sort_unstable();
    println!(
        "  {} {per_append:>2} event(s) per append every {interval:?} ({:.0} events/s achieved): {} deliveries",
        if redb {
            "redb file:"
        } else {
            "in-memory store (fan-out only):"
        },
        events as f64 / elapsed.as_secs_f64(),
        all.len(),
    );
    println!(
        "    p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  p99.9 {:.2?}  max {:.2?}",
        quantile(&all, 0.50),
        quantile(&all, 0.90),
        quantile(&all, 0.99),
        quantile(&all, 0.999),
        all.last().copied().unwrap_or_default()
    );
    println!(
        "    (append call alone, i.e. durable commit: p50 {:.2?}  p99 {:.2?}  max {:.2?})",
        quantile(&commit, 0.50),
        quantile(&commit, 0.99),
        commit.last().copied().unwrap_or_default()
    );
    logs.shutdown().await;
}
