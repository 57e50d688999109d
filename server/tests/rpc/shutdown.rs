//! Graceful shutdown: streams end cleanly and every live run gets exactly
//! one run_end (SERVER_RESTART, source "shutdown").

use crate::support::server;

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use server::*;

#[tokio::test]
async fn shutdown_ends_streams_and_every_live_run_once() {
    let server = TestServer::on_store(crate::support::server::test_store()).await;
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

/// A CLI that ignores SIGTERM and SIGINT, with a straggler in its group
/// that ignores them too: shutdown's ladder ends with the group killed,
/// and serve_on returns only once the reaper has reaped and the straggler
/// is dead (its readers, holding the pipes the straggler shared, ended).
#[tokio::test]
async fn shutdown_returns_after_the_reaper_killed_the_group() {
    use std::os::unix::fs::PermissionsExt;

    use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, ClaudeOptions};

    let dir = tempfile::tempdir().expect("temp dir");
    let pids = dir.path().join("pids");
    let bin = dir.path().join("claude");
    let script = format!(
        r#"#!/bin/sh
trap '' TERM INT
sleep 300 &
printf '%s %s\n' "$$" "$!" > '{pids}.tmp'
mv '{pids}.tmp' '{pids}'
printf '{{"type":"system","subtype":"init","session_id":"deaf","cwd":"/","model":"stand-in","tools":[]}}\n'
while IFS= read -r line; do :; done
wait
"#,
        pids = pids.display()
    );
    std::fs::write(&bin, script).expect("write stand-in");
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let adapter = Arc::new(ClaudeInteractiveAdapter::new(ClaudeOptions {
        claude_bin: Some(bin),
        ..ClaudeOptions::default()
    }));
    let server = TestServer::spawning(adapter, fast_opts()).await;
    let mut c = server.client().await;
    let mut sub = Sub::open(&mut c, "deaf", 0).await;
    start(&mut c, "deaf", "hello").await.unwrap();
    // The init line is printed after the pids are written.
    sub.until_kind("run_ready").await;
    let text = std::fs::read_to_string(&pids).expect("pids written before init");
    let (leader, straggler) = text.trim().split_once(' ').expect("two pids");
    let (leader, straggler): (u32, u32) = (leader.parse().unwrap(), straggler.parse().unwrap());

    server.shutdown().await.expect("clean shutdown");

    let stat = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(stat(leader).is_empty(), "leader reaped: {}", stat(leader));
    // Gone, a zombie of init's, or past closing its files (which ended the
    // readers shutdown waited for).
    let no_files =
        std::fs::read_dir(format!("/proc/{straggler}/fd")).map_or(true, |mut d| d.next().is_none());
    let s = stat(straggler);
    assert!(
        s.is_empty() || s.contains(") Z") || s.contains(") X") || no_files,
        "straggler still running: {s}"
    );
}
