//! Deleting a session from the log: after what was queued before it, out of
//! the store and out of memory; its streams send what they hold and end; the
//! same id starts again at seq 1.

use crate::support::log;

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::store::{MemoryStore, RedbStore, Store};
use futures::StreamExt;
use log::new_event;

async fn next(
    s: &mut (impl futures::Stream<Item = pb::SubscribeResponse> + Unpin),
) -> Option<Kind> {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("stream stalled")
        .map(|m| m.kind.expect("a kind"))
}

async fn deleting_forgets_the_session_and_ends_its_streams(store: Arc<dyn Store>) {
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    logs.commit("s", Commit::events((0..10).map(new_event).collect()))
        .await
        .unwrap();
    logs.commit("other", Commit::events((0..3).map(new_event).collect()))
        .await
        .unwrap();

    // A stream that is caught up, and one that has read only its header.
    let mut live = Box::pin(logs.subscribe("s", 0).await.unwrap());
    loop {
        if let Some(Kind::CaughtUp(c)) = next(&mut live).await {
            assert_eq!(c.head_seq, 10);
            break;
        }
    }
    let mut behind = Box::pin(logs.subscribe("s", 0).await.unwrap());
    assert!(matches!(next(&mut behind).await, Some(Kind::Replay(_))));

    // Appends queued before the deletion are committed first, then deleted with it.
    let queued = logs.commit("s", Commit::events(vec![new_event(10)]));
    let deleted = logs.delete_session("s", None);
    let (appended, deleted) = tokio::join!(queued, deleted);
    assert_eq!(appended.unwrap()[0].seq, 11);
    assert!(deleted.unwrap());

    // The caught-up stream still gets seq 11 (it is in the window it holds),
    // then ends. The one behind needs seq 1, which only the store had (the
    // session was not in memory when it was appended): it ends at once.
    match next(&mut live).await {
        Some(Kind::Event(e)) => assert_eq!(e.seq, 11),
        other => panic!("want seq 11, got {other:?}"),
    }
    assert!(next(&mut live).await.is_none(), "ended");
    let mut seqs = Vec::new();
    while let Some(kind) = next(&mut behind).await {
        let Kind::Event(e) = kind else {
            panic!("only events after deletion: {kind:?}")
        };
        seqs.push(e.seq);
    }
    assert_eq!(seqs, Vec::<u64>::new());
    assert!(!logs.is_closed());

    assert!(!logs.exists("s").await.unwrap());
    assert_eq!(logs.head_seq("s").await.unwrap(), 0);
    assert_eq!(logs.history("s", 0, 100).await.unwrap().0, vec![]);
    assert_eq!(logs.full_event("s", 3).await.unwrap(), None);
    assert_eq!(logs.stats().sessions, 0, "nothing of it stays in memory");
    assert_eq!(logs.head_seq("other").await.unwrap(), 3);
    assert!(
        !logs.delete_session("s", None).await.unwrap(),
        "nothing left"
    );

    // A stream opened now waits for the session to be created again, which
    // starts at seq 1.
    let mut fresh = Box::pin(logs.subscribe("s", 0).await.unwrap());
    assert!(matches!(next(&mut fresh).await, Some(Kind::Replay(r)) if r.head_seq == 0));
    assert!(matches!(next(&mut fresh).await, Some(Kind::CaughtUp(_))));
    let again = logs
        .commit("s", Commit::events(vec![new_event(0)]))
        .await
        .unwrap();
    assert_eq!(again[0].seq, 1);
    match next(&mut fresh).await {
        Some(Kind::Event(e)) => assert_eq!(e.seq, 1),
        other => panic!("want the new seq 1, got {other:?}"),
    }
    assert_eq!(store.read_range("s", 0, 100).unwrap().len(), 1);
    logs.shutdown().await;
}

#[tokio::test]
async fn deleting_in_memory() {
    deleting_forgets_the_session_and_ends_its_streams(Arc::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn deleting_in_postgres() {
    deleting_forgets_the_session_and_ends_its_streams(crate::support::postgres::shared_store())
        .await;
}

#[tokio::test]
async fn deleting_in_redb() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    deleting_forgets_the_session_and_ends_its_streams(Arc::new(store)).await;
}
