//! The session index in redb (see [`super::super::index`]): one table,
//! `session_id -> JSON row`. A listing reads every row and filters and
//! sorts in process ([`ListQuery::select`]): a text query is a substring
//! match that no B-tree order serves, and `total_size` counts every match
//! anyway, so one pass over the small rows is what a page costs.

use ::redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::super::{IndexRow, ListPage, ListQuery, StoreError};
use super::rerr;

/// `session_id -> JSON-encoded IndexRow`.
pub(super) const SESSION_INDEX: TableDefinition<&str, &[u8]> =
    TableDefinition::new("session_index");

/// Writes `rows` in `txn`. A rebuild's (`keep_newer`) leaves a stored row
/// of a later head as it is; a commit's replaces it without reading it
/// first: the commit holds the session's newest events, so its rows are
/// never behind (and a commit touches one row per session it moves).
pub(super) fn put_rows(
    txn: &::redb::WriteTransaction,
    rows: &[IndexRow],
    keep_newer: bool,
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = txn.open_table(SESSION_INDEX).map_err(rerr)?;
    for row in rows {
        let sid = row.session_id.as_str();
        let newer = keep_newer
            && table
                .get(sid)
                .map_err(rerr)?
                .and_then(|v| IndexRow::decode_listed(sid, v.value()))
                .is_some_and(|old| old.head_seq > row.head_seq);
        if !newer {
            table.insert(sid, row.encode().as_slice()).map_err(rerr)?;
        }
    }
    Ok(())
}

/// [`super::super::Store::put_index`]: its own durable transaction.
pub(super) fn put_index(db: &Database, rows: &[IndexRow]) -> Result<(), StoreError> {
    let mut txn = db.begin_write().map_err(rerr)?;
    txn.set_durability(Durability::Immediate).map_err(rerr)?;
    put_rows(&txn, rows, true)?;
    txn.commit().map_err(rerr)
}

/// The rows of `session_ids`, in the order given.
pub(super) fn rows(
    db: &Database,
    session_ids: &[String],
) -> Result<Vec<Option<IndexRow>>, StoreError> {
    let txn = db.begin_read().map_err(rerr)?;
    let table = txn.open_table(SESSION_INDEX).map_err(rerr)?;
    session_ids
        .iter()
        .map(|sid| {
            Ok(table
                .get(sid.as_str())
                .map_err(rerr)?
                .and_then(|v| IndexRow::decode(sid, v.value())))
        })
        .collect()
}

/// A page of the index (see the module docs).
pub(super) fn list(db: &Database, query: &ListQuery) -> Result<ListPage, StoreError> {
    let txn = db.begin_read().map_err(rerr)?;
    let table = txn.open_table(SESSION_INDEX).map_err(rerr)?;
    let mut all = Vec::new();
    for row in table.iter().map_err(rerr)? {
        let (k, v) = row.map_err(rerr)?;
        if let Some(r) = IndexRow::decode_listed(k.value(), v.value()) {
            all.push(r);
        }
    }
    Ok(query.select(&all))
}
