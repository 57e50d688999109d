//! The store's write-ahead log: `<store>.wal` beside the redb file. A
//! commit is durable once its record is in this file, and redb is updated
//! behind it without syncing.
//!
//! **Why.** A durable redb commit writes every B-tree page the batch
//! touched where its allocator puts it, then syncs them: one `fdatasync`
//! over pages scattered across the file (about 7 for a commit to one
//! session, about 200 for one over 100 sessions). Here a commit writes one
//! record at the end of the log, in blocks written before, and syncs that:
//! one sequential write whatever the number of sessions. The same commit
//! goes to redb with `Durability::None`, which keeps its pages in redb's
//! write buffer, visible to every read and unsynced.
//!
//! **A commit, in order** ([`Wal::commit`]): the batch's record is built
//! (each event from the bytes the log encoded it to) and written at the
//! end of the log; it is synced (on the [`sync`] thread, while the batch
//! is written into a redb write transaction, when it is at least
//! [`OVERLAP_BYTES`]; before that otherwise), and the transaction also sets
//! the `wal` table's position to the record's end; once the sync has ended
//! well, the transaction commits. So nothing of a batch is visible before it is
//! durable, and a failed write or sync of the record, or a failed fill,
//! aborts the transaction (the record's head is zeroed again, so a record
//! that may have reached the disk is not replayed).
//!
//! **A checkpoint** ([`Wal::checkpoint`], once the log holds
//! [`CHECKPOINT_BYTES`], and when the store closes) is a durable redb
//! commit that also sets the position to the start of the next
//! generation; once it is on disk the header is rewritten with that
//! generation and records are written from the start again. A record is
//! read back only if its generation is the header's and its checksum
//! holds, so what an earlier generation left further on is never replayed.
//!
//! **Recovery** ([`Wal::open`]): redb comes back at its last durable
//! commit, whose `wal` row says how far the log had been applied then. The
//! records after that point, in order, up to the first one torn or of
//! another generation, are applied again, each exactly as it was the first
//! time and on the same state (every durable commit between them carried
//! the position of the last record applied before it); then a checkpoint.
//! A log whose store identity or generation does not continue the store's
//! row (a store file restored from a backup beside a newer log, or a log
//! from another store) is not replayed: it is renamed aside with a
//! warning, never deleted.

mod prefill;
pub(super) mod record;
mod sync;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::redb::{Database, Durability, ReadableDatabase, TableDefinition, WriteTransaction};

use super::super::{Commit, StoreError};
use super::{rerr, write};

/// `"applied" -> position`: how far the log had been applied when this
/// state of the store was committed (the store's identity, the
/// generation, the offset of the end of the last record applied).
pub(super) const WAL: TableDefinition<&str, &[u8]> = TableDefinition::new("wal");
const APPLIED: &str = "applied";

/// Bytes before the first record: the header, padded to a page.
const HEADER: u64 = 4096;
/// The header's first bytes.
const MAGIC: [u8; 8] = *b"AHWAL\0\0\x01";
/// Magic, identity, generation, checksum.
const HEADER_BYTES: usize = 8 + 16 + 8 + 4;
/// A record's head: payload length (`u32`), checksum (`u32`, CRC-32 of the
/// generation, the length and the payload), generation (`u64`).
const HEAD: usize = 16;
/// The file grows by this much, zeros written ahead of the records, so a
/// record's sync never allocates blocks.
const CHUNK: u64 = 1 << 20;
/// A record at least this long is synced on the [`sync`] thread while its
/// transaction is filled; a shorter one is synced in turn, its fill being
/// shorter than handing the sync to a thread and hearing back from it.
const OVERLAP_BYTES: usize = 64 << 10;
/// A checkpoint once the log holds this much.
pub(super) const CHECKPOINT_BYTES: u64 = 32 << 20;

fn io(e: std::io::Error) -> StoreError {
    StoreError::Redb(::redb::Error::Io(e))
}

/// A point in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    /// The store's identity, made when its log was first created.
    id: u128,
    generation: u64,
    /// Offset of the end of the last record applied.
    offset: u64,
}

impl Position {
    fn encode(&self) -> [u8; 32] {
        let mut out = [0; 32];
        out[..16].copy_from_slice(&self.id.to_le_bytes());
        out[16..24].copy_from_slice(&self.generation.to_le_bytes());
        out[24..].copy_from_slice(&self.offset.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; 32] = bytes.try_into().ok()?;
        Some(Self {
            id: u128::from_le_bytes(bytes[..16].try_into().ok()?),
            generation: u64::from_le_bytes(bytes[16..24].try_into().ok()?),
            offset: u64::from_le_bytes(bytes[24..].try_into().ok()?),
        })
    }

    fn put(&self, txn: &WriteTransaction) -> Result<(), StoreError> {
        txn.open_table(WAL)
            .map_err(rerr)?
            .insert(APPLIED, self.encode().as_slice())
            .map_err(rerr)?;
        Ok(())
    }

    /// The position the store's durable state records; `None` for a store
    /// that never had a log.
    fn stored(db: &Database) -> Result<Option<Self>, StoreError> {
        let txn = db.begin_read().map_err(rerr)?;
        let table = txn.open_table(WAL).map_err(rerr)?;
        let Some(row) = table.get(APPLIED).map_err(rerr)? else {
            return Ok(None);
        };
        Self::decode(row.value()).map(Some).ok_or_else(|| {
            StoreError::Rejected(
                "the event store's write-ahead log position is damaged; restore the store \
                 from a backup"
                    .into(),
            )
        })
    }
}

/// What the log file's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Header {
    /// No header: a new (or empty) file.
    Absent,
    /// A header: the log of store `id`, records of `generation`.
    Valid { id: u128, generation: u64 },
    /// The magic but a bad checksum: a header rewrite torn by a crash.
    Torn,
}

impl Header {
    fn encode(id: u128, generation: u64) -> [u8; HEADER_BYTES] {
        let mut out = [0; HEADER_BYTES];
        out[..8].copy_from_slice(&MAGIC);
        out[8..24].copy_from_slice(&id.to_le_bytes());
        out[24..32].copy_from_slice(&generation.to_le_bytes());
        let sum = crc32fast::hash(&out[..32]);
        out[32..].copy_from_slice(&sum.to_le_bytes());
        out
    }

    fn read(bytes: &[u8], shown: &Path) -> Result<Self, StoreError> {
        let Some(head) = bytes.get(..HEADER_BYTES) else {
            return Ok(Self::Absent);
        };
        if head.iter().all(|&b| b == 0) {
            return Ok(Self::Absent);
        }
        if head[..8] != MAGIC {
            return Err(StoreError::Rejected(format!(
                "{} is not an agent-harness write-ahead log; move it out of the data dir",
                shown.display()
            )));
        }
        let sum = u32::from_le_bytes(head[32..].try_into().unwrap_or_default());
        if crc32fast::hash(&head[..32]) != sum {
            return Ok(Self::Torn);
        }
        Ok(Self::Valid {
            id: u128::from_le_bytes(head[8..24].try_into().unwrap_or_default()),
            generation: u64::from_le_bytes(head[24..32].try_into().unwrap_or_default()),
        })
    }
}

/// A record's checksum: CRC-32 of its generation, length and payload.
fn checksum(generation: u64, payload: &[u8]) -> u32 {
    let mut sum = crc32fast::Hasher::new();
    sum.update(&generation.to_le_bytes());
    sum.update(&(payload.len() as u32).to_le_bytes());
    sum.update(payload);
    sum.finalize()
}

/// Fills in a record's head (its payload follows the `HEAD` bytes left for it).
fn seal(record: &mut [u8], generation: u64) {
    let len = (record.len() - HEAD) as u32;
    let sum = checksum(generation, &record[HEAD..]);
    record[..4].copy_from_slice(&len.to_le_bytes());
    record[4..8].copy_from_slice(&sum.to_le_bytes());
    record[8..16].copy_from_slice(&generation.to_le_bytes());
}

/// The record of `generation` at the start of `bytes` and its length with
/// its head; `None` at the log's end (nothing, a torn record, or one of
/// another generation).
fn next_record(bytes: &[u8], generation: u64) -> Option<(&[u8], usize)> {
    let head = bytes.get(..HEAD)?;
    let len = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let sum = u32::from_le_bytes(head[4..8].try_into().ok()?);
    if u64::from_le_bytes(head[8..16].try_into().ok()?) != generation || len == 0 {
        return None;
    }
    let payload = bytes.get(HEAD..HEAD + len)?;
    (checksum(generation, payload) == sum).then_some((payload, HEAD + len))
}

/// The log file of the store file at `store`.
pub(super) fn path_of(store: &Path) -> PathBuf {
    let mut name = store.as_os_str().to_owned();
    name.push(".wal");
    PathBuf::from(name)
}

/// The open log (see the module docs).
#[derive(Debug)]
pub(super) struct Wal {
    /// Shared with the [`prefill`] thread while it runs (no second
    /// descriptor).
    file: Arc<File>,
    id: u128,
    generation: u64,
    /// Where the next record goes.
    end: u64,
    /// The file's length: every byte below it written (zeros or records).
    written: u64,
    /// A checkpoint once the records reach this many bytes.
    checkpoint_bytes: u64,
    /// The record being built (kept for its allocation).
    record: Vec<u8>,
    /// Zeros being written ahead, when the log opened shorter than a
    /// generation (see [`prefill`]).
    prefill: Option<prefill::Prefill>,
    /// The thread a commit's record is synced on while the commit fills its
    /// transaction (see [`sync`]); `None` if it could not start, and then
    /// the commit syncs the record itself before filling.
    syncer: Option<sync::Syncer>,
}

impl Wal {
    /// Opens the log at `path` of the store `db` (just opened), applies
    /// what the store's durable state lacks of it, and checkpoints (see
    /// the module docs). Returns the log, empty, and how many events the
    /// recovery applied.
    pub(super) fn open(
        db: &Database,
        path: &Path,
        checkpoint_bytes: u64,
    ) -> Result<(Self, usize), StoreError> {
        crate::private_files::ensure_file(path).map_err(io)?;
        let stored = Position::stored(db)?;
        let bytes = std::fs::read(path).map_err(io)?;
        let header = Header::read(&bytes, path)?;
        // The log replayed from this position, if any; the store's position.
        let (replay, base) = match (stored, header) {
            (Some(p), Header::Valid { id, generation })
                if id == p.id && generation == p.generation =>
            {
                (Some(p), stored)
            }
            // A checkpoint that committed but did not rewrite the header
            // (or tore it): everything before it is in the store.
            (Some(p), Header::Valid { id, generation })
                if id == p.id && p.generation == generation + 1 && p.offset == HEADER =>
            {
                (None, stored)
            }
            (Some(p), Header::Torn) if p.offset == HEADER => (None, stored),
            (Some(p), Header::Absent) => {
                if p.offset > HEADER {
                    tracing::warn!(
                        log = %path.display(),
                        "the event store's write-ahead log is missing: commits acknowledged \
                         after the store's last checkpoint may be lost"
                    );
                }
                (None, stored)
            }
            (None, Header::Absent) => (None, None),
            _ => {
                let aside = aside(path);
                tracing::warn!(
                    log = %path.display(),
                    moved_to = %aside.display(),
                    stored = ?stored,
                    found = ?header,
                    "the write-ahead log does not continue the event store (a store restored \
                     from a backup, or another store's log): not replayed, moved aside"
                );
                std::fs::rename(path, &aside).map_err(io)?;
                crate::private_files::ensure_file(path).map_err(io)?;
                // Generations go on past anything the moved log had.
                let found = match header {
                    Header::Valid { generation, .. } => generation,
                    _ => 0,
                };
                let base = stored.map(|p| Position {
                    generation: p.generation.max(found),
                    ..p
                });
                (None, base)
            }
        };
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(io)?,
        );
        let mut wal = Self {
            written: file.metadata().map_err(io)?.len(),
            file,
            id: base.map_or_else(rand::random, |p| p.id),
            generation: base.map_or(0, |p| p.generation),
            end: HEADER,
            checkpoint_bytes,
            record: Vec::new(),
            prefill: None,
            syncer: None,
        };
        let events = match replay {
            Some(p) => replay_from(db, path, &bytes, p)?,
            None => 0,
        };
        // One generation's length (32 MiB at most), zeros written ahead
        // beyond what the file holds, off the commit path.
        let generation = (HEADER + checkpoint_bytes.min(CHECKPOINT_BYTES)).div_ceil(CHUNK) * CHUNK;
        wal.prefill =
            prefill::Prefill::start(&wal.file, wal.written.max(HEADER), generation).map_err(io)?;
        wal.checkpoint(db)?;
        wal.syncer = sync::Syncer::start(&wal.file)
            .inspect_err(|e| {
                tracing::warn!(
                    error = %e,
                    "could not start the write-ahead log's sync thread: commits sync in turn"
                );
            })
            .ok();
        Ok((wal, events))
    }

    /// Commits `commit` (see the module docs).
    pub(super) fn commit(&mut self, db: &Database, commit: Commit<'_>) -> Result<(), StoreError> {
        if self.end - HEADER >= self.checkpoint_bytes {
            self.checkpoint(db)?;
        }
        let mut txn = db.begin_write().map_err(rerr)?;
        txn.set_durability(Durability::None).map_err(rerr)?;
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        record.resize(HEAD, 0);
        let out = self.write(txn, commit, &mut record);
        if record.capacity() <= 8 * CHUNK as usize {
            self.record = record;
        }
        out
    }

    fn write(
        &mut self,
        txn: WriteTransaction,
        commit: Commit<'_>,
        record: &mut Vec<u8>,
    ) -> Result<(), StoreError> {
        record::build(record, commit)?;
        seal(record, self.generation);
        let next = self.end + record.len() as u64;
        let position = Position {
            id: self.id,
            generation: self.generation,
            offset: next,
        };
        if let Err(e) = self.write_record(record) {
            drop(txn);
            self.unwrite();
            return Err(io(e));
        }
        // The record is synced while the transaction is filled; the
        // transaction commits (and so becomes visible) only once the sync
        // has ended well.
        let fill = || write::fill(&txn, commit).and_then(|()| position.put(&txn));
        let (filled, synced) = match &self.syncer {
            Some(syncer) if record.len() >= OVERLAP_BYTES => {
                let pending = syncer.ask();
                let filled = fill();
                (filled, syncer.wait(pending))
            }
            _ => {
                let synced = self.file.sync_data();
                (fill(), synced)
            }
        };
        let committed = match (filled, synced) {
            (Ok(()), Ok(())) => txn.commit().map_err(rerr),
            (Err(e), _) => Err(e),
            (Ok(()), Err(e)) => Err(io(e)),
        };
        if let Err(e) = committed {
            self.unwrite();
            return Err(e);
        }
        self.end = next;
        Ok(())
    }

    /// Writes `record` at the end, unsynced, zeros written ahead first
    /// when it reaches past what the file holds (by the [`prefill`] thread,
    /// waited for, as far as it goes).
    fn write_record(&mut self, record: &[u8]) -> std::io::Result<()> {
        let need = self.end + record.len() as u64;
        if need > self.written
            && let Some(prefill) = &self.prefill
        {
            self.written = self.written.max(prefill.wait_for(need));
        }
        if need > self.written {
            let grown = need.div_ceil(CHUNK) * CHUNK;
            let zeros = vec![0; CHUNK as usize];
            while self.written < grown {
                let n = (grown - self.written).min(CHUNK);
                self.file.write_all_at(&zeros[..n as usize], self.written)?;
                self.written += n;
            }
        }
        self.file.write_all_at(record, self.end)
    }

    /// Zeroes the head of a record that failed after it was written, so a
    /// recovery does not apply a commit its caller saw fail. Should that
    /// fail too, the next record is written over it.
    fn unwrite(&mut self) {
        let zeroed = self
            .file
            .write_all_at(&[0; HEAD], self.end)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = zeroed {
            tracing::error!(error = %e, "could not clear a failed write-ahead log record");
        }
    }

    /// Makes everything applied durable in redb and starts the next
    /// generation, empty.
    pub(super) fn checkpoint(&mut self, db: &Database) -> Result<(), StoreError> {
        let next = Position {
            id: self.id,
            generation: self.generation + 1,
            offset: HEADER,
        };
        let mut txn = db.begin_write().map_err(rerr)?;
        txn.set_durability(Durability::Immediate).map_err(rerr)?;
        next.put(&txn)?;
        txn.commit().map_err(rerr)?;
        // Until the header names the new generation, no record of it may
        // be written: one would not be replayed.
        self.file
            .write_all_at(&Header::encode(next.id, next.generation), 0)
            .and_then(|()| self.file.sync_data())
            .map_err(io)?;
        self.written = self.written.max(HEADER_BYTES as u64);
        self.generation = next.generation;
        self.end = HEADER;
        Ok(())
    }

    /// How many records were synced on the [`sync`] thread.
    #[cfg(test)]
    pub(super) fn synced_beside_fill(&self) -> u64 {
        self.syncer.as_ref().map_or(0, sync::Syncer::done)
    }

    /// Whether records were written since the last checkpoint.
    pub(super) fn holds_records(&self) -> bool {
        self.end > HEADER
    }
}

/// Applies the records of `bytes` (the log) after `from`, in order, up to
/// the log's end; returns how many events they held.
fn replay_from(
    db: &Database,
    path: &Path,
    bytes: &[u8],
    from: Position,
) -> Result<usize, StoreError> {
    let mut at = usize::try_from(from.offset).unwrap_or(usize::MAX);
    let (mut records, mut events) = (0, 0);
    while let Some((payload, len)) = bytes
        .get(at..)
        .and_then(|b| next_record(b, from.generation))
    {
        let decoded = record::decode(payload).map_err(|e| {
            StoreError::Rejected(format!(
                "record at offset {at} of the write-ahead log {} cannot be applied: {e}; \
                 restore the store and its log from a backup",
                path.display()
            ))
        })?;
        at += len;
        let mut txn = db.begin_write().map_err(rerr)?;
        txn.set_durability(Durability::None).map_err(rerr)?;
        write::fill(&txn, decoded.commit())?;
        Position {
            offset: at as u64,
            ..from
        }
        .put(&txn)?;
        txn.commit().map_err(rerr)?;
        records += 1;
        events += decoded.events();
    }
    if records > 0 {
        tracing::info!(
            log = %path.display(),
            records,
            events,
            "write-ahead log replayed into the event store"
        );
    }
    Ok(events)
}

/// Where a log that does not continue its store is moved: beside it,
/// named by the time (and a count, never over an earlier one).
fn aside(path: &Path) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (0..)
        .map(|n| {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".unused-{secs}"));
            if n > 0 {
                name.push(format!("-{n}"));
            }
            PathBuf::from(name)
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| path.with_extension("wal.unused"))
}

#[cfg(test)]
mod tests;
