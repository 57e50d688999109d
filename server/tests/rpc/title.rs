//! SetTitle: a `title_set` event recorded with or without a live process,
//! derived into `Session.title` (else the first prompt's first line),
//! validated, keyed like the other writes.

use crate::support::server::*;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::Channel;

async fn set_title(
    c: &mut SessionServiceClient<Channel>,
    session: &str,
    title: &str,
    key: &str,
) -> Result<u64, tonic::Status> {
    c.set_title(pb::SetTitleRequest {
        session_id: session.into(),
        title: title.into(),
        idempotency_key: key.into(),
    })
    .await
    .map(|r| r.into_inner().seq)
}

/// The titles of the session's title_set events, by seq.
async fn titles_set(c: &mut SessionServiceClient<Channel>, session: &str) -> Vec<(u64, String)> {
    history_all(c, session)
        .await
        .into_iter()
        .filter_map(|e| match e.payload {
            Some(Payload::TitleSet(t)) => Some((e.seq, t.title)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_title_is_set_read_back_kept_once_per_key_and_cleared_to_the_derived_one() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    first_turn(&mut c, "t", "\n  Fix   the build\nthen the tests").await;
    let s = wait_idle(&mut c, "t").await;
    assert_eq!(s.title, "Fix the build");
    assert!(s.process_alive, "the live run records the title");
    let secs = |t: Option<pbjson_types::Timestamp>| t.map(|t| (t.seconds, t.nanos));
    assert!(
        secs(s.created_at).is_some() && secs(s.updated_at) >= secs(s.created_at),
        "{s:?}"
    );

    let seq = set_title(&mut c, "t", "  Release notes  ", "k1")
        .await
        .unwrap();
    let s = assert_derived_matches_log(&mut c, "t").await;
    assert_eq!((s.title.as_str(), s.head_seq), ("Release notes", seq));
    assert_eq!(
        titles_set(&mut c, "t").await,
        [(seq, "Release notes".into())]
    );
    // A retry under the same key answers the first seq and appends nothing.
    assert_eq!(
        set_title(&mut c, "t", "  Release notes  ", "k1")
            .await
            .unwrap(),
        seq
    );
    assert_eq!(titles_set(&mut c, "t").await.len(), 1);
    // The same key with another title is a client bug.
    let reused = set_title(&mut c, "t", "Other", "k1").await.unwrap_err();
    assert_eq!(reused.code(), tonic::Code::InvalidArgument, "{reused:?}");

    // Empty: back to the title of the first prompt.
    let cleared = set_title(&mut c, "t", "   ", "").await.unwrap();
    assert!(cleared > seq);
    assert_eq!(
        assert_derived_matches_log(&mut c, "t").await.title,
        "Fix the build"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_title_is_recorded_with_no_live_process_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let server = TestServer::on_store(reopen_redb(&path)).await;
    let mut c = server.client().await;
    let mut sub = Sub::open(&mut c, "gone", 0).await;
    start(&mut c, "gone", "CRASH now").await.unwrap();
    sub.until("run_end", is_run_end).await;
    let seq = set_title(&mut c, "gone", "Post-mortem", "k").await.unwrap();
    let s = assert_derived_matches_log(&mut c, "gone").await;
    assert_eq!((s.title.as_str(), s.process_alive), ("Post-mortem", false));
    server.shutdown().await.unwrap();

    let server = TestServer::on_store(reopen_redb(&path)).await;
    let mut c = server.client().await;
    assert_eq!(get(&mut c, "gone").await.title, "Post-mortem");
    // The receipt outlives the server too.
    assert_eq!(
        set_title(&mut c, "gone", "Post-mortem", "k").await.unwrap(),
        seq
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_titles_and_unknown_sessions_are_refused() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    first_turn(&mut c, "t", "hello").await;
    let long = "t".repeat(201);
    for bad in ["two\nlines", "a\tb", "bell\u{7}", long.as_str()] {
        let e = set_title(&mut c, "t", bad, "").await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:?}: {e:?}");
        assert!(e.message().contains("title"), "{e:?}");
    }
    // 200 characters (not bytes) is the bound.
    set_title(&mut c, "t", &"é".repeat(200), "").await.unwrap();
    let e = set_title(&mut c, "nobody", "x", "").await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let e = set_title(&mut c, "bad id!", "x", "").await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
    assert!(
        titles_set(&mut c, "t").await.len() == 1,
        "only the valid title was recorded"
    );
    server.shutdown().await.unwrap();
}
