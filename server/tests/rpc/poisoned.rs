//! A stored row that cannot be decoded blocks nothing. The row is written
//! as a server did before JSON nesting was bounded: a tool_use whose input
//! nests past prost's recursion limit, encoded fine, never decodable again.
//! On a real redb file, with a live run each time the server "crashes"
//! (its runtime dropped mid-flight): recovery, History, Subscribe (through
//! caught_up), GetSession, ListSessions, Send and ReadFullEvent all work,
//! and the row is an `unreadable` event at its seq. And requests nested too
//! deep answer INVALID_ARGUMENT, appending nothing.

use crate::support::log::{POISON_LINE, deep_struct, poison};
use crate::support::server;

use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::nesting::MAX_JSON_DEPTH;
use agent_harness_server::recovery::recover;
use agent_harness_server::supervise;
use server::*;
use tonic::Code;
use tonic::transport::Channel;

const SESSION: &str = "poisoned";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Poisons the session's live run in the redb file at `path`.
fn poison_file(path: &std::path::Path) -> (u64, Vec<u8>) {
    poison(reopen_redb(path).as_ref(), SESSION)
}

/// The events of a Subscribe from 0 up to its caught_up.
async fn replay(client: &mut SessionServiceClient<Channel>) -> Vec<pb::Event> {
    let mut sub = Sub::open(client, SESSION, 0).await;
    let mut out = Vec::new();
    loop {
        match sub.next().await.and_then(|m| m.kind) {
            Some(Kind::Event(e)) => out.push(e),
            Some(Kind::CaughtUp(_)) => return out,
            Some(_) => {}
            None => panic!("the stream ended before caught_up after {out:?}"),
        }
    }
}

async fn read_full(
    client: &mut SessionServiceClient<Channel>,
    seq: u64,
    part: pb::FullEventPart,
) -> Vec<u8> {
    let mut stream = client
        .read_full_event(pb::ReadFullEventRequest {
            session_id: SESSION.into(),
            seq,
            part: part as i32,
            chunk_size: 0,
        })
        .await
        .expect("ReadFullEvent")
        .into_inner();
    let mut out = Vec::new();
    while let Some(m) = stream.message().await.expect("a chunk") {
        out.extend(m.chunk);
    }
    out
}

fn assert_unreadable(e: &pb::Event, seq: u64, bytes: &[u8]) {
    assert_eq!(e.seq, seq);
    let Some(Payload::Unreadable(u)) = &e.payload else {
        panic!("seq {seq} is {e:?}")
    };
    assert_eq!(u.size, bytes.len() as u64);
    assert!(u.reason.contains("recursion"), "{}", u.reason);
    // What the row's envelope holds is kept.
    assert_eq!(e.session_id, SESSION);
    assert_eq!(e.cli_line, POISON_LINE);
    assert_eq!(e.time.as_ref().map(|t| t.seconds), Some(1_800_000_000));
}

/// Start-up on the poisoned file: recovery closes the live run, and every
/// read shows the row as `unreadable`; a Send goes on (a new live run).
async fn restart_and_check(path: &std::path::Path, poisoned: &[(u64, Vec<u8>)]) {
    let store = reopen_redb(path);
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    let recovered = recover(&logs, &supervise::kill_recorded_run)
        .await
        .expect("recovery reads past the poisoned row");
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(recovered[0].closed_run.is_some(), "the live run is closed");
    logs.shutdown().await;

    let server = TestServer::on_store(store).await;
    let mut c = server.client().await;
    let history = history_all(&mut c, SESSION).await;
    let seqs: Vec<u64> = history.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "no gap");
    assert!(is_run_end(history.last().unwrap()), "recovery's run_end");
    let replayed = replay(&mut c).await;
    assert_eq!(replayed, history, "Subscribe replays what History shows");
    for (seq, bytes) in poisoned {
        assert_unreadable(&history[*seq as usize - 1], *seq, bytes);
        // The stored bytes, as they are, and the CLI line.
        assert_eq!(
            &read_full(&mut c, *seq, pb::FullEventPart::Event).await,
            bytes
        );
        assert_eq!(
            read_full(&mut c, *seq, pb::FullEventPart::CliLine).await,
            POISON_LINE.as_bytes()
        );
        let json = read_full(&mut c, *seq, pb::FullEventPart::EventJson).await;
        assert!(String::from_utf8_lossy(&json).contains("unreadable"));
    }
    // GetSession is derive over the log, the unreadable rows included.
    let s = assert_derived_matches_log(&mut c, SESSION).await;
    assert_eq!(s.status, pb::SessionStatus::Idle as i32);
    assert!(!s.process_alive);
    assert_eq!(s.head_seq, seqs.len() as u64);
    assert!(list(&mut c).await.iter().any(|s| s.session_id == SESSION));
    // The conversation goes on: a live run again, for the next crash.
    let run = send(&mut c, SESSION, "and on").await.expect("Send");
    let mut sub = Sub::open(&mut c, SESSION, seqs.len() as u64).await;
    sub.until("the turn of the new run", |e| {
        is_turn_end(e) && e.run_id == run
    })
    .await;
    assert!(get(&mut c, SESSION).await.process_alive);
    // The crash: no shutdown, the runtime is dropped by the caller.
    drop(server);
}

#[test]
fn a_row_that_cannot_be_decoded_blocks_nothing_across_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");

    // A session with a live keep-alive run, then a crash.
    let rt = runtime();
    rt.block_on(async {
        let server = TestServer::on_store(reopen_redb(&path)).await;
        let mut c = server.client().await;
        start(&mut c, SESSION, "hello").await.unwrap();
        let s = wait_session(&mut c, SESSION, |s| {
            s.status == pb::SessionStatus::Idle as i32 && !s.resume_id.is_empty()
        })
        .await;
        assert!(s.process_alive);
        drop(server);
    });
    rt.shutdown_timeout(Duration::from_millis(100));

    // The crash loop: each round poisons the live run's log, and the next
    // start must recover and serve it.
    let mut poisoned = Vec::new();
    for _round in 0..3 {
        poisoned.push(poison_file(&path));
        let rt = runtime();
        rt.block_on(restart_and_check(&path, &poisoned));
        rt.shutdown_timeout(Duration::from_millis(100));
    }
}

/// A Struct nested past the decoder's limit in a request is the caller's
/// error (INVALID_ARGUMENT), not the server's (INTERNAL); one that decodes
/// but nests deeper than events keep is refused naming its field. Either
/// way nothing is appended.
#[tokio::test]
async fn requests_nested_too_deep_are_invalid_arguments() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    start(&mut c, SESSION, "hello").await.unwrap();
    let s = wait_idle(&mut c, SESSION).await;

    let too_deep_to_decode = c
        .respond_permission(pb::RespondPermissionRequest {
            session_id: SESSION.into(),
            request_id: "req-1".into(),
            allow: true,
            updated_input: Some(deep_struct(40)),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        too_deep_to_decode.code(),
        Code::InvalidArgument,
        "{too_deep_to_decode:?}"
    );
    for (depth, field) in [(40, "not a valid message"), (25, "content_blocks")] {
        let err = c
            .send(pb::SendRequest {
                session_id: SESSION.into(),
                input: "x".into(),
                content_blocks: vec![deep_struct(depth)],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{depth}: {err:?}");
        assert!(err.message().contains(field), "{depth}: {err:?}");
    }
    let err = c
        .respond_permission(pb::RespondPermissionRequest {
            session_id: SESSION.into(),
            request_id: "req-1".into(),
            allow: true,
            updated_input: Some(deep_struct(25)),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("updated_input"), "{err:?}");
    // At the bound, a Struct is taken.
    let run = c
        .send(pb::SendRequest {
            session_id: SESSION.into(),
            input: "ok".into(),
            content_blocks: vec![deep_struct(MAX_JSON_DEPTH)],
            ..Default::default()
        })
        .await;
    assert!(run.is_ok(), "{run:?}");
    assert!(get(&mut c, SESSION).await.head_seq > s.head_seq);
    // Nothing was appended by the refused calls: the log holds only what
    // the accepted Send added (its input_sent is the first new event).
    let events = history_all(&mut c, SESSION).await;
    let Some(Payload::InputSent(i)) = &events[s.head_seq as usize].payload else {
        panic!("{:?}", events[s.head_seq as usize])
    };
    assert_eq!(i.text, "ok");
    server.shutdown().await.unwrap();
}
