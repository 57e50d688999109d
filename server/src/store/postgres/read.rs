//! The reads of the PostgreSQL store. Each is one statement, so it sees one
//! committed state; rows are decoded as redb's are (an event row that does
//! not decode reads as `unreadable`, a meta row as an empty meta, a
//! receipt row as none).

use deadpool_postgres::Pool;
use futures::{StreamExt, pin_mut};
use prost::Message;

use super::super::{
    RawEvent, Receipt, SessionMeta, StoreError, StoreUsage, TranscriptEntry, receipt,
};
use super::{client, pgerr, seq_sql};
use bytes::Bytes;

/// How much a scan takes (see [`super::super::Store::read_range_within`]).
#[derive(Clone, Copy)]
pub(super) struct Bound {
    pub(super) limit: i64,
    pub(super) max_bytes: usize,
    pub(super) event_cap: usize,
}

/// Events of `session_id` after `after` (ascending) or before `before`
/// (descending when `rev`), within `bound`, as stored (undecoded).
pub(super) async fn scan(
    pool: Pool,
    session_id: String,
    from: i64,
    rev: bool,
    bound: Bound,
) -> Result<Vec<RawEvent>, StoreError> {
    let client = client(&pool).await?;
    let sql = if rev {
        "SELECT seq, event FROM events WHERE session_id = $1 AND seq < $2 \
         ORDER BY seq DESC LIMIT $3"
    } else {
        "SELECT seq, event FROM events WHERE session_id = $1 AND seq > $2 \
         ORDER BY seq LIMIT $3"
    };
    let stmt = client.prepare_cached(sql).await.map_err(pgerr)?;
    let limit = bound.limit;
    let rows = client
        .query_raw(
            &stmt,
            [
                &session_id as &(dyn tokio_postgres::types::ToSql + Sync),
                &from,
                &limit,
            ],
        )
        .await
        .map_err(pgerr)?;
    pin_mut!(rows);
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while let Some(row) = rows.next().await {
        let row = row.map_err(pgerr)?;
        let seq: i64 = row.get(0);
        let value: &[u8] = row.get(1);
        bytes = bytes.saturating_add(value.len().min(bound.event_cap));
        if !out.is_empty() && bytes > bound.max_bytes {
            break;
        }
        out.push((seq as u64, Bytes::copy_from_slice(value)));
    }
    Ok(out)
}

/// The stored bytes of event `seq`'s whole form (the cut-down row's whole
/// form when there is one, else the event row).
pub(super) async fn full_bytes(
    pool: Pool,
    session_id: String,
    seq: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let client = client(&pool).await?;
    let stmt = client
        .prepare_cached(
            "SELECT event FROM (\
               SELECT event, 0 AS pick FROM full_events WHERE session_id = $1 AND seq = $2 \
               UNION ALL \
               SELECT event, 1 AS pick FROM events WHERE session_id = $1 AND seq = $2\
             ) AS forms ORDER BY pick LIMIT 1",
        )
        .await
        .map_err(pgerr)?;
    let row = client
        .query_opt(&stmt, &[&session_id, &seq_sql(seq)])
        .await
        .map_err(pgerr)?;
    Ok(row.map(|r| r.get::<_, Vec<u8>>(0)))
}

/// The two fields of a stored event a meta needs: prost skips the rest.
#[derive(Clone, PartialEq, prost::Message)]
struct EventStamp {
    #[prost(message, optional, tag = "4")]
    time: Option<pbjson_types::Timestamp>,
}

/// Metas with their head: the session row joined to its last event.
const METAS: &str = "SELECT s.session_id, s.meta, e.seq, e.event FROM sessions s \
     LEFT JOIN LATERAL (SELECT seq, event FROM events \
       WHERE events.session_id = s.session_id ORDER BY seq DESC LIMIT 1) e ON true";

fn meta_of(row: &tokio_postgres::Row) -> SessionMeta {
    let session_id: String = row.get(0);
    let bytes: &[u8] = row.get(1);
    let mut meta = serde_json::from_slice(bytes).unwrap_or_else(|e| {
        tracing::warn!(session_id, error = %e, "stored session meta cannot be decoded; read as empty");
        SessionMeta::new(&session_id, 0)
    });
    meta.session_id = session_id;
    meta.head_seq = 0;
    if let Some(seq) = row.get::<_, Option<i64>>(2) {
        meta.head_seq = seq as u64;
        let last: &[u8] = row.get(3);
        // A row whose stamp cannot be read adds no time.
        let stamp = EventStamp::decode(last).unwrap_or_default();
        meta.updated_ms = meta
            .updated_ms
            .max(super::super::event_time_ms(stamp.time.as_ref()));
    }
    meta
}

pub(super) async fn meta(
    pool: Pool,
    session_id: String,
) -> Result<Option<SessionMeta>, StoreError> {
    let client = client(&pool).await?;
    let stmt = client
        .prepare_cached(&format!("{METAS} WHERE s.session_id = $1"))
        .await
        .map_err(pgerr)?;
    let row = client
        .query_opt(&stmt, &[&session_id])
        .await
        .map_err(pgerr)?;
    Ok(row.as_ref().map(meta_of))
}

pub(super) async fn sessions(
    pool: Pool,
    after: Option<String>,
    limit: i64,
) -> Result<Vec<SessionMeta>, StoreError> {
    let client = client(&pool).await?;
    let rows = match after {
        Some(after) => {
            let stmt = client
                .prepare_cached(&format!(
                    "{METAS} WHERE s.session_id > $1 ORDER BY s.session_id LIMIT $2"
                ))
                .await
                .map_err(pgerr)?;
            client.query(&stmt, &[&after, &limit]).await
        }
        None => {
            let stmt = client
                .prepare_cached(&format!("{METAS} ORDER BY s.session_id LIMIT $1"))
                .await
                .map_err(pgerr)?;
            client.query(&stmt, &[&limit]).await
        }
    }
    .map_err(pgerr)?;
    Ok(rows.iter().map(meta_of).collect())
}

pub(super) async fn receipt(
    pool: Pool,
    session_id: String,
    key: String,
) -> Result<Option<Receipt>, StoreError> {
    let client = client(&pool).await?;
    let stmt = client
        .prepare_cached("SELECT receipt FROM receipts WHERE session_id = $1 AND key = $2")
        .await
        .map_err(pgerr)?;
    let row = client
        .query_opt(&stmt, &[&session_id, &key])
        .await
        .map_err(pgerr)?;
    Ok(row.and_then(|r| receipt::decode(&session_id, r.get::<_, &[u8]>(0))))
}

pub(super) async fn conversation_sessions(
    pool: Pool,
    resume_id: String,
) -> Result<Vec<String>, StoreError> {
    let client = client(&pool).await?;
    let rows = client
        .query(
            "SELECT session_id FROM conversations WHERE resume_id = $1 ORDER BY session_id",
            &[&resume_id],
        )
        .await
        .map_err(pgerr)?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The transcript entries of `session_id`, in order.
pub(super) async fn transcript(
    pool: Pool,
    session_id: String,
) -> Result<Vec<TranscriptEntry>, StoreError> {
    let client = client(&pool).await?;
    let rows = client
        .query(
            "SELECT path, line FROM transcripts WHERE session_id = $1 ORDER BY n",
            &[&session_id],
        )
        .await
        .map_err(pgerr)?;
    Ok(rows
        .iter()
        .map(|r| TranscriptEntry {
            session_id: session_id.clone(),
            path: r.get(0),
            line: r.get(1),
        })
        .collect())
}

/// One `count(*)` (receipts or sessions).
pub(super) async fn count(pool: Pool, sql: &'static str) -> Result<u64, StoreError> {
    let client = client(&pool).await?;
    let row = client.query_one(sql, &[]).await.map_err(pgerr)?;
    Ok(row.get::<_, i64>(0) as u64)
}

pub(super) async fn usage(pool: Pool) -> Result<StoreUsage, StoreError> {
    let client = client(&pool).await?;
    let row = client
        .query_one(
            "SELECT \
               (SELECT count(*) FROM sessions), \
               (SELECT count(*) FROM events), \
               (SELECT coalesce(sum(octet_length(event)), 0) FROM events) \
             + (SELECT coalesce(sum(octet_length(event)), 0) FROM full_events) \
             + (SELECT coalesce(sum(octet_length(meta)), 0) FROM sessions) \
             + (SELECT coalesce(sum(octet_length(receipt)), 0) FROM receipts)",
            &[],
        )
        .await
        .map_err(pgerr)?;
    // sum() of octet_length (an integer) is a bigint.
    Ok(StoreUsage {
        sessions: row.get::<_, i64>(0) as u64,
        events: row.get::<_, i64>(1) as u64,
        bytes: row.get::<_, i64>(2) as u64,
    })
}

/// The last stored seq of each of `ids`, in order, in one statement.
pub(super) async fn heads(pool: Pool, ids: Vec<String>) -> Result<Vec<u64>, StoreError> {
    let client = client(&pool).await?;
    let stmt = client
        .prepare_cached(
            "SELECT coalesce((SELECT max(seq) FROM events e WHERE e.session_id = k.id), 0) \
             FROM UNNEST($1::text[]) WITH ORDINALITY AS k(id, n) ORDER BY k.n",
        )
        .await
        .map_err(pgerr)?;
    let rows = client.query(&stmt, &[&ids]).await.map_err(pgerr)?;
    Ok(rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect())
}
