//! Memory is bounded by live work
//! (docs/ARCHITECTURE.md, "Bounded by live work"): calls on ids that do
//! not exist keep nothing; sessions with no live run and no open stream are
//! evicted past `cache_sessions` and come back whole from the log;
//! ListSessions reads one page, not every stored log.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_harness_protocol::derive::Fold;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use agent_harness_server::store::{SessionMeta, Store};
use futures::StreamExt;

use crate::support::probe::Probe;
use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::{self, fast_opts};

fn manager(store: Arc<dyn Store>, cache: usize, behavior: ScriptedBehavior) -> SessionManager {
    let logs = EventLogs::open(
        store,
        LogOptions {
            cache_sessions: cache,
            ..LogOptions::default()
        },
    )
    .unwrap();
    let adapter = Arc::new(ScriptedAdapter::new(behavior));
    SessionManager::new(
        adapter,
        logs,
        ManagerOptions {
            cache_sessions: cache,
            ..fast_opts()
        },
    )
}

/// Reads a session's stream until its first `run_end` after `after`.
async fn until_run_end(logs: &EventLogs, session_id: &str, after: u64) -> pb::Event {
    let mut s = Box::pin(logs.subscribe(session_id, after).await.unwrap());
    while let Some(m) = s.next().await {
        if let Some(Kind::Event(e)) = m.kind
            && matches!(e.payload, Some(Payload::RunEnd(_)))
        {
            return e;
        }
    }
    panic!("stream of {session_id} ended before a run_end");
}

#[tokio::test]
async fn unknown_ids_keep_nothing_in_memory_on_any_call() {
    let m = manager(
        Arc::new(Probe::default()),
        1000,
        ScriptedBehavior::default(),
    );
    let logs = m.logs().clone();
    for i in 0..10_000 {
        let id = format!("nobody-{i}");
        assert!(m.send(server::send_request(&id, "hi", "")).await.is_err());
        assert!(m.stop(server::stop_request(&id, "")).await.is_err());
        assert!(m.get(&id).await.is_err());
        assert!(!logs.exists(&id).await.unwrap());
        assert_eq!(logs.head_seq(&id).await.unwrap(), 0);
        assert!(logs.history(&id, 0, 50).await.unwrap().0.is_empty());
        // A Subscribe waits for the session to appear; once it is gone,
        // nothing of it stays.
        let mut s = Box::pin(logs.subscribe(&id, 0).await.unwrap());
        assert!(matches!(
            s.next().await.unwrap().kind,
            Some(Kind::Replay(_))
        ));
        drop(s);
    }
    assert_eq!(m.sessions_in_memory(), 0);
    assert_eq!(logs.stats().sessions, 0, "{:?}", logs.stats());
    m.shutdown().await;
}

#[tokio::test]
async fn idle_sessions_past_the_cap_are_evicted_and_come_back_whole() {
    const CAP: usize = 20;
    let store = Arc::new(Probe::default());
    let behavior = ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    };
    let m = manager(store.clone(), CAP, behavior);
    let logs = m.logs().clone();
    for i in 0..100 {
        let sid = format!("s{i:03}");
        m.start(server::start_request(&sid, server::prompt("hello")))
            .await
            .unwrap();
        until_run_end(&logs, &sid, 0).await;
        // Every session is used once more after its run ended.
        m.get(&sid).await.unwrap();
    }
    assert!(
        m.sessions_in_memory() <= CAP,
        "{} slots in memory",
        m.sessions_in_memory()
    );
    assert!(logs.stats().sessions <= CAP, "{:?}", logs.stats());

    // An evicted session answers exactly as its log says ...
    let events = logs.read_range("s000", 0, usize::MAX).await.unwrap();
    let mut fold = Fold::default();
    events.iter().for_each(|e| fold.apply(e));
    assert_eq!(m.get("s000").await.unwrap(), fold.session("s000"));
    let resume = fold.session("s000").resume_id;
    assert!(!resume.is_empty());
    // ... and goes on: a Send respawns it with its resume id.
    let head = events.last().unwrap().seq;
    m.send(server::send_request("s000", "again", ""))
        .await
        .unwrap();
    until_run_end(&logs, "s000", head).await;
    let again = logs.read_range("s000", head, usize::MAX).await.unwrap();
    let Some(Payload::RunStart(rs)) = &again[0].payload else {
        panic!("{:?}", again[0]);
    };
    assert_eq!(rs.config.as_ref().unwrap().resume, resume);
    assert_eq!(rs.trigger, "send");
    m.shutdown().await;
}

/// `n` stored sessions of one finished run each, written straight to the store.
fn seed(store: &Probe, n: usize) {
    let mut events = Vec::with_capacity(n * 2);
    let mut metas = Vec::with_capacity(n);
    for i in 0..n {
        let sid = format!("s{i:06}");
        let ev = |seq: u64, payload| pb::Event {
            seq,
            session_id: sid.clone(),
            run_id: "r".into(),
            payload: Some(payload),
            ..Default::default()
        };
        events.push(ev(
            1,
            Payload::RunStart(pb::RunStart {
                config: Some(server::prompt("hi")),
                ..Default::default()
            }),
        ));
        events.push(ev(
            2,
            Payload::RunEnd(pb::RunEnd {
                reason: pb::RunEndReason::Completed as i32,
                ..Default::default()
            }),
        ));
        metas.push(SessionMeta::new(&sid, 1));
    }
    store.append_batch(&events, &metas).unwrap();
}

#[tokio::test]
async fn list_sessions_reads_one_page_of_100_000_stored_sessions() {
    const N: usize = 100_000;
    let store = Arc::new(Probe::default());
    seed(&store, N);
    let m = manager(store.clone(), 1000, ScriptedBehavior::default());
    let reads =
        || store.event_reads.load(Ordering::SeqCst) + store.meta_reads.load(Ordering::SeqCst);

    let before = reads();
    let (page, more) = m.list(None, 100).await.unwrap();
    let cost = reads() - before;
    assert_eq!(page.len(), 100);
    assert!(more);
    assert_eq!(page[0].session_id, "s000000");
    assert_eq!(page[99].session_id, "s000099");
    assert!(page.iter().all(|s| s.head_seq == 2 && !s.process_alive));
    // A page of 100 costs a few reads per listed session, not one per
    // stored session.
    assert!(cost <= 100 * 4, "{cost} store reads for one page");
    // Listing keeps nothing: the walk does not fill the cache.
    assert_eq!(m.sessions_in_memory(), 0);

    // Pages follow each other without gaps or repeats to the end.
    let (page, more) = m.list(Some("s099899"), 1000).await.unwrap();
    assert_eq!(page.len(), 100);
    assert!(!more);
    assert_eq!(page[0].session_id, "s099900");
    assert_eq!(page.last().unwrap().session_id, "s099999");
    m.shutdown().await;
}

#[tokio::test]
async fn list_sessions_pages_over_grpc_with_tokens() {
    let store = Arc::new(Probe::default());
    seed(&store, 2_500);
    let server = server::TestServer::on_store(store).await;
    let mut client = server.client().await;
    let mut token = String::new();
    let mut ids = Vec::new();
    let mut pages = 0;
    loop {
        let page = client
            .list_sessions(pb::ListSessionsRequest {
                page_size: 1000,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        pages += 1;
        ids.extend(page.sessions.into_iter().map(|s| s.session_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, 3);
    let want: Vec<String> = (0..2_500).map(|i| format!("s{i:06}")).collect();
    assert_eq!(ids, want);
    // The default page is 100; a page size over 1000 is lowered to 1000.
    let default = client
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(default.sessions.len(), 100);
    let big = client
        .list_sessions(pb::ListSessionsRequest {
            page_size: 1_000_000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(big.sessions.len(), 1000);
    // A token the server did not give out is refused, naming the field.
    for bad in ["s000001", "v1.", "v1.bad id", "v2.s000001"] {
        let err = client
            .list_sessions(pb::ListSessionsRequest {
                page_token: bad.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
        assert!(err.message().contains("page_token"), "{}", err.message());
    }
    server.shutdown().await.unwrap();
}
