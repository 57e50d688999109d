//! Idempotency keys (docs/api.md, "Retry safety"): a Start, Send, Stop or
//! RespondPermission repeated with its key returns the first response and
//! appends and writes nothing; across a restart on the same redb file too;
//! until the TTL (an injected clock, no sleeps); identical calls racing
//! apply once; a key reused with another request is INVALID_ARGUMENT; a
//! call that failed leaves no receipt; nothing per key stays in memory; a
//! receipt row of the older format still answers its repeat.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::manager::receipts::{IdempotencyOptions, ManualClock};
use agent_harness_server::manager::{ManagerOptions, SessionManager};
use agent_harness_server::store::Store;
use serde_json::json;
use tonic::Code;
use tonic::transport::Channel;

use crate::support::probe::Probe;
use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server::*;

type Client = SessionServiceClient<Channel>;

async fn start_k(
    c: &mut Client,
    session: &str,
    text: &str,
    key: &str,
) -> Result<pb::StartResponse, tonic::Status> {
    c.start(pb::StartRequest {
        session_id: session.into(),
        config: Some(prompt(text)),
        idempotency_key: key.into(),
    })
    .await
    .map(|r| r.into_inner())
}

async fn send_k(
    c: &mut Client,
    session: &str,
    text: &str,
    key: &str,
) -> Result<String, tonic::Status> {
    c.send(pb::SendRequest {
        session_id: session.into(),
        input: text.into(),
        content_blocks: vec![],
        idempotency_key: key.into(),
    })
    .await
    .map(|r| r.into_inner().run_id)
}

async fn stop_k(c: &mut Client, session: &str, key: &str) -> Result<bool, tonic::Status> {
    c.stop(pb::StopRequest {
        session_id: session.into(),
        idempotency_key: key.into(),
    })
    .await
    .map(|r| r.into_inner().stopping)
}

async fn answer_k(
    c: &mut Client,
    session: &str,
    request_id: &str,
    key: &str,
) -> Result<(), tonic::Status> {
    c.respond_permission(pb::RespondPermissionRequest {
        session_id: session.into(),
        request_id: request_id.into(),
        allow: true,
        updated_input: None,
        message: String::new(),
        idempotency_key: key.into(),
    })
    .await
    .map(|_| ())
}

/// Events of `kind` in the stored log.
fn count(events: &[pb::Event], k: &str) -> usize {
    events.iter().filter(|e| kind(e) == k).count()
}

/// Control calls the scripted adapter saw that start with `prefix`.
fn calls(adapter: &ScriptedAdapter, prefix: &str) -> usize {
    adapter
        .record()
        .calls
        .iter()
        .filter(|c| c.starts_with(prefix))
        .count()
}

#[tokio::test]
async fn a_repeated_send_returns_the_first_run_and_writes_once() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let (mut sub, _) = first_turn(&mut c, "send", "hello").await;

    let run = send_k(&mut c, "send", "again", "send-key-1").await.unwrap();
    sub.until("turn_end", is_turn_end).await;
    let head = sub.events.last().unwrap().seq;
    // The client did not see the answer and retries, twice.
    for _ in 0..2 {
        assert_eq!(
            send_k(&mut c, "send", "again", "send-key-1").await.unwrap(),
            run
        );
    }
    assert_eq!(
        calls(&server.adapter, "write:again"),
        1,
        "written to stdin once"
    );
    assert_eq!(get(&mut c, "send").await.head_seq, head, "nothing appended");
    let events = history_all(&mut c, "send").await;
    let inputs: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::InputSent(i)) if i.text == "again" => Some(e.run_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(inputs, vec![run.clone()], "exactly one input_sent");

    // A new key is a new logical call; no key is never deduplicated.
    let other = send_k(&mut c, "send", "again", "send-key-2").await.unwrap();
    assert_eq!(other, run, "the same live run");
    sub.until("turn_end", is_turn_end).await;
    assert_eq!(calls(&server.adapter, "write:again"), 2);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_send_that_respawned_returns_that_run() {
    // One-shot runs exit after their turn, so each Send respawns.
    let behavior = ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    };
    let server = TestServer::with(behavior, fast_opts(), ServeOptions::default()).await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "respawn", "hello").await;
    sub.until("run_end", is_run_end).await;
    let run = send_k(&mut c, "respawn", "more", "k").await.unwrap();
    sub.until("second run_end", |e| is_run_end(e) && e.run_id == run)
        .await;
    assert_eq!(send_k(&mut c, "respawn", "more", "k").await.unwrap(), run);
    assert_eq!(server.adapter.record().spawns.len(), 2, "no third spawn");
    let events = history_all(&mut c, "respawn").await;
    assert_eq!(count(&events, "run_start"), 2);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_start_returns_the_first_response_instead_of_run_live() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let first = start_k(&mut c, "start", "hello", "start-1").await.unwrap();
    assert!(!first.process_id.is_empty());
    wait_idle(&mut c, "start").await;
    let again = start_k(&mut c, "start", "hello", "start-1").await.unwrap();
    assert_eq!(again, first);
    // Without a key (or with another) the live run refuses a Start.
    let err = start_k(&mut c, "start", "hello", "start-2")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(server.adapter.record().spawns.len(), 1);
    let events = history_all(&mut c, "start").await;
    assert_eq!(count(&events, "run_start"), 1);
    assert_eq!(count(&events, "input_sent"), 1);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_stop_does_not_stop_a_later_turn() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "stop", "HANG one").await;
    sub.until_kind("content").await;
    assert!(stop_k(&mut c, "stop", "stop-1").await.unwrap());
    sub.until("turn_end", is_turn_end).await;
    // Nothing runs: this Stop answers false, and that is its receipt.
    assert!(!stop_k(&mut c, "stop", "stop-2").await.unwrap());

    // A new turn; the retries of both Stops must leave it alone.
    let before = sub.events.last().unwrap().seq;
    send(&mut c, "stop", "HANG two").await.unwrap();
    sub.until("the second turn's content", |e| {
        kind(e) == "content" && e.seq > before
    })
    .await;
    let head = get(&mut c, "stop").await.head_seq;
    assert!(
        stop_k(&mut c, "stop", "stop-1").await.unwrap(),
        "the first answer"
    );
    assert!(
        !stop_k(&mut c, "stop", "stop-2").await.unwrap(),
        "the first answer"
    );
    assert_eq!(
        calls(&server.adapter, "interrupt"),
        1,
        "one interrupt in all"
    );
    let s = get(&mut c, "stop").await;
    assert_eq!(s.head_seq, head, "no stop_requested appended");
    assert_eq!(
        s.status,
        pb::SessionStatus::Streaming as i32,
        "the turn goes on"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeated_permission_answer_succeeds_again_and_writes_nothing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut sub = start_subscribed(&mut c, "perm", "PERMISSION please").await;
    let req = sub.until_kind("permission_requested").await;
    let Some(Payload::PermissionRequested(req)) = req.payload else {
        unreachable!()
    };
    answer_k(&mut c, "perm", &req.request_id, "answer-1")
        .await
        .unwrap();
    sub.until("turn_end", is_turn_end).await;
    let head = get(&mut c, "perm").await.head_seq;
    // The retry succeeds (without the key: NOT_FOUND, no longer pending).
    answer_k(&mut c, "perm", &req.request_id, "answer-1")
        .await
        .unwrap();
    assert_eq!(calls(&server.adapter, "permission:"), 1);
    assert_eq!(get(&mut c, "perm").await.head_seq, head);
    let events = history_all(&mut c, "perm").await;
    assert_eq!(count(&events, "permission_resolved"), 1);
    let err = answer_k(&mut c, "perm", &req.request_id, "answer-2")
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_key_reused_with_another_request_is_invalid_and_changes_nothing() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let (_sub, _) = first_turn(&mut c, "reuse", "hello").await;
    send_k(&mut c, "reuse", "first", "k").await.unwrap();
    wait_idle(&mut c, "reuse").await;
    let head = get(&mut c, "reuse").await.head_seq;
    for err in [
        send_k(&mut c, "reuse", "second", "k").await.unwrap_err(),
        stop_k(&mut c, "reuse", "k").await.unwrap_err(),
        start_k(&mut c, "reuse", "first", "k").await.unwrap_err(),
    ] {
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("idempotency_key"), "{err:?}");
    }
    assert_eq!(calls(&server.adapter, "write:second"), 0);
    assert_eq!(get(&mut c, "reuse").await.head_seq, head);
    // Keys are per session: the same key elsewhere is another call.
    let (_sub2, _) = first_turn(&mut c, "other", "hello").await;
    send_k(&mut c, "other", "second", "k").await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_keys_are_invalid_arguments_naming_the_field() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    for key in ["has space", "tab\there", "é", &"k".repeat(129)] {
        let err = start_k(&mut c, "bad", "hello", key).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("idempotency_key"), "{err:?}");
    }
    assert!(server.adapter.record().spawns.is_empty());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_failed_call_leaves_no_receipt_and_its_retry_runs() {
    // The spawn fails after run_start is recorded (with its receipt): the
    // failure removes the receipt, so the retry spawns again.
    let behavior = ScriptedBehavior {
        binary_missing: true,
        ..ScriptedBehavior::default()
    };
    let server = TestServer::with(behavior, fast_opts(), ServeOptions::default()).await;
    let mut c = server.client().await;
    for _ in 0..2 {
        let err = start_k(&mut c, "broken", "hello", "start-k")
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    }
    assert_eq!(server.adapter.record().spawns.len(), 2, "the retry ran");
    let events = history_all(&mut c, "broken").await;
    assert_eq!(count(&events, "run_start"), 2);
    assert_eq!(server.store.receipt_count().unwrap(), 0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_repeat_after_a_restart_returns_the_first_response() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let (started, sent, head) = {
        let server = TestServer::on_store(reopen_redb(&path)).await;
        let mut c = server.client().await;
        let mut sub = Sub::open(&mut c, "restart", 0).await;
        let started = start_k(&mut c, "restart", "hello", "start-k")
            .await
            .unwrap();
        sub.until("turn_end", is_turn_end).await;
        let sent = send_k(&mut c, "restart", "again", "send-k").await.unwrap();
        sub.until("turn_end", is_turn_end).await;
        server.shutdown().await.unwrap();
        let head = sub.events.last().unwrap().seq;
        (started, sent, head)
    };
    // A new server on the same file: the run has ended (SERVER_RESTART),
    // so without receipts the Start would start a second run and the Send
    // would respawn one.
    let server = TestServer::on_store(reopen_redb(&path)).await;
    let mut c = server.client().await;
    let head_after_shutdown = get(&mut c, "restart").await.head_seq;
    assert!(head_after_shutdown > head, "the shutdown's run_end");
    assert_eq!(
        start_k(&mut c, "restart", "hello", "start-k")
            .await
            .unwrap(),
        started
    );
    assert_eq!(
        send_k(&mut c, "restart", "again", "send-k").await.unwrap(),
        sent
    );
    let record = server.adapter.record();
    assert!(record.spawns.is_empty(), "{:?}", record.spawns);
    assert!(record.calls.is_empty(), "{:?}", record.calls);
    assert_eq!(get(&mut c, "restart").await.head_seq, head_after_shutdown);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_receipt_written_before_responses_were_bytes_still_answers_its_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let (started, sent) = {
        let server = TestServer::on_store(reopen_redb(&path)).await;
        let mut c = server.client().await;
        let mut sub = Sub::open(&mut c, "old", 0).await;
        let started = start_k(&mut c, "old", "hello", "start-k").await.unwrap();
        sub.until("turn_end", is_turn_end).await;
        let sent = send_k(&mut c, "old", "again", "send-k").await.unwrap();
        sub.until("turn_end", is_turn_end).await;
        server.shutdown().await.unwrap();
        (started, sent)
    };
    // Both receipts rewritten as the server before this one wrote them: the
    // answer as a JSON object tagged with its RPC, no encoded response.
    {
        use redb::ReadableTable;
        const RECEIPTS: redb::TableDefinition<(&str, &str), &[u8]> =
            redb::TableDefinition::new("receipts");
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(RECEIPTS).unwrap();
            let old = [
                (
                    "start-k",
                    json!({"rpc": "start", "run_id": started.run_id, "process_id": started.process_id}),
                ),
                ("send-k", json!({"rpc": "send", "run_id": sent})),
            ];
            for (key, outcome) in old {
                let row: serde_json::Value = {
                    let stored = table.get(("old", key)).unwrap().expect("a receipt");
                    serde_json::from_slice(stored.value()).unwrap()
                };
                let row = json!({
                    "session_id": "old",
                    "key": key,
                    "created_ms": row["created_ms"],
                    "fingerprint": row["fingerprint"],
                    "outcome": outcome,
                });
                let row = serde_json::to_vec(&row).unwrap();
                table.insert(("old", key), row.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let server = TestServer::on_store(reopen_redb(&path)).await;
    let mut c = server.client().await;
    let head = get(&mut c, "old").await.head_seq;
    assert_eq!(
        start_k(&mut c, "old", "hello", "start-k").await.unwrap(),
        started
    );
    assert_eq!(
        send_k(&mut c, "old", "again", "send-k").await.unwrap(),
        sent
    );
    let record = server.adapter.record();
    assert!(record.spawns.is_empty(), "{:?}", record.spawns);
    assert!(record.calls.is_empty(), "{:?}", record.calls);
    assert_eq!(get(&mut c, "old").await.head_seq, head);
    // The old row's fingerprint still tells another request apart.
    let err = send_k(&mut c, "old", "other", "send-k").await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("(Send)"), "{err:?}");
    server.shutdown().await.unwrap();
}

/// A manager over `store` with a hand-moved clock.
fn manager(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    ttl: Duration,
) -> (SessionManager, ScriptedAdapter) {
    let logs = EventLogs::open(store, LogOptions::default()).unwrap();
    let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
    let opts = ManagerOptions {
        idempotency: IdempotencyOptions { ttl, clock },
        ..fast_opts()
    };
    (
        SessionManager::new(Arc::new(adapter.clone()), logs, opts),
        adapter,
    )
}

/// Waits (on the log, not a clock) until the session is idle.
async fn until_idle(m: &SessionManager, session: &str) {
    use futures::StreamExt;
    let mut sub = Box::pin(m.logs().subscribe(session, 0).await.unwrap());
    loop {
        let s = m.get(session).await.unwrap();
        if s.status == pb::SessionStatus::Idle as i32 {
            return;
        }
        tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("progress");
    }
}

#[tokio::test]
async fn a_key_is_kept_until_its_ttl_then_forgotten_and_pruned() {
    let ttl = Duration::from_secs(15 * 60);
    let clock = Arc::new(ManualClock::at(1_700_000_000_000));
    let store: Arc<dyn Store> = crate::support::server::test_store();
    let (m, adapter) = manager(store.clone(), clock.clone(), ttl);
    m.start(start_request("ttl", prompt("hello")))
        .await
        .unwrap();
    until_idle(&m, "ttl").await;
    let run = m.send(send_request("ttl", "again", "k")).await.unwrap();
    until_idle(&m, "ttl").await;

    // One millisecond before the TTL: still a repeat.
    clock.advance(ttl - Duration::from_millis(1));
    assert_eq!(
        m.send(send_request("ttl", "again", "k")).await.unwrap(),
        run
    );
    assert_eq!(calls(&adapter, "write:again"), 1);
    assert_eq!(m.prune_receipts().await.unwrap(), 0, "not expired yet");

    // At the TTL: forgotten, the same call runs again.
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        m.send(send_request("ttl", "again", "k")).await.unwrap(),
        run
    );
    until_idle(&m, "ttl").await;
    assert_eq!(calls(&adapter, "write:again"), 2, "the key was forgotten");
    assert_eq!(store.receipt_count().unwrap(), 1, "the new call's receipt");

    clock.advance(ttl);
    assert_eq!(m.prune_receipts().await.unwrap(), 1);
    assert_eq!(store.receipt_count().unwrap(), 0);
    m.shutdown().await;
}

#[tokio::test]
async fn receipts_live_on_disk_and_nothing_per_key_stays_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen_redb(&dir.path().join("events.redb"));
    let ttl = Duration::from_secs(15 * 60);
    let clock = Arc::new(ManualClock::at(1_700_000_000_000));
    let (m, _) = manager(store.clone(), clock.clone(), ttl);
    m.start(start_request("many", prompt("hello")))
        .await
        .unwrap();
    until_idle(&m, "many").await;
    let head = m.logs().head_seq("many").await.unwrap();
    for i in 0..1_000 {
        let key = format!("stop-{i}");
        assert!(!m.stop(stop_request("many", &key)).await.unwrap().stopping);
    }
    assert_eq!(
        m.idempotency_gates_in_memory(),
        0,
        "no per-key state in memory"
    );
    assert_eq!(m.sessions_in_memory(), 1);
    assert_eq!(
        store.receipt_count().unwrap(),
        1_000,
        "every receipt on disk"
    );
    assert_eq!(
        m.logs().head_seq("many").await.unwrap(),
        head,
        "a no-op Stop appends nothing"
    );
    // Each is still answered from disk.
    assert!(
        !m.stop(stop_request("many", "stop-999"))
            .await
            .unwrap()
            .stopping
    );
    clock.advance(ttl);
    assert_eq!(m.prune_receipts().await.unwrap(), 1_000);
    assert_eq!(store.receipt_count().unwrap(), 0);
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_identical_sends_racing_apply_once() {
    // Receipt lookups wait for each other (see `Probe::rendezvous`): two
    // identical calls whose lookups are not serialized would both miss.
    let store = Arc::new(Probe::rendezvous());
    let adapter = ScriptedAdapter::new(ScriptedBehavior::default());
    let server = TestServer::with_adapter(
        store.clone(),
        Arc::new(adapter.clone()),
        adapter,
        fast_opts(),
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let (mut sub, _) = first_turn(&mut c, "race", "hello").await;
    let (mut c1, mut c2) = (c.clone(), c.clone());
    let (a, b) = tokio::join!(
        send_k(&mut c1, "race", "once", "race-k"),
        send_k(&mut c2, "race", "once", "race-k"),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a, b);
    sub.until("turn_end", is_turn_end).await;
    assert_eq!(store.receipt_lookups.load(Ordering::SeqCst), 2);
    assert_eq!(
        calls(&server.adapter, "write:once"),
        1,
        "written once: {:?}",
        server.adapter.record().calls
    );
    let events = history_all(&mut c, "race").await;
    let once = events
        .iter()
        .filter(|e| matches!(&e.payload, Some(Payload::InputSent(i)) if i.text == "once"))
        .count();
    assert_eq!(once, 1, "one input_sent");
    server.shutdown().await.unwrap();
}
