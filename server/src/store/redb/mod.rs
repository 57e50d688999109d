//! redb-backed [`Store`]: one file, `<data-dir>/agent-harness.redb`.
//!
//! Tables are typed `const TableDefinition`s. Events are stored in chunks
//! keyed by `(session_id, first seq)` (see [`chunks`]): one row per run of
//! a session's consecutive events that one commit wrote, so one session's
//! events are one contiguous key range and a range scan is a replay. Every
//! commit is one write transaction: the log's writer thread batches many
//! appends into it (group commit), made durable by one append to the
//! write-ahead log (see [`wal`]), so there is one sync per batch, not per
//! event. Metas are written only when they change; the head of a session
//! is read back as the last event of its last chunk.
//! Receipts live in two tables written together: by `(session_id, key)` for
//! the lookup of a repeat, and by creation time for pruning, so a prune
//! pass reads only what it deletes. The conversation index
//! ([`super::conversations`]) is two tables the same way, by conversation
//! for the ownership check and by session for deleting a session; a
//! deletion is one transaction over every table.
//!
//! **A row that cannot be decoded never fails a read**: an event reads
//! as an `unreadable` event at its seq (see [`super::decode_event`]; its
//! bytes stay readable through [`Store::read_full_bytes`]), a meta row as a
//! meta with nothing recorded, a receipt row as no receipt, each with a
//! warning. One bad row must not take its session (or, through recovery,
//! the whole server) down with it.
//!
//! **After an I/O error** (a full disk, a failing device) redb refuses every
//! later operation, reads included, until the database is closed and opened
//! again. So the store marks itself broken on such an error and, on the
//! next call, closes and reopens the file (redb repairs it to the last
//! committed transaction); while that fails (the disk is still full) calls
//! fail and are retried on the next one. A store made on a custom backend
//! cannot be reopened and stays failed.

mod backend;
mod chunks;
mod format;
mod index;
mod open;
mod wal;
mod write;

/// The format of the redb store this binary reads and writes (see `format`).
pub use self::format::CURRENT as REDB_FORMAT;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use ::redb::{
    Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, StorageBackend,
    TableDefinition,
};
use agent_harness_protocol::pb;
use prost::Message;

use self::open::{init, open_file};
use self::write::{commit_batch, delete_session};
use super::receipt;
use super::{
    Commit, IndexRow, ListPage, ListQuery, RawEvent, Receipt, ReceiptWrite, SessionMeta, Store,
    StoreError, StoreUsage, TranscriptEntry, decode_event,
};

use self::chunks::{Bound, EVENT_CHUNKS};
/// `(session_id, seq) -> prost-encoded pb::Event`, the whole form of each
/// event that `events` holds cut down (over the per-event budget): what
/// `ReadFullEvent` streams. Rows exist only for cut events.
const FULL_EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("full_events");
/// `session_id -> JSON-encoded SessionMeta` (tiny, rarely written, easy to inspect).
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// `(session_id, idempotency_key) -> JSON-encoded Receipt`.
const RECEIPTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("receipts");
/// `(created_ms, session_id, idempotency_key) -> ()`: the receipts by age,
/// so pruning is a range scan from the oldest.
const RECEIPTS_BY_TIME: TableDefinition<(i64, &str, &str), ()> =
    TableDefinition::new("receipts_by_time");
/// `(resume_id, session_id) -> ()`: the sessions whose log names a CLI
/// conversation (see [`conversations`]).
const CONVERSATIONS: TableDefinition<(&str, &str), ()> = TableDefinition::new("conversations");
/// `(session_id, resume_id) -> ()`: the same rows by session, so deleting a
/// session finds its rows without reading its events.
const SESSION_CONVERSATIONS: TableDefinition<(&str, &str), ()> =
    TableDefinition::new("session_conversations");
/// `(session_id, n) -> path, a newline, line`: the session's transcript
/// entries (see [`super::transcript`]), `n` counting from 1 in commit order.
const TRANSCRIPTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("transcripts");

/// The redb [`Store`].
#[derive(Debug)]
pub struct RedbStore {
    /// `None` only between closing a broken database and reopening it.
    db: RwLock<Option<Open>>,
    /// The file, to reopen after an I/O error (`None`: a custom backend).
    path: Option<PathBuf>,
    /// redb's page cache size, bytes (also for a reopen).
    cache_bytes: usize,
    /// Set by an I/O error; the next call reopens the database.
    broken: AtomicBool,
    /// A checkpoint of the write-ahead log once it holds this many bytes.
    checkpoint_bytes: u64,
}

/// The open database and its write-ahead log.
#[derive(Debug)]
struct Open {
    db: Database,
    /// `None` on a custom backend: commits are then durable redb commits.
    wal: Option<Mutex<wal::Wal>>,
}

/// Default size of redb's page cache (`--store-cache-bytes`). Half of it
/// at most is redb's write buffer, whose pages reach the file only at a
/// checkpoint: a cache well under a generation of the write-ahead log lets
/// redb write its pages between checkpoints, where the backend syncs them
/// early, so a checkpoint no longer stalls commits while it writes them
/// all (and the server holds less memory).
pub const DEFAULT_PAGE_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// Converts any redb error into [`StoreError`] (they all fold into `redb::Error`).
fn rerr(e: impl Into<::redb::Error>) -> StoreError {
    StoreError::Redb(e.into())
}

impl RedbStore {
    /// Opens (or creates) the database file at `path`, mode 0600 (a looser
    /// existing file is made 0600); its parent directory must exist. Recovers from an unclean shutdown as redb does: the last
    /// committed transaction wins, a torn one is discarded.
    ///
    /// redb's page cache holds at most [`DEFAULT_PAGE_CACHE_BYTES`] (redb's own
    /// default is 1 GiB, which memory would grow into as data is read);
    /// [`RedbStore::open_with_cache`] sets it.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(path, DEFAULT_PAGE_CACHE_BYTES)
    }

    /// [`RedbStore::open`] with a page cache of `cache_bytes`.
    pub fn open_with_cache(path: &Path, cache_bytes: usize) -> Result<Self, StoreError> {
        Self::open_with(path, cache_bytes, wal::CHECKPOINT_BYTES)
    }

    /// [`RedbStore::open_with_cache`] checkpointing its write-ahead log
    /// every `checkpoint_bytes` (tests).
    fn open_with(
        path: &Path,
        cache_bytes: usize,
        checkpoint_bytes: u64,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            db: RwLock::new(Some(open_file(path, cache_bytes, checkpoint_bytes)?)),
            path: Some(path.to_owned()),
            cache_bytes,
            broken: AtomicBool::new(false),
            checkpoint_bytes,
        })
    }

    /// Opens a database on a custom redb backend. Crash tests use this with
    /// a backend that simulates power loss; the server uses [`RedbStore::open`].
    pub fn with_backend(backend: impl StorageBackend) -> Result<Self, StoreError> {
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(rerr)?;
        init(&db, "(custom backend)")?;
        Ok(Self {
            db: RwLock::new(Some(Open { db, wal: None })),
            path: None,
            cache_bytes: DEFAULT_PAGE_CACHE_BYTES,
            broken: AtomicBool::new(false),
            checkpoint_bytes: wal::CHECKPOINT_BYTES,
        })
    }

    /// The format number recorded in the store (see [`format`]); `None`
    /// only for a file no release has opened yet.
    pub fn format_version(&self) -> Result<Option<u64>, StoreError> {
        self.with_db(|db| format::read(&db.begin_read().map_err(rerr)?))
    }

    /// The database, reopened first if an I/O error broke it.
    fn db(&self) -> Result<RwLockReadGuard<'_, Option<Open>>, StoreError> {
        if self.broken.load(Ordering::Acquire) {
            self.reopen()?;
        }
        Ok(self.db.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Closes the broken database and opens its file again.
    fn reopen(&self) -> Result<(), StoreError> {
        let Some(path) = &self.path else {
            return Ok(()); // a custom backend: its errors stay
        };
        let mut db = self.db.write().unwrap_or_else(|p| p.into_inner());
        if !self.broken.load(Ordering::Acquire) {
            return Ok(()); // another call reopened it meanwhile
        }
        // redb allows one open handle per file: close the old one first.
        drop(db.take());
        let fresh = open_file(path, self.cache_bytes, self.checkpoint_bytes)?;
        tracing::warn!(path = %path.display(), "event store reopened after an I/O error");
        *db = Some(fresh);
        self.broken.store(false, Ordering::Release);
        Ok(())
    }

    /// The events after `after_seq`, oldest first, within `bound`.
    fn read_forward(
        &self,
        session_id: &str,
        after_seq: u64,
        bound: Bound,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let Some(start) = after_seq.checked_add(1) else {
            return Ok(Vec::new());
        };
        self.with_db(|db| scan(db, session_id, start..=u64::MAX, false, bound))
    }

    /// Runs `f` on the database; an I/O error marks the store broken, so
    /// the next call reopens it.
    fn with_db<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_open(|open| f(&open.db))
    }

    /// [`RedbStore::with_db`] with the log as well.
    fn with_open<T>(
        &self,
        f: impl FnOnce(&Open) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let guard = self.db()?;
        let open = guard.as_ref().ok_or_else(|| {
            StoreError::Rejected("the event store is closed after an I/O error".into())
        })?;
        let out = f(open);
        if let Err(StoreError::Redb(::redb::Error::Io(_) | ::redb::Error::PreviousIo)) = &out {
            self.broken.store(true, Ordering::Release);
        }
        out
    }
}

/// A clean close checkpoints the log, so the store file alone holds every
/// commit (a copy of a stopped server's file is complete).
impl Drop for RedbStore {
    fn drop(&mut self) {
        let open = self.db.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(Open { db, wal: Some(wal) }) = open {
            let wal = wal.get_mut().unwrap_or_else(|p| p.into_inner());
            if wal.holds_records() {
                if let Err(e) = wal.checkpoint(db) {
                    tracing::warn!(error = %e, "the event store's last checkpoint failed; its write-ahead log has the commits");
                }
            }
        }
    }
}

/// A stored meta; a row that cannot be decoded reads as a meta with
/// nothing recorded (no resume id, process or env), so the session still
/// lists, loads and recovers from its events.
fn decode_meta(session_id: &str, bytes: &[u8]) -> SessionMeta {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        tracing::warn!(session_id, error = %e, "stored session meta cannot be decoded; read as empty");
        SessionMeta::new(session_id, 0)
    })
}

/// The two fields of a stored event a meta needs: prost skips the rest
/// (a length-delimited field is skipped without being parsed).
#[derive(Clone, PartialEq, prost::Message)]
struct EventStamp {
    #[prost(message, optional, tag = "4")]
    time: Option<pbjson_types::Timestamp>,
}

/// Fills `meta.head_seq` with the last stored seq of its session (0 when it
/// has no events) and brings `updated_ms` up to that event's time: one
/// B-tree descent to the end of the session's key range.
fn complete(
    events: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    meta: &mut SessionMeta,
) -> Result<(), StoreError> {
    meta.head_seq = 0;
    if let Some((seq, bytes)) = chunks::last(events, &meta.session_id)? {
        meta.head_seq = seq;
        // A row whose stamp cannot be read adds no time.
        let stamp = EventStamp::decode(bytes.as_slice()).unwrap_or_default();
        meta.updated_ms = meta
            .updated_ms
            .max(super::event_time_ms(stamp.time.as_ref()));
    }
    Ok(())
}

fn encode_meta(meta: &SessionMeta) -> Vec<u8> {
    // Serializing a plain struct of strings and integers cannot fail.
    serde_json::to_vec(meta).unwrap_or_default()
}

impl Store for RedbStore {
    fn commit(&self, commit: Commit<'_>) -> Result<(), StoreError> {
        self.with_open(|open| match &open.wal {
            Some(wal) => wal
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .commit(&open.db, commit),
            None => commit_batch(&open.db, commit),
        })
    }

    fn receipt(&self, session_id: &str, key: &str) -> Result<Option<Receipt>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let table = txn.open_table(RECEIPTS).map_err(rerr)?;
            match table.get((session_id, key)).map_err(rerr)? {
                Some(v) => Ok(receipt::decode(session_id, v.value())),
                None => Ok(None),
            }
        })
    }

    fn prune_receipts(&self, before_ms: i64, limit: usize) -> Result<usize, StoreError> {
        self.with_db(|db| {
            let mut txn = db.begin_write().map_err(rerr)?;
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
        })
    }

    fn receipt_count(&self) -> Result<usize, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let table = txn.open_table(RECEIPTS).map_err(rerr)?;
            Ok(usize::try_from(table.len().map_err(rerr)?).unwrap_or(usize::MAX))
        })
    }

    fn read_range_raw(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let bound = Bound::new(limit, max_bytes, event_cap);
        self.read_forward(session_id, after_seq, bound)
    }

    fn read_range_onward(
        &self,
        session_id: &str,
        after_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let bound = Bound {
            whole_rows: true,
            ..Bound::new(limit, max_bytes, event_cap)
        };
        self.read_forward(session_id, after_seq, bound)
    }

    fn read_before_raw(
        &self,
        session_id: &str,
        before_seq: u64,
        limit: usize,
        max_bytes: usize,
        event_cap: usize,
    ) -> Result<Vec<RawEvent>, StoreError> {
        let bound = Bound::new(limit, max_bytes, event_cap);
        // Seq 0 never exists: `before_seq == 0` reads nothing.
        let seqs = 0..=before_seq.saturating_sub(1);
        let mut out = self.with_db(|db| scan(db, session_id, seqs, true, bound))?;
        out.reverse();
        Ok(out)
    }

    fn read_full(&self, session_id: &str, seq: u64) -> Result<Option<pb::Event>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let whole = txn.open_table(FULL_EVENTS).map_err(rerr)?;
            if let Some(v) = whole.get((session_id, seq)).map_err(rerr)? {
                return Ok(Some(decode_event(session_id, seq, v.value())));
            }
            let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
            Ok(chunks::get(&events, session_id, seq)?.map(|v| decode_event(session_id, seq, &v)))
        })
    }

    fn read_full_bytes(&self, session_id: &str, seq: u64) -> Result<Option<Vec<u8>>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let whole = txn.open_table(FULL_EVENTS).map_err(rerr)?;
            if let Some(v) = whole.get((session_id, seq)).map_err(rerr)? {
                return Ok(Some(v.value().to_vec()));
            }
            let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
            chunks::get(&events, session_id, seq)
        })
    }

    fn meta(&self, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
        self.with_db(|db| read_meta(db, session_id))
    }

    fn put_meta(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        self.append_batch(&[], std::slice::from_ref(meta))
    }

    fn sessions(&self, after: Option<&str>, limit: usize) -> Result<Vec<SessionMeta>, StoreError> {
        self.with_db(|db| read_sessions(db, after, limit))
    }

    fn conversation_sessions(&self, resume_id: &str) -> Result<Vec<String>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let table = txn.open_table(CONVERSATIONS).map_err(rerr)?;
            let mut out = Vec::new();
            for row in table.range((resume_id, "")..).map_err(rerr)? {
                let (k, _) = row.map_err(rerr)?;
                let (r, s) = k.value();
                if r != resume_id {
                    break;
                }
                out.push(s.to_owned());
            }
            Ok(out)
        })
    }

    fn transcript(&self, session_id: &str) -> Result<Vec<TranscriptEntry>, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let table = txn.open_table(TRANSCRIPTS).map_err(rerr)?;
            let mut out = Vec::new();
            for row in table
                .range((session_id, 0)..=(session_id, u64::MAX))
                .map_err(rerr)?
            {
                let (_, v) = row.map_err(rerr)?;
                let text = String::from_utf8_lossy(v.value());
                let (path, line) = text.split_once('\n').unwrap_or((&text, ""));
                out.push(TranscriptEntry {
                    session_id: session_id.to_owned(),
                    path: path.to_owned(),
                    line: line.to_owned(),
                });
            }
            Ok(out)
        })
    }

    fn delete_session(
        &self,
        session_id: &str,
        receipt: Option<&ReceiptWrite>,
    ) -> Result<bool, StoreError> {
        self.with_db(|db| delete_session(db, session_id, receipt))
    }

    fn session_count(&self) -> Result<u64, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let sessions = txn.open_table(SESSIONS).map_err(rerr)?;
            sessions.len().map_err(rerr)
        })
    }

    fn index_rows(&self, session_ids: &[String]) -> Result<Vec<Option<IndexRow>>, StoreError> {
        self.with_db(|db| index::rows(db, session_ids))
    }

    fn put_index(&self, rows: &[IndexRow]) -> Result<(), StoreError> {
        self.with_db(|db| index::put_index(db, rows))
    }

    fn list_index(&self, query: &ListQuery) -> Result<ListPage, StoreError> {
        self.with_db(|db| index::list(db, query))
    }

    fn usage(&self) -> Result<StoreUsage, StoreError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(rerr)?;
            let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
            let sessions = txn.open_table(SESSIONS).map_err(rerr)?;
            let mut count = 0;
            chunks::each(&events, |_, _, _| count += 1)?;
            let mut bytes = 0;
            for stats in [
                events.stats(),
                txn.open_table(FULL_EVENTS).map_err(rerr)?.stats(),
                sessions.stats(),
                txn.open_table(RECEIPTS).map_err(rerr)?.stats(),
            ] {
                bytes += stats.map_err(rerr)?.stored_bytes();
            }
            Ok(StoreUsage {
                sessions: sessions.len().map_err(rerr)?,
                events: count,
                bytes,
            })
        })
    }
}

/// Events of `session_id` with seqs in `seqs` (see [`chunks::scan`]).
fn scan(
    db: &Database,
    session_id: &str,
    seqs: std::ops::RangeInclusive<u64>,
    rev: bool,
    bound: Bound,
) -> Result<Vec<RawEvent>, StoreError> {
    let txn = db.begin_read().map_err(rerr)?;
    let table = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
    chunks::scan(&table, session_id, seqs, rev, bound)
}

fn read_meta(db: &Database, session_id: &str) -> Result<Option<SessionMeta>, StoreError> {
    let txn = db.begin_read().map_err(rerr)?;
    let table = txn.open_table(SESSIONS).map_err(rerr)?;
    let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
    match table.get(session_id).map_err(rerr)? {
        Some(v) => {
            let mut meta = decode_meta(session_id, v.value());
            meta.session_id = session_id.to_owned();
            complete(&events, &mut meta)?;
            Ok(Some(meta))
        }
        None => Ok(None),
    }
}

fn read_sessions(
    db: &Database,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<SessionMeta>, StoreError> {
    use std::ops::Bound;
    let txn = db.begin_read().map_err(rerr)?;
    let table = txn.open_table(SESSIONS).map_err(rerr)?;
    let events = txn.open_table(EVENT_CHUNKS).map_err(rerr)?;
    let start = after.map_or(Bound::Unbounded, Bound::Excluded);
    let mut out = Vec::new();
    for row in table
        .range::<&str>((start, Bound::Unbounded))
        .map_err(rerr)?
        .take(limit)
    {
        let (k, v) = row.map_err(rerr)?;
        let mut meta = decode_meta(k.value(), v.value());
        meta.session_id = k.value().to_owned();
        complete(&events, &mut meta)?;
        out.push(meta);
    }
    Ok(out)
}
