//! EventLogs append path: seq assignment, group commit, durable-before-
//! visible, failed commits, reopen, meta updates, shutdown.

use crate::support::log;
use crate::support::probe::Probe;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{Commit, EventLogs, LogError, LogOptions, NewEvent};
use agent_harness_server::store::{MemoryStore, RedbStore, Store};
use futures::StreamExt;
use log::{new_event, seqs};

fn redb(dir: &tempfile::TempDir) -> Arc<dyn Store> {
    Arc::new(RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap())
}

/// Appends in a new task and returns once the append is queued for the
/// writer (the first poll of `append` hands it over synchronously), with
/// the task's handle.
async fn queued_append(
    logs: &EventLogs,
    session_id: String,
    events: Vec<NewEvent>,
) -> tokio::task::JoinHandle<Result<Vec<pb::Event>, LogError>> {
    let (queued, is_queued) = tokio::sync::oneshot::channel();
    let logs = logs.clone();
    let task = tokio::spawn(async move {
        let append = logs.commit(&session_id, Commit::events(events));
        tokio::pin!(append);
        if let std::task::Poll::Ready(done) = futures::poll!(&mut append) {
            let _ = queued.send(());
            return done;
        }
        let _ = queued.send(());
        append.await
    });
    is_queued.await.expect("the append task runs");
    task
}

#[tokio::test]
async fn seqs_start_at_one_and_are_gapless_under_concurrent_appends() {
    let dir = tempfile::tempdir().unwrap();
    let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
    let mut tasks = Vec::new();
    for t in 0..20u64 {
        let logs = logs.clone();
        tasks.push(tokio::spawn(async move {
            let sid = format!("s{}", t % 4);
            let mut got = Vec::new();
            for i in 0..25u64 {
                let n = 1 + (i % 3) as usize;
                let evs = logs
                    .commit(&sid, Commit::events((0..n as u64).map(new_event).collect()))
                    .await
                    .unwrap();
                // One call's events are consecutive and carry the log's fields.
                assert_eq!(evs.len(), n);
                assert!(evs.windows(2).all(|w| w[1].seq == w[0].seq + 1));
                assert!(evs.iter().all(|e| e.session_id == sid && e.time.is_some()));
                got.extend(seqs(&evs));
            }
            (sid, got)
        }));
    }
    let mut per_session: std::collections::HashMap<String, Vec<u64>> = Default::default();
    for t in tasks {
        let (sid, got) = t.await.unwrap();
        per_session.entry(sid).or_default().extend(got);
    }
    for (sid, mut got) in per_session {
        got.sort_unstable();
        let n = got.len() as u64;
        assert_eq!(got, (1..=n).collect::<Vec<_>>(), "{sid}: every seq once");
        assert_eq!(logs.head_seq(&sid).await.unwrap(), n);
        assert_eq!(
            seqs(&logs.read_range(&sid, 0, usize::MAX).await.unwrap()),
            (1..=n).collect::<Vec<_>>()
        );
        assert_eq!(logs.meta(&sid).await.unwrap().unwrap().head_seq, n);
    }
    logs.shutdown().await;
}

#[tokio::test]
async fn concurrent_appends_share_commits() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    // Hold the first commit so the rest pile up behind it, then release.
    probe.close_gate();
    let mut tasks = Vec::new();
    for i in 0..500u64 {
        tasks.push(queued_append(&logs, format!("s{}", i % 50), vec![new_event(i)]).await);
    }
    probe.open_gate();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let commits = probe.commits.load(Ordering::SeqCst);
    assert!(
        commits <= 5,
        "500 queued appends took {commits} commits: no group commit"
    );
    logs.shutdown().await;
}

#[tokio::test]
async fn subscribers_see_nothing_before_the_commit_returns() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    let mut sub = Box::pin(logs.subscribe("s", 0).await.unwrap());
    assert!(matches!(
        sub.next().await.unwrap().kind,
        Some(Kind::Replay(_))
    ));
    assert!(matches!(
        sub.next().await.unwrap().kind,
        Some(Kind::CaughtUp(_))
    ));

    probe.close_gate();
    let append = tokio::spawn({
        let logs = logs.clone();
        async move { logs.commit("s", Commit::events(vec![new_event(1)])).await }
    });
    // The commit is blocked: neither the subscriber nor the head may move.
    let early = tokio::time::timeout(Duration::from_millis(300), sub.next()).await;
    assert!(early.is_err(), "event visible before its commit: {early:?}");
    assert_eq!(logs.head_seq("s").await.unwrap(), 0);
    assert!(!append.is_finished(), "append resolved before its commit");

    probe.open_gate();
    let evs = append.await.unwrap().unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .unwrap();
    match got.unwrap().kind {
        Some(Kind::Event(e)) => assert_eq!(e, evs[0]),
        other => panic!("expected the event, got {other:?}"),
    }
    logs.shutdown().await;
}

#[tokio::test]
async fn a_failed_commit_consumes_no_seq_and_publishes_nothing() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    logs.commit("s", Commit::events(vec![new_event(1), new_event(2)]))
        .await
        .unwrap();
    let mut sub = Box::pin(logs.subscribe("s", 2).await.unwrap());
    sub.next().await.unwrap();
    sub.next().await.unwrap(); // caught_up at 2

    probe.fail.store(true, Ordering::SeqCst);
    let err = logs
        .commit("s", Commit::events(vec![new_event(3)]))
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::Store(_)), "{err}");
    let err = logs
        .commit("new", Commit::meta(|m| m.sealed_env = Some("/x".into())))
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::Store(_)));
    assert_eq!(logs.head_seq("s").await.unwrap(), 2);
    assert!(
        !logs.exists("new").await.unwrap(),
        "a failed meta update must not create the session"
    );

    probe.fail.store(false, Ordering::SeqCst);
    let evs = logs
        .commit("s", Commit::events(vec![new_event(4)]))
        .await
        .unwrap();
    assert_eq!(evs[0].seq, 3, "the failed batch's seq is reused: no gap");
    match sub.next().await.unwrap().kind {
        Some(Kind::Event(e)) => assert_eq!((e.seq, e.payload), (3, Some(log::payload(4)))),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        seqs(&logs.read_range("s", 0, usize::MAX).await.unwrap()),
        vec![1, 2, 3]
    );
    logs.shutdown().await;
}

#[tokio::test]
async fn append_with_meta_commits_events_and_meta_together_or_neither() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    logs.commit(
        "s",
        Commit::events(vec![new_event(1)]).with_meta(|m| m.pid = Some(7)),
    )
    .await
    .unwrap();
    let (commits, metas) = (
        probe.commits.load(Ordering::SeqCst),
        probe.metas_written.load(Ordering::SeqCst),
    );
    let evs = logs
        .commit(
            "s",
            Commit::events(vec![new_event(2), new_event(3)]).with_meta(|m| {
                m.pid = None;
                m.head_seq = 99; // the log's own field: ignored
            }),
        )
        .await
        .unwrap();
    assert_eq!(seqs(&evs), vec![2, 3]);
    assert_eq!(
        probe.commits.load(Ordering::SeqCst),
        commits + 1,
        "one commit"
    );
    assert_eq!(probe.metas_written.load(Ordering::SeqCst), metas + 1);
    let meta = probe.inner.meta("s").unwrap().unwrap();
    assert_eq!((meta.pid, meta.head_seq), (None, 3));

    // A failed commit: neither the events nor the meta change.
    probe.fail.store(true, Ordering::SeqCst);
    let err = logs
        .commit(
            "s",
            Commit::events(vec![new_event(4)]).with_meta(|m| m.pid = Some(8)),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::Store(_)), "{err}");
    probe.fail.store(false, Ordering::SeqCst);
    assert_eq!(logs.head_seq("s").await.unwrap(), 3);
    assert_eq!(logs.meta("s").await.unwrap().unwrap().pid, None);
    // The writer rolled its own copy back too: the next plain update
    // starts from the committed meta.
    logs.commit("s", Commit::meta(|m| m.sealed_env = Some("/w".into())))
        .await
        .unwrap();
    let meta = probe.inner.meta("s").unwrap().unwrap();
    assert_eq!((meta.pid, meta.sealed_env.as_deref()), (None, Some("/w")));
    logs.shutdown().await;
}

#[tokio::test]
async fn reopen_restores_heads_metas_and_continues_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    {
        let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
        logs.commit("a", Commit::events((1..=30).map(new_event).collect()))
            .await
            .unwrap();
        logs.commit("b", Commit::events(vec![new_event(1)]))
            .await
            .unwrap();
        logs.commit(
            "a",
            Commit::meta(|m| {
                m.sealed_env = Some("r-1".into());
                m.pid = Some(4242);
                m.pid_start_time = Some(99);
                // Attempts to move the log's own fields are ignored.
                m.head_seq = 1_000;
                m.session_id = "evil".into();
            }),
        )
        .await
        .unwrap();
        logs.commit(
            "meta-only",
            Commit::meta(|m| m.sealed_env = Some("/w".into())),
        )
        .await
        .unwrap();
        logs.shutdown().await;
    }
    let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
    assert_eq!(logs.head_seq("a").await.unwrap(), 30);
    assert_eq!(logs.head_seq("b").await.unwrap(), 1);
    assert!(
        logs.exists("meta-only").await.unwrap()
            && logs.exists("a").await.unwrap()
            && !logs.exists("c").await.unwrap()
    );
    let a = logs.meta("a").await.unwrap().unwrap();
    assert_eq!((a.session_id.as_str(), a.head_seq), ("a", 30));
    assert_eq!(
        (a.sealed_env.as_deref(), a.pid, a.pid_start_time),
        (Some("r-1"), Some(4242), Some(99))
    );
    let ids: Vec<_> = logs
        .sessions(None, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.session_id)
        .collect();
    assert_eq!(ids, ["a", "b", "meta-only"]);
    // The window is empty after a restart: this replay comes from the file.
    assert_eq!(
        seqs(&logs.read_range("a", 0, usize::MAX).await.unwrap()),
        (1..=30).collect::<Vec<_>>()
    );
    let next = logs
        .commit("a", Commit::events(vec![new_event(31)]))
        .await
        .unwrap();
    assert_eq!(next[0].seq, 31);
    // Meta survives an append (the writer merges, it does not reset).
    assert_eq!(
        logs.meta("a").await.unwrap().unwrap().sealed_env.as_deref(),
        Some("r-1")
    );
    logs.shutdown().await;
}

#[tokio::test]
async fn shutdown_commits_queued_appends_then_refuses_and_ends_streams() {
    let dir = tempfile::tempdir().unwrap();
    let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
    let mut sub = Box::pin(logs.subscribe("s", 0).await.unwrap());
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let logs = logs.clone();
        tasks.push(tokio::spawn(async move {
            logs.commit("s", Commit::events(vec![new_event(i)])).await
        }));
    }
    tokio::task::yield_now().await;
    logs.shutdown().await;
    let mut acked = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => acked += 1,
            Err(LogError::Closed) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(matches!(
        logs.commit("s", Commit::events(vec![new_event(0)])).await,
        Err(LogError::Closed)
    ));
    // The stream ends (after at most what it already had).
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        let mut n = 0;
        while sub.next().await.is_some() {
            n += 1;
        }
        n
    })
    .await
    .expect("stream must end at shutdown");
    assert!(rest <= 2 + acked);
    drop(sub);
    drop(logs);
    // Every acknowledged append is in the file.
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    assert_eq!(store.read_range("s", 0, usize::MAX).unwrap().len(), acked);
    assert_eq!(
        store.meta("s").unwrap().map_or(0, |m| m.head_seq),
        acked as u64
    );
}

#[tokio::test]
async fn exists_and_head_for_unknown_and_meta_only_sessions() {
    let logs = EventLogs::open(Arc::new(MemoryStore::new()), LogOptions::default()).unwrap();
    assert!(!logs.exists("x").await.unwrap());
    assert_eq!(logs.head_seq("x").await.unwrap(), 0);
    let _sub = logs.subscribe("x", 0).await.unwrap(); // subscribing alone does not create it
    assert!(!logs.exists("x").await.unwrap());
    logs.commit("x", Commit::meta(|m| m.sealed_env = Some("r".into())))
        .await
        .unwrap();
    assert!(logs.exists("x").await.unwrap());
    assert_eq!(logs.head_seq("x").await.unwrap(), 0);
    assert!(
        logs.commit("x", Commit::events(vec![]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(logs.head_seq("x").await.unwrap(), 0);
    logs.shutdown().await;
}

#[tokio::test]
async fn appends_write_the_meta_only_when_it_changes() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    let written = || probe.metas_written.load(Ordering::SeqCst);
    logs.commit("s", Commit::events(vec![new_event(1)]))
        .await
        .unwrap();
    assert_eq!(written(), 1, "the first append creates the session's meta");
    for i in 2..=20 {
        logs.commit("s", Commit::events(vec![new_event(i)]))
            .await
            .unwrap();
    }
    assert_eq!(written(), 1, "plain appends write no meta");
    logs.commit("s", Commit::meta(|m| m.sealed_env = Some("r".into())))
        .await
        .unwrap();
    assert_eq!(written(), 2, "a meta update writes it");
    logs.commit("s", Commit::events(vec![new_event(21)]))
        .await
        .unwrap();
    assert_eq!(written(), 2);
    // Readers still see the true head and the last append time.
    let m = logs.meta("s").await.unwrap().unwrap();
    assert_eq!((m.head_seq, m.sealed_env.as_deref()), (21, Some("r")));
    let last = logs
        .read_range("s", 0, usize::MAX)
        .await
        .unwrap()
        .pop()
        .unwrap();
    let t = last.time.unwrap();
    let last_ms = t.seconds * 1000 + i64::from(t.nanos / 1_000_000);
    assert!(
        m.updated_ms >= last_ms,
        "updated_ms {} < last append {last_ms}",
        m.updated_ms
    );
    let listed = logs.sessions(None, usize::MAX).await.unwrap();
    assert_eq!(listed[0].head_seq, 21);
    assert!(listed[0].updated_ms >= last_ms);
    let st = logs.stats();
    assert_eq!(st.committed_events, 21);
    assert_eq!(st.commits as usize, probe.commits.load(Ordering::SeqCst));
    logs.shutdown().await;
}

#[tokio::test]
async fn reopen_recovers_head_and_append_time_from_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let last_ms;
    {
        let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
        logs.commit("s", Commit::meta(|m| m.sealed_env = Some("/w".into())))
            .await
            .unwrap();
        // Many appends after the last meta write: the stored row is stale.
        for i in 1..=40 {
            logs.commit("s", Commit::events(vec![new_event(i)]))
                .await
                .unwrap();
        }
        let t = logs
            .read_range("s", 0, usize::MAX)
            .await
            .unwrap()
            .pop()
            .unwrap()
            .time
            .unwrap();
        last_ms = t.seconds * 1000 + i64::from(t.nanos / 1_000_000);
        logs.shutdown().await;
    }
    let logs = EventLogs::open(redb(&dir), LogOptions::default()).unwrap();
    assert_eq!(logs.head_seq("s").await.unwrap(), 40);
    let m = logs.meta("s").await.unwrap().unwrap();
    assert_eq!((m.head_seq, m.sealed_env.as_deref()), (40, Some("/w")));
    assert!(
        m.updated_ms >= last_ms,
        "updated_ms {} < last append {last_ms}",
        m.updated_ms
    );
    assert_eq!(
        logs.commit("s", Commit::events(vec![new_event(41)]))
            .await
            .unwrap()[0]
            .seq,
        41
    );
    logs.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_append_gets_exactly_its_own_events_from_a_shared_commit() {
    // Replies are carved out of one batch by moving events: a mix-up would
    // hand an appender another session's events or the wrong count.
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    probe.close_gate();
    // Holds the writer inside a commit, so the appends below all queue up
    // and go into the next commit together.
    let warm = {
        let logs = logs.clone();
        tokio::spawn(async move {
            logs.commit("warm", Commit::events(vec![new_event(0)]))
                .await
        })
    };
    tokio::task::spawn_blocking({
        let probe = probe.clone();
        move || probe.wait_at_gate(1)
    })
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for t in 0..50u64 {
        let sid = format!("s{}", t % 7);
        let k = 1 + t % 5;
        let append = queued_append(
            &logs,
            sid.clone(),
            (0..k).map(|i| new_event(t * 100 + i)).collect(),
        )
        .await;
        tasks.push(async move { (sid, k, append.await.unwrap().unwrap()) });
    }
    probe.open_gate();
    warm.await.unwrap().unwrap();
    for t in tasks {
        let (sid, k, evs) = t.await;
        assert_eq!(evs.len() as u64, k);
        assert!(evs.iter().all(|e| e.session_id == sid));
        assert!(evs.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    }
    let commits = probe.commits.load(Ordering::SeqCst);
    assert!(
        commits <= 3,
        "50 queued appends should share a commit, got {commits} commits"
    );
    for s in 0..7 {
        let sid = format!("s{s}");
        let all = logs.read_range(&sid, 0, usize::MAX).await.unwrap();
        assert_eq!(
            seqs(&all),
            (1..=logs.head_seq(&sid).await.unwrap()).collect::<Vec<_>>()
        );
    }
    logs.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaiting_appenders_merge_into_one_group_commit() {
    // 100 appenders that each await their append before the next. Without
    // the writer lingering for the ones it just answered, they settle into
    // two alternating groups of ~50 (measured: exactly 50 per commit); with
    // it, commits carry close to all 100.
    let store = Arc::new(Probe::slow(Duration::from_millis(2)));
    let logs = EventLogs::open(store, LogOptions::default()).unwrap();
    let mut tasks = Vec::new();
    for t in 0..100u64 {
        let logs = logs.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..30 {
                logs.commit(&format!("s{}", t % 10), Commit::events(vec![new_event(i)]))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let st = logs.stats();
    assert_eq!(st.committed_events, 3_000);
    let avg = st.committed_events as f64 / st.commits as f64;
    eprintln!("{} commits, {avg:.1} events per commit", st.commits);
    assert!(
        avg > 65.0,
        "appenders did not merge: {avg:.1} events per commit"
    );
    // A lone appender is never held back waiting for company.
    let t0 = std::time::Instant::now();
    for i in 0..20 {
        logs.commit("lone", Commit::events(vec![new_event(i)]))
            .await
            .unwrap();
    }
    let per = t0.elapsed() / 20;
    assert!(per < Duration::from_millis(10), "lone append took {per:?}");
    logs.shutdown().await;
}

#[tokio::test]
async fn the_writer_queue_is_bounded_and_appends_wait_for_room() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(
        probe.clone(),
        LogOptions {
            max_queued: 10,
            ..LogOptions::default()
        },
    )
    .unwrap();
    probe.close_gate();
    let mut tasks = Vec::new();
    for i in 0..50u64 {
        let logs = logs.clone();
        tasks.push(tokio::spawn(async move {
            logs.commit(&format!("s{}", i % 5), Commit::events(vec![new_event(i)]))
                .await
        }));
    }
    // The writer holds its first batch at the gate ...
    tokio::task::spawn_blocking({
        let probe = probe.clone();
        move || probe.wait_at_gate(1)
    })
    .await
    .unwrap();
    // ... and every appender has run (one thread: each yield lets them all
    // step): ten got room, forty wait for it instead of queueing.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(logs.stats().queued, 10, "{:?}", logs.stats());
    assert!(tasks.iter().all(|t| !t.is_finished()));
    probe.open_gate();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut total = 0;
    for s in 0..5 {
        total += logs.head_seq(&format!("s{s}")).await.unwrap();
    }
    assert_eq!(total, 50, "every append landed once the queue had room");
    assert_eq!(logs.stats().queued, 0);
    logs.shutdown().await;
}

/// A commit handed over with `submit` is committed after those handed over
/// before it, whether they were answered or not: the second of two commits
/// submitted back to back, while the first is held at the store, is
/// answered after it with the seqs after its. `alone` tells a caller whose
/// commit is under way whether the writer has anyone else's to do.
#[tokio::test]
async fn submitted_commits_are_committed_in_order_and_alone_sees_other_sessions() {
    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    probe.close_gate();
    let first = logs
        .submit("s", Commit::events(vec![new_event(1), new_event(2)]))
        .await;
    let held = probe.clone();
    tokio::task::spawn_blocking(move || held.wait_at_gate(1))
        .await
        .unwrap();
    assert!(logs.alone(2), "nothing but this commit is queued");
    let second = logs.submit("s", Commit::events(vec![new_event(3)])).await;
    assert_eq!(logs.queued(), 3);
    assert!(!logs.alone(2), "a commit queued behind it");
    probe.open_gate();
    // Awaited in the other order: the answers are the commits' own.
    let second = second.await.unwrap();
    let first = first.await.unwrap();
    assert_eq!(seqs(&first), [1, 2]);
    assert_eq!(seqs(&second), [3]);
    assert_eq!(logs.queued(), 0);
    assert!(logs.alone(0), "the last commit wrote to one session");

    // A commit that wrote to two sessions: the writer has others to do.
    probe.close_gate();
    let a = logs.submit("a", Commit::events(vec![new_event(1)])).await;
    // The third commit to reach the store (after the two above) is a's.
    let held = probe.clone();
    tokio::task::spawn_blocking(move || held.wait_at_gate(3))
        .await
        .unwrap();
    let b = logs.submit("b", Commit::events(vec![new_event(1)])).await;
    let c = logs.submit("c", Commit::events(vec![new_event(1)])).await;
    probe.open_gate();
    for done in [a.await, b.await, c.await] {
        assert_eq!(seqs(&done.unwrap()), [1]);
    }
    assert!(
        !logs.alone(0),
        "b and c were queued together behind a: one commit wrote to both"
    );
    logs.shutdown().await;
}
