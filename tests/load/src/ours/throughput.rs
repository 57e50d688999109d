//! Durable events per second end to end: S sessions whose stand-in CLIs
//! write as fast as they can, each followed by one subscriber; the clock
//! stops when every subscriber has the turn's end. Every event counted
//! was fsynced before a subscriber could see it.

use std::time::Instant;

use serde::Serialize;

use super::{Seen, connections, follow, start};
use crate::server::{Server, metric};
use crate::stats::Rate;

/// One row: S sessions.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Concurrent sessions.
    pub sessions: usize,
    /// Log events delivered (all kinds) over the wall time.
    pub rate: Rate,
    /// Of which assistant `content` events (one per CLI line).
    pub contents: u64,
    /// Commits in the phase (from /metrics).
    pub commits: f64,
    /// Events per commit (from /metrics).
    pub batch: f64,
    /// Server CPU seconds (user + system) per million events.
    pub cpu_s_per_m: f64,
    /// Mean encoded size of an event, bytes.
    pub event_bytes: f64,
    /// Server RSS when the row ended, bytes.
    pub rss: u64,
    /// Server peak RSS so far (`VmHWM`: this row's or an earlier one's on
    /// the same server), bytes.
    pub peak_rss: u64,
}

/// Runs `total` CLI lines over `sessions` sessions (named `tp<S>-<i>`).
pub async fn run(server: &Server, sessions: usize, total: u64) -> Row {
    let per = (total / sessions as u64).max(1);
    let conns = connections(server, sessions.div_ceil(50)).await;
    let before = server.metrics().await;
    let cpu0 = server.cpu_secs();
    let t0 = Instant::now();
    let mut followers = Vec::new();
    for i in 0..sessions {
        let id = format!("tp{sessions}-{i}");
        let client = conns[i % conns.len()].clone();
        followers.push(tokio::spawn(follow(client, id, 0, 1, None)));
    }
    let mut starts = Vec::new();
    for i in 0..sessions {
        let mut client = conns[i % conns.len()].clone();
        let id = format!("tp{sessions}-{i}");
        starts.push(tokio::spawn(async move {
            start(&mut client, &id, per, 0.0).await;
        }));
    }
    for s in starts {
        s.await.expect("start task");
    }
    let mut seen: Vec<Seen> = Vec::new();
    for f in followers {
        seen.push(f.await.expect("follower"));
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = server.cpu_secs() - cpu0;
    let after = server.metrics().await;
    let events: u64 = seen.iter().map(|s| s.events).sum();
    let contents: u64 = seen.iter().map(|s| s.contents).sum();
    let bytes: u64 = seen.iter().map(|s| s.bytes).sum();
    assert_eq!(
        contents,
        per * sessions as u64,
        "every line the stand-ins wrote must arrive as one content event"
    );
    let d = |name: &str| metric(&after, name) - metric(&before, name);
    let commits = d("agent_harness_commits_total");
    let appended = d("agent_harness_events_appended_total");
    assert!(
        appended >= events as f64,
        "/metrics counted {appended} events appended, subscribers saw {events}"
    );
    Row {
        sessions,
        rate: Rate { events, secs },
        contents,
        commits,
        batch: if commits > 0.0 {
            appended / commits
        } else {
            0.0
        },
        cpu_s_per_m: cpu / events as f64 * 1e6,
        event_bytes: bytes as f64 / events.max(1) as f64,
        rss: server.rss_bytes(),
        peak_rss: server.peak_rss_bytes(),
    }
}
