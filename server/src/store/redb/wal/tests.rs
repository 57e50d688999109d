//! The log against crashes. A crash image is a copy of the store file and
//! its log taken while the store is open: the file as its last durable
//! commit left it (redb keeps the pages of `Durability::None` commits in
//! memory), the log as it was synced. That is what a killed server leaves.

use std::path::{Path, PathBuf};

use agent_harness_protocol::pb;

use super::super::RedbStore;
use super::{CHUNK, HEADER, OVERLAP_BYTES, path_of};
use crate::store::{Commit, IndexFold, Receipt, ReceiptWrite, SessionMeta, Store, TranscriptEntry};

fn event(sid: &str, seq: u64) -> pb::Event {
    pb::Event {
        session_id: sid.into(),
        seq,
        cli_line: format!("{{\"line\":{seq}}}"),
        ..Default::default()
    }
}

/// Commits batch `n` (1-based) of a store's history: 10 events to each of
/// two sessions, and on every 5th a meta, a receipt, a transcript line and
/// an index row, so every item of a record is replayed.
fn commit_batch(store: &RedbStore, n: u64) {
    let mut events = Vec::new();
    for sid in ["a", "b"] {
        events.extend((1..=10).map(|i| event(sid, (n - 1) * 10 + i)));
    }
    let full = vec![pb::Event {
        cli_line: "whole".repeat(100),
        ..event("a", n * 10)
    }];
    let (mut metas, mut receipts, mut transcript, mut index) = (vec![], vec![], vec![], vec![]);
    if n % 5 == 0 {
        metas.push(SessionMeta {
            pid: Some(n as u32),
            ..SessionMeta::new("a", n as i64)
        });
        receipts.push(ReceiptWrite::Put(Receipt::encoded(
            "a",
            &format!("key-{n}"),
            n as i64,
            "fp",
            "Send",
            vec![n as u8],
        )));
        transcript.push(TranscriptEntry {
            session_id: "b".into(),
            path: "projects/x/c.jsonl".into(),
            line: format!("{{\"n\":{n}}}"),
        });
        let mut row = IndexFold::default().row("b");
        row.head_seq = n * 10;
        row.title = format!("title {n}");
        index.push(row);
    }
    store
        .commit(Commit {
            events: &events,
            full: &full,
            metas: &metas,
            receipts: &receipts,
            transcript: &transcript,
            index: &index,
            ..Default::default()
        })
        .expect("commit");
}

/// Everything a store holds that commits write, to compare two stores.
fn contents(store: &RedbStore) -> String {
    let mut out = String::new();
    for sid in ["a", "b"] {
        let events = store.read_range(sid, 0, usize::MAX).unwrap();
        out += &format!("{sid}: {} events, ", events.len());
        out += &format!("last {:?}, ", events.last().map(|e| (e.seq, &e.cli_line)));
        let full = events
            .last()
            .and_then(|e| store.read_full(sid, e.seq).unwrap());
        out += &format!("full {:?}, ", full.map(|e| e.cli_line.len()));
        out += &format!("meta {:?}, ", store.meta(sid).unwrap());
        out += &format!("transcript {:?}\n", store.transcript(sid).unwrap());
    }
    out += &format!("receipts {}\n", store.receipt_count().unwrap());
    out += &format!("index {:?}\n", store.index_rows(&["b".into()]).unwrap());
    out
}

/// Copies the store file (and its log, with `log`) into `to`.
fn image(store_path: &Path, to: &Path, log: bool) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    let copy = to.join("events.redb");
    std::fs::copy(store_path, &copy).unwrap();
    if log {
        std::fs::copy(path_of(store_path), path_of(&copy)).unwrap();
    }
    copy
}

fn open(path: &Path, checkpoint_bytes: u64) -> RedbStore {
    RedbStore::open_with(path, 1 << 20, checkpoint_bytes).expect("open")
}

#[test]
fn a_crash_image_recovers_every_acknowledged_commit_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, u64::MAX);
    for n in 1..=30 {
        commit_batch(&store, n);
    }
    let want = contents(&store);
    assert!(want.contains("a: 300 events"), "{want}");

    // The file alone is behind: the commits since the checkpoint the open
    // made are only in the log.
    let alone = image(&path, &dir.path().join("alone"), false);
    let behind = contents(&open(&alone, u64::MAX));
    assert!(behind.contains("a: 0 events"), "{behind}");

    // With its log, every commit is back, each row as written.
    let crashed = image(&path, &dir.path().join("crashed"), true);
    let recovered = open(&crashed, u64::MAX);
    assert_eq!(contents(&recovered), want);
    // And it goes on from there, and survives the next crash as well.
    commit_batch(&recovered, 31);
    let again = image(&crashed, &dir.path().join("again"), true);
    drop(store);
    let last = contents(&open(&again, u64::MAX));
    assert!(last.contains("a: 310 events"), "{last}");
    assert!(last.contains("receipts 6"), "{last}");
}

/// How many of `store`'s records were synced on the log's sync thread.
fn synced_beside_fill(store: &RedbStore) -> u64 {
    store
        .with_open(|open| {
            let wal = open.wal.as_ref().expect("a store on a file has a log");
            Ok(wal.lock().unwrap().synced_beside_fill())
        })
        .unwrap()
}

#[test]
fn a_large_record_is_synced_beside_its_fill_and_recovers_like_any_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, u64::MAX);
    // Small records are synced in turn.
    commit_batch(&store, 1);
    assert_eq!(synced_beside_fill(&store), 0);
    // A record past the threshold is synced on the thread, each time.
    let line = "x".repeat(OVERLAP_BYTES / 4);
    let mut written = Vec::new();
    for round in 0..3u64 {
        let events: Vec<pb::Event> = (1..=4)
            .map(|i| pb::Event {
                cli_line: format!("{round}-{i}-{line}"),
                ..event("c", round * 4 + i)
            })
            .collect();
        store
            .commit(Commit {
                events: &events,
                ..Default::default()
            })
            .expect("commit");
        written.extend(events);
        commit_batch(&store, round + 2);
    }
    assert_eq!(synced_beside_fill(&store), 3);
    assert_eq!(store.read_range("c", 0, usize::MAX).unwrap(), written);
    let want = contents(&store);

    // A crash image has every one of them back, each row as written.
    let crashed = image(&path, &dir.path().join("crashed"), true);
    let recovered = open(&crashed, u64::MAX);
    assert_eq!(recovered.read_range("c", 0, usize::MAX).unwrap(), written);
    assert_eq!(contents(&recovered), want);
}

#[test]
fn a_torn_record_at_the_end_is_not_replayed_and_the_log_goes_on_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, u64::MAX);
    for n in 1..=3 {
        commit_batch(&store, n);
    }
    let crashed = image(&path, &dir.path().join("crashed"), true);
    drop(store);
    // Tear the last record: its last 10 bytes never reached the disk.
    let log = path_of(&crashed);
    let bytes = std::fs::read(&log).unwrap();
    let mut at = HEADER as usize;
    let mut ends = vec![];
    while let Some((_, len)) = super::next_record(&bytes[at..], 1) {
        at += len;
        ends.push(at);
    }
    assert_eq!(ends.len(), 3, "three records of generation 1");
    let mut torn = bytes.clone();
    torn[ends[2] - 10..ends[2]].fill(0xAB);
    std::fs::write(&log, &torn).unwrap();

    let recovered = open(&crashed, u64::MAX);
    let got = contents(&recovered);
    assert!(got.contains("a: 20 events"), "{got}");
    // The next commit lands where the torn one was, and is kept.
    commit_batch(&recovered, 3);
    let again = image(&crashed, &dir.path().join("again"), true);
    let last = contents(&open(&again, u64::MAX));
    assert!(last.contains("a: 30 events"), "{last}");
}

#[test]
fn checkpoints_keep_the_log_small_and_old_generations_are_never_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, 16 * 1024);
    for n in 1..=200 {
        commit_batch(&store, n);
    }
    let want = contents(&store);
    let generation = store
        .db()
        .unwrap()
        .as_ref()
        .unwrap()
        .wal
        .as_ref()
        .unwrap()
        .lock()
        .unwrap()
        .generation;
    assert!(generation > 10, "checkpoints ran: generation {generation}");
    let len = std::fs::metadata(path_of(&path)).unwrap().len();
    assert!(len <= CHUNK, "the log stays one chunk: {len} bytes");
    // Records of older generations lie after the newest ones in the file;
    // a crash image replays only the newest.
    let crashed = image(&path, &dir.path().join("crashed"), true);
    assert_eq!(contents(&open(&crashed, 16 * 1024)), want);
}

#[test]
fn a_clean_close_leaves_everything_in_the_store_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, u64::MAX);
    for n in 1..=10 {
        commit_batch(&store, n);
    }
    let want = contents(&store);
    drop(store);
    let alone = image(&path, &dir.path().join("alone"), false);
    assert_eq!(contents(&open(&alone, u64::MAX)), want);
}

#[test]
fn a_log_that_does_not_continue_the_store_is_moved_aside_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    // Store `x` crashes with commits in its log...
    let x = dir.path().join("x/events.redb");
    std::fs::create_dir_all(x.parent().unwrap()).unwrap();
    let store_x = open(&x, u64::MAX);
    for n in 1..=4 {
        commit_batch(&store_x, n);
    }
    let x_image = image(&x, &dir.path().join("x-image"), true);
    drop(store_x);
    // ...and store `y`'s file is put beside x's log.
    let y = dir.path().join("y/events.redb");
    std::fs::create_dir_all(y.parent().unwrap()).unwrap();
    let store_y = open(&y, u64::MAX);
    commit_batch(&store_y, 1);
    drop(store_y);
    std::fs::copy(&y, &x_image).unwrap();

    let opened = open(&x_image, u64::MAX);
    let got = contents(&opened);
    assert!(got.contains("a: 10 events"), "y's own commit only: {got}");
    let moved: Vec<_> = std::fs::read_dir(x_image.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("events.redb.wal.unused-"))
        .collect();
    assert_eq!(moved.len(), 1, "x's log kept aside: {moved:?}");
    // New commits go to a fresh log and survive a crash.
    commit_batch(&opened, 2);
    let again = image(&x_image, &dir.path().join("again"), true);
    let last = contents(&open(&again, u64::MAX));
    assert!(last.contains("a: 20 events"), "{last}");
}

#[test]
fn a_store_file_restored_beside_its_own_newer_log_gets_the_commits_since() {
    // A backup of the file taken while serving, restored beside the log
    // that kept going: the log continues the backup's position, so the
    // commits since are applied on top of it, in order.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, u64::MAX);
    commit_batch(&store, 1);
    let older = image(&path, &dir.path().join("older"), false);
    for n in 2..=5 {
        commit_batch(&store, n);
    }
    let want = contents(&store);
    std::fs::copy(path_of(&path), path_of(&older)).unwrap();
    assert_eq!(contents(&open(&older, u64::MAX)), want);
}

#[test]
fn a_file_in_the_logs_place_that_is_not_a_log_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    std::fs::write(path_of(&path), b"not a log at all, but someone's notes").unwrap();
    let err = RedbStore::open_with(&path, 1 << 20, u64::MAX).expect_err("refused");
    assert!(
        err.to_string()
            .contains("is not an agent-harness write-ahead log"),
        "{err}"
    );
    let kept = std::fs::read(path_of(&path)).unwrap();
    assert_eq!(kept, b"not a log at all, but someone's notes");
}

#[test]
fn a_new_log_is_filled_ahead_to_one_generation_and_commits_land_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let store = open(&path, 4 * CHUNK);
    // Commits go on while the zeros are written.
    for n in 1..=3 {
        commit_batch(&store, n);
    }
    let want = contents(&store);
    let filled = {
        let db = store.db().unwrap();
        let wal = db.as_ref().unwrap().wal.as_ref().unwrap().lock().unwrap();
        wal.prefill.as_ref().expect("a new log").wait_for(u64::MAX)
    };
    assert_eq!(filled, 5 * CHUNK, "the header's page and one generation");
    let len = std::fs::metadata(path_of(&path)).unwrap().len();
    assert_eq!(len, 5 * CHUNK);
    let crashed = image(&path, &dir.path().join("crashed"), true);
    assert_eq!(contents(&open(&crashed, 4 * CHUNK)), want);
    // A log already that long is not filled again.
    drop(store);
    let again = open(&path, 4 * CHUNK);
    let db = again.db().unwrap();
    let wal = db.as_ref().unwrap().wal.as_ref().unwrap().lock().unwrap();
    assert!(wal.prefill.is_none());
}
