//! The session client against a real tonic server on 127.0.0.1:0 running
//! the in-memory SessionService in `support/`: replay, live events,
//! reconnects mid-replay and mid-live, duplicates, resets, gaps, history
//! paging, injected events, the connected flag, hydration, backoff, live
//! typing (the partial message folded from deltas) and the keyed control
//! calls (StopTask, the settings, RewindFiles).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_harness_client::derive::{self, Status};
use agent_harness_client::pb::{self, event::Payload};
use agent_harness_client::session::{
    Backoff, BackoffPolicy, Hydration, SessionClient, SessionError, SessionOptions, Snapshot,
};
use support::{Script, ServerOptions, TestServer, WAIT};

const SESSION: &str = "s1";

/// Fast reconnects so recovery tests take milliseconds.
fn options() -> SessionOptions {
    SessionOptions::default()
        .with_backoff(BackoffPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
        })
        .with_backoff_seed(1)
}

async fn start(server_options: ServerOptions) -> TestServer {
    TestServer::start(server_options).await
}

fn client(server: &TestServer, options: SessionOptions) -> SessionClient {
    SessionClient::connect(server.url(), SESSION, options).unwrap()
}

/// Waits (bounded) for a snapshot satisfying `pred`; on timeout fails with
/// the last snapshot so the failure says where it stuck.
async fn wait(client: &SessionClient, what: &str, pred: impl FnMut(&Snapshot) -> bool) -> Snapshot {
    match tokio::time::timeout(WAIT, client.wait_for(pred)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => panic!("waiting for {what}: {e}"),
        Err(_) => {
            let seqs = client.events().seqs();
            panic!(
                "timed out waiting for {what}; last snapshot: {:?}; first seqs {:?}",
                client.snapshot(),
                &seqs[..seqs.len().min(40)]
            )
        }
    }
}

/// Waits until the client holds exactly the server's log, then checks it is
/// the same events (not just the same seqs) and the derived state matches a
/// fresh derive over the server's log.
async fn converge(client: &SessionClient, server: &TestServer) -> Snapshot {
    let expected = server.state.events(SESSION);
    let n = expected.len() as u64;
    let snap = wait(client, "the server's log", |s| {
        s.cursor == n && s.events.len() as u64 == n
    })
    .await;
    assert_eq!(snap.events.to_vec(), expected, "client list == server list");
    assert_eq!(*snap.derived, derive::derive_all(&expected));
    snap
}

/// Records every snapshot the client publishes (hydration, connected,
/// error, cursor), for checking transitions.
fn record(client: &SessionClient) -> Arc<Mutex<Vec<Snapshot>>> {
    let seen = Arc::new(Mutex::new(vec![client.snapshot()]));
    let mut rx = client.watch();
    let out = seen.clone();
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let s = rx.borrow_and_update().clone();
            out.lock().unwrap().push(s);
        }
    });
    seen
}

fn strictly_increasing(seqs: &[u64]) -> bool {
    seqs.windows(2).all(|w| w[0] < w[1])
}

#[tokio::test]
async fn cold_subscribe_gets_everything_then_live_events() {
    let server = start(ServerOptions {
        replay_window: 10_000,
        ..Default::default()
    })
    .await;
    // More than one batch (512 messages): batching must not lose any.
    server.state.append(SESSION, 1500);
    let client = client(&server, options());
    let snap = converge(&client, &server).await;
    assert!(snap.connected);
    assert_eq!(server.state.subscribe_after(), vec![0], "one clean stream");
    // Seq 1500 is an input_sent in a live run.
    assert_eq!(snap.derived.status, Status::Streaming);

    server.state.append(SESSION, 5);
    let snap = converge(&client, &server).await;
    assert_eq!(snap.events.seqs(), (1..=1505).collect::<Vec<_>>());
    assert_eq!(snap.hydration, Hydration::Ready);
    assert!(!snap.has_more_history);
    // Seq 1505 is a turn_end.
    assert_eq!(snap.derived.status, Status::Idle);
    assert!(snap.derived.process_alive);
    assert_eq!(
        server.state.subscribe_after(),
        vec![0],
        "no reconnect needed"
    );
    client.close().await;
}

#[tokio::test]
async fn hydration_waits_for_replay_and_backfill_then_stays_ready() {
    // 30 events, window 10: the cold replay is a reset to the tail 21..=30,
    // so there is history to backfill while the replay is still running.
    let server = start(ServerOptions {
        replay_window: 10,
        ..Default::default()
    })
    .await;
    server.state.append(SESSION, 30);
    server.state.script(Script {
        pause_replay_after: Some(3),
        ..Default::default()
    });
    server.state.open_history(false);
    let client = client(&server, options());
    let seen = record(&client);

    let snap = wait(&client, "the first replayed events", |s| s.cursor == 23).await;
    assert_eq!(snap.hydration, Hydration::Hydrating);
    assert!(snap.has_more_history);
    let backfill = tokio::spawn({
        let client = client.clone();
        async move { client.fetch_history(5).await }
    });
    wait_server(&server, || server.state.history_calls() == 1).await;

    // The replay finishes (CaughtUp) but the backfill has not: still hydrating.
    server.state.release_replay();
    let snap = wait(&client, "caught up", |s| s.cursor == 30).await;
    assert_eq!(snap.hydration, Hydration::Hydrating, "backfill pending");
    // A live event comes after the CaughtUp on the stream: once the client
    // holds it, it has handled the CaughtUp too, and is still hydrating.
    server.state.append(SESSION, 1);
    let snap = wait(&client, "a live event after CaughtUp", |s| s.cursor == 31).await;
    assert_eq!(snap.hydration, Hydration::Hydrating, "backfill pending");

    server.state.open_history(true);
    let has_more = tokio::time::timeout(WAIT, backfill)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(has_more);
    let snap = wait(&client, "ready", |s| s.hydration == Hydration::Ready).await;
    assert_eq!(snap.events.seqs(), (16..=31).collect::<Vec<_>>());

    // Reconnects never bring hydration back.
    server.state.drop_connections();
    server.state.append(SESSION, 2);
    wait(&client, "live after reconnect", |s| {
        s.cursor == 33 && s.connected
    })
    .await;
    client.reconnect().unwrap();
    server.state.append(SESSION, 1);
    wait(&client, "live after forced reconnect", |s| s.cursor == 34).await;

    let phases: Vec<Hydration> = seen.lock().unwrap().iter().map(|s| s.hydration).collect();
    let flips = phases.windows(2).filter(|w| w[0] != w[1]).count();
    assert_eq!(phases.first(), Some(&Hydration::Hydrating));
    assert_eq!(phases.last(), Some(&Hydration::Ready));
    assert_eq!(flips, 1, "Hydrating -> Ready exactly once: {phases:?}");
    client.close().await;
}

/// Waits (bounded) for a server-side condition, checked after each change
/// the test service makes to its state.
async fn wait_server(server: &TestServer, cond: impl FnMut() -> bool) {
    tokio::time::timeout(WAIT, server.state.wait_until(cond))
        .await
        .expect("server-side condition");
}

#[tokio::test]
async fn drops_mid_replay_and_mid_live_resume_without_gap_or_duplicate() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 200);
    // The first two streams die mid-replay.
    server.state.script(Script {
        fail_after_events: Some(50),
        ..Default::default()
    });
    server.state.script(Script {
        fail_after_events: Some(30),
        ..Default::default()
    });
    let client = client(&server, options());
    let seen = record(&client);
    converge(&client, &server).await;
    assert_eq!(server.state.subscribe_after(), vec![0, 50, 80]);

    // Mid-live: drop, append while the client is away, drop again.
    server.state.append(SESSION, 3);
    converge(&client, &server).await;
    server.state.refuse_subscribe(true);
    server.state.drop_connections();
    wait(&client, "disconnected", |s| !s.connected).await;
    server.state.append(SESSION, 7);
    server.state.refuse_subscribe(false);
    converge(&client, &server).await;
    server.state.drop_connections();
    server.state.append(SESSION, 4);
    let snap = converge(&client, &server).await;
    assert_eq!(snap.events.seqs(), (1..=214).collect::<Vec<_>>());

    // Every resubscribe started from the last seq held at that moment.
    let afters = server.state.subscribe_after();
    assert!(afters.contains(&203), "{afters:?}");
    // No published snapshot ever held a duplicate or an out-of-order event.
    for s in seen.lock().unwrap().iter() {
        assert!(strictly_increasing(&s.events.seqs()));
        assert_eq!(s.events.first().map_or(1, |e| e.seq), 1);
    }
    client.close().await;
}

#[tokio::test]
async fn overlapping_replays_and_duplicate_live_events_are_dropped() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 10);
    let client = client(&server, options());
    converge(&client, &server).await;
    // The next stream replays 6 events the client already holds, then sends
    // every live event twice.
    server.state.script(Script {
        overlap: 6,
        duplicate_live: true,
        ..Default::default()
    });
    client.reconnect().unwrap();
    wait_server(&server, || server.state.subscribe_after().len() == 2).await;
    server.state.append(SESSION, 5);
    let snap = converge(&client, &server).await;
    assert_eq!(snap.events.seqs(), (1..=15).collect::<Vec<_>>());
    assert_eq!(server.state.subscribe_after(), vec![0, 10]);
    client.close().await;
}

#[tokio::test]
async fn reset_rebuilds_the_list_from_the_replayed_tail() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 50);
    let client = client(&server, options());
    converge(&client, &server).await;
    assert!(
        client
            .inject_event(support::make_event(SESSION, 0))
            .await
            .unwrap()
    );
    wait(&client, "local event", |s| s.events.len() == 51).await;

    // The server comes back with only 10 events: the client's cursor (50) is
    // past its head, so the server resets and the client rebuilds.
    server.state.restart_with(SESSION, 10);
    let snap = converge(&client, &server).await;
    assert_eq!(snap.events.seqs(), (1..=10).collect::<Vec<_>>());
    assert_eq!(server.state.subscribe_after(), vec![0, 50]);

    server.state.append(SESSION, 2);
    converge(&client, &server).await;
    client.close().await;
}

#[tokio::test]
async fn a_gap_forces_a_resubscribe_from_the_last_good_seq() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 5);
    server.state.script(Script {
        skip_seq: Some(8),
        ..Default::default()
    });
    let client = client(&server, options());
    let seen = record(&client);
    converge(&client, &server).await;
    server.state.append(SESSION, 5);
    let snap = converge(&client, &server).await;
    assert_eq!(snap.events.seqs(), (1..=10).collect::<Vec<_>>());
    assert_eq!(server.state.subscribe_after(), vec![0, 7]);
    let errors: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| s.error.clone())
        .collect();
    assert!(
        errors.iter().any(|e| e.contains("expected seq 8, got 9")),
        "{errors:?}"
    );
    assert_eq!(snap.error, None, "cleared once resubscribed");
    client.close().await;
}

#[tokio::test]
async fn fetch_history_pages_to_the_start_and_coalesces_concurrent_calls() {
    let server = start(ServerOptions {
        replay_window: 20,
        ..Default::default()
    })
    .await;
    server.state.append(SESSION, 100);
    let client = client(&server, options().with_history_page(30));
    let snap = wait(&client, "tail replayed", |s| {
        s.hydration == Hydration::Ready && s.cursor == 100
    })
    .await;
    assert_eq!(snap.events.seqs(), (81..=100).collect::<Vec<_>>());
    assert!(snap.has_more_history);

    // Two concurrent calls while the server holds History: one RPC, one
    // answer for both.
    server.state.open_history(false);
    let (a, b, ()) = tokio::join!(
        client.fetch_history(None),
        client.fetch_history(None),
        async {
            wait_server(&server, || server.state.history_calls() == 1).await;
            // The client task takes commands in order: once it has answered
            // this one (a seq it holds, so ignored), both History calls
            // have reached it.
            let held = support::make_event(SESSION, 100);
            assert!(!client.inject_event(held).await.unwrap());
            server.state.open_history(true);
        }
    );
    assert!(a.unwrap() && b.unwrap());
    assert_eq!(server.state.history_calls(), 1, "coalesced");
    assert_eq!(client.events().seqs(), (51..=100).collect::<Vec<_>>());

    // Page to the start.
    assert!(client.fetch_history(30).await.unwrap());
    assert!(!client.fetch_history(30).await.unwrap());
    let snap = converge(&client, &server).await;
    assert!(!snap.has_more_history);
    let requests = server.state.inner.lock().unwrap().history_requests.clone();
    let befores: Vec<(u64, u32)> = requests.iter().map(|r| (r.before_seq, r.limit)).collect();
    assert_eq!(befores, vec![(81, 30), (51, 30), (21, 30)]);
    // Nothing older: no RPC at all.
    assert!(!client.fetch_history(30).await.unwrap());
    assert_eq!(server.state.history_calls(), 3);

    // Live events still append after paging.
    server.state.append(SESSION, 3);
    converge(&client, &server).await;
    client.close().await;
}

#[tokio::test]
async fn injected_events_are_shown_and_deduped_by_seq() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 5);
    let client = client(&server, options());
    let snap = converge(&client, &server).await;
    assert_eq!(snap.derived.status, Status::Idle, "seq 5 ended the turn");

    // An optimistic message (seq 0) shows at once and feeds the derived
    // state: the run is live, so an input_sent starts a turn.
    let optimistic = pb::Event {
        run_id: "run-1".into(),
        payload: Some(Payload::InputSent(pb::InputSent {
            text: "optimistic".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    assert!(client.inject_event(optimistic).await.unwrap());
    let snap = wait(&client, "optimistic event", |s| s.events.len() == 6).await;
    assert_eq!(snap.events.seqs(), vec![1, 2, 3, 4, 5, 0]);
    assert_eq!(snap.derived.status, Status::Streaming);
    assert_eq!(*snap.derived, derive::derive_all(&snap.events.to_vec()));
    assert_eq!(snap.cursor, 5, "local events move no cursor");

    // A seq already held is ignored.
    assert!(
        !client
            .inject_event(support::make_event(SESSION, 3))
            .await
            .unwrap()
    );
    // A seq ahead of the stream is shown, then replaced by the server's copy.
    let mut early = support::make_event(SESSION, 6);
    early.run_id = "local-copy".into();
    assert!(client.inject_event(early).await.unwrap());
    wait(&client, "early event", |s| s.events.len() == 7).await;
    server.state.append(SESSION, 1);
    let snap = wait(&client, "server copy", |s| s.cursor == 6).await;
    assert_eq!(snap.events.seqs(), vec![1, 2, 3, 4, 5, 0, 6]);
    assert_eq!(snap.events.last().unwrap().run_id, "run-1");
    assert_eq!(*snap.derived, derive::derive_all(&snap.events.to_vec()));
    client.close().await;
}

#[tokio::test]
async fn connected_flag_follows_the_stream() {
    let server = start(ServerOptions::default()).await;
    server.state.refuse_subscribe(true);
    let client = client(&server, options());
    let snap = wait(&client, "a failed attempt", |s| s.error.is_some()).await;
    assert!(!snap.connected);
    assert_eq!(snap.hydration, Hydration::Hydrating);

    server.state.refuse_subscribe(false);
    let snap = wait(&client, "connected", |s| s.connected).await;
    assert_eq!(snap.error, None);

    server.state.refuse_subscribe(true);
    server.state.drop_connections();
    let snap = wait(&client, "disconnected", |s| !s.connected).await;
    assert!(snap.error.is_some());
    server.state.refuse_subscribe(false);
    wait(&client, "reconnected", |s| s.connected).await;

    // Heartbeats keep an idle stream open: nothing reconnects. Three
    // heartbeats go out on the idle stream; the event appended after them
    // reaches the client behind them, on the same stream.
    let before = server.state.subscribe_after().len();
    let beats = server.state.heartbeats_sent();
    wait_server(&server, || server.state.heartbeats_sent() >= beats + 3).await;
    let head = server.state.append(SESSION, 1);
    let snap = wait(&client, "the event after the heartbeats", |s| {
        s.cursor == head
    })
    .await;
    assert!(snap.connected);
    assert_eq!(server.state.subscribe_after().len(), before);

    client.close().await;
    assert!(
        !client.snapshot().connected,
        "closed clients are disconnected"
    );
    assert!(matches!(
        client.fetch_history(1).await,
        Err(SessionError::Closed)
    ));
}

#[tokio::test]
async fn unary_calls_carry_the_token_and_keep_the_grpc_code() {
    let server = start(ServerOptions {
        token: Some("s3cret".into()),
        ..Default::default()
    })
    .await;
    let client = client(&server, options().with_auth_token("s3cret"));
    let sent = client.send("hello", Vec::new()).await.unwrap();
    assert_eq!(sent.run_id, "run-1");
    let snap = wait(&client, "the input_sent event", |s| s.cursor == 1).await;
    assert_eq!(snap.events.first().unwrap().session_id, SESSION);
    client.stop().await.unwrap();
    client
        .respond_permission("req-1", true, None, "")
        .await
        .unwrap();
    let err = client
        .respond_permission("", false, None, "no")
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.to_string().contains("RespondPermission"), "{err}");
    {
        let inner = server.state.inner.lock().unwrap();
        assert_eq!(inner.sent[0].input, "hello");
        assert_eq!(inner.stops, 1);
        assert_eq!(inner.permission_answers.len(), 1);
        assert!(
            inner
                .auth_headers
                .iter()
                .all(|h| h.as_deref() == Some("Bearer s3cret")),
            "{:?}",
            inner.auth_headers
        );
    }

    let agents = client.list_agents().await.unwrap();
    let names: Vec<(&str, &str, bool)> = agents
        .iter()
        .map(|a| (a.name.as_str(), a.kind.as_str(), a.is_default))
        .collect();
    assert_eq!(
        names,
        [("claude", "claude", true), ("gemini", "acp", false)]
    );

    // Without the token: UNAUTHENTICATED, typed.
    let anonymous = SessionClient::connect(server.url(), SESSION, options()).unwrap();
    let err = anonymous.send("hi", Vec::new()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    assert!(matches!(err, SessionError::Rpc { rpc: "Send", .. }));
    let err = anonymous.list_agents().await.unwrap_err();
    assert!(matches!(
        err,
        SessionError::Rpc {
            rpc: "ListAgents",
            ..
        }
    ));
    anonymous.close().await;
    client.close().await;
}

/// Every call names the client's session in the `x-session-id` header (a
/// balancer routes by it): the subscription, history pages, the input and
/// the control calls alike.
#[tokio::test]
async fn every_call_carries_the_session_header() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    client.send("hello", Vec::new()).await.unwrap();
    wait(&client, "the input_sent event", |s| s.cursor == 1).await;
    client.fetch_history(None).await.unwrap();
    client.stop().await.unwrap();
    client
        .respond_permission("req-1", true, None, "")
        .await
        .unwrap();
    client.set_model("opus").await.unwrap();
    {
        let inner = server.state.inner.lock().unwrap();
        assert!(
            inner.session_headers.len() >= 5,
            "{:?}",
            inner.session_headers
        );
        assert!(
            inner
                .session_headers
                .iter()
                .all(|h| h.as_deref() == Some(SESSION)),
            "{:?}",
            inner.session_headers
        );
    }
    client.close().await;
}

/// Every logical call carries one fresh idempotency key, and a call whose
/// answer was lost is retried with that same key (so the server applies it
/// once); another logical call gets another key.
#[tokio::test]
async fn each_logical_call_has_one_key_reused_on_its_retries() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    let lose = |n| server.state.inner.lock().unwrap().lose_answers = n;

    lose(2);
    client.send("hello", Vec::new()).await.unwrap();
    client.send("hello", Vec::new()).await.unwrap();
    lose(1);
    client.stop().await.unwrap();
    lose(1);
    client
        .respond_permission("req-1", true, None, "")
        .await
        .unwrap();
    lose(1);
    let started = client.start(pb::StartConfig::default()).await.unwrap();
    assert_eq!(started.run_id, "run-1");
    client
        .send_with_key("app-key-1", "mine", Vec::new())
        .await
        .unwrap();

    {
        let inner = server.state.inner.lock().unwrap();
        let sends: Vec<&str> = inner
            .sent
            .iter()
            .map(|r| r.idempotency_key.as_str())
            .collect();
        assert_eq!(
            sends.len(),
            5,
            "three attempts, then one, then one: {sends:?}"
        );
        assert!(!sends[0].is_empty() && sends[0].len() <= 128);
        assert_eq!(
            (sends[1], sends[2]),
            (sends[0], sends[0]),
            "retries reuse the key"
        );
        assert_ne!(sends[3], sends[0], "a new logical call has a new key");
        assert_eq!(sends[4], "app-key-1");
        let pairs = [
            inner
                .stop_requests
                .iter()
                .map(|r| r.idempotency_key.clone())
                .collect::<Vec<_>>(),
            inner
                .permission_answers
                .iter()
                .map(|r| r.idempotency_key.clone())
                .collect(),
            inner
                .starts
                .iter()
                .map(|r| r.idempotency_key.clone())
                .collect(),
        ];
        let mut all = vec![sends[0].to_owned(), sends[3].to_owned()];
        for keys in pairs {
            assert_eq!(keys.len(), 2, "one lost answer, one retry: {keys:?}");
            assert_eq!(keys[0], keys[1]);
            all.push(keys[0].clone());
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 5, "each logical call its own key");
    }

    // Not beyond call_retries, and not for the server's own answers.
    let once = self::client(&server, options().with_call_retries(1));
    lose(5);
    let err = once.stop().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert_eq!(server.state.inner.lock().unwrap().stop_requests.len(), 4);
    lose(0);
    let before = server.state.inner.lock().unwrap().permission_answers.len();
    let err = once
        .respond_permission("", true, None, "")
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        server.state.inner.lock().unwrap().permission_answers.len(),
        before
    );
    once.close().await;
    client.close().await;
}

/// DeleteSession goes out once per logical call, and a call whose answer
/// was lost is retried under the same key (the server answers a repeat of
/// a deletion that went through with success).
#[tokio::test]
async fn delete_reaches_the_server_and_retries_in_transit_under_one_key() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    server.state.inner.lock().unwrap().lose_answers = 1;
    client.delete().await.unwrap();
    client.delete_with_key("app-delete").await.unwrap();
    let inner = server.state.inner.lock().unwrap();
    let seen: Vec<(&str, &str)> = inner
        .delete_requests
        .iter()
        .map(|r| (r.session_id.as_str(), r.idempotency_key.as_str()))
        .collect();
    assert_eq!(
        seen.len(),
        3,
        "a lost answer, its retry, one more: {seen:?}"
    );
    assert!(seen.iter().all(|(s, _)| *s == SESSION), "{seen:?}");
    assert!(!seen[0].1.is_empty());
    assert_eq!(seen[1].1, seen[0].1, "the retry reuses the key");
    assert_eq!(seen[2].1, "app-delete");
}

/// StopTask is one logical call with one key, reused when its answer is
/// lost; GetContextUsage (read-only) is retried in transit and hands back
/// the server's figures; the server's own refusals are not retried.
#[tokio::test]
async fn stop_task_and_context_usage_reach_the_server_and_retry_in_transit() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    let lose = |n| server.state.inner.lock().unwrap().lose_answers = n;

    lose(1);
    client.stop_task("task-1").await.unwrap();
    client.stop_task("task-2").await.unwrap();
    client
        .stop_task_with_key("app-key-2", "task-3")
        .await
        .unwrap();
    {
        let inner = server.state.inner.lock().unwrap();
        let seen: Vec<(&str, &str, &str)> = inner
            .stop_task_requests
            .iter()
            .map(|r| {
                (
                    r.session_id.as_str(),
                    r.task_id.as_str(),
                    r.idempotency_key.as_str(),
                )
            })
            .collect();
        assert_eq!(
            seen.len(),
            4,
            "a lost answer, its retry, two more: {seen:?}"
        );
        assert!(seen.iter().all(|(s, _, _)| *s == SESSION), "{seen:?}");
        let tasks: Vec<&str> = seen.iter().map(|(_, t, _)| *t).collect();
        assert_eq!(tasks, ["task-1", "task-1", "task-2", "task-3"]);
        assert!(!seen[0].2.is_empty() && seen[0].2.len() <= 128);
        assert_eq!(seen[1].2, seen[0].2, "the retry reuses the key");
        assert_ne!(seen[2].2, seen[0].2, "a new logical call has a new key");
        assert_eq!(seen[3].2, "app-key-2");
    }
    let err = client.stop_task("").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(matches!(
        err,
        SessionError::Rpc {
            rpc: "StopTask",
            ..
        }
    ));

    // No live process: FAILED_PRECONDITION, asked once.
    let err = client.get_context_usage().await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(matches!(
        err,
        SessionError::Rpc {
            rpc: "GetContextUsage",
            ..
        }
    ));
    assert_eq!(server.state.inner.lock().unwrap().context_usage_calls, 1);

    let figures = pb::GetContextUsageResponse {
        total_tokens: 300,
        max_tokens: 1000,
        raw_max_tokens: 1200,
        percentage: 30.0,
        categories: vec![
            pb::ContextCategory {
                name: "Messages".into(),
                tokens: 300,
                kind: "used".into(),
            },
            pb::ContextCategory {
                name: "Free space".into(),
                tokens: 700,
                kind: "free".into(),
            },
        ],
        raw: None,
    };
    server.state.inner.lock().unwrap().context_usage = Some(figures.clone());
    lose(2);
    let usage = client.get_context_usage().await.unwrap();
    assert_eq!(usage, figures);
    assert_eq!(
        server.state.inner.lock().unwrap().context_usage_calls,
        4,
        "two lost answers, then the one that came back"
    );
    client.close().await;
}

/// SetModel, SetPermissionMode, SetMaxThinkingTokens and RewindFiles each
/// send their request under one key, the same one again when the answer
/// was lost; the server's own refusals are not retried; what they record
/// shows in the snapshot's derived settings.
#[tokio::test]
async fn setting_and_rewind_calls_send_their_request_and_retry_with_one_key() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    let lose = |n| server.state.inner.lock().unwrap().lose_answers = n;

    lose(1);
    let model = client.set_model("claude-haiku-4-5").await.unwrap();
    assert_eq!(model.applied(), pb::SettingApplied::Live);
    lose(1);
    let mode = client
        .set_permission_mode_with_key("app-key-mode", "plan")
        .await
        .unwrap();
    assert_eq!(mode.seq, model.seq + 1);
    lose(1);
    client.set_max_thinking_tokens(Some(2048)).await.unwrap();
    let cleared = client.set_max_thinking_tokens(None).await.unwrap();
    lose(1);
    let dry = client.rewind_files(3, true).await.unwrap();
    assert_eq!(dry.files_changed, ["notes.txt"]);
    assert_eq!(dry.seq, 0, "a dry run records nothing");
    let rewound = client
        .rewind_files_with_key("app-key-rewind", 3, false)
        .await
        .unwrap();
    assert_eq!(rewound.seq, cleared.seq + 1);

    {
        let inner = server.state.inner.lock().unwrap();
        let models: Vec<(&str, &str, &str)> = inner
            .set_model_requests
            .iter()
            .map(|r| {
                (
                    r.session_id.as_str(),
                    r.model.as_str(),
                    r.idempotency_key.as_str(),
                )
            })
            .collect();
        assert_eq!(models.len(), 2, "a lost answer and its retry: {models:?}");
        assert_eq!(models[0], models[1], "the retry is the same request");
        assert_eq!((models[0].0, models[0].1), (SESSION, "claude-haiku-4-5"));
        assert!(!models[0].2.is_empty() && models[0].2.len() <= 128);

        let modes: Vec<(&str, &str)> = inner
            .set_permission_mode_requests
            .iter()
            .map(|r| (r.mode.as_str(), r.idempotency_key.as_str()))
            .collect();
        assert_eq!(modes, [("plan", "app-key-mode"), ("plan", "app-key-mode")]);

        let budgets: Vec<(Option<u32>, &str)> = inner
            .set_max_thinking_tokens_requests
            .iter()
            .map(|r| (r.max_thinking_tokens, r.idempotency_key.as_str()))
            .collect();
        assert_eq!(budgets.len(), 3, "{budgets:?}");
        assert_eq!(budgets[0], budgets[1], "the retry reuses the key");
        assert_eq!(budgets[0].0, Some(2048));
        assert_eq!(budgets[2].0, None, "None: back to the CLI's default");
        assert_ne!(
            budgets[2].1, budgets[0].1,
            "a new logical call has a new key"
        );

        let rewinds: Vec<(u64, bool, &str)> = inner
            .rewind_files_requests
            .iter()
            .map(|r| (r.to_seq, r.dry_run, r.idempotency_key.as_str()))
            .collect();
        assert_eq!(rewinds.len(), 3, "{rewinds:?}");
        assert_eq!(rewinds[0], rewinds[1], "the retry is the same request");
        assert_eq!((rewinds[0].0, rewinds[0].1), (3, true));
        assert_eq!(rewinds[2], (3, false, "app-key-rewind"));
        assert!(
            inner
                .rewind_files_requests
                .iter()
                .all(|r| r.session_id == SESSION)
        );

        let mut keys = vec![models[0].2, budgets[0].1, budgets[2].1, rewinds[0].2];
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), 4, "each logical call its own key");
    }

    // The server's own answer is not retried.
    let before = server
        .state
        .inner
        .lock()
        .unwrap()
        .set_permission_mode_requests
        .len();
    let err = client.set_permission_mode("").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(matches!(
        err,
        SessionError::Rpc {
            rpc: "SetPermissionMode",
            ..
        }
    ));
    let err = client.rewind_files(0, true).await.unwrap_err();
    assert!(matches!(
        err,
        SessionError::Rpc {
            rpc: "RewindFiles",
            ..
        }
    ));
    assert_eq!(
        server
            .state
            .inner
            .lock()
            .unwrap()
            .set_permission_mode_requests
            .len(),
        before
    );

    // What they recorded is in the log, and the snapshot derives it.
    let snap = converge(&client, &server).await;
    assert_eq!(
        snap.derived.settings,
        derive::Settings {
            model: Some("claude-haiku-4-5".into()),
            permission_mode: Some("plan".into()),
            max_thinking_tokens: None,
        }
    );
    assert!(matches!(
        snap.events.to_vec().last().and_then(|e| e.payload.as_ref()),
        Some(Payload::FilesRewound(r)) if r.to_seq == 3
    ));
    client.close().await;
}

/// SetTitle sends its request under one key (the same again when the
/// answer was lost), and the title it records is the snapshot's derived
/// title; an empty one goes back to the first prompt's.
#[tokio::test]
async fn set_title_retries_with_one_key_and_the_snapshot_derives_it() {
    let server = start(ServerOptions::default()).await;
    let client = client(&server, options());
    client
        .send("Fix the build\nplease", Vec::new())
        .await
        .unwrap();
    let snap = wait(&client, "the input_sent event", |s| s.cursor == 1).await;
    assert_eq!(snap.derived.title, "Fix the build");
    let lose = |n| server.state.inner.lock().unwrap().lose_answers = n;
    lose(1);
    let named = client.set_title("Build fix").await.unwrap();
    let snap = wait(&client, "the title_set", |s| s.cursor == named.seq).await;
    assert_eq!(snap.derived.title, "Build fix");
    {
        let inner = server.state.inner.lock().unwrap();
        let sent: Vec<(&str, &str, &str)> = inner
            .set_title_requests
            .iter()
            .map(|r| {
                (
                    r.session_id.as_str(),
                    r.title.as_str(),
                    r.idempotency_key.as_str(),
                )
            })
            .collect();
        assert_eq!(sent.len(), 2, "a lost answer and its retry: {sent:?}");
        assert_eq!(sent[0], sent[1], "the retry is the same request");
        assert_eq!((sent[0].0, sent[0].1), (SESSION, "Build fix"));
    }
    let cleared = client
        .set_title_with_key("app-key-title", "")
        .await
        .unwrap();
    let snap = wait(&client, "the cleared title", |s| s.cursor == cleared.seq).await;
    assert_eq!(snap.derived.title, "Fix the build");
    client.close().await;
}

#[test]
fn backoff_grows_is_capped_and_jittered() {
    let policy = BackoffPolicy::default();
    let ceilings: Vec<u64> = (0..9)
        .map(|n| policy.ceiling(n).as_millis() as u64)
        .collect();
    assert_eq!(
        ceilings,
        vec![200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
    );
    assert_eq!(policy.ceiling(u32::MAX), Duration::from_secs(10));

    let draw = |seed| {
        let mut b = Backoff::with_seed(policy, seed);
        (0..40).map(|_| b.next_delay()).collect::<Vec<_>>()
    };
    let a = draw(7);
    assert_eq!(a, draw(7), "seeded: reproducible");
    assert_ne!(a, draw(8), "different seeds, different jitter");
    for (n, d) in a.iter().enumerate() {
        assert!(*d <= policy.ceiling(n as u32), "delay {n} = {d:?}");
    }
    // Full jitter spreads delays over [0, ceiling]: across the capped draws
    // some fall in the lower half and some in the upper half.
    let capped = &a[6..];
    assert!(capped.iter().any(|d| *d < Duration::from_secs(5)));
    assert!(capped.iter().any(|d| *d > Duration::from_secs(5)));

    let mut b = Backoff::with_seed(policy, 7);
    for _ in 0..10 {
        b.next_delay();
    }
    assert_eq!(b.attempt(), 10);
    b.reset();
    assert!(b.next_delay() <= Duration::from_millis(200));
}

/// The client waits exactly the seeded backoff delays between attempts.
/// The transport fails without touching a socket, so paused time (which
/// auto-advances when every task is idle) measures the delays exactly.
#[tokio::test(start_paused = true)]
async fn reconnect_attempts_follow_the_backoff_delays() {
    use tokio::time::Instant;
    let (log, mut attempts) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let channel = tonic::transport::Endpoint::from_static("http://unreachable.invalid")
        .connect_with_connector_lazy(tower::service_fn(move |_uri| {
            let _ = log.send(Instant::now());
            async {
                Err::<hyper_util::rt::TokioIo<tokio::io::DuplexStream>, _>(std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "refused",
                ))
            }
        }));
    let policy = BackoffPolicy::default();
    let client = SessionClient::with_channel(
        channel,
        SESSION,
        SessionOptions::default().with_backoff_seed(42),
    )
    .unwrap();
    let n = 10;
    let times = tokio::time::timeout(Duration::from_secs(600), async {
        let mut times = Vec::with_capacity(n);
        while times.len() < n {
            times.push(attempts.recv().await.expect("the connector lives"));
        }
        times
    })
    .await
    .expect("attempts");
    let snap = client.snapshot();
    assert!(!snap.connected);
    assert!(snap.error.unwrap().contains("subscribe failed"));
    client.close().await;

    let mut expected = Backoff::with_seed(policy, 42);
    for (i, w) in times.windows(2).take(n - 1).enumerate() {
        let gap = w[1] - w[0];
        let delay = expected.next_delay();
        // The timer wheel has millisecond granularity.
        assert!(
            gap >= delay && gap <= delay + Duration::from_millis(2),
            "attempt {i}: waited {gap:?}, backoff said {delay:?}"
        );
    }
}

/// A stream that goes silent (no event, no heartbeat, connection still
/// open) is dropped after two heartbeat intervals and resubscribed from the
/// cursor: the events appended meanwhile arrive once, none twice.
#[tokio::test(start_paused = true)]
async fn a_silent_stream_is_resubscribed_after_two_heartbeat_intervals() {
    use tokio::time::Instant;
    let server = support::InMemoryServer::start(ServerOptions {
        heartbeat: Duration::from_secs(15),
        ..Default::default()
    });
    server.state.append(SESSION, 5);
    server.state.script(Script {
        silent_after_caught_up: true,
        ..Default::default()
    });
    let interval = Duration::from_secs(15);
    let client = SessionClient::with_channel(
        server.channel.clone(),
        SESSION,
        options().with_heartbeat_interval(interval),
    )
    .unwrap();
    let seen = record(&client);
    let caught_up = wait(&client, "the first replay", |s| {
        s.hydration == Hydration::Ready && s.cursor == 5
    })
    .await;
    let silent_since = Instant::now();
    assert!(caught_up.connected);
    // Appended while the first stream is silent: only a new stream shows them.
    server.state.append(SESSION, 3);

    // `wait` bounds by 20 s of (here virtual) time: too short for 30 s.
    let snap = tokio::time::timeout(Duration::from_secs(120), client.wait_for(|s| s.cursor == 8))
        .await
        .expect("resubscribed within 120 s")
        .unwrap();
    let waited = silent_since.elapsed();
    assert!(
        waited >= 2 * interval && waited <= 2 * interval + Duration::from_secs(1),
        "reconnected after {waited:?}, expected two intervals ({:?}) plus backoff",
        2 * interval
    );
    assert_eq!(server.state.subscribe_after(), vec![0, 5]);
    assert!(snap.connected);
    assert_eq!(snap.events.seqs(), (1..=8).collect::<Vec<_>>());
    assert_eq!(snap.events.to_vec(), server.state.events(SESSION));
    let history = seen.lock().unwrap().clone();
    assert!(
        history.iter().any(|s| !s.connected
            && s.error
                .as_deref()
                .is_some_and(|e| e.contains("two heartbeat intervals"))),
        "the stall shows as a disconnect with its reason"
    );
    assert!(
        history
            .iter()
            .all(|s| strictly_increasing(&s.events.seqs()))
    );
    client.close().await;
}

/// Heartbeats are proof of life: an idle stream whose server heartbeats
/// within the interval is never dropped, however long it stays idle.
#[tokio::test(start_paused = true)]
async fn heartbeats_keep_an_idle_stream_open() {
    let server = support::InMemoryServer::start(ServerOptions {
        heartbeat: Duration::from_secs(15),
        ..Default::default()
    });
    server.state.append(SESSION, 2);
    let client = SessionClient::with_channel(
        server.channel.clone(),
        SESSION,
        options().with_heartbeat_interval(Duration::from_secs(15)),
    )
    .unwrap();
    wait(&client, "the replay", |s| s.connected && s.cursor == 2).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(server.state.subscribe_after(), vec![0]);
    let snap = client.snapshot();
    assert!(snap.connected && snap.error.is_none(), "{snap:?}");
    client.close().await;
}

/// The options default to the server's default heartbeat.
#[test]
fn heartbeat_interval_defaults_to_the_servers_15s() {
    assert_eq!(
        SessionOptions::default().heartbeat_interval,
        Duration::from_secs(15)
    );
    assert_eq!(
        agent_harness_client::session::DEFAULT_HEARTBEAT_INTERVAL,
        Duration::from_secs(15)
    );
}

/// A message over the decode limit (4 MiB by default, the server's bound)
/// would come back at the same cursor on every resubscribe: the client
/// stops and says why instead of reconnecting forever. `reconnect()` tries
/// again.
#[tokio::test]
async fn a_message_too_large_to_decode_stops_the_subscription() {
    let server = start(ServerOptions::default()).await;
    server
        .state
        .append_event(SESSION, support::make_event(SESSION, 1));
    let mut big = support::make_event(SESSION, 2);
    big.payload = Some(Payload::InputSent(pb::InputSent {
        text: "x".repeat(5 * 1024 * 1024),
        ..Default::default()
    }));
    server.state.append_event(SESSION, big);
    // Fast retries: without the stop, many resubscribes would follow.
    let c = client(&server, options());
    assert_eq!(
        c.snapshot().fatal.map(|e| e.code()),
        None,
        "nothing fatal before the stream"
    );
    let snap = wait(&c, "the subscription to stop", |s| s.fatal.is_some()).await;
    let fatal = snap.fatal.clone().unwrap();
    assert_eq!(fatal.code(), tonic::Code::OutOfRange, "{fatal}");
    assert!(fatal.to_string().contains("too large"), "{fatal}");
    assert!(!snap.connected);
    assert_eq!(snap.cursor, 1, "the events before it are held");
    assert!(
        snap.error.as_deref().unwrap_or("").contains("seq 1"),
        "{snap:?}"
    );
    assert_eq!(
        server.state.subscribe_after(),
        [0],
        "one Subscribe, no reconnect loop"
    );

    // reconnect() clears it and tries once more (and stops again).
    c.reconnect().unwrap();
    wait(&c, "the second attempt", |_| {
        server.state.subscribe_after().len() == 2
    })
    .await;
    let snap = wait(&c, "it to stop again", |s| s.fatal.is_some()).await;
    assert_eq!(server.state.subscribe_after(), [0, 1]);
    assert!(snap.fatal.is_some());

    // With a smaller limit, a smaller message is too large as well.
    let small = SessionClient::connect(
        server.url(),
        SESSION,
        options().with_max_message_bytes(64 * 1024),
    )
    .unwrap();
    let snap = wait(&small, "the small client to stop", |s| s.fatal.is_some()).await;
    assert_eq!(snap.fatal.unwrap().code(), tonic::Code::OutOfRange);
}

/// A text fragment of block 0 of `message_id`, as the server streams it.
fn text_delta(message_id: &str, fragment: &str) -> pb::Delta {
    pb::Delta {
        run_id: "run-1".to_owned(),
        message_id: message_id.to_owned(),
        block_type: pb::DeltaBlockType::Text as i32,
        fragment: fragment.to_owned(),
        ..Default::default()
    }
}

fn content_event(message_id: &str, text: &str) -> pb::Event {
    pb::Event {
        run_id: "run-1".to_owned(),
        payload: Some(Payload::Content(pb::Content {
            message_id: message_id.to_owned(),
            blocks: vec![pb::ContentBlock {
                r#type: "text".to_owned(),
                text: text.to_owned(),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

#[tokio::test]
async fn deltas_grow_the_partial_message_until_content_supersedes_it() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 2); // run_start, input_sent: a turn
    let client = client(&server, options());
    let seen = record(&client);
    converge(&client, &server).await;
    assert_eq!(
        server.state.subscribe_deltas(),
        vec![true],
        "asked by default"
    );

    server.state.push_delta(SESSION, text_delta("msg_1", "Hel"));
    server.state.push_delta(SESSION, text_delta("msg_1", "lo"));
    let snap = wait(&client, "the partial text", |s| {
        s.partial.main_text() == "Hello"
    })
    .await;
    let block = &snap.partial.blocks()[0];
    assert_eq!((block.message_id.as_str(), block.index), ("msg_1", 0));
    assert_eq!(block.run_id, "run-1");
    assert_eq!(snap.events.len(), 2, "deltas are not events");
    assert_eq!(*snap.derived, derive::derive_all(&snap.events.to_vec()));

    // Its content lands: the partial text goes in the same snapshot as the
    // event that supersedes it, never one without the other.
    server
        .state
        .append_event(SESSION, content_event("msg_1", "Hello"));
    let snap = wait(&client, "the content", |s| s.cursor == 3).await;
    assert!(snap.partial.is_empty(), "{:?}", snap.partial);
    for s in seen.lock().unwrap().iter() {
        assert!(
            s.cursor < 3 || s.partial.is_empty(),
            "a snapshot shows both the content and its partial text: {s:?}"
        );
    }

    // turn_end drops blocks whose content never came (an interrupted turn).
    server
        .state
        .push_delta(SESSION, text_delta("msg_2", "Count"));
    wait(&client, "the next message", |s| !s.partial.is_empty()).await;
    server.state.append(SESSION, 2); // seq 4 input_sent, seq 5 turn_end
    let snap = wait(&client, "the turn end", |s| s.cursor == 5).await;
    assert!(snap.partial.is_empty(), "{:?}", snap.partial);
    client.close().await;
}

#[tokio::test]
async fn a_reconnect_drops_the_partial_message_and_the_snapshot_restores_it() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 2);
    let client = client(&server, options());
    let seen = record(&client);
    converge(&client, &server).await;
    server
        .state
        .push_delta(SESSION, text_delta("msg_1", "The ans"));
    wait(&client, "the partial text", |s| {
        s.partial.main_text() == "The ans"
    })
    .await;

    // Text written while the client is away reaches it in the snapshot.
    server.state.refuse_subscribe(true);
    server.state.drop_connections();
    wait(&client, "disconnected", |s| !s.connected).await;
    server
        .state
        .push_delta(SESSION, text_delta("msg_1", "wer is"));
    server.state.refuse_subscribe(false);
    wait(&client, "the snapshot", |s| {
        s.connected && s.partial.main_text() == "The answer is"
    })
    .await;
    server
        .state
        .push_delta(SESSION, text_delta("msg_1", " 42."));
    let snap = wait(&client, "the rest", |s| {
        s.partial.main_text() == "The answer is 42."
    })
    .await;
    assert_eq!(snap.partial.blocks().len(), 1, "{:?}", snap.partial);

    // Every text ever shown was a prefix of the answer: no character twice,
    // none from the old stream appended to the snapshot.
    for s in seen.lock().unwrap().iter() {
        let text = s.partial.main_text();
        assert!("The answer is 42.".starts_with(&text), "shown: {text:?}");
    }
    assert_eq!(server.state.subscribe_deltas(), vec![true, true]);
    client.close().await;
}

#[tokio::test]
async fn without_include_deltas_the_partial_message_stays_empty() {
    let server = start(ServerOptions::default()).await;
    server.state.append(SESSION, 2);
    let client = client(&server, options().with_include_deltas(false));
    converge(&client, &server).await;
    server
        .state
        .push_delta(SESSION, text_delta("msg_1", "Hello"));
    server.state.append(SESSION, 1);
    let snap = converge(&client, &server).await;
    assert!(snap.partial.is_empty());
    assert_eq!(server.state.subscribe_deltas(), vec![false]);
    client.close().await;
}
