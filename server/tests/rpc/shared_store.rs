//! Two servers on one PostgreSQL database, each with its own store (its own
//! pool and LISTEN connection), as two processes sharing the database are:
//! a Subscribe on one follows, gapless and exactly once, what the other
//! appends, before and after `caught_up`. (The cluster suite,
//! `tests/cluster`, does the same across real processes.)

use std::sync::Arc;

use crate::support::postgres::cluster;
use crate::support::server::*;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use agent_harness_server::store::PostgresStore;

async fn two_servers_on_one_database() -> (TestServer, TestServer) {
    let url = tokio::task::block_in_place(|| cluster().fresh_database());
    let open = || Arc::new(PostgresStore::open(&url).expect("open the database"));
    let reader = TestServer::on_store(open()).await;
    let writer = TestServer::on_store(open()).await;
    (reader, writer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_on_one_server_follows_what_another_appends() {
    let (reader, writer) = two_servers_on_one_database().await;
    let (mut r, mut w) = (reader.client().await, writer.client().await);

    // Subscribed on the reader before the session exists anywhere.
    let mut early = Sub::open(&mut r, "shared", 0).await;
    start(&mut w, "shared", "first")
        .await
        .expect("start on the writer");
    early.until("the first turn's end", is_turn_end).await;
    send(&mut w, "shared", "second")
        .await
        .expect("send on the writer");
    early.until("the second turn's end", is_turn_end).await;

    // Every event the writer committed, as its own History gives them, and
    // nothing else: `Sub` asserts each seq is the last plus one. The reader
    // may see a commit from the database before the writer has published
    // it to its own readers (durable first, then visible): its History
    // catches up, never the other way round.
    let seen = early.events.last().expect("events").seq;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let written = loop {
        let written = history_all(&mut w, "shared").await;
        if written.last().is_some_and(|e| e.seq >= seen) {
            break written;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the writer's History stays behind seq {seen}: {written:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(early.events, written, "the reader's stream is the log");

    // A late subscriber on the reader from the middle: the rest, then
    // caught_up, then what the writer appends next, live.
    let middle = written[written.len() / 2].seq;
    let mut late = Sub::open(&mut r, "shared", middle).await;
    loop {
        match late.next().await.expect("stream open") {
            pb::SubscribeResponse {
                kind: Some(Kind::CaughtUp(_)),
            } => break,
            _ => continue,
        }
    }
    assert_eq!(late.events, written[written.len() / 2 + 1..].to_vec());
    send(&mut w, "shared", "third")
        .await
        .expect("send on the writer");
    let end = late.until("the third turn's end", is_turn_end).await;
    early.until("the third turn's end", is_turn_end).await;
    assert_eq!(early.events.last().map(|e| e.seq), Some(end.seq));
    assert_eq!(late.events.first().map(|e| e.seq), Some(middle + 1));

    // What the reader derives from the log is what the writer derives.
    assert_eq!(get(&mut r, "shared").await, get(&mut w, "shared").await);
}
