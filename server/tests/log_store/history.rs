//! History paging edges; the defaults live in `EventLogs::history` so the
//! rpc layer stays a thin adapter.

use crate::support::log;

use std::sync::Arc;

use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::store::RedbStore;
use log::{new_event, seqs};

async fn open_with(dir: &tempfile::TempDir, window: usize, n: u64) -> EventLogs {
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    let logs = EventLogs::open(
        Arc::new(store),
        LogOptions {
            window,
            ..LogOptions::default()
        },
    )
    .unwrap();
    let mut done = 0;
    while done < n {
        let k = (n - done).min(500);
        logs.commit(
            "s",
            Commit::events((done..done + k).map(new_event).collect()),
        )
        .await
        .unwrap();
        done += k;
    }
    logs
}

fn range(a: u64, b: u64) -> Vec<u64> {
    (a..=b).collect()
}

#[tokio::test]
async fn empty_and_unknown_sessions_have_no_history() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open_with(&dir, 100, 0).await;
    for before in [0, 1, 5, u64::MAX] {
        let (evs, more) = logs.history("s", before, 10).await.unwrap();
        assert!(evs.is_empty() && !more, "before_seq {before}");
    }
    logs.shutdown().await;
}

#[tokio::test]
async fn paging_edges() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open_with(&dir, 100, 1_500).await;
    let h = |b, l| logs.history("s", b, l);

    // before_seq 0 = from the tail; limit 0 = the default 50.
    let (evs, more) = h(0, 0).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(1_451, 1_500), true));
    // Past the head = from the tail.
    let (evs, more) = h(1_000_000, 3).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(1_498, 1_500), true));
    let (evs, _) = h(1_501, 3).await.unwrap();
    assert_eq!(seqs(&evs), range(1_498, 1_500));
    // before_seq 1: nothing older than the first event.
    let (evs, more) = h(1, 10).await.unwrap();
    assert!(evs.is_empty() && !more);
    // Reaching the start: has_more turns false exactly there.
    let (evs, more) = h(11, 10).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(1, 10), false));
    let (evs, more) = h(12, 10).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(2, 11), true));
    let (evs, more) = h(5, 10).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(1, 4), false));
    // A huge limit is capped at 1000.
    let (evs, more) = h(0, u32::MAX).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(501, 1_500), true));
    // Old pages (outside the 100-event window) come from storage intact.
    let (evs, _) = h(300, 5).await.unwrap();
    assert_eq!(seqs(&evs), range(295, 299));
    assert_eq!(evs[0].payload, Some(log::payload(294)));
    // Paging back from the tail visits every event exactly once.
    let mut all = Vec::new();
    let mut before = 0;
    loop {
        let (evs, more) = h(before, 128).await.unwrap();
        before = evs.first().map_or(1, |e| e.seq);
        let mut page = seqs(&evs);
        page.extend(all);
        all = page;
        if !more {
            break;
        }
    }
    assert_eq!(all, range(1, 1_500));
    logs.shutdown().await;
}

#[tokio::test]
async fn history_straddling_the_window_edge() {
    let dir = tempfile::tempdir().unwrap();
    let logs = open_with(&dir, 100, 300).await;
    // The window holds 201..=300; this page needs 190..=209.
    let (evs, more) = logs.history("s", 210, 20).await.unwrap();
    assert_eq!((seqs(&evs), more), (range(190, 209), true));
    // Entirely inside the window.
    let (evs, _) = logs.history("s", 260, 20).await.unwrap();
    assert_eq!(seqs(&evs), range(240, 259));
    logs.shutdown().await;
}
