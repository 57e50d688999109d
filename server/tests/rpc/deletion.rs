//! Disk stays bounded: DeleteSession, retention (`--retention-days`,
//! `--max-sessions`) and the per-peer limit on new sessions
//! (`--max-sessions-per-minute`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::ServeOptions;
use agent_harness_server::manager::receipts::{IdempotencyOptions, ManualClock};
use agent_harness_server::manager::{ManagerOptions, RetentionOptions};
use agent_harness_server::store::{RedbStore, Store};
use tonic::Code;
use tonic::transport::Channel;

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::*;

async fn delete(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    key: &str,
) -> Result<(), tonic::Status> {
    c.delete_session(pb::DeleteSessionRequest {
        session_id: session.into(),
        idempotency_key: key.into(),
    })
    .await
    .map(|_| ())
}

/// One turn per process: a session has no live run once its turn is over.
fn one_turn() -> ScriptedBehavior {
    ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    }
}

/// Starts `session` and waits until its one-turn run has ended.
async fn idle_session(c: &mut SessionServiceClient<Channel>, session: &str) {
    start(c, session, "hello").await.expect("start");
    wait_session(c, session, |s| s.head_seq > 0 && !s.process_alive).await;
}

#[tokio::test]
async fn delete_session_ends_the_run_first_then_removes_every_trace() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    c.start(pb::StartRequest {
        session_id: "d".into(),
        config: Some(prompt("hello")),
        idempotency_key: "start-1".into(),
    })
    .await
    .expect("start");
    let old_conversation = wait_session(&mut c, "d", |s| {
        !s.resume_id.is_empty() && s.status == pb::SessionStatus::Idle as i32
    })
    .await
    .resume_id;
    // A stream that is live when the session goes.
    let mut stream = c
        .subscribe(pb::SubscribeRequest {
            session_id: "d".into(),
            after_seq: 0,
            include_deltas: false,
        })
        .await
        .expect("subscribe")
        .into_inner();
    loop {
        let msg = stream.message().await.expect("ok").expect("open");
        if matches!(msg.kind, Some(Kind::CaughtUp(_))) {
            break;
        }
    }

    delete(&mut c, "d", "delete-1").await.expect("deleted");

    // The keep-alive process was ended through the ladder and its run_end
    // committed before the deletion: the live stream got both, then
    // NOT_FOUND.
    let mut events = Vec::new();
    let ended = loop {
        match tokio::time::timeout(WAIT, stream.message())
            .await
            .expect("in time")
        {
            Ok(Some(pb::SubscribeResponse {
                kind: Some(Kind::Event(e)),
            })) => events.push(e),
            Ok(Some(_)) => {}
            Ok(None) => panic!("ended without a status after {events:?}"),
            Err(status) => break status,
        }
    };
    assert_eq!(ended.code(), Code::NotFound, "{ended:?}");
    assert!(ended.message().contains("deleted"), "{ended:?}");
    let stop = events.iter().find_map(|e| match &e.payload {
        Some(Payload::StopRequested(s)) => Some(s.source.clone()),
        _ => None,
    });
    assert_eq!(stop.as_deref(), Some("delete"), "{events:?}");
    let end = events.last().expect("events before the end");
    assert!(is_run_end(end), "{events:?}");
    assert_eq!(run_end(end).reason, pb::RunEndReason::Stopped as i32);
    assert_eq!(run_end(end).source, "delete");
    assert!(
        server
            .adapter
            .record()
            .calls
            .iter()
            .any(|c| c.starts_with("interrupt") || c.starts_with("signal")),
        "the process was told to end: {:?}",
        server.adapter.record().calls
    );

    // Nothing is left: not in the store, not in any RPC.
    assert!(server.stored_events("d").is_empty());
    assert_eq!(server.store.meta("d").unwrap(), None);
    assert_eq!(server.store.receipt("d", "start-1").unwrap(), None);
    assert!(
        server
            .store
            .conversation_sessions(&old_conversation)
            .unwrap()
            .is_empty()
    );
    let code = |r: Result<tonic::Response<pb::GetSessionResponse>, tonic::Status>| {
        r.expect_err("gone").code()
    };
    let get = c
        .get_session(pb::GetSessionRequest {
            session_id: "d".into(),
        })
        .await;
    assert_eq!(code(get), Code::NotFound);
    let history = c
        .history(pb::HistoryRequest {
            session_id: "d".into(),
            before_seq: 0,
            limit: 10,
        })
        .await
        .expect_err("gone");
    assert_eq!(history.code(), Code::NotFound);
    assert_eq!(
        send(&mut c, "d", "more").await.unwrap_err().code(),
        Code::NotFound
    );
    assert!(list(&mut c).await.iter().all(|s| s.session_id != "d"));
    assert_eq!(
        server.manager.sessions_in_memory(),
        0,
        "no slot or fold kept"
    );
    assert_eq!(server.manager.logs().stats().sessions, 0, "no window kept");

    // A retry under the same key succeeds again; without a key it is NOT_FOUND.
    delete(&mut c, "d", "delete-1").await.expect("a retry");
    assert_eq!(
        delete(&mut c, "d", "").await.unwrap_err().code(),
        Code::NotFound
    );

    // The same id again is a new session: seq 1, a new conversation.
    start(&mut c, "d", "again").await.expect("a new session");
    let fresh = wait_session(&mut c, "d", |s| !s.resume_id.is_empty()).await;
    assert_ne!(fresh.resume_id, old_conversation);
    let spawns = server.adapter.record().spawns;
    assert_eq!(spawns.last().unwrap().config.resume, "", "nothing resumed");
    assert_eq!(server.stored_events("d")[0].seq, 1);
}

#[tokio::test]
async fn delete_session_names_what_is_wrong() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let unknown = delete(&mut c, "nobody", "").await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    let bad = delete(&mut c, "no spaces", "").await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(bad.message().contains("session_id"), "{bad:?}");
    let bad_key = delete(&mut c, "nobody", "a key with spaces")
        .await
        .unwrap_err();
    assert_eq!(bad_key.code(), Code::InvalidArgument);
    assert!(bad_key.message().contains("idempotency_key"), "{bad_key:?}");
}

#[tokio::test]
async fn retention_deletes_idle_sessions_older_than_the_age_and_keeps_live_ones() {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let clock = Arc::new(ManualClock::at(now_ms));
    let opts = ManagerOptions {
        retention: RetentionOptions {
            max_age: Some(Duration::from_secs(24 * 60 * 60)),
            max_sessions: None,
        },
        idempotency: IdempotencyOptions {
            clock: clock.clone(),
            ..IdempotencyOptions::default()
        },
        ..fast_opts()
    };
    let server = TestServer::with(one_turn(), opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    idle_session(&mut c, "old-a").await;
    idle_session(&mut c, "old-b").await;
    // A turn that does not end: a live run.
    start(&mut c, "busy", "HANG").await.expect("start");
    wait_session(&mut c, "busy", |s| {
        s.status == pb::SessionStatus::Streaming as i32
    })
    .await;

    assert_eq!(
        server.manager.retain().await.unwrap(),
        0,
        "nothing is a day old"
    );
    clock.advance(Duration::from_secs(2 * 24 * 60 * 60));
    assert_eq!(server.manager.retain().await.unwrap(), 2);
    let left: Vec<String> = list(&mut c)
        .await
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(left, vec!["busy"], "the live one stays, however old");
    assert!(server.stored_events("old-a").is_empty());
    // Its run goes on.
    assert!(get(&mut c, "busy").await.process_alive);
}

/// Sessions keep being created under `--max-sessions`: the count never
/// passes the cap and the redb file stops growing. redb's allocator may
/// still grow the file once, at any point, where the pages it freed are
/// not contiguous for a larger page (seen: 276 KiB to 548 KiB, then back to
/// 412 KiB for the next 300 sessions): the file is measured against twice
/// its size at the first third. With the cap turned off it fails
/// (checked).
#[tokio::test]
async fn under_max_sessions_the_store_stops_growing() {
    const CAP: usize = 20;
    const SESSIONS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    // On redb whatever the test store: what is measured is the file's size.
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(&path).unwrap());
    let opts = ManagerOptions {
        retention: RetentionOptions {
            max_age: None,
            max_sessions: Some(CAP),
        },
        ..fast_opts()
    };
    let adapter = ScriptedAdapter::new(one_turn());
    let spawner = Arc::new(adapter.clone());
    let server = TestServer::with_adapter(
        store.clone(),
        spawner,
        adapter,
        opts,
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let size = || std::fs::metadata(&path).unwrap().len();
    let mut settled = (0, 0);
    for i in 0..SESSIONS {
        idle_session(&mut c, &format!("s{i:03}")).await;
        let stored = store.session_count().unwrap();
        assert!(stored <= CAP as u64, "{stored} sessions after {i}");
        if i == SESSIONS / 3 {
            settled = (size(), store.usage().unwrap().bytes);
        }
    }
    let usage = store.usage().unwrap();
    assert!(usage.bytes <= settled.1 * 3 / 2, "{settled:?} -> {usage:?}");
    assert!(size() <= settled.0 * 2, "file {} -> {}", settled.0, size());
    // The newest sessions are the ones kept.
    let kept = list(&mut c).await;
    assert!(
        kept.iter()
            .any(|s| s.session_id == format!("s{:03}", SESSIONS - 1))
    );
    assert!(kept.iter().all(|s| s.session_id != "s000"));
}

#[tokio::test]
async fn at_max_sessions_with_every_session_live_a_new_one_is_refused() {
    let opts = ManagerOptions {
        retention: RetentionOptions {
            max_age: None,
            max_sessions: Some(2),
        },
        ..fast_opts()
    };
    let server = TestServer::with(ScriptedBehavior::default(), opts, ServeOptions::default()).await;
    let mut c = server.client().await;
    start(&mut c, "a", "hello").await.unwrap();
    start(&mut c, "b", "hello").await.unwrap();
    let refused = start(&mut c, "c", "hello").await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--max-sessions"), "{refused:?}");
    assert!(server.stored_events("c").is_empty());
    assert_eq!(list(&mut c).await.len(), 2);
}

/// 3,000 rapid Starts of new sessions from one client: the limit goes
/// through (plus what the bucket refilled meanwhile); the rest are
/// RESOURCE_EXHAUSTED with a retry hint and leave nothing behind. Starts of
/// an existing session do not count.
#[tokio::test]
async fn rapid_starts_from_one_client_are_cut_off_at_the_limit() {
    const LIMIT: u32 = 25;
    let opts = ManagerOptions {
        max_live_runs: 100,
        ..fast_opts()
    };
    let sopts = ServeOptions {
        max_sessions_per_minute: LIMIT,
        ..ServeOptions::default()
    };
    let adapter = ScriptedAdapter::new(one_turn());
    let spawner = Arc::new(adapter.clone());
    let store = crate::support::server::test_store();
    let server = TestServer::with_adapter(store, spawner, adapter, opts, sopts).await;
    let mut c = server.client().await;
    let (mut ok, mut limited) = (0u32, 0u32);
    let t0 = std::time::Instant::now();
    for i in 0..3000 {
        match start(&mut c, &format!("flood-{i:04}"), "hi").await {
            Ok(_) => ok += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(
                    status.message().contains("--max-sessions-per-minute"),
                    "{status:?}"
                );
                let secs: u64 = status
                    .metadata()
                    .get("retry-after")
                    .expect("a retry hint")
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=60).contains(&secs), "{secs}");
                limited += 1;
            }
        }
    }
    // The bucket refills at LIMIT per minute while the loop runs: those
    // few tokens more, no others.
    let refilled = (t0.elapsed().as_secs_f64() * f64::from(LIMIT) / 60.0).ceil() as u32;
    assert!(
        (LIMIT..=LIMIT + refilled).contains(&ok),
        "{ok} went through, {refilled} refilled"
    );
    assert_eq!(ok + limited, 3000);
    assert_eq!(server.adapter.record().spawns.len(), ok as usize);
    assert!(server.stored_events("flood-2999").is_empty());
    let listed = c
        .list_sessions(pb::ListSessionsRequest {
            page_size: 1000,
            page_token: String::new(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sessions;
    assert_eq!(listed.len(), ok as usize);
    // An existing session takes no token.
    wait_session(&mut c, "flood-0000", |s| !s.process_alive).await;
    start(&mut c, "flood-0000", "again")
        .await
        .expect("not a new session");
}

/// The limit is kept per client address: a second client (another loopback
/// source address) has its own allowance while the first is cut off. Fails
/// when the server does not hand the peer's address to the handlers (every
/// client would then share one allowance).
#[tokio::test]
async fn each_client_address_has_its_own_allowance() {
    let sopts = ServeOptions {
        max_sessions_per_minute: 1,
        ..ServeOptions::default()
    };
    let adapter = ScriptedAdapter::new(one_turn());
    let spawner = Arc::new(adapter.clone());
    let store = crate::support::server::test_store();
    let server = TestServer::with_adapter(store, spawner, adapter, fast_opts(), sopts).await;
    let from = |ip: [u8; 4]| {
        let url = format!("http://{}", server.addr);
        async move {
            let channel = tonic::transport::Endpoint::from_shared(url)
                .unwrap()
                .local_address(Some(std::net::IpAddr::from(ip)))
                .connect()
                .await
                .expect("connect");
            SessionServiceClient::new(channel)
        }
    };
    let mut first = from([127, 0, 0, 1]).await;
    let mut second = from([127, 0, 0, 2]).await;
    start(&mut first, "addr-a1", "hi")
        .await
        .expect("first's one");
    let refused = start(&mut first, "addr-a2", "hi").await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    start(&mut second, "addr-b1", "hi")
        .await
        .expect("the second address has its own allowance");
}
