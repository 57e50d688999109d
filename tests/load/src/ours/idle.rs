//! Server memory per idle gRPC subscriber: RSS before and after `n`
//! subscribers (100 per HTTP/2 connection) have caught up on a quiet
//! session.

use serde::Serialize;

use super::fanout::STREAMS_PER_CONNECTION;
use super::{connections, follow, head};
use crate::server::Server;

/// One row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Idle subscribers held open.
    pub subscribers: usize,
    /// Server RSS before, bytes.
    pub rss_before: u64,
    /// Server RSS with all of them caught up, bytes.
    pub rss_after: u64,
    /// (after − before) / subscribers, bytes.
    pub per_subscriber: f64,
    /// Open streams reported by /metrics while they were held.
    pub open_streams: f64,
}

/// Holds `n` idle subscribers on `id` (a prepared session), measures,
/// closes them.
pub async fn run(server: &Server, id: &str, n: usize) -> Row {
    let mut control = server.connect().await;
    let after = head(&mut control, id).await;
    // Before the connections: their cost is part of what a subscriber costs.
    let rss_before = server.rss_bytes();
    let conns = connections(server, n.div_ceil(STREAMS_PER_CONNECTION)).await;
    let mut tasks = Vec::with_capacity(n);
    let mut ready = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let client = conns[i / STREAMS_PER_CONNECTION].clone();
        tasks.push(tokio::spawn(follow(client, id.into(), after, 1, Some(tx))));
        ready.push(rx);
    }
    for r in ready {
        r.await.expect("an idle subscriber failed before caught_up");
    }
    let rss_after = server.rss_bytes();
    let metrics = server.metrics().await;
    let open_streams = crate::server::metric(&metrics, "agent_harness_open_streams");
    for t in &tasks {
        t.abort();
    }
    drop(conns);
    Row {
        subscribers: n,
        rss_before,
        rss_after,
        per_subscriber: rss_after.saturating_sub(rss_before) as f64 / n as f64,
        open_streams,
    }
}
