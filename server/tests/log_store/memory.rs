//! The log's memory is bounded by bytes, not only by event counts: each
//! session's window by `window_bytes`, all windows together by
//! `cache_bytes`; what leaves memory is still read, whole, from the store.

use std::sync::Arc;

use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions, NewEvent};
use agent_harness_server::store::MemoryStore;
use futures::StreamExt;

use crate::support::log::new_event;

/// An event of about `bytes` bytes (its CLI line).
fn big_event(n: u64, bytes: usize) -> NewEvent {
    NewEvent {
        cli_line: format!("{{\"n\":{n},\"pad\":\"{}\"}}", "x".repeat(bytes)),
        ..new_event(n)
    }
}

#[tokio::test]
async fn windows_stay_within_their_byte_budgets_and_streams_lose_nothing() {
    const WINDOW_BYTES: usize = 64 * 1024;
    const CACHE_BYTES: usize = 256 * 1024;
    let logs = EventLogs::open(
        Arc::new(MemoryStore::new()),
        LogOptions {
            window_bytes: WINDOW_BYTES,
            cache_bytes: CACHE_BYTES,
            ..LogOptions::default()
        },
    )
    .unwrap();
    // 20 sessions with a live subscriber each (so they stay in memory),
    // 100 events of ~4 KiB each: 8 MB said, far over both budgets.
    let mut subs = Vec::new();
    for s in 0..20 {
        subs.push(Box::pin(logs.subscribe(&format!("s{s}"), 0).await.unwrap()));
    }
    let mut peak = 0;
    for n in 1..=100 {
        for s in 0..20 {
            logs.commit(&format!("s{s}"), Commit::events(vec![big_event(n, 4096)]))
                .await
                .unwrap();
            let st = logs.stats();
            peak = peak.max(st.window_bytes);
            assert!(st.window_bytes <= CACHE_BYTES, "{st:?}");
        }
    }
    assert!(peak > CACHE_BYTES / 2, "the budget was reached: {peak}");
    // One session alone stays within its own budget.
    let alone = EventLogs::open(
        Arc::new(MemoryStore::new()),
        LogOptions {
            window_bytes: WINDOW_BYTES,
            ..LogOptions::default()
        },
    )
    .unwrap();
    let _held = alone.subscribe("one", 0).await.unwrap();
    for n in 1..=100 {
        alone
            .commit("one", Commit::events(vec![big_event(n, 4096)]))
            .await
            .unwrap();
    }
    let st = alone.stats();
    assert!(
        st.window_bytes <= WINDOW_BYTES && st.window_events >= 10,
        "{st:?}"
    );
    alone.shutdown().await;

    // Every subscriber still gets every event, in order, byte for byte.
    for (s, sub) in subs.iter_mut().enumerate() {
        let mut want = 1;
        while want <= 100 {
            match sub.next().await.unwrap().kind {
                Some(Kind::Event(e)) => {
                    assert_eq!(e.seq, want);
                    assert_eq!(e.cli_line, big_event(want, 4096).cli_line, "s{s}");
                    want += 1;
                }
                Some(Kind::Replay(_) | Kind::CaughtUp(_) | Kind::Heartbeat(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    }
    logs.shutdown().await;
}
