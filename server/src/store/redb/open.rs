//! Opening the store file: the database on its backend, its tables and
//! format checked, then its write-ahead log replayed.

use std::path::Path;
use std::sync::Mutex;

use ::redb::Database;

use super::super::StoreError;
use super::write::index_conversations;
use super::{
    CONVERSATIONS, FULL_EVENTS, Open, RECEIPTS, RECEIPTS_BY_TIME, SESSION_CONVERSATIONS, SESSIONS,
    TRANSCRIPTS, format, index, rerr, wal,
};

/// Opens (or creates) the file with a page cache of `cache_bytes`.
pub(super) fn create(path: &Path, cache_bytes: usize) -> Result<Database, StoreError> {
    // The store holds every prompt and answer: owner-only, whatever the
    // umask (redb opens an empty file as a new database).
    let io = |e| StoreError::Redb(::redb::Error::Io(e));
    crate::private_files::ensure_file(path).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    Database::builder()
        .set_cache_size(cache_bytes)
        .create_with_backend(
            super::backend::EarlySync::new(
                ::redb::backends::FileBackend::new(file).map_err(rerr)?,
                path,
            )
            .map_err(io)?,
        )
        .map_err(rerr)
}

/// Opens the store file at `path`: the database, its tables checked (see
/// [`init`]), then its write-ahead log, whose records the database lacks
/// are applied (see [`wal`]).
pub(super) fn open_file(
    path: &Path,
    cache_bytes: usize,
    checkpoint_bytes: u64,
) -> Result<Open, StoreError> {
    let db = create(path, cache_bytes)?;
    init(&db, &path.display().to_string())?;
    let (wal, _) = wal::Wal::open(&db, &wal::path_of(path), checkpoint_bytes)?;
    Ok(Open {
        db,
        wal: Some(Mutex::new(wal)),
    })
}

/// Creates every table up front (also in a file written before a table
/// existed) so readers never see "table does not exist"; a file written
/// before the conversation index existed gets it built from its events.
/// The store's format is checked first, in the same transaction (see
/// [`format`]): a newer one is refused before anything is written.
pub(super) fn init(db: &Database, shown: &str) -> Result<(), StoreError> {
    let txn = db.begin_write().map_err(rerr)?;
    if let Err(e) = format::check(&txn, shown) {
        let _ = txn.abort();
        return Err(e);
    }
    let indexed = txn
        .list_tables()
        .map_err(rerr)?
        .any(|t| ::redb::TableHandle::name(&t) == "conversations");
    txn.open_table(super::chunks::EVENT_CHUNKS).map_err(rerr)?;
    txn.open_table(FULL_EVENTS).map_err(rerr)?;
    txn.open_table(SESSIONS).map_err(rerr)?;
    txn.open_table(RECEIPTS).map_err(rerr)?;
    txn.open_table(RECEIPTS_BY_TIME).map_err(rerr)?;
    txn.open_table(CONVERSATIONS).map_err(rerr)?;
    txn.open_table(SESSION_CONVERSATIONS).map_err(rerr)?;
    txn.open_table(TRANSCRIPTS).map_err(rerr)?;
    txn.open_table(index::SESSION_INDEX).map_err(rerr)?;
    txn.open_table(wal::WAL).map_err(rerr)?;
    if !indexed {
        index_conversations(&txn)?;
    }
    txn.commit().map_err(rerr)
}
