//! GetSession and ListSessions answer from the manager's cached derive fold;
//! these tests hold them to exactly what `derive::session` computes over the
//! whole log, through a varied scripted run, across a restart (the lazy
//! rebuild), and right after each event a subscriber sees. Recovery's tail
//! scan is checked against the full fold over logs of every shape.

use crate::support::server;

use std::sync::Arc;

use agent_harness_protocol::derive;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::log::{Commit, EventLogs, LogOptions, NewEvent};
use agent_harness_server::recovery::recover;
use agent_harness_server::store::Store;
use server::*;
use tonic::transport::Channel;

/// Reads `sub` until `pred`, and after every event asks GetSession: a
/// client that has seen seq N must get a state that includes N.
async fn until_checked(
    c: &mut SessionServiceClient<Channel>,
    sub: &mut Sub,
    session: &str,
    what: &str,
    pred: impl Fn(&pb::Event) -> bool,
) -> pb::Event {
    loop {
        let before = sub.events.len();
        let msg = sub.next().await;
        assert!(msg.is_some(), "stream ended before {what}");
        if sub.events.len() == before {
            continue;
        }
        let e = sub.events.last().cloned().expect("an event");
        let s = get(c, session).await;
        assert!(
            s.head_seq >= e.seq,
            "GetSession head {} behind the event a subscriber saw ({})",
            s.head_seq,
            e.seq
        );
        if pred(&e) {
            return e;
        }
    }
}

async fn assert_list_matches_log(c: &mut SessionServiceClient<Channel>) -> Vec<pb::Session> {
    let got = list(c).await;
    let mut want = Vec::new();
    for s in &got {
        let events = history_all(c, &s.session_id).await;
        want.push(derive::session(&s.session_id, &events));
    }
    assert_eq!(got, want, "ListSessions differs from derive over the logs");
    got
}

fn allow(session: &str, request_id: &str) -> pb::RespondPermissionRequest {
    pb::RespondPermissionRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        request_id: request_id.into(),
        allow: true,
        updated_input: None,
        message: String::new(),
    }
}

#[tokio::test]
async fn get_and_list_equal_derive_over_the_log_through_a_varied_run() {
    let store: Arc<dyn Store> = crate::support::server::test_store();
    let server = TestServer::on_store(store.clone()).await;
    let mut c = server.client().await;

    // "a": turns, a relayed permission, a stopped turn; checked after every event.
    let mut sub = Sub::open(&mut c, "a", 0).await;
    start(&mut c, "a", "hello").await.unwrap();
    until_checked(&mut c, &mut sub, "a", "turn_end", is_turn_end).await;
    let s = assert_derived_matches_log(&mut c, "a").await;
    assert_eq!(
        (s.status, s.process_alive),
        (pb::SessionStatus::Idle as i32, true)
    );

    send(&mut c, "a", "PERMISSION please").await.unwrap();
    let req = until_checked(&mut c, &mut sub, "a", "permission_requested", |e| {
        kind(e) == "permission_requested"
    })
    .await;
    let s = assert_derived_matches_log(&mut c, "a").await;
    assert_eq!(s.pending_permissions, 1);
    let Some(Payload::PermissionRequested(req)) = req.payload else {
        unreachable!()
    };
    c.respond_permission(allow("a", &req.request_id))
        .await
        .unwrap();
    until_checked(&mut c, &mut sub, "a", "turn_end", is_turn_end).await;
    assert_eq!(
        assert_derived_matches_log(&mut c, "a")
            .await
            .pending_permissions,
        0
    );

    send(&mut c, "a", "HANG on").await.unwrap();
    until_checked(&mut c, &mut sub, "a", "hanging content", |e| {
        kind(e) == "content"
    })
    .await;
    let s = assert_derived_matches_log(&mut c, "a").await;
    assert_eq!(s.status, pb::SessionStatus::Streaming as i32);
    assert!(stop(&mut c, "a").await.unwrap());
    until_checked(&mut c, &mut sub, "a", "interrupted turn_end", is_turn_end).await;
    let s = assert_derived_matches_log(&mut c, "a").await;
    assert_eq!(
        (s.status, s.process_alive),
        (pb::SessionStatus::Idle as i32, true)
    );

    // "b" crashes, "c" ends with an API error, "d" hangs, "e" waits on a question.
    for (sid, text) in [
        ("b", "CRASH"),
        ("c", "APIERROR"),
        ("d", "HANG"),
        ("e", "PERMISSION"),
    ] {
        start(&mut c, sid, text).await.unwrap();
    }
    for sid in ["b", "c"] {
        let mut sub = Sub::open(&mut c, sid, 0).await;
        sub.until("run_end", is_run_end).await;
    }
    let mut sub_d = Sub::open(&mut c, "d", 0).await;
    sub_d.until("content", |e| kind(e) == "content").await;
    let mut sub_e = Sub::open(&mut c, "e", 0).await;
    sub_e
        .until("permission_requested", |e| {
            kind(e) == "permission_requested"
        })
        .await;
    for sid in ["a", "b", "c", "d", "e"] {
        assert_derived_matches_log(&mut c, sid).await;
    }
    let sessions = assert_list_matches_log(&mut c).await;
    let ids: Vec<_> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e"]);
    assert!(!sessions[1].process_alive, "b crashed");
    assert_eq!(sessions[3].status, pb::SessionStatus::Streaming as i32);
    assert_eq!(sessions[4].pending_permissions, 1);

    // Shutdown appends run_end to the live runs; a new server over the same
    // store builds each fold lazily from the log.
    server.shutdown().await.unwrap();
    let server = TestServer::on_store(store).await;
    let mut c = server.client().await;
    let sessions = assert_list_matches_log(&mut c).await;
    assert!(sessions.iter().all(|s| !s.process_alive));
    for sid in ["a", "b", "c", "d", "e"] {
        assert_derived_matches_log(&mut c, sid).await;
    }
    // A respawn after the rebuild keeps the cache in step with the log.
    let head = get(&mut c, "a").await.head_seq;
    let mut sub = Sub::open(&mut c, "a", head).await;
    send(&mut c, "a", "back again").await.unwrap();
    until_checked(&mut c, &mut sub, "a", "turn_end", is_turn_end).await;
    let s = assert_derived_matches_log(&mut c, "a").await;
    assert!(s.process_alive);
    assert_eq!(
        server.adapter.record().spawns[0].config.resume,
        s.resume_id,
        "the respawn resumed the CLI session the cached fold knows"
    );
    assert_list_matches_log(&mut c).await;
    server.shutdown().await.unwrap();
}

fn event(run_id: &str, payload: Payload) -> NewEvent {
    NewEvent {
        run_id: run_id.into(),
        payload,
        cli_line: String::new(),
    }
}

fn run_start(run_id: &str) -> NewEvent {
    event(
        run_id,
        Payload::RunStart(pb::RunStart {
            config: Some(pb::StartConfig {
                prompt: "go".into(),
                ..Default::default()
            }),
            adapter: "scripted".into(),
            trigger: "start".into(),
            ..Default::default()
        }),
    )
}

fn ready(run_id: &str, resume: &str) -> NewEvent {
    event(
        run_id,
        Payload::RunReady(pb::RunReady {
            resume_id: resume.into(),
            ..Default::default()
        }),
    )
}

fn content(run_id: &str) -> NewEvent {
    event(
        run_id,
        Payload::Content(pb::Content {
            ..Default::default()
        }),
    )
}

fn run_end(run_id: &str) -> NewEvent {
    event(
        run_id,
        Payload::RunEnd(pb::RunEnd {
            reason: pb::RunEndReason::Completed as i32,
            source: "process".into(),
            ..Default::default()
        }),
    )
}

/// Recovery decides "live run" from the log's tail; over logs whose last
/// run event is far from the head (more than a scan page) it must agree
/// with the full fold, and close exactly the live runs.
#[tokio::test]
async fn recovery_tail_scan_agrees_with_the_full_fold() {
    let store: Arc<dyn Store> = crate::support::server::test_store();
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    let many = |run: &str, n: usize| (0..n).map(|_| content(run)).collect::<Vec<_>>();
    // Live, its run_start 600 events back.
    let mut live_far = vec![run_start("r1"), run_end("r1"), run_start("r2")];
    live_far.push(ready("r2", "cli-far"));
    live_far.extend(many("r2", 600));
    // Ended, the run_end last.
    let ended = vec![run_start("r1"), ready("r1", "cli-ended"), run_end("r1")];
    // Ended long ago, then 600 events outside any run.
    let mut ended_far = vec![run_start("r1"), run_end("r1")];
    ended_far.extend(many("", 600));
    // Live, the run_start last.
    let live_last = vec![run_start("r1"), run_end("r1"), run_start("r2")];
    // Events but no run at all.
    let no_run = many("", 3);
    let cases = [
        ("live_far", live_far),
        ("ended", ended),
        ("ended_far", ended_far),
        ("live_last", live_last),
        ("no_run", no_run),
    ];
    for (sid, events) in &cases {
        logs.commit(sid, Commit::events(events.clone()))
            .await
            .unwrap();
    }
    let mut before = Vec::new();
    for (sid, _) in &cases {
        let all = logs.read_range(sid, 0, usize::MAX).await.unwrap();
        let mut fold = derive::StatusFold::new();
        all.iter().for_each(|e| fold.apply(e));
        before.push((sid.to_string(), fold));
    }

    let recovered = recover(&logs, &|_, _| false).await.unwrap();
    let closed: Vec<_> = recovered
        .iter()
        .map(|r| {
            (
                r.session_id.as_str(),
                r.closed_run.as_deref(),
                r.resume_id.as_deref(),
            )
        })
        .collect();
    let want: Vec<_> = before
        .iter()
        .filter(|(_, f)| f.run_live())
        .map(|(sid, f)| {
            let resume = (sid == "live_far").then_some("cli-far");
            (sid.as_str(), f.current_run_id(), resume)
        })
        .collect();
    assert_eq!(closed, want);
    assert_eq!(
        closed.iter().map(|c| c.0).collect::<Vec<_>>(),
        ["live_far", "live_last"]
    );
    for (sid, _) in &cases {
        let all = logs.read_range(sid, 0, usize::MAX).await.unwrap();
        assert!(!derive::process_alive(&all), "{sid} derives as not live");
    }
    // Nothing left to recover: a second pass is a no-op.
    assert!(recover(&logs, &|_, _| false).await.unwrap().is_empty());
    logs.shutdown().await;
}
