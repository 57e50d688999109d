//! ListSessions from the session index: search (title, id, cwd), status,
//! agent and cwd filters, the three orders, total_size, keyset pages that
//! go on across pages with a filter, tokens refused with other filters;
//! each listed session equal to GetSession's; a page over 10,000 stored
//! sessions reading only its own sessions' logs.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::store::{SessionMeta, Store};
use tonic::transport::Channel;

use crate::support::probe::Probe;
use crate::support::server::{self, TestServer};

/// What the seeded session `i` is: its cwd, agent, whether its run is
/// still live (STARTING) and the second of its last event.
fn shape(i: usize) -> (String, &'static str, bool, i64) {
    let cwd = format!("/proj/{}", i % 3);
    let agent = ["claude", "codex"][i % 2];
    let live = i % 4 == 0;
    let second = 1_700_000_000 + ((i * 7) % 30) as i64;
    (cwd, agent, live, second)
}

/// `n` sessions written straight into the store (no index rows: the
/// server's start-up rebuild makes them), `s00000`…, of the shapes above;
/// every fifth one's prompt says "alpha".
fn seed(store: &dyn Store, n: usize) {
    let mut events = Vec::with_capacity(n * 2);
    let mut metas = Vec::with_capacity(n);
    for i in 0..n {
        let sid = format!("s{i:05}");
        let (cwd, agent, live, second) = shape(i);
        let ev = |seq: u64, payload| pb::Event {
            seq,
            session_id: sid.clone(),
            run_id: "r".into(),
            time: Some(agent_harness_protocol::pbjson_types::Timestamp {
                seconds: second - 1 + seq as i64,
                nanos: 0,
            }),
            payload: Some(payload),
            ..Default::default()
        };
        let word = if i % 5 == 0 { "alpha" } else { "beta" };
        events.push(ev(
            0,
            Payload::RunStart(pb::RunStart {
                agent: agent.into(),
                config: Some(pb::StartConfig {
                    cwd,
                    prompt: format!("Task {i} {word}"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        ));
        if !live {
            events.push(ev(
                1,
                Payload::RunEnd(pb::RunEnd {
                    reason: pb::RunEndReason::Completed as i32,
                    ..Default::default()
                }),
            ));
        }
        metas.push(SessionMeta::new(&sid, 1));
    }
    // Seqs from 1.
    for e in &mut events {
        e.seq += 1;
    }
    store.append_batch(&events, &metas).unwrap();
}

/// Which seeded sessions a listing keeps, by their number.
type Keep = Box<dyn Fn(usize) -> bool>;

/// Every page of `req` (page size 4), checking that each says the same total.
async fn all_pages(
    c: &mut SessionServiceClient<Channel>,
    req: pb::ListSessionsRequest,
) -> (Vec<pb::Session>, u64) {
    let mut out = Vec::new();
    let mut token = String::new();
    let mut total = None;
    loop {
        let page = c
            .list_sessions(pb::ListSessionsRequest {
                page_size: 4,
                page_token: token,
                ..req.clone()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.sessions.len() <= 4);
        assert_eq!(*total.get_or_insert(page.total_size), page.total_size);
        out.extend(page.sessions);
        if page.next_page_token.is_empty() {
            return (out, total.unwrap_or(0));
        }
        token = page.next_page_token;
    }
}

fn ids(sessions: &[pb::Session]) -> Vec<String> {
    sessions.iter().map(|s| s.session_id.clone()).collect()
}

/// The seeded ids that pass `keep`, in `order`.
fn expected(n: usize, keep: impl Fn(usize) -> bool, order: pb::SessionOrder) -> Vec<String> {
    let mut want: Vec<usize> = (0..n).filter(|&i| keep(i)).collect();
    let last = |i: usize| {
        let (_, _, live, second) = shape(i);
        second + if live { 0 } else { 1 }
    };
    match order {
        pb::SessionOrder::RecentActivity => want.sort_by_key(|&i| (-last(i), i)),
        pb::SessionOrder::Cwd => want.sort_by_key(|&i| (shape(i).0, -last(i), i)),
        _ => {}
    }
    want.into_iter().map(|i| format!("s{i:05}")).collect()
}

#[tokio::test]
async fn list_sessions_filters_sorts_and_pages_from_the_index() {
    const N: usize = 30;
    let store = server::test_store();
    seed(store.as_ref(), N);
    let server = TestServer::on_store(store).await;
    let mut c = server.client().await;
    let req = |f: &dyn Fn(&mut pb::ListSessionsRequest)| {
        let mut r = pb::ListSessionsRequest::default();
        f(&mut r);
        r
    };
    use pb::SessionOrder::{Cwd, RecentActivity, SessionId};
    let cases: Vec<(pb::ListSessionsRequest, Keep)> = vec![
        (req(&|_| {}), Box::new(|_| true)),
        (req(&|r| r.query = "ALPHA".into()), Box::new(|i| i % 5 == 0)),
        (
            req(&|r| r.query = "s0001".into()),
            Box::new(|i| (10..20).contains(&i)),
        ),
        (
            req(&|r| r.query = "proj/1".into()),
            Box::new(|i| i % 3 == 1),
        ),
        (
            req(&|r| r.statuses = vec![pb::SessionStatus::Starting as i32]),
            Box::new(|i| i % 4 == 0),
        ),
        (
            req(&|r| {
                r.statuses = vec![
                    pb::SessionStatus::Idle as i32,
                    pb::SessionStatus::Streaming as i32,
                ]
            }),
            Box::new(|i| i % 4 != 0),
        ),
        (req(&|r| r.agent = "codex".into()), Box::new(|i| i % 2 == 1)),
        (
            req(&|r| {
                r.cwd = "/proj/2".into();
                r.query = "beta".into();
            }),
            Box::new(|i| i % 3 == 2 && i % 5 != 0),
        ),
    ];
    for (base, keep) in &cases {
        for order in [SessionId, RecentActivity, Cwd] {
            let r = pb::ListSessionsRequest {
                order: order as i32,
                ..base.clone()
            };
            let (got, total) = all_pages(&mut c, r.clone()).await;
            let want = expected(N, keep, order);
            assert_eq!(ids(&got), want, "{r:?}");
            assert_eq!(total, want.len() as u64, "{r:?}");
            // Each listed session is GetSession's.
            if let Some(s) = got.first() {
                let one = c
                    .get_session(pb::GetSessionRequest {
                        session_id: s.session_id.clone(),
                    })
                    .await
                    .unwrap()
                    .into_inner()
                    .session
                    .unwrap();
                assert_eq!(&one, s);
            }
        }
    }
    let got = &all_pages(&mut c, req(&|r| r.query = "task 7 beta".into()))
        .await
        .0;
    assert_eq!(
        (got[0].title.as_str(), got[0].cwd.as_str()),
        ("Task 7 beta", "/proj/1")
    );

    // A token continues only the listing it was given for.
    let first = c
        .list_sessions(pb::ListSessionsRequest {
            page_size: 2,
            query: "alpha".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first.total_size, 6);
    let token = first.next_page_token;
    for other in [
        req(&|r| r.query = "beta".into()),
        req(&|r| {
            r.query = "alpha".into();
            r.order = RecentActivity as i32;
        }),
        req(&|r| {
            r.query = "alpha".into();
            r.agent = "codex".into();
        }),
    ] {
        let err = c
            .list_sessions(pb::ListSessionsRequest {
                page_token: token.clone(),
                ..other
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("page_token"), "{}", err.message());
    }
    let bad = [
        req(&|r| r.page_token = "v2.00".into()),
        req(&|r| r.query = "x".repeat(201)),
        req(&|r| r.query = "a\nb".into()),
        req(&|r| r.statuses = vec![0]),
        req(&|r| r.statuses = vec![99]),
        req(&|r| r.order = 9),
    ];
    for r in bad {
        let err = c.list_sessions(r.clone()).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{r:?}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_index_follows_sessions_started_and_deleted_over_grpc() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let mut paths: Vec<String> = dirs
        .iter()
        .map(|d| d.path().display().to_string())
        .collect();
    paths.sort();
    let (one, two) = (paths[0].as_str(), paths[1].as_str());
    for (sid, cwd, prompt) in [
        ("a1", one, "Fix the flaky test"),
        ("a2", two, "Write the release notes"),
        ("a3", one, "Fix the docs"),
    ] {
        let mut config = server::prompt(prompt);
        config.cwd = cwd.into();
        c.start(pb::StartRequest {
            session_id: sid.into(),
            config: Some(config),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let list = |query: &str, cwd: &str, order: pb::SessionOrder| pb::ListSessionsRequest {
        query: query.into(),
        cwd: cwd.into(),
        order: order as i32,
        ..Default::default()
    };
    let lister = c.clone();
    let page = |r: pb::ListSessionsRequest| {
        let mut c = lister.clone();
        async move { c.list_sessions(r).await.unwrap().into_inner() }
    };
    let fix = page(list("fix", "", pb::SessionOrder::SessionId)).await;
    assert_eq!(
        (ids(&fix.sessions), fix.total_size),
        (vec!["a1".into(), "a3".into()], 2)
    );
    let grouped = page(list("", "", pb::SessionOrder::Cwd)).await;
    let cwds: Vec<&str> = grouped.sessions.iter().map(|s| s.cwd.as_str()).collect();
    assert_eq!(cwds, [one, one, two]);
    let in_one = page(list("", one, pb::SessionOrder::RecentActivity)).await;
    assert_eq!(in_one.total_size, 2);
    c.delete_session(pb::DeleteSessionRequest {
        session_id: "a3".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let fix = page(list("fix", "", pb::SessionOrder::SessionId)).await;
    assert_eq!((ids(&fix.sessions), fix.total_size), (vec!["a1".into()], 1));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_filtered_page_over_10_000_stored_sessions_reads_only_its_own() {
    const N: usize = 10_000;
    let store = Arc::new(Probe::default());
    seed(&store.inner, N);
    let server = TestServer::on_store(store.clone()).await;
    let mut c = server.client().await;
    // The first call is served once the start-up rebuild has indexed them.
    let all = c
        .list_sessions(pb::ListSessionsRequest {
            order: pb::SessionOrder::RecentActivity as i32,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.total_size, N as u64);
    let reads =
        || store.event_reads.load(Ordering::SeqCst) + store.meta_reads.load(Ordering::SeqCst);
    for order in [pb::SessionOrder::RecentActivity, pb::SessionOrder::Cwd] {
        let before = reads();
        let page = c
            .list_sessions(pb::ListSessionsRequest {
                page_size: 20,
                query: "alpha".into(),
                agent: "codex".into(),
                order: order as i32,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let cost = reads() - before;
        // "alpha" is every fifth, codex every second: every tenth, odd.
        assert_eq!(page.total_size, 1_000);
        assert_eq!(page.sessions.len(), 20);
        assert!(
            page.sessions
                .iter()
                .all(|s| s.agent == "codex" && s.title.contains("alpha"))
        );
        // Only the page's 20 sessions are read and folded, not 10,000.
        assert!(cost <= 20 * 4, "{cost} store reads for a page of 20");
    }
    server.shutdown().await.unwrap();
}
