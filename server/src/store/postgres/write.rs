//! The write transactions of the PostgreSQL store: a commit (events, their
//! whole forms, metas, receipts, the conversation index and the commit
//! notice together) and a session's deletion, each ONE transaction.

use deadpool_postgres::Pool;
use prost::Message;

use super::super::{Commit, ReceiptWrite, StoreError, conversations, receipt};
use super::fence::{self, Heads};
use super::{NOTICE_CHANNEL, NOTICE_PAYLOAD_MAX, client, pgerr, seq_sql};

/// Keys and encoded values of a set of event rows, as column arrays (one
/// `INSERT … SELECT FROM UNNEST` writes them all).
#[derive(Default)]
struct Rows {
    sessions: Vec<String>,
    seqs: Vec<i64>,
    bytes: Vec<Vec<u8>>,
}

impl Rows {
    /// The rows of `events`, their values from `encoded` where given (see
    /// [`Commit::encoded`]).
    fn of(events: &[agent_harness_protocol::pb::Event], encoded: &[bytes::Bytes]) -> Self {
        let mut rows = Self::default();
        for (i, ev) in events.iter().enumerate() {
            rows.sessions.push(ev.session_id.clone());
            rows.seqs.push(seq_sql(ev.seq));
            rows.bytes.push(match encoded.get(i) {
                Some(b) => b.to_vec(),
                None => ev.encode_to_vec(),
            });
        }
        rows
    }
}

/// A [`Commit`] encoded into owned rows, so the transaction can run on the
/// store's runtime while the caller waits.
pub(super) struct Batch {
    events: Rows,
    full: Rows,
    meta_ids: Vec<String>,
    meta_rows: Vec<Vec<u8>>,
    receipts: Vec<ReceiptWrite>,
    named: (Vec<String>, Vec<String>),
    /// Transcript entries as columns: session, path, line.
    transcript: (Vec<String>, Vec<String>, Vec<String>),
    /// The sessions with new events, as the commit notice's payload.
    notice: Option<String>,
    /// Each session written and its heads, for the fence.
    heads: Heads,
    /// The index rows of the sessions written.
    index: super::index::Rows,
}

impl Batch {
    pub(super) fn of(commit: Commit<'_>) -> Self {
        let mut meta_ids = Vec::new();
        let mut meta_rows = Vec::new();
        // One row per session (the last meta given wins, as a replace would).
        for m in commit.metas.iter().rev() {
            if !meta_ids.contains(&m.session_id) {
                meta_ids.push(m.session_id.clone());
                meta_rows.push(serde_json::to_vec(m).unwrap_or_default());
            }
        }
        let mut named = (Vec::new(), Vec::new());
        for ev in commit.events.iter().chain(commit.full) {
            if let Some(id) = conversations::named(ev) {
                named.0.push(id.to_owned());
                named.1.push(ev.session_id.clone());
            }
        }
        let mut touched: Vec<&str> = commit
            .events
            .iter()
            .map(|e| e.session_id.as_str())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let notice = (!touched.is_empty()).then(|| {
            // Session ids never hold a newline (`validate::session_id`).
            let ids = touched.join("\n");
            // Too many to name: an empty notice asks listeners to re-check all.
            if ids.len() < NOTICE_PAYLOAD_MAX {
                ids
            } else {
                String::new()
            }
        });
        let mut heads = Heads::default();
        for ev in commit.events {
            match heads.sessions.iter().position(|s| *s == ev.session_id) {
                Some(i) => heads.new[i] = heads.new[i].max(seq_sql(ev.seq)),
                None => {
                    heads.sessions.push(ev.session_id.clone());
                    heads.old.push(seq_sql(ev.seq) - 1);
                    heads.new.push(seq_sql(ev.seq));
                }
            }
        }
        for m in commit.metas {
            if !heads.sessions.contains(&m.session_id) {
                heads.sessions.push(m.session_id.clone());
                heads.old.push(seq_sql(m.head_seq));
                heads.new.push(seq_sql(m.head_seq));
            }
        }
        Self {
            heads,
            index: super::index::Rows::of(commit.index),
            events: Rows::of(commit.events, commit.encoded),
            full: Rows::of(commit.full, &[]),
            meta_ids,
            meta_rows,
            receipts: commit.receipts.to_vec(),
            named,
            transcript: (
                commit
                    .transcript
                    .iter()
                    .map(|t| t.session_id.clone())
                    .collect(),
                commit.transcript.iter().map(|t| t.path.clone()).collect(),
                commit.transcript.iter().map(|t| t.line.clone()).collect(),
            ),
            notice,
        }
    }
}

/// Inserts the events of a commit. A seq already stored is refused by the
/// primary key and the whole transaction rolls back: another process
/// sharing the database may have taken it, and its event must never be
/// overwritten. The log never reuses a seq it cannot be sure is free: after
/// a commit whose outcome was unknown (the connection died around COMMIT)
/// it reads the session's head from the store again.
const INSERT_EVENTS: &str = "INSERT INTO events (session_id, seq, event) \
     SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bytea[])";
/// The whole forms of the commit's cut-down events, refused the same way.
const INSERT_FULL: &str = "INSERT INTO full_events (session_id, seq, event) \
     SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bytea[])";

pub(super) async fn commit(
    pool: Pool,
    batch: Batch,
    writer: Option<fence::Writer>,
) -> Result<(), StoreError> {
    let mut client = client(&pool).await?;
    let txn = client.transaction().await.map_err(pgerr)?;
    // First, so a stale writer is told it is fenced, not that its seqs
    // are taken.
    if let Some(writer) = &writer {
        let sessions = fence::check(&txn, writer, &batch.heads).await?;
        if !sessions.is_empty() {
            return Err(StoreError::Fenced { sessions });
        }
    }
    let ev = &batch.events;
    if !ev.seqs.is_empty() {
        let stmt = txn.prepare_cached(INSERT_EVENTS).await.map_err(pgerr)?;
        txn.execute(&stmt, &[&ev.sessions, &ev.seqs, &ev.bytes])
            .await
            .map_err(pgerr)?;
    }
    let full = &batch.full;
    if !full.seqs.is_empty() {
        let stmt = txn.prepare_cached(INSERT_FULL).await.map_err(pgerr)?;
        txn.execute(&stmt, &[&full.sessions, &full.seqs, &full.bytes])
            .await
            .map_err(pgerr)?;
    }
    if !batch.meta_ids.is_empty() {
        let stmt = txn
            .prepare_cached(
                "INSERT INTO sessions (session_id, meta) \
                 SELECT * FROM UNNEST($1::text[], $2::bytea[]) \
                 ON CONFLICT (session_id) DO UPDATE SET meta = EXCLUDED.meta",
            )
            .await
            .map_err(pgerr)?;
        txn.execute(&stmt, &[&batch.meta_ids, &batch.meta_rows])
            .await
            .map_err(pgerr)?;
    }
    if !batch.named.0.is_empty() {
        let stmt = txn
            .prepare_cached(
                "INSERT INTO conversations (resume_id, session_id) \
                 SELECT * FROM UNNEST($1::text[], $2::text[]) ON CONFLICT DO NOTHING",
            )
            .await
            .map_err(pgerr)?;
        txn.execute(&stmt, &[&batch.named.0, &batch.named.1])
            .await
            .map_err(pgerr)?;
    }
    write_receipts(&txn, &batch.receipts).await?;
    let (sessions, paths, lines) = &batch.transcript;
    if !sessions.is_empty() {
        // Numbered after the session's last stored entry, in the order given
        // (`WITH ORDINALITY`); the primary key refuses a number taken twice.
        let stmt = txn
            .prepare_cached(
                "INSERT INTO transcripts (session_id, n, path, line) \
                 SELECT t.s, coalesce((SELECT max(n) FROM transcripts WHERE session_id = t.s), 0) \
                   + row_number() OVER (PARTITION BY t.s ORDER BY t.i), t.p, t.l \
                 FROM UNNEST($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(s, p, l, i)",
            )
            .await
            .map_err(pgerr)?;
        txn.execute(&stmt, &[sessions, paths, lines])
            .await
            .map_err(pgerr)?;
    }
    super::index::put(&txn, &batch.index).await?;
    if let Some(ids) = &batch.notice {
        // Inside the transaction: PostgreSQL delivers it only if the
        // transaction commits, and only after, so a listener that reads on
        // the notice finds the events ("durable before visible").
        txn.execute("SELECT pg_notify($1, $2)", &[&NOTICE_CHANNEL, ids])
            .await
            .map_err(pgerr)?;
    }
    // An error before this drops `txn`, which rolls back: nothing lands.
    txn.commit().await.map_err(pgerr)
}

/// Applies receipt writes in order inside `txn`.
async fn write_receipts(
    txn: &deadpool_postgres::Transaction<'_>,
    writes: &[ReceiptWrite],
) -> Result<(), StoreError> {
    for w in writes {
        match w {
            ReceiptWrite::Put(r) => {
                let stmt = txn
                    .prepare_cached(
                        "INSERT INTO receipts (session_id, key, created_ms, receipt) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, key) \
                         DO UPDATE SET created_ms = EXCLUDED.created_ms, receipt = EXCLUDED.receipt",
                    )
                    .await
                    .map_err(pgerr)?;
                let bytes = receipt::encode(r);
                txn.execute(&stmt, &[&r.session_id, &r.key, &r.created_ms, &bytes])
                    .await
                    .map_err(pgerr)?;
            }
            ReceiptWrite::Remove { session_id, key } => {
                let stmt = txn
                    .prepare_cached("DELETE FROM receipts WHERE session_id = $1 AND key = $2")
                    .await
                    .map_err(pgerr)?;
                txn.execute(&stmt, &[session_id, key])
                    .await
                    .map_err(pgerr)?;
            }
        }
    }
    Ok(())
}

/// Deletes every row of `session_id` and writes `receipt`, in one
/// transaction (see [`super::super::Store::delete_session`]). Fenced as a
/// commit is: once `writer` has joined, the deletion is refused whole
/// unless its lease is live under its epoch and it owns the session under
/// that epoch, so a node paused past its lease cannot delete a session
/// another node has taken over.
pub(super) async fn delete_session(
    pool: Pool,
    session_id: String,
    receipt: Option<ReceiptWrite>,
    writer: Option<fence::Writer>,
) -> Result<bool, StoreError> {
    let mut client = client(&pool).await?;
    let txn = client.transaction().await.map_err(pgerr)?;
    let sid = &session_id;
    if let Some(writer) = &writer
        && !fence::owns(&txn, writer, sid).await?
    {
        return Err(StoreError::Fenced {
            sessions: vec![session_id],
        });
    }
    let events = txn
        .execute("DELETE FROM events WHERE session_id = $1", &[sid])
        .await
        .map_err(pgerr)?;
    for sql in [
        "DELETE FROM full_events WHERE session_id = $1",
        "DELETE FROM receipts WHERE session_id = $1",
        "DELETE FROM conversations WHERE session_id = $1",
        "DELETE FROM transcripts WHERE session_id = $1",
        "DELETE FROM owners WHERE session_id = $1",
        "DELETE FROM session_index WHERE session_id = $1",
    ] {
        txn.execute(sql, &[sid]).await.map_err(pgerr)?;
    }
    let metas = txn
        .execute("DELETE FROM sessions WHERE session_id = $1", &[sid])
        .await
        .map_err(pgerr)?;
    write_receipts(&txn, receipt.as_slice()).await?;
    txn.commit().await.map_err(pgerr)?;
    Ok(events > 0 || metas > 0)
}

/// Deletes up to `limit` receipts created before `before_ms`, oldest first.
pub(super) async fn prune_receipts(
    pool: Pool,
    before_ms: i64,
    limit: i64,
) -> Result<usize, StoreError> {
    let client = client(&pool).await?;
    let n = client
        .execute(
            "DELETE FROM receipts WHERE (session_id, key) IN \
             (SELECT session_id, key FROM receipts WHERE created_ms < $1 \
              ORDER BY created_ms, session_id, key LIMIT $2)",
            &[&before_ms, &limit],
        )
        .await
        .map_err(pgerr)?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}
