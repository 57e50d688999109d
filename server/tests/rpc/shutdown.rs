//! Graceful shutdown: streams end cleanly and every live run gets exactly
//! one run_end (SERVER_RESTART, source "shutdown").

use crate::support::server;

use std::sync::Arc;

use agent_harness_client::pb;
use agent_harness_client::pb::event::Payload;
use agent_harness_server::store::MemoryStore;
use server::*;

#[tokio::test]
async fn shutdown_ends_streams_and_every_live_run_once() {
    let server = TestServer::on_store(Arc::new(MemoryStore::new())).await;
    let mut c = server.client().await;
    start(&mut c, "busy", "HANG").await.unwrap();
    start(&mut c, "idle", "hello").await.unwrap();
    // A run that already ended before shutdown must not get a second run_end.
    start(&mut c, "done", "CRASH").await.unwrap();
    wait_session(&mut c, "done", |s| !s.process_alive).await;
    wait_idle(&mut c, "idle").await;
    let mut busy = Sub::open(&mut c, "busy", 0).await;
    busy.until("content", |e| {
        matches!(e.payload, Some(Payload::Content(_)))
    })
    .await;
    let mut idle = Sub::open(&mut c, "idle", 0).await;
    idle.until("turn_end", is_turn_end).await;
    assert_eq!(server.adapter.live_processes(), 2);

    let store = server.store.clone();
    let adapter = server.adapter.clone();
    server.shutdown().await.expect("clean shutdown");

    // Streams end (None), after delivering the run_end.
    for sub in [&mut busy, &mut idle] {
        while sub.next().await.is_some() {}
        assert!(
            sub.events.iter().any(is_run_end),
            "{:?}",
            kinds(&sub.events)
        );
    }
    assert_eq!(
        adapter.live_processes(),
        0,
        "no process outlives the server"
    );
    for (session, want) in [
        ("busy", Some(pb::RunEndReason::ServerRestart)),
        ("idle", Some(pb::RunEndReason::ServerRestart)),
        ("done", Some(pb::RunEndReason::ProcessExit)),
    ] {
        let events = store.read_range(session, 0, usize::MAX).unwrap();
        let starts = events.iter().filter(|e| kind(e) == "run_start").count();
        let ends: Vec<_> = events.iter().filter(|e| is_run_end(e)).collect();
        assert_eq!(starts, 1, "{session}");
        assert_eq!(ends.len(), 1, "{session}: exactly one run_end");
        let end = run_end(ends[0]);
        assert_eq!(Some(end.reason), want.map(|r| r as i32), "{session}");
        if session != "done" {
            assert_eq!(end.source, "shutdown");
        }
    }
}
