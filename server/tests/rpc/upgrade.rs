//! Upgrades keep the data: the redb store committed under
//! `tests/fixtures/store-v1/` (written by the release that introduced the
//! store's format version, format 1) opens in every later build, lists,
//! replays and derives as it did; a store stamped with a newer format is
//! refused at start-up naming both formats; a file without the format row
//! (every release before it: `tests/fixtures/store-v0/` was written by the
//! release just before) reads as format 1.
//!
//! `tests/fixtures/store-v2/` is the same history written by format 2, the
//! first with a write-ahead log: copied while its server was still running,
//! so every commit of it is in `events.redb.wal` and none yet in
//! `events.redb`, which every later build must replay.
//!
//! The fixtures hold what a server killed mid-work leaves, the state an
//! upgrade most often meets: `done` (a finished turn, then a title),
//! `fork` (a fork of `done`, its turn finished) and `asks` (a turn waiting
//! on a permission prompt), all three with their runs still live in the
//! log. `write_the_fixture_store` wrote it (run it by hand, never on a
//! released format's file: see its docs).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::derive;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::log::{EventLogs, LogOptions};
use agent_harness_server::recovery::recover;
use agent_harness_server::store::{REDB_FORMAT, RedbStore, Store, StoreError};

use crate::support::server::*;

/// The committed fixture of `format`.
fn fixture_of(format: u64) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../tests/fixtures/store-v{format}/events.redb"))
}

/// The write-ahead log beside a store file.
fn log_of(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".wal");
    PathBuf::from(name)
}

/// A copy of the fixture in a fresh data dir (opening a store writes to it:
/// the committed file is never opened in place).
fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    fixture_copy_of(1)
}

/// A copy of the fixture of `format`, with its log when it has one.
fn fixture_copy_of(format: u64) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("data dir");
    let path = dir.path().join("events.redb");
    std::fs::copy(fixture_of(format), &path).expect("copy the fixture");
    if log_of(&fixture_of(format)).exists() {
        std::fs::copy(log_of(&fixture_of(format)), log_of(&path)).expect("copy its log");
    }
    (dir, path)
}

fn kinds_of(events: &[pb::Event]) -> Vec<&'static str> {
    events.iter().map(kind).collect()
}

/// Writes `tests/fixtures/store-v<this build's format>/`:
/// `cargo test -p agent-harness-server --test rpc upgrade::write_the_fixture_store -- --ignored`.
/// Only for a format no release has written yet: a released format's
/// fixture stays as that release wrote it, and a later format gets one of
/// its own beside it. The store file and its log are copied while the
/// server still runs, as a kill leaves them.
#[test]
#[ignore = "writes the committed fixture; run by hand"]
fn write_the_fixture_store() {
    assert!(
        !fixture_of(REDB_FORMAT).exists(),
        "format {REDB_FORMAT}'s fixture is written once, by format {REDB_FORMAT}"
    );
    let out = fixture_of(REDB_FORMAT);
    std::fs::create_dir_all(out.parent().expect("parent")).expect("fixture dir");
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("events.redb");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store: Arc<dyn Store> = Arc::new(RedbStore::open(&path).expect("store"));
        let server = TestServer::on_store(store).await;
        let mut c = server.client().await;
        first_turn(&mut c, "done", "Fix the build").await;
        c.set_title(pb::SetTitleRequest {
            session_id: "done".into(),
            title: "Release notes".into(),
            idempotency_key: "title-1".into(),
        })
        .await
        .expect("set title");
        let mut fork = Sub::open(&mut c, "fork", 0).await;
        let config = pb::StartConfig {
            prompt: "and the tests".into(),
            fork: Some(pb::Fork {
                from_session_id: "done".into(),
                at_seq: 0,
                message_uuid: String::new(),
            }),
            ..Default::default()
        };
        c.start(start_request("fork", config)).await.expect("fork");
        fork.until("turn_end", is_turn_end).await;
        let mut asks = Sub::open(&mut c, "asks", 0).await;
        start(&mut c, "asks", "PERMISSION to touch a file")
            .await
            .expect("start");
        asks.until_kind("permission_requested").await;
        // Killed mid-work: what is on disk now, with no shutdown at all.
        std::fs::copy(&path, &out).expect("write the fixture");
        std::fs::copy(log_of(&path), log_of(&out)).expect("write its log");
        drop(server);
    });
    rt.shutdown_timeout(Duration::from_millis(100));
}

#[tokio::test]
async fn the_fixture_store_opens_lists_replays_and_derives_as_written() {
    let (_dir, path) = fixture_copy();
    let store = Arc::new(RedbStore::open(&path).expect("this build opens the fixture"));
    // Format 1, upgraded in place to this build's format.
    assert_eq!(store.format_version().unwrap(), Some(REDB_FORMAT));
    the_killed_servers_history_is_whole(store).await;
}

/// The format-2 fixture: its file alone holds none of the history (it was
/// copied while its server ran, every commit only in the log); with the
/// log beside it, all of it opens as the format-1 fixture does, its events
/// replayed into chunks.
#[tokio::test]
async fn the_format_2_fixture_replays_its_write_ahead_log() {
    the_fixture_replays_its_write_ahead_log(2).await;
}

/// The format-3 fixture (events in chunks), as the format-2 one.
#[tokio::test]
async fn the_format_3_fixture_replays_its_write_ahead_log() {
    the_fixture_replays_its_write_ahead_log(3).await;
}

async fn the_fixture_replays_its_write_ahead_log(format: u64) {
    let (dir, path) = fixture_copy_of(format);
    let alone = dir.path().join("alone.redb");
    std::fs::copy(&path, &alone).expect("copy the file alone");
    let bare = RedbStore::open(&alone).expect("the file alone opens");
    assert_eq!(
        bare.sessions(None, 10).unwrap().len(),
        0,
        "nothing but in the log"
    );
    drop(bare);
    let store = Arc::new(RedbStore::open(&path).expect("this build opens the fixture"));
    assert_eq!(store.format_version().unwrap(), Some(REDB_FORMAT));
    the_killed_servers_history_is_whole(store).await;
}

/// What both fixtures hold, checked on `store` (opened on a copy): three
/// sessions whole, their runs live until recovery closes them, then served.
async fn the_killed_servers_history_is_whole(store: Arc<RedbStore>) {
    // As stored: three sessions, each log whole and in order, each run
    // still live, `asks` waiting on its prompt.
    let ids: Vec<String> = store
        .sessions(None, 10)
        .unwrap()
        .into_iter()
        .map(|m| m.session_id)
        .collect();
    assert_eq!(ids, ["asks", "done", "fork"]);
    let log = |id: &str| store.read_range(id, 0, usize::MAX).unwrap();
    for id in &ids {
        let events = log(id);
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "{id}");
        assert!(
            events.iter().all(|e| kind(e) != "unreadable"),
            "{id}: {:?}",
            kinds_of(&events)
        );
        assert!(!events.iter().any(is_run_end), "{id}: the runs were live");
    }
    let done = derive::session("done", &log("done"));
    assert_eq!(
        (done.status(), done.title.as_str(), done.pending_permissions),
        (pb::SessionStatus::Idle, "Release notes", 0)
    );
    assert!(done.process_alive && !done.resume_id.is_empty(), "{done:?}");
    let asks = derive::session("asks", &log("asks"));
    assert_eq!(
        (asks.status(), asks.pending_permissions),
        (pb::SessionStatus::Streaming, 1),
        "{asks:?}"
    );
    let fork_log = log("fork");
    let forked_from = fork_log.iter().find_map(|e| match &e.payload {
        Some(Payload::RunStart(r)) => r.config.as_ref()?.fork.clone(),
        _ => None,
    });
    assert_eq!(
        forked_from.map(|f| f.from_session_id).as_deref(),
        Some("done")
    );
    let fork = derive::session("fork", &fork_log);
    assert_eq!(fork.status(), pb::SessionStatus::Idle);

    // Start-up as the server does it: every live run closed.
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    let recovered = recover(&logs, &|_, _| false).await.unwrap();
    assert_eq!(recovered.len(), 3, "{recovered:?}");
    logs.shutdown().await;
    drop(logs);

    // Served: listed, replayed, derived from the replay.
    let server = TestServer::on_store(store.clone()).await;
    let mut c = server.client().await;
    let listed: Vec<(String, String)> = list(&mut c)
        .await
        .into_iter()
        .map(|s| (s.session_id, s.title))
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed.contains(&("done".into(), "Release notes".into())));
    for id in ["asks", "done", "fork"] {
        let s = assert_derived_matches_log(&mut c, id).await;
        assert_eq!(
            (s.status(), s.pending_permissions, s.process_alive),
            (pb::SessionStatus::Idle, 0, false),
            "{id} after recovery: {s:?}"
        );
        let replay = history_all(&mut c, id).await;
        assert_eq!(kinds_of(&replay).last(), Some(&"run_end"), "{id}");
    }
    // And it goes on: the finished session takes a follow-up, resumed.
    let head = get(&mut c, "done").await.head_seq;
    let mut sub = Sub::open(&mut c, "done", head).await;
    send(&mut c, "done", "and again")
        .await
        .expect("send after the upgrade");
    sub.until("turn_end", is_turn_end).await;
    server.shutdown().await.expect("shutdown");
}

/// A file of a release from before the format row (the row removed from a
/// copy of the fixture: those releases wrote the same tables) is format 1:
/// it opens, reads the same, and is stamped.
#[test]
fn a_store_without_a_format_row_is_format_one_and_is_stamped() {
    let (_dir, path) = fixture_copy();
    let before = {
        let store = RedbStore::open(&path).unwrap();
        store.read_range("done", 0, usize::MAX).unwrap()
    };
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
        assert!(txn.delete_table(format).unwrap(), "the fixture has the row");
        txn.commit().unwrap();
    }
    let store = RedbStore::open(&path).expect("an unstamped store opens");
    assert_eq!(
        store.format_version().unwrap(),
        Some(REDB_FORMAT),
        "read as format 1, upgraded from there and stamped"
    );
    assert_eq!(store.read_range("done", 0, usize::MAX).unwrap(), before);
}

/// A store written by the release before the format row (main's binary
/// before this record existed, `serve --adapter cassette:follow_up`: one
/// session, a finished turn, a title, a graceful shutdown) has no `format`
/// table, opens as format 1, is stamped, and derives as it was.
#[test]
fn a_store_of_the_release_before_the_format_row_opens_as_format_one() {
    let dir = tempfile::tempdir().expect("data dir");
    let path = dir.path().join("events.redb");
    let v0 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/store-v0/events.redb");
    std::fs::copy(v0, &path).expect("copy the fixture");
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let names: Vec<String> = txn
            .list_tables()
            .unwrap()
            .map(|t| redb::TableHandle::name(&t).to_owned())
            .collect();
        assert!(names.contains(&"events".to_owned()), "{names:?}");
        assert!(!names.contains(&"format".to_owned()), "{names:?}");
    }
    let store = RedbStore::open(&path).expect("an older release's store opens");
    // Read as format 1, then upgraded to this build's format.
    assert_eq!(store.format_version().unwrap(), Some(REDB_FORMAT));
    let events = store.read_range("s-old", 0, usize::MAX).unwrap();
    assert!(events.iter().all(|e| kind(e) != "unreadable"));
    assert_eq!(kinds_of(&events).last(), Some(&"run_end"));
    let s = derive::session("s-old", &events);
    assert_eq!(
        (s.status(), s.title.as_str(), s.process_alive),
        (pb::SessionStatus::Idle, "Old release", false)
    );
}

/// Stamps the store at `path` with `version`, as a newer release would.
fn stamp(path: &Path, version: u64) {
    let db = redb::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
    txn.open_table(format)
        .unwrap()
        .insert("version", version)
        .unwrap();
    txn.commit().unwrap();
}

#[test]
fn a_store_of_a_newer_format_is_refused_and_left_as_it_was() {
    let (_dir, path) = fixture_copy();
    stamp(&path, REDB_FORMAT + 1);
    let err = RedbStore::open(&path).expect_err("a newer format is refused");
    assert!(matches!(err, StoreError::Format(_)), "{err:?}");
    // Not re-stamped, nothing of it rewritten: the newer release still
    // finds its own store.
    let db = redb::Database::open(&path).unwrap();
    let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
    let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
    let table = txn.open_table(format).unwrap();
    let version = table.get("version").unwrap().map(|v| v.value());
    assert_eq!(version, Some(REDB_FORMAT + 1));
}

/// The binary's start-up: `serve` on a data dir whose store is newer exits
/// with the error naming both formats and what to do, before it binds.
#[test]
fn serve_on_a_store_of_a_newer_format_is_a_clear_start_up_error() {
    let (dir, path) = fixture_copy();
    stamp(&path, REDB_FORMAT + 1);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agent-harness"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("AGENT_HARNESS_STORE_URL")
        .output()
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in [
        format!("is format {}", REDB_FORMAT + 1),
        format!("(format {REDB_FORMAT})"),
        "newer release".to_owned(),
        path.display().to_string(),
        "Upgrades and rollback".to_owned(),
    ] {
        assert!(stderr.contains(&want), "{want:?} in {stderr}");
    }
}
