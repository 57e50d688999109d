//! Helpers shared by the event-log benches (each bench is `harness = false`
//! and prints its figures).
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_server::log::{EventLogs, LogOptions, NewEvent};
use agent_harness_server::store::RedbStore;

/// A realistic small event: an assistant text block of ~200 bytes plus the CLI line.
pub fn new_event(n: u64) -> NewEvent {
    let text = format!("event {n}: {}", "lorem ipsum dolor sit amet ".repeat(6));
    NewEvent {
        run_id: "run-0001".into(),
        payload: pb::event::Payload::InputSent(pb::InputSent {
            text: text.clone(),
            source: 2,
            ..Default::default()
        }),
        cli_line: format!("{{\"type\":\"user\",\"text\":{text:?}}}"),
    }
}

/// A redb-backed log in a fresh tempdir (kept alive by the returned guard).
pub fn redb_logs(opts: LogOptions) -> (tempfile::TempDir, EventLogs) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).expect("open redb");
    let logs = EventLogs::open(Arc::new(store), opts).expect("open log");
    (dir, logs)
}

/// Resident set size of this process, bytes (Linux `/proc/self/statm`).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The q-quantile of sorted samples.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// A multi-thread runtime with as many workers as cores (2 here).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}
