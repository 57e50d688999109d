//! The write transactions of the redb store: a commit (events, metas,
//! receipts and the conversation index together) and a session's deletion.
//!
//! A commit of a store on a file is [`fill`]ed into a transaction that
//! [`super::wal`] commits behind its log's record, without a sync; what
//! follows is the cost of a durable redb commit, which the log's
//! checkpoints, a deletion, and a store on a custom backend still pay.
//!
//! **What a durable commit costs.** redb's copy-on-write B-tree rewrites, per
//! commit, every leaf the batch touches and the branches above it, the
//! table tree naming the changed roots, its own freed-page record and
//! system tree, and the 320-byte header: one `pwrite` per 4 KiB page and
//! one `fdatasync` (a 1-phase commit with checksums, redb's default; quick
//! repair, which saves the allocator state on every commit, stays off). An
//! events-only commit to one session writes about 6.9 pages plus the header,
//! and its session index row one more page. A batch over many sessions
//! writes at least one events leaf per session (keys are `(session, seq)`),
//! so about 200 pages for 100 sessions, the index rows about 27 of them.
//! The time is the `fdatasync`: the `pwrite`s and the B-tree work are a
//! few percent of it. On a contended disk a sync of 1 to 28 scattered pages
//! costs the same as a sync of one, and 200 pages cost two to three times
//! that, so merging tables saves little at one session; what would cut the
//! many-session commit is a layout where a batch touches a few leaves
//! whatever the number of sessions (an append-ordered log), not fewer
//! tables: the write-ahead log is that layout for the sync. The events of
//! a batch go in as one chunk per session (see [`super::chunks`]): one
//! B-tree insert per session a commit touches, not one per event.

use ::redb::{Database, Durability, ReadableTable};
use agent_harness_protocol::pb;
use prost::Message;

use super::super::conversations::{self, Naming};
use super::super::receipt;
use super::super::{Commit, ReceiptWrite, StoreError};
use super::chunks::{self, Chunker, EVENT_CHUNKS};
use super::{
    CONVERSATIONS, FULL_EVENTS, RECEIPTS, RECEIPTS_BY_TIME, SESSION_CONVERSATIONS, SESSIONS,
    TRANSCRIPTS, encode_meta, rerr,
};

/// Commits `commit` as one durable redb transaction of its own (a store
/// without a write-ahead log: one on a custom backend).
pub(super) fn commit_batch(db: &Database, commit: Commit<'_>) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(rerr)?;
    txn.set_durability(Durability::Immediate).map_err(rerr)?;
    fill(&txn, commit)?;
    // Dropping `txn` on any error above aborts it: nothing of the batch lands.
    txn.commit().map_err(rerr)
}

/// Writes `commit` into `txn`: events, metas, receipts, transcript and
/// index rows (an event from the caller's encoding when it has one).
pub(super) fn fill(txn: &::redb::WriteTransaction, commit: Commit<'_>) -> Result<(), StoreError> {
    let Commit {
        events: batch,
        encoded,
        full,
        metas,
        receipts,
        transcript,
        index,
    } = commit;
    {
        let mut buf = Vec::with_capacity(512);
        let encode = |ev: &pb::Event, buf: &mut Vec<u8>| {
            buf.clear();
            ev.encode(buf)
                .map_err(|e| StoreError::Rejected(e.to_string()))
        };
        if !full.is_empty() {
            let mut whole = txn.open_table(FULL_EVENTS).map_err(rerr)?;
            for ev in full {
                encode(ev, &mut buf)?;
                whole
                    .insert((ev.session_id.as_str(), ev.seq), buf.as_slice())
                    .map_err(rerr)?;
            }
        }
        let mut events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
        let mut chunker = Chunker::new();
        for (i, ev) in batch.iter().enumerate() {
            // Encoded once by the log, for its window as well.
            let bytes = match encoded.get(i) {
                Some(bytes) => bytes.as_ref(),
                None => {
                    encode(ev, &mut buf)?;
                    buf.as_slice()
                }
            };
            chunker.push(&mut events, &ev.session_id, ev.seq, bytes)?;
        }
        chunker.flush(&mut events)?;
        let mut sessions = txn.open_table(SESSIONS).map_err(rerr)?;
        for m in metas {
            let row = encode_meta(m);
            sessions
                .insert(m.session_id.as_str(), row.as_slice())
                .map_err(rerr)?;
        }
    }
    for ev in batch.iter().chain(full) {
        if let Some(id) = conversations::named(ev) {
            index_conversation(txn, id, &ev.session_id)?;
        }
    }
    if !receipts.is_empty() {
        write_receipts(txn, receipts)?;
    }
    if !transcript.is_empty() {
        let mut table = txn.open_table(TRANSCRIPTS).map_err(rerr)?;
        for t in transcript {
            let sid = t.session_id.as_str();
            let last = table
                .range((sid, 0)..=(sid, u64::MAX))
                .map_err(rerr)?
                .next_back()
                .transpose()
                .map_err(rerr)?
                .map_or(0, |(k, _)| k.value().1);
            let row = format!("{}\n{}", t.path, t.line);
            table
                .insert((sid, last + 1), row.as_bytes())
                .map_err(rerr)?;
        }
    }
    super::index::put_rows(txn, index, false)?;
    Ok(())
}

/// Records that `session_id`'s log names conversation `resume_id`.
pub(super) fn index_conversation(
    txn: &::redb::WriteTransaction,
    resume_id: &str,
    session_id: &str,
) -> Result<(), StoreError> {
    txn.open_table(CONVERSATIONS)
        .map_err(rerr)?
        .insert((resume_id, session_id), ())
        .map_err(rerr)?;
    txn.open_table(SESSION_CONVERSATIONS)
        .map_err(rerr)?
        .insert((session_id, resume_id), ())
        .map_err(rerr)?;
    Ok(())
}

/// Builds the conversation index from every stored event (a file written
/// before the index existed), in the opening transaction.
pub(super) fn index_conversations(txn: &::redb::WriteTransaction) -> Result<(), StoreError> {
    let mut named = Vec::new();
    {
        let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
        chunks::each(&events, |sid, _, bytes| {
            if let Some(id) = Naming::of(bytes) {
                named.push((id, sid.to_owned()));
            }
        })?;
    }
    for (resume_id, session_id) in &named {
        index_conversation(txn, resume_id, session_id)?;
    }
    if !named.is_empty() {
        tracing::info!(
            rows = named.len(),
            "conversation index built from the stored events"
        );
    }
    Ok(())
}

/// Deletes every row of `session_id` in one transaction (see
/// [`Store::delete_session`]).
pub(super) fn delete_session(
    db: &Database,
    session_id: &str,
    receipt: Option<&ReceiptWrite>,
) -> Result<bool, StoreError> {
    let sid = session_id;
    let mut txn = db.begin_write().map_err(rerr)?;
    txn.set_durability(Durability::Immediate).map_err(rerr)?;
    let existed = {
        let all = (sid, 0)..=(sid, u64::MAX);
        let mut events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
        let had_events = events.range(all.clone()).map_err(rerr)?.next().is_some();
        events.retain_in(all.clone(), |_, _| false).map_err(rerr)?;
        let mut whole = txn.open_table(FULL_EVENTS).map_err(rerr)?;
        whole.retain_in(all.clone(), |_, _| false).map_err(rerr)?;
        let mut transcripts = txn.open_table(TRANSCRIPTS).map_err(rerr)?;
        transcripts.retain_in(all, |_, _| false).map_err(rerr)?;
        let mut sessions = txn.open_table(SESSIONS).map_err(rerr)?;
        let had_meta = sessions.remove(sid).map_err(rerr)?.is_some();
        let mut index = txn.open_table(super::index::SESSION_INDEX).map_err(rerr)?;
        index.remove(sid).map_err(rerr)?;
        // Receipts: `(sid, key)` rows are contiguous; each takes its by-time row along.
        let mut receipts = txn.open_table(RECEIPTS).map_err(rerr)?;
        let mut keyed = Vec::new();
        for row in receipts.range((sid, "")..).map_err(rerr)? {
            let (k, v) = row.map_err(rerr)?;
            if k.value().0 != sid {
                break;
            }
            let created = receipt::decode(sid, v.value()).map(|r| r.created_ms);
            keyed.push((k.value().1.to_owned(), created));
        }
        let mut by_time = txn.open_table(RECEIPTS_BY_TIME).map_err(rerr)?;
        for (key, created) in &keyed {
            receipts.remove((sid, key.as_str())).map_err(rerr)?;
            if let Some(t) = created {
                by_time.remove((*t, sid, key.as_str())).map_err(rerr)?;
            }
        }
        let mut mine = txn.open_table(SESSION_CONVERSATIONS).map_err(rerr)?;
        let mut named = Vec::new();
        for row in mine.range((sid, "")..).map_err(rerr)? {
            let (k, _) = row.map_err(rerr)?;
            if k.value().0 != sid {
                break;
            }
            named.push(k.value().1.to_owned());
        }
        let mut by_conversation = txn.open_table(CONVERSATIONS).map_err(rerr)?;
        for resume_id in &named {
            mine.remove((sid, resume_id.as_str())).map_err(rerr)?;
            by_conversation
                .remove((resume_id.as_str(), sid))
                .map_err(rerr)?;
        }
        had_events || had_meta
    };
    if let Some(w) = receipt {
        write_receipts(&txn, std::slice::from_ref(w))?;
    }
    txn.commit().map_err(rerr)?;
    Ok(existed)
}

/// Applies receipt writes inside a write transaction, keeping the by-time
/// index in step (a replaced or removed receipt takes its index row along).
pub(super) fn write_receipts(
    txn: &::redb::WriteTransaction,
    writes: &[ReceiptWrite],
) -> Result<(), StoreError> {
    let mut receipts = txn.open_table(RECEIPTS).map_err(rerr)?;
    let mut by_time = txn.open_table(RECEIPTS_BY_TIME).map_err(rerr)?;
    for w in writes {
        let (session_id, key, new) = match w {
            ReceiptWrite::Put(r) => (r.session_id.as_str(), r.key.as_str(), Some(r)),
            ReceiptWrite::Remove { session_id, key } => (session_id.as_str(), key.as_str(), None),
        };
        let old = match new {
            Some(r) => receipts
                .insert((session_id, key), receipt::encode(r).as_slice())
                .map_err(rerr)?
                .and_then(|v| receipt::decode(session_id, v.value())),
            None => receipts
                .remove((session_id, key))
                .map_err(rerr)?
                .and_then(|v| receipt::decode(session_id, v.value())),
        };
        if let Some(old) = old {
            by_time
                .remove((old.created_ms, session_id, key))
                .map_err(rerr)?;
        }
        if let Some(r) = new {
            by_time
                .insert((r.created_ms, session_id, key), ())
                .map_err(rerr)?;
        }
    }
    Ok(())
}
