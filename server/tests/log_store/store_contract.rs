//! One contract suite for every `Store` implementation (STYLE habit 7):
//! the same cases run against `MemoryStore`, `RedbStore` (a real redb
//! file in a tempdir) and `PostgresStore` (a real server, see
//! `support::postgres`), plus redb-only durability and crash-atomicity
//! tests and the PostgreSQL store's own (`postgres_store`).

use crate::support::log;

use std::io::ErrorKind;
use std::sync::{Arc, Mutex};

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::store::{
    Commit, IndexFold, MemoryStore, Receipt, ReceiptWrite, RedbStore, SessionMeta, Store,
    TranscriptEntry,
};
use log::{event, seqs};
use prost::Message;
use redb::StorageBackend;
use redb::backends::InMemoryBackend;

fn meta(id: &str, head: u64) -> SessionMeta {
    SessionMeta {
        session_id: id.to_owned(),
        head_seq: head,
        created_ms: 1,
        updated_ms: 2,
        pid: Some(42),
        pid_start_time: Some(123_456),
        sealed_env: Some("v1:0011aabb:00ff".into()),
        legacy_env: Default::default(),
    }
}

/// A Send's receipt for `(id, key)` made at `at_ms`.
fn receipt(id: &str, key: &str, at_ms: i64) -> Receipt {
    Receipt::encoded(
        id,
        key,
        at_ms,
        &format!("print-{key}"),
        "Send",
        format!("run-{key}").into_bytes(),
    )
}

/// How an event names a conversation (see `store::conversations`).
#[derive(Clone, Copy)]
enum Naming {
    /// A run_start resuming it.
    Started,
    /// A run_start of a fork (names its source's conversation).
    Fork,
    /// A run_ready announcing it.
    Ready,
}

/// `e` with a payload naming conversation `resume_id` the way `how` says.
fn named(e: &pb::Event, resume_id: &str, how: Naming) -> pb::Event {
    let start = |fork: Option<pb::Fork>| {
        Payload::RunStart(pb::RunStart {
            config: Some(pb::StartConfig {
                resume: resume_id.into(),
                prompt: "hi".into(),
                fork,
                ..Default::default()
            }),
            ..Default::default()
        })
    };
    let payload = match how {
        Naming::Started => start(None),
        Naming::Fork => start(Some(pb::Fork {
            from_session_id: "src".into(),
            ..Default::default()
        })),
        Naming::Ready => Payload::RunReady(pb::RunReady {
            resume_id: resume_id.into(),
            model: "m".into(),
            ..Default::default()
        }),
    };
    pb::Event {
        payload: Some(payload),
        ..e.clone()
    }
}

/// Appends seqs `from..=to` of `id` as one batch with its meta.
fn append(store: &dyn Store, id: &str, from: u64, to: u64) {
    let batch: Vec<_> = (from..=to).map(|s| event(id, s)).collect();
    store.append_batch(&batch, &[meta(id, to)]).unwrap();
}

mod contract {
    use super::*;

    pub fn receipts_commit_with_events_replace_remove_and_prune(store: &dyn Store) {
        assert_eq!(store.receipt("s", "k").unwrap(), None);
        let put = |r: Receipt| ReceiptWrite::Put(r);
        store
            .commit(Commit {
                events: &[event("s", 1)],
                metas: &[meta("s", 1)],
                receipts: &[put(receipt("s", "k", 100))],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(store.read_range("s", 0, 10).unwrap().len(), 1);
        assert_eq!(
            store.receipt("s", "k").unwrap(),
            Some(receipt("s", "k", 100))
        );
        // Keys are per session; a receipt alone needs no event.
        assert_eq!(store.receipt("t", "k").unwrap(), None);
        store
            .commit(Commit {
                events: &[],
                metas: &[],
                receipts: &[put(receipt("t", "k", 200))],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(
            store.meta("t").unwrap(),
            None,
            "a receipt alone creates no session"
        );
        // Replaced: the new one is what a lookup and a prune see.
        store
            .commit(Commit {
                events: &[],
                metas: &[],
                receipts: &[put(receipt("s", "k", 300))],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(store.receipt("s", "k").unwrap().unwrap().created_ms, 300);
        assert_eq!(store.receipt_count().unwrap(), 2);
        assert_eq!(
            store.prune_receipts(250, 100).unwrap(),
            1,
            "only t/k is older"
        );
        assert_eq!(store.receipt("t", "k").unwrap(), None);
        assert!(store.receipt("s", "k").unwrap().is_some());
        // Removed (a call that failed after all), also when absent.
        let remove = |id: &str, key: &str| ReceiptWrite::Remove {
            session_id: id.into(),
            key: key.into(),
        };
        store
            .commit(Commit {
                events: &[],
                metas: &[],
                receipts: &[remove("s", "k"), remove("s", "none")],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(store.receipt_count().unwrap(), 0);
        assert_eq!(store.prune_receipts(i64::MAX, 100).unwrap(), 0);
        // Pruning goes oldest first and at most `limit` at a time.
        let many: Vec<_> = (0..10)
            .map(|i| put(receipt("m", &format!("k{i}"), i)))
            .collect();
        store
            .commit(Commit {
                events: &[],
                metas: &[],
                receipts: &many,
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(store.prune_receipts(100, 4).unwrap(), 4);
        assert_eq!(store.receipt("m", "k3").unwrap(), None);
        assert!(store.receipt("m", "k4").unwrap().is_some());
        assert_eq!(store.prune_receipts(100, 100).unwrap(), 6);
        assert_eq!(store.receipt_count().unwrap(), 0);
    }

    pub fn empty_store_reads_nothing(store: &dyn Store) {
        assert!(store.sessions(None, usize::MAX).unwrap().is_empty());
        assert_eq!(store.meta("nope").unwrap(), None);
        assert!(store.read_range("nope", 0, 100).unwrap().is_empty());
        assert!(store.read_before("nope", 100, 100).unwrap().is_empty());
    }

    pub fn events_round_trip_exactly(store: &dyn Store) {
        append(store, "s", 1, 3);
        let got = store.read_range("s", 0, 10).unwrap();
        let want: Vec<_> = (1..=3).map(|s| event("s", s)).collect();
        assert_eq!(got, want);
    }

    pub fn read_range_is_ascending_bounded_and_exclusive(store: &dyn Store) {
        append(store, "s", 1, 10);
        append(store, "s", 11, 20);
        assert_eq!(
            seqs(&store.read_range("s", 0, 100).unwrap()),
            (1..=20).collect::<Vec<_>>()
        );
        assert_eq!(seqs(&store.read_range("s", 5, 3).unwrap()), vec![6, 7, 8]);
        assert_eq!(seqs(&store.read_range("s", 19, 100).unwrap()), vec![20]);
        assert!(store.read_range("s", 20, 100).unwrap().is_empty());
        assert!(store.read_range("s", u64::MAX, 100).unwrap().is_empty());
        assert!(store.read_range("s", 0, 0).unwrap().is_empty());
    }

    pub fn read_before_returns_newest_oldest_first(store: &dyn Store) {
        append(store, "s", 1, 20);
        assert_eq!(
            seqs(&store.read_before("s", 11, 3).unwrap()),
            vec![8, 9, 10]
        );
        assert_eq!(seqs(&store.read_before("s", 3, 10).unwrap()), vec![1, 2]);
        assert!(store.read_before("s", 1, 10).unwrap().is_empty());
        assert!(store.read_before("s", 0, 10).unwrap().is_empty());
        assert_eq!(
            seqs(&store.read_before("s", u64::MAX, 2).unwrap()),
            vec![19, 20]
        );
        assert!(store.read_before("s", 10, 0).unwrap().is_empty());
    }

    pub fn sessions_are_isolated_even_with_prefix_ids(store: &dyn Store) {
        // "a" is a prefix of "ab": a naive byte-prefix key would mix them.
        let batch = vec![event("a", 1), event("ab", 1), event("a", 2), event("b", 1)];
        store
            .append_batch(&batch, &[meta("a", 2), meta("ab", 1), meta("b", 1)])
            .unwrap();
        let a = store.read_range("a", 0, 100).unwrap();
        assert_eq!(seqs(&a), vec![1, 2]);
        assert!(a.iter().all(|e| e.session_id == "a"));
        assert_eq!(seqs(&store.read_before("ab", 100, 100).unwrap()), vec![1]);
        assert_eq!(seqs(&store.read_range("b", 0, 100).unwrap()), vec![1]);
        assert!(store.read_range("", 0, 100).unwrap().is_empty());
    }

    pub fn metas_put_get_list_and_overwrite(store: &dyn Store) {
        store.put_meta(&meta("z", 0)).unwrap();
        store.put_meta(&meta("m", 0)).unwrap();
        assert_eq!(store.meta("z").unwrap(), Some(meta("z", 0)));
        append(store, "m", 1, 5); // the batch's meta replaces the old one
        assert_eq!(store.meta("m").unwrap().unwrap().head_seq, 5);
        let mut changed = meta("z", 0);
        changed.sealed_env = None;
        changed.pid = None;
        store.put_meta(&changed).unwrap();
        assert_eq!(store.meta("z").unwrap(), Some(changed));
        let ids: Vec<_> = store
            .sessions(None, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|m| m.session_id)
            .collect();
        assert_eq!(ids, vec!["m".to_owned(), "z".to_owned()], "ordered by id");
    }

    pub fn head_seq_is_read_from_the_events_not_the_stored_meta(store: &dyn Store) {
        // The log writes a meta when a session is created and when it
        // changes, not on every append: the stored head goes stale.
        let first: Vec<_> = (1..=3).map(|s| event("h", s)).collect();
        store.append_batch(&first, &[meta("h", 3)]).unwrap();
        let more: Vec<_> = (4..=9).map(|s| event("h", s)).collect();
        store.append_batch(&more, &[]).unwrap();
        let got = store.meta("h").unwrap().unwrap();
        assert_eq!(got.head_seq, 9, "head follows the events");
        assert_eq!(
            got.sealed_env.as_deref(),
            Some("v1:0011aabb:00ff"),
            "the rest is as stored"
        );
        let listed = store.sessions(None, usize::MAX).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].head_seq, 9);
        // A written head that claims more than the events is not believed either.
        store.put_meta(&meta("h", 1_000)).unwrap();
        assert_eq!(store.meta("h").unwrap().unwrap().head_seq, 9);
        // A meta without events has head 0, even next to a session whose
        // id extends it.
        store.put_meta(&meta("g", 7)).unwrap();
        store
            .append_batch(&[event("gg", 1)], &[meta("gg", 1)])
            .unwrap();
        assert_eq!(store.meta("g").unwrap().unwrap().head_seq, 0);
    }

    pub fn the_conversation_index_follows_the_events_that_name_a_conversation(store: &dyn Store) {
        assert!(store.conversation_sessions("c1").unwrap().is_empty());
        let batch = [
            named(&event("a", 1), "c1", Naming::Started),
            named(&event("a", 2), "c1", Naming::Ready),
            // A fork's run_start names its source's conversation: not its own.
            named(&event("f", 1), "c1", Naming::Fork),
            named(&event("f", 2), "c2", Naming::Ready),
            named(&event("b", 1), "c3", Naming::Started),
            event("b", 2),
        ];
        let metas = [meta("a", 2), meta("f", 2), meta("b", 2)];
        store.append_batch(&batch, &metas).unwrap();
        assert_eq!(store.conversation_sessions("c1").unwrap(), vec!["a"]);
        assert_eq!(store.conversation_sessions("c2").unwrap(), vec!["f"]);
        assert_eq!(store.conversation_sessions("c3").unwrap(), vec!["b"]);
        // Two sessions naming one conversation (written before ownership was
        // checked) are both listed, by id; a prefix of an id is another id.
        store
            .append_batch(&[named(&event("b", 3), "c1", Naming::Ready)], &[])
            .unwrap();
        assert_eq!(store.conversation_sessions("c1").unwrap(), vec!["a", "b"]);
        assert!(store.conversation_sessions("c").unwrap().is_empty());
        // A cut-down event names it through its whole form.
        let whole = named(&event("w", 1), "c4", Naming::Ready);
        let mut cut = whole.clone();
        cut.payload = None;
        store
            .commit(Commit {
                events: &[cut],
                full: &[whole],
                metas: &[meta("w", 1)],
                ..Commit::default()
            })
            .unwrap();
        assert_eq!(store.conversation_sessions("c4").unwrap(), vec!["w"]);
    }

    pub fn delete_session_removes_everything_of_that_session_only(store: &dyn Store) {
        for id in ["s", "s2", "t"] {
            let whole = named(&event(id, 1), &format!("conv-{id}"), Naming::Ready);
            store
                .commit(Commit {
                    events: std::slice::from_ref(&whole),
                    encoded: &[],
                    full: std::slice::from_ref(&whole),
                    metas: &[meta(id, 1)],
                    receipts: &[
                        ReceiptWrite::Put(receipt(id, "k1", 100)),
                        ReceiptWrite::Put(receipt(id, "k2", 200)),
                    ],
                    transcript: &[],
                    index: &[IndexFold::default().row(id)],
                })
                .unwrap();
            append(store, id, 2, 30);
        }
        let before = store.usage().unwrap();
        assert_eq!((before.sessions, before.events), (3, 90));
        assert_eq!(store.session_count().unwrap(), 3);
        let gone = ReceiptWrite::Put(receipt("s", "delete-key", 300));
        assert!(store.delete_session("s", Some(&gone)).unwrap());
        assert_eq!(store.meta("s").unwrap(), None);
        assert!(store.read_range("s", 0, usize::MAX).unwrap().is_empty());
        assert_eq!(store.read_full("s", 1).unwrap(), None);
        assert_eq!(store.receipt("s", "k1").unwrap(), None);
        assert_eq!(store.receipt("s", "k2").unwrap(), None);
        assert!(store.conversation_sessions("conv-s").unwrap().is_empty());
        let rows = store.index_rows(&["s".into(), "s2".into()]).unwrap();
        assert_eq!((rows[0].is_none(), rows[1].is_some()), (true, true));
        assert!(
            store
                .sessions(None, 10)
                .unwrap()
                .iter()
                .all(|m| m.session_id != "s")
        );
        // The deleting call's receipt is written with the deletion.
        assert_eq!(
            store.receipt("s", "delete-key").unwrap(),
            Some(receipt("s", "delete-key", 300))
        );
        // The others, "s2" included (its id extends "s"), are untouched.
        for id in ["s2", "t"] {
            assert_eq!(store.read_range(id, 0, usize::MAX).unwrap().len(), 30);
            assert!(store.read_full(id, 1).unwrap().is_some());
            assert!(store.receipt(id, "k1").unwrap().is_some());
            assert_eq!(
                store.conversation_sessions(&format!("conv-{id}")).unwrap(),
                vec![id]
            );
        }
        let after = store.usage().unwrap();
        assert_eq!((after.sessions, after.events), (2, 60));
        assert!(after.bytes < before.bytes, "{before:?} -> {after:?}");
        assert_eq!(store.session_count().unwrap(), 2);
        // Pruning still finds the by-time rows of what is left, and none of s's.
        assert_eq!(store.prune_receipts(250, 100).unwrap(), 4);
        assert_eq!(store.receipt_count().unwrap(), 1);
        // Nothing stored: false. A new session under the same id starts at 1.
        assert!(!store.delete_session("s", None).unwrap());
        assert!(!store.delete_session("never", None).unwrap());
        append(store, "s", 1, 2);
        assert_eq!(seqs(&store.read_range("s", 0, 10).unwrap()), vec![1, 2]);
    }

    pub fn heads_are_the_last_stored_seqs_in_the_order_given(store: &dyn Store) {
        append(store, "h1", 1, 3);
        append(store, "h2", 1, 1);
        store.append_batch(&[], &[meta("h3", 0)]).unwrap();
        let ids = ["h2", "never", "h1", "h3"].map(String::from);
        assert_eq!(store.heads(&ids).unwrap(), vec![1, 0, 3, 0]);
        assert!(store.heads(&[]).unwrap().is_empty());
    }

    /// A store other processes write too (it has a commit feed): each
    /// commit names its sessions in the feed, and a commit repeating a
    /// stored (session, seq) is refused whole, as a primary key refuses
    /// it. A store without a feed has nothing to check here.
    pub fn a_shared_store_notices_commits_and_refuses_a_seq_taken(store: &dyn Store) {
        use agent_harness_server::store::CommitNotice;
        let Some(mut feed) = store.commit_notices() else {
            return;
        };
        let batch = [event("b", 1), event("a", 1), event("a", 2)];
        store
            .append_batch(&batch, &[meta("a", 2), meta("b", 1)])
            .unwrap();
        // A notice comes when the commit is durable, on PostgreSQL through
        // its LISTEN connection, after a `Lost` for that connection's start.
        // A commit made before the LISTEN took hold has no notice: the
        // `Lost` tells readers to re-check instead. Then a fresh commit (of a
        // session of its own) must be noticed.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut probes: Vec<String> = Vec::new();
        let mut ids = rt.block_on(async {
            loop {
                match tokio::time::timeout(std::time::Duration::from_secs(10), feed.recv()).await {
                    Ok(Ok(CommitNotice::Sessions(ids))) => break ids,
                    Ok(Ok(CommitNotice::Lost)) if probes.len() < 3 => {
                        let probe = format!("probe{}", probes.len());
                        store
                            .append_batch(&[event(&probe, 1)], &[meta(&probe, 1)])
                            .unwrap();
                        probes.push(probe);
                    }
                    other => panic!("a notice for the commit, got {other:?}"),
                }
            }
        });
        ids.sort();
        assert!(
            ids == ["a", "b"] || (ids.len() == 1 && probes.contains(&ids[0])),
            "the notice names the commit's sessions: {ids:?} (probes {probes:?})"
        );
        // seq 2 of "a" is taken: nothing of the batch is written.
        let again = [event("c", 1), event("a", 2), event("a", 3)];
        assert!(store.append_batch(&again, &[meta("c", 1)]).is_err());
        assert_eq!(seqs(&store.read_range("a", 0, 10).unwrap()), vec![1, 2]);
        assert!(store.read_range("c", 0, 10).unwrap().is_empty());
        assert_eq!(store.meta("c").unwrap(), None);
        assert_eq!(store.read_range("a", 0, 10).unwrap()[1], batch[2]);
        // The next seq goes through.
        append(store, "a", 3, 3);
        assert_eq!(store.heads(&["a".into()]).unwrap(), vec![3]);
    }

    /// The CLI's transcript lines: kept beside the log (never events), in
    /// the order committed per session across commits, with the events of
    /// the same commit or alone, and deleted with their session only.
    pub fn transcript_entries_keep_their_order_beside_the_events(store: &dyn Store) {
        let t = |sid: &str, path: &str, line: &str| TranscriptEntry {
            session_id: sid.into(),
            path: path.into(),
            line: line.into(),
        };
        assert!(store.transcript("a").unwrap().is_empty());
        let first = [
            t("a", "projects/-w/c1.jsonl", r#"{"n":1}"#),
            t("b", "projects/-w/c2.jsonl", r#"{"n":"b1"}"#),
            t("a", "projects/-w/c1.jsonl", r#"{"n":2}"#),
        ];
        store
            .commit(Commit {
                events: &[event("a", 1), event("b", 1)],
                metas: &[meta("a", 1), meta("b", 1)],
                transcript: &first,
                ..Commit::default()
            })
            .unwrap();
        // Alone (the CLI's last frame comes after its result), and a gap.
        let alone = [
            t("a", "projects/-w/c1/subagents/x.jsonl", r#"{"n":3}"#),
            t("a", "projects/-w/c1.jsonl", ""),
        ];
        store
            .commit(Commit {
                transcript: &alone,
                ..Commit::default()
            })
            .unwrap();
        let a = store.transcript("a").unwrap();
        assert_eq!(
            a,
            vec![
                first[0].clone(),
                first[2].clone(),
                alone[0].clone(),
                alone[1].clone()
            ]
        );
        assert_eq!(store.transcript("b").unwrap(), vec![first[1].clone()]);
        assert_eq!(
            store.read_range("a", 0, 10).unwrap(),
            vec![event("a", 1)],
            "never events"
        );
        assert!(store.delete_session("a", None).unwrap());
        assert!(store.transcript("a").unwrap().is_empty());
        assert_eq!(store.transcript("b").unwrap().len(), 1);
    }

    pub fn raw_reads_are_the_rows_undecoded(store: &dyn Store) {
        append(store, "s", 1, 10);
        let raw = store
            .read_range_raw("s", 2, 3, usize::MAX, usize::MAX)
            .unwrap();
        let decoded = store.read_range("s", 2, 3).unwrap();
        assert_eq!(
            raw.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        for ((seq, bytes), e) in raw.iter().zip(&decoded) {
            assert_eq!(*seq, e.seq);
            assert_eq!(&pb::Event::decode(bytes.as_ref()).unwrap(), e);
        }
        let before = store
            .read_before_raw("s", 11, 2, usize::MAX, usize::MAX)
            .unwrap();
        assert_eq!(
            before.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            vec![9, 10]
        );
        // Bounded by bytes as the decoded reads are: at least one row.
        let one = store.read_range_raw("s", 0, 10, 1, usize::MAX).unwrap();
        assert_eq!(one.len(), 1);
        assert!(
            store
                .read_range_raw("nope", 0, 10, usize::MAX, usize::MAX)
                .unwrap()
                .is_empty()
        );
    }

    pub fn empty_batch_with_metas_only_writes_metas(store: &dyn Store) {
        store.append_batch(&[], &[meta("only-meta", 0)]).unwrap();
        assert_eq!(store.meta("only-meta").unwrap(), Some(meta("only-meta", 0)));
        assert!(store.read_range("only-meta", 0, 10).unwrap().is_empty());
    }
}

/// Runs every contract case against a fresh store from `$make`.
macro_rules! contract_suite {
    ($module:ident, $make:expr) => {
        mod $module {
            use super::*;
            macro_rules! case {
                ($name:ident) => {
                    #[test]
                    fn $name() {
                        let (_guard, store) = $make;
                        contract::$name(&store);
                    }
                };
            }
            case!(empty_store_reads_nothing);
            case!(events_round_trip_exactly);
            case!(read_range_is_ascending_bounded_and_exclusive);
            case!(read_before_returns_newest_oldest_first);
            case!(sessions_are_isolated_even_with_prefix_ids);
            case!(metas_put_get_list_and_overwrite);
            case!(empty_batch_with_metas_only_writes_metas);
            case!(head_seq_is_read_from_the_events_not_the_stored_meta);
            case!(receipts_commit_with_events_replace_remove_and_prune);
            case!(the_conversation_index_follows_the_events_that_name_a_conversation);
            case!(delete_session_removes_everything_of_that_session_only);
            case!(heads_are_the_last_stored_seqs_in_the_order_given);
            case!(a_shared_store_notices_commits_and_refuses_a_seq_taken);
            case!(transcript_entries_keep_their_order_beside_the_events);
            case!(raw_reads_are_the_rows_undecoded);
        }
    };
}

contract_suite!(memory, ((), MemoryStore::new()));
contract_suite!(postgres, ((), crate::support::postgres::store()));
contract_suite!(redb_file, {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    (dir, store)
});

/// The log encodes each event once and hands the bytes over with the
/// events: a store that keeps bytes writes those, not an encoding of its
/// own (the bytes here carry an unknown field prost would drop).
#[test]
fn redb_and_postgresql_write_the_encoding_they_are_given() {
    let dir = tempfile::tempdir().unwrap();
    let redb = RedbStore::open(&dir.path().join("agent-harness.redb")).unwrap();
    let pg = crate::support::postgres::store();
    for store in [&redb as &dyn Store, &pg] {
        let e = event("given", 1);
        let mut bytes = prost::Message::encode_to_vec(&e);
        prost::encoding::uint64::encode(99, &7, &mut bytes);
        let given = bytes::Bytes::from(bytes);
        store
            .commit(Commit {
                events: std::slice::from_ref(&e),
                encoded: std::slice::from_ref(&given),
                metas: &[meta("given", 1)],
                ..Commit::default()
            })
            .unwrap();
        let raw = store
            .read_range_raw("given", 0, 10, usize::MAX, usize::MAX)
            .unwrap();
        assert_eq!(raw, vec![(1, given)]);
        assert_eq!(store.read_range("given", 0, 10).unwrap(), vec![e]);
    }
}

#[test]
fn redb_builds_the_conversation_index_of_a_file_written_before_it_existed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-harness.redb");
    {
        // The tables as an older server wrote them: events and metas only.
        const EVENTS: redb::TableDefinition<(&str, u64), &[u8]> =
            redb::TableDefinition::new("events");
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut events = txn.open_table(EVENTS).unwrap();
            for (id, e) in [
                ("a", named(&event("a", 1), "c1", Naming::Started)),
                ("a", named(&event("a", 2), "c1", Naming::Ready)),
                ("f", named(&event("f", 1), "c1", Naming::Fork)),
                ("f", named(&event("f", 2), "c2", Naming::Ready)),
                ("b", event("b", 1)),
            ] {
                let bytes = prost::Message::encode_to_vec(&e);
                events.insert((id, e.seq), bytes.as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(store.conversation_sessions("c1").unwrap(), vec!["a"]);
    assert_eq!(store.conversation_sessions("c2").unwrap(), vec!["f"]);
    // Built once: a reopen keeps it (and what was added since).
    store
        .append_batch(&[named(&event("b", 2), "c3", Naming::Ready)], &[])
        .unwrap();
    drop(store);
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(store.conversation_sessions("c1").unwrap(), vec!["a"]);
    assert_eq!(store.conversation_sessions("c3").unwrap(), vec!["b"]);
}

/// Sessions keep coming, each deleted once `KEEP` newer ones exist (what
/// `--max-sessions` does): the file stops growing, because redb reuses the
/// pages a deletion frees. Without the deletions it grows with every
/// session.
#[test]
fn redb_file_stops_growing_when_old_sessions_are_deleted() {
    const KEEP: usize = 10;
    const ROUNDS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-harness.redb");
    let store = RedbStore::open(&path).unwrap();
    let size = || std::fs::metadata(&path).unwrap().len();
    let mut settled = 0;
    for i in 0..ROUNDS {
        let id = format!("session-{i:04}");
        // 100 events of ~1 KB each: a session of ~100 KB.
        let batch: Vec<_> = (1..=100)
            .map(|seq| pb::Event {
                cli_line: "x".repeat(1000),
                ..event(&id, seq)
            })
            .collect();
        store.append_batch(&batch, &[meta(&id, 100)]).unwrap();
        if i >= KEEP {
            assert!(
                store
                    .delete_session(&format!("session-{:04}", i - KEEP), None)
                    .unwrap()
            );
        }
        if i == ROUNDS / 4 {
            settled = size();
        }
    }
    let usage = store.usage().unwrap();
    assert_eq!(usage.sessions, KEEP as u64);
    assert!(usage.bytes < 2 * 1024 * 1024, "{usage:?}");
    let end = size();
    // 300 more sessions (~30 MB) went through: the file did not take them.
    assert!(
        end <= settled + settled / 4,
        "the file grew from {settled} to {end} bytes"
    );
}

#[test]
fn redb_reopen_keeps_every_acknowledged_event_and_meta() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-harness.redb");
    {
        let store = RedbStore::open(&path).unwrap();
        append(&store, "s1", 1, 500);
        append(&store, "s2", 1, 7);
        store.put_meta(&meta("meta-only", 0)).unwrap();
    }
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(
        store.read_range("s1", 0, usize::MAX).unwrap(),
        (1..=500).map(|s| event("s1", s)).collect::<Vec<_>>()
    );
    assert_eq!(
        seqs(&store.read_range("s2", 0, 100).unwrap()),
        (1..=7).collect::<Vec<_>>()
    );
    // updated_ms is the later of the row's and the last event's time.
    let s1 = SessionMeta {
        updated_ms: (1_700_000_000 + 500) * 1000,
        ..meta("s1", 500)
    };
    assert_eq!(store.meta("s1").unwrap(), Some(s1.clone()));
    assert_eq!(store.meta("meta-only").unwrap(), Some(meta("meta-only", 0)));
    let all = store.sessions(None, usize::MAX).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[1], s1, "sessions() completes metas as meta() does");
    // Pages: ordered by id, strictly after the given one.
    let ids = |p: Vec<SessionMeta>| p.into_iter().map(|m| m.session_id).collect::<Vec<_>>();
    assert_eq!(ids(store.sessions(None, 2).unwrap()), ["meta-only", "s1"]);
    assert_eq!(ids(store.sessions(Some("s1"), 2).unwrap()), ["s2"]);
    assert_eq!(ids(store.sessions(Some("a"), 1).unwrap()), ["meta-only"]);
    assert!(store.sessions(Some("s2"), 10).unwrap().is_empty());
}

// ---------------------------------------------------------------------------
// Crash atomicity: a backend that simulates power loss.
//
// Every write lands in `live` (the page cache). A completed `sync_data` makes
// `live` durable. The crash happens at the N-th sync: that sync never
// completes (the process dies; the backend fails every later call), and what
// survives is the durable state plus an arbitrary subset of the writes issued
// since the last completed sync, because disks reorder and tear unsynced
// writes. Reopening that image must show either all of the interrupted batch
// or none of it, never a part, and metas must agree with events.

/// Writes not yet synced: (offset, bytes).
type Pending = Vec<(usize, Vec<u8>)>;

#[derive(Debug, Default)]
struct CrashState {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Writes since the last completed sync: (offset, bytes).
    unsynced: Pending,
    syncs: u64,
    crash_at: Option<u64>,
    /// Durable bytes and pending writes captured at the crash.
    crashed: Option<(Vec<u8>, Pending)>,
}

#[derive(Debug, Clone, Default)]
struct CrashBackend(Arc<Mutex<CrashState>>);

fn dead() -> std::io::Error {
    std::io::Error::other("simulated power loss")
}

impl CrashBackend {
    fn crashing_at(sync: u64) -> Self {
        let b = Self::default();
        b.0.lock().unwrap().crash_at = Some(sync);
        b
    }

    fn syncs(&self) -> u64 {
        self.0.lock().unwrap().syncs
    }

    /// The bytes that survive: durable state plus the pending writes `keep` selects.
    fn crash_image(&self, keep: impl Fn(usize) -> bool) -> Option<Vec<u8>> {
        let s = self.0.lock().unwrap();
        let (durable, pending) = s.crashed.as_ref()?;
        let mut image = durable.clone();
        for (i, (off, data)) in pending.iter().enumerate() {
            if keep(i) {
                if image.len() < off + data.len() {
                    image.resize(off + data.len(), 0);
                }
                image[*off..off + data.len()].copy_from_slice(data);
            }
        }
        Some(image)
    }
}

impl StorageBackend for CrashBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.0.lock().unwrap().live.len() as u64)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let s = self.0.lock().unwrap();
        let off = offset as usize;
        if off + out.len() > s.live.len() {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        out.copy_from_slice(&s.live[off..off + out.len()]);
        Ok(())
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut s = self.0.lock().unwrap();
        if s.crashed.is_some() {
            return Err(dead());
        }
        s.live.resize(len as usize, 0);
        Ok(())
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        let mut s = self.0.lock().unwrap();
        if s.crashed.is_some() {
            return Err(dead());
        }
        s.syncs += 1;
        if s.crash_at == Some(s.syncs) {
            let pending = std::mem::take(&mut s.unsynced);
            s.crashed = Some((s.durable.clone(), pending));
            return Err(dead());
        }
        s.durable = s.live.clone();
        s.unsynced.clear();
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut s = self.0.lock().unwrap();
        if s.crashed.is_some() {
            return Err(dead());
        }
        let off = offset as usize;
        if s.live.len() < off + data.len() {
            s.live.resize(off + data.len(), 0);
        }
        s.live[off..off + data.len()].copy_from_slice(data);
        s.unsynced.push((off, data.to_vec()));
        Ok(())
    }
}

fn reopen_image(image: Vec<u8>) -> RedbStore {
    let backend = InMemoryBackend::new();
    backend.set_len(image.len() as u64).unwrap();
    backend.write(0, &image).unwrap();
    RedbStore::with_backend(backend).expect("a crashed database must reopen")
}

/// Baseline: two durable commits that the crash never touches.
fn baseline(store: &RedbStore) {
    append(store, "a", 1, 50);
    append(store, "b", 1, 50);
}

/// The batch under test: it touches two sessions and is big enough to grow
/// the file, and carries the receipt of the keyed call that appended it.
fn crash_batch(store: &RedbStore) -> Result<(), agent_harness_server::store::StoreError> {
    let mut batch: Vec<_> = (51..=2000).map(|s| event("a", s)).collect();
    batch.extend((51..=2000).map(|s| event("b", s)));
    let metas = [meta("a", 2000), meta("b", 2000)];
    store.commit(Commit {
        events: &batch,
        metas: &metas,
        receipts: &[ReceiptWrite::Put(receipt("a", "k", 1))],
        ..Commit::default()
    })
}

#[test]
fn crash_mid_commit_leaves_all_or_nothing_of_the_batch() {
    // Pass 1: which syncs belong to the batch's commit?
    let probe = CrashBackend::default();
    let store = RedbStore::with_backend(probe.clone()).unwrap();
    baseline(&store);
    let first = probe.syncs() + 1;
    crash_batch(&store).unwrap();
    let last = probe.syncs();
    drop(store);
    assert!(last >= first, "the commit must sync");
    // Pass 2: crash at each of those syncs, with many torn-write subsets.
    // The workload is deterministic, so sync numbers line up with pass 1.
    let (mut lost, mut kept) = (0, 0);
    for crash_at in first..=last {
        for seed in 0..16u64 {
            let backend = CrashBackend::crashing_at(crash_at);
            let store = RedbStore::with_backend(backend.clone()).unwrap();
            baseline(&store);
            let result = crash_batch(&store);
            drop(store);
            // seed 0: no pending write reached the disk; seed 1: all did;
            // others: a pseudo-random subset (xorshift per write index).
            let Some(image) = backend.crash_image(|i| match seed {
                0 => false,
                1 => true,
                _ => {
                    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1);
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 2 == 0
                }
            }) else {
                panic!("crash point {crash_at} was never reached")
            };
            assert!(
                result.is_err(),
                "a commit whose sync died must not be acknowledged"
            );
            let store = reopen_image(image);
            let a = seqs(&store.read_range("a", 0, usize::MAX).unwrap());
            let b = seqs(&store.read_range("b", 0, usize::MAX).unwrap());
            let head_a = store.meta("a").unwrap().unwrap().head_seq;
            let head_b = store.meta("b").unwrap().unwrap().head_seq;
            let ctx = format!("crash at sync {crash_at}, seed {seed}");
            let old: Vec<u64> = (1..=50).collect();
            let new: Vec<u64> = (1..=2000).collect();
            let receipt_kept = store.receipt("a", "k").unwrap().is_some();
            if a == old && b == old {
                assert_eq!((head_a, head_b), (50, 50), "{ctx}: metas must match events");
                assert!(!receipt_kept, "{ctx}: a receipt without its events");
                lost += 1;
            } else if a == new && b == new {
                assert_eq!(
                    (head_a, head_b),
                    (2000, 2000),
                    "{ctx}: metas must match events"
                );
                assert!(receipt_kept, "{ctx}: events without their receipt");
                kept += 1;
            } else {
                panic!(
                    "{ctx}: half-written batch: a has {}, b has {} events",
                    a.len(),
                    b.len()
                );
            }
        }
    }
    assert!(lost > 0, "the crash cases must include a lost commit");
    eprintln!("syncs {first}..={last}: {lost} crashes lost the batch, {kept} kept it whole");
}

/// Rows that cannot be decoded, written into the file behind the store's
/// back (a damaged disk, an older server): every read goes on. An event
/// that does not decode reads as `unreadable` at its seq (in every read:
/// ranges, pages, the whole form) with its stored bytes kept for
/// `read_full_bytes`, and so does the rest of an events chunk whose framing
/// is damaged; a meta row reads as a meta with nothing recorded; a receipt
/// row as no receipt.
#[test]
fn redb_rows_that_cannot_be_decoded_read_as_unreadable_or_empty() {
    use agent_harness_protocol::pb::event::Payload;
    const CHUNKS: redb::TableDefinition<(&str, u64), &[u8]> =
        redb::TableDefinition::new("event_chunks");
    fn frame(chunk: &mut Vec<u8>, bytes: &[u8]) {
        prost::encoding::encode_varint(bytes.len() as u64, chunk);
        chunk.extend_from_slice(bytes);
    }
    const SESSIONS: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("sessions");
    const RECEIPTS: redb::TableDefinition<(&str, &str), &[u8]> =
        redb::TableDefinition::new("receipts");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent-harness.redb");
    {
        let store = RedbStore::open(&path).unwrap();
        append(&store, "s1", 1, 5);
        append(&store, "s2", 1, 2);
        append(&store, "s3", 1, 1);
        store
            .commit(Commit {
                receipts: &[ReceiptWrite::Put(receipt("s2", "k1", 10))],
                ..Commit::default()
            })
            .unwrap();
    }
    let garbage: &[u8] = &[0xff, 0xff, 0xff, 0x0f, 0x2a];
    {
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut events = txn.open_table(CHUNKS).unwrap();
            // s1's one chunk, its third event replaced by garbage.
            let mut chunk = Vec::new();
            for seq in 1..=5 {
                let e = prost::Message::encode_to_vec(&event("s1", seq));
                frame(&mut chunk, if seq == 3 { garbage } else { &e });
            }
            events.insert(("s1", 1), chunk.as_slice()).unwrap();
            // s3's chunk: a second frame whose length runs past the row.
            let mut chunk = Vec::new();
            frame(&mut chunk, &prost::Message::encode_to_vec(&event("s3", 1)));
            chunk.extend_from_slice(&[0x7f, 1, 2, 3]);
            events.insert(("s3", 1), chunk.as_slice()).unwrap();
            let mut sessions = txn.open_table(SESSIONS).unwrap();
            sessions.insert("s2", b"{not json".as_slice()).unwrap();
            let mut receipts = txn.open_table(RECEIPTS).unwrap();
            receipts.insert(("s2", "k1"), b"[1,".as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = RedbStore::open(&path).unwrap();
    let unreadable = |e: &agent_harness_protocol::pb::Event| {
        assert_eq!((e.session_id.as_str(), e.seq), ("s1", 3));
        let Some(Payload::Unreadable(u)) = &e.payload else {
            panic!("{e:?}")
        };
        assert_eq!(u.size, garbage.len() as u64);
        assert!(!u.reason.is_empty());
    };
    let all = store.read_range("s1", 0, usize::MAX).unwrap();
    assert_eq!(seqs(&all), vec![1, 2, 3, 4, 5]);
    unreadable(&all[2]);
    assert_eq!(all[3], event("s1", 4), "the rows after it read as ever");
    unreadable(&store.read_before("s1", 4, 1).unwrap()[0]);
    unreadable(&store.read_full("s1", 3).unwrap().unwrap());
    assert_eq!(
        store.read_full_bytes("s1", 3).unwrap().as_deref(),
        Some(garbage)
    );
    assert_eq!(store.meta("s1").unwrap().unwrap().head_seq, 5);
    // The damaged meta: the session still lists, with its head.
    let s2 = store.meta("s2").unwrap().expect("s2 is still a session");
    assert_eq!((s2.head_seq, s2.sealed_env.as_deref()), (2, None));
    let listed: Vec<_> = store
        .sessions(None, 10)
        .unwrap()
        .into_iter()
        .map(|m| (m.session_id, m.head_seq))
        .collect();
    assert_eq!(
        listed,
        vec![
            ("s1".to_owned(), 5),
            ("s2".to_owned(), 2),
            ("s3".to_owned(), 2)
        ]
    );
    // s3: its first event as ever, the damaged rest as one unreadable event.
    let s3 = store.read_range("s3", 0, usize::MAX).unwrap();
    assert_eq!(s3[0], event("s3", 1));
    assert_eq!(seqs(&s3), vec![1, 2]);
    assert!(
        matches!(&s3[1].payload, Some(Payload::Unreadable(u)) if u.size == 4),
        "{:?}",
        s3[1]
    );
    assert_eq!(
        store.read_full_bytes("s3", 2).unwrap().as_deref(),
        Some(&[0x7f, 1, 2, 3][..])
    );
    // The damaged receipt: as if the key were new; replacing it works.
    assert_eq!(store.receipt("s2", "k1").unwrap(), None);
    store
        .commit(Commit {
            receipts: &[ReceiptWrite::Put(receipt("s2", "k1", 20))],
            ..Commit::default()
        })
        .unwrap();
    assert_eq!(
        store.receipt("s2", "k1").unwrap(),
        Some(receipt("s2", "k1", 20))
    );
}
