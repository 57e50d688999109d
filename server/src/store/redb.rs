//! redb-backed [`Store`]: one file, `<data-dir>/agent-harness.redb`.
//!
//! Tables are typed `const TableDefinition`s. Events are keyed by
//! `(session_id, seq)`, so one session's events are one contiguous key range
//! and a range scan is a replay. Every [`Store::append_batch`] is one write
//! transaction with `Durability::Immediate`: the log's writer thread batches
//! many appends into it (group commit), so there is one fsync per batch, not
//! per event. Metas are written only when they change; the head of a
//! session is read back as the last key of its range in the events table.
//! Receipts live in two tables written together: by `(session_id, key)` for
//! the lookup of a repeat, and by creation time for pruning, so a prune
//! pass reads only what it deletes.

use std::path::Path;

use ::redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, StorageBackend,
    TableDefinition,
};
use agent_harness_client::pb;
use prost::Message;

use super::receipt;
use super::{Receipt, ReceiptWrite, SessionMeta, Store, StoreError};

/// `(session_id, seq) -> prost-encoded pb::Event`.
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
/// `session_id -> JSON-encoded SessionMeta` (tiny, rarely written, easy to inspect).
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// `(session_id, idempotency_key) -> JSON-encoded Receipt`.
const RECEIPTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("receipts");
/// `(created_ms, session_id, idempotency_key) -> ()`: the receipts by age,
/// so pruning is a range scan from the oldest.
const RECEIPTS_BY_TIME: TableDefinition<(i64, &str, &str), ()> =
    TableDefinition::new("receipts_by_time");

/// The redb [`Store`].
#[derive(Debug)]
pub struct RedbStore {
    db: Database,
}

/// Converts any redb error into [`StoreError`] (they all fold into `redb::Error`).
fn rerr(e: impl Into<::redb::Error>) -> StoreError {
    StoreError::Redb(e.into())
}

impl RedbStore {
    /// Opens (or creates) the database file at `path`; its parent directory
    /// must exist. Recovers from an unclean shutdown as redb does: the last
    /// committed transaction wins, a torn one is discarded.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let db = Database::create(path).map_err(rerr)?;
        Self::init(db)
    }

    /// Opens a database on a custom redb backend. Crash tests use this with
    /// a backend that simulates power loss; the server uses [`RedbStore::open`].
    pub fn with_backend(backend: impl StorageBackend) -> Result<Self, StoreError> {
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(rerr)?;
        Self::init(db)
    }

    /// Creates every table up front (also in a file written before a table
    /// existed) so readers never see "table does not exist".
    fn init(db: Database) -> Result<Self, StoreError> {
        let txn = db.begin_write().map_err(rerr)?;
        txn.open_table(EVENTS).map_err(rerr)?;
        txn.open_table(SESSIONS).map_err(rerr)?;
        txn.open_table(RECEIPTS).map_err(rerr)?;
        txn.open_table(RECEIPTS_BY_TIME).map_err(rerr)?;
        txn.commit().map_err(rerr)?;
        Ok(Self { db })
    }
}

fn decode_event(session_id: &str, bytes: &[u8]) -> Result<pb::Event, StoreError> {
    pb::Event::decode(bytes).map_err(|e| StoreError::Corrupt {
        session_id: session_id.to_owned(),
        reason: e.to_string(),
    })
}

fn decode_meta(session_id: &str, bytes: &[u8]) -> Result<SessionMeta, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        session_id: session_id.to_owned(),
        reason: e.to_string(),
    })
}

/// The last stored seq of `session_id` (0 when it has no events): one
/// B-tree descent to the end of the session's key range, no value decoded.
fn last_seq(
    events: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    session_id: &str,
) -> Result<u64, StoreError> {
    let last = events
        .range((session_id, 0)..=(session_id, u64::MAX))
        .map_err(rerr)?
        .next_back()
        .transpose()
        .map_err(rerr)?;
    Ok(last.map_or(0, |(k, _)| k.value().1))
}

fn encode_meta(meta: &SessionMeta) -> Vec<u8> {
    // Serializing a plain struct of strings and integers cannot fail.
    serde_json::to_vec(meta).unwrap_or_default()
}

/// Applies receipt writes inside a write transaction, keeping the by-time
/// index in step (a replaced or removed receipt takes its index row along).
fn write_receipts(
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
                .map(|v| receipt::decode(session_id, v.value())),
            None => receipts
                .remove((session_id, key))
                .map_err(rerr)?
                .map(|v| receipt::decode(session_id, v.value())),
        };
        if let Some(old) = old.transpose()? {
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

impl Store for RedbStore {
    fn commit(
        &self,
        batch: &[pb::Event],
        metas: &[SessionMeta],
        receipts: &[ReceiptWrite],
    ) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(rerr)?;
        txn.set_durability(Durability::Immediate).map_err(rerr)?;
        {
            let mut events = txn.open_table(EVENTS).map_err(rerr)?;
            let mut buf = Vec::with_capacity(512);
            for ev in batch {
                buf.clear();
                ev.encode(&mut buf)
                    .map_err(|e| StoreError::Rejected(e.to_string()))?;
                events
                    .insert((ev.session_id.as_str(), ev.seq), buf.as_slice())
                    .map_err(rerr)?;
            }
            let mut sessions = txn.open_table(SESSIONS).map_err(rerr)?;
            for m in metas {
                sessions
                    .insert(m.session_id.as_str(), encode_meta(m).as_slice())
                    .map_err(rerr)?;
            }
        }
        if !receipts.is_empty() {
            write_receipts(&txn, receipts)?;
        }
        // Dropping `txn` on any error above aborts it: nothing of the batch lands.
        txn.commit().map_err(rerr)
    }

    fn read_range(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        let Some(start) = after_seq.checked_add(1) else {
            return Ok(Vec::new());
        };
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(EVENTS).map_err(rerr)?;
        let mut out = Vec::new();
        for row in table
            .range((session_id, start)..=(session_id, u64::MAX))
            .map_err(rerr)?
            .take(limit)
        {
            let (_, v) = row.map_err(rerr)?;
            out.push(decode_event(session_id, v.value())?);
        }
        Ok(out)
    }

    fn read_before(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
    ) -> Result<Vec<pb::Event>, StoreError> {
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(EVENTS).map_err(rerr)?;
        let mut out = Vec::new();
        for row in table
            .range((session_id, 0)..(session_id, before_seq))
            .map_err(rerr)?
            .rev()
            .take(limit)
        {
            let (_, v) = row.map_err(rerr)?;
            out.push(decode_event(session_id, v.value())?);
        }
        out.reverse();
        Ok(out)
    }

    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(SESSIONS).map_err(rerr)?;
        let events = txn.open_table(EVENTS).map_err(rerr)?;
        match table.get(session_id).map_err(rerr)? {
            Some(v) => {
                let mut meta = decode_meta(session_id, v.value())?;
                meta.head_seq = last_seq(&events, session_id)?;
                Ok(Some(meta))
            }
            None => Ok(None),
        }
    }

    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        self.append_batch(&[], std::slice::from_ref(meta))
    }

    fn sessions(&self) -> Result<Vec<SessionMeta>, StoreError> {
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(SESSIONS).map_err(rerr)?;
        let events = txn.open_table(EVENTS).map_err(rerr)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(rerr)? {
            let (k, v) = row.map_err(rerr)?;
            let mut meta = decode_meta(k.value(), v.value())?;
            meta.head_seq = last_seq(&events, k.value())?;
            out.push(meta);
        }
        Ok(out)
    }

    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError> {
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(RECEIPTS).map_err(rerr)?;
        match table.get((session_id, key)).map_err(rerr)? {
            Some(v) => Ok(Some(receipt::decode(session_id, v.value())?)),
            None => Ok(None),
        }
    }

    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        let mut txn = self.db.begin_write().map_err(rerr)?;
        txn.set_durability(Durability::Immediate).map_err(rerr)?;
        let pruned = {
            let mut receipts = txn.open_table(RECEIPTS).map_err(rerr)?;
            let mut by_time = txn.open_table(RECEIPTS_BY_TIME).map_err(rerr)?;
            let mut expired = Vec::new();
            for row in by_time
                .range(..(before_ms, "", ""))
                .map_err(rerr)?
                .take(limit)
            {
                let (k, _) = row.map_err(rerr)?;
                let (t, s, key) = k.value();
                expired.push((t, s.to_owned(), key.to_owned()));
            }
            for (t, s, key) in &expired {
                by_time
                    .remove((*t, s.as_str(), key.as_str()))
                    .map_err(rerr)?;
                receipts.remove((s.as_str(), key.as_str())).map_err(rerr)?;
            }
            expired.len()
        };
        if pruned == 0 {
            txn.abort().map_err(rerr)?;
            return Ok(0);
        }
        txn.commit().map_err(rerr)?;
        Ok(pruned)
    }

    fn receipt_count(&self) -> Result<usize, StoreError> {
        let txn = self.db.begin_read().map_err(rerr)?;
        let table = txn.open_table(RECEIPTS).map_err(rerr)?;
        Ok(usize::try_from(table.len().map_err(rerr)?).unwrap_or(usize::MAX))
    }
}
