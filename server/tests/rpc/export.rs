//! `agent-harness export ID`, the built binary run on a data dir or a store
//! URL: one proto3-JSON event a line, in seq order, each whole (a cut event
//! in the form ReadFullEvent streams); an unknown session and a redb store a
//! server holds are refused with what to do.

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_server::log::{Commit, EventLogs, LogOptions, NewEvent};
use agent_harness_server::store::{RedbStore, Store};

/// The committed fixture store (see `upgrade.rs`), copied into a data dir.
fn data_dir_with_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("data dir");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/store-v1/events.redb");
    std::fs::copy(fixture, dir.path().join("events.redb")).expect("copy the fixture");
    dir
}

fn export(data: &Path, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agent-harness"))
        .arg("export")
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("AGENT_HARNESS_STORE_URL")
        .output()
        .expect("run export")
}

/// The events of JSON lines.
fn parse(text: &str) -> Vec<pb::Event> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn stored(data: &Path, session: &str) -> Vec<pb::Event> {
    let store = RedbStore::open(&data.join("events.redb")).expect("store");
    store.read_range(session, 0, usize::MAX).expect("read")
}

#[test]
fn a_session_is_exported_whole_one_event_a_line_in_seq_order() {
    let data = data_dir_with_fixture();
    let out_file = data.path().join("done.jsonl");
    let out = export(
        data.path(),
        &["done", "--out", out_file.to_str().expect("utf-8")],
    );
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&out_file).expect("the export");
    let events = parse(&text);
    assert_eq!(events, stored(data.path(), "done"));
    assert!(events.len() > 5, "{}", events.len());
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "owner-only: {mode:o}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{} events", events.len())),
        "{stderr}"
    );

    // To stdout, the same form.
    let out = export(data.path(), &["fork"]);
    assert!(out.status.success(), "{out:?}");
    let fork = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(fork, stored(data.path(), "fork"));
}

#[test]
fn an_unknown_session_or_a_missing_store_is_refused() {
    let data = data_dir_with_fixture();
    let out = export(data.path(), &["nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("\"nope\" not found"), "{stderr}");
    assert!(out.stdout.is_empty());
    let kept = data.path().join("kept.jsonl");
    std::fs::write(&kept, "earlier\n").unwrap();
    let out = export(data.path(), &["nope", "--out", kept.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "earlier\n");

    let empty = tempfile::tempdir().unwrap();
    let out = export(empty.path(), &["done"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no event store at"), "{stderr}");
    assert!(
        !empty.path().join("events.redb").exists(),
        "an export never creates a store"
    );
}

#[test]
fn a_store_a_server_holds_is_refused_naming_the_online_way() {
    let data = data_dir_with_fixture();
    // What a running server holds: the file, open.
    let held = RedbStore::open(&data.path().join("events.redb")).expect("store");
    let out = export(data.path(), &["done"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in [
        "running server",
        "stop the server",
        "agent-harness history ID --json",
    ] {
        assert!(stderr.contains(want), "{want:?} in {stderr}");
    }
    drop(held);
    assert!(export(data.path(), &["done"]).status.success());
}

#[tokio::test]
async fn a_cut_event_is_exported_in_its_whole_form() {
    let data = tempfile::tempdir().unwrap();
    let text = "x".repeat(64 * 1024);
    {
        let store: Arc<dyn Store> =
            Arc::new(RedbStore::open(&data.path().join("events.redb")).unwrap());
        let opts = LogOptions {
            max_event_bytes: 16 * 1024,
            ..LogOptions::default()
        };
        let logs = EventLogs::open(store.clone(), opts).unwrap();
        let big = NewEvent {
            run_id: String::new(),
            payload: pb::event::Payload::InputSent(pb::InputSent {
                text: text.clone(),
                source: 2,
                ..Default::default()
            }),
            cli_line: String::new(),
        };
        logs.commit("big", Commit::events(vec![big])).await.unwrap();
        logs.shutdown().await;
        let cut = store.read_range("big", 0, usize::MAX).unwrap();
        assert!(
            cut[0].truncated.is_some(),
            "stored cut: {:?}",
            cut[0].truncated
        );
    }
    // The log's writer thread lets go of the file.
    drop(crate::support::server::reopen_redb(
        &data.path().join("events.redb"),
    ));
    let out = tokio::task::spawn_blocking({
        let dir = data.path().to_owned();
        move || export(&dir, &["big"])
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let events = parse(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].truncated, None);
    match &events[0].payload {
        Some(pb::event::Payload::InputSent(i)) => assert_eq!(i.text, text),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgresql_store_is_exported_while_its_server_keeps_it_open() {
    let url = tokio::task::block_in_place(|| crate::support::postgres::cluster().fresh_database());
    let store: Arc<dyn Store> = tokio::task::block_in_place(|| {
        Arc::new(agent_harness_server::store::PostgresStore::open(&url).expect("store"))
    });
    let opts = LogOptions {
        max_event_bytes: 16 * 1024,
        ..LogOptions::default()
    };
    let logs = EventLogs::open(store.clone(), opts).unwrap();
    let text = "y".repeat(64 * 1024);
    let events = ["small", text.as_str()].map(|t| NewEvent {
        run_id: String::new(),
        payload: pb::event::Payload::InputSent(pb::InputSent {
            text: t.to_owned(),
            source: 2,
            ..Default::default()
        }),
        cli_line: String::new(),
    });
    logs.commit("pg", Commit::events(events.to_vec()))
        .await
        .unwrap();
    let stored = tokio::task::block_in_place(|| store.read_range("pg", 0, 10).unwrap());
    assert!(stored[1].truncated.is_some(), "the second is stored cut");
    // The log (a server's) stays open while the export reads.
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agent-harness"))
            .args(["export", "pg", "--store-url", &url])
            .output()
            .expect("run export")
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let got = parse(&String::from_utf8_lossy(&out.stdout));
    let texts: Vec<(u64, usize, bool)> = got
        .iter()
        .map(|e| match &e.payload {
            Some(pb::event::Payload::InputSent(i)) => (e.seq, i.text.len(), e.truncated.is_some()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, [(1, 5, false), (2, text.len(), false)]);
    logs.shutdown().await;
}
