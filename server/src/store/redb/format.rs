//! The store's format version: one row of the `format` table, the number of
//! the layout of every other table (their keys, and how their values are
//! encoded), so a binary never misreads a file written under another
//! layout.
//!
//! Opening a store checks it inside the write transaction that creates the
//! tables, before anything else is written:
//!
//! - no row: a new file, or a file written by a release from before the
//!   version existed. Those releases all wrote format 1 (the layout this
//!   version number was introduced with), so the file is read as format 1
//!   and stamped, in the same transaction;
//! - a known older format: upgraded in place, one step per version, in
//!   that transaction (all the steps or none), then stamped;
//! - this binary's format: nothing to do;
//! - a newer format: refused, with both numbers and what to do. The
//!   transaction is aborted, so a refused file is left exactly as it was.
//!
//! A change to the layout is a new format number and a step from the one
//! before; a step is never edited once released.

use ::redb::{ReadableTable, TableDefinition, TableHandle, WriteTransaction};

use super::rerr;
use crate::store::StoreError;

/// `"version" -> format number`.
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("format");
/// The row's key.
const VERSION: &str = "version";

/// The format this binary reads and writes.
pub const CURRENT: u64 = 3;

/// One upgrade step: rewrites a store of format `n` into format `n + 1`
/// inside the opening write transaction.
pub(super) type Step = fn(&WriteTransaction) -> Result<(), StoreError>;

/// The upgrade steps: `STEPS[i]` takes format `i + 1` to `i + 2`.
const STEPS: &[Step] = &[to_write_ahead_log, to_event_chunks];

/// Format 1 to 2: commits go through a write-ahead log beside the file
/// (see `super::wal`), and the `wal` table records how far it has been
/// applied. The tables are the same; the step creates the new one. What
/// the number guards is the other direction: a format-1 binary would open
/// a store whose newest commits are still only in the log and never read
/// them, so it is refused instead.
fn to_write_ahead_log(txn: &WriteTransaction) -> Result<(), StoreError> {
    txn.open_table(super::wal::WAL).map_err(rerr)?;
    Ok(())
}

/// Formats 1 and 2 kept one row per event: `(session_id, seq) ->
/// prost-encoded pb::Event`.
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");

/// Format 2 to 3: events are stored in chunks (see `super::chunks`). Every
/// row of the per-event table goes, in key order, into chunks of a
/// session's consecutive seqs, the same bytes; then the old table is
/// deleted (its pages are free space in the file: the file grows by a copy
/// of the events, once). A million events took 5.7 s on this project's
/// machines.
fn to_event_chunks(txn: &WriteTransaction) -> Result<(), StoreError> {
    let mut moved = 0u64;
    {
        let old = txn.open_table(EVENTS).map_err(rerr)?;
        let mut chunks = txn.open_table(super::chunks::EVENT_CHUNKS).map_err(rerr)?;
        let mut chunker = super::chunks::Chunker::new();
        for row in old.iter().map_err(rerr)? {
            let (k, v) = row.map_err(rerr)?;
            let (sid, seq) = k.value();
            chunker.push(&mut chunks, sid, seq, v.value())?;
            moved += 1;
        }
        chunker.flush(&mut chunks)?;
    }
    txn.delete_table(EVENTS).map_err(rerr)?;
    if moved > 0 {
        tracing::info!(events = moved, "events moved into chunks");
    }
    Ok(())
}

const _: () = assert!(STEPS.len() as u64 + 1 == CURRENT);

/// What opening found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// No format row: new, or written before the row existed (format 1).
    Unstamped,
    /// This format, or an older one upgraded to it.
    Stamped(u64),
}

/// Checks (and stamps, or upgrades) the store's format in `txn`; `shown`
/// names the store in the refusal.
pub(super) fn check(txn: &WriteTransaction, shown: &str) -> Result<Found, StoreError> {
    check_with(txn, shown, CURRENT, STEPS)
}

/// [`check`] for a binary of format `current` with these `steps` (the
/// tests play a binary with an older step).
pub(super) fn check_with(
    txn: &WriteTransaction,
    shown: &str,
    current: u64,
    steps: &[Step],
) -> Result<Found, StoreError> {
    let stamped = txn
        .list_tables()
        .map_err(rerr)?
        .any(|t| t.name() == FORMAT.name());
    let found = if stamped {
        let table = txn.open_table(FORMAT).map_err(rerr)?;
        let version = table.get(VERSION).map_err(rerr)?.map(|v| v.value());
        version.map_or(Found::Unstamped, Found::Stamped)
    } else {
        Found::Unstamped
    };
    let version = match found {
        Found::Unstamped => 1,
        Found::Stamped(v) => v,
    };
    if version > current {
        return Err(StoreError::Format(format!(
            "the event store {shown} is format {version}, newer than this agent-harness \
             understands (format {current}): it was written by a newer release. Run that \
             release (or a later one) on it; to go back to this release, restore the backup \
             taken before the upgrade (see docs/operations.md, Upgrades and rollback)"
        )));
    }
    if version == 0 {
        return Err(StoreError::Format(format!(
            "the event store {shown} records format 0, which no release wrote: the file is \
             damaged; restore it from a backup"
        )));
    }
    for (from, step) in (version..current).zip(&steps[(version - 1) as usize..]) {
        step(txn)?;
        tracing::info!(
            store = shown,
            from,
            to = from + 1,
            "event store format upgraded"
        );
    }
    if found != Found::Stamped(current) {
        let mut table = txn.open_table(FORMAT).map_err(rerr)?;
        table.insert(VERSION, current).map_err(rerr)?;
    }
    Ok(found)
}

/// The store's format row; `None` without one.
pub(super) fn read(txn: &::redb::ReadTransaction) -> Result<Option<u64>, StoreError> {
    match txn.open_table(FORMAT) {
        Ok(table) => Ok(table.get(VERSION).map_err(rerr)?.map(|v| v.value())),
        Err(::redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(rerr(e)),
    }
}

#[cfg(test)]
mod tests {
    use ::redb::backends::InMemoryBackend;
    use ::redb::{Database, ReadableDatabase};

    use super::*;

    /// A marker table only the fake step below writes.
    const STEPPED: TableDefinition<&str, u64> = TableDefinition::new("stepped");

    fn db() -> Database {
        Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .expect("in-memory database")
    }

    fn stamped(db: &Database) -> Option<u64> {
        read(&db.begin_read().expect("read")).expect("format row")
    }

    /// Runs [`check_with`] in a transaction, committed when it passes.
    fn open_as(db: &Database, current: u64, steps: &[Step]) -> Result<Found, StoreError> {
        let txn = db.begin_write().expect("write");
        match check_with(&txn, "test.redb", current, steps) {
            Ok(found) => {
                txn.commit().expect("commit");
                Ok(found)
            }
            Err(e) => {
                txn.abort().expect("abort");
                Err(e)
            }
        }
    }

    fn stamp(db: &Database, version: u64) {
        let txn = db.begin_write().expect("write");
        txn.open_table(FORMAT)
            .expect("table")
            .insert(VERSION, version)
            .expect("insert");
        txn.commit().expect("commit");
    }

    /// Format 1 to 2 in the fake binary of format 2: counts its runs.
    fn fake_step(txn: &WriteTransaction) -> Result<(), StoreError> {
        let mut t = txn.open_table(STEPPED).map_err(rerr)?;
        let runs = t.get("runs").map_err(rerr)?.map_or(0, |v| v.value());
        t.insert("runs", runs + 1).map_err(rerr)?;
        Ok(())
    }

    fn step_runs(db: &Database) -> u64 {
        let txn = db.begin_read().expect("read");
        match txn.open_table(STEPPED) {
            Ok(t) => t.get("runs").expect("get").map_or(0, |v| v.value()),
            Err(_) => 0,
        }
    }

    #[test]
    fn a_new_store_is_stamped_with_this_format() {
        let db = db();
        assert_eq!(stamped(&db), None);
        assert_eq!(check_for(&db), Found::Unstamped);
        assert_eq!(stamped(&db), Some(CURRENT));
        assert_eq!(check_for(&db), Found::Stamped(CURRENT));
    }

    fn check_for(db: &Database) -> Found {
        open_as(db, CURRENT, STEPS).expect("this binary's format opens")
    }

    #[test]
    fn an_older_format_is_upgraded_once_in_place_by_its_step() {
        let db = db();
        stamp(&db, 1);
        let steps: &[Step] = &[fake_step];
        assert_eq!(open_as(&db, 2, steps).expect("upgraded"), Found::Stamped(1));
        assert_eq!(stamped(&db), Some(2));
        assert_eq!(step_runs(&db), 1);
        // Opened again by the same binary: nothing left to do.
        assert_eq!(open_as(&db, 2, steps).expect("opens"), Found::Stamped(2));
        assert_eq!(step_runs(&db), 1, "a step runs once");
    }

    #[test]
    fn an_unstamped_store_is_format_one_and_upgraded_from_there() {
        // A file of a release from before the format row: its layout is
        // format 1, so a later binary runs every step from 1.
        let db = db();
        let steps: &[Step] = &[fake_step];
        assert_eq!(open_as(&db, 2, steps).expect("upgraded"), Found::Unstamped);
        assert_eq!((stamped(&db), step_runs(&db)), (Some(2), 1));
    }

    #[test]
    fn a_failing_step_leaves_the_store_as_it_was() {
        fn failing(txn: &WriteTransaction) -> Result<(), StoreError> {
            fake_step(txn)?;
            Err(StoreError::Rejected("step failed".into()))
        }
        let db = db();
        stamp(&db, 1);
        let steps: &[Step] = &[failing];
        open_as(&db, 2, steps).expect_err("the step's failure is the open's");
        assert_eq!((stamped(&db), step_runs(&db)), (Some(1), 0));
    }

    #[test]
    fn a_newer_format_is_refused_naming_both_and_left_untouched() {
        let db = db();
        stamp(&db, CURRENT + 1);
        let err = open_as(&db, CURRENT, STEPS).expect_err("a newer format is refused");
        let text = err.to_string();
        assert!(matches!(err, StoreError::Format(_)), "{err:?}");
        for want in [
            format!("format {}", CURRENT + 1),
            format!("format {CURRENT}"),
            "newer release".to_owned(),
            "test.redb".to_owned(),
        ] {
            assert!(text.contains(&want), "{want:?} in {text}");
        }
        assert_eq!(stamped(&db), Some(CURRENT + 1));
    }
}
