//! The conversation moves with the session, against the REAL claude CLI:
//! two in-process servers ("nodes" A and B), each with a CLI configuration
//! directory of its own, share one PostgreSQL database. A session's first
//! turn runs on A; A goes away; the next Send reaches B, which has never
//! seen the CLI's conversation file. B writes it back from the transcript
//! the log's store kept (the CLI's `--session-mirror` frames) before it
//! resumes, so the model request B's CLI makes carries the earlier
//! messages.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli moved_conversation::`.

use std::sync::Arc;
use std::time::Duration;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, PermissionMode};
use agent_harness_server::store::{PostgresStore, Store};

use super::resume_lost::conversation;
use crate::support::cli_grpc::{Events, WAIT, eventually, test_manager_options, texts};
use crate::support::common::{
    InProcessServer, claude_bin, claude_bin_newest, cli_config_dir, cli_options, point_at_fake_api,
};

/// One node: a server over its own connection to the shared database, its
/// CLI configuration directory under `home`.
async fn node(
    url: &str,
    api: &FakeApi,
    home: &std::path::Path,
    bin: &std::path::Path,
) -> InProcessServer {
    let mut options = cli_options(PermissionMode::Relay);
    options.claude_bin = Some(bin.to_owned());
    point_at_fake_api(&mut options, api, home);
    let adapter: Arc<dyn ProcessAdapter> = Arc::new(ClaudeInteractiveAdapter::new(options));
    let store: Arc<dyn Store> =
        Arc::new(PostgresStore::open(url).unwrap_or_else(|e| panic!("opening {url}: {e}")));
    InProcessServer::start(
        store,
        adapter,
        test_manager_options(),
        Duration::from_secs(1),
        ServeOptions::default(),
    )
    .await
}

/// The conversation file of `id` under configuration directory `config`.
pub(crate) fn conversation_file(config: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(config.join("projects"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join(format!("{id}.jsonl")))
        .find(|p| p.exists())
}

/// Turn one on A, A shut down (its run ends, its last transcript frames
/// committed as its process exits); Send on B, whose configuration
/// directory is empty: B's CLI resumes the same conversation, its model
/// request carries turn one's prompt and answer, and B's disk now holds
/// the conversation file (0600, in a 0700 projects folder).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_send_on_another_node_resumes_with_the_earlier_messages() {
    moves_with_the_session(&claude_bin()).await;
}

/// The same with the newest CLI release (`--session-mirror` there too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_cli_moves_the_same_way() {
    moves_with_the_session(&claude_bin_newest()).await;
}

async fn moves_with_the_session(bin: &std::path::Path) {
    let sid = "moved";
    let url = crate::support::postgres::cluster().fresh_database();
    let api = FakeApi::start().await;
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let work = tempfile::tempdir().unwrap();

    let mut a = node(&url, &api, home_a.path(), bin).await;
    let mut client_a = SessionServiceClient::new(a.channel().await);
    let ev_a = Events::open(client_a.clone(), sid).await;
    client_a
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: sid.into(),
            config: Some(pb::StartConfig {
                prompt: "TEXT remember the word heron".into(),
                cwd: work.path().display().to_string(),
                ..Default::default()
            }),
        })
        .await
        .expect("Start on A");
    let (_, ready) = ev_a.run_ready_after(0).await;
    let conversation_id = ready.resume_id.clone();
    let (first_end, end) = ev_a.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");
    // Node A goes away: its run ends, and the frames its CLI writes until
    // it exits are committed with the run's last output.
    drop(ev_a);
    a.shutdown(WAIT).await.expect("A shuts down");

    let mut b = node(&url, &api, home_b.path(), bin).await;
    let config_b = cli_config_dir(home_b.path());
    assert_eq!(
        conversation_file(&config_b, &conversation_id),
        None,
        "B has never run the conversation"
    );
    let mut client_b = SessionServiceClient::new(b.channel().await);
    let ev_b = Events::open(client_b.clone(), sid).await;
    api.clear_requests();
    let run_b = client_b
        .send(pb::SendRequest {
            idempotency_key: String::new(),
            session_id: sid.into(),
            input: "TEXT what was the word".into(),
            content_blocks: vec![],
        })
        .await
        .expect("Send on B")
        .into_inner()
        .run_id;
    let (ready_b_ev, ready_b) = ev_b.run_ready_after(first_end.seq).await;
    assert_eq!(ready_b_ev.run_id, run_b);
    assert_eq!(ready_b.resume_id, conversation_id, "the same conversation");
    let (_, end_b) = ev_b.turn_end_after(ready_b_ev.seq).await;
    assert!(!end_b.is_error, "{end_b:?}");
    assert!(
        texts(&ev_b.since(ready_b_ev.seq)).contains("what was the word"),
        "{}",
        texts(&ev_b.snapshot())
    );

    let calls = api.message_requests();
    let last = calls.last().expect("B's CLI called the model");
    let said = conversation(last.body.as_ref().expect("a JSON body"));
    let has = |role: &str, needle: &str| said.iter().any(|(r, t)| r == role && t.contains(needle));
    assert!(has("user", "TEXT remember the word heron"), "{said:?}");
    assert!(has("assistant", "remember the word heron"), "{said:?}");
    assert!(has("user", "TEXT what was the word"), "{said:?}");

    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let file_b = conversation_file(&config_b, &conversation_id).expect("written back on B");
    assert_eq!(mode(&file_b), 0o600);
    // Byte for byte what A's CLI wrote (but its `api-request*` diagnostic
    // lines, which the newest CLI leaves out of the frames), then B's turn.
    let file_a =
        conversation_file(&cli_config_dir(home_a.path()), &conversation_id).expect("A's file");
    let a_text: String = std::fs::read_to_string(&file_a)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with(r#"{"type":"api-request"#))
        .map(|l| format!("{l}\n"))
        .collect();
    let b_text = std::fs::read_to_string(&file_b).unwrap();
    assert!(
        b_text.starts_with(&a_text) && b_text.len() > a_text.len(),
        "A's file:\n{a_text}\nB's file:\n{b_text}"
    );
    assert_eq!(mode(&config_b.join("projects")), 0o700);

    drop(ev_b);
    b.shutdown(WAIT).await.expect("B shuts down");
    eventually("no reply stream left open", || api.active_streams() == 0).await;
}
