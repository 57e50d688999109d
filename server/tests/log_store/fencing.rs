//! Node leases, ownership and the commit fence of a shared store: two
//! stores on one database as two nodes, through the interleavings of
//! claim, lease lapse and late commit.

use crate::support::log::{event, seqs};
use crate::support::postgres::{cluster, store};

use std::time::{Duration, Instant};

use agent_harness_server::store::{
    Claim, PostgresStore, Receipt, ReceiptWrite, SessionMeta, Store, StoreError,
};

const LEASE: Duration = Duration::from_millis(400);
/// A lease no loaded test machine outlives between two statements.
const SLOW: Duration = Duration::from_secs(2);

fn open(url: &str) -> PostgresStore {
    PostgresStore::open(url).unwrap()
}

fn append(store: &dyn Store, id: &str, from: u64, to: u64) -> Result<(), StoreError> {
    let batch: Vec<_> = (from..=to).map(|s| event(id, s)).collect();
    store.append_batch(&batch, &[])
}

fn fenced(r: Result<(), StoreError>) -> Vec<String> {
    match r {
        Err(StoreError::Fenced { sessions }) => sessions,
        other => panic!("expected Fenced, got {other:?}"),
    }
}

/// Claims until the claim succeeds (the owner's lease has to run out first).
fn claim_when_free(store: &dyn Store, id: &str) -> Claim {
    let deadline = Instant::now() + SLOW * 10;
    loop {
        match store.claim_session(id).unwrap() {
            Claim::Elsewhere { .. } if Instant::now() < deadline => {
                assert!(
                    store.renew_node(SLOW * 10).unwrap(),
                    "the claimer's lease held"
                );
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

#[test]
fn a_store_that_never_joined_owns_everything_and_fences_nothing() {
    let s = store();
    assert_eq!(s.claim_session("x").unwrap(), Claim::Owned);
    append(&s, "x", 1, 2).unwrap();
    assert!(s.orphaned_sessions(Duration::ZERO, 10).unwrap().is_empty());
}

#[test]
fn one_owner_and_a_late_commit_of_the_old_one_is_refused_whole() {
    let url = cluster().fresh_database();
    let (a, b) = (open(&url), open(&url));
    let ja = a.join_node("a", "127.0.0.1:1", SLOW).unwrap().unwrap();
    b.join_node("b", "127.0.0.1:2", SLOW * 10).unwrap().unwrap();
    assert_eq!(
        a.claim_session("s").unwrap(),
        Claim::Claimed { previous: None }
    );
    assert_eq!(a.claim_session("s").unwrap(), Claim::Owned);
    a.append_batch(&[event("s", 1), event("s", 2)], &[SessionMeta::new("s", 1)])
        .unwrap();
    // B sees A as the owner while A's lease is live, and cannot write.
    assert!(a.renew_node(SLOW).unwrap());
    assert_eq!(
        b.claim_session("s").unwrap(),
        Claim::Elsewhere {
            node_id: "a".into(),
            address: "127.0.0.1:1".into()
        }
    );
    assert_eq!(fenced(append(&b, "s", 3, 3)), vec!["s".to_owned()]);
    // A stops renewing (paused): once its lease has run out B claims.
    assert_eq!(
        claim_when_free(&b, "s"),
        Claim::Claimed {
            previous: Some("a".into())
        }
    );
    // The orphan list no longer holds it: B's lease is live.
    assert!(b.orphaned_sessions(Duration::ZERO, 10).unwrap().is_empty());
    // A's late commit is refused whole, B's lands after A's last event.
    assert_eq!(fenced(append(&a, "s", 3, 4)), vec!["s".to_owned()]);
    append(&b, "s", 3, 3).unwrap();
    assert_eq!(seqs(&b.read_range("s", 0, 10).unwrap()), vec![1, 2, 3]);
    // A cannot renew a lapsed lease, nor claim; it rejoins under a new
    // epoch and does not take the session back.
    assert!(!a.renew_node(LEASE).unwrap());
    assert!(matches!(
        a.claim_session("s"),
        Err(StoreError::Fenced { .. })
    ));
    let again = a.join_node("a", "127.0.0.1:1", LEASE).unwrap().unwrap();
    assert_eq!(again.epoch, ja.epoch + 1);
    assert!(matches!(
        a.claim_session("s").unwrap(),
        Claim::Elsewhere { node_id, .. } if node_id == "b"
    ));
    assert_eq!(fenced(append(&a, "s", 4, 4)), vec!["s".to_owned()]);
}

#[test]
fn a_deletion_by_a_node_that_lost_the_session_is_refused_and_deletes_nothing() {
    let url = cluster().fresh_database();
    let (a, b) = (open(&url), open(&url));
    a.join_node("a", "127.0.0.1:1", SLOW).unwrap();
    b.join_node("b", "127.0.0.1:2", SLOW * 10).unwrap();
    a.claim_session("s").unwrap();
    a.append_batch(&[event("s", 1), event("s", 2)], &[SessionMeta::new("s", 1)])
        .unwrap();
    let keyed = |key: &str| {
        ReceiptWrite::Put(Receipt::encoded(
            "s",
            key,
            1,
            "print",
            "DeleteSession",
            Vec::new(),
        ))
    };
    // B may not delete what A owns while A's lease lives.
    assert!(matches!(
        b.delete_session("s", Some(&keyed("by-b"))),
        Err(StoreError::Fenced { sessions }) if sessions == ["s"]
    ));
    // A stops renewing (paused) and B takes the session over; A's late
    // deletion is refused whole: the events, the meta and the owner stay,
    // and its receipt is not written.
    assert!(matches!(
        claim_when_free(&b, "s"),
        Claim::Claimed { previous: Some(p) } if p == "a"
    ));
    assert!(matches!(
        a.delete_session("s", Some(&keyed("by-a"))),
        Err(StoreError::Fenced { sessions }) if sessions == ["s"]
    ));
    assert_eq!(seqs(&b.read_range("s", 0, 10).unwrap()), vec![1, 2]);
    assert!(b.meta("s").unwrap().is_some());
    assert!(b.receipt("s", "by-a").unwrap().is_none());
    assert!(b.receipt("s", "by-b").unwrap().is_none());
    // Nor after A rejoins under a new epoch: B owns the session.
    a.join_node("a", "127.0.0.1:1", SLOW * 10).unwrap();
    assert!(matches!(
        a.delete_session("s", None),
        Err(StoreError::Fenced { .. })
    ));
    append(&b, "s", 3, 3).unwrap();
    // The owner deletes it.
    assert!(b.delete_session("s", Some(&keyed("by-b"))).unwrap());
    assert!(b.read_range("s", 0, 10).unwrap().is_empty());
    assert!(b.meta("s").unwrap().is_none());
    assert!(b.receipt("s", "by-b").unwrap().is_some());
}

#[test]
fn a_batch_names_only_the_sessions_it_may_not_write_and_writes_none() {
    let url = cluster().fresh_database();
    let (a, b) = (open(&url), open(&url));
    a.join_node("a", "", SLOW * 10).unwrap();
    b.join_node("b", "", SLOW * 10).unwrap();
    a.claim_session("mine").unwrap();
    b.claim_session("theirs").unwrap();
    let batch = [event("mine", 1), event("theirs", 1)];
    assert_eq!(
        fenced(a.append_batch(&batch, &[])),
        vec!["theirs".to_owned()]
    );
    assert!(a.read_range("mine", 0, 10).unwrap().is_empty());
    // Without it the rest lands.
    append(&a, "mine", 1, 1).unwrap();
    // A meta change alone is fenced too.
    assert_eq!(
        fenced(a.append_batch(&[], &[SessionMeta::new("theirs", 1)])),
        vec!["theirs".to_owned()]
    );
}

#[test]
fn an_owner_numbering_from_a_stale_head_is_fenced_not_overwriting() {
    let url = cluster().fresh_database();
    let a = open(&url);
    a.join_node("a", "", SLOW * 10).unwrap();
    a.claim_session("s").unwrap();
    append(&a, "s", 1, 2).unwrap();
    // A second writer under the same owner numbering from head 1.
    assert_eq!(fenced(append(&a, "s", 2, 3)), vec!["s".to_owned()]);
    // And a gap is refused the same way.
    assert_eq!(fenced(append(&a, "s", 4, 4)), vec!["s".to_owned()]);
    append(&a, "s", 3, 3).unwrap();
    assert_eq!(seqs(&a.read_range("s", 0, 10).unwrap()), vec![1, 2, 3]);
}

#[test]
fn a_dead_nodes_sessions_are_orphans_after_the_grace_and_a_claim_keeps_the_head() {
    let url = cluster().fresh_database();
    let (a, b) = (open(&url), open(&url));
    a.join_node("a", "", LEASE).unwrap();
    b.join_node("b", "", SLOW * 10).unwrap();
    a.claim_session("s").unwrap();
    append(&a, "s", 1, 5).unwrap();
    let deadline = Instant::now() + SLOW * 10;
    while b.orphaned_sessions(Duration::ZERO, 10).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "A's lease never ran out");
        std::thread::yield_now();
    }
    assert_eq!(
        b.orphaned_sessions(Duration::ZERO, 10).unwrap(),
        vec!["s".to_owned()]
    );
    assert!(
        b.orphaned_sessions(Duration::from_secs(3600), 10)
            .unwrap()
            .is_empty(),
        "within the grace"
    );
    assert!(matches!(
        b.claim_session("s").unwrap(),
        Claim::Claimed { .. }
    ));
    append(&b, "s", 6, 6).unwrap();
    assert_eq!(
        seqs(&b.read_range("s", 0, 10).unwrap()),
        vec![1, 2, 3, 4, 5, 6]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_commits_the_other_sessions_of_a_batch_one_of_which_is_fenced() {
    use crate::support::log::new_event;
    use agent_harness_server::log::{Commit, EventLogs, LogError, LogOptions};
    use std::sync::Arc;
    let url = tokio::task::block_in_place(|| cluster().fresh_database());
    let (a, b) = tokio::task::block_in_place(|| (open(&url), open(&url)));
    let a: Arc<dyn Store> = Arc::new(a);
    tokio::task::block_in_place(|| {
        a.join_node("a", "", SLOW * 10).unwrap();
        b.join_node("b", "", SLOW * 10).unwrap();
        a.claim_session("mine").unwrap();
        b.claim_session("theirs").unwrap();
    });
    let logs = EventLogs::open(a.clone(), LogOptions::default()).unwrap();
    for round in 1..=3u64 {
        // Queued together, so the writer takes them into one batch.
        let (mine, theirs) = tokio::join!(
            logs.commit("mine", Commit::events(vec![new_event(round)])),
            logs.commit("theirs", Commit::events(vec![new_event(round)])),
        );
        assert_eq!(seqs(&mine.expect("mine lands")), vec![round]);
        match theirs {
            Err(LogError::Store(e)) => {
                assert!(matches!(*e, StoreError::Fenced { .. }), "{e}")
            }
            other => panic!("expected fenced, got {other:?}"),
        }
    }
    assert!(
        logs.storage_ok().borrow().to_owned(),
        "a fenced session is not a storage failure"
    );
    let stored = tokio::task::block_in_place(|| a.read_range("mine", 0, 10).unwrap());
    assert_eq!(seqs(&stored), vec![1, 2, 3]);
    assert!(tokio::task::block_in_place(|| a.read_range("theirs", 0, 10).unwrap()).is_empty());
    logs.shutdown().await;
}
