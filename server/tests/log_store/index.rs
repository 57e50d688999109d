//! The session index (`store::index`) on every store: its rows follow the
//! commits that move a session (from the writer's cache, from the stored
//! row once the cache forgot the session, or from the log when the row is
//! missing), go with a deleted session, are rebuilt from the logs when
//! missing or behind, and are never replaced by a row of an older head;
//! and the stores' listings (filters, orders, places, totals) agree with
//! the reference one (`ListQuery::select`), PostgreSQL's in SQL.

use std::sync::Arc;

use agent_harness_protocol::derive::Fold;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::log::{Commit, EventLogs, LogOptions, NewEvent};
use agent_harness_server::store::{
    IndexFold, IndexRow, ListQuery, MemoryStore, Order, RedbStore, SessionMeta, Store,
};

fn ev(payload: Payload) -> NewEvent {
    NewEvent {
        run_id: "r1".into(),
        payload,
        cli_line: String::new(),
    }
}

fn run_start(cwd: &str, prompt: &str, agent: &str) -> NewEvent {
    ev(Payload::RunStart(pb::RunStart {
        agent: agent.into(),
        config: Some(pb::StartConfig {
            cwd: cwd.into(),
            prompt: prompt.into(),
            ..Default::default()
        }),
        ..Default::default()
    }))
}

fn run_end() -> NewEvent {
    ev(Payload::RunEnd(pb::RunEnd {
        reason: pb::RunEndReason::Completed as i32,
        ..Default::default()
    }))
}

fn nanos(t: Option<agent_harness_protocol::pbjson_types::Timestamp>) -> i64 {
    t.map_or(0, |t| t.seconds * 1_000_000_000 + i64::from(t.nanos))
}

/// Asserts `session_id`'s stored row says what the fold of its log says.
async fn row_follows_the_log(store: &dyn Store, logs: &EventLogs, session_id: &str) -> IndexRow {
    let events = logs.read_range(session_id, 0, usize::MAX).await.unwrap();
    let mut fold = Fold::new();
    events.iter().for_each(|e| fold.apply(e));
    let s = fold.session(session_id);
    let row = store.index_rows(&[session_id.to_owned()]).unwrap()[0]
        .clone()
        .unwrap_or_else(|| panic!("no index row for {session_id}"));
    let got = (
        row.head_seq,
        row.title.as_str(),
        row.cwd.as_str(),
        row.agent.as_str(),
        row.status,
        row.created_ns,
        row.updated_ns,
    );
    let want = (
        s.head_seq,
        s.title.as_str(),
        s.cwd.as_str(),
        s.agent.as_str(),
        s.status,
        nanos(s.created_at),
        nanos(s.updated_at),
    );
    assert_eq!(got, want, "row of {session_id}");
    row
}

fn ids(rows: &[IndexRow]) -> Vec<&str> {
    rows.iter().map(|r| r.session_id.as_str()).collect()
}

async fn the_index_follows_commits_deletion_and_rebuild(store: Arc<dyn Store>) {
    // A cache of one session: the writer goes on from stored rows too.
    let opts = LogOptions {
        cache_sessions: 1,
        ..LogOptions::default()
    };
    let logs = EventLogs::open(store.clone(), opts).unwrap();
    logs.commit(
        "a",
        Commit::events(vec![run_start("/p1", "Fix the build\nnow", "")]),
    )
    .await
    .unwrap();
    logs.commit(
        "b",
        Commit::events(vec![run_start("/p2", "Write docs", "codex"), run_end()]),
    )
    .await
    .unwrap();
    let a = row_follows_the_log(store.as_ref(), &logs, "a").await;
    assert_eq!(
        (a.title.as_str(), a.agent.as_str()),
        ("Fix the build", "claude")
    );
    assert_eq!(a.status, pb::SessionStatus::Starting as i32);
    let b = row_follows_the_log(store.as_ref(), &logs, "b").await;
    assert_eq!(b.status, pb::SessionStatus::Idle as i32);
    // "a" left the writer's cache when "b" was written: its next commit
    // goes on from its stored row.
    logs.commit(
        "a",
        Commit::events(vec![
            ev(Payload::TitleSet(pb::TitleSet {
                title: "Renamed".into(),
            })),
            run_end(),
        ]),
    )
    .await
    .unwrap();
    let a = row_follows_the_log(store.as_ref(), &logs, "a").await;
    assert_eq!((a.title.as_str(), a.head_seq), ("Renamed", 3));
    // A meta change alone leaves the row as it was.
    logs.commit("a", Commit::meta(|m| m.pid = Some(7)))
        .await
        .unwrap();
    row_follows_the_log(store.as_ref(), &logs, "a").await;

    let q = |text: &str| ListQuery {
        text: text.into(),
        limit: 10,
        ..ListQuery::default()
    };
    let page = logs.list_index(q("renamed")).await.unwrap();
    assert_eq!((ids(&page.rows), page.total), (vec!["a"], 1));
    let page = logs.list_index(q("/p")).await.unwrap();
    assert_eq!((ids(&page.rows), page.total), (vec!["a", "b"], 2));

    // Deleting a session deletes its row.
    assert!(logs.delete_session("b", None).await.unwrap());
    assert_eq!(store.index_rows(&["b".into()]).unwrap(), vec![None]);
    assert_eq!(logs.list_index(q("")).await.unwrap().total, 1);

    logs.shutdown().await;

    // Sessions written straight into the store (as by a server from before
    // the index) have no row until the rebuild folds their logs; a row
    // behind its log is rebuilt too; a current store rebuilds nothing.
    let old = |sid: &str, seq: u64, payload: Payload| pb::Event {
        seq,
        session_id: sid.into(),
        run_id: "r".into(),
        time: Some(agent_harness_protocol::pbjson_types::Timestamp {
            seconds: 1_700_000_000 + seq as i64,
            nanos: 0,
        }),
        payload: Some(payload),
        ..Default::default()
    };
    let start = |cwd: &str, prompt: &str| {
        let NewEvent { payload, .. } = run_start(cwd, prompt, "");
        payload
    };
    store
        .append_batch(
            &[
                old("c", 1, start("/p3", "Old session")),
                old("c", 2, run_end().payload),
                old("a", 4, start("/p1", "more")),
            ],
            &[SessionMeta::new("c", 1)],
        )
        .unwrap();
    assert_eq!(store.index_rows(&["c".into()]).unwrap(), vec![None]);
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    assert_eq!(logs.rebuild_index().await.unwrap(), 2);
    row_follows_the_log(store.as_ref(), &logs, "c").await;
    let a = row_follows_the_log(store.as_ref(), &logs, "a").await;
    assert_eq!(
        (a.head_seq, a.status),
        (4, pb::SessionStatus::Starting as i32)
    );
    assert_eq!(logs.rebuild_index().await.unwrap(), 0);
    logs.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_follows_the_log_in_memory() {
    the_index_follows_commits_deletion_and_rebuild(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_follows_the_log_in_redb() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    the_index_follows_commits_deletion_and_rebuild(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_follows_the_log_in_postgres() {
    the_index_follows_commits_deletion_and_rebuild(crate::support::postgres::shared_store()).await;
}

/// 40 rows over 4 cwds, 3 agents, 2 statuses and tied activity times.
fn rows() -> Vec<IndexRow> {
    (0..40)
        .map(|i| IndexRow {
            title: format!("Task {i} {}", if i % 5 == 0 { "Ünïcode" } else { "plain" }),
            cwd: format!("/work/p{}", i % 4),
            agent: ["claude", "codex", "gemini"][i % 3].into(),
            status: if i % 2 == 0 { 1 } else { 3 },
            updated_ns: 1_000 + (i as i64 % 7),
            created_ns: 10,
            head_seq: 2,
            ..IndexFold::default().row(&format!("s{i:02}"))
        })
        .collect()
}

fn the_listing_matches_the_reference_in_every_order(store: &dyn Store) {
    let rows = rows();
    store.put_index(&rows).unwrap();
    // A row of an older head never replaces the stored one.
    let mut stale = rows[0].clone();
    stale.head_seq = 1;
    stale.title = "stale".into();
    store.put_index(&[stale]).unwrap();
    assert_eq!(
        store.index_rows(&["s00".into()]).unwrap()[0].as_ref(),
        Some(&rows[0])
    );

    let filters = [
        ListQuery::default(),
        ListQuery {
            text: "ünïcode".into(),
            ..ListQuery::default()
        },
        ListQuery {
            statuses: vec![3],
            agent: "codex".into(),
            ..ListQuery::default()
        },
        ListQuery {
            cwd: "/work/p2".into(),
            text: "task".into(),
            ..ListQuery::default()
        },
    ];
    for order in [Order::SessionId, Order::RecentActivity, Order::Cwd] {
        for f in &filters {
            let mut q = ListQuery {
                order,
                limit: 3,
                ..f.clone()
            };
            // Page through, as a client does, comparing every page.
            loop {
                let want = q.select(&rows);
                let got = store.list_index(&q).unwrap();
                assert_eq!(ids(&got.rows), ids(&want.rows), "{q:?}");
                assert_eq!(got.total, want.total, "{q:?}");
                let Some(last) = got.rows.last() else { break };
                q.after = Some(last.position());
            }
        }
    }
}

#[test]
fn the_listing_matches_the_reference_in_memory() {
    the_listing_matches_the_reference_in_every_order(&MemoryStore::new());
}

#[test]
fn the_listing_matches_the_reference_in_redb() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    the_listing_matches_the_reference_in_every_order(&store);
}

#[test]
fn the_listing_matches_the_reference_in_postgres() {
    the_listing_matches_the_reference_in_every_order(&crate::support::postgres::store());
}
